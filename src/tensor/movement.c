/* movement.c — views (reshape, permute, expand, pad, shrink, flip) and what is built from
 * them (slicing, cat, stack, split, repeat, squeeze, …). Views are index math: no copies. */
#include <stdlib.h>
#include <string.h>

#include "tensor/shape.h"
#include "tensor/tensor.h"
#include "tensor/variable.h"

#define POOL_BEGIN size_t pool_mark_ = uop_pool_mark()
#define POOL_END(u) do { tg_tensor *r_ = tensor_wrap(u); uop_pool_release(pool_mark_); return r_; } while (0)

static const char *shape_str(char *buf, size_t n, uop *u) { return tg_fmt_shape(buf, n, uop_shape(u), uop_ndim(u)); }

/* A rank for a new shape: 0..TG_MAX_DIMS (a TG_ERR_SHAPE error otherwise). */
static bool check_rank(const char *op, int nd) {
  if (nd >= 0 && nd <= TG_MAX_DIMS) return true;
  shape_error("%s: rank %d is out of range (0..%d)", op, nd, TG_MAX_DIMS);
  return false;
}

/* A reshape may move a variable dim among size-1 dims and reshape the plain dims around it,
 * but the dim stays one dim of the same size at the same place in the layout: the variables'
 * dims of x and r, in order, are equal and each has as many layout elements before it. */
static bool reshape_keeps_vars(uop *x, uop *r) {
  int i = 0, j = 0, nx = uop_ndim(x), nr = uop_ndim(r);
  int64_t bx = 1, br = 1;
  char a[64], b[256];
  for (;;) {
    while (i < nx && !sym_is(sym_dim(x, i))) ck_mul(bx, uop_shape(x)[i++], &bx);
    while (j < nr && !sym_is(sym_dim(r, j))) ck_mul(br, uop_shape(r)[j++], &br);
    if (i == nx && j == nr) return true;
    if (i == nx || j == nr || sym_dim(x, i) != sym_dim(r, j) || bx != br) break;
    ck_mul(bx, uop_shape(x)[i++], &bx), ck_mul(br, uop_shape(r)[j++], &br);
  }
  int64_t d = i < nx ? sym_dim(x, i) : sym_dim(r, j);
  tensor_error("reshape: the variable dim %s of %s must stay a dim of its own (size-1 dims may come and go around it)",
               sym_str(d, a, sizeof a), shape_str(b, sizeof b, x));
  return false;
}

tg_tensor *tg_reshape(tg_tensor *t, const int64_t *shape, int ndim) {
  if (!t) return null_arg("reshape");
  char a[256], b[256];
  if (!check_rank("reshape", ndim)) return NULL;
  if (ndim && !shape) return tensor_error("reshape: shape is NULL (rank %d)", ndim);
  int64_t out[TG_MAX_DIMS], arg[TG_MAX_DIMS], known = 1, numel = tg_numel(t);
  int infer = -1;
  if (!sym_arg_check("reshape", shape, ndim, out)) return NULL;
  for (int i = 0; i < ndim; i++) {
    arg[i] = shape[i]; /* a symbolic size stays in the node's argument; out has its layout */
    if (shape[i] == -1 && infer < 0) { infer = i; continue; }
    if (out[i] < 0)
      return tensor_error("reshape: invalid target %s (one -1 allowed, sizes >= 0) for %s",
                          tg_fmt_shape(a, sizeof a, shape, ndim), shape_str(b, sizeof b, t->u));
    if (!ck_mul(known, out[i], &known))
      return shape_error("reshape: target %s has more than 2^63 elements", tg_fmt_shape(a, sizeof a, shape, ndim));
  }
  if (infer >= 0) {
    if (known == 0 || numel % known)
      return tensor_error("reshape: cannot infer -1 in %s from %s", tg_fmt_shape(a, sizeof a, shape, ndim),
                          shape_str(b, sizeof b, t->u));
    arg[infer] = out[infer] = numel / known;
    known = numel;
  }
  if (known != numel)
    return tensor_error("reshape: cannot reshape %s (%lld elements) to %s", shape_str(b, sizeof b, t->u),
                        (long long)numel, tg_fmt_shape(a, sizeof a, shape, ndim));
  if (!shape_check("reshape", out, ndim, tg_get_dtype(t))) return NULL; /* e.g. (0,) to (0, 2^62, 2^62) */
  POOL_BEGIN;
  uop *r = ushape_reshape(t->u, arg, ndim);
  if (r && !reshape_keeps_vars(t->u, r)) r = NULL;
  POOL_END(r);
}

tg_tensor *tg_permute(tg_tensor *t, const int *order, int ndim) {
  if (!t) return null_arg("permute");
  int nd = tg_ndim(t);
  char b[256];
  if (ndim != nd || (nd && !order))
    return tensor_error("permute: order has %d axes, tensor %s has %d", ndim, shape_str(b, sizeof b, t->u), nd);
  int64_t arg[TG_MAX_DIMS];
  bool seen[TG_MAX_DIMS] = {0}, identity = true;
  for (int i = 0; i < nd; i++) {
    int ax = order[i];
    if (!normalize_axis("permute", &ax, nd, AXIS_OF) || seen[ax])
      return tensor_error("permute: invalid order for %s (axis %d repeated or out of range)",
                          shape_str(b, sizeof b, t->u), order[i]);
    seen[ax] = true, arg[i] = ax, identity &= ax == i;
  }
  POOL_BEGIN;
  POOL_END(identity ? t->u : uop_new(OP_PERMUTE, t->u->dtype, &t->u, 1, arg, nd));
}

tg_tensor *tg_expand(tg_tensor *t, const int64_t *shape, int ndim) {
  if (!t) return null_arg("expand");
  int nd = tg_ndim(t);
  char a[256], b[256];
  if (!check_rank("expand", ndim)) return NULL;
  if (ndim < nd || (ndim && !shape))
    return tensor_error("expand: cannot expand %s to rank %d", shape_str(b, sizeof b, t->u), ndim);
  int64_t padded[TG_MAX_DIMS], out[TG_MAX_DIMS], lay[TG_MAX_DIMS];
  if (!sym_arg_check("expand", shape, ndim, NULL)) return NULL;
  for (int i = 0; i < ndim; i++) { /* a variable dim (of t or of shape) expands from 1 or stays */
    int64_t have = i < ndim - nd ? 1 : sym_dim(t->u, i - (ndim - nd));
    int64_t want = shape[i] == -1 && i >= ndim - nd ? have : shape[i];
    bool same = have == want || (!sym_is(want) && sym_hi(have) == want);
    if ((want < 0 && !sym_is(want)) || (!same && have != 1))
      return tensor_error("expand: cannot expand %s to %s", shape_str(b, sizeof b, t->u),
                          tg_fmt_shape(a, sizeof a, shape, ndim));
    padded[i] = sym_hi(have), out[i] = same ? have : want, lay[i] = sym_hi(out[i]);
  }
  if (!shape_check("expand", lay, ndim, tg_get_dtype(t))) return NULL;
  POOL_BEGIN;
  POOL_END(ushape_expand(ushape_reshape(t->u, padded, ndim), out, ndim));
}

