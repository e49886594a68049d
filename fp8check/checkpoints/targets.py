"""Targets (a format or a device family), exact fn <-> fnuz conversion plans, verdicts.

A conversion between an OCP format and its fnuz counterpart of the same
widths (e4m3fn <-> e4m3fnuz, e5m2 <-> e5m2fnuz) maps every code through a
256-entry table and multiplies the scale by a factor f: a code of value v
becomes the code of value v / f, so value x scale is unchanged. The same
bits read as fnuz are worth half their fn value, so fn -> fnuz with f = 2 is
the byte reinterpretation serving stacks do (0x80 -> 0x00 because fnuz has
no -0, and the fn NaNs 0x7F/0xFF -> 0x80, the fnuz NaN, where a naive
reinterpretation leaves finite ±240). A conversion is exact for a tensor
when every code it holds maps to exactly v / f (NaN to NaN; -0 to +0 where
the target has no -0) and every scale element times f is exact in the
scale's own dtype. Unscaled data can only use f = 1.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

import numpy as np

from fp8check import formats
from fp8check.checkpoints.findings import Finding, breaks
from fp8check.checkpoints.stats import code_values
from fp8check.errors import InvalidValueError
from fp8check.formats import Format
from fp8check.outputs import json_float
from fp8check import reference

RUNS_AS_IS = "runs_as_is"  # natively: the target's matmul executes this format and scaling
AFTER_CONVERSION = "runs_after_conversion"
EMULATED = "runs_emulated"  # no matmul of this kind: a loader must dequantize (or apply block scales itself)
# an error finding whose defect breaks this target's loaders (NaN/Inf/zero/garbage values): whatever the formats allow
LOADS_WRONG = "does_not_load_correctly"
CANNOT_RUN = "cannot_run"
UNKNOWN = "unknown"  # something was not read: no verdict can be given
VERDICT_RANK = {RUNS_AS_IS: 0, AFTER_CONVERSION: 1, EMULATED: 2, LOADS_WRONG: 3, CANNOT_RUN: 4, UNKNOWN: 5}

COUNTERPART: dict[Format, Format] = {
    formats.E4M3FN: formats.E4M3FNUZ, formats.E4M3FNUZ: formats.E4M3FN,
    formats.E5M2: formats.E5M2FNUZ, formats.E5M2FNUZ: formats.E5M2,
}
# Scale factor of the reinterpretation: the same bits are worth 1/2 in fnuz.
NATURAL_FACTOR: dict[tuple[Format, Format], float] = {
    (formats.E4M3FN, formats.E4M3FNUZ): 2.0, (formats.E5M2, formats.E5M2FNUZ): 2.0,
    (formats.E4M3FNUZ, formats.E4M3FN): 0.5, (formats.E5M2FNUZ, formats.E5M2): 0.5,
}
FNUZ = (formats.E4M3FNUZ, formats.E5M2FNUZ)
OCP = (formats.E4M3FN, formats.E5M2)
FP8_KIND = "fp8"


@dataclass(frozen=True)
class Target:
    """A deployment target as capabilities: the FP8 element formats its matmuls take and the
    scaled-matmul kinds it executes natively (``fp8`` per-tensor/row/block scales applied around the
    matmul, ``mxfp8``/``mxfp4``: e8m0 scales of 32-element blocks inside it, ``nvfp4``: e4m3 scales of
    16-element blocks), with the document that says so. A device target runs what it lacks emulated
    (weights dequantized at load or per block); a format target (``e4m3fnuz``, ``fnuz``) is a format only."""

    name: str
    description: str
    formats: tuple[Format, ...]
    kinds: tuple[str, ...] = (FP8_KIND,)
    device: bool = False
    source: str = ""

    @property
    def fnuz(self) -> bool:
        return any(f in FNUZ for f in self.formats)

    @property
    def ocp(self) -> bool:
        return any(f in OCP for f in self.formats)

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "description": self.description, "formats": [f.name for f in self.formats],
                "kinds": list(self.kinds), "source": self.source or None}


def _family(names: tuple[str, ...], description: str, fmts: tuple[Format, ...], kinds: tuple[str, ...],
            source: str) -> dict[str, Target]:
    return {n: Target(n, description, fmts, kinds, True, source) for n in names}


_MX = (FP8_KIND, "mxfp8", "mxfp4")
TARGETS: dict[str, Target] = {
    **_family(("mi300", "mi300x", "mi300a", "mi308x", "mi325", "mi325x"),
              "AMD Instinct CDNA3 (gfx942): FP8 is e4m3fnuz/e5m2fnuz only; no MX, no FP4", FNUZ, (FP8_KIND,),
              "AMD CDNA3 ISA reference guide (V_MFMA_F32_*_FP8_FP8/BF8: fnuz encodings); no block-scaled MFMA"),
    **_family(("mi350", "mi350x", "mi355", "mi355x"),
              "AMD Instinct CDNA4 (gfx950): OCP e4m3fn/e5m2, MXFP8, MXFP4 (no NVFP4)", OCP, _MX,
              "AMD CDNA4 ISA reference guide (V_MFMA_SCALE_F32_16X16X128_F8F6F4 / 32X32X64: OCP FP8/FP6/FP4 "
              "with e8m0 scales of 32-element blocks)"),
    **_family(("h100", "h200", "h800", "h20", "gh200"),
              "NVIDIA Hopper (sm90): OCP e4m3fn/e5m2; no MX, no FP4", OCP, (FP8_KIND,),
              "PTX ISA wgmma.mma_async (.e4m3/.e5m2 on sm_90a); block-scaled MMA is tcgen05/sm_100a+"),
    **_family(("b200", "b100", "gb200", "b300", "gb300"),
              "NVIDIA Blackwell (sm100): OCP e4m3fn/e5m2, MXFP8, MXFP4, NVFP4", OCP, _MX + ("nvfp4",),
              "PTX ISA tcgen05.mma .kind::mxf8f6f4, .kind::mxf4, .kind::mxf4nvf4 (sm_100a)"),
    **_family(("l40s", "l4", "rtx4090"), "NVIDIA Ada (sm89): OCP e4m3fn/e5m2; no MX, no FP4", OCP, (FP8_KIND,),
              "PTX ISA mma.sync .e4m3/.e5m2 (sm_89)"),
    **_family(("rtx5090", "rtxpro6000"), "NVIDIA Blackwell (sm120): OCP e4m3fn/e5m2, MXFP8, MXFP4, NVFP4", OCP,
              _MX + ("nvfp4",), "PTX ISA mma.sync .kind::mxf8f6f4 / .kind::mxf4nvf4 .block_scale (sm_120a)"),
    "fnuz": Target("fnuz", "any fnuz format (e4m3fnuz/e5m2fnuz)", FNUZ),
    "ocp": Target("ocp", "any OCP format (e4m3fn/e5m2)", OCP),
    **{f.name: Target(f.name, f"the {f.name} format only", (f,)) for f in formats.FP8_FORMATS},
}
DEFAULT_TARGETS = ("h100", "b200", "mi300", "mi355")


def get_target(name: str) -> Target:
    key = name.strip().lower()
    if key in TARGETS:
        return TARGETS[key]
    try:
        fmt = formats.get(key)
    except Exception:
        fmt = None
    if fmt in formats.FP8_FORMATS:
        return TARGETS[fmt.name]
    raise InvalidValueError(f"unknown target {name!r}; known: {', '.join(TARGETS)}")


# -- conversion plans ------------------------------------------------------------


@lru_cache(maxsize=None)
def conversion_table(src: Format, dst: Format, factor: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(table, exact, zero_sign_dropped) over the 256 codes of ``src``.

    ``table[c]``: the ``dst`` code for value(c) / factor, rounded to nearest
    even and saturated at ±max where it is not exact; NaN -> the canonical
    NaN of ``dst``. ``exact[c]``: whether that code keeps its value exactly
    (NaN stays NaN; a zero stays a zero).
    """
    v = code_values(src)
    with np.errstate(invalid="ignore"):
        target = v / factor
    # the reference maps NaN (and Inf, where dst has none) to dst's NaN and clamps what does not fit
    table = reference.conversion_table(src, dst, factor).copy()
    nan = np.isnan(v)
    got = code_values(dst)[table]
    exact = (got == target) | (np.isnan(got) & nan)
    zero_sign_dropped = (target == 0) & np.signbit(target) & ~np.signbit(got)
    for arr in (table, exact, zero_sign_dropped):
        arr.setflags(write=False)
    return table, exact, zero_sign_dropped


