/* api_ref.c — the fuzzer's calls with valid arguments on small float32 tensors of small
 * integers, checked against a host computation: the result must exist, have the expected
 * shape, and (realized) hold exactly the expected values. Inputs are fresh tensors of rank
 * 0..3 with sizes 0..3, or earlier results whose values are known. Every reference is a
 * plain loop over output indices (a movement op is "which input element, or the pad value"). */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "fuzz.h"

#define N_(a) ((int)(sizeof(a) / sizeof((a)[0])))
enum { RMAX = 6 }; /* ranks of reference tensors: inputs 0..3, results up to 6 */

/* A host tensor: shape and row-major values. */
typedef struct ht { int nd; int64_t s[RMAX]; int64_t n; double v[FZ_REF_MAX]; } ht;

static int64_t numel(const int64_t *s, int nd) {
  int64_t n = 1;
  for (int i = 0; i < nd; i++) n *= s[i];
  return n;
}

/* Row-major multi-index of flat index f. */
static void unravel(const ht *h, int64_t f, int64_t *idx) {
  for (int i = h->nd - 1; i >= 0; i--) idx[i] = h->s[i] ? f % h->s[i] : 0, f = h->s[i] ? f / h->s[i] : 0;
}

static int64_t ravel(const ht *h, const int64_t *idx) {
  int64_t f = 0;
  for (int i = 0; i < h->nd; i++) f = f * h->s[i] + idx[i];
  return f;
}

static void set_shape(ht *h, const int64_t *s, int nd) {
  h->nd = nd;
  memcpy(h->s, s, sizeof(int64_t) * (size_t)nd);
  h->n = numel(s, nd);
}

/* An input: a fresh tensor (rank 0..3, sizes 0..3, values -4..4) or a known earlier result. */
static tg_tensor *input(ht *h) {
  const fz_slot *slot;
  tg_tensor *t = fz_chance(30) ? fz_ref_tensor(&slot) : NULL;
  if (t) {
    h->nd = tg_shape(t, h->s, RMAX);
    h->n = tg_numel(t);
    memcpy(h->v, slot->ref, sizeof(double) * (size_t)h->n);
    return h->nd <= 3 ? t : NULL;
  }
  h->nd = (int)fz_below(4);
  for (int i = 0; i < h->nd; i++) h->s[i] = fz_chance(10) ? 0 : 1 + fz_below(3);
  h->n = numel(h->s, h->nd);
  float f[FZ_REF_MAX];
  for (int64_t i = 0; i < h->n; i++) h->v[i] = (double)(fz_below(9) - 4), f[i] = (float)h->v[i];
  fz_log("from_data(float32, %s)", fz_shape_str(h->s, h->nd));
  t = fz_check_tensor("from_data", tg_from_data(f, TG_FLOAT32, h->s, h->nd));
  fz_keep_ref(t, h->v);
  return t;
}

/* The result must be there with want's shape and values; then it is kept for later calls. */
static void expect(const char *op, tg_tensor *r, const ht *want) {
  if (!fz_check_tensor(op, r)) return fz_violation("%s: valid arguments, NULL result: %s", op, tg_last_error());
  int64_t s[FZ_REF_MAX];
  int nd = tg_shape(r, s, FZ_REF_MAX);
  if (nd != want->nd || memcmp(s, want->s, sizeof(int64_t) * (size_t)nd))
    return fz_violation("%s: shape %s, the host reference says %s", op, fz_shape_str(s, nd), fz_shape_str(want->s, want->nd));
  if (fz_chance(30)) fz_check_values(op, r, want->v); /* realizing compiles a kernel: a sample */
  fz_keep_ref(r, want->v);
}

/* ---------------------------------------------------------------- elementwise */

static double un_eval(int k, double x) { return k == 0 ? -x : k == 1 ? fabs(x) : k == 2 ? (x > 0 ? x : 0) : x * x; }

