/* elementwise.c — broadcasting, type promotion, and the elementwise tensor API.
 * Everything here lowers to the primitive ALU ops of uop.h; composite functions (floor,
 * round, tanh, …) are small graphs of primitives so autograd needs one rule per primitive. */
#include <math.h>
#include <string.h>

#include "tensor/tensor.h"

#define POOL_BEGIN size_t pool_mark_ = uop_pool_mark()
#define POOL_END(u) do { tg_tensor *r_ = tensor_wrap(u); uop_pool_release(pool_mark_); return r_; } while (0)

/* ---------------------------------------------------------------- broadcasting */

/* Broadcast x to shape (rank nd >= x's rank). */
static uop *broadcast_to(uop *x, const int64_t *shape, int nd) {
  int xn = uop_ndim(x);
  int64_t padded[TG_MAX_DIMS];
  for (int i = 0; i < nd; i++) padded[i] = i < nd - xn ? 1 : uop_shape(x)[i - (nd - xn)];
  return ushape_expand(ushape_reshape(x, padded, nd), shape, nd);
}

/* numpy broadcast shape of a and b into out; false (with error) if incompatible. */
static bool broadcast_shape(const char *op, uop *a, uop *b, int64_t *out, int *nd) {
  int an = uop_ndim(a), bn = uop_ndim(b), n = an > bn ? an : bn;
  for (int i = 0; i < n; i++) {
    int64_t x = i < n - an ? 1 : uop_shape(a)[i - (n - an)];
    int64_t y = i < n - bn ? 1 : uop_shape(b)[i - (n - bn)];
    if (x != y && x != 1 && y != 1) {
      char sa[256], sb[256];
      tensor_error("%s: shapes %s and %s cannot broadcast", op, tg_fmt_shape(sa, sizeof sa, uop_shape(a), an),
                   tg_fmt_shape(sb, sizeof sb, uop_shape(b), bn));
      return false;
    }
    out[i] = x == 1 ? y : x;
  }
  *nd = n;
  return true;
}

/* Broadcast a and b together and cast both to dt (TG_DTYPE_COUNT: promote). */
static bool prep2(const char *op, tg_tensor *ta, tg_tensor *tb, uop **a, uop **b, tg_dtype *dt) {
  if (!ta || !tb) return null_arg(op), false;
  int64_t shape[TG_MAX_DIMS];
  int nd;
  if (!broadcast_shape(op, ta->u, tb->u, shape, &nd)) return false;
  if (*dt == TG_DTYPE_COUNT) *dt = tg_promote_types(ta->u->dtype, tb->u->dtype);
  *a = ucast(broadcast_to(ta->u, shape, nd), *dt);
  *b = ucast(broadcast_to(tb->u, shape, nd), *dt);
  return true;
}

static uop *bin(uop_op op, uop *a, uop *b) { return uop_alu(op, a, b); }
static uop *un(uop_op op, uop *a) { return uop_new1(op, a->dtype, a); }
static uop *k(uop *like, double v) { return uconst_like(like, v, like->dtype); }
static uop *where(uop *c, uop *a, uop *b) { return uop_new3(OP_WHERE, a->dtype, c, a, b); }
static uop *lnot(uop *a) { return uop_new1(OP_NOT, TG_BOOL, a); }

/* min via max: -max(-a,-b) for floats (NaN propagates), ~max(~a,~b) for ints and bools */
static uop *umin(uop *a, uop *b) {
  uop_op inv = dtype_is_float(a->dtype) ? OP_NEG : OP_NOT;
  return un(inv, bin(OP_MAX, un(inv, a), un(inv, b)));
}

static bool is_intlike(tg_dtype dt) { return !dtype_is_float(dt); }

/* Python/numpy floor division and modulo from C's truncating ones. */
static uop *ufloordiv(uop *a, uop *b) {
  if (dtype_is_float(a->dtype)) {
    uop *q = bin(OP_FDIV, a, b), *t = un(OP_TRUNC, q);
    return where(bin(OP_CMPLT, q, t), bin(OP_SUB, t, k(t, 1)), t);
  }
  uop *q = bin(OP_IDIV, a, b), *r = bin(OP_MOD, a, b);
  uop *adjust = bin(OP_AND, bin(OP_CMPNE, r, k(r, 0)),
                    bin(OP_CMPNE, bin(OP_CMPLT, r, k(r, 0)), bin(OP_CMPLT, b, k(b, 0))));
  return where(adjust, bin(OP_SUB, q, k(q, 1)), q);
}

static uop *umod(uop *a, uop *b) {
  uop *r = bin(OP_MOD, a, b);
  uop *adjust = bin(OP_AND, bin(OP_CMPNE, r, k(r, 0)),
                    bin(OP_CMPNE, bin(OP_CMPLT, r, k(r, 0)), bin(OP_CMPLT, b, k(b, 0))));
  return where(adjust, bin(OP_ADD, r, b), r);
}

/* ---------------------------------------------------------------- binary API */

typedef enum { B_ANY, B_NUMERIC, B_INT, B_BOOL } bin_domain;

static tg_tensor *binary(const char *name, tg_tensor *ta, tg_tensor *tb, bin_domain dom, tg_dtype force,
                         uop *(*build)(uop *, uop *)) {
  POOL_BEGIN;
  uop *a, *b;
  tg_dtype dt = force;
  if (!prep2(name, ta, tb, &a, &b, &dt)) { uop_pool_release(pool_mark_); return NULL; }
  if ((dom == B_INT && dtype_is_float(dt)) || (dom == B_NUMERIC && dt == TG_BOOL)) {
    uop_pool_release(pool_mark_);
    return tensor_error("%s: not defined for dtype %s", name, tg_dtype_name(dt));
  }
  POOL_END(build(a, b));
}

