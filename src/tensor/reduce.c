/* reduce.c — reductions, softmax family, cumsum and matmul (indexing: index.c). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "grad/gradient.h" /* softmax's derivative */
#include "tensor/shape.h"
#include "tensor/tensor.h"
#include "tensor/variable.h"

#define POOL_BEGIN size_t pool_mark_ = uop_pool_mark()
#define POOL_END(u) do { tg_tensor *r_ = tensor_wrap(u); uop_pool_release(pool_mark_); return r_; } while (0)

uop *ureduce(uop *x, uop_op op, const int *axes, int naxes) {
  int64_t arg[TG_MAX_DIMS + 1];
  int n = 0;
  arg[n++] = op;
  for (int i = 0; i < naxes; i++) arg[n++] = axes[i];
  if (naxes == 0) return x;
  return uop_new(OP_REDUCE_AXIS, x->dtype, &x, 1, arg, n);
}

/* Normalize an axis list into a sorted mask; naxes == 0 means all axes. A 0-d tensor takes
 * axis 0 or -1 and reduces nothing (PyTorch). */
static bool axes_mask(const char *op, tg_tensor *t, const int *axes, int naxes, bool *mask) {
  int nd = tg_ndim(t);
  memset(mask, 0, sizeof(bool) * TG_MAX_DIMS);
  if (naxes < 0 || (naxes > 0 && !axes)) return tensor_error("%s: invalid axes (naxes %d)", op, naxes), false;
  if (naxes == 0)
    for (int i = 0; i < nd; i++) mask[i] = true;
  for (int i = 0; i < naxes; i++) {
    int a = axes[i];
    if (!normalize_axis(op, &a, nd, AXIS_OF_SCALAR)) return false;
    if (mask[a]) return tensor_error("%s: axis %d repeated", op, axes[i]), false;
    mask[a] = true;
  }
  return true;
}

/* Reduce x over the masked axes (keepdim) then drop them unless keepdim. */
static uop *reduce_mask(uop *x, uop_op op, const bool *mask, bool keepdim) {
  int nd = uop_ndim(x), axes[TG_MAX_DIMS], n = 0, m = 0;
  int64_t out[TG_MAX_DIMS];
  for (int i = 0; i < nd; i++) {
    if (mask[i]) axes[n++] = i;
    if (!mask[i] || keepdim) out[m++] = mask[i] ? 1 : uop_shape(x)[i];
  }
  return ushape_reshape(ureduce(x, op, axes, n), out, m);
}

/* sum/prod/max of t as dtype `out` (accumulated in float32 for 16-bit floats) */
static tg_tensor *reduce_as(const char *name, tg_tensor *t, const int *axes, int naxes, bool keepdim, uop_op op,
                            tg_dtype out) {
  if (!t) return null_arg(name);
  bool mask[TG_MAX_DIMS];
  if (!axes_mask(name, t, axes, naxes, mask)) return NULL;
  POOL_BEGIN;
  tg_dtype acc = dtype_is_half(out) ? TG_FLOAT32 : out;
  POOL_END(ucast(reduce_mask(ucast(t->u, acc), op, mask, keepdim), out));
}

/* The maximum of no elements is not a number (PyTorch and numpy raise): an error if a reduced
 * axis is empty. The internal max_of allows it (-inf, the reduce identity) for softmax and any. */
static bool nonempty(const char *op, tg_tensor *t, const int *axes, int naxes) {
  bool mask[TG_MAX_DIMS];
  if (!axes_mask(op, t, axes, naxes, mask)) return false;
  for (int i = 0; i < tg_ndim(t); i++) {
    if (!mask[i] || uop_shape(t->u)[i]) continue;
    char b[256];
    tensor_error("%s: axis %d of %s has size 0, and the %s of no elements is undefined", op, i,
                 tg_fmt_shape(b, sizeof b, uop_shape(t->u), tg_ndim(t)), op);
    return false;
  }
  return true;
}

static tg_tensor *max_of(tg_tensor *t, const int *axes, int naxes, bool keepdim) {
  return t ? reduce_as("max", t, axes, naxes, keepdim, OP_MAX, t->u->dtype) : null_arg("max");
}

