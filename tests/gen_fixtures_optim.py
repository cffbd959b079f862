#!/usr/bin/python3
"""gen_fixtures_optim.py — writes tests/fixtures/optim.h, the PyTorch reference data for
tests/test_optim.c (optimizers) and tests/test_layers.c (layer forwards, BatchNorm running
statistics, a small MLP trained end to end).

Run from anywhere:  /usr/bin/python3 tests/gen_fixtures_optim.py

Optimizers: a linear model y = x @ W^T + b with fixed data and initial weights, loss
mean((y - target)^2), a few steps; the fixture holds the loss before each step and W, b after
each step. SGD, Adam and AdamW are torch.optim (torch 1.13); LAMB has no torch.optim version,
so it is written out here in torch float32 ops following tinygrad's LAMB (trust ratio
||w|| / ||update||, 1 when either norm is 0). Everything is float32, like the C side.
"""
import os

import numpy as np
import torch
import torch.nn.functional as F

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "fixtures", "optim.h")
rng = np.random.default_rng(20240611)
torch.manual_seed(0)

lines = []


def f32(shape, scale=1.0):
    return (rng.standard_normal(shape) * scale).astype(np.float32)


def emit_floats(name, a):
    a = np.asarray(a, dtype=np.float32).ravel()
    body = ",".join("%.9g" % v + ("f" if np.isfinite(v) else "") for v in a)
    lines.append("static const float %s[%d] = {%s};" % (name, max(len(a), 1), body or "0"))


def emit_ints(name, a, ctype="int32_t"):
    a = np.asarray(a).ravel()
    lines.append("static const %s %s[%d] = {%s};" % (ctype, name, len(a), ",".join(str(int(v)) for v in a)))


def t(a):
    return torch.tensor(np.asarray(a, dtype=np.float32))


# ------------------------------------------------------------------ optimizers
OPT_STEPS = 5
X = f32((6, 4))
Y = f32((6, 3))
W0 = f32((3, 4), 0.5)
B0 = f32((3,), 0.5)


def loss_fn(w, b):
    return ((t(X) @ w.T + b - t(Y)) ** 2).mean()


def lamb_steps(w, b, lr, b1, b2, eps, wd, steps):
    """tinygrad's LAMB in torch float32 ops; returns the loss before each step."""
    params = [w, b]
    m = [torch.zeros_like(p) for p in params]
    v = [torch.zeros_like(p) for p in params]
    b1t = torch.ones((), dtype=torch.float32)
    b2t = torch.ones((), dtype=torch.float32)
    losses, history = [], []
    for _ in range(steps):
        loss = loss_fn(w, b)
        grads = torch.autograd.grad(loss, params)
        losses.append(loss.item())
        b1t, b2t = b1t * b1, b2t * b2
        with torch.no_grad():
            for i, (p, g) in enumerate(zip(params, grads)):
                m[i] = b1 * m[i] + (1.0 - b1) * g
                v[i] = b2 * v[i] + (1.0 - b2) * (g * g)
                up = (m[i] / (1.0 - b1t)) / ((v[i] / (1.0 - b2t)).sqrt() + eps) + wd * p
                r1, r2 = p.square().sum().sqrt(), up.square().sum().sqrt()
                r = torch.where(r1 > 0, torch.where(r2 > 0, r1 / r2, torch.ones(())), torch.ones(()))
                p -= lr * r * up
        history.append((w.detach().clone(), b.detach().clone()))
    return losses, history


def torch_steps(make_opt, steps, lr_change):
    w = t(W0).requires_grad_(True)
    b = t(B0).requires_grad_(True)
    opt = make_opt([w, b])
    losses, history = [], []
    for step in range(steps):
        if lr_change and step == lr_change[0]:
            for group in opt.param_groups:
                group["lr"] = lr_change[1]
        opt.zero_grad()
        loss = loss_fn(w, b)
        loss.backward()
        losses.append(loss.item())
        opt.step()
        history.append((w.detach().clone(), b.detach().clone()))
    return losses, history


# name, kind, lr, momentum, weight_decay, beta1, beta2, eps, nesterov, (step, new lr) or None, zero bias
OPT_CASES = [
    ("sgd", "SGD", 0.1, 0.0, 0.0, 0, 0, 0, False, None, False),
    ("sgd_momentum", "SGD", 0.1, 0.9, 0.0, 0, 0, 0, False, None, False),
    ("sgd_nesterov", "SGD", 0.1, 0.9, 0.0, 0, 0, 0, True, None, False),
    ("sgd_weight_decay", "SGD", 0.1, 0.0, 0.05, 0, 0, 0, False, None, False),
    ("sgd_nesterov_wd", "SGD", 0.05, 0.8, 0.1, 0, 0, 0, True, None, False),
    ("sgd_set_lr", "SGD", 0.1, 0.9, 0.0, 0, 0, 0, False, (2, 0.02), False),
    ("adam", "ADAM", 0.05, 0, 0.0, 0.9, 0.999, 1e-8, False, None, False),
    ("adam_betas", "ADAM", 0.02, 0, 0.0, 0.5, 0.8, 1e-3, False, None, False),
    ("adam_set_lr", "ADAM", 0.05, 0, 0.0, 0.9, 0.999, 1e-8, False, (3, 0.005), False),
    ("adamw", "ADAMW", 0.05, 0, 0.1, 0.9, 0.999, 1e-8, False, None, False),
    ("adamw_strong_wd", "ADAMW", 0.1, 0, 1.0, 0.8, 0.99, 1e-6, False, None, False),
    ("lamb", "LAMB", 0.05, 0, 0.01, 0.9, 0.999, 1e-6, False, None, False),
    ("lamb_zero_bias", "LAMB", 0.1, 0, 0.0, 0.9, 0.99, 1e-6, False, None, True),
]