static uop *b_add(uop *a, uop *b) { return bin(a->dtype == TG_BOOL ? OP_OR : OP_ADD, a, b); }
static uop *b_sub(uop *a, uop *b) { return bin(OP_SUB, a, b); }
static uop *b_mul(uop *a, uop *b) { return bin(a->dtype == TG_BOOL ? OP_AND : OP_MUL, a, b); }
static uop *b_fdiv(uop *a, uop *b) { return bin(OP_FDIV, a, b); }
static uop *b_idiv(uop *a, uop *b) {
  return dtype_is_float(a->dtype) ? un(OP_TRUNC, bin(OP_FDIV, a, b)) : bin(OP_IDIV, a, b);
}
static uop *b_floordiv(uop *a, uop *b) { return ufloordiv(a, b); }
static uop *b_mod(uop *a, uop *b) { return umod(a, b); }
static uop *b_pow(uop *a, uop *b) { return bin(OP_POW, a, b); }
static uop *b_max(uop *a, uop *b) { return bin(OP_MAX, a, b); }
static uop *b_min(uop *a, uop *b) { return umin(a, b); }
static uop *b_eq(uop *a, uop *b) { return bin(OP_CMPEQ, a, b); }
static uop *b_ne(uop *a, uop *b) { return bin(OP_CMPNE, a, b); }
static uop *b_lt(uop *a, uop *b) { return bin(OP_CMPLT, a, b); }
static uop *b_gt(uop *a, uop *b) { return bin(OP_CMPLT, b, a); }
static uop *b_le(uop *a, uop *b) { return bin(OP_OR, bin(OP_CMPLT, a, b), bin(OP_CMPEQ, a, b)); }
static uop *b_ge(uop *a, uop *b) { return b_le(b, a); }
static uop *b_and(uop *a, uop *b) { return bin(OP_AND, a, b); }
static uop *b_or(uop *a, uop *b) { return bin(OP_OR, a, b); }
static uop *b_xor(uop *a, uop *b) { return bin(OP_XOR, a, b); }

tg_tensor *tg_add(tg_tensor *a, tg_tensor *b) { return binary("add", a, b, B_ANY, TG_DTYPE_COUNT, b_add); }
tg_tensor *tg_sub(tg_tensor *a, tg_tensor *b) { return binary("sub", a, b, B_NUMERIC, TG_DTYPE_COUNT, b_sub); }
tg_tensor *tg_mul(tg_tensor *a, tg_tensor *b) { return binary("mul", a, b, B_ANY, TG_DTYPE_COUNT, b_mul); }
tg_tensor *tg_idiv(tg_tensor *a, tg_tensor *b) { return binary("idiv", a, b, B_NUMERIC, TG_DTYPE_COUNT, b_idiv); }
tg_tensor *tg_floordiv(tg_tensor *a, tg_tensor *b) { return binary("floordiv", a, b, B_NUMERIC, TG_DTYPE_COUNT, b_floordiv); }
tg_tensor *tg_mod(tg_tensor *a, tg_tensor *b) { return binary("mod", a, b, B_NUMERIC, TG_DTYPE_COUNT, b_mod); }
tg_tensor *tg_pow(tg_tensor *a, tg_tensor *b) { return binary("pow", a, b, B_NUMERIC, TG_DTYPE_COUNT, b_pow); }
tg_tensor *tg_maximum(tg_tensor *a, tg_tensor *b) { return binary("maximum", a, b, B_ANY, TG_DTYPE_COUNT, b_max); }
tg_tensor *tg_minimum(tg_tensor *a, tg_tensor *b) { return binary("minimum", a, b, B_ANY, TG_DTYPE_COUNT, b_min); }
tg_tensor *tg_eq(tg_tensor *a, tg_tensor *b) { return binary("eq", a, b, B_ANY, TG_DTYPE_COUNT, b_eq); }
tg_tensor *tg_ne(tg_tensor *a, tg_tensor *b) { return binary("ne", a, b, B_ANY, TG_DTYPE_COUNT, b_ne); }
tg_tensor *tg_lt(tg_tensor *a, tg_tensor *b) { return binary("lt", a, b, B_ANY, TG_DTYPE_COUNT, b_lt); }
tg_tensor *tg_le(tg_tensor *a, tg_tensor *b) { return binary("le", a, b, B_ANY, TG_DTYPE_COUNT, b_le); }
tg_tensor *tg_gt(tg_tensor *a, tg_tensor *b) { return binary("gt", a, b, B_ANY, TG_DTYPE_COUNT, b_gt); }
tg_tensor *tg_ge(tg_tensor *a, tg_tensor *b) { return binary("ge", a, b, B_ANY, TG_DTYPE_COUNT, b_ge); }
tg_tensor *tg_logical_and(tg_tensor *a, tg_tensor *b) { return binary("logical_and", a, b, B_ANY, TG_BOOL, b_and); }
tg_tensor *tg_logical_or(tg_tensor *a, tg_tensor *b) { return binary("logical_or", a, b, B_ANY, TG_BOOL, b_or); }
tg_tensor *tg_logical_xor(tg_tensor *a, tg_tensor *b) { return binary("logical_xor", a, b, B_ANY, TG_BOOL, b_xor); }
tg_tensor *tg_bitwise_and(tg_tensor *a, tg_tensor *b) { return binary("bitwise_and", a, b, B_INT, TG_DTYPE_COUNT, b_and); }
tg_tensor *tg_bitwise_or(tg_tensor *a, tg_tensor *b) { return binary("bitwise_or", a, b, B_INT, TG_DTYPE_COUNT, b_or); }
tg_tensor *tg_bitwise_xor(tg_tensor *a, tg_tensor *b) { return binary("bitwise_xor", a, b, B_INT, TG_DTYPE_COUNT, b_xor); }

tg_tensor *tg_div(tg_tensor *a, tg_tensor *b) {
  if (!a || !b) return null_arg("div");
  tg_dtype dt = tg_promote_types(a->u->dtype, b->u->dtype);
  return binary("div", a, b, B_ANY, is_intlike(dt) ? TG_FLOAT32 : dt, b_fdiv);
}

/* tensor ⊕ scalar: the scalar takes the tensor's dtype (weak typing). It is a kernel argument
 * (tg_scalar), except where its value picks the code: a literal (the exponent of pow_s). */
static tg_tensor *with_scalar(tg_tensor *t, double v, bool scalar_first, bool literal,
                              tg_tensor *(*f)(tg_tensor *, tg_tensor *)) {
  if (!t) return null_arg("scalar op");
  tg_scope *s = tg_scope_begin();
  size_t mark = uop_pool_mark();
  tg_tensor *c = literal ? tensor_wrap(uop_const(t->u->dtype, v)) : tg_scalar(v, t->u->dtype);
  uop_pool_release(mark);
  tg_tensor *r = c ? tg_keep(scalar_first ? f(c, t) : f(t, c)) : NULL;
  tg_scope_end(s);
  return r;
}

tg_tensor *tg_add_s(tg_tensor *a, double b) { return with_scalar(a, b, false, false, tg_add); }
tg_tensor *tg_sub_s(tg_tensor *a, double b) { return with_scalar(a, b, false, false, tg_sub); }
tg_tensor *tg_mul_s(tg_tensor *a, double b) { return with_scalar(a, b, false, false, tg_mul); }
/* An integer tensor to a negative scalar power is an error (PyTorch raises): its value could
 * only be 0, ±1 or a division by zero. (A tensor exponent is data: its negative entries give
 * the truncated power, like PyTorch.) */
