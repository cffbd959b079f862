/* test_symbolic.c — the symbolic rules (src/uop/symbolic.c) and the pattern language and
 * rewrite engine (src/uop/rewrite.c).
 *
 * A simplification is checked twice: for its shape (what the rule should produce) and for
 * its meaning. A brute-force evaluator (below, written independently of symbolic.c) runs
 * the original and the simplified expression for every value of every variable in range
 * and they must agree; simplifying the result again must return the same node (a fixed
 * point). Variables are RANGE uops like the ones lower.c makes (values 0..n-1), and "wide"
 * int64 values with no known range (a LOAD), evaluated at a list of edge values. Integer
 * arithmetic wraps (kernels are compiled with -fwrapv) and / and % truncate like C. */
#include <stdint.h>
#include <stdlib.h>
#include "harness.h"
#include "uop/dtype.h"
#include "uop/symbolic.h"

/* ------------------------------------------------------------ building blocks */

/* Loop variable number id with values 0..n-1 (arg = {id, kind} as in lower.c). */
static uop *var(int id, int64_t n) {
  int64_t arg[2] = {id, 0};
  uop *end = uop_idx(n);
  return uop_new(OP_RANGE, TG_INT64, &end, 1, arg, 2);
}

/* A value of dtype dt with no known range: element 0 of buffer `id`. */
static uop *wide_of(int id, tg_dtype dt) {
  int64_t slot = id;
  uop *g = uop_new(OP_DEFINE_GLOBAL, dt, NULL, 0, &slot, 1);
  return uop_new2(OP_LOAD, dt, g, uop_idx(0));
}
static uop *wide(int id) { return wide_of(id, TG_INT64); }

static uop *k64(int64_t v) { return uop_idx(v); }
static uop *add(uop *a, uop *b) { return uop_add(a, b); }
static uop *mul(uop *a, uop *b) { return uop_mul(a, b); }
static uop *sub(uop *a, uop *b) { return uop_alu(OP_SUB, a, b); }
static uop *idiv(uop *a, uop *b) { return uop_alu(OP_IDIV, a, b); }
static uop *mod(uop *a, uop *b) { return uop_alu(OP_MOD, a, b); }
static uop *lt(uop *a, uop *b) { return uop_alu(OP_CMPLT, a, b); }

static bool is_const(const uop *u, int64_t v) { return u && u->op == OP_CONST && u->arg[0] == v; }

/* How many nodes of op are in the graph under u. */
static int count_op(uop *u, uop_op op) {
  uop **order;
  int n = uop_toposort(u, &order), c = 0;
  for (int i = 0; i < n; i++) c += order[i]->op == op;
  free(order);
  return c;
}

/* Whether x occurs in the graph under u. */
static bool contains(uop *u, uop *x) {
  uop **order;
  int n = uop_toposort(u, &order);
  bool found = false;
  for (int i = 0; i < n; i++) found |= order[i] == x;
  free(order);
  return found;
}

/* ------------------------------------------------------------ the reference evaluator */

typedef struct binding {
  uop *var;
  int64_t val;
} binding;

typedef struct evaluator {
  binding b[8];
  int n;
  bool undefined; /* a division by zero or an out-of-range shift was evaluated */
} evaluator;

static int64_t wrap_to(tg_dtype dt, int64_t v) {
  switch (dt) {
    case TG_BOOL: return v != 0;
    case TG_INT8: return (int8_t)v;
    case TG_INT16: return (int16_t)v;
    case TG_INT32: return (int32_t)v;
    case TG_UINT8: return (uint8_t)v;
    case TG_UINT16: return (uint16_t)v;
    case TG_UINT32: return (uint32_t)v;
    default: return v;
  }
}

static int64_t apply_int(evaluator *e, uop_op op, tg_dtype sdt, int64_t a, int64_t b) {
  uint64_t ua = (uint64_t)a, ub = (uint64_t)b;
  bool uns = dtype_is_unsigned(sdt) || sdt == TG_BOOL;
  switch (op) {
    case OP_ADD: return (int64_t)(ua + ub);
    case OP_SUB: return (int64_t)(ua - ub);
    case OP_MUL: return (int64_t)(ua * ub);
    case OP_NEG: return (int64_t)(0 - ua);
    case OP_IDIV:
      if (b == 0) return e->undefined = true, 0;
      if (uns) return (int64_t)(ua / ub);
      return b == -1 ? (int64_t)(0 - ua) : a / b;
    case OP_MOD:
      if (b == 0) return e->undefined = true, 0;
      if (uns) return (int64_t)(ua % ub);
      return b == -1 ? 0 : a % b;
    case OP_MAX: return uns ? (ua > ub ? a : b) : (a > b ? a : b);
    case OP_AND: return a & b;
    case OP_OR: return a | b;
    case OP_XOR: return a ^ b;
    case OP_NOT: return sdt == TG_BOOL ? !a : ~a;
    case OP_SHL: if (b < 0 || b > 63) return e->undefined = true, 0; return (int64_t)(ua << b);
    case OP_SHR: if (b < 0 || b > 63) return e->undefined = true, 0; return uns ? (int64_t)(ua >> b) : a >> b;
    case OP_CMPLT: return uns ? ua < ub : a < b;
    case OP_CMPNE: return a != b;
    case OP_CMPEQ: return a == b;
    case OP_CAST: return a;
    default: return e->undefined = true, 0; /* not integer math */
  }
}

static int64_t eval(evaluator *e, uop *u) {
  switch (u->op) {
    case OP_CONST: return u->arg[0];
    case OP_RANGE: case OP_LOAD:
      for (int i = 0; i < e->n; i++)
        if (e->b[i].var == u) return e->b[i].val;
      return e->undefined = true, 0;
    case OP_WHERE: return eval(e, u->src[0]) ? eval(e, u->src[1]) : eval(e, u->src[2]);
    default: break;
  }
  int64_t a = eval(e, u->src[0]), b = u->nsrc > 1 ? eval(e, u->src[1]) : 0;
  return wrap_to((tg_dtype)u->dtype, apply_int(e, (uop_op)u->op, (tg_dtype)u->src[0]->dtype, a, b));
}

/* Values tried for a wide variable: the edges where overflow and sign rules bite. */
static const int64_t wide_samples[] = {INT64_MIN, INT64_MIN + 1, -1000001, -65536, -129, -7, -2, -1,
                                       0, 1, 2, 7, 127, 128, 65535, 2147483647, 1000001,
                                       INT64_MAX - 1, INT64_MAX};
#define NWIDE ((int)(sizeof wide_samples / sizeof wide_samples[0]))

/* Number of values variable v takes in the enumeration, and the i-th one. */
static int64_t domain_size(uop *v) { return v->op == OP_RANGE ? v->src[0]->arg[0] : NWIDE; }
static int64_t domain_value(uop *v, int64_t i) {
  return v->op == OP_RANGE ? i : wrap_to((tg_dtype)v->dtype, wide_samples[i]);
}

static bool quiet; /* set by the test that expects disagreements */

/* Number of variable assignments where `orig` is defined and `simp` is not equal to it.
 * Variables are the RANGE and LOAD nodes of orig. The first disagreement is printed. */
static int64_t disagreements(uop *orig, uop *simp) {
  evaluator e = {0};
  uop **order;
  int n = uop_toposort(orig, &order);
  for (int i = 0; i < n; i++)
    if ((order[i]->op == OP_RANGE || order[i]->op == OP_LOAD) && e.n < 8) e.b[e.n++].var = order[i];
  free(order);
  int64_t idx[8] = {0}, bad = 0, points = 0;
  for (;;) {
    for (int i = 0; i < e.n; i++) e.b[i].val = domain_value(e.b[i].var, idx[i]);
    e.undefined = false;
    int64_t want = eval(&e, orig);
    if (!e.undefined) {
      int64_t got = eval(&e, simp);
      if (e.undefined || got != want) {
        if (!bad++ && !quiet) {
          printf("  disagreement at");
          for (int i = 0; i < e.n; i++) printf(" v%d=%lld", i, (long long)e.b[i].val);
          printf(": original %lld, simplified %lld%s\n", (long long)want, (long long)got,
                 e.undefined ? " (undefined)" : "");
        }
      }
    }
    points++;
    int i = 0;
    while (i < e.n && ++idx[i] == domain_size(e.b[i].var)) idx[i++] = 0;
    if (i == e.n) break;
  }
  (void)points;
  return bad;
}

/* Simplify e and check the result: same values everywhere, and a fixed point. */
static uop *simplify_checked(uop *e) {
  uop *s = uop_simplify(e);
  CHECK(s != NULL);
  if (!s) return e;
  int64_t bad = disagreements(e, s);
  CHECK(bad == 0);
  CHECK(uop_simplify(s) == s);
  if (bad) {
    printf("  original:\n");
    uop_print(e, stdout);
    printf("  simplified:\n");
    uop_print(s, stdout);
  }
  return s;
}

