/* pool.c — max and average pooling over 1 to 3 spatial axes, max pooling's indices and
 * max_unpool, PyTorch's semantics (ceil_mode, dilation, count_include_pad, divisor_override)
 * plus tinygrad's asymmetric padding. The windows are views of the padded input (windows.c),
 * so a pool is one reduction kernel.
 *
 * Max pooling carries its own derivative (GRADFN): the gradient goes to the first maximum of
 * each window, the element its index names, as in PyTorch (the generic rule of a max shares it
 * among tied elements). max_unpool writes each value back through the same windows (no
 * scatter: each output position looks at the few windows that cover it), and its gradient is
 * PyTorch's: a gather of the output gradient at the indices. */
#include <math.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

#include "grad/gradient.h"
#include "nn/windows.h"
#include "tensor/shape.h"

/* The geometry of a pool over nsp axes: kernel, stride, dilation, the padding before and after
 * each axis (after: the user's; extra: the room ceil_mode's last window needs beyond it), the
 * input sizes and the window counts. */
typedef struct pool_geom {
  int nsp;
  int64_t k[NN_MAX_NSP], s[NN_MAX_NSP], d[NN_MAX_NSP], before[NN_MAX_NSP], after[NN_MAX_NSP], extra[NN_MAX_NSP];
  int64_t in[NN_MAX_NSP], o[NN_MAX_NSP];
} pool_geom;

/* Function names by spatial axes (index 0: an invalid count). */
static const char *const max_names[] = {"max_pool", "max_pool1d", "max_pool2d", "max_pool3d"};
static const char *const avg_names[] = {"avg_pool", "avg_pool1d", "avg_pool2d", "avg_pool3d"};
static const char *const unpool_names[] = {"max_unpool", "max_unpool1d", "max_unpool2d", "max_unpool3d"};

static int name_index(int nsp) { return nsp >= 1 && nsp <= NN_MAX_NSP ? nsp : 0; }

/* The last nsp axes of a tensor of rank nd, for reductions. */
static void last_axes(int nd, int nsp, int *axes) {
  for (int j = 0; j < nsp; j++) axes[j] = nd - nsp + j;
}

/* t (..., o..) → (..., o.., 1..): broadcast against windows (..., o.., k..). */
static tg_tensor *per_window(tg_tensor *t, int nsp) {
  int64_t sh[TG_MAX_DIMS];
  int nd = tg_ndim(t);
  for (int a = 0; a < nd; a++) sh[a] = tg_dim(t, a);
  for (int j = 0; j < nsp; j++) sh[nd + j] = 1;
  return tg_reshape(t, sh, nd + nsp);
}

/* The padded input's sizes: in + before + after + extra. */
static void padded_sizes(const pool_geom *g, int64_t *out) {
  for (int j = 0; j < g->nsp; j++) out[j] = g->in[j] + g->before[j] + g->after[j] + g->extra[j];
}

static void all_after(const pool_geom *g, int64_t *out) {
  for (int j = 0; j < g->nsp; j++) out[j] = g->after[j] + g->extra[j];
}

/* x padded with `fill` (ceil_mode's room too) and cut into windows (..., o.., k..). */
static tg_tensor *pool_view(tg_tensor *x, const pool_geom *g, double fill) {
  int64_t after[NN_MAX_NSP];
  all_after(g, after);
  return pool_windows(pad_or_crop(x, g->before, after, g->nsp, fill), g->k, g->s, g->d, g->nsp);
}

/* ---------------------------------------------------------------- argument checks */

/* x has nsp axes to pool, a float dtype, and room for the window views' extra axes. */
static bool check_input(const char *op, tg_tensor *x, int nsp) {
  char b[256];
  if (!name_index(nsp)) return tensor_error("%s: %d spatial axes, expected 1, 2 or 3", op, nsp), false;
  if (tg_ndim(x) < nsp) return tensor_error("%s: x %s needs at least %d axes", op, NN_SHAPE(x, b), nsp), false;
  if (tg_ndim(x) > TG_MAX_DIMS - 2 * nsp) /* pool_windows' views have rank ndim + 2 nsp */
    return shape_error("%s: x has rank %d, at most %d can be pooled", op, tg_ndim(x), TG_MAX_DIMS - 2 * nsp), false;
  return nn_need_float(op, "x", x);
}

