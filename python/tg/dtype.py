"""dtype.py — tg's element types as tinygrad's `dtypes` namespace (dtypes.float32, dtypes.int, …).

A DType carries the C enum value (tg_dtype), its name and size, and the numpy dtype used for
host copies (None for bfloat16, which numpy lacks: it travels as float32).
"""
import numpy as np


class DType:
    __slots__ = ("value", "name", "itemsize", "np")

    def __init__(self, value, name, itemsize, npdt):
        self.value, self.name, self.itemsize, self.np = value, name, itemsize, npdt

    def __repr__(self):
        return "dtypes." + self.name

    def __reduce__(self):
        return (getattr, (dtypes, self.name))


_TABLE = [  # (enum value, name, bytes, numpy dtype); order is tg_dtype's (include/tg.h)
    (0, "bool", 1, np.bool_), (1, "int8", 1, np.int8), (2, "int16", 2, np.int16), (3, "int32", 4, np.int32),
    (4, "int64", 8, np.int64), (5, "uint8", 1, np.uint8), (6, "uint16", 2, np.uint16), (7, "uint32", 4, np.uint32),
    (8, "uint64", 8, np.uint64), (9, "float16", 2, np.float16), (10, "bfloat16", 2, None),
    (11, "float32", 4, np.float32), (12, "float64", 8, np.float64),
]
_BY_VALUE = [DType(v, n, s, d) for v, n, s, d in _TABLE]


class dtypes:
    """tinygrad's namespace of dtypes, with its aliases and predicates."""
    bool, int8, int16, int32, int64, uint8, uint16, uint32, uint64, float16, bfloat16, float32, float64 = _BY_VALUE
    char, short, int, long = int8, int16, int32, int64
    uchar, ushort, uint, ulong = uint8, uint16, uint32, uint64
    half, float, double = float16, float32, float64
    default_float = float32
    default_int = int32
    fields = staticmethod(lambda: {d.name: d for d in _BY_VALUE})

    @staticmethod
    def is_float(d):
        return d.value in (9, 10, 11, 12)

    @staticmethod
    def is_int(d):
        return 1 <= d.value <= 8

    @staticmethod
    def is_unsigned(d):
        return 5 <= d.value <= 8

    @staticmethod
    def from_value(v):
        return _BY_VALUE[v]

    @staticmethod
    def from_np(npdt):
        npdt = np.dtype(npdt)
        for d in _BY_VALUE:
            if d.np is not None and np.dtype(d.np) == npdt:
                return d
        raise ValueError("tg: numpy dtype %s has no tg dtype" % npdt)


def to_dtype(x):
    """A DType from a DType, a name ("float32"), a numpy dtype or a torch-like alias."""
    if x is None or isinstance(x, DType):
        return x
    if isinstance(x, str):
        d = getattr(dtypes, x, None)
        if isinstance(d, DType):
            return d
        raise ValueError("tg: unknown dtype %r" % x)
    return dtypes.from_np(x)