static void ref_unary(void) {
  static const char *names[] = {"neg", "abs", "relu", "square"};
  tg_tensor *(*fns[])(tg_tensor *) = {tg_neg, tg_abs, tg_relu, tg_square};
  ht a, w;
  tg_tensor *t = input(&a);
  if (!t) return;
  int k = (int)fz_below(4);
  set_shape(&w, a.s, a.nd);
  for (int64_t i = 0; i < a.n; i++) w.v[i] = un_eval(k, a.v[i]);
  fz_log("%s(%s)", names[k], fz_shape_str(a.s, a.nd));
  expect(names[k], fns[k](t), &w);
}

static double bin_eval(int k, double x, double y) {
  return k == 0 ? x + y : k == 1 ? x - y : k == 2 ? x * y : k == 3 ? fmax(x, y) : fmin(x, y);
}

/* b: a's shape with some axes set to 1 and leading axes dropped (or the other way round). */
static void ref_binary(void) {
  static const char *names[] = {"add", "sub", "mul", "maximum", "minimum"};
  tg_tensor *(*fns[])(tg_tensor *, tg_tensor *) = {tg_add, tg_sub, tg_mul, tg_maximum, tg_minimum};
  ht a, b, w;
  tg_tensor *ta = input(&a);
  if (!ta) return;
  int drop = (int)fz_below(a.nd + 1);
  b.nd = a.nd - drop;
  for (int i = 0; i < b.nd; i++) b.s[i] = fz_chance(30) ? 1 : a.s[drop + i];
  b.n = numel(b.s, b.nd);
  float f[FZ_REF_MAX];
  for (int64_t i = 0; i < b.n; i++) b.v[i] = (double)(fz_below(9) - 4), f[i] = (float)b.v[i];
  tg_tensor *tb = fz_check_tensor("from_data", tg_from_data(f, TG_FLOAT32, b.s, b.nd));
  int k = (int)fz_below(5);
  bool swap = fz_chance(50);
  set_shape(&w, a.s, a.nd);
  int64_t idx[RMAX], bi[RMAX];
  for (int64_t i = 0; i < w.n; i++) {
    unravel(&w, i, idx);
    for (int j = 0; j < b.nd; j++) bi[j] = b.s[j] == 1 ? 0 : idx[drop + j];
    double x = a.v[i], y = b.v[ravel(&b, bi)];
    w.v[i] = swap ? bin_eval(k, y, x) : bin_eval(k, x, y);
  }
  fz_log("%s(%s, %s)", names[k], fz_shape_str(a.s, a.nd), fz_shape_str(b.s, b.nd));
  expect(names[k], swap ? fns[k](tb, ta) : fns[k](ta, tb), &w);
}

/* ---------------------------------------------------------------- movement */

/* out[i] = a[src(i)] or `fill` where src is -1: the shape of every movement op's reference. */
typedef int64_t (*src_fn)(const ht *a, const int64_t *oidx, const void *arg);

static void gather_ref(const ht *a, ht *w, src_fn src, const void *arg, double fill) {
  int64_t idx[RMAX];
  for (int64_t i = 0; i < w->n; i++) {
    unravel(w, i, idx);
    int64_t f = src(a, idx, arg);
    w->v[i] = f < 0 ? fill : a->v[f];
  }
}

static void ref_reshape(void) {
  ht a, w;
  tg_tensor *t = input(&a);
  if (!t) return;
  int64_t s[3], d = 1 + fz_below(3);
  int nd;
  if (a.n == 0) s[0] = 0, s[1] = d, nd = 1 + (int)fz_below(2); /* (0) or (0, d) */
  else if (a.n % d == 0) s[0] = d, s[1] = a.n / d, nd = 2;
  else s[0] = a.n, nd = 1;
  if (a.n == 1 && fz_chance(30)) nd = 0;
  set_shape(&w, s, nd);
  memcpy(w.v, a.v, sizeof(double) * (size_t)a.n);
  int64_t arg[3];
  memcpy(arg, s, sizeof s);
  if (nd && a.n && fz_chance(40)) arg[fz_below(nd)] = -1;
  fz_log("reshape(%s, %s)", fz_shape_str(a.s, a.nd), fz_shape_str(arg, nd));
  expect("reshape", tg_reshape(t, arg, nd), &w);
}

