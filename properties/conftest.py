"""The fp8check property suite.

The ``fp8_*`` fixtures are parametrized by the fp8check pytest plugin: over
every built-in adapter available here, or over the user kernel named with
``--fp8check-kernel MODULE:FUNC --fp8check-format FMT``. Select with
markers: ``pytest properties -m fnuz``, ``-m "e4m3fn and not exhaustive"``.
"""
