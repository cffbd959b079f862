#!/usr/bin/python3
"""gen_fixtures_ops_index.py — writes tests/fixtures/ops_index.h, the PyTorch reference data for
tests/test_ops_index.c: pad modes and negative padding, roll, tril/triu, diag/diagonal,
meshgrid, unfold, unflatten, repeat_interleave, gather, scatter, scatter_reduce, masked_fill,
masked_select, nonzero, sort/argsort/topk, einsum and interpolate.

Run from anywhere:  /usr/bin/python3 tests/gen_fixtures_ops_index.py

A case stores its inputs (values as doubles, converted to the input's dtype in C), integer
parameters (ip), float parameters (fp), a string (the einsum equation), the expected outputs
(computed by torch in the inputs' own dtypes, stored as doubles: exact for ints, indices and
movement ops), and for cases with differentiable inputs the gradients of sum(out[0] * gout)
with respect to the float inputs, computed by torch in float64 from the same values. The C
side replays the call in each case's dtypes and compares with the case's tolerance.

Parameter layout per op (in[] = inputs; absent inputs are None):
  PAD x; ip = before[nd], after[nd]; fp0 value          PAD_MODE x; ip0 mode, ip1.. before, after
  ROLL x; ip0 n (0: flattened), ip1.. shifts[n or 1], axes[n]
  TRIL/TRIU x; ip0 diagonal          DIAGONAL x; ip0 offset, ip1 axis1, ip2 axis2
  DIAG x; ip0 diagonal               MESHGRID x0, x1[, x2]; ip0 xy   (outputs: one per input)
  UNFOLD x; ip0 axis, ip1 size, ip2 step     UNFLATTEN x; ip0 axis, ip1 n, ip2.. sizes
  REPEAT_INTERLEAVE x; ip0 repeats, ip1 axis (TG_ALL_AXES = -1000000)
  REPEAT_INTERLEAVE_T x, repeats; ip0 axis
  GATHER x, index; ip0 axis          SCATTER x, index, src; ip0 axis
  SCATTER_REDUCE x, index, src; ip0 axis, ip1 op (0 sum 1 prod 2 mean 3 amax 4 amin), ip2 include_self
  MASKED_FILL x, mask; fp0 value     MASKED_SELECT x, mask      NONZERO x
  SORT x; ip0 axis, ip1 descending (outputs values, indices)    ARGSORT x; ip0 axis, ip1 descending
  TOPK x; ip0 k, ip1 axis, ip2 largest (outputs values, indices)
  EINSUM operands...; str equation
  INTERPOLATE x; ip0 mode (0 nearest 1 nearest-exact 2 linear 3 bilinear 4 trilinear),
              ip1 align_corners, ip2 has_size, ip3.. sizes; fp = scale factors
"""
import math
import os
import warnings

import numpy as np
import torch
import torch.nn.functional as F

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "fixtures", "ops_index.h")
OPS = ["PAD", "PAD_MODE", "ROLL", "TRIL", "TRIU", "DIAGONAL", "DIAG", "MESHGRID", "UNFOLD", "UNFLATTEN",
       "REPEAT_INTERLEAVE", "REPEAT_INTERLEAVE_T", "GATHER", "SCATTER", "SCATTER_REDUCE", "MASKED_FILL",
       "MASKED_SELECT", "NONZERO", "SORT", "ARGSORT", "TOPK", "EINSUM", "INTERPOLATE"]
MAX_IN, MAX_OUT, MAX_RANK, MAX_IP, MAX_FP = 4, 3, 6, 16, 3
ALL_AXES = -1000000

warnings.filterwarnings("ignore", message="scatter_reduce")
rng = np.random.default_rng(12)
TORCH_DT = {"TG_FLOAT32": torch.float32, "TG_FLOAT64": torch.float64, "TG_FLOAT16": torch.float16,
            "TG_INT32": torch.int32, "TG_INT64": torch.int64, "TG_UINT8": torch.uint8, "TG_BOOL": torch.bool,
            "TG_INT8": torch.int8}
FLOATS = ("TG_FLOAT32", "TG_FLOAT64", "TG_FLOAT16")


def randn(*shape, scale=1.0):
    return rng.standard_normal(shape) * scale


def ints(lo, hi, *shape):
    return rng.integers(lo, hi, shape).astype(np.float64)


class In:
    """An input: values, the C dtype, whether its gradient is checked (float inputs only)."""

    def __init__(self, data, dtype="TG_FLOAT32", grad=True):
        t = torch.tensor(np.asarray(data, dtype=np.float64)).to(TORCH_DT[dtype])
        self.data = t.to(torch.float64).numpy()  # the values the C side will hold
        self.dtype, self.grad = dtype, grad and dtype in FLOATS

    def torch(self, for_grad=False):
        t = torch.tensor(self.data)
        if for_grad and self.grad:
            return t.clone().requires_grad_(True)
        return t if for_grad and self.dtype in FLOATS else t.to(TORCH_DT[self.dtype])