@lru_cache(maxsize=None)
def _plan_masks(src: Format, dst: Format, factor: float) -> np.ndarray:
    """Three 0/1 int64 rows over the codes of ``src``: not exact, NaN, -0 that becomes +0 (times a histogram:
    their counts, in one product)."""
    _, exact, dropped = conversion_table(src, dst, factor)
    out = np.stack([~exact, np.isnan(code_values(src)), dropped]).astype(np.int64)
    out.setflags(write=False)
    return out


@dataclass
class ConversionPlan:
    src: str
    dst: str
    factor: float  # scale multiplier; codes map to value / factor
    exact: bool
    inexact: int  # elements whose value changes (or cannot be held)
    nan_kept: int  # NaN codes mapped to the target's NaN
    neg_zero_to_zero: int
    reason: str = ""
    # a block plan: this many scale elements cannot take the factor exactly in their dtype (an e8m0 254, an fp16
    # scale >= 32768), so their blocks keep their scale (codes re-encoded to the same values) while the others
    # take the factor; ``inexact`` counts only what does not fit in those blocks
    blocks_kept: int = 0

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> ConversionPlan:
        """Read back from :meth:`to_dict`'s JSON form."""
        return cls(**dict(d, factor=json_float(d["factor"])))


def plan_conversion(src: Format, dst: Format, hist: np.ndarray, *, scaled: bool,
                    factor_exact: dict[str, bool] | None = None) -> ConversionPlan:
    """The best exact conversion of one tensor (or the natural one, marked inexact)."""
    hist = np.asarray(hist)
    natural = NATURAL_FACTOR.get((src, dst), 1.0)
    candidates = [natural, 1.0] if scaled else [1.0]
    if scaled:
        candidates = [f for f in candidates if f == 1.0 or (factor_exact or {}).get(f"{f:g}", False)]
    best: ConversionPlan | None = None
    for f in dict.fromkeys(candidates):
        bad, nans, dropped = (_plan_masks(src, dst, f) @ hist).tolist()
        plan = ConversionPlan(src.name, dst.name, f, bad == 0, bad, nans, dropped)
        if bad == 0:
            return plan
        if best is None:
            best = plan
    assert best is not None
    if not scaled:
        best.reason = (f"{_n(best.inexact, 'value')} cannot be held exactly in {dst.name} (beyond ±{dst.max:g} or "
                       f"below its smallest subnormal) and there is no scale to absorb "
                       f"{'it' if best.inexact == 1 else 'them'}")
    elif natural not in candidates:
        best.reason = (f"the scale cannot be multiplied by {natural:g} exactly in its dtype, and {best.inexact} "
                       f"{'value does' if best.inexact == 1 else 'values do'} not fit {dst.name} under the same scale")
    else:
        best.reason = f"{_n(best.inexact, 'value')} cannot be held exactly in {dst.name}"
    return best


