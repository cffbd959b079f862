/* ops_extra.c — the long tail of ONNX ops on tg's tensor functions: window functions,
 * linear quantization (QuantizeLinear, DequantizeLinear, DynamicQuantizeLinear,
 * MatMulInteger, QLinearMatMul), ReverseSequence, MaxUnpool and Det. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "onnx/onnx_int.h"
#include "runtime/helpers.h"

#define IN(i) (n->nin > (i) ? n->in[i] : NULL)
#define MAXD OX_MAX_DIMS

/* ---------------------------------------------------------------- windows */

/* Hann, Hamming, Blackman: sum_k c_k cos(2 pi k i / N) over i < size (N = size if periodic,
 * else size - 1). */
static int op_window(ox_node *n) {
  static const struct { const char *name; double c[3]; } wins[] = {
      {"HannWindow", {0.5, -0.5, 0}},
      {"HammingWindow", {25.0 / 46.0, -21.0 / 46.0, 0}},
      {"BlackmanWindow", {0.42, -0.5, 0.08}},
  };
  int64_t size;
  if (ox_host_ints(IN(0), &size, 1) != 1 || size < 0) return ox_fail(n, TG_ERR_ARG, "size must be a scalar >= 0");
  int dt = ox_dtype((int)ox_attr_i(n, "output_datatype", 1), "window output_datatype");
  if (dt < 0) return -1;
  double N = (double)(ox_attr_i(n, "periodic", 1) ? size : size - 1);
  for (int w = 0; w < 3; w++) {
    if (strcmp(wins[w].name, n->np->op_type)) continue;
    tg_tensor *i = tg_arange(0, (double)size, 1, TG_FLOAT64), *r = tg_full_like(i, wins[w].c[0]);
    for (int k = 1; k < 3; k++)
      if (wins[w].c[k] != 0) r = tg_add(r, tg_mul_s(tg_cos(tg_mul_s(i, 2 * M_PI * k / N)), wins[w].c[k]));
    return ox_set(n, 0, tg_cast(r, (tg_dtype)dt));
  }
  return ox_fail(n, TG_ERR_ARG, "no window");
}

/* ---------------------------------------------------------------- quantization */

/* A scale or zero point: a scalar, or 1-D along `axis` of a rank-nd tensor. */
static tg_tensor *qparam(tg_tensor *p, int axis, int nd) {
  if (!p || tg_ndim(p) == 0 || nd <= 1) return p;
  int64_t s[MAXD];
  for (int i = 0; i < nd; i++) s[i] = i == axis ? -1 : 1;
  return tg_reshape(p, s, nd);
}

/* Round half to even, add the zero point, saturate to dt. */
tg_tensor *ox_quantize(tg_tensor *xf, tg_tensor *scale, tg_tensor *zp, tg_dtype dt) {
  tg_tensor *q = tg_round(tg_div(xf, tg_cast(scale, tg_get_dtype(xf))));
  if (zp) q = tg_add(q, tg_cast(zp, tg_get_dtype(xf)));
  double lo = dt == TG_UINT8 ? 0 : dt == TG_INT8 ? -128 : dt == TG_UINT16 ? 0 : dt == TG_INT16 ? -32768 : -2147483648.0;
  double hi = dt == TG_UINT8 ? 255 : dt == TG_INT8 ? 127 : dt == TG_UINT16 ? 65535 : dt == TG_INT16 ? 32767 : 2147483647.0;
  return tg_cast(tg_clip(q, lo, hi), dt);
}

static int op_quantize(ox_node *n) {
  tg_tensor *x = IN(0);
  int nd = tg_ndim(x), axis = nd > 1 ? ox_axis(n, ox_attr_i(n, "axis", 1), nd) : 0;
  if (axis < 0 || !IN(1)) return -1;
  tg_dtype dt = IN(2) ? tg_get_dtype(IN(2)) : TG_UINT8;
  tg_tensor *xf = tg_dtype_is_float(tg_get_dtype(x)) ? tg_cast(x, TG_FLOAT32) : tg_cast(x, TG_FLOAT32);
  return ox_set(n, 0, ox_quantize(xf, qparam(IN(1), axis, nd), qparam(IN(2), axis, nd), dt));
}

