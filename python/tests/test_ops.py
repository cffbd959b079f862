"""test_ops.py — every Tensor op against PyTorch 1.13, forward and backward (helpers.check), over
several shapes and dtypes, broadcasting, views and edge values."""
import math

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from tg import Tensor, dtypes
from helpers import check, close, inputs

SHAPES = [(4,), (3, 5), (2, 3, 4)]
FLOATS = [np.float32, np.float64]

# name: (tg, torch, (low, high) of the inputs)
UNARY = {
    "neg": (Tensor.neg, torch.neg, (-2, 2)), "exp": (Tensor.exp, torch.exp, (-3, 3)),
    "exp2": (Tensor.exp2, torch.exp2, (-3, 3)), "log": (Tensor.log, torch.log, (0.1, 4)),
    "log2": (Tensor.log2, torch.log2, (0.1, 4)), "sqrt": (Tensor.sqrt, torch.sqrt, (0.1, 4)),
    "rsqrt": (Tensor.rsqrt, torch.rsqrt, (0.1, 4)), "relu": (Tensor.relu, torch.relu, (-2, 2)),
    "abs": (Tensor.abs, torch.abs, (-2, 2)), "sign": (Tensor.sign, torch.sign, (-2, 2)),
    "reciprocal": (Tensor.reciprocal, torch.reciprocal, (0.5, 3)), "square": (Tensor.square, torch.square, (-2, 2)),
    "sin": (Tensor.sin, torch.sin, (-3, 3)), "cos": (Tensor.cos, torch.cos, (-3, 3)),
    "tan": (Tensor.tan, torch.tan, (-1.2, 1.2)), "tanh": (Tensor.tanh, torch.tanh, (-3, 3)),
    "sigmoid": (Tensor.sigmoid, torch.sigmoid, (-5, 5)), "floor": (Tensor.floor, torch.floor, (-3, 3)),
    "ceil": (Tensor.ceil, torch.ceil, (-3, 3)), "round": (Tensor.round, torch.round, (-3, 3)),
    "trunc": (Tensor.trunc, torch.trunc, (-3, 3)), "log10": (Tensor.log10, torch.log10, (0.1, 4)),
    "log1p": (Tensor.log1p, torch.log1p, (-0.5, 3)), "expm1": (Tensor.expm1, torch.expm1, (-2, 2)),
    "asin": (Tensor.asin, torch.asin, (-0.9, 0.9)), "acos": (Tensor.acos, torch.acos, (-0.9, 0.9)),
    "atan": (Tensor.atan, torch.atan, (-3, 3)), "sinh": (Tensor.sinh, torch.sinh, (-2, 2)),
    "cosh": (Tensor.cosh, torch.cosh, (-2, 2)), "asinh": (Tensor.asinh, torch.asinh, (-3, 3)),
    "acosh": (Tensor.acosh, torch.acosh, (1.1, 4)), "atanh": (Tensor.atanh, torch.atanh, (-0.9, 0.9)),
    "erf": (Tensor.erf, torch.erf, (-2, 2)), "gelu": (Tensor.gelu, lambda x: F.gelu(x, approximate="tanh"), (-3, 3)),
    "silu": (Tensor.silu, F.silu, (-3, 3)), "swish": (Tensor.swish, F.silu, (-3, 3)), "selu": (Tensor.selu, F.selu, (-3, 3)),
    "relu6": (Tensor.relu6, F.relu6, (-2, 8)), "hardsigmoid": (Tensor.hardsigmoid, F.hardsigmoid, (-4, 4)),
    "hardswish": (Tensor.hardswish, F.hardswish, (-4, 4)), "mish": (Tensor.mish, F.mish, (-3, 3)),
    "softsign": (Tensor.softsign, F.softsign, (-3, 3)), "logsigmoid": (Tensor.logsigmoid, F.logsigmoid, (-3, 3)),
    "quick_gelu": (Tensor.quick_gelu, lambda x: x * torch.sigmoid(1.702 * x), (-3, 3)),
    "leaky_relu": (lambda x: x.leaky_relu(0.1), lambda x: F.leaky_relu(x, 0.1), (-2, 2)),
    "softplus": (lambda x: x.softplus(2.0), lambda x: F.softplus(x, 2.0), (-3, 3)),
    "elu": (lambda x: x.elu(0.7), lambda x: F.elu(x, 0.7), (-3, 3)),
    "celu": (lambda x: x.celu(0.7), lambda x: F.celu(x, 0.7), (-3, 3)),
    "hardtanh": (lambda x: x.hardtanh(-0.5, 0.8), lambda x: F.hardtanh(x, -0.5, 0.8), (-2, 2)),
    "clip": (lambda x: x.clip(-0.5, 0.8), lambda x: x.clamp(-0.5, 0.8), (-2, 2)),
    "pos": (lambda x: +x, lambda x: +x, (-2, 2)), "__abs__": (lambda x: abs(x), lambda x: abs(x), (-2, 2)),
}


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("name", sorted(UNARY))
def test_unary(name, shape, dtype):
    tg_fn, torch_fn, (lo, hi) = UNARY[name]
    tol = 2e-5 if dtype == np.float32 else 1e-9
    check(tg_fn, torch_fn, [shape], dtype=dtype, low=lo, high=hi, atol=tol, rtol=tol * 10)


@pytest.mark.parametrize("name", ["exp", "sqrt", "sigmoid", "tanh", "relu", "neg", "abs"])
def test_unary_float16(name):
    tg_fn, torch_fn, (lo, hi) = UNARY[name]
    x = inputs([(3, 4)], np.float16, lo, hi)[0]
    want = torch_fn(torch.tensor(x).float()).half()
    close(tg_fn(Tensor(x)).numpy(), want, 2e-3, 2e-3)
    assert tg_fn(Tensor(x)).dtype is dtypes.float16


