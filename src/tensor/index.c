/* index.c — indexing: one_hot, gather, index_select, scatter and scatter_reduce, masked_fill,
 * and the ops whose output shape depends on data (masked_select, nonzero, repeat_interleave by
 * a tensor), which read their input on the host. Every selection is a comparison mask against
 * an iota and a masked reduction: no data-dependent loads, so an out-of-range index selects
 * nothing, and gradients come from the primitive rules (WHERE, REDUCE_AXIS, EXPAND). Sorting
 * (sort, argsort, topk) is a bitonic network of views and wheres, at the end: keys of up to 32
 * bits packed with their positions into one int64 (one kernel a step), others carried apart. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "grad/gradient.h" /* the sort's custom derivative */
#include "tensor/shape.h"
#include "tensor/tensor.h"
#include "tensor/variable.h"

/* iota along `axis` of a rank-nd shape, shaped (1,..,n,..,1) */
static tg_tensor *axis_iota(int64_t n, int axis, int nd, tg_dtype dt) {
  int64_t s[TG_MAX_DIMS];
  for (int i = 0; i < nd; i++) s[i] = i == axis ? n : 1;
  return tg_reshape(tg_arange(0, (double)n, 1, dt), s, nd);
}

/* One axis of t (a 0-d tensor takes 0 and -1: the caller handles rank 0). */
static bool one_axis(const char *name, tg_tensor *t, int *axis) {
  return normalize_axis(name, axis, tg_ndim(t), AXIS_OF_SCALAR);
}

/* Reduce x over one axis with op, in x's dtype, dropping the axis. */
static uop *reduce_drop(uop *x, uop_op op, int axis) {
  int nd = uop_ndim(x), m = 0;
  int64_t out[TG_MAX_DIMS];
  for (int i = 0; i < nd; i++)
    if (i != axis) out[m++] = uop_shape(x)[i];
  return ushape_reshape(ureduce(x, op, &axis, 1), out, m);
}

tg_tensor *tg_one_hot(tg_tensor *index, int64_t num_classes, tg_dtype dtype) {
  if (!index) return null_arg("one_hot");
  if (num_classes < 0) return tensor_error("one_hot: negative class count %lld", (long long)num_classes);
  if (!dtype_is_int(tg_get_dtype(index)))
    return tensor_error("one_hot: index must be an integer tensor, got %s", tg_dtype_name(tg_get_dtype(index)));
  if (!dtype_valid((int)dtype)) return tensor_error("one_hot: invalid dtype %d", (int)dtype);
  int nd = tg_ndim(index);
  int64_t out[TG_MAX_DIMS + 1];
  memcpy(out, uop_shape(index->u), sizeof(int64_t) * (size_t)nd);
  out[nd] = num_classes;
  if (!shape_check("one_hot", out, nd + 1, dtype)) return NULL; /* also a rank-64 index */
  tg_scope *s = tg_scope_begin();
  tg_tensor *classes = axis_iota(num_classes, nd, nd + 1, TG_INT64);
  tg_tensor *r = tg_keep(tg_cast(tg_eq(tg_unsqueeze(tg_cast(index, TG_INT64), -1), classes), dtype));
  tg_scope_end(s);
  return r;
}

/* where(mask, x, v) with a literal v (mask broadcast to x's shape). */
static tg_tensor *where_const(tg_tensor *mask, tg_tensor *x, double v) {
  tg_tensor *m = mask && x ? tg_expand(mask, uop_shape(x->u), tg_ndim(x)) : NULL;
  if (!m) return NULL;
  size_t mark = uop_pool_mark();
  tg_tensor *r = tensor_wrap(uop_new3(OP_WHERE, x->u->dtype, m->u, x->u, uconst_like(x->u, v, x->u->dtype)));
  uop_pool_release(mark);
  return r;
}

/* A literal constant of x's shape. */
static tg_tensor *const_like(tg_tensor *x, double v, tg_dtype dt) {
  if (!x) return NULL;
  size_t mark = uop_pool_mark();
  tg_tensor *r = tensor_wrap(uconst_like(x->u, v, dt));
  uop_pool_release(mark);
  return r;
}

/* t cropped to [st, en) on one axis. */
static tg_tensor *axis_range(tg_tensor *t, int axis, int64_t st, int64_t en) {
  if (!t) return NULL;
  int nd = tg_ndim(t);
  int64_t a[TG_MAX_DIMS] = {0}, b[TG_MAX_DIMS];
  for (int i = 0; i < nd; i++) b[i] = uop_shape(t->u)[i];
  a[axis] = st, b[axis] = en;
  return tg_shrink(t, a, b);
}

/* op-reduce x over axis in x's dtype (no widening), dropping the axis. */
static tg_tensor *reduce_axis(tg_tensor *x, uop_op op, int axis) {
  if (!x) return NULL;
  size_t m = uop_pool_mark();
  tg_tensor *r = tensor_wrap(reduce_drop(x->u, op, axis));
  uop_pool_release(m);
  return r;
}

/* Sum over `axis` of where(mask, x, 0): selects the one masked value (0 if none). */
static tg_tensor *select_sum(tg_tensor *mask, tg_tensor *x, int axis) {
  return reduce_axis(where_const(mask, x, 0), tg_get_dtype(x) == TG_BOOL ? OP_MAX : OP_ADD, axis);
}

/* op(t as a (1,) view, 0, index as a (1,) view when it is 0-d too), reshaped to index's
 * shape: gather and index_select of a 0-d tensor, which has axis 0 as if it were (1,). */
static tg_tensor *select_from_scalar(tg_tensor *(*op)(tg_tensor *, int, tg_tensor *), tg_tensor *t, tg_tensor *index) {
  int64_t one = 1;
  tg_scope *s = tg_scope_begin();
  tg_tensor *i1 = tg_ndim(index) == 0 ? tg_reshape(index, &one, 1) : index;
  tg_tensor *r = op(tg_reshape(t, &one, 1), 0, i1);
  r = tg_keep(r ? tg_reshape(r, uop_shape(index->u), tg_ndim(index)) : NULL);
  tg_scope_end(s);
  return r;
}