/* Signed padding of every axis split into a crop [st, en) (the negative amounts) and a pad
 * (pb, pa: the positive ones), and the result's shape `out`; false with an error if a crop
 * removes more than the axis has or a size overflows. */
static bool split_pad(const char *op, tg_tensor *t, const int64_t *before, const int64_t *after, int64_t *st,
                      int64_t *en, int64_t *pb, int64_t *pa, int64_t *out) {
  int nd = tg_ndim(t);
  char b[256];
  if (nd && (!before || !after)) return tensor_error("%s: before/after are NULL", op), false;
  for (int i = 0; i < nd; i++) {
    int64_t n = uop_shape(t->u)[i], cb = 0, ca = 0;
    if ((before[i] < 0 && !ck_sub(0, before[i], &cb)) || (after[i] < 0 && !ck_sub(0, after[i], &ca)) ||
        !ck_add(n, before[i], &out[i]) || !ck_add(out[i], after[i], &out[i]))
      return shape_error("%s: padding %lld/%lld on axis %d of %s overflows int64", op, (long long)before[i],
                         (long long)after[i], i, shape_str(b, sizeof b, t->u)), false;
    if (cb > n || ca > n - cb)
      return tensor_error("%s: padding %lld/%lld crops more than the %lld elements of axis %d of %s", op,
                          (long long)before[i], (long long)after[i], (long long)n, i, shape_str(b, sizeof b, t->u)), false;
    st[i] = cb, en[i] = n - ca, pb[i] = before[i] > 0 ? before[i] : 0, pa[i] = after[i] > 0 ? after[i] : 0;
  }
  return shape_check(op, out, nd, tg_get_dtype(t));
}

/* Pad with `value` by non-negative amounts (the PAD node; a nonzero value is selected by a
 * padded mask). */
static tg_tensor *pad_const(tg_tensor *t, const int64_t *pb, const int64_t *pa, double value) {
  if (!t) return NULL;
  int nd = tg_ndim(t);
  int64_t arg[2 * TG_MAX_DIMS];
  bool any = false;
  for (int i = 0; i < nd; i++) arg[2 * i] = pb[i], arg[2 * i + 1] = pa[i], any |= pb[i] || pa[i];
  POOL_BEGIN;
  uop *x = t->u;
  if (!any) POOL_END(x);
  uop *p = uop_new(OP_PAD, x->dtype, &x, 1, arg, 2 * nd);
  if (value != 0) { /* pad with 0, then select the value where the mask (a padded bool) is off */
    uop *ones = uconst_like(x, 1, TG_BOOL);
    uop *mask = uop_new(OP_PAD, TG_BOOL, &ones, 1, arg, 2 * nd);
    p = uop_new3(OP_WHERE, x->dtype, mask, p, uconst_like(p, value, x->dtype));
  }
  POOL_END(p);
}

/* A pad by amounts of a variable, or of a variable dim: amounts >= 0 over its whole range. */
static tg_tensor *pad_sym(tg_tensor *t, const int64_t *before, const int64_t *after, double value) {
  int nd = tg_ndim(t);
  char b[256];
  for (int i = 0; i < nd; i++) {
    int64_t args[3] = {before[i], after[i], sym_dim(t->u, i)};
    if (!sym_arg_check("pad", args, 3, NULL)) return NULL;
    for (int hi = 0; hi < 2; hi++)
      if (sym_end(before[i], hi) < 0 || sym_end(after[i], hi) < 0)
        return tensor_error("pad: a variable amount on axis %d of %s must be >= 0 over the variable's range", i, shape_str(b, sizeof b, t->u));
  }
  return pad_const(t, before, after, value);
}

static bool any_sym(const tg_tensor *t, const int64_t *a, const int64_t *b) {
  bool any = t->u->sym != NULL;
  for (int i = 0; i < tg_ndim(t) && !any; i++) any = sym_is(a[i]) || sym_is(b[i]) || a[i] == SYM_BAD || b[i] == SYM_BAD;
  return any;
}

tg_tensor *tg_pad(tg_tensor *t, const int64_t *before, const int64_t *after, double value) {
  if (!t) return null_arg("pad");
  if (tg_ndim(t) && before && after && any_sym(t, before, after)) return pad_sym(t, before, after, value);
  int64_t st[TG_MAX_DIMS], en[TG_MAX_DIMS], pb[TG_MAX_DIMS], pa[TG_MAX_DIMS], out[TG_MAX_DIMS];
  if (!split_pad("pad", t, before, after, st, en, pb, pa, out)) return NULL;
  tg_scope *s = tg_scope_begin();
  tg_tensor *r = tg_keep(pad_const(tg_shrink(t, st, en), pb, pa, value));
  tg_scope_end(s);
  return r;
}

tg_tensor *tg_shrink(tg_tensor *t, const int64_t *starts, const int64_t *ends) {
  if (!t) return null_arg("shrink");
  int nd = tg_ndim(t);
  if (nd && (!starts || !ends)) return tensor_error("shrink: starts/ends are NULL");
  int64_t arg[2 * TG_MAX_DIMS];
  bool any = false;
  char b[256];
  for (int i = 0; i < nd; i++) { /* variable bounds and dims: in bounds at both ends of the range */
    int64_t n = sym_dim(t->u, i), args[3] = {starts[i], ends[i], n};
    if (!sym_arg_check("shrink", args, 3, NULL)) return NULL;
    for (int hi = 0; hi < 2; hi++) {
      int64_t st = sym_end(starts[i], hi), en = sym_end(ends[i], hi);
      if (st < 0 || en < st || en > sym_end(n, hi))
        return tensor_error("shrink: [%s, %s) out of bounds on axis %d of %s", sym_str(starts[i], b, 64), sym_str(ends[i], b + 64, 64),
                            i, shape_str(b + 128, sizeof b - 128, t->u));
    }
    arg[2 * i] = starts[i], arg[2 * i + 1] = ends[i], any |= starts[i] != 0 || ends[i] != n;
  }
  POOL_BEGIN;
  POOL_END(any ? uop_new(OP_SHRINK, t->u->dtype, &t->u, 1, arg, 2 * nd) : t->u);
}

