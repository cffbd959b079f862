/* test_transcendental.c — exp2, log2 and sin as polynomial code (src/codegen/transcendental.c)
 * against libm, over the whole float range.
 *
 * Inputs: about a million float32 bit patterns spread evenly over all 2^32 (every binade, both
 * signs, denormals, NaNs), a dense sweep of the range where the function is interesting, and
 * special values; float64 the same over 2^64. Each array is realized on every host device, CPU
 * (the C renderer) and LLVM (big enough for vector lanes) and compared with libm computed here in a wider type: double
 * exp2/log2/sin for float32, long double exp2l/log2l/sinl for float64. The error is measured
 * in ulps of the result type; NaN must give NaN, inf and signed zeros must match exactly. */
#include <float.h>
#include <stdint.h>
#include <stdlib.h>

#include "harness.h"
#include "codegen/transcendental.h"
#include "tensor/tensor.h"
#include "uop/dtype.h"

typedef enum { F_EXP2, F_LOG2, F_SIN } fn_id;
static const uop_op fn_ops[] = {OP_EXP2, OP_LOG2, OP_SIN};
static const char *const fn_names[] = {"exp2", "log2", "sin"};

/* y = f(x) on the default device: through the public API, or (raw) as the bare op of x's
 * dtype (tg_sin computes float32 in float64; the raw op reaches the float32 code). */
static void *run(fn_id f, const void *x, tg_dtype dt, int64_t n, bool raw) {
  tg_scope *s = tg_scope_begin();
  tg_tensor *t = tg_from_data(x, dt, &n, 1), *y = NULL;
  if (raw) {
    size_t mark = uop_pool_mark();
    y = tensor_wrap(uop_new1(fn_ops[f], dt, t->u));
    uop_pool_release(mark);
  } else {
    y = f == F_EXP2 ? tg_exp2(t) : f == F_LOG2 ? tg_log2(t) : tg_sin(t);
  }
  size_t bytes = (size_t)n * tg_dtype_size(dt);
  void *out = malloc(bytes);
  int rc = y ? tg_to_host(y, out, bytes) : -1;
  tg_scope_end(s);
  if (rc < 0) printf("  %s: %s\n", fn_names[f], tg_last_error());
  CHECK(rc >= 0);
  return out;
}

/* Error of got in ulps of the result type (mant bits, min_exp the least normal exponent) for
 * the wider reference ref. inf beyond the largest finite counts as 2^(max_exp+1). */
static long double ulps(long double got, long double ref, int mant, int min_exp, long double huge) {
  if (isnan(ref) || isnan(got)) return isnan(ref) && isnan(got) ? 0 : INFINITY;
  if (isinf(got)) got = copysignl(huge, got);
  if (isinf(ref)) ref = copysignl(huge, ref);
  if (fabsl(ref) >= huge && fabsl(got) >= huge && signbit(got) == signbit(ref)) return 0;
  int e = ref == 0 ? min_exp : ilogbl(ref);
  if (e < min_exp) e = min_exp;
  return fabsl(got - ref) / ldexpl(1, e - mant);
}

static double ref32(fn_id f, float x) { return f == F_EXP2 ? exp2((double)x) : f == F_LOG2 ? log2((double)x) : sin((double)x); }
static long double ref64(fn_id f, double x) { return f == F_EXP2 ? exp2l(x) : f == F_LOG2 ? log2l(x) : sinl(x); }

/* Exactly representable results the functions must get exactly (signed zeros, infinities). */
static bool exact32(fn_id f, float x, double r) { return r == 0 || isinf(r) || (f != F_SIN && x == floorf(x) && fabs(x) < 100) || isnan(x); }

static float from_bits32(uint32_t b) { float f; memcpy(&f, &b, 4); return f; }
static double from_bits64(uint64_t b) { double d; memcpy(&d, &b, 8); return d; }

/* Sweep inputs: bit patterns over the whole range, a dense interval [lo, hi], specials. */
static int64_t inputs32(float *x, int64_t cap, float lo, float hi) {
  static const float specials[] = {0.0f, -0.0f, INFINITY, -INFINITY, NAN, -NAN, FLT_MIN, -FLT_MIN, FLT_MAX, -FLT_MAX,
                                   0x1p-149f, -0x1p-149f, 0x1.fffffcp-127f, 1, -1, 2, 0.5f, 127.99999f, 128, -126,
                                   -127.5f, -149, -149.5f, -150, -150.5f, -151, 0x1.921fb6p+0f, 0x1.921fb6p+1f,
                                   0x1.921fb6p+2f, 1e38f, -1e38f, 0x1.5d6c6p+120f, 1e-40f, 3.14159274f, 1e10f, 12345.678f};
  int64_t n = 0;
  for (size_t i = 0; i < sizeof specials / sizeof *specials; i++) x[n++] = specials[i];
  for (uint64_t b = 0; b < (1ull << 32) && n < cap / 2; b += 8191) x[n++] = from_bits32((uint32_t)b);
  for (int64_t i = 0; n < cap; i++) x[n++] = lo + (hi - lo) * (float)i / (float)(cap / 2);
  return n;
}

