"""Reading torch's pickles without running them.

Two locks, neither of which imports or calls anything the file names:

1. a static look: the pickle is disassembled with the standard library's
   :mod:`pickletools` (which only parses opcodes) and refused, naming the
   global (``posix.system``), if it names any global outside the set
   :func:`recognised` knows;
2. :class:`RestrictedUnpickler` then builds plain data from it: every
   global resolves to a stand-in of this module (tensors become
   :class:`TensorRef`, storages :class:`StorageRef`, torchao's tensor
   subclasses :class:`SubclassRef` with their ``qdata``/``scale``/block
   sizes); any other global raises :class:`UnsafeGlobal`.

torch's own ``torch.load`` is never called on a checkpoint: the tensors'
bytes are read by the loader from the storage records it has checked.
"""

from __future__ import annotations

import io
import math
import pickle
import pickletools
from dataclasses import dataclass
from typing import IO, Any

# Opcodes that push a string onto the pickle stack.
_STRING_OPS = {
    "STRING", "BINSTRING", "SHORT_BINSTRING", "UNICODE", "BINUNICODE",
    "SHORT_BINUNICODE", "BINUNICODE8", "BINBYTES", "SHORT_BINBYTES", "BINBYTES8",
}
_PUT_OPS = {"PUT", "BINPUT", "LONG_BINPUT"}
_GET_OPS = {"GET", "BINGET", "LONG_BINGET"}
# Opcodes that import through the copyreg extension registry: unresolvable here.
_EXT_OPS = {"EXT1", "EXT2", "EXT4"}
UNRESOLVED = "<unresolved STACK_GLOBAL>"


@dataclass(frozen=True)
class PickleScan:
    """Globals named by one or more pickles, in order of first appearance."""

    globals: tuple[str, ...]
    opcodes: frozenset[str]
    error: str = ""  # why the scan stopped early (malformed or truncated), if it did


def scan(stream: IO[bytes], *, count: int = 1) -> PickleScan:
    """Disassemble up to ``count`` consecutive pickles from ``stream``.

    A malformed or truncated pickle ends the scan with ``error`` set; the
    globals seen before that point are still reported (a refusal names
    them first).
    """
    names: dict[str, None] = {}
    ops: set[str] = set()
    try:
        _scan(stream, count, names, ops)
    except Exception as exc:  # pickletools raises ValueError; a broken stream anything
        return PickleScan(tuple(names), frozenset(ops), str(exc).splitlines()[0] if str(exc) else type(exc).__name__)
    return PickleScan(tuple(names), frozenset(ops))


def _scan(stream: IO[bytes], count: int, names: dict[str, None], ops: set[str]) -> None:
    for _ in range(count):
        recent: list[object] = []  # what the last pushes were (strings or None)
        memo: dict[int, object] = {}
        for opcode, arg, _pos in pickletools.genops(stream):
            name = opcode.name
            ops.add(name)
            if name in ("GLOBAL", "INST"):
                module, _, attr = str(arg).partition(" ")
                names.setdefault(f"{module}.{attr}", None)
                recent.append(None)
            elif name == "STACK_GLOBAL":
                if len(recent) >= 2 and all(isinstance(v, str) for v in recent[-2:]):
                    names.setdefault(f"{recent[-2]}.{recent[-1]}", None)
                else:
                    names.setdefault(UNRESOLVED, None)
                del recent[-2:]
                recent.append(None)
            elif name in _EXT_OPS:
                names.setdefault(f"<copyreg extension {arg}>", None)
                recent.append(None)
            elif name in _STRING_OPS:
                recent.append(arg.decode("latin-1") if isinstance(arg, bytes) else arg)
            elif name == "MEMOIZE":
                memo[len(memo)] = recent[-1] if recent else None
            elif name in _PUT_OPS:
                memo[int(arg)] = recent[-1] if recent else None
            elif name in _GET_OPS:
                recent.append(memo.get(int(arg)))
            elif name != "PROTO" and name != "FRAME":
                recent.append(None)
            if len(recent) > 64:
                del recent[:-8]


def scan_bytes(data: bytes, *, count: int = 1) -> PickleScan:
    return scan(io.BytesIO(data), count=count)


# -- the restricted unpickler -------------------------------------------------------


class UnsafeGlobal(Exception):
    """A pickle names a global the restricted unpickler does not recognise."""

    def __init__(self, name: str) -> None:
        super().__init__(name)
        self.name = name


class MalformedPickle(Exception):
    """A recognised global called with arguments of the wrong kind (one line saying which)."""