/* min = -max(-x) (floats) or ~max(~x) (ints, bools) */
static tg_tensor *min_of(tg_tensor *t, const int *axes, int naxes, bool keepdim) {
  tg_scope *s = tg_scope_begin();
  tg_tensor *r;
  if (tg_dtype_is_float(tg_get_dtype(t))) r = tg_neg(max_of(tg_neg(t), axes, naxes, keepdim));
  else if (tg_get_dtype(t) == TG_BOOL) r = tg_logical_not(max_of(tg_logical_not(t), axes, naxes, keepdim));
  else r = tg_bitwise_not(max_of(tg_bitwise_not(t), axes, naxes, keepdim));
  r = tg_keep(r);
  tg_scope_end(s);
  return r;
}

tg_tensor *tg_sum(tg_tensor *t, const int *axes, int naxes, bool keepdim) {
  return t ? reduce_as("sum", t, axes, naxes, keepdim, OP_ADD, dtype_sum_acc(t->u->dtype)) : null_arg("sum");
}
tg_tensor *tg_prod(tg_tensor *t, const int *axes, int naxes, bool keepdim) {
  return t ? reduce_as("prod", t, axes, naxes, keepdim, OP_MUL, dtype_sum_acc(t->u->dtype)) : null_arg("prod");
}

/* torch.sum(t, dtype=...): t is converted to dtype first, which is the result's dtype */
static tg_tensor *reduce_dtype(const char *name, tg_tensor *t, const int *axes, int naxes, bool keepdim, uop_op op,
                               tg_dtype dtype) {
  if (!t) return null_arg(name);
  if (!dtype_valid((int)dtype)) return tensor_error("%s: invalid dtype %d", name, (int)dtype);
  if (dtype == TG_BOOL) return tensor_error("%s: cannot accumulate in bool", name);
  size_t mark = uop_pool_mark();
  tg_tensor *x = tensor_wrap(ucast(t->u, dtype)); /* rounded to dtype, then accumulated */
  uop_pool_release(mark);
  tg_tensor *r = x ? reduce_as(name, x, axes, naxes, keepdim, op, dtype) : NULL;
  tg_free(x);
  return r;
}
tg_tensor *tg_sum_dtype(tg_tensor *t, const int *axes, int naxes, bool keepdim, tg_dtype dtype) {
  return reduce_dtype("sum", t, axes, naxes, keepdim, OP_ADD, dtype);
}
tg_tensor *tg_prod_dtype(tg_tensor *t, const int *axes, int naxes, bool keepdim, tg_dtype dtype) {
  return reduce_dtype("prod", t, axes, naxes, keepdim, OP_MUL, dtype);
}

tg_tensor *tg_max(tg_tensor *t, const int *axes, int naxes, bool keepdim) {
  if (!t) return null_arg("max");
  return nonempty("max", t, axes, naxes) ? max_of(t, axes, naxes, keepdim) : NULL;
}
tg_tensor *tg_min(tg_tensor *t, const int *axes, int naxes, bool keepdim) {
  if (!t) return null_arg("min");
  return nonempty("min", t, axes, naxes) ? min_of(t, axes, naxes, keepdim) : NULL;
}

tg_tensor *tg_any(tg_tensor *t, const int *axes, int naxes, bool keepdim) {
  if (!t) return null_arg("any");
  bool mask[TG_MAX_DIMS];
  if (!axes_mask("any", t, axes, naxes, mask)) return NULL;
  tg_scope *s = tg_scope_begin();
  tg_tensor *r = tg_keep(max_of(tg_cast(t, TG_BOOL), axes, naxes, keepdim)); /* empty: false */
  tg_scope_end(s);
  return r;
}

tg_tensor *tg_all(tg_tensor *t, const int *axes, int naxes, bool keepdim) {
  if (!t) return null_arg("all");
  bool mask[TG_MAX_DIMS];
  if (!axes_mask("all", t, axes, naxes, mask)) return NULL;
  tg_scope *s = tg_scope_begin();
  tg_tensor *r = tg_keep(min_of(tg_cast(t, TG_BOOL), axes, naxes, keepdim)); /* empty: true */
  tg_scope_end(s);
  return r;
}

static int64_t reduced_count(tg_tensor *t, const bool *mask) {
  int64_t n = 1;
  for (int i = 0; i < tg_ndim(t); i++)
    if (mask[i]) n *= uop_shape(t->u)[i];
  return n;
}

static tg_dtype float_of(tg_dtype dt) { return tg_dtype_is_float(dt) ? dt : TG_FLOAT32; }

/* sum / (count - correction), count clamped at 0. Where a reduced axis has a variable size the
 * count is not a number known here: it is the sum of ones over those axes, a loop that ends at
 * the bound value (docs/symbolic.md), so one kernel serves every value. */
