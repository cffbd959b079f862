#!/usr/bin/python3
"""gen_fixtures_ops_conv.py — writes tests/fixtures/ops_conv.h, the PyTorch reference data for
tests/test_ops_conv.c: convolutions and transposed convolutions over 1-3 spatial axes, max and
average pooling (ceil_mode, dilation, padding, count_include_pad, divisor_override, indices),
max_unpool.

Run from anywhere:  /usr/bin/python3 tests/gen_fixtures_ops_conv.py

Each case stores float32 inputs (max_unpool's indices as int64), the call's parameters, the
expected output and, for a random gout, the gradients of sum(out * gout) with respect to the
float inputs. References are computed by torch in float64 from the float32-rounded inputs and
stored as doubles, so the C side checks float64 results tightly and float32 results with the
case's tolerance.

PyTorch has no asymmetric pool padding (tinygrad's) and no dilated average pool: those cases
come from `naive_pool` below, a direct loop over windows in torch (differentiable), which is
checked here against F.max_poolNd / F.avg_poolNd on every case PyTorch supports.
"""
import itertools
import math
import os

import numpy as np
import torch
import torch.nn.functional as F

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "fixtures", "ops_conv.h")
OPS = ["CONV", "CONV_T", "MAX_POOL", "AVG_POOL", "MAX_UNPOOL"]
MAX_RANK = 5

rng = np.random.default_rng(12)
torch.set_default_dtype(torch.float64)


def randn(*shape, scale=1.0):
    return (rng.standard_normal(shape) * scale).astype(np.float32)


def t64(a):
    return torch.tensor(np.asarray(a, dtype=np.float64))


cases = []


def add_case(name, op, nsp, ins, fn, params, tol, grad=True, indices=None):
    """ins: list of (np array, differentiable); fn(*torch inputs) -> output tensor."""
    tins = [t64(a).requires_grad_(g) if a.dtype != np.int64 else torch.tensor(a) for a, g in ins]
    y = fn(*tins)
    gout = rng.standard_normal(tuple(y.shape)).astype(np.float32)
    grads = [None] * len(ins)
    if grad:
        (y * t64(gout)).sum().backward()
        grads = [t.grad.numpy() if g else None for t, (a, g) in zip(tins, ins)]
    cases.append(dict(name=name, op=op, nsp=nsp, ins=[a for a, _ in ins], p=params, tol=tol,
                      out=y.detach().numpy(), gout=gout, grads=grads, grad=grad,
                      indices=None if indices is None else np.asarray(indices, np.int64)))


# ------------------------------------------------------------------ convolutions
CONV_F = {1: F.conv1d, 2: F.conv2d, 3: F.conv3d}
CONVT_F = {1: F.conv_transpose1d, 2: F.conv_transpose2d, 3: F.conv_transpose3d}


def conv_case(name, nsp, xs, ws, bias=True, stride=None, padding=None, dilation=None, groups=1, tol=5e-5):
    x, w = randn(*xs), randn(*ws, scale=0.5)
    ins = [(x, True), (w, True)] + ([(randn(ws[0]), True)] if bias else [])
    st, pd, dl = stride or [1] * nsp, padding or [0] * nsp, dilation or [1] * nsp
    fn = lambda x, w, b=None: CONV_F[nsp](x, w, b, st, pd, dl, groups)
    add_case(name, "CONV", nsp, ins, fn, dict(stride=stride, padding=padding, dilation=dilation, groups=groups), tol)


def convt_case(name, nsp, xs, ws, bias=True, stride=None, padding=None, opad=None, dilation=None, groups=1,
               tol=5e-5):
    x, w = randn(*xs), randn(*ws, scale=0.5)
    ins = [(x, True), (w, True)] + ([(randn(ws[1] * groups), True)] if bias else [])
    st, pd, op, dl = stride or [1] * nsp, padding or [0] * nsp, opad or [0] * nsp, dilation or [1] * nsp
    fn = lambda x, w, b=None: CONVT_F[nsp](x, w, b, st, pd, op, groups, dl)
    add_case(name, "CONV_T", nsp, ins, fn,
             dict(stride=stride, padding=padding, output_padding=opad, dilation=dilation, groups=groups), tol)