tg_tensor *tg_pow_s(tg_tensor *a, double b) {
  if (a && !dtype_is_float(a->u->dtype) && b < 0)
    return tensor_error("pow_s: an integer tensor (%s) to the negative power %g; cast it to a float first",
                        tg_dtype_name(a->u->dtype), b);
  return with_scalar(a, b, false, true, tg_pow);
}
tg_tensor *tg_rsub_s(double a, tg_tensor *b) { return with_scalar(b, a, true, false, tg_sub); }
tg_tensor *tg_div_s(tg_tensor *a, double b) {
  if (!a) return null_arg("div_s");
  if (!dtype_is_float(a->u->dtype)) { /* true division: the scalar is a float32 */
    tg_scope *s = tg_scope_begin();
    tg_tensor *r = tg_keep(tg_div(a, tg_scalar(b, TG_FLOAT32)));
    tg_scope_end(s);
    return r;
  }
  return with_scalar(a, b, false, false, tg_div);
}

tg_tensor *tg_where(tg_tensor *cond, tg_tensor *a, tg_tensor *b) {
  if (!cond || !a || !b) return null_arg("where");
  POOL_BEGIN;
  int64_t s1[TG_MAX_DIMS], s2[TG_MAX_DIMS];
  int n1, n2;
  uop *x, *y;
  tg_dtype dt = TG_DTYPE_COUNT;
  if (!prep2("where", a, b, &x, &y, &dt) || !broadcast_shape("where", cond->u, x, s1, &n1)) {
    uop_pool_release(pool_mark_);
    return NULL;
  }
  (void)s2, (void)n2;
  uop *c = ucast(broadcast_to(cond->u, s1, n1), TG_BOOL);
  POOL_END(where(c, broadcast_to(x, s1, n1), broadcast_to(y, s1, n1)));
}

/* ---------------------------------------------------------------- unary API */

typedef enum { U_ANY, U_NUMERIC, U_INT, U_FLOAT, U_FLOAT_PRECISE } un_domain;

/* U_FLOAT: ints become float32. U_FLOAT_PRECISE: also computed in float64 and rounded back,
 * so float32 results of composite transcendentals stay within an ulp or two. */
static tg_tensor *unary(const char *name, tg_tensor *t, un_domain dom, uop *(*build)(uop *)) {
  if (!t) return null_arg(name);
  tg_dtype dt = t->u->dtype;
  if ((dom == U_INT && dtype_is_float(dt)) || (dom == U_NUMERIC && dt == TG_BOOL))
    return tensor_error("%s: not defined for dtype %s", name, tg_dtype_name(dt));
  POOL_BEGIN;
  uop *x = t->u;
  tg_dtype out = dt;
  if ((dom == U_FLOAT || dom == U_FLOAT_PRECISE) && !dtype_is_float(dt)) out = TG_FLOAT32, x = ucast(x, out);
  if (dom == U_FLOAT_PRECISE && out != TG_FLOAT64) x = ucast(x, TG_FLOAT64);
  POOL_END(ucast(build(x), out));
}

static const double LOG2E = 1.4426950408889634, LN2 = 0.6931471805599453, HALF_PI = 1.5707963267948966;

static uop *u_neg(uop *x) { return un(OP_NEG, x); }
static uop *u_exp(uop *x) { return un(OP_EXP2, bin(OP_MUL, x, k(x, LOG2E))); }
static uop *u_exp2(uop *x) { return un(OP_EXP2, x); }
static uop *u_log(uop *x) { return bin(OP_MUL, un(OP_LOG2, x), k(x, LN2)); }
static uop *u_log2(uop *x) { return un(OP_LOG2, x); }
static uop *u_sqrt(uop *x) { return un(OP_SQRT, x); }
static uop *u_rsqrt(uop *x) { return un(OP_RECIP, un(OP_SQRT, x)); }
/* max(x, 0), NaN stays: a vector max (a select form ran 2.5-4x slower); its gradient at 0 is 0
 * like PyTorch's, as the MAX rule gives a tie with a literal constant nothing. */
static uop *u_relu(uop *x) { return bin(OP_MAX, x, k(x, 0)); }
static uop *u_abs(uop *x) {
  if (x->dtype == TG_BOOL || dtype_is_unsigned(x->dtype)) return x;
  if (!dtype_is_float(x->dtype)) return bin(OP_MAX, x, un(OP_NEG, x));
  /* ±0 → +0 (a constant: gradient 0 at the kink, like PyTorch); NaN stays */
  return where(bin(OP_CMPLT, x, k(x, 0)), un(OP_NEG, x), where(bin(OP_CMPEQ, x, k(x, 0)), k(x, 0), x));
}
/* -|x| whose gradient is ±1 everywhere (1 at 0): for composites whose derivative at 0 comes
 * from both sides alike (sigmoid, tanh), where abs's zero gradient at the kink would be wrong. */
static uop *u_neg_abs(uop *x) { return where(bin(OP_CMPLT, x, k(x, 0)), x, un(OP_NEG, x)); }
static uop *u_sign(uop *x) {
  if (x->dtype == TG_BOOL) return x;
  uop *pos = bin(OP_CMPLT, k(x, 0), x), *neg = bin(OP_CMPLT, x, k(x, 0));
  if (!dtype_is_float(x->dtype)) return bin(OP_SUB, ucast(pos, x->dtype), ucast(neg, x->dtype));
  /* keeps ±0 and NaN; detached: the gradient of sign is 0 everywhere (PyTorch) */
  return where(pos, k(x, 1), where(neg, k(x, -1), uop_new1(OP_DETACH, x->dtype, x)));
}
static uop *u_recip(uop *x) { return un(OP_RECIP, x); }
static uop *u_square(uop *x) { return bin(OP_MUL, x, x); }
static uop *u_sin(uop *x) { return un(OP_SIN, x); }
static uop *u_cos(uop *x) { return un(OP_SIN, bin(OP_ADD, x, k(x, HALF_PI))); }
static uop *u_tan(uop *x) { return bin(OP_FDIV, u_sin(x), u_cos(x)); }
/* e = exp(-|x|) never overflows, so neither the value nor its derivative meets inf:
 * sigmoid = 1 / (1 + e) for x >= 0, e / (1 + e) below */