/* Every test builds inside a pool mark so that its nodes die with it. */
#define POOL_SCOPE(...)                                                     \
  do {                                                                      \
    size_t mark_ = uop_pool_mark();                                         \
    __VA_ARGS__;                                                            \
    uop_pool_release(mark_);                                                \
  } while (0)

/* ------------------------------------------------------------ the evaluator itself */

/* The checker must be able to fail: a wrong "simplification" is caught. */
TEST(sym_checker_catches_wrong_rewrites) {
  POOL_SCOPE({
    uop *x = var(0, 8), *y = var(1, 5);
    uop *e = idiv(add(mul(x, k64(4)), sub(y, k64(2))), k64(4));
    uop *wrong = add(x, idiv(sub(y, k64(2)), k64(4))); /* splits a negative remainder */
    quiet = true;
    CHECK(disagreements(e, wrong) > 0);
    CHECK(disagreements(e, e) == 0);
    CHECK(disagreements(mod(x, k64(3)), mod(x, k64(4))) > 0);
    CHECK(disagreements(add(wide(4), k64(1)), wide(4)) == NWIDE);
    quiet = false;
  });
}

/* ------------------------------------------------------------ constant folding */

typedef struct fold_case {
  uop_op op;
  tg_dtype dt; /* operand dtype */
  int64_t a, b;
  int64_t want;
} fold_case;

static const fold_case int_folds[] = {
    {OP_ADD, TG_INT64, 3, 4, 7},
    {OP_SUB, TG_INT64, 3, 10, -7},
    {OP_MUL, TG_INT64, -3, 4, -12},
    {OP_IDIV, TG_INT64, 7, 2, 3},
    {OP_IDIV, TG_INT64, -7, 2, -3}, /* C truncation, not floor (-4) */
    {OP_IDIV, TG_INT64, 7, -2, -3},
    {OP_IDIV, TG_INT64, -7, -2, 3},
    {OP_MOD, TG_INT64, 7, 2, 1},
    {OP_MOD, TG_INT64, -7, 2, -1}, /* sign of the numerator, not of the divisor */
    {OP_MOD, TG_INT64, 7, -2, 1},
    {OP_MOD, TG_INT64, -7, -2, -1},
    {OP_IDIV, TG_INT64, INT64_MIN, -1, INT64_MIN}, /* wraps, no trap */
    {OP_MOD, TG_INT64, INT64_MIN, -1, 0},
    {OP_IDIV, TG_INT64, INT64_MIN, 1, INT64_MIN},
    {OP_IDIV, TG_INT32, INT32_MIN, -1, INT32_MIN},
    {OP_ADD, TG_INT64, INT64_MAX, 1, INT64_MIN},
    {OP_MUL, TG_INT64, INT64_MIN, -1, INT64_MIN},
    {OP_SUB, TG_INT64, INT64_MIN, 1, INT64_MAX},
    {OP_ADD, TG_INT32, INT32_MAX, 1, INT32_MIN},
    {OP_ADD, TG_INT8, 100, 100, -56},
    {OP_MUL, TG_INT8, 16, 16, 0},
    {OP_SUB, TG_UINT8, 0, 1, 255},
    {OP_IDIV, TG_UINT32, 4294967295, 2, 2147483647},
    {OP_MAX, TG_INT64, -3, 2, 2},
    {OP_MAX, TG_INT64, -3, -9, -3},
    {OP_MAX, TG_UINT8, 200, 100, 200},
    {OP_AND, TG_INT64, 12, 10, 8},
    {OP_OR, TG_INT64, 12, 10, 14},
    {OP_XOR, TG_INT64, 12, 10, 6},
    {OP_SHL, TG_INT64, 1, 5, 32},
    {OP_SHL, TG_INT32, 1, 31, INT32_MIN},
    {OP_SHR, TG_INT64, -16, 2, -4},
    {OP_SHR, TG_UINT8, 255, 4, 15},
    {OP_CMPLT, TG_INT64, -1, 0, 1},
    {OP_CMPLT, TG_INT64, 0, -1, 0},
    {OP_CMPLT, TG_UINT8, 200, 100, 0},
    {OP_CMPNE, TG_INT64, 5, 5, 0},
    {OP_CMPNE, TG_INT64, 5, 6, 1},
    {OP_CMPEQ, TG_INT64, 5, 5, 1},
    {OP_CMPEQ, TG_INT32, -1, 1, 0},
    {OP_AND, TG_BOOL, 1, 0, 0},
    {OP_OR, TG_BOOL, 1, 0, 1},
    {OP_XOR, TG_BOOL, 1, 1, 0},
};

static const fold_case int_unary_folds[] = {
    {OP_NEG, TG_INT64, 5, 0, -5},
    {OP_NEG, TG_INT64, INT64_MIN, 0, INT64_MIN},
    {OP_NEG, TG_INT8, -128, 0, -128},
    {OP_NEG, TG_UINT8, 1, 0, 255},
    {OP_NOT, TG_INT64, 0, 0, -1},
    {OP_NOT, TG_UINT8, 5, 0, 250},
    {OP_NOT, TG_BOOL, 1, 0, 0},
    {OP_NOT, TG_BOOL, 0, 0, 1},
};

TEST(sym_fold_int_binary_ops) {
  for (size_t i = 0; i < sizeof int_folds / sizeof int_folds[0]; i++) {
    const fold_case *c = &int_folds[i];
    POOL_SCOPE({
      tg_dtype out = (uop_ops[c->op].flags & UOP_FLAG_CMP) ? TG_BOOL : c->dt;
      uop *e = uop_new2(c->op, out, uop_const_int(c->dt, c->a), uop_const_int(c->dt, c->b));
      uop *s = uop_simplify(e);
      CHECK(s && s->op == OP_CONST && s->dtype == out);
      if (s && s->op == OP_CONST && s->arg[0] != c->want) {
        harness_failed_checks++;
        printf("  %s %s(%lld, %lld) = %lld, expected %lld\n", uop_ops[c->op].name, tg_dtype_name(c->dt),
               (long long)c->a, (long long)c->b, (long long)s->arg[0], (long long)c->want);
      }
      /* alu_eval directly gives the same answer */
      cval in[2] = {{.i = c->a}, {.i = c->b}}, r;
      CHECK(alu_eval(c->op, out, c->dt, in, 2, &r) && r.i == c->want);
    });
  }
}

TEST(sym_fold_int_unary_ops) {
  for (size_t i = 0; i < sizeof int_unary_folds / sizeof int_unary_folds[0]; i++) {
    const fold_case *c = &int_unary_folds[i];
    POOL_SCOPE({
      uop *s = uop_simplify(uop_new1(c->op, c->dt, uop_const_int(c->dt, c->a)));
      CHECK(s && s->op == OP_CONST && s->dtype == c->dt && s->arg[0] == c->want);
      if (s && s->op == OP_CONST && s->arg[0] != c->want)
        printf("  %s %s(%lld) = %lld, expected %lld\n", uop_ops[c->op].name, tg_dtype_name(c->dt),
               (long long)c->a, (long long)s->arg[0], (long long)c->want);
    });
  }
}

/* Folding an op that has no defined value leaves it alone (the kernel decides). */
TEST(sym_fold_refuses_undefined) {
  static const fold_case keep[] = {
      {OP_IDIV, TG_INT64, 7, 0, 0},  {OP_MOD, TG_INT64, 7, 0, 0},   {OP_IDIV, TG_UINT8, 7, 0, 0},
      {OP_SHL, TG_INT64, 1, 64, 0},  {OP_SHL, TG_INT32, 1, 32, 0},  {OP_SHR, TG_INT64, 1, -1, 0},
      {OP_IDIV, TG_INT64, INT64_MIN, 0, 0},
  };
  for (size_t i = 0; i < sizeof keep / sizeof keep[0]; i++) {
    POOL_SCOPE({
      uop *e = uop_new2(keep[i].op, keep[i].dt, uop_const_int(keep[i].dt, keep[i].a),
                        uop_const_int(keep[i].dt, keep[i].b));
      uop *s = uop_simplify(e);
      CHECK(s == e);
    });
  }
}

typedef struct ffold_case {
  uop_op op;
  tg_dtype dt;
  double a, b;
  double want; /* for CMP ops: 0 or 1 */
} ffold_case;

