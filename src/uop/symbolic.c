/* symbolic.c — constant folding, value ranges, and simplification rules for index math.
 * Sign rules: IDIV and MOD truncate toward zero like C, so every rule that reasons about
 * quotients and remainders first proves the numerator non-negative (vmin >= 0). */
#include "uop/symbolic.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "uop/dtype.h"

/* ---------------------------------------------------------------- evaluation */

static cval wrap_int(tg_dtype dt, int64_t v) {
  cval r;
  switch (dt) {
    case TG_BOOL: r.i = v != 0; break;
    case TG_INT8: r.i = (int8_t)v; break;
    case TG_INT16: r.i = (int16_t)v; break;
    case TG_INT32: r.i = (int32_t)v; break;
    case TG_UINT8: r.i = (uint8_t)v; break;
    case TG_UINT16: r.i = (uint16_t)v; break;
    case TG_UINT32: r.i = (uint32_t)v; break;
    default: r.i = v; break;
  }
  return r;
}

static cval round_float(tg_dtype dt, double v) {
  cval r;
  if (dt == TG_FLOAT32) r.f = (float)v;
  else if (dt == TG_FLOAT16) r.f = half_to_float(float_to_half((float)v));
  else if (dt == TG_BFLOAT16) r.f = bf16_to_float(float_to_bf16((float)v));
  else r.f = v;
  return r;
}

static bool eval_float(uop_op op, tg_dtype dt, const cval *in, cval *out) {
  double a = in[0].f, b = in[1].f;
  double r;
  switch (op) {
    case OP_NEG: r = -a; break;
    case OP_EXP2: r = exp2(a); break;
    case OP_LOG2: r = log2(a); break;
    case OP_SIN: r = sin(a); break;
    case OP_SQRT: r = sqrt(a); break;
    case OP_RECIP: r = 1.0 / a; break;
    case OP_TRUNC: r = trunc(a); break;
    case OP_ADD: r = a + b; break;
    case OP_SUB: r = a - b; break;
    case OP_MUL: r = a * b; break;
    case OP_FDIV: r = a / b; break;
    case OP_MOD: r = fmod(a, b); break;
    case OP_POW: r = pow(a, b); break;
    case OP_MAX: r = (a > b || isnan(a)) ? a : b; break;
    case OP_CMPLT: out->i = a < b; return true;
    case OP_CMPNE: out->i = a != b; return true;
    case OP_CMPEQ: out->i = a == b; return true;
    default: return false;
  }
  *out = round_float(dt, r);
  return true;
}

static bool eval_int(uop_op op, tg_dtype dt, const cval *in, cval *out) {
  bool u = dtype_is_unsigned(dt) || dt == TG_BOOL;
  int64_t a = in[0].i, b = in[1].i;
  uint64_t ua = (uint64_t)a, ub = (uint64_t)b;
  int64_t r;
  int bits = dtype_table[dt].size * 8;
  switch (op) {
    case OP_NEG: r = (int64_t)(0 - ua); break;
    case OP_NOT: r = dt == TG_BOOL ? !a : ~a; break;
    case OP_ADD: r = (int64_t)(ua + ub); break;
    case OP_SUB: r = (int64_t)(ua - ub); break;
    case OP_MUL: r = (int64_t)(ua * ub); break;
    case OP_IDIV:
      if (b == 0 || (!u && b == -1)) return b != 0 ? (*out = wrap_int(dt, (int64_t)(0 - ua)), true) : false;
      r = u ? (int64_t)(ua / ub) : a / b;
      break;
    case OP_MOD:
      if (b == 0) return false;
      r = u ? (int64_t)(ua % ub) : (b == -1 ? 0 : a % b);
      break;
    case OP_MAX: r = u ? (ua > ub ? a : b) : (a > b ? a : b); break;
    case OP_AND: r = a & b; break;
    case OP_OR: r = a | b; break;
    case OP_XOR: r = a ^ b; break;
    case OP_SHL: if (b < 0 || b >= bits) return false; r = (int64_t)(ua << b); break;
    case OP_SHR:
      if (b < 0 || b >= bits) return false;
      r = u ? (int64_t)(ua >> b) : (a >> b);
      break;
    case OP_CMPLT: out->i = u ? ua < ub : a < b; return true;
    case OP_CMPNE: out->i = a != b; return true;
    case OP_CMPEQ: out->i = a == b; return true;
    default: return false;
  }
  *out = wrap_int(dt, r);
  return true;
}

