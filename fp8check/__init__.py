"""fp8check: prove FP8 code numerically correct, bit for bit.

The core API::

    import fp8check
    codes = fp8check.encode(x, "e4m3fnuz", profile="ieee")   # uint8 codes
    values = fp8check.decode(codes, "e4m3fnuz")              # exact float64
"""

from fp8check import formats, profiles
from fp8check.errors import (
    FP8CheckError,
    InvalidValueError,
    UnknownFormatError,
    UnknownProfileError,
    UnsupportedDtypeError,
    UnsupportedFormatError,
)
from fp8check.formats import Format
from fp8check.profiles import Profile
from fp8check.reference import decode, encode, encode_tensor

__version__ = "0.1.0"

__all__ = [
    "encode",
    "decode",
    "encode_tensor",
    "formats",
    "profiles",
    "Format",
    "Profile",
    "FP8CheckError",
    "InvalidValueError",
    "UnknownFormatError",
    "UnknownProfileError",
    "UnsupportedDtypeError",
    "UnsupportedFormatError",
]
