"""Step 5 of the audit: one tensor's findings and conversion plans, from its code counts and its scale.

:class:`TensorChecks` judges each FP8 or packed tensor once its 256 code counts are in (:mod:`.counting`): the format
against the config, a missing scale, NaN/Inf/-0 codes, saturation and underflow, the conversion to the other
family (fn <-> fnuz), the formats a target runs, and whether value x scale overflows the dequantized dtype (exactly,
reading the tensor again, only where the cheap bound says it might).
"""

from __future__ import annotations

import copy
from typing import Any, Callable

import numpy as np

from fp8check import formats
from fp8check.checkpoints import conventions, findings, granularity, layouts, stats, targets
from fp8check.checkpoints.records import Checkpoint, Record, ScaleInfo
from fp8check.errors import CheckpointError

_MEMO_ENTRIES = 1024  # histograms remembered: many small tensors share one (empty, constant, copied experts)


def _beyond_fnuz_mask() -> np.ndarray:
    """1 for the e4m3fn codes whose magnitude is beyond e4m3fnuz's 240 (256 ... 448)."""
    v = np.abs(stats.code_values(formats.E4M3FN))
    return (np.nan_to_num(v, nan=0.0) > formats.E4M3FNUZ.max).astype(np.int64)


def _scale_values(ck: Checkpoint, sc: ScaleInfo) -> np.ndarray:
    """A scale's values: kept from its first read when small, else read again."""
    if sc.values is not None:
        return sc.values
    return stats.scale_values(ck.readers[sc.key[0]].tensor(sc.key[1]), sc.kind)