static int64_t inputs64(double *x, int64_t cap, double lo, double hi) {
  static const double specials[] = {0.0, -0.0, INFINITY, -INFINITY, NAN, DBL_MIN, -DBL_MIN, DBL_MAX, -DBL_MAX,
                                    0x1p-1074, 0x1.fffffffffffffp-1023, 1, -1, 2, 0.5, 1023.9999999, 1024, -1022,
                                    -1074, -1074.5, -1075, -1076, 0x1.921fb54442d18p+0, 0x1.921fb54442d18p+1,
                                    1e300, -1e300, 0x1.6ac5b262ca1ffp+849, 823549.0, 823550.0, 1e22, 5.319372648326541e+255};
  int64_t n = 0;
  for (size_t i = 0; i < sizeof specials / sizeof *specials; i++) x[n++] = specials[i];
  uint64_t step = UINT64_MAX / (uint64_t)(cap / 2) | 1;
  for (uint64_t b = 0; n < cap / 2; b += step) x[n++] = from_bits64(b);
  for (int64_t i = 0; n < cap; i++) x[n++] = lo + (hi - lo) * (double)i / (double)(cap / 2);
  return n;
}

static const float lo32[] = {-152, 0, -20}, hi32[] = {129, 8, 20};

/* float32: max ulps over the sweep must stay within bound; exact cases exact. */
static void check32_here(fn_id f, bool raw, int bound, const char *dev) {
  int64_t cap = 1 << 20;
  float *x = malloc((size_t)cap * 4);
  int64_t n = inputs32(x, cap, lo32[f], hi32[f]);
  float *y = run(f, x, TG_FLOAT32, n, raw);
  double worst = 0;
  int64_t at = 0, bad_exact = 0;
  for (int64_t i = 0; i < n; i++) {
    double r = ref32(f, x[i]);
    double e = (double)ulps(y[i], r, 23, -126, 0x1p128L);
    if (e > worst) worst = e, at = i;
    float rf = (float)r;
    if (exact32(f, x[i], r) && !(isnan(rf) ? isnan(y[i]) : (y[i] == rf && signbit(y[i]) == signbit(rf)))) {
      if (bad_exact++ < 5) printf("  %s(%a) = %a, want %a\n", fn_names[f], (double)x[i], (double)y[i], (double)rf);
    }
  }
  printf("  %s %s float32%s: max %.3f ulp at %a (got %a, libm %a), %lld inputs\n", dev, fn_names[f], raw ? " (bare op)" : "",
         worst, (double)x[at], (double)y[at], ref32(f, x[at]), (long long)n);
  CHECK(worst <= bound);
  CHECK(bad_exact == 0);
  free(x), free(y);
}

static const double lo64[] = {-1077, 0, -20}, hi64[] = {1025, 8, 20};

static void check64_here(fn_id f, int bound, const char *dev) {
  int64_t cap = 1 << 19;
  double *x = malloc((size_t)cap * 8);
  int64_t n = inputs64(x, cap, lo64[f], hi64[f]);
  double *y = run(f, x, TG_FLOAT64, n, false);
  long double worst = 0;
  int64_t at = 0, bad_exact = 0;
  for (int64_t i = 0; i < n; i++) {
    long double r = ref64(f, x[i]), e = ulps(y[i], r, 52, -1022, 0x1p1024L);
    if (e > worst) worst = e, at = i;
    double rd = (double)r;
    bool exact = rd == 0 || isinf(rd) || isnan(x[i]);
    if (exact && !(isnan(rd) ? isnan(y[i]) : (y[i] == rd && signbit(y[i]) == signbit(rd)))) {
      if (bad_exact++ < 5) printf("  %s(%a) = %a, want %a\n", fn_names[f], x[i], y[i], rd);
    }
  }
  printf("  %s %s float64: max %.3Lf ulp at %a (got %a, libm %a), %lld inputs\n", dev, fn_names[f], worst, x[at], y[at],
         (double)ref64(f, x[at]), (long long)n);
  CHECK(worst <= bound);
  CHECK(bad_exact == 0);
  free(x), free(y);
}

