/* functional.h — helpers shared by the nn function files (functional.c, conv.c).
 * Everything in src/nn/ is built from the public tensor API, so autograd differentiates it
 * through the derivative rules of the primitive ops; these helpers only validate and
 * format. */
#ifndef TG_NN_FUNCTIONAL_H
#define TG_NN_FUNCTIONAL_H

#include "tensor/tensor.h"

/* Shape of t as "(2, 3)" in a caller buffer. */
#define NN_SHAPE(t, buf) tg_fmt_shape((buf), sizeof(buf), uop_shape((t)->u), uop_ndim((t)->u))

/* True if t has a float dtype; otherwise an error "op: what must be a float tensor, got int32". */
bool nn_need_float(const char *op, const char *what, tg_tensor *t);

/* True if t is exactly shape[0..nd). */
bool nn_shape_is(tg_tensor *t, const int64_t *shape, int nd);

/* Optional per-channel parameter: NULL, or a tensor of shape (channels). Error otherwise. */
bool nn_check_channel_param(const char *op, const char *what, tg_tensor *p, int64_t channels);

/* Reshape a per-channel vector (C) to (1, C, 1, ..., 1) of rank nd for broadcasting on axis 1. */
tg_tensor *nn_channel_view(tg_tensor *p, int nd);
#endif
