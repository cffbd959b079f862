"""indexing.py — Tensor.__getitem__/__setitem__ with numpy's rules over tg's views.

Basic indices (ints, slices with steps, None, ...) become tg_slice/tg_squeeze/tg_unsqueeze views.
Integer tensor (or list) indices are "advanced": they broadcast together, the indexed axes are
moved to the front and merged, and one tg_index_select picks the rows; the result's new axes
go where numpy puts them (in place if the indexed axes were adjacent, else first). Ints are
basic indices, as in PyTorch and tinygrad (numpy counts an int next to a tensor index as
advanced: x[1, :, idx] is (len(idx), n) there, (n, len(idx)) here). A single bool tensor is a mask
(tg_masked_select). __setitem__ computes the flat positions the index selects (the same code on
an arange) and scatters the value into a copy that is then assigned (tinygrad's assign).
"""
import numpy as np

from ._lib import lib, SLICE_END
from .dtype import dtypes
from .tensor import Tensor, _w, _is_scalar


def _expand_ellipsis(idx, ndim):
    if not isinstance(idx, tuple):
        idx = (idx,)
    idx = tuple(Tensor(i) if isinstance(i, (list, np.ndarray)) else i for i in idx)
    if sum(i is Ellipsis for i in idx) > 1:
        raise IndexError("tg: an index can only have a single ellipsis ('...')")
    used = sum(i.ndim if isinstance(i, Tensor) and i.dtype is dtypes.bool else 1
               for i in idx if i is not None and i is not Ellipsis)
    if used > ndim:
        raise IndexError("tg: too many indices for tensor of dimension %d" % ndim)
    fill = (slice(None),) * (ndim - used)
    if Ellipsis in [i for i in idx if not isinstance(i, Tensor)]:
        k = next(n for n, i in enumerate(idx) if i is Ellipsis)
        return idx[:k] + fill + idx[k + 1:]
    return idx + fill


def _int_index(i, size, axis):
    i = int(i)
    if not -size <= i < size:
        raise IndexError("tg: index %d is out of bounds for axis %d with size %d" % (i, axis, size))
    return i + size if i < 0 else i


def _basic(x, idx):
    """Apply ints, slices and None; return the view and the tensor indices as [(axis, index)]."""
    adv, axis = [], 0
    for i in idx:
        if i is None:
            x = x.unsqueeze(axis)
            axis += 1
        elif isinstance(i, slice):
            size = x.shape[axis]
            s, e, st = i.indices(size)
            if (s, e, st) != (0, size, 1):
                x = _w(lib.tg_slice(x._h, axis, s, SLICE_END if st < 0 and e < 0 else e, st))
            axis += 1
        elif isinstance(i, Tensor):
            if not dtypes.is_int(i.dtype):
                raise IndexError("tg: tensor indices must be integers (or one bool mask), not %s" % i.dtype.name)
            adv.append((axis, i))
            axis += 1
        elif _is_scalar(i) and not isinstance(i, (float, bool, np.floating, np.bool_)):
            j = _int_index(i, x.shape[axis], axis)
            s = _w(lib.tg_slice(x._h, axis, j, j + 1, 1))  # held until tg_squeeze has taken it
            x = _w(lib.tg_squeeze(s._h, axis))
        else:
            raise IndexError("tg: unsupported index %r" % (i,))
    return x, adv


def _advanced(x, adv):
    axes = [a for a, _ in adv]
    idxs = []
    for a, t in adv:  # negative positions count from the end
        idxs.append(t.lt(0).where(t + x.shape[a], t) if not dtypes.is_unsigned(t.dtype) else t)
    bshape = np.broadcast_shapes(*[t.shape for t in idxs])
    rest = [d for d in range(x.ndim) if d not in axes]
    x = x.permute(axes + rest)
    sizes = x.shape[:len(axes)]
    if len(axes) > 1:
        x = x.reshape((int(np.prod(sizes)),) + x.shape[len(axes):])
        wide = dtypes.int64 if int(np.prod(sizes)) >= 2**31 else dtypes.int32
        lin, stride = None, 1
        for t, n in zip(reversed(idxs), reversed(sizes)):
            term = t.cast(wide) * stride
            lin = term if lin is None else lin + term
            stride *= n
    else:
        lin = idxs[0]
    x = _w(lib.tg_index_select(x._h, 0, lin._h))
    nb = len(bshape)
    if axes == list(range(axes[0], axes[0] + len(axes))) and axes[0] > 0:  # adjacent: new axes stay in place
        order = list(range(nb, nb + axes[0])) + list(range(nb)) + list(range(nb + axes[0], x.ndim))
        x = x.permute(order)
    return x


def getitem(t, idx):
    if isinstance(idx, Tensor) and idx.dtype is dtypes.bool:
        return t.masked_select(idx)
    idx = _expand_ellipsis(idx, t.ndim)
    x, adv = _basic(t, idx)
    return _advanced(x, adv) if adv else x


def setitem(t, idx, value):
    n = t.numel()
    pos = Tensor.arange(n, dtype=dtypes.int64 if n >= 2**31 else dtypes.int32).reshape(t.shape)[idx]
    m = pos.numel()
    v = value if isinstance(value, Tensor) else Tensor(value, dtype=t.dtype)
    v = v.cast(t.dtype)
    if v.shape != pos.shape:
        v = v.expand(pos.shape)
    new = t.reshape(n).scatter(0, pos.reshape(m), v.reshape(m)).reshape(t.shape)
    t.assign(new)
