/* functional.c — activations, normalizations, losses and attention, composed from the
 * public tensor API (elementwise ops, reductions, views) so that autograd differentiates them
 * with the derivative rules of the primitive ops. Every function validates its arguments up
 * front and names the operation and the shapes in its error message. */
#include <math.h>
#include <stdio.h>

#include "nn/functional.h"
#include "tensor/shape.h"

/* ---------------------------------------------------------------- shared helpers */

bool nn_need_float(const char *op, const char *what, tg_tensor *t) {
  if (tg_dtype_is_float(tg_get_dtype(t))) return true;
  tensor_error("%s: %s must be a float tensor, got %s", op, what, tg_dtype_name(tg_get_dtype(t)));
  return false;
}

bool nn_shape_is(tg_tensor *t, const int64_t *shape, int nd) {
  if (tg_ndim(t) != nd) return false;
  for (int i = 0; i < nd; i++)
    if (uop_shape(t->u)[i] != shape[i]) return false;
  return true;
}

bool nn_check_channel_param(const char *op, const char *what, tg_tensor *p, int64_t channels) {
  if (!p) return true;
  char b[256];
  if (!nn_shape_is(p, &channels, 1)) {
    tensor_error("%s: %s has shape %s, expected (%lld,)", op, what, NN_SHAPE(p, b), (long long)channels);
    return false;
  }
  return nn_need_float(op, what, p);
}

tg_tensor *nn_channel_view(tg_tensor *p, int nd) {
  int64_t s[TG_MAX_DIMS];
  for (int i = 0; i < nd; i++) s[i] = i == 1 ? tg_numel(p) : 1;
  return tg_reshape(p, s, nd);
}

/* Scalar of x's dtype (a weak operand that broadcasts). */
static tg_tensor *scalar_like(tg_tensor *x, double v) { return tg_scalar(v, tg_get_dtype(x)); }

/* log(1 + e^z) without overflow: z⁺ + log(1 + e^-|z|). The positive part is a where (not a
 * max) so the derivative at z = 0 comes out as 1/2; log(1 + ·) is taken in float64 so that
 * small results keep their relative precision. */
static tg_tensor *log1p_exp(tg_tensor *z) {
  tg_tensor *pos = tg_gt(z, scalar_like(z, 0));
  tg_tensor *zero = tg_zeros_like(z);
  tg_tensor *e = tg_exp(tg_where(pos, tg_neg(z), z)); /* e^-|z| in (0, 1] */
  tg_tensor *l = tg_cast(tg_log(tg_add_s(tg_cast(e, TG_FLOAT64), 1)), tg_get_dtype(z));
  return tg_add(tg_where(pos, z, zero), l);
}

/* Finish a function body: move r out of scope s (r may be NULL) and close s. */
static tg_tensor *finish(tg_scope *s, tg_tensor *r) {
  r = tg_keep(r);
  tg_scope_end(s);
  return r;
}

/* ---------------------------------------------------------------- activations */

tg_tensor *tg_leaky_relu(tg_tensor *x, double slope) {
  if (!x) return null_arg("leaky_relu");
  if (!nn_need_float("leaky_relu", "x", x)) return NULL;
  tg_scope *s = tg_scope_begin();
  return finish(s, tg_where(tg_gt(x, scalar_like(x, 0)), x, tg_mul_s(x, slope))); /* d/dx at 0: slope */
}

tg_tensor *tg_gelu(tg_tensor *x) {
  if (!x) return null_arg("gelu");
  if (!nn_need_float("gelu", "x", x)) return NULL;
  /* 0.5 x (1 + tanh(u)) = x sigmoid(2u), u = sqrt(2/pi) (x + 0.044715 x^3) */
  tg_scope *s = tg_scope_begin();
  const double c = sqrt(2.0 / M_PI);
  tg_tensor *u = tg_add(x, tg_mul_s(tg_mul(tg_square(x), x), 0.044715));
  return finish(s, tg_mul(x, tg_sigmoid(tg_mul_s(u, 2 * c))));
}

tg_tensor *tg_silu(tg_tensor *x) {
  if (!x) return null_arg("silu");
  if (!nn_need_float("silu", "x", x)) return NULL;
  tg_scope *s = tg_scope_begin();
  return finish(s, tg_mul(x, tg_sigmoid(x)));
}

tg_tensor *tg_softplus(tg_tensor *x, double beta) {
  if (!x) return null_arg("softplus");
  if (!nn_need_float("softplus", "x", x)) return NULL;
  if (beta == 0 || !isfinite(beta)) return tensor_error("softplus: beta must be finite and nonzero, got %g", beta);
  tg_scope *s = tg_scope_begin();
  return finish(s, tg_div_s(log1p_exp(tg_mul_s(x, beta)), beta));
}

