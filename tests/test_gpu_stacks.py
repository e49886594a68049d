"""Real stacks on a CUDA device (run on the H200; skipped without CUDA).

- torch CUDA casts equal the reference under the installed torch's profile
  (torch-2.11 on the GPU machine), from every 16-bit input, 16M float32 and
  float64 inputs near the ties;
- Triton compiled for the device casts float32/float16/bfloat16 to
  float8e4nv and float8e5 exactly as the ``triton-sm90`` profile says
  (saturating), on every 16-bit input and 16M float32;
- the reference's array-API model running on CUDA tensors equals the NumPy
  reference on the CPU, for every format and named profile.
"""

import numpy as np
import pytest

import fp8check
from fp8check import formats, profiles

from core_oracles import all_16bit, first_differences, known_mask, pinned, random_float32, random_float64, same_code

pytestmark = pytest.mark.gpu

SOURCES = ["float16", "bfloat16", "float32", "float64"]


def inputs(source, fmt):
    if source in ("float16", "bfloat16"):
        return all_16bit(source)
    if source == "float32":
        return random_float32(1 << 24, 41, fmt)
    return random_float64(1 << 20, 43, fmt)


def cuda_tensor(x):
    import ml_dtypes
    import torch

    if x.dtype == ml_dtypes.bfloat16:
        return torch.from_numpy(x.view(np.int16).copy()).view(torch.bfloat16).cuda()
    return torch.from_numpy(np.ascontiguousarray(x)).cuda()


def compare(x, ours, theirs, fmt, *, by_class, skip=None):
    same = same_code(ours, theirs, fmt) if by_class else ours == theirs
    if skip is not None:
        same |= skip
    assert same.all(), f"{int((~same).sum())} differ: " + "; ".join(first_differences(x, ours, theirs, ~same))


@pytest.mark.parametrize("source", SOURCES)
@pytest.mark.parametrize("fmt", [f for f in formats.ALL_FORMATS if f.torch_name], ids=str)
def test_torch_cuda_casts_are_the_installed_torch_profile(source, fmt):
    import torch

    obs = pinned("torch", device="cuda")
    profile = obs.profile
    x = inputs(source, fmt)
    try:
        theirs = cuda_tensor(x).to(getattr(torch, fmt.torch_name)).view(torch.uint8).cpu().numpy()
    except RuntimeError as exc:  # a cast this torch build lacks on CUDA
        pytest.skip(f"torch CUDA cannot cast {source} to {fmt.name}: {exc}")
    compare(x, fp8check.encode(x, fmt, profile), theirs, fmt, by_class=True, skip=known_mask(obs, x, fmt))


@pytest.mark.parametrize("fmt", [f for f in formats.ALL_FORMATS if f.torch_name], ids=str)
def test_torch_cuda_nan_codes_are_the_profile_s(fmt):
    import torch

    profile = pinned("torch", device="cuda").profile
    x = np.array([0x7FC00000, 0xFFC00000, 0x7F800001, 0xFF800001, 0x7FFFFFFF], np.uint32).view(np.float32)
    theirs = cuda_tensor(x).to(getattr(torch, fmt.torch_name)).view(torch.uint8).cpu().numpy()
    compare(x, fp8check.encode(x, fmt, profile), theirs, fmt, by_class=False)


def _triton_cast(x, fmt):
    import torch
    triton = pytest.importorskip("triton")
    import triton.language as tl

    @triton.jit
    def cast_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
        offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        mask = offsets < n
        value = tl.load(x_ptr + offsets, mask=mask)
        tl.store(y_ptr + offsets, value.to(y_ptr.dtype.element_ty), mask=mask)

    src = cuda_tensor(x)
    out = torch.empty(src.shape, dtype=getattr(torch, fmt.torch_name), device="cuda")
    block = 1024
    cast_kernel[(triton.cdiv(src.numel(), block),)](src, out, src.numel(), BLOCK=block)
    return out.view(torch.uint8).cpu().numpy()


@pytest.mark.parametrize("source", ["float16", "bfloat16", "float32"])
@pytest.mark.parametrize("fmt", [formats.E4M3FN, formats.E5M2], ids=str)
def test_triton_compiled_casts_are_the_registry_s_profile(source, fmt):
    import torch

    if torch.cuda.get_device_capability() < (8, 9):
        pytest.skip("fp8 casts compile from sm89 on")
    obs = pinned("triton", device="cuda")
    x = inputs(source, fmt)
    theirs = _triton_cast(x, fmt)
    compare(x, fp8check.encode(x, fmt, obs.profile), theirs, fmt, by_class=False)  # NaN codes too


PAIRS = [pytest.param(f, p, id=f"{f.name}-{p.name}") for p in profiles.PROFILES.values()
         for f in formats.ALL_FORMATS if p.supports(f)]


@pytest.mark.parametrize("fmt, profile", PAIRS)
def test_reference_on_cuda_equals_the_reference_on_numpy(fmt, profile):
    for source in SOURCES:
        x = inputs(source, fmt)
        on_gpu = fp8check.encode_tensor(cuda_tensor(x), fmt, profile)
        assert on_gpu.device.type == "cuda"
        compare(x, fp8check.encode(x, fmt, profile), on_gpu.cpu().numpy(), fmt, by_class=False)
        direct = fp8check.reference.model_encode(cuda_tensor(x), fmt, profile).cpu().numpy()
        compare(x, fp8check.encode(x, fmt, profile), direct, fmt, by_class=False)
