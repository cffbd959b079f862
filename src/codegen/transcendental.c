/* transcendental.c — EXP2, LOG2 and SIN of a lowered kernel as polynomial ALU code.
 *
 * The renderers spell these ops as libm calls, which on vector lanes means one call per lane.
 * Here each becomes adds, multiplies, selects, casts and bit casts that run on the lanes like
 * any other arithmetic (the approach of tinygrad's transcendental.py and SLEEF, written anew):
 *
 *   exp2(x)  x = q + f with q = rint(x), |f| <= 1/2; 2^f by a polynomial; 2^q built from its
 *            exponent bits. The input is clamped to [lo, hi] first (beyond it the result is
 *            0 or inf anyway); 2^q is applied in one multiply whose rounding is the only
 *            one, so denormal results round once and 2^128 overflows to inf.
 *   log2(x)  x = m * 2^e with m in [0.75, 1.5) (e from the exponent bits, denormals scaled by
 *            2^64 first); log2(m) = 2 atanh(y) / ln 2 with y = (m - 1) / (m + 1), odd
 *            polynomial in y.
 *   sin(x)   x = (k + f) * pi/2 with |f| <= 1/2; sin or cos of f * pi/2 (fdlibm's minimax
 *            polynomials, in float64) picked and signed by k mod 4. float32: the reduction
 *            is exact for every finite input (Payne-Hanek in floating point): 2/pi is held
 *            as 9 24-bit chunks c_i, so each x * c_i is an exact float64 product, taken mod 4
 *            (exact); the terms are summed with TwoSum, keeping the rounding error. float64:
 *            fdlibm's three-step Cody-Waite reduction below 2^19 pi/2; larger arguments
 *            stay a libm call on their lanes (see xsin64).
 *
 * Special values (±inf, NaN, ±0, denormals) are fixed by selects at the end. float16 and
 * bfloat16 are computed in float32; float32 sin in float64. Measured errors: the bounds in
 * transcendental.h, tests/test_transcendental.c. */
#include "codegen/transcendental.h"

#include <math.h>
#include <stdint.h>

#include "uop/dtype.h"
#include "uop/rewrite.h"

/* ---------------------------------------------------------------- per float type */

typedef struct fparams {
  tg_dtype ft, it;        /* the float type computed in, the integer type of its bits */
  int mant, bias;         /* mantissa bits, exponent bias */
  double exp_lo, exp_hi;  /* exp2 clamps its input to [lo, hi]: beyond, the result is 0 / inf */
  int tiny_shift;         /* exp2 results below the normal range: scaled by 2^-shift first */
  double min_normal;      /* log2 scales inputs below it by 2^64 */
  const double *exp_poly; /* 2^f on [-1/2, 1/2], highest degree first */
  int exp_n;
  const double *log_poly; /* log2 kernel in y^2 (SLEEF's coefficients) */
  int log_n;
  double log_c1, log_c2;  /* 2 / ln 2 split into a head and a tail */
} fparams;

static const double exp_poly32[] = {0.1535920892e-3, 0.1339262701e-2, 0.9618384764e-2, 0.5550347269e-1,
                                    0.2402264476e+0, 0.6931471825e+0, 1.0};
static const double exp_poly64[] = {0.4434359082926529454e-9, 0.7073164598085707425e-8, 0.1017819260921760451e-6,
                                    0.1321543872511327615e-5, 0.1525273353517584730e-4, 0.1540353045101147808e-3,
                                    0.1333355814670499073e-2, 0.9618129107597600536e-2, 0.5550410866482046596e-1,
                                    0.2402265069591012214e+0, 0.6931471805599452862e+0, 1.0};
static const double log_poly32[] = {0.4374550283e+0, 0.5764790177e+0, 0.9618012905120};
static const double log_poly64[] = {0.2211941750456081490e+0, 0.2200768693152277689e+0, 0.2623708057488514656e+0,
                                    0.3205977477944495502e+0, 0.4121985945485324709e+0, 0.5770780162997058982e+0,
                                    0.96179669392608091449};

