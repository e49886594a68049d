"""mykernels: FP8 kernels of a (small, made-up) kernel repository.

- :mod:`mykernels.casts`      torch casts to e4m3fnuz / e4m3fn (saturating) and e5m2 (IEEE)
- :mod:`mykernels.quant`      a tensorwise e4m3fnuz quantizer and a per-token-group (1x128) one
- :mod:`mykernels.fused`      RMSNorm fused with the FP8 cast
- :mod:`mykernels.triton_cast` a Triton clamp + cast to e4m3fnuz (AMD MI300)
- :mod:`mykernels.buggy`      one of each with a bug planted, for fp8check to find
"""

__version__ = "0.1.0"