tg_tensor *tg_gather(tg_tensor *t, int axis, tg_tensor *index) {
  if (!t || !index) return null_arg("gather");
  int nd = tg_ndim(t);
  if (!one_axis("gather", t, &axis) || (nd && !sym_axis_plain("gather", t->u, axis))) return NULL;
  if (!dtype_is_int(tg_get_dtype(index)))
    return tensor_error("gather: index must be an integer tensor, got %s", tg_dtype_name(tg_get_dtype(index)));
  char a[256], b[256];
  if (tg_ndim(index) != nd)
    return tensor_error("gather: index rank %d differs from input rank %d", tg_ndim(index), nd);
  if (nd == 0) return select_from_scalar(tg_gather, t, index);
  int64_t st[TG_MAX_DIMS] = {0}, en[TG_MAX_DIMS];
  for (int i = 0; i < nd; i++) {
    en[i] = i == axis ? uop_shape(t->u)[i] : uop_shape(index->u)[i];
    if (en[i] > uop_shape(t->u)[i])
      return tensor_error("gather: index %s larger than input %s", tg_fmt_shape(a, sizeof a, uop_shape(index->u), nd),
                          tg_fmt_shape(b, sizeof b, uop_shape(t->u), nd));
  }
  tg_scope *s = tg_scope_begin();
  int64_t m = uop_shape(t->u)[axis];
  /* x[.., i_axis, .., m] = t[.., m, ..]; mask[.., i_axis, .., m] = index[..] == m */
  tg_tensor *x = tg_unsqueeze(tg_shrink(t, st, en), nd); /* (.., M, .., 1) */
  x = tg_transpose(x, axis, nd);                         /* (.., 1, .., M) */
  int64_t full[TG_MAX_DIMS + 1];
  for (int i = 0; i < nd; i++) full[i] = uop_shape(index->u)[i];
  full[nd] = m;
  x = tg_expand(x, full, nd + 1);
  tg_tensor *mask = tg_eq(tg_unsqueeze(tg_cast(index, TG_INT64), nd), axis_iota(m, nd, nd + 1, TG_INT64));
  tg_tensor *r = tg_keep(select_sum(mask, x, nd));
  tg_scope_end(s);
  return r;
}

tg_tensor *tg_index_select(tg_tensor *t, int axis, tg_tensor *index) {
  if (!t || !index) return null_arg("index_select");
  if (!one_axis("index_select", t, &axis)) return NULL;
  if (!dtype_is_int(tg_get_dtype(index)))
    return tensor_error("index_select: index must be an integer tensor, got %s", tg_dtype_name(tg_get_dtype(index)));
  int nd = tg_ndim(t), ni = tg_ndim(index);
  if (nd == 0) return select_from_scalar(tg_index_select, t, index);
  if (nd + ni > TG_MAX_DIMS) /* the selection is built with rank nd + ni */
    return shape_error("index_select: input rank %d plus index rank %d is above %d", nd, ni, TG_MAX_DIMS);
  /* out dims: A (axis dims before), I (index dims), M (selected, reduced), B (after) */
  int64_t xs[TG_MAX_DIMS], ms[TG_MAX_DIMS];
  int n = 0;
  for (int i = 0; i < axis; i++) xs[n] = uop_shape(t->u)[i], ms[n++] = 1;
  for (int i = 0; i < ni; i++) xs[n] = 1, ms[n++] = uop_shape(index->u)[i];
  int maxis = n;
  int64_t m = uop_shape(t->u)[axis];
  xs[n] = m, ms[n++] = m;
  for (int i = axis + 1; i < nd; i++) xs[n] = uop_shape(t->u)[i], ms[n++] = 1;
  tg_scope *s = tg_scope_begin();
  tg_tensor *x = tg_reshape(t, xs, n);
  int64_t ishape[TG_MAX_DIMS];
  for (int i = 0; i < n; i++) ishape[i] = i == maxis ? 1 : ms[i];
  tg_tensor *idx = tg_reshape(tg_cast(index, TG_INT64), ishape, n);
  tg_tensor *mask = tg_eq(idx, axis_iota(m, maxis, n, TG_INT64));
  int64_t full[TG_MAX_DIMS];
  for (int i = 0; i < n; i++) full[i] = xs[i] > ms[i] ? xs[i] : ms[i];
  tg_tensor *r = tg_keep(select_sum(tg_expand(mask, full, n), tg_expand(x, full, n), maxis));
  tg_scope_end(s);
  return r;
}

/* ---------------------------------------------------------------- scatter
 * The scatter layout of (t, axis, index, src) has rank nd + 1: the index's axis k at `axis`,
 * the target position m of t's axis last, the other axes t's (the index's, padded):
 *   hit[.., k, .., m]  = index[.., k, ..] == m     (false in the padding)
 *   vals[.., k, .., m] = src[.., k, ..]
 * A reduction over `axis` gives, for every element of t (as (.., m) moved back), the values
 * scattered to it. Work: numel(index) * t.shape[axis], like gather. */

typedef struct scatter_layout {
  tg_tensor *hit, *vals; /* (.., K, .., M) */
  tg_tensor *any;        /* t's shape: some index points at the element */
} scatter_layout;

/* Checks shared by scatter and scatter_reduce (PyTorch's rules); nd >= 1. */
static bool scatter_check(const char *op, tg_tensor *t, int *axis, tg_tensor *index, tg_tensor *src) {
  int nd = tg_ndim(t);
  char a[256], b[256], c[256];
  if (!normalize_axis(op, axis, nd, AXIS_OF_SCALAR)) return false;
  if (!dtype_is_int(tg_get_dtype(index)))
    return tensor_error("%s: index must be an integer tensor, got %s", op, tg_dtype_name(tg_get_dtype(index))), false;
  if (tg_get_dtype(src) != tg_get_dtype(t))
    return tensor_error("%s: src is %s, the tensor is %s", op, tg_dtype_name(tg_get_dtype(src)),
                        tg_dtype_name(tg_get_dtype(t))), false;
  bool ok = tg_ndim(index) == nd && tg_ndim(src) == nd;
  for (int d = 0; ok && d < nd; d++)
    ok = uop_shape(index->u)[d] <= uop_shape(src->u)[d] && (d == *axis || uop_shape(index->u)[d] <= uop_shape(t->u)[d]);
  if (!ok)
    return tensor_error("%s: index %s must have the rank of the tensor %s and src %s, and fit in both (but axis %d of "
                        "the tensor)", op, tg_fmt_shape(a, sizeof a, uop_shape(index->u), tg_ndim(index)),
                        tg_fmt_shape(b, sizeof b, uop_shape(t->u), nd),
                        tg_fmt_shape(c, sizeof c, uop_shape(src->u), tg_ndim(src)), *axis), false;
  return true;
}

