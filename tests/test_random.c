/* test_random.c — the threefry-2x32 generator and what is built on it.
 *
 * ref_threefry below is an independent implementation written from the Random123 paper
 * (Salmon et al., SC'11) and checked against its known-answer vectors; the device output
 * and tg_random_u32 must agree with it bit for bit. Element i of a draw uses counter
 * (start + i) as the 64-bit pair (low word, high word) and key (seed low, seed high). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"

/* ------------------------------------------------------------------ reference */

static uint32_t ref_rotl(uint32_t x, unsigned r) { return (x << r) | (x >> (32 - r)); }

static void ref_threefry(uint32_t k0, uint32_t k1, uint32_t c0, uint32_t c1, uint32_t out[2]) {
  static const unsigned R[8] = {13, 15, 26, 6, 17, 29, 16, 24};
  uint32_t ks[3] = {k0, k1, 0x1BD11BDAu ^ k0 ^ k1};
  uint32_t x[2] = {c0 + ks[0], c1 + ks[1]};
  for (unsigned r = 0; r < 20; r++) {
    x[0] += x[1];
    x[1] = ref_rotl(x[1], R[r % 8]) ^ x[0];
    if (r % 4 == 3) {
      unsigned inj = r / 4 + 1;
      x[0] += ks[inj % 3];
      x[1] += ks[(inj + 1) % 3] + inj;
    }
  }
  out[0] = x[0], out[1] = x[1];
}

static void ref_stream(uint64_t seed, uint64_t ctr, uint32_t out[2]) {
  ref_threefry((uint32_t)seed, (uint32_t)(seed >> 32), (uint32_t)ctr, (uint32_t)(ctr >> 32), out);
}

TEST(random_reference_known_answers) {
  uint32_t o[2];
  ref_threefry(0, 0, 0, 0, o);
  CHECK(o[0] == 0x6b200159u && o[1] == 0x99ba4efeu);
  ref_threefry(0xffffffffu, 0xffffffffu, 0xffffffffu, 0xffffffffu, o);
  CHECK(o[0] == 0x1cb996fcu && o[1] == 0xbb002be7u);
  ref_threefry(0x13198a2eu, 0x03707344u, 0x243f6a88u, 0x85a308d3u, o);
  CHECK(o[0] == 0xc4923a9cu && o[1] == 0x483df7a0u);
}

/* ------------------------------------------------------------------ host stream */

TEST(random_host_u32_matches_reference) {
  uint64_t seed = 0x0123456789abcdefull;
  tg_manual_seed(seed);
  uint32_t a[5], b[3], o[2];
  tg_random_u32(a, 5);
  tg_random_u32(b, 3); /* continues the stream */
  for (int i = 0; i < 5; i++) {
    ref_stream(seed, (uint64_t)i, o);
    CHECK(a[i] == o[0]);
  }
  for (int i = 0; i < 3; i++) {
    ref_stream(seed, (uint64_t)(5 + i), o);
    CHECK(b[i] == o[0]);
  }
  tg_manual_seed(seed); /* reseeding restarts */
  uint32_t c[5];
  tg_random_u32(c, 5);
  CHECK(memcmp(a, c, sizeof a) == 0);
  tg_random_u32(NULL, 0); /* nothing asked: fine */
  tg_clear_error();
  tg_random_u32(NULL, 4);
  CHECK(strstr(tg_last_error(), "random_u32") != NULL);
}

/* ------------------------------------------------------------------ device == reference */

TEST(random_rand_float32_bits_match_reference) {
  uint64_t seed = 42;
  tg_manual_seed(seed);
  tg_scope *s = tg_scope_begin();
  float got[2][12];
  for (int call = 0; call < 2; call++) {
    tg_tensor *r = tg_rand((int64_t[]){3, 4}, 2, TG_FLOAT32);
    CHECK(r && tg_ndim(r) == 2 && tg_dim(r, 0) == 3 && tg_get_dtype(r) == TG_FLOAT32);
    CHECK(tg_to_host(r, got[call], sizeof got[call]) == 0);
  }
  uint32_t o[2];
  for (int call = 0; call < 2; call++)
    for (int i = 0; i < 12; i++) { /* 23 top bits scaled by 2^-23: exact */
      ref_stream(seed, (uint64_t)(12 * call + i), o);
      CHECK(got[call][i] == (float)(o[0] >> 9) * 0x1p-23f);
    }
  uint32_t host[1];
  tg_random_u32(host, 1); /* the host shares the stream: counter 24 comes next */
  ref_stream(seed, 24, o);
  CHECK(host[0] == o[0]);
  tg_scope_end(s);
}