static uop *u_sigmoid(uop *x) {
  uop *e = u_exp(u_neg_abs(x)), *r = un(OP_RECIP, bin(OP_ADD, k(x, 1), e));
  return where(bin(OP_CMPLT, x, k(x, 0)), bin(OP_MUL, e, r), r);
}
static uop *u_tanh(uop *x) {
  /* sign(x) * (1 - e) / (1 + e), e = exp(-2|x|): no overflow for large |x| */
  uop *e = u_exp(bin(OP_MUL, u_neg_abs(x), k(x, 2)));
  uop *m = bin(OP_FDIV, bin(OP_SUB, k(x, 1), e), bin(OP_ADD, k(x, 1), e));
  return where(bin(OP_CMPLT, x, k(x, 0)), un(OP_NEG, m), where(bin(OP_CMPEQ, x, k(x, 0)), x, m));
}
static uop *u_trunc(uop *x) { return dtype_is_float(x->dtype) ? un(OP_TRUNC, x) : x; }
static uop *u_floor(uop *x) {
  if (!dtype_is_float(x->dtype)) return x;
  uop *t = un(OP_TRUNC, x);
  return where(bin(OP_CMPLT, x, t), bin(OP_SUB, t, k(t, 1)), t);
}
static uop *u_ceil(uop *x) {
  if (!dtype_is_float(x->dtype)) return x;
  uop *t = un(OP_TRUNC, x);
  return where(bin(OP_CMPLT, t, x), bin(OP_ADD, t, k(t, 1)), t);
}
static uop *u_round(uop *x) { /* half to even; exact: x - floor(x) has no rounding error */
  if (!dtype_is_float(x->dtype)) return x;
  uop *f = u_floor(x), *d = bin(OP_SUB, x, f), *half = k(x, 0.5), *up = bin(OP_ADD, f, k(f, 1));
  uop *even = bin(OP_CMPEQ, umod(f, k(f, 2)), k(f, 0));
  return where(bin(OP_CMPLT, half, d), up, where(bin(OP_CMPLT, d, half), f, where(even, f, up)));
}
static uop *u_isnan(uop *x) {
  return dtype_is_float(x->dtype) ? bin(OP_CMPNE, x, x) : uconst_like(x, 0, TG_BOOL);
}
static uop *u_isinf(uop *x) {
  if (!dtype_is_float(x->dtype)) return uconst_like(x, 0, TG_BOOL);
  return bin(OP_OR, bin(OP_CMPEQ, x, k(x, INFINITY)), bin(OP_CMPEQ, x, k(x, -INFINITY)));
}
static uop *u_lnot(uop *x) { return lnot(ucast(x, TG_BOOL)); }
static uop *u_bnot(uop *x) { return un(OP_NOT, x); }

tg_tensor *tg_neg(tg_tensor *t) { return unary("neg", t, U_NUMERIC, u_neg); }
tg_tensor *tg_exp(tg_tensor *t) { return unary("exp", t, U_FLOAT_PRECISE, u_exp); }
tg_tensor *tg_exp2(tg_tensor *t) { return unary("exp2", t, U_FLOAT, u_exp2); }
tg_tensor *tg_log(tg_tensor *t) { return unary("log", t, U_FLOAT_PRECISE, u_log); }
tg_tensor *tg_log2(tg_tensor *t) { return unary("log2", t, U_FLOAT, u_log2); }
tg_tensor *tg_sqrt(tg_tensor *t) { return unary("sqrt", t, U_FLOAT, u_sqrt); }
tg_tensor *tg_rsqrt(tg_tensor *t) { return unary("rsqrt", t, U_FLOAT_PRECISE, u_rsqrt); }
tg_tensor *tg_relu(tg_tensor *t) { return unary("relu", t, U_NUMERIC, u_relu); }
tg_tensor *tg_abs(tg_tensor *t) { return unary("abs", t, U_ANY, u_abs); }
tg_tensor *tg_sign(tg_tensor *t) { return unary("sign", t, U_ANY, u_sign); }
tg_tensor *tg_reciprocal(tg_tensor *t) { return unary("reciprocal", t, U_FLOAT, u_recip); }
tg_tensor *tg_square(tg_tensor *t) { return unary("square", t, U_NUMERIC, u_square); }
tg_tensor *tg_sin(tg_tensor *t) { return unary("sin", t, U_FLOAT_PRECISE, u_sin); }
tg_tensor *tg_cos(tg_tensor *t) { return unary("cos", t, U_FLOAT_PRECISE, u_cos); }
tg_tensor *tg_tan(tg_tensor *t) { return unary("tan", t, U_FLOAT_PRECISE, u_tan); }
tg_tensor *tg_tanh(tg_tensor *t) { return unary("tanh", t, U_FLOAT_PRECISE, u_tanh); }
tg_tensor *tg_sigmoid(tg_tensor *t) { return unary("sigmoid", t, U_FLOAT_PRECISE, u_sigmoid); }
tg_tensor *tg_floor(tg_tensor *t) { return unary("floor", t, U_ANY, u_floor); }
tg_tensor *tg_ceil(tg_tensor *t) { return unary("ceil", t, U_ANY, u_ceil); }
tg_tensor *tg_round(tg_tensor *t) { return unary("round", t, U_ANY, u_round); }
tg_tensor *tg_trunc(tg_tensor *t) { return unary("trunc", t, U_ANY, u_trunc); }
tg_tensor *tg_bitwise_not(tg_tensor *t) { return unary("bitwise_not", t, U_INT, u_bnot); }

static tg_tensor *to_bool(const char *name, tg_tensor *t, uop *(*build)(uop *)) {
  if (!t) return null_arg(name);
  POOL_BEGIN;
  POOL_END(build(t->u));
}
tg_tensor *tg_isnan(tg_tensor *t) { return to_bool("isnan", t, u_isnan); }
tg_tensor *tg_isinf(tg_tensor *t) { return to_bool("isinf", t, u_isinf); }
tg_tensor *tg_logical_not(tg_tensor *t) { return to_bool("logical_not", t, u_lnot); }

/* ---------------------------------------------------------------- more float functions
 * Composites built from the primitives, in float64 for float32 and 16-bit inputs (U_FLOAT_PRECISE,
 * an ulp or two of float32); float64 inputs keep ~1e-14 relative. Odd functions are f(x) =
 * s·f(s·x) with s = ±1: s·x has derivative s, never 0, so the gradient at 0 is right (|x| has
 * gradient 0 there). A where's branch sees only the inputs it is selected for (a harmless constant
 * elsewhere), so an unselected branch's inf or NaN never reaches a gradient. */