static const fparams params32 = {TG_FLOAT32, TG_INT32, 23, 127, -150, 128, 25, 0x1p-126, exp_poly32, 7,
                                 log_poly32, 3, 2.8853900432586669922, 3.2734474483568488616e-08};
static const fparams params64 = {TG_FLOAT64, TG_INT64, 52, 1023, -1075, 1024, 54, 0x1p-1022, exp_poly64, 12,
                                 log_poly64, 7, 2.885390081777926774, 0};

/* ---------------------------------------------------------------- building blocks */

static uop *fc(tg_dtype dt, double v) { return uop_const(dt, v); }
static uop *add(uop *a, uop *b) { return uop_alu(OP_ADD, a, b); }
static uop *sub(uop *a, uop *b) { return uop_alu(OP_SUB, a, b); }
static uop *mul(uop *a, uop *b) { return uop_alu(OP_MUL, a, b); }
static uop *lt(uop *a, uop *b) { return uop_alu(OP_CMPLT, a, b); }
static uop *eq(uop *a, uop *b) { return uop_alu(OP_CMPEQ, a, b); }
static uop *where(uop *c, uop *a, uop *b) { return uop_new3(OP_WHERE, a->dtype, c, a, b); }
static uop *cast(uop *x, tg_dtype dt) { return uop_new1(OP_CAST, dt, x); }
static uop *bitcast(uop *x, tg_dtype dt) { return uop_new1(OP_BITCAST, dt, x); }
static uop *addc(uop *a, double v) { return add(a, fc(a->dtype, v)); }
static uop *mulc(uop *a, double v) { return mul(a, fc(a->dtype, v)); }
static uop *is_nan(uop *x) { return uop_alu(OP_CMPNE, x, x); }

/* Round to the nearest integer (ties to even) for |x| < 2^(mantissa bits - 1). */
static uop *rint_small(uop *x) {
  double magic = x->dtype == TG_FLOAT64 ? 0x1.8p52 : 0x1.8p23;
  return addc(addc(x, magic), -magic);
}

/* Horner: c[0] x^(n-1) + ... + c[n-1]. */
static uop *poly(uop *x, const double *c, int n) {
  uop *u = fc(x->dtype, c[0]);
  for (int i = 1; i < n; i++) u = addc(mul(u, x), c[i]);
  return u;
}

/* ---------------------------------------------------------------- exp2 */

/* After t = a + magic (which rounds a to the integer q = t - magic), the bits of t are the
 * bits of magic plus q: 2^(q + k) is then built from t's bits with integer adds and one
 * multiply (a shift), no float-to-int conversion. */
static uop *pow2_from_rounded(const fparams *p, uop *t, uop *k) {
  int64_t magic_bits = p->ft == TG_FLOAT64 ? (int64_t)0x4338000000000000 : 0x4B400000;
  uop *e = add(sub(bitcast(t, p->it), uop_const_int(p->it, magic_bits - p->bias)), k);
  return bitcast(mul(e, uop_const_int(p->it, (int64_t)1 << p->mant)), p->ft);
}

/* 2^a = 2^f * 2^q. The scale is 2^(q-1) (normal for every q up to hi) applied to 2u; where
 * q - 1 is below the normal exponents it is 2^(q-1+shift) applied to u 2^(1-shift). Either
 * way the last multiply is the only rounding: denormal results round once, 2^hi overflows. */