tg_tensor *tg_flip(tg_tensor *t, const int *axes, int naxes) {
  if (!t) return null_arg("flip");
  int nd = tg_ndim(t);
  if (naxes < 0 || (naxes && !axes)) return tensor_error("flip: invalid axes");
  int64_t arg[TG_MAX_DIMS] = {0};
  for (int i = 0; i < naxes; i++) {
    int ax = axes[i];
    if (!normalize_axis("flip", &ax, nd, AXIS_OF_SCALAR)) return NULL;
    if (arg[ax]) return tensor_error("flip: axis %d repeated", axes[i]);
    if (nd && sym_is(sym_dim(t->u, ax))) return tensor_error("flip: axis %d has a variable size: not supported", axes[i]);
    arg[ax] = 1;
  }
  POOL_BEGIN;
  POOL_END(naxes && nd ? uop_new(OP_FLIP, t->u->dtype, &t->u, 1, arg, nd) : t->u); /* 0-d: nothing to flip */
}

tg_tensor *tg_transpose(tg_tensor *t, int axis0, int axis1) {
  if (!t) return null_arg("transpose");
  int nd = tg_ndim(t), order[TG_MAX_DIMS];
  if (!normalize_axis("transpose", &axis0, nd, AXIS_OF_SCALAR) || !normalize_axis("transpose", &axis1, nd, AXIS_OF_SCALAR))
    return NULL;
  for (int i = 0; i < nd; i++) order[i] = i;
  order[axis0] = axis1, order[axis1] = axis0;
  return tg_permute(t, order, nd);
}

/* reshape to shape with axis `skip` removed or an axis of size 1 inserted at `insert` */
static tg_tensor *reshape_edit(tg_tensor *t, int skip, int insert) {
  int nd = tg_ndim(t), n = 0;
  int64_t s[TG_MAX_DIMS + 1];
  for (int i = 0; i <= nd; i++) {
    if (i == insert) s[n++] = 1;
    if (i < nd && i != skip) s[n++] = uop_shape(t->u)[i];
  }
  return tg_reshape(t, s, n);
}

tg_tensor *tg_squeeze(tg_tensor *t, int axis) {
  if (!t) return null_arg("squeeze");
  int nd = tg_ndim(t);
  if (axis == TG_ALL_AXES) {
    int64_t s[TG_MAX_DIMS];
    int n = 0;
    for (int i = 0; i < nd; i++)
      if (uop_shape(t->u)[i] != 1) s[n++] = uop_shape(t->u)[i];
    return tg_reshape(t, s, n);
  }
  if (!normalize_axis("squeeze", &axis, nd, AXIS_OF_SCALAR)) return NULL;
  if (nd == 0) return tg_reshape(t, NULL, 0); /* a 0-d tensor stays 0-d (PyTorch) */
  char b[256];
  if (uop_shape(t->u)[axis] != 1)
    return tensor_error("squeeze: axis %d of %s has size %lld, not 1", axis, shape_str(b, sizeof b, t->u),
                        (long long)uop_shape(t->u)[axis]);
  return reshape_edit(t, axis, -1);
}

tg_tensor *tg_unsqueeze(tg_tensor *t, int axis) {
  if (!t) return null_arg("unsqueeze");
  if (!normalize_axis("unsqueeze", &axis, tg_ndim(t), AXIS_NEW)) return NULL;
  if (tg_ndim(t) >= TG_MAX_DIMS) return shape_error("unsqueeze: a rank-%d tensor is at the rank limit %d", tg_ndim(t), TG_MAX_DIMS);
  return reshape_edit(t, -1, axis);
}

tg_tensor *tg_flatten(tg_tensor *t, int start_axis, int end_axis) {
  if (!t) return null_arg("flatten");
  int nd = tg_ndim(t);
  if (!normalize_axis("flatten", &start_axis, nd, AXIS_OF_SCALAR) || !normalize_axis("flatten", &end_axis, nd, AXIS_OF_SCALAR))
    return NULL;
  if (nd == 0) return tg_reshape(t, (int64_t[]){1}, 1);
  if (end_axis < start_axis) return tensor_error("flatten: end axis %d before start axis %d", end_axis, start_axis);
  int64_t s[TG_MAX_DIMS];
  int n = 0;
  for (int i = 0; i < nd; i++) { /* a product of some sizes of a valid shape: cannot overflow (shape.h) */
    if (i <= start_axis || i > end_axis) s[n++] = uop_shape(t->u)[i];
    else s[n - 1] *= uop_shape(t->u)[i];
  }
  return tg_reshape(t, s, n);
}

/* Take every k-th element of an axis whose size is (len-1)*k+1 or more: pad to len*k,
 * reshape to (len, k), keep column 0. For len >= 2, (len-1)*k < size, so len*k cannot
 * overflow; len <= 1 is a plain crop whatever k is. */
static tg_tensor *stride_axis(tg_tensor *t, int axis, int64_t len, int64_t k) {
  int nd = tg_ndim(t);
  int64_t n = uop_shape(t->u)[axis], st[TG_MAX_DIMS] = {0}, en[TG_MAX_DIMS], zero[TG_MAX_DIMS] = {0};
  int64_t after[TG_MAX_DIMS] = {0}, s[TG_MAX_DIMS + 1];
  for (int i = 0; i < nd; i++) en[i] = uop_shape(t->u)[i];
  if (k == 1 || len <= 1) {
    en[axis] = len;
    return tg_shrink(t, st, en);
  }
  if (n < len * k) after[axis] = len * k - n;
  else en[axis] = len * k;
  t = n < len * k ? tg_pad(t, zero, after, 0) : tg_shrink(t, st, en);
  for (int i = 0, j = 0; i < nd; i++) {
    s[j++] = i == axis ? len : uop_shape(t->u)[i];
    if (i == axis) s[j++] = k;
  }
  t = tg_reshape(t, s, nd + 1);
  for (int i = 0; i <= nd; i++) st[i] = 0, en[i] = s[i];
  en[axis + 1] = 1;
  return tg_squeeze(tg_shrink(t, st, en), axis + 1);
}