/* One axis: PyTorch's output size (pooling_output_shape_pad_lr) and ceil_mode's extra room.
 * The padded input is L = in + before + after and the dilated kernel `span`. */
static bool axis_size(const char *op, tg_tensor *x, pool_geom *g, int j, bool ceil_mode) {
  int64_t span, len, last, end, axis = tg_ndim(x) - g->nsp + j;
  char b[256], c[128], e[128];
  if (!ck_mul(g->d[j], g->k[j] - 1, &span) || !ck_add(span, 1, &span) || !ck_add(g->in[j], g->before[j], &len) ||
      !ck_add(len, g->after[j], &len) || span > len)
    return tensor_error("%s: kernel %s (dilation %s) larger than the padded input %s (padding %lld before, %lld "
                        "after, axis %lld)", op, nn_fmt_ints(c, sizeof c, g->k, g->nsp),
                        nn_fmt_ints(e, sizeof e, g->d, g->nsp), NN_SHAPE(x, b), (long long)g->before[j],
                        (long long)g->after[j], (long long)axis), false;
  int64_t q = (len - span) / g->s[j], r = (len - span) % g->s[j];
  g->o[j] = q + 1 + (ceil_mode && r); /* ceil: a last window that overhangs the padding */
  if (ceil_mode && r && (g->o[j] - 1 >= (g->in[j] + g->before[j] + g->s[j] - 1) / g->s[j]))
    g->o[j]--; /* it would start after the input (in its padding): PyTorch drops it */
  if (!ck_mul(g->o[j] - 1, g->s[j], &last) || !ck_add(last, span, &end)) return shape_error("%s: sizes overflow", op), false;
  g->extra[j] = end > len ? end - len : 0;
  return nn_check_windows(op, x, len + g->extra[j], g->k[j], g->s[j], g->d[j], (int)axis);
}

/* The geometry of a pool, or false with the error set. Padding is at most half the kernel
 * (PyTorch's rule: every window keeps a tap inside x). */
static bool pool_geometry(const char *op, tg_tensor *x, int nsp, const int *kernel, const tg_pool_opts *opts,
                          pool_geom *g) {
  static const tg_pool_opts defaults = {0};
  const tg_pool_opts *o = opts ? opts : &defaults;
  char a[128], b[128], c[128];
  g->nsp = nsp;
  if (!check_input(op, x, nsp)) return false;
  if (!kernel) return tensor_error("%s: kernel is NULL", op), false;
  if (!nn_spatial_param(op, "kernel", kernel, nsp, 1, 1, g->k) ||
      !nn_spatial_param(op, "stride", o->stride ? o->stride : kernel, nsp, 1, 1, g->s) ||
      !nn_spatial_param(op, "padding", o->padding, nsp, 0, 0, g->before) ||
      !nn_spatial_param(op, "padding_after", o->padding_after ? o->padding_after : o->padding, nsp, 0, 0, g->after) ||
      !nn_spatial_param(op, "dilation", o->dilation, nsp, 1, 1, g->d))
    return false;
  for (int j = 0; j < nsp; j++)
    if (g->before[j] > g->k[j] / 2 || g->after[j] > g->k[j] / 2)
      return tensor_error("%s: padding %s before, %s after must be at most half the kernel %s", op,
                          nn_fmt_ints(a, sizeof a, g->before, nsp), nn_fmt_ints(b, sizeof b, g->after, nsp),
                          nn_fmt_ints(c, sizeof c, g->k, nsp)), false;
  for (int j = 0; j < nsp; j++) {
    g->in[j] = tg_dim(x, tg_ndim(x) - nsp + j);
    if (!axis_size(op, x, g, j, o->ceil_mode)) return false;
  }
  return true;
}

/* ---------------------------------------------------------------- max pooling */

/* Positions are int32 when they fit; `big` is above every position (exact in a double). */
static tg_dtype position_dtype(const pool_geom *g, double *big) {
  int64_t vol = 1;
  for (int j = 0; j < g->nsp; j++) vol *= g->in[j]; /* ≤ numel(x) */
  *big = vol < INT32_MAX ? (double)INT32_MAX : 0x1p62;
  return vol < INT32_MAX ? TG_INT32 : TG_INT64;
}

