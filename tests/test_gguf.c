/* test_gguf.c — the GGUF loader (src/io/gguf.c).
 *
 * The files are written by llama.cpp's `gguf` package (tests/gen_fixtures_gguf.py): meta.gguf
 * holds every metadata type; tensors.gguf one tensor per supported type and, beside each,
 * "<name>.ref", what gguf.quants.dequantize makes of it. tg's values must equal those bit for
 * bit, and equal this file's own dequantization of the raw blocks (ggml's C reference
 * dequantize_row_* loops, written out below). A matrix-vector product with a Q8_0 weight must
 * run as one kernel that stores no dequantized copy. Corrupt files are made here by patching
 * meta.gguf's bytes; each must fail with its message. Tests run from the repository root. */
#include <stdint.h>
#include <stdlib.h>
#include <unistd.h>

#include "harness.h"
#include "tg_llm.h"

#define META "tests/fixtures/gguf/meta.gguf"
#define TENSORS "tests/fixtures/gguf/tensors.gguf"

/* ---------------------------------------------------------------- helpers */

static unsigned char *slurp(const char *path, size_t *len) {
  FILE *f = fopen(path, "rb");
  if (!f) return NULL;
  fseek(f, 0, SEEK_END);
  long n = ftell(f);
  fseek(f, 0, SEEK_SET);
  unsigned char *buf = malloc((size_t)n + 1);
  if (buf && fread(buf, 1, (size_t)n, f) != (size_t)n) free(buf), buf = NULL;
  fclose(f);
  if (buf) *len = (size_t)n;
  return buf;
}

static const char *tmp_file(void) {
  static char path[64];
  if (!path[0]) snprintf(path, sizeof path, "/tmp/tg_gguf_%d.gguf", (int)getpid());
  return path;
}

static int spill(const unsigned char *data, size_t n) {
  FILE *f = fopen(tmp_file(), "wb");
  if (!f) return -1;
  int ok = fwrite(data, 1, n, f) == n;
  return fclose(f) == 0 && ok ? 0 : -1;
}

/* float16 bits to float (independent of tg's conversion). */
static float half(const unsigned char *p) {
  unsigned h = p[0] | p[1] << 8, e = h >> 10 & 31, m = h & 1023;
  float v = e == 0 ? ldexpf((float)m, -24) : e == 31 ? (m ? NAN : INFINITY) : ldexpf((float)(m | 1024), (int)e - 25);
  return h & 0x8000 ? -v : v;
}

/* The raw bytes of tensor `name` (malloc'd), with its info. */
static unsigned char *raw_bytes(const tg_gguf *g, const char *path, const char *name, tg_gguf_tensor_info *info) {
  size_t n;
  unsigned char *file = slurp(path, &n), *out = NULL;
  int64_t i = tg_gguf_find_tensor(g, name);
  if (file && i >= 0 && tg_gguf_tensor_info_at(g, i, info) == 0 && info->offset + info->nbytes <= (int64_t)n) {
    out = malloc((size_t)info->nbytes);
    if (out) memcpy(out, file + info->offset, (size_t)info->nbytes);
  }
  free(file);
  return out;
}

/* ---------------------------------------------------------------- ggml's reference dequantization */

static void ref_q8_0(const unsigned char *b, int64_t nb, float *y) {
  for (int64_t i = 0; i < nb; i++, b += 34)
    for (int j = 0; j < 32; j++) *y++ = (float)(int8_t)b[2 + j] * half(b);
}

static void ref_q4_0(const unsigned char *b, int64_t nb, float *y) {
  for (int64_t i = 0; i < nb; i++, b += 18, y += 32)
    for (int j = 0; j < 16; j++) {
      y[j] = (float)((b[2 + j] & 0xF) - 8) * half(b);
      y[j + 16] = (float)((b[2 + j] >> 4) - 8) * half(b);
    }
}