cases = []


def as_list(o):
    return list(o) if isinstance(o, (list, tuple)) else [o]


def case(name, op, ins, fn, ip=(), fp=(), s="", tol=1e-6, grad=True):
    """fn(*torch inputs) returns the output or a list of outputs; the first is differentiated."""
    outs = as_list(fn(*[i.torch() if i is not None else None for i in ins]))
    outs = [o.detach().to(torch.float64).numpy() if o.dtype != torch.bool else o.numpy().astype(np.float64)
            for o in outs]
    gout, grads = None, [None] * len(ins)
    if grad and any(i is not None and i.grad for i in ins):
        tins = [i.torch(True) if i is not None else None for i in ins]
        y = as_list(fn(*tins))[0]
        gout = rng.standard_normal(tuple(y.shape))
        (y * torch.tensor(gout)).sum().backward()
        grads = [t.grad.numpy() if (i is not None and i.grad and t.grad is not None) else
                 (np.zeros(i.data.shape) if i is not None and i.grad else None) for i, t in zip(ins, tins)]
    assert len(ip) <= MAX_IP and len(fp) <= MAX_FP and len(outs) <= MAX_OUT, name
    cases.append(dict(name=name, op=op, ins=ins, ip=list(ip), fp=list(fp), s=s, tol=tol, outs=outs, gout=gout,
                      grads=grads))


# ------------------------------------------------------------------ pad, roll
MODES = {"constant": 0, "reflect": 1, "replicate": 2, "circular": 3}


def torch_pad_args(before, after):
    """tg's per-axis before/after → F.pad's (last_before, last_after, ...) tuple."""
    p = []
    for b, a in zip(reversed(before), reversed(after)):
        p += [b, a]
    return tuple(p)


def pad_case(name, shape, before, after, value=0.0, dtype="TG_FLOAT32"):
    x = In(randn(*shape) * 3 if dtype in FLOATS else ints(-9, 9, *shape), dtype)
    case(name, "PAD", [x], lambda x: F.pad(x, torch_pad_args(before, after), value=value),
         ip=list(before) + list(after), fp=[value])


pad_case("pad_crop_front", (3, 5), (0, -2), (0, 1), 1.5)
pad_case("pad_crop_both", (4, 6), (-1, 2), (1, -3), 0.0)
pad_case("pad_crop_all", (2, 3), (0, -1), (0, -2), 2.0)
pad_case("pad_crop_int", (3, 4), (-2, 1), (0, -1), 7.0, "TG_INT32")


def nd_pad(x, mode, before, after):
    """F.pad with a mode pads the last 1-3 axes of a (N, C, ...) input: add/remove batch axes."""
    k = sum(1 for b, a in zip(before, after) if b or a)
    lead = len(before) - 3 if len(before) > 3 else 0
    y = x.reshape((1,) * max(0, 2 - lead) + tuple(x.shape)) if len(before) < 5 else x
    spatial = len(before) - lead
    y = F.pad(y, torch_pad_args(before[lead:], after[lead:]), mode=mode)
    assert k == 0 or all(b == 0 and a == 0 for b, a in zip(before[:lead], after[:lead]))
    return y.reshape(y.shape[max(0, 2 - lead):]) if len(before) < 5 else y


def mode_case(name, mode, shape, before, after, dtype="TG_FLOAT32", ref=None):
    x = In(randn(*shape) * 3 if dtype in FLOATS else ints(-9, 9, *shape), dtype)
    fn = ref or (lambda x: nd_pad(x, mode, before, after))
    if dtype not in FLOATS:  # torch pads ints only in constant mode: pad their float64 values
        fn = lambda x, f=fn: f(x.to(torch.float64)).to(x.dtype)
    case(name, "PAD_MODE", [x], fn, ip=[MODES[mode]] + list(before) + list(after))


for mode in ("reflect", "replicate", "circular"):
    mode_case(f"pad_{mode}_1d", mode, (7,), (2,), (3,))
    mode_case(f"pad_{mode}_2d", mode, (2, 4, 5), (0, 1, 3), (0, 2, 1))
    mode_case(f"pad_{mode}_3d", mode, (2, 3, 4, 3), (0, 1, 2, 1), (0, 2, 0, 2))
    mode_case(f"pad_{mode}_neg", mode, (5, 6), (-1, 2), (2, -3))
    mode_case(f"pad_{mode}_f64", mode, (3, 6), (1, 2), (2, 4), "TG_FLOAT64")
    mode_case(f"pad_{mode}_int", mode, (4, 5), (2, 0), (1, 3), "TG_INT32")