def _n(count: int, word: str) -> str:
    return f"{count:,} {word if count == 1 else word + 's'}"


# -- verdicts ---------------------------------------------------------------------


@dataclass
class TensorPortability:
    name: str
    file: str
    format: Format
    numel: int
    nan: int
    neg_zeros: int = 0
    plans: dict[str, ConversionPlan] = field(default_factory=dict)  # dst format name -> plan
    kind: str = FP8_KIND  # the scaled-matmul kind its layout needs: fp8, mxfp8, mxfp4, nvfp4
    broken: str = ""  # why no loader can dequantize it (scale missing or of the wrong shape), if so
    beyond_fnuz: int = 0  # e4m3fn values beyond ±240: NaN after a plain .to(float8_e4m3fnuz) under the same scale
    scale_x2_overflow: int = 0  # elements whose scale overflows its dtype when doubled in place (vLLM, Quark)


# How the common load paths put an e4m3fn checkpoint on an e4m3fnuz target, each read in its source:
LOAD_PATHS = {
    "plain_cast": "a plain .to(torch.float8_e4m3fnuz) of the weights under the same scale (torch's fnuz cast: "
                  "overflow is NaN)",
    "vllm": "vLLM's normalize_e4m3fn_to_e4m3fnuz (vllm/model_executor/layers/quantization/utils/w8a8_utils.py): "
            "the bytes read as fnuz, 0x80 set to 0, weight and input scales x 2 in place",
    "quark_import": "AMD Quark's e4m3fn_to_e4m3fnuz (amd-quark 0.13, quark/torch/utils/device.py; run at import "
                    "on ROCm with tensor parallelism, quark/torch/export/utils.py): (w.half() / 2).clamp(-224, 224)"
                    ".to(float8_e4m3fnuz), the weight scale x 2 in place",
    "quark_forward": "AMD Quark's QParamsLinear forward on ROCm (amd-quark 0.13, quark/torch/export/nn/modules/"
                     "qparamslinear.py normalize_e4m3fn_to_e4m3fnuz): the bytes read as fnuz, 0x80 set to 0, weight "
                     "and input scales x 2, at every call",
    "fp8check_convert": "fp8check convert --to e4m3fnuz",
}