static const ffold_case float_folds[] = {
    {OP_ADD, TG_FLOAT64, 0.1, 0.2, 0.1 + 0.2},
    {OP_ADD, TG_FLOAT32, 0.1, 0.2, (double)(0.1f + 0.2f)},
    {OP_ADD, TG_FLOAT16, 1.0, 0.0001, 1.0}, /* rounds to half precision */
    {OP_ADD, TG_BFLOAT16, 256.0, 1.0, 256.0},
    {OP_SUB, TG_FLOAT32, 1.5, 4.0, -2.5},
    {OP_MUL, TG_FLOAT32, 1e30, 1e30, INFINITY}, /* overflows float32, not float64 */
    {OP_FDIV, TG_FLOAT32, 1.0, 0.0, INFINITY},
    {OP_FDIV, TG_FLOAT64, -1.0, 0.0, -INFINITY},
    {OP_FDIV, TG_FLOAT64, 0.0, 0.0, NAN},
    {OP_FDIV, TG_FLOAT32, 1.0, 3.0, (double)(1.0f / 3.0f)},
    {OP_MOD, TG_FLOAT64, -7.0, 2.0, -1.0}, /* fmod keeps the numerator's sign */
    {OP_MOD, TG_FLOAT64, 7.5, -2.0, 1.5},
    {OP_MAX, TG_FLOAT32, 1.0, 2.0, 2.0},
    {OP_MAX, TG_FLOAT32, NAN, 1.0, NAN}, /* NaN propagates from either side */
    {OP_MAX, TG_FLOAT32, 1.0, NAN, NAN},
    {OP_POW, TG_FLOAT64, 2.0, 10.0, 1024.0},
    {OP_POW, TG_FLOAT64, -8.0, 1.0 / 3.0, NAN},
    {OP_CMPLT, TG_FLOAT32, 1.0, 2.0, 1},
    {OP_CMPLT, TG_FLOAT32, NAN, 2.0, 0},
    {OP_CMPNE, TG_FLOAT64, NAN, NAN, 1},
    {OP_CMPEQ, TG_FLOAT64, NAN, NAN, 0},
    {OP_CMPEQ, TG_FLOAT64, 0.0, -0.0, 1},
    {OP_NEG, TG_FLOAT32, 2.0, 0, -2.0},
    {OP_EXP2, TG_FLOAT64, 3.0, 0, 8.0},
    {OP_LOG2, TG_FLOAT64, 8.0, 0, 3.0},
    {OP_LOG2, TG_FLOAT64, 0.0, 0, -INFINITY},
    {OP_LOG2, TG_FLOAT64, -1.0, 0, NAN},
    {OP_SIN, TG_FLOAT64, 0.5, 0, 0.479425538604203},
    {OP_SQRT, TG_FLOAT32, 2.0, 0, (double)1.41421356237309504880f},
    {OP_SQRT, TG_FLOAT64, -1.0, 0, NAN},
    {OP_RECIP, TG_FLOAT64, 4.0, 0, 0.25},
    {OP_RECIP, TG_FLOAT64, 0.0, 0, INFINITY},
    {OP_TRUNC, TG_FLOAT64, -2.5, 0, -2.0},
    {OP_TRUNC, TG_FLOAT64, 2.7, 0, 2.0},
};

TEST(sym_fold_float_ops) {
  for (size_t i = 0; i < sizeof float_folds / sizeof float_folds[0]; i++) {
    const ffold_case *c = &float_folds[i];
    POOL_SCOPE({
      bool cmp = uop_ops[c->op].flags & UOP_FLAG_CMP;
      tg_dtype out = cmp ? TG_BOOL : c->dt;
      uop *a = uop_const(c->dt, c->a), *e;
      if (uop_ops[c->op].nsrc == 1) e = uop_new1(c->op, out, a);
      else e = uop_new2(c->op, out, a, uop_const(c->dt, c->b));
      uop *s = uop_simplify(e);
      CHECK(s && s->op == OP_CONST && s->dtype == out);
      if (s && s->op == OP_CONST) {
        double got = cmp ? (double)s->arg[0] : uop_const_value(s);
        bool ok = isnan(c->want) ? isnan(got) : got == c->want;
        if (!ok) {
          harness_failed_checks++;
          printf("  %s %s(%g, %g) = %.17g, expected %.17g\n", uop_ops[c->op].name,
                 tg_dtype_name(c->dt), c->a, c->b, got, c->want);
        }
      }
    });
  }
}

TEST(sym_fold_float_signed_zero) {
  POOL_SCOPE({
    uop *s = uop_simplify(uop_new1(OP_NEG, TG_FLOAT32, uop_const(TG_FLOAT32, 0.0)));
    CHECK(s && s->op == OP_CONST && uop_const_value(s) == 0 && signbit(uop_const_value(s)));
    CHECK(s == uop_const(TG_FLOAT32, -0.0));
    CHECK(s != uop_const(TG_FLOAT32, 0.0));
    /* -0.0 + 0.0 is +0.0; x + 0.0 is NOT x for floats, so only constants fold */
    uop *z = uop_simplify(uop_add(uop_const(TG_FLOAT32, -0.0), uop_const(TG_FLOAT32, 0.0)));
    CHECK(z == uop_const(TG_FLOAT32, 0.0));
  });
}

typedef struct cast_case {
  tg_dtype from, to;
  double v;
  double want;
  bool folds;
} cast_case;

static const cast_case cast_folds[] = {
    {TG_FLOAT32, TG_INT32, 3.7, 3, true},
    {TG_FLOAT32, TG_INT32, -3.7, -3, true}, /* truncates toward zero */
    {TG_FLOAT64, TG_INT32, 1e20, 0, false}, /* out of range: undefined in C, not folded */
    {TG_FLOAT64, TG_INT64, NAN, 0, false},
    {TG_FLOAT64, TG_UINT8, -1.0, 0, false},
    {TG_INT64, TG_UINT8, 300, 44, true},   /* wraps */
    {TG_INT64, TG_INT8, 200, -56, true},
    {TG_INT64, TG_BOOL, -1, 1, true},
    {TG_FLOAT64, TG_BOOL, NAN, 1, true},   /* NaN is truthy */
    {TG_FLOAT64, TG_BOOL, -0.0, 0, true},
    {TG_INT64, TG_FLOAT32, 16777217, 16777216, true}, /* rounds to float32 */
    {TG_FLOAT32, TG_FLOAT16, 65520.0, INFINITY, true}, /* rounds up past the largest half */
    {TG_BOOL, TG_INT32, 1, 1, true},
};

TEST(sym_fold_casts) {
  for (size_t i = 0; i < sizeof cast_folds / sizeof cast_folds[0]; i++) {
    const cast_case *c = &cast_folds[i];
    POOL_SCOPE({
      uop *e = uop_new1(OP_CAST, c->to, uop_const(c->from, c->v));
      uop *s = uop_simplify(e);
      if (!c->folds) {
        CHECK(s == e);
      } else {
        CHECK(s && s->op == OP_CONST && s->dtype == c->to);
        double got = s && s->op == OP_CONST ? uop_const_value(s) : NAN;
        CHECK(got == c->want);
        if (got != c->want)
          printf("  cast %s→%s of %g = %.17g, expected %.17g\n", tg_dtype_name(c->from),
                 tg_dtype_name(c->to), c->v, got, c->want);
      }
    });
  }
}

/* uint64 above INT64_MAX (stored as negative bits) converts as unsigned. */
TEST(sym_fold_uint64_casts) {
  POOL_SCOPE({
    uop *max = uop_const_int(TG_UINT64, -1); /* 2^64 - 1 */
    uop *s = uop_simplify(uop_new1(OP_CAST, TG_FLOAT64, max));
    CHECK(s && s->op == OP_CONST && uop_const_value(s) == 18446744073709551616.0);
    s = uop_simplify(uop_new1(OP_CAST, TG_INT64, max));
    CHECK(is_const(s, -1));
    s = uop_simplify(uop_alu(OP_CMPLT, uop_const_int(TG_UINT64, 1), max));
    CHECK(s == uop_const_bool(true));
    s = uop_simplify(uop_alu(OP_IDIV, max, uop_const_int(TG_UINT64, 2)));
    CHECK(s && s->op == OP_CONST && s->arg[0] == INT64_MAX);
  });
}

TEST(sym_fold_where_and_bitcast) {
  POOL_SCOPE({
    uop *a = uop_const(TG_FLOAT32, 1.5), *b = uop_const(TG_FLOAT32, -2.0);
    CHECK(uop_simplify(uop_new3(OP_WHERE, TG_FLOAT32, uop_const_bool(true), a, b)) == a);
    CHECK(uop_simplify(uop_new3(OP_WHERE, TG_FLOAT32, uop_const_bool(false), a, b)) == b);
    /* a condition that is a constant expression folds first */
    uop *cond = lt(k64(3), k64(2));
    CHECK(uop_simplify(uop_new3(OP_WHERE, TG_FLOAT32, cond, a, b)) == b);
    /* bitcasts are not folded */
    uop *bc = uop_new1(OP_BITCAST, TG_INT32, a);
    CHECK(uop_simplify(bc) == bc);
  });
}

/* ------------------------------------------------------------ identities */

