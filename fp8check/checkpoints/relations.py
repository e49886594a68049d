"""Rules between tensors, as data per layout (issue 33, item 1; DESIGN: "relation between tensors").

What a layout and its config require across the modules of a checkpoint, checked after the scales are read:

- the scale set of every quantized module: its layout's input scale where the config declares static activations
  (:data:`conventions.QuantConfig.static_activations`, or a MIXED_PRECISION layer whose scheme is static), none
  where it declares dynamic ones (:data:`conventions.QuantConfig.dynamic_activations`);
- siblings (modules named alike but for their indices: experts, layers) carry the same tensors in the same dtypes;
  the odd one is named;
- shards a loader fuses into one matmul (:data:`FUSED`) agree on the scales their layout shares per fused layer
  (``Layout.fused_shared``), and on their per-layer scheme;
- ModelOpt MIXED_PRECISION: each quantized module is stored as its ``quantized_layers`` entry says.

Each finding is attached to the data tensor it concerns and says what the cited loader does with the defect.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

import numpy as np

from fp8check.checkpoints import conventions, findings, layouts, stats
from fp8check.checkpoints.records import Checkpoint, Record
from fp8check.errors import CheckpointError

# The shards a loader fuses into one matmul: vLLM's packed_modules_mapping (qkv_proj: q/k/v_proj, gate_up_proj:
# gate/up_proj; models/llama.py and the MoE models' experts, whose w13 stacks w1 (gate) and w3 (up)).
FUSED = (("q_proj", "k_proj", "v_proj"), ("gate_proj", "up_proj"), ("w1", "w3"))
_INDEX = re.compile(r"(?<=\.)\d+(?=\.|$)")
# the data tensors of a module (the layouts' data suffixes, and ``weight`` without a layout): one per module, so
# that the tensors beside each are found in time linear in the number of tensors
_DATA_NAMES = frozenset({lay.data for lay in layouts.LAYOUTS} | {"weight"})


@dataclass
class Module:
    """One quantized module: its data tensor and the names of the tensors beside it (by suffix)."""

    name: str
    rec: Record
    lay: layouts.Layout | None
    stem: str  # the data tensor's name without the layout's data suffix: stem + suffix names a companion
    companions: dict[str, str] = field(default_factory=dict)  # suffix -> dtype, the tensors named stem + suffix


def _modules(ck: Checkpoint) -> list[Module]:
    # tensors by their parent module (name up to its last dot): one pass, so the audit stays linear in tensors
    children: dict[str, dict[str, str]] = {}
    for rec in ck.records:
        if rec.entry is not None:
            parent, _, leaf = rec.key[1].rpartition(".")
            children.setdefault(parent, {}).setdefault(leaf, rec.entry.dtype)
    out = []
    for rec in ck.records:
        if rec.entry is None or rec.role not in (conventions.ROLE_FP8, conventions.ROLE_PACKED):
            continue
        lay = rec.layout
        data = lay.data if lay is not None and rec.key[1].endswith(lay.data) else rec.key[1].rpartition(".")[2]
        stem = rec.key[1][: len(rec.key[1]) - len(data)]
        if data not in _DATA_NAMES or not stem:
            continue  # not a module's weight (an FP8 tensor named otherwise): no module around it to compare
        m = Module(name=stem.rstrip("._"), rec=rec, lay=lay, stem=stem)
        # the companions of this module only (stem + a leaf name): a deeper module's tensors are its own
        parent, _, head = stem.rpartition(".")
        m.companions = {leaf[len(head):]: dt for leaf, dt in children.get(parent, {}).items()
                        if leaf.startswith(head) and parent + "." + leaf != rec.key[1] and leaf != head}
        out.append(m)
    return out


def relation_findings(ck: Checkpoint) -> None:
    """Every rule between the tensors of one checkpoint; findings go to the data tensors they concern."""
    modules = _modules(ck)
    missing_input = _input_scales(ck, modules)
    _unread_input_scales(ck, modules)
    _siblings(modules, missing_input)
    _fused(ck, modules)
    if ck.config.layer_schemes:
        _layer_schemes(ck, modules)


# -- the scale set: static activations ---------------------------------------------------------------------------


def _static_source(ck: Checkpoint, m: Module) -> str:
    """The config key that makes this module's activations static, or ""."""
    if ck.config.layer_schemes:
        algo = _listed_scheme(ck.config.layer_schemes, m.name)
        return f'quantized_layers "{algo}"' if algo in conventions.MODELOPT_STATIC else ""
    return ck.config.static_activations


def _fused_partners(m: Module, by_name: dict[str, Module]) -> list[Module]:
    parent, _, leaf = m.name.rpartition(".")
    for group in FUSED:
        if leaf in group:
            return [by_name[f"{parent}.{x}"] for x in group if x != leaf and f"{parent}.{x}" in by_name]
    return []


