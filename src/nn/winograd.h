/* winograd.h — 3x3 stride-1 2-D convolutions by Winograd's minimal filtering F(m x m, 3x3):
 * tiles of the input and the weight transformed by small constant matrices, one batched
 * matmul over the (m+2)^2 tile positions, the products transformed back (winograd.c). */
#ifndef TG_NN_WINOGRAD_H
#define TG_NN_WINOGRAD_H

#include "nn/windows.h"

/* Whether conv2d of x (N, C, H, W) with w (K, C, 3, 3), padded by before/after (a crop: no),
 * stride 1, dilation 1, one group, is worth running as Winograd (the measured rule in
 * winograd.c, docs/nn.md). WINO=0 in the environment: never; WINO=2 or 4: wherever it can. */
bool wino_applies(tg_tensor *x, tg_tensor *w, const int64_t *pad_before, const int64_t *pad_after, int nsp,
                  int64_t groups, const int64_t *stride, const int64_t *dilation);

/* The convolution (no bias) of x with w padded by before/after (>= 0) per spatial axis, as
 * tensor ops; NULL with the error set on failure. Same values as the direct form within float
 * rounding (the transforms add a few roundings per output). */
tg_tensor *wino_conv2d(tg_tensor *x, tg_tensor *w, const int64_t *pad_before, const int64_t *pad_after);
#endif