static void ref_q4_1(const unsigned char *b, int64_t nb, float *y) {
  for (int64_t i = 0; i < nb; i++, b += 20, y += 32)
    for (int j = 0; j < 16; j++) {
      y[j] = (float)(b[4 + j] & 0xF) * half(b) + half(b + 2);
      y[j + 16] = (float)(b[4 + j] >> 4) * half(b) + half(b + 2);
    }
}

static void scale_min_k4(int j, const unsigned char *q, int *d, int *m) {
  if (j < 4) *d = q[j] & 63, *m = q[j + 4] & 63;
  else *d = (q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4), *m = (q[j + 4] >> 4) | ((q[j] >> 6) << 4);
}

static void ref_q4_k(const unsigned char *b, int64_t nb, float *y) {
  for (int64_t i = 0; i < nb; i++, b += 144) {
    const unsigned char *q = b + 16;
    for (int j = 0, is = 0; j < 256; j += 64, q += 32, is += 2) {
      int sc, m;
      scale_min_k4(is, b + 4, &sc, &m);
      float d1 = half(b) * (float)sc, m1 = half(b + 2) * (float)m;
      scale_min_k4(is + 1, b + 4, &sc, &m);
      float d2 = half(b) * (float)sc, m2 = half(b + 2) * (float)m;
      for (int l = 0; l < 32; l++) *y++ = d1 * (float)(q[l] & 0xF) - m1;
      for (int l = 0; l < 32; l++) *y++ = d2 * (float)(q[l] >> 4) - m2;
    }
  }
}

static void ref_q6_k(const unsigned char *b, int64_t nb, float *y) {
  for (int64_t i = 0; i < nb; i++, b += 210) {
    const unsigned char *ql = b, *qh = b + 128;
    const int8_t *sc = (const int8_t *)(b + 192);
    float d = half(b + 208);
    for (int n = 0; n < 256; n += 128, y += 128, ql += 64, qh += 32, sc += 8)
      for (int l = 0; l < 32; l++) {
        int is = l / 16;
        int q1 = ((ql[l] & 0xF) | ((qh[l] >> 0 & 3) << 4)) - 32, q2 = ((ql[l + 32] & 0xF) | ((qh[l] >> 2 & 3) << 4)) - 32;
        int q3 = ((ql[l] >> 4) | ((qh[l] >> 4 & 3) << 4)) - 32, q4 = ((ql[l + 32] >> 4) | ((qh[l] >> 6 & 3) << 4)) - 32;
        y[l] = d * (float)sc[is] * (float)q1;
        y[l + 32] = d * (float)sc[is + 2] * (float)q2;
        y[l + 64] = d * (float)sc[is + 4] * (float)q3;
        y[l + 96] = d * (float)sc[is + 6] * (float)q4;
      }
  }
}

/* ---------------------------------------------------------------- metadata */

TEST(gguf_metadata_of_every_type) {
  tg_gguf *g = tg_gguf_open(META);
  CHECK(g != NULL);
  if (!g) return;
  CHECK(tg_gguf_version(g) == 3);
  CHECK(tg_gguf_kv_count(g) == 18); /* general.architecture, general.alignment and 16 of ours */
  CHECK(!strcmp(tg_gguf_kv_key(g, 0), "general.architecture"));
  CHECK(tg_gguf_kv_key(g, 18) == NULL);
  static const struct { const char *key; int64_t v; } ints[] = {
      {"t.u8", 200}, {"t.i8", -100}, {"t.u16", 60000}, {"t.i16", -30000}, {"t.u32", 4000000000}, {"t.i32", -2000000000},
      {"t.bool", 1}, {"t.i64", -(INT64_C(1) << 62)}, {"general.alignment", 64},
  };
  for (size_t i = 0; i < sizeof ints / sizeof ints[0]; i++) {
    int64_t v = 0;
    CHECK(tg_gguf_get_int(g, ints[i].key, &v) == 0);
    CHECK(v == ints[i].v);
  }
  int64_t v;
  double f;
  CHECK(tg_gguf_get_int(g, "t.u64", &v) == TG_ERR_ARG); /* 2^63 + 5 */
  CHECK(strstr(tg_last_error(), "\"t.u64\" = 9223372036854775813 does not fit in int64") != NULL);
  CHECK(tg_gguf_get_float(g, "t.u64", &f) == 0 && f == 9223372036854775813.0);
  CHECK(tg_gguf_get_float(g, "t.f32", &f) == 0 && f == 0.25);
  CHECK(tg_gguf_get_float(g, "t.f64", &f) == 0 && f == -1.5e300);
  CHECK(tg_gguf_get_float(g, "t.i8", &f) == 0 && f == -100);
  size_t len;
  const char *s = tg_gguf_get_string(g, "t.str", &len);
  CHECK(s && !strcmp(s, "h\xc3\xa9llo w\xc3\xb6rld") && len == 13);
  CHECK((s = tg_gguf_get_string(g, "general.architecture", NULL)) && !strcmp(s, "tgtest"));
  tg_gguf_close(g);
}