TEST(sym_identities_int) {
  POOL_SCOPE({
    uop *x = var(0, 10);
    CHECK(simplify_checked(add(x, k64(0))) == x);
    CHECK(simplify_checked(add(k64(0), x)) == x);
    CHECK(simplify_checked(mul(x, k64(1))) == x);
    CHECK(simplify_checked(mul(k64(1), x)) == x);
    CHECK(is_const(simplify_checked(mul(x, k64(0))), 0));
    CHECK(is_const(simplify_checked(mul(k64(0), x)), 0));
    CHECK(simplify_checked(idiv(x, k64(1))) == x);
    CHECK(is_const(simplify_checked(mod(x, k64(1))), 0));
    CHECK(is_const(simplify_checked(sub(x, x)), 0));
    CHECK(simplify_checked(uop_alu(OP_MAX, x, x)) == x);
    CHECK(simplify_checked(uop_new1(OP_CAST, TG_INT64, x)) == x);
    /* x - 3 → x + -3, the canonical form of a sum */
    uop *s = simplify_checked(sub(x, k64(3)));
    CHECK(s->op == OP_ADD && s->src[0] == x && is_const(s->src[1], -3));
    /* the same for wide values (no range information needed) */
    uop *w = wide(4);
    CHECK(simplify_checked(add(w, k64(0))) == w);
    CHECK(is_const(simplify_checked(mul(w, k64(0))), 0));
    CHECK(simplify_checked(idiv(w, k64(1))) == w);
    CHECK(is_const(simplify_checked(mod(w, k64(1))), 0));
    CHECK(is_const(simplify_checked(sub(w, w)), 0));
  });
}

TEST(sym_identities_bool) {
  POOL_SCOPE({
    uop *x = var(0, 10);
    uop *b = lt(x, k64(5));
    uop *t = uop_const_bool(true), *f = uop_const_bool(false);
    CHECK(simplify_checked(uop_alu(OP_AND, b, t)) == b);
    CHECK(simplify_checked(uop_alu(OP_AND, t, b)) == b);
    CHECK(simplify_checked(uop_alu(OP_AND, b, f)) == f);
    CHECK(simplify_checked(uop_alu(OP_OR, b, f)) == b);
    CHECK(simplify_checked(uop_alu(OP_OR, b, t)) == t);
    CHECK(simplify_checked(uop_alu(OP_AND, b, b)) == b);
    CHECK(simplify_checked(uop_alu(OP_OR, b, b)) == b);
    CHECK(simplify_checked(uop_new1(OP_NOT, TG_BOOL, uop_new1(OP_NOT, TG_BOOL, b))) == b);
    uop *y = var(1, 3);
    CHECK(simplify_checked(uop_new3(OP_WHERE, TG_INT64, b, y, y)) == y);
  });
}

/* Float identities that are NOT valid: x + 0.0 (x = -0.0), x * 0.0 (x = NaN or inf). */
TEST(sym_identities_float_kept) {
  POOL_SCOPE({
    uop *x = uop_new1(OP_CAST, TG_FLOAT32, var(0, 4));
    uop *plus0 = uop_add(x, uop_const(TG_FLOAT32, 0.0));
    uop *times0 = uop_mul(x, uop_const(TG_FLOAT32, 0.0));
    uop *minus = uop_alu(OP_SUB, x, x);
    CHECK(uop_simplify(plus0) == plus0);
    CHECK(uop_simplify(times0) == times0);
    CHECK(uop_simplify(minus) == minus);
    /* these are valid for floats */
    CHECK(uop_simplify(uop_mul(x, uop_const(TG_FLOAT32, 1.0))) == x);
    CHECK(uop_simplify(uop_alu(OP_FDIV, x, uop_const(TG_FLOAT32, 1.0))) == x);
  });
}

/* ------------------------------------------------------------ sums and products */

TEST(sym_combine_constants) {
  POOL_SCOPE({
    uop *x = var(0, 10), *y = var(1, 4);
    uop *s = simplify_checked(add(add(x, k64(3)), k64(4)));
    CHECK(s->op == OP_ADD && s->src[0] == x && is_const(s->src[1], 7));
    s = simplify_checked(mul(mul(x, k64(2)), k64(3)));
    CHECK(s->op == OP_MUL && s->src[0] == x && is_const(s->src[1], 6));
    s = simplify_checked(add(add(x, k64(3)), k64(-3)));
    CHECK(s == x);
    /* a constant inside a sum moves to the outside: (x + 2) + y → (x + y) + 2 */
    s = simplify_checked(add(add(x, k64(2)), y));
    CHECK(s->op == OP_ADD && is_const(s->src[1], 2) && count_op(s, OP_CONST) == 1 + 2);
    /* ((x + 1) + (y + 2)) + 3 has one constant, 6, at the root (plus the two range ends) */
    s = simplify_checked(add(add(add(x, k64(1)), add(y, k64(2))), k64(3)));
    CHECK(s->op == OP_ADD && is_const(s->src[1], 6));
  });
}

TEST(sym_combine_like_terms) {
  POOL_SCOPE({
    uop *x = var(0, 10);
    uop *s = simplify_checked(add(x, x));
    CHECK(s->op == OP_MUL && s->src[0] == x && is_const(s->src[1], 2));
    s = simplify_checked(add(mul(x, k64(3)), x));
    CHECK(s->op == OP_MUL && s->src[0] == x && is_const(s->src[1], 4));
    s = simplify_checked(add(x, mul(x, k64(3))));
    CHECK(s->op == OP_MUL && s->src[0] == x && is_const(s->src[1], 4));
    s = simplify_checked(add(mul(x, k64(3)), mul(x, k64(5))));
    CHECK(s->op == OP_MUL && s->src[0] == x && is_const(s->src[1], 8));
    s = simplify_checked(add(mul(x, k64(3)), mul(x, k64(-3))));
    CHECK(is_const(s, 0));
    /* distribution: (x + y) * 3 → x*3 + y*3 */
    uop *y = var(1, 4);
    s = simplify_checked(mul(add(x, y), k64(3)));
    CHECK(s->op == OP_ADD && count_op(s, OP_MUL) == 2);
    /* (x + 1) * 4 + 4 keeps one constant: x*4 + 8 */
    s = simplify_checked(add(mul(add(x, k64(1)), k64(4)), k64(4)));
    CHECK(s->op == OP_ADD && is_const(s->src[1], 8) && s->src[0]->op == OP_MUL);
  });
}

/* Constants go to the right of commutative ops, so x+3 and 3+x are one node. */
TEST(sym_canonical_const_order) {
  POOL_SCOPE({
    uop *x = var(0, 10);
    static const uop_op ops[] = {OP_ADD, OP_MUL, OP_MAX, OP_AND, OP_OR, OP_XOR, OP_CMPNE, OP_CMPEQ};
    for (size_t i = 0; i < sizeof ops / sizeof ops[0]; i++) {
      uop *l = uop_simplify(uop_alu(ops[i], k64(3), x));
      uop *r = uop_simplify(uop_alu(ops[i], x, k64(3)));
      CHECK(l == r);
      CHECK(disagreements(uop_alu(ops[i], k64(3), x), l) == 0);
      if (l->op == ops[i]) CHECK(l->src[1]->op == OP_CONST);
    }
    /* non-commutative ops keep their order */
    uop *s = uop_simplify(sub(k64(3), x));
    CHECK(s->op == OP_SUB && is_const(s->src[0], 3));
    uop *d = uop_simplify(idiv(k64(20), add(x, k64(1))));
    CHECK(d->op == OP_IDIV && is_const(d->src[0], 20));
    CHECK(disagreements(idiv(k64(20), add(x, k64(1))), d) == 0);
  });
}

/* ------------------------------------------------------------ division and modulo */

TEST(sym_divmod_split_exact_terms) {
  POOL_SCOPE({
    uop *x = var(0, 6), *y = var(1, 4), *z = var(2, 10);
    /* (x*4 + y) // 4 → x (y < 4), and % 4 → y */
    CHECK(simplify_checked(idiv(add(mul(x, k64(4)), y), k64(4))) == x);
    CHECK(simplify_checked(mod(add(mul(x, k64(4)), y), k64(4))) == y);
    /* (x*6 + z) // 6 → x + z // 6 : the quotient no longer divides x */
    uop *s = simplify_checked(idiv(add(mul(x, k64(6)), z), k64(6)));
    CHECK(count_op(s, OP_IDIV) == 1 && s->op == OP_ADD);
    uop **order;
    int n = uop_toposort(s, &order);
    for (int i = 0; i < n; i++)
      if (order[i]->op == OP_IDIV) CHECK(!contains(order[i], x) && contains(order[i], z));
    free(order);
    /* (x*6 + z) % 6 → z % 6 */
    s = simplify_checked(mod(add(mul(x, k64(6)), z), k64(6)));
    CHECK(s->op == OP_MOD && s->src[0] == z && is_const(s->src[1], 6));
    /* constants split too: (x*4 + 6) // 4 → x + 1 ; (x*4 + 6) % 4 → 2 */
    s = simplify_checked(idiv(add(mul(x, k64(4)), k64(6)), k64(4)));
    CHECK(s->op == OP_ADD && s->src[0] == x && is_const(s->src[1], 1));
    CHECK(is_const(simplify_checked(mod(add(mul(x, k64(4)), k64(6)), k64(4))), 2));
    /* every term divisible: (x*4 + y*2) // 2 → x*2 + y */
    s = simplify_checked(idiv(add(mul(x, k64(4)), mul(y, k64(2))), k64(2)));
    CHECK(count_op(s, OP_IDIV) == 0);
    /* a reshape index: ((x*4 + y) // 1) % 4 and ((x*4 + y) // 4) % 6 */
    CHECK(simplify_checked(mod(add(mul(x, k64(4)), y), k64(4))) == y);
    CHECK(simplify_checked(mod(idiv(add(mul(x, k64(4)), y), k64(4)), k64(6))) == x);
  });
}