conv_case("conv1d_basic", 1, (2, 3, 10), (4, 3, 3))
conv_case("conv1d_stride_pad_dil", 1, (2, 4, 11), (6, 4, 3), stride=[2], padding=[1], dilation=[2])
conv_case("conv1d_groups", 1, (2, 4, 9), (6, 2, 4), bias=False, stride=[3], padding=[2], groups=2)
conv_case("conv1d_depthwise", 1, (1, 4, 8), (4, 1, 3), padding=[1], groups=4)
conv_case("conv2d_general", 2, (2, 4, 7, 6), (6, 2, 3, 2), stride=[2, 1], padding=[1, 0], dilation=[1, 2], groups=2)
conv_case("conv3d_basic", 3, (2, 2, 5, 6, 4), (3, 2, 3, 3, 2))
conv_case("conv3d_stride_pad_dil_groups", 3, (1, 4, 7, 6, 8), (4, 2, 2, 3, 3), bias=False, stride=[2, 1, 3],
          padding=[1, 0, 2], dilation=[2, 1, 1], groups=2)
conv_case("conv3d_kernel1", 3, (2, 3, 3, 4, 2), (5, 3, 1, 1, 1), stride=[2, 2, 1])

convt_case("convt1d_basic", 1, (2, 3, 6), (3, 4, 3))
convt_case("convt1d_stride_opad_groups", 1, (2, 4, 5), (4, 3, 4), stride=[3], padding=[1], opad=[2], groups=2)
convt_case("convt1d_dilation", 1, (1, 2, 7), (2, 3, 3), bias=False, stride=[2], padding=[2], opad=[1], dilation=[2])
convt_case("convt2d_general", 2, (1, 4, 4, 5), (4, 3, 2, 3), stride=[2, 3], padding=[0, 1], opad=[1, 2], groups=2)
convt_case("convt3d_basic", 3, (1, 2, 3, 4, 3), (2, 3, 2, 3, 2))
convt_case("convt3d_groups_stride", 3, (2, 4, 3, 3, 4), (4, 1, 3, 2, 3), stride=[2, 1, 2], padding=[1, 0, 1],
           opad=[1, 0, 0], dilation=[1, 2, 1], groups=2)

# ------------------------------------------------------------------ pooling