static uop *xexp2(const fparams *p, uop *x) {
  tg_dtype ft = p->ft, it = p->it;
  double magic = ft == TG_FLOAT64 ? 0x1.8p52 : 0x1.8p23;
  uop *nan = is_nan(x), *lo = fc(ft, p->exp_lo), *hi = fc(ft, p->exp_hi);
  uop *a = where(lt(x, lo), lo, x);
  a = where(nan, fc(ft, 0), where(lt(hi, a), hi, a));
  uop *t = addc(a, magic), *q = addc(t, -magic), *u = poly(sub(a, q), p->exp_poly, p->exp_n);
  uop *tiny = lt(q, fc(ft, 2 - p->bias));
  uop *k = where(tiny, uop_const_int(it, p->tiny_shift - 1), uop_const_int(it, -1));
  uop *m = where(tiny, fc(ft, ldexp(1, 1 - p->tiny_shift)), fc(ft, 2));
  return where(nan, x, mul(mul(u, m), pow2_from_rounded(p, t, k)));
}

/* ---------------------------------------------------------------- log2 */

static uop *xlog2(const fparams *p, uop *x) {
  tg_dtype ft = p->ft, it = p->it;
  uop *den = lt(x, fc(ft, p->min_normal)), *inf = fc(ft, INFINITY);
  uop *ok = uop_alu(OP_AND, lt(fc(ft, 0), x), lt(x, inf));
  uop *a = where(ok, where(den, mulc(x, 0x1p64), x), fc(ft, 1));
  uop *bits = bitcast(mulc(a, 1.0 / 0.75), it);
  uop *e = sub(uop_alu(OP_SHR, bits, uop_const_int(it, p->mant)), uop_const_int(it, p->bias));
  uop *m = bitcast(sub(bitcast(a, it), mul(e, uop_const_int(it, (int64_t)1 << p->mant))), ft);
  uop *ef = add(cast(e, ft), where(den, fc(ft, -64), fc(ft, 0)));
  uop *y = uop_alu(OP_FDIV, addc(m, -1), addc(m, 1)), *y2 = mul(y, y);
  uop *hi = add(ef, mulc(y, p->log_c1));
  if (p->log_c2 != 0) hi = add(hi, mulc(y, p->log_c2));
  uop *r = add(mul(poly(y2, p->log_poly, p->log_n), mul(y, y2)), hi);
  r = where(eq(x, inf), inf, r);
  r = where(eq(x, fc(ft, 0)), fc(ft, -INFINITY), r); /* -0 too */
  r = where(lt(x, fc(ft, 0)), fc(ft, NAN), r);
  return where(is_nan(x), x, r);
}

/* ---------------------------------------------------------------- sin (in float64) */

/* 2/pi in 24-bit chunks, 2/pi = sum chunk[i] * 2^(-24 (i + 1)): as many as float32's largest
 * exponent needs (the products below 2^-64 of the fraction). */
static const uint32_t two_over_pi[9] = {0xA2F983, 0x6E4E44, 0x1529FC, 0x2757D1, 0xF534DD,
                                         0xC0DB62, 0x95993C, 0x439041, 0xFE5163};

/* A reduced angle: hi + lo radians in about [-pi/4, pi/4], and the quadrant k mod 4 (a
 * float64 in 0..3) of the multiple k of pi/2 taken off. */
typedef struct reduced {
  uop *hi, *lo, *quadrant;
} reduced;

/* s + t = sum + err exactly (Knuth's TwoSum); adds err to *acc. */
static uop *two_sum(uop *s, uop *t, uop **acc) {
  uop *sum = add(s, t), *bb = sub(sum, s);
  *acc = add(*acc, add(sub(s, sub(sum, bb)), sub(t, bb)));
  return sum;
}

/* v mod 4 for an exact float64 product v, exactly (a value in (-4, 4)). */
static uop *mod4(uop *v) { return sub(v, mulc(uop_new1(OP_TRUNC, TG_FLOAT64, mulc(v, 0.25)), 4)); }

/* k - 4 floor(k / 4) for an integral k, |k| < 2^50: rint(k/4 - 3/8) is floor(k/4). */
static uop *quadrant_of(uop *k) { return sub(k, mulc(rint_small(addc(mulc(k, 0.25), -0.375)), 4)); }