@dataclass
class Verdict:
    """Whether a checkpoint runs on one target, and why."""

    target: str
    description: str
    formats: list[str]
    verdict: str  # runs_as_is | runs_after_conversion | runs_emulated | does_not_load_correctly | cannot_run | unknown
    reasons: list[str]
    conversions: list[dict[str, Any]]
    tensors: dict[str, int]  # as_is, after_conversion, emulated, cannot_run
    blocked: list[dict[str, str]]  # name, file, why
    complete: bool = True
    load_paths: dict[str, Any] = field(default_factory=dict)  # fnuz targets: what each load path does instead
    errors: dict[str, int] = field(default_factory=dict)  # code -> error findings that break this target's loaders

    def to_dict(self) -> dict[str, Any]:
        return {"target": self.target, "description": self.description, "formats": list(self.formats),
                "verdict": self.verdict, "reasons": list(self.reasons), "conversions": list(self.conversions),
                "tensors": dict(self.tensors), "blocked": list(self.blocked), "complete": self.complete,
                "load_paths": dict(self.load_paths), "errors": dict(self.errors)}


def verdict(target: Target, tensors: list[TensorPortability]) -> Verdict:
    """Can the checkpoint run on ``target`` as is, after conversion, or not at all, and why."""
    tally = VerdictTally(target)
    for t in tensors:
        tally.add(t)
    return tally.result()


