"""tensor.py — tinygrad's Tensor over libtg: every method builds a lazy tg graph node through one
C call (docs/python.md). A Tensor owns one tg_tensor handle, created outside any tg scope and
released by tg_free when Python collects the object.

Rules kept in tables: unary methods (_UNARY), binary methods (_BINARY), operators whose
Tensor-Tensor case is a bare C call (_FAST), and the names of pad modes, scatter reductions, loss
reductions and interpolation modes. Python scalars take the tensor's dtype unless they need a
wider kind (_weak_dtype), as in tinygrad and PyTorch.
"""
import math
import threading
from contextlib import contextmanager

import numpy as np

from ._lib import ffi, lib, NULL, ALL_AXES, SLICE_END, error, check
from .dtype import DType, dtypes, to_dtype
from .device import Device

_tls = threading.local()  # per-thread scratch: cffi releases the GIL during C calls
_new = object.__new__
_free = lib.tg_free
_PAD_MODES = {"constant": 0, "reflect": 1, "replicate": 2, "circular": 3}
_SCATTER = {"sum": 0, "add": 0, "prod": 1, "multiply": 1, "mean": 2, "amax": 3, "amin": 4}
_REDUCTION = {"mean": 0, "sum": 1, "none": 2}
_INTERP = {"nearest": 0, "nearest-exact": 1, "linear": 2, "bilinear": 3, "trilinear": 4}


def _w(p):
    """Wrap a tg_tensor* the caller owns, or raise the library's error for NULL."""
    if p == NULL:
        raise error()
    t = _new(Tensor)
    t._h = p
    return t


def _argfix(*x):
    """tinygrad's argfix: f(2, 3) and f((2, 3)) are the same."""
    if len(x) == 1 and isinstance(x[0], (tuple, list)):
        return tuple(x[0])
    return tuple(x)


def _is_scalar(x):
    return isinstance(x, (int, float, bool, np.number, np.bool_))


def _weak_dtype(dt, v):
    """The dtype a tensor of dtype dt and a Python scalar v compute in."""
    if isinstance(v, (bool, np.bool_)):
        return dt
    if isinstance(v, (int, np.integer)):
        return dtypes.default_int if dt is dtypes.bool else dt
    return dt if dtypes.is_float(dt) else dtypes.default_float


def _infer_dtype(arr):
    if arr.dtype == np.bool_:
        return dtypes.bool
    if arr.dtype.kind in "iu":
        return dtypes.default_int
    if arr.dtype.kind == "f":
        return dtypes.default_float
    raise ValueError("tg: cannot make a tensor from %s data" % arr.dtype)


def _from_numpy(arr, dt):
    if dt.np is None:  # bfloat16: numpy has none, go through float32
        f = _from_numpy(arr, dtypes.float32)
        p = lib.tg_cast(f, dt.value)
        lib.tg_free(f)
        return p
    arr = np.require(arr, dtype=dt.np, requirements="C")  # not ascontiguousarray: it makes 0-d arrays 1-d
    buf = ffi.from_buffer(arr) if arr.nbytes else NULL
    return lib.tg_from_data(buf, dt.value, list(arr.shape) if arr.ndim else NULL, arr.ndim)


def _axes(axis):
    if axis is None:
        return NULL, 0
    if isinstance(axis, (tuple, list)):
        return list(axis), len(axis)
    return [axis], 1


def _tuple(x, n):
    return tuple(x) if isinstance(x, (tuple, list)) else (x,) * n


class _OptimizerStep:
    """What Optimizer.schedule_step() gives Tensor.realize: the step runs in the same schedule."""
    __slots__ = ("opt",)

    def __init__(self, opt):
        self.opt = opt


