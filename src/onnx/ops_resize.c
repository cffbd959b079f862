/* ops_resize.c — ONNX Resize (opset 10+) and Upsample. Resizing is separable: axis by axis,
 * the host computes for each output position the input positions it reads (1 tap nearest,
 * 2 linear, 4 cubic) and their weights, exactly as the ONNX reference does (coordinate
 * transformation, nearest rounding, cubic coefficient A, exclude_outside, edge clamping);
 * the axis then becomes sum_t index_select(x, axis, at_t) * w_t. tf_crop_and_resize puts the
 * extrapolation value where the source position falls outside the input. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "onnx/onnx_int.h"
#include "runtime/helpers.h"

#define IN(i) (n->nin > (i) ? n->in[i] : NULL)
#define MAXD OX_MAX_DIMS
#define MAX_OUT ((int64_t)1 << 20) /* positions per axis the host computes taps for */

typedef struct rs_opts {
  const char *ctm, *mode, *nearest;
  double a;            /* cubic coefficient */
  bool exclude;        /* exclude_outside */
  double extrap;       /* extrapolation_value */
} rs_opts;

/* The source coordinate of output position x (ONNX coordinate_transformation_mode). */
static double source_coord(const rs_opts *o, double x, int64_t in, double scale, double r0, double r1) {
  const char *c = o->ctm;
  double out = (double)in * scale; /* the reference's length_resized: not rounded */
  if (!strcmp(c, "half_pixel")) return (x + 0.5) / scale - 0.5;
  if (!strcmp(c, "pytorch_half_pixel")) return out > 1 ? (x + 0.5) / scale - 0.5 : 0;
  if (!strcmp(c, "align_corners")) return out > 1 ? x * (double)(in - 1) / (out - 1) : 0;
  if (!strcmp(c, "asymmetric")) return x / scale;
  if (!strcmp(c, "tf_half_pixel_for_nn")) return (x + 0.5) / scale;
  /* tf_crop_and_resize */
  return out > 1 ? r0 * (double)(in - 1) + x * (r1 - r0) * (double)(in - 1) / (out - 1)
                 : 0.5 * (r0 + r1) * (double)(in - 1);
}

static int64_t nearest_index(const char *m, double x) {
  if (!strcmp(m, "round_prefer_ceil")) return (int64_t)floor(x + 0.5);
  if (!strcmp(m, "floor")) return (int64_t)floor(x);
  if (!strcmp(m, "ceil")) return (int64_t)ceil(x);
  return (int64_t)ceil(x - 0.5); /* round_prefer_floor */
}

/* Taps of one output position: at[0..k), w[0..k). */
static int taps(const rs_opts *o, double x, int64_t in, int64_t *at, double *w) {
  if (!strcmp(o->mode, "nearest")) {
    int64_t i = nearest_index(o->nearest, x);
    at[0] = i < 0 ? 0 : i >= in ? in - 1 : i, w[0] = 1;
    return 1;
  }
  double f = floor(x), r = x - f;
  int k;
  if (!strcmp(o->mode, "linear")) {
    k = 2, at[0] = (int64_t)f, at[1] = (int64_t)f + 1, w[0] = 1 - r, w[1] = r;
  } else { /* cubic */
    double A = o->a, s = r + 1, t = 1 - r, u = 2 - r;
    k = 4;
    for (int j = 0; j < 4; j++) at[j] = (int64_t)f - 1 + j;
    w[0] = ((A * s - 5 * A) * s + 8 * A) * s - 4 * A;
    w[1] = ((A + 2) * r - (A + 3)) * r * r + 1;
    w[2] = ((A + 2) * t - (A + 3)) * t * t + 1;
    w[3] = ((A * u - 5 * A) * u + 8 * A) * u - 4 * A;
  }
  double sum = 0;
  for (int j = 0; j < k; j++) {
    if (o->exclude && (at[j] < 0 || at[j] >= in)) w[j] = 0;
    sum += w[j];
    at[j] = at[j] < 0 ? 0 : at[j] >= in ? in - 1 : at[j];
  }
  if (o->exclude && sum != 0)
    for (int j = 0; j < k; j++) w[j] /= sum;
  return k;
}

