/* tg.h — the public API of tg, a lazy tensor library and kernel compiler in C.
 *
 * Every operation only builds a graph; work happens when a result is asked for
 * (tg_realize, tg_to_host). Functions that create tensors return NULL on error and
 * leave a message in tg_last_error(); a NULL argument makes the result NULL and keeps
 * the first message, so a whole expression can be checked once at the end.
 *
 * Ownership: tensors are reference-counted handles. Inside tg_scope_begin/end every
 * new tensor belongs to the innermost scope and is freed when it ends, unless moved
 * out with tg_keep. Outside any scope a tensor lives until tg_free.
 */
#ifndef TG_H
#define TG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ---------------------------------------------------------------- types */

/** Element types. Numeric order is part of the ABI. */
typedef enum tg_dtype {
  TG_BOOL, TG_INT8, TG_INT16, TG_INT32, TG_INT64,
  TG_UINT8, TG_UINT16, TG_UINT32, TG_UINT64,
  TG_FLOAT16, TG_BFLOAT16, TG_FLOAT32, TG_FLOAT64,
  TG_DTYPE_COUNT
} tg_dtype;

/** Status codes returned by functions that return int. */
typedef enum tg_status {
  TG_OK = 0,
  TG_ERR_ARG = -1,      /**< invalid argument (shape, axis, dtype, NULL) */
  TG_ERR_NOMEM = -2,    /**< allocation failed */
  TG_ERR_COMPILE = -3,  /**< generated kernel failed to compile or load */
  TG_ERR_DEVICE = -4,   /**< device or runtime failure */
  TG_ERR_IO = -5,       /**< file or data error */
  TG_ERR_SHAPE = -6     /**< a shape that cannot exist: a negative size, a rank above 64, or more
                             bytes than fit in int64 (docs/errors.md) */
} tg_status;

/** A lazy tensor handle (opaque). */
typedef struct tg_tensor tg_tensor;
/** An autorelease pool for tensors (opaque). */
typedef struct tg_scope tg_scope;

/** Counters of the work this thread did since its last tg_reset_stats (the *_alive counts are
 *  the whole process's). */
typedef struct tg_stats {
  uint64_t kernels_run;       /**< kernels launched */
  uint64_t kernels_compiled;  /**< kernels compiled (or loaded from the disk cache) */
  uint64_t disk_cache_hits;   /**< of those, loaded from the disk cache */
  uint64_t flops;             /**< estimated floating/integer ops executed by kernels */
  uint64_t bytes_moved;       /**< bytes read + written by kernels */
  uint64_t schedules;         /**< realize calls that scheduled work */
  uint64_t uops_alive;        /**< UOps currently alive (interned) */
  uint64_t buffers_alive;     /**< device buffers currently allocated */
  uint64_t bytes_alive;       /**< bytes in those buffers */
  uint64_t bytes_peak;        /**< the most bytes in buffers at once since the last tg_reset_stats (process) */
  double kernel_seconds;      /**< wall time spent inside kernels */
  double compile_seconds;     /**< wall time spent compiling */
  double schedule_seconds;    /**< realize time outside kernels, lowering and compiling */
  double lower_seconds;       /**< program lookup, optimization, lowering and rendering */
  uint64_t kernel_parts;      /**< calls of a chained kernel over a group of images (docs/architecture.md, "Chunks") */
} tg_stats;

/* ------------------------------------------------------- errors, memory */

/** The message of the most recent error in this thread ("" if none). */
const char *tg_last_error(void);
/** Forget the last error. */
void tg_clear_error(void);
/** Release a tensor handle. NULL is a no-op. */
void tg_free(tg_tensor *t);
/** Open a scope: tensors created until tg_scope_end belong to it. */
tg_scope *tg_scope_begin(void);
/** Close a scope, freeing every tensor it still owns. */
void tg_scope_end(tg_scope *s);
/** Move t out of the innermost scope to the enclosing one (or to the user). Returns t. */
tg_tensor *tg_keep(tg_tensor *t);
/** Take an extra reference to t (owned by the caller, not by any scope). Returns t. */
tg_tensor *tg_retain(tg_tensor *t);
/** Read this thread's work counters and the process's alive counts. */
tg_stats tg_get_stats(void);
/** Zero this thread's work counters (alive counts are kept). */
void tg_reset_stats(void);