static tg_tensor *div_count(tg_tensor *sum, tg_tensor *t, const int *axes, int naxes, const bool *mask, bool keepdim,
                            double correction) {
  int nd = tg_ndim(t);
  bool sym = false;
  int64_t lay[TG_MAX_DIMS], st[TG_MAX_DIMS] = {0}, en[TG_MAX_DIMS];
  for (int i = 0; i < nd; i++) {
    int64_t d = sym_dim(t->u, i);
    sym |= mask[i] && sym_is(d);
    lay[i] = mask[i] ? uop_shape(t->u)[i] : uop_shape(t->u)[i] > 0;
    en[i] = mask[i] ? d : lay[i];
  }
  if (!sym) {
    double n = (double)reduced_count(t, mask) - correction;
    return tg_div_s(sum, n > 0 ? n : 0);
  }
  tg_tensor *n = tg_sum(tg_shrink(tg_full(lay, nd, 1, TG_FLOAT32), st, en), axes, naxes, keepdim);
  if (correction != 0) n = tg_relu(tg_sub_s(n, correction));
  return tg_div(sum, tg_cast(n, tg_get_dtype(sum)));
}

tg_tensor *tg_mean(tg_tensor *t, const int *axes, int naxes, bool keepdim) {
  if (!t) return null_arg("mean");
  bool mask[TG_MAX_DIMS];
  if (!axes_mask("mean", t, axes, naxes, mask)) return NULL;
  tg_scope *s = tg_scope_begin();
  tg_tensor *x = tg_cast(t, float_of(tg_get_dtype(t)));
  tg_tensor *r = tg_keep(div_count(tg_sum(x, axes, naxes, keepdim), t, axes, naxes, mask, keepdim, 0));
  tg_scope_end(s);
  return r;
}

tg_tensor *tg_var(tg_tensor *t, const int *axes, int naxes, bool keepdim, double correction) {
  if (!t) return null_arg("var");
  bool mask[TG_MAX_DIMS];
  if (!axes_mask("var", t, axes, naxes, mask)) return NULL;
  tg_scope *s = tg_scope_begin();
  tg_tensor *x = tg_cast(t, float_of(tg_get_dtype(t)));
  tg_tensor *d = tg_sub(x, tg_mean(x, axes, naxes, true));
  tg_tensor *r = tg_keep(div_count(tg_sum(tg_mul(d, d), axes, naxes, keepdim), t, axes, naxes, mask, keepdim, correction));
  tg_scope_end(s);
  return r;
}

tg_tensor *tg_std(tg_tensor *t, const int *axes, int naxes, bool keepdim, double correction) {
  if (!t) return null_arg("std");
  bool mask[TG_MAX_DIMS];
  if (!axes_mask("std", t, axes, naxes, mask)) return NULL;
  tg_scope *s = tg_scope_begin();
  tg_tensor *r = tg_keep(tg_sqrt(tg_var(t, axes, naxes, keepdim, correction)));
  tg_scope_end(s);
  return r;
}

/* torch.var_mean / std_mean: the statistic and the mean, from one graph (the mean is shared). */
static int stat_and_mean(const char *name, tg_tensor *t, const int *axes, int naxes, bool keepdim, double correction,
                         bool sqrt_of, tg_tensor **stat, tg_tensor **mean) {
  if (!stat || !mean) return tg_set_error(TG_ERR_ARG, "%s: the output pointers must not be NULL", name);
  *stat = *mean = NULL;
  if (!t) return null_arg(name), TG_ERR_ARG;
  bool mask[TG_MAX_DIMS];
  if (!axes_mask(name, t, axes, naxes, mask)) return TG_ERR_ARG;
  tg_scope *s = tg_scope_begin();
  tg_tensor *v = tg_var(t, axes, naxes, keepdim, correction), *m = tg_mean(t, axes, naxes, keepdim);
  if (sqrt_of) v = tg_sqrt(v);
  if (v && m) *stat = tg_keep(v), *mean = tg_keep(m);
  tg_scope_end(s);
  return *stat ? TG_OK : TG_ERR_NOMEM;
}

int tg_var_mean(tg_tensor *t, const int *axes, int naxes, bool keepdim, double correction, tg_tensor **var,
                tg_tensor **mean) {
  return stat_and_mean("var_mean", t, axes, naxes, keepdim, correction, false, var, mean);
}
int tg_std_mean(tg_tensor *t, const int *axes, int naxes, bool keepdim, double correction, tg_tensor **std,
                tg_tensor **mean) {
  return stat_and_mean("std_mean", t, axes, naxes, keepdim, correction, true, std, mean);
}