static bool eval_cast(tg_dtype dt, tg_dtype from, cval v, cval *out) {
  if (dtype_is_float(dt)) {
    double x = dtype_is_float(from) ? v.f
               : from == TG_UINT64  ? (double)(uint64_t)v.i
                                    : (double)v.i;
    *out = round_float(dt, x);
    return true;
  }
  if (dtype_is_float(from)) {
    if (dt == TG_BOOL) { out->i = v.f != 0 || isnan(v.f); return true; }
    if (!(v.f > dtype_table[dt].min - 1 && v.f < dtype_table[dt].max + 1)) return false; /* UB range */
    *out = wrap_int(dt, dt == TG_UINT64 ? (int64_t)(uint64_t)v.f : (int64_t)v.f);
    return true;
  }
  *out = dt == TG_BOOL ? (cval){.i = v.i != 0} : wrap_int(dt, v.i);
  return true;
}

bool alu_eval(uop_op op, tg_dtype dt, tg_dtype src_dt, const cval *in, int n, cval *out) {
  if (op == OP_CAST) return eval_cast(dt, src_dt, in[0], out);
  if (op == OP_WHERE) return *out = in[0].i ? in[1] : in[2], true;
  if (op == OP_BITCAST) return false;
  cval args[2] = {in[0], n > 1 ? in[1] : in[0]};
  return dtype_is_float(src_dt) ? eval_float(op, src_dt, args, out) : eval_int(op, src_dt, args, out);
}

static cval const_cval(const uop *c) {
  cval v;
  if (dtype_is_float(c->dtype)) v.f = uop_const_value(c);
  else v.i = c->arg[0];
  return v;
}

static uop *cval_const(tg_dtype dt, cval v) {
  return dtype_is_float(dt) ? uop_const(dt, v.f) : uop_new(OP_CONST, dt, NULL, 0, &v.i, 1);
}

/* ---------------------------------------------------------------- value ranges */

/* uint64 values above INT64_MAX do not fit the int64 range arithmetic: no range for them. */
static bool has_range(const uop *u) {
  return u->dtype == TG_BOOL || (dtype_is_int(u->dtype) && u->dtype != TG_UINT64);
}

static int64_t sat_add(int64_t a, int64_t b, bool *ovf) {
  int64_t r;
  if (__builtin_add_overflow(a, b, &r)) *ovf = true;
  return r;
}
static int64_t sat_sub(int64_t a, int64_t b, bool *ovf) {
  int64_t r;
  if (__builtin_sub_overflow(a, b, &r)) *ovf = true;
  return r;
}
static int64_t sat_mul(int64_t a, int64_t b, bool *ovf) {
  int64_t r;
  if (__builtin_mul_overflow(a, b, &r)) *ovf = true;
  return r;
}

static void dtype_limits(tg_dtype dt, int64_t *lo, int64_t *hi) {
  if (dt == TG_UINT64 || dt == TG_INT64) { *lo = dt == TG_INT64 ? INT64_MIN : 0; *hi = INT64_MAX; return; }
  *lo = (int64_t)dtype_table[dt].min, *hi = (int64_t)dtype_table[dt].max;
}

