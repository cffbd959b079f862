/* ops_math.c — ONNX elementwise ops, activations, reductions and linear algebra, each mapped
 * onto tg's public tensor functions. Ops that differ only by the tg function they call share
 * a handler that finds that function in a name table. */
#include <math.h>
#include <string.h>

#include "onnx/onnx_int.h"
#include "runtime/helpers.h"

#define IN(i) (n->nin > (i) ? n->in[i] : NULL)

/* r cast to like's dtype (ONNX ops keep their input's type; tg's may widen or go float). */
static tg_tensor *like_dt(tg_tensor *r, tg_tensor *like) {
  return r && like && tg_get_dtype(r) != tg_get_dtype(like) ? tg_cast(r, tg_get_dtype(like)) : r;
}

static bool is_int(tg_tensor *t) { return t && !tg_dtype_is_float(tg_get_dtype(t)) && tg_get_dtype(t) != TG_BOOL; }

/* ---------------------------------------------------------------- unary */

typedef tg_tensor *(*unary_fn)(tg_tensor *);
static tg_tensor *sigmoid_float(tg_tensor *t) { return tg_sigmoid(t); }

static const struct { const char *name; unary_fn f; } unaries[] = {
    {"Abs", tg_abs},       {"Neg", tg_neg},     {"Exp", tg_exp},       {"Log", tg_log},     {"Sqrt", tg_sqrt},
    {"Reciprocal", tg_reciprocal}, {"Floor", tg_floor}, {"Ceil", tg_ceil}, {"Round", tg_round}, {"Relu", tg_relu},
    {"Sigmoid", sigmoid_float}, {"Tanh", tg_tanh}, {"Sin", tg_sin},    {"Cos", tg_cos},     {"Tan", tg_tan},
    {"Asin", tg_asin},     {"Acos", tg_acos},   {"Atan", tg_atan},     {"Sinh", tg_sinh},   {"Cosh", tg_cosh},
    {"Asinh", tg_asinh},   {"Acosh", tg_acosh}, {"Atanh", tg_atanh},   {"Erf", tg_erf},     {"Sign", tg_sign},
    {"IsNaN", tg_isnan},   {"Not", tg_logical_not}, {"Softsign", tg_softsign},
    {"HardSwish", tg_hardswish}, {"Mish", tg_mish}, {"BitwiseNot", tg_bitwise_not},
};

static int op_unary(ox_node *n) {
  for (size_t i = 0; i < sizeof unaries / sizeof unaries[0]; i++)
    if (!strcmp(unaries[i].name, n->np->op_type)) return ox_set(n, 0, unaries[i].f(IN(0)));
  return ox_fail(n, TG_ERR_ARG, "no unary function");
}

/* Activations with attributes. */
static int op_leaky_relu(ox_node *n) { return ox_set(n, 0, tg_leaky_relu(IN(0), ox_attr_f(n, "alpha", 0.01))); }
static int op_elu(ox_node *n) { return ox_set(n, 0, tg_elu(IN(0), ox_attr_f(n, "alpha", 1.0))); }
static int op_celu(ox_node *n) { return ox_set(n, 0, tg_celu(IN(0), ox_attr_f(n, "alpha", 1.0))); }
static int op_softplus(ox_node *n) { return ox_set(n, 0, tg_softplus(IN(0), 1.0)); }

static int op_selu(ox_node *n) {
  double a = ox_attr_f(n, "alpha", 1.67326319217681884765625), g = ox_attr_f(n, "gamma", 1.05070102214813232421875);
  tg_tensor *x = IN(0);
  tg_tensor *neg = tg_mul_s(tg_sub_s(tg_exp(x), 1.0), a);
  return ox_set(n, 0, tg_mul_s(tg_where(tg_gt(x, tg_zeros_like(x)), x, neg), g));
}

static int op_hard_sigmoid(ox_node *n) {
  double a = ox_attr_f(n, "alpha", 0.2), b = ox_attr_f(n, "beta", 0.5);
  return ox_set(n, 0, tg_clip(tg_add_s(tg_mul_s(IN(0), a), b), 0.0, 1.0));
}