static tg_tensor *axis_to_last(tg_tensor *x, int axis) { /* (.., n@axis, ..) → (.., 1@axis, .., n) */
  return tg_transpose(tg_unsqueeze(x, tg_ndim(x)), axis, tg_ndim(x));
}

/* A reduction result r (.., M) with t's other axes → t's layout (.., M@axis, ..). */
static tg_tensor *from_last(tg_tensor *r, int axis) {
  if (!r) return NULL;
  int nd = tg_ndim(r), order[TG_MAX_DIMS];
  for (int d = 0, k = 0; d < nd; d++) order[d] = d == axis ? nd - 1 : k++;
  return tg_permute(r, order, nd);
}

static scatter_layout scatter_build(tg_tensor *t, int axis, tg_tensor *index, tg_tensor *src) {
  int nd = tg_ndim(t);
  int64_t m = uop_shape(t->u)[axis], st[TG_MAX_DIMS] = {0}, pb[TG_MAX_DIMS + 1] = {0}, pa[TG_MAX_DIMS + 1] = {0};
  int64_t shape[TG_MAX_DIMS + 1];
  for (int d = 0; d < nd; d++) {
    pa[d] = d == axis ? 0 : uop_shape(t->u)[d] - uop_shape(index->u)[d];
    shape[d] = uop_shape(index->u)[d];
  }
  shape[nd] = m;
  tg_tensor *hit = tg_eq(tg_unsqueeze(tg_cast(index, TG_INT64), nd), axis_iota(m, nd, nd + 1, TG_INT64));
  tg_tensor *vals = tg_expand(tg_unsqueeze(tg_shrink(src, st, uop_shape(index->u)), nd), shape, nd + 1);
  scatter_layout l = {tg_pad(hit, pb, pa, 0), tg_pad(vals, pb, pa, 0), NULL};
  l.any = from_last(reduce_axis(l.hit, OP_MAX, axis), axis);
  return l;
}

/* 0-d operands are scattered as (1,) views (PyTorch accepts them). */
static tg_tensor *scatter_scalar(tg_tensor *(*op)(tg_tensor *, int, tg_tensor *, tg_tensor *, int, bool), tg_tensor *t,
                                 int axis, tg_tensor *index, tg_tensor *src, int reduce, bool include_self) {
  int64_t one = 1;
  tg_scope *s = tg_scope_begin();
  tg_tensor *r = op(tg_reshape(t, &one, 1), axis, tg_ndim(index) ? index : tg_reshape(index, &one, 1),
                    tg_ndim(src) ? src : tg_reshape(src, &one, 1), reduce, include_self);
  r = tg_keep(r ? tg_reshape(r, NULL, 0) : NULL);
  tg_scope_end(s);
  return r;
}

static tg_tensor *scatter_impl(tg_tensor *t, int axis, tg_tensor *index, tg_tensor *src, int reduce, bool self);

tg_tensor *tg_scatter(tg_tensor *t, int axis, tg_tensor *index, tg_tensor *src) {
  return scatter_impl(t, axis, index, src, -1, false);
}

tg_tensor *tg_scatter_reduce(tg_tensor *t, int axis, tg_tensor *index, tg_tensor *src, tg_scatter_op reduce,
                             bool include_self) {
  if (t && index && src && ((int)reduce < 0 || reduce > TG_SCATTER_AMIN))
    return tensor_error("scatter_reduce: invalid reduction %d", (int)reduce);
  return scatter_impl(t, axis, index, src, (int)reduce, include_self);
}

tg_tensor *tg_scatter_add(tg_tensor *t, int axis, tg_tensor *index, tg_tensor *src) {
  return scatter_impl(t, axis, index, src, TG_SCATTER_SUM, true);
}

/* Plain scatter: where several indices point at one element, the last along the axis wins
 * (PyTorch's CPU order): the position k of every hit (-1 elsewhere), its max along the axis,
 * and the value at that k. */
static tg_tensor *scatter_last(tg_tensor *t, int axis, scatter_layout l) {
  int nd = tg_ndim(t);
  tg_tensor *k = tg_expand(axis_iota(uop_shape(l.hit->u)[axis], axis, nd + 1, TG_INT64), uop_shape(l.hit->u), nd + 1);
  tg_tensor *k1 = where_const(l.hit, k, -1);
  tg_tensor *last = tg_unsqueeze(reduce_axis(k1, OP_MAX, axis), axis); /* (.., 1, .., M) */
  tg_tensor *pick = tg_logical_and(l.hit, tg_eq(k1, last));
  return tg_where(l.any, from_last(select_sum(pick, l.vals, axis), axis), t);
}

/* The reductions of scatter_reduce, in the accumulation dtype: the REDUCE op over where(hit,
 * vals, neutral), t itself as one more element when include_self. amin is -amax(-x) (~ for
 * ints); mean is the sum over the count. */
static const struct { uop_op op; int neutral; } scatter_rules[] = {
    [TG_SCATTER_SUM] = {OP_ADD, 0}, [TG_SCATTER_PROD] = {OP_MUL, 1}, [TG_SCATTER_MEAN] = {OP_ADD, 0},
    [TG_SCATTER_AMAX] = {OP_MAX, -1}, [TG_SCATTER_AMIN] = {OP_MAX, -1}, /* -1: the dtype's lowest */
};

static tg_tensor *flip_sign(tg_tensor *x) { return tg_dtype_is_float(tg_get_dtype(x)) ? tg_neg(x) : tg_bitwise_not(x); }

