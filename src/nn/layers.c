/* layers.c — Linear, Conv2d, BatchNorm2d, LayerNorm, RMSNorm, GroupNorm, Embedding.
 *
 * A layer is a plain struct of tensors the layer owns (one reference each, held outside any
 * scope, so a layer built inside a scope outlives it). Init follows PyTorch's defaults and
 * realizes every tensor, one by one: tensors with equal initial values (BatchNorm's weight and
 * running_var are both ones) then still get distinct buffers, so the kernels of a training step
 * see the same buffer layout from the first step on. Forward functions only build graphs; the
 * result belongs to the caller's current scope. See docs/optim.md. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "tensor/tensor.h"

#define MAX_LAYER_DIMS 64

/* ---------------------------------------------------------------- helpers */

/* Realize t, mark it a parameter if asked and take a reference owned by the layer (the scope
 * that created t drops its own). NULL in, NULL out. */
static tg_tensor *own(tg_tensor *t, bool param) {
  if (!t || tg_realize(t) < 0) return NULL;
  if (param && !tg_requires_grad(t, true)) return NULL;
  return tg_retain(t);
}

/* Release the tensors of a layer and NULL the pointers. */
static void release(tg_tensor **ts, int n) {
  for (int i = 0; i < n; i++) tg_free(ts[i]), ts[i] = NULL;
}

static tg_tensor *layer_error(const char *op) {
  tg_set_error(TG_ERR_ARG, "%s: NULL layer", op);
  return NULL;
}

/* PyTorch's bound 1/sqrt(fan_in) for Linear/Conv biases (and, via kaiming_uniform(a=sqrt(5)),
 * for their weights). */
static double fan_in_bound(double fan_in) { return 1.0 / sqrt(fan_in); }

/* Add "prefix.name" → tensor for each non-NULL tensor. All names are checked first, so on a
 * duplicate nothing is added. */
static int add_state(tg_state_dict *sd, const char *op, const char *prefix, const char *const *names,
                     tg_tensor *const *ts, int n) {
  if (!sd) return tg_set_error(TG_ERR_ARG, "%s: NULL state dict", op);
  if (!ts[0]) return tg_set_error(TG_ERR_ARG, "%s: layer is not initialized", op);
  char full[8][512];
  bool dot = prefix && prefix[0];
  for (int i = 0; i < n; i++) {
    int len = snprintf(full[i], sizeof full[i], "%s%s%s", dot ? prefix : "", dot ? "." : "", names[i]);
    if (len < 0 || (size_t)len >= sizeof full[i]) return tg_set_error(TG_ERR_ARG, "%s: prefix too long", op);
    for (int j = 0; ts[i] && j < sd->n; j++)
      if (!strcmp(sd->names[j], full[i])) return tg_set_error(TG_ERR_ARG, "%s: duplicate name \"%s\"", op, full[i]);
  }
  for (int i = 0; i < n; i++) {
    if (!ts[i]) continue;
    int rc = tg_state_dict_add(sd, full[i], ts[i]);
    if (rc < 0) return rc;
  }
  return 0;
}

/* x must have rank `ndim` (or at least -ndim when negative) and size `want` on `axis`. */
static bool check_input(const char *op, tg_tensor *x, int ndim, int axis, int64_t want) {
  int64_t shape[MAX_LAYER_DIMS];
  int nd = tg_shape(x, shape, MAX_LAYER_DIMS);
  bool rank_ok = ndim < 0 ? nd >= -ndim : nd == ndim;
  if (rank_ok && nd <= MAX_LAYER_DIMS && shape[axis < 0 ? nd + axis : axis] == want) return true;
  char buf[256];
  tg_set_error(TG_ERR_ARG, "%s: input of shape %s needs rank %s%d and size %lld on axis %d", op,
               tg_fmt_shape(buf, sizeof buf, shape, nd < 0 || nd > MAX_LAYER_DIMS ? 0 : nd), ndim < 0 ? ">= " : "",
               ndim < 0 ? -ndim : ndim, (long long)want, axis);
  return false;
}

/* ---------------------------------------------------------------- Linear */