tg_tensor *tg_slice(tg_tensor *t, int axis, int64_t start, int64_t stop, int64_t step) {
  if (!t) return null_arg("slice");
  int nd = tg_ndim(t);
  if (!normalize_axis("slice", &axis, nd, AXIS_OF) || !sym_axis_plain("slice", t->u, axis)) return NULL;
  if (step == 0) return tensor_error("slice: step is 0");
  int64_t n = uop_shape(t->u)[axis];
  /* Python's slice index adjustment; every value stays within [-1, n] (no overflow) */
  bool open_start = start == TG_SLICE_END && step > 0;
  if (open_start) start = 0;
  if (start == TG_SLICE_END) start = n - 1;
  if (start < 0) start += n;
  if (stop != TG_SLICE_END && stop < 0) stop += n;
  uint64_t mag = step > 0 ? (uint64_t)step : 0 - (uint64_t)step; /* |INT64_MIN| fits in uint64 */
  int64_t len;
  if (step > 0) {
    start = start < 0 ? 0 : start > n ? n : start;
    stop = stop == TG_SLICE_END || stop > n ? n : stop < 0 ? 0 : stop;
    len = stop > start ? (int64_t)((uint64_t)(stop - start - 1) / mag) + 1 : 0;
  } else {
    start = start < 0 ? -1 : start >= n ? n - 1 : start;
    stop = stop == TG_SLICE_END || stop < -1 ? -1 : stop >= n ? n - 1 : stop;
    len = start > stop ? (int64_t)((uint64_t)(start - stop - 1) / mag) + 1 : 0;
  }
  int64_t k = len > 1 ? (int64_t)mag : 1; /* len > 1: mag < n */
  tg_scope *s = tg_scope_begin();
  tg_tensor *x = t;
  int64_t first = start;
  if (step < 0) { /* flip, then slice forward from the mirrored start */
    x = tg_flip(t, &axis, 1);
    first = n - 1 - start;
  }
  int64_t st[TG_MAX_DIMS] = {0}, en[TG_MAX_DIMS];
  for (int i = 0; i < nd; i++) en[i] = uop_shape(t->u)[i];
  if (len > 0) st[axis] = first;
  else st[axis] = en[axis] = 0;
  x = tg_shrink(x, st, en);
  tg_tensor *r = tg_keep(x ? stride_axis(x, axis, len, k) : NULL);
  tg_scope_end(s);
  return r;
}

tg_tensor *tg_cat(tg_tensor **ts, int n, int axis) {
  if (!ts || n <= 0) return tensor_error("cat: needs at least one tensor");
  for (int i = 0; i < n; i++)
    if (!ts[i]) return null_arg("cat");
  int nd = tg_ndim(ts[0]);
  if (!normalize_axis("cat", &axis, nd, AXIS_OF)) return NULL;
  for (int i = 0; i < n; i++) /* the offsets are numbers: a variable size would be its layout */
    if (tg_ndim(ts[i]) == nd && !sym_axis_plain("cat", ts[i]->u, axis)) return NULL;
  int64_t total = 0;
  tg_dtype dt = ts[0]->u->dtype;
  char a[256], b[256];
  for (int i = 0; i < n; i++) {
    bool ok = tg_ndim(ts[i]) == nd;
    for (int d = 0; ok && d < nd; d++) ok = d == axis || sym_dim(ts[i]->u, d) == sym_dim(ts[0]->u, d);
    if (!ok)
      return tensor_error("cat: shapes %s and %s differ outside axis %d", shape_str(a, sizeof a, ts[0]->u),
                          shape_str(b, sizeof b, ts[i]->u), axis);
    if (!ck_add(total, uop_shape(ts[i]->u)[axis], &total))
      return shape_error("cat: the sizes on axis %d add up to more than 2^63 - 1", axis);
    dt = tg_promote_types(dt, ts[i]->u->dtype);
  }
  int64_t out[TG_MAX_DIMS];
  memcpy(out, uop_shape(ts[0]->u), sizeof(int64_t) * (size_t)nd);
  out[axis] = total;
  if (!shape_check("cat", out, nd, dt)) return NULL;
  /* pad every piece to the full size and select by position: keeps -0.0 and all dtypes */
  POOL_BEGIN;
  uop *acc = NULL;
  int64_t offset = 0, arg[2 * TG_MAX_DIMS] = {0};
  for (int i = 0; i < n; i++) {
    uop *x = ucast(ts[i]->u, dt);
    int64_t len = uop_shape(x)[axis];
    arg[2 * axis] = offset, arg[2 * axis + 1] = total - offset - len;
    uop *p = uop_new(OP_PAD, dt, &x, 1, arg, 2 * nd);
    if (!acc) acc = p;
    else {
      uop *ones = uconst_like(x, 1, TG_BOOL);
      uop *mask = uop_new(OP_PAD, TG_BOOL, &ones, 1, arg, 2 * nd);
      acc = uop_new3(OP_WHERE, dt, mask, p, acc);
    }
    offset += len;
  }
  POOL_END(acc);
}

tg_tensor *tg_stack(tg_tensor **ts, int n, int axis) {
  if (!ts || n <= 0) return tensor_error("stack: needs at least one tensor");
  for (int i = 0; i < n; i++)
    if (!ts[i]) return null_arg("stack");
  if (!normalize_axis("stack", &axis, tg_ndim(ts[0]), AXIS_NEW)) return NULL;
  char a[256], b[256];
  for (int i = 1; i < n; i++)
    if (tg_ndim(ts[i]) != tg_ndim(ts[0]) ||
        memcmp(uop_shape(ts[i]->u), uop_shape(ts[0]->u), sizeof(int64_t) * (size_t)tg_ndim(ts[0])))
      return tensor_error("stack: shapes %s and %s differ", shape_str(a, sizeof a, ts[0]->u),
                          shape_str(b, sizeof b, ts[i]->u));
  int64_t out[TG_MAX_DIMS + 1];
  tg_dtype dt = ts[0]->u->dtype;
  for (int i = 0; i < n; i++) dt = tg_promote_types(dt, ts[i]->u->dtype); /* as tg_cat */
  for (int i = 0, k = 0; i <= tg_ndim(ts[0]); i++) out[i] = i == axis ? n : uop_shape(ts[0]->u)[k++];
  if (!shape_check("stack", out, tg_ndim(ts[0]) + 1, dt)) return NULL; /* rank and size */
  tg_tensor **u = malloc(sizeof *u * (size_t)n);
  if (!u) return tensor_error("stack: out of memory");
  tg_scope *s = tg_scope_begin();
  for (int i = 0; i < n; i++) u[i] = tg_unsqueeze(ts[i], axis);
  tg_tensor *r = tg_keep(tg_cat(u, n, axis));
  tg_scope_end(s);
  free(u);
  return r;
}

int tg_split(tg_tensor *t, const int64_t *sizes, int n, int axis, tg_tensor **out) {
  if (!t) return null_arg("split"), TG_ERR_ARG;
  if (!sizes || n <= 0 || !out) return tg_set_error(TG_ERR_ARG, "split: invalid sizes or output");
  int nd = tg_ndim(t);
  for (int i = 0; i < n; i++) out[i] = NULL;
  if (!normalize_axis("split", &axis, nd, AXIS_OF) || !sym_axis_plain("split", t->u, axis)) return TG_ERR_ARG;
  int64_t total = 0;
  for (int i = 0; i < n; i++) {
    if (sizes[i] < 0) return tg_set_error(TG_ERR_ARG, "split: negative size %lld", (long long)sizes[i]);
    if (!ck_add(total, sizes[i], &total)) return tg_set_error(TG_ERR_SHAPE, "split: sizes add up to more than 2^63 - 1");
  }
  char b[256];
  if (total != uop_shape(t->u)[axis])
    return tg_set_error(TG_ERR_ARG, "split: sizes sum to %lld but axis %d of %s has %lld", (long long)total, axis,
                        shape_str(b, sizeof b, t->u), (long long)uop_shape(t->u)[axis]);
  int64_t st[TG_MAX_DIMS] = {0}, en[TG_MAX_DIMS];
  for (int i = 0; i < nd; i++) en[i] = uop_shape(t->u)[i];
  int64_t off = 0;
  for (int i = 0; i < n; i++) {
    st[axis] = off, en[axis] = off + sizes[i];
    if (!(out[i] = tg_shrink(t, st, en))) { /* out of memory: nothing half-built */
      for (int j = 0; j < i; j++) tg_free(out[j]), out[j] = NULL;
      return tg_error_status_or(TG_ERR_NOMEM);
    }
    off += sizes[i];
  }
  return 0;
}

