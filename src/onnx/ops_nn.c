/* ops_nn.c — ONNX convolution, pooling, normalization, dropout and loss ops on tg's nn
 * functions. ONNX's explicit or automatic (SAME_*) pads may differ before and after; those
 * become a tg_pad of the input (or a crop of a transposed convolution's output). */
#include <math.h>
#include <string.h>

#include "onnx/onnx_int.h"
#include "runtime/helpers.h"

#define IN(i) (n->nin > (i) ? n->in[i] : NULL)
#define MAXD OX_MAX_DIMS

/* The window geometry of a conv or pool node over nsp spatial axes. */
typedef struct window {
  int nsp;
  int k[MAXD], stride[MAXD], dil[MAXD];
  int64_t pb[MAXD], pe[MAXD]; /* pads before / after */
} window;

/* Read kernel_shape (or the weight's), strides, dilations, pads and auto_pad. */
static int window_read(ox_node *n, tg_tensor *x, tg_tensor *w, window *g) {
  int64_t v[2 * MAXD], xs[MAXD];
  int nd = tg_shape(x, xs, MAXD);
  g->nsp = nd - 2;
  if (g->nsp < 1 || g->nsp > 3) return ox_fail(n, TG_ERR_ARG, "input rank %d (needs 1 to 3 spatial axes)", nd);
  int c = ox_attr_ints(n, "kernel_shape", v, MAXD);
  if (c < -1 || (c >= 0 && c != g->nsp)) return ox_fail(n, TG_ERR_ARG, "kernel_shape does not match the input");
  for (int i = 0; i < g->nsp; i++) g->k[i] = c >= 0 ? (int)v[i] : w ? (int)tg_dim(w, 2 + i) : 1;
  c = ox_attr_ints(n, "strides", v, MAXD);
  for (int i = 0; i < g->nsp; i++) g->stride[i] = c > i ? (int)v[i] : 1;
  c = ox_attr_ints(n, "dilations", v, MAXD);
  for (int i = 0; i < g->nsp; i++) g->dil[i] = c > i ? (int)v[i] : 1;
  c = ox_attr_ints(n, "pads", v, 2 * MAXD);
  for (int i = 0; i < g->nsp; i++) g->pb[i] = c == 2 * g->nsp ? v[i] : 0, g->pe[i] = c == 2 * g->nsp ? v[g->nsp + i] : 0;
  for (int i = 0; i < g->nsp; i++)
    if (g->k[i] < 1 || g->stride[i] < 1 || g->dil[i] < 1 || g->pb[i] < 0 || g->pe[i] < 0)
      return ox_fail(n, TG_ERR_ARG, "bad kernel, stride, dilation or pad on axis %d", i);
  const char *ap = ox_attr_s(n, "auto_pad", "NOTSET");
  if (!strcmp(ap, "NOTSET")) return 0;
  bool valid = !strcmp(ap, "VALID"), upper = !strcmp(ap, "SAME_UPPER");
  if (!valid && !upper && strcmp(ap, "SAME_LOWER")) return ox_fail(n, TG_ERR_ARG, "auto_pad '%s' is not supported", ap);
  for (int i = 0; i < g->nsp; i++) {
    int64_t in = xs[2 + i], out = (in + g->stride[i] - 1) / g->stride[i];
    int64_t total = (out - 1) * g->stride[i] + (int64_t)(g->k[i] - 1) * g->dil[i] + 1 - in;
    if (valid || total < 0) total = 0;
    g->pb[i] = upper ? total / 2 : total - total / 2;
    g->pe[i] = total - g->pb[i];
  }
  return 0;
}

static bool symmetric(const window *g) {
  for (int i = 0; i < g->nsp; i++)
    if (g->pb[i] != g->pe[i]) return false;
  return true;
}

/* x padded explicitly on its spatial axes with value (for asymmetric pads). */
static tg_tensor *pad_spatial(tg_tensor *x, const window *g, double value) {
  int64_t b[MAXD] = {0}, a[MAXD] = {0};
  for (int i = 0; i < g->nsp; i++) b[2 + i] = g->pb[i], a[2 + i] = g->pe[i];
  return tg_pad(x, b, a, value);
}