# dtype name -> bytes per element (float4_e2m1fn_x2 holds two fp4 values per byte)
DTYPE_ITEMSIZE: dict[str, int] = {
    "float64": 8, "float32": 4, "float16": 2, "bfloat16": 2, "complex128": 16, "complex64": 8, "complex32": 4,
    "int64": 8, "int32": 4, "int16": 2, "int8": 1, "uint64": 8, "uint32": 4, "uint16": 2, "uint8": 1, "bool": 1,
    "float8_e4m3fn": 1, "float8_e5m2": 1, "float8_e4m3fnuz": 1, "float8_e5m2fnuz": 1, "float8_e8m0fnu": 1,
    "float4_e2m1fn_x2": 1, "qint8": 1, "quint8": 1, "qint32": 4, "quint4x2": 1, "quint2x4": 1,
}
_DTYPE_ALIASES = {"float": "float32", "double": "float64", "half": "float16", "long": "int64", "int": "int32",
                  "short": "int16", "cfloat": "complex64", "cdouble": "complex128"}
# torch's typed storage classes (torch.FloatStorage, ...) -> dtype of their elements
STORAGE_CLASSES: dict[str, str] = {
    "DoubleStorage": "float64", "FloatStorage": "float32", "HalfStorage": "float16", "BFloat16Storage": "bfloat16",
    "LongStorage": "int64", "IntStorage": "int32", "ShortStorage": "int16", "CharStorage": "int8",
    "ByteStorage": "uint8", "BoolStorage": "bool", "ComplexDoubleStorage": "complex128",
    "ComplexFloatStorage": "complex64", "QInt8Storage": "qint8", "QUInt8Storage": "quint8",
    "QInt32Storage": "qint32", "QUInt4x2Storage": "quint4x2", "QUInt2x4Storage": "quint2x4",
}
MAX_DIMS = 64


@dataclass(frozen=True)
class DtypeRef:
    name: str  # torch-style: "float8_e4m3fn"


@dataclass(frozen=True)
class StorageType:
    dtype: str  # "uint8" for UntypedStorage (its numel counts bytes)
    name: str


@dataclass(frozen=True)
class StorageRef:
    key: str
    dtype: str
    numel: int  # elements of ``dtype`` the pickle declares

    @property
    def nbytes(self) -> int:
        return self.numel * DTYPE_ITEMSIZE[self.dtype]


@dataclass(frozen=True)
class TensorRef:
    """A tensor as a pickle describes it: where its elements sit in which storage."""

    storage: StorageRef | None
    offset: int  # in elements of ``dtype``
    shape: tuple[int, ...]
    stride: tuple[int, ...]
    dtype: str
    note: str = ""  # why it has no readable data (meta, sparse, quantized), if so

    @property
    def numel(self) -> int:
        return math.prod(self.shape)

    @property
    def itemsize(self) -> int:
        return DTYPE_ITEMSIZE.get(self.dtype, 1)

    def contiguous(self) -> bool:
        expected = 1
        for size, stride in zip(reversed(self.shape), reversed(self.stride)):
            if size != 1 and stride != expected:
                return False
            expected *= size
        return True

    def extent(self) -> int:
        """Elements of the storage this tensor reaches, counted from the storage's start."""
        if self.numel == 0:
            return self.offset
        return self.offset + 1 + sum((n - 1) * s for n, s in zip(self.shape, self.stride))


@dataclass
class ClassRef:
    """A class the pickle names (a tensor subclass, a config type): recognised, never imported."""

    module: str
    name: str

    @property
    def qualname(self) -> str:
        return f"{self.module}.{self.name}"

    def __call__(self, *args: object, **kwargs: object) -> Opaque:  # an enum or config built by REDUCE
        return Opaque(self.qualname, args)


class Opaque:
    """An instance of a recognised helper type (an enum, a dataclass of options): its arguments and
    state are kept as plain data and nothing of the type runs."""

    def __init__(self, qualname: str, args: tuple[object, ...] = ()) -> None:
        self.qualname = qualname
        self.args = args
        self.state: object = None

    def __setstate__(self, state: object) -> None:
        self.state = state

    def __repr__(self) -> str:
        return f"<{self.qualname} {self.args!r}>"


def _opaque_type(qualname: str) -> type:
    """A stand-in class for a helper type: NEWOBJ (``cls.__new__(cls, *args)``) and REDUCE
    (``cls(*args)``) both make an :class:`Opaque`."""

    class Stand(Opaque):
        def __new__(cls, *args: object) -> Stand:  # noqa: D102
            return object.__new__(cls)

        def __init__(self, *args: object) -> None:
            super().__init__(qualname, args)

    Stand.__qualname__ = Stand.__name__ = qualname
    return Stand


