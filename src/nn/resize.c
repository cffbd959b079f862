/* resize.c — tg_interpolate (F.interpolate): nearest, nearest-exact, linear, bilinear and
 * trilinear, with align_corners, to a size or by a scale factor.
 *
 * Interpolation is separable: each spatial axis is resized on its own, as a small contraction
 * over sliding windows. On the host, every output position j gets its taps — the input
 * positions it reads and their weights — computed exactly as PyTorch's CPU kernels do (same
 * float or double arithmetic, same special cases). Most resizes are periodic: after q outputs
 * the taps repeat shifted by p inputs (a 2x upsample: q = 2, p = 1). Then the axis becomes
 * windows of W inputs every p (tg_unfold, a view of the input padded with its edge values)
 * and out[a*q + b] = sum_c T[b][c] * window_a[c] for a (q, W) weight table T: W multiply-adds
 * per output. A resize without a short period uses one window and a dense (out, in) table.
 * A zero weight skips its tap (where, not a multiply), so an inf beside the taps stays out.
 * Built from views, a where and a sum: autograd differentiates it. */
#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "nn/functional.h"
#include "tensor/shape.h"

enum { MAX_TAPS = 2, MAX_PERIOD = 64 };

typedef struct tap {
  int64_t at[MAX_TAPS]; /* input positions, may be -1 or in (edge values) */
  double w[MAX_TAPS];
  int n;
} tap;

/* x rounded to float when PyTorch computes in float (every input but float64). */
static double rnd(double x, bool f64) { return f64 ? x : (double)(float)x; }

/* compute_scales_value: 1/scale when a scale factor is given, else in/out. */
static double scale_of(int64_t in, int64_t out, const double *sf, bool f64) {
  if (sf && *sf > 0) return rnd(1.0 / *sf, f64);
  return f64 ? (double)in / (double)out : (double)((float)in / (float)out);
}

/* The taps of output j (UpSample.h: nearest_idx, nearest_exact_idx, and
 * compute_source_index_and_lambda without its clamp of negative positions: the input is
 * padded with its edge values, which gives the same value). */
static tap taps_of(tg_interp_mode mode, int64_t j, int64_t in, int64_t out, const double *sf, bool align, bool f64) {
  tap t = {{0, 0}, {1, 0}, 1};
  bool linear = mode >= TG_INTERP_LINEAR;
  if (out == in || (mode == TG_INTERP_NEAREST && out == 2 * in)) {
    t.at[0] = out == in ? j : j >> 1;
    return t;
  }
  if (!linear) { /* float scale; floorf of the position, at most in - 1 */
    double s = rnd(scale_of(in, out, sf, false), false);
    double pos = mode == TG_INTERP_NEAREST ? rnd((double)(float)j * s, false) : rnd(((double)j + 0.5) * s, false);
    int64_t i = (int64_t)floor(pos);
    t.at[0] = i < in - 1 ? i : in - 1;
    return t;
  }
  double s = align ? (out > 1 ? rnd(rnd((double)(in - 1), f64) / (double)(out - 1), f64) : 0) : scale_of(in, out, sf, f64);
  double src = align ? rnd(s * rnd((double)j, f64), f64) : rnd(rnd(s * rnd((double)j + 0.5, f64), f64) - 0.5, f64);
  double i0 = floor(src), l1 = rnd(src - i0, f64);
  t.n = 2, t.at[0] = (int64_t)i0, t.at[1] = (int64_t)i0 + 1, t.w[1] = l1, t.w[0] = rnd(1.0 - l1, f64);
  return t;
}

/* Output j + q reads p inputs further with the same weights, for every j. PyTorch's weights
 * are differences of source positions rounded to float (or double): at position x they are
 * exact to ulp(x), so weights within 8 ulp(in) count as equal. */
