/* test_half.c — float16 <-> float32 conversion bits on the device under test (DEV): every
 * float16 pattern converted to float32, a set of float32 patterns converted to float16, and the
 * round trip, each against numpy's rules written out here (numpy 1.24's
 * npy_halfbits_to_floatbits / npy_floatbits_to_halfbits: round to nearest even; a NaN keeps its
 * sign and payload, a signalling NaN stays signalling). The renderers convert in software or
 * with F16C (device_caps.f16c, which quiets signalling NaNs unless the quiet bit is put back):
 * run with F16C=0 and 1 on DEV=LLVM, and on DEV=CPU and DEV=CL. Hand-written anchors are the
 * values numpy 1.24.2 printed for them. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "uop/dtype.h"

/* numpy's float16 bits → float32 bits. */
static uint32_t ref_h2f(uint16_t h) {
  uint32_t s = (uint32_t)(h & 0x8000) << 16, e = h >> 10 & 31, m = h & 1023;
  if (e == 31) return s | 0x7f800000u | m << 13;
  if (e) return s | (e + 112) << 23 | m << 13;
  float v = ldexpf((float)m, -24); /* exact: m < 2^10 */
  uint32_t b;
  memcpy(&b, &v, 4);
  return s | b;
}

/* numpy's float32 bits → float16 bits: round to nearest even (the halfway cases by the kept
 * bits' parity), overflow to infinity, NaN payload's top bits (1 when none). */
static uint16_t ref_f2h(uint32_t f) {
  uint32_t s = f >> 16 & 0x8000, e = f >> 23 & 255, m = f & 0x7fffff;
  if (e == 255) return (uint16_t)(s | 0x7c00 | (m ? ((m >> 13) ? m >> 13 : 1) : 0));
  int ex = (int)e - 127 + 15;
  if (ex >= 31) return (uint16_t)(s | 0x7c00);
  if (ex <= 0) { /* subnormal half (or zero): the significand with its hidden bit, shifted */
    if (ex < -10) return (uint16_t)s;
    uint32_t sig = m | 0x800000, shift = (uint32_t)(14 - ex), q = sig >> shift, rem = sig & ((1u << shift) - 1), half = 1u << (shift - 1);
    q += rem > half || (rem == half && (q & 1));
    return (uint16_t)(s | q); /* a carry into the exponent gives the smallest normal: right */
  }
  uint32_t q = (uint32_t)ex << 10 | m >> 13, rem = m & 0x1fff;
  q += rem > 0x1000 || (rem == 0x1000 && (q & 1)); /* a carry may reach infinity: right */
  return (uint16_t)(s | q);
}

/* bits (n uint16) as float16, cast to float32, read back as bits. */
static void h2f_on_device(const uint16_t *h, uint32_t *out, int64_t n) {
  tg_scope *sc = tg_scope_begin();
  tg_tensor *t = tg_cast(tg_bitcast(tg_from_data(h, TG_UINT16, &n, 1), TG_FLOAT16), TG_FLOAT32);
  CHECK(t && tg_to_host(t, out, (size_t)n * 4) == 0);
  tg_scope_end(sc);
}

TEST(half_every_float16_to_float32_as_numpy) {
  enum { N = 65536 };
  uint16_t *h = malloc(N * 2);
  uint32_t *got = malloc(N * 4);
  CHECK(h && got);
  if (!h || !got) return free(h), free(got);
  for (int i = 0; i < N; i++) h[i] = (uint16_t)i;
  h2f_on_device(h, got, N);
  int bad = 0;
  for (int i = 0; i < N; i++)
    if (got[i] != ref_h2f(h[i]) && bad++ < 4) printf("  h2f(0x%04x) = 0x%08x, numpy 0x%08x\n", h[i], got[i], ref_h2f(h[i]));
  CHECK(bad == 0);
  /* anchors (numpy 1.24.2): sNaNs stay signalling, qNaN, the largest sNaN payload, a subnormal */
  CHECK(got[0x7c01] == 0x7f802000u && got[0xfc01] == 0xff802000u && got[0x7e00] == 0x7fc00000u);
  CHECK(got[0x7dff] == 0x7fbfe000u && got[0x0001] == 0x33800000u && got[0x7c00] == 0x7f800000u);
  free(h), free(got);
}

/* A converted float16 times a loaded 1 (a product: x86 quiets the NaN, as numpy's d * q does):
 * the quiet NaN of the same sign and payload, on the software path and F16C's alike. */
TEST(half_float16_times_one_is_quieted_as_numpy) {
  static const uint16_t h[8] = {0x7c01, 0xfc01, 0x7d55, 0x7e00, 0x0001, 0x83ff, 0x7bff, 0xfc00};
  float ones[8] = {1, 1, 1, 1, 1, 1, 1, 1};
  uint32_t got[8];
  int64_t n = 8;
  tg_scope *sc = tg_scope_begin();
  tg_tensor *x = tg_cast(tg_bitcast(tg_from_data(h, TG_UINT16, &n, 1), TG_FLOAT16), TG_FLOAT32);
  tg_tensor *y = tg_mul(x, tg_from_data(ones, TG_FLOAT32, &n, 1));
  CHECK(y && tg_to_host(y, got, sizeof got) == 0);
  for (int i = 0; i < 8; i++) {
    uint32_t want = ref_h2f(h[i]);
    if ((want & 0x7fffffffu) > 0x7f800000u) want |= 0x400000u;
    CHECK(got[i] == want);
  }
  CHECK(got[0] == 0x7fc02000u && got[1] == 0xffc02000u); /* numpy: float32(sNaN) * 1 */
  tg_scope_end(sc);
}

