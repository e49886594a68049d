"""Findings: stable codes, a severity, a count and a one-line message.

Each code's firing rule is written next to it (and in docs/audit.md); the
thresholds are the named constants below. ``count`` is the number of
elements concerned (codes, scale elements) unless the rule says otherwise.
Severities: ``error`` (the checkpoint is wrong or will compute wrong
values), ``warning`` (likely harm: values lost, a hazard on the stated
target), ``info`` (worth knowing, harmless as is).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

ERROR, WARNING, INFO = "error", "warning", "info"
SEVERITIES = (ERROR, WARNING, INFO)
SEVERITY_RANK = {ERROR: 2, WARNING: 1, INFO: 0}

# SATURATION fires when the ±max codes beyond one per scale block (a block's
# own amax may sit exactly at max) exceed this share of the tensor and this
# many elements, and pile up: they outnumber SATURATION_PILEUP times the
# codes one step below ±max. A smooth tail thins out towards max (the top
# bins have equal widths), so the max bin holding more than its neighbour is
# what clipping looks like; a scale rounded to bf16 pushes a few values just
# past max, which round to max anyway and do not pile up.
SATURATION_SHARE = 1e-3
SATURATION_MIN_COUNT = 16
SATURATION_PILEUP = 1.0
# UNDERFLOW fires when at least this share of the codes is zero while at
# least UNDERFLOW_EDGE_SHARE sits in the subnormal range: the distribution
# runs into the bottom of the format, so the zeros are values that rounded
# away, not structural zeros (a pruned or padded tensor has zeros but a
# healthy scale leaves almost nothing in the subnormals).
UNDERFLOW_ZERO_SHARE = 0.01
UNDERFLOW_EDGE_SHARE = 0.01
# WEIGHT_MAGNITUDE: a dequantized weight at or beyond this magnitude comes from a broken scale (see its rule).
WEIGHT_MAGNITUDE_BOUND = 65536.0
# SIBLING_MISMATCH compares a module with its siblings only when there are at least this many quantized ones.
SIBLINGS_MIN = 3
# FUSED_SCALE_MISMATCH is an error when the fused shards' shared scales differ by more than this factor.
FUSED_RATIO_ERROR = 2.0


# Which targets an error of a code breaks (DESIGN rule 16: an error is a defect after which a loader computes wrong
# values): every target, only fnuz ones (a loader's fn -> fnuz path), or none beyond what the verdict judges itself
# (the exactness of a conversion, the format's support: the verdict already says "cannot run" where they hold).
ALL_TARGETS, FNUZ_TARGETS, VERDICT_OWN = "all", "fnuz", "verdict"


@dataclass(frozen=True)
class FindingCode:
    code: str
    severity: str  # the default; portability codes depend on --target
    title: str
    rule: str
    breaks: str = ALL_TARGETS  # the targets an error of this code makes load wrong (ALL_TARGETS, FNUZ_TARGETS, ...)


CODES: dict[str, FindingCode] = {c.code: c for c in (
    FindingCode("NAN_CODES", ERROR, "NaN codes in FP8 data",
                "count of elements whose code is NaN in the tensor's own format; fires when > 0"),
    FindingCode("INF_CODES", ERROR, "Inf codes in FP8 data",
                "count of ±Inf codes (e5m2 only); fires when > 0"),
    FindingCode("NEG_ZERO_FNUZ_HAZARD", INFO, "0x80 bytes that are NaN if read as fnuz",
                "count of 0x80 (-0) codes in e4m3fn/e5m2 data; fires when > 0. Info: real weights hold a few "
                "(tiny negatives round to -0) and a correct fn -> fnuz conversion maps them to 0x00; a bare "
                "reinterpretation of the bytes as fnuz makes each one NaN (the verdict for a fnuz target says so)"),
    FindingCode("FNUZ_RANGE", ERROR, "values a fnuz target cannot hold",
                "count of elements of e4m3fn/e5m2 data that the conversion to the fnuz counterpart cannot "
                "represent exactly (scale x 2 when the scale allows it, else the same scale): values beyond "
                "±240 without a scale to absorb them, Inf; fires when > 0; error when a fnuz target is given, "
                "info otherwise", breaks=VERDICT_OWN),
    FindingCode("OCP_RANGE", ERROR, "values an OCP target cannot hold",
                "as FNUZ_RANGE for e4m3fnuz/e5m2fnuz data converted to e4m3fn/e5m2 (scale / 2, or the same "
                "scale); error when an OCP target is given, info otherwise", breaks=VERDICT_OWN),
    FindingCode("SATURATION", WARNING, "clipped values piled up at ±max",
                "let k = count of ±max codes minus one per scale element (0 without a scale) and n = count of "
                f"the two codes one step below ±max; fires when k >= {SATURATION_MIN_COUNT}, k / numel > "
                f"{SATURATION_SHARE:g} and k > {SATURATION_PILEUP:g} x n; count = k"),
    FindingCode("UNDERFLOW", WARNING, "values underflowed to zero",
                f"fires when zero codes >= {UNDERFLOW_ZERO_SHARE:g} of the tensor and subnormal codes >= "
                f"{UNDERFLOW_EDGE_SHARE:g} (the distribution runs into the bottom of the format); count = zero codes"),
    FindingCode("SCALE_NONFINITE", ERROR, "NaN or Inf scales",
                "count of scale elements that are NaN or ±Inf (e8m0: 0xFF); fires when > 0"),
    FindingCode("SCALE_NONPOSITIVE", ERROR, "zero or negative scales",
                "count of finite scale elements <= 0 (a KV-cache scale of exactly -1 means absent and is "
                "KV_SCALE_ABSENT instead); fires when > 0"),
    FindingCode("SCALE_SUBNORMAL", WARNING, "subnormal scales",
                "count of scale elements that are subnormal in their stored dtype (e8m0: 2^-127, subnormal in "
                "the float32 kernels expand it to); flushed to zero under FTZ; fires when > 0"),
    FindingCode("SCALE_SHAPE", ERROR, "scale shape fits no granularity",
                "the scale's shape fits none of tensorwise, rowwise, colwise, block (power-of-two or configured "
                "sizes, ragged edges), group, mx-e8m0 for the data's shape; count = scale elements"),
    FindingCode("SCALE_MISSING", ERROR, "quantized tensor (FP8, or packed FP4 data) without a scale",
                "no scale found under any known name; error when the checkpoint declares a quantization config "
                "or other FP8 tensors have scales, or when the tensor is a weight (N.weight) and no config declares "
                "quantization or an FP8 torch_dtype (the scales and the config dropped: loaders read the raw FP8 "
                "values); warning otherwise; count = 1"),
    FindingCode("SCALE_UNPAIRED", WARNING, "a scale that pairs with nothing",
                "an FP8 tensor has no scale under any known name, but a scale-like tensor sits next to it (same "
                "module prefix, e.g. N.scale beside N.weight) that no known convention pairs with it; reported "
                "instead of SCALE_MISSING, naming the scale; count = such scales"),
    FindingCode("SCALE_DTYPE", ERROR, "scale stored in an unusable dtype",
                "the scale's dtype is none of float32/bfloat16/float16/float64/e8m0/uint8(e8m0)/e4m3fn; count = 1"),
    FindingCode("SCALE_AMBIGUOUS", WARNING, "more than one scale candidate",
                "two or more known scale names exist for one tensor (e.g. weight_scale and weight_scale_inv); "
                "the first in priority order is used; count = candidates"),
    FindingCode("SCALE_NOT_POW2", WARNING, "scales are not powers of two as the config declares",
                "the config declares ue8m0 scales (scale_fmt) but some scale elements are not powers of two; "
                "count = such elements"),
    FindingCode("DEQUANT_OVERFLOW", ERROR, "dequantized values overflow",
                "count of elements with |code value x scale| (exact) >= the overflow threshold of the "
                "dequantized dtype (max + half an ulp: bf16 (2 - 2^-8) x 2^127, fp16 65520); fires when > 0"),
    FindingCode("SCALE_OUTLIER", WARNING, "a scale far from its siblings",
                "the median of a weight's scale is >= 64x (or <= 1/64x) the median over the checkpoint's other "
                "weight scales of the same dtype (at least 3 of them); the message gives the factor and whether "
                "1/scale would match the siblings (an inverted scale); count = scale elements"),
    FindingCode("CONFIG_FORMAT", WARNING, "config and tensor disagree on the format",
                "the quantization config declares one FP8 format for the weights and the tensor is stored as "
                "another (e.g. e4m3fn declared, e4m3fnuz stored); count = numel"),
    FindingCode("KV_SCALE_ABSENT", INFO, "KV-cache scale marked absent",
                "a KV-cache scale element equals -1, the convention for 'no calibrated scale'"),
    FindingCode("BYTES_FORMAT_UNKNOWN", INFO, "one-byte integers next to a scale",
                "a uint8/int8 tensor has a scale but neither a config nor --bytes-format says it holds FP8 "
                "(it may be packed fp4 or e8m0 bytes); not audited as FP8"),
    FindingCode("TARGET_FORMAT", ERROR, "format the target cannot run",
                "--target given and the tensor's format is neither native there nor exactly convertible to a "
                "native counterpart (fn <-> fnuz of the same widths); count = numel", breaks=VERDICT_OWN),
    FindingCode("INDEX_MISSING_TENSOR", ERROR, "index names a tensor its shard lacks",
                "the index's weight_map maps a tensor to a shard that does not hold it; count = 1"),
    # Rules between tensors, scale encodings, magnitude and the fnuz load paths (issue 33). Severity by consequence:
    # error where a named loader then computes NaN, Inf, zeros or values off by more than 2x (DESIGN rule 16).
    FindingCode("INPUT_SCALE_MISSING", ERROR, "static activation scale missing",
                "the config declares static activations (activation_scheme static, input_activations dynamic false, "
                "quant_algo FP8/NVFP4, is_dynamic false) and a quantized module lacks its layout's input scale. "
                "Loader: vLLM creates the parameter filled with float32's lowest value (fp8_utils.py "
                "create_fp8_input_scale) and keeps it when the checkpoint has none: NaN/garbage output. Warning "
                "instead for one shard of a fused linear whose other shards carry one (vLLM takes their max); "
                "count = 1"),
    FindingCode("INPUT_SCALE_UNUSED", WARNING, "input scale stored under dynamic activations",
                "the config declares dynamic activations in so many words (activation_scheme \"dynamic\", "
                "input_activations dynamic true, is_dynamic true) and a quantized module carries its layout's input "
                "scale. Loader: vLLM creates no input scale parameter under dynamic activations (Fp8LinearMethod, "
                "CompressedTensorsW8A8Fp8) and quantizes each activation at run time, so the stored calibration is "
                "read by nothing: the config's scheme or the tensors are wrong; count = 1"),
    FindingCode("SIBLING_MISMATCH", ERROR, "a module unlike its siblings",
                f"modules named alike but for their indices (experts, layers; at least {SIBLINGS_MIN} quantized) "
                "carry the same tensors: a scale most siblings carry and this one lacks is an error (the loader's "
                "fused expert parameter keeps its initial value for it), a scale of another dtype a warning; the "
                "message names the odd module and how many siblings differ; count = 1"),
    FindingCode("FUSED_SCALE_MISMATCH", ERROR, "fused shards with different shared scales",
                "shards a loader fuses into one matmul (q/k/v, gate/up, w1/w3) hold different values of a scale "
                "the layout shares per fused layer (NVFP4 weight_scale_2 / weight_global_scale). Loader: vLLM "
                "keeps one value (the max, or the gate's for MoE experts) and dequantizes every shard with it, so a "
                "shard's weights are off by the ratio: error beyond 2x, warning up to 2x. Static input scales that "
                "differ across shards, which read the same input, are a warning (a dense layer's input is quantized "
                "with their max; an expert's gate and up share one slot, the last loaded), an error for a "
                "compressed-tensors expert (vLLM's FusedMoE loader raises: it does not load); count = shards"),
    FindingCode("LAYER_SCHEME", ERROR, "a module stored unlike its per-layer scheme",
                "the config lists per-layer schemes (ModelOpt MIXED_PRECISION quantized_layers) and a quantized "
                "module is stored in another format than listed, is not listed (vLLM builds it unquantized and "
                "loads its codes as plain values), or is a shard of a fused layer whose shards are listed with "
                "different schemes (vLLM raises 'Mixed quant_algo within fused layer'); count = 1"),
    FindingCode("STRATEGY_MISMATCH", ERROR, "a scale unlike its config's strategy",
                "compressed-tensors: a quantized module's weight scale has none of the shapes its config groups' "
                "weights.strategy gives it (tensor: [] or [1]; channel: [out, 1]; block [b0, b1]: "
                "[ceil(out/b0), ceil(in/b1)]; group g: [out, ceil(in/g)]), or its input scale holds more than one "
                "value (or is not [] / [1]) where the input_activations are static per tensor. Loader: vLLM allocates "
                "the strategy's shape and its loaders assert it (parameter.py): the checkpoint does not load; an "
                "expert's [1] scale under channel fills one row of vLLM's FusedMoE parameter, the others keep their "
                "initial 1.0. Warning for an expert's 0-d scale under channel (FusedMoE broadcasts it: the same "
                "values; older versions raise). Not reported where SCALE_SHAPE is; count = scale elements"),
    FindingCode("STRATEGY_INVALID", ERROR, "a strategy compressed-tensors refuses",
                "a config group's weights or input_activations declare what compressed-tensors' QuantizationArgs "
                "validation raises on (block without block_structure, block_structure without block, group or "
                "tensor_group without a positive group_size, group_size with another strategy, static token, dynamic "
                "channel or block, dynamic local without tensor_group): vLLM validates every group when it reads the "
                "config, so the checkpoint does not load; on every quantized tensor, one per refused key; count = 1"),
    FindingCode("SCALE_ENCODING", ERROR, "scale stored in another encoding than its layout writes",
                "the layout writes this scale as one dtype (float32; bf16/fp16/float32; e8m0 bytes; e4m3fn codes) "
                "and the file holds another: error where a loader's copy into its parameter converts the values "
                "numerically into another meaning (float scales into e8m0 bytes truncate to 0 = 2^-127; U8 bytes "
                "into an e4m3fn parameter become the integers; e8m0 bytes into a float parameter become 0-255), "
                "with the values implied; warning where the copy is exact (float16/bfloat16 into float32: the "
                "scales were only rounded when saved); count = scale elements"),
    FindingCode("WEIGHT_MAGNITUDE", ERROR, "dequantized weights beyond any trained model's",
                f"count of elements with |code value x scale(s)| >= {WEIGHT_MAGNITUDE_BOUND:g} (2^16) that do not "
                "overflow the dequantized dtype (DEQUANT_OVERFLOW counts those): beyond float16's range, so no "
                "model that runs in float16 holds such a weight, and orders of magnitude beyond the largest "
                "activations measured in LLMs (~1e4, Sun et al. 2024, 'Massive Activations in Large Language "
                "Models', arXiv:2402.17762), weights being far smaller. Seen with E8M0 bytes that are not biased "
                "exponents and with scales stored inverted; the message gives the largest value implied"),
    FindingCode("BLOCK_ZEROED", ERROR, "weights under a zero e8m0 scale",
                "count of nonzero codes under e8m0 scale bytes 0x00 (2^-127): every loader dequantizes them to within "
                "6 x 2^-127 of zero, so those blocks (a whole expert when all its scales are 0x00) compute zeros. "
                "An all-zero block legitimately has 0x00 (amax 0) and is not counted"),
    FindingCode("FNUZ_PLAIN_CAST", INFO, "values a plain cast to e4m3fnuz makes NaN",
                "a fnuz target is given and the e4m3fn tensor holds values beyond ±240: a plain "
                ".to(torch.float8_e4m3fnuz) under the same scale makes each NaN (torch's fnuz cast). Info, not an "
                "error: every full-range e4m3fn checkpoint holds such values, and the serving loaders (vLLM's "
                "normalize_e4m3fn_to_e4m3fnuz, SGLang's, Quark's) halve them exactly and double the scale: the "
                "checkpoint is right and a plain cast is the defect; count = such values"),
    FindingCode("FNUZ_SCALE_OVERFLOW", ERROR, "a scale a fnuz loader doubles to Inf",
                "elements of the e4m3fn tensor sit under a scale element whose double overflows its dtype "
                "(float32 or bfloat16 above 1.7e38, float16 from 32768): vLLM's normalize_e4m3fn_to_e4m3fnuz and Quark's "
                "e4m3fn_to_e4m3fnuz double the scale in place, so it becomes Inf and the outputs Inf/NaN; error "
                "with a fnuz target, warning otherwise; count = data elements under such scales", breaks=FNUZ_TARGETS),
)}


@dataclass(frozen=True)
class Finding:
    code: str
    severity: str
    count: int
    message: str

    def to_dict(self) -> dict[str, Any]:
        return {"code": self.code, "severity": self.severity, "count": self.count, "message": self.message}


def plural(count: int, word: str, words: str | None = None) -> str:
    """``1 code``, ``2 codes``: a count with its noun in the right number."""
    return f"{count} {word if count == 1 else (words or word + 's')}"


def of(part: int, whole: int, word: str, words: str | None = None) -> str:
    """``1 of 64 codes``, ``1 of 1 element``: a share (its verb: :func:`be`)."""
    return f"{part} of {plural(whole, word, words)}"


def be(count: int) -> str:
    return "is" if count == 1 else "are"


def make(code: str, count: int, message: str, severity: str | None = None) -> Finding:
    if code not in CODES:
        raise KeyError(f"unknown finding code {code!r}")
    return Finding(code=code, severity=severity or CODES[code].severity, count=int(count), message=message)


def worst(findings: list[Finding]) -> str | None:
    if not findings:
        return None
    return max(findings, key=lambda f: SEVERITY_RANK[f.severity]).severity


def breaks(finding: Finding, fnuz_target: bool) -> bool:
    """Whether an error ``finding`` makes a target's loaders compute wrong values (its code's ``breaks``)."""
    if finding.severity != ERROR:
        return False
    scope = CODES[finding.code].breaks
    return scope == ALL_TARGETS or (scope == FNUZ_TARGETS and fnuz_target)


def reaches(severity: str, fail_on: str) -> bool:
    return SEVERITY_RANK[severity] >= SEVERITY_RANK[fail_on]