EDGE = np.array([0.0, -0.0, 1.0, -1.0, np.inf, -np.inf, np.nan, 1e30, -1e30, 1e-30], dtype=np.float32)


@pytest.mark.parametrize("name", ["exp", "sigmoid", "tanh", "relu", "abs", "neg", "floor", "isnan", "isinf",
                                  "isfinite", "softsign", "logsigmoid", "sign"])
def test_unary_edge_values(name):
    tg_fn, torch_fn = getattr(Tensor, name), getattr(torch, name, None) or getattr(F, name)
    got, want = tg_fn(Tensor(EDGE)).numpy(), torch_fn(torch.tensor(EDGE))
    if name == "sign":  # documented: sign(nan) is nan in tg (numpy), 0 in torch 1.13
        want = np.sign(EDGE)
    close(got, want, 1e-6, 1e-5)


BINARY = {
    "add": (lambda a, b: a + b, lambda a, b: a + b), "sub": (lambda a, b: a - b, lambda a, b: a - b),
    "mul": (lambda a, b: a * b, lambda a, b: a * b), "div": (lambda a, b: a / b, lambda a, b: a / b),
    "pow": (lambda a, b: a.abs() ** b, lambda a, b: a.abs() ** b),
    "maximum": (Tensor.maximum, torch.maximum), "minimum": (Tensor.minimum, torch.minimum),
    "atan2": (Tensor.atan2, torch.atan2), "copysign": (Tensor.copysign, torch.copysign),
    "logaddexp": (Tensor.logaddexp, torch.logaddexp), "fmod": (Tensor.fmod, torch.fmod),
    "mod": (lambda a, b: a % b, lambda a, b: a % b), "floordiv": (lambda a, b: a // b, lambda a, b: a // b),
    "lerp": (lambda a, b: a.lerp(b, 0.3), lambda a, b: torch.lerp(a, b, 0.3)),
}
BSHAPES = [((4,), (4,)), ((3, 5), (3, 5)), ((3, 1), (1, 4)), ((2, 3, 4), (4,)), ((2, 1, 4), (3, 1)), ((), (2, 3))]


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("shapes", BSHAPES)
@pytest.mark.parametrize("name", sorted(BINARY))
def test_binary(name, shapes, dtype):
    tg_fn, torch_fn = BINARY[name]
    grad = name not in ("mod", "floordiv", "fmod")  # piecewise constant in b: both give 0 or torch refuses
    lo, hi = (0.5, 2.0) if name in ("div", "mod", "floordiv", "fmod") else (-2.0, 2.0)
    tol = 2e-5 if dtype == np.float32 else 1e-9
    check(tg_fn, torch_fn, list(shapes), dtype=dtype, low=lo, high=hi, atol=tol, rtol=tol * 10, grad=grad)


CMP = {"eq": lambda a, b: a == b, "ne": lambda a, b: a != b, "lt": lambda a, b: a < b,
       "le": lambda a, b: a <= b, "gt": lambda a, b: a > b, "ge": lambda a, b: a >= b}


@pytest.mark.parametrize("dtype", [np.float32, np.int32])
@pytest.mark.parametrize("name", sorted(CMP))
def test_compare(name, dtype):
    a, b = inputs([(3, 4), (4,)], dtype, -2, 3)
    a[0, :] = b  # some equal elements
    out = CMP[name](Tensor(a), Tensor(b))
    assert out.dtype is dtypes.bool
    close(out.numpy(), CMP[name](torch.tensor(a), torch.tensor(b)), 0, 0)
    close(CMP[name](Tensor(a), 1).numpy(), CMP[name](torch.tensor(a), 1), 0, 0)


@pytest.mark.parametrize("dtype", [np.int32, np.int64, np.int8, np.uint8])
@pytest.mark.parametrize("op", ["add", "sub", "mul", "and", "or", "xor", "floordiv", "mod", "max", "min"])
def test_int_binary(op, dtype):
    fns = {"add": lambda a, b: a + b, "sub": lambda a, b: a - b, "mul": lambda a, b: a * b,
           "and": lambda a, b: a & b, "or": lambda a, b: a | b, "xor": lambda a, b: a ^ b,
           "floordiv": lambda a, b: a // b, "mod": lambda a, b: a % b,
           "max": lambda a, b: a.maximum(b) if isinstance(a, Tensor) else torch.maximum(a, b),
           "min": lambda a, b: a.minimum(b) if isinstance(a, Tensor) else torch.minimum(a, b)}
    lo = 0 if dtype == np.uint8 else -20
    a, b = inputs([(3, 4), (4,)], dtype, lo, 20)
    if op in ("floordiv", "mod"):
        b[b == 0] = 3
    out = fns[op](Tensor(a), Tensor(b))
    assert out.dtype is dtypes.from_np(dtype)
    close(out.numpy(), fns[op](torch.tensor(a), torch.tensor(b)), 0, 0)


def test_int_div_is_float_and_truncating_modes():
    a, b = np.array([7, -7, 6, -1], np.int32), np.array([2, 2, -4, 3], np.int32)
    assert (Tensor(a) / Tensor(b)).dtype is dtypes.float32
    close((Tensor(a) / Tensor(b)).numpy(), a / b, 1e-6, 1e-6)
    close(Tensor(a).div(Tensor(b), rounding_mode="trunc").numpy(),
          torch.div(torch.tensor(a), torch.tensor(b), rounding_mode="trunc"), 0, 0)
    close(Tensor(a).div(Tensor(b), rounding_mode="floor").numpy(),
          torch.div(torch.tensor(a), torch.tensor(b), rounding_mode="floor"), 0, 0)
    close(Tensor(a.astype(np.float32)).div(2, rounding_mode="trunc").numpy(), np.trunc(a / 2), 0, 0)


def test_shifts_and_bitwise_not():
    a = np.array([1, 2, -8, 100], np.int32)
    close((Tensor(a) << 2).numpy(), a << 2, 0, 0)
    close((Tensor(a) >> 1).numpy(), a >> 1, 0, 0)
    close((Tensor(a) << Tensor(np.array([0, 1, 2, 3], np.int32))).numpy(), a << np.array([0, 1, 2, 3]), 0, 0)
    close((~Tensor(a)).numpy(), ~a, 0, 0)
    m = np.array([True, False, True])
    close((~Tensor(m)).numpy(), ~m, 0, 0)
    close(Tensor(m).logical_not().numpy(), ~m, 0, 0)
    close(Tensor(m).logical_and(Tensor(~m)).numpy(), m & ~m, 0, 0)


SCALARS = [2, 2.5, -1.5, True]


@pytest.mark.parametrize("s", SCALARS)
@pytest.mark.parametrize("op", ["add", "sub", "mul", "truediv", "pow"])
@pytest.mark.parametrize("reflected", [False, True])
def test_scalar_operands(op, s, reflected):
    """Python scalars on either side keep the tensor's dtype unless they need a float (weak types)."""
    fns = {"add": lambda a, b: a + b, "sub": lambda a, b: a - b, "mul": lambda a, b: a * b,
           "truediv": lambda a, b: a / b, "pow": lambda a, b: a ** b}
    if isinstance(s, bool) and op in ("sub", "pow", "truediv"):
        return
    x = inputs([(3, 4)], np.float32, 0.5, 2)[0]
    f = (lambda t: fns[op](s, t)) if reflected else (lambda t: fns[op](t, s))
    check(f, f, vals=[x], atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("s", [2, 2.5])
def test_int_tensor_with_python_scalar_promotes_like_torch(s):
    a = np.array([1, 2, 3], np.int32)
    for f in (lambda t: t + s, lambda t: s * t, lambda t: t - s, lambda t: s - t, lambda t: t < s):
        got, want = f(Tensor(a)), f(torch.tensor(a))
        close(got.numpy(), want, 1e-6, 1e-6)
        assert got.dtype.name == str(want.dtype)[6:]


def test_matmul_shapes():
    for sa, sb in [((3,), (3,)), ((2, 3), (3,)), ((3,), (3, 4)), ((2, 3), (3, 4)), ((5, 2, 3), (3, 4)),
                   ((5, 2, 3), (1, 3, 4)), ((2, 1, 3, 4), (5, 4, 2))]:
        check(lambda a, b: a @ b, lambda a, b: a @ b, [sa, sb], atol=1e-5, rtol=1e-4)
    check(lambda a, b: a.dot(b), lambda a, b: a.dot(b), [(5,), (5,)])
    a, b = inputs([(2, 3), (3, 4)])
    close((a @ Tensor(b)).numpy(), a @ b, 1e-5, 1e-5)  # reflected: numpy @ Tensor
    close(Tensor(a).matmul(Tensor(b)).numpy(), a @ b, 1e-5, 1e-5)


def test_matmul_float64_and_int():
    check(lambda a, b: a @ b, lambda a, b: a @ b, [(4, 6), (6, 3)], dtype=np.float64, atol=1e-12, rtol=1e-12)
    a, b = inputs([(3, 4), (4, 2)], np.int32, -5, 5)
    close((Tensor(a) @ Tensor(b)).numpy(), a @ b, 0, 0)


def test_einsum():
    check(lambda a, b: Tensor.einsum("bij,bjk->bik", a, b), lambda a, b: torch.einsum("bij,bjk->bik", a, b),
          [(2, 3, 4), (2, 4, 5)], atol=1e-5)
    check(lambda a: Tensor.einsum("ii->i", a), lambda a: torch.einsum("ii->i", a), [(4, 4)])


def test_where_and_masked_fill():
    c = inputs([(3, 4)], np.bool_)[0]
    check(lambda a, b: Tensor(c).where(a, b), lambda a, b: torch.where(torch.tensor(c), a, b), [(3, 4), (4,)])
    check(lambda a: Tensor(c).where(a, 0.5), lambda a: torch.where(torch.tensor(c), a, torch.tensor(0.5)), [(3, 4)])
    check(lambda a: a.masked_fill(Tensor(c), -1.0), lambda a: a.masked_fill(torch.tensor(c), -1.0), [(3, 4)])
    check(lambda a: a.masked_select(Tensor(c)), lambda a: a.masked_select(torch.tensor(c)), [(3, 4)])


def test_isclose_allclose():
    a = np.array([1.0, 2.0, np.nan, np.inf, 1e-9], np.float32)
    b = np.array([1.0 + 1e-7, 2.1, np.nan, np.inf, 0.0], np.float32)
    close(Tensor(a).isclose(Tensor(b)).numpy(), torch.isclose(torch.tensor(a), torch.tensor(b)), 0, 0)
    close(Tensor(a).isclose(Tensor(b), equal_nan=True).numpy(),
          torch.isclose(torch.tensor(a), torch.tensor(b), equal_nan=True), 0, 0)
    assert Tensor([1.0, 2.0]).allclose(Tensor([1.0, 2.0 + 1e-7]))
    assert not Tensor([1.0, 2.0]).allclose(Tensor([1.0, 2.5]))


# ------------------------------------------------------------------ reductions
AXES = [None, 0, -1, (0, 1), 1]
REDUCE = {"sum": (Tensor.sum, torch.sum), "mean": (Tensor.mean, torch.mean),
          "max": (Tensor.max, torch.amax), "min": (Tensor.min, torch.amin), "prod": (Tensor.prod, None),
          "var": (Tensor.var, torch.var), "std": (Tensor.std, torch.std)}


def _torch_reduce(name, x, axis, keepdim):
    if name == "prod":
        dims = range(x.ndim) if axis is None else (axis if isinstance(axis, tuple) else (axis,))
        for d in sorted((d % x.ndim for d in dims), reverse=True):
            x = x.prod(d, keepdim=True)
        return x if keepdim else x.reshape([s for i, s in enumerate(x.shape) if not (
            axis is None or i in {a % len(x.shape) for a in (axis if isinstance(axis, tuple) else (axis,))})])
    f = REDUCE[name][1]
    if axis is None:
        return f(x) if not keepdim else f(x, dim=tuple(range(x.ndim)), keepdim=True)
    return f(x, dim=axis, keepdim=keepdim)


@pytest.mark.parametrize("keepdim", [False, True])
@pytest.mark.parametrize("axis", AXES)
@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("name", sorted(REDUCE))
def test_reduce(name, dtype, axis, keepdim):
    tol = 2e-5 if dtype == np.float32 else 1e-10
    check(lambda x: REDUCE[name][0](x, axis=axis, keepdim=keepdim), lambda x: _torch_reduce(name, x, axis, keepdim),
          [(3, 4, 5)], dtype=dtype, low=0.5 if name == "prod" else -2, high=1.5 if name == "prod" else 2,
          atol=tol, rtol=tol * 10)


@pytest.mark.parametrize("dtype", [np.int32, np.bool_, np.uint8])
def test_int_sum_widens_like_torch(dtype):
    x = inputs([(3, 4)], dtype, 0, 100)[0]
    got, want = Tensor(x).sum(axis=1), torch.tensor(x).sum(1)
    close(got.numpy(), want, 0, 0)
    assert got.dtype.name == ("uint64" if dtype == np.uint8 else "int64")
    close(Tensor(x).sum(dtype=dtypes.float32).numpy(), torch.tensor(x).sum(dtype=torch.float32), 0, 1e-6)


def test_any_all_argmax_argmin():
    x = inputs([(3, 4)], np.float32)[0]
    x[1, 2] = x.max()  # a tie: the first wins
    for axis in (None, 0, 1):
        for keepdim in ((False,) if axis is None else (False, True)):
            close(Tensor(x).argmax(axis, keepdim).numpy(), torch.tensor(x).argmax(axis, keepdim).int(), 0, 0)
            close(Tensor(x).argmin(axis, keepdim).numpy(), torch.tensor(x).argmin(axis, keepdim).int(), 0, 0)
    b = x > 0.5
    for axis in (None, 0, 1):
        kw = {} if axis is None else {"dim": axis}
        close(Tensor(b).any(axis).numpy(), torch.tensor(b).any(**kw), 0, 0)
        close(Tensor(b).all(axis).numpy(), torch.tensor(b).all(**kw), 0, 0)


@pytest.mark.parametrize("axis", [0, 1, -1])
def test_softmax_family(axis):
    check(lambda x: x.softmax(axis), lambda x: x.softmax(axis), [(3, 5)])
    check(lambda x: x.log_softmax(axis), lambda x: x.log_softmax(axis), [(3, 5)])
    check(lambda x: x.softmin(axis), lambda x: F.softmin(x, axis), [(3, 5)])
    check(lambda x: x.logsumexp(axis), lambda x: x.logsumexp(axis), [(3, 5)])
    check(lambda x: x.logsumexp(axis, keepdim=True), lambda x: x.logsumexp(axis, keepdim=True), [(3, 5)])
    check(lambda x: x.cumsum(axis), lambda x: x.cumsum(axis), [(3, 5)])
    check(lambda x: x.cumprod(axis), lambda x: x.cumprod(axis), [(3, 5)], low=0.5, high=1.5)
    check(lambda x: x.logcumsumexp(axis), lambda x: x.logcumsumexp(axis), [(3, 5)])
    check(lambda x: x.cummax(axis), lambda x: torch.cummax(x, axis), [(3, 5)])
    check(lambda x: x.cummin(axis), lambda x: torch.cummin(x, axis), [(3, 5)])


def test_softmax_large_values_and_logsumexp_none():
    x = np.array([[1000.0, 0.0, -1000.0], [1e30, 1e30, 0]], np.float32)
    close(Tensor(x).softmax().numpy(), torch.tensor(x).softmax(-1), 1e-6, 1e-6)
    check(lambda x: x.logsumexp(), lambda x: x.logsumexp((0, 1)), [(3, 4)])


def test_var_mean_std_mean_correction():
    check(lambda x: x.var_mean(1), lambda x: torch.var_mean(x, 1), [(4, 6)])
    check(lambda x: x.std_mean(0, keepdim=True), lambda x: torch.std_mean(x, 0, keepdim=True), [(4, 6)])
    check(lambda x: x.var(1, correction=0), lambda x: x.var(1, unbiased=False), [(4, 6)])


def test_reduce_edge_values():
    x = np.array([[np.nan, 1.0], [np.inf, -np.inf], [0.0, -0.0]], np.float32)
    for name in ("sum", "max", "min", "mean"):
        close(getattr(Tensor(x), name)(axis=1).numpy(), _torch_reduce(name, torch.tensor(x), 1, False), 0, 0)
    e = np.zeros((0, 3), np.float32)
    close(Tensor(e).sum(0).numpy(), np.zeros(3), 0, 0)
    close(Tensor(e).prod(0).numpy(), np.ones(3), 0, 0)
    with pytest.raises(ValueError):
        Tensor(e).max(0)


# -------------------------------------------------------------------- movement
MOVE = {
    "reshape": (lambda x: x.reshape(4, -1), lambda x: x.reshape(4, -1)),
    "reshape_tuple": (lambda x: x.reshape((2, 12)), lambda x: x.reshape((2, 12))),
    "view": (lambda x: x.view(24), lambda x: x.view(24)),
    "permute": (lambda x: x.permute(2, 0, 1), lambda x: x.permute(2, 0, 1)),
    "permute_tuple": (lambda x: x.permute((1, 2, 0)), lambda x: x.permute((1, 2, 0))),
    "transpose": (lambda x: x.transpose(0, 2), lambda x: x.transpose(0, 2)),
    "transpose_default": (lambda x: x.transpose(), lambda x: x.transpose(1, 0)),
    "flip": (lambda x: x.flip(0, 2), lambda x: x.flip((0, 2))),
    "flatten": (lambda x: x.flatten(), lambda x: x.flatten()),
    "flatten1": (lambda x: x.flatten(1), lambda x: x.flatten(1)),
    "unflatten": (lambda x: x.unflatten(2, (2, 2)), lambda x: x.unflatten(2, (2, 2))),
    "unsqueeze": (lambda x: x.unsqueeze(1), lambda x: x.unsqueeze(1)),
    "unsqueeze_neg": (lambda x: x.unsqueeze(-1), lambda x: x.unsqueeze(-1)),
    "squeeze": (lambda x: x[:, :1].squeeze(), lambda x: x[:, :1].squeeze()),
    "squeeze_dim": (lambda x: x[:, :1].squeeze(1), lambda x: x[:, :1].squeeze(1)),
    "expand": (lambda x: x[:, :1].expand(2, 5, 4), lambda x: x[:, :1].expand(2, 5, 4)),
    "expand_new_axis": (lambda x: x.expand(3, 2, 3, 4), lambda x: x.expand(3, 2, 3, 4)),
    "pad_torch": (lambda x: x.pad((1, 2)), lambda x: F.pad(x, (1, 2))),
    "pad_tinygrad": (lambda x: x.pad(((0, 0), None, (2, 1))), lambda x: F.pad(x, (2, 1))),
    "pad_value": (lambda x: x.pad((1, 1, 2, 0), value=3.0), lambda x: F.pad(x, (1, 1, 2, 0), value=3.0)),
    "pad_reflect": (lambda x: x.pad((2, 1), mode="reflect"), lambda x: F.pad(x, (2, 1), mode="reflect")),
    "pad_replicate": (lambda x: x.pad((2, 1), mode="replicate"), lambda x: F.pad(x, (2, 1), mode="replicate")),
    "pad_circular": (lambda x: x.pad((2, 1), mode="circular"), lambda x: F.pad(x, (2, 1), mode="circular")),
    "pad_negative": (lambda x: x.pad((-1, 1)), lambda x: F.pad(x, (-1, 1))),
    "shrink": (lambda x: x.shrink(((0, 1), None, (1, 3))), lambda x: x[0:1, :, 1:3]),
    "cat": (lambda x: x.cat(x * 2, dim=1), lambda x: torch.cat([x, x * 2], 1)),
    "stack": (lambda x: x.stack(x + 1, dim=-1), lambda x: torch.stack([x, x + 1], -1)),
    "repeat": (lambda x: x.repeat(2, 1, 2), lambda x: x.repeat(2, 1, 2)),
    "repeat_more": (lambda x: x.repeat(2, 1, 1, 1), lambda x: x.repeat(2, 1, 1, 1)),
    "repeat_interleave": (lambda x: x.repeat_interleave(2, 1), lambda x: x.repeat_interleave(2, 1)),
    "repeat_interleave_flat": (lambda x: x.repeat_interleave(2), lambda x: x.repeat_interleave(2)),
    "roll": (lambda x: x.roll(2, 2), lambda x: x.roll(2, 2)),
    "roll_many": (lambda x: x.roll((1, -1), (0, 1)), lambda x: x.roll((1, -1), (0, 1))),
    "roll_flat": (lambda x: x.roll(3), lambda x: x.roll(3)),
    "tril": (lambda x: x.tril(), lambda x: x.tril()), "triu": (lambda x: x.triu(1), lambda x: x.triu(1)),
    "diagonal": (lambda x: x.diagonal(0, 1, 2), lambda x: x.diagonal(0, 1, 2)),
    "unfold": (lambda x: x.unfold(2, 2, 1), lambda x: x.unfold(2, 2, 1)),
    "contiguous": (lambda x: x.permute(2, 1, 0).contiguous(), lambda x: x.permute(2, 1, 0).contiguous()),
    "T": (lambda x: x[0].T, lambda x: x[0].T),
}


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("name", sorted(MOVE))
def test_movement(name, dtype):
    check(MOVE[name][0], MOVE[name][1], [(2, 3, 4)], dtype=dtype)


def test_movement_int_and_views_of_views():
    x = np.arange(24, dtype=np.int32).reshape(2, 3, 4)
    t = Tensor(x)
    close(t.permute(2, 0, 1).reshape(4, 6)[1:, ::2].flip(0).numpy(),
          np.flip(x.transpose(2, 0, 1).reshape(4, 6)[1:, ::2], 0), 0, 0)
    check(lambda a: (a.permute(2, 0, 1)[::2] * 2).sum(1), lambda a: (a.permute(2, 0, 1)[::2] * 2).sum(1), [(2, 3, 4)])


def test_diag_split_chunk_meshgrid():
    check(lambda x: x.diag(), lambda x: x.diag(), [(4,)])
    check(lambda x: x.diag(1), lambda x: x.diag(1), [(4, 4)])
    check(lambda x: x.split(2, 1), lambda x: x.split(2, 1), [(3, 5)])
    check(lambda x: x.split([1, 4], 1), lambda x: x.split([1, 4], 1), [(3, 5)])
    check(lambda x: x.chunk(2, 0), lambda x: x.chunk(2, 0), [(5, 2)])
    a, b = Tensor([1, 2, 3]), Tensor([4, 5])
    for idx in ("ij", "xy"):
        got = Tensor.meshgrid(a, b, indexing=idx)
        want = torch.meshgrid(torch.tensor([1, 2, 3]), torch.tensor([4, 5]), indexing=idx)
        for g, w in zip(got, want):
            close(g.numpy(), w.int(), 0, 0)


# -------------------------------------------------------------------- indexing
GETITEM = [
    (1,), (-1,), (slice(None),), (slice(1, None),), (slice(None, None, 2),), (slice(None, None, -1),),
    (slice(-2, None, -2),), (1, 2), (slice(None), 1), (Ellipsis, 1), (None,), (1, None, slice(None, 2)),
    (Ellipsis, None), (slice(None), None, slice(1, 3, 1), Ellipsis), (0, 0, 0), (slice(5, 9),),
    (slice(None, None, 3), slice(None, None, -2)),
]


@pytest.mark.parametrize("idx", GETITEM, ids=[str(i) for i in GETITEM])
def test_getitem_basic(idx):
    if any(isinstance(i, slice) and (i.step or 1) < 0 for i in idx):  # torch has no negative steps: numpy
        x, w = inputs([(4, 5, 6), np.zeros((4, 5, 6))[idx].shape])
        t = Tensor(x)
        close(t[idx].numpy(), x[idx], 0, 0)
        want = np.zeros_like(x)
        want[idx] = w
        close((t[idx] * Tensor(w)).sum().gradient(t)[0].numpy(), want, 0, 0)
        return
    check(lambda x: x[idx], lambda x: x[idx], [(4, 5, 6)])


TINDEX = [
    lambda I: I([2, 0, 2]), lambda I: (slice(None), I([1, -1])), lambda I: (I([[0, 1], [3, 2]]),),
    lambda I: (I([0, 3]), I([1, 2])), lambda I: (I([0, 3]), slice(None), I([1, 2])),
    lambda I: (slice(None), I([0, 2]), I([[1], [3]])), lambda I: (1, slice(None), I([0, 5])),
    lambda I: (Ellipsis, I([5, 0, 1])), lambda I: (I([1]), 2), lambda I: (None, I([2, 1])),
]


@pytest.mark.parametrize("k", range(len(TINDEX)))
def test_getitem_tensor_indices(k):
    """Integer tensor (and list) indices: numpy's placement of the new axes, negative indices."""
    tg_idx, torch_idx = TINDEX[k](lambda v: Tensor(v)), TINDEX[k](lambda v: torch.tensor(v))
    check(lambda x: x[tg_idx], lambda x: x[torch_idx], [(4, 5, 6)])
    list_idx = TINDEX[k](lambda v: v)
    if isinstance(list_idx, list):
        close(Tensor(np.arange(120.0).reshape(4, 5, 6))[list_idx].numpy(), np.arange(120.0).reshape(4, 5, 6)[list_idx],
              0, 0)


def test_getitem_errors():
    t = Tensor.zeros(3, 4)
    with pytest.raises(IndexError):
        t[3]
    with pytest.raises(IndexError):
        t[0, 0, 0]
    with pytest.raises(IndexError):
        t[..., ...]
    with pytest.raises(IndexError):
        t[Tensor([0.5])]


SETITEM = [(1,), (slice(None), 2), (slice(None, None, 2),), (Ellipsis, slice(1, 3)), (0, 1), (slice(None), None, 0)]


@pytest.mark.parametrize("idx", SETITEM, ids=[str(i) for i in SETITEM])
def test_setitem(idx):
    x = np.arange(20, dtype=np.float32).reshape(4, 5)
    t = Tensor(x).contiguous().realize()
    x[idx] = -1.5
    t[idx] = -1.5
    close(t.numpy(), x, 0, 0)
    region = x[idx]
    v = np.arange(region.size, dtype=np.float32).reshape(region.shape) + 100
    x[idx] = v
    t[idx] = Tensor(v)
    close(t.numpy(), x, 0, 0)


def test_setitem_tensor_index_and_int_dtype():
    x = np.zeros((5, 3), np.int32)
    t = Tensor(x).contiguous().realize()
    t[Tensor([4, 0])] = 7
    x[[4, 0]] = 7
    close(t.numpy(), x, 0, 0)
    t[:, 1] = Tensor([1, 2, 3, 4, 5])
    x[:, 1] = [1, 2, 3, 4, 5]
    close(t.numpy(), x, 0, 0)


@pytest.mark.parametrize("dtype", FLOATS)
def test_gather_scatter_index_select(dtype):
    idx = np.array([[0, 2, 1], [1, 0, 0]], np.int64)
    check(lambda x: x.gather(1, Tensor(idx)), lambda x: x.gather(1, torch.tensor(idx)), [(2, 4)], dtype=dtype)
    check(lambda x: x.index_select(0, Tensor([2, 0, 2])), lambda x: x.index_select(0, torch.tensor([2, 0, 2])),
          [(3, 4)], dtype=dtype)
    sidx = np.array([[0, 2, 1], [1, 3, 0]], np.int64)
    check(lambda x, s: x.scatter(1, Tensor(sidx), s), lambda x, s: x.scatter(1, torch.tensor(sidx), s),
          [(2, 4), (2, 3)], dtype=dtype)
    check(lambda x: x.scatter(1, Tensor(sidx), 9.0), lambda x: x.scatter(1, torch.tensor(sidx), 9.0), [(2, 4)],
          dtype=dtype, grad=False)
    dup = np.array([[0, 0, 1], [2, 2, 2]], np.int64)
    for red in ("sum", "prod", "mean", "amax", "amin"):
        for inc in (True, False):
            check(lambda x, s: x.scatter_reduce(1, Tensor(dup), s, red, include_self=inc),
                  lambda x, s: x.scatter_reduce(1, torch.tensor(dup), s, red, include_self=inc),
                  [(2, 4), (2, 3)], dtype=dtype, grad=red in ("sum", "mean"))
    check(lambda x, s: x.scatter_add(1, Tensor(dup), s), lambda x, s: x.scatter_add(1, torch.tensor(dup), s),
          [(2, 4), (2, 3)], dtype=dtype)


def test_one_hot_nonzero_sort_topk():
    y = np.array([2, 0, 1, 2], np.int32)
    close(Tensor(y).one_hot(3).numpy(), F.one_hot(torch.tensor(y).long(), 3).int(), 0, 0)
    x = np.array([[0, 1.5, 0], [2, 0, -1]], np.float32)
    close(Tensor(x).nonzero().numpy(), torch.tensor(x).nonzero(), 0, 0)
    for desc in (False, True):
        check(lambda t: t.sort(1, desc), lambda t: torch.sort(t, dim=1, descending=desc, stable=True), [(3, 6)])
        close(Tensor(x).argsort(1, desc).numpy(), torch.sort(torch.tensor(x), dim=1, descending=desc, stable=True)[1],
              0, 0)
    for largest in (True, False):
        check(lambda t: t.topk(2, 1, largest), lambda t: torch.topk(t, 2, 1, largest), [(3, 6)])


# ----------------------------------------------------------- nn functions
def test_losses():
    y = np.array([2, 0, 1, 2], np.int64)
    check(lambda x: x.sparse_categorical_crossentropy(Tensor(y)), lambda x: F.cross_entropy(x, torch.tensor(y)), [(4, 3)])
    check(lambda x: x.sparse_categorical_crossentropy(Tensor(y), label_smoothing=0.1, reduction="sum"),
          lambda x: F.cross_entropy(x, torch.tensor(y), label_smoothing=0.1, reduction="sum"), [(4, 3)])
    check(lambda x: x.cross_entropy(Tensor(y), reduction="none"),
          lambda x: F.cross_entropy(x, torch.tensor(y), reduction="none"), [(4, 3)])
    p = np.random.default_rng(2).dirichlet(np.ones(3), 4).astype(np.float32)
    check(lambda x: x.cross_entropy(Tensor(p)), lambda x: F.cross_entropy(x, torch.tensor(p)), [(4, 3)])
    check(lambda x: x.log_softmax().nll_loss(Tensor(y)), lambda x: F.nll_loss(x.log_softmax(-1), torch.tensor(y)),
          [(4, 3)])
    t = (np.random.default_rng(3).random((4, 3)) > 0.5).astype(np.float32)
    check(lambda x: x.sigmoid().binary_crossentropy(Tensor(t)),
          lambda x: F.binary_cross_entropy(x.sigmoid(), torch.tensor(t)), [(4, 3)])
    check(lambda x: x.binary_crossentropy_logits(Tensor(t)),
          lambda x: F.binary_cross_entropy_with_logits(x, torch.tensor(t)), [(4, 3)])
    check(lambda x, z: x.mse_loss(z), lambda x, z: F.mse_loss(x, z), [(4, 3), (4, 3)])


@pytest.mark.parametrize("dtype", FLOATS)
def test_conv2d(dtype):
    tol = 1e-4 if dtype == np.float32 else 1e-10
    for kw in [{}, {"stride": 2}, {"padding": 1}, {"dilation": 2}, {"padding": (1, 2), "stride": (2, 1)}]:
        check(lambda x, w, b: x.conv2d(w, b, **kw), lambda x, w, b: F.conv2d(x, w, b, **kw),
              [(2, 3, 7, 8), (4, 3, 3, 3), (4,)], dtype=dtype, atol=tol, rtol=tol)
    check(lambda x, w: x.conv2d(w, groups=2), lambda x, w: F.conv2d(x, w, groups=2), [(1, 4, 5, 5), (6, 2, 3, 3)],
          dtype=dtype, atol=tol, rtol=tol)
    check(lambda x, w: x.conv2d(w, padding=(1, 0, 2, 1)), lambda x, w: F.conv2d(F.pad(x, (1, 0, 2, 1)), w),
          [(1, 2, 5, 5), (3, 2, 3, 3)], dtype=dtype, atol=tol, rtol=tol)
    check(lambda x, w: x.conv2d(w, padding=1), lambda x, w: F.conv1d(x, w, padding=1), [(2, 3, 9), (4, 3, 3)],
          dtype=dtype, atol=tol, rtol=tol)


def test_conv_transpose2d():
    for kw in [{}, {"stride": 2}, {"stride": 2, "padding": 1, "output_padding": 1}]:
        check(lambda x, w, b: x.conv_transpose2d(w, b, **kw), lambda x, w, b: F.conv_transpose2d(x, w, b, **kw),
              [(2, 3, 5, 5), (3, 4, 3, 3), (4,)], atol=1e-4, rtol=1e-4)


def test_pools():
    for kw in [{}, {"kernel_size": 3, "stride": 1}, {"kernel_size": (2, 3), "stride": (1, 2)},
               {"kernel_size": 3, "stride": 2, "padding": 1}, {"kernel_size": 2, "ceil_mode": True}]:
        k = kw.get("kernel_size", 2)
        tkw = dict(kw, kernel_size=k)
        check(lambda x: x.max_pool2d(**kw), lambda x: F.max_pool2d(x, **tkw), [(2, 3, 7, 7)])
        check(lambda x: x.avg_pool2d(**kw), lambda x: F.avg_pool2d(x, **tkw), [(2, 3, 7, 7)])
    check(lambda x: x.avg_pool2d(3, 2, padding=1, count_include_pad=False),
          lambda x: F.avg_pool2d(x, 3, 2, padding=1, count_include_pad=False), [(1, 2, 6, 6)])
    check(lambda x: x.max_pool2d(2, dilation=2), lambda x: F.max_pool2d(x, 2, dilation=2), [(1, 2, 7, 7)])
    x = inputs([(1, 2, 6, 6)])[0]
    v, i = Tensor(x).max_pool2d(2, return_indices=True)
    tv, ti = F.max_pool2d(torch.tensor(x), 2, return_indices=True)
    close(v.numpy(), tv, 0, 0)
    close(i.numpy(), ti, 0, 0)
    close(v.max_unpool2d(i, 2).numpy(), F.max_unpool2d(tv, ti, 2), 0, 0)


def test_norms_dropout_attention_interpolate():
    check(lambda x: x.layernorm(), lambda x: F.layer_norm(x, (5,)), [(3, 4, 5)])
    check(lambda x: x.layernorm((-2, -1)), lambda x: F.layer_norm(x, (4, 5)), [(3, 4, 5)])
    check(lambda x: x.rmsnorm(), lambda x: x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6), [(3, 4, 5)])
    check(lambda x, w, b, m: x.batchnorm(w, b, m, Tensor([1.0, 0.5, 2.0])),
          lambda x, w, b, m: (x - m[:, None]) * torch.tensor([1.0, 0.5, 2.0])[:, None] * w[:, None] + b[:, None],
          [(2, 3, 4), (3,), (3,), (3,)])
    check(lambda x: x.normalize(dim=1), lambda x: F.normalize(x, dim=1), [(3, 4)])
    x = Tensor.ones(1000)
    assert x.dropout(0.5) is x  # not training
    with Tensor.train():
        d = x.dropout(0.5).numpy()
    assert set(np.unique(d)) <= {0.0, 2.0} and 350 < (d == 0).sum() < 650
    def sdpa(q, k, v, causal=False):  # torch 1.13 has no F.scaled_dot_product_attention
        s = q @ k.transpose(-1, -2) / np.sqrt(q.shape[-1])
        if causal:
            s = s.masked_fill(torch.ones(s.shape[-2:], dtype=torch.bool).triu(1), -float("inf"))
        return s.softmax(-1) @ v
    check(lambda q, k, v: q.scaled_dot_product_attention(k, v), sdpa, [(2, 3, 4), (2, 5, 4), (2, 5, 6)])
    check(lambda q, k, v: q.scaled_dot_product_attention(k, v, is_causal=True),
          lambda q, k, v: sdpa(q, k, v, True), [(2, 4, 4), (2, 4, 4), (2, 4, 6)])
    check(lambda x: x.interpolate((6, 8)), lambda x: F.interpolate(x, (6, 8), mode="bilinear"), [(1, 2, 3, 4)])
    check(lambda x: x.interpolate((6, 8), align_corners=True),
          lambda x: F.interpolate(x, (6, 8), mode="bilinear", align_corners=True), [(1, 2, 3, 4)])
    check(lambda x: x.interpolate((6, 8), mode="nearest"), lambda x: F.interpolate(x, (6, 8), mode="nearest"),
          [(1, 2, 3, 4)])


def test_linear_sequential():
    check(lambda x, w, b: x.linear(w, b), lambda x, w, b: x @ w + b, [(3, 4), (4, 5), (5,)])
    check(lambda x: x.sequential([Tensor.relu, lambda t: t * 2]), lambda x: x.relu() * 2, [(3, 4)])


def test_casts():
    x = np.array([-2.7, -0.5, 0.0, 1.5, 300.0], np.float32)
    for dt, tdt in [("int32", torch.int32), ("int8", torch.int8), ("bool", torch.bool), ("float16", torch.float16),
                    ("float64", torch.float64), ("uint8", torch.uint8)]:
        if dt == "uint8":
            x = np.abs(x)
        got = Tensor(x).cast(dt)
        assert got.dtype.name == dt
        close(got.numpy(), torch.tensor(x).to(tdt), 0, 0)
    assert Tensor(x).float().dtype is dtypes.float32 and Tensor(x).half().dtype is dtypes.float16
    assert Tensor(x).int().dtype is dtypes.int32 and Tensor(x).long().dtype is dtypes.int64
    assert Tensor(x).double().dtype is dtypes.float64 and Tensor(x).bool().dtype is dtypes.bool
    b = Tensor(np.array([1.0], np.float32)).bitcast(dtypes.int32).item()
    assert b == 0x3F800000
    bf = Tensor(x[:4]).cast(dtypes.bfloat16)
    close(bf.numpy(), torch.tensor(x[:4]).bfloat16().float(), 0, 0)
    check(lambda t: t.cast(dtypes.float64) * 2, lambda t: t.double() * 2, [(3,)])


# ------------------------------------------------------------------ views as inputs
VIEWS = {
    "permute": lambda x: x.permute(2, 0, 1), "slice_step": lambda x: x[:, 1:, ::2], "flip": lambda x: x.flip(1),
    "transpose": lambda x: x.transpose(0, 2), "expand": lambda x: x[:, :1].expand(2, 3, 4),
    "pad_shrink": lambda x: F.pad(x, (1, 1))[..., 1:-1] if isinstance(x, torch.Tensor) else x.pad((1, 1))[..., 1:-1],
    "reshape_of_permute": lambda x: x.permute(1, 0, 2).reshape(6, 4),
}
VIEW_OPS = {
    "add_self": lambda v: v + v * 2, "exp": lambda v: v.exp(), "sum_last": lambda v: v.sum(-1),
    "max_first": lambda v: v.max(0) if isinstance(v, Tensor) else v.amax(0),
    "matmul_T": lambda v: v.reshape(-1, v.shape[-1]) @ v.reshape(-1, v.shape[-1]).transpose(0, 1),
    "softmax": lambda v: v.softmax(-1), "contiguous_then_add": lambda v: v.contiguous() + 1,
}


@pytest.mark.parametrize("op", sorted(VIEW_OPS))
@pytest.mark.parametrize("view", sorted(VIEWS))
def test_ops_on_views(view, op):
    """Ops on non-contiguous views (strided, flipped, expanded, padded), gradients through the view."""
    check(lambda x: VIEW_OPS[op](VIEWS[view](x)), lambda x: VIEW_OPS[op](VIEWS[view](x)), [(2, 3, 4)])
