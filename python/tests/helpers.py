"""helpers.py — compare a tg expression with the same PyTorch expression, forward and backward.

check(tg_fn, torch_fn, shapes): random inputs of the shapes (or the given arrays), the same
function of tg Tensors and of torch tensors; the values must agree, and the gradients of
sum(out * w) for a random w with respect to every float input (tg: Tensor.gradient, torch:
autograd) must agree too.
"""
import numpy as np
import torch

from tg import Tensor, dtypes

TORCH = {np.float32: torch.float32, np.float64: torch.float64, np.float16: torch.float16, np.int32: torch.int32,
         np.int64: torch.int64, np.bool_: torch.bool, np.uint8: torch.uint8, np.int8: torch.int8,
         np.int16: torch.int16}


def inputs(shapes, dtype=np.float32, low=-2.0, high=2.0, seed=0):
    rng = np.random.default_rng(seed)
    out = []
    for s in shapes:
        if np.dtype(dtype) == np.bool_:
            out.append(rng.random(s) < 0.5)
        elif np.issubdtype(dtype, np.integer):
            out.append(rng.integers(int(low), int(high), s).astype(dtype))
        else:
            out.append(rng.uniform(low, high, s).astype(dtype))
    return out


def close(got, want, atol, rtol, what="value"):
    want = want.detach().numpy() if isinstance(want, torch.Tensor) else np.asarray(want)
    got = np.asarray(got)
    assert got.shape == want.shape, "%s shape: tg %s, torch %s" % (what, got.shape, want.shape)
    if want.dtype == np.bool_ or np.issubdtype(want.dtype, np.integer):
        np.testing.assert_array_equal(got, want, err_msg=what)
    else:
        np.testing.assert_allclose(got.astype(np.float64), want.astype(np.float64), atol=atol, rtol=rtol,
                                   equal_nan=True, err_msg=what)


def check(tg_fn, torch_fn, shapes=None, vals=None, dtype=np.float32, low=-2.0, high=2.0, atol=1e-5, rtol=1e-4,
          grad=True, grad_atol=None, grad_rtol=None):
    arrs = vals if vals is not None else inputs(shapes, dtype, low, high)
    floats = [np.issubdtype(a.dtype, np.floating) for a in arrs]
    tt = [torch.tensor(a, requires_grad=grad and f) for a, f in zip(arrs, floats)]
    ts = [Tensor(a) for a in arrs]
    want, got = torch_fn(*tt), tg_fn(*ts)
    if isinstance(want, (tuple, list)):
        for i, (g, w) in enumerate(zip(got, want)):
            close(g.numpy(), w, atol, rtol, "output %d" % i)
        want, got = want[0], got[0]
    else:
        close(got.numpy(), want, atol, rtol)
    if not grad or not any(floats) or not want.dtype.is_floating_point or not want.requires_grad:
        return
    w = np.random.default_rng(1).standard_normal(want.shape).astype(np.dtype(str(want.dtype)[6:]))
    (want * torch.tensor(w)).sum().backward()
    targets = [t for t, f in zip(ts, floats) if f]
    grads = (got * Tensor(w)).sum().gradient(*targets)
    for i, (g, t) in enumerate(zip(grads, [t for t, f in zip(tt, floats) if f])):
        close(g.numpy(), t.grad if t.grad is not None else torch.zeros_like(t), grad_atol or atol * 10,
              grad_rtol or rtol * 10, "gradient %d" % i)


def tg_dtype(npdt):
    return dtypes.from_np(npdt)