TEST(sym_divmod_common_factor) {
  POOL_SCOPE({
    uop *x = var(0, 5), *y = var(1, 3);
    /* (x*2 + y*4 + 2) // 8 → (x + y*2 + 1) // 4 */
    uop *s = simplify_checked(idiv(add(add(mul(x, k64(2)), mul(y, k64(4))), k64(2)), k64(8)));
    CHECK(s->op == OP_IDIV && is_const(s->src[1], 4));
    /* (x*2 + 4) % 6 → ((x + 2) % 3) * 2 */
    s = simplify_checked(mod(add(mul(x, k64(2)), k64(4)), k64(6)));
    CHECK(s->op == OP_MUL && is_const(s->src[1], 2) && s->src[0]->op == OP_MOD &&
          is_const(s->src[0]->src[1], 3));
  });
}

/* A part below the common factor of the rest never carries: (8x + l) // 16 → x // 2 for l < 8
 * (a tile of 8 lanes reading a panel of 16 columns: the lanes stay a contiguous load). */
TEST(sym_divmod_small_part) {
  POOL_SCOPE({
    uop *x = var(0, 12), *l = var(1, 8), *w = var(2, 9), *y = var(3, 3);
    uop *s = simplify_checked(idiv(add(mul(x, k64(8)), l), k64(16)));
    CHECK(count_op(s, OP_IDIV) == 1 && !contains(s, l) && contains(s, x));
    s = simplify_checked(mod(add(mul(x, k64(8)), l), k64(16))); /* (x % 2) * 8 + l */
    CHECK(count_op(s, OP_MOD) == 1 && s->op == OP_ADD);
    /* with a constant and two large terms: (24y + 8x + 3 + l/2-ish) */
    uop *num = add(add(add(mul(y, k64(24)), mul(x, k64(8))), k64(3)), idiv(l, k64(2)));
    s = simplify_checked(idiv(num, k64(16)));
    CHECK(count_op(s, OP_IDIV) == 1);
    simplify_checked(mod(num, k64(16)));
    /* a part that reaches the factor (w <= 8) may carry: kept whole, values still checked */
    s = simplify_checked(idiv(add(mul(x, k64(8)), w), k64(16)));
    CHECK(contains(s, w));
    simplify_checked(mod(add(mul(x, k64(8)), w), k64(16)));
    simplify_checked(idiv(add(mul(x, k64(8)), sub(l, k64(1))), k64(16))); /* can be negative */
  });
}

TEST(sym_divmod_by_range) {
  POOL_SCOPE({
    uop *x = var(0, 8);
    CHECK(simplify_checked(mod(x, k64(10))) == x); /* x < 10 */
    CHECK(simplify_checked(mod(x, k64(8))) == x);
    CHECK(simplify_checked(mod(x, k64(7))) != x);
    CHECK(is_const(simplify_checked(idiv(x, k64(8))), 0));
    CHECK(is_const(simplify_checked(idiv(add(x, k64(8)), k64(8))), 1));
    /* (x % c) % c → x % c ; (x % 8) % 4 → x % 4 ; (x % 6) % 4 stays nested */
    uop *y = var(1, 24);
    uop *s = simplify_checked(mod(mod(y, k64(5)), k64(5)));
    CHECK(s->op == OP_MOD && s->src[0] == y && is_const(s->src[1], 5));
    s = simplify_checked(mod(mod(y, k64(8)), k64(4)));
    CHECK(s->op == OP_MOD && s->src[0] == y && is_const(s->src[1], 4));
    s = simplify_checked(mod(mod(y, k64(6)), k64(4)));
    CHECK(count_op(s, OP_MOD) == 2);
    /* (x % 3) % 5 → x % 3 (the inner result is below 5) */
    s = simplify_checked(mod(mod(y, k64(3)), k64(5)));
    CHECK(s->op == OP_MOD && s->src[0] == y && is_const(s->src[1], 3));
    /* (y // 2) // 3 → y // 6 */
    s = simplify_checked(idiv(idiv(y, k64(2)), k64(3)));
    CHECK(s->op == OP_IDIV && s->src[0] == y && is_const(s->src[1], 6));
  });
}

/* The rules that reason about quotients assume a non-negative numerator. With truncating
 * division, a term that can be negative must not be split off: (4x + (y - 2)) // 4 is NOT
 * x + (y - 2) // 4 when y - 2 < 0 (e.g. x=1, y=0: 2 // 4 = 0, but 1 + (-2 // 4) = 1). */
TEST(sym_divmod_sign_sensitive) {
  POOL_SCOPE({
    uop *x = var(0, 4), *y = var(1, 5);
    uop *x1 = add(x, k64(1)); /* 1..4 */
    /* the whole numerator (4x + 7 - y, 3..23) is >= 0 but the part left after taking out
     * the multiples of 4 (3 - y) can be negative: nothing may be split off */
    uop *num = add(add(mul(x1, k64(4)), mul(y, k64(-1))), k64(3));
    uop *s = simplify_checked(idiv(num, k64(4)));
    CHECK(count_op(s, OP_IDIV) == 1);
    s = simplify_checked(mod(num, k64(4)));
    CHECK(count_op(s, OP_MOD) == 1);
    /* (4x + 4) + (y - 2): here the remainder y + 2 is >= 0 after all, so the split is valid */
    s = simplify_checked(idiv(add(mul(x1, k64(4)), sub(y, k64(2))), k64(4)));
    /* the numerator itself can be negative */
    uop *neg = add(mul(x, k64(4)), sub(y, k64(2))); /* -2..14 */
    s = simplify_checked(idiv(neg, k64(4)));
    CHECK(count_op(s, OP_IDIV) == 1);
    s = simplify_checked(mod(neg, k64(4)));
    CHECK(count_op(s, OP_MOD) == 1);
    /* negative numerators and divisors: only values are checked */
    simplify_checked(idiv(sub(x, k64(8)), k64(4)));
    simplify_checked(mod(sub(x, k64(8)), k64(4)));
    simplify_checked(idiv(sub(mul(x, k64(4)), k64(4)), k64(4)));
    simplify_checked(mod(sub(y, k64(5)), k64(3)));
    simplify_checked(idiv(x, k64(-2)));
    simplify_checked(mod(x, k64(-3)));
    simplify_checked(idiv(add(mul(x, k64(-4)), y), k64(4)));
    simplify_checked(mod(add(mul(x, k64(-4)), y), k64(4)));
    simplify_checked(mod(mod(sub(y, k64(4)), k64(6)), k64(3)));
    simplify_checked(idiv(idiv(sub(y, k64(4)), k64(2)), k64(2)));
    /* x % c with x < c but x possibly negative is not x... it is, for truncation: kept valid */
    simplify_checked(mod(sub(y, k64(2)), k64(10)));
    /* x // -1 and x % -1 */
    simplify_checked(idiv(sub(y, k64(2)), k64(-1)));
    simplify_checked(mod(sub(y, k64(2)), k64(-1)));
  });
}

/* ------------------------------------------------------------ comparisons */

TEST(sym_compare_folded_by_range) {
  POOL_SCOPE({
    uop *x = var(0, 10), *t = uop_const_bool(true), *f = uop_const_bool(false);
    CHECK(simplify_checked(lt(x, k64(10))) == t);
    CHECK(simplify_checked(lt(x, k64(0))) == f);
    CHECK(simplify_checked(lt(k64(-1), x)) == t);
    CHECK(simplify_checked(uop_alu(OP_CMPNE, x, k64(10))) == t);
    CHECK(simplify_checked(uop_alu(OP_CMPNE, x, k64(-1))) == t);
    CHECK(simplify_checked(uop_alu(OP_CMPEQ, x, k64(-1))) == f);
    CHECK(simplify_checked(lt(add(x, k64(3)), k64(3))) == f);
    CHECK(simplify_checked(lt(idiv(x, k64(4)), k64(3))) == t);
    CHECK(simplify_checked(lt(mod(x, k64(4)), k64(4))) == t);
    CHECK(is_const(simplify_checked(uop_alu(OP_MAX, x, k64(20))), 20));
    simplify_checked(uop_alu(OP_MAX, x, k64(-5))); /* no rule drops a dominated max yet */
    /* undecided comparisons stay */
    CHECK(simplify_checked(lt(x, k64(5)))->op == OP_CMPLT);
    /* a where on a decided condition is its branch */
    uop *y = var(1, 3);
    CHECK(simplify_checked(uop_new3(OP_WHERE, TG_INT64, lt(x, k64(10)), y, k64(7))) == y);
  });
}