/* From the fraction of x * 2/pi as s + err (the integer part k already in s): radians. */
static reduced from_turns(uop *s, uop *err) {
  uop *k = rint_small(s), *f = sub(s, k); /* exact */
  const double pio2_hi = 1.5707963267948966, pio2_lo = 6.123233995736766e-17;
  uop *hi = mulc(f, pio2_hi);
  uop *lo = add(mulc(f, pio2_lo), mulc(err, pio2_hi));
  uop *h = add(hi, lo); /* renormalized */
  return (reduced){h, sub(lo, sub(h, hi)), quadrant_of(k)};
}

/* Payne-Hanek for a float32 x (held in float64): each x * chunk is exact (24 x 24 bits). */
static reduced payne_hanek(uop *x) {
  uop *s = NULL, *err = fc(TG_FLOAT64, 0);
  for (int i = 0; i < 9; i++) {
    uop *t = mod4(mulc(x, ldexp(two_over_pi[i], -24 * (i + 1))));
    s = s ? mod4(two_sum(s, t, &err)) : t; /* mod 4 keeps |s| < 4: exact */
  }
  return from_turns(s, err);
}

/* fdlibm's medium reduction for |x| < 2^19 * pi/2: n = rint(x 2/pi), x - n pi/2 in three
 * steps of 33-bit pieces of pi/2, each keeping the rounding error of the last. */
static reduced cody_waite(uop *x) {
  static const double p1 = 1.57079632673412561417e+00, p2 = 6.07710050630396597660e-11,
                      p2t = 2.02226624879595063154e-21, p3 = 2.02226624871116645580e-21,
                      p3t = 8.47842766036889956997e-32;
  uop *n = rint_small(mulc(x, 6.36619772367581382433e-01));
  uop *r = sub(x, mulc(n, p1)), *w = fc(TG_FLOAT64, 0);
  const double steps[2][2] = {{p2, p2t}, {p3, p3t}};
  for (int i = 0; i < 2; i++) {
    uop *t = r, *wp = mulc(n, steps[i][0]);
    r = sub(t, wp);
    w = sub(mulc(n, steps[i][1]), sub(sub(t, r), wp));
  }
  uop *y = sub(r, w);
  return (reduced){y, sub(sub(r, y), w), quadrant_of(n)};
}

/* sin of a reduced angle: sin or cos of hi + lo by the quadrant (fdlibm's kernels). */
static uop *sin_of(reduced r) {
  static const double S[] = {1.58969099521155010221e-10, -2.50507602534068634195e-08, 2.75573137070700676789e-06,
                             -1.98412698298579493134e-04, 8.33333333332248946124e-03, -1.66666666666666324348e-01};
  static const double C[] = {-1.13596475577881948265e-11, 2.08757232129817482790e-09, -2.75573143513906633035e-07,
                             2.48015872894767294178e-05, -1.38888888888741095749e-03, 4.16666666666666019037e-02};
  uop *x = r.hi, *y = r.lo, *z = mul(x, x);
  /* sin(x + y) ~ x + x z S(z) + y (1 - z/2); cos(x + y) ~ 1 - z/2 + z^2 C(z) - x y */
  uop *s = add(x, add(mul(mul(x, z), poly(z, S, 6)), mul(y, addc(mulc(z, -0.5), 1))));
  uop *hz = mulc(z, 0.5), *w = addc(mulc(hz, -1), 1);
  uop *c = add(w, add(sub(sub(fc(TG_FLOAT64, 1), w), hz), sub(mul(mul(z, z), poly(z, C, 6)), mul(x, y))));
  uop *q = r.quadrant, *odd = uop_alu(OP_OR, eq(q, fc(TG_FLOAT64, 1)), eq(q, fc(TG_FLOAT64, 3)));
  uop *v = where(odd, c, s);
  return where(lt(fc(TG_FLOAT64, 1.5), q), uop_new1(OP_NEG, TG_FLOAT64, v), v);
}