/* iota along `axis` of a rank-nd shape, shaped (1,..,n,..,1) */
static tg_tensor *axis_iota(int64_t n, int axis, int nd, tg_dtype dt) {
  int64_t s[TG_MAX_DIMS];
  for (int i = 0; i < nd; i++) s[i] = i == axis ? n : 1;
  return tg_reshape(tg_arange(0, (double)n, 1, dt), s, nd);
}

static tg_tensor *arg_extreme(const char *name, tg_tensor *t, int axis, bool keepdim, bool is_max) {
  if (!t) return null_arg(name);
  int nd = tg_ndim(t), a = axis;
  if (!normalize_axis(name, &a, nd, AXIS_OF_SCALAR)) return NULL; /* 0-d: a = 0 of the (1,) view below */
  if (nd && !nonempty(name, t, &a, 1)) return NULL;
  tg_scope *s = tg_scope_begin();
  tg_tensor *x = nd ? t : tg_reshape(t, (int64_t[]){1}, 1);
  if (!is_max) /* argmin(x) = argmax(-x) (floats) or argmax(~x) (ints) */
    x = tg_dtype_is_float(tg_get_dtype(x)) ? tg_neg(x) : tg_get_dtype(x) == TG_BOOL ? tg_logical_not(x) : tg_bitwise_not(x);
  int64_t n = uop_shape(x->u)[a];
  tg_tensor *m = max_of(x, &a, 1, true);
  tg_tensor *hit = tg_logical_or(tg_eq(x, m), tg_isnan(x)); /* NaN is the max */
  tg_tensor *rev = tg_rsub_s((double)n, axis_iota(n, a, tg_ndim(x), TG_INT32));
  tg_tensor *best = max_of(tg_mul(tg_cast(hit, TG_INT32), rev), &a, 1, keepdim && nd);
  tg_tensor *r = tg_keep(tg_rsub_s((double)n, best));
  tg_scope_end(s);
  return r;
}

tg_tensor *tg_argmax(tg_tensor *t, int axis, bool keepdim) { return arg_extreme("argmax", t, axis, keepdim, true); }
tg_tensor *tg_argmin(tg_tensor *t, int axis, bool keepdim) { return arg_extreme("argmin", t, axis, keepdim, false); }

/* One axis of t (a 0-d tensor takes 0 and -1: the caller handles rank 0). */
static bool one_axis(const char *name, tg_tensor *t, int *axis) {
  return normalize_axis(name, axis, tg_ndim(t), AXIS_OF_SCALAR);
}

/* log_softmax and logsumexp work in float64 for float32 and 16-bit inputs (ints: float32
 * results) and round once at the end: their composite backward (exp, sum, division) then has
 * float64 rounding errors only, where in float32 they added up to 4e-7 (PyTorch's tests allow
 * 1e-7). */
static tg_tensor *soft_input(tg_tensor *t, tg_dtype *out) {
  *out = float_of(tg_get_dtype(t));
  return tg_cast(t, TG_FLOAT64);
}

/* The max along axis, detached (it only shifts the exponents: its gradient is 0 in exact
 * arithmetic), and 0 where it is infinite: all -inf (or an inf) must not give NaN. */
static tg_tensor *shift_of(tg_tensor *x, int axis) {
  tg_tensor *m = tg_detach(max_of(x, &axis, 1, true));
  return tg_where(tg_isinf(m), tg_zeros_like(m), m);
}

/* The dtype softmax computes in: float64 for float64, else float32 (PyTorch's choice). */
static tg_dtype softmax_dtype(tg_dtype out) { return out == TG_FLOAT64 ? TG_FLOAT64 : TG_FLOAT32; }

/* GRADFN rule of y = GRADFN(softmax(x), x) along arg[1]: dx = y * (g - sum(g * y)) in the
 * compute dtype, as PyTorch's backward does. The composite backward (through exp, the sum and
 * the division) erred by 2e-5 relative in float32. */
static void softmax_grad_rule(uop *u, uop *g, uop **d) {
  tg_scope *s = tg_scope_begin();
  int axis = (int)u->arg[1];
  tg_dtype dt = softmax_dtype(u->src[1]->dtype);
  tg_tensor *y = tg_cast(tensor_wrap(u->src[0]), dt), *gy = tg_cast(tensor_wrap(g), dt);
  tg_tensor *dx = tg_cast(tg_mul(y, tg_sub(gy, tg_sum(tg_mul(gy, y), &axis, 1, true))), u->src[1]->dtype);
  d[1] = dx ? uop_pool_add(dx->u) : NULL; /* outlives the scope: the gradient walk's pool owns it */
  tg_scope_end(s);
}

