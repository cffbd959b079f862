/* windows.c — sliding windows as views (tinygrad's Tensor._pool) and their adjoint, shared by
 * conv.c and pool.c (see windows.h). A window view is made of movement ops only (pad, shrink,
 * reshape, expand, permute), so a convolution or a pool over it is one reduction kernel with
 * the windows as index arithmetic: no im2col copy. */
#include <stdio.h>
#include <string.h>

#include "nn/windows.h"
#include "tensor/shape.h"

static int64_t ceildiv(int64_t a, int64_t b) { return (a + b - 1) / b; }

tg_tensor *nn_finish(tg_scope *s, tg_tensor *r) {
  r = tg_keep(r);
  tg_scope_end(s);
  return r;
}

tg_tensor *nn_iota(int64_t n, tg_dtype dt) {
  size_t mark = uop_pool_mark();
  tg_tensor *r = tensor_wrap(ucast(uop_new(OP_IOTA, TG_INT64, NULL, 0, &n, 1), dt));
  uop_pool_release(mark);
  return r;
}

tg_tensor *nn_const(const int64_t *shape, int nd, double v, tg_dtype dt) {
  int64_t ones[TG_MAX_DIMS];
  for (int i = 0; i < nd; i++) ones[i] = 1;
  size_t mark = uop_pool_mark();
  tg_tensor *r = tensor_wrap(ushape_expand(ushape_reshape(uop_const(dt, v), ones, nd), shape, nd));
  uop_pool_release(mark);
  return r;
}

const char *nn_fmt_ints(char *buf, size_t cap, const int64_t *v, int n) {
  size_t at = (size_t)snprintf(buf, cap, "(");
  for (int i = 0; i < n && at < cap; i++) at += (size_t)snprintf(buf + at, cap - at, "%s%lld", i ? ", " : "", (long long)v[i]);
  if (at < cap) snprintf(buf + at, cap - at, ")");
  return buf;
}

bool nn_spatial_param(const char *op, const char *what, const int *p, int nsp, int dflt, int lo, int64_t *out) {
  bool ok = true;
  for (int j = 0; j < nsp; j++) ok &= (out[j] = p ? p[j] : dflt) >= lo;
  if (ok) return true;
  char b[128];
  tensor_error("%s: %s must be >= %d, got %s", op, what, lo, nn_fmt_ints(b, sizeof b, out, nsp));
  return false;
}

bool nn_check_windows(const char *op, tg_tensor *x, int64_t in, int64_t k, int64_t s, int64_t d, int axis) {
  window_axis wa;
  char b[256];
  if (window_axis_sizes(in, k, s, d, &wa)) return true;
  shape_error("%s: a kernel of %lld (stride %lld, dilation %lld) over %lld positions on axis %d of x %s: the window "
              "sizes overflow int64", op, (long long)k, (long long)s, (long long)d, (long long)in, axis, NN_SHAPE(x, b));
  return false;
}

tg_tensor *pad_or_crop(tg_tensor *x, const int64_t *before, const int64_t *after, int nsp, double value) {
  if (!x) return NULL;
  int nd = tg_ndim(x), lead = nd - nsp;
  int64_t pb[TG_MAX_DIMS] = {0}, pa[TG_MAX_DIMS] = {0}, st[TG_MAX_DIMS] = {0}, en[TG_MAX_DIMS];
  bool pads = false, crops = false;
  for (int i = 0; i < nsp; i++) {
    pb[lead + i] = before[i] > 0 ? before[i] : 0;
    pa[lead + i] = after[i] > 0 ? after[i] : 0;
    pads |= before[i] > 0 || after[i] > 0, crops |= before[i] < 0 || after[i] < 0;
  }
  if (pads && !(x = tg_pad(x, pb, pa, value))) return NULL;
  if (!crops) return x;
  for (int i = 0; i < nd; i++) en[i] = uop_shape(x->u)[i];
  for (int i = 0; i < nsp; i++) {
    st[lead + i] = before[i] < 0 ? -before[i] : 0;
    en[lead + i] -= after[i] < 0 ? -after[i] : 0;
  }
  return tg_shrink(x, st, en);
}

