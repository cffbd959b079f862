"""python_overhead.py — what the tg Python package costs per call, next to PyTorch eager in the
same process: µs per lazy small op (a + b on 4 float32 elements: one graph node, nothing runs),
per chain of 10 lazy ops, per realize of a + b (a cached kernel: schedule, run, no compile), and
per numpy() of 4 elements; the bare C call (tg_add + tg_free) through cffi and through ctypes; PyTorch's a + b on the same 4 elements. Best of REPEAT rounds (the
2-core VM is shared: the minimum is the least disturbed).

    PYTHONPATH=python /usr/bin/python3 bench/python_overhead.py
"""
import ctypes
import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))

import numpy as np  # noqa: E402
import torch  # noqa: E402

from tg import Tensor, Device  # noqa: E402
from tg._lib import ffi, lib, LIB_PATH  # noqa: E402

REPEAT = int(os.environ.get("REPEAT", "7"))


def per_call_us(fn, n):
    best = float("inf")
    for _ in range(REPEAT):
        t0 = time.perf_counter()
        for _ in range(n):
            fn()
        best = min(best, (time.perf_counter() - t0) / n)
    return best * 1e6


def main():
    torch.set_num_threads(1)
    a, b = Tensor([1.0, 2.0, 3.0, 4.0]).realize(), Tensor([5.0, 6.0, 7.0, 8.0]).realize()
    ta, tb = torch.tensor([1.0, 2.0, 3.0, 4.0]), torch.tensor([5.0, 6.0, 7.0, 8.0])
    h_a, h_b = a._h, b._h
    (a + b).realize()  # compile once

    def chain():
        x = a
        for _ in range(10):
            x = x + b
        return x

    def c_only():  # the C call alone through cffi, freed at once
        lib.tg_free(lib.tg_add(h_a, h_b))

    cl = ctypes.CDLL(LIB_PATH)  # the same library through ctypes, argtypes declared (docs/python.md)
    cl.tg_add.argtypes, cl.tg_add.restype = [ctypes.c_void_p, ctypes.c_void_p], ctypes.c_void_p
    cl.tg_free.argtypes, cl.tg_free.restype = [ctypes.c_void_p], None
    p_a, p_b = int(ffi.cast("uintptr_t", h_a)), int(ffi.cast("uintptr_t", h_b))

    def ctypes_only():
        cl.tg_free(cl.tg_add(p_a, p_b))

    rows = [
        ("tg: a + b (lazy, 4 elements)", per_call_us(lambda: a + b, 20000)),
        ("tg: tg_add + tg_free through cffi, no Tensor object", per_call_us(c_only, 20000)),
        ("tg: the same through ctypes", per_call_us(ctypes_only, 20000)),
        ("tg: 10 chained lazy adds, per add", per_call_us(chain, 2000) / 10),
        ("tg: (a + b).realize() (cached kernel)", per_call_us(lambda: (a + b).realize(), 2000)),
        ("tg: (a + b).numpy() (realize + copy out)", per_call_us(lambda: (a + b).numpy(), 2000)),
        ("torch eager: a + b (4 elements)", per_call_us(lambda: ta + tb, 20000)),
        ("torch eager: (a + b).numpy()", per_call_us(lambda: (ta + tb).numpy(), 20000)),
    ]
    print("device %s, torch %s, numpy %s, best of %d" % (Device.DEFAULT, torch.__version__, np.__version__, REPEAT))
    for name, us in rows:
        print("%-55s %8.2f us" % (name, us))


if __name__ == "__main__":
    main()