/* ---------------------------------------------------------------- conv */

/* conv of x and w (bias b or NULL) with the node's window attributes. */
static tg_tensor *conv_run(ox_node *n, tg_tensor *x, tg_tensor *w, tg_tensor *b) {
  window g;
  if (!x || !w || window_read(n, x, w, &g)) return NULL;
  int pad[MAXD] = {0};
  if (symmetric(&g))
    for (int i = 0; i < g.nsp; i++) pad[i] = (int)g.pb[i];
  else x = pad_spatial(x, &g, 0.0);
  return tg_conv(x, w, b, g.nsp, g.stride, pad, g.dil, (int)ox_attr_i(n, "group", 1));
}

static int op_conv(ox_node *n) { return ox_set(n, 0, conv_run(n, IN(0), IN(1), IN(2))); }

/* w's zero point or scale: a scalar, or one per output channel (axis 0). */
static tg_tensor *per_out(tg_tensor *p, int nd) {
  if (!p || tg_ndim(p) == 0 || tg_numel(p) == 1) return p ? tg_reshape(p, NULL, 0) : NULL;
  int64_t s[MAXD];
  for (int i = 0; i < nd; i++) s[i] = i == 0 ? -1 : 1;
  return tg_reshape(p, s, nd);
}

/* ConvInteger: (x - x_zp) conv (w - w_zp), accumulated exactly in float64, as int32. */
static int op_conv_integer(ox_node *n) {
  tg_tensor *x = tg_cast(IN(0), TG_FLOAT64), *w = tg_cast(IN(1), TG_FLOAT64);
  if (IN(2)) x = tg_sub(x, tg_cast(IN(2), TG_FLOAT64));
  if (IN(3)) w = tg_sub(w, tg_cast(per_out(IN(3), tg_ndim(IN(1))), TG_FLOAT64));
  return ox_set(n, 0, tg_cast(tg_round(conv_run(n, x, w, NULL)), TG_INT32));
}

/* QLinearConv: dequantize, convolve (+ int32 bias at scale x_scale * w_scale), requantize. */
static int op_qlinear_conv(ox_node *n) {
  int wd = tg_ndim(IN(3));
  tg_tensor *x = tg_mul(tg_sub(tg_cast(IN(0), TG_FLOAT32), tg_cast(IN(2), TG_FLOAT32)), IN(1));
  tg_tensor *ws = per_out(IN(4), wd);
  tg_tensor *w = tg_mul(tg_sub(tg_cast(IN(3), TG_FLOAT32), tg_cast(per_out(IN(5), wd), TG_FLOAT32)), ws);
  tg_tensor *b = IN(8) ? tg_mul(tg_mul(tg_cast(IN(8), TG_FLOAT32), IN(1)), tg_reshape(IN(4), (int64_t[]){-1}, 1)) : NULL;
  if (b && tg_numel(IN(4)) == 1) b = tg_mul(tg_mul(tg_cast(IN(8), TG_FLOAT32), IN(1)), tg_reshape(IN(4), NULL, 0));
  tg_tensor *y = conv_run(n, x, w, b);
  return ox_set(n, 0, ox_quantize(y, IN(6), IN(7), IN(7) ? tg_get_dtype(IN(7)) : TG_UINT8));
}

/* ConvTranspose: the full output (no pads), then cropped by the pads and extended by
 * output_padding; pads come from output_shape or auto_pad when given. */