tg_tensor *dilate_input(tg_tensor *x, const int64_t *s, int nsp) {
  if (!x) return NULL;
  int nd = tg_ndim(x), lead = nd - nsp;
  int64_t sh[TG_MAX_DIMS], pb[TG_MAX_DIMS] = {0}, pa[TG_MAX_DIMS] = {0}, st[TG_MAX_DIMS] = {0}, en[TG_MAX_DIMS];
  for (int a = 0; a < lead; a++) sh[a] = en[a] = tg_dim(x, a);
  for (int j = 0; j < nsp; j++) { /* (n) → (n, 1) → pad → (n, s) → (n*s) → crop the trailing s-1 */
    sh[lead + 2 * j] = tg_dim(x, lead + j), sh[lead + 2 * j + 1] = 1;
    pa[lead + 2 * j + 1] = s[j] - 1;
  }
  if (!(x = tg_pad(tg_reshape(x, sh, lead + 2 * nsp), pb, pa, 0))) return NULL;
  for (int j = 0; j < nsp; j++) /* n*s: two sizes of the valid padded view */
    sh[lead + j] = tg_dim(x, lead + 2 * j) * s[j], en[lead + j] = sh[lead + j] - (s[j] - 1);
  return tg_shrink(tg_reshape(x, sh, nd), st, en);
}

/* ---------------------------------------------------------------- windows */

bool window_axis_sizes(int64_t i, int64_t k, int64_t s, int64_t d, window_axis *w) {
  int64_t span, room, fi;
  if (i < 1 || !ck_mul(d, k - 1, &span) || !ck_sub(i, span, &room) || room < 1 || !ck_add(room, s - 1, &w->o)) return false;
  w->o /= s;
  w->f = 1 + (w->o * s > room); /* o*s <= room + s - 1: fits */
  return ck_mul(i, w->f, &fi) && ck_add(fi, d, &w->row) && ck_mul(k, w->row, &w->total) && ck_add(w->total, i, &fi);
}

/* The sizes of every axis (error set when one overflows); *simple when no window overlaps the
 * next and none is dilated: then a reshape into (o, s) blocks suffices. */
static bool windows_sizes(tg_tensor *x, const int64_t *k, const int64_t *s, const int64_t *d, int nsp,
                          window_axis *wa, bool *simple) {
  int lead = tg_ndim(x) - nsp;
  char b[256];
  *simple = true;
  for (int j = 0; j < nsp; j++) {
    if (!window_axis_sizes(uop_shape(x->u)[lead + j], k[j], s[j], d[j], &wa[j]))
      return shape_error("windows: a kernel of %lld (stride %lld, dilation %lld) over %s: sizes overflow int64 or "
                         "no window fits", (long long)k[j], (long long)s[j], (long long)d[j], NN_SHAPE(x, b)), false;
    *simple &= k[j] <= s[j] && d[j] == 1;
  }
  return true;
}

/* Pairs of axes per spatial axis, (lead, o_0, k_0, o_1, k_1, ..) (or (k, o) pairs unless o_first)
 * → (lead, o.., k..) when `forward`, and back otherwise: the window axes gathered last. */
static tg_tensor *windows_permute(tg_tensor *x, int lead, int nsp, bool o_first, bool forward) {
  int perm[TG_MAX_DIMS], inv[TG_MAX_DIMS];
  for (int a = 0; a < lead; a++) perm[a] = a;
  for (int j = 0; j < nsp; j++) /* the pair of axis j is (o, k) when o_first, else (k, o) */
    perm[lead + j] = lead + 2 * j + !o_first, perm[lead + nsp + j] = lead + 2 * j + o_first;
  if (forward) return tg_permute(x, perm, lead + 2 * nsp);
  for (int a = 0; a < lead + 2 * nsp; a++) inv[perm[a]] = a;
  return tg_permute(x, inv, lead + 2 * nsp);
}