TEST(gguf_metadata_arrays) {
  tg_gguf *g = tg_gguf_open(META);
  CHECK(g != NULL);
  tg_gguf_type et;
  int64_t n, v;
  double f;
  size_t len;
  CHECK(tg_gguf_kv_type(g, "t.arr_i32", &et, &n) == TG_GGUF_ARRAY && et == TG_GGUF_INT32 && n == 3);
  static const int64_t want[] = {1, -2, 3};
  for (int i = 0; i < 3; i++) CHECK(tg_gguf_get_array_int(g, "t.arr_i32", i, &v) == 0 && v == want[i]);
  CHECK(tg_gguf_get_array_int(g, "t.arr_i32", 3, &v) == TG_ERR_ARG);
  CHECK(tg_gguf_get_array_float(g, "t.arr_f32", 0, &f) == 0 && f == 0.5);
  CHECK(tg_gguf_get_array_float(g, "t.arr_f32", 1, &f) == 0 && f == -1.0);
  CHECK(tg_gguf_get_array_int(g, "t.arr_f32", 0, &v) == TG_ERR_ARG); /* floats are not ints */
  CHECK(strstr(tg_last_error(), "holds float32 values") != NULL);
  CHECK(tg_gguf_get_array_int(g, "t.arr_bool", 0, &v) == 0 && v == 1);
  CHECK(tg_gguf_get_array_int(g, "t.arr_bool", 1, &v) == 0 && v == 0);
  CHECK(tg_gguf_kv_type(g, "t.arr_str", &et, &n) == TG_GGUF_ARRAY && et == TG_GGUF_STRING && n == 3);
  const char *s0 = tg_gguf_get_array_string(g, "t.arr_str", 0, &len);
  CHECK(s0 && !strcmp(s0, "a") && len == 1);
  CHECK(!strcmp(tg_gguf_get_array_string(g, "t.arr_str", 1, &len), "") && len == 0);
  CHECK(!strcmp(tg_gguf_get_array_string(g, "t.arr_str", 2, NULL), "\xc3\xbcn\xc3\xaf"));
  CHECK(tg_gguf_kv_type(g, "t.u16", &et, &n) == TG_GGUF_UINT16 && et == TG_GGUF_UINT16 && n == 1);
  /* wrong kinds of access */
  CHECK(tg_gguf_get_string(g, "t.u8", NULL) == NULL);
  CHECK(strstr(tg_last_error(), "\"t.u8\" is uint8, not a string") != NULL);
  CHECK(tg_gguf_get_int(g, "t.str", &v) == TG_ERR_ARG);
  CHECK(tg_gguf_get_int(g, "t.arr_i32", &v) == TG_ERR_ARG);
  CHECK(strstr(tg_last_error(), "is an array of int32, not a single value") != NULL);
  CHECK(tg_gguf_get_int(g, "no.such.key", &v) == TG_ERR_ARG);
  CHECK(strstr(tg_last_error(), "no key \"no.such.key\"") != NULL);
  CHECK(tg_gguf_find_key(g, "no.such.key") == -1);
  CHECK(tg_gguf_find_key(g, "t.u8") == 2);
  tg_gguf_close(g);
}