static int op_dequantize(ox_node *n) {
  tg_tensor *x = IN(0);
  int nd = tg_ndim(x), axis = nd > 1 ? ox_axis(n, ox_attr_i(n, "axis", 1), nd) : 0;
  if (axis < 0 || !IN(1)) return -1;
  tg_tensor *xf = tg_cast(x, TG_FLOAT32);
  if (IN(2)) xf = tg_sub(xf, tg_cast(qparam(IN(2), axis, nd), TG_FLOAT32));
  return ox_set(n, 0, tg_cast(tg_mul(xf, qparam(IN(1), axis, nd)), tg_get_dtype(IN(1))));
}

/* y_scale from the range of x and 0, zero point from its minimum, x quantized to uint8. */
static int op_dyn_quantize(ox_node *n) {
  tg_tensor *x = tg_cast(IN(0), TG_FLOAT32);
  tg_tensor *hi = tg_maximum(tg_max(x, NULL, 0, false), tg_scalar(0, TG_FLOAT32));
  tg_tensor *lo = tg_minimum(tg_min(x, NULL, 0, false), tg_scalar(0, TG_FLOAT32));
  tg_tensor *scale = tg_div_s(tg_sub(hi, lo), 255.0);
  tg_tensor *zp = tg_cast(tg_clip(tg_round(tg_div(tg_neg(lo), scale)), 0, 255), TG_UINT8);
  n->out[1] = scale, n->out[2] = zp;
  return ox_set(n, 0, ox_quantize(x, scale, zp, TG_UINT8));
}

/* (A - a_zp) @ (B - b_zp) in int32; a_zp per row (M) or scalar, b_zp per column (N) or scalar. */
static int op_matmul_integer(ox_node *n) {
  tg_tensor *a = tg_cast(IN(0), TG_INT32), *b = tg_cast(IN(1), TG_INT32);
  if (IN(2)) a = tg_sub(a, tg_ndim(IN(2)) == 1 ? tg_unsqueeze(tg_cast(IN(2), TG_INT32), -1) : tg_cast(IN(2), TG_INT32));
  if (IN(3)) b = tg_sub(b, tg_cast(IN(3), TG_INT32));
  return ox_set(n, 0, tg_matmul(a, b));
}

static tg_tensor *dequant(tg_tensor *x, tg_tensor *scale, tg_tensor *zp) {
  tg_tensor *xf = tg_cast(x, TG_FLOAT32);
  if (zp) xf = tg_sub(xf, tg_cast(zp, TG_FLOAT32));
  return tg_mul(xf, tg_cast(scale, TG_FLOAT32));
}

static int op_qlinear_matmul(ox_node *n) {
  tg_tensor *a = IN(2) && tg_ndim(IN(2)) == 1 && tg_ndim(IN(0)) >= 2 ? tg_unsqueeze(IN(2), -1) : IN(2);
  tg_tensor *as = IN(1) && tg_ndim(IN(1)) == 1 && tg_ndim(IN(0)) >= 2 ? tg_unsqueeze(IN(1), -1) : IN(1);
  tg_tensor *y = tg_matmul(dequant(IN(0), as, a), dequant(IN(3), IN(4), IN(5)));
  return ox_set(n, 0, ox_quantize(y, IN(6), IN(7), IN(7) ? tg_get_dtype(IN(7)) : TG_UINT8));
}

/* ---------------------------------------------------------------- ReverseSequence */