@dataclass
class WrapperRef:
    """``torch._utils._rebuild_wrapper_subclass(cls, dtype, size, ...)``: the outer shape of a subclass."""

    cls: ClassRef
    dtype: str
    shape: tuple[int, ...]


@dataclass
class SubclassRef:
    """A tensor subclass (torchao's ``Float8Tensor``, ``MXTensor``, ...): its class and the state the
    pickle gives it (``qdata``, ``scale``, ``block_size``, ...), as plain data."""

    cls: str
    dtype: str
    shape: tuple[int, ...]
    state: dict[str, Any]


def _check_ints(value: object, what: str, *, limit_dims: bool = True) -> tuple[int, ...]:
    if not isinstance(value, (tuple, list)) or (limit_dims and len(value) > MAX_DIMS):
        raise MalformedPickle(f"{what} is not a tuple of at most {MAX_DIMS} sizes")
    out = tuple(value)
    if not all(isinstance(v, int) and not isinstance(v, bool) and v >= 0 for v in out):
        raise MalformedPickle(f"{what} {str(out)[:80]} is not a tuple of non-negative integers")
    return out


def _dtype_of(value: object) -> str:
    if isinstance(value, DtypeRef):
        return value.name
    raise MalformedPickle(f"dtype {str(value)[:60]} is not a torch dtype")


def _tensor(storage: object, offset: object, size: object, stride: object, dtype: str | None = None) -> TensorRef:
    if not isinstance(storage, StorageRef):
        raise MalformedPickle("a tensor's storage is not a storage record")
    if not isinstance(offset, int) or isinstance(offset, bool) or offset < 0:
        raise MalformedPickle(f"storage offset {str(offset)[:40]} is not a non-negative integer")
    shape = _check_ints(size, "shape")
    strides = _check_ints(stride, "stride")
    if len(strides) != len(shape):
        raise MalformedPickle(f"shape {shape} and stride {strides} differ in length")
    dt = dtype or storage.dtype
    if dt not in DTYPE_ITEMSIZE:
        raise MalformedPickle(f"dtype {dt} is not one fp8check reads")
    return TensorRef(storage=storage, offset=offset, shape=shape, stride=strides, dtype=dt)


def _rebuild_tensor(storage: object, offset: object, size: object, stride: object, *_: object) -> TensorRef:
    return _tensor(storage, offset, size, stride)


def _rebuild_tensor_v3(storage: object, offset: object, size: object, stride: object, requires_grad: object = None,
                       hooks: object = None, dtype: object = None, *_: object) -> TensorRef:
    return _tensor(storage, offset, size, stride, _dtype_of(dtype))


def _rebuild_parameter(data: object, *_: object) -> object:
    return data


def _rebuild_wrapper_subclass(cls: object, dtype: object, size: object, *_: object) -> WrapperRef:
    if not isinstance(cls, ClassRef):
        raise MalformedPickle("a wrapper subclass whose class is not a recognised tensor subclass")
    return WrapperRef(cls, _dtype_of(dtype), _check_ints(size, "shape"))


def _rebuild_from_type_v2(func: object, new_type: object, args: object, state: object) -> object:
    if not isinstance(args, tuple):
        raise MalformedPickle("_rebuild_from_type_v2 arguments are not a tuple")
    if func is _rebuild_wrapper_subclass:
        wrapper = _rebuild_wrapper_subclass(*args)
        if isinstance(state, tuple) and state and isinstance(state[0], dict):
            state = state[0]
        if not isinstance(state, dict):
            raise MalformedPickle(f"{wrapper.cls.qualname} state is not a dict")
        return SubclassRef(cls=wrapper.cls.qualname, dtype=wrapper.dtype, shape=wrapper.shape,
                           state={str(k): v for k, v in state.items()})
    if callable(func) and getattr(func, "__module__", "") == __name__:
        return func(*args)  # one of this module's stand-ins (a plain tensor or parameter)
    raise MalformedPickle("_rebuild_from_type_v2 of something that is not a tensor")


def _rebuild_meta(dtype: object, size: object, *_: object) -> TensorRef:
    return TensorRef(None, 0, _check_ints(size, "shape"), (), _dtype_of(dtype), note="meta tensor: holds no data")


def _no_data(note: str) -> Any:
    def stand_in(*_: object) -> TensorRef:
        return TensorRef(None, 0, (), (), "uint8", note=note)

    stand_in.__module__ = __name__
    return stand_in


class _StateDict(dict):  # type: ignore[type-arg]
    """What ``collections.OrderedDict`` stands for: a dict whose pickled attributes (``_metadata``) are dropped."""

    def __setstate__(self, state: object) -> None:
        pass