tg_tensor *tg_repeat(tg_tensor *t, const int64_t *reps, int ndim) {
  if (!t) return null_arg("repeat");
  int nd = tg_ndim(t);
  if (!check_rank("repeat", ndim)) return NULL;
  if (ndim < nd || (ndim && !reps)) return tensor_error("repeat: %d repeats for a rank-%d tensor", ndim, nd);
  /* (.., d, ..) → (.., 1, d, ..) → expand (.., r, d, ..) → (.., r*d, ..); axes repeated once keep d */
  int64_t s1[TG_MAX_DIMS], s2[TG_MAX_DIMS], s3[TG_MAX_DIMS];
  int m = 0;
  char a[256];
  for (int i = 0; i < ndim; i++) {
    int64_t d = i < ndim - nd ? 1 : uop_shape(t->u)[i - (ndim - nd)];
    if (reps[i] < 0) return tensor_error("repeat: negative repeat %lld", (long long)reps[i]);
    if (reps[i] != 1 && i >= ndim - nd && !sym_axis_plain("repeat", t->u, i - (ndim - nd))) return NULL;
    if (!ck_mul(reps[i], d, &s3[i]))
      return shape_error("repeat: %lld repeats of size %lld overflow int64", (long long)reps[i], (long long)d);
    if (m + (reps[i] != 1) >= TG_MAX_DIMS) /* room for this axis and, if repeated, its new one */
      return shape_error("repeat: %s needs more than %d axes on the way", tg_fmt_shape(a, sizeof a, reps, ndim), TG_MAX_DIMS);
    if (reps[i] != 1) s1[m] = 1, s2[m++] = reps[i];
    s1[m] = s2[m] = d, m++;
  }
  if (!shape_check("repeat", s3, ndim, tg_get_dtype(t))) return NULL;
  tg_scope *s = tg_scope_begin();
  tg_tensor *r = tg_keep(tg_reshape(tg_expand(tg_reshape(t, s1, m), s2, m), s3, ndim));
  tg_scope_end(s);
  return r;
}

tg_tensor *tg_contiguous(tg_tensor *t) {
  if (!t) return null_arg("contiguous");
  POOL_BEGIN;
  POOL_END(t->u->op == OP_BUFFER ? t->u : uop_new1(OP_CONTIGUOUS, t->u->dtype, t->u));
}

/* ---------------------------------------------------------------- pad modes and roll
 * Every mode is a view of the input: a reflection is the input followed by its reversed
 * inner part, repeated; a circular pad repeats the input; a replicated edge is an expand.
 * out[j] = x[f(j - before)] for j in [0, n + before + after). */

/* t cropped to [st, en) on one axis. */
static tg_tensor *axis_range(tg_tensor *t, int axis, int64_t st, int64_t en) {
  if (!t) return NULL;
  int nd = tg_ndim(t);
  int64_t a[TG_MAX_DIMS] = {0}, b[TG_MAX_DIMS];
  for (int i = 0; i < nd; i++) b[i] = uop_shape(t->u)[i];
  a[axis] = st, b[axis] = en;
  return tg_shrink(t, a, b);
}

/* out[j] = t[(start + j) mod n] for j in [0, len) along axis (0 <= start < n): t repeated
 * along the axis, then cropped. */
static tg_tensor *wrap_axis(tg_tensor *t, int axis, int64_t start, int64_t len) {
  if (!t) return NULL;
  int nd = tg_ndim(t);
  int64_t n = uop_shape(t->u)[axis], reps[TG_MAX_DIMS], end;
  if (len == 0) return axis_range(t, axis, 0, 0);
  if (!ck_add(start, len, &end))
    return shape_error("pad: %lld + %lld elements overflow int64", (long long)start, (long long)len);
  for (int i = 0; i < nd; i++) reps[i] = 1;
  reps[axis] = end / n + (end % n != 0);
  return axis_range(tg_repeat(t, reps, nd), axis, start, end);
}

/* (-b) mod p in [0, p) for p > 0 and b > INT64_MIN. */
static int64_t neg_mod(int64_t b, int64_t p) { return ((-b) % p + p) % p; }

/* Reflect about the first and last element (not repeating them), periodic like numpy: the
 * period is x followed by x[n-2..1]. Needs n >= 2 unless nothing is added. */
static tg_tensor *pad_reflect_axis(tg_tensor *x, int axis, int64_t b, int64_t a) {
  int64_t n = uop_shape(x->u)[axis];
  if (n < 2 && (b > 0 || a > 0))
    return tensor_error("pad: reflect padding %lld/%lld needs at least 2 elements on axis %d (it has %lld)", (long long)b,
                        (long long)a, axis, (long long)n);
  if (n < 2) return axis_range(x, axis, -b, n + a); /* only crops */
  tg_tensor *period = x;
  if (n > 2) {
    tg_tensor *parts[2] = {x, tg_flip(axis_range(x, axis, 1, n - 1), &axis, 1)};
    period = tg_cat(parts, 2, axis);
  }
  return wrap_axis(period, axis, neg_mod(b, 2 * n - 2), n + b + a);
}

/* Crop the negative amounts; repeat the first/last element for the positive ones. */
static tg_tensor *pad_replicate_axis(tg_tensor *x, int axis, int64_t b, int64_t a) {
  int64_t n = uop_shape(x->u)[axis];
  x = axis_range(x, axis, b < 0 ? -b : 0, a < 0 ? n + a : n);
  int64_t m = x ? uop_shape(x->u)[axis] : 0, shape[TG_MAX_DIMS];
  if (!x || (b <= 0 && a <= 0)) return x;
  if (m == 0) return tensor_error("pad: replicate padding of an empty axis %d", axis);
  tg_tensor *parts[3];
  int np = 0;
  memcpy(shape, uop_shape(x->u), sizeof(int64_t) * (size_t)tg_ndim(x));
  if (b > 0) shape[axis] = b, parts[np++] = tg_expand(axis_range(x, axis, 0, 1), shape, tg_ndim(x));
  parts[np++] = x;
  if (a > 0) shape[axis] = a, parts[np++] = tg_expand(axis_range(x, axis, m - 1, m), shape, tg_ndim(x));
  return tg_cat(parts, np, axis);
}

