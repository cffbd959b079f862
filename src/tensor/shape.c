/* shape.c — shape validation and axis normalization (see shape.h and docs/errors.md). */
#include "tensor/shape.h"

#include <stdarg.h>
#include <stdio.h>

#include "runtime/helpers.h"
#include "tensor/tensor.h"

int64_t shape_extent(const int64_t *shape, int nd) {
  int64_t n = 1;
  for (int i = 0; i < nd; i++)
    if (shape[i] < 0 || !ck_mul(n, shape[i] ? shape[i] : 1, &n)) return -1;
  return n;
}

void *shape_error(const char *fmt, ...) {
  char msg[900];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  tg_set_error(TG_ERR_SHAPE, "%s", msg);
  return NULL;
}

bool shape_check(const char *op, const int64_t *shape, int nd, tg_dtype dt) {
  if (nd < 0 || nd > TG_MAX_DIMS) return shape_error("%s: rank %d is out of range (0..%d)", op, nd, TG_MAX_DIMS), false;
  if (nd > 0 && !shape) return tg_set_error(TG_ERR_ARG, "%s: shape is NULL (rank %d)", op, nd), false;
  char buf[256];
  for (int i = 0; i < nd; i++)
    if (shape[i] < 0)
      return shape_error("%s: size %lld on axis %d of shape %s is negative", op, (long long)shape[i], i,
                         tg_fmt_shape(buf, sizeof buf, shape, nd)), false;
  int64_t extent = shape_extent(shape, nd), bytes;
  if (extent < 0 || !ck_mul(extent, (int64_t)tg_dtype_size(dt), &bytes))
    return shape_error("%s: shape %s of %s is too large (the product of its sizes, zeros counted as 1, times "
                       "the %zu-byte element exceeds 2^63 - 1)", op, tg_fmt_shape(buf, sizeof buf, shape, nd),
                       tg_dtype_name(dt), tg_dtype_size(dt)), false;
  return true;
}

bool shape_check_uop(const char *op, uop *u) {
  int nd = uop_ndim(u);
  return nd < 0 || shape_check(op, uop_shape(u), nd, (tg_dtype)u->dtype);
}

bool normalize_axis(const char *op, int *axis, int nd, axis_rule rule) {
  bool scalar = rule == AXIS_OF_SCALAR && nd == 0;
  int64_t lim = rule == AXIS_NEW || scalar ? (int64_t)nd + 1 : nd, a = *axis; /* int64: no overflow */
  if (a < 0) a += lim;
  if (a >= 0 && a < lim) {
    *axis = (int)a;
    return true;
  }
  if (lim == 0) tensor_error("%s: axis %d is out of range for rank %d (a 0-d tensor has no axes here)", op, *axis, nd);
  else tensor_error("%s: axis %d is out of range for rank %d (valid: %lld..%lld)", op, *axis, nd, (long long)-lim,
                    (long long)lim - 1);
  return false;
}