/* ----------------------------------------------------------- devices
 * Devices are named as in tinygrad: "CPU" (C compiled by the system compiler), "LLVM" (LLVM IR
 * compiled in process); ":n" names a logical instance ("CPU:1" .. "CPU:7", each its own device
 * with its own queue; "CPU:0" is "CPU"). The default device is the one given to
 * tg_set_default_device, else the DEV environment variable, else "LLVM" where libLLVM-14
 * loads (it compiles fastest), else "CPU". */

/** 1 if the device can be used here (known, and its library or driver present), else 0. */
int tg_device_available(const char *device);
/** Make device the default for this process. 0, or a negative tg_status (unknown or unavailable). */
int tg_set_default_device(const char *device);
/** The device t's value lives on ("CPU"; a constant is made where it is used: the default). */
const char *tg_device_of(const tg_tensor *t);
/** t's value on device (lazy: a copy that runs when it is realized; t itself if it is there
 *  already). An op on tensors of two devices is an error: copies are explicit. */
tg_tensor *tg_to(tg_tensor *t, const char *device);
/** t split across n devices along axis (its size must divide by n), or copied whole to each
 *  (axis -1): one tensor whose ops run on every device on its own shard; a reduction over the
 *  split axis is an allreduce. tg_to_host and tg_to gather it. NULL on an unknown device, a
 *  repeated one, a bad axis or size. See docs/devices.md, "Several devices". */
tg_tensor *tg_shard(tg_tensor *t, const char **devices, int n, int axis);

/* ------------------------------------------------------------ dtypes */

/** Size of one element in bytes (0 for an invalid dtype). */
size_t tg_dtype_size(tg_dtype dt);
/** Name of a dtype, e.g. "float32" ("invalid" for an invalid dtype). */
const char *tg_dtype_name(tg_dtype dt);
/** The dtype both a and b are converted to by a binary op (see docs/dtypes.md). */
tg_dtype tg_promote_types(tg_dtype a, tg_dtype b);
/** True for float16, bfloat16, float32, float64. */
bool tg_dtype_is_float(tg_dtype dt);

/* ---------------------------------------------------------- creation */

/** A new tensor with a copy of data (row-major, ndim dims; ndim 0 is a scalar). */
tg_tensor *tg_from_data(const void *data, tg_dtype dtype, const int64_t *shape, int ndim);
/** A tensor of the given shape filled with value. */
tg_tensor *tg_full(const int64_t *shape, int ndim, double value, tg_dtype dtype);
/** Zeros. */
tg_tensor *tg_zeros(const int64_t *shape, int ndim, tg_dtype dtype);
/** Ones. */
tg_tensor *tg_ones(const int64_t *shape, int ndim, tg_dtype dtype);
/** Uninitialized memory of the given shape (realized on use). */
tg_tensor *tg_empty(const int64_t *shape, int ndim, tg_dtype dtype);
/** A scalar (0-d tensor). */
tg_tensor *tg_scalar(double value, tg_dtype dtype);
/** full with the shape and dtype of t. */
tg_tensor *tg_full_like(tg_tensor *t, double value);
/** zeros with the shape and dtype of t. */
tg_tensor *tg_zeros_like(tg_tensor *t);
/** ones with the shape and dtype of t. */
tg_tensor *tg_ones_like(tg_tensor *t);
/** empty with the shape and dtype of t. */
tg_tensor *tg_empty_like(tg_tensor *t);
/** start, start+step, … below stop (above stop for a negative step). */
tg_tensor *tg_arange(double start, double stop, double step, tg_dtype dtype);
/** n evenly spaced values from start to stop inclusive. */
tg_tensor *tg_linspace(double start, double stop, int64_t n, tg_dtype dtype);
/** n x m identity matrix (ones on the diagonal). */
tg_tensor *tg_eye(int64_t n, int64_t m, tg_dtype dtype);

/* ------------------------------------------------------- inspection */

/** Number of dimensions (-1 for NULL). */
int tg_ndim(const tg_tensor *t);
/** Size of an axis; negative axes count from the end (-1 on error). */
int64_t tg_dim(const tg_tensor *t, int axis);
/** Number of elements (-1 for NULL). */
int64_t tg_numel(const tg_tensor *t);
/** Element type (TG_DTYPE_COUNT for NULL). */
tg_dtype tg_get_dtype(const tg_tensor *t);
/** Copy the shape into out (at most cap entries); returns ndim or -1. */
int tg_shape(const tg_tensor *t, int64_t *out, int cap);
/** True once t is backed by a buffer. */
bool tg_is_realized(const tg_tensor *t);