static bool periodic(const tap *t, int64_t in, int64_t out, int64_t q, int64_t p, bool f64) {
  double tol = 8 * (f64 ? DBL_EPSILON : FLT_EPSILON) * (double)(in > 1 ? in : 1);
  for (int64_t j = 0; j + q < out; j++)
    for (int k = 0; k < t[j].n; k++)
      if (t[j + q].n != t[j].n || t[j + q].at[k] != t[j].at[k] + p || fabs(t[j + q].w[k] - t[j].w[k]) > tol) return false;
  return true;
}

/* Resize the last axis of x (in, a float or int tensor) to out positions with the taps t. */
static tg_tensor *resize_last(tg_tensor *x, const tap *t, int64_t out, tg_dtype acc, bool f64) {
  int nd = tg_ndim(x);
  int64_t in = tg_dim(x, -1), q = out, p = 0;
  for (int64_t c = 1; c < out && c <= MAX_PERIOD; c++) /* the shortest period that moves forward */
    if (t[c].at[0] > t[0].at[0] && periodic(t, in, out, c, t[c].at[0] - t[0].at[0], f64)) {
      q = c, p = t[c].at[0] - t[0].at[0];
      break;
    }
  int64_t blocks = (out + q - 1) / q, lo = INT64_MAX, hi = INT64_MIN;
  for (int64_t b = 0; b < q; b++)
    for (int k = 0; k < t[b].n; k++) lo = t[b].at[k] < lo ? t[b].at[k] : lo, hi = t[b].at[k] > hi ? t[b].at[k] : hi;
  int64_t width = hi - lo + 1, last = (blocks - 1) * p + hi; /* inputs lo..last are read */
  int64_t cells = 0; /* q x width weights: both >= 1 by construction; checked, the compiler cannot see it */
  if (width < 1 || !ck_mul(q, width, &cells)) return tensor_error("interpolate: a %lld x %lld weight table", (long long)q, (long long)width);
  double *table = calloc((size_t)cells, sizeof(double));
  if (!table) return tensor_error("interpolate: out of memory for a %lld x %lld table", (long long)q, (long long)width);
  for (int64_t b = 0; b < q; b++)
    for (int k = 0; k < t[b].n; k++) table[b * width + t[b].at[k] - lo] += t[b].w[k];
  int64_t pb[TG_MAX_DIMS] = {0}, pa[TG_MAX_DIMS] = {0};
  pb[nd - 1] = -lo, pa[nd - 1] = last - (in - 1); /* edge values where the taps leave the input (< 0: crop) */
  tg_tensor *xp = tg_pad_mode(x, pb, pa, TG_PAD_REPLICATE, 0);
  tg_tensor *win = tg_unfold(xp, nd - 1, width, p ? p : 1); /* (.., blocks, width) */
  tg_tensor *w = tg_cast(tg_from_data(table, TG_FLOAT64, (int64_t[]){q, width}, 2), acc);
  free(table);
  tg_tensor *prod = tg_mul(tg_unsqueeze(tg_cast(win, acc), -2), w); /* (.., blocks, q, width) */
  int axis = -1;
  tg_tensor *r = tg_sum(tg_where(tg_ne(w, tg_zeros_like(w)), prod, tg_zeros_like(prod)), &axis, 1, false);
  int64_t shape[TG_MAX_DIMS];
  for (int i = 0; i < nd - 1; i++) shape[i] = tg_dim(x, i);
  shape[nd - 1] = blocks * q;
  r = r ? tg_reshape(tg_cast(r, acc), shape, nd) : NULL;
  return blocks * q == out ? r : tg_slice(r, -1, 0, out, 1);
}