/* where(x > 0, x, neg(x)) where neg only sees x <= 0 (a large x must not overflow in the branch
 * not taken: its gradient would be 0 · inf). The gradient at 0 is neg's, like PyTorch's elu. */
static tg_tensor *positive_or(tg_tensor *x, tg_tensor *(*neg)(tg_tensor *, double), double a) {
  tg_tensor *pos = tg_gt(x, scalar_like(x, 0)), *zero = tg_zeros_like(x);
  return tg_where(pos, x, neg(tg_where(pos, zero, x), a));
}

static tg_tensor *elu_neg(tg_tensor *x, double alpha) { return tg_mul_s(tg_expm1(x), alpha); }
static tg_tensor *celu_neg(tg_tensor *x, double alpha) { return tg_mul_s(tg_expm1(tg_div_s(x, alpha)), alpha); }

tg_tensor *tg_elu(tg_tensor *x, double alpha) {
  if (!x) return null_arg("elu");
  if (!nn_need_float("elu", "x", x)) return NULL;
  tg_scope *s = tg_scope_begin();
  return finish(s, positive_or(x, elu_neg, alpha));
}

tg_tensor *tg_celu(tg_tensor *x, double alpha) {
  if (!x) return null_arg("celu");
  if (!nn_need_float("celu", "x", x)) return NULL;
  if (alpha == 0 || !isfinite(alpha)) return tensor_error("celu: alpha must be finite and nonzero, got %g", alpha);
  tg_scope *s = tg_scope_begin();
  return finish(s, positive_or(x, celu_neg, alpha));
}

tg_tensor *tg_selu(tg_tensor *x) {
  if (!x) return null_arg("selu");
  if (!nn_need_float("selu", "x", x)) return NULL;
  const double alpha = 1.6732632423543772848170429916717, scale = 1.0507009873554804934193349852946;
  tg_scope *s = tg_scope_begin();
  return finish(s, tg_mul_s(positive_or(x, elu_neg, alpha), scale));
}

/* lo where x <= lo, hi where x >= hi, x between (NaN passes): the gradient is 1 strictly inside
 * and 0 at the bounds, like PyTorch's hardtanh. */
static tg_tensor *hardtanh(tg_tensor *x, double lo, double hi) {
  tg_tensor *l = scalar_like(x, lo), *h = scalar_like(x, hi);
  return tg_where(tg_le(x, l), l, tg_where(tg_ge(x, h), h, x));
}

tg_tensor *tg_hardtanh(tg_tensor *x, double min_val, double max_val) {
  if (!x) return null_arg("hardtanh");
  if (!nn_need_float("hardtanh", "x", x)) return NULL;
  if (!(min_val <= max_val)) return tensor_error("hardtanh: min_val %g must not be above max_val %g", min_val, max_val);
  tg_scope *s = tg_scope_begin();
  return finish(s, hardtanh(x, min_val, max_val));
}

tg_tensor *tg_relu6(tg_tensor *x) {
  if (!x) return null_arg("relu6");
  if (!nn_need_float("relu6", "x", x)) return NULL;
  tg_scope *s = tg_scope_begin();
  return finish(s, hardtanh(x, 0, 6));
}

tg_tensor *tg_hardsigmoid(tg_tensor *x) {
  if (!x) return null_arg("hardsigmoid");
  if (!nn_need_float("hardsigmoid", "x", x)) return NULL;
  tg_scope *s = tg_scope_begin();
  return finish(s, tg_div_s(hardtanh(tg_add_s(x, 3), 0, 6), 6));
}

/* 0 below -3, x (x + 3) / 6 on [-3, 3), x from 3 on: PyTorch's gradient at the kinks (-1/2 at
 * -3, from the middle branch; 1 at 3) */
tg_tensor *tg_hardswish(tg_tensor *x) {
  if (!x) return null_arg("hardswish");
  if (!nn_need_float("hardswish", "x", x)) return NULL;
  tg_scope *s = tg_scope_begin();
  tg_tensor *mid = tg_div_s(tg_mul(x, tg_add_s(x, 3)), 6);
  return finish(s, tg_where(tg_lt(x, scalar_like(x, -3)), tg_zeros_like(x), tg_where(tg_lt(x, scalar_like(x, 3)), mid, x)));
}

tg_tensor *tg_mish(tg_tensor *x) {
  if (!x) return null_arg("mish");
  if (!nn_need_float("mish", "x", x)) return NULL;
  tg_scope *s = tg_scope_begin();
  return finish(s, tg_mul(x, tg_tanh(log1p_exp(x))));
}

tg_tensor *tg_softsign(tg_tensor *x) {
  if (!x) return null_arg("softsign");
  if (!nn_need_float("softsign", "x", x)) return NULL;
  tg_scope *s = tg_scope_begin();
  return finish(s, tg_div(x, tg_add_s(tg_abs(x), 1)));
}

