"""fp8check.zoo: every installed entry checked against what it claims.

Three kinds of test per entry whose package is installed here (the others
skip, naming the package):

- ``test_known_divergence_still_shows``: one strict xfail per known
  divergence, on its targeted input (``KnownIssue.example``; the whole
  deterministic check for the byte conversions and casts), naming the
  upstream issue. It XPASSes, and so fails, the day the package fixes it.
- ``test_entry_against_its_claim`` (slow): the edge cases and seeded
  Hypothesis inputs; passes when nothing diverges beyond the known
  categories.
- ``test_entry_quick``: the same with three seeded inputs and no edge cases
  (quantizers and conversions; a cast is checked whole by the other two).

Entries whose package takes a minute to import (``ZooEntry.heavy``) run in
the slow lane only.

A version outside the range an entry was checked with skips (versioned
data, never asserted unconditionally). Triton entries run through
fp8check.triton (no TRITON_INTERPRET needed).
"""

import numpy as np
import pytest

from fp8check import quantizers, zoo
from fp8check.quantizers.conformance import check_quantizer, reference_kernel

torch = pytest.importorskip("torch")

ENTRIES = zoo.entries()


def _usable(entry, mode):
    """Skip (naming the package) unless the entry can run here in ``mode``."""
    version = zoo.package_version(entry)
    if version is None:
        pytest.skip(f"{entry.package} is not installed")
    if not zoo.version_matches(version, entry.versions):
        pytest.skip(f"{entry.package} {version} is not the version checked ({entry.versions})")
    return version


def _ran(r):
    if r.status in ("error", "unavailable"):
        if r.status == "unavailable":
            pytest.skip(r.detail)
        pytest.fail(f"{r.entry.id} [{r.mode}]: {r.detail}")
    return r


def test_every_entry_names_a_known_recipe_cites_its_claim_and_shows_each_issue():
    for e in ENTRIES:
        if e.kind == "quantize":
            assert e.recipe().format.name == e.fmt, e.id
        assert e.citation and e.versions and e.modes, e.id
        for k in e.known:
            assert k.upstream, e.id
            if e.kind == "quantize" and k.categories:
                assert k.example is not None and k.shown_by, f"{e.id}: {k.summary[:60]} has no targeted input"


def _params(rows, ids):
    """Entries whose package takes a minute to import (``heavy``) run in the slow lane."""
    return [pytest.param(*row, id=i, marks=[pytest.mark.slow] if row[0].heavy else []) for row, i in zip(rows, ids)]


ISSUES = [(e, m, i) for e in ENTRIES for m in e.modes_for("cpu") for i, k in enumerate(e.known)
          if k.categories and k.applies(m, None)]


@pytest.mark.parametrize("entry, mode, index", _params(ISSUES, [f"{e.id}[{m}]-{i}" for e, m, i in ISSUES]))
def test_known_divergence_still_shows(entry, mode, index, request):
    issue = entry.known[index]
    _usable(entry, mode)
    request.applymarker(pytest.mark.xfail(strict=True, raises=AssertionError,
                                          reason=f"{issue.summary} [{issue.upstream}]"))
    cases = issue.example() if issue.example is not None else None
    r = _ran(zoo.run_entry(entry, mode=mode, cases=cases, max_examples=0))
    shown = {c: n for c, n in r.categories.items() if c in issue.categories and n}
    assert not shown, f"{entry.id} [{mode}] on {issue.shown_by or 'its check'}: {shown}"


GPU_ISSUES = [(e, m, i) for e in ENTRIES for m in e.modes_for("cuda") if m == "compiled"
              for i, k in enumerate(e.known) if k.categories and k.applies(m, None)]


@pytest.mark.gpu
@pytest.mark.parametrize("entry, mode, index", GPU_ISSUES, ids=[f"{e.id}[{m}]-{i}" for e, m, i in GPU_ISSUES])
def test_known_divergence_of_the_compiled_kernel_still_shows(entry, mode, index, request):
    """The same on a CUDA GPU, for what the compiled Triton kernels do (``gpu/run_all.sh tests-gpu``)."""
    if not torch.cuda.is_available():
        pytest.skip("needs a CUDA device (none found)")
    issue = entry.known[index]
    _usable(entry, mode)
    request.applymarker(pytest.mark.xfail(strict=True, raises=AssertionError,
                                          reason=f"{issue.summary} [{issue.upstream}]"))
    cases = issue.example() if issue.example is not None else None
    r = _ran(zoo.run_entry(entry, mode=mode, device="cuda", cases=cases, max_examples=0))
    shown = {c: n for c, n in r.categories.items() if c in issue.categories and n}
    assert not shown, f"{entry.id} [{mode}] on the GPU, {issue.shown_by or 'its check'}: {shown}"


