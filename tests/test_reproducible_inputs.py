"""The same seed draws the same inputs whatever the user's modules hold (issue 21, item 5).

Hypothesis mixes the literals of every local module imported into its draws;
fp8check's draws run without that pool (:func:`fp8check.strategies.without_local_constants`):
the cast engine's and the quantizer check's draws (``fp8check check``), and the
shipped suite's properties under pytest (the plugin wraps their calls).
"""

import hashlib
import importlib
import sys

import pytest

# pytester's in-process runs unload modules first imported inside them: import here what the plugin imports
# lazily, so that both runs share one copy (as tests/test_plugin.py does).
import hypothesis  # noqa: F401
import hypothesis.strategies  # noqa: F401
import fp8check.casts.adapters.user  # noqa: F401
import fp8check.results  # noqa: F401
import fp8check.strategies  # noqa: F401
import fp8check.suite  # noqa: F401
from fp8check import formats
from fp8check.casts import engine

pytest_plugins = ["pytester"]


def _constants_module(tmp_path, monkeypatch, name, k):
    """A kernel author's module that gains constants it never uses (floats and ints, as a lookup table would).
    Each caller's constants are its own: the pool keeps what an earlier test imported."""
    (tmp_path / f"{name}.py").write_text(
        "TABLE = (" + ", ".join(repr(k + i / 977.0) for i in range(300)) + ")\n"
        "STRIDES = (" + ", ".join(str(7919 * i + k) for i in range(300)) + ")\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    importlib.import_module(name)


def _cast_draws(seed):
    return engine.hypothesis_bits(formats.get("e4m3fnuz"), "float32", max_examples=200, seed=seed).tobytes()


def _quantizer_draws(seed):
    from fp8check import quantizers
    from fp8check.quantizers.conformance import _run_hypothesis

    drawn = []
    _run_hypothesis(quantizers.get("rowwise"), lambda case: drawn.append(case.dtype.encode() + case.x.tobytes()),
                    max_examples=60, seed=seed, dtypes=("float32", "bfloat16"))
    return b"".join(drawn)


@pytest.mark.parametrize("draws", [_cast_draws, _quantizer_draws], ids=["cast", "quantizer"])
@pytest.mark.parametrize("seed", [None, 3], ids=["derandomized", "seed-3"])
def test_constants_added_to_a_user_module_do_not_change_the_inputs(tmp_path, monkeypatch, seed, draws):
    before = draws(seed)
    name = f"user_kernel_constants_{draws.__name__}_{seed}"
    _constants_module(tmp_path, monkeypatch, name, 1 if seed is None else seed + 2)
    try:
        after = draws(seed)
    finally:
        sys.modules.pop(name, None)
    assert len(before) > 400  # at least 100 float32 values drawn
    assert hashlib.sha256(after).hexdigest() == hashlib.sha256(before).hexdigest()
    assert after == before  # byte for byte


RECORDING_KERNEL = '''
import hashlib, os
import torch

def cast(x):
    with open(os.environ["FP8CHECK_INPUT_LOG"], "a") as log:
        log.write(hashlib.sha256(x.detach().cpu().contiguous().view(torch.uint8).numpy().tobytes()).hexdigest() + "\\n")
    return x.float().clamp(-240, 240).to(torch.float8_e4m3fnuz)
'''


@pytest.mark.slow  # 2 x 400 examples through a declared kernel (a changed pool shows after about 40)
def test_the_suite_s_properties_draw_the_same_inputs_under_pytest(pytester, monkeypatch):
    """A repository's own module gains constants (imported by its conftest.py): the shipped suite's Hypothesis
    property feeds the declared kernel the same inputs, byte for byte, in the same order."""
    pytest.importorskip("torch")
    pytester.makepyfile(kern=RECORDING_KERNEL)
    pytester.makefile(".toml", pyproject='[[tool.fp8check.cast]]\nkernel = "kern:cast"\nformat = "e4m3fnuz"\n'
                      'profile = "satfinite"\ninput-dtypes = ["float32"]\n')
    # Derandomized like fp8check-ci, with enough examples that a changed constants pool shows.
    profile = ("import hypothesis\nhypothesis.settings.register_profile('repro', derandomize=True, database=None, "
               "max_examples=400, deadline=None)\n")
    logs = []
    for run, extra in enumerate(["", "import user_table_constants  # noqa: F401\n"]):
        if extra:
            pytester.makepyfile(user_table_constants="TABLE = (" + ", ".join(
                repr(0.75 + i / 613.0) for i in range(300)) + ")\nWORDS = (" + ", ".join(
                str(0x3F800000 + 40961 * i) for i in range(300)) + ")\n")  # float32 patterns, as a table
        pytester.makeconftest(profile + extra)
        log = pytester.path / f"inputs-{run}.log"
        monkeypatch.setenv("FP8CHECK_INPUT_LOG", str(log))
        result = pytester.runpytest("-p", "no:cacheprovider", "-k", "matches_reference_on_hypothesis_inputs",
                                    "--fp8check-hypothesis-profile", "repro")
        result.assert_outcomes(passed=1)
        logs.append(log.read_text().splitlines())
    sys.modules.pop("user_table_constants", None)
    assert len(logs[0]) > 100
    assert logs[1] == logs[0]


def test_a_host_s_own_hypothesis_draws_keep_the_local_constants():
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