def _input_scales(ck: Checkpoint, modules: list[Module]) -> set[tuple[str, str]]:
    """INPUT_SCALE_MISSING; returns (module, suffix) of each one reported (the sibling rule skips them)."""
    reported: set[tuple[str, str]] = set()
    by_name = {m.name: m for m in modules}
    for m in modules:
        source = _static_source(ck, m)
        if not source or m.lay is None or m.lay.input_scale in m.companions:
            continue
        partners = [p for p in _fused_partners(m, by_name) if m.lay.input_scale in p.companions]
        want = m.stem + m.lay.input_scale
        if partners:
            m.rec.findings.append(findings.make(
                "INPUT_SCALE_MISSING", 1,
                f"{want} is missing ({source}); vLLM fuses this module with {partners[0].name} and keeps one input "
                f"scale for the fused shards (their max; an expert's gate and up share one slot), so theirs stands "
                f"in for it", findings.WARNING))
        else:
            m.rec.findings.append(findings.make(
                "INPUT_SCALE_MISSING", 1,
                f"{want} is missing, but {source}: vLLM leaves the parameter at float32's lowest value "
                "(fp8_utils.create_fp8_input_scale), so this module's activations are quantized with a scale of "
                "-3.4e38: NaN/garbage output"))
        reported.add((m.name, m.lay.input_scale))
    return reported


def _unread_input_scales(ck: Checkpoint, modules: list[Module]) -> None:
    """INPUT_SCALE_UNUSED: a stored input scale under a config that declares dynamic activations."""
    source = ck.config.dynamic_activations
    if not source or ck.config.static_activations or ck.config.layer_schemes:
        return
    for m in modules:
        if m.lay is None or m.lay.input_scale not in m.companions:
            continue
        m.rec.findings.append(findings.make(
            "INPUT_SCALE_UNUSED", 1,
            f"{m.stem + m.lay.input_scale} is stored, but {source}: vLLM creates no input scale parameter then "
            "(fp8.py Fp8LinearMethod, compressed_tensors_w8a8_fp8.py) and quantizes activations at run time, so "
            "no loader reads it; if the model was calibrated and evaluated with these scales, the config should "
            "declare static activations"))


# -- siblings ------------------------------------------------------------------------------------------------------


def _siblings(modules: list[Module], reported: set[tuple[str, str]]) -> None:
    """SIBLING_MISMATCH: within modules named alike but for their indices, a scale most carry and one lacks (or
    holds in another dtype)."""
    groups: dict[str, list[Module]] = {}
    for m in modules:
        groups.setdefault(_INDEX.sub("N", m.name), []).append(m)
    for pattern, members in groups.items():
        if len(members) < findings.SIBLINGS_MIN or pattern == members[0].name:
            continue
        counts: dict[str, dict[str, int]] = {}
        for m in members:
            for suffix, dt in m.companions.items():
                counts.setdefault(suffix, {}).setdefault(dt, 0)
                counts[suffix][dt] += 1
        for suffix, by_dtype in counts.items():
            carried = sum(by_dtype.values())
            if carried * 2 <= len(members) or conventions.scale_role_by_name(suffix) is None:
                continue
            usual = max(by_dtype, key=lambda d: by_dtype[d])
            for m in members:
                dt = m.companions.get(suffix)
                if dt is None and (m.name, suffix) not in reported and not _block_scale(m, suffix):
                    m.rec.findings.append(findings.make(
                        "SIBLING_MISMATCH", 1,
                        f"{m.stem + suffix} is missing, which {carried} of its {len(members)} siblings "
                        f"({pattern}) carry: a loader fusing them keeps its initial value for this one"))
                elif dt is not None and dt != usual:
                    m.rec.findings.append(findings.make(
                        "SIBLING_MISMATCH", 1,
                        f"{m.stem + suffix} is {dt} where {by_dtype[usual]} of its {len(members)} siblings "
                        f"({pattern}) hold {usual}", findings.WARNING))


def _block_scale(m: Module, suffix: str) -> bool:
    """Whether ``suffix`` names the module's own block or per-tensor scale: SCALE_MISSING reports those."""
    if m.lay is not None:
        return suffix in (m.lay.scale, m.lay.second_scale)
    return any(c == m.stem + suffix for c in conventions.scale_candidates(m.rec.key[1]))


# -- fused shards --------------------------------------------------------------------------------------------------


def _scalar(ck: Checkpoint, name: str) -> float | None:
    """The value of a one-element scale tensor of this checkpoint, or None."""
    for path, reader in ck.readers.items():
        entry = reader.entries.get(name)
        if entry is None:
            continue
        kind = stats.scale_kind(entry.dtype)
        if kind is None or entry.numel != 1 or entry.note:
            return None
        try:
            return float(stats.scale_values(reader.tensor(name), kind).reshape(-1)[0])
        except CheckpointError:
            return None
    return None


def _fused(ck: Checkpoint, modules: list[Module]) -> None:
    """FUSED_SCALE_MISMATCH: shards of one fused layer whose shared scales differ."""
    by_name = {m.name: m for m in modules}
    seen: set[str] = set()
    for m in modules:
        if m.lay is None or m.name in seen:
            continue
        shards = [m] + [p for p in _fused_partners(m, by_name) if p.lay is m.lay]
        seen.update(s.name for s in shards)
        if len(shards) < 2:
            continue
        _fused_input_scales(ck, m, shards)
        for suffix in m.lay.fused_shared:
            differing = _differing(ck, m, shards, suffix)
            if differing is not None:
                known, ratio, head = differing
                _mismatch(shards, known, f"{head}: {m.lay.fused_loader}",
                        findings.ERROR if ratio > findings.FUSED_RATIO_ERROR else findings.WARNING)