def _ordered_dict(*args: object) -> dict[Any, Any]:
    if args:
        raise MalformedPickle("OrderedDict with arguments")
    return _StateDict()


def _encode(text: object, encoding: object = "utf-8") -> bytes:
    if not isinstance(text, str) or encoding not in ("latin1", "latin-1", "utf-8", "utf8"):
        raise MalformedPickle("_codecs.encode of something that is not text")
    return text.encode(str(encoding))


def _size(*args: object) -> tuple[int, ...]:
    return _check_ints(args[0] if args else (), "torch.Size")


def _device(*args: object) -> str:
    return str(args[0])[:40] if args else "cpu"


def _layout(name: object = "") -> str:
    return str(name)[:40]


def _reconstructor(cls: object, base: object, state: object = None) -> Opaque:
    if isinstance(cls, type) and issubclass(cls, Opaque):
        return cls()
    raise MalformedPickle("copyreg._reconstructor of a type fp8check does not read")


def _set(items: object = ()) -> object:
    if not isinstance(items, (list, tuple)):
        raise MalformedPickle("set of something that is not a list")
    return list(items)


# torchao's tensor subclasses whose data fp8check reads, by every module path they are pickled under
TORCHAO_SUBCLASSES = {
    "torchao.quantization.Float8Tensor": "Float8Tensor",
    "torchao.quantization.quantize_.workflows.float8.float8_tensor.Float8Tensor": "Float8Tensor",
    "torchao.quantization.quantize_.workflows.Float8Tensor": "Float8Tensor",
    "torchao.prototype.mx_formats.mx_tensor.MXTensor": "MXTensor",
    "torchao.prototype.mx_formats.MXTensor": "MXTensor",
    "torchao.prototype.mx_formats.nvfp4_tensor.NVFP4Tensor": "NVFP4Tensor",
    "torchao.prototype.mx_formats.NVFP4Tensor": "NVFP4Tensor",
    "torchao.dtypes.affine_quantized_tensor.AffineQuantizedTensor": "AffineQuantizedTensor",
    "torchao.dtypes.AffineQuantizedTensor": "AffineQuantizedTensor",
    "torchao.dtypes.floatx.float8_layout.Float8AQTTensorImpl": "Float8AQTTensorImpl",
    "torchao.dtypes.floatx.Float8AQTTensorImpl": "Float8AQTTensorImpl",
}
# torchao helper types those subclasses carry in their state (enums, option dataclasses): kept as plain data
TORCHAO_HELPERS = (
    "torchao.quantization.quantize_.common.kernel_preference.KernelPreference",
    "torchao.quantization.quantize_.common.KernelPreference",
    "torchao.quantization.quantize_.workflows.float8.float8_tensor.QuantizeTensorToFloat8Kwargs",
    "torchao.quantization.quantize_.workflows.float8.float8_packing_format.Float8PackingFormat",
    "torchao.quantization.granularity.PerRow", "torchao.quantization.granularity.PerTensor",
    "torchao.quantization.granularity.PerGroup", "torchao.quantization.granularity.PerBlock",
    "torchao.quantization.granularity.PerAxis",
    "torchao.float8.inference.Float8MMConfig", "torchao.float8.float8_utils.Float8MMConfig",
    "torchao.prototype.mx_formats.mx_tensor.QuantizeTensorToMXKwargs",
    "torchao.prototype.mx_formats.nvfp4_tensor.QuantizeTensorToNVFP4Kwargs",
    "torchao.prototype.mx_formats.config.ScaleCalculationMode",
    "torchao.prototype.mx_formats.config.MXGemmKernelChoice",
    "torchao.prototype.mx_formats.constants.NVFP4MMConfig",
    "torchao.quantization.quant_primitives.ZeroPointDomain",
    "torchao.dtypes.floatx.float8_layout.Float8Layout", "torchao.dtypes.floatx.Float8Layout",
    "torchao.dtypes.utils.PlainLayout",
)