def np_pad(mode):
    return lambda x: torch.tensor(np.pad(x.numpy(), ((0, 0), (7, 9)), mode={"reflect": "reflect", "circular": "wrap"}[mode]))


# beyond PyTorch's limit (padding >= size): numpy's periodic reflection / wrap (forward only)
case("pad_reflect_wide", "PAD_MODE", [In(randn(2, 4))], np_pad("reflect"), ip=[1, 0, 7, 0, 9], grad=False)
case("pad_circular_wide", "PAD_MODE", [In(randn(2, 4))], np_pad("circular"), ip=[3, 0, 7, 0, 9], grad=False)


def roll_case(name, shape, shifts, axes, dtype="TG_FLOAT32"):
    x = In(randn(*shape) if dtype in FLOATS else ints(-9, 9, *shape), dtype)
    if axes is None:
        case(name, "ROLL", [x], lambda x: torch.roll(x, shifts[0]), ip=[0, shifts[0]])
    else:
        case(name, "ROLL", [x], lambda x: torch.roll(x, tuple(shifts), tuple(axes)),
             ip=[len(axes)] + list(shifts) + list(axes))


roll_case("roll_flat", (3, 4), [5], None)
roll_case("roll_neg_flat", (7,), [-9], None, "TG_INT64")
roll_case("roll_two_axes", (3, 4, 5), [1, -7], [0, 2])
roll_case("roll_same_axis_twice", (6, 2), [2, 3], [0, 0], "TG_FLOAT64")
roll_case("roll_big_shift", (5, 3), [1000000007], [-2])

# ------------------------------------------------------------------ triangles, diagonals
for k in (0, 1, -2, 9, -9):
    case(f"tril_{k}", "TRIL", [In(randn(4, 5))], lambda x, k=k: torch.tril(x, k), ip=[k])
    case(f"triu_{k}", "TRIU", [In(randn(2, 5, 3))], lambda x, k=k: torch.triu(x, k), ip=[k])
case("tril_int", "TRIL", [In(ints(-5, 5, 3, 3), "TG_INT32")], lambda x: torch.tril(x, -1), ip=[-1])
case("triu_bool", "TRIU", [In(ints(0, 2, 3, 4), "TG_BOOL")], lambda x: torch.triu(x, 1), ip=[1])

for off, a1, a2, shape in ((0, 0, 1, (4, 4)), (1, 0, 1, (3, 5)), (-2, 0, 1, (5, 3)), (1, 0, 2, (2, 3, 4)),
                           (-1, 2, 0, (2, 3, 4)), (0, -1, -2, (2, 3, 3)), (7, 0, 1, (3, 4)), (-3, 1, 0, (3, 4))):
    case(f"diagonal_{off}_{a1}_{a2}_{len(shape)}d", "DIAGONAL", [In(randn(*shape))],
         lambda x, o=off, a=a1, b=a2: torch.diagonal(x, o, a, b), ip=[off, a1, a2])
case("diagonal_int64", "DIAGONAL", [In(ints(-9, 9, 4, 4), "TG_INT64")], lambda x: torch.diagonal(x, 1), ip=[1, 0, 1])
for k in (0, 2, -1):
    case(f"diag_vec_{k}", "DIAG", [In(randn(4))], lambda x, k=k: torch.diag(x, k), ip=[k])
    case(f"diag_mat_{k}", "DIAG", [In(randn(3, 4))], lambda x, k=k: torch.diag(x, k), ip=[k])
case("diag_vec_int", "DIAG", [In(ints(1, 9, 3), "TG_INT32")], lambda x: torch.diag(x, 1), ip=[1])

# ------------------------------------------------------------------ meshgrid, unfold, unflatten, repeat_interleave
case("meshgrid_ij", "MESHGRID", [In(randn(3)), In(randn(4)), In(randn(2))],
     lambda a, b, c: torch.meshgrid(a, b, c, indexing="ij"), ip=[0])
case("meshgrid_xy", "MESHGRID", [In(randn(3)), In(randn(4)), In(randn(2))],
     lambda a, b, c: torch.meshgrid(a, b, c, indexing="xy"), ip=[1])
case("meshgrid_xy_2_int", "MESHGRID", [In(ints(0, 9, 3), "TG_INT32"), In(ints(0, 9, 5), "TG_INT32")],
     lambda a, b: torch.meshgrid(a, b, indexing="xy"), ip=[1])