static tg_tensor *scatter_reduced(tg_tensor *t, int axis, scatter_layout l, tg_scatter_op op, bool self) {
  tg_dtype acc = dtype_is_half(tg_get_dtype(t)) ? TG_FLOAT32 : tg_get_dtype(t);
  tg_tensor *vals = tg_cast(l.vals, acc), *x = tg_cast(t, acc), *hit = l.hit;
  if (op == TG_SCATTER_AMIN) vals = flip_sign(vals), x = flip_sign(x);
  if (self) { /* t as element -1 of the axis: (.., 1 + K, .., M) */
    tg_tensor *xs = axis_to_last(x, axis), *v[2] = {xs, vals}, *h[2] = {const_like(xs, 1, TG_BOOL), hit};
    vals = tg_cat(v, 2, axis), hit = tg_cat(h, 2, axis);
  }
  double neutral = scatter_rules[op].neutral < 0 ? dtype_table[acc].min : scatter_rules[op].neutral;
  tg_tensor *r = reduce_axis(where_const(hit, vals, neutral), scatter_rules[op].op, axis);
  if (op == TG_SCATTER_MEAN) {
    tg_tensor *n = tg_cast(reduce_axis(tg_cast(hit, TG_INT64), OP_ADD, axis), acc);
    n = tg_maximum(n, const_like(n, 1, acc)); /* no hit: any divisor (the result is not used) but 0 */
    r = tg_dtype_is_float(acc) ? tg_div(r, n) : tg_floordiv(r, n);
  }
  if (op == TG_SCATTER_AMIN) r = flip_sign(r);
  return tg_where(l.any, tg_cast(from_last(r, axis), tg_get_dtype(t)), t);
}

static tg_tensor *scatter_impl(tg_tensor *t, int axis, tg_tensor *index, tg_tensor *src, int reduce, bool self) {
  const char *name = reduce < 0 ? "scatter" : "scatter_reduce";
  if (!t || !index || !src) return null_arg(name);
  if (tg_ndim(t) == 0 && normalize_axis(name, &axis, 0, AXIS_OF_SCALAR) && tg_ndim(index) == 0 && tg_ndim(src) == 0)
    return scatter_scalar(scatter_impl, t, axis, index, src, reduce, self);
  if (!scatter_check(name, t, &axis, index, src)) return NULL;
  if (reduce >= 0 && tg_get_dtype(t) == TG_BOOL) return tensor_error("scatter_reduce: bool tensors are not supported");
  tg_scope *s = tg_scope_begin();
  scatter_layout l = scatter_build(t, axis, index, src);
  tg_tensor *r = !l.hit || !l.vals || !l.any ? NULL
                 : reduce < 0                ? scatter_last(t, axis, l)
                                             : scatter_reduced(t, axis, l, (tg_scatter_op)reduce, self);
  r = tg_keep(r);
  tg_scope_end(s);
  return r;
}

/* ---------------------------------------------------------------- masks */

/* The broadcast shape of a and b into out (numpy rules); false with an error naming op. */
static bool broadcast2(const char *op, tg_tensor *a, tg_tensor *b, int64_t *out, int *nd) {
  int na = tg_ndim(a), nb = tg_ndim(b);
  char x[256], y[256];
  *nd = na > nb ? na : nb;
  for (int i = 0; i < *nd; i++) {
    int64_t p = i < *nd - na ? 1 : uop_shape(a->u)[i - (*nd - na)], q = i < *nd - nb ? 1 : uop_shape(b->u)[i - (*nd - nb)];
    if (p != q && p != 1 && q != 1)
      return tensor_error("%s: shapes %s and %s do not broadcast", op, tg_fmt_shape(x, sizeof x, uop_shape(a->u), na),
                          tg_fmt_shape(y, sizeof y, uop_shape(b->u), nb)), false;
    out[i] = p == 1 ? q : p;
  }
  return shape_check(op, out, *nd, tg_get_dtype(a));
}

static bool check_mask(const char *op, tg_tensor *mask) {
  if (tg_get_dtype(mask) == TG_BOOL) return true;
  return tensor_error("%s: mask must be bool, got %s", op, tg_dtype_name(tg_get_dtype(mask))), false;
}

tg_tensor *tg_masked_fill(tg_tensor *t, tg_tensor *mask, double value) {
  if (!t || !mask) return null_arg("masked_fill");
  if (!check_mask("masked_fill", mask)) return NULL;
  int64_t shape[TG_MAX_DIMS];
  int nd;
  char a[256], b[256];
  if (!broadcast2("masked_fill", t, mask, shape, &nd)) return NULL;
  if (nd != tg_ndim(t) || memcmp(shape, uop_shape(t->u), sizeof(int64_t) * (size_t)nd))
    return tensor_error("masked_fill: mask %s does not broadcast to the tensor's shape %s",
                        tg_fmt_shape(a, sizeof a, uop_shape(mask->u), tg_ndim(mask)), tg_fmt_shape(b, sizeof b, shape, nd));
  tg_scope *s = tg_scope_begin();
  tg_tensor *r = tg_keep(tg_where(mask, tg_scalar(value, tg_get_dtype(t)), t)); /* the value is a kernel argument */
  tg_scope_end(s);
  return r;
}

/* t's values on the host as int64 (bools as 0/1): realizes t. NULL (error set) on failure. */
static int64_t *host_int64(const char *op, tg_tensor *t) {
  int64_t n = tg_numel(t);
  int64_t *v = malloc(sizeof(int64_t) * (size_t)(n ? n : 1));
  if (!v) return tensor_error("%s: out of memory for %lld values", op, (long long)n), NULL;
  tg_scope *s = tg_scope_begin();
  int rc = tg_to_host(tg_cast(t, TG_INT64), v, sizeof(int64_t) * (size_t)n);
  tg_scope_end(s);
  if (rc < 0) free(v), v = NULL;
  return v;
}

/* The flat positions i of x (row-major) with x[i] != 0, in out (count in *k). */
static int64_t *host_nonzero(const char *op, tg_tensor *x, int64_t *k) {
  tg_scope *s = tg_scope_begin();
  int64_t *v = host_int64(op, tg_cast(x, TG_BOOL)), n = tg_numel(x);
  tg_scope_end(s);
  *k = 0;
  for (int64_t i = 0; v && i < n; i++)
    if (v[i]) v[(*k)++] = i;
  return v;
}

