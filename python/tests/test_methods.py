"""test_methods.py — the remaining methods and every operator's reflected form against PyTorch, the
16-bit float dtypes, and a check that every public Tensor method is exercised by some test."""
import glob
import os
import re

import numpy as np
import pytest
import torch

from tg import Tensor, dtypes
from helpers import check, close, inputs

REFLECTED = {
    "radd": lambda a, s: s + a, "rsub": lambda a, s: s - a, "rmul": lambda a, s: s * a,
    "rtruediv": lambda a, s: s / a, "rpow": lambda a, s: s ** a, "rfloordiv": lambda a, s: s // a,
    "rmod": lambda a, s: s % a,
}


@pytest.mark.parametrize("s", [3, 2.5])
@pytest.mark.parametrize("name", sorted(REFLECTED))
def test_reflected_operators(name, s):
    f = REFLECTED[name]
    check(lambda a: f(a, s), lambda a: f(a, s), [(3, 4)], low=0.5, high=2.0, grad=name not in ("rfloordiv", "rmod"))


@pytest.mark.parametrize("name", ["and", "or", "xor"])
def test_bitwise_methods_and_reflected(name):
    a, b = inputs([(3, 4), (4,)], np.int32, -50, 50)
    tfn = {"and": torch.bitwise_and, "or": torch.bitwise_or, "xor": torch.bitwise_xor}[name]
    close(getattr(Tensor(a), "bitwise_" + name)(Tensor(b)).numpy(), tfn(torch.tensor(a), torch.tensor(b)), 0, 0)
    op = {"and": lambda x, y: x & y, "or": lambda x, y: x | y, "xor": lambda x, y: x ^ y}[name]
    close(op(5, Tensor(a)).numpy(), op(5, a), 0, 0)  # __rand__ / __ror__ / __rxor__
    m, n = inputs([(5,), (5,)], np.bool_)
    close(getattr(Tensor(m), "logical_" + name)(Tensor(n)).numpy(), op(m, n), 0, 0)
    close(op(Tensor(m), Tensor(n)).numpy(), op(m, n), 0, 0)
    close(Tensor(a).bitwise_not().numpy(), ~a, 0, 0)
    close(Tensor(m).logical_or(Tensor(n)).numpy(), m | n, 0, 0)
    close(Tensor(m).logical_xor(Tensor(n)).numpy(), m ^ n, 0, 0)


def test_idiv_shift_methods_and_int_division_by_zero():
    a, b = np.array([7, -7, 5, 3], np.int32), np.array([2, 2, 0, -1], np.int32)
    close(Tensor(a).idiv(Tensor(b)).numpy(), np.array([3, -3, 0, -3]), 0, 0)  # C truncation; / 0 is 0
    close((Tensor(a) // Tensor(b)).numpy(), np.array([3, -4, 0, -3]), 0, 0)  # floor; // 0 is 0 (numpy)
    close((Tensor(a) % Tensor(b)).numpy(), np.array([1, 1, 0, 0]), 0, 0)
    close(Tensor(a).lshift(3).numpy(), a << 3, 0, 0)
    close(Tensor(a).rshift(1).numpy(), a >> 1, 0, 0)
    close(Tensor(a).rshift(Tensor(np.array([0, 1, 2, 40], np.int32))).numpy(), np.array([7, -4, 1, 0]), 0, 0)


def test_clone_data_glorot_normal_train_test():
    t = Tensor([1.0, 2.0])
    c = t.clone()
    assert c is not t and c.tolist() == [1.0, 2.0]
    assert bytes(Tensor([1, 2], dtype=dtypes.uint8).data()) == b"\x01\x02"
    g = Tensor.glorot_normal(200, 300).numpy()
    assert abs(g.std() - np.sqrt(2 / 500)) < 0.005
    assert Tensor.training is False
    with Tensor.train():
        assert Tensor.training is True
        with Tensor.test():
            assert Tensor.training is False
        assert Tensor.training is True
    assert Tensor.training is False

    @Tensor.train()
    def step():
        return Tensor.training
    assert step() is True and Tensor.training is False


@pytest.mark.parametrize("dt", ["float16", "bfloat16"])
def test_16_bit_floats(dt):
    """Stored in 16 bits, computed in float32: results rounded once to the dtype, as PyTorch on the CPU."""
    tdt = getattr(torch, dt)
    a, b = inputs([(3, 4), (4,)], np.float32, 0.5, 2)
    ta, tb = torch.tensor(a).to(tdt), torch.tensor(b).to(tdt)
    A, B = Tensor(a).cast(dt), Tensor(b).cast(dt)
    tol = 1e-2 if dt == "bfloat16" else 2e-3
    for f in (lambda x, y: x + y, lambda x, y: x * y, lambda x, y: x / y, lambda x, y: x.maximum(y)
              if isinstance(x, Tensor) else torch.maximum(x, y)):
        out = f(A, B)
        assert out.dtype.name == dt
        close(out.numpy(), f(ta.float(), tb.float()).to(tdt).float(), tol, tol)
    close(A.sum(1).numpy(), ta.float().sum(1).to(tdt).float(), tol, tol)
    close(A.mean().numpy(), ta.float().mean().to(tdt).float(), tol, tol)
    close(A.softmax(1).numpy(), ta.float().softmax(1).to(tdt).float(), tol, tol)
    close((A @ B.reshape(4, 1)).numpy(), (ta.float() @ tb.float().reshape(4, 1)).to(tdt).float(), 4 * tol, tol)


def test_clip_with_tensor_bounds_and_int_clip():
    check(lambda x, lo: x.clip(lo, 0.5), lambda x, lo: torch.maximum(x, lo).clamp(max=0.5), [(3, 4), (4,)])
    a = np.array([-5, 0, 5, 10], np.int32)
    close(Tensor(a).clip(-1, 6).numpy(), np.clip(a, -1, 6), 0, 0)
    assert Tensor(a).clip(-1, 6).dtype is dtypes.int32
    close(Tensor(a).clip(-1.5, 6).numpy(), np.clip(a, -1.5, 6), 0, 0)


def test_repeat_interleave_tensor_and_one_hot_default():
    x = np.array([[1.0, 2.0], [3.0, 4.0]], np.float32)
    close(Tensor(x).repeat_interleave(Tensor([1, 2]), dim=0).numpy(),
          torch.tensor(x).repeat_interleave(torch.tensor([1, 2]), dim=0), 0, 0)
    close(Tensor([0, 2, 1]).one_hot().numpy(), np.eye(3, dtype=np.int32)[[0, 2, 1]], 0, 0)


def test_every_public_method_is_tested():
    here = os.path.dirname(os.path.abspath(__file__))
    src = "".join(open(f).read() for f in glob.glob(os.path.join(here, "test_*.py")))
    names = [n for n in dir(Tensor) if not n.startswith("_")]
    untested = [n for n in names if not re.search(r"(\.|Tensor\.)%s\b|\"%s\"" % (n, n), src)]
    assert untested == []