/* ---------------------------------------------------------------- tensors */

TEST(gguf_tensor_table_and_small_tensors) {
  tg_gguf *g = tg_gguf_open(META);
  CHECK(g && tg_gguf_tensor_count(g) == 3);
  tg_gguf_tensor_info info;
  CHECK(tg_gguf_tensor_info_at(g, 0, &info) == 0);
  CHECK(!strcmp(info.name, "a") && info.ggml_type == 0 && !strcmp(info.type_name, "F32"));
  CHECK(info.ndim == 2 && info.shape[0] == 2 && info.shape[1] == 3 && info.nbytes == 24);
  CHECK(info.offset % 64 == 0); /* general.alignment */
  CHECK(tg_gguf_tensor_info_at(g, 1, &info) == 0 && info.ndim == 1 && info.shape[0] == 2 && info.ggml_type == 1);
  CHECK(tg_gguf_tensor_info_at(g, 2, &info) == 0 && info.offset % 64 == 0);
  CHECK(tg_gguf_tensor_info_at(g, 3, &info) == TG_ERR_ARG);
  tg_scope *s = tg_scope_begin();
  float a[6];
  tg_tensor *ta = tg_gguf_tensor(g, "a");
  CHECK(tg_get_dtype(ta) == TG_FLOAT32 && tg_ndim(ta) == 2 && tg_dim(ta, 0) == 2 && tg_dim(ta, 1) == 3);
  CHECK(tg_to_host(ta, a, sizeof a) == 0);
  for (int i = 0; i < 6; i++) CHECK(a[i] == (float)i);
  float b[2];
  tg_tensor *tb = tg_gguf_tensor(g, "b");
  CHECK(tg_get_dtype(tb) == TG_FLOAT16);
  CHECK(tg_to_host(tg_cast(tb, TG_FLOAT32), b, sizeof b) == 0 && b[0] == 1.5f && b[1] == -2.0f);
  CHECK(tg_item(tg_gguf_tensor(g, "c")) == 7.0);
  CHECK(tg_gguf_tensor(g, "nope") == NULL);
  CHECK(strstr(tg_last_error(), "no tensor \"nope\"") != NULL);
  tg_scope_end(s);
  tg_gguf_close(g);
}

TEST(gguf_float_types_load_as_stored) {
  tg_gguf *g = tg_gguf_open(TENSORS);
  CHECK(g != NULL);
  tg_scope *s = tg_scope_begin();
  static const struct { const char *name; tg_dtype dt; } types[] = {{"f32", TG_FLOAT32}, {"f16", TG_FLOAT16}, {"bf16", TG_BFLOAT16}};
  for (size_t k = 0; k < 3; k++) {
    tg_gguf_tensor_info info;
    unsigned char *raw = raw_bytes(g, TENSORS, types[k].name, &info), host[256];
    tg_tensor *t = tg_gguf_tensor(g, types[k].name);
    CHECK(raw && t && tg_get_dtype(t) == types[k].dt && (size_t)info.nbytes <= sizeof host);
    CHECK(tg_to_host(t, host, (size_t)info.nbytes) == 0);
    CHECK(raw && !memcmp(host, raw, (size_t)info.nbytes)); /* the file's bytes */
    free(raw);
  }
  float bf[32], ref[32];
  CHECK(tg_to_host(tg_cast(tg_gguf_tensor(g, "bf16"), TG_FLOAT32), bf, sizeof bf) == 0);
  CHECK(tg_to_host(tg_gguf_tensor(g, "bf16.ref"), ref, sizeof ref) == 0);
  CHECK(!memcmp(bf, ref, sizeof bf));
  tg_scope_end(s);
  tg_gguf_close(g);
}

typedef void (*ref_fn)(const unsigned char *, int64_t, float *);