/* The flat input position of every window tap (o.., k..); `big` for taps in the padding. */
static tg_tensor *tap_positions(const pool_geom *g) {
  int64_t vol = 1, after[NN_MAX_NSP];
  double big;
  tg_dtype dt = position_dtype(g, &big);
  for (int j = 0; j < g->nsp; j++) vol *= g->in[j];
  all_after(g, after);
  tg_tensor *pos = tg_reshape(nn_iota(vol, dt), g->in, g->nsp);
  return pool_windows(pad_or_crop(pos, g->before, after, g->nsp, big), g->k, g->s, g->d, g->nsp);
}

/* The flat input position of each window's maximum m (..., o..): the lowest position of a tap
 * equal to m (the first in row-major order, PyTorch's), or of a NaN tap the highest (PyTorch's
 * last NaN), found as the lowest key: position, -1 - position for NaN, `big` for the others. */
static tg_tensor *max_positions(tg_tensor *win, tg_tensor *m, const pool_geom *g, tg_tensor *pos) {
  double big;
  tg_dtype dt = position_dtype(g, &big);
  int axes[NN_MAX_NSP];
  tg_tensor *key = tg_where(tg_eq(win, per_window(m, g->nsp)), pos, nn_const(NULL, 0, big, dt));
  key = tg_where(tg_isnan(win), tg_bitwise_not(pos), key); /* ~p = -1 - p */
  last_axes(tg_ndim(win), g->nsp, axes);
  tg_tensor *lowest = tg_min(key, axes, g->nsp, false);
  tg_tensor *negative = tg_lt(lowest, nn_const(NULL, 0, 0, dt));
  return tg_where(negative, tg_bitwise_not(lowest), lowest);
}

/* The tap (0..K-1, row-major within the window) of each window's maximum m: the first tap equal
 * to m, never one in the padding; the element max_positions names, except in a window holding
 * NaN, which gets no tap. Taps are loop indices in the kernels and a window's tap is reduced
 * once: the gradient costs no more than the generic rule's count of ties did (performance.md,
 * "Max pooling's own derivative"). Returns the tap of every window position and, in *at, the
 * chosen tap per window (..., o.., 1..). */
static tg_tensor *max_taps(tg_tensor *win, tg_tensor *m, const pool_geom *g, tg_tensor **at) {
  int64_t ntap = 1, after[NN_MAX_NSP];
  int axes[NN_MAX_NSP];
  bool padded = false;
  for (int j = 0; j < g->nsp; j++) ntap *= g->k[j], padded |= g->before[j] || g->after[j] || g->extra[j];
  tg_dtype dt = ntap < INT32_MAX ? TG_INT32 : TG_INT64; /* ntap fits: the windows (.., k..) exist */
  tg_tensor *tap = tg_reshape(nn_iota(ntap, dt), g->k, g->nsp), *none = nn_const(NULL, 0, (double)ntap, dt);
  tg_tensor *key = tg_where(tg_eq(win, per_window(m, g->nsp)), tap, none);
  if (padded) { /* a window of -inf padding and -inf values: the first tap inside x, like max_positions */
    all_after(g, after);
    tg_tensor *inside = pad_or_crop(nn_const(g->in, g->nsp, 1, TG_BOOL), g->before, after, g->nsp, 0);
    key = tg_where(pool_windows(inside, g->k, g->s, g->d, g->nsp), key, none);
  }
  last_axes(tg_ndim(win), g->nsp, axes);
  *at = tg_min(key, axes, g->nsp, true);
  return tap;
}

/* GRADFN rule: u = GRADFN(m, x), arg = [id, nsp, k, s, d, before, after + extra]: the gradient of
 * a window goes to the tap of its maximum (the element its index names), as a product with the
 * tap's 0/1 (a select compiled to a branch per element and ran 3x slower). */