TEST(random_rand_float64_uses_52_bits) {
  uint64_t seed = 7;
  tg_manual_seed(seed);
  tg_scope *s = tg_scope_begin();
  double got[10];
  CHECK(tg_to_host(tg_rand((int64_t[]){10}, 1, TG_FLOAT64), got, sizeof got) == 0);
  for (int i = 0; i < 10; i++) {
    uint32_t o[2];
    ref_stream(seed, (uint64_t)i, o);
    uint64_t bits52 = ((uint64_t)(o[1] >> 12) << 32) | o[0];
    CHECK(got[i] == (double)bits52 * 0x1p-52);
  }
  tg_scope_end(s);
}

TEST(random_half_types_stay_below_one) {
  tg_manual_seed(3);
  tg_scope *s = tg_scope_begin();
  tg_tensor *h = tg_cast(tg_rand((int64_t[]){4096}, 1, TG_FLOAT16), TG_FLOAT32);
  tg_tensor *b = tg_cast(tg_rand((int64_t[]){4096}, 1, TG_BFLOAT16), TG_FLOAT32);
  CHECK(tg_item(tg_max(h, NULL, 0, false)) < 1 && tg_item(tg_min(h, NULL, 0, false)) >= 0);
  CHECK(tg_item(tg_max(b, NULL, 0, false)) < 1 && tg_item(tg_min(b, NULL, 0, false)) >= 0);
  CHECK(tg_item(tg_max(h, NULL, 0, false)) > 0.99);
  tg_scope_end(s);
}

/* Box–Muller from the same bits: u1 = (x0 + 1) 2^-32, u2 = x1 2^-32 */
TEST(random_randn_matches_box_muller) {
  uint64_t seed = 1234;
  tg_manual_seed(seed);
  tg_scope *s = tg_scope_begin();
  double got[16];
  CHECK(tg_to_host(tg_randn((int64_t[]){4, 4}, 2, TG_FLOAT64), got, sizeof got) == 0);
  for (int i = 0; i < 16; i++) {
    uint32_t o[2];
    ref_stream(seed, (uint64_t)i, o);
    double u1 = ((double)o[0] + 1) * 0x1p-32, u2 = (double)o[1] * 0x1p-32;
    CHECK_CLOSE(got[i], sqrt(-2 * log(u1)) * cos(2 * M_PI * u2), 1e-12);
  }
  tg_scope_end(s);
}

TEST(random_randint_matches_reference) {
  uint64_t seed = 99;
  tg_manual_seed(seed);
  tg_scope *s = tg_scope_begin();
  int32_t got[20];
  CHECK(tg_to_host(tg_randint((int64_t[]){20}, 1, -5, 7, TG_INT32), got, sizeof got) == 0);
  for (int i = 0; i < 20; i++) {
    uint32_t o[2];
    ref_stream(seed, (uint64_t)i, o);
    uint64_t r = ((uint64_t)o[1] << 32) | o[0];
    CHECK(got[i] == (int32_t)(-5 + (int64_t)(r % 12)));
  }
  int64_t big[8]; /* a span wider than 32 bits, and the full int64 range */
  CHECK(tg_to_host(tg_randint((int64_t[]){8}, 1, INT64_MIN, INT64_MAX, TG_INT64), big, sizeof big) == 0);
  int distinct = 0;
  for (int i = 1; i < 8; i++) distinct += big[i] != big[0];
  CHECK(distinct == 7);
  tg_scope_end(s);
}