def make_torch_opt(kind, lr, mom, wd, b1, b2, eps, nesterov):
    if kind == "SGD":
        return lambda ps: torch.optim.SGD(ps, lr=lr, momentum=mom, weight_decay=wd, nesterov=nesterov)
    if kind == "ADAM":
        return lambda ps: torch.optim.Adam(ps, lr=lr, betas=(b1, b2), eps=eps)
    return lambda ps: torch.optim.AdamW(ps, lr=lr, betas=(b1, b2), eps=eps, weight_decay=wd)


def gen_optimizers():
    global B0
    lines.append("/* ---- optimizers: linear model, loss mean((x @ W^T + b - y)^2) */")
    lines.append("#define OPT_STEPS %d" % OPT_STEPS)
    emit_floats("opt_x", X)
    emit_floats("opt_y", Y)
    emit_floats("opt_w0", W0)
    emit_floats("opt_b0", B0)
    rows = []
    b0_saved = B0
    for (name, kind, lr, mom, wd, b1, b2, eps, nest, lr_change, zero_bias) in OPT_CASES:
        B0 = np.zeros_like(b0_saved) if zero_bias else b0_saved
        if kind == "LAMB":
            assert lr_change is None
            w = t(W0).requires_grad_(True)
            b = t(B0).requires_grad_(True)
            losses, hist = lamb_steps(w, b, lr, b1, b2, eps, wd, OPT_STEPS)
        else:
            losses, hist = torch_steps(make_torch_opt(kind, lr, mom, wd, b1, b2, eps, nest), OPT_STEPS, lr_change)
        B0 = b0_saved
        emit_floats("opt_%s_loss" % name, losses)
        emit_floats("opt_%s_w" % name, np.stack([h[0].numpy() for h in hist]))
        emit_floats("opt_%s_b" % name, np.stack([h[1].numpy() for h in hist]))
        step, lr2 = lr_change if lr_change else (-1, 0.0)
        rows.append('  {"%s", OPT_KIND_%s, %r, %r, %r, %r, %r, %r, %d, %d, %r, %d, opt_%s_loss, opt_%s_w, opt_%s_b},'
                    % (name, kind, lr, mom, wd, b1, b2, eps, int(nest), step, lr2, int(zero_bias), name, name, name))
    lines.append("enum { OPT_KIND_SGD, OPT_KIND_ADAM, OPT_KIND_ADAMW, OPT_KIND_LAMB };")
    lines.append("typedef struct opt_case {\n  const char *name;\n  int kind;\n"
                 "  double lr, momentum, weight_decay, beta1, beta2, eps;\n  int nesterov;\n"
                 "  int lr_change_step; double lr_change; /* set_lr(lr_change) before that step (-1: never) */\n"
                 "  int zero_bias; /* b starts at 0 instead of opt_b0 */\n"
                 "  const float *loss, *w, *b; /* loss before step s; W and b after step s */\n} opt_case;")
    lines.append("static const opt_case opt_cases[] = {")
    lines.extend(rows)
    lines.append("};")