static int op_conv_transpose(ox_node *n) {
  tg_tensor *x = IN(0), *w = IN(1), *b = IN(2);
  window g;
  if (!x || !w) return -1;
  const char *ap = ox_attr_s(n, "auto_pad", "NOTSET"); /* SAME_*: pads from the output size, below */
  if (window_read(n, x, w, &g)) return -1;
  int64_t op[MAXD] = {0}, os[MAXD], v[MAXD];
  int c = ox_attr_ints(n, "output_padding", v, MAXD);
  for (int i = 0; i < g.nsp; i++) op[i] = c > i ? v[i] : 0;
  int nos = ox_attr_ints(n, "output_shape", os, MAXD);
  if (nos >= 0 && nos != g.nsp && nos != g.nsp + 2)
    return ox_fail(n, TG_ERR_ARG, "output_shape has %d values for %d spatial axes", nos, g.nsp);
  bool same = !strncmp(ap, "SAME", 4), upper = !strcmp(ap, "SAME_UPPER");
  for (int i = 0; i < g.nsp && (nos >= 1 || same); i++) {
    int64_t in = tg_dim(x, 2 + i), full = (in - 1) * g.stride[i] + (int64_t)(g.k[i] - 1) * g.dil[i] + 1 + op[i];
    int64_t want = nos >= 1 ? os[nos - g.nsp + i] : in * g.stride[i], total = full - want;
    int64_t half = total >= 0 ? total / 2 : -((-total + 1) / 2); /* floor, as the reference's // */
    g.pb[i] = upper ? half : total - half, g.pe[i] = total - g.pb[i];
  }
  int zero[MAXD] = {0};
  tg_tensor *y = tg_conv_transpose(x, w, NULL, g.nsp, g.stride, zero, zero, g.dil, (int)ox_attr_i(n, "group", 1));
  int64_t bb[MAXD] = {0}, aa[MAXD] = {0};
  for (int i = 0; i < g.nsp; i++) bb[2 + i] = -g.pb[i], aa[2 + i] = op[i] - g.pe[i];
  y = tg_pad_mode(y, bb, aa, TG_PAD_CONSTANT, 0.0);
  if (b) {
    int64_t bs[MAXD] = {1, tg_numel(b)};
    for (int i = 0; i < g.nsp; i++) bs[2 + i] = 1;
    y = tg_add(y, tg_reshape(b, bs, 2 + g.nsp));
  }
  return ox_set(n, 0, y);
}

/* ---------------------------------------------------------------- pooling */

/* Pads beyond half the kernel (tg's limit) become an explicit pad of x: -inf for max; for
 * avg, a sum pool divided by the count of real taps (or the kernel size with
 * count_include_pad). */
static int op_pool(ox_node *n) {
  tg_tensor *x = IN(0);
  window g;
  if (!x || window_read(n, x, NULL, &g)) return -1;
  bool avg = !strcmp(n->np->op_type, "AveragePool"), wide = false;
  bool include = ox_attr_i(n, "count_include_pad", 0) != 0;
  int pb[MAXD], pe[MAXD];
  for (int i = 0; i < g.nsp; i++) wide |= 2 * g.pb[i] > g.k[i] || 2 * g.pe[i] > g.k[i];
  tg_dtype dt = tg_get_dtype(x);
  if (!tg_dtype_is_float(dt)) x = tg_cast(x, TG_FLOAT64);
  tg_tensor *ones = NULL;
  if (wide) {
    if (avg && !include) ones = pad_spatial(tg_ones_like(x), &g, 0.0);
    x = pad_spatial(x, &g, avg ? 0.0 : -INFINITY);
  }
  for (int i = 0; i < g.nsp; i++) pb[i] = wide ? 0 : (int)g.pb[i], pe[i] = wide ? 0 : (int)g.pe[i];
  tg_pool_opts o = {.stride = g.stride, .padding = pb, .padding_after = pe, .dilation = g.dil,
                    .ceil_mode = ox_attr_i(n, "ceil_mode", 0) != 0, .exclude_pad = !include};
  if (avg && ones) {
    o.divisor = 1;
    return ox_set(n, 0, tg_div(tg_avg_pool(x, g.nsp, g.k, &o), tg_avg_pool(ones, g.nsp, g.k, &o)));
  }
  if (avg) return ox_set(n, 0, tg_avg_pool(x, g.nsp, g.k, &o));
  bool colmajor = ox_attr_i(n, "storage_order", 0) != 0;
  if (colmajor && g.nsp != 2) return ox_fail(n, TG_ERR_ARG, "storage_order 1 needs 2 spatial axes");
  if (wide && n->nout > 1) return ox_fail(n, TG_ERR_ARG, "Indices with pads beyond half the kernel are not supported");
  tg_tensor *idx = NULL;
  tg_tensor *y = tg_max_pool(x, g.nsp, g.k, &o, n->nout > 1 ? &idx : NULL);
  if (idx) { /* tg: position within the channel; ONNX: within the whole tensor */
    int64_t spatial = 1, N = tg_dim(x, 0), C = tg_dim(x, 1), s[MAXD] = {N, C};
    for (int i = 0; i < g.nsp; i++) spatial *= tg_dim(x, 2 + i), s[2 + i] = 1;
    tg_tensor *base = tg_reshape(tg_mul_s(tg_arange(0, (double)(N * C), 1, TG_INT64), (double)spatial), s, 2 + g.nsp);
    if (colmajor) { /* row-major h * W + w becomes w * H + h */
      int64_t H = tg_dim(x, 2), W = tg_dim(x, 3);
      tg_tensor *h = tg_floordiv(idx, tg_full_like(idx, (double)W)), *w = tg_sub(idx, tg_mul_s(h, (double)W));
      idx = tg_add(tg_mul_s(w, (double)H), h);
    }
    n->out[1] = tg_add(idx, base);
  }
  return ox_set(n, 0, tg_get_dtype(y) == dt ? y : tg_cast(y, dt));
}