static tg_tensor *with_softmax_grad(tg_tensor *y, tg_tensor *x, int axis) {
  static _Atomic int registered = -1; /* any thread may register it first: the same id */
  int id = atomic_load(&registered);
  if (id < 0) atomic_store(&registered, id = grad_register_custom(softmax_grad_rule));
  if (!y || id < 0 || !tg_dtype_is_float(tg_get_dtype(x))) return y;
  size_t mark = uop_pool_mark();
  uop *src[2] = {y->u, x->u};
  int64_t arg[2] = {id, axis};
  tg_tensor *r = tensor_wrap(uop_new(OP_GRADFN, y->u->dtype, src, 2, arg, 2));
  uop_pool_release(mark);
  return r;
}

/* Softmax in float32 (float64 for float64), exp as exp2 of x·log2(e) (vector polynomial code),
 * scaled by the reciprocal of the row's sum as PyTorch's CPU kernel does (one division per row,
 * a multiply per element), with its own derivative. */
tg_tensor *tg_softmax(tg_tensor *t, int axis) {
  if (!t) return null_arg("softmax");
  if (!one_axis("softmax", t, &axis)) return NULL;
  tg_scope *s = tg_scope_begin();
  tg_dtype out = float_of(tg_get_dtype(t)), dt = softmax_dtype(out);
  tg_tensor *x = tg_cast(t, dt), *d = tg_sub(x, tg_detach(max_of(x, &axis, 1, true)));
  tg_tensor *e = dt == TG_FLOAT64 ? tg_exp(d) : tg_exp2(tg_mul_s(d, M_LOG2E));
  tg_tensor *r = tg_keep(with_softmax_grad(tg_cast(tg_mul(e, tg_reciprocal(tg_sum(e, &axis, 1, true))), out), t, axis));
  tg_scope_end(s);
  return r;
}

tg_tensor *tg_logsumexp(tg_tensor *t, int axis, bool keepdim) {
  if (!t) return null_arg("logsumexp");
  if (!one_axis("logsumexp", t, &axis)) return NULL;
  tg_scope *s = tg_scope_begin();
  tg_dtype out;
  tg_tensor *x = soft_input(t, &out), *m = shift_of(x, axis);
  tg_tensor *l = tg_add(tg_log(tg_sum(tg_exp(tg_sub(x, m)), &axis, 1, true)), m);
  tg_tensor *r = tg_keep(tg_cast(keepdim ? l : tg_squeeze(l, axis), out));
  tg_scope_end(s);
  return r;
}

tg_tensor *tg_log_softmax(tg_tensor *t, int axis) {
  if (!t) return null_arg("log_softmax");
  if (!one_axis("log_softmax", t, &axis)) return NULL;
  tg_scope *s = tg_scope_begin();
  tg_dtype out;
  tg_tensor *x = soft_input(t, &out);
  tg_tensor *d = tg_sub(x, shift_of(x, axis)); /* (x - m) - log(sum(exp(x - m))): no large magnitudes */
  tg_tensor *r = tg_keep(tg_cast(tg_sub(d, tg_log(tg_sum(tg_exp(d), &axis, 1, true))), out));
  tg_scope_end(s);
  return r;
}

tg_tensor *tg_cumsum(tg_tensor *t, int axis) {
  if (!t) return null_arg("cumsum");
  if (!one_axis("cumsum", t, &axis)) return NULL;
  if (tg_ndim(t) == 0) return tg_sum(t, NULL, 0, false);
  if (!sym_axis_plain("cumsum", t->u, axis)) return NULL; /* i's axis below is an iota of the layout */
  /* out[.., i, ..] = sum_j x[.., j, ..] * (j <= i): x gets a new axis i after `axis` */
  int nd = tg_ndim(t);
  int64_t n = uop_shape(t->u)[axis], wide[TG_MAX_DIMS + 1];
  for (int i = 0, k = 0; i < nd; i++) {
    wide[k++] = uop_shape(t->u)[i];
    if (i == axis) wide[k++] = n;
  }
  if (!shape_check("cumsum", wide, nd + 1, dtype_sum_acc(tg_get_dtype(t)))) return NULL; /* the (.., j, i, ..) mask */
  tg_scope *s = tg_scope_begin();
  tg_tensor *x = tg_cast(t, dtype_sum_acc(tg_get_dtype(t)));
  tg_tensor *xe = tg_unsqueeze(x, axis + 1); /* (.., j, 1, ..) */
  tg_tensor *j = axis_iota(n, axis, nd + 1, TG_INT32), *i = axis_iota(n, axis + 1, nd + 1, TG_INT32);
  tg_tensor *masked = tg_where(tg_le(j, i), xe, tg_zeros_like(xe)); /* (.., j, i, ..) */
  tg_tensor *r = tg_keep(tg_sum(masked, &axis, 1, false));
  tg_scope_end(s);
  return r;
}