static void max_pool_grad_rule(uop *u, uop *gy, uop **d) {
  pool_geom g = {.nsp = (int)u->arg[1]};
  int nsp = g.nsp;
  for (int j = 0; j < nsp; j++) {
    const int64_t *a = u->arg + 2 + j;
    g.k[j] = a[0], g.s[j] = a[nsp], g.d[j] = a[2 * nsp], g.before[j] = a[3 * nsp], g.after[j] = a[4 * nsp];
    g.in[j] = uop_shape(u->src[1])[uop_ndim(u->src[1]) - nsp + j], g.o[j] = uop_shape(u)[uop_ndim(u) - nsp + j];
  }
  tg_scope *s = tg_scope_begin();
  tg_tensor *x = tensor_wrap(u->src[1]), *m = tensor_wrap(u->src[0]), *gm = tensor_wrap(gy), *at = NULL;
  tg_tensor *tap = max_taps(pool_view(x, &g, -INFINITY), m, &g, &at);
  tg_tensor *v = tg_mul(per_window(gm, nsp), tg_cast(tg_eq(tap, at), tg_get_dtype(gm)));
  int64_t padded[NN_MAX_NSP], neg_before[NN_MAX_NSP], neg_after[NN_MAX_NSP];
  padded_sizes(&g, padded);
  for (int j = 0; j < nsp; j++) neg_before[j] = -g.before[j], neg_after[j] = -g.after[j];
  tg_tensor *dx = pool_windows_back(v, padded, g.k, g.s, g.d, nsp, tg_sum, 0);
  dx = pad_or_crop(dx, neg_before, neg_after, nsp, 0);
  d[1] = dx ? uop_pool_add(dx->u) : NULL; /* outlives the scope: the gradient walk's pool owns it */
  tg_scope_end(s);
}

/* m wrapped so that autograd uses max_pool_grad_rule (the geometry in the node's arg; `after`
 * includes ceil_mode's extra room). */
static tg_tensor *with_max_grad(tg_tensor *m, tg_tensor *x, const pool_geom *g) {
  static _Atomic int registered = -1; /* any thread may register it first: the same id */
  int rule_id = atomic_load(&registered), nsp = g->nsp;
  if (rule_id < 0) atomic_store(&registered, rule_id = grad_register_custom(max_pool_grad_rule));
  if (!m || rule_id < 0) return m;
  int64_t arg[2 + 5 * NN_MAX_NSP] = {rule_id, nsp};
  for (int j = 0; j < nsp; j++) {
    int64_t *a = arg + 2 + j;
    a[0] = g->k[j], a[nsp] = g->s[j], a[2 * nsp] = g->d[j], a[3 * nsp] = g->before[j];
    a[4 * nsp] = g->after[j] + g->extra[j];
  }
  size_t mark = uop_pool_mark();
  uop *src[2] = {m->u, x->u};
  tg_tensor *r = tensor_wrap(uop_new(OP_GRADFN, m->u->dtype, src, 2, arg, 2 + 5 * nsp));
  uop_pool_release(mark);
  return r;
}

tg_tensor *tg_max_pool(tg_tensor *x, int nsp, const int *kernel, const tg_pool_opts *opts, tg_tensor **indices) {
  const char *op = max_names[name_index(nsp)];
  if (indices) *indices = NULL;
  if (!x) return null_arg(op);
  pool_geom g;
  if (!pool_geometry(op, x, nsp, kernel, opts, &g)) return NULL;
  tg_scope *s = tg_scope_begin();
  int axes[NN_MAX_NSP];
  tg_tensor *win = pool_view(x, &g, -INFINITY);
  last_axes(tg_ndim(win), nsp, axes);
  tg_tensor *m = win ? tg_max(win, axes, nsp, false) : NULL;
  tg_tensor *idx = indices && m ? tg_cast(max_positions(win, m, &g, tap_positions(&g)), TG_INT64) : NULL;
  tg_tensor *r = tg_keep(with_max_grad(m, x, &g));
  if (indices && r) *indices = idx ? tg_keep(idx) : NULL;
  if (indices && r && !idx) tg_free(r), r = NULL;
  tg_scope_end(s);
  return r;
}

/* ---------------------------------------------------------------- average pooling */

/* The divisor of each window: its taps inside the counted region (x, plus the user's padding
 * unless exclude_pad; never ceil_mode's extra room), as int64 (o..). */
static tg_tensor *window_counts(const pool_geom *g, bool exclude_pad) {
  int64_t zero[NN_MAX_NSP] = {0};
  int axes[NN_MAX_NSP];
  tg_tensor *ones = nn_const(g->in, g->nsp, 1, TG_INT32);
  tg_tensor *region = pad_or_crop(ones, g->before, g->after, g->nsp, exclude_pad ? 0 : 1);
  region = pad_or_crop(region, zero, g->extra, g->nsp, 0);
  last_axes(2 * g->nsp, g->nsp, axes);
  return tg_sum(pool_windows(region, g->k, g->s, g->d, g->nsp), axes, g->nsp, false);
}