TEST(random_randint_range_and_coverage) {
  tg_manual_seed(5);
  tg_scope *s = tg_scope_begin();
  enum { N = 20000 };
  static uint8_t v[N];
  CHECK(tg_to_host(tg_randint((int64_t[]){N}, 1, 3, 10, TG_UINT8), v, sizeof v) == 0);
  int count[256] = {0};
  for (int i = 0; i < N; i++) count[v[i]]++;
  for (int k = 0; k < 256; k++) {
    if (k < 3 || k >= 10) CHECK(count[k] == 0);
    else CHECK(fabs(count[k] - N / 7.0) < 5 * sqrt(N / 7.0)); /* 5 sigma */
  }
  bool b[64];
  CHECK(tg_to_host(tg_randint((int64_t[]){64}, 1, 0, 2, TG_BOOL), b, sizeof b) == 0);
  int ones = 0;
  for (int i = 0; i < 64; i++) ones += b[i];
  CHECK(ones > 10 && ones < 54);
  float f[64];
  CHECK(tg_to_host(tg_randint((int64_t[]){64}, 1, -3, 3, TG_FLOAT32), f, sizeof f) == 0);
  for (int i = 0; i < 64; i++) CHECK(f[i] == floorf(f[i]) && f[i] >= -3 && f[i] < 3);
  tg_scope_end(s);
}

/* ------------------------------------------------------------------ streams */

static void draw(uint64_t seed, float *out, int n) {
  tg_manual_seed(seed);
  tg_scope *s = tg_scope_begin();
  CHECK(tg_to_host(tg_rand((int64_t[]){n}, 1, TG_FLOAT32), out, sizeof(float) * (size_t)n) == 0);
  tg_scope_end(s);
}

TEST(random_same_seed_same_numbers) {
  float a[64], b[64], c[64];
  draw(11, a, 64), draw(11, b, 64), draw(12, c, 64);
  CHECK(memcmp(a, b, sizeof a) == 0);
  int same = 0;
  for (int i = 0; i < 64; i++) same += a[i] == c[i];
  CHECK(same < 4);
  /* successive draws differ */
  tg_manual_seed(11);
  tg_scope *s = tg_scope_begin();
  float x[64], y[64];
  CHECK(tg_to_host(tg_rand((int64_t[]){64}, 1, TG_FLOAT32), x, sizeof x) == 0);
  CHECK(tg_to_host(tg_rand((int64_t[]){64}, 1, TG_FLOAT32), y, sizeof y) == 0);
  CHECK(memcmp(x, a, sizeof x) == 0 && memcmp(x, y, sizeof x) != 0);
  tg_scope_end(s);
}

/* The counter and key are data (a small buffer), so a repeated draw compiles nothing. */
TEST(random_second_draw_compiles_nothing) {
  tg_manual_seed(1);
  tg_scope *s = tg_scope_begin();
  float a[100], b[100];
  CHECK(tg_to_host(tg_randn((int64_t[]){10, 10}, 2, TG_FLOAT32), a, sizeof a) == 0);
  tg_manual_seed(2); /* a new seed is data too */
  tg_reset_stats();
  CHECK(tg_to_host(tg_randn((int64_t[]){10, 10}, 2, TG_FLOAT32), b, sizeof b) == 0);
  CHECK(tg_get_stats().kernels_compiled == 0);
  CHECK(tg_get_stats().kernels_run == 1);
  CHECK(memcmp(a, b, sizeof a) != 0);
  tg_scope_end(s);
}

/* ------------------------------------------------------------------ moments */

static void moments(tg_tensor *t, double *mean, double *var, double *lo, double *hi) {
  tg_tensor *x = tg_cast(t, TG_FLOAT64);
  *mean = tg_item(tg_mean(x, NULL, 0, false));
  *var = tg_item(tg_var(x, NULL, 0, false, 0));
  *lo = tg_item(tg_min(x, NULL, 0, false));
  *hi = tg_item(tg_max(x, NULL, 0, false));
}

TEST(random_moments) {
  tg_manual_seed(2024);
  tg_scope *s = tg_scope_begin();
  int64_t n[1] = {100000};
  double m, v, lo, hi;
  moments(tg_rand(n, 1, TG_FLOAT32), &m, &v, &lo, &hi); /* sd of the mean: 0.0009 */
  CHECK(fabs(m - 0.5) < 0.005 && fabs(v - 1 / 12.0) < 0.002 && lo >= 0 && hi < 1);
  moments(tg_randn(n, 1, TG_FLOAT32), &m, &v, &lo, &hi);
  CHECK(fabs(m) < 0.015 && fabs(v - 1) < 0.02 && lo < -3.5 && hi > 3.5);
  moments(tg_uniform(n, 1, -2, 6, TG_FLOAT64), &m, &v, &lo, &hi);
  CHECK(fabs(m - 2) < 0.04 && fabs(v - 64 / 12.0) < 0.1 && lo >= -2 && hi < 6);
  moments(tg_normal(n, 1, 3, 0.5, TG_FLOAT32), &m, &v, &lo, &hi);
  CHECK(fabs(m - 3) < 0.01 && fabs(v - 0.25) < 0.006);
  /* fourth moment of the normal: 3 */
  tg_tensor *z = tg_randn(n, 1, TG_FLOAT64);
  CHECK(fabs(tg_item(tg_mean(tg_pow_s(z, 4), NULL, 0, false)) - 3) < 0.1);
  tg_scope_end(s);
}