tg_tensor *tg_logsigmoid(tg_tensor *x) {
  if (!x) return null_arg("logsigmoid");
  if (!nn_need_float("logsigmoid", "x", x)) return NULL;
  tg_scope *s = tg_scope_begin();
  return finish(s, tg_neg(log1p_exp(tg_neg(x)))); /* log σ(x) = -log(1 + e^-x) */
}

tg_tensor *tg_quick_gelu(tg_tensor *x) {
  if (!x) return null_arg("quick_gelu");
  if (!nn_need_float("quick_gelu", "x", x)) return NULL;
  tg_scope *s = tg_scope_begin();
  return finish(s, tg_mul(x, tg_sigmoid(tg_mul_s(x, 1.702))));
}

tg_tensor *tg_softmin(tg_tensor *x, int axis) {
  if (!x) return null_arg("softmin");
  if (!normalize_axis("softmin", &axis, tg_ndim(x), AXIS_OF_SCALAR)) return NULL;
  if (tg_get_dtype(x) == TG_BOOL) return tensor_error("softmin: not defined for dtype bool");
  tg_scope *s = tg_scope_begin();
  return finish(s, tg_softmax(tg_neg(x), axis));
}

/* (sum |x|^p)^(1/p) along axis (keepdim); max |x| for p = inf. The root and the square root
 * see 1 where the sum is 0, so a zero vector has gradient 0 (PyTorch) instead of 0 · inf. */
static tg_tensor *pnorm(tg_tensor *x, double p, int axis) {
  tg_tensor *a = tg_abs(x);
  if (isinf(p)) return tg_max(a, &axis, 1, true);
  tg_tensor *sum = tg_sum(p == 1 ? a : p == 2 ? tg_square(x) : tg_pow_s(a, p), &axis, 1, true);
  if (p == 1) return sum;
  tg_tensor *zero = tg_eq(sum, tg_zeros_like(sum)), *safe = tg_where(zero, tg_ones_like(sum), sum);
  tg_tensor *root = p == 2 ? tg_sqrt(safe) : tg_pow_s(safe, 1 / p);
  return tg_where(zero, tg_zeros_like(sum), root);
}

tg_tensor *tg_normalize(tg_tensor *x, double p, int axis, double eps) {
  if (!x) return null_arg("normalize");
  if (!nn_need_float("normalize", "x", x)) return NULL;
  if (!(p > 0)) return tensor_error("normalize: p must be > 0, got %g", p);
  if (!(eps >= 0) || isinf(eps)) return tensor_error("normalize: eps must be finite and >= 0, got %g", eps);
  int a = axis;
  if (!normalize_axis("normalize", &a, tg_ndim(x), AXIS_OF_SCALAR)) return NULL;
  tg_scope *s = tg_scope_begin();
  tg_tensor *n = pnorm(x, p, a), *e = scalar_like(x, eps);
  return finish(s, tg_div(x, tg_where(tg_lt(n, e), e, n))); /* clamp_min(eps): n's gradient from eps on */
}

/* ---------------------------------------------------------------- normalization */

/* (x - mean) / sqrt(var + eps) over `axes` (biased variance); mean/var out if asked. */
static tg_tensor *standardize(tg_tensor *x, const int *axes, int naxes, double eps, tg_tensor **mean_out,
                              tg_tensor **var_out) {
  tg_tensor *mean = tg_mean(x, axes, naxes, true);
  tg_tensor *xc = tg_sub(x, mean);
  tg_tensor *var = tg_mean(tg_square(xc), axes, naxes, true);
  if (mean_out) *mean_out = mean;
  if (var_out) *var_out = var;
  return tg_mul(xc, tg_rsqrt(tg_add_s(var, eps)));
}

static tg_tensor *affine(tg_tensor *y, tg_tensor *weight, tg_tensor *bias) {
  if (weight) y = tg_mul(y, weight);
  if (bias) y = tg_add(y, bias);
  return y;
}

static bool check_eps(const char *op, double eps) {
  if (eps >= 0 && isfinite(eps)) return true;
  tensor_error("%s: eps must be finite and >= 0, got %g", op, eps);
  return false;
}

/* weight/bias of a norm over the last naxes axes must have exactly those sizes. */
static bool check_trailing_param(const char *op, const char *what, tg_tensor *x, int naxes, tg_tensor *p) {
  if (!p) return true;
  int nd = tg_ndim(x);
  char a[256], b[256];
  if (!nn_shape_is(p, uop_shape(x->u) + nd - naxes, naxes)) {
    tensor_error("%s: %s has shape %s, expected the last %d axes of x %s", op, what, NN_SHAPE(p, a), naxes,
                 NN_SHAPE(x, b));
    return false;
  }
  return nn_need_float(op, what, p);
}

static bool check_last_axes(const char *op, tg_tensor *x, int naxes) {
  char b[256];
  if (naxes >= 1 && naxes <= tg_ndim(x)) return true;
  tensor_error("%s: cannot normalize over the last %d axes of x %s", op, naxes, NN_SHAPE(x, b));
  return false;
}