/* Tensor `name` (quantized): tg's float32 values equal gguf's (name.ref) and ggml's loops. */
static void check_dequant(tg_gguf *g, const char *name, int block, ref_fn ref) {
  tg_scope *s = tg_scope_begin();
  tg_gguf_tensor_info info;
  unsigned char *raw = raw_bytes(g, TENSORS, name, &info);
  char refname[32];
  snprintf(refname, sizeof refname, "%s.ref", name);
  tg_tensor *t = tg_gguf_tensor(g, name), *r = tg_gguf_tensor(g, refname);
  int64_t n = tg_numel(t);
  CHECK(raw && t && r && tg_get_dtype(t) == TG_FLOAT32 && n == tg_numel(r) && n > 0);
  CHECK(tg_ndim(t) == 2 && tg_dim(t, 0) == info.shape[0] && tg_dim(t, 1) == info.shape[1]);
  float *got = calloc((size_t)n, 4), *want = calloc((size_t)n, 4), *mine = calloc((size_t)n, 4);
  CHECK(got && want && mine && tg_to_host(t, got, (size_t)n * 4) == 0 && tg_to_host(r, want, (size_t)n * 4) == 0);
  if (raw && mine) ref(raw, n / block, mine);
  int bad_gguf = 0, bad_ggml = 0, nonzero = 0;
  for (int64_t i = 0; got && want && mine && i < n; i++) {
    bad_gguf += memcmp(&got[i], &want[i], 4) != 0; /* bit-exact */
    bad_ggml += memcmp(&got[i], &mine[i], 4) != 0;
    nonzero += got[i] != 0;
    if (memcmp(&got[i], &want[i], 4) && bad_gguf < 4) printf("  %s[%lld] = %.9g, gguf %.9g\n", name, (long long)i, got[i], want[i]);
  }
  CHECK(bad_gguf == 0);
  CHECK(bad_ggml == 0);
  CHECK(nonzero > n / 2); /* not a tensor of zeros */
  free(got), free(want), free(mine), free(raw);
  tg_scope_end(s);
}

TEST(gguf_q8_0_equals_gguf_dequantize) {
  tg_gguf *g = tg_gguf_open(TENSORS);
  check_dequant(g, "q8_0", 32, ref_q8_0);
  tg_gguf_close(g);
}

/* Scales that are +-0, subnormal, the largest half, inf and NaN (bits compared: NaNs too). */
TEST(gguf_q8_0_special_scales_equal_gguf_dequantize) {
  tg_gguf *g = tg_gguf_open(TENSORS);
  check_dequant(g, "q8_0.special", 32, ref_q8_0);
  tg_gguf_close(g);
}

TEST(gguf_q4_0_equals_gguf_dequantize) {
  tg_gguf *g = tg_gguf_open(TENSORS);
  check_dequant(g, "q4_0", 32, ref_q4_0);
  tg_gguf_close(g);
}

TEST(gguf_q4_1_equals_gguf_dequantize) {
  tg_gguf *g = tg_gguf_open(TENSORS);
  check_dequant(g, "q4_1", 32, ref_q4_1);
  tg_gguf_close(g);
}

TEST(gguf_q4_k_equals_gguf_dequantize) {
  tg_gguf *g = tg_gguf_open(TENSORS);
  check_dequant(g, "q4_k", 256, ref_q4_k);
  tg_gguf_close(g);
}

TEST(gguf_q6_k_equals_gguf_dequantize) {
  tg_gguf *g = tg_gguf_open(TENSORS);
  check_dequant(g, "q6_k", 256, ref_q6_k);
  tg_gguf_close(g);
}

TEST(gguf_unloaded_type_is_listed_but_not_loaded) {
  tg_gguf *g = tg_gguf_open(TENSORS);
  tg_gguf_tensor_info info;
  int64_t i = tg_gguf_find_tensor(g, "q5_0");
  CHECK(i >= 0 && tg_gguf_tensor_info_at(g, i, &info) == 0 && !strcmp(info.type_name, "Q5_0") && info.nbytes == 2 * 2 * 22);
  CHECK(tg_gguf_tensor(g, "q5_0") == NULL);
  CHECK(strstr(tg_last_error(), "has type Q5_0, which tg does not load") != NULL);
  tg_gguf_close(g);
}