TEST(sym_compare_moves_constants) {
  POOL_SCOPE({
    uop *x = var(0, 10), *s = add(x, k64(-5)); /* -5..4 */
    /* x + 3 < 7 → x < 4 */
    uop *r = simplify_checked(lt(add(x, k64(3)), k64(7)));
    CHECK(r->op == OP_CMPLT && r->src[0] == x && is_const(r->src[1], 4));
    /* x*2 < 5 → x < 3 */
    r = simplify_checked(lt(mul(x, k64(2)), k64(5)));
    CHECK(r->op == OP_CMPLT && r->src[0] == x && is_const(r->src[1], 3));
    /* on a variable with negative values: the ceiling rounds toward +inf */
    for (int64_t c = -16; c <= 13; c++) {
      simplify_checked(lt(mul(s, k64(3)), k64(c)));
      simplify_checked(lt(add(s, k64(c)), k64(2)));
    }
    simplify_checked(lt(mul(s, k64(-3)), k64(4))); /* negative factor: not rewritten */
  });
}

/* ------------------------------------------------------------ overflow and wrap-around */

/* Rules on values with no known range must hold under wrap-around (or not fire), and the
 * simplifier must not itself overflow (UBSan runs this). */
TEST(sym_wide_values_overflow_safe) {
  POOL_SCOPE({
    uop *w = wide(4);
    simplify_checked(add(add(w, k64(INT64_MAX)), k64(1)));
    simplify_checked(add(add(w, k64(INT64_MIN)), k64(-1)));
    simplify_checked(mul(mul(w, k64(INT64_C(1) << 40)), k64(INT64_C(1) << 40)));
    simplify_checked(mul(mul(w, k64(INT64_MIN)), k64(-1)));
    simplify_checked(sub(w, k64(INT64_MIN)));
    simplify_checked(add(mul(w, k64(INT64_MAX)), w));
    simplify_checked(add(mul(w, k64(INT64_MAX)), mul(w, k64(INT64_MAX))));
    simplify_checked(lt(add(w, k64(1)), k64(INT64_MIN)));
    simplify_checked(lt(add(w, k64(-1)), k64(INT64_MAX)));
    simplify_checked(lt(add(w, k64(1)), k64(0)));
    simplify_checked(lt(mul(w, k64(3)), k64(INT64_MAX)));
    simplify_checked(lt(mul(w, k64(3)), k64(INT64_MIN)));
    simplify_checked(lt(mul(w, k64(2)), k64(1)));
    simplify_checked(idiv(w, k64(INT64_MIN)));
    simplify_checked(mod(w, k64(INT64_MIN)));
    simplify_checked(idiv(w, k64(-1)));
    uop *x = var(0, 9);
    simplify_checked(idiv(idiv(x, k64(INT64_C(1) << 32)), k64(INT64_C(1) << 32)));
    simplify_checked(idiv(idiv(x, k64(INT64_MAX)), k64(INT64_MAX)));
    simplify_checked(mod(mod(x, k64(INT64_MAX)), k64(INT64_MAX)));
    simplify_checked(lt(mul(x, k64(INT64_C(1) << 62)), k64(INT64_MAX)));
    simplify_checked(idiv(mul(add(x, k64(INT64_C(1) << 61)), k64(8)), k64(16)));
  });
}

/* Narrow dtypes wrap: ranges that leave the dtype must not be trusted. */
TEST(sym_narrow_dtype_wraps) {
  POOL_SCOPE({
    uop *w = wide_of(5, TG_INT32);
    uop *one = uop_const_int(TG_INT32, 1), *zero = uop_const_int(TG_INT32, 0);
    /* relu(w) + 1 < 1 is true for w = INT32_MAX (the sum wraps to INT32_MIN) */
    uop *r = uop_alu(OP_MAX, w, zero);
    simplify_checked(lt(uop_add(r, one), one));
    simplify_checked(lt(uop_add(w, one), zero));
    simplify_checked(lt(uop_mul(r, uop_const_int(TG_INT32, 2)), zero));
    simplify_checked(uop_alu(OP_CMPEQ, uop_add(r, one), zero));
    /* a constant sum that leaves int8 folds to the wrapped value */
    uop *s = uop_simplify(lt(uop_add(uop_const_int(TG_INT8, 100), uop_const_int(TG_INT8, 100)),
                             uop_const_int(TG_INT8, 0)));
    CHECK(s == uop_const_bool(true));
    uop *b = wide_of(6, TG_INT8);
    simplify_checked(lt(uop_add(uop_alu(OP_MAX, b, uop_const_int(TG_INT8, 100)), uop_const_int(TG_INT8, 100)),
                        uop_const_int(TG_INT8, 0)));
    /* casts narrow the range only when every value fits */
    uop *x = var(0, 300);
    simplify_checked(lt(uop_new1(OP_CAST, TG_INT8, x), uop_const_int(TG_INT8, 0)));
    simplify_checked(lt(uop_new1(OP_CAST, TG_INT64, uop_new1(OP_CAST, TG_UINT8, x)), k64(200)));
  });
}

/* uint64 values above INT64_MAX are stored as negative int64 bits: a cast to int64 of such a
 * value is negative, so a uint64 source has no usable signed range. */
TEST(sym_uint64_cast_range) {
  POOL_SCOPE({
    uop *u = wide_of(7, TG_UINT64);
    uop *as_signed = uop_new1(OP_CAST, TG_INT64, u);
    simplify_checked(lt(as_signed, k64(0)));
    simplify_checked(idiv(as_signed, k64(4)));
    simplify_checked(mod(as_signed, k64(4)));
    uop *big = uop_const_int(TG_UINT64, -1);
    CHECK(uop_simplify(lt(uop_new1(OP_CAST, TG_INT64, big), k64(0))) == uop_const_bool(true));
  });
}

/* ------------------------------------------------------------ random expressions */

static uint64_t rng = 0x9E3779B97F4A7C15ull;
static uint32_t rnd(uint32_t n) {
  rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
  return (uint32_t)(rng >> 11) % n;
}

static const int64_t divisors[] = {1, 2, 3, 4, 5, 6, 8, 12, 16, -1, -2, -3, -4};

static uop *random_index(uop **vars, int nv, int depth) {
  if (depth == 0 || rnd(5) == 0) return rnd(4) ? vars[rnd((uint32_t)nv)] : k64((int64_t)rnd(13) - 6);
  uop *a = random_index(vars, nv, depth - 1);
  int64_t d = divisors[rnd(sizeof divisors / sizeof divisors[0])];
  switch (rnd(9)) {
    case 0: case 1: return add(a, random_index(vars, nv, depth - 1));
    case 2: return mul(a, k64((int64_t)rnd(9) - 3));
    case 3: return idiv(a, k64(d));
    case 4: return mod(a, k64(d));
    case 5: return sub(a, random_index(vars, nv, depth - 1));
    case 6: return mul(a, random_index(vars, nv, depth - 1));
    case 7: return uop_alu(OP_MAX, a, random_index(vars, nv, depth - 1));
    default: return add(mul(a, k64(d)), k64((int64_t)rnd(9) - 4));
  }
}

static uop *random_bool(uop **vars, int nv) {
  uop *a = random_index(vars, nv, 3), *b = rnd(2) ? k64((int64_t)rnd(21) - 6) : random_index(vars, nv, 2);
  static const uop_op cmps[] = {OP_CMPLT, OP_CMPNE, OP_CMPEQ};
  uop *c = uop_alu(cmps[rnd(3)], a, b);
  if (rnd(3) == 0) c = uop_new1(OP_NOT, TG_BOOL, c);
  if (rnd(3) == 0) c = uop_alu(rnd(2) ? OP_AND : OP_OR, c, uop_alu(OP_CMPLT, random_index(vars, nv, 2), k64(rnd(8))));
  return c;
}

/* Thousands of random index expressions: every simplification keeps every value and is a
 * fixed point. */
