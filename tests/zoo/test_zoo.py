"""fp8check.zoo: every entry whose package is installed here, checked against what it claims.

A conforming entry asserts conformance; an entry with known divergences is a
strict xfail naming them (their upstream issue, or "no upstream issue
found"), so a fix upstream shows up as XPASS. Entries whose package is not
installed are skipped by name. Triton entries run in a child process (the
interpreter must be switched on before triton is imported).
"""

import json
import os
import subprocess
import sys

import numpy as np
import pytest

from fp8check import quantizers, zoo
from fp8check.quantizers.conformance import check_quantizer, reference_kernel

torch = pytest.importorskip("torch")

ENTRIES = zoo.entries()
TRITON = {"interpret", "interpret-f32", "compiled"}


def test_every_entry_names_a_known_recipe_and_cites_its_claim():
    for e in ENTRIES:
        if e.kind == "quantize":
            quantizers.get(e.claims)
        assert e.citation and e.versions and e.modes
        for k in e.known:
            assert k.upstream, e.id


def _run_child(entry_id, mode):
    code = ("import json, sys; from fp8check import zoo; "
            f"r = zoo.run_entry({entry_id!r}, mode={mode!r}, max_examples=5); "
            "print('ZOO' + json.dumps({'status': r.status, 'categories': r.categories, 'detail': r.detail}))")
    env = dict(os.environ, TRITON_INTERPRET="1")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=900)
    line = next((ln for ln in proc.stdout.splitlines() if ln.startswith("ZOO")), None)
    assert line, proc.stderr[-2000:]
    return json.loads(line[3:])


CASES = [(e, m) for e in ENTRIES for m in e.modes_for("cpu")]


@pytest.mark.parametrize("entry, mode", CASES, ids=[f"{e.id}[{m}]" for e, m in CASES])
def test_entry_against_its_claim(entry, mode, request):
    version = zoo.package_version(entry)
    if version is None:
        pytest.skip(f"{entry.package} is not installed")
    if not zoo.version_matches(version, entry.versions):
        pytest.skip(f"{entry.package} {version} is not the version checked ({entry.versions})")
    known = [k for k in entry.known if k.applies(mode, version) and k.categories]
    if known:
        request.applymarker(pytest.mark.xfail(strict=True, reason="; ".join(f"{k.summary} [{k.upstream}]" for k in known)))
    if mode in TRITON:
        out = _run_child(entry.id, mode)
    else:
        r = zoo.run_entry(entry, mode=mode, max_examples=5)
        out = {"status": r.status, "categories": r.categories, "detail": r.detail}
    assert out["status"] not in ("error", "unavailable"), out["detail"]
    assert not out["categories"], out


def test_vllm_normalize_turns_fn_nan_into_240():
    e = zoo.get("vllm.normalize_e4m3fn_to_e4m3fnuz")
    if zoo.package_version(e) is None:
        pytest.skip("vllm is not importable")
    r = zoo.run_entry(e)
    assert r.categories == {"nan": 2 * 5}  # 0x7F and 0xFF, for each of the five scales
    d = r.checks[0].divergences[0]
    assert (d.input_hex, d.actual_value) == ("0x7f", "240.0")


def test_compressed_tensors_bf16_double_rounding_reduced():
    e = zoo.get("compressed-tensors.channel.bf16")
    if zoo.package_version(e) is None:
        pytest.skip("compressed-tensors is not installed")
    from fp8check.zoo.compressed_tensors import make_quantize_channel

    x = torch.tensor([[1.8515625, 2.171875, 0.50390625, 9.0234375]], dtype=torch.bfloat16)
    q, s = make_quantize_channel()(x)
    ref = quantizers.quantize(x, quantizers.get("ct-rowwise-bf16"))
    assert np.array_equal(s.float().numpy().reshape(-1), ref.scales.reshape(-1))
    assert (q.view(torch.uint8).numpy() != ref.codes).any()  # the bf16 division rounds first


def test_zero_scale_and_scale_min_are_honoured_by_the_reference():
    r = quantizers.get("ct-rowwise")
    x = np.array([[0.0, 0.0], [1.0, -2.0]], dtype=np.float32)
    q = quantizers.quantize(x, r)
    assert q.scales.reshape(-1)[0] == np.float32(2.0 ** -23)
    g = quantizers.get("gemlite-per-token")
    assert quantizers.quantize(np.array([[1e-9]], dtype=np.float32), g).scales.reshape(-1)[0] == np.float32(1e-6)


def test_a_planted_scale_bug_in_a_zoo_recipe_is_caught():
    r = quantizers.get("per-token-group-1x128")
    good = reference_kernel(r)

    def one_ulp_off(x):  # what vLLM's amax * (1/448) does to some blocks, planted everywhere
        q, s = good(x)
        return q, torch.from_numpy(np.nextafter(s.numpy(), np.float32(np.inf)))

    assert check_quantizer(good, r, max_examples=3).passed
    assert check_quantizer(one_ulp_off, r, max_examples=3).categories["scale"] > 0
