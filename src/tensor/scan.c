/* scan.c — cumulative ops along one axis: cumprod, cummax/cummin (values and indices) and
 * logcumsumexp (cumsum is in reduce.c and works the same way). Each is a masked reduction over
 * a square (.., j, i, ..) view of the axis: out[i] = reduce over j <= i. That is n² work per
 * row but one fused kernel, any axis, and gradients from the primitive rules (a product's is
 * exact with zeros). */
#include <math.h>

#include "tensor/shape.h"
#include "tensor/tensor.h"
#include "tensor/variable.h"

/* iota along `axis` of a rank-nd shape, shaped (1,..,n,..,1) */
static tg_tensor *iota_at(int64_t n, int axis, int nd, tg_dtype dt) {
  int64_t s[TG_MAX_DIMS + 1];
  for (int i = 0; i < nd; i++) s[i] = i == axis ? n : 1;
  return tg_reshape(tg_arange(0, (double)n, 1, dt), s, nd);
}

/* The axis (normalized) of a scan; the square (.., n, n, ..) view must be a valid shape too. */
static bool scan_axis(const char *op, tg_tensor *t, int *axis, tg_dtype dt) {
  if (!normalize_axis(op, axis, tg_ndim(t), AXIS_OF_SCALAR)) return false;
  if (tg_ndim(t) && !sym_axis_plain(op, t->u, *axis)) return false; /* the square view's second axis is the layout */
  int nd = tg_ndim(t);
  int64_t wide[TG_MAX_DIMS + 1];
  for (int i = 0, k = 0; i < nd; i++) {
    wide[k++] = uop_shape(t->u)[i];
    if (i == *axis) wide[k++] = uop_shape(t->u)[i];
  }
  return nd == 0 || shape_check(op, wide, nd + 1, dt);
}

/* x (.., j, ..) as (.., j, 1, ..) and the mask j <= i over (.., j, i, ..) */
typedef struct square { tg_tensor *x, *keep, *j; int axis; } square;

static square square_of(tg_tensor *x, int axis) {
  int nd = tg_ndim(x);
  int64_t n = uop_shape(x->u)[axis];
  square q = {tg_unsqueeze(x, axis + 1), NULL, iota_at(n, axis, nd + 1, TG_INT64), axis};
  q.keep = tg_le(q.j, iota_at(n, axis + 1, nd + 1, TG_INT64));
  return q;
}

/* where(keep, v, fill) */
static tg_tensor *masked(square *q, tg_tensor *v, double fill) {
  return tg_where(q->keep, v, tg_full_like(v, fill));
}

/* ---------------------------------------------------------------- cumprod */

tg_tensor *tg_cumprod(tg_tensor *t, int axis) {
  if (!t) return null_arg("cumprod");
  tg_dtype dt = dtype_sum_acc(tg_get_dtype(t));
  if (!scan_axis("cumprod", t, &axis, dt)) return NULL;
  if (tg_ndim(t) == 0) return tg_prod(t, NULL, 0, false);
  tg_scope *s = tg_scope_begin();
  square q = square_of(tg_cast(t, dt), axis);
  tg_tensor *r = tg_keep(tg_prod(masked(&q, q.x, 1), &axis, 1, false));
  tg_scope_end(s);
  return r;
}

/* ---------------------------------------------------------------- cummax, cummin */

/* The running max of y and, for each i, the last j <= i holding it (a NaN once one is seen: the
 * last NaN), like torch.cummax. */
static tg_tensor *running_argmax(tg_tensor *y, int axis) {
  square q = square_of(y, axis);
  tg_dtype dt = tg_get_dtype(y);
  double lowest = tg_dtype_is_float(dt) ? -INFINITY : dt == TG_BOOL ? 0 : dtype_table[dt].min;
  tg_tensor *m = tg_unsqueeze(tg_max(masked(&q, q.x, lowest), &axis, 1, false), axis); /* (.., 1, i, ..) */
  tg_tensor *hit = tg_eq(q.x, m);
  if (tg_dtype_is_float(dt)) hit = tg_logical_or(hit, tg_logical_and(tg_isnan(q.x), tg_isnan(m)));
  return tg_max(tg_where(tg_logical_and(q.keep, hit), q.j, tg_full_like(q.j, -1)), &axis, 1, false);
}