static void compute_range(uop *u) {
  int64_t lo, hi;
  dtype_limits(u->dtype, &lo, &hi);
  uop *a = u->nsrc > 0 ? u->src[0] : NULL, *b = u->nsrc > 1 ? u->src[1] : NULL;
  bool ints = a && has_range(a) && (!b || has_range(b)) && !dtype_is_unsigned(u->dtype) &&
              u->dtype != TG_UINT64;
  int64_t a0 = 0, a1 = 0, b0 = 0, b1 = 0;
  if (ints) a0 = uop_vmin(a), a1 = uop_vmax(a);
  if (ints && b) b0 = uop_vmin(b), b1 = uop_vmax(b);
  bool ovf = false;
  switch (u->op) {
    case OP_CONST:
      if (!dtype_is_float(u->dtype) && u->dtype != TG_UINT64) lo = hi = u->arg[0];
      break;
    case OP_RANGE: lo = 0, hi = uop_vmax(u->src[0]) - 1; break;
    case OP_ADD:
      if (!ints) break;
      lo = sat_add(a0, b0, &ovf), hi = sat_add(a1, b1, &ovf);
      break;
    case OP_SUB:
      if (!ints) break;
      lo = sat_sub(a0, b1, &ovf), hi = sat_sub(a1, b0, &ovf);
      break;
    case OP_MUL: {
      if (!ints) break;
      int64_t c[4] = {sat_mul(a0, b0, &ovf), sat_mul(a0, b1, &ovf), sat_mul(a1, b0, &ovf),
                      sat_mul(a1, b1, &ovf)};
      lo = hi = c[0];
      for (int i = 1; i < 4; i++) lo = c[i] < lo ? c[i] : lo, hi = c[i] > hi ? c[i] : hi;
      break;
    }
    case OP_IDIV:
      if (ints && b0 == b1 && b0 > 0) lo = a0 / b0, hi = a1 / b0;
      break;
    case OP_MOD:
      if (ints && b0 == b1 && b0 > 0) {
        if (a0 >= 0) lo = 0, hi = a1 < b0 - 1 ? a1 : b0 - 1;
        else lo = -(b0 - 1), hi = b0 - 1;
      }
      break;
    case OP_MAX:
      if (ints) lo = a0 > b0 ? a0 : b0, hi = a1 > b1 ? a1 : b1;
      break;
    case OP_CMPLT:
      if (ints) lo = a1 < b0, hi = a0 < b1;
      else lo = 0, hi = 1;
      break;
    case OP_CMPNE: case OP_CMPEQ: {
      lo = 0, hi = 1;
      if (!ints) break;
      bool ne = a1 < b0 || b1 < a0, eq = a0 == a1 && b0 == b1 && a0 == b0;
      if (ne || eq) lo = hi = (u->op == OP_CMPNE) == ne;
      break;
    }
    case OP_AND:
      if (u->dtype == TG_BOOL && ints) lo = a0 && b0, hi = a1 && b1;
      else if (ints && a0 >= 0 && b0 >= 0) lo = 0, hi = a1 < b1 ? a1 : b1;
      break;
    case OP_OR:
      if (u->dtype == TG_BOOL && ints) lo = a0 || b0, hi = a1 || b1;
      break;
    case OP_NOT:
      if (u->dtype == TG_BOOL && ints) lo = !a1, hi = !a0;
      break;
    case OP_WHERE: {
      uop *x = u->src[1], *y = u->src[2];
      if (!has_range(x)) break;
      int64_t c0 = uop_vmin(a), c1 = uop_vmax(a);
      if (c0 == c1) { lo = uop_vmin(c0 ? x : y), hi = uop_vmax(c0 ? x : y); break; }
      lo = uop_vmin(x) < uop_vmin(y) ? uop_vmin(x) : uop_vmin(y);
      hi = uop_vmax(x) > uop_vmax(y) ? uop_vmax(x) : uop_vmax(y);
      break;
    }
    case OP_CAST:
      if (ints) {
        int64_t tl, th;
        dtype_limits(u->dtype, &tl, &th);
        if (a0 >= tl && a1 <= th) lo = a0, hi = a1;
      }
      break;
    default: break;
  }
  /* a result outside the dtype wraps around at run time: then nothing is known */
  int64_t tl, th;
  dtype_limits(u->dtype, &tl, &th);
  if (ovf || lo < tl || hi > th) lo = tl, hi = th;
  /* Nodes are shared between threads: two may compute the same range at once and store the
   * same values; the flag publishes them. */
  atomic_store_explicit(&u->vmin, lo, memory_order_relaxed);
  atomic_store_explicit(&u->vmax, hi, memory_order_relaxed);
  atomic_store_explicit(&u->range_done, 1, memory_order_release);
}

