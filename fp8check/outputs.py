"""Where results go: the one JSON writer and the check of output paths.

Every command that writes a file checks its path with
:func:`check_writable` before any work starts (a typo in ``--json`` must
not cost a long audit), and writes through :func:`write_json` or
:func:`atomic_path`, so that a failed or interrupted write never leaves a
partial file under the final name.
"""

from __future__ import annotations

import contextlib
import errno
import json
import math
import os
import secrets
import stat
import sys
from pathlib import Path
from typing import IO, Any, Iterable, Iterator

from fp8check.errors import InvalidValueError

__all__ = ["check_writable", "atomic_path", "new_beside", "write_json", "write_text", "JsonStream", "json_ready", "json_line",
           "json_float"]


def check_writable(path: str | os.PathLike[str] | None, option: str) -> None:
    """Raise :class:`InvalidValueError` (one line naming ``option``) unless ``path`` can be written.

    The parent directory must exist and be writable; an existing ``path``
    must be a regular file (never a directory, FIFO or device). Nothing is
    created.
    """
    if path is None or str(path) == "-":  # "-" is stdout
        return
    p = Path(path)
    parent = p.parent if str(p.parent) else Path(".")
    if not parent.is_dir():
        raise InvalidValueError(f"{option} {path}: cannot write: no directory {parent}")
    if not os.access(parent, os.W_OK | os.X_OK):
        raise InvalidValueError(f"{option} {path}: cannot write: directory {parent} is not writable")
    try:
        st = p.stat()
    except FileNotFoundError:
        return
    except OSError as exc:
        raise InvalidValueError(f"{option} {path}: cannot write: {exc.strerror or exc}") from None
    if not stat.S_ISREG(st.st_mode):
        raise InvalidValueError(f"{option} {path}: cannot write: not a regular file")
    if not os.access(p, os.W_OK):
        raise InvalidValueError(f"{option} {path}: cannot write: permission denied")


@contextlib.contextmanager
def atomic_path(path: str | os.PathLike[str], option: str) -> Iterator[Path]:
    """A temporary path beside ``path``; renamed onto ``path`` when the block ends without error.

    On any error the temporary file is removed and ``path`` is untouched.
    """
    target = Path(path)
    try:
        tmp_path = new_beside(target)
    except OSError as exc:
        raise InvalidValueError(f"{option} {path}: cannot write: {exc.strerror or exc}") from None
    try:
        yield tmp_path
        with contextlib.suppress(FileNotFoundError):  # a file replaced keeps its mode, as open(path, "w") keeps it
            os.chmod(tmp_path, stat.S_IMODE(target.stat().st_mode))
        os.replace(tmp_path, target)
    except OSError as exc:
        tmp_path.unlink(missing_ok=True)
        raise InvalidValueError(f"{option} {path}: cannot write: {exc.strerror or exc}") from None
    except BaseException:
        tmp_path.unlink(missing_ok=True)
        raise


def new_beside(target: str | os.PathLike[str], *, directory: bool = False) -> Path:
    """A new, empty file (or directory) beside ``target``, named after it, for a write renamed onto it.

    It gets the mode any new file or directory gets (0666 or 0777 less the umask: the OS applies the
    umask, which is never read or set here), not tempfile's 0600 and 0700: a report or converted
    checkpoint is as readable as a file the user writes any other way."""
    target = Path(target)
    parent = target.parent if str(target.parent) else Path(".")
    for _ in range(100):
        candidate = parent / f".{target.name}.{secrets.token_hex(4)}.part"
        try:
            if directory:
                os.mkdir(candidate, 0o777)
            else:
                os.close(os.open(candidate, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_BINARY", 0),
                                 0o666))
        except FileExistsError:
            continue
        return candidate
    raise FileExistsError(errno.EEXIST, "no free temporary name", str(target))


def write_text(path: str | os.PathLike[str], text: str, option: str) -> int:
    """Write ``text`` (UTF-8) to ``path`` atomically; the number of bytes written."""
    data = text.encode("utf-8")
    with atomic_path(path, option) as tmp:
        tmp.write_bytes(data)
    return len(data)


class JsonStream:
    """A JSON array written element by element by :func:`write_json`.

    ``items`` is iterated once, while the file is written; each item is
    dumped on its own line, compactly, and dropped (``encoded``: each item is
    already that line, from :func:`json_line`). A report of any number of
    tensors is written without holding its text, or its rows, in memory.
    """

    def __init__(self, items: Iterable[Any], *, encoded: bool = False) -> None:
        self.items = items
        self.encoded = encoded


def json_ready(obj: Any) -> Any:
    """``obj`` with non-finite floats as the strings "nan", "inf", "-inf" and tuples as lists: strict JSON."""
    if isinstance(obj, float):
        if math.isfinite(obj):
            return obj
        return "nan" if math.isnan(obj) else ("inf" if obj > 0 else "-inf")
    if isinstance(obj, dict):
        return {str(k): json_ready(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [json_ready(v) for v in obj]
    return obj


def json_float(value: Any) -> float | None:
    """A float field read back from :func:`json_ready`'s form ("nan", "inf", "-inf" are strings there)."""
    if value is None:
        return None
    return float(value)


# One encoder for every line: built once, and without the cycle check (results are trees), a row
# of an audit is encoded in three quarters of the time of json.dumps.
_LINE_ENCODER = json.JSONEncoder(separators=(",", ":"), allow_nan=False, check_circular=False)


def json_line(obj: Any) -> str:
    """``obj`` as one compact line of strict JSON (non-finite floats as :func:`json_ready` writes them)."""
    try:
        return _LINE_ENCODER.encode(obj)
    except ValueError:  # a NaN or Inf float: as the strings "nan", "inf", "-inf"
        return _LINE_ENCODER.encode(json_ready(obj))


def _dump(f: IO[str], data: Any) -> None:
    if not (isinstance(data, dict) and any(isinstance(v, JsonStream) for v in data.values())):
        f.write(json.dumps(data, indent=1, allow_nan=False) + "\n")
        return
    f.write("{")
    for i, (key, value) in enumerate(data.items()):
        f.write(("\n " if i == 0 else ",\n ") + json.dumps(str(key)) + ": ")
        if isinstance(value, JsonStream):
            f.write("[")
            for j, item in enumerate(value.items):
                f.write(("\n  " if j == 0 else ",\n  ") + (item if value.encoded else json_line(item)))
            f.write("\n ]")
        else:
            f.write(json.dumps(value, indent=1, allow_nan=False).replace("\n", "\n "))
    f.write("\n}\n")


def write_json(path: str | os.PathLike[str], data: Any, option: str = "--json") -> int:
    """Write ``data`` as indented JSON (strict: no NaN/Inf literals) to ``path`` atomically; ``-`` is stdout.

    A top-level value that is a :class:`JsonStream` is written element by
    element (one compact line each). Returns the number of bytes written.
    """
    try:
        if str(path) == "-":
            _dump(sys.stdout, data)
            sys.stdout.flush()
            return 0
        with atomic_path(path, option) as tmp:
            with open(tmp, "w", encoding="utf-8") as f:
                _dump(f, data)
            size = tmp.stat().st_size
        return size
    except InvalidValueError:
        raise
    except ValueError as exc:  # a NaN or Inf float reached the results: a bug, said in one line
        raise InvalidValueError(f"{option} {path}: cannot write: {exc}") from None