/* Sliding windows over the last nsp axes (tinygrad's Tensor._pool). When windows overlap
 * (k > s) or are dilated, the axis is repeated and re-cut with a row length of i*f + d, so that
 * consecutive rows shift by d (the skew trick); otherwise a plain reshape into (o, s) blocks. */
tg_tensor *pool_windows(tg_tensor *x, const int64_t *k, const int64_t *s, const int64_t *d, int nsp) {
  if (!x) return NULL;
  int nd = tg_ndim(x), lead = nd - nsp;
  int64_t i_[NN_MAX_NSP], sh[TG_MAX_DIMS], st[TG_MAX_DIMS] = {0}, en[TG_MAX_DIMS];
  window_axis wa[NN_MAX_NSP];
  bool simple;
  if (!windows_sizes(x, k, s, d, nsp, wa, &simple)) return NULL;
  for (int j = 0; j < nsp; j++) i_[j] = uop_shape(x->u)[lead + j];
  for (int a = 0; a < lead; a++) sh[a] = en[a] = uop_shape(x->u)[a];
  if (simple) { /* (o*s) → (o, s) → keep the first k of each block */
    int64_t zero[NN_MAX_NSP] = {0}, pa[NN_MAX_NSP];
    for (int j = 0; j < nsp; j++) pa[j] = wa[j].o * s[j] - i_[j]; /* pad or crop to o*s */
    x = pad_or_crop(x, zero, pa, nsp, 0);
    for (int j = 0; j < nsp; j++) sh[lead + 2 * j] = wa[j].o, sh[lead + 2 * j + 1] = s[j];
    x = tg_reshape(x, sh, lead + 2 * nsp);
    for (int j = 0; j < nsp; j++) en[lead + 2 * j] = wa[j].o, en[lead + 2 * j + 1] = k[j];
    return windows_permute(tg_shrink(x, st, en), lead, nsp, true, true);
  }
  int64_t rep[TG_MAX_DIMS];
  for (int a = 0; a < lead; a++) rep[a] = 1;
  for (int j = 0; j < nsp; j++) rep[lead + j] = ceildiv(wa[j].total, i_[j]); /* total + i fits (window_axis_sizes) */
  x = tg_repeat(x, rep, nd);
  for (int j = 0; j < nsp; j++) en[lead + j] = wa[j].total;
  x = tg_shrink(x, st, en);
  for (int j = 0; j < nsp; j++) sh[lead + 2 * j] = k[j], sh[lead + 2 * j + 1] = wa[j].row;
  x = tg_reshape(x, sh, lead + 2 * nsp); /* (k, i*f + d): row r starts at input r*d */
  for (int j = 0; j < nsp; j++) en[lead + 2 * j] = k[j], en[lead + 2 * j + 1] = wa[j].o * s[j];
  x = tg_shrink(x, st, en);
  for (int j = 0; j < nsp; j++) sh[lead + 3 * j] = k[j], sh[lead + 3 * j + 1] = wa[j].o, sh[lead + 3 * j + 2] = s[j];
  x = tg_reshape(x, sh, lead + 3 * nsp); /* (k, o, s): keep s = 0 */
  for (int j = 0; j < nsp; j++) en[lead + 3 * j] = k[j], en[lead + 3 * j + 1] = wa[j].o, en[lead + 3 * j + 2] = 1;
  x = tg_shrink(x, st, en);
  for (int j = 0; j < nsp; j++) sh[lead + 2 * j] = k[j], sh[lead + 2 * j + 1] = wa[j].o;
  return windows_permute(tg_reshape(x, sh, lead + 2 * nsp), lead, nsp, false, true);
}