/* A host vector as a tensor shaped to run along `axis` of a rank-nd tensor. */
static tg_tensor *along(const void *v, tg_dtype dt, int64_t len, int axis, int nd) {
  int64_t s[MAXD];
  for (int i = 0; i < nd; i++) s[i] = i == axis ? len : 1;
  return tg_from_data(v, dt, s, nd);
}

/* Resize one axis of x to out positions. */
static tg_tensor *resize_axis(ox_node *n, const rs_opts *o, tg_tensor *x, int axis, int64_t out, double scale, double r0,
                              double r1) {
  int nd = tg_ndim(x);
  int64_t in = tg_dim(x, axis);
  if (out < 0 || out > MAX_OUT || in < 1) return ox_fail(n, TG_ERR_ARG, "output size %lld on axis %d", (long long)out, axis), NULL;
  int64_t *at = malloc(4 * (size_t)(out + 1) * sizeof *at);
  double *w = malloc(4 * (size_t)(out + 1) * sizeof *w);
  uint8_t *valid = malloc((size_t)out + 1);
  if (!at || !w || !valid) return free(at), free(w), free(valid), tg_set_error(TG_ERR_NOMEM, "Resize: out of memory"), NULL;
  int k = 1;
  bool crop = !strcmp(o->ctm, "tf_crop_and_resize"), any_invalid = false;
  for (int64_t j = 0; j < out; j++) {
    double xs = source_coord(o, (double)j, in, scale, r0, r1);
    int64_t a4[4];
    double w4[4];
    k = taps(o, xs, in, a4, w4);
    for (int t = 0; t < k; t++) at[t * out + j] = a4[t], w[t * out + j] = w4[t];
    valid[j] = !crop || (xs >= 0 && xs <= (double)(in - 1));
    any_invalid |= !valid[j];
  }
  tg_dtype dt = tg_get_dtype(x);
  tg_tensor *r = NULL;
  for (int t = 0; t < k; t++) {
    int64_t len = out;
    tg_tensor *g = tg_index_select(x, axis, tg_from_data(at + t * out, TG_INT64, &len, 1));
    if (k > 1) {
      double *wt = w + t * out;
      tg_tensor *wv = tg_cast(along(wt, TG_FLOAT64, out, axis, nd), tg_dtype_is_float(dt) ? dt : TG_FLOAT32);
      g = tg_mul(tg_dtype_is_float(dt) ? g : tg_cast(g, TG_FLOAT32), wv);
    }
    r = r ? tg_add(r, g) : g;
  }
  if (k > 1 && !tg_dtype_is_float(dt)) r = tg_cast(tg_round(r), dt);
  if (any_invalid) r = tg_where(along(valid, TG_BOOL, out, axis, nd), r, tg_full_like(r, o->extrap));
  free(at), free(w), free(valid);
  return r;
}

/* Output sizes and scales per axis from `scales` or `sizes` (given for all axes, or `axes`). */
static int resize_plan(ox_node *n, tg_tensor *x, tg_tensor *scales_t, tg_tensor *sizes_t, int64_t *out, double *scale) {
  int nd = tg_ndim(x);
  int64_t axes[MAXD], sz[MAXD];
  double sc[MAXD];
  int na = ox_attr_ints(n, "axes", axes, MAXD);
  if (na < -1) return -1;
  if (na == -1) {
    na = nd;
    for (int i = 0; i < nd; i++) axes[i] = i;
  }
  for (int i = 0; i < nd; i++) out[i] = tg_dim(x, i), scale[i] = 1;
  int ks = scales_t && tg_numel(scales_t) > 0 ? ox_host_doubles(scales_t, sc, MAXD) : 0;
  int kz = sizes_t && tg_numel(sizes_t) > 0 ? ox_host_ints(sizes_t, sz, MAXD) : 0;
  if (ks < 0 || kz < 0) return -1;
  if ((ks && ks != na) || (kz && kz != na) || (!ks && !kz))
    return ox_fail(n, TG_ERR_ARG, "needs scales or sizes for %d axes (got %d scales, %d sizes)", na, ks, kz);
  for (int i = 0; i < na; i++) {
    int a = ox_axis(n, axes[i], nd);
    if (a < 0) return -1;
    int64_t in = tg_dim(x, a);
    if (kz) out[a] = sz[i], scale[a] = in ? (double)sz[i] / (double)in : 1;
    else if (!(sc[i] > 0) || sc[i] * (double)in > (double)MAX_OUT)
      return ox_fail(n, TG_ERR_ARG, "scale %g on axis %d", sc[i], a);
    else out[a] = (int64_t)floor((double)in * sc[i]), scale[a] = sc[i];
  }
  return 0;
}

