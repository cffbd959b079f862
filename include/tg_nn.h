/* tg_nn.h — training on top of the core API: autograd, random numbers, nn functions and
 * layers, optimizers, model files and data loading. Included by tg.h; same conventions:
 * functions that make tensors return NULL on error with a message in tg_last_error(),
 * functions returning int return 0 or a negative tg_status. */
#ifndef TG_NN_H
#define TG_NN_H

#ifdef __cplusplus
extern "C" {
#endif

/* ------------------------------------------------------------ autograd
 * Gradients are built by a rewrite of the graph (one derivative rule per primitive op) and
 * are lazy tensors like any other: forward, backward and the optimizer update realize
 * together. */

/** Mark (or unmark) t as a parameter whose gradient tg_backward fills. Returns t. */
tg_tensor *tg_requires_grad(tg_tensor *t, bool on);
bool tg_get_requires_grad(const tg_tensor *t);
/** Gradients of scalar y with respect to each xs[i] (new tensors in the current scope;
 *  a zero tensor where y does not depend on xs[i]). Works on gradients (higher order). */
int tg_gradient(tg_tensor *y, tg_tensor **xs, int n, tg_tensor **grads_out);
/** Accumulate d(loss)/d(p) into tg_grad(p) for every parameter p that loss depends on. */
int tg_backward(tg_tensor *loss);
/** The accumulated gradient of t (owned by t; NULL if none). */
tg_tensor *tg_grad(tg_tensor *t);
/** Drop the accumulated gradient of t. */
void tg_zero_grad(tg_tensor *t);
/** The same value with no gradient flowing through it. */
tg_tensor *tg_detach(tg_tensor *t);

/* -------------------------------------------------------------- random
 * Counter-based (threefry 2x32, 32-bit arithmetic only) generator evaluated on the device.
 * The same seed gives the same numbers on every run. */

void tg_manual_seed(uint64_t seed);
tg_tensor *tg_rand(const int64_t *shape, int ndim, tg_dtype dtype);  /**< uniform [0, 1) */
tg_tensor *tg_randn(const int64_t *shape, int ndim, tg_dtype dtype); /**< standard normal */
tg_tensor *tg_randint(const int64_t *shape, int ndim, int64_t low, int64_t high, tg_dtype dtype); /**< [low, high) */
tg_tensor *tg_uniform(const int64_t *shape, int ndim, double low, double high, tg_dtype dtype);
tg_tensor *tg_normal(const int64_t *shape, int ndim, double mean, double std, tg_dtype dtype);
/** Initializers (PyTorch conventions: fan_in = shape[1] * prod(shape[2:]), fan_out = shape[0] * ...). */
tg_tensor *tg_kaiming_uniform(const int64_t *shape, int ndim, double a, tg_dtype dtype);
tg_tensor *tg_kaiming_normal(const int64_t *shape, int ndim, double a, tg_dtype dtype);
tg_tensor *tg_glorot_uniform(const int64_t *shape, int ndim, tg_dtype dtype);
tg_tensor *tg_glorot_normal(const int64_t *shape, int ndim, tg_dtype dtype);
/** Host-side draws from the same generator stream (for shuffling on the host). */
void tg_random_u32(uint32_t *out, size_t n);

/* -------------------------------------------------------- nn functions */

tg_tensor *tg_leaky_relu(tg_tensor *x, double slope);
tg_tensor *tg_gelu(tg_tensor *x);               /**< tanh approximation (tinygrad, torch approximate="tanh") */
tg_tensor *tg_silu(tg_tensor *x);               /**< x * sigmoid(x) */
tg_tensor *tg_softplus(tg_tensor *x, double beta); /**< log(1 + e^(beta x)) / beta, stable for large |x| */
tg_tensor *tg_elu(tg_tensor *x, double alpha);  /**< x > 0 ? x : alpha (e^x - 1) */
tg_tensor *tg_celu(tg_tensor *x, double alpha); /**< x > 0 ? x : alpha (e^(x/alpha) - 1); alpha != 0 */
tg_tensor *tg_selu(tg_tensor *x);               /**< scale · elu(x, alpha) with PyTorch's constants */
tg_tensor *tg_relu6(tg_tensor *x);              /**< min(max(x, 0), 6) */
tg_tensor *tg_hardtanh(tg_tensor *x, double min_val, double max_val); /**< x clamped to [min_val, max_val] */
tg_tensor *tg_hardsigmoid(tg_tensor *x);        /**< relu6(x + 3) / 6 */
tg_tensor *tg_hardswish(tg_tensor *x);          /**< x · relu6(x + 3) / 6 */
tg_tensor *tg_mish(tg_tensor *x);               /**< x · tanh(softplus(x)) */
tg_tensor *tg_softsign(tg_tensor *x);           /**< x / (1 + |x|) */
tg_tensor *tg_logsigmoid(tg_tensor *x);         /**< log(sigmoid(x)), stable for large |x| */
tg_tensor *tg_quick_gelu(tg_tensor *x);         /**< x · sigmoid(1.702 x) */
tg_tensor *tg_softmin(tg_tensor *x, int axis);  /**< softmax(-x) along axis */
/** x / max(||x||_p, eps) along axis (F.normalize; p > 0, INFINITY for the max norm) */
tg_tensor *tg_normalize(tg_tensor *x, double p, int axis, double eps);
tg_tensor *tg_dropout(tg_tensor *x, double p, bool training); /**< scales kept values by 1/(1-p) */
/** Normalize over the last `naxes` axes; weight/bias (shape of those axes) may be NULL. */
tg_tensor *tg_layernorm(tg_tensor *x, int naxes, tg_tensor *weight, tg_tensor *bias, double eps);
tg_tensor *tg_rmsnorm(tg_tensor *x, int naxes, tg_tensor *weight, double eps);
tg_tensor *tg_groupnorm(tg_tensor *x, int groups, tg_tensor *weight, tg_tensor *bias, double eps);
/** Batch norm over every axis but 1 (N, C, ...). In training, batch statistics are used and
 *  running_mean/running_var (may be NULL) are updated lazily (tg_assign) with `momentum`. */
tg_tensor *tg_batchnorm(tg_tensor *x, tg_tensor *weight, tg_tensor *bias, tg_tensor *running_mean,
                        tg_tensor *running_var, bool training, double momentum, double eps);

/** How a loss reduces its per-element values (PyTorch's reduction=): the mean (the default),
 *  the sum, or none (the values themselves). */
typedef enum tg_reduction { TG_REDUCTION_MEAN, TG_REDUCTION_SUM, TG_REDUCTION_NONE } tg_reduction;
/** F.nll_loss: log_probs (N, C), integer labels (N); weight (C) or NULL; labels equal to
 *  ignore_index count for nothing; the mean is weighted (sum / sum of the labels' weights). */
tg_tensor *tg_nll_loss_ex(tg_tensor *log_probs, tg_tensor *labels, tg_tensor *weight, int64_t ignore_index,
                          tg_reduction reduction);
/** F.cross_entropy with class labels: logits (N, C), labels (N), weight (C) or NULL. */
tg_tensor *tg_sparse_cross_entropy_ex(tg_tensor *logits, tg_tensor *labels, tg_tensor *weight, int64_t ignore_index,
                                      double label_smoothing, tg_reduction reduction);
/** F.cross_entropy with probabilities: logits and target (N, C), weight (C) or NULL. */
tg_tensor *tg_cross_entropy_ex(tg_tensor *logits, tg_tensor *target, tg_tensor *weight, double label_smoothing,
                               tg_reduction reduction);
/** F.mse_loss: pred and target of one shape. */
tg_tensor *tg_mse_loss_ex(tg_tensor *pred, tg_tensor *target, tg_reduction reduction);
/** F.binary_cross_entropy: weight (broadcast to prob) or NULL. */
tg_tensor *tg_bce_loss_ex(tg_tensor *prob, tg_tensor *target, tg_tensor *weight, tg_reduction reduction);
/** F.binary_cross_entropy_with_logits: weight and pos_weight (broadcast to logits) or NULL. */
tg_tensor *tg_bce_with_logits_loss_ex(tg_tensor *logits, tg_tensor *target, tg_tensor *weight, tg_tensor *pos_weight,
                                      tg_reduction reduction);
/* The short forms below are the _ex forms with no weights and the mean (nll_loss: ignore_index -100). */
/** logits (N, C), target probabilities (N, C). */
tg_tensor *tg_cross_entropy(tg_tensor *logits, tg_tensor *target, double label_smoothing);
/** logits (N, C), integer class labels (N). Labels equal to ignore_index are skipped (use -1 if none). */
tg_tensor *tg_sparse_cross_entropy(tg_tensor *logits, tg_tensor *labels, double label_smoothing, int64_t ignore_index);
tg_tensor *tg_nll_loss(tg_tensor *log_probs, tg_tensor *labels); /**< -mean(log_probs[i, labels[i]]) */
tg_tensor *tg_mse_loss(tg_tensor *pred, tg_tensor *target);
tg_tensor *tg_bce_loss(tg_tensor *prob, tg_tensor *target);
tg_tensor *tg_bce_with_logits_loss(tg_tensor *logits, tg_tensor *target);

/* Convolutions over nsp = 1, 2 or 3 spatial axes (F.conv1d/2d/3d, F.conv_transpose1d/2d/3d):
 * x (N, Cin, *in); bias (Cout) or NULL; stride, padding, output_padding and dilation have nsp
 * entries, or are NULL for 1, 0, 0 and 1. */
/** weight (Cout, Cin/groups, *k): the correlation of x with the weight, like F.conv{nsp}d. */
tg_tensor *tg_conv(tg_tensor *x, tg_tensor *weight, tg_tensor *bias, int nsp, const int *stride,
                   const int *padding, const int *dilation, int groups);
/** x (N, Cin, L), weight (Cout, Cin/groups, k). */
tg_tensor *tg_conv1d(tg_tensor *x, tg_tensor *weight, tg_tensor *bias, const int stride[1],
                     const int padding[1], const int dilation[1], int groups);
/** x (N, Cin, H, W), weight (Cout, Cin/groups, kh, kw), bias (Cout) or NULL. */
tg_tensor *tg_conv2d(tg_tensor *x, tg_tensor *weight, tg_tensor *bias, const int stride[2],
                     const int padding[2], const int dilation[2], int groups);
/** x (N, Cin, D, H, W), weight (Cout, Cin/groups, kd, kh, kw). */
tg_tensor *tg_conv3d(tg_tensor *x, tg_tensor *weight, tg_tensor *bias, const int stride[3],
                     const int padding[3], const int dilation[3], int groups);
/** weight (Cin, Cout/groups, *k), like F.conv_transpose{nsp}d (note its argument order). */
tg_tensor *tg_conv_transpose(tg_tensor *x, tg_tensor *weight, tg_tensor *bias, int nsp, const int *stride,
                             const int *padding, const int *output_padding, const int *dilation, int groups);
/** tg_conv_transpose with nsp = 1: weight (Cin, Cout/groups, k). */
tg_tensor *tg_conv_transpose1d(tg_tensor *x, tg_tensor *weight, tg_tensor *bias, const int stride[1],
                               const int padding[1], const int output_padding[1],
                               const int dilation[1], int groups);
/** weight (Cin, Cout/groups, kh, kw), like torch.nn.functional.conv_transpose2d. */
tg_tensor *tg_conv_transpose2d(tg_tensor *x, tg_tensor *weight, tg_tensor *bias, const int stride[2],
                               const int padding[2], const int output_padding[2],
                               const int dilation[2], int groups);
/** tg_conv_transpose with nsp = 3: weight (Cin, Cout/groups, kd, kh, kw). */
tg_tensor *tg_conv_transpose3d(tg_tensor *x, tg_tensor *weight, tg_tensor *bias, const int stride[3],
                               const int padding[3], const int output_padding[3],
                               const int dilation[3], int groups);

/* Pooling over the last nsp = 1, 2 or 3 axes of x (any leading axes). */
/** Options of tg_max_pool / tg_avg_pool: zero (or a NULL pointer) gives PyTorch's defaults.
 *  Arrays have nsp entries. */
typedef struct tg_pool_opts {
  const int *stride;        /**< NULL: the kernel */
  const int *padding;       /**< both sides of each axis (NULL: 0); at most half the kernel */
  const int *padding_after; /**< not NULL: asymmetric padding, `padding` before and this after */
  const int *dilation;      /**< NULL: 1 */
  bool ceil_mode;           /**< round the output size up (a window must start before the input ends) */
  bool exclude_pad;         /**< avg: count_include_pad = false, divide by the taps inside x */
  int divisor;              /**< avg: divisor_override when nonzero */
} tg_pool_opts;
/** Max pooling (padding counts as -inf). indices, if not NULL, receives PyTorch's return_indices:
 *  int64, the row-major flat position of each maximum in its channel's input (the first
 *  maximum of the window; the last NaN). The gradient goes to that element, as in PyTorch
 *  (but a window holding NaN passes none). */
tg_tensor *tg_max_pool(tg_tensor *x, int nsp, const int *kernel, const tg_pool_opts *opts, tg_tensor **indices);
/** Average pooling (padding counts as 0, and in the divisor unless exclude_pad). */
tg_tensor *tg_avg_pool(tg_tensor *x, int nsp, const int *kernel, const tg_pool_opts *opts);
/* Fixed-rank pools with PyTorch's defaults: stride NULL → stride = kernel; padding NULL → 0.
 * Padding counts as -inf (max) / 0 (avg, count_include_pad like PyTorch's default). */
/** F.max_pool1d(x, kernel, stride, padding) over the last axis. */
tg_tensor *tg_max_pool1d(tg_tensor *x, const int kernel[1], const int stride[1], const int padding[1]);
/** F.max_pool2d(x, kernel, stride, padding) over the last 2 axes. */
tg_tensor *tg_max_pool2d(tg_tensor *x, const int kernel[2], const int stride[2], const int padding[2]);
/** F.max_pool3d(x, kernel, stride, padding) over the last 3 axes. */
tg_tensor *tg_max_pool3d(tg_tensor *x, const int kernel[3], const int stride[3], const int padding[3]);
/** F.avg_pool1d(x, kernel, stride, padding) over the last axis. */
tg_tensor *tg_avg_pool1d(tg_tensor *x, const int kernel[1], const int stride[1], const int padding[1]);
/** F.avg_pool2d(x, kernel, stride, padding) over the last 2 axes. */
tg_tensor *tg_avg_pool2d(tg_tensor *x, const int kernel[2], const int stride[2], const int padding[2]);
/** F.avg_pool3d(x, kernel, stride, padding) over the last 3 axes. */
tg_tensor *tg_avg_pool3d(tg_tensor *x, const int kernel[3], const int stride[3], const int padding[3]);
/** F.max_unpool{nsp}d: zeros of output_size (nsp entries; NULL: (o-1)*stride - 2*padding + kernel)
 *  with x written at indices, which must come from tg_max_pool with the same kernel, stride
 *  and padding (an index outside its window is dropped). stride NULL → kernel; padding NULL → 0. */
tg_tensor *tg_max_unpool(tg_tensor *x, tg_tensor *indices, int nsp, const int *kernel, const int *stride,
                         const int *padding, const int64_t *output_size);
/** tg_max_unpool with nsp = 1 (F.max_unpool1d). */
tg_tensor *tg_max_unpool1d(tg_tensor *x, tg_tensor *indices, const int kernel[1], const int stride[1],
                           const int padding[1], const int64_t output_size[1]);
/** tg_max_unpool with nsp = 2 (F.max_unpool2d). */
tg_tensor *tg_max_unpool2d(tg_tensor *x, tg_tensor *indices, const int kernel[2], const int stride[2],
                           const int padding[2], const int64_t output_size[2]);
/** tg_max_unpool with nsp = 3 (F.max_unpool3d). */
tg_tensor *tg_max_unpool3d(tg_tensor *x, tg_tensor *indices, const int kernel[3], const int stride[3],
                           const int padding[3], const int64_t output_size[3]);
/** q (..., L, E), k (..., S, E), v (..., S, Ev); mask bool (true = keep) or float (added), may be NULL. */
tg_tensor *tg_scaled_dot_product_attention(tg_tensor *q, tg_tensor *k, tg_tensor *v, tg_tensor *mask, bool causal);
/** Modes of tg_interpolate (F.interpolate's `mode`): linear, bilinear and trilinear need 1, 2
 *  and 3 spatial axes. */
typedef enum tg_interp_mode {
  TG_INTERP_NEAREST, TG_INTERP_NEAREST_EXACT, TG_INTERP_LINEAR, TG_INTERP_BILINEAR, TG_INTERP_TRILINEAR
} tg_interp_mode;
/** F.interpolate of x (N, C, 1-3 spatial axes) to `size` or by `scale_factor` (one entry per
 *  spatial axis; exactly one of them non-NULL); align_corners only for the linear modes. */
tg_tensor *tg_interpolate(tg_tensor *x, const int64_t *size, const double *scale_factor, tg_interp_mode mode,
                          bool align_corners);

/* ---------------------------------------------------------- state dict
 * Named tensors (borrowed references are retained; freed by tg_state_dict_free). */
typedef struct tg_state_dict {
  int n, cap;
  char **names;
  tg_tensor **tensors;
} tg_state_dict;
int tg_state_dict_add(tg_state_dict *sd, const char *name, tg_tensor *t);
tg_tensor *tg_state_dict_get(const tg_state_dict *sd, const char *name);
void tg_state_dict_free(tg_state_dict *sd);
/** The tensors of sd that require grad, in order (n written to *n; caller frees the array). */
tg_tensor **tg_state_dict_parameters(const tg_state_dict *sd, int *n);

/* ---------------------------------------------------------------- layers
 * Plain structs of parameters (marked requires_grad). *_init returns 0 or negative;
 * *_free releases the tensors; *_state adds them to sd under "prefix.name" (PyTorch names). */
typedef struct tg_linear { tg_tensor *weight, *bias; } tg_linear;
int tg_linear_init(tg_linear *l, int64_t in, int64_t out, bool bias);
tg_tensor *tg_linear_forward(tg_linear *l, tg_tensor *x);
int tg_linear_state(tg_linear *l, const char *prefix, tg_state_dict *sd);
void tg_linear_free(tg_linear *l);

typedef struct tg_conv2d_layer {
  tg_tensor *weight, *bias;
  int stride[2], padding[2], dilation[2], groups;
} tg_conv2d_layer;
int tg_conv2d_init(tg_conv2d_layer *c, int64_t cin, int64_t cout, int kh, int kw, int stride,
                   int padding, int dilation, int groups, bool bias);
tg_tensor *tg_conv2d_forward(tg_conv2d_layer *c, tg_tensor *x);
int tg_conv2d_state(tg_conv2d_layer *c, const char *prefix, tg_state_dict *sd);
void tg_conv2d_free(tg_conv2d_layer *c);

typedef struct tg_batchnorm2d {
  tg_tensor *weight, *bias, *running_mean, *running_var, *num_batches_tracked;
  double momentum, eps;
  bool training;
} tg_batchnorm2d;
int tg_batchnorm2d_init(tg_batchnorm2d *b, int64_t channels);
tg_tensor *tg_batchnorm2d_forward(tg_batchnorm2d *b, tg_tensor *x);
int tg_batchnorm2d_state(tg_batchnorm2d *b, const char *prefix, tg_state_dict *sd);
void tg_batchnorm2d_free(tg_batchnorm2d *b);

typedef struct tg_layernorm_layer { tg_tensor *weight, *bias; int naxes; double eps; } tg_layernorm_layer;
int tg_layernorm_init(tg_layernorm_layer *l, const int64_t *shape, int naxes, double eps, bool affine);
tg_tensor *tg_layernorm_forward(tg_layernorm_layer *l, tg_tensor *x);
int tg_layernorm_state(tg_layernorm_layer *l, const char *prefix, tg_state_dict *sd);
void tg_layernorm_free(tg_layernorm_layer *l);

typedef struct tg_rmsnorm_layer { tg_tensor *weight; int naxes; double eps; } tg_rmsnorm_layer;
int tg_rmsnorm_init(tg_rmsnorm_layer *l, const int64_t *shape, int naxes, double eps);
tg_tensor *tg_rmsnorm_forward(tg_rmsnorm_layer *l, tg_tensor *x);
int tg_rmsnorm_state(tg_rmsnorm_layer *l, const char *prefix, tg_state_dict *sd);
void tg_rmsnorm_free(tg_rmsnorm_layer *l);

typedef struct tg_groupnorm_layer { tg_tensor *weight, *bias; int groups; double eps; } tg_groupnorm_layer;
int tg_groupnorm_init(tg_groupnorm_layer *l, int groups, int64_t channels, double eps, bool affine);
tg_tensor *tg_groupnorm_forward(tg_groupnorm_layer *l, tg_tensor *x);
int tg_groupnorm_state(tg_groupnorm_layer *l, const char *prefix, tg_state_dict *sd);
void tg_groupnorm_free(tg_groupnorm_layer *l);

typedef struct tg_embedding { tg_tensor *weight; int64_t num, dim; } tg_embedding;
int tg_embedding_init(tg_embedding *e, int64_t num, int64_t dim);
tg_tensor *tg_embedding_forward(tg_embedding *e, tg_tensor *indices); /**< (...) ints → (..., dim) */
int tg_embedding_state(tg_embedding *e, const char *prefix, tg_state_dict *sd);
void tg_embedding_free(tg_embedding *e);

/* ------------------------------------------------------------ optimizers
 * Per-step scalars (learning rate, step count, bias corrections) live in device buffers, so
 * a step's kernels stay the same from step to step and compile once. */
typedef struct tg_optimizer tg_optimizer;
tg_optimizer *tg_sgd(tg_tensor **params, int n, double lr, double momentum, double weight_decay, bool nesterov);
tg_optimizer *tg_adam(tg_tensor **params, int n, double lr, double beta1, double beta2, double eps);
tg_optimizer *tg_adamw(tg_tensor **params, int n, double lr, double beta1, double beta2, double eps, double weight_decay);
tg_optimizer *tg_lamb(tg_tensor **params, int n, double lr, double beta1, double beta2, double eps, double weight_decay);
/** Update every parameter from its gradient and realize, in one schedule, the new parameters,
 *  the optimizer state and the `also` tensors (e.g. the loss). Gradients are then cleared. */
int tg_optimizer_step(tg_optimizer *o, tg_tensor **also, int nalso);
int tg_optimizer_set_lr(tg_optimizer *o, double lr);
void tg_optimizer_zero_grad(tg_optimizer *o);
void tg_optimizer_free(tg_optimizer *o);

/* ------------------------------------------------------------ model files */

/** Write sd as safetensors (8-byte LE header length, JSON header, raw data). */
int tg_safetensors_save(const char *path, const tg_state_dict *sd);
/** Read every tensor of a safetensors file into new tensors added to out. */
int tg_safetensors_read(const char *path, tg_state_dict *out);
/** Load a file into the existing tensors of sd by name (same shape and dtype required).
 *  Everything is checked before anything is changed: on error no tensor is modified. */
int tg_safetensors_load(const char *path, tg_state_dict *sd);

/* ------------------------------------------------------------------ data */

/** Read an IDX file (gzipped or not) into a host tensor of its element type and shape. */
tg_tensor *tg_load_idx(const char *path);
/** MNIST-style dataset: images (N, 1, rows, cols) uint8 and labels (N) uint8, from
 *  dir/{train,t10k}-{images-idx3,labels-idx1}-ubyte[.gz]. dir NULL → $TG_MNIST_DIR or
 *  /usr/share/datasets/fashion-mnist. */
typedef struct tg_dataset { tg_tensor *images, *labels; int64_t n; } tg_dataset;
int tg_mnist_load(const char *dir, bool train, tg_dataset *out);
void tg_dataset_free(tg_dataset *d);
/** Batches of a dataset: x float32 (B, 1, rows, cols) scaled to [0, 1], y int32 (B).
 *  Shuffled each epoch from the seeded generator when shuffle is set. */
typedef struct tg_loader tg_loader;
tg_loader *tg_loader_new(const tg_dataset *d, int64_t batch, bool shuffle, bool drop_last);
/** 1 and a batch (new tensors in the current scope); 0 at the end of an epoch (the next call
 *  starts a new one); negative on error. */
int tg_loader_next(tg_loader *l, tg_tensor **x, tg_tensor **y);
void tg_loader_free(tg_loader *l);

/* ------------------------------------------------- transformer blocks (src/nn/transformer.c)
 * With tg_layernorm, tg_rmsnorm, tg_gelu (tanh form), tg_silu and
 * tg_scaled_dot_product_attention above: docs/nn.md. */

/** F.embedding: the rows of weight (num, dim) at integer indices (...) → (..., dim). Its
 *  gradient adds each row's gradient into weight (repeated indices add up). Out-of-range
 *  indices give zero rows. */
tg_tensor *tg_embedding_lookup(tg_tensor *weight, tg_tensor *indices);
/** GELU's exact form 0.5 x (1 + erf(x / sqrt 2)) (torch's default, approximate="none"). */
tg_tensor *tg_gelu_erf(tg_tensor *x);
/** Which elements a rotary embedding rotates together. */
typedef enum tg_rope_style {
  TG_ROPE_HALF,        /**< x[i] with x[i + D/2]: GPT-NeoX, Hugging Face LLaMA (rotate_half) */
  TG_ROPE_INTERLEAVED, /**< x[2i] with x[2i + 1]: Meta's LLaMA, GPT-J */
} tg_rope_style;
/** Rotary position embedding of x (..., T, D), D even, positions on axis -2: pair i of the
 *  element at position start_pos + t turns by (start_pos + t) * theta^(-2i/D) (theta 10000
 *  in LLaMA). */
tg_tensor *tg_rotary_embedding(tg_tensor *x, int64_t start_pos, double theta, tg_rope_style style);

/** A fixed-size key/value cache: k and v (B, H, max_len, D) buffers, len positions filled
 *  (the start position of the next append). */
typedef struct tg_kv_cache {
  tg_tensor *k, *v;
  int64_t len, max_len;
} tg_kv_cache;
int tg_kv_cache_init(tg_kv_cache *c, int64_t batch, int64_t heads, int64_t max_len, int64_t head_dim, tg_dtype dtype);
/** Write k and v (B, H, T, D) at positions [len, len + T) of the buffers (realized now) and
 *  advance len by T. An error if they do not fit. The position is a kernel argument: one
 *  compiled kernel serves every position. */
int tg_kv_cache_append(tg_kv_cache *c, tg_tensor *k, tg_tensor *v);
void tg_kv_cache_free(tg_kv_cache *c);
/** Attention of q with keys k and values v, all (B, H, T, D). cache NULL: plain
 *  tg_scaled_dot_product_attention(q, k, v, NULL, causal). With a cache at start position
 *  p = cache->len, q (positions p .. p+T-1) attends to the cached keys [0, p) followed by k
 *  (causal: query t sees keys up to p + t), and k and v are then appended. Gradients reach
 *  q, k and v of this call; the earlier positions are constants. */
tg_tensor *tg_attention(tg_tensor *q, tg_tensor *k, tg_tensor *v, tg_kv_cache *cache, bool causal);

/** Sample one token per row of logits (B, V) from the seeded generator (tg_manual_seed) into
 *  out[B]. temperature <= 0: greedy (the first maximum). Otherwise softmax(logits /
 *  temperature), cut to the top_k most likely (0: all; ties with the k-th stay), then to the
 *  smallest most-likely set whose probability reaches top_p (1: all; at least one token),
 *  renormalized: Hugging Face's temperature, TopK and TopP warpers in that order. */
int tg_sample(tg_tensor *logits, double temperature, int top_k, double top_p, int64_t *out);
/** The distribution tg_sample draws from: float32 (B, V), 0 for removed tokens (greedy:
 *  one-hot). Computed on the host. */
tg_tensor *tg_sample_probs(tg_tensor *logits, double temperature, int top_k, double top_p);

#ifdef __cplusplus
}
#endif
#endif /* TG_NN_H */