static int64_t src_permute(const ht *a, const int64_t *o, const void *arg) {
  const int *perm = arg;
  int64_t idx[RMAX];
  for (int i = 0; i < a->nd; i++) idx[perm[i]] = o[i];
  return ravel(a, idx);
}

static void ref_permute(void) {
  ht a, w;
  tg_tensor *t = input(&a);
  if (!t) return;
  int perm[RMAX], arg[RMAX];
  int64_t s[RMAX];
  for (int i = 0; i < a.nd; i++) perm[i] = i;
  for (int i = a.nd - 1; i > 0; i--) {
    int j = (int)fz_below(i + 1), x = perm[i];
    perm[i] = perm[j], perm[j] = x;
  }
  for (int i = 0; i < a.nd; i++) s[i] = a.s[perm[i]], arg[i] = fz_chance(30) ? perm[i] - a.nd : perm[i];
  set_shape(&w, s, a.nd);
  gather_ref(&a, &w, src_permute, perm, 0);
  fz_log("permute(%s, order)", fz_shape_str(a.s, a.nd));
  expect("permute", tg_permute(t, arg, a.nd), &w);
}

static int64_t src_flip(const ht *a, const int64_t *o, const void *arg) {
  const bool *fl = arg;
  int64_t idx[RMAX];
  for (int i = 0; i < a->nd; i++) idx[i] = fl[i] ? a->s[i] - 1 - o[i] : o[i];
  return ravel(a, idx);
}

static void ref_flip(void) {
  ht a, w;
  tg_tensor *t = input(&a);
  if (!t) return;
  bool fl[RMAX] = {0};
  int axes[RMAX], n = 0;
  for (int i = 0; i < a.nd; i++)
    if (fz_chance(50)) fl[i] = true, axes[n++] = fz_chance(50) ? i : i - a.nd;
  set_shape(&w, a.s, a.nd);
  gather_ref(&a, &w, src_flip, fl, 0);
  fz_log("flip(%s, %d axes)", fz_shape_str(a.s, a.nd), n);
  expect("flip", tg_flip(t, axes, n), &w);
}

typedef struct window { int64_t lo[RMAX]; } window; /* pad: before; shrink: start */

static int64_t src_pad(const ht *a, const int64_t *o, const void *arg) {
  const window *p = arg;
  int64_t idx[RMAX];
  for (int i = 0; i < a->nd; i++) {
    idx[i] = o[i] - p->lo[i];
    if (idx[i] < 0 || idx[i] >= a->s[i]) return -1;
  }
  return ravel(a, idx);
}

static void ref_pad(void) {
  ht a, w;
  tg_tensor *t = input(&a);
  if (!t) return;
  window p;
  int64_t after[RMAX], s[RMAX];
  for (int i = 0; i < a.nd; i++) p.lo[i] = fz_below(3), after[i] = fz_below(3), s[i] = a.s[i] + p.lo[i] + after[i];
  double v = (double)(fz_below(9) - 4);
  set_shape(&w, s, a.nd);
  if (w.n > FZ_REF_MAX) return;
  gather_ref(&a, &w, src_pad, &p, v);
  fz_log("pad(%s, %s, %s, %g)", fz_shape_str(a.s, a.nd), fz_shape_str(p.lo, a.nd), fz_shape_str(after, a.nd), v);
  expect("pad", tg_pad(t, p.lo, after, v), &w);
}