int tg_linear_init(tg_linear *l, int64_t in, int64_t out, bool bias) {
  if (!l) return tg_set_error(TG_ERR_ARG, "linear_init: NULL layer");
  memset(l, 0, sizeof *l);
  if (in < 1 || out < 1)
    return tg_set_error(TG_ERR_ARG, "linear_init: invalid sizes in=%lld out=%lld", (long long)in, (long long)out);
  tg_scope *s = tg_scope_begin();
  int64_t wshape[2] = {out, in};
  l->weight = own(tg_kaiming_uniform(wshape, 2, sqrt(5.0), TG_FLOAT32), true);
  double b = fan_in_bound((double)in);
  if (bias) l->bias = own(tg_uniform(&out, 1, -b, b, TG_FLOAT32), true);
  tg_scope_end(s);
  if (l->weight && (l->bias || !bias)) return 0;
  tg_linear_free(l);
  return tg_error_status_or(TG_ERR_NOMEM);
}

/* x (..., in) → x @ weight^T + bias, (..., out). */
tg_tensor *tg_linear_forward(tg_linear *l, tg_tensor *x) {
  if (!l) return layer_error("linear_forward");
  if (!x) return null_arg("linear_forward");
  if (!l->weight) return tg_set_error(TG_ERR_ARG, "linear_forward: layer is not initialized"), NULL;
  if (!check_input("linear_forward", x, -1, -1, tg_dim(l->weight, 1))) return NULL;
  tg_scope *s = tg_scope_begin();
  tg_tensor *y = tg_matmul(x, tg_transpose(l->weight, 0, 1));
  if (l->bias) y = tg_add(y, l->bias);
  y = tg_keep(y);
  tg_scope_end(s);
  return y;
}

int tg_linear_state(tg_linear *l, const char *prefix, tg_state_dict *sd) {
  if (!l) return tg_set_error(TG_ERR_ARG, "linear_state: NULL layer");
  static const char *const names[] = {"weight", "bias"};
  tg_tensor *ts[] = {l->weight, l->bias};
  return add_state(sd, "linear_state", prefix, names, ts, 2);
}

void tg_linear_free(tg_linear *l) {
  if (l) release(&l->weight, 1), release(&l->bias, 1);
}

/* ---------------------------------------------------------------- Conv2d */

int tg_conv2d_init(tg_conv2d_layer *c, int64_t cin, int64_t cout, int kh, int kw, int stride,
                   int padding, int dilation, int groups, bool bias) {
  if (!c) return tg_set_error(TG_ERR_ARG, "conv2d_init: NULL layer");
  memset(c, 0, sizeof *c);
  if (cin < 1 || cout < 1 || kh < 1 || kw < 1 || stride < 1 || padding < 0 || dilation < 1 || groups < 1 ||
      cin % groups || cout % groups)
    return tg_set_error(TG_ERR_ARG,
                        "conv2d_init: invalid arguments cin=%lld cout=%lld kernel=%dx%d stride=%d padding=%d "
                        "dilation=%d groups=%d (channels must divide by groups)",
                        (long long)cin, (long long)cout, kh, kw, stride, padding, dilation, groups);
  for (int i = 0; i < 2; i++) c->stride[i] = stride, c->padding[i] = padding, c->dilation[i] = dilation;
  c->groups = groups;
  tg_scope *s = tg_scope_begin();
  int64_t wshape[4] = {cout, cin / groups, kh, kw};
  c->weight = own(tg_kaiming_uniform(wshape, 4, sqrt(5.0), TG_FLOAT32), true);
  double b = fan_in_bound((double)(cin / groups) * kh * kw); /* double: huge sizes cannot overflow */
  if (bias) c->bias = own(tg_uniform(&cout, 1, -b, b, TG_FLOAT32), true);
  tg_scope_end(s);
  if (c->weight && (c->bias || !bias)) return 0;
  tg_conv2d_free(c);
  return tg_error_status_or(TG_ERR_NOMEM);
}

tg_tensor *tg_conv2d_forward(tg_conv2d_layer *c, tg_tensor *x) {
  if (!c) return layer_error("conv2d_forward");
  if (!x) return null_arg("conv2d_forward");
  if (!c->weight) return tg_set_error(TG_ERR_ARG, "conv2d_forward: layer is not initialized"), NULL;
  return tg_conv2d(x, c->weight, c->bias, c->stride, c->padding, c->dilation, c->groups);
}

