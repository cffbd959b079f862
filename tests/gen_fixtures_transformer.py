#!/usr/bin/python3
"""gen_fixtures_transformer.py — writes tests/fixtures/transformer.h, the PyTorch reference
data for tests/test_transformer.c (embedding, GELU erf form, rotary embeddings in both
styles, attention over a key/value cache, the sampling distribution).

Run from anywhere:  /usr/bin/python3 tests/gen_fixtures_transformer.py   (Debian's torch 1.13)

Inputs are float32; references are computed by torch in float64 from them. Every
differentiable block stores the gradients of sum(out * g) for a random g. Each array is a
C array named after its case; shapes are fixed in test_transformer.c's comments and here.
"""
import os

import numpy as np
import torch
import torch.nn.functional as F

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "fixtures", "transformer.h")
rng = np.random.default_rng(21)
torch.set_default_dtype(torch.float64)
lines = []


def randn(*shape):
    return rng.standard_normal(shape).astype(np.float32)


def emit(name, a, ctype="float"):
    a = np.asarray(a).ravel()
    if ctype == "float":
        body = ", ".join("%.9g" % float(v) for v in a)
    else:
        body = ", ".join(str(int(v)) for v in a)
    lines.append("static const %s %s[%d] = {%s};" % (ctype, name, len(a), body))


def t64(a, grad=True):
    return torch.tensor(np.asarray(a, dtype=np.float64), requires_grad=grad)


def grads(out, g, *xs):
    (out * t64(g, False)).sum().backward()
    return [x.grad.numpy() for x in xs]


# embedding: weight (10, 4), indices (2, 3) with repeats
w, idx = randn(10, 4), np.array([[1, 7, 1], [0, 9, 7]], dtype=np.int32)
wt = t64(w)
out = F.embedding(torch.tensor(idx, dtype=torch.long), wt)
g = randn(2, 3, 4)
(dw,) = grads(out, g, wt)
emit("emb_w", w), emit("emb_idx", idx, "int32_t"), emit("emb_out", out.detach().numpy()), emit("emb_g", g), emit("emb_dw", dw)

# GELU erf form: x (64), wide range
x = np.concatenate([randn(48) * 3, np.array([-10, -6, -3, -1, -0.5, 0, 0.5, 1, 2, 3, 6, 10, 1e-4, -1e-4, 20, -20], np.float32)])
xt = t64(x)
out = F.gelu(xt)
g = randn(64)
(dx,) = grads(out, g, xt)
emit("gelu_x", x), emit("gelu_out", out.detach().numpy()), emit("gelu_g", g), emit("gelu_dx", dx)

# rotary embeddings: x (B=2, H=3, T=5, D=8), start_pos 3, theta 10000
B, H, T, D, START, THETA = 2, 3, 5, 8, 3, 10000.0
x = randn(B, H, T, D)
inv = 1.0 / (THETA ** (torch.arange(0, D, 2, dtype=torch.float64) / D))
ang = torch.outer(torch.arange(START, START + T, dtype=torch.float64), inv)  # (T, D/2)


def rope_half(x):  # Hugging Face LLaMA / GPT-NeoX
    cos = torch.cat([ang.cos(), ang.cos()], -1)
    sin = torch.cat([ang.sin(), ang.sin()], -1)
    x1, x2 = x[..., : D // 2], x[..., D // 2:]
    return x * cos + torch.cat([-x2, x1], -1) * sin


def rope_interleaved(x):  # Meta's LLaMA: pairs as complex numbers
    xc = torch.view_as_complex(x.reshape(*x.shape[:-1], D // 2, 2))
    return torch.view_as_real(xc * torch.polar(torch.ones_like(ang), ang)).reshape(x.shape)


emit("rope_x", x)
for name, fn in (("half", rope_half), ("inter", rope_interleaved)):
    xt = t64(x)
    out = fn(xt)
    g = randn(B, H, T, D)
    (dx,) = grads(out, g, xt)
    emit("rope_%s_out" % name, out.detach().numpy()), emit("rope_%s_g" % name, g), emit("rope_%s_dx" % name, dx)

# attention over a cache (B=1, H=2, D=4, max_len 8): prefill 3 positions, decode 1, then 2
# more; the last call's output and gradients. Causal: query t at position p + t sees keys <= p + t.
H, D = 2, 4
steps = [3, 1, 2]
qs = [randn(1, H, n, D) for n in steps]
ks = [randn(1, H, n, D) for n in steps]
vs = [randn(1, H, n, D) for n in steps]
for i, n in enumerate(steps):
    emit("att_q%d" % i, qs[i]), emit("att_k%d" % i, ks[i]), emit("att_v%d" % i, vs[i])
p = 0
for i, n in enumerate(steps):
    q, k, v = t64(qs[i]), t64(ks[i]), t64(vs[i])
    kall = torch.cat([t64(np.concatenate(ks[:i], 2) if i else np.zeros((1, H, 0, D)), False), k], 2)
    vall = torch.cat([t64(np.concatenate(vs[:i], 2) if i else np.zeros((1, H, 0, D)), False), v], 2)
    keep = torch.arange(p + n)[None, :] <= torch.arange(p, p + n)[:, None]
    scores = (q @ kall.transpose(-1, -2)) / np.sqrt(D)
    out = torch.softmax(scores.masked_fill(~keep, float("-inf")), -1) @ vall
    emit("att_out%d" % i, out.detach().numpy())
    p += n
g = randn(1, H, steps[-1], D)
dq, dk, dv = grads(out, g, q, k, v)
emit("att_g", g), emit("att_dq", dq), emit("att_dk", dk), emit("att_dv", dv)

# sampling: the distribution after Hugging Face's temperature, top-k and top-p warpers
logits = randn(3, 10) * 2
logits[2, 3] = logits[2, 5] = 4.0  # a tie at the top
SETTINGS = [(1.0, 0, 1.0), (0.7, 4, 1.0), (1.3, 0, 0.6), (0.5, 3, 0.7), (2.0, 2, 0.99)]


def warp(lg, temp, top_k, top_p):
    s = torch.tensor(lg) / temp
    if top_k > 0:
        kth = torch.topk(s, top_k)[0][..., -1, None]
        s = s.masked_fill(s < kth, float("-inf"))
    if top_p < 1.0:
        sl, si = torch.sort(s, descending=False)
        cum = sl.softmax(-1).cumsum(-1)
        remove = cum <= (1 - top_p)
        remove[..., -1:] = False
        s = s.masked_fill(remove.scatter(1, si, remove), float("-inf"))
    return torch.softmax(s, -1).numpy()


emit("samp_logits", logits)
for i, (temp, k, tp) in enumerate(SETTINGS):
    emit("samp_probs%d" % i, warp(logits.astype(np.float64), temp, k, tp))
lines.append("static const struct { double temperature; int top_k; double top_p; } samp_settings[%d] = {%s};" % (
    len(SETTINGS), ", ".join("{%r, %d, %r}" % s for s in SETTINGS)))

with open(OUT, "w") as f:
    f.write("/* transformer.h — generated by tests/gen_fixtures_transformer.py (torch %s); do not edit. */\n"
            % torch.__version__)
    f.write("#include <stdint.h>\n")
    f.write("\n".join(lines) + "\n")
print("wrote", OUT)
