#!/usr/bin/python3
"""gen_fixtures_nn.py — writes tests/fixtures/nn.h, the PyTorch reference data for
tests/test_nn.c (activations, norms, losses, convolutions, pooling, attention).

Run from anywhere:  /usr/bin/python3 tests/gen_fixtures_nn.py

Each case stores float32 inputs (labels and masks are stored as floats and cast in C), the
integer and float parameters of the call, the expected outputs, and the gradients of
sum(out * gout) with respect to the float inputs for a random gout.  References are computed
by torch in float64 from the float32-rounded inputs, so they are exact to ~1e-15; the C side
computes in float32 and compares with the case's tolerance.

Parameter layout per op (ip = ints, fp = doubles; in[] = inputs, None = NULL):
  LEAKY_RELU x; fp0 slope         GELU x        SILU x        SOFTPLUS x; fp0 beta
  LAYERNORM  x, w, b; ip0 naxes; fp0 eps       RMSNORM x, w; ip0 naxes; fp0 eps
  GROUPNORM  x, w, b; ip0 groups; fp0 eps
  BATCHNORM  x, w, b, running_mean, running_var; ip0 training; fp0 momentum, fp1 eps;
             out[1], out[2] = running stats afterwards
  CE logits, target; fp0 smoothing   SPARSE_CE logits, labels; fp0 smoothing; ip0 ignore
  NLL log_probs, labels      MSE / BCE / BCE_LOGITS a, b
  CONV2D x, w, b; ip stride(2) padding(2) dilation(2) groups
  CONV_T2D x, w, b; ip stride(2) padding(2) output_padding(2) dilation(2) groups
  MAX_POOL / AVG_POOL x; ip kernel(2) stride(2, 0 = NULL) padding(2)
  SDPA q, k, v, mask; ip0 causal
"""
import math
import os

import numpy as np
import torch
import torch.nn.functional as F

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "fixtures", "nn.h")
OPS = ["LEAKY_RELU", "GELU", "SILU", "SOFTPLUS", "LAYERNORM", "RMSNORM", "GROUPNORM", "BATCHNORM",
       "CE", "SPARSE_CE", "NLL", "MSE", "BCE", "BCE_LOGITS", "CONV2D", "CONV_T2D", "MAX_POOL",
       "AVG_POOL", "SDPA"]
MAX_IN, MAX_OUT, MAX_RANK = 5, 3, 6

rng = np.random.default_rng(7)
torch.set_default_dtype(torch.float64)


def randn(*shape, scale=1.0):
    return (rng.standard_normal(shape) * scale).astype(np.float32)


def uniform(lo, hi, *shape):
    return rng.uniform(lo, hi, shape).astype(np.float32)


class In:
    """An input: float32 values, the C dtype, whether its gradient is checked."""

    def __init__(self, data, dtype="TG_FLOAT32", grad=True):
        self.data = np.asarray(data, dtype=np.float32)
        self.dtype, self.grad = dtype, grad and dtype == "TG_FLOAT32"

    def torch(self):
        t = torch.tensor(self.data.astype(np.float64))
        if self.dtype == "TG_INT32":
            return t.long()
        if self.dtype == "TG_BOOL":
            return t != 0
        return t.requires_grad_(self.grad)


def labels(n, classes, extra=()):
    v = rng.integers(0, classes, n)
    for i, lab in extra:
        v[i] = lab
    return In(v.astype(np.float32), "TG_INT32")


cases = []


def case(name, op, ins, fn, ip=(), fp=(), tol=1e-5, nout=1):
    """Run fn on the torch inputs; fn returns the output (or a list of outputs)."""
    tins = [i.torch() if i is not None else None for i in ins]
    outs = fn(*tins)
    outs = list(outs) if isinstance(outs, (list, tuple)) else [outs]
    y = outs[0]
    gout = rng.standard_normal(tuple(y.shape))
    (y * torch.tensor(gout)).sum().backward()
    grads = [t.grad.numpy() if (i is not None and i.grad and t.grad is not None) else None
             for i, t in zip(ins, tins)]
    for i, g in zip(ins, grads):
        assert i is None or not i.grad or g is not None, name
    cases.append(dict(name=name, op=op, ins=ins, ip=list(ip), fp=list(fp), tol=tol,
                      outs=[o.detach().numpy() for o in outs], gout=gout, grads=grads))