int tg_conv2d_state(tg_conv2d_layer *c, const char *prefix, tg_state_dict *sd) {
  if (!c) return tg_set_error(TG_ERR_ARG, "conv2d_state: NULL layer");
  static const char *const names[] = {"weight", "bias"};
  tg_tensor *ts[] = {c->weight, c->bias};
  return add_state(sd, "conv2d_state", prefix, names, ts, 2);
}

void tg_conv2d_free(tg_conv2d_layer *c) {
  if (c) release(&c->weight, 1), release(&c->bias, 1);
}

/* ---------------------------------------------------------------- BatchNorm2d */

int tg_batchnorm2d_init(tg_batchnorm2d *b, int64_t channels) {
  if (!b) return tg_set_error(TG_ERR_ARG, "batchnorm2d_init: NULL layer");
  memset(b, 0, sizeof *b);
  if (channels < 1) return tg_set_error(TG_ERR_ARG, "batchnorm2d_init: invalid channel count %lld", (long long)channels);
  b->momentum = 0.1, b->eps = 1e-5, b->training = true;
  tg_scope *s = tg_scope_begin();
  b->weight = own(tg_ones(&channels, 1, TG_FLOAT32), true);
  b->bias = own(tg_zeros(&channels, 1, TG_FLOAT32), true);
  b->running_mean = own(tg_zeros(&channels, 1, TG_FLOAT32), false);
  b->running_var = own(tg_ones(&channels, 1, TG_FLOAT32), false);
  b->num_batches_tracked = own(tg_zeros(NULL, 0, TG_INT64), false);
  tg_scope_end(s);
  if (b->weight && b->bias && b->running_mean && b->running_var && b->num_batches_tracked) return 0;
  tg_batchnorm2d_free(b);
  return tg_error_status_or(TG_ERR_NOMEM);
}

/* In training mode the running statistics and num_batches_tracked are updated lazily: they
 * realize with whatever the caller realizes them with (e.g. tg_optimizer_step's `also`). */
tg_tensor *tg_batchnorm2d_forward(tg_batchnorm2d *b, tg_tensor *x) {
  if (!b) return layer_error("batchnorm2d_forward");
  if (!x) return null_arg("batchnorm2d_forward");
  if (!b->weight) return tg_set_error(TG_ERR_ARG, "batchnorm2d_forward: layer is not initialized"), NULL;
  if (!check_input("batchnorm2d_forward", x, 4, 1, tg_dim(b->weight, 0))) return NULL;
  tg_scope *s = tg_scope_begin();
  tg_tensor *y = tg_batchnorm(x, b->weight, b->bias, b->running_mean, b->running_var, b->training, b->momentum, b->eps);
  if (y && b->training && tg_assign(b->num_batches_tracked, tg_add_s(b->num_batches_tracked, 1)) < 0) y = NULL;
  y = tg_keep(y);
  tg_scope_end(s);
  return y;
}

int tg_batchnorm2d_state(tg_batchnorm2d *b, const char *prefix, tg_state_dict *sd) {
  if (!b) return tg_set_error(TG_ERR_ARG, "batchnorm2d_state: NULL layer");
  static const char *const names[] = {"weight", "bias", "running_mean", "running_var", "num_batches_tracked"};
  tg_tensor *ts[] = {b->weight, b->bias, b->running_mean, b->running_var, b->num_batches_tracked};
  return add_state(sd, "batchnorm2d_state", prefix, names, ts, 5);
}

void tg_batchnorm2d_free(tg_batchnorm2d *b) {
  if (!b) return;
  tg_tensor **ts[] = {&b->weight, &b->bias, &b->running_mean, &b->running_var, &b->num_batches_tracked};
  for (int i = 0; i < 5; i++) release(ts[i], 1);
}

/* ---------------------------------------------------------------- LayerNorm, RMSNorm */

static bool check_norm_shape(const char *op, const int64_t *shape, int naxes) {
  bool ok = shape && naxes >= 1 && naxes <= MAX_LAYER_DIMS;
  for (int i = 0; ok && i < naxes; i++) ok = shape[i] >= 1;
  if (!ok) tg_set_error(TG_ERR_ARG, "%s: invalid normalized shape (naxes=%d, sizes must be >= 1)", op, naxes);
  return ok;
}