class Tensor:
    """A lazy tensor (tinygrad's API); nothing runs until realize/numpy/item/tolist."""
    __slots__ = ("_h", "__weakref__")
    __array_ufunc__ = None  # numpy operators defer to ours: ndarray @ Tensor is Tensor.__rmatmul__
    training = False
    no_grad = False

    # ------------------------------------------------------------ construction
    def __init__(self, data, device=None, dtype=None, requires_grad=None):
        dt = to_dtype(dtype)
        if isinstance(data, Tensor):
            p = lib.tg_retain(data._h) if dt is None or dt is data.dtype else lib.tg_cast(data._h, dt.value)
        elif _is_scalar(data):
            if dt is None:
                dt = dtypes.bool if isinstance(data, (bool, np.bool_)) else \
                    dtypes.default_int if isinstance(data, (int, np.integer)) else dtypes.default_float
            p = lib.tg_scalar(float(data), dt.value)
        elif isinstance(data, np.ndarray):
            p = _from_numpy(data, dt or dtypes.from_np(data.dtype))
        elif isinstance(data, (list, tuple)):
            arr = np.array(data)
            if arr.size == 0 and arr.dtype == np.float64:
                arr = arr.astype(np.float32)
            p = _from_numpy(arr, dt or _infer_dtype(arr))
        elif isinstance(data, (bytes, bytearray)):
            p = _from_numpy(np.frombuffer(data, np.uint8), dt or dtypes.uint8)
        elif data is None:
            p = lib.tg_empty([0], 1, (dt or dtypes.default_float).value)
        else:
            raise TypeError("tg: cannot make a Tensor from %s" % type(data).__name__)
        if p == NULL:
            raise error()
        self._h = p
        if device is not None and Device.canonicalize(device) != self.device:
            self._h = _w(lib.tg_to(p, Device.canonicalize(device).encode()))._take()
            lib.tg_free(p)
        if requires_grad:
            self.requires_grad = True

    def _take(self):
        """The handle, which this object gives up (used when another object takes it over)."""
        h, self._h = self._h, NULL
        return h

    def __del__(self):
        try:
            _free(self._h)
        except (AttributeError, TypeError, NameError):  # half-built object, or interpreter shutdown
            pass

    @staticmethod
    def _make(p, device=None, requires_grad=None):
        t = _w(p)
        if device is not None and Device.canonicalize(device) != t.device:
            t = t.to(device)
        if requires_grad:
            t.requires_grad = True
        return t

    @staticmethod
    def zeros(*shape, dtype=None, device=None, requires_grad=None):
        s = _argfix(*shape)
        return Tensor._make(lib.tg_zeros(s, len(s), (to_dtype(dtype) or dtypes.default_float).value), device, requires_grad)

    @staticmethod
    def ones(*shape, dtype=None, device=None, requires_grad=None):
        s = _argfix(*shape)
        return Tensor._make(lib.tg_ones(s, len(s), (to_dtype(dtype) or dtypes.default_float).value), device, requires_grad)

    @staticmethod
    def empty(*shape, dtype=None, device=None, requires_grad=None):
        s = _argfix(*shape)
        return Tensor._make(lib.tg_empty(s, len(s), (to_dtype(dtype) or dtypes.default_float).value), device, requires_grad)

    @staticmethod
    def full(shape, fill_value, dtype=None, device=None, requires_grad=None):
        s = _argfix(shape)
        dt = to_dtype(dtype) or (dtypes.bool if isinstance(fill_value, bool) else
                                 dtypes.default_int if isinstance(fill_value, int) else dtypes.default_float)
        return Tensor._make(lib.tg_full(s, len(s), float(fill_value), dt.value), device, requires_grad)

    @staticmethod
    def arange(start, stop=None, step=1, dtype=None, device=None, requires_grad=None):
        if stop is None:
            start, stop = 0, start
        ints = all(isinstance(v, int) for v in (start, stop, step))
        dt = to_dtype(dtype) or (dtypes.default_int if ints else dtypes.default_float)
        return Tensor._make(lib.tg_arange(start, stop, step, dt.value), device, requires_grad)

    @staticmethod
    def linspace(start, stop, steps, dtype=None, device=None, requires_grad=None):
        dt = to_dtype(dtype) or dtypes.default_float
        return Tensor._make(lib.tg_linspace(start, stop, steps, dt.value), device, requires_grad)

    @staticmethod
    def eye(n, m=None, dtype=None, device=None, requires_grad=None):
        dt = to_dtype(dtype) or dtypes.default_float
        return Tensor._make(lib.tg_eye(n, n if m is None else m, dt.value), device, requires_grad)

    @staticmethod
    def manual_seed(seed=0):
        lib.tg_manual_seed(seed)

    @staticmethod
    def _rand(fn, shape, dtype, device, requires_grad, *args):
        s = _argfix(*shape)
        dt = to_dtype(dtype) or dtypes.default_float
        return Tensor._make(fn(s, len(s), *args, dt.value), device, requires_grad)

    @staticmethod
    def rand(*shape, dtype=None, device=None, requires_grad=None):
        return Tensor._rand(lib.tg_rand, shape, dtype, device, requires_grad)

    @staticmethod
    def randn(*shape, dtype=None, device=None, requires_grad=None):
        return Tensor._rand(lib.tg_randn, shape, dtype, device, requires_grad)

    @staticmethod
    def randint(*shape, low=0, high=10, dtype=None, device=None):
        s = _argfix(*shape)
        return Tensor._make(lib.tg_randint(s, len(s), low, high, (to_dtype(dtype) or dtypes.default_int).value), device)

    @staticmethod
    def uniform(*shape, low=0.0, high=1.0, dtype=None, device=None, requires_grad=None):
        return Tensor._rand(lib.tg_uniform, shape, dtype, device, requires_grad, low, high)

    @staticmethod
    def normal(*shape, mean=0.0, std=1.0, dtype=None, device=None, requires_grad=None):
        return Tensor._rand(lib.tg_normal, shape, dtype, device, requires_grad, mean, std)

    @staticmethod
    def kaiming_uniform(*shape, a=0.01, dtype=None, device=None, requires_grad=None):
        return Tensor._rand(lib.tg_kaiming_uniform, shape, dtype, device, requires_grad, a)

    @staticmethod
    def kaiming_normal(*shape, a=0.01, dtype=None, device=None, requires_grad=None):
        return Tensor._rand(lib.tg_kaiming_normal, shape, dtype, device, requires_grad, a)

    @staticmethod
    def glorot_uniform(*shape, dtype=None, device=None, requires_grad=None):
        return Tensor._rand(lib.tg_glorot_uniform, shape, dtype, device, requires_grad)

    @staticmethod
    def glorot_normal(*shape, dtype=None, device=None, requires_grad=None):
        return Tensor._rand(lib.tg_glorot_normal, shape, dtype, device, requires_grad)

    def full_like(self, fill_value, dtype=None, **kw):
        return Tensor.full(self.shape, fill_value, dtype=dtype or self.dtype, **kw)

    def zeros_like(self, dtype=None, **kw):
        return Tensor.zeros(self.shape, dtype=dtype or self.dtype, **kw)

    def ones_like(self, dtype=None, **kw):
        return Tensor.ones(self.shape, dtype=dtype or self.dtype, **kw)

    def empty_like(self, dtype=None, **kw):
        return Tensor.empty(self.shape, dtype=dtype or self.dtype, **kw)

    def rand_like(self, dtype=None, **kw):
        return Tensor.rand(self.shape, dtype=dtype or self.dtype, **kw)

    def randn_like(self, dtype=None, **kw):
        return Tensor.randn(self.shape, dtype=dtype or self.dtype, **kw)

    # ------------------------------------------------------------- properties
    @property
    def shape(self):
        buf = getattr(_tls, "shape", None)
        if buf is None:
            buf = _tls.shape = ffi.new("int64_t[64]")
        n = lib.tg_shape(self._h, buf, 64)
        return tuple(buf[0:n])

    @property
    def dtype(self):
        return dtypes.from_value(lib.tg_get_dtype(self._h))

    @property
    def device(self):
        return ffi.string(lib.tg_device_of(self._h)).decode()

    @property
    def ndim(self):
        return lib.tg_ndim(self._h)

    def numel(self):
        return lib.tg_numel(self._h)

    def element_size(self):
        return self.dtype.itemsize

    def nbytes(self):
        return self.numel() * self.dtype.itemsize

    def size(self, dim=None):
        return self.shape if dim is None else self.shape[dim]

    @property
    def requires_grad(self):
        return bool(lib.tg_get_requires_grad(self._h))

    @requires_grad.setter
    def requires_grad(self, on):
        if lib.tg_requires_grad(self._h, bool(on)) == NULL:
            raise error()

    def requires_grad_(self, on=True):
        self.requires_grad = on
        return self

    @property
    def grad(self):
        g = lib.tg_grad(self._h)
        return None if g == NULL else _w(lib.tg_retain(g))

    @grad.setter
    def grad(self, g):
        if g is not None:
            raise ValueError("tg: only `t.grad = None` is supported (tg_zero_grad); gradients accumulate in C")
        lib.tg_zero_grad(self._h)

    @property
    def T(self):
        return self.transpose()

    def is_realized(self):
        return bool(lib.tg_is_realized(self._h))

    # ------------------------------------------------------------ conversions
    def realize(self, *lst):
        """Compute self and lst in one schedule; an Optimizer.schedule_step() item runs the step too."""
        ts, steps, todo = [self], [], list(lst)
        while todo:
            x = todo.pop(0)
            if isinstance(x, (list, tuple)):
                todo[:0] = x
            elif isinstance(x, _OptimizerStep):
                steps.append(x.opt)
            elif isinstance(x, Tensor):
                ts.append(x)
            else:
                raise TypeError("tg: realize takes Tensors and Optimizer.schedule_step() items, not %r" % (x,))
        arr = ffi.new("tg_tensor *[]", [t._h for t in ts])
        if steps:
            for o in steps[:-1]:
                o._step(NULL, 0)
            steps[-1]._step(arr, len(ts))
        else:
            check(lib.tg_realize_many(arr, len(ts)) if len(ts) > 1 else lib.tg_realize(self._h))
        return self

    def numpy(self):
        dt = self.dtype
        if dt.np is None:
            return self.cast(dtypes.float32).numpy()
        out = np.empty(self.shape, dtype=dt.np)
        buf = ffi.from_buffer(out, require_writable=True) if out.nbytes else NULL
        if buf == NULL:
            check(lib.tg_realize(self._h))
        else:
            check(lib.tg_to_host(self._h, buf, out.nbytes))
        return out

    def __array__(self, dtype=None):
        a = self.numpy()
        return a if dtype is None else a.astype(dtype)

    def tolist(self):
        return self.numpy().tolist()

    def item(self):
        if self.numel() != 1:
            raise ValueError("tg: item() needs a tensor with one element, shape is %s" % (self.shape,))
        return self.numpy().reshape(()).item()

    def data(self):
        return memoryview(self.numpy())

    def to(self, device):
        return _w(lib.tg_to(self._h, Device.canonicalize(device).encode()))

    def clone(self):
        return self.contiguous()

    def cast(self, dtype):
        dt = to_dtype(dtype)
        return self if dt is self.dtype else _w(lib.tg_cast(self._h, dt.value))

    def bitcast(self, dtype):
        return _w(lib.tg_bitcast(self._h, to_dtype(dtype).value))

    def float(self): return self.cast(dtypes.float32)
    def half(self): return self.cast(dtypes.float16)
    def double(self): return self.cast(dtypes.float64)
    def int(self): return self.cast(dtypes.int32)
    def long(self): return self.cast(dtypes.int64)
    def bool(self): return self.cast(dtypes.bool)

    def assign(self, x):
        """Write x into this tensor (tinygrad's assign; lazy, always happens at the next realize)."""
        if not isinstance(x, Tensor):
            x = Tensor(x, dtype=self.dtype)
        check(lib.tg_assign(self._h, x._h))
        return self

    def detach(self):
        return _w(lib.tg_detach(self._h))

    def __repr__(self):
        return "<Tensor shape=%s dtype=%s device=%s%s>" % (
            self.shape, self.dtype, self.device, " requires_grad" if self.requires_grad else "")

    def __len__(self):
        if self.ndim == 0:
            raise TypeError("tg: len() of a 0-d tensor")
        return self.shape[0]

    def __iter__(self):
        return (self[i] for i in range(len(self)))

    def __bool__(self):
        if self.numel() != 1:
            raise ValueError("tg: the truth value of a tensor with %d elements is ambiguous" % self.numel())
        return bool(self.item())

    def __float__(self): return float(self.item())
    def __int__(self): return int(self.item())
    def __index__(self): return int(self.item())

    def __hash__(self):
        return id(self)

    # -------------------------------------------------------------- autograd
    def backward(self, gradient=None):
        """Accumulate d(self)/d(p) into p.grad for every p with requires_grad (self has one element)."""
        loss = self if gradient is None else (self * gradient).sum()
        check(lib.tg_backward(loss._h))
        return self

    def gradient(self, *targets, gradient=None):
        """d(self)/d(target) for each target (lazy tensors; higher order works)."""
        y = self if gradient is None else (self * gradient).sum()
        out = ffi.new("tg_tensor *[]", len(targets))
        check(lib.tg_gradient(y._h, [t._h for t in targets], len(targets), out))
        return [_w(out[i]) for i in range(len(targets))]

    # ---------------------------------------------------------- binary ops
    def _operands(self, x, reverse=False):
        if isinstance(x, Tensor):
            a, b = self, x
        elif _is_scalar(x):
            dt = _weak_dtype(self.dtype, x)
            a, b = self.cast(dt), _w(lib.tg_scalar(float(x), dt.value))
        elif isinstance(x, (list, tuple, np.ndarray)):
            a, b = self, Tensor(x)
        else:
            raise TypeError("tg: unsupported operand type %s for a Tensor op" % type(x).__name__)
        return (b, a) if reverse else (a, b)

    def _bin(self, fn, x, reverse=False):
        a, b = self._operands(x, reverse)
        return _w(fn(a._h, b._h))

    def _bin_s(self, fn, fn_s, x, reverse=False):
        """A binary op whose scalar form (fn_s) avoids making a constant tensor."""
        if not reverse and _is_scalar(x) and not isinstance(x, (bool, np.bool_)):
            dt = _weak_dtype(self.dtype, x)
            a = self if dt is self.dtype else self.cast(dt)
            return _w(fn_s(a._h, float(x)))
        return self._bin(fn, x, reverse)

    def add(self, x, reverse=False): return self._bin_s(lib.tg_add, lib.tg_add_s, x, reverse)
    def sub(self, x, reverse=False):
        if reverse and _is_scalar(x) and not isinstance(x, bool):
            dt = _weak_dtype(self.dtype, x)
            a = self.cast(dt)  # held: a temporary's handle would be freed before the call
            return _w(lib.tg_rsub_s(float(x), a._h))
        return self._bin_s(lib.tg_sub, lib.tg_sub_s, x, reverse)
    def mul(self, x, reverse=False): return self._bin_s(lib.tg_mul, lib.tg_mul_s, x, reverse)

    def div(self, x, reverse=False, rounding_mode=None):
        if rounding_mode is None:
            return self._bin_s(lib.tg_div, lib.tg_div_s, x, reverse)
        if rounding_mode == "floor":
            return self._bin(lib.tg_floordiv, x, reverse)
        if rounding_mode == "trunc":
            a, b = self._operands(x, reverse)
            return _w(lib.tg_idiv(a._h, b._h)) if not dtypes.is_float(a.dtype) and not dtypes.is_float(b.dtype) \
                else a.div(b).trunc()
        raise ValueError("tg: rounding_mode must be None, 'trunc' or 'floor', not %r" % (rounding_mode,))

    def pow(self, x, reverse=False):
        if not reverse and _is_scalar(x) and not isinstance(x, bool):
            dt = _weak_dtype(self.dtype, x)
            a = self.cast(dt)
            return _w(lib.tg_pow_s(a._h, float(x)))
        return self._bin(lib.tg_pow, x, reverse)

    def idiv(self, x, reverse=False): return self._bin(lib.tg_idiv, x, reverse)
    def matmul(self, x, reverse=False): return self._bin(lib.tg_matmul, x, reverse)
    def dot(self, x): return self._bin(lib.tg_dot, x)

    def where(self, x, y):
        """self ? x : y (self is the condition); a scalar branch takes the other's dtype."""
        if not isinstance(x, Tensor) and not isinstance(y, Tensor):
            x = Tensor(x)
        if not isinstance(x, Tensor):
            x = Tensor(x, dtype=_weak_dtype(y.dtype, x))
        if not isinstance(y, Tensor):
            y = Tensor(y, dtype=_weak_dtype(x.dtype, y))
        return _w(lib.tg_where(self._h, x._h, y._h))

    def lshift(self, x):
        return _w(lib.tg_shl(self._h, x)) if isinstance(x, int) else self._bin(lib.tg_bitwise_left_shift, x)

    def rshift(self, x):
        return _w(lib.tg_shr(self._h, x)) if isinstance(x, int) else self._bin(lib.tg_bitwise_right_shift, x)

    def lerp(self, end, weight):
        if isinstance(weight, Tensor):
            return _w(lib.tg_lerp(self._h, end._h, weight._h))
        return _w(lib.tg_lerp_s(self._h, end._h, float(weight)))

    def isclose(self, other, rtol=1e-05, atol=1e-08, equal_nan=False):
        a, b = self._operands(other)
        return _w(lib.tg_isclose(a._h, b._h, rtol, atol, equal_nan))

    def allclose(self, other, rtol=1e-05, atol=1e-08, equal_nan=False):
        a, b = self._operands(other)
        return bool(check(lib.tg_allclose(a._h, b._h, rtol, atol, equal_nan)))

    def clip(self, min_=None, max_=None):
        lo = -math.inf if min_ is None else min_
        hi = math.inf if max_ is None else max_
        if isinstance(lo, Tensor) or isinstance(hi, Tensor):
            x = self if min_ is None else self.maximum(min_)
            return x if max_ is None else x.minimum(max_)
        if not dtypes.is_float(self.dtype) and (isinstance(lo, float) and not math.isinf(lo) or
                                                isinstance(hi, float) and not math.isinf(hi)):
            return self.float().clip(min_, max_)
        return _w(lib.tg_clip(self._h, lo, hi))

    clamp = clip

    def __add__(self, x): return self.add(x)
    def __radd__(self, x): return self.add(x, True)
    def __sub__(self, x): return self.sub(x)
    def __rsub__(self, x): return self.sub(x, True)
    def __mul__(self, x): return self.mul(x)
    def __rmul__(self, x): return self.mul(x, True)
    def __truediv__(self, x): return self.div(x)
    def __rtruediv__(self, x): return self.div(x, True)
    def __floordiv__(self, x): return self._bin(lib.tg_floordiv, x)
    def __rfloordiv__(self, x): return self._bin(lib.tg_floordiv, x, True)
    def __mod__(self, x): return self._bin(lib.tg_mod, x)
    def __rmod__(self, x): return self._bin(lib.tg_mod, x, True)
    def __pow__(self, x): return self.pow(x)
    def __rpow__(self, x): return self.pow(x, True)
    def __matmul__(self, x): return self.matmul(x)
    def __rmatmul__(self, x): return self.matmul(x, True)
    def __and__(self, x): return self._bin(lib.tg_bitwise_and, x)
    def __rand__(self, x): return self._bin(lib.tg_bitwise_and, x, True)
    def __or__(self, x): return self._bin(lib.tg_bitwise_or, x)
    def __ror__(self, x): return self._bin(lib.tg_bitwise_or, x, True)
    def __xor__(self, x): return self._bin(lib.tg_bitwise_xor, x)
    def __rxor__(self, x): return self._bin(lib.tg_bitwise_xor, x, True)
    def __lshift__(self, x): return self.lshift(x)
    def __rshift__(self, x): return self.rshift(x)
    def __neg__(self): return self.neg()
    def __pos__(self): return self
    def __abs__(self): return self.abs()
    def __invert__(self): return self.bitwise_not()
    def __lt__(self, x): return self._bin(lib.tg_lt, x)
    def __le__(self, x): return self._bin(lib.tg_le, x)
    def __gt__(self, x): return self._bin(lib.tg_gt, x)
    def __ge__(self, x): return self._bin(lib.tg_ge, x)

    def __eq__(self, x):
        return self._bin(lib.tg_eq, x) if isinstance(x, Tensor) or _is_scalar(x) else NotImplemented

    def __ne__(self, x):
        return self._bin(lib.tg_ne, x) if isinstance(x, Tensor) or _is_scalar(x) else NotImplemented

    def __iadd__(self, x): return self.assign(self + x)
    def __isub__(self, x): return self.assign(self - x)
    def __imul__(self, x): return self.assign(self * x)
    def __itruediv__(self, x): return self.assign(self / x)
    def __imatmul__(self, x): return self.assign(self @ x)

    # -------------------------------------------------------- reductions
    def _reduce(self, fn, axis, keepdim):
        ax, n = _axes(axis)
        return _w(fn(self._h, ax, n, keepdim))

    def sum(self, axis=None, keepdim=False, acc_dtype=None, dtype=None):
        dt = to_dtype(dtype or acc_dtype)
        if dt is not None:
            ax, n = _axes(axis)
            return _w(lib.tg_sum_dtype(self._h, ax, n, keepdim, dt.value))
        return self._reduce(lib.tg_sum, axis, keepdim)

    def prod(self, axis=None, keepdim=False, acc_dtype=None, dtype=None):
        dt = to_dtype(dtype or acc_dtype)
        if dt is not None:
            ax, n = _axes(axis)
            return _w(lib.tg_prod_dtype(self._h, ax, n, keepdim, dt.value))
        return self._reduce(lib.tg_prod, axis, keepdim)

    def max(self, axis=None, keepdim=False): return self._reduce(lib.tg_max, axis, keepdim)
    def min(self, axis=None, keepdim=False): return self._reduce(lib.tg_min, axis, keepdim)
    def mean(self, axis=None, keepdim=False): return self._reduce(lib.tg_mean, axis, keepdim)
    def any(self, axis=None, keepdim=False): return self._reduce(lib.tg_any, axis, keepdim)
    def all(self, axis=None, keepdim=False): return self._reduce(lib.tg_all, axis, keepdim)

    def var(self, axis=None, keepdim=False, correction=1):
        ax, n = _axes(axis)
        return _w(lib.tg_var(self._h, ax, n, keepdim, correction))

    def std(self, axis=None, keepdim=False, correction=1):
        ax, n = _axes(axis)
        return _w(lib.tg_std(self._h, ax, n, keepdim, correction))

    def _two_out(self, fn, *args):
        a, b = ffi.new("tg_tensor **"), ffi.new("tg_tensor **")
        check(fn(self._h, *args, a, b))
        return _w(a[0]), _w(b[0])

    def var_mean(self, axis=None, keepdim=False, correction=1):
        ax, n = _axes(axis)
        return self._two_out(lib.tg_var_mean, ax, n, keepdim, correction)

    def std_mean(self, axis=None, keepdim=False, correction=1):
        ax, n = _axes(axis)
        return self._two_out(lib.tg_std_mean, ax, n, keepdim, correction)

    def argmax(self, axis=None, keepdim=False):
        if axis is None:
            r = self.flatten().argmax(0)
            return r.reshape([1] * self.ndim) if keepdim else r
        return _w(lib.tg_argmax(self._h, axis, keepdim))

    def argmin(self, axis=None, keepdim=False):
        if axis is None:
            r = self.flatten().argmin(0)
            return r.reshape([1] * self.ndim) if keepdim else r
        return _w(lib.tg_argmin(self._h, axis, keepdim))

    def softmax(self, axis=-1): return _w(lib.tg_softmax(self._h, axis))
    def log_softmax(self, axis=-1): return _w(lib.tg_log_softmax(self._h, axis))
    def softmin(self, axis=-1): return _w(lib.tg_softmin(self._h, axis))

    def logsumexp(self, axis=None, keepdim=False):
        if axis is None:
            r = self.flatten().logsumexp(0)
            return r.reshape([1] * self.ndim) if keepdim else r
        return _w(lib.tg_logsumexp(self._h, axis, keepdim))

    def cumsum(self, axis=0): return _w(lib.tg_cumsum(self._h, axis))
    def cumprod(self, axis=0): return _w(lib.tg_cumprod(self._h, axis))
    def logcumsumexp(self, axis=0): return _w(lib.tg_logcumsumexp(self._h, axis))
    def cummax(self, axis=0): return self._two_out(lib.tg_cummax, axis)
    def cummin(self, axis=0): return self._two_out(lib.tg_cummin, axis)

    # ---------------------------------------------------------- movement
    def reshape(self, shape, *args):
        s = _argfix(shape, *args)
        s = tuple(self.shape[i] if d is None else d for i, d in enumerate(s))
        return _w(lib.tg_reshape(self._h, s, len(s)))

    view = reshape

    def permute(self, order, *args):
        o = _argfix(order, *args)
        return _w(lib.tg_permute(self._h, o, len(o)))

    def expand(self, shape, *args):
        s = _argfix(shape, *args)
        if len(s) > self.ndim:  # new leading axes, like torch
            return self.reshape((1,) * (len(s) - self.ndim) + self.shape).expand(s)
        return _w(lib.tg_expand(self._h, s, len(s)))

    def flip(self, axis, *args):
        a = _argfix(axis, *args)
        return _w(lib.tg_flip(self._h, a, len(a)))

    def transpose(self, dim0=1, dim1=0): return _w(lib.tg_transpose(self._h, dim0, dim1))
    def unsqueeze(self, dim): return _w(lib.tg_unsqueeze(self._h, dim))
    def flatten(self, start_dim=0, end_dim=-1): return _w(lib.tg_flatten(self._h, start_dim, end_dim))
    def contiguous(self): return _w(lib.tg_contiguous(self._h))

    def squeeze(self, dim=None):
        return _w(lib.tg_squeeze(self._h, ALL_AXES if dim is None else dim))

    def unflatten(self, dim, sizes):
        return _w(lib.tg_unflatten(self._h, dim, list(sizes), len(sizes)))

    def pad(self, padding, mode="constant", value=0.0):
        """Per axis ((before, after) or None for each axis) as tinygrad, or flat pairs from the last
        axis backwards as torch.nn.functional.pad."""
        n = self.ndim
        if len(padding) == n and all(p is None or isinstance(p, (tuple, list)) for p in padding):
            pairs = [(0, 0) if p is None else tuple(p) for p in padding]
        elif len(padding) % 2 == 0 and len(padding) // 2 <= n and all(isinstance(p, int) for p in padding):
            pairs = [(0, 0)] * n
            for i in range(len(padding) // 2):
                pairs[n - 1 - i] = (padding[2 * i], padding[2 * i + 1])
        else:
            raise ValueError("tg: pad takes one (before, after) per axis or flat pairs, got %r" % (padding,))
        if mode not in _PAD_MODES:
            raise ValueError("tg: pad mode must be one of %s, not %r" % (sorted(_PAD_MODES), mode))
        return _w(lib.tg_pad_mode(self._h, [p[0] for p in pairs], [p[1] for p in pairs], _PAD_MODES[mode], value))

    def shrink(self, arg):
        s = self.shape
        pairs = [(0, s[i]) if p is None else p for i, p in enumerate(arg)]
        return _w(lib.tg_shrink(self._h, [p[0] for p in pairs], [p[1] for p in pairs]))

    def cat(self, *args, dim=0):
        ts = [self, *args]
        return _w(lib.tg_cat([t._h for t in ts], len(ts), dim))

    def stack(self, *args, dim=0):
        ts = [self, *args]
        return _w(lib.tg_stack([t._h for t in ts], len(ts), dim))

    def split(self, sizes, dim=0):
        n = self.shape[dim]
        if isinstance(sizes, int):
            sizes = [min(sizes, n - i) for i in range(0, n, sizes)] if n else [0]
        out = ffi.new("tg_tensor *[]", len(sizes))
        check(lib.tg_split(self._h, list(sizes), len(sizes), dim, out))
        return tuple(_w(out[i]) for i in range(len(sizes)))

    def chunk(self, chunks, dim=0):
        n = self.shape[dim]
        return self.split(max(1, -(-n // chunks)), dim)

    def repeat(self, repeats, *args):
        r = _argfix(repeats, *args)
        x = self.reshape((1,) * (len(r) - self.ndim) + self.shape) if len(r) > self.ndim else self
        return _w(lib.tg_repeat(x._h, r, len(r)))

    def repeat_interleave(self, repeats, dim=None):
        axis = ALL_AXES if dim is None else dim
        if isinstance(repeats, Tensor):
            return _w(lib.tg_repeat_interleave_t(self._h, repeats._h, axis))
        return _w(lib.tg_repeat_interleave(self._h, repeats, axis))

    def roll(self, shifts, dims=None):
        s = _argfix(shifts)
        if dims is None:
            return _w(lib.tg_roll(self._h, s, NULL, len(s)))
        d = _argfix(dims)
        return _w(lib.tg_roll(self._h, s, d, len(s)))

    def tril(self, diagonal=0): return _w(lib.tg_tril(self._h, diagonal))
    def triu(self, diagonal=0): return _w(lib.tg_triu(self._h, diagonal))
    def diagonal(self, offset=0, dim1=0, dim2=1): return _w(lib.tg_diagonal(self._h, offset, dim1, dim2))
    def diag(self, diagonal=0): return _w(lib.tg_diag(self._h, diagonal))
    def unfold(self, dim, size, step): return _w(lib.tg_unfold(self._h, dim, size, step))

    @staticmethod
    def meshgrid(*tensors, indexing="ij"):
        ts = _argfix(*tensors)
        if indexing not in ("ij", "xy"):
            raise ValueError("tg: meshgrid indexing must be 'ij' or 'xy'")
        out = ffi.new("tg_tensor *[]", len(ts))
        check(lib.tg_meshgrid([t._h for t in ts], len(ts), indexing == "xy", out))
        return tuple(_w(out[i]) for i in range(len(ts)))

    @staticmethod
    def einsum(formula, *operands):
        ts = _argfix(*operands)
        return _w(lib.tg_einsum(formula.encode(), [t._h for t in ts], len(ts)))

    # ---------------------------------------------------------- indexing
    def gather(self, dim, index): return _w(lib.tg_gather(self._h, dim, index._h))
    def index_select(self, dim, index): return _w(lib.tg_index_select(self._h, dim, index._h))

    def one_hot(self, num_classes=-1, dtype=None):
        if num_classes == -1:
            num_classes = int(self.max().item()) + 1
        return _w(lib.tg_one_hot(self._h, num_classes, (to_dtype(dtype) or dtypes.default_int).value))

    def _src(self, src, index):
        return src if isinstance(src, Tensor) else Tensor.full(index.shape, src, dtype=self.dtype)

    def scatter(self, dim, index, src, reduce=None):
        if reduce is not None:
            return self.scatter_reduce(dim, index, self._src(src, index), reduce, include_self=True)
        src = self._src(src, index)
        return _w(lib.tg_scatter(self._h, dim, index._h, src._h))

    def scatter_reduce(self, dim, index, src, reduce, include_self=True):
        if reduce not in _SCATTER:
            raise ValueError("tg: scatter_reduce reduce must be one of %s, not %r" % (sorted(_SCATTER), reduce))
        src = self._src(src, index)
        return _w(lib.tg_scatter_reduce(self._h, dim, index._h, src._h, _SCATTER[reduce],
                                        include_self))

    def scatter_add(self, dim, index, src): return _w(lib.tg_scatter_add(self._h, dim, index._h, src._h))
    def masked_fill(self, mask, value): return _w(lib.tg_masked_fill(self._h, mask._h, float(value)))
    def masked_select(self, mask): return _w(lib.tg_masked_select(self._h, mask._h))
    def nonzero(self): return _w(lib.tg_nonzero(self._h))
    def argsort(self, dim=-1, descending=False): return _w(lib.tg_argsort(self._h, dim, descending))

    def sort(self, dim=-1, descending=False):
        return self._two_out(lib.tg_sort, dim, descending)

    def topk(self, k, dim=-1, largest=True, sorted_=True):
        return self._two_out(lib.tg_topk, k, dim, largest)

    def __getitem__(self, idx):
        from .indexing import getitem
        return getitem(self, idx)

    def __setitem__(self, idx, value):
        from .indexing import setitem
        setitem(self, idx, value)

    # ------------------------------------------------------- nn functions
    def linear(self, weight, bias=None):
        """self @ weight + bias (tinygrad: weight is (in, out))."""
        x = self @ weight
        return x if bias is None else x + bias

    def sequential(self, layers):
        x = self
        for f in layers:
            x = f(x)
        return x

    def leaky_relu(self, neg_slope=0.01): return _w(lib.tg_leaky_relu(self._h, neg_slope))
    def softplus(self, beta=1): return _w(lib.tg_softplus(self._h, beta))
    def elu(self, alpha=1.0): return _w(lib.tg_elu(self._h, alpha))
    def celu(self, alpha=1.0): return _w(lib.tg_celu(self._h, alpha))
    def hardtanh(self, min_val=-1, max_val=1): return _w(lib.tg_hardtanh(self._h, min_val, max_val))

    def normalize(self, p=2.0, dim=1, eps=1e-12):
        return _w(lib.tg_normalize(self._h, p, dim, eps))

    def dropout(self, p=0.5):
        if not Tensor.training or p == 0:
            return self
        return _w(lib.tg_dropout(self._h, p, True))

    def _trailing(self, axis):
        axes = sorted(a % self.ndim for a in _argfix(axis))
        if axes != list(range(self.ndim - len(axes), self.ndim)):
            raise ValueError("tg: norms take trailing axes, got %r for rank %d" % (axis, self.ndim))
        return len(axes)

    def layernorm(self, axis=-1, eps=1e-5):
        return _w(lib.tg_layernorm(self._h, self._trailing(axis), NULL, NULL, eps))

    def rmsnorm(self, axis=-1, eps=1e-6):
        return _w(lib.tg_rmsnorm(self._h, self._trailing(axis), NULL, eps))

    def batchnorm(self, weight, bias, mean, invstd, axis=1):
        """tinygrad's batchnorm: (self - mean) * invstd * weight + bias along axis."""
        shape = [1] * self.ndim
        shape[axis] = -1
        x = self - mean.reshape(shape)
        if weight is not None:
            x = x * weight.reshape(shape)
        x = x * (invstd.reshape(shape) if isinstance(invstd, Tensor) else invstd)
        return x if bias is None else x + bias.reshape(shape)

    def sparse_categorical_crossentropy(self, Y, ignore_index=-1, label_smoothing=0.0, reduction="mean"):
        return _w(lib.tg_sparse_cross_entropy_ex(self._h, Y._h, NULL, ignore_index, label_smoothing,
                                                 _REDUCTION[reduction]))

    def cross_entropy(self, Y, reduction="mean", label_smoothing=0.0):
        if not dtypes.is_float(Y.dtype):
            return self.sparse_categorical_crossentropy(Y, -100, label_smoothing, reduction)
        return _w(lib.tg_cross_entropy_ex(self._h, Y._h, NULL, label_smoothing, _REDUCTION[reduction]))

    def nll_loss(self, Y, weight=None, ignore_index=None, reduction="mean"):
        return _w(lib.tg_nll_loss_ex(self._h, Y._h, NULL if weight is None else weight._h,
                                     -100 if ignore_index is None else ignore_index, _REDUCTION[reduction]))

    def binary_crossentropy(self, Y, reduction="mean"):
        return _w(lib.tg_bce_loss_ex(self._h, Y._h, NULL, _REDUCTION[reduction]))

    def binary_crossentropy_logits(self, Y, reduction="mean", pos_weight=None):
        return _w(lib.tg_bce_with_logits_loss_ex(self._h, Y._h, NULL, NULL if pos_weight is None else pos_weight._h,
                                                 _REDUCTION[reduction]))

    def mse_loss(self, Y, reduction="mean"):
        return _w(lib.tg_mse_loss_ex(self._h, Y._h, _REDUCTION[reduction]))

    def _geometry(self, weight, stride, dilation, padding):
        nsp = weight.ndim - 2
        x, pad = self, _tuple(padding, nsp)
        if len(pad) == 2 * nsp:  # asymmetric, torch.nn.functional.pad order: pad first
            x, pad = self.pad(pad), (0,) * nsp
        return x, nsp, list(_tuple(stride, nsp)), list(pad), list(_tuple(dilation, nsp))

    def conv2d(self, weight, bias=None, groups=1, stride=1, dilation=1, padding=0):
        """Any of 1-3 spatial axes (from weight's rank), like tinygrad's conv2d."""
        x, nsp, st, pad, dil = self._geometry(weight, stride, dilation, padding)
        return _w(lib.tg_conv(x._h, weight._h, NULL if bias is None else bias._h, nsp, st, pad, dil, groups))

    def conv_transpose2d(self, weight, bias=None, groups=1, stride=1, dilation=1, padding=0, output_padding=0):
        nsp = weight.ndim - 2
        return _w(lib.tg_conv_transpose(self._h, weight._h, NULL if bias is None else bias._h, nsp,
                                        list(_tuple(stride, nsp)), list(_tuple(padding, nsp)),
                                        list(_tuple(output_padding, nsp)), list(_tuple(dilation, nsp)), groups))

    def _pool_opts(self, k, stride, dilation, padding, ceil_mode, exclude_pad=False):
        nsp = len(k)
        keep = []  # the arrays the struct points at must outlive the call

        def arr(v):
            a = ffi.new("int[]", list(_tuple(v, nsp)))
            keep.append(a)
            return a
        o = ffi.new("tg_pool_opts *")
        o.stride = NULL if stride is None else arr(stride)
        pad = _tuple(padding, nsp)
        if len(pad) == 2 * nsp:  # asymmetric (before, after) pairs per axis, torch.nn.functional.pad order
            o.padding = arr([pad[2 * (nsp - 1 - i)] for i in range(nsp)])
            o.padding_after = arr([pad[2 * (nsp - 1 - i) + 1] for i in range(nsp)])
        else:
            o.padding = arr(pad)
        o.dilation = arr(dilation)
        o.ceil_mode = ceil_mode
        o.exclude_pad = exclude_pad
        return o, keep

    def max_pool2d(self, kernel_size=(2, 2), stride=None, dilation=1, padding=0, ceil_mode=False,
                   return_indices=False):
        k = _tuple(kernel_size, 2)
        o, keep = self._pool_opts(k, stride, dilation, padding, ceil_mode)
        idx = ffi.new("tg_tensor **") if return_indices else NULL
        r = _w(lib.tg_max_pool(self._h, len(k), list(k), o, idx))
        return (r, _w(idx[0])) if return_indices else r

    def avg_pool2d(self, kernel_size=(2, 2), stride=None, dilation=1, padding=0, ceil_mode=False,
                   count_include_pad=True):
        k = _tuple(kernel_size, 2)
        o, keep = self._pool_opts(k, stride, dilation, padding, ceil_mode, not count_include_pad)
        return _w(lib.tg_avg_pool(self._h, len(k), list(k), o))

    def max_unpool2d(self, indices, kernel_size=(2, 2), stride=None, dilation=1, padding=0, output_size=None):
        k = _tuple(kernel_size, 2)
        if dilation not in (1, (1,) * len(k)):
            raise ValueError("tg: max_unpool2d supports dilation 1 only")
        nsp = len(k)
        return _w(lib.tg_max_unpool(self._h, indices._h, nsp, list(k),
                                    NULL if stride is None else list(_tuple(stride, nsp)), list(_tuple(padding, nsp)),
                                    NULL if output_size is None else list(output_size)[-nsp:]))

    def interpolate(self, size, mode="linear", align_corners=False):
        nsp = len(size)
        if mode == "linear":
            mode = {1: "linear", 2: "bilinear", 3: "trilinear"}[nsp]
        if mode not in _INTERP:
            raise ValueError("tg: interpolate mode must be one of %s, not %r" % (sorted(_INTERP), mode))
        return _w(lib.tg_interpolate(self._h, list(size), NULL, _INTERP[mode], align_corners))

    def scaled_dot_product_attention(self, key, value, attn_mask=None, dropout_p=0.0, is_causal=False):
        r = _w(lib.tg_scaled_dot_product_attention(self._h, key._h, value._h,
                                                   NULL if attn_mask is None else attn_mask._h, is_causal))
        return r.dropout(dropout_p) if dropout_p else r

    @classmethod
    @contextmanager
    def train(cls, mode=True):
        prev, cls.training = cls.training, mode
        try:
            yield
        finally:
            cls.training = prev

    @classmethod
    @contextmanager
    def test(cls):
        with cls.train(False):
            yield


def _unary(fn, name):
    def f(self):
        return _w(fn(self._h))
    f.__name__ = name
    return f


# tinygrad method name → tg function (one C call, no arguments but the tensor)
_UNARY = {
    "neg": "neg", "exp": "exp", "exp2": "exp2", "log": "log", "log2": "log2", "sqrt": "sqrt", "rsqrt": "rsqrt",
    "relu": "relu", "abs": "abs", "sign": "sign", "reciprocal": "reciprocal", "square": "square", "sin": "sin",
    "cos": "cos", "tan": "tan", "tanh": "tanh", "sigmoid": "sigmoid", "floor": "floor", "ceil": "ceil",
    "round": "round", "trunc": "trunc", "isnan": "isnan", "isinf": "isinf", "isfinite": "isfinite",
    "log10": "log10", "log1p": "log1p", "expm1": "expm1", "asin": "asin", "acos": "acos", "atan": "atan",
    "sinh": "sinh", "cosh": "cosh", "asinh": "asinh", "acosh": "acosh", "atanh": "atanh", "erf": "erf",
    "logical_not": "logical_not", "bitwise_not": "bitwise_not", "gelu": "gelu", "silu": "silu", "swish": "silu",
    "selu": "selu", "relu6": "relu6", "hardsigmoid": "hardsigmoid", "hardswish": "hardswish", "mish": "mish",
    "softsign": "softsign", "logsigmoid": "logsigmoid", "quick_gelu": "quick_gelu",
}
# tinygrad/torch method name → tg function of two tensors (Python scalars become constants)
_BINARY = {
    "maximum": "maximum", "minimum": "minimum", "eq": "eq", "ne": "ne", "lt": "lt", "le": "le", "gt": "gt",
    "ge": "ge", "logical_and": "logical_and", "logical_or": "logical_or", "logical_xor": "logical_xor",
    "bitwise_and": "bitwise_and", "bitwise_or": "bitwise_or", "bitwise_xor": "bitwise_xor", "atan2": "atan2",
    "copysign": "copysign", "fmod": "fmod", "logaddexp": "logaddexp", "mod": "mod", "floordiv": "floordiv",
}


def _fast_binary(fn, slow):
    """An operator whose Tensor-Tensor case is one C call with nothing else around it (the
    per-op cost bench/python_overhead.py measures); other operands go through slow."""
    def op(self, x):
        if type(x) is Tensor:
            p = fn(self._h, x._h)
            if p:
                t = _new(Tensor)
                t._h = p
                return t
            raise error()
        return slow(self, x)
    op.__name__ = slow.__name__
    return op


# operator → the tg function of its Tensor-Tensor case (the slow path keeps scalars, dtypes, errors)
_FAST = {"__add__": "add", "__sub__": "sub", "__mul__": "mul", "__truediv__": "div", "__matmul__": "matmul",
         "__lt__": "lt", "__le__": "le", "__gt__": "gt", "__ge__": "ge", "__mod__": "mod", "__floordiv__": "floordiv",
         "__pow__": "pow", "__and__": "bitwise_and", "__or__": "bitwise_or", "__xor__": "bitwise_xor"}
for _name, _c in _FAST.items():
    setattr(Tensor, _name, _fast_binary(getattr(lib, "tg_" + _c), getattr(Tensor, _name)))
for _name, _c in _UNARY.items():
    setattr(Tensor, _name, _unary(getattr(lib, "tg_" + _c), _name))
for _name, _c in _BINARY.items():
    setattr(Tensor, _name, (lambda fn: lambda self, x, reverse=False: self._bin(fn, x, reverse))(getattr(lib, "tg_" + _c)))