# ------------------------------------------------------------------ activations
act_x = np.concatenate([uniform(-6, 6, 20), np.array([0, 1e-3, -1e-3, 30, -30, 60, -60, 0.5, 800, -800],
                                                   np.float32)])
act_x = act_x.reshape(5, 6)
case("leaky_relu_001", "LEAKY_RELU", [In(act_x)], lambda x: F.leaky_relu(x, 0.01), fp=[0.01])
case("leaky_relu_02", "LEAKY_RELU", [In(act_x)], lambda x: F.leaky_relu(x, 0.2), fp=[0.2])
case("gelu", "GELU", [In(act_x)], lambda x: F.gelu(x, approximate="tanh"))
case("silu", "SILU", [In(act_x)], F.silu)
for beta in (1.0, 2.0, 0.5):
    case(f"softplus_beta{beta:g}", "SOFTPLUS", [In(act_x)], lambda x, b=beta: F.softplus(x, b), fp=[beta])
case("softplus_neg_large", "SOFTPLUS", [In(np.array([-12, -20, -30, -40, 40, 80], np.float32))],
     lambda x: F.softplus(x), fp=[1.0])

# ------------------------------------------------------------------ normalization
x = randn(3, 4, 5, scale=2.0) + 1.0
case("layernorm_last", "LAYERNORM", [In(x), In(randn(5)), In(randn(5))],
     lambda x, w, b: F.layer_norm(x, (5,), w, b, 1e-5), ip=[1], fp=[1e-5])
case("layernorm_last2", "LAYERNORM", [In(x), In(randn(4, 5)), In(randn(4, 5))],
     lambda x, w, b: F.layer_norm(x, (4, 5), w, b, 1e-5), ip=[2], fp=[1e-5])
case("layernorm_plain", "LAYERNORM", [In(x), None, None],
     lambda x, w, b: F.layer_norm(x, (5,), None, None, 1e-3), ip=[1], fp=[1e-3])


def rms(x, naxes, w, eps):
    dims = tuple(range(x.dim() - naxes, x.dim()))
    y = x * torch.rsqrt((x * x).mean(dims, keepdim=True) + eps)
    return y * w if w is not None else y


x = randn(3, 4, 6)
case("rmsnorm_last", "RMSNORM", [In(x), In(randn(6))], lambda x, w: rms(x, 1, w, 1e-6), ip=[1], fp=[1e-6])
case("rmsnorm_last2", "RMSNORM", [In(x), None], lambda x, w: rms(x, 2, None, 1e-5), ip=[2], fp=[1e-5])

x = randn(2, 6, 3, 3) + 0.5
case("groupnorm_3", "GROUPNORM", [In(x), In(randn(6)), In(randn(6))],
     lambda x, w, b: F.group_norm(x, 3, w, b, 1e-5), ip=[3], fp=[1e-5])
case("groupnorm_1_plain", "GROUPNORM", [In(x), None, None],
     lambda x, w, b: F.group_norm(x, 1, None, None, 1e-5), ip=[1], fp=[1e-5])
case("groupnorm_6_rank3", "GROUPNORM", [In(randn(2, 6, 5)), In(randn(6)), In(randn(6))],
     lambda x, w, b: F.group_norm(x, 6, w, b, 1e-4), ip=[6], fp=[1e-4])


def bn(training, momentum, eps):
    def f(x, w, b, rm, rv):
        rm = rm.clone() if rm is not None else None
        rv = rv.clone() if rv is not None else None
        y = F.batch_norm(x, rm, rv, w, b, training, momentum, eps)
        return [y] + ([rm, rv] if rm is not None else [])
    return f


x = randn(4, 3, 5, 5, scale=1.5) + 0.7
stats = lambda: [In(randn(3) * 0.1, grad=False), In(uniform(0.5, 2.0, 3), grad=False)]
case("batchnorm_train", "BATCHNORM", [In(x), In(randn(3)), In(randn(3))] + stats(),
     bn(True, 0.1, 1e-5), ip=[1], fp=[0.1, 1e-5])
case("batchnorm_train_nostats", "BATCHNORM", [In(x), In(randn(3)), In(randn(3)), None, None],
     bn(True, 0.1, 1e-5), ip=[1], fp=[0.1, 1e-5])