/* ------------------------------------------------------- realization */

/** Compute t now. 0 on success, negative tg_status on error. */
int tg_realize(tg_tensor *t);
/** Compute several tensors in one schedule (kernels shared and fused). */
int tg_realize_many(tg_tensor **ts, int n);
/** How many kernels tg_realize_many(ts, n) would run now (this thread's pending assigns
 *  included), without running anything (tinygrad: len(Tensor.schedule())). Negative tg_status
 *  on error. */
int tg_schedule_kernels(tg_tensor **ts, int n);
/** Realize t and copy its elements (row-major) to dst; nbytes must equal numel*size. */
int tg_to_host(tg_tensor *t, void *dst, size_t nbytes);
/** Realize t (numel 1) and return its value as double (NAN on error). */
double tg_item(tg_tensor *t);
/** Overwrite the data of a realized-or-not tensor in place (same shape/dtype). */
int tg_assign_data(tg_tensor *t, const void *data, size_t nbytes);
/** Make dst's value src (same shape; cast to dst's dtype). Lazy, but like an in-place write it
 *  always happens: the next realize of anything also realizes every pending assign. */
int tg_assign(tg_tensor *dst, tg_tensor *src);

/* ----------------------------------------------------------------- JIT
 * tg_jit_call(jit, in, n, out, m) calls fn(ctx, in, n, out, m), which builds outputs from the
 * inputs (and may tg_assign state such as parameters); the outputs and pending assigns are
 * realized. The first calls run fn and record the kernels they run; once two recordings agree,
 * later calls replay the kernels on the new inputs' buffers: no graph is built, scheduled or
 * compiled, and fn is not called. Inputs must keep their shapes and dtypes; data fn makes
 * itself (tg_from_data, a scalar) is frozen, and a recording where it changed between calls
 * is an error. Outputs are new tensors each call. docs/jit.md. */
typedef struct tg_jit tg_jit;
typedef int (*tg_jit_fn)(void *ctx, tg_tensor *const *in, int nin, tg_tensor **out, int nout);
tg_jit *tg_jit_new(tg_jit_fn fn, void *ctx);
/** 0, or a negative status: an input of another shape or dtype, or a function whose calls
 *  differ (then every later call fails the same way; that call's outputs are still set). */
int tg_jit_call(tg_jit *jit, tg_tensor *const *in, int nin, tg_tensor **out, int nout);
/** Whether calls now replay the recording. */
bool tg_jit_replaying(const tg_jit *jit);
void tg_jit_free(tg_jit *jit);

/* --------------------------------------------------------- elementwise
 * Binary ops broadcast like numpy and promote dtypes (docs/dtypes.md).
 * The *_s forms take a scalar right operand of t's dtype ("weak" type). */

tg_tensor *tg_add(tg_tensor *a, tg_tensor *b);      /**< a + b */
tg_tensor *tg_sub(tg_tensor *a, tg_tensor *b);      /**< a - b */
tg_tensor *tg_mul(tg_tensor *a, tg_tensor *b);      /**< a * b */
tg_tensor *tg_div(tg_tensor *a, tg_tensor *b);      /**< true division (ints → default float) */
tg_tensor *tg_floordiv(tg_tensor *a, tg_tensor *b); /**< floor(a / b), numpy's // */
tg_tensor *tg_idiv(tg_tensor *a, tg_tensor *b);     /**< integer division truncating toward 0 (C) */
tg_tensor *tg_mod(tg_tensor *a, tg_tensor *b);      /**< a mod b with the sign of b (numpy %) */
tg_tensor *tg_pow(tg_tensor *a, tg_tensor *b);      /**< a ** b */
tg_tensor *tg_maximum(tg_tensor *a, tg_tensor *b);  /**< elementwise max (NaN propagates) */
tg_tensor *tg_minimum(tg_tensor *a, tg_tensor *b);  /**< elementwise min (NaN propagates) */
tg_tensor *tg_add_s(tg_tensor *a, double b);        /**< a + scalar */
tg_tensor *tg_sub_s(tg_tensor *a, double b);        /**< a - scalar */
tg_tensor *tg_mul_s(tg_tensor *a, double b);        /**< a * scalar */
tg_tensor *tg_div_s(tg_tensor *a, double b);        /**< a / scalar */
tg_tensor *tg_pow_s(tg_tensor *a, double b);        /**< a ** scalar */
tg_tensor *tg_rsub_s(double a, tg_tensor *b);       /**< scalar - b */