static void last_axes(int nd, int naxes, int *axes) {
  for (int i = 0; i < naxes; i++) axes[i] = nd - naxes + i;
}

tg_tensor *tg_layernorm(tg_tensor *x, int naxes, tg_tensor *weight, tg_tensor *bias, double eps) {
  if (!x) return null_arg("layernorm");
  if (!nn_need_float("layernorm", "x", x) || !check_last_axes("layernorm", x, naxes) ||
      !check_trailing_param("layernorm", "weight", x, naxes, weight) ||
      !check_trailing_param("layernorm", "bias", x, naxes, bias) || !check_eps("layernorm", eps))
    return NULL;
  int axes[TG_MAX_DIMS];
  last_axes(tg_ndim(x), naxes, axes);
  tg_scope *s = tg_scope_begin();
  return finish(s, affine(standardize(x, axes, naxes, eps, NULL, NULL), weight, bias));
}

tg_tensor *tg_rmsnorm(tg_tensor *x, int naxes, tg_tensor *weight, double eps) {
  if (!x) return null_arg("rmsnorm");
  if (!nn_need_float("rmsnorm", "x", x) || !check_last_axes("rmsnorm", x, naxes) ||
      !check_trailing_param("rmsnorm", "weight", x, naxes, weight) || !check_eps("rmsnorm", eps))
    return NULL;
  int axes[TG_MAX_DIMS];
  last_axes(tg_ndim(x), naxes, axes);
  tg_scope *s = tg_scope_begin();
  tg_tensor *ms = tg_mean(tg_square(x), axes, naxes, true);
  return finish(s, affine(tg_mul(x, tg_rsqrt(tg_add_s(ms, eps))), weight, NULL));
}

tg_tensor *tg_groupnorm(tg_tensor *x, int groups, tg_tensor *weight, tg_tensor *bias, double eps) {
  if (!x) return null_arg("groupnorm");
  char b[256];
  if (!nn_need_float("groupnorm", "x", x)) return NULL;
  int nd = tg_ndim(x);
  if (nd < 2) return tensor_error("groupnorm: x %s must be (N, C, ...)", NN_SHAPE(x, b));
  int64_t c = uop_shape(x->u)[1];
  if (groups < 1 || c % groups)
    return tensor_error("groupnorm: %d groups do not divide the %lld channels of x %s", groups, (long long)c,
                        NN_SHAPE(x, b));
  if (!nn_check_channel_param("groupnorm", "weight", weight, c) ||
      !nn_check_channel_param("groupnorm", "bias", bias, c) || !check_eps("groupnorm", eps))
    return NULL;
  tg_scope *s = tg_scope_begin();
  int64_t grouped[3] = {uop_shape(x->u)[0], groups, -1};
  int last = 2;
  tg_tensor *y = standardize(tg_reshape(x, grouped, 3), &last, 1, eps, NULL, NULL);
  y = tg_reshape(y, uop_shape(x->u), nd);
  tg_tensor *w = weight ? nn_channel_view(weight, nd) : NULL, *bb = bias ? nn_channel_view(bias, nd) : NULL;
  return finish(s, affine(y, w, bb));
}

/* running = (1 - momentum) running + momentum stat, assigned lazily; no gradient flows into it. */
static int update_running(tg_tensor *running, tg_tensor *stat, double momentum) {
  tg_tensor *st = tg_cast(tg_detach(stat), tg_get_dtype(running));
  tg_tensor *v = tg_add(tg_mul_s(running, 1 - momentum), tg_mul_s(st, momentum));
  return v ? tg_assign(running, v) : TG_ERR_ARG;
}

static bool check_batchnorm(tg_tensor *x, tg_tensor *weight, tg_tensor *bias, tg_tensor *rm, tg_tensor *rv,
                            bool training, double momentum, double eps) {
  char b[256];
  const char *op = "batchnorm";
  if (!nn_need_float(op, "x", x)) return false;
  if (tg_ndim(x) < 2) return tensor_error("batchnorm: x %s must be (N, C, ...)", NN_SHAPE(x, b)), false;
  int64_t c = uop_shape(x->u)[1];
  if (!nn_check_channel_param(op, "weight", weight, c) || !nn_check_channel_param(op, "bias", bias, c) ||
      !nn_check_channel_param(op, "running_mean", rm, c) || !nn_check_channel_param(op, "running_var", rv, c) ||
      !check_eps(op, eps))
    return false;
  if (!rm != !rv) return tensor_error("batchnorm: running_mean and running_var must both be given or both NULL"), false;
  if (!training && !rm) return tensor_error("batchnorm: evaluation mode needs running_mean and running_var"), false;
  if (training && tg_numel(x) / (c ? c : 1) <= 1)
    return tensor_error("batchnorm: training needs more than one value per channel, x is %s", NN_SHAPE(x, b)), false;
  if (!(momentum >= 0 && momentum <= 1))
    return tensor_error("batchnorm: momentum must be in [0, 1], got %g", momentum), false;
  return true;
}