# ------------------------------------------------------------------ layers
def gen_layers():
    lines.append("/* ---- layer forwards with given weights */")
    # Linear (3 <- 4), input of rank 3
    lw, lb, lx = f32((3, 4)), f32((3,)), f32((2, 2, 4))
    emit_floats("lin_w", lw), emit_floats("lin_b", lb), emit_floats("lin_x", lx)
    emit_floats("lin_y", F.linear(t(lx), t(lw), t(lb)).numpy())
    # Embedding (5 x 3), indices (3, 2); the gradient of sum(out * gw) w.r.t. the weight
    ew = f32((5, 3))
    idx = np.array([[0, 4], [2, 2], [1, 3]], dtype=np.int64)
    gw = f32((3, 2, 3))
    emit_floats("emb_w", ew), emit_ints("emb_idx", idx), emit_floats("emb_gw", gw)
    wt = t(ew).requires_grad_(True)
    out = F.embedding(torch.tensor(idx), wt)
    (out * t(gw)).sum().backward()
    emit_floats("emb_y", out.detach().numpy()), emit_floats("emb_grad", wt.grad.numpy())
    # LayerNorm over the last 1 and last 2 axes
    nx = f32((2, 3, 4), 2.0) + 1.0
    emit_floats("norm_x", nx)
    w1, b1 = f32((4,)), f32((4,))
    w2, b2 = f32((3, 4)), f32((3, 4))
    emit_floats("ln1_w", w1), emit_floats("ln1_b", b1), emit_floats("ln2_w", w2), emit_floats("ln2_b", b2)
    emit_floats("ln1_y", F.layer_norm(t(nx), (4,), t(w1), t(b1), 1e-5).numpy())
    emit_floats("ln2_y", F.layer_norm(t(nx), (3, 4), t(w2), t(b2), 1e-5).numpy())
    emit_floats("ln_noaffine_y", F.layer_norm(t(nx), (4,), None, None, 1e-5).numpy())
    # RMSNorm (torch 1.13 has none): x / sqrt(mean(x^2) + eps) * w, in float64
    rx = nx.astype(np.float64)
    rms = rx / np.sqrt((rx ** 2).mean(axis=-1, keepdims=True) + 1e-6) * w1.astype(np.float64)
    emit_floats("rms_y", rms)
    # GroupNorm: 4 channels in 2 groups
    gx, gwt, gb = f32((2, 4, 3, 3)), f32((4,)), f32((4,))
    emit_floats("gn_x", gx), emit_floats("gn_w", gwt), emit_floats("gn_b", gb)
    emit_floats("gn_y", F.group_norm(t(gx), 2, t(gwt), t(gb), 1e-5).numpy())
    # Conv2d: 4 -> 6 channels, groups 2, 3x3, stride 2, padding 1
    cx, cw, cb = f32((2, 4, 5, 5)), f32((6, 2, 3, 3)), f32((6,))
    emit_floats("conv_x", cx), emit_floats("conv_w", cw), emit_floats("conv_b", cb)
    emit_floats("conv_y", F.conv2d(t(cx), t(cw), t(cb), stride=2, padding=1, groups=2).numpy())
    # BatchNorm2d(3): two training steps, then eval
    bn = torch.nn.BatchNorm2d(3)
    bw, bb = f32((3,)), f32((3,))
    with torch.no_grad():
        bn.weight.copy_(t(bw)), bn.bias.copy_(t(bb))
    emit_floats("bn_w", bw), emit_floats("bn_b", bb)
    bn.train()
    for i in range(2):
        x = f32((4, 3, 2, 2), 1.5) + i
        emit_floats("bn_x%d" % i, x)
        emit_floats("bn_y%d" % i, bn(t(x)).detach().numpy())
        emit_floats("bn_mean%d" % i, bn.running_mean.numpy()), emit_floats("bn_var%d" % i, bn.running_var.numpy())
    lines.append("#define BN_BATCHES_TRACKED %d" % int(bn.num_batches_tracked))
    bn.eval()
    x = f32((2, 3, 2, 2))
    emit_floats("bn_x_eval", x), emit_floats("bn_y_eval", bn(t(x)).detach().numpy())


# ------------------------------------------------------------------ an MLP trained end to end
def gen_mlp():
    lines.append("/* ---- MLP 4 -> 8 -> relu -> 3, mse loss, SGD(lr 0.1, momentum 0.9), MLP_STEPS steps */")
    steps = 4
    lines.append("#define MLP_STEPS %d" % steps)
    x, y = f32((8, 4)), f32((8, 3))
    w1, b1, w2, b2 = f32((8, 4), 0.5), f32((8,), 0.5), f32((3, 8), 0.5), f32((3,), 0.5)
    for n, a in [("mlp_x", x), ("mlp_y", y), ("mlp_w1", w1), ("mlp_b1", b1), ("mlp_w2", w2), ("mlp_b2", b2)]:
        emit_floats(n, a)
    l1, l2 = torch.nn.Linear(4, 8), torch.nn.Linear(8, 3)
    with torch.no_grad():
        l1.weight.copy_(t(w1)), l1.bias.copy_(t(b1)), l2.weight.copy_(t(w2)), l2.bias.copy_(t(b2))
    params = list(l1.parameters()) + list(l2.parameters())
    opt = torch.optim.SGD(params, lr=0.1, momentum=0.9)
    losses = []
    for _ in range(steps):
        opt.zero_grad()
        loss = F.mse_loss(l2(torch.relu(l1(t(x)))), t(y))
        loss.backward()
        losses.append(loss.item())
        opt.step()
    emit_floats("mlp_loss", losses)
    for n, p in [("mlp_w1_end", l1.weight), ("mlp_b1_end", l1.bias), ("mlp_w2_end", l2.weight), ("mlp_b2_end", l2.bias)]:
        emit_floats(n, p.detach().numpy())


def main():
    gen_optimizers()
    gen_layers()
    gen_mlp()
    head = ["/* optim.h - GENERATED by tests/gen_fixtures_optim.py; do not edit.",
            " * torch %s, numpy %s. */" % (torch.__version__, np.__version__),
            "#ifndef TG_FIXTURES_OPTIM_H", "#define TG_FIXTURES_OPTIM_H", "#include <stdint.h>", ""]
    with open(OUT, "w") as f:
        f.write("\n".join(head + lines + ["", "#endif", ""]))
    print("wrote", OUT)


if __name__ == "__main__":
    main()