/* x[.., idx[i], ..] along axis, selected by a where so that the gradient goes to that element
 * only (torch.cummax's backward) */
static tg_tensor *take_along(tg_tensor *x, tg_tensor *idx, int axis) {
  square q = square_of(x, axis);
  tg_tensor *at = tg_eq(q.j, tg_unsqueeze(idx, axis));
  tg_tensor *picked = tg_sum(tg_where(at, q.x, tg_zeros_like(q.x)), &axis, 1, false);
  return tg_cast(picked, tg_get_dtype(x));
}

/* The order-reversing map min ↔ max: -x (floats), ~x (ints), !x (bools) */
static tg_tensor *reverse_order(tg_tensor *x) {
  tg_dtype dt = tg_get_dtype(x);
  return tg_dtype_is_float(dt) ? tg_neg(x) : dt == TG_BOOL ? tg_logical_not(x) : tg_bitwise_not(x);
}

static int cum_extreme(const char *op, tg_tensor *t, int axis, bool is_max, tg_tensor **values, tg_tensor **indices) {
  if (!values) return tg_set_error(TG_ERR_ARG, "%s: values must not be NULL", op);
  *values = NULL;
  if (indices) *indices = NULL;
  if (!t) return null_arg(op), TG_ERR_ARG;
  if (!scan_axis(op, t, &axis, TG_INT64)) return TG_ERR_ARG;
  tg_scope *s = tg_scope_begin();
  tg_tensor *x = tg_ndim(t) ? t : tg_reshape(t, (int64_t[]){1}, 1), *v, *idx;
  if (tg_dim(x, axis) == 0) { /* nothing to scan (and no max of nothing to take) */
    v = tg_contiguous(x), idx = tg_zeros(uop_shape(x->u), tg_ndim(x), TG_INT64);
  } else {
    idx = running_argmax(is_max ? x : reverse_order(x), axis);
    v = take_along(x, idx, axis);
  }
  if (!tg_ndim(t)) v = tg_reshape(v, (int64_t[]){1}, 0), idx = tg_reshape(idx, (int64_t[]){1}, 0);
  if (v && idx) {
    *values = tg_keep(v);
    if (indices) *indices = tg_keep(idx);
  }
  tg_scope_end(s);
  return *values ? TG_OK : TG_ERR_ARG;
}

int tg_cummax(tg_tensor *t, int axis, tg_tensor **values, tg_tensor **indices) {
  return cum_extreme("cummax", t, axis, true, values, indices);
}
int tg_cummin(tg_tensor *t, int axis, tg_tensor **values, tg_tensor **indices) {
  return cum_extreme("cummin", t, axis, false, values, indices);
}

/* ---------------------------------------------------------------- logcumsumexp */

/* log(sum_{j <= i} e^x_j) = m_i + log(sum_{j <= i} e^(x_j - m_i)), m_i the running max
 * (detached: it only shifts), computed in float64 like logsumexp. Masked entries enter the exp
 * as -inf, so neither their values nor their gradients overflow. */
tg_tensor *tg_logcumsumexp(tg_tensor *t, int axis) {
  if (!t) return null_arg("logcumsumexp");
  if (!scan_axis("logcumsumexp", t, &axis, TG_FLOAT64)) return NULL;
  tg_dtype out = tg_dtype_is_float(tg_get_dtype(t)) ? tg_get_dtype(t) : TG_FLOAT32;
  if (tg_ndim(t) == 0 || tg_dim(t, axis) == 0) return tg_cast(t, out);
  tg_scope *s = tg_scope_begin();
  square q = square_of(tg_cast(t, TG_FLOAT64), axis);
  tg_tensor *m = tg_detach(tg_max(masked(&q, q.x, -INFINITY), &axis, 1, true)); /* (.., 1, i, ..) */
  m = tg_where(tg_isinf(m), tg_zeros_like(m), m);
  tg_tensor *e = tg_exp(masked(&q, tg_sub(q.x, m), -INFINITY));
  tg_tensor *r = tg_add(tg_log(tg_sum(e, &axis, 1, true)), m);
  r = tg_keep(tg_cast(tg_squeeze(r, axis), out));
  tg_scope_end(s);
  return r;
}
