"""Faults of the kernel under test on a CUDA device: findings, never the end of a check (DESIGN.md rule 15).

A compiled kernel that reads or writes outside every allocation, executes a failing device-side assert,
a misaligned access or an illegal instruction does not raise where it is called: the launch is
asynchronous, and the error (``torch.AcceleratorError: CUDA error: an illegal memory access was
encountered``) surfaces at the next operation that waits for the device, often an innocent one. After it
the process's CUDA context is unusable: every later CUDA call raises the same error.

So every call of a kernel under test on a CUDA device is followed, inside the guard that makes a raise a
refusal, by :func:`settle` (a device synchronisation): the fault is raised by the call that caused it.
:func:`fault_of` tells a fault from a refusal: a CUDA error after which the device no longer works (the
errors CUDA documents as leaving the context unusable, or any CUDA error after which a synchronisation
still fails) is a :class:`DeviceFault`; anything else the kernel raises (an invalid launch
configuration, out of memory, a cuBLAS status) is a refusal, as before. The check that meets a fault ends
there with a failed result: what it checked before, and the fault as a divergence of its own (see
:data:`CUDA_FAULTS` for the category of each error), with the call that caused it as its condition.

This process's CUDA context being lost, :func:`lost` returns the fault, and a later check on a CUDA device
raises :class:`DeviceLostError` (the pytest plugin skips the remaining GPU tests of the session with that
reason) unless it runs in a child process (``isolate = true``), which has a context of its own.
"""

from __future__ import annotations

import re
import sys
from dataclasses import asdict, dataclass
from typing import Any

from fp8check.errors import FP8CheckError, KernelCallError

__all__ = ["DeviceFault", "DeviceFaultError", "DeviceLostError", "CUDA_FAULTS", "settle", "fault_of", "check_call",
           "lost", "require_usable", "forget"]

# The CUDA errors after which a context is unusable (the CUDA runtime API's cudaError_t: "the process is left in
# an inconsistent state and any further CUDA work will return the same error"), by the text torch and Triton's
# launcher print for them (cudaGetErrorString / cuGetErrorString) and their names, with the category of the
# finding. An access to no allocation is the sanitizer's out_of_bounds (what compute-sanitizer's memcheck and
# fp8check's memory-safe interpreter report for the same kernel); a failing device assert its device_assert;
# every other fault ends the process's use of the device as a crash ends a child process: crashed.
CUDA_FAULTS: tuple[tuple[str, str, str], ...] = (
    # (what the message says, the error's name, category)
    ("illegal memory access", "cudaErrorIllegalAddress", "out_of_bounds"),
    ("illegal_address", "cudaErrorIllegalAddress", "out_of_bounds"),
    ("device-side assert", "cudaErrorAssert", "device_assert"),
    ("cuda_error_assert", "cudaErrorAssert", "device_assert"),
    ("misaligned address", "cudaErrorMisalignedAddress", "crashed"),
    ("misaligned_address", "cudaErrorMisalignedAddress", "crashed"),
    ("unspecified launch failure", "cudaErrorLaunchFailure", "crashed"),
    ("launch_failed", "cudaErrorLaunchFailure", "crashed"),
    ("illegal instruction", "cudaErrorIllegalInstruction", "crashed"),
    ("illegal_instruction", "cudaErrorIllegalInstruction", "crashed"),
    ("launch timed out", "cudaErrorLaunchTimeout", "crashed"),
    ("launch_timeout", "cudaErrorLaunchTimeout", "crashed"),
    ("invalid program counter", "cudaErrorInvalidPc", "crashed"),
    ("hardware stack error", "cudaErrorHardwareStackError", "crashed"),
)
# A message that comes from the CUDA (or HIP) runtime or driver at all.
_CUDA_ERROR = re.compile(r"\b(CUDA|HIP) error\b|Triton Error \[(CUDA|HIP)\]|\bCUDA_ERROR_\w+|\bcudaError\w+|"
                         r"\bhipError\w+", re.IGNORECASE)

_LOST: list[DeviceFault] = []  # the fault that made this process's CUDA context unusable (at most one)


@dataclass(frozen=True)
class DeviceFault:
    """A fault of the kernel under test on a device: the category of the finding, the error (one line), its
    CUDA name where known, the call that caused it (its condition, in words), the kernel and the device."""

    category: str
    error: str
    name: str = ""
    call: str = ""
    kernel: str = ""
    device: str = "cuda"

    @property
    def detail(self) -> str:
        what = self.error + (f" ({self.name})" if self.name and self.name not in self.error else "")
        where = f" in its call on {self.call}" if self.call else ""
        return (f"the kernel faulted on the device{where}: {what}; the process's CUDA context is unusable after "
                f"it, so the check ended at this call (later GPU checks in the process are skipped)")

    def to_dict(self) -> dict[str, Any]:
        return dict(asdict(self), detail=self.detail)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> DeviceFault:
        return cls(**{k: str(v) for k, v in data.items() if k in cls.__dataclass_fields__})

    def divergence(self, input_dtype: str = "float32") -> Any:
        from fp8check.results import Divergence

        return Divergence(category=self.category, input_hex="-", expected_hex="-", actual_hex="-",
                          input_dtype=input_dtype, detail=self.detail, condition=self.call)

    def apply(self, result: Any) -> Any:
        """``result`` failed by this fault: its divergence listed first, counted once in its category,
        ``extra["device_fault"]`` and a note. Returns ``result``."""
        result.categories[self.category] = result.categories.get(self.category, 0) + 1
        result.divergences.insert(0, self.divergence(result.input_dtype.split(",")[0] or "float32"))
        result.passed = False
        result.extra["device_fault"] = self.to_dict()
        result.add_note(f"the kernel faulted on {self.device} ({self.error}): only the calls before the fault were "
                        "checked; the CUDA context of the process that ran it is unusable after it")
        return result