case("batchnorm_eval", "BATCHNORM", [In(x), In(randn(3)), In(randn(3))] + stats(),
     bn(False, 0.1, 1e-5), ip=[0], fp=[0.1, 1e-5])
case("batchnorm_train_rank2", "BATCHNORM", [In(randn(6, 4)), None, None] + [In(randn(4), grad=False),
     In(uniform(0.5, 2, 4), grad=False)], bn(True, 0.3, 1e-3), ip=[1], fp=[0.3, 1e-3])

# ------------------------------------------------------------------ losses
logits = randn(5, 4, scale=2.0)
target = np.exp(randn(5, 4))
target = (target / target.sum(1, keepdims=True)).astype(np.float32)
case("ce_probs", "CE", [In(logits), In(target, grad=False)],
     lambda x, t: F.cross_entropy(x, t), fp=[0.0])
case("ce_probs_smooth", "CE", [In(logits), In(target, grad=False)],
     lambda x, t: F.cross_entropy(x, t, label_smoothing=0.1), fp=[0.1])
logits = randn(6, 5, scale=2.0)
lab = labels(6, 5, extra=[(1, 2), (4, 2)])
case("sparse_ce", "SPARSE_CE", [In(logits), lab], lambda x, y: F.cross_entropy(x, y), ip=[-1], fp=[0.0])
case("sparse_ce_smooth_ignore", "SPARSE_CE", [In(logits), lab],
     lambda x, y: F.cross_entropy(x, y, ignore_index=2, label_smoothing=0.2), ip=[2], fp=[0.2])
case("sparse_ce_smooth", "SPARSE_CE", [In(logits), lab],
     lambda x, y: F.cross_entropy(x, y, label_smoothing=0.3), ip=[-1], fp=[0.3])
logp = torch.log_softmax(torch.tensor(randn(6, 5).astype(np.float64)), 1).numpy().astype(np.float32)
case("nll", "NLL", [In(logp), labels(6, 5)], lambda x, y: F.nll_loss(x, y))
case("mse", "MSE", [In(randn(3, 4)), In(randn(3, 4))], F.mse_loss)
case("bce", "BCE", [In(uniform(0.05, 0.95, 3, 4)), In(uniform(0, 1, 3, 4))], F.binary_cross_entropy)
big = randn(3, 4, scale=3.0)
big[0, :3] = [30, -30, 90]
case("bce_logits", "BCE_LOGITS", [In(big), In(uniform(0, 1, 3, 4))], F.binary_cross_entropy_with_logits)

# ------------------------------------------------------------------ convolutions


def conv(name, xs, ws, bias=True, stride=(1, 1), pad=(0, 0), dil=(1, 1), groups=1, tol=2e-5):
    ins = [In(randn(*xs)), In(randn(*ws, scale=0.5)), In(randn(ws[0])) if bias else None]
    case(name, "CONV2D", ins,
         lambda x, w, b: F.conv2d(x, w, b, stride, pad, dil, groups),
         ip=[*stride, *pad, *dil, groups], tol=tol)


conv("conv_basic", (2, 3, 7, 7), (4, 3, 3, 3))
conv("conv_stride2_pad1", (2, 3, 8, 7), (5, 3, 3, 3), stride=(2, 2), pad=(1, 1))
conv("conv_dilation2", (1, 2, 9, 9), (3, 2, 3, 3), pad=(2, 1), dil=(2, 2))
conv("conv_groups2", (2, 4, 6, 6), (6, 2, 3, 3), stride=(1, 2), groups=2)
conv("conv_nonsquare", (1, 3, 7, 9), (2, 3, 2, 4), stride=(2, 1), pad=(1, 2), dil=(1, 2))
conv("conv_1x1_stride2", (2, 3, 5, 6), (4, 3, 1, 1), stride=(2, 2))
conv("conv_k2_s2", (1, 2, 6, 6), (2, 2, 2, 2), stride=(2, 2), bias=False)
conv("conv_depthwise", (1, 3, 5, 5), (3, 1, 3, 3), pad=(1, 1), groups=3, bias=False)
conv("conv_stride3_odd", (1, 2, 10, 11), (3, 2, 4, 3), stride=(3, 3), pad=(1, 0))
conv("conv_5x5", (2, 1, 12, 12), (4, 1, 5, 5))


