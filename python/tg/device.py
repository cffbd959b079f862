"""device.py — tinygrad's `Device`: the default device ("LLVM", "CPU", …) and which are usable."""
from ._lib import ffi, lib, check


class _Device:
    @property
    def DEFAULT(self):
        """The device new tensors are made on (tg_set_default_device, else DEV, else LLVM/CPU)."""
        t = lib.tg_scalar(0.0, 11)
        try:
            return ffi.string(lib.tg_device_of(t)).decode()
        finally:
            lib.tg_free(t)

    @DEFAULT.setter
    def DEFAULT(self, name):
        check(lib.tg_set_default_device(name.encode()))

    @staticmethod
    def canonicalize(name):
        """"cpu" → "CPU", "LLVM:0" → "LLVM" (tg has one device of each kind)."""
        name = (name or Device.DEFAULT).upper()
        return name[:-2] if name.endswith(":0") else name

    @staticmethod
    def available(name):
        return bool(lib.tg_device_available(name.encode()))


Device = _Device()