/* Every window counts the same taps (the kernel's): no padding it could exclude, no room. */
static bool uniform_counts(const pool_geom *g, bool exclude_pad) {
  bool uniform = true;
  for (int j = 0; j < g->nsp; j++) uniform &= !g->extra[j] && (!exclude_pad || (!g->before[j] && !g->after[j]));
  return uniform;
}

tg_tensor *tg_avg_pool(tg_tensor *x, int nsp, const int *kernel, const tg_pool_opts *opts) {
  const char *op = avg_names[name_index(nsp)];
  if (!x) return null_arg(op);
  pool_geom g;
  if (!pool_geometry(op, x, nsp, kernel, opts, &g)) return NULL;
  bool exclude = opts && opts->exclude_pad;
  tg_scope *s = tg_scope_begin();
  int axes[NN_MAX_NSP];
  tg_tensor *win = pool_view(x, &g, 0), *r;
  last_axes(tg_ndim(win), nsp, axes);
  if (opts && opts->divisor) r = tg_div_s(tg_sum(win, axes, nsp, false), opts->divisor);
  else if (uniform_counts(&g, exclude)) r = tg_mean(win, axes, nsp, false);
  else r = tg_div(tg_sum(win, axes, nsp, false), tg_cast(window_counts(&g, exclude), tg_get_dtype(x)));
  return nn_finish(s, win ? r : NULL);
}

/* ---------------------------------------------------------------- fixed-rank wrappers */

static tg_tensor *max_simple(tg_tensor *x, int nsp, const int *kernel, const int *stride, const int *padding) {
  tg_pool_opts o = {.stride = stride, .padding = padding};
  return tg_max_pool(x, nsp, kernel, &o, NULL);
}

static tg_tensor *avg_simple(tg_tensor *x, int nsp, const int *kernel, const int *stride, const int *padding) {
  tg_pool_opts o = {.stride = stride, .padding = padding};
  return tg_avg_pool(x, nsp, kernel, &o);
}

tg_tensor *tg_max_pool1d(tg_tensor *x, const int kernel[1], const int stride[1], const int padding[1]) {
  return max_simple(x, 1, kernel, stride, padding);
}
tg_tensor *tg_max_pool2d(tg_tensor *x, const int kernel[2], const int stride[2], const int padding[2]) {
  return max_simple(x, 2, kernel, stride, padding);
}
tg_tensor *tg_max_pool3d(tg_tensor *x, const int kernel[3], const int stride[3], const int padding[3]) {
  return max_simple(x, 3, kernel, stride, padding);
}
tg_tensor *tg_avg_pool1d(tg_tensor *x, const int kernel[1], const int stride[1], const int padding[1]) {
  return avg_simple(x, 1, kernel, stride, padding);
}
tg_tensor *tg_avg_pool2d(tg_tensor *x, const int kernel[2], const int stride[2], const int padding[2]) {
  return avg_simple(x, 2, kernel, stride, padding);
}
tg_tensor *tg_avg_pool3d(tg_tensor *x, const int kernel[3], const int stride[3], const int padding[3]) {
  return avg_simple(x, 3, kernel, stride, padding);
}

/* ---------------------------------------------------------------- max_unpool */

/* Which window taps receive their window's value: the tap whose flat output position is the
 * window's index (bool, (..., o.., k..)). g describes windows over the padded output. */
static tg_tensor *unpool_hits(tg_tensor *indices, const pool_geom *g) {
  int64_t vol = 1, after[NN_MAX_NSP], one[NN_MAX_NSP] = {1, 1, 1};
  for (int j = 0; j < g->nsp; j++) vol *= g->in[j];
  all_after(g, after);
  tg_tensor *pos = tg_reshape(nn_iota(vol, TG_INT64), g->in, g->nsp);
  pos = pool_windows(pad_or_crop(pos, g->before, after, g->nsp, -1), g->k, g->s, one, g->nsp);
  return tg_eq(pos, per_window(tg_cast(indices, TG_INT64), g->nsp));
}

/* Where windows overlap, two may write one position: keep the last window's (PyTorch's CPU
 * order) by maxing window numbers onto the positions and keeping the hits that won. */