tg_tensor *tg_batchnorm(tg_tensor *x, tg_tensor *weight, tg_tensor *bias, tg_tensor *running_mean,
                        tg_tensor *running_var, bool training, double momentum, double eps) {
  if (!x) return null_arg("batchnorm");
  if (!check_batchnorm(x, weight, bias, running_mean, running_var, training, momentum, eps)) return NULL;
  int nd = tg_ndim(x), axes[TG_MAX_DIMS], naxes = 0;
  for (int i = 0; i < nd; i++)
    if (i != 1) axes[naxes++] = i;
  tg_scope *s = tg_scope_begin();
  tg_tensor *y;
  if (training) {
    tg_tensor *mean, *var;
    y = standardize(x, axes, naxes, eps, &mean, &var);
    if (running_mean && y) {
      double n = (double)(tg_numel(x) / uop_shape(x->u)[1]);
      tg_tensor *unbiased = tg_mul_s(var, n / (n - 1));
      int64_t c = uop_shape(x->u)[1];
      if (update_running(running_mean, tg_reshape(mean, &c, 1), momentum) < 0 ||
          update_running(running_var, tg_reshape(unbiased, &c, 1), momentum) < 0)
        y = NULL;
    }
  } else {
    tg_tensor *m = tg_cast(nn_channel_view(running_mean, nd), tg_get_dtype(x));
    tg_tensor *v = tg_cast(nn_channel_view(running_var, nd), tg_get_dtype(x));
    y = tg_mul(tg_sub(x, m), tg_rsqrt(tg_add_s(v, eps)));
  }
  tg_tensor *w = weight ? nn_channel_view(weight, nd) : NULL, *bb = bias ? nn_channel_view(bias, nd) : NULL;
  return finish(s, affine(y, w, bb));
}

/* ---------------------------------------------------------------- losses
 * Each loss builds its per-element (per-sample for the class losses) values and reduces them
 * as asked: TG_REDUCTION_MEAN (what the short forms do), SUM, or NONE (the values themselves).
 * The class losses' mean is weighted: sum / (sum of the picked class weights), like PyTorch. */

static bool check_same_shape(const char *op, const char *an, tg_tensor *a, const char *bn, tg_tensor *b) {
  char sa[256], sb[256];
  if (nn_shape_is(b, uop_shape(a->u), tg_ndim(a))) return true;
  tensor_error("%s: %s %s and %s %s must have the same shape", op, an, NN_SHAPE(a, sa), bn, NN_SHAPE(b, sb));
  return false;
}

static bool check_logits(const char *op, const char *what, tg_tensor *logits) {
  char b[256];
  if (!nn_need_float(op, what, logits)) return false;
  if (tg_ndim(logits) == 2) return true;
  tensor_error("%s: %s must be (N, C), got %s", op, what, NN_SHAPE(logits, b));
  return false;
}

static bool check_labels(const char *op, tg_tensor *logits, tg_tensor *labels) {
  char a[256], b[256];
  if (tg_dtype_is_float(tg_get_dtype(labels)) || tg_get_dtype(labels) == TG_BOOL) {
    tensor_error("%s: labels must be an integer tensor, got %s", op, tg_dtype_name(tg_get_dtype(labels)));
    return false;
  }
  if (tg_ndim(labels) == 1 && uop_shape(labels->u)[0] == uop_shape(logits->u)[0]) return true;
  tensor_error("%s: labels %s must be (N,) for input %s", op, NN_SHAPE(labels, a), NN_SHAPE(logits, b));
  return false;
}

static bool check_smoothing(const char *op, double ls) {
  if (ls >= 0 && ls <= 1) return true;
  tensor_error("%s: label_smoothing must be in [0, 1], got %g", op, ls);
  return false;
}

static bool check_reduction(const char *op, tg_reduction r) {
  if (r == TG_REDUCTION_MEAN || r == TG_REDUCTION_SUM || r == TG_REDUCTION_NONE) return true;
  tensor_error("%s: invalid reduction %d", op, (int)r);
  return false;
}

/* Do shapes a and b broadcast (numpy rules)? */
static bool broadcastable(tg_tensor *a, const int64_t *shape, int nd) {
  int na = tg_ndim(a);
  if (na > nd) return false;
  for (int i = 0; i < na; i++) {
    int64_t x = uop_shape(a->u)[na - 1 - i], y = shape[nd - 1 - i];
    if (x != y && x != 1) return false;
  }
  return true;
}