class DeviceFaultError(KernelCallError):
    """Raised by a guarded kernel call that faulted on the device: the check catches it and ends with
    ``fault`` as its finding (outside a check: one line, as any kernel error)."""

    def __init__(self, fault: DeviceFault) -> None:
        super().__init__(f"{fault.kernel or 'the kernel'}: {fault.detail}")
        self.fault = fault


class DeviceLostError(FP8CheckError, RuntimeError):
    """A check on a CUDA device asked for after this process's CUDA context was lost to a kernel's fault."""


def _is_cuda(device: Any) -> bool:
    return str(device).startswith("cuda")


def settle(device: Any) -> None:
    """Wait for everything launched on ``device`` (a CUDA device; nothing elsewhere), so that a fault of the
    kernel just called is raised here, by its own call, not by the next operation."""
    if not _is_cuda(device):
        return
    torch = sys.modules.get("torch")
    if torch is None or not torch.cuda.is_initialized():
        return
    torch.cuda.synchronize(device)


def _messages(exc: BaseException) -> list[tuple[BaseException, str]]:
    """``exc`` and the exceptions it was raised from (a kernel error wraps the CUDA error), with their text."""
    out, seen = [], set()
    e: BaseException | None = exc
    while e is not None and id(e) not in seen:
        seen.add(id(e))
        out.append((e, str(e)))
        e = e.__cause__ or e.__context__
    return out


def _first_line(text: str) -> str:
    lines = [ln.strip() for ln in text.strip().splitlines() if ln.strip()]
    return lines[0] if lines else ""


def _context_lost(device: Any) -> bool:
    """Whether the CUDA context of ``device`` no longer works (a synchronisation raises)."""
    torch = sys.modules.get("torch")
    if torch is None or not _is_cuda(device) or not torch.cuda.is_available():
        return False
    try:
        torch.cuda.synchronize(device)
    except Exception:
        return True
    return False


def fault_of(exc: BaseException, *, device: Any = "cuda", call: str = "", kernel: str = "") -> DeviceFault | None:
    """The :class:`DeviceFault` ``exc`` is (None: a refusal, or no CUDA error at all).

    A fault: an exception (or one it was raised from) that is a ``torch.AcceleratorError`` or whose message
    is a CUDA error, when that error is one :data:`CUDA_FAULTS` names or the device fails a synchronisation
    after it. The first fault of a process is kept as the reason its CUDA context is lost (:func:`lost`)."""
    if isinstance(exc, DeviceFaultError):
        return exc.fault
    chain = _messages(exc)
    cuda = [(e, text) for e, text in chain if type(e).__name__ == "AcceleratorError" or _CUDA_ERROR.search(text)]
    if not cuda:
        return None
    error = _first_line(cuda[-1][1]) or type(cuda[-1][0]).__name__  # the innermost: the runtime's own words
    found = _classify(" ".join(text for _, text in cuda).lower())
    if found is None:
        if not _context_lost(device):
            return None  # a CUDA error the device survived (a launch it refused): the kernel refused the call
        found = ("", "crashed")
    name, category = found
    fault = DeviceFault(category=category, error=error, name=name, call=call, kernel=kernel,
                        device=str(device) if _is_cuda(device) else "cuda")
    if not _LOST:
        _LOST.append(fault)
    return fault


def _classify(text: str) -> tuple[str, str] | None:
    for needle, name, category in CUDA_FAULTS:
        if needle in text:
            return name, category
    return None


def check_call(exc: BaseException, *, device: Any, call: str = "", kernel: str = "") -> None:
    """Raise :class:`DeviceFaultError` when ``exc`` (raised by a call of the kernel under test, or by the
    :func:`settle` after it) is a fault of the device; return when it is a refusal."""
    fault = fault_of(exc, device=device, call=call, kernel=kernel)
    if fault is not None:
        raise DeviceFaultError(fault) from None


def lost() -> DeviceFault | None:
    """The fault that made this process's CUDA context unusable (None while it works)."""
    return _LOST[0] if _LOST else None


def lost_reason() -> str:
    """Why a check on a CUDA device is not made in this process ("" while its CUDA context works)."""
    f = lost()
    if f is None:
        return ""
    where = f" in its call on {f.call}" if f.call else ""
    return (f"this process's CUDA context was lost to a fault of {f.kernel or 'a kernel under test'}{where} "
            f"({f.error}): no GPU check can run in it after that (isolate = true checks a kernel in a child "
            "process, with a context of its own)")


def require_usable(device: Any, what: str) -> None:
    """Raise :class:`DeviceLostError` when ``what`` would run on a CUDA device this process has lost."""
    if _is_cuda(device) and _LOST:
        raise DeviceLostError(f"{what}: not checked: {lost_reason()}")


def forget() -> None:
    """Forget a recorded fault (tests that plant one on the CPU, where no context was lost)."""
    _LOST.clear()