static tg_tensor *last_writer(tg_tensor *hits, const pool_geom *g) {
  int64_t nwin = 1, padded[NN_MAX_NSP], one[NN_MAX_NSP] = {1, 1, 1}, sh[TG_MAX_DIMS];
  for (int j = 0; j < g->nsp; j++) nwin *= g->o[j], sh[j] = g->o[j], sh[g->nsp + j] = 1;
  padded_sizes(g, padded);
  tg_tensor *number = tg_reshape(nn_iota(nwin, TG_INT64), sh, 2 * g->nsp);
  tg_tensor *claim = tg_where(hits, number, nn_const(NULL, 0, -1, TG_INT64));
  tg_tensor *winner = pool_windows_back(claim, padded, g->k, g->s, one, g->nsp, tg_max, -1);
  return tg_logical_and(hits, tg_eq(pool_windows(winner, g->k, g->s, one, g->nsp), number));
}

/* The geometry's arg of the GRADFN: [id, nsp, k, s, before, after + extra]. */
static void unpool_geom_from(const uop *u, pool_geom *g) {
  int nsp = g->nsp = (int)u->arg[1];
  for (int j = 0; j < nsp; j++) {
    const int64_t *a = u->arg + 2 + j;
    g->k[j] = a[0], g->s[j] = a[nsp], g->d[j] = 1, g->before[j] = a[2 * nsp], g->after[j] = a[3 * nsp], g->extra[j] = 0;
    g->in[j] = uop_shape(u)[uop_ndim(u) - nsp + j], g->o[j] = uop_shape(u->src[1])[uop_ndim(u->src[1]) - nsp + j];
  }
}

/* GRADFN rule: u = GRADFN(y, x, indices): dx = the output gradient at each index (PyTorch's
 * gather), read through the same windows. */
static void unpool_grad_rule(uop *u, uop *gy, uop **d) {
  pool_geom g;
  int axes[NN_MAX_NSP];
  unpool_geom_from(u, &g);
  tg_scope *s = tg_scope_begin();
  tg_tensor *gw = pool_view(tensor_wrap(gy), &g, 0), *hits = unpool_hits(tensor_wrap(u->src[2]), &g);
  last_axes(tg_ndim(gw), g.nsp, axes);
  tg_tensor *dx = tg_sum(tg_where(hits, gw, nn_const(NULL, 0, 0, gy->dtype)), axes, g.nsp, false);
  d[1] = dx ? uop_pool_add(dx->u) : NULL;
  tg_scope_end(s);
}

static tg_tensor *with_unpool_grad(tg_tensor *y, tg_tensor *x, tg_tensor *indices, const pool_geom *g) {
  static _Atomic int registered = -1;
  int rule_id = atomic_load(&registered), nsp = g->nsp;
  if (rule_id < 0) atomic_store(&registered, rule_id = grad_register_custom(unpool_grad_rule));
  if (!y || rule_id < 0) return y;
  int64_t arg[2 + 4 * NN_MAX_NSP] = {rule_id, nsp};
  for (int j = 0; j < nsp; j++) {
    int64_t *a = arg + 2 + j;
    a[0] = g->k[j], a[nsp] = g->s[j], a[2 * nsp] = g->before[j], a[3 * nsp] = g->after[j] + g->extra[j];
  }
  size_t mark = uop_pool_mark();
  uop *src[3] = {y->u, x->u, indices->u};
  tg_tensor *r = tensor_wrap(uop_new(OP_GRADFN, y->u->dtype, src, 3, arg, 2 + 4 * nsp));
  uop_pool_release(mark);
  return r;
}

/* x and indices, the output size (PyTorch's rule: within a stride of (o-1)s - 2p + k) and the
 * windows over the padded output, with room after it for the last window. */
