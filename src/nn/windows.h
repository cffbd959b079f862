/* windows.h — sliding windows over the last nsp spatial axes (1 to 3), shared by the
 * convolutions (conv.c) and the pooling functions (pool.c): the windows as a view of the input
 * (tinygrad's Tensor._pool), their adjoint (a tensor of windows summed, or maxed, back onto the
 * input's positions), and the argument helpers both files check their geometry with. */
#ifndef TG_NN_WINDOWS_H
#define TG_NN_WINDOWS_H

#include "nn/functional.h"

#define NN_MAX_NSP 3 /* spatial axes of the public functions: 1-D, 2-D and 3-D */

/* The sizes of one axis's windows: o = ceil((i - d(k-1)) / s) windows, and for the skew trick
 * the rows of i*f + d and their total k*(i*f + d). */
typedef struct window_axis { int64_t o, f, row, total; } window_axis;

/* Fills w; false where no window fits or a size does not fit in int64. */
bool window_axis_sizes(int64_t i, int64_t k, int64_t s, int64_t d, window_axis *w);

/* Windows of the last nsp axes: (..., i_0, .., i_n) → (..., o_0, .., o_n, k_0, .., k_n), window o
 * starting at o*s with taps d apart. Views only; NULL (error set) if the sizes overflow. */
tg_tensor *pool_windows(tg_tensor *x, const int64_t *k, const int64_t *s, const int64_t *d, int nsp);

/* A reduction like tg_sum or tg_max. */
typedef tg_tensor *(*nn_reduce_fn)(tg_tensor *t, const int *axes, int naxes, bool keepdim);

/* The adjoint of pool_windows: v (..., o.., k..) → (..., in..), every window tap added onto (or,
 * with reduce = tg_max, maxed into) the input position it was read from; `identity` (0 or the
 * lowest value) where no tap lands. Views, then one reduction where windows overlap. */
tg_tensor *pool_windows_back(tg_tensor *v, const int64_t *in, const int64_t *k, const int64_t *s, const int64_t *d,
                             int nsp, nn_reduce_fn reduce, double identity);

/* Pad (positive) or crop (negative) the last nsp axes by before[i] / after[i]. */
tg_tensor *pad_or_crop(tg_tensor *x, const int64_t *before, const int64_t *after, int nsp, double value);

/* Insert s-1 zeros between neighbours on the last nsp axes: (.., n) → (.., (n-1)*s + 1). */
tg_tensor *dilate_input(tg_tensor *x, const int64_t *s, int nsp);

/* 0, 1, .., n-1 in an integer dtype: index math, never a buffer. */
tg_tensor *nn_iota(int64_t n, tg_dtype dt);
/* A constant written by the library (a literal in the kernel, not a user value). */
tg_tensor *nn_const(const int64_t *shape, int nd, double v, tg_dtype dt);

/* Move r (may be NULL) out of scope s and close s. */
tg_tensor *nn_finish(tg_scope *s, tg_tensor *r);

/* A per-axis int argument of nsp entries (NULL → dflt), each >= lo; otherwise the error
 * "op: what must be >= lo, got (1, 0)". */
bool nn_spatial_param(const char *op, const char *what, const int *p, int nsp, int dflt, int lo, int64_t *out);

/* "(1, 2, 3)": n values into buf. */
const char *nn_fmt_ints(char *buf, size_t cap, const int64_t *v, int n);

/* The windows of a kernel k (stride s, dilation d) over `in` positions can be built: every size
 * on the way fits in int64 (TG_ERR_SHAPE otherwise, naming axis of x). */
bool nn_check_windows(const char *op, tg_tensor *x, int64_t in, int64_t k, int64_t s, int64_t d, int axis);
#endif