tg_tensor *tg_masked_select(tg_tensor *t, tg_tensor *mask) {
  if (!t || !mask) return null_arg("masked_select");
  if (!check_mask("masked_select", mask)) return NULL;
  int64_t shape[TG_MAX_DIMS], k;
  int nd;
  if (!broadcast2("masked_select", t, mask, shape, &nd)) return NULL;
  tg_scope *s = tg_scope_begin();
  tg_tensor *r = NULL, *x = tg_reshape(tg_expand(t, shape, nd), (int64_t[]){shape_numel(shape, nd)}, 1);
  int64_t *pos = x ? host_nonzero("masked_select", tg_expand(mask, shape, nd), &k) : NULL;
  if (pos) /* the selection is a compare-and-sum over x per output: numel * k work */
    r = k ? tg_index_select(x, 0, tg_from_data(pos, TG_INT64, &k, 1)) : tg_shrink(x, (int64_t[]){0}, (int64_t[]){0});
  free(pos);
  r = tg_keep(r);
  tg_scope_end(s);
  return r;
}

tg_tensor *tg_nonzero(tg_tensor *t) {
  if (!t) return null_arg("nonzero");
  int nd = tg_ndim(t);
  int64_t k;
  int64_t *pos = host_nonzero("nonzero", t, &k);
  if (!pos) return NULL;
  int64_t shape[2] = {k, nd}, cells = k * nd, *coords = malloc(sizeof(int64_t) * (size_t)(cells ? cells : 1));
  if (!coords) return free(pos), tensor_error("nonzero: out of memory for %lld coordinates", (long long)k);
  for (int64_t i = 0; i < k; i++) { /* flat position → coordinates, last axis fastest */
    int64_t f = pos[i];
    for (int d = nd - 1; d >= 0; d--) coords[i * nd + d] = f % uop_shape(t->u)[d], f /= uop_shape(t->u)[d];
  }
  tg_tensor *r = tg_from_data(coords, TG_INT64, shape, 2);
  free(pos), free(coords);
  return r;
}

/* Each position i of an axis of n repeated reps[i] times: *total positions (NULL: an error). */
static int64_t *repeat_positions(const int64_t *reps, int64_t n, int64_t *total) {
  int64_t bytes = 0;
  bool ok = true;
  *total = 0;
  for (int64_t i = 0; ok && i < n; i++) ok = reps[i] >= 0 && ck_add(*total, reps[i], total);
  if (!ok || !ck_mul(*total, (int64_t)sizeof(int64_t), &bytes) || (uint64_t)bytes > SIZE_MAX)
    return shape_error("repeat_interleave: repeats must be >= 0 and sum to at most 2^60");
  int64_t *idx = malloc((size_t)(bytes ? bytes : 1));
  if (!idx) tensor_error("repeat_interleave: out of memory for %lld indices", (long long)*total);
  for (int64_t i = 0, j = 0; i < n; i++)
    for (int64_t c = 0; c < reps[i]; c++) idx[j++] = i;
  return idx;
}

tg_tensor *tg_repeat_interleave_t(tg_tensor *t, tg_tensor *repeats, int axis) {
  if (!t || !repeats) return null_arg("repeat_interleave");
  if (!dtype_is_int(tg_get_dtype(repeats)) || tg_ndim(repeats) > 1)
    return tensor_error("repeat_interleave: repeats must be a 0-d or 1-D integer tensor, got %s rank %d",
                        tg_dtype_name(tg_get_dtype(repeats)), tg_ndim(repeats));
  tg_scope *s = tg_scope_begin();
  tg_tensor *x = axis == TG_ALL_AXES ? tg_reshape(t, (int64_t[]){tg_numel(t)}, 1) : t, *r = NULL;
  int a = axis == TG_ALL_AXES ? 0 : axis;
  if (x && normalize_axis("repeat_interleave", &a, tg_ndim(x), AXIS_OF_SCALAR)) {
    int64_t n = tg_ndim(x) ? uop_shape(x->u)[a] : 1, m = tg_numel(repeats), total;
    int64_t *reps = m == 1 || m == n ? host_int64("repeat_interleave", repeats) : NULL, *idx = NULL; /* realizes them */
    if (m != 1 && m != n) tensor_error("repeat_interleave: %lld repeats for %lld elements", (long long)m, (long long)n);
    else if (reps && m == 1) r = tg_repeat_interleave(x, reps[0], a);
    else if (reps && (idx = repeat_positions(reps, n, &total)))
      r = tg_index_select(x, a, tg_from_data(idx, TG_INT64, &total, 1));
    free(reps), free(idx);
  }
  r = tg_keep(r);
  tg_scope_end(s);
  return r;
}

/* ---------------------------------------------------------------- sort
 * A bitonic sorting network along the last axis, padded to n2 = 2^p elements: p(p+1)/2
 * compare-exchange steps, each a view that pairs element i with i ^ j (a reshape to
 * (.., blocks, 2, j): the partner is the flip of the size-2 axis), a comparison of the pair,
 * and a where that takes the partner's value where they are exchanged; O(n log^2 n) work and O(n) memory per step,
 * no data-dependent loads. Each step is stored (contiguous): fused, every step would
 * recompute both of its inputs, 2^steps work. The keys carry their original index, which
 * breaks ties (a stable sort, and a strict order that makes every exchange well defined) and
 * is the argsort. NaN sorts above +inf, like PyTorch.
 *
 * The sorted values are a GRADFN whose derivative puts each gradient back where its value
 * came from: the same network keyed by the sort indices, carrying the gradient. The generic
 * derivative of the network has no stores (a contiguous's gradient is the gradient), so it
 * would fuse every step's gradient into one kernel of 2^steps paths. */

/* a before b in the sort order, ties broken by the index (ia NULL: the keys are distinct). */
static tg_tensor *sort_before(tg_tensor *a, tg_tensor *ia, tg_tensor *b, tg_tensor *ib, bool desc) {
  tg_tensor *lt = desc ? tg_lt(b, a) : tg_lt(a, b), *eq = tg_eq(a, b); /* ties: by index either way */
  if (tg_dtype_is_float(tg_get_dtype(a))) { /* NaN is the largest value, NaNs are equal */
    tg_tensor *na = tg_isnan(a), *nb = tg_isnan(b);
    lt = tg_logical_or(lt, desc ? tg_logical_and(na, tg_logical_not(nb)) : tg_logical_and(nb, tg_logical_not(na)));
    eq = tg_logical_or(eq, tg_logical_and(na, nb));
  }
  return ia ? tg_logical_or(lt, tg_logical_and(eq, tg_lt(ia, ib))) : lt;
}

enum { SORT_KEY, SORT_INDEX, SORT_PAYLOAD, SORT_CARRIED };