/* v (C) reshaped to broadcast over axis 1 of a rank-nd tensor. */
static tg_tensor *per_channel(tg_tensor *v, int nd) {
  int64_t s[MAXD];
  for (int i = 0; i < nd; i++) s[i] = i == 1 ? -1 : 1;
  return tg_reshape(v, s, nd);
}

/* LpPool: (sum over the window of |x|^p)^(1/p), a sum pool of |x|^p. */
static int op_lp_pool(ox_node *n) {
  tg_tensor *x = IN(0);
  window g;
  if (!x || window_read(n, x, NULL, &g)) return -1;
  double p = (double)ox_attr_i(n, "p", 2);
  if (p <= 0) return ox_fail(n, TG_ERR_ARG, "p must be positive");
  int pb[MAXD], pe[MAXD];
  bool wide = false;
  for (int i = 0; i < g.nsp; i++) wide |= 2 * g.pb[i] > g.k[i] || 2 * g.pe[i] > g.k[i];
  tg_tensor *xp = tg_pow_s(tg_abs(x), p);
  if (wide) xp = pad_spatial(xp, &g, 0.0);
  for (int i = 0; i < g.nsp; i++) pb[i] = wide ? 0 : (int)g.pb[i], pe[i] = wide ? 0 : (int)g.pe[i];
  tg_pool_opts o = {.stride = g.stride, .padding = pb, .padding_after = pe, .dilation = g.dil,
                    .ceil_mode = ox_attr_i(n, "ceil_mode", 0) != 0, .divisor = 1};
  return ox_set(n, 0, tg_pow_s(tg_avg_pool(xp, g.nsp, g.k, &o), 1.0 / p));
}

/* GroupNormalization: statistics per (sample, group); scale and bias per group (opset 18) or
 * per channel (opset 21). */
static int op_groupnorm(ox_node *n) {
  tg_tensor *x = IN(0), *sc = IN(1), *b = IN(2);
  int64_t G = ox_attr_i(n, "num_groups", 0), s[MAXD];
  int nd = tg_shape(x, s, MAXD), ax = 2;
  if (nd < 2 || G < 1 || s[1] % G || !sc || !b) return ox_fail(n, TG_ERR_ARG, "num_groups must divide the channels");
  tg_tensor *xg = tg_reshape(x, (int64_t[]){s[0], G, -1}, 3);
  tg_tensor *m = tg_mean(xg, &ax, 1, true), *v = tg_var(xg, &ax, 1, true, 0.0);
  tg_tensor *y = tg_mul(tg_sub(xg, m), tg_rsqrt(tg_add_s(v, ox_attr_f(n, "epsilon", 1e-5))));
  if (tg_numel(sc) == G && G != s[1]) {
    y = tg_add(tg_mul(y, tg_reshape(sc, (int64_t[]){1, G, 1}, 3)), tg_reshape(b, (int64_t[]){1, G, 1}, 3));
    return ox_set(n, 0, tg_reshape(y, s, nd));
  }
  y = tg_reshape(y, s, nd);
  return ox_set(n, 0, tg_add(tg_mul(y, per_channel(sc, nd)), per_channel(b, nd)));
}

