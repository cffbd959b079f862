/* ops_grid.c — ONNX GridSample (opset 16, 2-D): every output pixel samples X at a position
 * the grid gives in [-1, 1]. Built from tensor ops, so the grid may be any lazy value: the
 * position is unnormalized (align_corners), clipped or reflected into range (padding_mode),
 * and each tap (1 nearest, 4 bilinear, 16 bicubic) is a tg_gather of X flattened over H*W,
 * weighted, and masked to zero outside X for padding_mode zeros. */
#include <math.h>
#include <string.h>

#include "onnx/onnx_int.h"
#include "runtime/helpers.h"

#define IN(i) (n->nin > (i) ? n->in[i] : NULL)

typedef struct gs {
  bool align;
  int pad; /* 0 zeros, 1 border, 2 reflection */
  int64_t N, C, H, W, Ho, Wo;
  tg_tensor *xf; /* X as (N, C, H*W) */
} gs;

/* The grid coordinate g in [-1, 1] as a position on an axis of `size`. */
static tg_tensor *unnormalize(const gs *s, tg_tensor *g, int64_t size) {
  if (s->align) return tg_mul_s(tg_add_s(g, 1.0), (double)(size - 1) / 2.0);
  return tg_div_s(tg_sub_s(tg_mul_s(tg_add_s(g, 1.0), (double)size), 1.0), 2.0);
}

/* Reflect x into [lo, hi] as often as needed (the reference's _reflect). */
static tg_tensor *reflect(tg_tensor *x, double lo, double hi) {
  double rng = hi - lo;
  if (rng <= 0) return tg_zeros_like(x);
  tg_tensor *below = tg_lt(x, tg_full_like(x, lo)), *above = tg_gt(x, tg_full_like(x, hi));
  tg_tensor *dx = tg_where(below, tg_rsub_s(lo, x), tg_sub_s(x, hi));
  tg_tensor *k = tg_floor(tg_div_s(dx, rng)), *r = tg_sub(dx, tg_mul_s(k, rng));
  tg_tensor *even = tg_eq(tg_fmod(k, tg_full_like(k, 2.0)), tg_zeros_like(k));
  tg_tensor *from_lo = tg_where(even, tg_add_s(r, lo), tg_rsub_s(hi, r)), *from_hi = tg_where(even, tg_rsub_s(hi, r), tg_add_s(r, lo));
  return tg_where(below, from_lo, tg_where(above, from_hi, x));
}

/* Coordinates after padding_mode border / reflection. */
static tg_tensor *pad_coord(const gs *s, tg_tensor *x, int64_t size) {
  if (s->pad == 1) return tg_clip(x, 0, (double)(size - 1));
  if (s->pad == 2) return s->align ? reflect(x, 0, (double)(size - 1)) : reflect(x, -0.5, (double)size - 0.5);
  return x;
}

/* An integer tap index made valid: its mask (in range) and a clamped or reflected index. */
static tg_tensor *tap_index(const gs *s, tg_tensor *i, int64_t size, tg_tensor **inside) {
  *inside = tg_logical_and(tg_ge(i, tg_zeros_like(i)), tg_le(i, tg_full_like(i, (double)(size - 1))));
  if (s->pad == 2) { /* one reflection of the index (taps lie at most 2 outside) */
    double lo = s->align ? 0 : -1, hi = s->align ? 2.0 * (double)(size - 1) : 2.0 * (double)size - 1;
    i = tg_where(tg_lt(i, tg_zeros_like(i)), tg_rsub_s(lo, i), i);
    i = tg_where(tg_gt(i, tg_full_like(i, (double)(size - 1))), tg_rsub_s(hi, i), i);
  }
  return tg_clip(i, 0, (double)(size - 1));
}

/* X at integer taps (yi, xi) (N, Ho, Wo) times weight w: (N, C, Ho, Wo). */
static tg_tensor *sample(const gs *s, tg_tensor *yi, tg_tensor *xi, tg_tensor *w) {
  tg_tensor *my, *mx;
  yi = tap_index(s, yi, s->H, &my), xi = tap_index(s, xi, s->W, &mx);
  if (s->pad == 0) w = tg_where(tg_logical_and(my, mx), w, tg_zeros_like(w));
  tg_tensor *flat = tg_cast(tg_add(tg_mul_s(yi, (double)s->W), xi), TG_INT64);
  int64_t is[3] = {s->N, 1, s->Ho * s->Wo}, es[3] = {s->N, s->C, s->Ho * s->Wo}, os[4] = {s->N, s->C, s->Ho, s->Wo};
  tg_tensor *g = tg_gather(s->xf, 2, tg_expand(tg_reshape(flat, is, 3), es, 3));
  return tg_mul(tg_reshape(g, os, 4), tg_unsqueeze(tg_cast(w, tg_get_dtype(s->xf)), 1));
}