/* One step of the network on the carried tensors (.., n2) (c[SORT_PAYLOAD] may be NULL) for
 * merge size k and partner distance j: blocks of k alternate ascending/descending (all
 * ascending when k == n2). */
static void bitonic_step(tg_tensor **c, int64_t n2, int64_t k, int64_t j, bool desc, bool distinct) {
  int nd = tg_ndim(c[SORT_KEY]), lead = nd - 1, pa, da = -1, rn;
  int64_t sh[TG_MAX_DIMS + 4];
  memcpy(sh, uop_shape(c[SORT_KEY]->u), sizeof(int64_t) * (size_t)lead);
  if (k < n2) { /* (.., n2/2k, 2 direction, k/2j, 2 partner, j) */
    int64_t s5[5] = {n2 / (2 * k), 2, k / (2 * j), 2, j};
    memcpy(sh + lead, s5, sizeof s5), da = lead + 1, pa = lead + 3, rn = lead + 5;
  } else {
    int64_t s3[3] = {n2 / (2 * j), 2, j};
    memcpy(sh + lead, s3, sizeof s3), pa = lead + 1, rn = lead + 3;
  }
  tg_tensor *lo[SORT_CARRIED] = {0}, *hi[SORT_CARRIED] = {0};
  for (int i = 0; i < SORT_CARRIED; i++) {
    tg_tensor *r = c[i] ? tg_reshape(c[i], sh, rn) : NULL;
    lo[i] = axis_range(r, pa, 0, 1), hi[i] = axis_range(r, pa, 1, 2);
  }
  tg_tensor *swap = distinct ? sort_before(hi[SORT_KEY], NULL, lo[SORT_KEY], NULL, desc)
                             : sort_before(hi[SORT_KEY], hi[SORT_INDEX], lo[SORT_KEY], lo[SORT_INDEX], desc);
  if (swap && da >= 0) { /* descending blocks swap when lo is before hi: exactly when hi is not before lo */
    int64_t pb[TG_MAX_DIMS + 4] = {0}, pe[TG_MAX_DIMS + 4] = {0};
    pe[da] = 1;
    tg_tensor *ascending = tg_pad(const_like(axis_range(swap, da, 0, 1), 1, TG_BOOL), pb, pe, 0); /* true, false */
    swap = tg_eq(swap, ascending);
  }
  for (int i = 0; i < SORT_CARRIED; i++) { /* exchanged: each element takes its partner's value */
    if (!c[i]) continue;
    tg_tensor *r = tg_reshape(c[i], sh, rn), *partner = tg_flip(r, &pa, 1);
    c[i] = tg_contiguous(tg_reshape(tg_where(swap, partner, r), uop_shape(c[i]->u), nd));
  }
}

/* Run the network on key (.., n) with its index and an optional payload: c[] gets the
 * sorted key, the source positions (int64) and the payload in that order. */
static void bitonic_sort(tg_tensor *key, tg_tensor *payload, bool desc, bool distinct, tg_tensor **c) {
  int nd = tg_ndim(key);
  int64_t n = uop_shape(key->u)[nd - 1], n2 = 1, pb[TG_MAX_DIMS] = {0}, pa[TG_MAX_DIMS] = {0};
  while (n2 < n) n2 *= 2;
  tg_dtype dt = tg_get_dtype(key);
  tg_tensor *v = dt == TG_BOOL ? tg_cast(key, TG_UINT8) : key;
  const dtype_info *di = &dtype_table[tg_get_dtype(v)];
  pa[nd - 1] = n2 - n; /* padding sorts last: NaN ascending, the lowest value descending (index ties) */
  c[SORT_KEY] = tg_pad(v, pb, pa, desc ? di->min : tg_dtype_is_float(dt) ? NAN : di->max);
  c[SORT_INDEX] = c[SORT_KEY] ? tg_expand(axis_iota(n2, nd - 1, nd, TG_INT64), uop_shape(c[SORT_KEY]->u), nd) : NULL;
  c[SORT_PAYLOAD] = payload ? tg_pad(payload, pb, pa, 0) : NULL;
  for (int64_t k = 2; c[SORT_KEY] && k <= n2; k *= 2)
    for (int64_t j = k / 2; c[SORT_KEY] && j >= 1; j /= 2) bitonic_step(c, n2, k, j, desc, distinct);
  for (int i = 0; i < SORT_CARRIED; i++) c[i] = axis_range(c[i], nd - 1, 0, n);
  c[SORT_KEY] = c[SORT_KEY] ? tg_cast(c[SORT_KEY], dt) : NULL;
}

/* ---- the packed network: one int64 per element, one kernel per step
 * A key of at most 32 bits becomes an int32 in sort order (floats: NaN made the positive quiet
 * NaN and -0.0 made +0.0, so that they tie like PyTorch's, then the bits with the negatives'
 * magnitude flipped; descending: its bitwise not), packed over 32 low bits into one int64: the
 * position times 2 plus a flag for -0.0 and negative NaNs (restored after), or, for the
 * backward's distinct keys, the bits of the payload. A compare-exchange is then a comparison and
 * a where on one tensor: one kernel per step, where the general network needs three (the
 * exchange decisions, the values, the positions). */

static const bool packed_key_dtype[TG_DTYPE_COUNT] = {
    [TG_BOOL] = true,  [TG_INT8] = true,    [TG_UINT8] = true,     [TG_INT16] = true,   [TG_UINT16] = true,
    [TG_INT32] = true, [TG_FLOAT16] = true, [TG_BFLOAT16] = true, [TG_FLOAT32] = true,
};
/* the unsigned type a payload's bits travel as, by its size */
static const tg_dtype payload_bits[5] = {[2] = TG_UINT16, [4] = TG_UINT32};

static bool packable(tg_tensor *key, tg_tensor *payload, bool distinct, int64_t n2) {
  tg_dtype kd = tg_get_dtype(key);
  if (n2 > INT64_C(1) << 31) return false; /* position * 2 + flag in 32 bits */
  if (!packed_key_dtype[kd] && !(distinct && kd == TG_INT64)) return false; /* distinct int64: positions < n2 */
  if (!payload) return true;
  size_t sz = tg_dtype_size(tg_get_dtype(payload));
  return distinct && tg_dtype_is_float(tg_get_dtype(payload)) && sz <= 4 && payload_bits[sz] != TG_BOOL; /* listed */
}

