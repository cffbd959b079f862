/* index.c — indexing: one_hot, gather, index_select (and the ops built like them). Every
 * selection is a comparison mask against an iota and a masked reduction: no data-dependent
 * loads, so an out-of-range index selects nothing, and gradients come from the primitive
 * rules (WHERE, REDUCE_AXIS, EXPAND). */
#include <stdlib.h>
#include <string.h>

#include "tensor/shape.h"
#include "tensor/tensor.h"

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

/* Sum over `axis` of where(mask, x, 0): selects the one masked value (0 if none). */
static tg_tensor *select_sum(tg_tensor *mask, tg_tensor *x, int axis) {
  tg_tensor *picked = tg_where(mask, x, tg_zeros_like(x));
  uop_op op = tg_get_dtype(x) == TG_BOOL ? OP_MAX : OP_ADD;
  if (!picked) return NULL;
  size_t m = uop_pool_mark();
  tg_tensor *r = tensor_wrap(reduce_drop(picked->u, op, axis));
  uop_pool_release(m);
  return r;
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
  if (!one_axis("gather", t, &axis)) return NULL;
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