/* An optional float weight that broadcasts to x (BCE weight, pos_weight) */
static bool check_broadcast_weight(const char *op, const char *what, tg_tensor *w, tg_tensor *x) {
  char a[256], b[256];
  if (!w) return true;
  if (!nn_need_float(op, what, w)) return false;
  if (broadcastable(w, uop_shape(x->u), tg_ndim(x))) return true;
  tensor_error("%s: %s %s does not broadcast to the input %s", op, what, NN_SHAPE(w, a), NN_SHAPE(x, b));
  return false;
}

static tg_tensor *sum_all(tg_tensor *t) { return tg_sum(t, NULL, 0, false); }
static tg_tensor *mean_all(tg_tensor *t) { return tg_mean(t, NULL, 0, false); }
static tg_tensor *as_is(tg_tensor *t) { return t; }
static tg_tensor *(*const reducers[])(tg_tensor *) = {
    [TG_REDUCTION_MEAN] = mean_all, [TG_REDUCTION_SUM] = sum_all, [TG_REDUCTION_NONE] = as_is};

/* The entries of x (N, C) at the labels (N,), as (N,); 0 where a label is out of range. */
static tg_tensor *pick_labels(tg_tensor *x, tg_tensor *labels) {
  tg_tensor *hit = tg_one_hot(labels, tg_dim(x, 1), TG_BOOL);
  int ax = 1;
  return tg_sum(tg_where(hit, x, tg_zeros_like(x)), &ax, 1, false);
}

/* The class losses: per-sample values `per` (N,) and the weights w (N,) of their labels (0 for
 * ignored samples): mean = sum(per) / sum(w) (NaN when every sample is ignored, like PyTorch). */
static tg_tensor *reduce_weighted(tg_tensor *per, tg_tensor *w, tg_reduction r) {
  return r == TG_REDUCTION_MEAN ? tg_div(sum_all(per), sum_all(w)) : reducers[r](per);
}

/* w_i = weight[label_i] (1 without weight), 0 where label_i == ignore_index */
static tg_tensor *label_weights(tg_tensor *x, tg_tensor *labels, tg_tensor *weight, int64_t ignore_index) {
  tg_tensor *keep = tg_ne(labels, tg_scalar((double)ignore_index, TG_INT64));
  tg_tensor *w = weight ? pick_labels(tg_expand(tg_cast(weight, tg_get_dtype(x)), uop_shape(x->u), 2), labels)
                        : tg_ones((int64_t[]){tg_dim(x, 0)}, 1, tg_get_dtype(x));
  return tg_where(keep, w, tg_zeros_like(w));
}

static bool check_class_weight(const char *op, tg_tensor *weight, tg_tensor *x) {
  char b[256], c[256];
  if (!weight) return true;
  if (!nn_need_float(op, "weight", weight)) return false;
  if (nn_shape_is(weight, uop_shape(x->u) + 1, 1)) return true;
  tensor_error("%s: weight %s must be (C,) for input %s", op, NN_SHAPE(weight, b), NN_SHAPE(x, c));
  return false;
}

tg_tensor *tg_nll_loss_ex(tg_tensor *log_probs, tg_tensor *labels, tg_tensor *weight, int64_t ignore_index,
                          tg_reduction reduction) {
  const char *op = "nll_loss";
  if (!log_probs || !labels) return null_arg(op);
  if (!check_logits(op, "log_probs", log_probs) || !check_labels(op, log_probs, labels) ||
      !check_class_weight(op, weight, log_probs) || !check_reduction(op, reduction))
    return NULL;
  tg_scope *s = tg_scope_begin();
  tg_tensor *w = label_weights(log_probs, labels, weight, ignore_index);
  return finish(s, reduce_weighted(tg_neg(tg_mul(w, pick_labels(log_probs, labels))), w, reduction));
}

tg_tensor *tg_nll_loss(tg_tensor *log_probs, tg_tensor *labels) {
  return tg_nll_loss_ex(log_probs, labels, NULL, -100, TG_REDUCTION_MEAN);
}

/* PyTorch's cross_entropy with class labels: (1 - ls) nll + ls/C · smooth, where smooth is
 * -sum_c w_c log p_c of each sample (0 for ignored ones), both reduced with the same weights. */
tg_tensor *tg_sparse_cross_entropy_ex(tg_tensor *logits, tg_tensor *labels, tg_tensor *weight, int64_t ignore_index,
                                      double label_smoothing, tg_reduction reduction) {
  const char *op = "sparse_cross_entropy";
  if (!logits || !labels) return null_arg(op);
  if (!check_logits(op, "logits", logits) || !check_labels(op, logits, labels) ||
      !check_class_weight(op, weight, logits) || !check_smoothing(op, label_smoothing) ||
      !check_reduction(op, reduction))
    return NULL;
  tg_scope *s = tg_scope_begin();
  int ax = 1;
  tg_tensor *logp = tg_log_softmax(logits, 1), *w = label_weights(logits, labels, weight, ignore_index);
  tg_tensor *per = tg_neg(tg_mul(w, pick_labels(logp, labels))); /* (N,) */
  if (label_smoothing > 0) {
    tg_tensor *wl = weight ? tg_mul(logp, tg_cast(weight, tg_get_dtype(logp))) : logp;
    tg_tensor *keep = tg_ne(labels, tg_scalar((double)ignore_index, TG_INT64));
    tg_tensor *smooth = tg_where(keep, tg_neg(tg_sum(wl, &ax, 1, false)), tg_zeros_like(per));
    per = tg_add(tg_mul_s(per, 1 - label_smoothing), tg_mul_s(smooth, label_smoothing / (double)tg_dim(logits, 1)));
  }
  return finish(s, reduce_weighted(per, w, reduction));
}