/* Resize axis of x to out positions. */
static tg_tensor *resize_axis(tg_tensor *x, int axis, int64_t out, tg_interp_mode mode, const double *sf, bool align,
                              tg_dtype acc) {
  int64_t in = tg_dim(x, axis);
  bool f64 = acc == TG_FLOAT64;
  tap *t = (uint64_t)out <= SIZE_MAX / sizeof(tap) ? malloc(sizeof(tap) * (size_t)out) : NULL;
  if (!t) return tensor_error("interpolate: out of memory for %lld positions", (long long)out);
  bool identity = true;
  for (int64_t j = 0; j < out; j++) {
    t[j] = taps_of(mode, j, in, out, sf, align, f64);
    identity &= out == in && t[j].n == 1 && t[j].at[0] == j;
  }
  tg_tensor *r = identity ? x : tg_transpose(resize_last(tg_transpose(x, axis, -1), t, out, acc, f64), axis, -1);
  free(t);
  return r;
}

static const char *const mode_names[] = {"nearest", "nearest-exact", "linear", "bilinear", "trilinear"};

/* The output size of every spatial axis, checked (PyTorch's rules). */
static bool output_sizes(tg_tensor *x, int nsp, const int64_t *size, const double *sf, int64_t *out) {
  char b[256];
  if (!size == !sf) return tensor_error("interpolate: give exactly one of size and scale_factor"), false;
  for (int j = 0; j < nsp; j++) {
    int64_t in = tg_dim(x, 2 + j);
    if (in <= 0) return tensor_error("interpolate: spatial axes of %s must not be empty", NN_SHAPE(x, b)), false;
    if (sf && !(isfinite(sf[j]) && sf[j] > 0 && (double)in * sf[j] < 0x1p62))
      return tensor_error("interpolate: scale factor %g must be positive and finite", sf[j]), false;
    out[j] = size ? size[j] : (int64_t)floor((double)in * sf[j]);
    if (out[j] <= 0)
      return tensor_error("interpolate: output size %lld of spatial axis %d is not positive", (long long)out[j], j), false;
  }
  return true;
}

tg_tensor *tg_interpolate(tg_tensor *x, const int64_t *size, const double *scale_factor, tg_interp_mode mode,
                          bool align_corners) {
  if (!x) return null_arg("interpolate");
  char b[256];
  int nd = tg_ndim(x), nsp = nd - 2;
  if ((int)mode < 0 || mode > TG_INTERP_TRILINEAR) return tensor_error("interpolate: invalid mode %d", (int)mode);
  if (nsp < 1 || nsp > 3) return tensor_error("interpolate: x %s must be (N, C, 1 to 3 spatial axes)", NN_SHAPE(x, b));
  bool linear = mode >= TG_INTERP_LINEAR;
  if (linear && nsp != 1 + (int)(mode - TG_INTERP_LINEAR))
    return tensor_error("interpolate: %s needs %d spatial axes, x %s has %d", mode_names[mode],
                        1 + (int)(mode - TG_INTERP_LINEAR), NN_SHAPE(x, b), nsp);
  if (align_corners && !linear)
    return tensor_error("interpolate: align_corners is only for the linear modes, not %s", mode_names[mode]);
  if (linear && !nn_need_float("interpolate", "x", x)) return NULL;
  int64_t out[3], shape[TG_MAX_DIMS];
  if (!output_sizes(x, nsp, size, scale_factor, out)) return NULL;
  memcpy(shape, uop_shape(x->u), sizeof(int64_t) * (size_t)nd);
  memcpy(shape + 2, out, sizeof(int64_t) * (size_t)nsp);
  if (!shape_check("interpolate", shape, nd, tg_get_dtype(x))) return NULL;
  tg_dtype dt = tg_get_dtype(x);
  tg_dtype acc = dtype_is_half(dt) ? TG_FLOAT32 : dt == TG_BOOL ? TG_UINT8 : dt; /* PyTorch: float math for halves */
  tg_scope *s = tg_scope_begin();
  tg_tensor *r = tg_cast(x, acc);
  for (int j = 0; r && j < nsp; j++)
    r = resize_axis(r, 2 + j, out[j], mode, scale_factor ? &scale_factor[j] : NULL, align_corners, acc);
  r = tg_keep(r ? tg_cast(r, dt) : NULL);
  tg_scope_end(s);
  return r;
}