static void need_range(uop *u) {
  if (!atomic_load_explicit(&u->range_done, memory_order_acquire)) compute_range(u);
}
int64_t uop_vmin(uop *u) {
  need_range(u);
  return atomic_load_explicit(&u->vmin, memory_order_relaxed);
}
int64_t uop_vmax(uop *u) {
  need_range(u);
  return atomic_load_explicit(&u->vmax, memory_order_relaxed);
}

/* ---------------------------------------------------------------- rules */

#define CAP(x) cap[(#x)[0] - 'a']
#define CI(x) uop_const_ivalue(CAP(x))

/* A constant of int dtype dt from a value computed with wrap-around (as the kernel would). */
static uop *wrapped_const(tg_dtype dt, uint64_t v) { return cval_const(dt, wrap_int(dt, (int64_t)v)); }
#define UCI(x) ((uint64_t)CI(x))

/* Whether every value in lo..hi fits dtype dt (so an op producing them does not wrap). */
static bool fits(tg_dtype dt, int64_t lo, int64_t hi) {
  int64_t tl, th;
  dtype_limits(dt, &tl, &th);
  return dt != TG_UINT64 && lo >= tl && hi <= th;
}

/* Any ALU op on constants, or an int/bool op whose range is a single value. */
static uop *fold(void *ctx, uop *u, uop **cap) {
  (void)ctx, (void)cap;
  if (!uop_is_alu(u) && u->op != OP_RANGE) return NULL;
  if (has_range(u) && u->dtype != TG_UINT64 && uop_vmin(u) == uop_vmax(u)) {
    if (u->op == OP_RANGE) return uop_idx(0);
    return uop_const_int(u->dtype, uop_vmin(u));
  }
  if (u->op == OP_RANGE || u->nsrc > 3) return NULL;
  /* canonical order: constants on the right of commutative ops */
  if (u->nsrc == 2 && (uop_flags(u) & UOP_FLAG_COMMUTATIVE) && u->src[0]->op == OP_CONST &&
      u->src[1]->op != OP_CONST)
    return uop_new2(u->op, u->dtype, u->src[1], u->src[0]);
  cval in[3], out;
  for (int i = 0; i < u->nsrc; i++) {
    if (u->src[i]->op != OP_CONST) return NULL;
    in[i] = const_cval(u->src[i]);
  }
  tg_dtype sdt = u->op == OP_WHERE ? u->dtype : (tg_dtype)u->src[0]->dtype;
  if (!alu_eval(u->op, u->dtype, sdt, in, u->nsrc, &out)) return NULL;
  return cval_const(u->dtype, out);
}

static uop *keep_x(void *c, uop *u, uop **cap) { (void)c, (void)u; return CAP(x); }
static uop *keep_a(void *c, uop *u, uop **cap) { (void)c, (void)u; return CAP(a); }
static uop *keep_b(void *c, uop *u, uop **cap) { (void)c, (void)u; return CAP(b); }
static uop *zero_of(void *c, uop *u, uop **cap) { (void)c, (void)cap; return uop_const_int(u->dtype, 0); }
static uop *true_c(void *c, uop *u, uop **cap) { (void)c, (void)u, (void)cap; return uop_const_bool(true); }
static uop *false_c(void *c, uop *u, uop **cap) { (void)c, (void)u, (void)cap; return uop_const_bool(false); }

static uop *same_dtype_cast(void *c, uop *u, uop **cap) {
  (void)c;
  return CAP(x)->dtype == u->dtype ? CAP(x) : NULL;
}

