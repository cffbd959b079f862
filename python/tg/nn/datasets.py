"""tg.nn.datasets — mnist(): tinygrad's (X_train, Y_train, X_test, Y_test), read by tg's IDX loader
(tg_mnist_load) from /usr/share/datasets/fashion-mnist (or dir, or $TG_MNIST_DIR). X is uint8
(N, 1, 28, 28), Y uint8 (N), as in tinygrad."""
from .._lib import ffi, lib, check
from ..tensor import _w


def mnist(dir=None, fashion=True):
    out = []
    for train in (True, False):
        d = ffi.new("tg_dataset *")
        check(lib.tg_mnist_load(dir.encode() if dir else ffi.NULL, train, d))
        out.append((_w(lib.tg_retain(d.images)), _w(lib.tg_retain(d.labels))))
        lib.tg_dataset_free(d)
    (xtr, ytr), (xte, yte) = out
    return xtr, ytr, xte, yte