/* Python's slice of one axis (CPython's PySlice_AdjustIndices); first element and length. */
static int64_t py_slice(int64_t n, int64_t start, int64_t stop, int64_t step, int64_t *first) {
  if (start == TG_SLICE_END) start = step > 0 ? 0 : n - 1;
  else if (start < 0) start = start + n < 0 ? (step < 0 ? -1 : 0) : start + n;
  else if (start >= n) start = step < 0 ? n - 1 : n;
  if (stop == TG_SLICE_END) stop = step > 0 ? n : -1;
  else if (stop < 0) stop = stop + n < 0 ? (step < 0 ? -1 : 0) : stop + n;
  else if (stop >= n) stop = step < 0 ? n - 1 : n;
  *first = start;
  if (step > 0) return stop > start ? (stop - start - 1) / step + 1 : 0;
  return start > stop ? (start - stop - 1) / (-step) + 1 : 0;
}

typedef struct slice_arg { int axis; int64_t first, step; } slice_arg;

static int64_t src_slice(const ht *a, const int64_t *o, const void *arg) {
  const slice_arg *sl = arg;
  int64_t idx[RMAX];
  memcpy(idx, o, sizeof(int64_t) * (size_t)a->nd);
  idx[sl->axis] = sl->first + o[sl->axis] * sl->step;
  return ravel(a, idx);
}

static void ref_slice(void) {
  static const int64_t ends[] = {0, 1, 2, 3, -1, -2, -4, 5, TG_SLICE_END};
  ht a, w;
  tg_tensor *t = input(&a);
  if (!t || a.nd == 0) return;
  slice_arg sl = {(int)fz_below(a.nd), 0, fz_chance(50) ? 1 + fz_below(3) : -1 - fz_below(3)};
  int64_t start = fz_pick(ends, N_(ends)), stop = fz_pick(ends, N_(ends)), s[RMAX];
  memcpy(s, a.s, sizeof s);
  s[sl.axis] = py_slice(a.s[sl.axis], start, stop, sl.step, &sl.first);
  set_shape(&w, s, a.nd);
  gather_ref(&a, &w, src_slice, &sl, 0);
  int axis = fz_chance(30) ? sl.axis - a.nd : sl.axis;
  fz_log("slice(%s, %d, %lld, %lld, %lld)", fz_shape_str(a.s, a.nd), axis, (long long)start, (long long)stop,
         (long long)sl.step);
  expect("slice", tg_slice(t, axis, start, stop, sl.step), &w);
}

/* expand / repeat: output index → input index with `lead` new leading axes. */
typedef struct tile { int lead; bool wrap; } tile;

static int64_t src_tile(const ht *a, const int64_t *o, const void *arg) {
  const tile *tl = arg;
  int64_t idx[RMAX];
  for (int i = 0; i < a->nd; i++) idx[i] = tl->wrap ? o[tl->lead + i] % a->s[i] : a->s[i] == 1 ? 0 : o[tl->lead + i];
  return ravel(a, idx);
}

static void ref_expand_repeat(void) {
  ht a, w;
  tg_tensor *t = input(&a);
  if (!t) return;
  tile tl = {(int)fz_below(3), fz_chance(50)};
  int nd = tl.lead + a.nd;
  int64_t s[RMAX], arg[RMAX];
  for (int i = 0; i < nd; i++) {
    int64_t have = i < tl.lead ? 1 : a.s[i - tl.lead];
    arg[i] = tl.wrap ? fz_below(3) : have == 1 ? fz_below(4) : (fz_chance(30) && i >= tl.lead ? -1 : have);
    s[i] = tl.wrap ? arg[i] * have : arg[i] == -1 ? have : arg[i];
  }
  set_shape(&w, s, nd);
  if (w.n > FZ_REF_MAX) return;
  gather_ref(&a, &w, src_tile, &tl, 0);
  fz_log("%s(%s, %s)", tl.wrap ? "repeat" : "expand", fz_shape_str(a.s, a.nd), fz_shape_str(arg, nd));
  expect(tl.wrap ? "repeat" : "expand", tl.wrap ? tg_repeat(t, arg, nd) : tg_expand(t, arg, nd), &w);
}

