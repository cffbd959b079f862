/* movement.c — views (reshape, permute, expand, pad, shrink, flip) and what is built from
 * them (slicing, cat, stack, split, repeat, squeeze, …). Views are index math: no copies. */
#include <stdlib.h>
#include <string.h>

#include "tensor/shape.h"
#include "tensor/tensor.h"

#define POOL_BEGIN size_t pool_mark_ = uop_pool_mark()
#define POOL_END(u) do { tg_tensor *r_ = tensor_wrap(u); uop_pool_release(pool_mark_); return r_; } while (0)

static const char *shape_str(char *buf, size_t n, uop *u) { return tg_fmt_shape(buf, n, uop_shape(u), uop_ndim(u)); }

/* A rank for a new shape: 0..TG_MAX_DIMS (a TG_ERR_SHAPE error otherwise). */
static bool check_rank(const char *op, int nd) {
  if (nd >= 0 && nd <= TG_MAX_DIMS) return true;
  shape_error("%s: rank %d is out of range (0..%d)", op, nd, TG_MAX_DIMS);
  return false;
}

tg_tensor *tg_reshape(tg_tensor *t, const int64_t *shape, int ndim) {
  if (!t) return null_arg("reshape");
  char a[256], b[256];
  if (!check_rank("reshape", ndim)) return NULL;
  if (ndim && !shape) return tensor_error("reshape: shape is NULL (rank %d)", ndim);
  int64_t out[TG_MAX_DIMS], known = 1, numel = tg_numel(t);
  int infer = -1;
  for (int i = 0; i < ndim; i++) {
    out[i] = shape[i];
    if (shape[i] == -1 && infer < 0) { infer = i; continue; }
    if (shape[i] < 0)
      return tensor_error("reshape: invalid target %s (one -1 allowed, sizes >= 0) for %s",
                          tg_fmt_shape(a, sizeof a, shape, ndim), shape_str(b, sizeof b, t->u));
    if (!ck_mul(known, shape[i], &known))
      return shape_error("reshape: target %s has more than 2^63 elements", tg_fmt_shape(a, sizeof a, shape, ndim));
  }
  if (infer >= 0) {
    if (known == 0 || numel % known)
      return tensor_error("reshape: cannot infer -1 in %s from %s", tg_fmt_shape(a, sizeof a, shape, ndim),
                          shape_str(b, sizeof b, t->u));
    out[infer] = numel / known;
    known = numel;
  }
  if (known != numel)
    return tensor_error("reshape: cannot reshape %s (%lld elements) to %s", shape_str(b, sizeof b, t->u),
                        (long long)numel, tg_fmt_shape(a, sizeof a, shape, ndim));
  if (!shape_check("reshape", out, ndim, tg_get_dtype(t))) return NULL; /* e.g. (0,) to (0, 2^62, 2^62) */
  POOL_BEGIN;
  POOL_END(ushape_reshape(t->u, out, ndim));
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
  int64_t padded[TG_MAX_DIMS], out[TG_MAX_DIMS];
  for (int i = 0; i < ndim; i++) {
    int64_t have = i < ndim - nd ? 1 : uop_shape(t->u)[i - (ndim - nd)];
    int64_t want = shape[i] == -1 && i >= ndim - nd ? have : shape[i];
    if (want < 0 || (have != want && have != 1))
      return tensor_error("expand: cannot expand %s to %s", shape_str(b, sizeof b, t->u),
                          tg_fmt_shape(a, sizeof a, shape, ndim));
    padded[i] = have, out[i] = want;
  }
  if (!shape_check("expand", out, ndim, tg_get_dtype(t))) return NULL;
  POOL_BEGIN;
  POOL_END(ushape_expand(ushape_reshape(t->u, padded, ndim), out, ndim));
}

tg_tensor *tg_pad(tg_tensor *t, const int64_t *before, const int64_t *after, double value) {
  if (!t) return null_arg("pad");
  int nd = tg_ndim(t);
  if (nd && (!before || !after)) return tensor_error("pad: before/after are NULL");
  int64_t arg[2 * TG_MAX_DIMS], out[TG_MAX_DIMS];
  bool any = false;
  char b[256];
  for (int i = 0; i < nd; i++) {
    if (before[i] < 0 || after[i] < 0)
      return tensor_error("pad: negative padding %lld/%lld on axis %d", (long long)before[i], (long long)after[i], i);
    if (!ck_add(uop_shape(t->u)[i], before[i], &out[i]) || !ck_add(out[i], after[i], &out[i]))
      return shape_error("pad: padding %lld/%lld on axis %d of %s overflows int64", (long long)before[i],
                         (long long)after[i], i, shape_str(b, sizeof b, t->u));
    arg[2 * i] = before[i], arg[2 * i + 1] = after[i], any |= before[i] || after[i];
  }
  if (!shape_check("pad", out, nd, tg_get_dtype(t))) return NULL;
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

tg_tensor *tg_shrink(tg_tensor *t, const int64_t *starts, const int64_t *ends) {
  if (!t) return null_arg("shrink");
  int nd = tg_ndim(t);
  if (nd && (!starts || !ends)) return tensor_error("shrink: starts/ends are NULL");
  int64_t arg[2 * TG_MAX_DIMS];
  bool any = false;
  char b[256];
  for (int i = 0; i < nd; i++) {
    int64_t n = uop_shape(t->u)[i];
    if (starts[i] < 0 || ends[i] < starts[i] || ends[i] > n)
      return tensor_error("shrink: [%lld, %lld) out of bounds on axis %d of %s", (long long)starts[i],
                          (long long)ends[i], i, shape_str(b, sizeof b, t->u));
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
  if (!normalize_axis("slice", &axis, nd, AXIS_OF)) return NULL;
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
  int64_t total = 0;
  tg_dtype dt = ts[0]->u->dtype;
  char a[256], b[256];
  for (int i = 0; i < n; i++) {
    bool ok = tg_ndim(ts[i]) == nd;
    for (int d = 0; ok && d < nd; d++) ok = d == axis || uop_shape(ts[i]->u)[d] == uop_shape(ts[0]->u)[d];
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
  if (!normalize_axis("split", &axis, nd, AXIS_OF)) return TG_ERR_ARG;
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