tg_tensor *tg_sparse_cross_entropy(tg_tensor *logits, tg_tensor *labels, double label_smoothing,
                                   int64_t ignore_index) {
  return tg_sparse_cross_entropy_ex(logits, labels, NULL, ignore_index, label_smoothing, TG_REDUCTION_MEAN);
}

/* Probability targets: -sum_c w_c t_c log p_c per sample, t smoothed to t (1 - ls) + ls/C; the
 * mean is over the batch (PyTorch). */
tg_tensor *tg_cross_entropy_ex(tg_tensor *logits, tg_tensor *target, tg_tensor *weight, double label_smoothing,
                               tg_reduction reduction) {
  const char *op = "cross_entropy";
  if (!logits || !target) return null_arg(op);
  if (!check_logits(op, "logits", logits) || !nn_need_float(op, "target", target) ||
      !check_same_shape(op, "logits", logits, "target", target) || !check_class_weight(op, weight, logits) ||
      !check_smoothing(op, label_smoothing) || !check_reduction(op, reduction))
    return NULL;
  tg_scope *s = tg_scope_begin();
  int ax = 1;
  tg_tensor *t = target;
  if (label_smoothing > 0)
    t = tg_add_s(tg_mul_s(target, 1 - label_smoothing), label_smoothing / (double)tg_dim(logits, 1));
  tg_tensor *tl = tg_mul(t, tg_log_softmax(logits, 1));
  if (weight) tl = tg_mul(tl, tg_cast(weight, tg_get_dtype(tl)));
  return finish(s, reducers[reduction](tg_neg(tg_sum(tl, &ax, 1, false))));
}

tg_tensor *tg_cross_entropy(tg_tensor *logits, tg_tensor *target, double label_smoothing) {
  return tg_cross_entropy_ex(logits, target, NULL, label_smoothing, TG_REDUCTION_MEAN);
}

static bool check_pair(const char *op, const char *an, tg_tensor *a, const char *bn, tg_tensor *b) {
  return nn_need_float(op, an, a) && nn_need_float(op, bn, b) && check_same_shape(op, an, a, bn, b);
}

tg_tensor *tg_mse_loss_ex(tg_tensor *pred, tg_tensor *target, tg_reduction reduction) {
  if (!pred || !target) return null_arg("mse_loss");
  if (!check_pair("mse_loss", "pred", pred, "target", target) || !check_reduction("mse_loss", reduction)) return NULL;
  tg_scope *s = tg_scope_begin();
  return finish(s, reducers[reduction](tg_square(tg_sub(pred, target))));
}

tg_tensor *tg_mse_loss(tg_tensor *pred, tg_tensor *target) { return tg_mse_loss_ex(pred, target, TG_REDUCTION_MEAN); }

tg_tensor *tg_bce_loss_ex(tg_tensor *prob, tg_tensor *target, tg_tensor *weight, tg_reduction reduction) {
  const char *op = "bce_loss";
  if (!prob || !target) return null_arg(op);
  if (!check_pair(op, "prob", prob, "target", target) || !check_broadcast_weight(op, "weight", weight, prob) ||
      !check_reduction(op, reduction))
    return NULL;
  /* logs clamped at -100 like PyTorch, so p = 0 or 1 gives a finite loss */
  tg_scope *s = tg_scope_begin();
  tg_tensor *floor_ = scalar_like(prob, -100);
  tg_tensor *lp = tg_maximum(tg_log(prob), floor_), *lq = tg_maximum(tg_log(tg_rsub_s(1, prob)), floor_);
  tg_tensor *per = tg_neg(tg_add(tg_mul(target, lp), tg_mul(tg_rsub_s(1, target), lq)));
  if (weight) per = tg_mul(per, tg_cast(weight, tg_get_dtype(per)));
  return finish(s, reducers[reduction](per));
}

tg_tensor *tg_bce_loss(tg_tensor *prob, tg_tensor *target) { return tg_bce_loss_ex(prob, target, NULL, TG_REDUCTION_MEAN); }

/* -w [p t log σ(x) + (1-t) log(1-σ(x))] = w [(1-t) x + (1 + (p-1) t) log(1 + e^-x)], the log
 * in the stable form above; without pos_weight (p = 1) it is log(1 + e^x) - t x. */