/* ------------------------------------------------------------------ initializers */

TEST(random_initializer_bounds_and_std) {
  tg_manual_seed(77);
  tg_scope *s = tg_scope_begin();
  int64_t lin[2] = {256, 400}, conv[4] = {64, 16, 5, 5}; /* conv: fan_in 400, fan_out 1600 */
  double m, v, lo, hi;
  double ku = sqrt(2.0 / (1 + 5.0)) * sqrt(3.0 / 400); /* a = sqrt(5): torch.nn.Linear's bound 1/sqrt(fan_in) */
  CHECK_CLOSE(ku, 1 / sqrt(400.0), 1e-12);
  moments(tg_kaiming_uniform(lin, 2, sqrt(5.0), TG_FLOAT32), &m, &v, &lo, &hi);
  CHECK(lo >= -ku && hi <= ku && lo < -0.99 * ku && hi > 0.99 * ku);
  CHECK(fabs(v - ku * ku / 3) < 0.03 * ku * ku / 3);
  moments(tg_kaiming_uniform(conv, 4, 0, TG_FLOAT32), &m, &v, &lo, &hi);
  double kc = sqrt(2.0) * sqrt(3.0 / 400);
  CHECK(lo >= -kc && hi <= kc && hi > 0.99 * kc);
  moments(tg_kaiming_normal(conv, 4, 0, TG_FLOAT32), &m, &v, &lo, &hi); /* std sqrt(2/400) */
  CHECK(fabs(sqrt(v) - sqrt(2.0 / 400)) < 0.02 * sqrt(2.0 / 400) && fabs(m) < 0.002);
  double gu = sqrt(6.0 / (400 + 1600));
  moments(tg_glorot_uniform(conv, 4, TG_FLOAT64), &m, &v, &lo, &hi);
  CHECK(lo >= -gu && hi <= gu && hi > 0.99 * gu);
  moments(tg_glorot_normal(lin, 2, TG_FLOAT32), &m, &v, &lo, &hi); /* std sqrt(2/(400+256)) */
  CHECK(fabs(sqrt(v) - sqrt(2.0 / 656)) < 0.02 * sqrt(2.0 / 656));
  tg_scope_end(s);
}

/* ------------------------------------------------------------------ dropout */

TEST(random_dropout_keep_rate_and_scale) {
  tg_manual_seed(8);
  tg_scope *s = tg_scope_begin();
  enum { N = 50000 };
  tg_tensor *x = tg_add_s(tg_arange(0, N, 1, TG_FLOAT32), 1); /* all nonzero */
  static float in[N], out[N];
  CHECK(tg_to_host(x, in, sizeof in) == 0);
  CHECK(tg_to_host(tg_dropout(x, 0.3, true), out, sizeof out) == 0);
  int kept = 0;
  for (int i = 0; i < N; i++) {
    if (out[i] == 0) continue;
    kept++;
    CHECK_CLOSE(out[i], in[i] / 0.7f, 1e-6);
  }
  CHECK(fabs(kept / (double)N - 0.7) < 0.01); /* sd 0.002 */
  /* each call draws a fresh mask */
  static float again[N];
  CHECK(tg_to_host(tg_dropout(x, 0.3, true), again, sizeof again) == 0);
  CHECK(memcmp(out, again, sizeof out) != 0);
  /* evaluation mode and p = 0 are the identity */
  CHECK(tg_to_host(tg_dropout(x, 0.3, false), out, sizeof out) == 0);
  CHECK(memcmp(in, out, sizeof in) == 0);
  CHECK(tg_to_host(tg_dropout(x, 0, true), out, sizeof out) == 0);
  CHECK(memcmp(in, out, sizeof in) == 0);
  tg_scope_end(s);
}