/* Crop the negative amounts, then wrap around what is left (PyTorch's order). */
static tg_tensor *pad_circular_axis(tg_tensor *x, int axis, int64_t b, int64_t a) {
  int64_t n = uop_shape(x->u)[axis];
  x = axis_range(x, axis, b < 0 ? -b : 0, a < 0 ? n + a : n);
  int64_t m = x ? uop_shape(x->u)[axis] : 0;
  if (!x || (b <= 0 && a <= 0)) return x;
  if (m == 0) return tensor_error("pad: circular padding of an empty axis %d", axis);
  b = b > 0 ? b : 0, a = a > 0 ? a : 0;
  return wrap_axis(x, axis, neg_mod(b, m), m + b + a);
}

typedef tg_tensor *(*pad_axis_fn)(tg_tensor *x, int axis, int64_t b, int64_t a);
static const pad_axis_fn pad_axis_fns[] = {
    [TG_PAD_REFLECT] = pad_reflect_axis, [TG_PAD_REPLICATE] = pad_replicate_axis, [TG_PAD_CIRCULAR] = pad_circular_axis};

tg_tensor *tg_pad_mode(tg_tensor *t, const int64_t *before, const int64_t *after, tg_padding mode, double value) {
  if (!t) return null_arg("pad");
  if ((int)mode < 0 || mode > TG_PAD_CIRCULAR) return tensor_error("pad: invalid mode %d", (int)mode);
  if (mode == TG_PAD_CONSTANT) return tg_pad(t, before, after, value);
  int64_t st[TG_MAX_DIMS], en[TG_MAX_DIMS], pb[TG_MAX_DIMS], pa[TG_MAX_DIMS], out[TG_MAX_DIMS];
  if (!split_pad("pad", t, before, after, st, en, pb, pa, out)) return NULL;
  tg_scope *s = tg_scope_begin();
  tg_tensor *x = t;
  for (int i = 0; x && i < tg_ndim(t); i++)
    if (before[i] || after[i]) x = sym_axis_plain("pad", t->u, i) ? pad_axis_fns[mode](x, i, before[i], after[i]) : NULL;
  bool same = x == t; /* nothing to pad: tg_keep(t) would move the caller's t out of its scope */
  x = same ? NULL : tg_keep(x);
  tg_scope_end(s);
  return same ? tensor_wrap(t->u) : x;
}

/* out[j] = x[(j - shift) mod n] along axis. */
static tg_tensor *roll_axis(tg_tensor *x, int axis, int64_t shift) {
  int64_t n = uop_shape(x->u)[axis];
  return n == 0 ? x : wrap_axis(x, axis, neg_mod(shift % n, n), n);
}

tg_tensor *tg_roll(tg_tensor *t, const int64_t *shifts, const int *axes, int n) {
  if (!t) return null_arg("roll");
  if (!shifts || n <= 0 || (!axes && n != 1))
    return tensor_error("roll: %d shifts for %s axes (without axes: exactly one shift)", n, axes ? "as many" : "no");
  if (axes && n > TG_MAX_DIMS) return tensor_error("roll: %d axes (at most %d)", n, TG_MAX_DIMS);
  int nd = tg_ndim(t), ax[TG_MAX_DIMS];
  for (int i = 0; axes && i < n; i++)
    if (ax[i] = axes[i], !normalize_axis("roll", &ax[i], nd, AXIS_OF_SCALAR) || (nd && !sym_axis_plain("roll", t->u, ax[i]))) return NULL;
  tg_scope *s = tg_scope_begin();
  tg_tensor *x = axes && nd ? t : tg_reshape(t, (int64_t[]){tg_numel(t)}, 1);
  for (int i = 0; x && i < n; i++) x = roll_axis(x, axes && nd ? ax[i] : 0, shifts[i]);
  x = tg_keep(x ? tg_reshape(x, uop_shape(t->u), nd) : NULL);
  tg_scope_end(s);
  return x;
}

/* ---------------------------------------------------------------- triangles and diagonals */

/* where(keep, t, 0) with keep broadcast to t's shape (the 0 is a literal). */
static tg_tensor *keep_or_zero(tg_tensor *t, tg_tensor *keep) {
  tg_tensor *k = t && keep ? tg_expand(keep, uop_shape(t->u), tg_ndim(t)) : NULL;
  if (!k) return NULL;
  POOL_BEGIN;
  POOL_END(uop_new3(OP_WHERE, t->u->dtype, k->u, t->u, uconst_like(t->u, 0, t->u->dtype)));
}

/* Keep column c of row r where c - r <= k (lower) or >= k (upper), over the last two axes. */
static tg_tensor *triangle(const char *op, tg_tensor *t, int64_t k, bool lower) {
  if (!t) return null_arg(op);
  int nd = tg_ndim(t);
  char b[256];
  if (nd < 2) return tensor_error("%s: needs at least 2 axes, got %s", op, shape_str(b, sizeof b, t->u));
  int64_t n = uop_shape(t->u)[nd - 2], m = uop_shape(t->u)[nd - 1];
  k = k < -n ? -n : k > m ? m : k; /* beyond these every element is kept or dropped */
  tg_scope *s = tg_scope_begin();
  tg_tensor *row = tg_reshape(tg_arange((double)k, (double)(n + k), 1, TG_INT64), (int64_t[]){n, 1}, 2); /* r + k */
  tg_tensor *col = tg_reshape(tg_arange(0, (double)m, 1, TG_INT64), (int64_t[]){1, m}, 2);
  tg_tensor *r = tg_keep(keep_or_zero(t, lower ? tg_le(col, row) : tg_ge(col, row)));
  tg_scope_end(s);
  return r;
}

tg_tensor *tg_tril(tg_tensor *t, int64_t diagonal) { return triangle("tril", t, diagonal, true); }
tg_tensor *tg_triu(tg_tensor *t, int64_t diagonal) { return triangle("triu", t, diagonal, false); }