CASES = [(e, m) for e in ENTRIES for m in e.modes_for("cpu")]
IDS = [f"{e.id}[{m}]" for e, m in CASES]


def _no_unknown_divergence(r):
    assert r.status in ("conforms", "known", "fixed?"), (
        f"{r.entry.id} [{r.mode}] {r.status}: {r.categories} beyond the known "
        f"{sorted(set().union(*(k.categories for k in r.known))) if r.known else []}; "
        f"first: {[d.detail for c in r.checks for d in c.divergences[:1]]}")


@pytest.mark.parametrize("entry, mode", _params(CASES, IDS))
def test_entry_quick(entry, mode):
    _usable(entry, mode)
    if entry.kind == "cast":
        pytest.skip("a cast's sweeps are checked whole by the slow test and the known-divergence test")
    _no_unknown_divergence(_ran(zoo.run_entry(entry, mode=mode, max_examples=3, seed=0, edge=False)))


@pytest.mark.slow
@pytest.mark.parametrize("entry, mode", CASES, ids=IDS)
def test_entry_against_its_claim(entry, mode):
    _usable(entry, mode)
    _no_unknown_divergence(_ran(zoo.run_entry(entry, mode=mode, max_examples=10, seed=0)))


# -- the zoo's own machinery, on fp8check's reference (no third-party package) -----------


def test_a_planted_scale_bug_in_a_zoo_recipe_is_caught():
    r = quantizers.get("per-token-group-1x128")
    good = reference_kernel(r)

    def one_ulp_off(x):  # what vLLM's amax * (1/448) does to some blocks, planted everywhere
        q, s = good(x)
        return q, torch.from_numpy(np.nextafter(s.numpy(), np.float32(np.inf)))

    assert check_quantizer(good, r, max_examples=3).passed
    assert check_quantizer(one_ulp_off, r, max_examples=3).categories["scale"] > 0


def test_a_known_example_shows_its_divergence_on_a_planted_kernel():
    # A targeted input is a real test: the reference conforms on it, and the same
    # reference with the bug planted (-0.0 written as +0) diverges on it, once.
    from fp8check.zoo.compressed_tensors import ENTRIES as CT

    e = next(x for x in CT if x.id == "compressed-tensors.channel.bf16")
    recipe = e.recipe()
    good = reference_kernel(recipe)

    def neg_zero_lost(x):
        q, s = good(x)
        q = q.clone()
        q[q.view(torch.uint8) == 0x80] = 0
        return q, s

    neg0 = e.known[0].example()
    assert check_quantizer(good, recipe, max_examples=0, cases=neg0).passed
    assert check_quantizer(neg_zero_lost, recipe, max_examples=0, cases=neg0).categories["codes"] == 1


def test_zero_scale_and_scale_min_are_honoured_by_the_reference():
    r = quantizers.get("ct-rowwise")
    x = np.array([[0.0, 0.0], [1.0, -2.0]], dtype=np.float32)
    q = quantizers.quantize(x, r)
    assert q.scales.reshape(-1)[0] == np.float32(2.0 ** -23)
    g = quantizers.get("gemlite-per-token")
    assert quantizers.quantize(np.array([[1e-9]], dtype=np.float32), g).scales.reshape(-1)[0] == np.float32(1e-6)


def test_the_224_recipe_keeps_its_target_under_fnuz():
    r = quantizers.get("per-token-group-1x128-224", "e4m3fnuz")
    assert r.amax_target == 224.0 and r.format.name == "e4m3fnuz"
    q = quantizers.quantize(np.array([[1.53125] + [0.0] * 127], dtype=np.float32), r)
    assert q.scales.reshape(-1)[0] == np.float32(1.53125 / 224)


def test_unknown_entry_and_mode_are_one_clear_error():
    from fp8check.errors import InvalidValueError

    with pytest.raises(InvalidValueError, match="unknown zoo entry"):
        zoo.get("nope")
    with pytest.raises(InvalidValueError, match="runs in"):
        zoo.run_entry("compressed-tensors.tensor", mode="compiled")