for axis, size, step, shape in ((0, 3, 1, (7,)), (1, 2, 2, (2, 6, 3)), (-1, 3, 2, (3, 8)), (0, 2, 5, (11, 2)),
                                (1, 4, 3, (2, 10)), (0, 5, 5, (5, 2)), (1, 0, 2, (2, 4)), (0, 4, 1, (4, 3))):
    case(f"unfold_{axis}_{size}_{step}", "UNFOLD", [In(randn(*shape))],
         lambda x, a=axis, s=size, st=step: x.unfold(a, s, st), ip=[axis, size, step])
case("unfold_int", "UNFOLD", [In(ints(-9, 9, 3, 7), "TG_INT32")], lambda x: x.unfold(1, 3, 2), ip=[1, 3, 2])

for axis, sizes, shape in ((1, (2, 3), (4, 6)), (0, (-1, 2), (6, 2)), (-1, (1, 4, 1), (3, 4)), (0, (2, 0), (0, 3))):
    case(f"unflatten_{axis}_{len(sizes)}", "UNFLATTEN", [In(randn(*shape))],
         lambda x, a=axis, s=sizes: x.unflatten(a, s), ip=[axis, len(sizes)] + list(sizes))

for reps, axis, shape in ((2, 0, (3,)), (3, 1, (2, 3)), (2, ALL_AXES, (2, 2)), (0, 0, (3, 2)), (1, -1, (2, 3))):
    case(f"repeat_interleave_{reps}_{axis}", "REPEAT_INTERLEAVE", [In(randn(*shape))],
         lambda x, r=reps, a=axis: x.repeat_interleave(r, None if a == ALL_AXES else a), ip=[reps, axis])
case("repeat_interleave_int", "REPEAT_INTERLEAVE", [In(ints(0, 9, 2, 2), "TG_INT64")],
     lambda x: x.repeat_interleave(2, 1), ip=[2, 1])


# ------------------------------------------------------------------ gather, scatter
def idx(hi, *shape):
    return In(ints(0, hi, *shape), "TG_INT64")


for axis, xs, ishape in ((0, (4, 3), (2, 3)), (1, (4, 3), (4, 5)), (2, (2, 3, 4), (2, 2, 6)), (-2, (3, 5, 2), (2, 7, 1))):
    case(f"gather_{axis}_{len(xs)}d", "GATHER", [In(randn(*xs)), idx(xs[axis], *ishape)],
         lambda x, i, a=axis: torch.gather(x, a, i), ip=[axis])
case("gather_int32_idx32", "GATHER", [In(ints(-9, 9, 3, 4), "TG_INT32"), In(ints(0, 4, 3, 2), "TG_INT32")],
     lambda x, i: torch.gather(x, 1, i.long()), ip=[1])
case("gather_bool", "GATHER", [In(ints(0, 2, 5), "TG_BOOL"), idx(5, 7)], lambda x, i: torch.gather(x, 0, i), ip=[0])
case("gather_f64", "GATHER", [In(randn(3, 3), "TG_FLOAT64"), idx(3, 2, 3)], lambda x, i: torch.gather(x, 0, i), ip=[0])


def perm_index(m, k, *rest):
    """Distinct targets along axis 0 (no duplicates: the gradient of scatter is then PyTorch's)."""
    a = np.stack([rng.permutation(m)[:k] for _ in range(int(np.prod(rest)))], -1).reshape((k,) + rest)
    return In(a.astype(np.float64), "TG_INT64")


case("scatter_0", "SCATTER", [In(randn(5, 3)), perm_index(5, 3, 3), In(randn(3, 3))],
     lambda x, i, s: torch.scatter(x, 0, i, s), ip=[0])
case("scatter_1_small_index", "SCATTER", [In(randn(3, 6)), In(np.array([[5, 0], [1, 2]], np.float64), "TG_INT64"),
                                          In(randn(2, 3))], lambda x, i, s: torch.scatter(x, 1, i, s), ip=[1],
     grad=False)  # PyTorch's backward fails when src is larger than index
case("scatter_dup_last_wins", "SCATTER", [In(randn(4)), In(np.array([1, 3, 1, 1, 0], np.float64), "TG_INT64"),
                                          In(randn(5))], lambda x, i, s: torch.scatter(x, 0, i, s), ip=[0], grad=False)
case("scatter_int", "SCATTER", [In(ints(-9, 9, 2, 4), "TG_INT32"), In(ints(0, 4, 2, 4), "TG_INT64"),
                                In(ints(-9, 9, 2, 4), "TG_INT32")], lambda x, i, s: torch.scatter(x, 1, i, s), ip=[1])
case("scatter_3d_axis2", "SCATTER", [In(randn(2, 3, 4)), In(np.stack([[rng.permutation(4)[:2] for _ in range(3)]
                                     for _ in range(2)]).astype(np.float64), "TG_INT64"), In(randn(2, 3, 2))],
     lambda x, i, s: torch.scatter(x, 2, i, s), ip=[2])