static int op_thresholded_relu(ox_node *n) {
  tg_tensor *x = IN(0);
  return ox_set(n, 0, tg_where(tg_gt(x, tg_full_like(x, ox_attr_f(n, "alpha", 1.0))), x, tg_zeros_like(x)));
}

static int op_shrink(ox_node *n) {
  double bias = ox_attr_f(n, "bias", 0.0), l = ox_attr_f(n, "lambd", 0.5);
  tg_tensor *x = IN(0);
  tg_tensor *r = tg_where(tg_lt(x, tg_full_like(x, -l)), tg_add_s(x, bias),
                          tg_where(tg_gt(x, tg_full_like(x, l)), tg_sub_s(x, bias), tg_zeros_like(x)));
  return ox_set(n, 0, like_dt(r, x));
}

static int op_prelu(ox_node *n) {
  tg_tensor *x = IN(0), *slope = IN(1);
  int nd = tg_ndim(x);
  if (n->opset < 7 && tg_ndim(slope) == 1 && nd > 2 && tg_dim(slope, 0) == tg_dim(x, 1)) { /* per channel */
    int64_t s[OX_MAX_DIMS];
    for (int i = 0; i < nd - 1; i++) s[i] = i == 0 ? -1 : 1;
    slope = tg_reshape(slope, s, nd - 1);
  }
  return ox_set(n, 0, tg_where(tg_lt(x, tg_zeros_like(x)), tg_mul(x, slope), x));
}

static int op_isinf(ox_node *n) {
  tg_tensor *x = IN(0);
  bool neg = ox_attr_i(n, "detect_negative", 1), pos = ox_attr_i(n, "detect_positive", 1);
  tg_tensor *r = tg_isinf(x);
  if (!neg) r = tg_logical_and(r, tg_gt(x, tg_zeros_like(x)));
  if (!pos) r = tg_logical_and(r, tg_lt(x, tg_zeros_like(x)));
  return ox_set(n, 0, r);
}

static int op_gelu(ox_node *n) {
  tg_tensor *x = IN(0);
  const char *approx = ox_attr_s(n, "approximate", "none");
  if (!strcmp(approx, "tanh")) return ox_set(n, 0, tg_gelu(x));
  if (strcmp(approx, "none")) return ox_fail(n, TG_ERR_ARG, "approximate '%s' is not supported", approx);
  return ox_set(n, 0, tg_mul(tg_mul_s(x, 0.5), tg_add_s(tg_erf(tg_mul_s(x, M_SQRT1_2)), 1.0)));
}

/* Cast: the "to" dtype; CastLike: the second input's. */
static int op_cast(ox_node *n) {
  int dt = ox_dtype((int)ox_attr_i(n, "to", 0), "Cast 'to'");
  return dt < 0 ? -1 : ox_set(n, 0, tg_cast(IN(0), (tg_dtype)dt));
}
static int op_cast_like(ox_node *n) {
  if (!IN(1)) return ox_fail(n, TG_ERR_ARG, "missing input");
  return ox_set(n, 0, tg_cast(IN(0), tg_get_dtype(IN(1))));
}

/* ---------------------------------------------------------------- binary */

typedef tg_tensor *(*binary_fn)(tg_tensor *, tg_tensor *);
static tg_tensor *div_onnx(tg_tensor *a, tg_tensor *b) { return is_int(a) ? tg_idiv(a, b) : tg_div(a, b); }
static tg_tensor *pow_onnx(tg_tensor *a, tg_tensor *b) {
  /* the result has the base's type; an integer base computes in double */
  if (is_int(a)) return like_dt(tg_pow(tg_cast(a, TG_FLOAT64), tg_cast(b, TG_FLOAT64)), a);
  return like_dt(tg_pow(a, tg_cast(b, tg_get_dtype(a))), a);
}

static const struct { const char *name; binary_fn f; } binaries[] = {
    {"Add", tg_add},   {"Sub", tg_sub},  {"Mul", tg_mul},   {"Div", div_onnx}, {"Pow", pow_onnx},
    {"And", tg_logical_and}, {"Or", tg_logical_or}, {"Xor", tg_logical_xor}, {"Equal", tg_eq},
    {"Less", tg_lt},   {"LessOrEqual", tg_le}, {"Greater", tg_gt}, {"GreaterOrEqual", tg_ge},
    {"BitwiseAnd", tg_bitwise_and}, {"BitwiseOr", tg_bitwise_or}, {"BitwiseXor", tg_bitwise_xor},
};