class TensorChecks:
    """The per-tensor checks of one audit, for its ``targets``; ``file_error`` records a file that failed a read."""

    def __init__(self, audit_targets: list[targets.Target], file_error: Callable[[CheckpointError], None]) -> None:
        self.targets = audit_targets
        self.fnuz_target = any(t.fnuz for t in audit_targets)  # a fnuz range finding is an error, not info
        self.ocp_target = any(t.ocp for t in audit_targets)
        self.file_error = file_error
        self._memo: dict[tuple[Any, ...], Any] = {}

    def finish(self, ck: Checkpoint, rec: Record) -> None:
        """The findings and conversion plans of one FP8 or packed tensor, from its code counts (once)."""
        if rec.role == conventions.ROLE_PACKED and rec.entry is not None and not rec.finished:
            rec.finished = True
            self._finish_packed(ck, rec)
            return
        if rec.role != conventions.ROLE_FP8 or rec.entry is None or rec.finished:
            return
        rec.finished = True
        self._format_and_scale(ck, rec)
        if rec.hist is None:
            return
        fmt = rec.fmt
        assert fmt is not None
        hist_key = rec.hist.tobytes()
        # shared by the tensors of one histogram; copied before the dequantization fields are set
        cs = self._remember((fmt, hist_key), lambda: stats.code_stats(rec.hist, fmt))
        rec.code_stats = cs
        self._code_findings(ck, rec, cs)
        sc = rec.scale
        usable_scale = sc is not None and sc.stats is not None and sc.granularity is not None
        dst = targets.COUNTERPART.get(fmt)
        self._conversion(ck, rec, dst, usable_scale, hist_key)
        for t in self.targets:
            if fmt not in t.formats and (dst is None or dst not in t.formats):
                rec.findings.append(findings.make(
                    "TARGET_FORMAT", cs.numel, f"{fmt.name} does not run on {t.name} "
                                               f"({', '.join(f.name for f in t.formats)}) "
                                               "and has no exact conversion there"))
        if usable_scale:
            self._zeroed_blocks(ck, rec, fmt, rec.entry.shape,
                                lambda: stats.as_bytes(ck.readers[rec.key[0]].tensor(rec.key[1])))
            self._dequant_overflow(ck, rec)

    def _format_and_scale(self, ck: Checkpoint, rec: Record) -> None:
        """CONFIG_FORMAT, and SCALE_MISSING or SCALE_UNPAIRED for FP8 data without a scale."""
        fmt = rec.fmt
        assert fmt is not None and rec.entry is not None
        declared = ck.config.weight_format
        if declared is not None and fmt != declared and rec.format_source in (None, "dtype"):
            rec.findings.append(findings.make(
                "CONFIG_FORMAT", rec.entry.numel,
                f"{ck.config.source} declares {declared.name} weights, but this tensor is stored as {fmt.name}"))
        elif declared is None and ck.config.packed in (layouts.NVFP4, layouts.MXFP4) and not ck.config.layer_schemes \
                and rec.format_source in (None, "dtype"):
            # a config for packed FP4 weights only (no FP8 group, no per-layer schemes) over an FP8 tensor: its
            # loader builds the FP4 layout (uint8 weight_packed / weight, e4m3 or e8m0 block scales) and cannot
            # take it
            rec.findings.append(findings.make(
                "CONFIG_FORMAT", rec.entry.numel,
                f"{ck.config.source} declares {ck.config.packed} (packed FP4) weights, but this tensor is stored as "
                f"{fmt.name}: an FP4 loader cannot take it", findings.ERROR))
        if rec.scale is None and ck.strict_missing and not rec.unpaired:
            rec.broken = "it has no scale, and the checkpoint's other tensors (or its config) say it needs one"
        # an FP8 weight with no scale in a model whose config.json has no quantization config and does not say
        # the model is FP8: its scale was dropped (a re-save), and the loaders read the raw values
        # (layouts.UNSCALED_LOADER). Without a config.json nothing says what the file was meant to be: a warning.
        dropped = (rec.scale is None and not rec.unpaired and not ck.strict_missing
                   and ck.config.model_config_read and ck.config.fp8_model_dtype is None
                   and rec.key[1].rpartition(".")[2] == "weight")
        if dropped:
            rec.broken = f"no scale and no quantization config: {layouts.UNSCALED_LOADER}"
        if rec.scale is None:
            if rec.unpaired:
                rec.findings.append(findings.make(
                    "SCALE_UNPAIRED", len(rec.unpaired),
                    f"unpaired scale {rec.unpaired[0]}" + (f" (and {len(rec.unpaired) - 1} more)"
                                                          if len(rec.unpaired) > 1 else "")
                    + ": a scale-like name next to this tensor that no known convention pairs with it"))
            else:
                rec.findings.append(findings.make(
                    "SCALE_MISSING", 1,
                    f"no scale under any known name ({', '.join(conventions.scale_candidates(rec.key[1])[:2])}, ...)"
                    + (f" and no quantization config: {layouts.UNSCALED_LOADER}" if dropped else ""),
                    findings.ERROR if ck.strict_missing or dropped else findings.WARNING))

    def _code_findings(self, ck: Checkpoint, rec: Record, cs: stats.CodeStats) -> None:
        """NAN_CODES, INF_CODES, NEG_ZERO_FNUZ_HAZARD, SATURATION and UNDERFLOW from the code counts."""
        fmt = rec.fmt
        assert fmt is not None and rec.hist is not None
        n = cs.numel
        if cs.nan:
            rec.findings.append(findings.make("NAN_CODES", cs.nan,
                                              f"{findings.of(cs.nan, n, 'code')} {findings.be(cs.nan)} NaN in "
                                              f"{fmt.name}"))
        if cs.inf:
            rec.findings.append(findings.make("INF_CODES", cs.inf,
                                              f"{findings.of(cs.inf, n, 'code')} {findings.be(cs.inf)} ±Inf"))
        if fmt.has_negative_zero and cs.neg_zeros:
            rec.findings.append(findings.make(
                "NEG_ZERO_FNUZ_HAZARD", cs.neg_zeros,
                f"{findings.plural(cs.neg_zeros, 'code')} 0x80 (-0 in {fmt.name}) {findings.be(cs.neg_zeros)} NaN "
                "if read as fnuz"))
        sc = rec.scale
        usable_scale = sc is not None and sc.stats is not None and sc.granularity is not None
        # one amax per scale element may legitimately sit at ±max
        blocks = sc.entry.numel if usable_scale and sc is not None else 0
        excess = cs.saturated - blocks
        below = fmt.max_code - 1
        neighbour = int(rec.hist[below] + (rec.hist[below | fmt.sign_mask] if fmt.signed else 0))
        # without the scale it was quantized with, a pile at ±max says nothing of clipping (one per block is normal)
        scale_expected = rec.scale is not None or ck.strict_missing
        if (not rec.broken and (usable_scale or not scale_expected) and excess >= findings.SATURATION_MIN_COUNT and n
                and excess / n > findings.SATURATION_SHARE and excess > findings.SATURATION_PILEUP * neighbour):
            rec.findings.append(findings.make(
                "SATURATION", excess,
                f"{findings.plural(cs.saturated, 'code')} at ±{fmt.max:g} ({cs.saturated / n:.2%}), {excess} beyond "
                f"one per scale block, against {neighbour} one step below: clipped values"))
        if n and cs.zero_share >= findings.UNDERFLOW_ZERO_SHARE and cs.subnormal_share >= findings.UNDERFLOW_EDGE_SHARE:
            rec.findings.append(findings.make(
                "UNDERFLOW", cs.zeros,
                f"{cs.zero_share:.2%} of codes are zero while {cs.subnormal_share:.2%} are subnormal: "
                "values underflowed (scale too large for this data)"))

    def _conversion(self, ck: Checkpoint, rec: Record, dst: formats.Format | None, usable_scale: bool,
                    hist_key: bytes) -> None:
        """The plan to the other family's counterpart (fn <-> fnuz), FNUZ_RANGE / OCP_RANGE, and for e4m3fn the
        values beyond ±240 and the elements whose scale x 2 overflows (what the fnuz load paths meet)."""
        fmt = rec.fmt
        sc = rec.scale
        assert fmt is not None and rec.hist is not None
        mx = usable_scale and sc is not None and sc.granularity is not None \
            and sc.granularity.name == granularity.MX_E8M0
        if dst is None or mx:  # MX is OCP only: no fnuz form to convert to (convert keeps it)
            return
        factor_exact = sc.stats.factor_exact if usable_scale and sc and sc.stats else None
        plan = self._remember(  # shared by the tensors of one histogram: never changed once made
            (fmt, dst, hist_key, usable_scale, tuple(sorted((factor_exact or {}).items()))),
            lambda: targets.plan_conversion(fmt, dst, rec.hist, scaled=usable_scale, factor_exact=factor_exact))
        natural = targets.NATURAL_FACTOR.get((fmt, dst), 1.0)
        if usable_scale and plan.inexact and plan.factor != natural and sc is not None and sc.kind is not None:
            plan = self._block_plan(ck, rec, dst, natural, plan)
        if rec.broken and plan.inexact:
            plan = copy.copy(plan)
            plan.reason = (f"{plan.inexact:,} values do not fit {dst.name} at the same scale, and {rec.broken}, "
                           "so the scale cannot absorb them")
        rec.plans[dst.name] = plan
        if fmt is formats.E4M3FN:
            rec.beyond_fnuz = int(rec.hist @ _beyond_fnuz_mask())
            if usable_scale and sc is not None and factor_exact is not None and not factor_exact.get("2", True):
                rec.scale_x2_overflow = self._scale_x2_overflow(ck, rec)
            self._fnuz_load_paths(rec)
        if plan.inexact:
            if dst in targets.FNUZ:
                rec.findings.append(findings.make(
                    "FNUZ_RANGE", plan.inexact, f"{fmt.name} -> {dst.name}: {plan.reason}",
                    findings.ERROR if self.fnuz_target else findings.INFO))
            else:
                rec.findings.append(findings.make(
                    "OCP_RANGE", plan.inexact, f"{fmt.name} -> {dst.name}: {plan.reason}",
                    findings.ERROR if self.ocp_target else findings.INFO))

    def _fnuz_load_paths(self, rec: Record) -> None:
        """What the named fnuz load paths (targets.LOAD_PATHS) do to this e4m3fn tensor, per tensor: FNUZ_PLAIN_CAST
        (with a fnuz target), FNUZ_SCALE_OVERFLOW (error with one, warning without). Its NaN codes are NAN_CODES'
        (the verdict for a fnuz target says the byte-reinterpreting paths make them finite ±240)."""
        cs = rec.code_stats
        assert cs is not None
        if self.fnuz_target and rec.beyond_fnuz:
            rec.findings.append(findings.make(
                "FNUZ_PLAIN_CAST", rec.beyond_fnuz,
                f"{findings.plural(rec.beyond_fnuz, 'value')} beyond ±240: NaN after a plain "
                ".to(torch.float8_e4m3fnuz) under the same scale; vLLM's normalisation, Quark and fp8check convert "
                "halve them exactly and double the scale"))
        if rec.scale_x2_overflow:
            rec.findings.append(findings.make(
                "FNUZ_SCALE_OVERFLOW", rec.scale_x2_overflow,
                f"{findings.plural(rec.scale_x2_overflow, 'value')} under scale elements whose double overflows "
                f"{rec.scale.entry.dtype if rec.scale else 'the scale dtype'}: vLLM's normalize_e4m3fn_to_e4m3fnuz "
                "and Quark's e4m3fn_to_e4m3fnuz double the scale in place, to Inf",
                findings.ERROR if self.fnuz_target else findings.WARNING))

    def _zeroed_blocks(self, ck: Checkpoint, rec: Record, fmt: formats.Format, shape: tuple[int, ...],
                       read_codes: Callable[[], Any]) -> None:
        """BLOCK_ZEROED: nonzero codes under e8m0 scale bytes 0x00 (2^-127): every loader dequantizes them to
        within 6 x 2^-127 of zero, so the block's weights are gone (an all-zero block legitimately has 0x00)."""
        sc = rec.scale
        if sc is None or sc.kind != "e8m0" or sc.stats is None or not sc.stats.subnormal or sc.granularity is None:
            return
        try:
            under = (np.asarray(_scale_values(ck, sc)) == 2.0 ** -127).astype(np.float64)
            zeroed = stats.dequant_overflow(read_codes(), fmt, under, sc.granularity, shape, 5e-324)
        except CheckpointError as exc:
            self.file_error(exc)
            rec.unread = exc.reason
            return
        if zeroed:
            rec.findings.append(findings.make(
                "BLOCK_ZEROED", zeroed,
                f"{findings.plural(zeroed, 'nonzero value')} under {findings.plural(int(under.sum()), 'scale byte')} "
                "0x00 (2^-127): dequantized to zero by every loader"))

    def _magnitude(self, ck: Checkpoint, rec: Record, bound: float, overflow: int | None,
                   count: Callable[[float], int]) -> None:
        """WEIGHT_MAGNITUDE: values at or beyond the bound that do not overflow (``count(threshold)`` counts the
        elements with |value| >= threshold, exactly)."""
        if bound < findings.WEIGHT_MAGNITUDE_BOUND or overflow is None:
            return
        try:
            beyond = count(findings.WEIGHT_MAGNITUDE_BOUND) - overflow
        except CheckpointError as exc:
            self.file_error(exc)
            rec.unread = exc.reason
            return
        if beyond > 0:
            rec.findings.append(findings.make(
                "WEIGHT_MAGNITUDE", beyond,
                f"{findings.plural(beyond, 'dequantized value')} at or beyond |{findings.WEIGHT_MAGNITUDE_BOUND:g}| "
                f"(largest code x largest scale: {bound:.4g}), beyond any trained model's weights"))

    def _dequant_overflow(self, ck: Checkpoint, rec: Record) -> None:
        """DEQUANT_OVERFLOW: the cheap bound (largest code x largest scale), then an exact count where it may."""
        sc = rec.scale
        cs = rec.code_stats
        assert sc is not None and cs is not None
        if sc.stats is None or cs.max_abs is None or sc.stats.absmax is None:
            return
        threshold = stats.overflow_threshold(ck.dequant_dtype)
        bound = cs.max_abs * sc.stats.absmax
        cs = rec.code_stats = copy.copy(cs)
        cs.dequant_absmax_bound = bound
        if bound < threshold:
            cs.dequant_overflow = 0
            self._magnitude(ck, rec, bound, 0, lambda at: self._exact_overflow(ck, rec, at))
            return
        try:
            cs.dequant_overflow = self._exact_overflow(ck, rec, threshold)
        except CheckpointError as exc:
            self.file_error(exc)
            rec.unread = exc.reason
            cs.dequant_overflow = None
        self._magnitude(ck, rec, bound, cs.dequant_overflow, lambda at: self._exact_overflow(ck, rec, at))
        self._overflow_finding(ck, rec, cs.dequant_overflow, threshold)

    @staticmethod
    def _overflow_finding(ck: Checkpoint, rec: Record, overflow: int | None, threshold: float,
                          extra: str = "") -> None:
        """DEQUANT_OVERFLOW where some value x scale overflows the dequantized dtype."""
        if overflow:
            rec.findings.append(findings.make(
                "DEQUANT_OVERFLOW", overflow,
                f"{findings.plural(overflow, 'value')} x scale overflow{'s' if overflow == 1 else ''} "
                f"{ck.dequant_dtype} (|v| >= {threshold:.6g}{extra})"))

    def _finish_packed(self, ck: Checkpoint, rec: Record) -> None:
        """Packed e2m1 (FP4) data of a known layout: its 16 code counts, its block scale and (NVFP4) its
        per-tensor scale, and whether value x scales overflows the dequantized dtype."""
        lay = rec.layout
        if lay is None:
            return
        if rec.scale is None:
            rec.findings.append(findings.make("SCALE_MISSING", 1, f"{lay.name} data without its block scale "
                                                                  f"{(layouts.scale_names(rec.key[1]) or ['?'])[0]}"))
            rec.broken = "its block scale is missing"
        second = None
        if lay.second_scale:
            if rec.second_scale is None:
                rec.findings.append(findings.make(
                    "SCALE_MISSING", 1, f"{lay.name} data without its per-tensor scale "
                                        f"{(layouts.second_scale_names(rec.key[1]) or ['?'])[0]}"))
                rec.broken = rec.broken or "its per-tensor scale is missing"
            else:
                try:
                    t = ck.readers[rec.second_scale[0]].tensor(rec.second_scale[1])
                    kind = stats.scale_kind(ck.entry(rec.second_scale).dtype)
                    second = stats.scale_values(t, kind) if kind else None
                except CheckpointError as exc:
                    self.file_error(exc)
                    rec.unread = exc.reason
        if rec.hist is None:
            return
        fmt = formats.E2M1FN
        cs = stats.code_stats(stats.fp4_histogram(rec.hist), fmt)
        rec.code_stats = cs
        sc = rec.scale
        if rec.broken or sc is None or sc.stats is None or sc.granularity is None or cs.max_abs is None \
                or sc.stats.absmax is None or rec.packed_logical is None:
            return
        self._zeroed_blocks(ck, rec, fmt, rec.packed_logical,
                            lambda: stats.unpack_fp4(ck.readers[rec.key[0]].tensor(rec.key[1])).reshape(-1))
        factor = 1.0
        if second is not None and second.size == 1 and np.isfinite(second).all() and float(second.reshape(-1)[0]):
            g = float(second.reshape(-1)[0])
            factor = abs(1.0 / g if lay.second_direction == layouts.DIVIDE else g)
        threshold = stats.overflow_threshold(ck.dequant_dtype)
        cs = rec.code_stats = copy.copy(cs)
        cs.dequant_absmax_bound = cs.max_abs * sc.stats.absmax * factor
        granules, logical = sc.granularity, rec.packed_logical

        def count(at: float) -> int:
            values = _scale_values(ck, sc)
            codes = stats.unpack_fp4(ck.readers[rec.key[0]].tensor(rec.key[1])).reshape(-1)
            return stats.dequant_overflow(codes, fmt, np.where(np.isfinite(values), values, 0.0) * factor,
                                          granules, logical, at)

        if cs.dequant_absmax_bound < threshold:
            cs.dequant_overflow = 0
            self._magnitude(ck, rec, cs.dequant_absmax_bound, 0, count)
            return
        try:
            cs.dequant_overflow = count(threshold)
        except CheckpointError as exc:
            self.file_error(exc)
            rec.unread = exc.reason
            return
        self._magnitude(ck, rec, cs.dequant_absmax_bound, cs.dequant_overflow, count)
        self._overflow_finding(ck, rec, cs.dequant_overflow, threshold, f"; largest block scale {sc.stats.absmax:g}")

    def _block_plan(self, ck: Checkpoint, rec: Record, dst: formats.Format, natural: float,
                    whole: targets.ConversionPlan) -> targets.ConversionPlan:
        """When some scale elements cannot take the natural factor exactly (an e8m0 scale of 254, an fp16 scale
        >= 32768), a plan per block: those blocks keep their scale and only their values that do not fit ``dst``
        are lost, where the whole-tensor plan (factor 1 everywhere) would lose every such value of the tensor."""
        sc = rec.scale
        assert sc is not None and sc.kind is not None and sc.granularity is not None and rec.entry is not None
        fmt = rec.fmt
        assert fmt is not None
        try:
            values = _scale_values(ck, sc)
            ok = stats.factor_exact_mask(np.asarray(values, dtype=np.float64), sc.kind, natural)
            if not ok.any():
                return whole
            shape = rec.entry.shape
            ok3 = granularity.normalise(ok.astype(np.float64), sc.granularity, shape)
            bad_natural = targets.conversion_table(fmt, dst, natural)[1] == 0
            bad_one = targets.conversion_table(fmt, dst, 1.0)[1] == 0
            codes = stats.as_bytes(ck.readers[rec.key[0]].tensor(rec.key[1])).numpy()
        except CheckpointError as exc:
            self.file_error(exc)
            rec.unread = exc.reason
            return whole
        _, _, i = granularity.data_dims(shape)
        rows = codes.size // max(i, 1)
        step = max(1, (1 << 22) // max(i, 1))
        inexact = 0
        for r0 in range(0, rows, step):
            r1 = min(rows, r0 + step)
            c = codes[r0 * i:r1 * i].reshape(r1 - r0, i)
            take = granularity.expand_rows(ok3, sc.granularity, shape, r0, r1) > 0.5
            inexact += int(np.count_nonzero(np.where(take, bad_natural[c], bad_one[c])))
        if inexact >= whole.inexact:
            return whole
        kept = int(np.count_nonzero(~ok))
        rec.block_ok = ok
        reason = ""
        if inexact:
            reason = (f"{findings.plural(kept, 'scale element')} cannot be multiplied by {natural:g} exactly in "
                      f"{sc.entry.dtype}; their blocks keep their scale, where {findings.plural(inexact, 'value')} "
                      f"{'does' if inexact == 1 else 'do'} not fit {dst.name}")
        return targets.ConversionPlan(fmt.name, dst.name, natural, inexact == 0, inexact, whole.nan_kept,
                                      whole.neg_zero_to_zero, reason, blocks_kept=kept)

    def _scale_x2_overflow(self, ck: Checkpoint, rec: Record) -> int:
        """Data elements under the scale elements that overflow their dtype when doubled, as the loaders that
        double scales in place do (vLLM's normalisation, Quark's e4m3fn_to_e4m3fnuz): their scale becomes Inf."""
        sc = rec.scale
        if sc is None or sc.granularity is None or sc.kind is None or rec.entry is None:
            return 0
        try:
            values = _scale_values(ck, sc)
        except CheckpointError as exc:
            self.file_error(exc)
            rec.unread = exc.reason
            return 0
        limit = {"float16": formats.FLOAT16.max, "bfloat16": formats.BFLOAT16.max,
                 "float64": formats.FLOAT64.max}.get(sc.entry.dtype, formats.FLOAT32.max)  # e8m0: float32 at load
        s3 = granularity.normalise(np.asarray(values, dtype=np.float64), sc.granularity, rec.entry.shape)
        with np.errstate(over="ignore", invalid="ignore"):
            over = np.abs(s3) * 2 > limit  # NaN scales are SCALE_NONFINITE's
        return int((granularity.elements_under(sc.granularity, rec.entry.shape, s3.shape) * over).sum())

    def _remember(self, key: tuple[Any, ...], make: Any) -> Any:
        """``make()``, or what it gave for ``key`` before: a pure function of a histogram, once per histogram."""
        found = self._memo.get(key)
        if found is None:
            if len(self._memo) >= _MEMO_ENTRIES:
                self._memo.clear()
            found = self._memo[key] = make()
        return found

    def _exact_overflow(self, ck: Checkpoint, rec: Record, threshold: float) -> int:
        sc = rec.scale
        assert sc is not None and sc.granularity is not None and sc.kind is not None and rec.fmt is not None
        assert rec.entry is not None
        values = _scale_values(ck, sc)
        flat = stats.as_bytes(ck.readers[rec.key[0]].tensor(rec.key[1]))
        return stats.dequant_overflow(flat, rec.fmt, values, sc.granularity, rec.entry.shape, threshold)