static uop *add(uop *a, uop *b) { return bin(OP_ADD, a, b); }
static uop *sub(uop *a, uop *b) { return bin(OP_SUB, a, b); }
static uop *mul(uop *a, uop *b) { return bin(OP_MUL, a, b); }
static uop *quot(uop *a, uop *b) { return bin(OP_FDIV, a, b); }
static uop *lt_k(uop *a, double v) { return bin(OP_CMPLT, a, k(a, v)); }
static uop *gt_k(uop *a, double v) { return bin(OP_CMPLT, k(a, v), a); }
static uop *land(uop *a, uop *b) { return bin(OP_AND, a, b); }
static uop *lor(uop *a, uop *b) { return bin(OP_OR, a, b); }
/* x where c holds, the constant v elsewhere */
static uop *only(uop *c, uop *x, double v) { return where(c, x, k(x, v)); }
/* f(±0) = ±0 for an odd f whose formula loses the sign of zero; the gradient there is 1 */
static uop *keep_zero(uop *x, uop *fx) { return where(bin(OP_CMPEQ, x, k(x, 0)), x, fx); }
/* -1 where x < 0, else 1 */
static uop *sgn1(uop *x) { return where(lt_k(x, 0), k(x, -1), k(x, 1)); }
/* The sign bit of a float32/float64 (set for -0 and for a NaN with its sign bit) */
static uop *signbit(uop *x) {
  tg_dtype it = x->dtype == TG_FLOAT64 ? TG_INT64 : TG_INT32;
  return bin(OP_CMPLT, uop_new1(OP_BITCAST, it, x), uconst_like(x, 0, it));
}

/* c[0] x^(n-1) + ... + c[n-1] (Horner); poly1: the same with a leading 1 (x^n + c[0] x^(n-1) + ...) */
static uop *poly(uop *x, const double *c, int n) {
  uop *r = k(x, c[0]);
  for (int i = 1; i < n; i++) r = add(mul(r, x), k(x, c[i]));
  return r;
}
static uop *poly1(uop *x, const double *c, int n) {
  uop *r = add(x, k(x, c[0]));
  for (int i = 1; i < n; i++) r = add(mul(r, x), k(x, c[i]));
  return r;
}

/* log(1 + x): Taylor to x^8 for |x| < 1e-2 (error < 1e-17 relative), log(1 + x) above (the
 * rounding of 1 + x is at most 1e-14 relative there) */
static uop *u_log1p(uop *x) {
  static const double c[] = {-1.0 / 8, 1.0 / 7, -1.0 / 6, 1.0 / 5, -1.0 / 4, 1.0 / 3, -1.0 / 2, 1};
  uop *small = lt_k(mul(x, x), 1e-4), *xs = only(small, x, 0);
  return where(small, mul(xs, poly(xs, c, 8)), u_log(add(where(small, k(x, 0), x), k(x, 1))));
}
/* e^x - 1: Taylor to x^8 for |x| < 1e-2, e^x - 1 above */
static uop *u_expm1(uop *x) {
  static const double c[] = {1.0 / 40320, 1.0 / 5040, 1.0 / 720, 1.0 / 120, 1.0 / 24, 1.0 / 6, 1.0 / 2, 1};
  uop *small = lt_k(mul(x, x), 1e-4), *xs = only(small, x, 0);
  return where(small, mul(xs, poly(xs, c, 8)), sub(u_exp(where(small, k(x, 0), x)), k(x, 1)));
}

static const double PI = 3.14159265358979323846, PIO4 = 0.78539816339744830962;
/* atan: Cephes (S. Moshier) — |x| reduced to [0, 0.66] by pi/2 - atan(1/x) above tan(3pi/8) and
 * pi/4 + atan((x-1)/(x+1)) above 0.66, then x + x z P(z)/Q(z), z = x² (1e-16 relative) */
static const double ATAN_P[] = {-8.750608600031904122785E-1, -1.615753718733365076637E1, -7.500855792314704667340E1,
                                -1.228866684490136173410E2, -6.485021904942025371773E1};
static const double ATAN_Q[] = {2.485846490142306297962E1, 1.650270098316988542046E2, 4.328810604912902668951E2,
                                4.853903996359136964868E2, 1.945506571482613964425E2};
static const double T3P8 = 2.41421356237309504880, MOREBITS = 6.123233995736765886130E-17;

static uop *u_atan(uop *x) {
  uop *s = sgn1(x), *a = mul(x, s), *one = k(a, 1);
  uop *big = gt_k(a, T3P8), *mid = land(gt_k(a, 0.66), lnot(big));
  uop *ab = where(big, a, one), *am = only(mid, a, 0);
  uop *r = where(big, un(OP_NEG, un(OP_RECIP, ab)), where(mid, quot(sub(am, one), add(am, one)), a));
  uop *z = mul(r, r), *y = add(r, mul(r, quot(mul(z, poly(z, ATAN_P, 5)), poly1(z, ATAN_Q, 5))));
  uop *off = where(big, k(x, 2 * PIO4 + MOREBITS), k(x, PIO4 + 0.5 * MOREBITS));
  return keep_zero(x, mul(s, where(lor(big, mid), add(off, y), y)));
}
/* asin x = atan(x / sqrt((1-x)(1+x))), acos x = 2 atan(sqrt((1-x)/(1+x))): no cancellation near ±1 */
static uop *u_asin(uop *x) {
  uop *one = k(x, 1);
  return u_atan(quot(x, un(OP_SQRT, mul(sub(one, x), add(one, x)))));
}
static uop *u_acos(uop *x) {
  uop *one = k(x, 1);
  return mul(k(x, 2), u_atan(un(OP_SQRT, quot(sub(one, x), add(one, x)))));
}
/* atan2 from atan(min/max) of |y|, |x| in [0, 1], then the octant; sign bits choose ±0's angle
 * (atan2(0, -0) = pi) like C and PyTorch; inf/inf is pi/4 */
static uop *b_atan2(uop *y, uop *x) {
  uop *nx = signbit(x), *sy = where(signbit(y), k(y, -1), k(y, 1));
  uop *ax = mul(x, where(nx, k(x, -1), k(x, 1))), *ay = mul(y, sy);
  uop *swap = bin(OP_CMPLT, ax, ay), *num = where(swap, ax, ay), *den = where(swap, ay, ax);
  uop *infs = land(bin(OP_CMPEQ, ax, k(x, INFINITY)), bin(OP_CMPEQ, ay, k(x, INFINITY)));
  uop *zero = land(bin(OP_CMPEQ, den, k(x, 0)), bin(OP_CMPEQ, num, k(x, 0))), *plain = lnot(lor(infs, zero));
  uop *t = where(plain, quot(only(plain, num, 1), only(plain, den, 1)), where(infs, k(x, 1), k(x, 0)));
  uop *a = u_atan(t);
  a = where(swap, sub(k(a, 2 * PIO4), a), a);
  return mul(where(nx, sub(k(a, PI), a), a), sy);
}

/* sinh: x·(1 + x²/3! + ... + x^14/15!) for |x| < 0.5, e^(|x| - ln2) - e^(-|x| - ln2) above
 * (halving inside the exp: no overflow before the result overflows) */