RED = {"sum": 0, "prod": 1, "mean": 2, "amax": 3, "amin": 4}
dup = In(np.array([[0, 2, 0, 2, 0, 3], [1, 1, 3, 3, 1, 0]], np.float64).T, "TG_INT64")  # (6, 2), column-wise dups
for red in RED:
    for inc in (True, False):
        x, src = randn(5, 2), randn(6, 2)
        if red in ("amax", "amin"):  # ties: two sources equal, and a source equal to self
            src[2, 0] = src[0, 0]
            src[3, 1] = x[3, 1]
        if red == "prod":
            src[4, 0] = 0.0  # an exact zero in a product
        case(f"scatter_reduce_{red}_{'self' if inc else 'noself'}", "SCATTER_REDUCE", [In(x), dup, In(src)],
             lambda x, i, s, r=red, c=inc: torch.scatter_reduce(x, 0, i, s, r, include_self=c),
             ip=[0, RED[red], int(inc)], tol=1e-5)
        case(f"scatter_reduce_{red}_{'self' if inc else 'noself'}_int", "SCATTER_REDUCE",
             [In(ints(-5, 6, 4, 3), "TG_INT32"), In(ints(0, 4, 5, 3), "TG_INT64"), In(ints(-5, 6, 5, 3), "TG_INT32")],
             lambda x, i, s, r=red, c=inc: torch.scatter_reduce(x, 0, i, s, r, include_self=c), ip=[0, RED[red], int(inc)])
case("scatter_reduce_sum_axis1_f64", "SCATTER_REDUCE", [In(randn(2, 3), "TG_FLOAT64"), idx(3, 2, 5),
                                                       In(randn(2, 6), "TG_FLOAT64")],
     lambda x, i, s: torch.scatter_reduce(x, 1, i, s, "sum"), ip=[1, 0, 1], grad=False)
case("scatter_reduce_amax_axis1_small", "SCATTER_REDUCE", [In(randn(3, 4)), idx(4, 2, 3), In(randn(2, 5))],
     lambda x, i, s: torch.scatter_reduce(x, 1, i, s, "amax", include_self=False), ip=[1, 3, 0], grad=False)
case("scatter_reduce_mean_axis1_grad", "SCATTER_REDUCE", [In(randn(3, 4)), idx(4, 3, 6), In(randn(3, 6))],
     lambda x, i, s: torch.scatter_reduce(x, 1, i, s, "mean", include_self=True), ip=[1, 2, 1])

# ------------------------------------------------------------------ masks, nonzero
mask = lambda *shape: In(rng.uniform(0, 1, shape) < 0.4, "TG_BOOL")
case("masked_fill", "MASKED_FILL", [In(randn(3, 4)), mask(3, 4)], lambda x, m: x.masked_fill(m, 2.5), fp=[2.5])
case("masked_fill_bcast", "MASKED_FILL", [In(randn(2, 3, 4)), mask(3, 1)], lambda x, m: x.masked_fill(m, -1.0), fp=[-1.0])
case("masked_fill_int", "MASKED_FILL", [In(ints(-9, 9, 4, 2), "TG_INT64"), mask(4, 2)], lambda x, m: x.masked_fill(m, 7),
     fp=[7])
case("masked_fill_inf", "MASKED_FILL", [In(randn(5)), mask(5)], lambda x, m: x.masked_fill(m, -math.inf), fp=[-math.inf])
case("masked_select", "MASKED_SELECT", [In(randn(3, 4)), mask(3, 4)], torch.masked_select)
case("masked_select_bcast_both", "MASKED_SELECT", [In(randn(3, 1)), mask(2, 1, 4)], torch.masked_select)
case("masked_select_none", "MASKED_SELECT", [In(randn(2, 2)), In(np.zeros((2, 2)), "TG_BOOL")], torch.masked_select)
case("masked_select_int", "MASKED_SELECT", [In(ints(-9, 9, 6), "TG_INT32"), mask(6)], torch.masked_select)
nz = randn(3, 4)
nz[rng.uniform(0, 1, nz.shape) < 0.5] = 0
case("nonzero_2d", "NONZERO", [In(nz, grad=False)], torch.nonzero)
case("nonzero_3d_int", "NONZERO", [In(ints(-1, 2, 2, 3, 2), "TG_INT32")], torch.nonzero)
case("nonzero_bool_none", "NONZERO", [In(np.zeros((3,)), "TG_BOOL")], torch.nonzero)
case("nonzero_scalar", "NONZERO", [In(np.array(2.0), grad=False)], torch.nonzero)
case("nonzero_nan_is_nonzero", "NONZERO", [In(np.array([0.0, math.nan, -0.0, 1.0]), grad=False)], torch.nonzero)
case("repeat_interleave_t", "REPEAT_INTERLEAVE_T", [In(randn(3, 2)), In(np.array([2, 0, 3.0]), "TG_INT64")],
     lambda x, r: x.repeat_interleave(r, 0), ip=[0])