/* float32 bits b as an int32 in the floats' order, and back (an involution): a negative
 * float's magnitude bits flipped, so that a larger magnitude is a smaller int. */
static tg_tensor *flip_negatives(tg_tensor *b) {
  return tg_where(tg_lt(b, const_like(b, 0, TG_INT32)), tg_bitwise_xor(b, const_like(b, INT32_MAX, TG_INT32)), b);
}

/* The key as an int32 in ascending sort order; *neg marks -0.0 and negative NaNs (floats). */
static tg_tensor *order_key(tg_tensor *key, bool desc, tg_tensor **neg) {
  tg_tensor *k;
  *neg = NULL;
  if (tg_dtype_is_float(tg_get_dtype(key))) {
    tg_tensor *f = tg_cast(key, TG_FLOAT32), *raw = tg_bitcast(f, TG_INT32);
    tg_tensor *nan = tg_isnan(f), *zero = tg_eq(f, const_like(f, 0, TG_FLOAT32));
    *neg = tg_logical_and(tg_logical_or(nan, zero), tg_lt(raw, const_like(raw, 0, TG_INT32)));
    tg_tensor *canon = tg_where(nan, const_like(f, NAN, TG_FLOAT32), tg_where(zero, const_like(f, 0, TG_FLOAT32), f));
    k = flip_negatives(tg_bitcast(canon, TG_INT32));
  } else {
    k = tg_cast(key, TG_INT32);
  }
  return desc ? tg_bitwise_not(k) : k;
}

/* order_key's inverse: the values of dtype dt (neg: negate, restoring -0.0's sign). */
static tg_tensor *unorder_key(tg_tensor *k, tg_dtype dt, bool desc, tg_tensor *neg) {
  if (desc) k = tg_bitwise_not(k);
  if (!tg_dtype_is_float(dt)) return tg_cast(k, dt);
  tg_tensor *f = tg_bitcast(flip_negatives(k), TG_FLOAT32);
  return tg_cast(tg_where(neg, tg_neg(f), f), dt);
}

/* true on index 0 and false on index 1 of `axis` (size 2) of r's shape: a literal pattern. */
static tg_tensor *first_of_pair(tg_tensor *r, int axis) {
  int64_t pb[TG_MAX_DIMS + 4] = {0}, pe[TG_MAX_DIMS + 4] = {0};
  pe[axis] = 1;
  return tg_pad(const_like(axis_range(r, axis, 0, 1), 1, TG_BOOL), pb, pe, 0);
}

/* One step on the packed (.., n2): the pairs as in bitonic_step; the lower slot of an
 * ascending block (the upper of a descending one) takes the pair's minimum. */
static tg_tensor *packed_step(tg_tensor *p, int64_t n2, int64_t k, int64_t j) {
  int nd = tg_ndim(p), lead = nd - 1, pa, da = -1, rn;
  int64_t sh[TG_MAX_DIMS + 4];
  memcpy(sh, uop_shape(p->u), sizeof(int64_t) * (size_t)lead);
  if (k < n2) { /* (.., n2/2k, 2 direction, k/2j, 2 partner, j) */
    int64_t s5[5] = {n2 / (2 * k), 2, k / (2 * j), 2, j};
    memcpy(sh + lead, s5, sizeof s5), da = lead + 1, pa = lead + 3, rn = lead + 5;
  } else {
    int64_t s3[3] = {n2 / (2 * j), 2, j};
    memcpy(sh + lead, s3, sizeof s3), pa = lead + 1, rn = lead + 3;
  }
  tg_tensor *r = tg_reshape(p, sh, rn), *partner = tg_flip(r, &pa, 1);
  tg_tensor *take_min = first_of_pair(r, pa);
  if (da >= 0) take_min = tg_eq(take_min, first_of_pair(r, da));
  tg_tensor *out = tg_where(tg_eq(tg_lt(r, partner), take_min), r, partner);
  return tg_contiguous(tg_reshape(out, uop_shape(p->u), nd));
}

/* Sort key (.., n) on the packed network: the sorted payload (NULL: the sorted key) and, if
 * sigma, the source positions (for a payload: a second, lazy network that nothing computes
 * unless it is read, by a second derivative). */
static tg_tensor *packed_sort(tg_tensor *key, tg_tensor *payload, bool desc, bool distinct, tg_tensor **sigma) {
  int nd = tg_ndim(key);
  int64_t n = uop_shape(key->u)[nd - 1], n2 = 1, pb[TG_MAX_DIMS] = {0}, pa[TG_MAX_DIMS] = {0};
  while (n2 < n) n2 *= 2;
  pa[nd - 1] = n2 - n; /* padding: the largest key, positions n.. after every real one */
  tg_tensor *neg = NULL, *k = tg_pad(order_key(key, desc, &neg), pb, pa, INT32_MAX), *low;
  tg_dtype bits = payload ? payload_bits[tg_dtype_size(tg_get_dtype(payload))] : TG_INT64;
  if (payload) {
    low = tg_pad(tg_cast(tg_bitcast(payload, bits), TG_INT64), pb, pa, 0);
  } else {
    low = tg_shl(axis_iota(n2, nd - 1, nd, TG_INT64), 1);
    if (neg) low = tg_add(low, tg_pad(tg_cast(neg, TG_INT64), pb, pa, 0));
  }
  tg_tensor *p = tg_add(tg_shl(tg_cast(k, TG_INT64), 32), low);
  for (int64_t m = 2; p && m <= n2; m *= 2)
    for (int64_t j = m / 2; p && j >= 1; j /= 2) p = packed_step(p, n2, m, j);
  p = axis_range(p, nd - 1, 0, n);
  low = tg_bitwise_and(p, const_like(p, 4294967295.0, TG_INT64));
  if (payload) {
    if (sigma) packed_sort(key, NULL, desc, distinct, sigma);
    return tg_bitcast(tg_cast(low, bits), tg_get_dtype(payload));
  }
  if (sigma) *sigma = tg_shr(low, 1);
  tg_tensor *flag = neg ? tg_cast(tg_bitwise_and(low, const_like(low, 1, TG_INT64)), TG_BOOL) : NULL;
  return unorder_key(tg_cast(tg_shr(p, 32), TG_INT32), tg_get_dtype(key), desc, flag);
}

static tg_tensor *reorder_by_key(tg_tensor *key, tg_tensor *payload, bool desc, bool distinct, tg_tensor **sigma);

