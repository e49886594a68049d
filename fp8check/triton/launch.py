"""Autotuned kernels in the interpreter: every config run, one at a time.

Triton's ``Autotuner.run`` benchmarks its configs through the GPU driver
(``driver.active.get_benchmarker()``), which a CPU does not have ("0 active
drivers ([]). There should only be one."). While
:func:`fp8check.triton.interpreting` is active, ``Autotuner.run`` is
replaced by a run that benchmarks nothing and launches the config the
current :func:`pinned` block asks for:

- run ``i`` of :func:`each_config` launches config ``i`` of the kernel's
  own list wherever that config survives the kernel's ``prune_configs_by``
  (``early_config_prune``, ``perf_model``/``top_k``, called with each
  call's arguments as Triton calls them); where pruning removed it for a
  call, the first config left runs, and the label says so;
- what Triton does around the chosen config is done too, as often as Triton
  does it: the first call of each tuning ``key`` (Triton's cache key: the
  ``key`` arguments' values and every tensor argument's dtype) with more
  than one config left after pruning resets the ``reset_to_zero``
  arguments (or calls a user ``pre_hook`` with ``reset_only=True``), as
  Triton does after benchmarking; later calls with that key do not (a
  launcher that relies on ``reset_to_zero`` for every call is wrong on a
  GPU too). The config's own ``pre_hook`` runs before every launch;
- ``@triton.heuristics`` and a plain ``@triton.jit`` below or above the
  autotuner run as Triton runs them (their ``run`` is Triton's own).

:func:`each_config` runs a whole check once per config (each config is a
different kernel, and a bug can live in one) and labels each run.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass, field
from typing import Any, Callable, Iterator, TypeVar

from fp8check.patching import LOCK, PatchScope
from fp8check.triton.layer import Layer

__all__ = ["pinned", "each_config", "current_config", "config_label", "ConfigPin"]

T = TypeVar("T")
_LOCK = LOCK


@dataclass
class ConfigPin:
    """Which config autotuned kernels launch inside a :func:`pinned` block, and what they launched."""

    index: int = 0
    counts: dict[str, int] = field(default_factory=dict)  # kernel -> configs it declares
    chosen: dict[str, str] = field(default_factory=dict)  # kernel -> the label of config ``index``
    fallbacks: dict[str, dict[str, int]] = field(default_factory=dict)  # kernel -> {label that ran: calls}
    tuned: set[tuple[int, Any]] = field(default_factory=set)  # (autotuner id, key) tuned in this block

    @property
    def label(self) -> str:
        """The configs launched, as one label ('' where no autotuned kernel ran)."""
        parts = []
        for kernel, label in self.chosen.items():
            text = label
            falls = self.fallbacks.get(kernel)
            if falls:
                ran = ", ".join(f"{lab} in {n:,} call{'s' if n != 1 else ''}" for lab, n in falls.items())
                text += f" (pruned away for some calls; ran {ran})"
            parts.append(text if len(self.chosen) == 1 else f"{kernel}: {text}")
        return "; ".join(parts)

    @property
    def configs(self) -> int:
        return max(self.counts.values(), default=1)


_PINS: list[ConfigPin] = []
_TUNED: set[tuple[int, Any]] = set()  # what was tuned outside any pinned block (until the layer is removed)
_CURRENT: list[str] = []  # the config label of the launch under way


def current_config() -> str:
    """The label of the autotune config being launched now ('' outside an autotuned launch)."""
    return _CURRENT[-1] if _CURRENT else ""


@contextlib.contextmanager
def pinned(index: int = 0) -> Iterator[ConfigPin]:
    """Inside the block, autotuned kernels launch config ``index`` of their list (see the module docstring)."""
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
    (one entry, label '', when it launches none). With several autotuned kernels of different config
    counts, run ``i`` launches config ``i`` of each that has one (its last config otherwise)."""
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
    """``BLOCK=128, num_warps=8`` (the config's keyword arguments, then what differs from Triton's defaults)."""
    parts = [f"{k}={v}" for k, v in getattr(config, "kwargs", {}).items()]
    for name, default in (("num_warps", 4), ("num_stages", 3), ("num_ctas", 1), ("maxnreg", None)):
        value = getattr(config, name, default)
        if value != default:
            parts.append(f"{name}={value}")
    return ", ".join(parts) or "default"


def _tuning_key(self: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> tuple[Any, ...]:
    """Triton's cache key of ``Autotuner.run`` for these arguments."""
    all_args = {**dict(zip(self.arg_names, args)), **kwargs}
    named = {k: v for k, v in all_args.items() if k in self.arg_names}
    key = [named[k] for k in self.keys if k in named]
    key += [str(v.dtype) for v in named.values() if hasattr(v, "dtype")]
    return tuple(key)


def _autotuned_run(self: Any, *args: Any, **kwargs: Any) -> Any:
    """``Autotuner.run`` in the interpreter: the pinned config, benchmarking nothing."""
    self.nargs = dict(zip(self.arg_names, args))
    pin = _PINS[-1] if _PINS else None
    name = getattr(self.base_fn, "__name__", "kernel")
    index = min(pin.index, len(self.configs) - 1) if pin is not None else 0
    wanted = self.configs[index]
    configs = list(self.prune_configs(kwargs)) if len(self.configs) > 1 else list(self.configs)
    config = wanted if wanted in configs else configs[0]
    label = config_label(config)
    if pin is not None:
        pin.counts[name] = max(pin.counts.get(name, 1), len(self.configs))
        pin.chosen.setdefault(name, config_label(wanted))
        if config is not wanted:
            falls = pin.fallbacks.setdefault(name, {})
            falls[label] = falls.get(label, 0) + 1
    full = {**self.nargs, **kwargs, **config.all_kwargs()}
    if len(configs) > 1:
        key = (id(self), _tuning_key(self, args, kwargs))
        tuned = pin.tuned if pin is not None else _TUNED
        if key not in tuned:  # what Triton does once per key, after benchmarking
            tuned.add(key)
            self.pre_hook(full, reset_only=True)
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


class _AutotunedLaunch(Layer):
    """``Autotuner.run`` replaced by :func:`_autotuned_run` while interpreter mode is on."""

    name = "autotuned launch"
    triton_versions = ("3.6.0", "3.8.0", "3.9.0")

    def install(self, scope: PatchScope, interp: Any) -> None:
        from triton.runtime.autotuner import Autotuner

        scope.set(Autotuner, "run", _autotuned_run)

    def remove(self, scope: PatchScope) -> None:
        _TUNED.clear()
        scope.restore()


LAYER = _AutotunedLaunch()