def _differing(ck: Checkpoint, m: Module, shards: list[Module],
               suffix: str) -> tuple[dict[str, float], float, str] | None:
    """The shards' positive finite values of the scale ``suffix``, their max / min and the words naming them, where
    at least two differ (else None)."""
    values = {s.name: _scalar(ck, s.stem + suffix) for s in shards}
    known = {k: v for k, v in values.items() if v is not None and np.isfinite(v) and v > 0}
    if len(known) < 2 or len(set(known.values())) == 1:
        return None
    ratio = max(known.values()) / min(known.values())
    listed = ", ".join(f"{k.rpartition('.')[2]} {v:.6g}" for k, v in known.items())
    layer = m.name.rpartition(".")[0]
    return known, ratio, f"{suffix} differs across the fused shards of {layer} ({listed}; {ratio:.3g}x)"


def _mismatch(shards: list[Module], known: dict[str, float], text: str, severity: str) -> None:
    """FUSED_SCALE_MISMATCH on each shard that holds one of the differing values."""
    for s in shards:
        if s.name in known:
            s.rec.findings.append(findings.make("FUSED_SCALE_MISMATCH", len(known), text, severity))


def _fused_input_scales(ck: Checkpoint, m: Module, shards: list[Module]) -> None:
    """FUSED_SCALE_MISMATCH: static input scales that differ across shards that read the same input. A MoE expert's
    gate and up share one input-scale slot in vLLM's FusedMoE loader, which refuses a second value more than 1e-5
    off under compressed-tensors (an error: the checkpoint does not load) and else keeps the one loaded last; a
    dense fused layer's input is quantized with their max (a warning)."""
    differing = _differing(ck, m, shards, m.lay.input_scale) if m.lay is not None and m.lay.input_scale else None
    if differing is None:
        return
    known, ratio, head = differing
    what = f"{head}, which quantize the same input: one calibration of one tensor gives one scale. "
    severity = findings.WARNING
    if ".experts." in m.name:
        if m.lay.name.startswith("compressed-tensors") and max(known.values()) - min(known.values()) > 1e-5:
            severity = findings.ERROR
            what += ("vLLM's FusedMoE loader keeps one input scale per expert for gate and up and raises "
                     "'input_scales of w1 and w3 of a layer must be equal' under compressed-tensors: it does not load")
        else:
            what += ("vLLM's FusedMoE loader keeps one input scale per expert for gate and up, the one loaded last: "
                     "the other shard's activations are quantized with a scale it was not calibrated for")
    else:
        what += (f"vLLM quantizes the fused layer's input with their max, so the shards calibrated smaller lose "
                 f"{np.log2(ratio):.2g} binades of their range at the bottom (into subnormals and zero)")
    _mismatch(shards, known, what, severity)


# -- per-layer schemes (ModelOpt MIXED_PRECISION) --------------------------------------------------------------------


def _listed_scheme(schemes: dict[str, str], module: str) -> str:
    """The quant_algo ``quantized_layers`` gives a module: its own entry, else its nearest listed ancestor's."""
    name = module
    while name:
        if name in schemes:
            return schemes[name]
        name = name.rpartition(".")[0]
    return ""


def _layer_schemes(ck: Checkpoint, modules: list[Module]) -> None:
    """LAYER_SCHEME: each quantized module stored as quantized_layers lists it; fused shards of one scheme."""
    schemes = ck.config.layer_schemes
    by_name = {m.name: m for m in modules}
    for m in modules:
        listed = _listed_scheme(schemes, m.name)
        stored = "NVFP4" if m.rec.role == conventions.ROLE_PACKED else "FP8"
        if not listed:
            m.rec.findings.append(findings.make(
                "LAYER_SCHEME", 1,
                f"{m.name} is stored as {stored} but quantized_layers does not list it: vLLM "
                "(ModelOptMixedPrecisionConfig) builds it unquantized and loads its codes as plain values"))
            continue
        family = "NVFP4" if listed in conventions.MODELOPT_NVFP4 else "FP8"
        if family != stored:
            m.rec.findings.append(findings.make(
                "LAYER_SCHEME", 1, f"{m.name} is stored as {stored} but quantized_layers lists it as {listed}"))
            continue
        differ = [f"{p.name.rpartition('.')[2]} {algo}" for p in _fused_partners(m, by_name)
                  if (algo := _listed_scheme(schemes, p.name)) and algo != listed]
        if differ:
            m.rec.findings.append(findings.make(
                "LAYER_SCHEME", 1, f"{m.name} is listed as {listed} and its fused shards as {', '.join(differ)}: vLLM "
                                   "raises 'Mixed quant_algo within fused layer'"))