static int op_global_pool(ox_node *n) {
  tg_tensor *x = IN(0);
  int nd = tg_ndim(x), axes[MAXD];
  if (nd < 3) return ox_fail(n, TG_ERR_ARG, "input rank %d (needs spatial axes)", nd);
  for (int i = 2; i < nd; i++) axes[i - 2] = i;
  bool avg = !strcmp(n->np->op_type, "GlobalAveragePool");
  return ox_set(n, 0, avg ? tg_mean(x, axes, nd - 2, true) : tg_max(x, axes, nd - 2, true));
}

/* ---------------------------------------------------------------- normalization */


static int op_batchnorm(ox_node *n) {
  tg_tensor *x = IN(0), *sc = IN(1), *b = IN(2), *m = IN(3), *v = IN(4);
  double eps = ox_attr_f(n, "epsilon", 1e-5), mom = ox_attr_f(n, "momentum", 0.9);
  if (!x || !sc || !b || !m || !v) return ox_fail(n, TG_ERR_ARG, "missing input");
  if (!ox_attr_i(n, "spatial", 1)) return ox_fail(n, TG_ERR_ARG, "spatial=0 is not supported");
  int nd = tg_ndim(x), axes[MAXD], na = 0;
  for (int i = 0; i < nd; i++)
    if (i != 1) axes[na++] = i;
  if (ox_attr_i(n, "training_mode", 0)) { /* batch statistics; running ones updated with momentum */
    tg_tensor *bm = tg_mean(x, axes, na, false), *bv = tg_var(x, axes, na, false, 0.0);
    m = bm, v = bv;
    n->out[1] = tg_add(tg_mul_s(IN(3), mom), tg_mul_s(bm, 1 - mom));
    n->out[2] = tg_add(tg_mul_s(IN(4), mom), tg_mul_s(bv, 1 - mom));
  }
  tg_tensor *inv = tg_rsqrt(tg_add_s(v, eps));
  tg_tensor *y = tg_add(tg_mul(tg_mul(tg_sub(x, per_channel(m, nd)), per_channel(inv, nd)), per_channel(sc, nd)),
                        per_channel(b, nd));
  return ox_set(n, 0, y);
}

static int op_instancenorm(ox_node *n) {
  tg_tensor *x = IN(0), *sc = IN(1), *b = IN(2);
  int nd = tg_ndim(x), axes[MAXD];
  for (int i = 2; i < nd; i++) axes[i - 2] = i;
  tg_tensor *m = tg_mean(x, axes, nd - 2, true), *v = tg_var(x, axes, nd - 2, true, 0.0);
  tg_tensor *y = tg_mul(tg_sub(x, m), tg_rsqrt(tg_add_s(v, ox_attr_f(n, "epsilon", 1e-5))));
  return ox_set(n, 0, tg_add(tg_mul(y, per_channel(sc, nd)), per_channel(b, nd)));
}

/* LayerNormalization over axes [axis, rank); outputs Y, Mean, InvStdDev. */
static int op_layernorm(ox_node *n) {
  tg_tensor *x = IN(0), *sc = IN(1), *b = IN(2);
  int nd = tg_ndim(x), axes[MAXD];
  int axis = ox_axis(n, ox_attr_i(n, "axis", -1), nd);
  if (axis < 0) return -1;
  for (int i = axis; i < nd; i++) axes[i - axis] = i;
  tg_tensor *xf = tg_get_dtype(x) == TG_FLOAT64 ? x : tg_cast(x, TG_FLOAT32);
  tg_tensor *m = tg_mean(xf, axes, nd - axis, true), *v = tg_var(xf, axes, nd - axis, true, 0.0);
  tg_tensor *inv = tg_rsqrt(tg_add_s(v, ox_attr_f(n, "epsilon", 1e-5)));
  tg_tensor *y = tg_cast(tg_mul(tg_sub(xf, m), inv), tg_get_dtype(x));
  y = tg_mul(y, sc);
  if (b) y = tg_add(y, b);
  n->out[1] = m, n->out[2] = inv;
  return ox_set(n, 0, y);
}