static uop *u_sinh(uop *x) {
  static const double c[] = {1.0 / 1307674368000, 1.0 / 6227020800, 1.0 / 39916800, 1.0 / 362880,
                             1.0 / 5040, 1.0 / 120, 1.0 / 6, 1};
  uop *s = sgn1(x), *a = mul(x, s), *small = lt_k(a, 0.5);
  uop *as = only(small, a, 0), *al = where(small, k(a, 1), a);
  uop *big = sub(u_exp(sub(al, k(a, LN2))), u_exp(sub(un(OP_NEG, al), k(a, LN2))));
  return mul(s, where(small, mul(as, poly(mul(as, as), c, 8)), big));
}
static uop *u_cosh(uop *x) {
  uop *a = mul(x, sgn1(x));
  return add(u_exp(sub(a, k(a, LN2))), u_exp(sub(un(OP_NEG, a), k(a, LN2))));
}
/* asinh |x| = log1p(|x| + x²/(1 + sqrt(1 + x²))), log|x| + ln2 above 2^28 */
static uop *u_asinh(uop *x) {
  uop *s = sgn1(x), *a = mul(x, s), *big = gt_k(a, 0x1p28), *one = k(a, 1);
  uop *am = where(big, k(a, 0), a), *a2 = mul(am, am);
  uop *m = u_log1p(add(am, quot(a2, add(one, un(OP_SQRT, add(one, a2))))));
  return keep_zero(x, mul(s, where(big, add(u_log(only(big, a, 1)), k(a, LN2)), m)));
}
/* acosh x = log1p(t + sqrt(t) sqrt(t + 2)), t = x - 1 (two roots: the gradient at x = 1 is
 * inf, not inf · 0); log x + ln2 above 2^28; NaN below 1 */
static uop *u_acosh(uop *x) {
  uop *big = gt_k(x, 0x1p28), *low = lt_k(x, 1), *mid = lnot(lor(big, low));
  uop *t = sub(only(mid, x, 1), k(x, 1));
  uop *m = u_log1p(add(t, mul(un(OP_SQRT, t), un(OP_SQRT, add(t, k(t, 2))))));
  return where(low, k(x, NAN), where(big, add(u_log(only(big, x, 2)), k(x, LN2)), m));
}
/* atanh |x| = log1p(2|x| / (1 - |x|)) / 2 */
static uop *u_atanh(uop *x) {
  uop *s = sgn1(x), *a = mul(x, s);
  return mul(s, mul(k(x, 0.5), u_log1p(quot(mul(a, k(a, 2)), sub(k(a, 1), a)))));
}

/* erf: Cephes (S. Moshier) — x T(x²)/U(x²) for |x| < 1; 1 - erfc above, erfc = e^(-x²) P(x)/Q(x)
 * below 8 and e^(-x²) R(x)/S(x) from 8 (|x| capped at 10, where erf is 1 in float64) */
static const double ERF_T[] = {9.60497373987051638749E0, 9.00260197203842689217E1, 2.23200534594684319226E3,
                               7.00332514112805075473E3, 5.55923013010394962768E4};
static const double ERF_U[] = {3.35617141647503099647E1, 5.21357949780152679795E2, 4.59432382970980127987E3,
                               2.26290000613890934246E4, 4.92673942608635921086E4};
static const double ERF_P[] = {2.46196981473530512524E-10, 5.64189564831068821977E-1, 7.46321056442269912687E0,
                               4.86371970985681366614E1,   1.96520832956077098242E2,  5.26445194995477358631E2,
                               9.34528527171957607540E2,   1.02755188689515710272E3,  5.57535335369399327526E2};
static const double ERF_Q[] = {1.32281951154744992508E1, 8.67072140885989742329E1, 3.54937778887819891062E2,
                               9.75708501743205489753E2, 1.82390916687909736289E3, 2.24633760818710981792E3,
                               1.65666309194161350182E3, 5.57535340817727675546E2};
static const double ERF_R[] = {5.64189583547755073984E-1, 1.27536670759978104416E0, 5.01905042251180477414E0,
                               6.16021097993053585195E0,  7.40974269950448939160E0, 2.97886665372100240670E0};
static const double ERF_S[] = {2.26052863220117276590E0, 9.39603524938001434673E0, 1.20489539808096656605E1,
                               1.70814450747565897222E1, 9.60896809063285878198E0, 3.36907645100081516050E0};

static uop *u_erf(uop *x) {
  uop *s = sgn1(x), *a = mul(x, s), *inner = lt_k(a, 1);
  uop *ai = only(inner, a, 0), *z = mul(ai, ai);
  uop *vi = quot(mul(ai, poly(z, ERF_T, 5)), poly1(z, ERF_U, 5));
  uop *ao = where(inner, k(a, 2), where(gt_k(a, 10), k(a, 10), a)); /* NaN stays */
  uop *near = lt_k(ao, 8), *an = only(near, ao, 2), *af = where(near, k(a, 8), ao);
  uop *pq = where(near, quot(poly(an, ERF_P, 9), poly1(an, ERF_Q, 8)), quot(poly(af, ERF_R, 6), poly1(af, ERF_S, 6)));
  uop *erfc = mul(u_exp(un(OP_NEG, mul(ao, ao))), pq);
  return mul(s, where(inner, vi, sub(k(a, 1), erfc)));
}

static const double LOG10_2 = 0.30102999566398119521;
static uop *u_log10(uop *x) { return mul(un(OP_LOG2, x), k(x, LOG10_2)); }
static uop *u_isfinite(uop *x) {
  if (!dtype_is_float(x->dtype)) return uconst_like(x, 1, TG_BOOL);
  return land(lt_k(x, INFINITY), gt_k(x, -INFINITY));
}

tg_tensor *tg_log1p(tg_tensor *t) { return unary("log1p", t, U_FLOAT_PRECISE, u_log1p); }
tg_tensor *tg_expm1(tg_tensor *t) { return unary("expm1", t, U_FLOAT_PRECISE, u_expm1); }
tg_tensor *tg_log10(tg_tensor *t) { return unary("log10", t, U_FLOAT_PRECISE, u_log10); }
tg_tensor *tg_atan(tg_tensor *t) { return unary("atan", t, U_FLOAT_PRECISE, u_atan); }
tg_tensor *tg_asin(tg_tensor *t) { return unary("asin", t, U_FLOAT_PRECISE, u_asin); }
tg_tensor *tg_acos(tg_tensor *t) { return unary("acos", t, U_FLOAT_PRECISE, u_acos); }
tg_tensor *tg_sinh(tg_tensor *t) { return unary("sinh", t, U_FLOAT_PRECISE, u_sinh); }
tg_tensor *tg_cosh(tg_tensor *t) { return unary("cosh", t, U_FLOAT_PRECISE, u_cosh); }
tg_tensor *tg_asinh(tg_tensor *t) { return unary("asinh", t, U_FLOAT_PRECISE, u_asinh); }
tg_tensor *tg_acosh(tg_tensor *t) { return unary("acosh", t, U_FLOAT_PRECISE, u_acosh); }
tg_tensor *tg_atanh(tg_tensor *t) { return unary("atanh", t, U_FLOAT_PRECISE, u_atanh); }
tg_tensor *tg_erf(tg_tensor *t) { return unary("erf", t, U_FLOAT_PRECISE, u_erf); }
tg_tensor *tg_isfinite(tg_tensor *t) { return to_bool("isfinite", t, u_isfinite); }