tg_tensor *tg_eq(tg_tensor *a, tg_tensor *b);       /**< a == b (bool) */
tg_tensor *tg_ne(tg_tensor *a, tg_tensor *b);       /**< a != b (bool) */
tg_tensor *tg_lt(tg_tensor *a, tg_tensor *b);       /**< a < b (bool) */
tg_tensor *tg_le(tg_tensor *a, tg_tensor *b);       /**< a <= b (bool) */
tg_tensor *tg_gt(tg_tensor *a, tg_tensor *b);       /**< a > b (bool) */
tg_tensor *tg_ge(tg_tensor *a, tg_tensor *b);       /**< a >= b (bool) */
tg_tensor *tg_where(tg_tensor *cond, tg_tensor *a, tg_tensor *b); /**< cond ? a : b */

tg_tensor *tg_logical_and(tg_tensor *a, tg_tensor *b); /**< bool and */
tg_tensor *tg_logical_or(tg_tensor *a, tg_tensor *b);  /**< bool or */
tg_tensor *tg_logical_xor(tg_tensor *a, tg_tensor *b); /**< bool xor */
tg_tensor *tg_logical_not(tg_tensor *a);               /**< bool not */
tg_tensor *tg_bitwise_and(tg_tensor *a, tg_tensor *b); /**< & (int/bool) */
tg_tensor *tg_bitwise_or(tg_tensor *a, tg_tensor *b);  /**< | (int/bool) */
tg_tensor *tg_bitwise_xor(tg_tensor *a, tg_tensor *b); /**< ^ (int/bool) */
tg_tensor *tg_bitwise_not(tg_tensor *a);               /**< ~ (int/bool) */
tg_tensor *tg_shl(tg_tensor *a, int bits);             /**< a << bits (ints) */
tg_tensor *tg_shr(tg_tensor *a, int bits);             /**< a >> bits (ints) */
/** a << b elementwise (ints); a count outside [0, bits) gives 0 */
tg_tensor *tg_bitwise_left_shift(tg_tensor *a, tg_tensor *b);
/** a >> b elementwise (ints, arithmetic for signed); a count outside [0, bits) gives 0 or -1 (the sign) */
tg_tensor *tg_bitwise_right_shift(tg_tensor *a, tg_tensor *b);
tg_tensor *tg_atan2(tg_tensor *y, tg_tensor *x);       /**< angle of (x, y) in [-pi, pi] (C atan2; ints → float32) */
tg_tensor *tg_copysign(tg_tensor *a, tg_tensor *b);    /**< |a| with the sign bit of b (ints → float32) */
tg_tensor *tg_fmod(tg_tensor *a, tg_tensor *b);        /**< remainder with the sign of a (C fmod / %) */
tg_tensor *tg_logaddexp(tg_tensor *a, tg_tensor *b);   /**< log(e^a + e^b) without overflow */
/** start + weight (end - start), computed from the nearer end like PyTorch (floats) */
tg_tensor *tg_lerp(tg_tensor *start, tg_tensor *end, tg_tensor *weight);
tg_tensor *tg_lerp_s(tg_tensor *start, tg_tensor *end, double weight); /**< lerp with a scalar weight */
/** |a - b| <= atol + rtol |b| or a == b (NaNs equal if equal_nan), like torch.isclose (bool) */
tg_tensor *tg_isclose(tg_tensor *a, tg_tensor *b, double rtol, double atol, bool equal_nan);
/** 1 if isclose holds everywhere, 0 if not, a negative tg_status on error (realizes) */
int tg_allclose(tg_tensor *a, tg_tensor *b, double rtol, double atol, bool equal_nan);