/* Before opset 7, broadcast=1 aligned B with A from `axis` (default: the trailing axes). */
static tg_tensor *legacy_broadcast(ox_node *n, tg_tensor *a, tg_tensor *b) {
  if (n->opset >= 7 || !ox_attr_i(n, "broadcast", 0)) return b;
  int na = tg_ndim(a), nb = tg_ndim(b);
  int64_t axis = ox_attr_i(n, "axis", na - nb), s[OX_MAX_DIMS];
  if (axis < 0) axis += na;
  if (axis < 0 || axis + nb > na) return ox_fail(n, TG_ERR_ARG, "broadcast axis %lld does not fit", (long long)axis), NULL;
  for (int i = 0; i < na; i++) s[i] = i >= axis && i < axis + nb ? tg_dim(b, (int)(i - axis)) : 1;
  return tg_reshape(b, s, na);
}

static int op_binary(ox_node *n) {
  if (!IN(0) || !IN(1)) return ox_fail(n, TG_ERR_ARG, "missing input");
  tg_tensor *b = legacy_broadcast(n, IN(0), IN(1));
  for (size_t i = 0; i < sizeof binaries / sizeof binaries[0]; i++)
    if (!strcmp(binaries[i].name, n->np->op_type)) return ox_set(n, 0, binaries[i].f(IN(0), b));
  return ox_fail(n, TG_ERR_ARG, "no binary function");
}

static int op_mod(ox_node *n) {
  bool fm = ox_attr_i(n, "fmod", 0);
  return ox_set(n, 0, like_dt(fm ? tg_fmod(IN(0), IN(1)) : tg_mod(IN(0), IN(1)), IN(0)));
}

static int op_bitshift(ox_node *n) {
  const char *d = ox_attr_s(n, "direction", "");
  if (!strcmp(d, "LEFT")) return ox_set(n, 0, tg_bitwise_left_shift(IN(0), IN(1)));
  if (!strcmp(d, "RIGHT")) return ox_set(n, 0, tg_bitwise_right_shift(IN(0), IN(1)));
  return ox_fail(n, TG_ERR_ARG, "direction '%s' is not LEFT or RIGHT", d);
}

/* Max, Min, Sum, Mean: a fold over any number of inputs (broadcast). */
static int op_variadic(ox_node *n) {
  const char *op = n->np->op_type;
  binary_fn f = !strcmp(op, "Max") ? tg_maximum : !strcmp(op, "Min") ? tg_minimum : tg_add;
  tg_tensor *r = IN(0);
  for (int i = 1; i < n->nin; i++) r = f(r, n->in[i]);
  if (!strcmp(op, "Mean")) r = like_dt(tg_div_s(r, (double)n->nin), IN(0));
  return ox_set(n, 0, r);
}

static int op_where(ox_node *n) { return ox_set(n, 0, tg_where(IN(0), IN(1), IN(2))); }

/* Clip: bounds from attributes (opset < 11) or optional inputs. */
static int op_clip(ox_node *n) {
  tg_tensor *x = IN(0);
  if (n->opset < 11) {
    double lo = ox_attr_f(n, "min", -INFINITY), hi = ox_attr_f(n, "max", INFINITY);
    return ox_set(n, 0, tg_clip(x, lo, hi));
  }
  if (IN(1)) x = tg_maximum(x, IN(1));
  if (IN(2)) x = tg_minimum(x, IN(2));
  return ox_set(n, 0, like_dt(x, IN(0)));
}

/* ---------------------------------------------------------------- reductions */