/* GRADFN rule of a reordering u = GRADFN(out, payload, sigma), out[j] = payload[sigma[j]]: the
 * gradient of payload[i] is g[j] where sigma[j] == i, i.e. g reordered by the key sigma. */
static void reorder_grad_rule(uop *u, uop *g, uop **d) {
  tg_scope *s = tg_scope_begin();
  tg_tensor *back = reorder_by_key(tensor_wrap(u->src[2]), tensor_wrap(g), false, true, NULL); /* positions: distinct */
  d[1] = back ? uop_pool_add(back->u) : NULL; /* outlives the scope: the gradient walk's pool owns it */
  tg_scope_end(s);
}

/* out = GRADFN(value, payload, sigma) with the reordering rule (no gradient for non-floats). */
static tg_tensor *with_reorder_grad(tg_tensor *value, tg_tensor *payload, tg_tensor *sigma) {
  static _Atomic int registered = -1; /* any thread may register it first: the same id */
  int id = atomic_load(&registered);
  if (id < 0) atomic_store(&registered, id = grad_register_custom(reorder_grad_rule));
  if (!value || !sigma || id < 0 || !tg_dtype_is_float(tg_get_dtype(payload))) return value;
  size_t mark = uop_pool_mark();
  uop *src[3] = {value->u, payload->u, sigma->u};
  int64_t arg = id;
  tg_tensor *r = tensor_wrap(uop_new(OP_GRADFN, value->u->dtype, src, 3, &arg, 1));
  uop_pool_release(mark);
  return r;
}

/* Sort the last axis by key (stable): returns payload[sigma] (payload NULL: the key itself, the
 * sorted values) with the reordering derivative, and sigma, the source positions. Distinct
 * keys (positions) need no tie-break: the positions carried along are then computed only if
 * someone reads sigma (a second derivative). */
static tg_tensor *reorder_by_key(tg_tensor *key, tg_tensor *payload, bool desc, bool distinct, tg_tensor **sigma) {
  if (!key || (payload && uop_ndim(payload->u) != uop_ndim(key->u))) return NULL;
  int nd = tg_ndim(key);
  tg_tensor *c[SORT_CARRIED] = {0}, *src = payload ? payload : key;
  int64_t n = uop_shape(key->u)[nd - 1], n2 = 1;
  while (n2 < n) n2 *= 2;
  if (n > 1 && packable(key, payload, distinct, n2)) {
    tg_tensor *ix = NULL, *r = packed_sort(key, payload, desc, distinct, &ix);
    if (sigma) *sigma = ix;
    return with_reorder_grad(r, src, ix);
  }
  if (n > 1) bitonic_sort(key, payload, desc, distinct, c);
  else c[SORT_KEY] = key, c[SORT_INDEX] = const_like(key, 0, TG_INT64), c[SORT_PAYLOAD] = payload;
  if (sigma) *sigma = c[SORT_INDEX];
  return with_reorder_grad(payload ? c[SORT_PAYLOAD] : c[SORT_KEY], src, c[SORT_INDEX]);
}

/* The first k (all when k < 0) sorted values and/or indices of t along axis (either pointer
 * may be NULL). */
static int sort_impl(const char *op, tg_tensor *t, int axis, bool desc, int64_t k, tg_tensor **values, tg_tensor **indices) {
  if (values) *values = NULL;
  if (indices) *indices = NULL;
  if (!t) return null_arg(op), TG_ERR_ARG;
  if (!values && !indices) return tg_set_error(TG_ERR_ARG, "%s: no output asked for", op);
  int nd = tg_ndim(t);
  if (!normalize_axis(op, &axis, nd, AXIS_OF_SCALAR) || (nd && !sym_axis_plain(op, t->u, axis))) return TG_ERR_ARG;
  int64_t n = nd ? uop_shape(t->u)[axis] : 1;
  if (k > n) return tg_set_error(TG_ERR_ARG, "%s: k = %lld is more than the %lld elements of axis %d", op, (long long)k,
                                 (long long)n, axis);
  if (k < 0) k = n;
  if (n > INT64_C(1) << 62) /* the network pads to a power of two */
    return tg_set_error(TG_ERR_SHAPE, "%s: %lld elements on axis %d are more than 2^62", op, (long long)n, axis);
  tg_scope *s = tg_scope_begin();
  int order[TG_MAX_DIMS], inv[TG_MAX_DIMS];
  for (int d = 0, c = 0; d < nd; d++) order[d == axis ? nd - 1 : c++] = d; /* axis last */
  for (int d = 0; d < nd; d++) inv[order[d]] = d;
  tg_tensor *x = nd ? tg_permute(t, order, nd) : tg_reshape(t, (int64_t[]){1}, 1), *ix = NULL;
  tg_tensor *v = reorder_by_key(x, NULL, desc, false, &ix);
  int xn = tg_ndim(x);
  tg_tensor *out[2] = {v, ix};
  for (int c = 0; c < 2; c++) {
    if (!out[c]) continue;
    out[c] = axis_range(out[c], xn - 1, 0, k);
    out[c] = nd ? tg_permute(out[c], inv, nd) : tg_reshape(out[c], NULL, 0);
  }
  bool ok = out[0] && out[1];
  if (ok && values) *values = tg_keep(out[0]);
  if (ok && indices) *indices = tg_keep(out[1]);
  tg_scope_end(s);
  return ok ? 0 : tg_error_status_or(TG_ERR_NOMEM);
}

int tg_sort(tg_tensor *t, int axis, bool descending, tg_tensor **values, tg_tensor **indices) {
  return sort_impl("sort", t, axis, descending, -1, values, indices);
}

tg_tensor *tg_argsort(tg_tensor *t, int axis, bool descending) {
  tg_tensor *ix = NULL;
  sort_impl("argsort", t, axis, descending, -1, NULL, &ix);
  return ix;
}

int tg_topk(tg_tensor *t, int64_t k, int axis, bool largest, tg_tensor **values, tg_tensor **indices) {
  if (t && k < 0) {
    if (values) *values = NULL;
    if (indices) *indices = NULL;
    return tg_set_error(TG_ERR_ARG, "topk: k = %lld is negative", (long long)k);
  }
  return sort_impl("topk", t, axis, largest, k, values, indices);
}
