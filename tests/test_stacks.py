"""The stack registry's logic, on explicit versions and platforms (never on what is installed)."""

import dataclasses

import pytest

from fp8check import profiles, stacks
from fp8check.stacks import Environment, Platform

NO_AMX = Environment(cpu_flags=frozenset({"avx2", "fma"}), gpu=None, machine="x86_64")
AMX = Environment(cpu_flags=frozenset({"avx2", "avx512f", "avx512_fp16", "amx_tile", "amx_bf16", "amx_int8"}),
                  gpu=None, machine="x86_64")
H200 = Environment(cpu_flags=frozenset({"avx2"}), gpu="sm90", machine="x86_64")


@pytest.mark.parametrize("version, profile", [("0.6.0", "ml_dtypes-0.6"), ("0.7.0", "ml_dtypes-0.7"),
                                              ("0.7.3", "ml_dtypes-0.7")])
def test_ml_dtypes_releases_map_to_their_profiles(version, profile):
    obs = stacks.lookup("ml_dtypes", version=version, env=NO_AMX)
    assert obs is not None and obs.profile.name == profile
    assert stacks.unpinned_reason("ml_dtypes", version=version, env=NO_AMX) is None


def test_what_a_release_fixed_is_a_line_not_a_known_bug():
    old, new = (stacks.lookup("ml_dtypes", version=v, env=NO_AMX) for v in ("0.6.0", "0.7.0"))
    assert stacks.E8M0_SUBNORMAL in old.known and stacks.E8M0_SUBNORMAL not in new.known
    assert any(k.kind == "exact" for k in old.known) and not any(k.kind == "exact" for k in new.known)
    assert any("fixed upstream in ml_dtypes 0.7.0" in line for line in new.fixed)


@pytest.mark.parametrize("version", ["0.8.0", "0.5.1", "1.0.0"])
def test_an_unobserved_release_is_unpinned_and_says_what_is_pinned(version):
    assert stacks.lookup("ml_dtypes", version=version, env=NO_AMX) is None
    reason = stacks.unpinned_reason("ml_dtypes", version=version, env=NO_AMX)
    assert f"ml_dtypes {version} casts" in reason and "not pinned" in reason and "0.6 (CPU)" in reason


def test_an_unpinned_release_claims_the_nearest_observed_profile():
    newer = stacks.claim("ml_dtypes", version="0.8.0")
    assert newer.observation is None and newer.profile is profiles.ML_DTYPES_0_7 and "not pinned" in newer.unpinned
    older = stacks.claim("ml_dtypes", version="0.5.1")
    assert older.profile is profiles.ML_DTYPES_0_6  # before every observation: the oldest
    torch_next = stacks.claim("torch", version="2.15.0")
    assert torch_next.profile is profiles.TORCH_2_12 and "torch 2.15.0" in torch_next.unpinned
    # torch CUDA has only older observations; the newest series at or below wins, CPU or not.
    assert stacks.claim("torch", device="cuda", version="2.13.0").profile is profiles.TORCH_2_12


def test_the_cpu_decides_which_scaled_mm_observation_applies():
    plain = stacks.lookup("torch", operation="scaled_mm", version="2.13.0", env=NO_AMX)
    assert plain is not None and plain.fact("fast_accum") == "ignored"
    assert stacks.lookup("torch", operation="scaled_mm", version="2.13.0", env=AMX) is None
    reason = stacks.unpinned_reason("torch", operation="scaled_mm", version="2.13.0", env=AMX)
    assert "amx_int8" in reason and "_scaled_mm" in reason and "not pinned" in reason
    assert stacks.lookup("torch", operation="scaled_mm", version="2.14.1", env=NO_AMX) is plain
    # 2.13 casts were pinned with and without AMX; 2.14 casts only on an AVX2 CPU
    assert stacks.lookup("torch", version="2.13.0", env=AMX) is not None
    assert stacks.lookup("torch", version="2.14.1", env=NO_AMX) is not None
    assert stacks.lookup("torch", version="2.14.1", env=AMX) is None


def test_cuda_observations_need_their_gpu():
    assert stacks.lookup("torch", device="cuda", version="2.11.0", env=H200).profile is profiles.TORCH_2_11
    assert stacks.lookup("torch", device="cuda", version="2.11.0", env=NO_AMX) is None
    assert stacks.lookup("triton", device="cuda", version="3.6.0", env=H200).profile is profiles.TRITON_SM90
    sm100 = dataclasses.replace(H200, gpu="sm100")
    assert stacks.lookup("triton", device="cuda", version="3.6.0", env=sm100) is None


def test_platforms_describe_themselves():
    assert Platform().describe() == "CPU"
    assert Platform(without_cpu_flags=frozenset({"amx_tile"})).describe() == "CPU without amx_tile"
    assert Platform(device="cuda", gpu="sm90").describe() == "CUDA sm90"
    assert "amx_tile" in AMX.describe() and "avx2" in NO_AMX.describe()


def test_every_observation_is_complete():
    for obs in stacks.OBSERVATIONS:
        assert obs.series and obs.measured and obs.pinned_by, obs
        assert (obs.profile is not None) == (obs.operation == "cast"), obs
        for k in obs.known:
            assert "issue" in k.reason or "upstream" in k.reason or "#" in k.reason, k.reason
