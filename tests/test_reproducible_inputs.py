"""The same seed draws the same inputs whatever the user's modules hold (issue 21, item 5).

Hypothesis mixes the literals of every local module imported into its draws;
fp8check's draws run without that pool (:func:`fp8check.strategies.without_local_constants`).
"""

import hashlib
import importlib
import sys

import pytest

from fp8check import formats
from fp8check.casts import engine


def _drawn(seed):
    bits = engine.hypothesis_bits(formats.get("e4m3fnuz"), "float32", max_examples=200, seed=seed)
    return bits.tobytes()


@pytest.mark.parametrize("seed", [None, 3], ids=["derandomized", "seed-3"])
def test_constants_added_to_a_user_module_do_not_change_the_inputs(tmp_path, monkeypatch, seed):
    before = _drawn(seed)
    # A kernel author's module gains constants it never uses (floats and ints, as a lookup table would).
    # (Each case's constants are its own: the pool keeps what an earlier case imported.)
    k = 1 if seed is None else seed + 2
    name = f"user_kernel_constants_{k}"
    (tmp_path / f"{name}.py").write_text(
        "TABLE = (" + ", ".join(repr(k + i / 977.0) for i in range(300)) + ")\n"
        "STRIDES = (" + ", ".join(str(7919 * i + k) for i in range(300)) + ")\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    importlib.import_module(name)
    try:
        after = _drawn(seed)
    finally:
        sys.modules.pop(name, None)
    assert hashlib.sha256(after).hexdigest() == hashlib.sha256(before).hexdigest()
    assert after == before  # byte for byte


def test_a_host_s_own_hypothesis_draws_keep_the_local_constants(tmp_path, monkeypatch):
    """Only fp8check's draws lose the pool: after the block, Hypothesis harvests again as it would."""
    providers = pytest.importorskip("hypothesis.internal.conjecture.providers")
    if not hasattr(providers, "_get_local_constants"):
        pytest.skip("this Hypothesis release harvests no local constants")
    from fp8check.strategies import without_local_constants

    original = providers._get_local_constants
    with without_local_constants():
        assert providers._get_local_constants is not original
        assert len(providers._get_local_constants()) == 0
    assert providers._get_local_constants is original