/* The axes of a reduction: attribute, or input 1 from opset `input_from`; *all: none given. */
static int reduce_axes(ox_node *n, int input_from, int *axes, bool *noop) {
  int64_t a[OX_MAX_DIMS];
  int na = -1;
  if (n->opset >= input_from) na = IN(1) ? ox_host_ints(IN(1), a, OX_MAX_DIMS) : -1;
  else na = ox_attr_ints(n, "axes", a, OX_MAX_DIMS);
  if (na < -1) return -1;
  *noop = false;
  if (na <= 0) {
    *noop = ox_attr_i(n, "noop_with_empty_axes", 0) != 0;
    return 0;
  }
  int nd = tg_ndim(IN(0));
  for (int i = 0; i < na; i++)
    if ((axes[i] = ox_axis(n, a[i], nd)) < 0) return -1;
  return na;
}

typedef enum { R_SUM, R_MEAN, R_MAX, R_MIN, R_PROD, R_L1, R_L2, R_LOGSUM, R_LOGSUMEXP, R_SUMSQ } rkind;
static const struct { const char *name; rkind k; int axes_input_from; } reductions[] = {
    {"ReduceSum", R_SUM, 13},       {"ReduceMean", R_MEAN, 18}, {"ReduceMax", R_MAX, 18},
    {"ReduceMin", R_MIN, 18},       {"ReduceProd", R_PROD, 18}, {"ReduceL1", R_L1, 18},
    {"ReduceL2", R_L2, 18},         {"ReduceLogSum", R_LOGSUM, 18}, {"ReduceLogSumExp", R_LOGSUMEXP, 18},
    {"ReduceSumSquare", R_SUMSQ, 18},
};

static tg_tensor *reduce(rkind k, tg_tensor *x, const int *axes, int na, bool keep) {
  switch (k) {
  case R_SUM: return tg_sum(x, axes, na, keep);
  case R_MEAN: return tg_mean(x, axes, na, keep);
  case R_MAX: return tg_max(x, axes, na, keep);
  case R_MIN: return tg_min(x, axes, na, keep);
  case R_PROD: return tg_prod(x, axes, na, keep);
  case R_L1: return tg_sum(tg_abs(x), axes, na, keep);
  case R_L2: return tg_sqrt(tg_sum(tg_mul(x, x), axes, na, keep));
  case R_LOGSUM: return tg_log(tg_sum(x, axes, na, keep));
  case R_SUMSQ: return tg_sum(tg_mul(x, x), axes, na, keep);
  case R_LOGSUMEXP: {
    tg_tensor *m = tg_max(x, axes, na, true);
    m = tg_where(tg_isinf(m), tg_zeros_like(m), m);
    tg_tensor *r = tg_add(tg_log(tg_sum(tg_exp(tg_sub(x, m)), axes, na, true)), m);
    if (!keep) {
      int nd = tg_ndim(x);
      int64_t shape[OX_MAX_DIMS];
      int k2 = 0;
      for (int i = 0; i < nd; i++) {
        bool red = na == 0;
        for (int j = 0; j < na; j++) red |= axes[j] == i;
        if (!red) shape[k2++] = tg_dim(x, i);
      }
      r = tg_reshape(r, shape, k2);
    }
    return r;
  }
  }
  return NULL;
}

static int op_reduce(ox_node *n) {
  for (size_t i = 0; i < sizeof reductions / sizeof reductions[0]; i++) {
    if (strcmp(reductions[i].name, n->np->op_type)) continue;
    int axes[OX_MAX_DIMS];
    bool noop;
    int na = reduce_axes(n, reductions[i].axes_input_from, axes, &noop);
    if (na < 0) return -1;
    tg_tensor *x = IN(0);
    if (na == 0 && noop) return ox_set(n, 0, x);
    if (na == 0 && tg_ndim(x) == 0) return ox_set(n, 0, x);
    bool keep = ox_attr_i(n, "keepdims", 1) != 0;
    return ox_set(n, 0, like_dt(reduce(reductions[i].k, x, axes, na, keep), x));
  }
  return ox_fail(n, TG_ERR_ARG, "no reduction");
}

