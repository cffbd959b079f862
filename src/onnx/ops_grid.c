/* ops_grid.c — ONNX GridSample (opset 16, 2-D): every output pixel samples X at a position
 * the grid gives in [-1, 1]. Built from tensor ops, so the grid may be any lazy value: the
 * position is unnormalized (align_corners), clipped or reflected into range (padding_mode),
 * and each tap (1 nearest, 4 bilinear, 16 bicubic) is a tg_gather of X flattened over H*W,
 * weighted, and masked to zero outside X for padding_mode zeros. RoiAlign samples bilinearly
 * too, at positions that depend on host-read boxes: a weight matrix and one batched matmul. */
#include <math.h>
#include <stdlib.h>
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

/* ---------------------------------------------------------------- RoiAlign */

#define ROI_MAX_ELEMS ((int64_t)1 << 26) /* the largest weight matrix (doubles) */

typedef struct roi_job {
  int64_t H, W, oh, ow, S, cols; /* S: samples per bin (the most over the rois); cols per roi */
  bool max, half_pixel;
  double scale;
  int64_t sr; /* sampling_ratio (0: adaptive) */
} roi_job;

/* Samples per bin along a side: the ratio, or ceil(side / bins) (the reference's int(ceil)). */
static int64_t roi_grid(const roi_job *j, double side, int64_t bins) {
  return j->sr > 0 ? j->sr : (int64_t)ceil(side / (double)bins);
}

/* The corner positions and bilinear weights of a sample at (y, x); all zero outside X. */
static void roi_sample(const roi_job *j, double y, double x, int64_t pos[4], double w[4]) {
  memset(pos, 0, 4 * sizeof *pos), memset(w, 0, 4 * sizeof *w);
  if (y < -1.0 || y > (double)j->H || x < -1.0 || x > (double)j->W) return;
  y = y > 0 ? y : 0, x = x > 0 ? x : 0;
  int64_t yl = (int64_t)y, xl = (int64_t)x, yh = yl + 1, xh = xl + 1;
  if (yl >= j->H - 1) yh = yl = j->H - 1, y = (double)yl;
  if (xl >= j->W - 1) xh = xl = j->W - 1, x = (double)xl;
  double ly = y - (double)yl, lx = x - (double)xl, hy = 1 - ly, hx = 1 - lx;
  int64_t p[4] = {yl * j->W + xl, yl * j->W + xh, yh * j->W + xl, yh * j->W + xh};
  double ww[4] = {hy * hx, hy * lx, ly * hx, ly * lx};
  memcpy(pos, p, sizeof p), memcpy(w, ww, sizeof ww);
}

/* One roi's (H*W, cols) block of the weight matrix: avg sums w / count into the bin's column;
 * max gives each corner of each sample its own column (padded with sample 0's). */
static void roi_weights(const roi_job *j, const double *box, double *m) {
  double off = j->half_pixel ? 0.5 : 0.0, sw = box[0] * j->scale - off, sh = box[1] * j->scale - off;
  double rw = box[2] * j->scale - off - sw, rh = box[3] * j->scale - off - sh;
  if (!j->half_pixel) rw = rw > 1 ? rw : 1, rh = rh > 1 ? rh : 1;
  double bh = rh / (double)j->oh, bw = rw / (double)j->ow;
  int64_t gh = roi_grid(j, rh, j->oh), gw = roi_grid(j, rw, j->ow), count = gh * gw > 1 ? gh * gw : 1;
  for (int64_t b = 0; b < j->oh * j->ow; b++)
    for (int64_t s = 0; s < (j->max ? j->S : gh * gw); s++) {
      int64_t t = s < gh * gw ? s : 0, iy = t / (gw ? gw : 1), ix = t % (gw ? gw : 1), pos[4];
      double w[4];
      if (!gh || !gw) continue;
      roi_sample(j, sh + (double)(b / j->ow) * bh + ((double)iy + .5) * bh / (double)gh,
                 sw + (double)(b % j->ow) * bw + ((double)ix + .5) * bw / (double)gw, pos, w);
      for (int k = 0; k < 4; k++) {
        if (j->max) m[pos[k] * j->cols + (b * j->S + s) * 4 + k] += w[k];
        else m[pos[k] * j->cols + b] += w[k] / (double)count;
      }
    }
}

/* RoiAlign (opset 10 and 16): each region (x1, y1, x2, y2) of rois, read on the host with its
 * batch index, is cut into output_height x output_width bins, each the average (or the max, as
 * the ONNX reference computes it: of each corner's weighted value) of a grid of bilinear
 * samples. The samples depend only on the rois, so they become a weight matrix per roi built on
 * the host, and the result is one batched tg_matmul of X's rows with it. */