tg_tensor *tg_neg(tg_tensor *t);        /**< -t */
tg_tensor *tg_exp(tg_tensor *t);        /**< e^t */
tg_tensor *tg_exp2(tg_tensor *t);       /**< 2^t */
tg_tensor *tg_log(tg_tensor *t);        /**< natural log */
tg_tensor *tg_log2(tg_tensor *t);       /**< base-2 log */
tg_tensor *tg_sqrt(tg_tensor *t);       /**< square root */
tg_tensor *tg_rsqrt(tg_tensor *t);      /**< 1/sqrt */
tg_tensor *tg_relu(tg_tensor *t);       /**< max(t, 0) */
tg_tensor *tg_abs(tg_tensor *t);        /**< |t| */
tg_tensor *tg_sign(tg_tensor *t);       /**< -1, 0 or 1 (NaN stays NaN) */
tg_tensor *tg_reciprocal(tg_tensor *t); /**< 1/t */
tg_tensor *tg_square(tg_tensor *t);     /**< t*t */
tg_tensor *tg_sin(tg_tensor *t);        /**< sine */
tg_tensor *tg_cos(tg_tensor *t);        /**< cosine */
tg_tensor *tg_tan(tg_tensor *t);        /**< tangent */
tg_tensor *tg_tanh(tg_tensor *t);       /**< hyperbolic tangent */
tg_tensor *tg_sigmoid(tg_tensor *t);    /**< 1/(1+e^-t) */
tg_tensor *tg_floor(tg_tensor *t);      /**< round down */
tg_tensor *tg_ceil(tg_tensor *t);       /**< round up */
tg_tensor *tg_round(tg_tensor *t);      /**< round half to even (numpy) */
tg_tensor *tg_trunc(tg_tensor *t);      /**< round toward zero */
tg_tensor *tg_isnan(tg_tensor *t);      /**< bool */
tg_tensor *tg_isinf(tg_tensor *t);      /**< bool */
tg_tensor *tg_isfinite(tg_tensor *t);   /**< bool: neither inf nor NaN (ints: true) */
tg_tensor *tg_log10(tg_tensor *t);      /**< base-10 log */
tg_tensor *tg_log1p(tg_tensor *t);      /**< log(1 + t), accurate for small t */
tg_tensor *tg_expm1(tg_tensor *t);      /**< e^t - 1, accurate for small t */
tg_tensor *tg_asin(tg_tensor *t);       /**< arcsine */
tg_tensor *tg_acos(tg_tensor *t);       /**< arccosine */
tg_tensor *tg_atan(tg_tensor *t);       /**< arctangent */
tg_tensor *tg_sinh(tg_tensor *t);       /**< hyperbolic sine */
tg_tensor *tg_cosh(tg_tensor *t);       /**< hyperbolic cosine */
tg_tensor *tg_asinh(tg_tensor *t);      /**< inverse hyperbolic sine */
tg_tensor *tg_acosh(tg_tensor *t);      /**< inverse hyperbolic cosine */
tg_tensor *tg_atanh(tg_tensor *t);      /**< inverse hyperbolic tangent */
tg_tensor *tg_erf(tg_tensor *t);        /**< error function */
tg_tensor *tg_clip(tg_tensor *t, double lo, double hi); /**< min(max(t, lo), hi) */
tg_tensor *tg_cast(tg_tensor *t, tg_dtype dtype);       /**< convert (numpy rules; float→int truncates) */
tg_tensor *tg_bitcast(tg_tensor *t, tg_dtype dtype);    /**< reinterpret bits (same element size) */

/* -------------------------------------------------------- reductions
 * axes: naxes == 0 reduces all axes; negative axes count from the end. */

tg_tensor *tg_sum(tg_tensor *t, const int *axes, int naxes, bool keepdim);  /**< sum (bool/small ints widen like numpy) */
tg_tensor *tg_prod(tg_tensor *t, const int *axes, int naxes, bool keepdim); /**< product */
tg_tensor *tg_max(tg_tensor *t, const int *axes, int naxes, bool keepdim);  /**< maximum (an empty reduced axis is an error) */
tg_tensor *tg_min(tg_tensor *t, const int *axes, int naxes, bool keepdim);  /**< minimum (an empty reduced axis is an error) */
tg_tensor *tg_mean(tg_tensor *t, const int *axes, int naxes, bool keepdim); /**< mean (float result) */
tg_tensor *tg_var(tg_tensor *t, const int *axes, int naxes, bool keepdim, double correction); /**< variance */
tg_tensor *tg_std(tg_tensor *t, const int *axes, int naxes, bool keepdim, double correction); /**< standard deviation */
tg_tensor *tg_any(tg_tensor *t, const int *axes, int naxes, bool keepdim);  /**< logical or (bool) */
tg_tensor *tg_all(tg_tensor *t, const int *axes, int naxes, bool keepdim);  /**< logical and (bool) */
tg_tensor *tg_argmax(tg_tensor *t, int axis, bool keepdim); /**< index of the first max (int32) */
tg_tensor *tg_argmin(tg_tensor *t, int axis, bool keepdim); /**< index of the first min (int32) */
tg_tensor *tg_softmax(tg_tensor *t, int axis);              /**< stable softmax */
tg_tensor *tg_log_softmax(tg_tensor *t, int axis);          /**< stable log-softmax */
tg_tensor *tg_logsumexp(tg_tensor *t, int axis, bool keepdim); /**< stable log(sum(exp)) */
tg_tensor *tg_cumsum(tg_tensor *t, int axis);               /**< inclusive prefix sum */
tg_tensor *tg_cumprod(tg_tensor *t, int axis);              /**< inclusive prefix product (ints widen like prod) */
/** Running max along axis: *values (t's dtype) and, if indices is not NULL, *indices (int64: the
 *  last position holding it, like torch.cummax). 0 or a negative tg_status. */
