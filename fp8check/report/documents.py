"""Reading the JSON files a report renders: results (many checks or one) and audits.

Every problem with an input file is an :class:`~fp8check.errors.InvalidValueError`
naming the file and what is wrong, so that ``fp8check report`` can print
one line and exit 2.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Sequence

from fp8check.errors import InvalidValueError
from fp8check.report.views import Source
from fp8check.results import CheckResult, InputMap16

__all__ = ["load_source", "load_sources", "source_from_results", "source_from_audit", "source_from_gate"]

_REQUIRED = ("kernel", "format", "profile", "passed", "checked")


def _check(path: str, i: int | None, data: Any) -> CheckResult:
    where = f"{path}: check {i}" if i is not None else path
    if not isinstance(data, dict):
        raise InvalidValueError(f"{where}: not fp8check results (a check must be an object)")
    missing = [k for k in _REQUIRED if k not in data]
    if missing:
        raise InvalidValueError(f"{where}: not fp8check results (missing {', '.join(missing)})")
    if not isinstance(data.get("categories", {}), dict) or not isinstance(data.get("divergences", []), list) \
            or not isinstance(data.get("extra", {}), dict):
        raise InvalidValueError(f"{where}: not fp8check results (categories, divergences or extra of the wrong type)")
    try:
        result = CheckResult.from_dict(data)
        for k, v in result.categories.items():
            int(v)
        if isinstance(result.extra.get("map16"), dict):
            InputMap16.from_dict(result.extra["map16"])
    except InvalidValueError as exc:
        raise InvalidValueError(f"{where}: {exc}") from None
    except (TypeError, ValueError) as exc:
        raise InvalidValueError(f"{where}: not fp8check results ({exc})") from None
    return result


def source_from_results(name: str, doc: dict[str, Any]) -> Source:
    """A results document (``{"checks": [...]}`` or one check) as a :class:`Source`."""
    env = doc.get("environment", {})
    if not isinstance(env, dict):
        env = {}
    if "checks" in doc:
        if not isinstance(doc["checks"], list):
            raise InvalidValueError(f"{name}: not fp8check results ('checks' is not a list)")
        checks = [_check(name, i, c) for i, c in enumerate(doc["checks"])]
    else:
        checks = [_check(name, None, {k: v for k, v in doc.items() if k != "environment"})]
    return Source(name=name, environment=env, checks=checks)


def source_from_audit(name: str, doc: dict[str, Any]) -> Source:
    """An audit document (``fp8check audit --json``) as a :class:`Source`."""
    if not isinstance(doc.get("tensors"), list) or not isinstance(doc.get("summary"), dict):
        raise InvalidValueError(f"{name}: not an fp8check audit ('tensors' or 'summary' missing)")
    env = doc.get("environment", {})
    return Source(name=name, environment=env if isinstance(env, dict) else {}, checks=[], kind="audit", data=doc)


def source_from_gate(name: str, doc: dict[str, Any]) -> Source:
    """A gate document (``fp8check gate --json``) as a :class:`Source`."""
    if not isinstance(doc.get("gates"), list) or not all(isinstance(g, dict) for g in doc["gates"]):
        raise InvalidValueError(f"{name}: not an fp8check gate report ('gates' is not a list of gates)")
    return Source(name=name, environment={}, checks=[], kind="gate", data=doc)


def load_source(path: str | Path) -> Source:
    name = str(path)
    try:
        text = Path(path).read_text(encoding="utf-8")
    except IsADirectoryError:
        raise InvalidValueError(f"{name}: is a directory, not a results JSON file") from None
    except OSError as exc:
        raise InvalidValueError(f"{name}: cannot read: {exc.strerror or exc}") from None
    except UnicodeDecodeError:
        raise InvalidValueError(f"{name}: not JSON (not UTF-8 text)") from None
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as exc:
        raise InvalidValueError(f"{name}: not JSON ({exc.msg} at line {exc.lineno} column {exc.colno})") from None
    except RecursionError:
        raise InvalidValueError(f"{name}: not JSON (nested too deeply)") from None
    if isinstance(doc, dict) and "fp8check_audit" in doc:
        return source_from_audit(name, doc)
    if isinstance(doc, dict) and doc.get("kind") == "gate":  # before "kernel": a gate report names its kernel too
        return source_from_gate(name, doc)
    if isinstance(doc, dict) and ("checks" in doc or "kernel" in doc):
        return source_from_results(name, doc)
    raise InvalidValueError(
        f"{name}: not fp8check results, an audit or a gate report (no 'checks', 'kernel', 'fp8check_audit' or "
        "'kind': 'gate' key)")


def load_sources(paths: Sequence[str | Path]) -> list[Source]:
    return [load_source(p) for p in paths]