/* float32 sin, computed in float64: every float32 times a 24-bit chunk is exact. */
static uop *xsin32(uop *x) {
  uop *xd = cast(x, TG_FLOAT64), *fin = eq(sub(xd, xd), fc(TG_FLOAT64, 0));
  uop *xs = where(fin, xd, fc(TG_FLOAT64, 0));
  uop *v = cast(sin_of(payne_hanek(xs)), TG_FLOAT32);
  v = where(eq(x, fc(TG_FLOAT32, 0)), x, v); /* sin(-0) = -0 */
  return where(fin, v, fc(TG_FLOAT32, NAN));
}

/* float64 sin: fdlibm's reduction and kernels below 2^19 pi/2. Larger (and non-finite)
 * lanes call the native sin, the other lanes pass it 0 (libm's fastest path): an exact
 * reduction of every double the float32 way needs 46 chunks times two halves of x, which
 * measured 5x slower than libm on every input and 8 s to compile (performance.md). */
static uop *xsin64(uop *x) {
  tg_dtype d = TG_FLOAT64;
  uop *ax = where(lt(x, fc(d, 0)), uop_new1(OP_NEG, d, x), x);
  uop *medium = lt(ax, fc(d, 823549.0)); /* false for inf and NaN */
  uop *v = where(eq(x, fc(d, 0)), x, sin_of(cody_waite(where(medium, x, fc(d, 0))))); /* sin(-0) = -0 */
  uop *rest = where(medium, fc(d, 0), x);
  const int64_t native = 1; /* arg: keep as a call (rule_sin skips it) */
  return where(medium, v, uop_new(OP_SIN, d, &rest, 1, &native, 1));
}

/* ---------------------------------------------------------------- the rules */

typedef uop *(*decompose_fn)(uop *x, tg_dtype dt);

static uop *exp2_of(uop *x, tg_dtype dt) { return xexp2(dt == TG_FLOAT64 ? &params64 : &params32, x); }
static uop *log2_of(uop *x, tg_dtype dt) { return xlog2(dt == TG_FLOAT64 ? &params64 : &params32, x); }
static uop *sin_any(uop *x, tg_dtype dt) { return dt == TG_FLOAT64 ? xsin64(x) : xsin32(x); }

/* 16-bit floats: computed in float32 and rounded back. */
static uop *decompose(uop *u, decompose_fn fn) {
  tg_dtype dt = u->dtype;
  if (!dtype_is_float(dt)) return NULL;
  if (!dtype_is_half(dt)) return fn(u->src[0], dt);
  return cast(fn(cast(u->src[0], TG_FLOAT32), TG_FLOAT32), dt);
}

static uop *rule_exp2(void *ctx, uop *u, uop **cap) { return (void)ctx, (void)cap, decompose(u, exp2_of); }
static uop *rule_log2(void *ctx, uop *u, uop **cap) { return (void)ctx, (void)cap, decompose(u, log2_of); }
static uop *rule_sin(void *ctx, uop *u, uop **cap) { return (void)ctx, (void)cap, u->narg ? NULL : decompose(u, sin_any); }

static const rule transcendental_rules[] = {
    {"(EXP2 x)", rule_exp2},
    {"(LOG2 x)", rule_log2},
    {"(SIN x)", rule_sin},
    {NULL, NULL},
};

bool transcendental_wanted(const kshape *ks) {
  static _Atomic int enabled = TG_ENV_UNREAD;
  return !(ks && ks->scalar) && tg_getenv_cached(&enabled, "TRANSCENDENTAL", 1);
}

uop *transcendental_rewrite(uop *sink, const kshape *ks) {
  static rule_table *_Atomic table;
  if (!sink || !transcendental_wanted(ks)) return sink;
  return graph_rewrite(sink, rule_table_once(&table, "transcendental", transcendental_rules), NULL);
}