int tg_cummax(tg_tensor *t, int axis, tg_tensor **values, tg_tensor **indices);
/** Running min along axis, like tg_cummax. */
int tg_cummin(tg_tensor *t, int axis, tg_tensor **values, tg_tensor **indices);
tg_tensor *tg_logcumsumexp(tg_tensor *t, int axis);         /**< log(cumsum(exp(t))) without overflow */
/** sum with t converted to dtype first (torch.sum(t, dtype=...)); the result has that dtype */
tg_tensor *tg_sum_dtype(tg_tensor *t, const int *axes, int naxes, bool keepdim, tg_dtype dtype);
/** prod with t converted to dtype first; the result has that dtype */
tg_tensor *tg_prod_dtype(tg_tensor *t, const int *axes, int naxes, bool keepdim, tg_dtype dtype);
/** torch.var_mean: *var and *mean over the axes (one mean shared). 0 or a negative tg_status. */
int tg_var_mean(tg_tensor *t, const int *axes, int naxes, bool keepdim, double correction, tg_tensor **var,
                tg_tensor **mean);
/** torch.std_mean: *std and *mean over the axes. 0 or a negative tg_status. */
int tg_std_mean(tg_tensor *t, const int *axes, int naxes, bool keepdim, double correction, tg_tensor **std,
                tg_tensor **mean);

/* ---------------------------------------------------------- movement
 * Movement ops are views: they never copy unless tg_contiguous is asked for. */

tg_tensor *tg_reshape(tg_tensor *t, const int64_t *shape, int ndim);  /**< one -1 allowed */
tg_tensor *tg_permute(tg_tensor *t, const int *order, int ndim);      /**< reorder axes */
tg_tensor *tg_expand(tg_tensor *t, const int64_t *shape, int ndim);   /**< broadcast size-1 axes (-1 keeps) */
tg_tensor *tg_pad(tg_tensor *t, const int64_t *before, const int64_t *after, double value); /**< pad every axis */
tg_tensor *tg_shrink(tg_tensor *t, const int64_t *starts, const int64_t *ends); /**< crop every axis to [start, end) */
tg_tensor *tg_flip(tg_tensor *t, const int *axes, int naxes);         /**< reverse the given axes */
tg_tensor *tg_transpose(tg_tensor *t, int axis0, int axis1);          /**< swap two axes */
tg_tensor *tg_squeeze(tg_tensor *t, int axis);                        /**< drop a size-1 axis (axis -1..; all size-1 axes if axis == TG_ALL_AXES) */
tg_tensor *tg_unsqueeze(tg_tensor *t, int axis);                      /**< insert a size-1 axis */
tg_tensor *tg_flatten(tg_tensor *t, int start_axis, int end_axis);    /**< merge axes start..end */
/** numpy-like slice of one axis: start:stop:step; step may be negative; clamps like Python. */
tg_tensor *tg_slice(tg_tensor *t, int axis, int64_t start, int64_t stop, int64_t step);

/* ------------------------------------------------ symbolic sizes (docs/symbolic.md)
 * A variable stands for an int that changes between calls (a decode position): sizes and
 * offsets built from it compile into one kernel that reads its value when it runs, so every
 * value shares the kernel. tg_var_dim(v, k) is "v + k" as one int64 (far below any real size)
 * that tg_shrink, tg_pad, tg_reshape and tg_expand accept wherever they take a size or offset.
 * A tensor with a variable dim is stored at the dim's largest value (its layout: tg_shape,
 * tg_dim and tg_numel report it); tg_shape_bound gives the sizes now and tg_to_host copies
 * the elements at the bound value. Bind before realizing; a tg_jit replay reads the binding. */
typedef struct tg_symvar tg_symvar;
/** A variable taking values in [min, max] (0 <= min <= max < 2^32), unbound; it lives until
 *  the process exits (at most 16383). NULL on error. */
