/* ops_rnn.c — ONNX RNN, GRU and LSTM, unrolled over the sequence into tg matmuls and
 * elementwise ops (one step per time position, each direction on its own). Only the
 * default activations (Sigmoid, Tanh) are supported; anything else is an error naming it. */
#include <stdlib.h>
#include <string.h>

#include "onnx/onnx_int.h"
#include "runtime/helpers.h"

#define IN(i) (n->nin > (i) ? n->in[i] : NULL)
#define MAX_STEPS 4096

typedef enum { K_RNN, K_GRU, K_LSTM } rnn_kind;

typedef struct rnn {
  rnn_kind kind;
  int gates;          /* 1, 3, 4 */
  int64_t hidden;
  bool lbr;           /* GRU linear_before_reset */
  double clip;        /* 0: none */
  tg_tensor *w, *r, *wb, *rb, *p; /* of one direction: W (g*h, in), R (g*h, h), biases (g*h), peepholes (3h) */
} rnn;

/* Gate k (of g) of a (..., g*h) tensor. */
static tg_tensor *gate(tg_tensor *t, int k, int64_t h) { return tg_slice(t, -1, k * h, (k + 1) * h, 1); }

static tg_tensor *clipped(const rnn *c, tg_tensor *t) { return c->clip > 0 ? tg_clip(t, -c->clip, c->clip) : t; }

/* One step: x (B, in), h and cell (B, hidden); new h (and *cell for LSTM). */
static tg_tensor *step(const rnn *c, tg_tensor *x, tg_tensor *h, tg_tensor **cell) {
  int64_t H = c->hidden;
  tg_tensor *xw = tg_add(tg_matmul(x, tg_transpose(c->w, 0, 1)), c->wb);
  tg_tensor *rt = tg_transpose(c->r, 0, 1);
  if (c->kind == K_RNN) return tg_tanh(clipped(c, tg_add(xw, tg_add(tg_matmul(h, rt), c->rb))));
  if (c->kind == K_GRU) {
    tg_tensor *hr = tg_matmul(h, tg_slice(rt, 1, 0, 2 * H, 1));
    tg_tensor *z = tg_sigmoid(clipped(c, tg_add(gate(xw, 0, H), tg_add(gate(hr, 0, H), gate(c->rb, 0, H)))));
    tg_tensor *r = tg_sigmoid(clipped(c, tg_add(gate(xw, 1, H), tg_add(gate(hr, 1, H), gate(c->rb, 1, H)))));
    tg_tensor *rh = tg_slice(rt, 1, 2 * H, 3 * H, 1), *rbh = gate(c->rb, 2, H), *pre;
    if (c->lbr) pre = tg_mul(r, tg_add(tg_matmul(h, rh), rbh));
    else pre = tg_add(tg_matmul(tg_mul(r, h), rh), rbh);
    tg_tensor *hh = tg_tanh(clipped(c, tg_add(gate(xw, 2, H), pre)));
    return tg_add(tg_mul(tg_rsub_s(1.0, z), hh), tg_mul(z, h));
  }
  tg_tensor *g = tg_add(xw, tg_add(tg_matmul(h, rt), c->rb)); /* LSTM: gates i, o, f, c */
  tg_tensor *gi = gate(g, 0, H), *go = gate(g, 1, H), *gf = gate(g, 2, H), *gc = gate(g, 3, H);
  if (c->p) gi = tg_add(gi, tg_mul(gate(c->p, 0, H), *cell)), gf = tg_add(gf, tg_mul(gate(c->p, 2, H), *cell));
  tg_tensor *i = tg_sigmoid(clipped(c, gi)), *f = tg_sigmoid(clipped(c, gf)), *cc = tg_tanh(clipped(c, gc));
  *cell = tg_add(tg_mul(f, *cell), tg_mul(i, cc));
  if (c->p) go = tg_add(go, tg_mul(gate(c->p, 1, H), *cell));
  return tg_mul(tg_sigmoid(clipped(c, go)), tg_tanh(*cell));
}

/* The default activations are the only ones: each given name must be the default. */
static int check_activations(ox_node *n, rnn_kind k) {
  const Onnx__AttributeProto *a = ox_attr(n, "activations");
  static const char *dflt[3][3] = {{"Tanh"}, {"Sigmoid", "Tanh"}, {"Sigmoid", "Tanh", "Tanh"}};
  int per = k == K_RNN ? 1 : k == K_GRU ? 2 : 3;
  for (size_t i = 0; a && i < a->n_strings; i++) {
    const char *want = dflt[k][i % (size_t)per];
    if (a->strings[i].len != strlen(want) || memcmp(a->strings[i].data, want, a->strings[i].len))
      return ox_fail(n, TG_ERR_ARG, "activation %.*s is not supported (only the defaults)", (int)a->strings[i].len,
                     (const char *)a->strings[i].data);
  }
  if (ox_attr(n, "activation_alpha") || ox_attr(n, "activation_beta"))
    return ox_fail(n, TG_ERR_ARG, "activation_alpha/beta are not supported");
  return 0;
}