int tg_layernorm_init(tg_layernorm_layer *l, const int64_t *shape, int naxes, double eps, bool affine) {
  if (!l) return tg_set_error(TG_ERR_ARG, "layernorm_init: NULL layer");
  memset(l, 0, sizeof *l);
  if (!check_norm_shape("layernorm_init", shape, naxes)) return TG_ERR_ARG;
  if (!(eps >= 0)) return tg_set_error(TG_ERR_ARG, "layernorm_init: eps must be >= 0 (got %g)", eps);
  l->naxes = naxes, l->eps = eps;
  if (!affine) return 0;
  tg_scope *s = tg_scope_begin();
  l->weight = own(tg_ones(shape, naxes, TG_FLOAT32), true);
  l->bias = own(tg_zeros(shape, naxes, TG_FLOAT32), true);
  tg_scope_end(s);
  if (l->weight && l->bias) return 0;
  tg_layernorm_free(l);
  return tg_error_status_or(TG_ERR_NOMEM);
}

tg_tensor *tg_layernorm_forward(tg_layernorm_layer *l, tg_tensor *x) {
  if (!l) return layer_error("layernorm_forward");
  if (!x) return null_arg("layernorm_forward");
  if (l->naxes < 1) return tg_set_error(TG_ERR_ARG, "layernorm_forward: layer is not initialized"), NULL;
  return tg_layernorm(x, l->naxes, l->weight, l->bias, l->eps);
}

int tg_layernorm_state(tg_layernorm_layer *l, const char *prefix, tg_state_dict *sd) {
  if (!l) return tg_set_error(TG_ERR_ARG, "layernorm_state: NULL layer");
  if (!l->weight) return sd ? 0 : tg_set_error(TG_ERR_ARG, "layernorm_state: NULL state dict"); /* no affine: no state */
  static const char *const names[] = {"weight", "bias"};
  tg_tensor *ts[] = {l->weight, l->bias};
  return add_state(sd, "layernorm_state", prefix, names, ts, 2);
}

void tg_layernorm_free(tg_layernorm_layer *l) {
  if (l) release(&l->weight, 1), release(&l->bias, 1);
}

int tg_rmsnorm_init(tg_rmsnorm_layer *l, const int64_t *shape, int naxes, double eps) {
  if (!l) return tg_set_error(TG_ERR_ARG, "rmsnorm_init: NULL layer");
  memset(l, 0, sizeof *l);
  if (!check_norm_shape("rmsnorm_init", shape, naxes)) return TG_ERR_ARG;
  if (!(eps >= 0)) return tg_set_error(TG_ERR_ARG, "rmsnorm_init: eps must be >= 0 (got %g)", eps);
  l->naxes = naxes, l->eps = eps;
  tg_scope *s = tg_scope_begin();
  l->weight = own(tg_ones(shape, naxes, TG_FLOAT32), true);
  tg_scope_end(s);
  return l->weight ? 0 : tg_error_status_or(TG_ERR_NOMEM);
}

tg_tensor *tg_rmsnorm_forward(tg_rmsnorm_layer *l, tg_tensor *x) {
  if (!l) return layer_error("rmsnorm_forward");
  if (!x) return null_arg("rmsnorm_forward");
  if (!l->weight) return tg_set_error(TG_ERR_ARG, "rmsnorm_forward: layer is not initialized"), NULL;
  return tg_rmsnorm(x, l->naxes, l->weight, l->eps);
}

int tg_rmsnorm_state(tg_rmsnorm_layer *l, const char *prefix, tg_state_dict *sd) {
  if (!l) return tg_set_error(TG_ERR_ARG, "rmsnorm_state: NULL layer");
  static const char *const names[] = {"weight"};
  return add_state(sd, "rmsnorm_state", prefix, names, &l->weight, 1);
}

void tg_rmsnorm_free(tg_rmsnorm_layer *l) {
  if (l) release(&l->weight, 1);
}

/* ---------------------------------------------------------------- GroupNorm */