tg_symvar *tg_variable(const char *name, int64_t min, int64_t max);
/** Give v a value for the realizes and JIT calls that follow: 0, or TG_ERR_ARG outside [min, max]. */
int tg_var_bind(tg_symvar *v, int64_t value);
/** The bound value, or -1 when v is unbound or NULL. */
int64_t tg_var_value(const tg_symvar *v);
/** v + k as a size or offset argument (an encoded int64; an invalid one on error). */
int64_t tg_var_dim(const tg_symvar *v, int64_t k);
/** mul * v + k (|mul| < 128): e.g. the pad after v elements up to n is tg_var_expr(v, -1, n). */
int64_t tg_var_expr(const tg_symvar *v, int64_t mul, int64_t k);
/** The shape with every variable at its bound value (as tg_shape; -1 if one is unbound). */
int tg_shape_bound(const tg_tensor *t, int64_t *out, int cap);
/** Concatenate n tensors along axis. */
tg_tensor *tg_cat(tg_tensor **ts, int n, int axis);
/** Stack n tensors along a new axis. */
tg_tensor *tg_stack(tg_tensor **ts, int n, int axis);
/** Split along axis into pieces of the given sizes (sum must equal the axis size); fills out[n]. */
int tg_split(tg_tensor *t, const int64_t *sizes, int n, int axis, tg_tensor **out);
/** Tile: repeat t reps[i] times along axis i (ndim entries; like torch.repeat). */
tg_tensor *tg_repeat(tg_tensor *t, const int64_t *reps, int ndim);
/** A contiguous copy (forces a buffer). */
tg_tensor *tg_contiguous(tg_tensor *t);
/** Padding modes of tg_pad_mode (torch.nn.functional.pad's `mode`). */
typedef enum tg_padding { TG_PAD_CONSTANT, TG_PAD_REFLECT, TG_PAD_REPLICATE, TG_PAD_CIRCULAR } tg_padding;
/** Pad every axis by before/after (ndim entries; negative amounts crop) in a mode; value is
 *  used by TG_PAD_CONSTANT only. Reflect and circular wrap as often as needed (docs/semantics.md). */
tg_tensor *tg_pad_mode(tg_tensor *t, const int64_t *before, const int64_t *after, tg_padding mode, double value);
/** torch.roll: shift axes[i] by shifts[i] (n pairs), elements wrap; axes NULL: the flattened
 *  tensor by shifts[0] (n must be 1). */
tg_tensor *tg_roll(tg_tensor *t, const int64_t *shifts, const int *axes, int n);
/** Lower triangle of the last two axes: keeps column j of row i where j - i <= diagonal. */
tg_tensor *tg_tril(tg_tensor *t, int64_t diagonal);
/** Upper triangle of the last two axes: keeps column j of row i where j - i >= diagonal. */
tg_tensor *tg_triu(tg_tensor *t, int64_t diagonal);
/** torch.diagonal: the diagonal (offset > 0: above) of axes axis1, axis2, which are removed;
 *  it becomes the last axis (a view). */
tg_tensor *tg_diagonal(tg_tensor *t, int64_t offset, int axis1, int axis2);
/** torch.diag: a 1-D t gives the square matrix with t on the given diagonal; a 2-D t its diagonal. */
tg_tensor *tg_diag(tg_tensor *t, int64_t diagonal);
/** torch.meshgrid: fills out[n] with n tensors (each 0-d or 1-D, one dtype) expanded to a grid;
 *  xy: numpy's "xy" indexing (the first two axes swapped), else "ij". */
int tg_meshgrid(tg_tensor **ts, int n, bool xy, tg_tensor **out);
/** torch.Tensor.unfold: windows of `size` every `step` along axis (a view): that axis becomes
 *  the window count (n - size) / step + 1 and a last axis of `size` is added. */
tg_tensor *tg_unfold(tg_tensor *t, int axis, int64_t size, int64_t step);
/** torch.unflatten: split axis into sizes[n] (one may be -1). */
tg_tensor *tg_unflatten(tg_tensor *t, int axis, const int64_t *sizes, int n);
/** torch.repeat_interleave: each element repeated `repeats` times along axis (TG_ALL_AXES: of
 *  the flattened tensor). */
tg_tensor *tg_repeat_interleave(tg_tensor *t, int64_t repeats, int axis);

/** Sentinel axis for tg_squeeze: every size-1 axis. */
#define TG_ALL_AXES (-1000000)
/** Sentinel end for tg_slice: to the end of the axis (or the beginning for negative steps). */
#define TG_SLICE_END INT64_MAX