/* cat of a and a fresh b that differs on `axis` only. */
static void ref_cat(void) {
  ht a, b, w;
  tg_tensor *ta = input(&a);
  if (!ta || a.nd == 0) return;
  int axis = (int)fz_below(a.nd);
  set_shape(&b, a.s, a.nd);
  b.s[axis] = fz_below(3), b.n = numel(b.s, b.nd);
  if (a.n + b.n > FZ_REF_MAX) return; /* b and the result must fit the host arrays */
  float f[FZ_REF_MAX];
  for (int64_t i = 0; i < b.n; i++) b.v[i] = (double)(fz_below(9) - 4), f[i] = (float)b.v[i];
  tg_tensor *ts[2] = {ta, fz_check_tensor("from_data", tg_from_data(f, TG_FLOAT32, b.s, b.nd))};
  int64_t s[RMAX], idx[RMAX];
  memcpy(s, a.s, sizeof s);
  s[axis] += b.s[axis];
  set_shape(&w, s, a.nd);
  for (int64_t i = 0; i < w.n; i++) {
    unravel(&w, i, idx);
    bool first = idx[axis] < a.s[axis];
    if (!first) idx[axis] -= a.s[axis];
    w.v[i] = first ? a.v[ravel(&a, idx)] : b.v[ravel(&b, idx)];
  }
  fz_log("cat(%s, %s, %d)", fz_shape_str(a.s, a.nd), fz_shape_str(b.s, b.nd), axis);
  expect("cat", tg_cat(ts, 2, fz_chance(30) ? axis - a.nd : axis), &w);
}

/* ---------------------------------------------------------------- reductions */

/* sum or max over the axes in mask (keepdim or not); 0-d inputs take axis 0 as PyTorch does. */
static void ref_reduce(void) {
  ht a, w;
  tg_tensor *t = input(&a);
  if (!t) return;
  bool mask[RMAX] = {0}, keepdim = fz_chance(50), is_max = fz_chance(40);
  int axes[RMAX], n = 0;
  for (int i = 0; i < a.nd; i++)
    if (fz_chance(50)) mask[i] = true, axes[n++] = fz_chance(50) ? i : i - a.nd;
  if (a.nd == 0 && fz_chance(50)) axes[n++] = fz_chance(50) ? 0 : -1; /* reduces nothing */
  bool all = n == 0, empty = false;
  for (int i = 0; i < a.nd; i++) empty |= (mask[i] || all) && a.s[i] == 0;
  if (is_max && empty) { /* the max of no elements is an error (semantics.md) */
    fz_log("max(%s, %d axes): an empty reduced axis", fz_shape_str(a.s, a.nd), n);
    tg_tensor *r = tg_max(t, axes, n, keepdim);
    if (r) fz_violation("max over an empty axis gave a result");
    else fz_check_tensor("max", r);
    return;
  }
  int64_t s[RMAX];
  int nd = 0;
  for (int i = 0; i < a.nd; i++)
    if (!(mask[i] || all) || keepdim) s[nd++] = mask[i] || all ? 1 : a.s[i];
  set_shape(&w, s, nd);
  for (int64_t i = 0; i < w.n; i++) w.v[i] = is_max ? -INFINITY : 0;
  int64_t idx[RMAX], oidx[RMAX];
  for (int64_t i = 0; i < a.n; i++) {
    unravel(&a, i, idx);
    int k = 0;
    for (int j = 0; j < a.nd; j++)
      if (!(mask[j] || all) || keepdim) oidx[k++] = mask[j] || all ? 0 : idx[j];
    double *o = &w.v[ravel(&w, oidx)];
    *o = is_max ? fmax(*o, a.v[i]) : *o + a.v[i];
  }
  fz_log("%s(%s, %d axes, keepdim %d)", is_max ? "max" : "sum", fz_shape_str(a.s, a.nd), n, keepdim);
  expect(is_max ? "max" : "sum", is_max ? tg_max(t, axes, n, keepdim) : tg_sum(t, axes, n, keepdim), &w);
}