/* y = W x with a (96, 256) Q8_0 W: one kernel, and no buffer as large as W in float32 appears. */
TEST(gguf_q8_0_dequantization_fuses_into_matvec) {
  tg_gguf *g = tg_gguf_open(TENSORS);
  tg_scope *s = tg_scope_begin();
  enum { ROWS = 96, COLS = 256 };
  float x[COLS], y[ROWS], w[ROWS * COLS];
  for (int i = 0; i < COLS; i++) x[i] = (float)((i * 7) % 11 - 5) * 0.125f;
  tg_tensor *xt = tg_from_data(x, TG_FLOAT32, (int64_t[]){COLS}, 1), *wt = tg_gguf_tensor(g, "fuse.q8_0");
  CHECK(tg_realize(xt) == 0);
  CHECK(tg_ndim(wt) == 2 && tg_dim(wt, 0) == ROWS && tg_dim(wt, 1) == COLS);
  tg_tensor *yt = tg_matmul(wt, xt);
  CHECK(tg_schedule_kernels(&yt, 1) == 1);
  tg_reset_stats();
  uint64_t before = tg_get_stats().bytes_alive;
  CHECK(tg_realize(yt) == 0);
  tg_stats st = tg_get_stats();
  CHECK(st.kernels_run == 1);
  CHECK(st.bytes_peak - before < (uint64_t)ROWS * COLS * 4); /* only y (and nothing of W's size) was made */
  printf("  kernels %llu, bytes made %llu (W in float32: %d)\n", (unsigned long long)st.kernels_run,
         (unsigned long long)(st.bytes_peak - before), ROWS * COLS * 4);
  CHECK(tg_to_host(yt, y, sizeof y) == 0);
  tg_gguf_tensor_info info;
  unsigned char *raw = raw_bytes(g, TENSORS, "fuse.q8_0", &info);
  CHECK(raw != NULL);
  if (raw) ref_q8_0(raw, ROWS * COLS / 32, w);
  for (int r = 0; raw && r < ROWS; r++) {
    double acc = 0;
    for (int c = 0; c < COLS; c++) acc += (double)w[r * COLS + c] * x[c];
    CHECK_CLOSE(y[r], acc, 1e-4);
  }
  free(raw);
  tg_scope_end(s);
  tg_gguf_close(g);
}

/* Every quantized type: W x is one kernel that makes only y, and equals ggml's dequantization
 * of the blocks times x. */
TEST(gguf_every_quant_type_fuses_into_matvec) {
  static const struct { const char *name; int block; ref_fn ref; } types[] = {
      {"q8_0", 32, ref_q8_0}, {"q4_0", 32, ref_q4_0}, {"q4_1", 32, ref_q4_1}, {"q4_k", 256, ref_q4_k}, {"q6_k", 256, ref_q6_k},
  };
  tg_gguf *g = tg_gguf_open(TENSORS);
  for (size_t k = 0; k < sizeof types / sizeof types[0]; k++) {
    tg_scope *s = tg_scope_begin();
    tg_gguf_tensor_info info;
    unsigned char *raw = raw_bytes(g, TENSORS, types[k].name, &info);
    int64_t rows = info.shape[0], cols = info.shape[1];
    float *x = malloc(sizeof *x * (size_t)cols), *w = malloc(sizeof *w * (size_t)(rows * cols)), y[8];
    for (int64_t i = 0; i < cols; i++) x[i] = (float)((i * 5) % 9 - 4) * 0.25f;
    tg_tensor *xt = tg_from_data(x, TG_FLOAT32, &cols, 1);
    CHECK(raw && rows <= 8 && tg_realize(xt) == 0);
    tg_tensor *yt = tg_matmul(tg_gguf_tensor(g, types[k].name), xt);
    CHECK(tg_schedule_kernels(&yt, 1) == 1);
    tg_reset_stats();
    uint64_t before = tg_get_stats().bytes_alive;
    CHECK(tg_realize(yt) == 0);
    CHECK(tg_get_stats().kernels_run == 1);
    CHECK(tg_get_stats().bytes_peak - before == (uint64_t)rows * 4); /* y, nothing else */
    CHECK(tg_to_host(yt, y, sizeof *y * (size_t)rows) == 0);
    if (raw) types[k].ref(raw, rows * cols / types[k].block, w);
    for (int64_t r = 0; raw && r < rows; r++) {
      double acc = 0;
      for (int64_t c = 0; c < cols; c++) acc += (double)w[r * cols + c] * x[c];
      CHECK_CLOSE(y[r], acc, 1e-4);
    }
    free(raw), free(x), free(w);
    tg_scope_end(s);
  }
  tg_gguf_close(g);
}