static bool unpool_geometry(const char *op, tg_tensor *x, tg_tensor *indices, int nsp, const int *kernel,
                            const int *stride, const int *padding, const int64_t *output_size, pool_geom *g) {
  char a[256], b[256];
  int64_t vol = 1;
  g->nsp = nsp;
  if (!check_input(op, x, nsp)) return false;
  if (tg_dtype_is_float(tg_get_dtype(indices)) || tg_get_dtype(indices) == TG_BOOL)
    return tensor_error("%s: indices must be an integer tensor, got %s", op, tg_dtype_name(tg_get_dtype(indices))), false;
  if (!nn_shape_is(indices, uop_shape(x->u), tg_ndim(x)))
    return tensor_error("%s: indices %s must have the shape of x %s", op, NN_SHAPE(indices, a), NN_SHAPE(x, b)), false;
  if (!kernel) return tensor_error("%s: kernel is NULL", op), false;
  if (!nn_spatial_param(op, "kernel", kernel, nsp, 1, 1, g->k) ||
      !nn_spatial_param(op, "stride", stride ? stride : kernel, nsp, 1, 1, g->s) ||
      !nn_spatial_param(op, "padding", padding, nsp, 0, 0, g->before))
    return false;
  for (int j = 0; j < nsp; j++) {
    int64_t o = g->o[j] = tg_dim(x, tg_ndim(x) - nsp + j), full, span, out, diff, len;
    g->d[j] = 1, g->after[j] = g->before[j];
    if (o < 1) return tensor_error("%s: x %s has no windows to unpool on axis %d", op, NN_SHAPE(x, a), j), false;
    /* the last window ends at (o-1)s + k of the padded output, which is out + 2p */
    bool sized = ck_mul(o - 1, g->s[j], &span) && ck_add(span, g->k[j], &span) && ck_sub(span, 2 * g->before[j], &full);
    if (!sized) return shape_error("%s: the output size of x %s overflows int64", op, NN_SHAPE(x, a)), false;
    out = output_size ? output_size[j] : full;
    if (out < 1 || !ck_sub(out, full, &diff) || diff <= -g->s[j] || diff >= g->s[j])
      return tensor_error("%s: output size %lld on spatial axis %d must be at least 1 and less than a stride (%lld) "
                          "from the default %lld for x %s", op, (long long)out, j, (long long)g->s[j],
                          (long long)full, NN_SHAPE(x, a)), false;
    if (!ck_mul(vol, out, &vol) || !ck_add(out, 2 * g->before[j], &len))
      return shape_error("%s: output size %lld overflows int64", op, (long long)out), false;
    g->in[j] = out, g->extra[j] = span > len ? span - len : 0;
    if (!nn_check_windows(op, x, len + g->extra[j], g->k[j], g->s[j], 1, tg_ndim(x) - nsp + j)) return false;
  }
  return true;
}

tg_tensor *tg_max_unpool(tg_tensor *x, tg_tensor *indices, int nsp, const int *kernel, const int *stride,
                         const int *padding, const int64_t *output_size) {
  const char *op = unpool_names[name_index(nsp)];
  if (!x || !indices) return null_arg(op);
  pool_geom g;
  if (!unpool_geometry(op, x, indices, nsp, kernel, stride, padding, output_size, &g)) return NULL;
  tg_scope *s = tg_scope_begin();
  int64_t padded[NN_MAX_NSP], neg_before[NN_MAX_NSP], neg_after[NN_MAX_NSP], one[NN_MAX_NSP] = {1, 1, 1};
  bool overlap = false;
  for (int j = 0; j < nsp; j++) {
    neg_before[j] = -g.before[j], neg_after[j] = -(g.after[j] + g.extra[j]);
    overlap |= g.k[j] > g.s[j];
  }
  padded_sizes(&g, padded);
  tg_tensor *hits = unpool_hits(indices, &g);
  if (overlap) hits = last_writer(hits, &g);
  tg_tensor *v = tg_where(hits, per_window(x, nsp), nn_const(NULL, 0, 0, tg_get_dtype(x)));
  tg_tensor *y = pad_or_crop(pool_windows_back(v, padded, g.k, g.s, one, nsp, tg_sum, 0), neg_before, neg_after, nsp, 0);
  return nn_finish(s, with_unpool_grad(y, x, indices, &g));
}

tg_tensor *tg_max_unpool1d(tg_tensor *x, tg_tensor *indices, const int kernel[1], const int stride[1],
                           const int padding[1], const int64_t output_size[1]) {
  return tg_max_unpool(x, indices, 1, kernel, stride, padding, output_size);
}
tg_tensor *tg_max_unpool2d(tg_tensor *x, tg_tensor *indices, const int kernel[2], const int stride[2],
                           const int padding[2], const int64_t output_size[2]) {
  return tg_max_unpool(x, indices, 2, kernel, stride, padding, output_size);
}
tg_tensor *tg_max_unpool3d(tg_tensor *x, tg_tensor *indices, const int kernel[3], const int stride[3],
                           const int padding[3], const int64_t output_size[3]) {
  return tg_max_unpool(x, indices, 3, kernel, stride, padding, output_size);
}