/* (x + a) + b → x + (a + b) */
static uop *add_consts(void *c, uop *u, uop **cap) {
  (void)c;
  return uop_add(CAP(x), wrapped_const(u->dtype, UCI(a) + UCI(b)));
}
/* (x + a) + y → (x + y) + a */
static uop *add_const_out(void *c, uop *u, uop **cap) {
  (void)c, (void)u;
  if (CAP(y)->op == OP_CONST) return NULL;
  return uop_add(uop_add(CAP(x), CAP(y)), CAP(a));
}
/* (x * a) * b → x * (a * b) */
static uop *mul_consts(void *c, uop *u, uop **cap) {
  (void)c;
  return uop_mul(CAP(x), wrapped_const(u->dtype, UCI(a) * UCI(b)));
}
/* (x + y) * c → x*c + y*c */
static uop *distribute(void *c, uop *u, uop **cap) {
  (void)c, (void)u;
  return uop_add(uop_mul(CAP(x), CAP(c)), uop_mul(CAP(y), CAP(c)));
}
static uop *x_times_2(void *c, uop *u, uop **cap) {
  (void)c;
  return uop_mul(CAP(x), uop_const_int(u->dtype, 2));
}
static uop *x_times_a1(void *c, uop *u, uop **cap) {
  (void)c;
  return uop_mul(CAP(x), wrapped_const(u->dtype, UCI(a) + 1));
}
static uop *x_times_ab(void *c, uop *u, uop **cap) {
  (void)c;
  return uop_mul(CAP(x), wrapped_const(u->dtype, UCI(a) + UCI(b)));
}
static uop *sub_const(void *c, uop *u, uop **cap) {
  (void)c;
  return uop_add(CAP(x), wrapped_const(u->dtype, 0 - UCI(a)));
}
/* x + a < b → x < b - a, only where x + a cannot wrap around */
static uop *lt_add(void *c, uop *u, uop **cap) {
  (void)c, (void)u;
  uop *x = CAP(x);
  bool ovf = false;
  int64_t lo = sat_add(uop_vmin(x), CI(a), &ovf), hi = sat_add(uop_vmax(x), CI(a), &ovf);
  int64_t bound = sat_sub(CI(b), CI(a), &ovf);
  if (ovf || !has_range(x) || !fits(x->dtype, lo, hi) || !fits(x->dtype, bound, bound)) return NULL;
  return uop_alu(OP_CMPLT, x, uop_const_int(x->dtype, bound));
}
/* x * a < b (a > 0, ints) → x < ceil(b / a), only where x * a cannot wrap around */
static uop *lt_mul(void *c, uop *u, uop **cap) {
  (void)c, (void)u;
  uop *x = CAP(x);
  int64_t a = CI(a), b = CI(b);
  bool ovf = false;
  int64_t lo = sat_mul(uop_vmin(x), a, &ovf), hi = sat_mul(uop_vmax(x), a, &ovf);
  if (a <= 0 || ovf || !has_range(x) || !fits(x->dtype, lo, hi)) return NULL;
  int64_t q = b / a + (b > 0 && b % a != 0); /* C division truncates: ceil for b < 0 */
  return uop_alu(OP_CMPLT, x, uop_const_int(x->dtype, q));
}

/* ---- sums of terms for div/mod folding */
int index_terms(uop *u, int64_t mul, term *t, int n, int cap, int64_t *k) {
  if (n < 0) return n;
  if (u->op == OP_ADD) return index_terms(u->src[1], mul, t, index_terms(u->src[0], mul, t, n, cap, k), cap, k);
  bool ovf = false;
  if (u->op == OP_CONST) {
    *k = sat_add(*k, sat_mul(mul, u->arg[0], &ovf), &ovf);
    return ovf ? -1 : n;
  }
  if (u->op == OP_MUL && u->src[1]->op == OP_CONST) {
    int64_t m = sat_mul(mul, u->src[1]->arg[0], &ovf);
    return ovf ? -1 : index_terms(u->src[0], m, t, n, cap, k);
  }
  if (n == cap) return -1;
  t[n].coef = mul, t[n].base = u;
  return n + 1;
}