TEST(sym_random_index_expressions) {
  uop *vars[3];
  int failures = 0;
  for (int i = 0; i < 3000 && failures < 5; i++) {
    int before = harness_failed_checks;
    POOL_SCOPE({
      vars[0] = var(0, 16), vars[1] = var(1, 6), vars[2] = var(2, 4);
      uop *e = i % 4 == 3 ? uop_new3(OP_WHERE, TG_INT64, random_bool(vars, 3), random_index(vars, 3, 3),
                                     random_index(vars, 3, 3))
               : i % 4 == 2 ? random_bool(vars, 3)
                            : random_index(vars, 3, 4);
      simplify_checked(e);
    });
    failures += harness_failed_checks != before;
  }
}

/* Index expressions of the kind lower.c produces: reshape → permute → reshape chains. */
TEST(sym_reshape_chains_simplify_away) {
  POOL_SCOPE({
    uop *i = var(0, 6), *j = var(1, 4);
    /* reshape (6, 4) → (24,) → (6, 4): the index comes back to (i, j) */
    uop *flat = add(mul(i, k64(4)), j);
    CHECK(simplify_checked(idiv(flat, k64(4))) == i);
    CHECK(simplify_checked(mod(flat, k64(4))) == j);
    /* (6, 4) → (2, 3, 4) → (6, 4): row i → (i // 3, i % 3), back: (i//3)*3 + i%3 = i */
    uop *a = idiv(i, k64(3)), *b = mod(i, k64(3));
    uop *back = add(add(mul(a, k64(12)), mul(b, k64(4))), j);
    uop *s = simplify_checked(back);
    simplify_checked(idiv(back, k64(4)));
    CHECK(simplify_checked(mod(back, k64(4))) == j);
    (void)s;
  });
}

/* ------------------------------------------------------------ the pattern language */

static int calls[8];

static uop *count0(void *ctx, uop *u, uop **cap) { (void)ctx, (void)cap; calls[0]++; return u; }
static uop *count1(void *ctx, uop *u, uop **cap) { (void)ctx, (void)cap; calls[1]++; return u; }
static uop *decline(void *ctx, uop *u, uop **cap) { (void)ctx, (void)u, (void)cap; calls[2]++; return NULL; }
/* Return capture x (so a test can see what was captured). */
static uop *give_x(void *ctx, uop *u, uop **cap) { (void)ctx, (void)u; calls[3]++; return cap['x' - 'a']; }
static uop *give_y(void *ctx, uop *u, uop **cap) { (void)ctx, (void)u; calls[4]++; return cap['y' - 'a']; }
static uop *give_c(void *ctx, uop *u, uop **cap) { (void)ctx, (void)u; calls[5]++; return cap['c' - 'a']; }
static uop *give_m(void *ctx, uop *u, uop **cap) { (void)ctx, (void)u; calls[6]++; return cap['m' - 'a']; }

/* rule_apply with a one-rule table compiled from pattern (fn returns capture x). */
static uop *apply1(const char *pattern, rule_fn fn, uop *u) {
  rule list[] = {{pattern, fn}, {NULL, NULL}};
  rule_table *t = rule_table_compile("test", list);
  CHECK(t != NULL);
  uop *r = t ? rule_apply(t, NULL, u) : NULL;
  rule_table_free(t);
  return r;
}

TEST(pat_commutative_match) {
  POOL_SCOPE({
    uop *x = var(0, 4), *y = var(1, 4);
    uop *e = add(k64(0), x); /* built with the constant on the left */
    CHECK(apply1("(ADD x 0)", give_x, e) == x);
    CHECK(apply1("(ADD x 0)", give_x, add(x, k64(0))) == x);
    /* SUB is not commutative: (SUB x 0) does not match 0 - x */
    CHECK(apply1("(SUB x 0)", give_x, sub(k64(0), x)) == NULL);
    CHECK(apply1("(SUB x 0)", give_x, sub(x, k64(0))) == x);
    /* captures are undone when the first order fails: x must be the bare y */
    uop *m = mul(y, k64(3));
    CHECK(apply1("(ADD x (MUL x #c))", give_x, add(m, y)) == y);
    CHECK(apply1("(ADD x (MUL x #c))", give_c, add(y, m)) == k64(3));
    CHECK(apply1("(ADD x (MUL x #c))", give_x, add(m, x)) == NULL);
    /* nested commutative: (MUL #c x) matches MUL(x, 3) */
    CHECK(apply1("(ADD (MUL #c x) y)", give_y, add(x, m)) == x);
  });
}

TEST(pat_named_captures) {
  POOL_SCOPE({
    uop *x = var(0, 4), *y = var(1, 4);
    /* a repeated name must be the same node */
    CHECK(apply1("(ADD x x)", give_x, add(x, x)) == x);
    CHECK(apply1("(ADD x x)", give_x, add(x, y)) == NULL);
    CHECK(apply1("(SUB x y)", give_y, sub(x, y)) == y);
    /* x=(…) names the node matched by a sub-pattern */
    uop *m = mul(x, y);
    CHECK(apply1("(ADD m=(MUL a b) c)", give_m, add(m, k64(1))) == m);
    CHECK(apply1("(ADD m=(MUL a b) c)", give_m, add(k64(1), m)) == m);
    CHECK(apply1("(ADD m=(MUL a b) c)", give_m, add(x, y)) == NULL);
    /* #c is a constant only */
    CHECK(apply1("(MUL x #c)", give_c, mul(x, k64(5))) == k64(5));
    CHECK(apply1("(MUL x #c)", give_c, mul(x, y)) == NULL);
    /* a named capture may appear in two places across sources */
    uop *lhs = idiv(x, k64(4));
    CHECK(apply1("(ADD (IDIV x #c) (MOD x #c))", give_x, add(lhs, mod(x, k64(4)))) == x);
    CHECK(apply1("(ADD (IDIV x #c) (MOD x #c))", give_x, add(lhs, mod(x, k64(3)))) == NULL);
  });
}

TEST(pat_literals_and_values) {
  POOL_SCOPE({
    uop *x = var(0, 4);
    CHECK(apply1("(MUL x -1)", give_x, mul(x, k64(-1))) == x);
    CHECK(apply1("(MUL x -1)", give_x, mul(x, k64(1))) == NULL);
    uop *f = uop_new1(OP_CAST, TG_FLOAT32, x);
    CHECK(apply1("(MUL x 2.5)", give_x, uop_mul(f, uop_const(TG_FLOAT32, 2.5))) == f);
    CHECK(apply1("(MUL x 2.5)", give_x, uop_mul(f, uop_const(TG_FLOAT32, 2.0))) == NULL);
    /* a literal matches any dtype with that value: 1 matches 1.0f */
    CHECK(apply1("(MUL x 1)", give_x, uop_mul(f, uop_const(TG_FLOAT32, 1.0))) == f);
    uop *b = lt(x, k64(2));
    CHECK(apply1("(AND x true)", give_x, uop_alu(OP_AND, b, uop_const_bool(true))) == b);
    CHECK(apply1("(AND x false)", give_x, uop_alu(OP_AND, b, uop_const_bool(true))) == NULL);
    /* true is a bool: an int 1 does not match it */
    CHECK(apply1("(AND x true)", give_x, uop_alu(OP_AND, x, k64(1))) == NULL);
  });
}

TEST(pat_typed_patterns) {
  POOL_SCOPE({
    uop *x = var(0, 4);
    uop *i32 = uop_new1(OP_CAST, TG_INT32, x), *u8 = uop_new1(OP_CAST, TG_UINT8, x);
    uop *f = uop_new1(OP_CAST, TG_FLOAT32, x), *b = lt(x, k64(2));
    struct { const char *pat; uop *node; bool match; } cases[] = {
        {"(NEG x:int)", uop_new1(OP_NEG, TG_INT32, i32), true},
        {"(NEG x:int)", uop_new1(OP_NEG, TG_UINT8, u8), true},
        {"(NEG x:int)", uop_new1(OP_NEG, TG_FLOAT32, f), false},
        {"(NEG x:float)", uop_new1(OP_NEG, TG_FLOAT32, f), true},
        {"(NEG x:float)", uop_new1(OP_NEG, TG_INT32, i32), false},
        {"(NOT x:bool)", uop_new1(OP_NOT, TG_BOOL, b), true},
        {"(NOT x:bool)", uop_new1(OP_NOT, TG_INT32, i32), false},
        {"(NEG x:index)", uop_new1(OP_NEG, TG_INT64, x), true},
        {"(NEG x:index)", uop_new1(OP_NEG, TG_INT32, i32), false},
        {"(NEG:float x)", uop_new1(OP_NEG, TG_FLOAT32, f), true},
        {"(NEG:float x)", uop_new1(OP_NEG, TG_INT64, x), false},
        {"(NEG|NOT:int x)", uop_new1(OP_NOT, TG_INT32, i32), true},
        {"(NEG|NOT:int x)", uop_new1(OP_NOT, TG_BOOL, b), false},
        {"(NEG x:any)", uop_new1(OP_NEG, TG_FLOAT32, f), true},
        {"(ADD x 0:int)", add(x, k64(0)), true},
        {"(ADD x 0:float)", add(x, k64(0)), false},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
      uop *r = apply1(cases[i].pat, give_x, cases[i].node);
      CHECK((r != NULL) == cases[i].match);
      if ((r != NULL) != cases[i].match) printf("  pattern %s on case %zu\n", cases[i].pat, i);
    }
  });
}