/* ArgMax/ArgMin (int64); select_last_index flips the axis and maps the index back. */
static int op_arg(ox_node *n) {
  tg_tensor *x = IN(0);
  int axis = ox_axis(n, ox_attr_i(n, "axis", 0), tg_ndim(x));
  if (axis < 0) return -1;
  bool keep = ox_attr_i(n, "keepdims", 1) != 0, last = ox_attr_i(n, "select_last_index", 0) != 0;
  bool is_max = !strcmp(n->np->op_type, "ArgMax");
  if (last) x = tg_flip(x, &axis, 1);
  tg_tensor *r = tg_cast(is_max ? tg_argmax(x, axis, keep) : tg_argmin(x, axis, keep), TG_INT64);
  if (last) r = tg_rsub_s((double)(tg_dim(x, axis) - 1), r);
  return ox_set(n, 0, r);
}

/* ---------------------------------------------------------------- linear algebra */

static int op_matmul(ox_node *n) { return ox_set(n, 0, tg_matmul(IN(0), IN(1))); }

static int op_gemm(ox_node *n) {
  tg_tensor *a = IN(0), *b = IN(1), *c = IN(2);
  double alpha = ox_attr_f(n, "alpha", 1.0), beta = ox_attr_f(n, "beta", 1.0);
  if (ox_attr_i(n, "transA", 0)) a = tg_transpose(a, 0, 1);
  if (ox_attr_i(n, "transB", 0)) b = tg_transpose(b, 0, 1);
  tg_tensor *r = tg_matmul(a, b);
  if (alpha != 1.0) r = like_dt(tg_mul_s(r, alpha), IN(0));
  if (c) r = tg_add(r, beta == 1.0 ? c : like_dt(tg_mul_s(c, beta), c));
  return ox_set(n, 0, r);
}

static int op_einsum(ox_node *n) {
  const char *eq = ox_attr_s(n, "equation", "");
  return ox_set(n, 0, tg_einsum(eq, n->in, n->nin));
}

/* Softmax, LogSoftmax, Hardmax: before opset 13 over the input flattened to 2-D at axis. */
static tg_tensor *hardmax(tg_tensor *x, int axis) {
  return tg_cast(tg_one_hot(tg_argmax(x, axis, false), tg_dim(x, axis), TG_BOOL), tg_get_dtype(x));
}

static int op_softmax(ox_node *n) {
  tg_tensor *x = IN(0);
  int nd = tg_ndim(x);
  bool old = n->opset < 13;
  int axis = ox_axis(n, ox_attr_i(n, "axis", old ? 1 : -1), nd);
  if (axis < 0) return -1;
  const char *op = n->np->op_type;
  tg_tensor *v = old ? tg_flatten(tg_flatten(x, axis, nd - 1), 0, axis - 1 < 0 ? 0 : axis - 1) : x;
  if (old && axis == 0) v = tg_unsqueeze(tg_flatten(x, 0, nd - 1), 0);
  int ax = old ? 1 : axis;
  tg_tensor *r;
  if (!strcmp(op, "Softmax")) r = tg_softmax(v, ax);
  else if (!strcmp(op, "LogSoftmax")) r = tg_log_softmax(v, ax);
  else { /* Hardmax: the first max along the axis is 1 */
    if (!old) v = tg_transpose(v, ax, nd - 1);
    r = hardmax(v, old ? 1 : nd - 1);
    if (!old) r = tg_transpose(r, ax, nd - 1);
  }
  if (old) {
    int64_t shape[OX_MAX_DIMS];
    tg_shape(x, shape, OX_MAX_DIMS);
    r = tg_reshape(r, shape, nd);
  }
  return ox_set(n, 0, r);
}

/* CumSum: axis from input 1; exclusive and reverse. */
static int op_cumsum(ox_node *n) {
  tg_tensor *x = IN(0);
  int64_t a;
  if (ox_host_ints(IN(1), &a, 1) != 1) return ox_fail(n, TG_ERR_ARG, "axis must be one value");
  int axis = ox_axis(n, a, tg_ndim(x));
  if (axis < 0) return -1;
  bool rev = ox_attr_i(n, "reverse", 0), excl = ox_attr_i(n, "exclusive", 0);
  if (rev) x = tg_flip(x, &axis, 1);
  tg_tensor *r = tg_cumsum(x, axis);
  if (excl) r = tg_sub(r, x);
  if (rev) r = tg_flip(r, &axis, 1);
  return ox_set(n, 0, like_dt(r, IN(0)));
}

