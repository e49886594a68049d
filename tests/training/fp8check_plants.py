"""Bugs planted in torchao inside torchrun's ranks (``worker_init="fp8check_plants:NAME"``): the folder of
this file goes on the ranks' PYTHONPATH. Used by tests/training/test_distributed.py and
gpu/training_distributed.py."""


def amax_before_all_reduce():
    """Each rank scales by the amax of its own shard: the all-reduce of the amax is skipped."""
    from torchao.float8 import float8_utils

    real = float8_utils.tensor_to_amax

    def local_amax(x, reduce_amax=False, device_mesh=None, *args, **kwargs):
        local = getattr(x, "_local_tensor", x)
        amax = real(local, False, None, *args, **kwargs)
        if local is not x:  # a DTensor: pretend the local amax is the replicated one
            from torch.distributed.tensor import DTensor, Replicate

            amax = DTensor.from_local(amax, x.device_mesh, [Replicate()], run_check=False)
        return amax

    float8_utils.tensor_to_amax = local_amax