/* Element t of batch b comes from lens[b] - 1 - t while t < lens[b]: a gather along time. */
static int op_reverse_sequence(ox_node *n) {
  tg_tensor *x = IN(0);
  int nd = tg_ndim(x);
  int ta = ox_axis(n, ox_attr_i(n, "time_axis", 0), nd), ba = ox_axis(n, ox_attr_i(n, "batch_axis", 1), nd);
  if (ta < 0 || ba < 0 || ta == ba) return ox_fail(n, TG_ERR_ARG, "bad time_axis / batch_axis");
  int64_t T = tg_dim(x, ta), B = tg_dim(x, ba), lens[4096], s[MAXD], xs[MAXD];
  if (B > 4096 || T * B > ((int64_t)1 << 22) || ox_host_ints(IN(1), lens, 4096) != B)
    return ox_fail(n, TG_ERR_ARG, "sequence_lens must have one value per batch entry");
  int64_t *idx = malloc((size_t)(T * B + 1) * sizeof *idx);
  if (!idx) return tg_set_error(TG_ERR_NOMEM, "out of memory");
  for (int64_t t = 0; t < T; t++)
    for (int64_t b = 0; b < B; b++) {
      int64_t l = lens[b] < 0 ? 0 : lens[b] > T ? T : lens[b];
      idx[ta < ba ? t * B + b : b * T + t] = t < l ? l - 1 - t : t;
    }
  for (int i = 0; i < nd; i++) s[i] = i == ta ? T : i == ba ? B : 1;
  tg_shape(x, xs, MAXD);
  tg_tensor *it = tg_expand(tg_from_data(idx, TG_INT64, s, nd), xs, nd);
  free(idx);
  return ox_set(n, 0, tg_gather(x, ta, it));
}

/* ---------------------------------------------------------------- MaxUnpool */

static int op_max_unpool(ox_node *n) {
  tg_tensor *x = IN(0), *idx = IN(1);
  int64_t v[2 * MAXD], os[MAXD];
  int nd = tg_ndim(x), nsp = nd - 2, k[3], st[3], pd[3];
  if (nsp < 1 || nsp > 3 || !idx) return ox_fail(n, TG_ERR_ARG, "needs 1 to 3 spatial axes and indices");
  int c = ox_attr_ints(n, "kernel_shape", v, MAXD);
  if (c != nsp) return ox_fail(n, TG_ERR_ARG, "kernel_shape must have %d values", nsp);
  for (int i = 0; i < nsp; i++) k[i] = (int)v[i];
  c = ox_attr_ints(n, "strides", v, MAXD);
  for (int i = 0; i < nsp; i++) st[i] = c > i ? (int)v[i] : 1;
  c = ox_attr_ints(n, "pads", v, 2 * MAXD);
  for (int i = 0; i < nsp; i++) pd[i] = c > i ? (int)v[i] : 0;
  int64_t *osz = NULL;
  if (IN(2)) {
    if (ox_host_ints(IN(2), os, MAXD) != nd) return ox_fail(n, TG_ERR_ARG, "output_shape must have %d values", nd);
    osz = os + 2;
  }
  /* ONNX indices count over the whole tensor of the default size, tg's within a channel; a
   * larger output_shape pads that result at the end (as the reference does) */
  int64_t spatial = 1, N = tg_dim(x, 0), C = tg_dim(x, 1), s[MAXD] = {N, C}, dflt[MAXD];
  int64_t before[MAXD] = {0}, after[MAXD] = {0};
  for (int i = 0; i < nsp; i++) {
    dflt[i] = (tg_dim(x, 2 + i) - 1) * st[i] - 2 * pd[i] + k[i], spatial *= dflt[i], s[2 + i] = 1;
    after[2 + i] = osz ? osz[i] - dflt[i] : 0;
    if (after[2 + i] < 0) return ox_fail(n, TG_ERR_ARG, "output_shape is smaller than the unpooled size");
  }
  tg_tensor *base = tg_reshape(tg_mul_s(tg_arange(0, (double)(N * C), 1, TG_INT64), (double)spatial), s, nd);
  tg_tensor *y = tg_max_unpool(x, tg_sub(tg_cast(idx, TG_INT64), base), nsp, k, st, pd, dflt);
  return ox_set(n, 0, osz ? tg_pad(y, before, after, 0.0) : y);
}

/* ---------------------------------------------------------------- Det */

#define DET_MAX 64 /* the largest matrix: the elimination is unrolled over its columns */

/* A * mask (mask bool, broadcast): A where mask, else 0. */
static tg_tensor *masked(tg_tensor *a, tg_tensor *mask) { return tg_mul(a, tg_cast(mask, tg_get_dtype(a))); }