/* Direction d's slices of the weights. */
static void direction(rnn *c, ox_node *n, int d, int64_t gh) {
  c->w = tg_squeeze(tg_slice(IN(1), 0, d, d + 1, 1), 0);
  c->r = tg_squeeze(tg_slice(IN(2), 0, d, d + 1, 1), 0);
  if (IN(3)) {
    tg_tensor *b = tg_squeeze(tg_slice(IN(3), 0, d, d + 1, 1), 0);
    c->wb = tg_slice(b, 0, 0, gh, 1), c->rb = tg_slice(b, 0, gh, 2 * gh, 1);
  } else {
    c->wb = tg_zeros(&gh, 1, tg_get_dtype(IN(0))), c->rb = c->wb;
  }
  tg_tensor *p = c->kind == K_LSTM ? IN(7) : NULL;
  c->p = p ? tg_squeeze(tg_slice(p, 0, d, d + 1, 1), 0) : NULL;
}

/* The initial state of direction d (B, H) from input i, or zeros. */
static tg_tensor *initial(ox_node *n, int i, int d, int64_t batch, int64_t hidden, bool batch_first) {
  tg_tensor *t = IN(i);
  int64_t s[2] = {batch, hidden};
  if (!t) return tg_zeros(s, 2, tg_get_dtype(IN(0)));
  if (batch_first) t = tg_transpose(t, 0, 1);
  return tg_squeeze(tg_slice(t, 0, d, d + 1, 1), 0);
}

static int op_rnn(ox_node *n) {
  const char *op = n->np->op_type;
  rnn c = {.kind = !strcmp(op, "RNN") ? K_RNN : !strcmp(op, "GRU") ? K_GRU : K_LSTM};
  c.gates = c.kind == K_RNN ? 1 : c.kind == K_GRU ? 3 : 4;
  c.hidden = ox_attr_i(n, "hidden_size", 0), c.lbr = ox_attr_i(n, "linear_before_reset", 0) != 0;
  c.clip = ox_attr_f(n, "clip", 0.0);
  bool bf = ox_attr_i(n, "layout", 0) != 0;
  const char *dir = ox_attr_s(n, "direction", "forward");
  int ndir = !strcmp(dir, "bidirectional") ? 2 : 1;
  bool reverse = !strcmp(dir, "reverse");
  if (check_activations(n, c.kind)) return -1;
  if (ox_attr_i(n, "input_forget", 0)) return ox_fail(n, TG_ERR_ARG, "input_forget is not supported");
  if (ndir == 1 && !reverse && strcmp(dir, "forward")) return ox_fail(n, TG_ERR_ARG, "direction '%s' is not supported", dir);
  tg_tensor *x = IN(0);
  if (!x || !IN(1) || !IN(2) || tg_ndim(x) != 3 || c.hidden < 1) return ox_fail(n, TG_ERR_ARG, "needs X (3-D), W, R, hidden_size");
  if (bf) x = tg_transpose(x, 0, 1);
  int64_t T = tg_dim(x, 0), B = tg_dim(x, 1);
  if (T > MAX_STEPS) return ox_fail(n, TG_ERR_ARG, "%lld steps (at most %d unrolled)", (long long)T, MAX_STEPS);
  if (IN(4)) { /* sequence_lens: only all-full sequences */
    int64_t lens[1024];
    int k = ox_host_ints(IN(4), lens, 1024);
    for (int i = 0; i < k; i++)
      if (lens[i] != T) return ox_fail(n, TG_ERR_ARG, "sequence_lens shorter than the sequence are not supported");
    if (k < 0) return -1;
  }
  tg_tensor *ys[2], *hs[2], *cs[2];
  for (int d = 0; d < ndir; d++) {
    direction(&c, n, d, c.gates * c.hidden);
    tg_tensor *h = initial(n, 5, d, B, c.hidden, bf), *cell = initial(n, 6, d, B, c.hidden, bf);
    tg_tensor **steps = calloc((size_t)T + 1, sizeof *steps);
    if (!steps) return tg_set_error(TG_ERR_NOMEM, "out of memory");
    bool back = reverse || d == 1;
    for (int64_t s = 0; s < T; s++) {
      int64_t t = back ? T - 1 - s : s;
      h = step(&c, tg_squeeze(tg_slice(x, 0, t, t + 1, 1), 0), h, &cell);
      steps[t] = h;
    }
    ys[d] = tg_stack(steps, (int)T, 0); /* (T, B, H) */
    hs[d] = h, cs[d] = cell;
    free(steps);
  }
  tg_tensor *y = tg_stack(ys, ndir, 1), *yh = tg_stack(hs, ndir, 0), *yc = tg_stack(cs, ndir, 0);
  if (bf) { /* Y (B, T, D, H); states (B, D, H) */
    int perm[4] = {2, 0, 1, 3};
    y = tg_permute(y, perm, 4), yh = tg_transpose(yh, 0, 1), yc = tg_transpose(yc, 0, 1);
  }
  n->out[1] = yh, n->out[2] = c.kind == K_LSTM ? yc : NULL;
  return ox_set(n, 0, y);
}

#define RNN_ATTRS "activation_alpha,activation_beta,activations,clip,direction,hidden_size,layout"
const ox_op ox_ops_rnn[] = {
    {"RNN", 7, op_rnn, RNN_ATTRS},
    {"GRU", 7, op_rnn, RNN_ATTRS ",linear_before_reset"},
    {"LSTM", 7, op_rnn, RNN_ATTRS ",input_forget"},
    {NULL, 0, NULL, NULL},
};
