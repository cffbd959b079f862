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
tg_tensor *tg_pow_s(tg_tensor *a, double b) { return with_scalar(a, b, false, true, tg_pow); }
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
static uop *u_relu(uop *x) { return bin(OP_MAX, x, k(x, 0)); }
static uop *u_abs(uop *x) {
  if (x->dtype == TG_BOOL || dtype_is_unsigned(x->dtype)) return x;
  if (!dtype_is_float(x->dtype)) return bin(OP_MAX, x, un(OP_NEG, x));
  return where(bin(OP_CMPLT, x, k(x, 0)), un(OP_NEG, x), bin(OP_ADD, x, k(x, 0))); /* -0 + 0 = +0 */
}
static uop *u_sign(uop *x) {
  if (x->dtype == TG_BOOL) return x;
  uop *pos = bin(OP_CMPLT, k(x, 0), x), *neg = bin(OP_CMPLT, x, k(x, 0));
  if (!dtype_is_float(x->dtype)) return bin(OP_SUB, ucast(pos, x->dtype), ucast(neg, x->dtype));
  return where(pos, k(x, 1), where(neg, k(x, -1), x)); /* keeps ±0 and NaN */
}
static uop *u_recip(uop *x) { return un(OP_RECIP, x); }
static uop *u_square(uop *x) { return bin(OP_MUL, x, x); }
static uop *u_sin(uop *x) { return un(OP_SIN, x); }
static uop *u_cos(uop *x) { return un(OP_SIN, bin(OP_ADD, x, k(x, HALF_PI))); }
static uop *u_tan(uop *x) { return bin(OP_FDIV, u_sin(x), u_cos(x)); }
/* e = exp(-|x|) never overflows, so neither the value nor its derivative meets inf:
 * sigmoid = 1 / (1 + e) for x >= 0, e / (1 + e) below */
static uop *u_sigmoid(uop *x) {
  uop *e = u_exp(un(OP_NEG, u_abs(x))), *r = un(OP_RECIP, bin(OP_ADD, k(x, 1), e));
  return where(bin(OP_CMPLT, x, k(x, 0)), bin(OP_MUL, e, r), r);
}
static uop *u_tanh(uop *x) {
  /* sign(x) * (1 - e) / (1 + e), e = exp(-2|x|): no overflow for large |x| */
  uop *e = u_exp(bin(OP_MUL, u_abs(x), k(x, -2)));
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

tg_tensor *tg_clip(tg_tensor *t, double lo, double hi) {
  if (!t) return null_arg("clip");
  tg_scope *s = tg_scope_begin();
  tg_tensor *r = tg_keep(tg_minimum(tg_maximum(t, tg_scalar(lo, t->u->dtype)), tg_scalar(hi, t->u->dtype)));
  tg_scope_end(s);
  return r;
}

tg_tensor *tg_cast(tg_tensor *t, tg_dtype dtype) {
  if (!t) return null_arg("cast");
  if (!dtype_valid((int)dtype)) return tensor_error("cast: invalid dtype %d", (int)dtype);
  POOL_BEGIN;
  POOL_END(ucast(t->u, dtype));
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

static tg_tensor *shift(const char *name, tg_tensor *t, int bits, uop_op op) {
  if (!t) return null_arg(name);
  tg_dtype dt = t->u->dtype;
  if (!dtype_is_int(dt)) return tensor_error("%s: not defined for dtype %s", name, tg_dtype_name(dt));
  if (bits < 0 || bits >= dtype_table[dt].size * 8)
    return tensor_error("%s: shift of %d bits out of range for %s", name, bits, tg_dtype_name(dt));
  POOL_BEGIN;
  POOL_END(bin(op, t->u, k(t->u, bits)));
}
tg_tensor *tg_shl(tg_tensor *a, int bits) { return shift("shl", a, bits, OP_SHL); }
tg_tensor *tg_shr(tg_tensor *a, int bits) { return shift("shr", a, bits, OP_SHR); }