case("repeat_interleave_t_flat", "REPEAT_INTERLEAVE_T", [In(randn(2, 2)), In(np.array([1, 2, 0, 1.0]), "TG_INT32")],
     lambda x, r: x.repeat_interleave(r), ip=[ALL_AXES])
case("repeat_interleave_t_one", "REPEAT_INTERLEAVE_T", [In(randn(2, 3)), In(np.array(2.0), "TG_INT64")],
     lambda x, r: x.repeat_interleave(r, 1), ip=[1])

# ------------------------------------------------------------------ sort, argsort, topk
special = np.array([3.0, 1.0, math.nan, 1.0, 2.0, math.nan, -math.inf, math.inf, -0.5, 2.0, 1.0, 0.0, -7.0])


def sort_case(name, data, axis, desc, dtype="TG_FLOAT32", grad=True):
    x = In(data, dtype, grad=grad)
    case(f"sort_{name}", "SORT", [x], lambda x, a=axis, d=desc: list(torch.sort(x, dim=a, descending=d, stable=True)),
         ip=[axis, int(desc)], grad=grad)
    case(f"argsort_{name}", "ARGSORT", [x], lambda x, a=axis, d=desc: torch.sort(x, dim=a, descending=d, stable=True)[1],
         ip=[axis, int(desc)], grad=False)


sort_case("special_asc", special, 0, False, grad=False)
sort_case("special_desc", special, 0, True, grad=False)
sort_case("rows_7", randn(3, 7), 1, False)
sort_case("axis0_desc", randn(5, 3), 0, True)
sort_case("3d_axis1", randn(2, 6, 3), 1, False)
sort_case("ties_int", ints(-3, 3, 4, 9), -1, False, "TG_INT32")
sort_case("ties_int_desc", ints(-3, 3, 4, 9), -1, True, "TG_INT64")
sort_case("bool", ints(0, 2, 10), 0, True, "TG_BOOL")
sort_case("one", randn(3, 1), 1, False)
sort_case("empty", randn(0, 4), 0, False, grad=False)
sort_case("f64_16", randn(16), 0, True, "TG_FLOAT64")
sort_case("uint8_33", ints(0, 256, 33), 0, False, "TG_UINT8")
case("sort_f16", "SORT", [In(randn(11), "TG_FLOAT16")],
     lambda x: [t.to(torch.float16) if t.dtype.is_floating_point else t
                for t in torch.sort(x.float(), stable=True)], ip=[0, 0], grad=False)


def topk_case(name, data, k, axis, largest):
    def ref(x, k=k, a=axis, l=largest):  # torch.topk's order among ties is unspecified: a stable sort's
        v, i = torch.sort(x, dim=a, descending=l, stable=True)
        return [v.narrow(a, 0, k), i.narrow(a, 0, k)]
    case(f"topk_{name}", "TOPK", [In(data)], ref, ip=[k, axis, int(largest)])


topk_case("3_of_10", randn(10), 3, 0, True)
topk_case("smallest_2_rows", randn(4, 6), 2, 1, False)
topk_case("axis0_ties", np.round(randn(7, 3)), 4, 0, True)
topk_case("all", randn(5), 5, -1, True)
topk_case("zero", randn(2, 5), 0, 1, True)


# ------------------------------------------------------------------ einsum
def einsum_case(name, eq, shapes, dtype="TG_FLOAT32", tol=1e-5):
    ins = [In(randn(*sh) if dtype in FLOATS else ints(-5, 6, *sh), dtype) for sh in shapes]
    case(f"einsum_{name}", "EINSUM", ins, lambda *xs: torch.einsum(eq, *xs), s=eq, tol=tol)