tg_tensor *tg_bce_with_logits_loss_ex(tg_tensor *logits, tg_tensor *target, tg_tensor *weight, tg_tensor *pos_weight,
                                      tg_reduction reduction) {
  const char *op = "bce_with_logits_loss";
  if (!logits || !target) return null_arg(op);
  if (!check_pair(op, "logits", logits, "target", target) || !check_broadcast_weight(op, "weight", weight, logits) ||
      !check_broadcast_weight(op, "pos_weight", pos_weight, logits) || !check_reduction(op, reduction))
    return NULL;
  tg_scope *s = tg_scope_begin();
  tg_tensor *per;
  if (pos_weight) {
    tg_tensor *lw = tg_add_s(tg_mul(tg_sub_s(tg_cast(pos_weight, tg_get_dtype(target)), 1), target), 1);
    per = tg_add(tg_mul(tg_rsub_s(1, target), logits), tg_mul(lw, log1p_exp(tg_neg(logits))));
  } else {
    per = tg_sub(log1p_exp(logits), tg_mul(target, logits));
  }
  if (weight) per = tg_mul(per, tg_cast(weight, tg_get_dtype(per)));
  return finish(s, reducers[reduction](per));
}

tg_tensor *tg_bce_with_logits_loss(tg_tensor *logits, tg_tensor *target) {
  return tg_bce_with_logits_loss_ex(logits, target, NULL, NULL, TG_REDUCTION_MEAN);
}

/* ---------------------------------------------------------------- attention */

static bool check_attention(tg_tensor *q, tg_tensor *k, tg_tensor *v) {
  const char *op = "scaled_dot_product_attention";
  char a[256], b[256], c[256];
  if (!nn_need_float(op, "q", q) || !nn_need_float(op, "k", k) || !nn_need_float(op, "v", v)) return false;
  int nq = tg_ndim(q), nk = tg_ndim(k), nv = tg_ndim(v);
  if (nq < 2 || nk < 2 || nv < 2 || uop_shape(q->u)[nq - 1] != uop_shape(k->u)[nk - 1] ||
      uop_shape(k->u)[nk - 2] != uop_shape(v->u)[nv - 2]) {
    tensor_error("%s: q %s, k %s, v %s must be (..., L, E), (..., S, E), (..., S, Ev)", op, NN_SHAPE(q, a),
                 NN_SHAPE(k, b), NN_SHAPE(v, c));
    return false;
  }
  return true;
}

static bool check_mask(tg_tensor *mask, tg_tensor *scores) {
  const char *op = "scaled_dot_product_attention";
  char a[256], b[256];
  tg_dtype dt = tg_get_dtype(mask);
  if (dt != TG_BOOL && !tg_dtype_is_float(dt)) {
    tensor_error("%s: mask must be bool or float, got %s", op, tg_dtype_name(dt));
    return false;
  }
  if (broadcastable(mask, uop_shape(scores->u), tg_ndim(scores))) return true;
  tensor_error("%s: mask %s does not broadcast to the scores %s", op, NN_SHAPE(mask, a), NN_SHAPE(scores, b));
  return false;
}

/* keep[i, j] = j <= i for an (L, S) score matrix (PyTorch's tril of ones). */
static tg_tensor *causal_keep(int64_t l, int64_t s) {
  int64_t col[2] = {l, 1}, row[2] = {1, s};
  tg_tensor *i = tg_reshape(tg_arange(0, (double)l, 1, TG_INT32), col, 2);
  tg_tensor *j = tg_reshape(tg_arange(0, (double)s, 1, TG_INT32), row, 2);
  return tg_le(j, i);
}

tg_tensor *tg_scaled_dot_product_attention(tg_tensor *q, tg_tensor *k, tg_tensor *v, tg_tensor *mask, bool causal) {
  if (!q || !k || !v) return null_arg("scaled_dot_product_attention");
  if (!check_attention(q, k, v)) return NULL;
  tg_scope *s = tg_scope_begin();
  int64_t e = tg_dim(q, -1);
  tg_tensor *scores = tg_mul_s(tg_matmul(q, tg_transpose(k, -1, -2)), 1 / sqrt((double)(e ? e : 1)));
  if (!scores) return finish(s, NULL); /* batch axes that do not broadcast (matmul's message) */
  tg_tensor *ninf = tg_full_like(scores, -INFINITY);
  if (mask && !check_mask(mask, scores)) return finish(s, NULL);
  if (mask && tg_get_dtype(mask) == TG_BOOL) scores = tg_where(mask, scores, ninf);
  else if (mask) scores = tg_add(scores, mask);
  if (causal) scores = tg_where(causal_keep(tg_dim(scores, -2), tg_dim(scores, -1)), scores, ninf);
  return finish(s, tg_matmul(tg_softmax(scores, -1), v));
}
