"""The enums of include/qcoll.h and the names Python users spell them with."""

import enum

from ._errors import InvalidArgumentError


class Dtype(enum.IntEnum):
    INT8 = 0
    UINT8 = 1
    INT32 = 2
    UINT32 = 3
    INT64 = 4
    UINT64 = 5
    FLOAT16 = 6
    BFLOAT16 = 7
    FLOAT32 = 8
    FLOAT64 = 9

    @property
    def itemsize(self):
        return _ITEMSIZE[self]


_ITEMSIZE = {
    Dtype.INT8: 1, Dtype.UINT8: 1, Dtype.INT32: 4, Dtype.UINT32: 4,
    Dtype.INT64: 8, Dtype.UINT64: 8, Dtype.FLOAT16: 2, Dtype.BFLOAT16: 2,
    Dtype.FLOAT32: 4, Dtype.FLOAT64: 8,
}


class Op(enum.IntEnum):
    SUM = 0
    PROD = 1
    MIN = 2
    MAX = 3
    AVG = 4


class Algo(enum.IntEnum):
    AUTO = 0
    HOST = 1
    ONESHOT = 2
    TWOSHOT = 3
    NCCL = 4
    IPC = 5


class Quant(enum.IntEnum):
    DEFAULT = 0
    NONE = 1
    FP8 = 2
    INT8 = 3
    INT6 = 4
    INT4 = 5
    INT3 = 6


# Element type names as numpy, torch (without "torch."), DLPack and the C
# library spell them.  Anything else is not reducible by qcoll.
DTYPE_BY_NAME = {
    "int8": Dtype.INT8, "i8": Dtype.INT8,
    "uint8": Dtype.UINT8, "u8": Dtype.UINT8,
    "int32": Dtype.INT32, "i32": Dtype.INT32, "int": Dtype.INT32,
    "uint32": Dtype.UINT32, "u32": Dtype.UINT32,
    "int64": Dtype.INT64, "i64": Dtype.INT64, "long": Dtype.INT64,
    "uint64": Dtype.UINT64, "u64": Dtype.UINT64,
    "float16": Dtype.FLOAT16, "f16": Dtype.FLOAT16, "half": Dtype.FLOAT16,
    "bfloat16": Dtype.BFLOAT16, "bf16": Dtype.BFLOAT16,
    "float32": Dtype.FLOAT32, "f32": Dtype.FLOAT32, "float": Dtype.FLOAT32,
    "float64": Dtype.FLOAT64, "f64": Dtype.FLOAT64, "double": Dtype.FLOAT64,
}

SUPPORTED_DTYPES = "int8, uint8, int32, uint32, int64, uint64, float16, bfloat16, float32, float64"


def _parse(enum_cls, value, what, aliases=None):
    if isinstance(value, enum_cls):
        return value
    if isinstance(value, str):
        key = value.strip().upper()
        if aliases and key in aliases:
            return aliases[key]
        if key in enum_cls.__members__:
            return enum_cls[key]
    elif isinstance(value, int) and not isinstance(value, bool):
        try:
            return enum_cls(value)
        except ValueError:
            pass
    names = ", ".join(m.lower() for m in enum_cls.__members__)
    raise InvalidArgumentError(f"{what} {value!r} is not one of: {names}")


def as_op(value):
    """Op from an Op, its int value or a name ("sum", "max"...)."""
    return _parse(Op, value, "op", {"MEAN": Op.AVG, "AVERAGE": Op.AVG, "PRODUCT": Op.PROD})


def as_algo(value):
    return _parse(Algo, value, "algo", {"ONE_SHOT": Algo.ONESHOT, "TWO_SHOT": Algo.TWOSHOT})


QUANT_ROTATE = 0x100
"""Bit of a quantisation code (quant_code): rotated groups, the "+rot"
suffix of a name ("int8+rot"; qcoll_options_t.quant_rotate)."""


def quant_code(value):
    """The int a quantisation travels as: the Quant's value, with
    QUANT_ROTATE for a name ending in "+rot" ("int8+rot") or an int that
    carries it."""
    if isinstance(value, str) and value.strip().upper().endswith("+ROT"):
        return int(as_quant(value.strip()[:-4])) | QUANT_ROTATE
    if (isinstance(value, int) and not isinstance(value, (bool, Quant))
            and value & QUANT_ROTATE):
        return int(as_quant(value & ~QUANT_ROTATE)) | QUANT_ROTATE
    return int(as_quant(value))


def set_quant_options(opts, code):
    """Fill an OptionsStruct's quant and quant_rotate from a quant_code."""
    opts.quant = code & ~QUANT_ROTATE
    opts.quant_rotate = 1 if code & QUANT_ROTATE else 0


def as_quant(value):
    """Quant from a Quant, its int value or a name; "fp" means unquantised."""
    if value is None:
        return Quant.DEFAULT
    return _parse(Quant, value, "quant", {"FP": Quant.NONE, "OFF": Quant.NONE})


def as_dtype(value):
    """Dtype from a Dtype, its int value or a name ("float32", "f32", "bf16"...)."""
    if isinstance(value, str):
        d = DTYPE_BY_NAME.get(value.strip().lower())
        if d is not None:
            return d
    return _parse(Dtype, value, "dtype")
