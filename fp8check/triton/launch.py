"""Autotuned kernels in the interpreter: every config run, one at a time.

Triton's ``Autotuner.run`` benchmarks its configs through the GPU driver
(``driver.active.get_benchmarker()``), which a CPU does not have ("0 active
drivers ([]). There should only be one."). While
:func:`fp8check.triton.interpreting` is active, ``Autotuner.run`` is
replaced by a run that benchmarks nothing and launches the config the
current :func:`pinned` block asks for:

- the configs are the kernel's own, after its ``prune_configs_by``
  (``early_config_prune``, ``perf_model``/``top_k``), pruned for each
  call's arguments as Triton prunes them (so ``key`` decides, as in Triton,
  which arguments a pruning function sees); the run for index ``i`` launches
  config ``i`` of that list (``i`` modulo its length);
- what Triton does around the chosen config is done too: ``reset_to_zero``
  arguments are zeroed after a tuning, the config's ``pre_hook`` runs;
- ``@triton.heuristics`` and a plain ``@triton.jit`` below the autotuner run
  as Triton runs them.

:func:`each_config` runs a whole check once per config (each config is a
different kernel, and a bug can live in one) and labels each run.
"""

from __future__ import annotations

import contextlib
import threading
from dataclasses import dataclass, field
from typing import Any, Callable, Iterator, TypeVar

__all__ = ["pinned", "each_config", "current_config", "ConfigPin"]

T = TypeVar("T")
_LOCK = threading.RLock()


@dataclass
class ConfigPin:
    """Which config autotuned kernels launch inside a :func:`pinned` block, and what they had."""

    index: int = 0
    counts: dict[str, int] = field(default_factory=dict)  # kernel -> configs after pruning (the most seen)
    used: dict[str, list[str]] = field(default_factory=dict)  # kernel -> labels of the configs launched

    @property
    def label(self) -> str:
        """The configs launched, as one label ('' where no autotuned kernel ran)."""
        parts = []
        for kernel, labels in self.used.items():
            text = " | ".join(dict.fromkeys(labels))
            parts.append(text if len(self.used) == 1 else f"{kernel}: {text}")
        return "; ".join(parts)

    @property
    def configs(self) -> int:
        return max(self.counts.values(), default=1)


_PINS: list[ConfigPin] = []
_CURRENT: list[str] = []  # the config label of the launch under way


def current_config() -> str:
    """The label of the autotune config being launched now ('' outside an autotuned launch)."""
    return _CURRENT[-1] if _CURRENT else ""


@contextlib.contextmanager
def pinned(index: int = 0) -> Iterator[ConfigPin]:
    pin = ConfigPin(index=index)
    with _LOCK:
        _PINS.append(pin)
    try:
        yield pin
    finally:
        with _LOCK:
            _PINS.remove(pin)


def each_config(run: Callable[[], T]) -> list[tuple[str, T]]:
    """``run()`` once per config of the autotuned kernels it launches: ``[(config label, result), ...]``
    (one entry, label '', when it launches none)."""
    results = []
    with pinned(0) as first:
        result = run()
    results.append((first.label, result))
    for i in range(1, first.configs):
        with pinned(i) as pin:
            result = run()
        results.append((pin.label, result))
    return results


def config_label(config: Any) -> str:
    """``BLOCK=128, num_warps=4`` (the config's keyword arguments, then what differs from Triton's defaults)."""
    parts = [f"{k}={v}" for k, v in getattr(config, "kwargs", {}).items()]
    for name, default in (("num_warps", 4), ("num_stages", 3), ("num_ctas", 1)):
        value = getattr(config, name, default)
        if value != default:
            parts.append(f"{name}={value}")
    return ", ".join(parts) or "default"


def _autotuned_run(self: Any, *args: Any, **kwargs: Any) -> Any:
    """``Autotuner.run`` in the interpreter: the pinned config, benchmarking nothing."""
    self.nargs = dict(zip(self.arg_names, args))
    configs = list(self.prune_configs(kwargs)) if len(self.configs) > 1 else list(self.configs)
    pin = _PINS[-1] if _PINS else None
    index = pin.index if pin is not None else 0
    config = configs[index % len(configs)]
    name = getattr(self.base_fn, "__name__", "kernel")
    label = config_label(config)
    if pin is not None:
        pin.counts[name] = max(pin.counts.get(name, 1), len(configs))
        pin.used.setdefault(name, []).append(label)
    full = {**self.nargs, **kwargs, **config.all_kwargs()}
    if len(configs) > 1:
        self.pre_hook(full, reset_only=True)  # what Triton does after a tuning, before the chosen run
    self.best_config = config
    if config.pre_hook is not None:
        config.pre_hook(full)
    with _LOCK:
        _CURRENT.append(label)
    try:
        return self.fn.run(*args, **kwargs, **config.all_kwargs())
    finally:
        with _LOCK:
            _CURRENT.pop()
        self.nargs = None


_SAVED: list[tuple[object, str, object]] = []


def install() -> None:
    from triton.runtime.autotuner import Autotuner

    from fp8check.triton import _patching as faithful

    faithful._set(_SAVED, Autotuner, "run", _autotuned_run)


def uninstall() -> None:
    from fp8check.triton import _patching as faithful

    faithful._restore(_SAVED)
