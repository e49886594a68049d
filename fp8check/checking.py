"""The check engine the quantizer, static-quantizer and fused-kernel checks share: their options
(:class:`CheckOptions`) and what a check has found so far (:class:`Tally`): counts per category, the
divergences to list (each with its sort key), the refusals of the kernel, the inputs checked.

A check is phases (edge cases, harness calls, Hypothesis draws, huge calls, ...) that add to one tally; its
result is made from the tally at the end (collect, then render).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

from fp8check.results import Divergence, Refusal

__all__ = ["CheckOptions", "Tally", "Found", "kernel_name", "note_unchecked_dtypes"]


def kernel_name(kernel: Callable[..., Any], name: str | None) -> str:
    """The name a check's result gives ``kernel``: ``name``, else the function's."""
    return name or getattr(kernel, "__name__", repr(kernel))


@dataclass(frozen=True, kw_only=True)
class CheckOptions:
    """What every check of a kernel is asked: where it runs, how it is named, how many divergences are listed,
    how far it may stray, what domain its author declares (:class:`~fp8check.casts.harness.Supports`)."""

    name: str
    device: str = "cpu"
    seed: int | None = 0
    cap: int | None = 100
    ulps: int = 0
    supports: Any = None  # a casts.harness.Supports


@dataclass
class Found:
    """A divergence to list and its sort key (the most minimal input first)."""

    key: tuple[int, int, int]
    divergence: Divergence


@dataclass
class Tally:
    """What a check has found so far."""

    counts: dict[str, int]
    found: list[Found] = field(default_factory=list)
    refusals: list[Refusal] = field(default_factory=list)
    checked: int = 0  # elements compared
    cases: int = 0  # calls compared
    dtypes: set[str] = field(default_factory=set)

    def add(self, category: str, count: int, key: tuple[int, int, int] | None = None,
            divergence: Divergence | None = None) -> None:
        """``count`` more divergences of ``category``, ``divergence`` listed under ``key`` when given."""
        self.counts[category] = self.counts.get(category, 0) + count
        if divergence is not None:
            self.found.append(Found(key or (0, 0, 0), divergence))

    def refuse(self, condition: str, error: str, *, declared: bool, input_dtype: str,
               describe: str) -> Divergence | None:
        """A call the kernel refused, and inside the domain its author declares the ``refused`` divergence it
        is (None outside it)."""
        self.refusals.append(Refusal(condition=condition, error=error, declared=declared))
        if not declared:
            return None
        return Divergence(category="refused", input_hex="-", expected_hex="-", actual_hex="-", input_dtype=input_dtype,
                          detail=error, condition=f"inside the declared domain: {describe}")

    @property
    def passed(self) -> bool:
        return not any(self.counts.values())

    def listed(self, cap: int | None, categories: Sequence[str]) -> list[Divergence]:
        """The divergences to list: the most minimal first, at most ``cap`` (None: all), but every category of
        ``categories`` that diverged represented."""
        found = sorted(self.found, key=lambda f: f.key)
        limit = len(found) if cap is None else max(0, cap)
        quota = limit // len(categories)
        by_cat = {c: [f for f in found if f.divergence.category == c] for c in categories}
        chosen = [f for c in categories for f in by_cat[c][:quota]]
        chosen_ids = {id(f) for f in chosen}
        rest = [f for f in found if id(f) not in chosen_ids]
        return [f.divergence for f in sorted(chosen + rest[: max(0, limit - len(chosen))], key=lambda f: f.key)]


def note_unchecked_dtypes(result: Any, unchecked: dict[str, str]) -> None:
    """Record in ``result`` the input dtypes the kernel takes (or was tried on) that its check did not cover,
    each with why: the verdict line names them (a conforming verdict covers only what was checked)."""
    if unchecked:
        result.extra.setdefault("unchecked_input_dtypes", {}).update(unchecked)