static int resize_run(ox_node *n, const rs_opts *o, tg_tensor *x, tg_tensor *roi, tg_tensor *scales, tg_tensor *sizes) {
  int nd = tg_ndim(x);
  int64_t out[MAXD];
  double scale[MAXD], rv[2 * MAXD];
  if (nd < 0 || resize_plan(n, x, scales, sizes, out, scale)) return -1;
  bool crop = !strcmp(o->ctm, "tf_crop_and_resize");
  int kr = crop && roi && tg_numel(roi) > 0 ? ox_host_doubles(roi, rv, 2 * MAXD) : 0;
  if (kr < 0) return -1;
  if (crop && kr != 2 * nd) return ox_fail(n, TG_ERR_ARG, "tf_crop_and_resize needs a roi of %d values", 2 * nd);
  for (int a = 0; a < nd && x; a++) {
    if (out[a] == tg_dim(x, a) && scale[a] == 1 && !crop) continue;
    x = resize_axis(n, o, x, a, out[a], scale[a], crop ? rv[a] : 0, crop ? rv[nd + a] : 1);
  }
  return ox_set(n, 0, x);
}

static int op_resize(ox_node *n) {
  rs_opts o = {.ctm = ox_attr_s(n, "coordinate_transformation_mode", n->opset < 11 ? "asymmetric" : "half_pixel"),
               .mode = ox_attr_s(n, "mode", "nearest"),
               .nearest = ox_attr_s(n, "nearest_mode", n->opset < 11 ? "floor" : "round_prefer_floor"),
               .a = ox_attr_f(n, "cubic_coeff_a", -0.75),
               .exclude = ox_attr_i(n, "exclude_outside", 0) != 0,
               .extrap = ox_attr_f(n, "extrapolation_value", 0.0)};
  static const char *ctms[] = {"half_pixel", "pytorch_half_pixel", "align_corners", "asymmetric",
                               "tf_half_pixel_for_nn", "tf_crop_and_resize"};
  bool known = false;
  for (int i = 0; i < 6; i++) known |= !strcmp(o.ctm, ctms[i]);
  if (!known) return ox_fail(n, TG_ERR_ARG, "coordinate_transformation_mode '%s' is not supported", o.ctm);
  if (strcmp(o.mode, "nearest") && strcmp(o.mode, "linear") && strcmp(o.mode, "cubic"))
    return ox_fail(n, TG_ERR_ARG, "mode '%s' is not supported", o.mode);
  if (ox_attr_i(n, "antialias", 0)) return ox_fail(n, TG_ERR_ARG, "antialias is not supported");
  if (strcmp(ox_attr_s(n, "keep_aspect_ratio_policy", "stretch"), "stretch"))
    return ox_fail(n, TG_ERR_ARG, "keep_aspect_ratio_policy other than stretch is not supported");
  if (n->opset < 11) return resize_run(n, &o, IN(0), NULL, IN(1), NULL);
  return resize_run(n, &o, IN(0), IN(1), IN(2), IN(3));
}

/* Upsample (opset 9): scales as an input, asymmetric coordinates, floor for nearest. */
static int op_upsample(ox_node *n) {
  const char *mode = ox_attr_s(n, "mode", "nearest");
  rs_opts o = {.ctm = "asymmetric", .mode = !strcmp(mode, "bilinear") ? "linear" : mode, .nearest = "floor", .a = -0.75};
  return resize_run(n, &o, IN(0), NULL, IN(1), NULL);
}

const ox_op ox_ops_resize[] = {
    {"Resize", 10, op_resize,
     "antialias,axes,coordinate_transformation_mode,cubic_coeff_a,exclude_outside,extrapolation_value,"
     "keep_aspect_ratio_policy,mode,nearest_mode"},
    {"Upsample", 9, op_upsample, "mode"},
    {NULL, 0, NULL, NULL},
};