/* TopK: k from input 1. */
static int op_topk(ox_node *n) {
  tg_tensor *x = IN(0), *v = NULL, *i = NULL;
  int64_t k;
  if (ox_host_ints(IN(1), &k, 1) != 1) return ox_fail(n, TG_ERR_ARG, "K must be one value");
  int axis = ox_axis(n, ox_attr_i(n, "axis", -1), tg_ndim(x));
  if (axis < 0) return -1;
  if (tg_topk(x, k, axis, ox_attr_i(n, "largest", 1) != 0, &v, &i) < 0) return -1;
  n->out[1] = i;
  return ox_set(n, 0, v);
}

/* ---------------------------------------------------------------- the table */

#define U(name) {name, 1, op_unary, ""}
#define B(name) {name, 1, op_binary, "axis,broadcast"}
#define R(name) {name, 1, op_reduce, "axes,keepdims,noop_with_empty_axes"}
const ox_op ox_ops_math[] = {
    U("Abs"), U("Neg"), U("Exp"), U("Log"), U("Sqrt"), U("Reciprocal"), U("Floor"), U("Ceil"), U("Round"),
    U("Relu"), U("Sigmoid"), U("Tanh"), U("Sin"), U("Cos"), U("Tan"), U("Asin"), U("Acos"), U("Atan"),
    U("Sinh"), U("Cosh"), U("Asinh"), U("Acosh"), U("Atanh"), U("Erf"), U("Sign"), U("IsNaN"), U("Not"),
    U("Softsign"), U("HardSwish"), U("Mish"), U("BitwiseNot"),
    {"LeakyRelu", 6, op_leaky_relu, "alpha"},
    {"Elu", 6, op_elu, "alpha"},
    {"Celu", 12, op_celu, "alpha"},
    {"Selu", 6, op_selu, "alpha,gamma"},
    {"Softplus", 1, op_softplus, ""},
    {"HardSigmoid", 6, op_hard_sigmoid, "alpha,beta"},
    {"ThresholdedRelu", 10, op_thresholded_relu, "alpha"},
    {"Shrink", 9, op_shrink, "bias,lambd"},
    {"PRelu", 1, op_prelu, ""},
    {"IsInf", 10, op_isinf, "detect_negative,detect_positive"},
    {"Gelu", 20, op_gelu, "approximate"},
    {"Cast", 6, op_cast, "to,saturate"},
    {"CastLike", 15, op_cast_like, "saturate"},
    B("Add"), B("Sub"), B("Mul"), B("Div"), B("Pow"), B("And"), B("Or"), B("Xor"), B("Equal"), B("Less"),
    B("LessOrEqual"), B("Greater"), B("GreaterOrEqual"), B("BitwiseAnd"), B("BitwiseOr"), B("BitwiseXor"),
    {"Mod", 10, op_mod, "fmod"},
    {"BitShift", 11, op_bitshift, "direction"},
    {"Max", 1, op_variadic, ""}, {"Min", 1, op_variadic, ""}, {"Sum", 1, op_variadic, ""}, {"Mean", 1, op_variadic, ""},
    {"Where", 9, op_where, ""},
    {"Clip", 6, op_clip, "min,max"},
    R("ReduceSum"), R("ReduceMean"), R("ReduceMax"), R("ReduceMin"), R("ReduceProd"), R("ReduceL1"), R("ReduceL2"),
    R("ReduceLogSum"), R("ReduceLogSumExp"), R("ReduceSumSquare"),
    {"ArgMax", 1, op_arg, "axis,keepdims,select_last_index"},
    {"ArgMin", 1, op_arg, "axis,keepdims,select_last_index"},
    {"MatMul", 1, op_matmul, ""},
    {"Gemm", 1, op_gemm, "alpha,beta,broadcast,transA,transB"},
    {"Einsum", 12, op_einsum, "equation"},
    {"Softmax", 1, op_softmax, "axis"},
    {"LogSoftmax", 1, op_softmax, "axis"},
    {"Hardmax", 1, op_softmax, "axis"},
    {"CumSum", 11, op_cumsum, "exclusive,reverse"},
    {"TopK", 10, op_topk, "axis,largest,sorted"},
    {NULL, 0, NULL, NULL},
};