/* Det of (..., M, M): Gaussian elimination with partial pivoting, in float64, unrolled over the
 * columns. Step k takes the row of largest |value| in column k at or below the diagonal (argmax
 * of the masked column), swaps it with row k by one-hot masks, and subtracts multiples of it from
 * the rows below; the determinant is the product of the pivots, negated per swap. */
static int op_det(ox_node *n) {
  tg_tensor *x = IN(0);
  int nd = x ? tg_ndim(x) : 0;
  if (nd < 2 || tg_dim(x, -1) != tg_dim(x, -2) || !tg_dtype_is_float(tg_get_dtype(x)))
    return ox_fail(n, TG_ERR_ARG, "needs float square matrices (..., M, M)");
  int64_t M = tg_dim(x, -1), bshape[MAXD];
  if (M < 1 || M > DET_MAX) return ox_fail(n, TG_ERR_ARG, "M = %lld (1 to %d)", (long long)M, DET_MAX);
  tg_tensor *a = tg_cast(x, TG_FLOAT64), *det = tg_ones((int64_t[]){1, 1}, 2, TG_FLOAT64);
  tg_tensor *rows = tg_reshape(tg_arange(0, (double)M, 1, TG_INT32), (int64_t[]){M, 1}, 2); /* (M, 1) */
  for (int64_t k = 0; k < M; k++) {
    tg_tensor *kk = tg_full(NULL, 0, (double)k, TG_INT32), *col = tg_slice(a, -1, k, k + 1, 1); /* (..., M, 1) */
    tg_tensor *cand = tg_where(tg_ge(rows, kk), tg_abs(col), tg_full(NULL, 0, -1.0, TG_FLOAT64));
    tg_tensor *p = tg_argmax(cand, -2, true); /* (..., 1, 1) */
    tg_tensor *at_p = tg_eq(rows, p), *at_k = tg_eq(rows, kk);
    tg_tensor *prow = tg_sum(masked(a, at_p), (int[]){-2}, 1, true), *krow = tg_slice(a, -2, k, k + 1, 1);
    a = tg_add(a, tg_add(masked(tg_sub(krow, prow), at_p), masked(tg_sub(prow, krow), at_k)));
    tg_tensor *pivot = tg_slice(prow, -1, k, k + 1, 1); /* (..., 1, 1) */
    tg_tensor *sign = tg_sub_s(tg_mul_s(tg_cast(tg_eq(p, kk), TG_FLOAT64), 2.0), 1.0);
    det = tg_mul(det, tg_mul(pivot, sign));
    tg_tensor *below = tg_logical_and(tg_gt(rows, kk), tg_ne(pivot, tg_zeros_like(pivot)));
    tg_tensor *factor = tg_where(below, tg_div(tg_slice(a, -1, k, k + 1, 1), pivot), tg_zeros_like(pivot));
    a = tg_sub(a, tg_mul(factor, prow));
  }
  for (int i = 0; i < nd - 2; i++) bshape[i] = tg_dim(x, i);
  return ox_set(n, 0, tg_cast(tg_reshape(det, bshape, nd - 2), tg_get_dtype(x)));
}

const ox_op ox_ops_extra[] = {
    {"Det", 11, op_det, ""},
    {"HannWindow", 17, op_window, "output_datatype,periodic"},
    {"HammingWindow", 17, op_window, "output_datatype,periodic"},
    {"BlackmanWindow", 17, op_window, "output_datatype,periodic"},
    {"QuantizeLinear", 10, op_quantize, "axis,saturate"},
    {"DequantizeLinear", 10, op_dequantize, "axis"},
    {"DynamicQuantizeLinear", 11, op_dyn_quantize, ""},
    {"MatMulInteger", 10, op_matmul_integer, ""},
    {"QLinearMatMul", 10, op_qlinear_matmul, ""},
    {"ReverseSequence", 10, op_reverse_sequence, "batch_axis,time_axis"},
    {"MaxUnpool", 9, op_max_unpool, "kernel_shape,pads,strides"},
    {NULL, 0, NULL, NULL},
};