/* Binary float functions: promoted, ints and bools become float32; computed in float64 when
 * precise (else 16-bit floats in float32), the result in the promoted dtype. */
static tg_tensor *binary_float(const char *name, tg_tensor *ta, tg_tensor *tb, bool precise, uop *(*build)(uop *, uop *)) {
  if (!ta || !tb) return null_arg(name);
  tg_dtype out = tg_promote_types(ta->u->dtype, tb->u->dtype);
  if (!dtype_is_float(out)) out = TG_FLOAT32;
  tg_dtype calc = precise ? TG_FLOAT64 : dtype_is_half(out) ? TG_FLOAT32 : out;
  POOL_BEGIN;
  uop *a, *b;
  if (!prep2(name, ta, tb, &a, &b, &calc)) { uop_pool_release(pool_mark_); return NULL; }
  POOL_END(ucast(build(a, b), out));
}

/* |a| with b's sign bit (a NaN's too); the gradient is ±1 away from a = 0, 0 at it, none for b */
static uop *b_copysign(uop *a, uop *b) {
  uop *m = u_abs(a);
  return where(signbit(b), un(OP_NEG, m), m);
}
/* max + log1p(e^-|a-b|); equal infinities give themselves (inf - inf would be NaN) */
static uop *b_logaddexp(uop *a, uop *b) {
  uop *same_inf = land(bin(OP_CMPEQ, a, b), bin(OP_CMPEQ, u_abs(a), k(a, INFINITY)));
  uop *m = bin(OP_MAX, a, b), *d = where(same_inf, k(a, 0), sub(a, b));
  return where(same_inf, a, add(m, u_log1p(u_exp(un(OP_NEG, u_abs(d))))));
}

tg_tensor *tg_atan2(tg_tensor *y, tg_tensor *x) { return binary_float("atan2", y, x, true, b_atan2); }
tg_tensor *tg_copysign(tg_tensor *a, tg_tensor *b) { return binary_float("copysign", a, b, false, b_copysign); }
tg_tensor *tg_logaddexp(tg_tensor *a, tg_tensor *b) { return binary_float("logaddexp", a, b, true, b_logaddexp); }

static uop *b_fmod(uop *a, uop *b) { return bin(OP_MOD, a, b); } /* C fmod and %: the sign of a */
tg_tensor *tg_fmod(tg_tensor *a, tg_tensor *b) { return binary("fmod", a, b, B_NUMERIC, TG_DTYPE_COUNT, b_fmod); }

/* PyTorch's formula: from the nearer end, so lerp(a, b, 1) is exactly b */
tg_tensor *tg_lerp(tg_tensor *start, tg_tensor *end, tg_tensor *weight) {
  if (!start || !end || !weight) return null_arg("lerp");
  tg_dtype dt = tg_promote_types(tg_promote_types(start->u->dtype, end->u->dtype), weight->u->dtype);
  if (!dtype_is_float(dt)) return tensor_error("lerp: needs float tensors, got %s", tg_dtype_name(dt));
  int64_t shape[TG_MAX_DIMS];
  int nd;
  if (!broadcast_shape("lerp", start->u, end->u, shape, &nd) || !broadcast_shape("lerp", start->u, weight->u, shape, &nd) ||
      !broadcast_shape("lerp", end->u, weight->u, shape, &nd))
    return NULL;
  tg_scope *s = tg_scope_begin();
  tg_tensor *d = tg_sub(end, start), *lo = tg_lt(tg_abs(weight), tg_scalar(0.5, dt));
  tg_tensor *r = tg_where(lo, tg_add(start, tg_mul(weight, d)), tg_sub(end, tg_mul(d, tg_rsub_s(1, weight))));
  r = tg_keep(r ? tg_cast(r, dt) : NULL);
  tg_scope_end(s);
  return r;
}
tg_tensor *tg_lerp_s(tg_tensor *start, tg_tensor *end, double weight) {
  if (!start || !end) return null_arg("lerp_s");
  tg_scope *s = tg_scope_begin();
  tg_tensor *r = tg_keep(tg_lerp(start, end, tg_scalar(weight, tg_promote_types(start->u->dtype, end->u->dtype))));
  tg_scope_end(s);
  return r;
}

/* ---------------------------------------------------------------- closeness */

/* |a - b| <= atol + rtol |b| (finite differences only), or a == b, or both NaN when equal_nan
 * (torch.isclose). Floats compare in their promoted dtype, ints and bools in float64. */
tg_tensor *tg_isclose(tg_tensor *a, tg_tensor *b, double rtol, double atol, bool equal_nan) {
  if (!a || !b) return null_arg("isclose");
  if (!(rtol >= 0) || !(atol >= 0)) return tensor_error("isclose: rtol %g and atol %g must be >= 0", rtol, atol);
  int64_t shape[TG_MAX_DIMS];
  int nd;
  if (!broadcast_shape("isclose", a->u, b->u, shape, &nd)) return NULL;
  tg_dtype dt = tg_promote_types(a->u->dtype, b->u->dtype);
  if (!dtype_is_float(dt)) dt = TG_FLOAT64;
  tg_scope *s = tg_scope_begin();
  tg_tensor *x = tg_cast(a, dt), *y = tg_cast(b, dt);
  tg_tensor *close = tg_eq(x, y);
  if (equal_nan) close = tg_logical_or(close, tg_logical_and(tg_isnan(x), tg_isnan(y)));
  tg_tensor *diff = tg_abs(tg_sub(x, y)), *allowed = tg_add_s(tg_abs(tg_mul_s(y, rtol)), atol);
  close = tg_logical_or(close, tg_logical_and(tg_isfinite(diff), tg_le(diff, allowed)));
  tg_tensor *r = tg_keep(close);
  tg_scope_end(s);
  return r;
}