/* ---------------------------------------------------------- indexing */

/** out[i][j] = t[index[i][j]][j] along axis (torch.gather; index int). */
tg_tensor *tg_gather(tg_tensor *t, int axis, tg_tensor *index);
/** Select rows: t[index] along axis 0 generalised to any axis (index any int shape). */
tg_tensor *tg_index_select(tg_tensor *t, int axis, tg_tensor *index);
/** One-hot: shape index.shape + (num_classes,), dtype. */
tg_tensor *tg_one_hot(tg_tensor *index, int64_t num_classes, tg_dtype dtype);
/** torch.scatter: t with out[index[i][j]][j] = src[i][j] along axis (index and src have t's
 *  rank; index fits in src and, but on axis, in t). Duplicate targets: the last one wins. */
tg_tensor *tg_scatter(tg_tensor *t, int axis, tg_tensor *index, tg_tensor *src);
/** The reductions of tg_scatter_reduce (torch's "sum", "prod", "mean", "amax", "amin"). */
typedef enum tg_scatter_op { TG_SCATTER_SUM, TG_SCATTER_PROD, TG_SCATTER_MEAN, TG_SCATTER_AMAX, TG_SCATTER_AMIN } tg_scatter_op;
/** torch.scatter_reduce: every src value reduced into the element of t its index points at;
 *  include_self: t's value takes part (else an element that gets values loses it). */
tg_tensor *tg_scatter_reduce(tg_tensor *t, int axis, tg_tensor *index, tg_tensor *src, tg_scatter_op reduce,
                             bool include_self);
/** torch.scatter_add: tg_scatter_reduce with TG_SCATTER_SUM, include_self. */
tg_tensor *tg_scatter_add(tg_tensor *t, int axis, tg_tensor *index, tg_tensor *src);
/** torch.masked_fill: value where the bool mask (broadcast to t's shape) is true. */
tg_tensor *tg_masked_fill(tg_tensor *t, tg_tensor *mask, double value);
/** torch.masked_select: the 1-D tensor of t's elements where mask is true (both broadcast).
 *  Reads the mask on the host (realizes it): the output size depends on the data. */
tg_tensor *tg_masked_select(tg_tensor *t, tg_tensor *mask);
/** torch.nonzero: (count, ndim) int64 coordinates of the nonzero elements, row-major order.
 *  Realizes t and computes on the host. */
tg_tensor *tg_nonzero(tg_tensor *t);
/** torch.repeat_interleave with a tensor: element i of axis repeated repeats[i] times (repeats
 *  0-d or 1-D int; TG_ALL_AXES: the flattened t). Reads repeats on the host (realizes it). */
tg_tensor *tg_repeat_interleave_t(tg_tensor *t, tg_tensor *repeats, int axis);
/** Sort along axis (stable; NaN after +inf, like torch.sort(stable=True)); fills *values and
 *  *indices (int64 positions; either may be NULL). 0 or a negative tg_status. */
int tg_sort(tg_tensor *t, int axis, bool descending, tg_tensor **values, tg_tensor **indices);
/** torch.argsort (stable): the int64 positions that sort t along axis. */
tg_tensor *tg_argsort(tg_tensor *t, int axis, bool descending);
/** torch.topk: the k largest (largest) or smallest values along axis, sorted, and their int64
 *  positions (ties: the lower position first). Either output may be NULL. */
int tg_topk(tg_tensor *t, int64_t k, int axis, bool largest, tg_tensor **values, tg_tensor **indices);

/* ------------------------------------------------------------ linear */

/** Matrix product with numpy semantics (1-D, 2-D, batched, broadcast batch dims). */
tg_tensor *tg_matmul(tg_tensor *a, tg_tensor *b);
/** Dot product of two 1-D tensors (also any numpy dot via matmul). */
tg_tensor *tg_dot(tg_tensor *a, tg_tensor *b);
/** torch.einsum over n operands, e.g. "bij,bjk->bik": labels a-z and A-Z, one "..." per term
 *  (broadcast axes); without "->" the output is the "..." axes, then the labels used once, in
 *  order. A repeated label in a term takes a diagonal. */
tg_tensor *tg_einsum(const char *equation, tg_tensor **operands, int n);

#ifdef __cplusplus
}
#endif

#include "tg_nn.h" /* autograd, random, nn, optimizers, model files, data */
#endif /* TG_H */