/* Pad the axes lead + stride*j + at (j < nsp) after by amount[j] with `value`. */
static tg_tensor *pad_axes_after(tg_tensor *x, int lead, int stride, int at, const int64_t *amount, int nsp,
                                 double value) {
  if (!x) return NULL;
  int64_t pb[TG_MAX_DIMS] = {0}, pa[TG_MAX_DIMS] = {0};
  for (int j = 0; j < nsp; j++) pa[lead + stride * j + at] = amount[j];
  return tg_pad(x, pb, pa, value);
}

/* The views of pool_windows undone in reverse order: a shrink becomes a pad with the identity,
 * a permute its inverse, and the repeat of the skew trick a reduction over the copies. */
tg_tensor *pool_windows_back(tg_tensor *v, const int64_t *in, const int64_t *k, const int64_t *s, const int64_t *d,
                             int nsp, nn_reduce_fn reduce, double identity) {
  if (!v) return NULL;
  int nd = tg_ndim(v) - nsp, lead = nd - nsp, axes[NN_MAX_NSP];
  int64_t sh[TG_MAX_DIMS], amount[NN_MAX_NSP];
  window_axis wa[NN_MAX_NSP];
  bool simple = true;
  for (int j = 0; j < nsp; j++) {
    if (!window_axis_sizes(in[j], k[j], s[j], d[j], &wa[j])) return shape_error("windows: sizes overflow int64");
    simple &= k[j] <= s[j] && d[j] == 1;
  }
  for (int a = 0; a < lead; a++) sh[a] = tg_dim(v, a);
  if (simple) { /* (o, k) → pad to (o, s) → (o*s) → pad or crop to i */
    for (int j = 0; j < nsp; j++) amount[j] = s[j] - k[j];
    v = pad_axes_after(windows_permute(v, lead, nsp, true, false), lead, 2, 1, amount, nsp, identity);
    for (int j = 0; j < nsp; j++) sh[lead + j] = wa[j].o * s[j], amount[j] = in[j] - sh[lead + j];
    int64_t zero[NN_MAX_NSP] = {0};
    return pad_or_crop(tg_reshape(v, sh, nd), zero, amount, nsp, identity);
  }
  for (int j = 0; j < nsp; j++) sh[lead + 3 * j] = k[j], sh[lead + 3 * j + 1] = wa[j].o, sh[lead + 3 * j + 2] = 1;
  v = tg_reshape(windows_permute(v, lead, nsp, false, false), sh, lead + 3 * nsp); /* (k, o, 1) */
  for (int j = 0; j < nsp; j++) amount[j] = s[j] - 1;
  v = pad_axes_after(v, lead, 3, 2, amount, nsp, identity); /* (k, o, s) */
  for (int j = 0; j < nsp; j++) sh[lead + 2 * j] = k[j], sh[lead + 2 * j + 1] = wa[j].o * s[j];
  v = tg_reshape(v, sh, lead + 2 * nsp);
  for (int j = 0; j < nsp; j++) amount[j] = wa[j].row - wa[j].o * s[j];
  v = pad_axes_after(v, lead, 2, 1, amount, nsp, identity); /* (k, row) */
  for (int j = 0; j < nsp; j++) sh[lead + j] = wa[j].total, amount[j] = ceildiv(wa[j].total, in[j]) * in[j] - wa[j].total;
  v = pad_axes_after(tg_reshape(v, sh, nd), lead, 1, 0, amount, nsp, identity); /* (rep*i) */
  for (int j = 0; j < nsp; j++) sh[lead + 2 * j] = ceildiv(wa[j].total, in[j]), sh[lead + 2 * j + 1] = in[j];
  for (int j = 0; j < nsp; j++) axes[j] = lead + 2 * j;
  return reduce(tg_reshape(v, sh, lead + 2 * nsp), axes, nsp, false); /* the copies of each position */
}