int tg_groupnorm_init(tg_groupnorm_layer *l, int groups, int64_t channels, double eps, bool affine) {
  if (!l) return tg_set_error(TG_ERR_ARG, "groupnorm_init: NULL layer");
  memset(l, 0, sizeof *l);
  if (groups < 1 || channels < 1 || channels % groups)
    return tg_set_error(TG_ERR_ARG, "groupnorm_init: %lld channels cannot split into %d groups", (long long)channels, groups);
  if (!(eps >= 0)) return tg_set_error(TG_ERR_ARG, "groupnorm_init: eps must be >= 0 (got %g)", eps);
  l->groups = groups, l->eps = eps;
  if (!affine) return 0;
  tg_scope *s = tg_scope_begin();
  l->weight = own(tg_ones(&channels, 1, TG_FLOAT32), true);
  l->bias = own(tg_zeros(&channels, 1, TG_FLOAT32), true);
  tg_scope_end(s);
  if (l->weight && l->bias) return 0;
  tg_groupnorm_free(l);
  return tg_error_status_or(TG_ERR_NOMEM);
}

tg_tensor *tg_groupnorm_forward(tg_groupnorm_layer *l, tg_tensor *x) {
  if (!l) return layer_error("groupnorm_forward");
  if (!x) return null_arg("groupnorm_forward");
  if (l->groups < 1) return tg_set_error(TG_ERR_ARG, "groupnorm_forward: layer is not initialized"), NULL;
  return tg_groupnorm(x, l->groups, l->weight, l->bias, l->eps);
}

int tg_groupnorm_state(tg_groupnorm_layer *l, const char *prefix, tg_state_dict *sd) {
  if (!l) return tg_set_error(TG_ERR_ARG, "groupnorm_state: NULL layer");
  if (!l->weight) return sd ? 0 : tg_set_error(TG_ERR_ARG, "groupnorm_state: NULL state dict");
  static const char *const names[] = {"weight", "bias"};
  tg_tensor *ts[] = {l->weight, l->bias};
  return add_state(sd, "groupnorm_state", prefix, names, ts, 2);
}

void tg_groupnorm_free(tg_groupnorm_layer *l) {
  if (l) release(&l->weight, 1), release(&l->bias, 1);
}

/* ---------------------------------------------------------------- Embedding */

int tg_embedding_init(tg_embedding *e, int64_t num, int64_t dim) {
  if (!e) return tg_set_error(TG_ERR_ARG, "embedding_init: NULL layer");
  memset(e, 0, sizeof *e);
  if (num < 1 || dim < 1)
    return tg_set_error(TG_ERR_ARG, "embedding_init: invalid sizes num=%lld dim=%lld", (long long)num, (long long)dim);
  e->num = num, e->dim = dim;
  tg_scope *s = tg_scope_begin();
  int64_t shape[2] = {num, dim};
  e->weight = own(tg_normal(shape, 2, 0.0, 1.0, TG_FLOAT32), true);
  tg_scope_end(s);
  return e->weight ? 0 : tg_error_status_or(TG_ERR_NOMEM);
}

/* Row lookup by tg_index_select: a compare-and-sum over the vocabulary that fuses into one
 * kernel (O(num * n * dim) work, but no (n, num) one-hot is materialized); its gradient is the
 * matching scatter-add. Out-of-range indices give zero rows (indices are not checked on the
 * host, which would force a realize). */
tg_tensor *tg_embedding_forward(tg_embedding *e, tg_tensor *indices) {
  if (!e) return layer_error("embedding_forward");
  if (!indices) return null_arg("embedding_forward");
  if (!e->weight) return tg_set_error(TG_ERR_ARG, "embedding_forward: layer is not initialized"), NULL;
  tg_dtype dt = tg_get_dtype(indices);
  if (tg_dtype_is_float(dt) || dt == TG_BOOL)
    return tg_set_error(TG_ERR_ARG, "embedding_forward: indices must be integers, got %s", tg_dtype_name(dt)), NULL;
  return tg_index_select(e->weight, 0, indices);
}

int tg_embedding_state(tg_embedding *e, const char *prefix, tg_state_dict *sd) {
  if (!e) return tg_set_error(TG_ERR_ARG, "embedding_state: NULL layer");
  static const char *const names[] = {"weight"};
  return add_state(sd, "embedding_state", prefix, names, &e->weight, 1);
}

void tg_embedding_free(tg_embedding *e) {
  if (e) release(&e->weight, 1);
}
