"""The shipped property suite (fp8check.suite.properties) on fp8check's own built-in adapters.

The same property code a kernel author's repository runs on its declared
kernels; here the plugin parametrizes it over every built-in adapter
available on this machine (torch CPU/CUDA, ml_dtypes, Triton), judged
against what the stack registry says each claims.
"""

from fp8check.suite.properties.test_casts import *  # noqa: F401,F403
from fp8check.suite.properties.test_decode import *  # noqa: F401,F403
from fp8check.suite.properties.test_device_sweep import *  # noqa: F401,F403
from fp8check.suite.properties.test_float64 import *  # noqa: F401,F403
from fp8check.suite.properties.test_hazards import *  # noqa: F401,F403
from fp8check.suite.properties.test_known_upstream import *  # noqa: F401,F403