static uop *build_sum(const term *t, int n, int64_t k, int64_t div) {
  uop *s = NULL;
  for (int i = 0; i < n; i++) {
    uop *x = t[i].coef / div == 1 ? t[i].base : uop_mul(t[i].base, uop_idx(t[i].coef / div));
    s = s ? uop_add(s, x) : x;
  }
  if (k / div || !s) s = s ? uop_add(s, uop_idx(k / div)) : uop_idx(k / div);
  return s;
}

static int64_t gcd64(int64_t a, int64_t b) {
  uint64_t x = a < 0 ? 0 - (uint64_t)a : (uint64_t)a, y = b < 0 ? 0 - (uint64_t)b : (uint64_t)b;
  while (y) { uint64_t t = x % y; x = y, y = t; }
  return x > INT64_MAX ? 1 : (int64_t)x; /* gcd 2^63 only with INT64_MIN terms: do not factor */
}

/* (B + S) // d and % d where B's coefficients and constant share a factor g with d and
 * 0 <= S < g: adding S never crosses a multiple of g, hence none of d, so
 * (B + S) // d = (B/g) // (d/g) and (B + S) % d = ((B/g) % (d/g)) * g + S. A register tile
 * narrower than the panel it reads makes these: (8a + lane) // 16 = a // 2 for a lane < 8. */
static uop *divmod_small_part(const term *r, int nr, int64_t k, int64_t d, bool is_mod) {
  for (int i = 0; i < nr; i++) {
    int64_t g = gcd64(d, r[i].coef);
    if (g <= 1 || k < 0) continue;
    term big[32], small[32];
    int nb = 0, ns = 0;
    for (int j = 0; j < nr; j++) {
      if (r[j].coef % g == 0) big[nb++] = r[j];
      else small[ns++] = r[j];
    }
    uop *s = ns || k % g ? build_sum(small, ns, k % g, 1) : NULL;
    if (!s || uop_vmin(s) < 0 || uop_vmax(s) >= g) continue;
    uop *b = build_sum(big, nb, k - k % g, g);
    if (uop_vmin(b) < 0) continue;
    if (!is_mod) return uop_alu(OP_IDIV, b, uop_idx(d / g));
    return uop_add(uop_mul(uop_alu(OP_MOD, b, uop_idx(d / g)), uop_idx(g)), s);
  }
  return NULL;
}

/* x // d and x % d for x >= 0, d > 0: split off the multiples of d in the coefficients, e.g.
 * (29a + b) % 28 = (a + b) % 28 (sliding-window views of convolutions make these). */
static uop *divmod_fold(uop *x, int64_t d, bool is_mod) {
  if (d <= 0 || x->dtype != TG_INT64 || uop_vmin(x) < 0) return NULL;
  if (is_mod && uop_vmax(x) < d) return x;
  term t[32], q[33], r[32];
  int64_t k = 0;
  int n = index_terms(x, 1, t, 0, 32, &k), nq = 0, nr = 0;
  if (n < 0) return NULL;
  int64_t g = d;
  for (int i = 0; i < n; i++) { /* a positive coefficient c splits into (c - c % d) + c % d */
    int64_t c = t[i].coef, rem = c % d == 0 ? 0 : c > 0 ? c % d : c;
    if (rem != c) q[nq++] = (term){c - rem, t[i].base};
    if (rem) r[nr++] = (term){rem, t[i].base}, g = gcd64(g, rem);
  }
  int64_t kq = k >= 0 ? k / d * d : 0;
  uop *rest = build_sum(r, nr, k - kq, 1);
  if (uop_vmin(rest) < 0) return NULL;
  if (nq || kq) {
    uop *inner = uop_alu(is_mod ? OP_MOD : OP_IDIV, rest, uop_idx(d));
    if (is_mod) return inner;
    q[nq].coef = kq, q[nq].base = uop_idx(1); /* the constant's quotient */
    return uop_add(build_sum(q, nq + (kq != 0), 0, d), inner);
  }
  g = gcd64(g, k);
  if (g > 1) { /* (g*y) // (g*e) = y // e ; (g*y) % (g*e) = (y % e) * g */
    uop *y = build_sum(r, nr, k, g);
    if (is_mod) return uop_mul(uop_alu(OP_MOD, y, uop_idx(d / g)), uop_idx(g));
    return uop_alu(OP_IDIV, y, uop_idx(d / g));
  }
  return divmod_small_part(r, nr, k, d, is_mod);
}

