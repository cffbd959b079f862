/* shape.h — the one place where shapes and axes from user numbers are checked.
 *
 * Every shape a tensor can have is valid (docs/errors.md): rank 0..TG_MAX_DIMS, every size
 * >= 0, and its extent — the product of the sizes with each 0 counted as 1 — times the
 * element size fits in int64. Counting zeros as ones means strides and byte offsets of any
 * view, even of an empty tensor, never overflow. Functions that make a shape from user
 * numbers compute it with ck_add/ck_mul (runtime/helpers.h) and check it with shape_check
 * before building anything; tensor_wrap checks every result once more, so a shape grown by
 * broadcasting or an internal view (the n*k*m product of a matmul) cannot escape either. */
#ifndef TG_SHAPE_H
#define TG_SHAPE_H

#include <stdbool.h>
#include <stdint.h>
#include "tg.h"
#include "uop/uop.h"

/* The product of the sizes with 0 counted as 1; -1 for a negative size or an overflow. */
int64_t shape_extent(const int64_t *shape, int nd);

/* shape[0..nd) of dtype dt is valid; otherwise an error "op: ..." (TG_ERR_SHAPE, or
 * TG_ERR_ARG for a NULL shape) and false. dt must be a valid dtype. */
bool shape_check(const char *op, const int64_t *shape, int nd, tg_dtype dt);

/* The same check for the shape of a built node (ndim < 0: not a tensor, always fine). */
bool shape_check_uop(const char *op, uop *u);

/* Set a TG_ERR_SHAPE error (printf-style) and return NULL. */
void *shape_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* How an axis argument is read (PyTorch's rules):
 *   AXIS_OF         an axis of a rank-nd tensor, -nd..nd-1; a 0-d tensor has none;
 *   AXIS_OF_SCALAR  the same, but a 0-d tensor accepts 0 and -1 (both become 0): reductions,
 *                   softmax, flip, squeeze, ... treat a scalar as having one axis of size 1;
 *   AXIS_NEW        a position for a new axis, -(nd+1)..nd (unsqueeze, stack). */
typedef enum axis_rule { AXIS_OF, AXIS_OF_SCALAR, AXIS_NEW } axis_rule;

/* Normalize *axis to 0..; false with "op: axis A is out of range for rank N (...)" if bad. */
bool normalize_axis(const char *op, int *axis, int nd, axis_rule rule);
#endif