def pool_sizes(ins, k, s, d, pb, pa, ceil):
    """PyTorch's pooling_output_shape_pad_lr per axis."""
    out = []
    for j in range(len(ins)):
        span = d[j] * (k[j] - 1) + 1
        room = ins[j] + pb[j] + pa[j] - span
        o = (-(-room // s[j]) if ceil else room // s[j]) + 1
        if ceil and (o - 1) * s[j] >= ins[j] + pb[j]:
            o -= 1
        out.append(o)
    return out


def naive_pool(x, mode, k, s, d, pb, pa, ceil, exclude=False, divisor=0):
    """Windows by index lists (differentiable in torch): taps inside x are gathered; padding is
    -inf (max) / 0 (avg), counted in the divisor when inside [-pb, in + pa) unless exclude."""
    nsp = len(k)
    ins = list(x.shape[-nsp:])
    outs = pool_sizes(ins, k, s, d, pb, pa, ceil)
    idx, inside, counted = [], [], []
    for o in itertools.product(*[range(n) for n in outs]):
        row_i, row_in, row_c = [], [], []
        for t in itertools.product(*[range(n) for n in k]):
            pos = [o[j] * s[j] - pb[j] + t[j] * d[j] for j in range(nsp)]
            ok = all(0 <= pos[j] < ins[j] for j in range(nsp))
            row_i.append(int(np.ravel_multi_index(pos, ins)) if ok else 0)
            row_in.append(ok)
            row_c.append(all(-pb[j] <= pos[j] < ins[j] + pa[j] for j in range(nsp)))
        idx.append(row_i), inside.append(row_in), counted.append(row_c)
    idx, inside = torch.tensor(idx), torch.tensor(inside)
    flat = x.reshape(*x.shape[:-nsp], -1)[..., idx]  # (..., O, K)
    lead = tuple(x.shape[:-nsp])
    if mode == "max":
        vals = torch.where(inside, flat, torch.tensor(-math.inf))
        v = vals.detach().numpy()
        first = np.argmax(v == v.max(-1, keepdims=True), axis=-1)  # the first max, or PyTorch's last NaN:
        nan = np.isnan(v)
        first = np.where(nan.any(-1), v.shape[-1] - 1 - np.argmax(nan[..., ::-1], axis=-1), first)
        positions = np.take_along_axis(np.broadcast_to(idx.numpy(), vals.shape), first[..., None], -1)[..., 0]
        y = torch.gather(vals, -1, torch.tensor(first)[..., None])[..., 0]  # gradient to the first max only
        return y.reshape(*lead, *outs), positions.reshape(*lead, *outs)
    total = torch.where(inside, flat, torch.tensor(0.0)).sum(-1)
    count = torch.tensor(np.array(inside if exclude else counted).sum(-1), dtype=torch.float64)
    y = total / (divisor if divisor else count)
    return y.reshape(*lead, *outs), None


MAXPOOL_F = {1: F.max_pool1d, 2: F.max_pool2d, 3: F.max_pool3d}
AVGPOOL_F = {1: F.avg_pool1d, 2: F.avg_pool2d, 3: F.avg_pool3d}


def pool_case(name, mode, xs, kernel, stride=None, padding=None, padding_after=None, dilation=None, ceil=False,
              exclude=False, divisor=0, data=None, tol=1e-5, grad=True):
    nsp = len(kernel)
    x = randn(*xs) if data is None else np.asarray(data, np.float32).reshape(xs)
    k, s = kernel, stride or kernel
    pb = padding or [0] * nsp
    pa = padding_after or pb
    d = dilation or [1] * nsp
    torch_ok = pa == pb and (mode == "max" or d == [1] * nsp)
    xt = t64(x)
    ref, positions = naive_pool(xt, mode, k, s, d, pb, pa, ceil, exclude, divisor)
    if torch_ok:  # the naive reference agrees with PyTorch wherever PyTorch has the call
        if mode == "max":
            yt, it = MAXPOOL_F[nsp](xt, k, s, pb, d, ceil, True)
            assert np.array_equal(it.numpy(), positions), name
            fn = lambda x: MAXPOOL_F[nsp](x, k, s, pb, d, ceil)
        else:
            kw = dict(divisor_override=divisor) if divisor else {}
            yt = AVGPOOL_F[nsp](xt, k, s, pb, ceil, not exclude, **kw)
            fn = lambda x: AVGPOOL_F[nsp](x, k, s, pb, ceil, not exclude, **kw)
        assert yt.shape == ref.shape and np.allclose(yt.numpy(), ref.detach().numpy(), equal_nan=True), name
    else:
        fn = lambda x: naive_pool(x, mode, k, s, d, pb, pa, ceil, exclude, divisor)[0]
    params = dict(kernel=kernel, stride=stride, padding=padding, padding_after=padding_after, dilation=dilation,
                  ceil=ceil, exclude=exclude, divisor=divisor)
    add_case(name, "MAX_POOL" if mode == "max" else "AVG_POOL", nsp, [(x, True)], fn, params, tol, grad,
             positions if mode == "max" else None)


ints = lambda *shape: rng.integers(-2, 3, shape).astype(np.float32)  # many ties

pool_case("maxpool1d_k3_s2", "max", (2, 3, 11), [3], [2])
pool_case("maxpool1d_pad_dil_ceil", "max", (2, 2, 10), [3], [2], [1], dilation=[2], ceil=True)
pool_case("maxpool1d_ceil_drops_last", "max", (1, 2, 5), [2], [2], [1], ceil=True)
pool_case("maxpool1d_unbatched_rank2", "max", (3, 9), [4], [3], [2])
pool_case("maxpool1d_neg_inf", "max", (1, 1, 7), [3], [2], [1],
          data=[-math.inf, -math.inf, 1, -math.inf, -math.inf, -math.inf, 2])
pool_case("maxpool1d_nan", "max", (1, 2, 6), [3], [3], grad=False,
          data=[1, math.nan, 3, math.nan, 0, 2, 5, 1, 2, 0, math.nan, 4])
pool_case("maxpool2d_ceil_dil", "max", (2, 3, 7, 9), [3, 2], [2, 2], [1, 0], dilation=[1, 2], ceil=True)
pool_case("maxpool2d_ties", "max", (2, 2, 6, 6), [2, 2], data=ints(2, 2, 6, 6))
pool_case("maxpool2d_ties_overlap", "max", (1, 3, 5, 6), [3, 3], [1, 1], [1, 1], data=ints(1, 3, 5, 6))
pool_case("maxpool2d_asym", "max", (2, 2, 7, 8), [3, 3], [2, 2], [1, 0], padding_after=[0, 1])
pool_case("maxpool2d_asym_ceil_dil", "max", (1, 2, 8, 7), [3, 2], [2, 3], [0, 1], padding_after=[1, 0],
          dilation=[2, 1], ceil=True)
pool_case("maxpool3d_basic", "max", (1, 2, 6, 5, 7), [2, 2, 2])
pool_case("maxpool3d_pad_dil_ceil", "max", (2, 1, 7, 6, 5), [3, 2, 3], [2, 1, 2], [1, 1, 0], dilation=[1, 2, 1],
          ceil=True)

pool_case("avgpool1d_basic", "avg", (2, 3, 10), [3], [2])
pool_case("avgpool1d_pad_ceil", "avg", (2, 2, 10), [3], [2], [1], ceil=True)
pool_case("avgpool1d_pad_ceil_exclude", "avg", (1, 3, 11), [4], [3], [2], ceil=True, exclude=True)
pool_case("avgpool2d_ceil_exclude", "avg", (2, 2, 7, 8), [3, 2], [2, 3], [1, 1], ceil=True, exclude=True)
pool_case("avgpool2d_divisor", "avg", (1, 2, 6, 7), [3, 3], [2, 2], [1, 1], divisor=5)
pool_case("avgpool2d_asym_exclude", "avg", (2, 2, 7, 8), [3, 3], [2, 2], [1, 0], padding_after=[0, 1], exclude=True)
pool_case("avgpool2d_dilated", "avg", (1, 2, 8, 7), [2, 3], [2, 1], [1, 0], dilation=[2, 1])
pool_case("avgpool2d_dilated_ceil_exclude", "avg", (1, 2, 9, 6), [3, 2], [2, 2], [1, 1], dilation=[2, 2], ceil=True,
          exclude=True)
pool_case("avgpool3d_basic", "avg", (1, 2, 5, 6, 4), [2, 2, 2])
pool_case("avgpool3d_pad_ceil_exclude", "avg", (2, 1, 5, 7, 6), [3, 3, 2], [2, 2, 2], [1, 1, 1], ceil=True,
          exclude=True)
pool_case("avgpool3d_divisor_ceil", "avg", (1, 2, 5, 5, 6), [2, 3, 2], [2, 2, 3], [1, 1, 0], ceil=True, divisor=7)

# ------------------------------------------------------------------ max_unpool
UNPOOL_F = {1: F.max_unpool1d, 2: F.max_unpool2d, 3: F.max_unpool3d}


def unpool_case(name, xs, kernel, stride=None, padding=None, output_size=None, ceil=False, tol=1e-6):
    """Indices from max-pooling a random input of size xs (output_size: that size, or None for
    the default); the values to unpool are random. Every index lies in its window (tg's rule)."""
    nsp = len(kernel)
    s, p = stride or kernel, padding or [0] * nsp
    _, idx = MAXPOOL_F[nsp](t64(randn(*xs)), kernel, s, p, 1, ceil, True)
    out_size = output_size or [(o - 1) * s[j] - 2 * p[j] + kernel[j] for j, o in enumerate(idx.shape[-nsp:])]
    for o in itertools.product(*[range(n) for n in idx.shape[-nsp:]]):
        for lead in itertools.product(*[range(n) for n in idx.shape[:-nsp]]):
            pos = np.unravel_index(int(idx[lead + o]), out_size)
            assert all(0 <= pos[j] - (o[j] * s[j] - p[j]) < kernel[j] for j in range(nsp)), name
    v = randn(*idx.shape)
    fn = lambda v, i: UNPOOL_F[nsp](v, i, kernel, s, p, output_size)
    add_case(name, "MAX_UNPOOL", nsp, [(v, True), (idx.numpy(), False)], fn,
             dict(kernel=kernel, stride=stride, padding=padding, output_size=output_size), tol)


unpool_case("unpool1d_basic", (2, 3, 10), [2])
unpool_case("unpool1d_overlap_last_write", (2, 2, 12), [3], [1])
unpool_case("unpool2d_basic", (2, 2, 6, 8), [2, 2])
unpool_case("unpool2d_pad", (1, 3, 7, 9), [3, 3], [2, 2], [1, 1], output_size=[7, 9])
unpool_case("unpool2d_odd_output_size", (1, 3, 7, 9), [2, 2], output_size=[7, 9])
unpool_case("unpool2d_ceil_output_smaller", (1, 2, 5, 7), [2, 3], [2, 2], output_size=[5, 7], ceil=True)
unpool_case("unpool3d_basic", (1, 2, 4, 6, 4), [2, 2, 2])
unpool_case("unpool3d_overlap", (1, 1, 5, 4, 5), [2, 3, 2], [1, 2, 2], [1, 1, 0], output_size=[5, 4, 5])

# ------------------------------------------------------------------ output


def fmt(v, double):
    if math.isnan(v):
        return "NAN"
    if math.isinf(v):
        return "INFINITY" if v > 0 else "-INFINITY"
    return repr(float(v)) if double else f"{float(v):.9g}"


def c_array(name, ctype, values, double=False):
    flat = list(np.asarray(values).reshape(-1))
    if ctype == "int64_t":
        body = ", ".join(str(int(v)) for v in flat)
    else:
        body = ", ".join(fmt(float(v), double) for v in flat)
    lines, line = [], ""
    for tok in body.split(", "):
        if len(line) + len(tok) > 100:
            lines.append(line)
            line = ""
        line += tok + ", "
    lines.append(line)
    return f"static const {ctype} {name}[{max(len(flat), 1)}] = {{\n  " + "\n  ".join(l.rstrip() for l in lines) + "\n};\n"


def shape_init(a):
    dims = list(a.shape) + [0] * (MAX_RANK - a.ndim)
    return f"{a.ndim}, {{{', '.join(str(d) for d in dims)}}}"


def ints3(v):
    v = list(v or []) + [0] * (3 - len(v or []))
    return "{" + ", ".join(str(int(i)) for i in v) + "}"


def main():
    out = [f"/* ops_conv.h — GENERATED by tests/gen_fixtures_ops_conv.py; do not edit by hand.\n"
           f" * PyTorch {torch.__version__} references for tests/test_ops_conv.c: {len(cases)} cases. */\n",
           "#ifndef TG_FIXTURES_OPS_CONV_H\n#define TG_FIXTURES_OPS_CONV_H\n#include <math.h>\n#include <stdint.h>\n\n",
           "enum { " + ", ".join(f"CVFX_{o}" for o in OPS) + " };\n",
           "/* which optional arrays a case passes (the others are NULL) */\n"
           "enum { CVFX_STRIDE = 1, CVFX_PADDING = 2, CVFX_PAD_AFTER = 4, CVFX_DILATION = 8, CVFX_OPAD = 16,\n"
           "       CVFX_OSIZE = 32 };\n\n",
           "/* An input: float32 values (or int64 ones for indices). */\n"
           f"typedef struct {{ const float *data; const int64_t *idata; int ndim; int64_t shape[{MAX_RANK}]; }} cvfx_in;\n",
           "/* A float64 reference. */\n"
           f"typedef struct {{ const double *data; int ndim; int64_t shape[{MAX_RANK}]; }} cvfx_ref;\n",
           "typedef struct {\n  const char *name;\n  int op, nsp;\n  double tol;\n  int nin;\n  cvfx_in in[3];\n"
           "  int kernel[3], stride[3], padding[3], padding_after[3], output_padding[3], dilation[3];\n"
           "  int groups, ceil_mode, exclude_pad, divisor;\n  int64_t output_size[3];\n  unsigned given;\n"
           "  cvfx_ref out;\n  const int64_t *indices; /* max pool: PyTorch's return_indices */\n"
           "  const float *gout;       /* upstream gradient, out's shape */\n"
           "  int grad;                /* gradients checked */\n"
           "  cvfx_ref grad_in[3];     /* d sum(out * gout) / d in[i]; data NULL if not differentiable */\n"
           "} cvfx_case;\n\n"]
    for i, c in enumerate(cases):
        for j, a in enumerate(c["ins"]):
            out.append(c_array(f"cv{i}_in{j}", "int64_t" if a.dtype == np.int64 else "float", a))
        out.append(c_array(f"cv{i}_out", "double", c["out"], True))
        out.append(c_array(f"cv{i}_gout", "float", c["gout"]))
        if c["indices"] is not None:
            out.append(c_array(f"cv{i}_idx", "int64_t", c["indices"]))
        for j, g in enumerate(c["grads"]):
            if g is not None:
                out.append(c_array(f"cv{i}_grad{j}", "double", g, True))
    out.append("\nstatic const cvfx_case cvfx_cases[] = {\n")
    for i, c in enumerate(cases):
        p = c["p"]
        given = sum(bit for key, bit in (("stride", 1), ("padding", 2), ("padding_after", 4), ("dilation", 8),
                                         ("output_padding", 16), ("output_size", 32)) if p.get(key) is not None)
        ins = []
        for j, a in enumerate(c["ins"]):
            isint = a.dtype == np.int64
            ins.append(f"{{{'NULL' if isint else f'cv{i}_in{j}'}, {f'cv{i}_in{j}' if isint else 'NULL'}, "
                       f"{shape_init(a)}}}")
        grads = [f"{{cv{i}_grad{j}, {shape_init(g)}}}" if g is not None else "{NULL, 0, {0}}"
                 for j, g in enumerate(c["grads"])]
        out.append(
            f"  {{\"{c['name']}\", CVFX_{c['op']}, {c['nsp']}, {c['tol']!r}, {len(ins)}, {{{', '.join(ins)}}},\n"
            f"   {ints3(p.get('kernel'))}, {ints3(p.get('stride'))}, {ints3(p.get('padding'))}, "
            f"{ints3(p.get('padding_after'))}, {ints3(p.get('output_padding'))}, {ints3(p.get('dilation'))},\n"
            f"   {p.get('groups', 1)}, {int(p.get('ceil', False))}, {int(p.get('exclude', False))}, "
            f"{p.get('divisor', 0)}, {ints3(p.get('output_size'))}, {given},\n"
            f"   {{cv{i}_out, {shape_init(c['out'])}}}, {f'cv{i}_idx' if c['indices'] is not None else 'NULL'}, "
            f"cv{i}_gout, {int(c['grad'])},\n   {{{', '.join(grads)}}}}},\n")
    out.append("};\n#define CVFX_NCASES ((int)(sizeof cvfx_cases / sizeof cvfx_cases[0]))\n#endif\n")
    with open(OUT, "w") as f:
        f.write("".join(out))
    print(f"wrote {OUT}: {len(cases)} cases")


main()