def convt(name, xs, ws, bias=True, stride=(1, 1), pad=(0, 0), opad=(0, 0), dil=(1, 1), groups=1):
    ins = [In(randn(*xs)), In(randn(*ws, scale=0.5)), In(randn(ws[1] * groups)) if bias else None]
    case(name, "CONV_T2D", ins,
         lambda x, w, b: F.conv_transpose2d(x, w, b, stride, pad, opad, groups, dil),
         ip=[*stride, *pad, *opad, *dil, groups], tol=2e-5)


convt("convt_basic", (1, 2, 4, 4), (2, 3, 3, 3))
convt("convt_stride2_pad1_opad1", (2, 2, 3, 4), (2, 3, 3, 3), stride=(2, 2), pad=(1, 1), opad=(1, 1))
convt("convt_dil2_groups2", (1, 4, 3, 3), (4, 2, 2, 3), stride=(2, 1), pad=(1, 0), dil=(2, 2), groups=2)
convt("convt_crop", (1, 1, 5, 5), (1, 2, 2, 2), stride=(2, 2), pad=(2, 2), bias=False)
convt("convt_nonsquare", (1, 2, 4, 3), (2, 2, 3, 2), stride=(1, 3), opad=(0, 2))

# ------------------------------------------------------------------ pooling


def pool(name, op, xs, k, s=None, p=(0, 0)):
    f = F.max_pool2d if op == "MAX_POOL" else F.avg_pool2d
    case(name, op, [In(randn(*xs) - 2.0)], lambda x: f(x, k, s if s else k, p),
         ip=[*k, *(s if s else (0, 0)), *p])


pool("maxpool_2x2", "MAX_POOL", (2, 3, 8, 8), (2, 2))
pool("maxpool_3x3_s2_p1", "MAX_POOL", (1, 2, 7, 9), (3, 3), (2, 2), (1, 1))
pool("maxpool_3x2_s12_p10", "MAX_POOL", (1, 1, 6, 7), (3, 2), (1, 2), (1, 0))
pool("maxpool_odd", "MAX_POOL", (1, 1, 7, 7), (2, 2))
pool("maxpool_rank3", "MAX_POOL", (2, 5, 6), (2, 3), (2, 1))
pool("avgpool_2x2", "AVG_POOL", (2, 3, 8, 8), (2, 2))
pool("avgpool_3x3_s2_p1", "AVG_POOL", (1, 2, 7, 9), (3, 3), (2, 2), (1, 1))
pool("avgpool_rank3", "AVG_POOL", (2, 5, 7), (2, 3), (1, 2))

# ------------------------------------------------------------------ attention


def sdpa(q, k, v, mask, causal):
    scores = q @ k.transpose(-1, -2) / math.sqrt(q.shape[-1])
    if mask is not None:
        scores = scores.masked_fill(~mask, -math.inf) if mask.dtype == torch.bool else scores + mask
    if causal:
        keep = torch.ones(scores.shape[-2], scores.shape[-1]).tril().bool()
        scores = scores.masked_fill(~keep, -math.inf)
    return torch.softmax(scores, -1) @ v


def keep_mask(*shape):
    m = rng.uniform(0, 1, shape) < 0.7
    m[..., 0] = True  # every row keeps a key
    return In(m.astype(np.float32), "TG_BOOL")


q, k, v = randn(2, 3, 4), randn(2, 5, 4), randn(2, 5, 6)
case("sdpa_plain", "SDPA", [In(q), In(k), In(v), None], lambda q, k, v, m: sdpa(q, k, v, None, False), ip=[0])
case("sdpa_causal", "SDPA", [In(q), In(k), In(v), None], lambda q, k, v, m: sdpa(q, k, v, None, True), ip=[1])
case("sdpa_bool_mask", "SDPA", [In(q), In(k), In(v), keep_mask(3, 5)], lambda q, k, v, m: sdpa(q, k, v, m, False),
     ip=[0])
case("sdpa_float_mask", "SDPA", [In(q), In(k), In(v), In(randn(2, 1, 5), grad=False)],
     lambda q, k, v, m: sdpa(q, k, v, m, False), ip=[0])