_STAND_INS: dict[str, Any] = {
    "collections.OrderedDict": _ordered_dict,
    "torch._utils._rebuild_tensor": _rebuild_tensor,
    "torch._utils._rebuild_tensor_v2": _rebuild_tensor,
    "torch._utils._rebuild_tensor_v3": _rebuild_tensor_v3,
    "torch._utils._rebuild_parameter": _rebuild_parameter,
    "torch._utils._rebuild_parameter_with_state": _rebuild_parameter,
    "torch._utils._rebuild_wrapper_subclass": _rebuild_wrapper_subclass,
    "torch._tensor._rebuild_from_type_v2": _rebuild_from_type_v2,
    "torch._utils._rebuild_meta_tensor_no_storage": _rebuild_meta,
    "torch._utils._rebuild_sparse_tensor": _no_data("sparse tensor: data not read"),
    "torch._utils._rebuild_sparse_csr_tensor": _no_data("sparse tensor: data not read"),
    "torch._utils._rebuild_qtensor": _no_data("quantized (qint) tensor: data not read"),
    "torch._utils._rebuild_nested_tensor": _no_data("nested tensor: data not read"),
    "torch.Size": _size,
    "torch.device": _device,
    "torch.serialization._get_layout": _layout,
    "_codecs.encode": _encode,
    "copyreg._reconstructor": _reconstructor,
    "builtins.set": _set,
    "builtins.frozenset": _set,
    "torch.storage.UntypedStorage": StorageType("uint8", "UntypedStorage"),
    "torch.UntypedStorage": StorageType("uint8", "UntypedStorage"),
    **{f"torch.{n}": StorageType(d, n) for n, d in STORAGE_CLASSES.items()},
    **{f"torch.{d}": DtypeRef(d) for d in DTYPE_ITEMSIZE},
    **{f"torch.{a}": DtypeRef(d) for a, d in _DTYPE_ALIASES.items()},
    **{f"torch.{lay}": lay for lay in ("strided", "sparse_coo", "sparse_csr", "sparse_csc", "sparse_bsr",
                                       "sparse_bsc", "_mkldnn", "jagged")},
}
for _f in _STAND_INS.values():
    if callable(_f) and not isinstance(_f, (type, StorageType, DtypeRef)):
        try:
            _f.__module__ = __name__
        except (AttributeError, TypeError):
            pass


def recognised(name: str) -> bool:
    """Whether the restricted unpickler reads global ``name`` (module.qualname)."""
    return name in _STAND_INS or name in TORCHAO_SUBCLASSES or name in TORCHAO_HELPERS


def recognised_globals(found: PickleScan) -> tuple[str, ...]:
    """The globals of ``found`` the restricted unpickler does not read, in order."""
    return tuple(g for g in found.globals if not recognised(g))


class RestrictedUnpickler(pickle.Unpickler):
    """Unpickles a torch checkpoint's pickle into plain data without importing or running anything
    of the file's choosing.

    Every global resolves to a stand-in of this module (:data:`_STAND_INS`),
    to a :class:`ClassRef` for a recognised torchao tensor subclass, or to an
    opaque record type for a recognised torchao helper; any other global
    raises :class:`UnsafeGlobal`. Storages come back as
    :class:`StorageRef` (key, dtype, declared element count): no byte of
    data is read here and nothing is allocated from a size the pickle claims.
    """

    def __init__(self, data: bytes | IO[bytes], *, storages: dict[str, StorageRef] | None = None) -> None:
        super().__init__(io.BytesIO(data) if isinstance(data, (bytes, bytearray)) else data)
        self.storages: dict[str, StorageRef] = {} if storages is None else storages

    def find_class(self, module: str, name: str) -> Any:
        full = f"{module}.{name}"
        if full in _STAND_INS:
            return _STAND_INS[full]
        if full in TORCHAO_SUBCLASSES:
            return ClassRef(module, name)
        if full in TORCHAO_HELPERS:
            return _opaque_type(full)
        raise UnsafeGlobal(full)

    def persistent_load(self, pid: object) -> object:
        if not (isinstance(pid, tuple) and len(pid) >= 5 and pid[0] == "storage"):
            raise MalformedPickle(f"persistent id {str(pid)[:80]} is not a storage")
        kind, key, numel = pid[1], pid[2], pid[4]
        if not isinstance(kind, StorageType):
            raise MalformedPickle(f"storage {str(key)[:40]} has type {str(kind)[:60]}, not a torch storage class")
        if not isinstance(key, str) or not isinstance(numel, int) or isinstance(numel, bool) or numel < 0:
            raise MalformedPickle(f"storage {str(key)[:40]}: key or size {str(numel)[:40]} is malformed")
        ref = StorageRef(key=key, dtype=kind.dtype, numel=numel)
        seen = self.storages.get(key)
        if seen is not None and seen != ref:
            raise MalformedPickle(f"storage {key[:40]} is declared twice with different types or sizes")
        self.storages[key] = ref
        return ref


def unpickle(data: bytes) -> tuple[object, dict[str, StorageRef]]:
    """The object a torch pickle describes, as plain data, and the storages it declares."""
    u = RestrictedUnpickler(data)
    obj = u.load()
    return obj, u.storages