/* ---------------------------------------------------------------- versions and corrupt files */

TEST(gguf_version_2_reads_like_3) {
  size_t n;
  unsigned char *d = slurp(TENSORS, &n);
  CHECK(d != NULL);
  if (!d) return;
  d[4] = 2; /* v2 differs from v3 only in big-endian support */
  CHECK(spill(d, n) == 0);
  tg_gguf *g = tg_gguf_open(tmp_file()), *g3 = tg_gguf_open(TENSORS);
  CHECK(g && tg_gguf_version(g) == 2 && tg_gguf_tensor_count(g) == tg_gguf_tensor_count(g3));
  tg_scope *s = tg_scope_begin();
  CHECK(tg_allclose(tg_gguf_tensor(g, "q4_k"), tg_gguf_tensor(g3, "q4_k"), 0, 0, false) == 1);
  tg_scope_end(s);
  tg_gguf_close(g), tg_gguf_close(g3);
  unlink(tmp_file());
  free(d);
}

/* Where `needle` (n bytes) first appears in d. */
static size_t find(const unsigned char *d, size_t size, const void *needle, size_t n) {
  for (size_t i = 0; i + n <= size; i++)
    if (!memcmp(d + i, needle, n)) return i;
  return 0;
}

static void put_le(unsigned char *p, uint64_t v, int n) {
  for (int i = 0; i < n; i++) p[i] = (unsigned char)(v >> (8 * i));
}

/* meta.gguf with n bytes at `at` replaced by v (little-endian), cut to `size` bytes, must fail
 * to open with a message containing `message`. */
static void expect_corrupt(const unsigned char *orig, size_t size, size_t at, uint64_t v, int n, const char *message) {
  unsigned char *d = malloc(size + 1);
  memcpy(d, orig, size);
  if (n) put_le(d + at, v, n);
  CHECK(spill(d, size) == 0);
  tg_clear_error();
  tg_gguf *g = tg_gguf_open(tmp_file());
  CHECK(g == NULL);
  CHECK(strstr(tg_last_error(), message) != NULL);
  if (!strstr(tg_last_error(), message)) printf("  message \"%s\", expected \"%s\"\n", tg_last_error(), message);
  tg_gguf_close(g);
  free(d);
}