q4, k4, v4 = randn(2, 2, 4, 3), randn(2, 2, 4, 3), randn(2, 2, 4, 5)
case("sdpa_heads_causal_mask", "SDPA", [In(q4), In(k4), In(v4), keep_mask(2, 1, 4, 4)],
     lambda q, k, v, m: sdpa(q, k, v, m, True), ip=[1])


# ------------------------------------------------------------------ writing


def c_floats(a):
    vals = []
    for v in np.asarray(a, dtype=np.float64).ravel():
        f = float(np.float32(v))
        vals.append("INFINITY" if f == math.inf else "-INFINITY" if f == -math.inf else "%.9g" % f)
    return vals


def emit_array(lines, name, a):
    vals = c_floats(a)
    lines.append("static const float %s[%d] = {" % (name, max(1, len(vals))))
    for i in range(0, len(vals), 8):
        lines.append("  " + ", ".join(vals[i:i + 8]) + ",")
    lines.append("};")


def tensor_ref(name, a, dtype="TG_FLOAT32"):
    shape = list(np.shape(a))
    assert len(shape) <= MAX_RANK
    dims = ", ".join(str(s) for s in shape) or "0"
    return "{%s, %s, %d, {%s}}" % (name, dtype, len(shape), dims)


NONE = "{NULL, TG_FLOAT32, 0, {0}}"


def main():
    lines = ["/* nn.h — GENERATED by tests/gen_fixtures_nn.py; do not edit by hand.",
             " * PyTorch %s references for tests/test_nn.c: %d cases. */" % (torch.__version__, len(cases)),
             "#ifndef TG_FIXTURES_NN_H", "#define TG_FIXTURES_NN_H", "#include <math.h>",
             "#include <stddef.h>", "#include <stdint.h>", '#include "tg.h"', "",
             "enum { %s };" % ", ".join("NNFX_" + o for o in OPS), "",
             "/* A tensor: float32 values converted to dtype in C; data NULL when absent. */",
             "typedef struct { const float *data; tg_dtype dtype; int ndim; int64_t shape[%d]; } nnfx_tensor;"
             % MAX_RANK,
             "typedef struct {",
             "  const char *name;",
             "  int op;",
             "  double tol;",
             "  nnfx_tensor in[%d];" % MAX_IN,
             "  int ip[10];",
             "  double fp[3];",
             "  int nout;",
             "  nnfx_tensor out[%d];" % MAX_OUT,
             "  nnfx_tensor gout;       /* upstream gradient of out[0] */",
             "  nnfx_tensor grad[%d];    /* d sum(out[0] * gout) / d in[i]; data NULL if unchecked */" % MAX_IN,
             "} nnfx_case;", ""]
    entries = []
    for ci, c in enumerate(cases):
        p = "nnfx_%d_" % ci
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
        emit_array(lines, p + "gout", c["gout"])
        for i, g in enumerate(c["grads"]):
            if g is None:
                grads.append(NONE)
                continue
            emit_array(lines, p + "grad%d" % i, g)
            grads.append(tensor_ref(p + "grad%d" % i, g))
        ins += [NONE] * (MAX_IN - len(ins))
        grads += [NONE] * (MAX_IN - len(grads))
        outs += [NONE] * (MAX_OUT - len(outs))
        ip = ", ".join(str(v) for v in c["ip"]) or "0"
        fp = ", ".join(repr(float(v)) for v in c["fp"]) or "0"
        entries.append('  {"%s", NNFX_%s, %g,\n   {%s},\n   {%s}, {%s}, %d,\n   {%s},\n   %s,\n   {%s}},'
                       % (c["name"], c["op"], c["tol"], ", ".join(ins), ip, fp, len(c["outs"]),
                          ", ".join(outs), tensor_ref(p + "gout", c["gout"]), ", ".join(grads)))
    lines.append("")
    lines.append("static const nnfx_case nnfx_cases[] = {")
    lines += entries
    lines.append("};")
    lines.append("#define NNFX_NCASES ((int)(sizeof nnfx_cases / sizeof nnfx_cases[0]))")
    lines.append("#endif")
    os.makedirs(os.path.dirname(OUT), exist_ok=True)
    with open(OUT, "w") as f:
        f.write("\n".join(lines) + "\n")
    print("wrote %s (%d cases)" % (OUT, len(cases)))


main()