int tg_allclose(tg_tensor *a, tg_tensor *b, double rtol, double atol, bool equal_nan) {
  tg_scope *s = tg_scope_begin();
  tg_tensor *all = tg_all(tg_isclose(a, b, rtol, atol, equal_nan), NULL, 0, false);
  bool v = false;
  int rc = all ? tg_to_host(all, &v, sizeof v) : TG_ERR_ARG;
  tg_scope_end(s);
  return rc < 0 ? rc : v;
}

tg_tensor *tg_clip(tg_tensor *t, double lo, double hi) {
  if (!t) return null_arg("clip");
  /* selects, not max/min: the gradient is 1 on [lo, hi] including the bounds (PyTorch), 0
   * outside; NaN passes; lo > hi gives hi everywhere (min(max(x, lo), hi)) */
  tg_scope *s = tg_scope_begin();
  tg_tensor *l = tg_scalar(lo, t->u->dtype), *h = tg_scalar(hi, t->u->dtype);
  tg_tensor *r = tg_where(tg_lt(t, l), l, t);
  r = tg_keep(tg_where(tg_lt(h, r), h, r));
  tg_scope_end(s);
  return r;
}

/* float → int without C's undefined behaviour for values out of range, giving what x86 gives
 * (and so PyTorch and numpy there): truncation toward 0 into int32 (int64 for 64-bit and uint32
 * targets), NaN and values outside that range becoming its minimum (x86's "integer indefinite"),
 * then wrapped to the target's width; uint64 takes [2^63, 2^64) exactly too. */
static uop *float_to_int(uop *x, tg_dtype dt) {
  bool wide = dtype_table[dt].size == 8 || dt == TG_UINT32;
  tg_dtype via = wide ? TG_INT64 : TG_INT32;
  double lim = wide ? 0x1p63 : 0x1p31;
  uop *t = un(OP_TRUNC, x), *ok = bin(OP_AND, lnot(bin(OP_CMPLT, t, k(t, -lim))), bin(OP_CMPLT, t, k(t, lim)));
  uop *r = where(ok, ucast(where(ok, t, k(t, 0)), via), uconst_like(t, dtype_table[via].min, via));
  if (dt != TG_UINT64) return ucast(r, dt);
  uop *top = bin(OP_AND, lnot(bin(OP_CMPLT, t, k(t, 0x1p63))), bin(OP_CMPLT, t, k(t, 0x1p64)));
  uop *hi = ucast(ucast(where(top, bin(OP_SUB, t, k(t, 0x1p63)), k(t, 0)), TG_INT64), TG_UINT64);
  return where(top, bin(OP_ADD, hi, uconst_like(t, 0x1p63, TG_UINT64)), ucast(r, TG_UINT64));
}

tg_tensor *tg_cast(tg_tensor *t, tg_dtype dtype) {
  if (!t) return null_arg("cast");
  if (!dtype_valid((int)dtype)) return tensor_error("cast: invalid dtype %d", (int)dtype);
  POOL_BEGIN;
  uop *x = t->u;
  POOL_END(dtype_is_float(x->dtype) && dtype_is_int(dtype) ? float_to_int(x, dtype) : ucast(x, dtype));
}

tg_tensor *tg_bitcast(tg_tensor *t, tg_dtype dtype) {
  if (!t) return null_arg("bitcast");
  if (!dtype_valid((int)dtype)) return tensor_error("bitcast: invalid dtype %d", (int)dtype);
  if (tg_dtype_size(dtype) != tg_dtype_size(t->u->dtype) || dtype == TG_BOOL) /* any byte is no valid bool */
    return tensor_error("bitcast: cannot reinterpret %s as %s (sizes differ or target is bool)", tg_dtype_name(t->u->dtype),
                        tg_dtype_name(dtype));
  POOL_BEGIN;
  POOL_END(t->u->dtype == dtype ? t->u : uop_new1(OP_BITCAST, dtype, t->u));
}

/* ---------------------------------------------------------------- shifts
 * A count outside [0, bits) shifts every bit out: 0 for <<, the sign fill (0 or -1) for >>,
 * as if shifting one bit at a time (PyTorch 2; 1.13 agrees for 8- and 16-bit types). The kernel
 * only ever shifts by in-range counts, and << works in uint64, so no C undefined behaviour
 * (negative or too-wide counts, shifted-out signed bits) can happen. */

static uop *ushift(uop *a, uop *n, bool left) {
  int bits = dtype_table[a->dtype].size * 8;
  uop *out = bin(OP_OR, bin(OP_CMPLT, n, k(n, 0)), lnot(bin(OP_CMPLT, n, k(n, bits))));
  uop *ok = where(out, k(n, 0), n);
  if (left) {
    uop *r = ucast(bin(OP_SHL, ucast(a, TG_UINT64), ucast(ok, TG_UINT64)), a->dtype);
    return where(out, k(a, 0), r);
  }
  uop *fill = dtype_is_unsigned(a->dtype) ? k(a, 0) : bin(OP_SHR, a, k(a, bits - 1));
  return where(out, fill, bin(OP_SHR, a, ok));
}

static tg_tensor *shift(const char *name, tg_tensor *t, int bits, bool left) {
  if (!t) return null_arg(name);
  tg_dtype dt = t->u->dtype;
  if (!dtype_is_int(dt)) return tensor_error("%s: not defined for dtype %s", name, tg_dtype_name(dt));
  if (bits < 0 || bits >= dtype_table[dt].size * 8)
    return tensor_error("%s: shift of %d bits out of range for %s", name, bits, tg_dtype_name(dt));
  POOL_BEGIN;
  POOL_END(ushift(t->u, k(t->u, bits), left));
}
tg_tensor *tg_shl(tg_tensor *a, int bits) { return shift("shl", a, bits, true); }
tg_tensor *tg_shr(tg_tensor *a, int bits) { return shift("shr", a, bits, false); }

static tg_tensor *shift_by(const char *name, tg_tensor *a, tg_tensor *b, bool left) {
  if (!a || !b) return null_arg(name);
  tg_dtype dt = tg_promote_types(a->u->dtype, b->u->dtype);
  if (!dtype_is_int(dt)) return tensor_error("%s: not defined for dtype %s", name, tg_dtype_name(dt));
  POOL_BEGIN;
  uop *x, *n;
  if (!prep2(name, a, b, &x, &n, &dt)) { uop_pool_release(pool_mark_); return NULL; }
  POOL_END(ushift(x, n, left));
}
tg_tensor *tg_bitwise_left_shift(tg_tensor *a, tg_tensor *b) { return shift_by("bitwise_left_shift", a, b, true); }
tg_tensor *tg_bitwise_right_shift(tg_tensor *a, tg_tensor *b) { return shift_by("bitwise_right_shift", a, b, false); }