class VerdictTally:
    """The verdict for one target, built one tensor at a time (memory bounded by the number of
    distinct conversions and the blocked tensors listed, not by the number of tensors)."""

    MAX_BLOCKED = 1000

    def __init__(self, target: Target) -> None:
        self.target = target
        self.as_is = 0
        self.as_is_formats: set[str] = set()
        # (src, dst, factor) -> [tensors, nan codes, tensors with nan, -0 codes, tensors with -0]
        self.convertible: dict[tuple[str, str, float], list[int]] = {}
        self.blocked: list[dict[str, str]] = []
        self.n_blocked = 0
        self.n = 0
        self.emulated: dict[str, int] = {}  # kind -> tensors that need it emulated here
        # e4m3fn tensors on an e4m3fnuz target: tensors, beyond ±240, NaN codes, scale x 2 overflow, convert's losses
        self.load = [0, 0, 0, 0, 0]
        self.errors: dict[str, list[Any]] = {}  # finding code -> [findings, first tensor] of errors that break it

    def add_findings(self, tensor: str, found: list[Finding]) -> None:
        """Count the error findings of one tensor whose defect breaks this target's loaders."""
        for f in found:
            if breaks(f, fnuz_target=self.target.fnuz):
                seen = self.errors.setdefault(f.code, [0, tensor])
                seen[0] += 1

    def add(self, t: TensorPortability) -> None:
        target = self.target
        self.n += 1
        if t.broken:
            self._block(t, t.broken)
            return
        if t.kind in ("mxfp4", "nvfp4"):  # packed e2m1: no FP8 format question, only the matmul kind
            if t.kind in target.kinds:
                self.as_is += 1
                self.as_is_formats.add(f"{t.kind}")
            elif target.device:
                self._emulate(t.kind)
            else:
                self._block(t, f"{t.kind} (packed e2m1) data; {target.name} is the "
                               f"{', '.join(f.name for f in target.formats)} format only")
            return
        if t.format is formats.E4M3FN and formats.E4M3FNUZ in target.formats and t.kind == FP8_KIND:
            plan = t.plans.get(formats.E4M3FNUZ.name)
            for k, v in enumerate((1, t.beyond_fnuz, t.nan, t.scale_x2_overflow, plan.inexact if plan else 0)):
                self.load[k] += v
        emulated = t.kind not in target.kinds  # e.g. MXFP8 (e8m0 block scales) where no MX matmul exists
        if emulated and not target.device:
            emulated = False  # a format target says nothing of matmul kinds
        if t.kind != FP8_KIND and t.format not in target.formats:
            # MX elements are OCP: no fnuz form exists (convert keeps them); a device without MX matmuls
            # dequantizes them at load, whatever its FP8 format
            if target.device:
                self._emulate(t.kind)
            else:
                self._block(t, f"{t.kind} data ({t.format.name} elements under e8m0 block scales) has no "
                               f"{', '.join(f.name for f in target.formats)} form")
            return
        if t.format in target.formats:
            if emulated:
                self._emulate(t.kind)
            else:
                self.as_is += 1
                self.as_is_formats.add(t.format.name)
            return
        dst = COUNTERPART.get(t.format)
        if dst is not None and dst in target.formats:
            plan = t.plans.get(dst.name)
            if plan is not None and plan.exact:
                c = self.convertible.setdefault((t.format.name, dst.name, plan.factor), [0, 0, 0, 0, 0, 0])
                c[0] += 1
                c[1] += t.nan
                c[2] += 1 if t.nan else 0
                c[3] += t.neg_zeros
                c[4] += 1 if t.neg_zeros else 0
                c[5] += t.beyond_fnuz
                if emulated:
                    self._emulate(t.kind)
                return
            why = plan.reason if plan else "no conversion plan"
            why = f"{t.format.name} -> {dst.name} is not exact: {why}"
        else:
            why = (f"{t.format.name} data; {target.name} runs {', '.join(f.name for f in target.formats)} "
                   f"and re-quantizing {t.format.name} is not exact")
        self._block(t, why)

    def _load_paths(self) -> dict[str, Any]:
        """Per load path, what it does to the e4m3fn weights on this e4m3fnuz target: values saturated, made NaN,
        NaN made finite, under a scale that overflows when doubled, lost in all (counts of elements)."""
        tensors, beyond, nan, over, convert_lost = self.load
        if not tensors:
            return {}

        def path(key: str, saturated: int, made_nan: int, nan_made_finite: int, scale_overflow: int,
                 lost: int) -> dict[str, Any]:
            return {"what": LOAD_PATHS[key], "saturated": saturated, "made_nan": made_nan,
                    "nan_made_finite": nan_made_finite, "scale_overflow": scale_overflow, "lost": lost}

        return {"tensors": tensors,
                "plain_cast": path("plain_cast", 0, beyond, 0, 0, beyond),
                "vllm": path("vllm", 0, 0, nan, over, nan + over),
                "quark_import": path("quark_import", 0, 0, 0, over, over),
                "quark_forward": path("quark_forward", 0, 0, nan, over, nan + over),
                "fp8check_convert": path("fp8check_convert", convert_lost, 0, 0, 0, convert_lost)}

    def _emulate(self, kind: str) -> None:
        self.emulated[kind] = self.emulated.get(kind, 0) + 1

    def _block(self, t: TensorPortability, why: str) -> None:
        self.n_blocked += 1
        if len(self.blocked) < self.MAX_BLOCKED:
            self.blocked.append({"name": t.name, "file": t.file, "why": why})

    def result(self) -> Verdict:
        target = self.target
        reasons: list[str] = []
        conversions: list[dict[str, Any]] = []
        if not self.n:
            reasons.append("no quantized tensors")
        if self.as_is:
            packed = self.as_is_formats & {"mxfp4", "nvfp4"}  # packed e2m1 kinds: FP4, not FP8
            noun = "FP8 tensor" if not packed else "FP4 tensor" if packed == self.as_is_formats else "quantized tensor"
            reasons.append(f"{_n(self.as_is, noun)} ({', '.join(sorted(self.as_is_formats))}) "
                           f"{'is' if self.as_is == 1 else 'are'} native on {target.name}")
        for (src, dst, factor), (n, nan, nan_t, neg, neg_t, beyond) in sorted(self.convertible.items()):
            if factor == 1.0:
                how = "codes re-encoded to the same values, scales unchanged"
            elif src in ("e4m3fn", "e5m2"):
                how = f"bytes reinterpreted, 0x80 -> 0x00, NaN -> 0x80, scales x {factor:g}"
            else:
                how = f"bytes reinterpreted, NaN 0x80 -> {formats.get(dst).name} NaN, scales x {factor:g}"
            reasons.append(f"{_n(n, src + ' tensor')} {'runs' if n == 1 else 'run'} after conversion to {dst} ({how}): "
                           f"fp8check convert SRC DST --to {dst}")
            if nan and src in ("e4m3fn", "e5m2"):
                it = "it" if nan == 1 else "them"
                reasons.append(f"{_n(nan, src + ' NaN code')} in {_n(nan_t, 'tensor')}: the conversion keeps {it} "
                               f"NaN; a naive byte reinterpretation makes {it} finite ±{formats.get(dst).max:g}")
            if neg and src in ("e4m3fn", "e5m2"):
                reasons.append(f"{_n(neg, 'byte')} 0x80 (-0) in {_n(neg_t, 'tensor')}: the conversion maps "
                               f"{'it' if neg == 1 else 'them'} to 0x00; a bare reinterpretation of the bytes as fnuz "
                               f"makes {'it' if neg == 1 else 'each one'} NaN")
            conversions.append({"from": src, "to": dst, "factor": factor, "tensors": n,
                                "command": f"fp8check convert SRC DST --to {dst}",
                                "plain_cast_nan": beyond if src == "e4m3fn" else None,
                                "byte_normalisation_nan_made_finite": nan if src in ("e4m3fn", "e5m2") else None})
        paths = self._load_paths()
        if paths:
            p = paths
            reasons.append(
                "what each load path does to these weights instead: a plain .to(torch.float8_e4m3fnuz): "
                f"{_n(p['plain_cast']['made_nan'], 'value')} beyond ±240 made NaN; vLLM's normalisation: "
                f"{_n(p['vllm']['nan_made_finite'], 'NaN code')} made finite ±240"
                + (f", {_n(p['vllm']['scale_overflow'], 'value')} under a scale that overflows when doubled"
                   if p["vllm"]["scale_overflow"] else "")
                + "; Quark's import conversion: " + (
                    f"{_n(p['quark_import']['lost'], 'value')} under a scale that overflows when doubled"
                    if p["quark_import"]["lost"] else "nothing lost (NaN kept)")
                + ", Quark's forward: as vLLM's"
                + f"; fp8check convert: {_n(p['fp8check_convert']['lost'], 'value')} lost"
                + (" (saturated where a scale cannot double, reported)" if p["fp8check_convert"]["lost"] else ""))
        for kind, n in sorted(self.emulated.items()):
            reasons.append(f"{_n(n, kind + ' tensor')} {'runs' if n == 1 else 'run'} emulated: {target.name} has no "
                           f"{kind} matmul ({', '.join(target.kinds)} natively), so a loader must dequantize "
                           f"{'it' if n == 1 else 'them'} or apply the block scales outside the matmul")
        for b in self.blocked[:20]:
            reasons.append(f"{b['name']}: {b['why']}")
        if self.n_blocked > 20:
            more = self.n_blocked - 20
            reasons.append(f"... and {more} more {'tensor that cannot' if more == 1 else 'tensors that cannot'} run")
        if self.errors:
            n = sum(c for c, _ in self.errors.values())
            reasons.insert(0, f"{_n(n, 'error finding')} {'makes' if n == 1 else 'make'} its loaders compute NaN, Inf, "
                              "zeros or wrong values (see the findings): " + ", ".join(
                                  f"{code} ({first}{f' and {c - 1} more' if c > 1 else ''})"
                                  for code, (c, first) in sorted(self.errors.items())))
        if self.n_blocked:
            v = CANNOT_RUN
        elif self.errors:
            v = LOADS_WRONG
        elif self.emulated:
            v = EMULATED
        elif self.convertible:
            v = AFTER_CONVERSION
        else:
            v = RUNS_AS_IS
        return Verdict(
            target=target.name, description=target.description, formats=[f.name for f in target.formats],
            verdict=v, reasons=reasons, conversions=conversions,
            tensors={"as_is": self.as_is, "after_conversion": sum(c[0] for c in self.convertible.values()),
                     "emulated": sum(self.emulated.values()), "cannot_run": self.n_blocked},
            blocked=list(self.blocked), load_paths=paths,
            errors={code: c for code, (c, _) in sorted(self.errors.items())})