TEST(pat_op_sets_and_varargs) {
  POOL_SCOPE({
    uop *x = var(0, 4), *y = var(1, 4);
    CHECK(apply1("(ADD|MUL x y)", give_y, mul(x, y)) == y);
    CHECK(apply1("(ADD|MUL x y)", give_y, add(x, y)) == y);
    CHECK(apply1("(ADD|MUL x y)", give_y, sub(x, y)) == NULL);
    uop *s3 = uop_new(OP_SINK, TG_BOOL, (uop *[]){x, y, k64(1)}, 3, NULL, 0);
    uop *s1 = uop_new(OP_SINK, TG_BOOL, &x, 1, NULL, 0);
    CHECK(apply1("(SINK x ...)", give_x, s3) == x);
    CHECK(apply1("(SINK x ...)", give_x, s1) == x);
    CHECK(apply1("(SINK x)", give_x, s3) == NULL);
    CHECK(apply1("(SINK x)", give_x, s1) == x);
    CHECK(apply1("(SINK x y ...)", give_y, s1) == NULL);
    /* a bare capture matches any node, including ones with sources */
    CHECK(apply1("x", give_x, s3) == NULL); /* give_x returns the node itself: no change */
    /* three sources, in order */
    CHECK(apply1("(WHERE c x y)", give_x, uop_new3(OP_WHERE, TG_INT64, lt(x, y), x, y)) == x);
  });
}

TEST(pat_malformed_patterns_rejected) {
  static const char *bad[] = {
      "(FOO x)", "(ADD x", "(ADD x y))", "x:intt", "#1", "(ADD a b c d e)", "", "X", "(ADD x :int)",
      "(ADD| x y)", "x=", "(add x y)",
  };
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    rule list[] = {{bad[i], give_x}, {NULL, NULL}};
    rule_table *t = rule_table_compile("bad", list);
    CHECK(t == NULL);
    if (t) printf("  accepted malformed pattern \"%s\"\n", bad[i]);
    rule_table_free(t);
  }
}

/* A table is indexed by op: a node only tries the rules whose pattern can match its op,
 * in table order; a callback returning NULL passes the node to the next rule. */
TEST(pat_table_indexed_by_op) {
  POOL_SCOPE({
    uop *x = var(0, 4), *y = var(1, 4);
    static const rule list[] = {
        {"(MUL x y)", count0}, {"(ADD x y)", decline}, {"(ADD x y)", give_y}, {"(ADD x y)", count1}, {NULL, NULL},
    };
    rule_table *t = rule_table_compile("indexed", list);
    CHECK(t != NULL && !strcmp(rule_table_name(t), "indexed"));
    memset(calls, 0, sizeof calls);
    CHECK(rule_apply(t, NULL, add(x, y)) == y);
    CHECK(calls[0] == 0); /* the MUL rule was never tried */
    CHECK(calls[2] == 1 && calls[4] == 1);
    CHECK(calls[1] == 0); /* first match wins */
    memset(calls, 0, sizeof calls);
    CHECK(rule_apply(t, NULL, sub(x, y)) == NULL); /* no rule for SUB */
    CHECK(calls[0] + calls[1] + calls[2] + calls[4] == 0);
    /* merged tables keep the order of their parts */
    static const rule first[] = {{"(ADD x y)", give_x}, {NULL, NULL}};
    rule_table *a = rule_table_compile("first", first);
    rule_table *ab = rule_table_merge("first+indexed", (rule_table *[]){a, t}, 2);
    CHECK(ab != NULL && rule_apply(ab, NULL, add(x, y)) == x);
    rule_table *ba = rule_table_merge("indexed+first", (rule_table *[]){t, a}, 2);
    CHECK(ba != NULL && rule_apply(ba, NULL, add(x, y)) == y);
    CHECK(rule_table_merge("null", (rule_table *[]){a, NULL}, 2) == NULL);
    rule_table_free(ab), rule_table_free(ba), rule_table_free(a), rule_table_free(t);
  });
}

/* ------------------------------------------------------------ graph_rewrite */

static uop *count_adds(void *ctx, uop *u, uop **cap) {
  (void)u, (void)cap;
  (*(int *)ctx)++;
  return NULL;
}

/* Memoization: a chain of 60 doublings is a DAG with 2^60 paths; each node is visited once. */
TEST(rw_memoized_on_shared_subgraphs) {
  POOL_SCOPE({
    uop *x = var(0, 4);
    for (int i = 0; i < 60; i++) x = add(x, x);
    static const rule list[] = {{"(ADD x y)", count_adds}, {NULL, NULL}};
    rule_table *t = rule_table_compile("count", list);
    int n = 0;
    CHECK(graph_rewrite(x, t, &n) == x);
    CHECK(n == 60);
    rule_table_free(t);
    /* the symbolic rules turn it into one multiplication by 2^60 */
    uop *s = uop_simplify(x);
    CHECK(s->op == OP_MUL && is_const(s->src[1], INT64_C(1) << 60));
  });
}

/* A rewritten node is rewritten again until no rule applies (the fixed point), bottom-up. */
static uop *add_to_mul(void *ctx, uop *u, uop **cap) {
  (void)ctx, (void)u;
  return uop_mul(cap['x' - 'a'], cap['y' - 'a']);
}
static uop *mul_to_sub(void *ctx, uop *u, uop **cap) {
  (void)ctx, (void)u;
  return uop_alu(OP_SUB, cap['x' - 'a'], cap['y' - 'a']);
}

TEST(rw_reaches_fixed_point) {
  POOL_SCOPE({
    uop *x = var(0, 4), *y = var(1, 4);
    static const rule list[] = {{"(ADD x y)", add_to_mul}, {"(MUL x y)", mul_to_sub}, {NULL, NULL}};
    rule_table *t = rule_table_compile("chain", list);
    uop *e = add(add(x, y), add(y, x));
    uop *r = graph_rewrite(e, t, NULL);
    CHECK(r == sub(sub(x, y), sub(y, x)));
    CHECK(graph_rewrite(r, t, NULL) == r);
    rule_table_free(t);
  });
}

/* Top-down: a node's rules run before its sources are visited, so a source that the rule
 * removes is never rewritten. */
static uop *drop_left(void *ctx, uop *u, uop **cap) {
  (void)ctx, (void)u;
  return cap['y' - 'a'];
}
static uop *count_mul(void *ctx, uop *u, uop **cap) {
  (void)u, (void)cap;
  (*(int *)ctx)++;
  return NULL;
}

TEST(rw_top_down_skips_removed_sources) {
  POOL_SCOPE({
    uop *x = var(0, 4), *y = var(1, 4);
    static const rule list[] = {{"(SUB x y)", drop_left}, {"(MUL x y)", count_mul}, {NULL, NULL}};
    rule_table *t = rule_table_compile("topdown", list);
    uop *e = sub(mul(x, x), y);
    int n = 0;
    CHECK(graph_rewrite_ex(e, t, &n, true) == y);
    CHECK(n == 0);
    n = 0;
    CHECK(graph_rewrite_ex(e, t, &n, false) == y);
    CHECK(n == 1);
    CHECK(graph_rewrite(NULL, t, NULL) == NULL);
    CHECK(graph_rewrite(e, NULL, NULL) == NULL);
    rule_table_free(t);
  });
}

/* Deep graphs (long chains) do not blow the stack. */
TEST(rw_deep_chain) {
  POOL_SCOPE({
    uop *x = var(0, 4), *e = x;
    for (int i = 0; i < 20000; i++) e = add(e, k64(1));
    uop *s = uop_simplify(e);
    CHECK(s && s->op == OP_ADD && s->src[0] == x && is_const(s->src[1], 20000));
  });
}

/* Every pool reference is released: the tests above leave the alive count where it was. */
TEST(sym_pool_released) {
  uint64_t before = uop_alive_count();
  POOL_SCOPE({
    uop *x = var(0, 16), *y = var(1, 6);
    simplify_checked(idiv(add(mul(x, k64(6)), y), k64(3)));
  });
  POOL_SCOPE({
    uop *x = var(0, 16), *y = var(1, 6);
    simplify_checked(idiv(add(mul(x, k64(6)), y), k64(3)));
  });
  uint64_t after_one = uop_alive_count();
  POOL_SCOPE({
    uop *x = var(0, 16), *y = var(1, 6);
    simplify_checked(idiv(add(mul(x, k64(6)), y), k64(3)));
  });
  CHECK(uop_alive_count() == after_one);
  CHECK(after_one >= before);
}