einsum_case("matmul", "ij,jk->ik", [(3, 4), (4, 5)])
einsum_case("bmm", "bij,bjk->bik", [(2, 3, 4), (2, 4, 2)])
einsum_case("implicit_matmul", "ij,jk", [(2, 3), (3, 2)])
einsum_case("transpose", "ij->ji", [(2, 3)])
einsum_case("trace", "ii", [(4, 4)])
einsum_case("diag", "ii->i", [(3, 3)])
einsum_case("batch_diag", "bii->bi", [(2, 3, 3)])
einsum_case("sum_all", "ijk->", [(2, 3, 4)])
einsum_case("row_sums", "ij->i", [(3, 5)])
einsum_case("outer", "i,j->ij", [(3,), (4,)])
einsum_case("dot", "i,i->", [(5,), (5,)])
einsum_case("hadamard", "ij,ij->ij", [(2, 3), (2, 3)])
einsum_case("three", "ij,jk,kl->il", [(2, 3), (3, 4), (4, 2)])
einsum_case("attention", "bhqd,bhkd->bhqk", [(2, 2, 3, 4), (2, 2, 5, 4)])
einsum_case("ellipsis_bcast", "...ij,...jk->...ik", [(2, 1, 2, 3), (4, 3, 5)])
einsum_case("ellipsis_implicit", "...i,i", [(2, 3, 4), (4,)])
einsum_case("ellipsis_sum", "...ij->j", [(2, 3, 4)])
einsum_case("upper_labels", "Ab,bC->CA", [(2, 3), (3, 4)])
einsum_case("repeat_and_contract", "iij,jk->ik", [(3, 3, 2), (2, 4)])
einsum_case("label_only_in_one", "ij,jk->i", [(2, 3), (3, 4)])
einsum_case("spaces", " i j , j k -> i k ", [(2, 3), (3, 2)])
einsum_case("bcast_label", "ij,ij->ij", [(2, 3), (1, 3)])
einsum_case("f64", "bij,bkj->bik", [(2, 3, 4), (2, 2, 4)], "TG_FLOAT64", 1e-12)
einsum_case("int_contract", "ij,jk->ik", [(2, 3), (3, 2)], "TG_INT32")
einsum_case("scalar_operand", ",ij->ij", [(), (2, 2)])


# ------------------------------------------------------------------ interpolate
IMODES = {"nearest": 0, "nearest-exact": 1, "linear": 2, "bilinear": 3, "trilinear": 4}


def interp_case(name, shape, mode, size=None, scale=None, align=None, dtype="TG_FLOAT32", tol=1e-5):
    nsp = len(shape) - 2
    x = In(randn(*shape) if dtype in FLOATS else ints(0, 99, *shape), dtype)
    ip = [IMODES[mode], int(bool(align)), int(size is not None)] + (list(size) if size else [0] * nsp)
    fp = list(scale) if scale else []
    case(f"interp_{name}", "INTERPOLATE", [x],
         lambda x: F.interpolate(x, size=size, scale_factor=scale, mode=mode, align_corners=align), ip=ip, fp=fp, tol=tol)


interp_case("nearest_up2_1d", (2, 3, 5), "nearest", size=(10,))
interp_case("nearest_size_1d", (1, 2, 7), "nearest", size=(12,))
interp_case("nearest_down_1d", (1, 2, 9), "nearest", size=(4,))
interp_case("nearest_scale_2d", (1, 2, 4, 5), "nearest", scale=(1.5, 2.7))
interp_case("nearest_exact_2d", (2, 1, 5, 4), "nearest-exact", size=(7, 9))
interp_case("nearest_exact_down", (1, 1, 9, 8), "nearest-exact", scale=(0.34, 0.5))
interp_case("nearest_3d", (1, 2, 2, 3, 4), "nearest", size=(4, 5, 3))
interp_case("nearest_uint8", (1, 2, 3, 4), "nearest", size=(5, 8), dtype="TG_UINT8")
interp_case("linear_up2", (2, 2, 6), "linear", scale=(2.0,))
interp_case("linear_size", (1, 3, 5), "linear", size=(13,))
interp_case("linear_down", (1, 2, 11), "linear", size=(4,))
interp_case("linear_align", (1, 2, 5), "linear", size=(9,), align=True)
interp_case("linear_align_odd", (1, 1, 4), "linear", size=(11,), align=True)
interp_case("linear_scale_1_2", (1, 1, 7), "linear", scale=(1.2,))
interp_case("linear_same_size_scale", (1, 1, 4), "linear", scale=(1.2,))
interp_case("linear_to_one", (1, 1, 5), "linear", size=(1,), align=True)
interp_case("bilinear_up2", (2, 3, 4, 5), "bilinear", scale=(2.0, 2.0))
interp_case("bilinear_size", (1, 2, 5, 7), "bilinear", size=(8, 3))
interp_case("bilinear_align", (1, 2, 4, 6), "bilinear", size=(7, 10), align=True)
interp_case("bilinear_scale_mixed", (1, 1, 6, 5), "bilinear", scale=(0.5, 1.7))
interp_case("bilinear_f64", (1, 2, 3, 4), "bilinear", size=(5, 9), dtype="TG_FLOAT64", tol=1e-12)
interp_case("bilinear_prime_sizes", (1, 1, 7, 11), "bilinear", size=(13, 17))
interp_case("trilinear", (1, 2, 3, 4, 2), "trilinear", size=(5, 6, 4))
interp_case("trilinear_align", (1, 1, 2, 3, 3), "trilinear", scale=(2.0, 1.5, 1.0), align=True)


# ------------------------------------------------------------------ writing