/* Cubic convolution weights (A = -0.75) of the 4 taps around fraction t. */
static void cubic(tg_tensor *t, tg_tensor *w[4]) {
  const double A = -0.75;
  tg_tensor *d[4] = {tg_add_s(t, 1.0), t, tg_rsub_s(1.0, t), tg_rsub_s(2.0, t)};
  for (int k = 0; k < 4; k++) {
    tg_tensor *x = d[k];
    if (k == 1 || k == 2) /* |x| <= 1: ((A+2)x - (A+3)) x^2 + 1 */
      w[k] = tg_add_s(tg_mul(tg_sub_s(tg_mul_s(x, A + 2), A + 3), tg_mul(x, x)), 1.0);
    else /* 1 < |x| < 2: ((A x - 5A) x + 8A) x - 4A */
      w[k] = tg_sub_s(tg_mul(tg_add_s(tg_mul(tg_sub_s(tg_mul_s(x, A), 5 * A), x), 8 * A), x), 4 * A);
  }
}

static int op_grid_sample(ox_node *n) {
  tg_tensor *x = IN(0), *grid = IN(1);
  if (!x || !grid || tg_ndim(x) != 4 || tg_ndim(grid) != 4 || tg_dim(grid, 3) != 2)
    return ox_fail(n, TG_ERR_ARG, "needs X (N, C, H, W) and a grid (N, Ho, Wo, 2)");
  const char *mode = ox_attr_s(n, "mode", "bilinear"), *pm = ox_attr_s(n, "padding_mode", "zeros");
  mode = !strcmp(mode, "linear") ? "bilinear" : !strcmp(mode, "cubic") ? "bicubic" : mode; /* opset 20's names */
  gs s = {.align = ox_attr_i(n, "align_corners", 0) != 0, .N = tg_dim(x, 0), .C = tg_dim(x, 1), .H = tg_dim(x, 2),
          .W = tg_dim(x, 3), .Ho = tg_dim(grid, 1), .Wo = tg_dim(grid, 2)};
  s.pad = !strcmp(pm, "zeros") ? 0 : !strcmp(pm, "border") ? 1 : !strcmp(pm, "reflection") ? 2 : -1;
  if (s.pad < 0) return ox_fail(n, TG_ERR_ARG, "padding_mode '%s' is not supported", pm);
  s.xf = tg_reshape(x, (int64_t[]){s.N, s.C, s.H * s.W}, 3);
  tg_tensor *gf = tg_cast(grid, TG_FLOAT64);
  tg_tensor *px = pad_coord(&s, unnormalize(&s, tg_squeeze(tg_slice(gf, 3, 0, 1, 1), 3), s.W), s.W);
  tg_tensor *py = pad_coord(&s, unnormalize(&s, tg_squeeze(tg_slice(gf, 3, 1, 2, 1), 3), s.H), s.H);
  if (!strcmp(mode, "nearest")) return ox_set(n, 0, sample(&s, tg_round(py), tg_round(px), tg_ones_like(px)));
  tg_tensor *x0 = tg_floor(px), *y0 = tg_floor(py), *tx = tg_sub(px, x0), *ty = tg_sub(py, y0), *r = NULL;
  if (!strcmp(mode, "bilinear")) {
    tg_tensor *wx[2] = {tg_rsub_s(1.0, tx), tx}, *wy[2] = {tg_rsub_s(1.0, ty), ty};
    for (int a = 0; a < 2; a++)
      for (int b = 0; b < 2; b++) {
        tg_tensor *v = sample(&s, tg_add_s(y0, a), tg_add_s(x0, b), tg_mul(wy[a], wx[b]));
        r = r ? tg_add(r, v) : v;
      }
    return ox_set(n, 0, r);
  }
  if (strcmp(mode, "bicubic")) return ox_fail(n, TG_ERR_ARG, "mode '%s' is not supported", mode);
  tg_tensor *wx[4], *wy[4];
  cubic(tx, wx), cubic(ty, wy);
  for (int a = 0; a < 4; a++)
    for (int b = 0; b < 4; b++) {
      tg_tensor *v = sample(&s, tg_add_s(y0, a - 1), tg_add_s(x0, b - 1), tg_mul(wy[a], wx[b]));
      r = r ? tg_add(r, v) : v;
    }
  return ox_set(n, 0, r);
}

const ox_op ox_ops_grid[] = {
    {"GridSample", 16, op_grid_sample, "align_corners,mode,padding_mode"},
    {NULL, 0, NULL, NULL},
};