/* argmax (first index of the maximum) or cumsum along one axis; a 0-d input has axis 0. */
static void ref_along_axis(void) {
  ht a, w;
  tg_tensor *t = input(&a);
  if (!t) return;
  bool arg = fz_chance(50);
  int axis = a.nd ? (int)fz_below(a.nd) : 0;
  int64_t len = a.nd ? a.s[axis] : 1, s[RMAX], idx[RMAX];
  if (arg && len == 0) return; /* argmax of an empty axis is an error in PyTorch: not compared */
  int nd = 0;
  for (int i = 0; i < a.nd; i++)
    if (!arg || i != axis) s[nd++] = a.s[i];
  set_shape(&w, s, nd);
  for (int64_t i = 0; i < w.n; i++) w.v[i] = arg ? -1 : 0;
  double best[FZ_REF_MAX];
  for (int64_t i = 0; i < a.n; i++) { /* row-major: along the axis in increasing order */
    unravel(&a, i, idx);
    int64_t k = a.nd ? idx[axis] : 0;
    if (arg) {
      int64_t o[RMAX];
      for (int j = 0, m = 0; j < a.nd; j++)
        if (j != axis) o[m++] = idx[j];
      int64_t f = ravel(&w, o);
      if (w.v[f] < 0 || a.v[i] > best[f]) w.v[f] = (double)k, best[f] = a.v[i];
    } else {
      w.v[i] = a.v[i] + (k > 0 ? w.v[i - (int64_t)(numel(a.s + axis + 1, a.nd - axis - 1))] : 0);
    }
  }
  int ax = fz_chance(30) ? axis - (a.nd ? a.nd : 1) : axis;
  fz_log("%s(%s, %d)", arg ? "argmax" : "cumsum", fz_shape_str(a.s, a.nd), ax);
  expect(arg ? "argmax" : "cumsum", arg ? tg_cast(tg_argmax(t, ax, false), TG_FLOAT32) : tg_cumsum(t, ax), &w);
}

/* (n, k) @ (k, m) with both operands fresh. */
static void ref_matmul(void) {
  ht a, b, w;
  int64_t n = 1 + fz_below(3), k = fz_below(4), m = 1 + fz_below(3);
  float fa[FZ_REF_MAX], fb[FZ_REF_MAX];
  set_shape(&a, (int64_t[]){n, k}, 2), set_shape(&b, (int64_t[]){k, m}, 2), set_shape(&w, (int64_t[]){n, m}, 2);
  for (int64_t i = 0; i < a.n; i++) a.v[i] = (double)(fz_below(7) - 3), fa[i] = (float)a.v[i];
  for (int64_t i = 0; i < b.n; i++) b.v[i] = (double)(fz_below(7) - 3), fb[i] = (float)b.v[i];
  for (int64_t i = 0; i < n; i++)
    for (int64_t j = 0; j < m; j++) {
      double acc = 0;
      for (int64_t q = 0; q < k; q++) acc += a.v[i * k + q] * b.v[q * m + j];
      w.v[i * m + j] = acc;
    }
  fz_log("matmul((%lld, %lld), (%lld, %lld))", (long long)n, (long long)k, (long long)k, (long long)m);
  tg_tensor *ta = tg_from_data(fa, TG_FLOAT32, a.s, 2), *tb = tg_from_data(fb, TG_FLOAT32, b.s, 2);
  expect("matmul", tg_matmul(ta, tb), &w);
}

const fz_call fz_ref_calls[] = {
    {"unary", 3, ref_unary},     {"binary", 5, ref_binary},   {"reshape", 3, ref_reshape},
    {"permute", 3, ref_permute}, {"flip", 2, ref_flip},       {"pad", 3, ref_pad},
    {"slice", 4, ref_slice},     {"expand_repeat", 4, ref_expand_repeat}, {"cat", 3, ref_cat},
    {"reduce", 5, ref_reduce},   {"along_axis", 3, ref_along_axis}, {"matmul", 2, ref_matmul},
};
const int fz_ref_ncalls = N_(fz_ref_calls);
