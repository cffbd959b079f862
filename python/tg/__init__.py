"""tg — tinygrad's Tensor API over libtg (the C library of this repository); docs/python.md.

    from tg import Tensor, dtypes, nn, Device
"""
from .tensor import Tensor
from .dtype import dtypes, DType
from .device import Device
from ._lib import last_error, LIB_PATH
from . import nn

__all__ = ["Tensor", "dtypes", "DType", "Device", "nn", "last_error", "LIB_PATH"]
__version__ = "0.1.0"