tg_tensor *tg_diagonal(tg_tensor *t, int64_t offset, int axis1, int axis2) {
  if (!t) return null_arg("diagonal");
  int nd = tg_ndim(t), order[TG_MAX_DIMS], k = 0;
  if (!normalize_axis("diagonal", &axis1, nd, AXIS_OF) || !normalize_axis("diagonal", &axis2, nd, AXIS_OF)) return NULL;
  if (axis1 == axis2) return tensor_error("diagonal: both axes are %d", axis1);
  if (!sym_axis_plain("diagonal", t->u, axis1) || !sym_axis_plain("diagonal", t->u, axis2)) return NULL;
  for (int i = 0; i < nd; i++)
    if (i != axis1 && i != axis2) order[k++] = i;
  order[k++] = axis1, order[k++] = axis2;
  int64_t n = uop_shape(t->u)[axis1], m = uop_shape(t->u)[axis2];
  int64_t r0 = offset < 0 ? (offset < -n ? n : -offset) : 0, c0 = offset > 0 ? (offset > m ? m : offset) : 0;
  int64_t len = n - r0 < m - c0 ? n - r0 : m - c0, w = m - c0, shape[TG_MAX_DIMS];
  tg_scope *s = tg_scope_begin();
  tg_tensor *x = tg_permute(t, order, nd); /* (.., n, m) → rows [r0, r0+len), columns [c0, m) */
  x = axis_range(axis_range(x, nd - 1, c0, m), nd - 2, r0, r0 + len);
  for (int i = 0; i < nd - 2; i++) shape[i] = uop_shape(t->u)[order[i]];
  shape[nd - 2] = len * w; /* flat: element (i, i) is at i*(w+1) */
  x = x ? tg_reshape(x, shape, nd - 1) : NULL;
  x = tg_keep(x ? stride_axis(x, nd - 2, len, len > 1 ? w + 1 : 1) : NULL);
  tg_scope_end(s);
  return x;
}

tg_tensor *tg_diag(tg_tensor *t, int64_t diagonal) {
  if (!t) return null_arg("diag");
  int nd = tg_ndim(t);
  char b[256];
  if (nd == 2) return tg_diagonal(t, diagonal, 0, 1);
  if (nd != 1) return tensor_error("diag: needs 1 or 2 axes, got %s", shape_str(b, sizeof b, t->u));
  if (!sym_axis_plain("diag", t->u, 0)) return NULL;
  if (diagonal == INT64_MIN) return shape_error("diag: offset %lld is too large", (long long)diagonal);
  int64_t n = uop_shape(t->u)[0], k = diagonal < 0 ? -diagonal : diagonal, size, flat;
  if (!ck_add(n, k, &size) || !ck_mul(n, n + 1, &flat))
    return shape_error("diag: a (%lld,) tensor on diagonal %lld overflows int64", (long long)n, (long long)diagonal);
  if (!shape_check("diag", (int64_t[]){size, size}, 2, tg_get_dtype(t))) return NULL;
  /* (n, 1) padded to (n, n+1) and read as (n*(n+1)) → its first n*n as (n, n): x[i] lands at (i, i) */
  tg_scope *s = tg_scope_begin();
  tg_tensor *x = pad_const(tg_reshape(t, (int64_t[]){n, 1}, 2), (int64_t[]){0, 0}, (int64_t[]){0, n}, 0);
  x = x ? tg_reshape(x, &flat, 1) : NULL;
  x = x ? tg_reshape(axis_range(x, 0, 0, n * n), (int64_t[]){n, n}, 2) : NULL;
  int64_t pb[2] = {diagonal < 0 ? k : 0, diagonal > 0 ? k : 0}, pa[2] = {pb[1], pb[0]};
  x = tg_keep(pad_const(x, pb, pa, 0));
  tg_scope_end(s);
  return x;
}

/* ---------------------------------------------------------------- windows, unflatten, grids */

/* Windows of `size` elements every `step` along axis, as views (tinygrad's _pool for one axis):
 * the axis becomes (o, size), o = (n - size) / step + 1. With size <= step the axis is cut into
 * (o, step) blocks whose first `size` are kept; otherwise it is repeated, cut to `size` rows of
 * n + 1 elements (row r starts at input element r), and each row is strided by `step`. */
static tg_tensor *windows_axis(tg_tensor *t, int axis, int64_t size, int64_t step, int64_t o) {
  int nd = tg_ndim(t);
  int64_t sh[TG_MAX_DIMS + 1], n = uop_shape(t->u)[axis];
  for (int i = 0; i < nd; i++) sh[i < axis ? i : i + 1] = uop_shape(t->u)[i]; /* sh[axis], sh[axis+1]: per path */
  if (size == 0 || o == 1) { /* one window: (.., 1, size, ..); or empty windows */
    tg_tensor *x = tg_unsqueeze(axis_range(t, axis, 0, size), axis);
    sh[axis] = o, sh[axis + 1] = size;
    return tg_expand(x, sh, nd + 1);
  }
  if (size <= step) {
    int64_t zero[TG_MAX_DIMS] = {0}, pa[TG_MAX_DIMS] = {0}, blocks = o * step; /* <= n - size + step */
    pa[axis] = blocks > n ? blocks - n : 0;
    tg_tensor *x = axis_range(pad_const(t, zero, pa, 0), axis, 0, blocks);
    sh[axis] = o, sh[axis + 1] = step;
    return x ? axis_range(tg_reshape(x, sh, nd + 1), axis + 1, 0, size) : NULL;
  }
  int64_t reps[TG_MAX_DIMS], row = n + 1; /* size rows of n + 1: o*step <= n - size + step < row */
  for (int i = 0; i < nd; i++) reps[i] = i == axis ? size + 1 : 1; /* (size + 1) n >= size (n + 1) */
  tg_tensor *x = axis_range(tg_repeat(t, reps, nd), axis, 0, size * row);
  sh[axis] = size, sh[axis + 1] = row;
  x = x ? axis_range(tg_reshape(x, sh, nd + 1), axis + 1, 0, o * step) : NULL; /* (size, o*step) */
  x = x ? stride_axis(x, axis + 1, o, step) : NULL;                             /* (size, o) */
  return x ? tg_transpose(x, axis, axis + 1) : NULL;
}

/* A 0-d tensor has one element on axis 0 (PyTorch): windows of 0 or 1 of it, shape (size,). */
static tg_tensor *unfold_scalar(tg_tensor *t, int64_t size, int64_t step) {
  if (size < 0 || size > 1 || step < 1)
    return tensor_error("unfold: windows of %lld every %lld do not fit a 0-d tensor (need 0 <= size <= 1, step >= 1)",
                        (long long)size, (long long)step);
  tg_scope *s = tg_scope_begin();
  tg_tensor *r = tg_keep(tg_shrink(tg_reshape(t, (const int64_t[]){1}, 1), (const int64_t[]){0}, (const int64_t[]){size}));
  tg_scope_end(s);
  return r;
}