TEST(half_float32_to_float16_as_numpy) {
  static const uint32_t special[] = {
      0x00000000, 0x80000000, 0x00000001, 0x33000000, 0x33000001, 0x33800000, 0x33c00000, 0x387fc000, 0x387fe000,
      0x38800000, 0x3f800000, 0x3f801000, 0x3f803000, 0x3f802000, 0x477fe000, 0x477fefff, 0x477ff000, 0x47800000,
      0x7f7fffff, 0x7f800000, 0xff800000, 0x7fc00000, 0xffc00000, 0x7f800001, 0xff800001, 0x7fa00000, 0x7fc00001,
      0x7fbfffff, 0x7fffffff, 0x7f802000, 0xb3000001, 0xc77fefff};
  enum { NS = sizeof special / 4, NR = 20000, N = NS + NR };
  uint32_t *f = malloc(N * 4);
  uint16_t *got = malloc(N * 2), *back = malloc(65536 * 2);
  CHECK(f && got && back);
  if (!f || !got || !back) return free(f), free(got), free(back);
  memcpy(f, special, sizeof special);
  uint64_t st = 0x9e3779b97f4a7c15u;
  for (int i = NS; i < N; i++) { /* random patterns, most near float16's range */
    st = st * 6364136223846793005u + 1442695040888963407u;
    uint32_t r = (uint32_t)(st >> 32);
    f[i] = i % 4 ? (r & 0x87ffffffu) | 0x30000000u : r;
  }
  int64_t n = N;
  tg_scope *sc = tg_scope_begin();
  tg_tensor *t = tg_bitcast(tg_cast(tg_bitcast(tg_from_data(f, TG_UINT32, &n, 1), TG_FLOAT32), TG_FLOAT16), TG_UINT16);
  CHECK(t && tg_to_host(t, got, (size_t)N * 2) == 0);
  int bad = 0;
  for (int i = 0; i < N; i++)
    if (got[i] != ref_f2h(f[i]) && bad++ < 4) printf("  f2h(0x%08x) = 0x%04x, numpy 0x%04x\n", f[i], got[i], ref_f2h(f[i]));
  CHECK(bad == 0);
  /* anchors (numpy 1.24.2): sNaNs with no top payload bits stay NaN (0x7c01), sNaN payload kept */
  CHECK(got[23] == 0x7c01 && got[24] == 0xfc01 && got[25] == 0x7d00 && got[26] == 0x7e00);
  /* the round trip float16 -> float32 -> float16 (a cast kernel storing float16) keeps every
   * pattern, signalling NaNs included */
  uint16_t *h = malloc(65536 * 2);
  CHECK(h != NULL);
  for (int i = 0; h && i < 65536; i++) h[i] = (uint16_t)i;
  n = 65536;
  tg_tensor *rt = h ? tg_bitcast(tg_cast(tg_cast(tg_bitcast(tg_from_data(h, TG_UINT16, &n, 1), TG_FLOAT16), TG_FLOAT32), TG_FLOAT16), TG_UINT16) : NULL;
  CHECK(rt && tg_to_host(rt, back, 65536 * 2) == 0);
  bad = 0;
  for (int i = 0; h && i < 65536; i++) bad += back[i] != h[i];
  CHECK(bad == 0);
  tg_scope_end(sc);
  free(f), free(got), free(back), free(h);
}

/* The host's conversions (uop/dtype.c: folded constants, host reads and writes) give the same
 * bits as the devices: every float16 pattern, and float32 NaNs, infinities, rounding ties and
 * subnormals. */
TEST(half_host_conversion_as_numpy) {
  int bad = 0;
  for (int i = 0; i < 65536; i++) {
    float f = half_to_float((uint16_t)i);
    uint32_t b;
    memcpy(&b, &f, 4);
    bad += b != ref_h2f((uint16_t)i);
  }
  CHECK(bad == 0);
  static const uint32_t fs[] = {0x7f800001, 0xff800001, 0x7fa00000, 0x7fc00000, 0x7f800000, 0x33000000, 0x33000001,
                                0x387fe000, 0x3f801000, 0x3f803000, 0x477fefff, 0x477ff000, 0x00000001, 0x80000000};
  for (size_t i = 0; i < sizeof fs / 4; i++) {
    float f;
    memcpy(&f, &fs[i], 4);
    CHECK(float_to_half(f) == ref_f2h(fs[i]));
  }
  float snan;
  memcpy(&snan, &fs[0], 4);
  CHECK(float_to_half(snan) == 0x7c01); /* numpy 1.24.2 */
}