static int op_roi_align(ox_node *n) {
  tg_tensor *x = IN(0), *rois = IN(1), *bidx = IN(2);
  if (!x || tg_ndim(x) != 4 || !rois || tg_ndim(rois) != 2 || tg_dim(rois, 1) != 4 || !bidx || tg_ndim(bidx) != 1 ||
      tg_dim(bidx, 0) != tg_dim(rois, 0))
    return ox_fail(n, TG_ERR_ARG, "needs X (N, C, H, W), rois (R, 4) and batch_indices (R)");
  const char *mode = ox_attr_s(n, "mode", "avg");
  const char *ctm = ox_attr_s(n, "coordinate_transformation_mode", n->opset >= 16 ? "half_pixel" : "output_half_pixel");
  roi_job j = {tg_dim(x, 2), tg_dim(x, 3), ox_attr_i(n, "output_height", 1), ox_attr_i(n, "output_width", 1), 1, 0,
               !strcmp(mode, "max"), !strcmp(ctm, "half_pixel"), ox_attr_f(n, "spatial_scale", 1.0),
               ox_attr_i(n, "sampling_ratio", 0)};
  int64_t R = tg_dim(rois, 0), N = tg_dim(x, 0), C = tg_dim(x, 1);
  if ((!j.max && strcmp(mode, "avg")) || (!j.half_pixel && strcmp(ctm, "output_half_pixel")))
    return ox_fail(n, TG_ERR_ARG, "mode '%s', coordinate_transformation_mode '%s'", mode, ctm);
  if (R < 1 || R > 4096 || j.oh < 1 || j.ow < 1 || j.oh > 1024 || j.ow > 1024 || j.sr < 0 || j.sr > 64 || !(j.scale > 0))
    return ox_fail(n, TG_ERR_ARG, "%lld rois (1 to 4096), output %lld x %lld, sampling_ratio %lld", (long long)R,
                   (long long)j.oh, (long long)j.ow, (long long)j.sr);
  double *box = malloc((size_t)R * 4 * sizeof *box), *m = NULL;
  int64_t *bi = malloc((size_t)R * sizeof *bi);
  int rc = box && bi ? 0 : tg_set_error(TG_ERR_NOMEM, "RoiAlign: out of memory");
  if (!rc && (ox_host_doubles(rois, box, (int)R * 4) != R * 4 || ox_host_ints(bidx, bi, (int)R) != R)) rc = -1;
  for (int64_t r = 0; !rc && r < R; r++) {
    double rh = (box[r * 4 + 3] - box[r * 4 + 1]) * j.scale, rw = (box[r * 4 + 2] - box[r * 4]) * j.scale;
    if (bi[r] < 0 || bi[r] >= N || !isfinite(rh) || !isfinite(rw) || fabs(rh) > 1e6 || fabs(rw) > 1e6)
      rc = ox_fail(n, TG_ERR_ARG, "roi %lld: batch index %lld of %lld, or a box beyond 1e6", (long long)r, (long long)bi[r],
                   (long long)N);
    else if (roi_grid(&j, rh, j.oh) * roi_grid(&j, rw, j.ow) > j.S) j.S = roi_grid(&j, rh, j.oh) * roi_grid(&j, rw, j.ow);
  }
  j.cols = j.oh * j.ow * (j.max ? j.S * 4 : 1);
  if (!rc && (j.S > 4096 || (double)R * (double)(j.H * j.W) * (double)j.cols > (double)ROI_MAX_ELEMS))
    rc = ox_fail(n, TG_ERR_ARG, "the sampling weights would take more than %lld values", (long long)ROI_MAX_ELEMS);
  if (!rc && !(m = calloc((size_t)(R * j.H * j.W * j.cols), sizeof *m))) rc = tg_set_error(TG_ERR_NOMEM, "RoiAlign: out of memory");
  for (int64_t r = 0; !rc && r < R; r++) roi_weights(&j, box + r * 4, m + r * j.H * j.W * j.cols);
  tg_tensor *y = NULL;
  if (!rc) {
    tg_tensor *wt = tg_cast(tg_from_data(m, TG_FLOAT64, (int64_t[]){R, j.H * j.W, j.cols}, 3), tg_get_dtype(x));
    tg_tensor *xr = tg_reshape(tg_index_select(x, 0, tg_cast(bidx, TG_INT64)), (int64_t[]){R, C, j.H * j.W}, 3);
    y = tg_matmul(xr, wt); /* (R, C, cols) */
    if (j.max) y = tg_max(tg_reshape(y, (int64_t[]){R, C, j.oh * j.ow, j.S * 4}, 4), (int[]){-1}, 1, false);
    y = tg_reshape(y, (int64_t[]){R, C, j.oh, j.ow}, 4);
  }
  free(box), free(bi), free(m);
  return rc ? rc : ox_set(n, 0, y);
}

const ox_op ox_ops_grid[] = {
    {"RoiAlign", 10, op_roi_align, "coordinate_transformation_mode,mode,output_height,output_width,sampling_ratio,spatial_scale"},
    {"GridSample", 16, op_grid_sample, "align_corners,mode,padding_mode"},
    {NULL, 0, NULL, NULL},
};