/* LRN: x / (bias + alpha/size * sum of squares over a channel window)^beta. */
static int op_lrn(ox_node *n) {
  tg_tensor *x = IN(0);
  int64_t size = ox_attr_i(n, "size", 0), C = tg_dim(x, 1);
  double alpha = ox_attr_f(n, "alpha", 1e-4), beta = ox_attr_f(n, "beta", 0.75), bias = ox_attr_f(n, "bias", 1.0);
  int nd = tg_ndim(x);
  if (size < 1 || size > 2 * C + 1 || nd < 2) return ox_fail(n, TG_ERR_ARG, "size must be 1 to 2 C + 1 and the input at least 2-D");
  int64_t b[MAXD] = {0}, a[MAXD] = {0};
  b[1] = (size - 1) / 2, a[1] = size - 1 - b[1];
  tg_tensor *sq = tg_pad(tg_mul(x, x), b, a, 0.0), *sum = NULL;
  for (int64_t i = 0; i < size; i++) {
    tg_tensor *s = tg_slice(sq, 1, i, i + C, 1);
    sum = sum ? tg_add(sum, s) : s;
  }
  return ox_set(n, 0, tg_div(x, tg_pow_s(tg_add_s(tg_mul_s(sum, alpha / (double)size), bias), beta)));
}

static int op_mvn(ox_node *n) {
  tg_tensor *x = IN(0);
  int64_t a[MAXD] = {0, 2, 3};
  int axes[MAXD], na = ox_attr_ints(n, "axes", a, MAXD);
  if (na < -1) return -1;
  if (na == -1) na = 3;
  for (int i = 0; i < na; i++)
    if ((axes[i] = ox_axis(n, a[i], tg_ndim(x))) < 0) return -1;
  tg_tensor *m = tg_mean(x, axes, na, true), *v = tg_var(x, axes, na, true, 0.0);
  return ox_set(n, 0, tg_div(tg_sub(x, m), tg_add_s(tg_sqrt(v), 1e-9)));
}

static int op_lpnorm(ox_node *n) {
  tg_tensor *x = IN(0);
  int axis = ox_axis(n, ox_attr_i(n, "axis", -1), tg_ndim(x));
  int64_t p = ox_attr_i(n, "p", 2);
  if (axis < 0) return -1;
  if (p != 1 && p != 2) return ox_fail(n, TG_ERR_ARG, "p %lld is not 1 or 2", (long long)p);
  tg_tensor *norm = p == 1 ? tg_sum(tg_abs(x), &axis, 1, true) : tg_sqrt(tg_sum(tg_mul(x, x), &axis, 1, true));
  return ox_set(n, 0, tg_div(x, norm));
}

/* Dropout at inference: the input, and an all-true mask. Training with a ratio is random. */
static int op_dropout(ox_node *n) {
  tg_tensor *x = IN(0);
  int64_t train = 0;
  double ratio = ox_attr_f(n, "ratio", 0.5);
  if (IN(2) && ox_host_ints(IN(2), &train, 1) < 0) return -1;
  if (IN(1) && ox_host_doubles(IN(1), &ratio, 1) < 0) return -1;
  if (train && ratio > 0) return ox_fail(n, TG_ERR_ARG, "training_mode with a ratio > 0 (random) is not supported");
  n->out[1] = tg_ones(NULL, 0, TG_BOOL);
  if (n->out[1] && tg_ndim(x) >= 0) {
    int64_t s[MAXD];
    int nd = tg_shape(x, s, MAXD);
    n->out[1] = tg_ones(s, nd, TG_BOOL);
  }
  return ox_set(n, 0, x);
}