TEST(gguf_corrupt_files_give_errors) {
  size_t n;
  unsigned char *d = slurp(META, &n);
  CHECK(d != NULL);
  if (!d) return;
  size_t key_u8 = find(d, n, "\x04\0\0\0\0\0\0\0t.u8", 12), key_i8 = find(d, n, "\x04\0\0\0\0\0\0\0t.i8", 12);
  size_t arr = find(d, n, "\x09\0\0\0\0\0\0\0t.arr_i32", 17) + 17, align = find(d, n, "general.alignment", 17) + 17 + 4;
  size_t ta = find(d, n, "\x01\0\0\0\0\0\0\0a\x02\0\0\0", 13), tb = find(d, n, "\x01\0\0\0\0\0\0\0b\x01\0\0\0", 13);
  CHECK(key_u8 && key_i8 && arr > 17 && align > 21 && ta && tb);
  expect_corrupt(d, 10, 0, 0, 0, "file of 10 bytes is too short for a GGUF header");
  expect_corrupt(d, n, 0, 0x46554746, 4, "bad magic 0x46554746: not a GGUF file");
  expect_corrupt(d, n, 4, 1, 4, "GGUF version 1 is not supported (2 and 3 are)");
  expect_corrupt(d, n, 4, 0x03000000, 4, "GGUF version 50331648 is not supported");
  expect_corrupt(d, n, 8, UINT64_C(1) << 62, 8, "tensors are more than the");
  expect_corrupt(d, n, 16, UINT64_MAX, 8, "metadata pairs are more than the");
  expect_corrupt(d, n, key_u8, UINT64_C(1) << 40, 8, "truncated: a metadata key at byte");
  expect_corrupt(d, n, key_u8 + 12, 13, 4, "key \"t.u8\": unknown value type 13");
  expect_corrupt(d, n, key_i8 + 10, 'u', 1, "duplicate key \"t.u8\"");
  expect_corrupt(d, n, arr + 4, 9, 4, "key \"t.arr_i32\": arrays of arrays are not supported");
  expect_corrupt(d, n, arr + 8, UINT64_C(1) << 60, 8, "key \"t.arr_i32\": 1152921504606846976 values of type int32 are more than");
  expect_corrupt(d, n, align, 48, 4, "general.alignment must be a uint32 power of two");
  expect_corrupt(d, n, ta + 9, 5, 4, "tensor \"a\": 5 dims (1 to 4 are allowed)");
  expect_corrupt(d, n, ta + 13, UINT64_C(1) << 62, 8, "tensor \"a\": dims with more than 2^63 elements");
  expect_corrupt(d, n, ta + 29, 99, 4, "tensor \"a\": unknown type 99");
  expect_corrupt(d, n, ta + 29, 8, 4, "tensor \"a\": Q8_0 rows of 3 elements are not whole blocks of 32");
  expect_corrupt(d, n, ta + 33, 64, 8, "tensor \"a\": offset 64, expected 0 (tensors follow each other, aligned to 64)");
  expect_corrupt(d, n, tb + 8, 'a', 1, "duplicate tensor name \"a\"");
  tg_gguf_tensor_info info;
  tg_gguf *g = tg_gguf_open(META);
  CHECK(g && tg_gguf_tensor_info_at(g, 2, &info) == 0);
  tg_gguf_close(g);
  expect_corrupt(d, (size_t)info.offset + 2, 0, 0, 0, "tensor \"c\": data of 4 bytes at offset 128 is past the end of the");
  /* every cut inside the metadata or the tensor table fails: "truncated", or a count the
   * bytes left cannot hold */
  size_t table_end = (size_t)(info.offset - 128); /* the data section starts at the aligned end of the table */
  int truncated_ok = 0;
  for (size_t cut = 24; cut < table_end - 64; cut++) {
    CHECK(spill(d, cut) == 0);
    tg_gguf *t = tg_gguf_open(tmp_file());
    truncated_ok += t == NULL && (strstr(tg_last_error(), "truncated") || strstr(tg_last_error(), "more than the"));
    tg_gguf_close(t);
  }
  CHECK(truncated_ok == (int)(table_end - 64 - 24));
  unlink(tmp_file());
  free(d);
}

TEST(gguf_bad_arguments_and_paths) {
  CHECK(tg_gguf_open(NULL) == NULL);
  CHECK(strstr(tg_last_error(), "NULL path") != NULL);
  CHECK(tg_gguf_open("/nonexistent.gguf") == NULL);
  CHECK(strstr(tg_last_error(), "cannot open") != NULL);
  CHECK(tg_gguf_open("tests") == NULL);
  CHECK(strstr(tg_last_error(), "not a regular file") != NULL);
  CHECK(tg_gguf_version(NULL) == -1 && tg_gguf_kv_count(NULL) == -1 && tg_gguf_tensor_count(NULL) == -1);
  CHECK(tg_gguf_find_key(NULL, "x") == -1 && tg_gguf_find_tensor(NULL, "x") == -1);
  CHECK(tg_gguf_tensor(NULL, "x") == NULL);
  int64_t v;
  CHECK(tg_gguf_get_int(NULL, "x", &v) == TG_ERR_ARG);
  tg_gguf_close(NULL);
}