/* ---------------------------------------------------------------- matmul */

/* sum over k of x (.., n, 1, k) * y (.., 1, m, k), cast to dt: (.., n, m). */
static tg_tensor *product_sum(tg_tensor *x, tg_tensor *y, int axis, tg_dtype dt) {
  tg_tensor *p = tg_mul(x, y);
  if (!p) return NULL;
  bool mask[TG_MAX_DIMS] = {0};
  mask[tg_ndim(p) + axis] = true;
  size_t mark = uop_pool_mark();
  tg_tensor *r = tensor_wrap(ucast(reduce_mask(p->u, OP_ADD, mask, false), dt));
  uop_pool_release(mark);
  return r;
}

/* x (.., n, k) @ y (.., k, m) in the accumulation dtype of both, the result cast to dt: the sum
 * over k of (.., n, 1, k) * (.., 1, m, k). How a device reads the operands (a large product's
 * right operand in panels) is the scheduler's choice (src/schedule/layout.c). */
static tg_tensor *matmul_product(tg_tensor *x, tg_tensor *y, tg_dtype dt) {
  if (!x || !y) return NULL;
  return product_sum(tg_unsqueeze(x, -2), tg_unsqueeze(tg_transpose(y, -1, -2), -3), -1, dt);
}

tg_tensor *tg_matmul(tg_tensor *a, tg_tensor *b) {
  if (!a || !b) return null_arg("matmul");
  int an = tg_ndim(a), bn = tg_ndim(b);
  char sa[256], sb[256];
  if (an == 0 || bn == 0) return tensor_error("matmul: operands must have at least 1 dimension (got %s and %s)",
                                              tg_fmt_shape(sa, sizeof sa, uop_shape(a->u), an),
                                              tg_fmt_shape(sb, sizeof sb, uop_shape(b->u), bn));
  int64_t ka = uop_shape(a->u)[an - 1], kb = uop_shape(b->u)[bn > 1 ? bn - 2 : 0];
  if (ka != kb)
    return tensor_error("matmul: inner sizes differ: %s @ %s", tg_fmt_shape(sa, sizeof sa, uop_shape(a->u), an),
                        tg_fmt_shape(sb, sizeof sb, uop_shape(b->u), bn));
  for (int i = 3; i <= an && i <= bn; i++) { /* batch axes must broadcast */
    int64_t x = uop_shape(a->u)[an - i], y = uop_shape(b->u)[bn - i];
    if (x != y && x != 1 && y != 1)
      return tensor_error("matmul: batch axes of %s and %s cannot broadcast",
                          tg_fmt_shape(sa, sizeof sa, uop_shape(a->u), an), tg_fmt_shape(sb, sizeof sb, uop_shape(b->u), bn));
  }
  tg_scope *s = tg_scope_begin();
  tg_dtype dt = tg_promote_types(tg_get_dtype(a), tg_get_dtype(b));
  tg_dtype acc = dtype_is_half(dt) ? TG_FLOAT32 : dt;
  tg_tensor *x = an == 1 ? tg_unsqueeze(a, 0) : a;  /* (.., n, k) */
  tg_tensor *y = bn == 1 ? tg_unsqueeze(b, 1) : b;  /* (.., k, m) */
  tg_tensor *r = matmul_product(tg_cast(x, acc), tg_cast(y, acc), dt);
  if (r) {
    if (bn == 1) r = tg_squeeze(r, -1);
    if (an == 1) r = tg_squeeze(r, bn == 1 ? -1 : -2);
  }
  r = tg_keep(r);
  tg_scope_end(s);
  return r;
}

tg_tensor *tg_dot(tg_tensor *a, tg_tensor *b) { return tg_matmul(a, b); }