/* ---------------------------------------------------------------- losses */

/* NegativeLogLikelihoodLoss on log-probabilities lp (N, C, d...), labels (N, d...). */
static tg_tensor *nll(ox_node *n, tg_tensor *lp, tg_tensor *labels, tg_tensor *weight) {
  int64_t ignore = ox_attr_i(n, "ignore_index", INT64_MIN);
  bool has_ignore = ox_attr(n, "ignore_index") != NULL;
  const char *red = ox_attr_s(n, "reduction", "mean");
  tg_tensor *lab = tg_cast(labels, TG_INT64);
  tg_tensor *keep = has_ignore ? tg_ne(lab, tg_full_like(lab, (double)ignore)) : tg_ones_like(tg_cast(lab, TG_BOOL));
  tg_tensor *safe = tg_where(keep, lab, tg_zeros_like(lab));
  tg_tensor *picked = tg_squeeze(tg_gather(lp, 1, tg_unsqueeze(safe, 1)), 1);
  tg_tensor *w = weight ? tg_index_select(weight, 0, safe) : tg_ones_like(picked);
  w = tg_where(keep, w, tg_zeros_like(w));
  tg_tensor *loss = tg_neg(tg_mul(picked, w));
  if (!strcmp(red, "none")) return loss;
  if (!strcmp(red, "sum")) return tg_sum(loss, NULL, 0, false);
  if (!strcmp(red, "mean")) return tg_div(tg_sum(loss, NULL, 0, false), tg_sum(w, NULL, 0, false));
  ox_fail(n, TG_ERR_ARG, "reduction '%s' is not supported", red);
  return NULL;
}

static int op_nll(ox_node *n) { return ox_set(n, 0, nll(n, IN(0), IN(1), IN(2))); }

static int op_sce(ox_node *n) {
  tg_tensor *lp = tg_log_softmax(IN(0), 1);
  n->out[1] = lp;
  return ox_set(n, 0, nll(n, lp, IN(1), IN(2)));
}

/* ---------------------------------------------------------------- the table */

#define CONV_ATTRS "auto_pad,dilations,group,kernel_shape,pads,strides"
#define POOL_ATTRS "auto_pad,ceil_mode,dilations,kernel_shape,pads,strides"
const ox_op ox_ops_nn[] = {
    {"Conv", 1, op_conv, CONV_ATTRS},
    {"ConvTranspose", 1, op_conv_transpose, CONV_ATTRS ",output_padding,output_shape"},
    {"MaxPool", 1, op_pool, POOL_ATTRS ",storage_order"},
    {"AveragePool", 1, op_pool, POOL_ATTRS ",count_include_pad"},
    {"ConvInteger", 10, op_conv_integer, CONV_ATTRS},
    {"QLinearConv", 10, op_qlinear_conv, CONV_ATTRS},
    {"LpPool", 2, op_lp_pool, POOL_ATTRS ",p"},
    {"GroupNormalization", 18, op_groupnorm, "epsilon,num_groups,stash_type"},
    {"GlobalAveragePool", 1, op_global_pool, ""},
    {"GlobalMaxPool", 1, op_global_pool, ""},
    {"BatchNormalization", 6, op_batchnorm, "epsilon,is_test,momentum,spatial,training_mode"},
    {"InstanceNormalization", 6, op_instancenorm, "epsilon"},
    {"LayerNormalization", 17, op_layernorm, "axis,epsilon,stash_type"},
    {"LRN", 1, op_lrn, "alpha,beta,bias,size"},
    {"MeanVarianceNormalization", 9, op_mvn, "axes"},
    {"LpNormalization", 1, op_lpnorm, "axis,p"},
    {"Dropout", 1, op_dropout, "ratio,seed"},
    {"NegativeLogLikelihoodLoss", 12, op_nll, "ignore_index,reduction"},
    {"SoftmaxCrossEntropyLoss", 12, op_sce, "ignore_index,reduction"},
    {NULL, 0, NULL, NULL},
};