static uop *idiv_fold(void *c, uop *u, uop **cap) { (void)c; (void)u; return divmod_fold(CAP(x), CI(d), false); }
static uop *mod_fold(void *c, uop *u, uop **cap) { (void)c; (void)u; return divmod_fold(CAP(x), CI(d), true); }

/* (x // a) // b → x // (a*b) for x >= 0 */
static uop *div_div(void *c, uop *u, uop **cap) {
  (void)c, (void)u;
  int64_t ab;
  if (uop_vmin(CAP(x)) < 0 || CI(a) <= 0 || CI(b) <= 0 || __builtin_mul_overflow(CI(a), CI(b), &ab)) return NULL;
  return uop_alu(OP_IDIV, CAP(x), uop_idx(ab));
}
/* (x % a) % b → x % b when b divides a, x >= 0 */
static uop *mod_mod(void *c, uop *u, uop **cap) {
  (void)c, (void)u;
  if (uop_vmin(CAP(x)) < 0 || CI(b) <= 0 || CI(a) % CI(b)) return NULL;
  return uop_alu(OP_MOD, CAP(x), CAP(b));
}
/* (x % a) // b with x >= 0: nothing general; ((x // a) % b) is kept. */

static const rule symbolic_rule_list[] = {
    {"x", fold},
    /* identities */
    {"(ADD x 0:int)", keep_x},
    {"(MUL x 1)", keep_x},
    {"(MUL x:int 0)", zero_of},
    {"(IDIV x 1)", keep_x},
    {"(MOD x:int 1)", zero_of},
    {"(FDIV x 1)", keep_x},
    {"(SUB x:int x)", zero_of},
    {"(SUB x:int #a)", sub_const},
    {"(AND x true)", keep_x},
    {"(AND x false)", false_c},
    {"(OR x false)", keep_x},
    {"(OR x true)", true_c},
    {"(AND x x)", keep_x},
    {"(OR x x)", keep_x},
    {"(NOT:bool (NOT x))", keep_x},
    {"(WHERE true a b)", keep_a},
    {"(WHERE false a b)", keep_b},
    {"(WHERE c a a)", keep_a},
    {"(CAST x)", same_dtype_cast},
    {"(MAX x x)", keep_x},
    /* sums and products of index math */
    {"(ADD (ADD x #a):int #b)", add_consts},
    {"(ADD (ADD x #a):int y)", add_const_out},
    {"(MUL (MUL x #a):int #b)", mul_consts},
    {"(MUL (ADD x y):int #c)", distribute},
    {"(ADD x:int x)", x_times_2},
    {"(ADD (MUL x #a):int x)", x_times_a1},
    {"(ADD (MUL x #a):int (MUL x #b))", x_times_ab},
    /* comparisons */
    {"(CMPLT (ADD x #a):int #b)", lt_add},
    {"(CMPLT (MUL x #a):int #b)", lt_mul},
    /* division and modulo */
    {"(IDIV (IDIV x #a):index #b)", div_div},
    {"(MOD (MOD x #a):index #b)", mod_mod},
    {"(IDIV x:index #d)", idiv_fold},
    {"(MOD x:index #d)", mod_fold},
    {NULL, NULL},
};

const rule_table *symbolic_rules(void) {
  static rule_table *_Atomic t;
  return rule_table_once(&t, "symbolic", symbolic_rule_list);
}

uop *uop_simplify(uop *u) { return graph_rewrite(u, symbolic_rules(), NULL); }