def c_num(v):
    v = float(v)
    if math.isnan(v):
        return "NAN"
    if math.isinf(v):
        return "INFINITY" if v > 0 else "-INFINITY"
    return repr(v)


def emit_array(lines, name, a):
    vals = [c_num(v) for v in np.asarray(a, dtype=np.float64).ravel()]
    lines.append("static const double %s[%d] = {" % (name, max(1, len(vals))))
    for i in range(0, len(vals), 6):
        lines.append("  " + ", ".join(vals[i:i + 6]) + ",")
    lines.append("};")


def tensor_ref(name, a, dtype="TG_FLOAT64"):
    shape = list(np.shape(a))
    assert len(shape) <= MAX_RANK
    return "{%s, %s, %d, {%s}}" % (name, dtype, len(shape), ", ".join(str(s) for s in shape) or "0")


NONE = "{NULL, TG_FLOAT64, 0, {0}}"


def main():
    lines = ["/* ops_index.h — GENERATED by tests/gen_fixtures_ops_index.py; do not edit by hand.",
             " * PyTorch %s references for tests/test_ops_index.c: %d cases. */" % (torch.__version__, len(cases)),
             "#ifndef TG_FIXTURES_OPS_INDEX_H", "#define TG_FIXTURES_OPS_INDEX_H", "#include <math.h>",
             "#include <stddef.h>", "#include <stdint.h>", '#include "tg.h"', "",
             "enum { %s };" % ", ".join("OIFX_" + o for o in OPS),
             "enum { OIFX_NIN = %d };" % MAX_IN, "",
             "/* A tensor: values as doubles, converted to dtype in C; data NULL when absent. */",
             "typedef struct { const double *data; tg_dtype dtype; int ndim; int64_t shape[%d]; } oifx_tensor;"
             % MAX_RANK,
             "typedef struct {",
             "  const char *name;",
             "  int op;",
             "  double tol;",
             "  int nin;",
             "  oifx_tensor in[%d];" % MAX_IN,
             "  int64_t ip[%d];" % MAX_IP,
             "  double fp[%d];" % MAX_FP,
             "  const char *str;",
             "  int nout;",
             "  oifx_tensor out[%d];" % MAX_OUT,
             "  oifx_tensor gout;       /* upstream gradient of out[0]; data NULL: no gradient case */",
             "  oifx_tensor grad[%d];    /* d sum(out[0] * gout) / d in[i]; data NULL if unchecked */" % MAX_IN,
             "} oifx_case;", ""]
    entries = []
    for ci, c in enumerate(cases):
        p = "oifx_%d_" % ci
        ins, outs, grads = [], [], []
        for i, inp in enumerate(c["ins"]):
            if inp is None:
                ins.append(NONE)
                continue
            emit_array(lines, p + "in%d" % i, inp.data)
            ins.append(tensor_ref(p + "in%d" % i, inp.data, inp.dtype))
        for i, o in enumerate(c["outs"]):
            emit_array(lines, p + "out%d" % i, o)
            outs.append(tensor_ref(p + "out%d" % i, o))
        gout = NONE
        if c["gout"] is not None:
            emit_array(lines, p + "gout", c["gout"])
            gout = tensor_ref(p + "gout", c["gout"])
        for i, g in enumerate(c["grads"]):
            if g is None:
                grads.append(NONE)
                continue
            emit_array(lines, p + "grad%d" % i, g)
            grads.append(tensor_ref(p + "grad%d" % i, g))
        nin = len(ins)
        ins += [NONE] * (MAX_IN - len(ins))
        grads += [NONE] * (MAX_IN - len(grads))
        outs += [NONE] * (MAX_OUT - len(outs))
        ip = ", ".join(str(int(v)) for v in c["ip"]) or "0"
        fp = ", ".join(c_num(v) for v in c["fp"]) or "0"
        entries.append('  {"%s", OIFX_%s, %g, %d,\n   {%s},\n   {%s}, {%s}, "%s", %d,\n   {%s},\n   %s,\n   {%s}},'
                       % (c["name"], c["op"], c["tol"], nin, ", ".join(ins), ip, fp, c["s"], len(c["outs"]),
                          ", ".join(outs), gout, ", ".join(grads)))
    lines.append("")
    lines.append("static const oifx_case oifx_cases[] = {")
    lines += entries
    lines.append("};")
    lines.append("#define OIFX_NCASES ((int)(sizeof oifx_cases / sizeof oifx_cases[0]))")
    lines.append("#endif")
    os.makedirs(os.path.dirname(OUT), exist_ok=True)
    with open(OUT, "w") as f:
        f.write("\n".join(lines) + "\n")
    print("wrote %s (%d cases)" % (OUT, len(cases)))


main()