tg_tensor *tg_unfold(tg_tensor *t, int axis, int64_t size, int64_t step) {
  if (!t) return null_arg("unfold");
  int nd = tg_ndim(t);
  if (!normalize_axis("unfold", &axis, nd, AXIS_OF_SCALAR)) return NULL;
  if (nd == 0) return unfold_scalar(t, size, step);
  if (!sym_axis_plain("unfold", t->u, axis)) return NULL;
  int64_t n = uop_shape(t->u)[axis], out[TG_MAX_DIMS + 1];
  char b[256];
  if (size < 0 || size > n || step < 1)
    return tensor_error("unfold: windows of %lld every %lld do not fit axis %d of %s (need 0 <= size <= %lld, step >= 1)",
                        (long long)size, (long long)step, axis, shape_str(b, sizeof b, t->u), (long long)n);
  if (nd >= TG_MAX_DIMS) return shape_error("unfold: a rank-%d tensor is at the rank limit %d", nd, TG_MAX_DIMS);
  int64_t o = (n - size) / step + 1;
  for (int i = 0; i < nd; i++) out[i] = i == axis ? o : uop_shape(t->u)[i];
  out[nd] = size;
  if (!shape_check("unfold", out, nd + 1, tg_get_dtype(t))) return NULL;
  tg_scope *s = tg_scope_begin();
  tg_tensor *w = windows_axis(t, axis, size, step, o); /* (.., o, size, ..) */
  int order[TG_MAX_DIMS + 1];
  for (int i = 0, k = 0; i <= nd; i++)
    if (i != axis + 1) order[k++] = i;
  order[nd] = axis + 1;
  w = tg_keep(w ? tg_permute(w, order, nd + 1) : NULL);
  tg_scope_end(s);
  return w;
}

tg_tensor *tg_unflatten(tg_tensor *t, int axis, const int64_t *sizes, int n) {
  if (!t) return null_arg("unflatten");
  int nd = tg_ndim(t);
  if (!normalize_axis("unflatten", &axis, nd, AXIS_OF)) return NULL;
  if (n < 1 || !sizes || n - 1 > TG_MAX_DIMS - nd)
    return tensor_error("unflatten: %d sizes for a rank-%d tensor (1..%d)", n, nd, TG_MAX_DIMS - nd + 1);
  int64_t shape[TG_MAX_DIMS], known = 1, dim = uop_shape(t->u)[axis];
  int infer = -1;
  char a[256], b[256];
  for (int i = 0; i < n; i++) {
    bool bad = sizes[i] < -1 || (sizes[i] == -1 && infer >= 0) || (sizes[i] >= 0 && !ck_mul(known, sizes[i], &known));
    if (bad)
      return tensor_error("unflatten: invalid sizes %s (one -1 allowed)", tg_fmt_shape(a, sizeof a, sizes, n));
    if (sizes[i] == -1) infer = i;
  }
  if (infer >= 0 ? known == 0 || dim % known : known != dim)
    return tensor_error("unflatten: sizes %s do not make axis %d of %s (%lld)", tg_fmt_shape(a, sizeof a, sizes, n), axis,
                        shape_str(b, sizeof b, t->u), (long long)dim);
  int k = 0;
  for (int i = 0; i < nd; i++) {
    if (i != axis) { shape[k++] = uop_shape(t->u)[i]; continue; }
    for (int j = 0; j < n; j++) shape[k++] = j == infer ? dim / known : sizes[j];
  }
  return tg_reshape(t, shape, k);
}

int tg_meshgrid(tg_tensor **ts, int n, bool xy, tg_tensor **out) {
  if (!out || !ts || n < 1 || n > TG_MAX_DIMS)
    return tg_set_error(TG_ERR_ARG, "meshgrid: needs 1..%d tensors and an output array", TG_MAX_DIMS);
  for (int i = 0; i < n; i++) out[i] = NULL;
  int64_t shape[TG_MAX_DIMS];
  for (int i = 0; i < n; i++) {
    if (!ts[i]) return null_arg("meshgrid"), TG_ERR_ARG;
    if (tg_ndim(ts[i]) > 1)
      return tg_set_error(TG_ERR_ARG, "meshgrid: tensor %d has rank %d (0 or 1 expected)", i, tg_ndim(ts[i]));
    if (tg_get_dtype(ts[i]) != tg_get_dtype(ts[0]))
      return tg_set_error(TG_ERR_ARG, "meshgrid: tensor %d is %s, tensor 0 is %s", i, tg_dtype_name(tg_get_dtype(ts[i])),
                          tg_dtype_name(tg_get_dtype(ts[0])));
    shape[i] = tg_numel(ts[i]);
  }
  int swap = xy && n > 1; /* "xy": the first two output axes are exchanged (numpy's default) */
  if (swap) { int64_t s0 = shape[0]; shape[0] = shape[1], shape[1] = s0; }
  if (!shape_check("meshgrid", shape, n, tg_get_dtype(ts[0]))) return tg_error_status_or(TG_ERR_SHAPE);
  for (int i = 0; i < n; i++) {
    int pos = swap && i < 2 ? 1 - i : i;
    int64_t one[TG_MAX_DIMS];
    for (int d = 0; d < n; d++) one[d] = d == pos ? shape[d] : 1;
    tg_scope *s = tg_scope_begin();
    out[i] = tg_keep(tg_expand(tg_reshape(ts[i], one, n), shape, n));
    tg_scope_end(s);
    if (!out[i]) { /* out of memory: nothing half-built */
      for (int j = 0; j < i; j++) tg_free(out[j]), out[j] = NULL;
      return tg_error_status_or(TG_ERR_NOMEM);
    }
  }
  return 0;
}

tg_tensor *tg_repeat_interleave(tg_tensor *t, int64_t repeats, int axis) {
  if (!t) return null_arg("repeat_interleave");
  if (repeats < 0) return tensor_error("repeat_interleave: negative repeats %lld", (long long)repeats);
  tg_scope *s = tg_scope_begin();
  tg_tensor *x = axis == TG_ALL_AXES ? tg_reshape(t, (int64_t[]){tg_numel(t)}, 1) : t;
  if (axis == TG_ALL_AXES) axis = 0;
  int nd = tg_ndim(x);
  tg_tensor *r = NULL;
  if (normalize_axis("repeat_interleave", &axis, nd, AXIS_OF_SCALAR) && (!nd || sym_axis_plain("repeat_interleave", x->u, axis))) {
    if (nd == 0) x = tg_reshape(x, (int64_t[]){1}, 1), nd = 1; /* a scalar has one axis: the result is (repeats,) */
    int64_t reps[TG_MAX_DIMS + 1], shape[TG_MAX_DIMS];
    for (int i = 0; i <= nd; i++) reps[i] = i == axis + 1 ? repeats : 1;
    memcpy(shape, uop_shape(x->u), sizeof(int64_t) * (size_t)nd);
    if (!ck_mul(shape[axis], repeats, &shape[axis]))
      r = shape_error("repeat_interleave: %lld repeats of %lld elements overflow int64", (long long)repeats,
                      (long long)uop_shape(x->u)[axis]);
    else /* (.., n, ..) → (.., n, 1, ..) tiled to (.., n, r, ..) → (.., n*r, ..) */
      r = tg_reshape(tg_repeat(tg_unsqueeze(x, axis + 1), reps, nd + 1), shape, nd);
  }
  r = tg_keep(r);
  tg_scope_end(s);
  return r;
}