TEST(random_dropout_gradient_is_the_mask) {
  tg_manual_seed(9);
  tg_scope *s = tg_scope_begin();
  tg_tensor *x = tg_ones((int64_t[]){1000}, 1, TG_FLOAT32), *g;
  CHECK(tg_realize(x) == 0);
  tg_tensor *y = tg_dropout(x, 0.5, true);
  CHECK(tg_gradient(tg_sum(y, NULL, 0, false), &x, 1, &g) == 0);
  static float yv[1000], gv[1000];
  CHECK(tg_to_host(y, yv, sizeof yv) == 0 && tg_to_host(g, gv, sizeof gv) == 0);
  for (int i = 0; i < 1000; i++) CHECK(gv[i] == yv[i]); /* x = 1: y = mask * 2 = dy/dx */
  tg_scope_end(s);
}

/* ------------------------------------------------------------------ errors */

TEST(random_errors) {
  tg_scope *s = tg_scope_begin();
  int64_t sh[2] = {2, 3}, bad[2] = {2, -1};
#define EXPECT_ERR(call, word)                              \
  do {                                                      \
    tg_clear_error();                                       \
    CHECK((call) == NULL);                                  \
    CHECK(strstr(tg_last_error(), word) != NULL);           \
  } while (0)
  EXPECT_ERR(tg_rand(sh, 2, TG_INT32), "rand");
  EXPECT_ERR(tg_rand(bad, 2, TG_FLOAT32), "(2, -1)");
  EXPECT_ERR(tg_rand(NULL, 2, TG_FLOAT32), "rand");
  EXPECT_ERR(tg_rand(sh, -1, TG_FLOAT32), "rand");
  EXPECT_ERR(tg_rand(sh, 2, (tg_dtype)99), "rand");
  EXPECT_ERR(tg_rand((int64_t[]){1 << 20, 1 << 20}, 2, TG_FLOAT32), "2^32");
  EXPECT_ERR(tg_randn(sh, 2, TG_BOOL), "randn");
  EXPECT_ERR(tg_randint(sh, 2, 5, 5, TG_INT32), "empty range");
  EXPECT_ERR(tg_randint(sh, 2, 0, 300, TG_UINT8), "uint8");
  EXPECT_ERR(tg_randint(sh, 2, -1, 3, TG_UINT32), "uint32");
  EXPECT_ERR(tg_randint(sh, 2, 0, 3, (tg_dtype)-1), "randint");
  EXPECT_ERR(tg_uniform(sh, 2, 2, 1, TG_FLOAT32), "uniform");
  EXPECT_ERR(tg_uniform(sh, 2, 0, INFINITY, TG_FLOAT32), "uniform");
  EXPECT_ERR(tg_normal(sh, 2, 0, -1, TG_FLOAT32), "std");
  EXPECT_ERR(tg_normal(sh, 2, NAN, 1, TG_FLOAT32), "normal");
  EXPECT_ERR(tg_kaiming_uniform((int64_t[]){5}, 1, 0, TG_FLOAT32), "2 dimensions");
  EXPECT_ERR(tg_kaiming_normal(NULL, 0, 0, TG_FLOAT32), "kaiming_normal");
  EXPECT_ERR(tg_glorot_uniform(sh, 2, TG_INT64), "glorot_uniform");
  EXPECT_ERR(tg_glorot_normal((int64_t[]){3}, 1, TG_FLOAT32), "glorot_normal");
  tg_tensor *x = tg_ones(sh, 2, TG_FLOAT32);
  EXPECT_ERR(tg_dropout(x, 1.0, true), "[0, 1)");
  EXPECT_ERR(tg_dropout(x, -0.1, false), "dropout");
  EXPECT_ERR(tg_dropout(x, NAN, true), "dropout");
  EXPECT_ERR(tg_dropout(tg_ones(sh, 2, TG_INT32), 0.5, true), "float");
  tg_clear_error();
  EXPECT_ERR(tg_dropout(NULL, 0.5, true), "dropout");
#undef EXPECT_ERR
  /* zero elements and rank 0 are fine */
  CHECK(tg_numel(tg_rand((int64_t[]){0, 3}, 2, TG_FLOAT32)) == 0);
  tg_tensor *r0 = tg_rand(NULL, 0, TG_FLOAT32);
  CHECK(r0 && tg_ndim(r0) == 0);
  double v = tg_item(r0);
  CHECK(v >= 0 && v < 1);
  tg_scope_end(s);
}