/* Every host device decomposes: the C renderer (CPU) and LLVM each get the whole sweep. */
static const char *const host_devices[] = {"CPU", "LLVM"};

/* The default device's name (a constant lives there). */
static void default_device(char *buf, size_t n) {
  tg_scope *s = tg_scope_begin();
  snprintf(buf, n, "%s", tg_device_of(tg_scalar(0, TG_FLOAT32)));
  tg_scope_end(s);
}

static void check32(fn_id f, bool raw, int bound) {
  char orig[32];
  default_device(orig, sizeof orig);
  for (int d = 0; d < 2; d++)
    if (tg_device_available(host_devices[d]) && tg_set_default_device(host_devices[d]) == 0)
      check32_here(f, raw, bound, host_devices[d]);
  CHECK(tg_set_default_device(orig) == 0);
}

static void check64(fn_id f, int bound) {
  char orig[32];
  default_device(orig, sizeof orig);
  for (int d = 0; d < 2; d++)
    if (tg_device_available(host_devices[d]) && tg_set_default_device(host_devices[d]) == 0)
      check64_here(f, bound, host_devices[d]);
  CHECK(tg_set_default_device(orig) == 0);
}

TEST(transcendental_exp2_float32) { check32(F_EXP2, false, TRANSC_EXP2_ULP); }
TEST(transcendental_log2_float32) { check32(F_LOG2, false, TRANSC_LOG2_ULP); }
TEST(transcendental_sin_float32_bare) { check32(F_SIN, true, TRANSC_SIN_ULP); }
TEST(transcendental_sin_float32) { check32(F_SIN, false, TRANSC_SIN_ULP); }
TEST(transcendental_exp2_float64) { check64(F_EXP2, TRANSC_EXP2_ULP); }
TEST(transcendental_log2_float64) { check64(F_LOG2, TRANSC_LOG2_ULP); }
TEST(transcendental_sin_float64) { check64(F_SIN, TRANSC_SIN_ULP); }

/* float16 and bfloat16 are computed in float32 and rounded once more: within one ulp of their
 * own type of the float32 libm result, on every value of the type. */
TEST(transcendental_half_types) {
  static const tg_dtype dts[] = {TG_FLOAT16, TG_BFLOAT16};
  for (int d = 0; d < 2; d++)
    for (int f = 0; f < 3; f++) {
      int64_t n = 1 << 16;
      uint16_t *x = malloc((size_t)n * 2);
      for (int64_t i = 0; i < n; i++) x[i] = (uint16_t)i;
      uint16_t *y = run((fn_id)f, x, dts[d], n, true);
      int bad = 0;
      for (int64_t i = 0; i < n; i++) {
        float xf = dts[d] == TG_FLOAT16 ? half_to_float(x[i]) : bf16_to_float(x[i]);
        float yf = dts[d] == TG_FLOAT16 ? half_to_float(y[i]) : bf16_to_float(y[i]);
        double r = ref32((fn_id)f, xf);
        double e = dts[d] == TG_FLOAT16 ? (double)ulps(yf, r, 10, -14, 0x1p16L) : (double)ulps(yf, r, 7, -126, 0x1p128L);
        if (e > 1 && bad++ < 3) printf("  %s %s(%a) = %a, libm %a\n", tg_dtype_name(dts[d]), fn_names[f], (double)xf, (double)yf, r);
      }
      CHECK(bad == 0);
      free(x), free(y);
    }
}

/* The decomposition really happened: a realized exp2 kernel calls no exp2 (the source of the
 * default device's kernel has no libm call for it). Checked through the generated source. */
TEST(transcendental_no_libm_calls) {
  CHECK(transcendental_wanted(NULL));
  size_t mark = uop_pool_mark();
  uop *x = uop_new(OP_DEFINE_GLOBAL, TG_FLOAT32, NULL, 0, (const int64_t[]){1, 16}, 2);
  uop *sink = uop_new1(OP_SINK, TG_BOOL, uop_new1(OP_EXP2, TG_FLOAT32, uop_new1(OP_SIN, TG_FLOAT32, uop_new1(OP_LOG2, TG_FLOAT32, x))));
  uop *out = transcendental_rewrite(sink, NULL);
  uop **order;
  int n = uop_toposort(out, &order), left = 0;
  for (int i = 0; i < n; i++) left += order[i]->op == OP_EXP2 || order[i]->op == OP_LOG2 || order[i]->op == OP_SIN;
  CHECK(n > 50);
  CHECK(left == 0);
  free(order);
  uop_pool_release(mark);
}
