"""TransformerEngine 2.20.2: cannot be installed on a CPU machine.

``transformer-engine`` is a 1.2 MB pure-Python meta package whose
``[pytorch]`` extra is ``transformer_engine_torch``, an sdist whose
``setup.py`` reads ``torch.version.cuda`` (None for a CPU torch:
``ValueError: CUDA version None not supported`` / no wheel to fetch) and
whose ``core`` extra is ``transformer_engine_cu12``/``_cu13``, binaries that
load libcuda. Its casts can only be checked on the GPU machine with TE
installed there, which the 64 MiB carry limit does not allow.
"""

ENTRIES = ()
