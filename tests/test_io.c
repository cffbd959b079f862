/* test_io.c — model files (safetensors) and data loading (IDX, MNIST, batch loader).
 *
 * safetensors is checked against files written by an independent Python implementation
 * (tests/st_reference.py → tests/fixtures/io_*.safetensors, expected values in
 * io_safetensors.h) and against the byte vectors of the reference implementation's own tests.
 * Corrupt files, IDX files and tiny datasets are written here, into a temporary directory.
 * Tests run from the repository root (the fixture paths are relative to it). */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include "harness.h"

#include "fixtures/io_safetensors.h"

#define NFIX ((int)(sizeof io_st_fixtures / sizeof io_st_fixtures[0]))
#define FIXTURE_DTYPES "tests/fixtures/io_dtypes.safetensors"
#define FIXTURE_FOREIGN "tests/fixtures/io_foreign.safetensors"
#define FASHION_DIR "/usr/share/datasets/fashion-mnist"

/* ---------------------------------------------------------------- files */

static char tmp_dir[64];

static void remove_tmp_dir(void) {
  if (tmp_dir[0]) rmdir(tmp_dir);
}

/* A path in this run's temporary directory (made on first use, removed at exit once empty). */
static const char *tmp_path(const char *name) {
  static char buf[4][256];
  static int next;
  if (!tmp_dir[0]) {
    strcpy(tmp_dir, "/tmp/tg_io_XXXXXX");
    if (!mkdtemp(tmp_dir)) strcpy(tmp_dir, "/tmp");
    else atexit(remove_tmp_dir);
  }
  char *p = buf[next++ % 4];
  snprintf(p, sizeof buf[0], "%s/%s", tmp_dir, name);
  return p;
}

static int write_bytes(const char *path, const void *data, size_t n) {
  FILE *f = fopen(path, "wb");
  if (!f) return -1;
  size_t w = n ? fwrite(data, 1, n, f) : 0;
  return fclose(f) == 0 && w == n ? 0 : -1;
}

static int write_gz(const char *path, const void *data, size_t n) {
  gzFile f = gzopen(path, "wb");
  if (!f) return -1;
  int w = n ? gzwrite(f, data, (unsigned)n) : 0;
  return gzclose(f) == Z_OK && (size_t)w == n ? 0 : -1;
}

/* The whole file in a malloc'd buffer (NULL if unreadable). */
static unsigned char *read_all(const char *path, size_t *n) {
  FILE *f = fopen(path, "rb");
  if (!f) return NULL;
  fseek(f, 0, SEEK_END);
  long len = ftell(f);
  fseek(f, 0, SEEK_SET);
  unsigned char *p = malloc((size_t)len + 1);
  *n = p ? fread(p, 1, (size_t)len, f) : 0;
  fclose(f);
  return p;
}

static bool file_exists(const char *path) { return access(path, F_OK) == 0; }

/* A safetensors file: length field `len` (the JSON's length when len < 0), nj bytes of
 * JSON, then ndata zero bytes. */
static int write_st(const char *path, long long len, const char *json, size_t nj, size_t ndata) {
  unsigned char *b = calloc(1, 8 + nj + ndata + 1);
  uint64_t n = len < 0 ? (uint64_t)nj : (uint64_t)len;
  for (int i = 0; i < 8; i++) b[i] = (unsigned char)(n >> (8 * i));
  memcpy(b + 8, json, nj);
  int rc = write_bytes(path, b, 8 + nj + ndata);
  free(b);
  return rc;
}

static int msg_has(const char *s) { return strstr(tg_last_error(), s) != NULL; }

/* ---------------------------------------------------------------- tensors */

static bool bytes_equal(tg_tensor *t, const void *expect, size_t n) {
  unsigned char *buf = malloc(n + 1);
  bool ok = t && tg_to_host(t, buf, n) == 0 && (n == 0 || memcmp(buf, expect, n) == 0);
  free(buf);
  return ok;
}

static bool same_shape(tg_tensor *t, const int64_t *shape, int nd) {
  int64_t s[8];
  return t && tg_shape(t, s, 8) == nd && (nd == 0 || !memcmp(s, shape, sizeof(int64_t) * (size_t)nd));
}

/* Float tensors: converted to float64 by tg, equal to numpy's conversion (NaN == NaN). */
static bool values_equal(tg_tensor *t, const double *expect, int64_t n) {
  if (!tg_dtype_is_float(tg_get_dtype(t))) return true;
  double *v = malloc(sizeof *v * (size_t)(n ? n : 1));
  bool ok = tg_to_host(tg_cast(t, TG_FLOAT64), v, sizeof *v * (size_t)n) == 0;
  for (int64_t i = 0; ok && i < n; i++) ok = harness_close(v[i], expect[i], 0, 0);
  free(v);
  return ok;
}

/* Every fixture tensor is in sd with its dtype, shape, bytes and values. */
static void check_fixture_tensors(const tg_state_dict *sd) {
  CHECK(sd->n == NFIX);
  for (int i = 0; i < NFIX; i++) {
    const io_st_fixture *f = &io_st_fixtures[i];
    tg_tensor *t = tg_state_dict_get(sd, f->name);
    CHECK(t != NULL);
    if (!t) continue;
    CHECK(tg_get_dtype(t) == f->dtype);
    CHECK(same_shape(t, f->shape, f->ndim));
    CHECK(bytes_equal(t, f->bytes, (size_t)f->nbytes));
    CHECK(values_equal(t, f->values, tg_numel(t)));
    if (tg_get_dtype(t) != f->dtype || !bytes_equal(t, f->bytes, (size_t)f->nbytes)) printf("  tensor %s\n", f->name);
  }
}

/* The fixture tensors as a state dict (insertion order = fixture order, not file order). */
static void fixture_state_dict(tg_state_dict *sd) {
  for (int i = 0; i < NFIX; i++) {
    const io_st_fixture *f = &io_st_fixtures[i];
    CHECK(tg_state_dict_add(sd, f->name, tg_from_data(f->bytes, f->dtype, f->shape, f->ndim)) == 0);
  }
}

static tg_tensor *f32_tensor(const float *v, const int64_t *shape, int nd) { return tg_from_data(v, TG_FLOAT32, shape, nd); }

static bool f32_equal(tg_tensor *t, const float *expect, size_t n) { return bytes_equal(t, expect, n * sizeof(float)); }

/* ---------------------------------------------------------------- safetensors: fixtures */

TEST(io_st_read_python_reference_file) {
  tg_scope *s = tg_scope_begin();
  tg_state_dict sd = {0};
  CHECK(tg_safetensors_read(FIXTURE_DTYPES, &sd) == 0);
  check_fixture_tensors(&sd);
  tg_state_dict_free(&sd);
  tg_scope_end(s);
}

TEST(io_st_read_python_foreign_layout) {
  tg_scope *s = tg_scope_begin();
  tg_state_dict sd = {0};
  CHECK(tg_safetensors_read(FIXTURE_FOREIGN, &sd) == 0); /* escapes, metadata, other orders */
  check_fixture_tensors(&sd);
  tg_state_dict_free(&sd);
  tg_scope_end(s);
}

TEST(io_st_save_matches_python_bytes) {
  tg_scope *s = tg_scope_begin();
  tg_state_dict sd = {0};
  fixture_state_dict(&sd);
  const char *path = tmp_path("saved.safetensors");
  CHECK(tg_safetensors_save(path, &sd) == 0);
  size_t n1 = 0, n2 = 0;
  unsigned char *mine = read_all(path, &n1), *ref = read_all(FIXTURE_DTYPES, &n2);
  CHECK(mine && ref && n1 == n2 && !memcmp(mine, ref, n1));
  CHECK(!file_exists(tmp_path("saved.safetensors.tmp")));
  free(mine), free(ref);
  if (getenv("TG_IO_KEEP")) printf("  kept %s for: python3 tests/st_reference.py check %s\n", path, path);
  else remove(path);
  tg_state_dict_free(&sd);
  tg_scope_end(s);
}

/* The byte vectors of huggingface/safetensors' own serialization tests. */
TEST(io_st_save_matches_reference_test_vectors) {
  static const unsigned char attn[] = {
      64, 0, 0, 0, 0, 0, 0, 0, 123, 34, 97, 116, 116, 110, 46, 48, 34, 58, 123, 34, 100, 116, 121, 112, 101, 34,
      58, 34, 70, 51, 50, 34, 44, 34, 115, 104, 97, 112, 101, 34, 58, 91, 49, 44, 50, 44, 51, 93, 44, 34, 100, 97,
      116, 97, 95, 111, 102, 102, 115, 101, 116, 115, 34, 58, 91, 48, 44, 50, 52, 93, 125, 125, 0, 0, 0, 0, 0, 0,
      128, 63, 0, 0, 0, 64, 0, 0, 64, 64, 0, 0, 128, 64, 0, 0, 160, 64};
  static const unsigned char attn_aligned[] = {
      72, 0, 0, 0, 0, 0, 0, 0, 123, 34, 97, 116, 116, 110, 48, 34, 58, 123, 34, 100, 116, 121, 112, 101, 34, 58,
      34, 70, 51, 50, 34, 44, 34, 115, 104, 97, 112, 101, 34, 58, 91, 49, 44, 49, 44, 50, 44, 51, 93, 44, 34, 100,
      97, 116, 97, 95, 111, 102, 102, 115, 101, 116, 115, 34, 58, 91, 48, 44, 50, 52, 93, 125, 125, 32, 32, 32,
      32, 32, 32, 32, 0, 0, 0, 0, 0, 0, 128, 63, 0, 0, 0, 64, 0, 0, 64, 64, 0, 0, 128, 64, 0, 0, 160, 64};
  static const unsigned char empty[] = {8, 0, 0, 0, 0, 0, 0, 0, 123, 125, 32, 32, 32, 32, 32, 32};
  static const float v[] = {0, 1, 2, 3, 4, 5};
  static const int64_t s123[] = {1, 2, 3}, s1123[] = {1, 1, 2, 3};
  struct { const char *name; const int64_t *shape; int nd; const unsigned char *expect; size_t n; } cases[] = {
      {"attn.0", s123, 3, attn, sizeof attn}, {"attn0", s1123, 4, attn_aligned, sizeof attn_aligned},
      {NULL, NULL, 0, empty, sizeof empty}};
  tg_scope *s = tg_scope_begin();
  const char *path = tmp_path("vector.safetensors");
  for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
    tg_state_dict sd = {0};
    if (cases[c].name) CHECK(tg_state_dict_add(&sd, cases[c].name, f32_tensor(v, cases[c].shape, cases[c].nd)) == 0);
    CHECK(tg_safetensors_save(path, &sd) == 0);
    size_t n = 0;
    unsigned char *got = read_all(path, &n);
    CHECK(got && n == cases[c].n && !memcmp(got, cases[c].expect, n));
    free(got);
    tg_state_dict back = {0};
    CHECK(tg_safetensors_read(path, &back) == 0 && back.n == sd.n);
    if (cases[c].name) CHECK(f32_equal(tg_state_dict_get(&back, cases[c].name), v, 6));
    tg_state_dict_free(&back);
    tg_state_dict_free(&sd);
  }
  remove(path);
  tg_scope_end(s);
}

/* ---------------------------------------------------------------- safetensors: round trips */

TEST(io_st_roundtrip_lazy_tensors) {
  tg_scope *s = tg_scope_begin();
  static const float a[] = {1, 2, 3, 4, 5, 6};
  static const int64_t s23[] = {2, 3}, s3[] = {3};
  tg_tensor *x = f32_tensor(a, s23, 2);
  tg_state_dict sd = {0};
  CHECK(tg_state_dict_add(&sd, "sum", tg_add(x, tg_mul_s(x, 10))) == 0);    /* never realized */
  CHECK(tg_state_dict_add(&sd, "col", tg_sum(x, (int[]){0}, 1, false)) == 0); /* a reduction */
  CHECK(tg_state_dict_add(&sd, "idx", tg_arange(0, 3, 1, TG_INT64)) == 0);
  const char *path = tmp_path("lazy.safetensors");
  CHECK(tg_safetensors_save(path, &sd) == 0);
  tg_state_dict back = {0};
  CHECK(tg_safetensors_read(path, &back) == 0);
  CHECK(back.n == 3);
  static const float sum[] = {11, 22, 33, 44, 55, 66}, col[] = {5, 7, 9};
  static const int64_t idx[] = {0, 1, 2};
  CHECK(same_shape(tg_state_dict_get(&back, "sum"), s23, 2) && f32_equal(tg_state_dict_get(&back, "sum"), sum, 6));
  CHECK(same_shape(tg_state_dict_get(&back, "col"), s3, 1) && f32_equal(tg_state_dict_get(&back, "col"), col, 3));
  CHECK(bytes_equal(tg_state_dict_get(&back, "idx"), idx, sizeof idx));
  remove(path);
  tg_state_dict_free(&back);
  tg_state_dict_free(&sd);
  tg_scope_end(s);
}

TEST(io_st_read_tensors_outlive_scopes) {
  tg_state_dict sd = {0};
  tg_scope *s = tg_scope_begin();
  CHECK(tg_safetensors_read(FIXTURE_DTYPES, &sd) == 0);
  tg_scope_end(s); /* the state dict holds the only references */
  tg_scope *s2 = tg_scope_begin();
  check_fixture_tensors(&sd);
  tg_scope_end(s2);
  tg_state_dict_free(&sd);
}

/* Three tensors a (2,3) f32, b (3,) i32, c () f64 with values base, base+1, … */
static void abc_state_dict(tg_state_dict *sd, float base) {
  float a[6];
  int32_t b[3];
  double c = base * 2;
  for (int i = 0; i < 6; i++) a[i] = base + (float)i;
  for (int i = 0; i < 3; i++) b[i] = (int32_t)base - i;
  static const int64_t s23[] = {2, 3}, s3[] = {3};
  CHECK(tg_state_dict_add(sd, "a", f32_tensor(a, s23, 2)) == 0);
  CHECK(tg_state_dict_add(sd, "b", tg_from_data(b, TG_INT32, s3, 1)) == 0);
  CHECK(tg_state_dict_add(sd, "c", tg_from_data(&c, TG_FLOAT64, NULL, 0)) == 0);
}

/* sd's a, b, c hold the values abc_state_dict(base) gave them. */
static bool abc_holds(const tg_state_dict *sd, float base) {
  float a[6];
  int32_t b[3];
  double c = base * 2;
  for (int i = 0; i < 6; i++) a[i] = base + (float)i;
  for (int i = 0; i < 3; i++) b[i] = (int32_t)base - i;
  return f32_equal(sd->tensors[0], a, 6) && bytes_equal(sd->tensors[1], b, sizeof b) && bytes_equal(sd->tensors[2], &c, sizeof c);
}

TEST(io_st_load_into_existing_tensors) {
  tg_scope *s = tg_scope_begin();
  tg_state_dict src = {0}, dst = {0};
  abc_state_dict(&src, 100);
  abc_state_dict(&dst, 7);
  const char *path = tmp_path("abc.safetensors");
  CHECK(tg_safetensors_save(path, &src) == 0);
  tg_tensor *a_before = dst.tensors[0];
  tg_tensor *view = tg_mul_s(dst.tensors[0], 2); /* built on the old value */
  CHECK(tg_safetensors_load(path, &dst) == 0);
  CHECK(abc_holds(&dst, 100));
  CHECK(dst.tensors[0] == a_before); /* same handles, new values */
  static const float twice_old[] = {14, 16, 18, 20, 22, 24};
  CHECK(f32_equal(view, twice_old, 6));
  remove(path);
  tg_state_dict_free(&src);
  tg_state_dict_free(&dst);
  tg_scope_end(s);
}

/* ---------------------------------------------------------------- safetensors: load errors */

/* Loading `path` into dst (a, b, c of base 7) fails with `msg` and changes nothing. */
static void expect_load_fails(const char *path, tg_state_dict *dst, const char *msg) {
  tg_clear_error();
  CHECK(tg_safetensors_load(path, dst) < 0);
  CHECK(msg_has(msg) && msg_has("safetensors_load"));
  if (!msg_has(msg)) printf("  expected \"%s\", got \"%s\"\n", msg, tg_last_error());
  CHECK(abc_holds(dst, 7));
}

TEST(io_st_load_mismatch_changes_nothing) {
  tg_scope *s = tg_scope_begin();
  tg_state_dict dst = {0};
  abc_state_dict(&dst, 7);
  const char *path = tmp_path("mismatch.safetensors");
  static const float v[6] = {0};
  static const int64_t s23[] = {2, 3}, s32[] = {3, 2}, s3[] = {3};
  struct { const char *case_name, *msg; } cases[] = {
      {"missing", "\"c\" of the state dict is not in the file"},
      {"shape", "shape (3, 2) in the file but (2, 3)"},
      {"dtype", "is float32 in the file but int32"},
      {"extra", "tensor \"d\" that is not in the state dict"},
  };
  for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
    tg_state_dict src = {0};
    abc_state_dict(&src, 100); /* a, b, c right; then break one thing */
    const char *what = cases[c].case_name;
    if (!strcmp(what, "missing")) {
      src.n = 2; /* drop "c" (restored before freeing) */
      CHECK(tg_safetensors_save(path, &src) == 0);
      src.n = 3;
    } else {
      if (!strcmp(what, "shape")) tg_free(src.tensors[0]), src.tensors[0] = tg_retain(f32_tensor(v, s32, 2));
      if (!strcmp(what, "dtype")) tg_free(src.tensors[1]), src.tensors[1] = tg_retain(f32_tensor(v, s3, 1));
      if (!strcmp(what, "extra")) CHECK(tg_state_dict_add(&src, "d", f32_tensor(v, s23, 2)) == 0);
      CHECK(tg_safetensors_save(path, &src) == 0);
    }
    expect_load_fails(path, &dst, cases[c].msg);
    tg_state_dict_free(&src);
  }
  remove(path);
  expect_load_fails(tmp_path("no-such-file.safetensors"), &dst, "cannot open");
  tg_state_dict_free(&dst);
  tg_scope_end(s);
}

/* ---------------------------------------------------------------- safetensors: corrupt files */

typedef struct corrupt_case {
  const char *what;
  long long len; /* length field (-1: the JSON's length) */
  const char *json;
  size_t ndata;
  const char *msg; /* expected in the error */
} corrupt_case;

#define T1(dt, shape, b, e) "{\"t\":{\"dtype\":\"" dt "\",\"shape\":" shape ",\"data_offsets\":[" #b "," #e "]}}"
#define ONES8 "1,1,1,1,1,1,1,1,"
#define GOOD_A "\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}"

static const corrupt_case corrupt_cases[] = {
    {"valid control", -1, T1("F32", "[2]", 0, 8), 8, NULL},
    {"valid scalar", -1, T1("F32", "[]", 0, 4) "  ", 4, NULL},
    {"header length above the file", 1000, T1("F32", "[2]", 0, 8), 8, "past the end of the"},
    {"header length above 100 MB", 200000000, T1("F32", "[2]", 0, 8), 8, "above the 100000000-byte limit"},
    {"header length 0", 0, "", 0, "expected '{'"},
    {"not an object", -1, "[1, 2]", 0, "expected '{'"},
    {"unterminated object", -1, "{" GOOD_A, 4, "expected '}'"},
    {"missing colon", -1, "{\"a\" {}}", 0, "expected ':'"},
    {"trailing comma", -1, "{" GOOD_A ",}", 4, "expected '\"'"},
    {"trailing garbage", -1, "{" GOOD_A "} x", 4, "after the end"},
    {"NUL padding", -1, "{" GOOD_A "}\0", 4, "after the end"},
    {"float in shape", -1, T1("F32", "[2.0]", 0, 8), 8, "only integers"},
    {"exponent in offsets", -1, T1("F32", "[2]", 0, 8e0), 8, "only integers"},
    {"negative dim", -1, T1("F32", "[-2]", 0, 8), 8, "negative"},
    {"leading zero", -1, T1("F32", "[02]", 0, 8), 8, "leading zero"},
    {"huge integer", -1, T1("F32", "[99999999999999999999]", 0, 8), 8, "too large"},
    {"true as a dim", -1, T1("F32", "[true]", 0, 8), 8, "expected an integer"},
    {"null dtype", -1, "{\"t\":{\"dtype\":null}}", 0, "expected '\"'"},
    {"unterminated string", -1, "{\"t", 0, "unterminated string"},
    {"bad escape", -1, "{\"\\x\":{}}", 0, "bad escape"},
    {"lone surrogate", -1, "{\"\\udc00\":{}}", 0, "surrogate"},
    {"escaped NUL", -1, "{\"a\\u0000b\":{}}", 0, "\\u0000"},
    {"raw control char", -1, "{\"a\tb\":{}}", 0, "control character"},
    {"invalid UTF-8", -1, "{\"a\xff\":{}}", 0, "invalid UTF-8"},
    {"overlong UTF-8", -1, "{\"a\xc0\xaf\":{}}", 0, "invalid UTF-8"},
    {"array in metadata", -1, "{\"__metadata__\":{\"k\":[[[[[[[[[[[[[[[[[[]]]]]]]]]]]]]]]]]}}", 0, "expected '\"'"},
    {"unknown dtype", -1, T1("F8_E4M3", "[2]", 0, 2), 2, "unknown dtype \"F8_E4M3\""},
    {"lowercase dtype", -1, T1("f32", "[2]", 0, 8), 8, "unknown dtype"},
    {"unknown key", -1, "{\"t\":{\"dtype\":\"F32\",\"shape\":[],\"data_offsets\":[0,4],\"x\":1}}", 4, "unknown key \"x\""},
    {"missing key", -1, "{\"t\":{\"dtype\":\"F32\",\"shape\":[]}}", 4, "missing \"data_offsets\""},
    {"duplicate key", -1, "{\"t\":{\"dtype\":\"F32\",\"dtype\":\"F32\"}}", 4, "duplicate key \"dtype\""},
    {"one offset", -1, "{\"t\":{\"dtype\":\"F32\",\"shape\":[],\"data_offsets\":[0]}}", 4, "must be [begin, end]"},
    {"three offsets", -1, "{\"t\":{\"dtype\":\"F32\",\"shape\":[],\"data_offsets\":[0,4,8]}}", 4, "must be [begin, end]"},
    {"rank 65", -1, T1("U8", "[" ONES8 ONES8 ONES8 ONES8 ONES8 ONES8 ONES8 ONES8 "1]", 0, 1), 1, "rank above 64"},
    {"shape overflow", -1, T1("F64", "[4294967296,4294967296]", 0, 8), 8, "too large"},
    {"duplicate tensor", -1, "{" GOOD_A "," GOOD_A "}", 4, "duplicate tensor name \"a\""},
    {"duplicate metadata", -1, "{\"__metadata__\":{},\"__metadata__\":{}}", 0, "duplicate key \"__metadata__\""},
    {"duplicate metadata key", -1, "{\"__metadata__\":{\"k\":\"1\",\"k\":\"2\"}}", 0, "duplicate key \"k\""},
    {"metadata not a string", -1, "{\"__metadata__\":{\"k\":1}}", 0, "expected '\"'"},
    {"offsets past the data", -1, T1("F32", "[2]", 0, 8), 4, "past the end of the 4-byte data section"},
    {"offsets disagree with shape", -1, T1("F32", "[2]", 0, 4), 4, "hold 4 bytes, but shape (2,) of F32 needs 8"},
    {"offsets reversed", -1, T1("U8", "[0]", 4, 0), 4, "end before they begin"},
    {"gap", -1, "{\"a\":{\"dtype\":\"U8\",\"shape\":[4],\"data_offsets\":[0,4]},\"b\":{\"dtype\":\"U8\",\"shape\":[4],\"data_offsets\":[8,12]}}", 12, "leave a gap"},
    {"overlap", -1, "{\"a\":{\"dtype\":\"U8\",\"shape\":[8],\"data_offsets\":[0,8]},\"b\":{\"dtype\":\"U8\",\"shape\":[8],\"data_offsets\":[4,12]}}", 12, "overlap"},
    {"data after the tensors", -1, T1("F32", "[2]", 0, 8), 9, "cover 8 bytes but the data section has 9"},
    {"data but no tensors", -1, "{}", 3, "cover 0 bytes"},
    {"empty name", -1, "{\"\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[0,1]}}", 1, "empty tensor name"},
};

TEST(io_st_corrupt_files) {
  tg_scope *s = tg_scope_begin();
  const char *path = tmp_path("corrupt.safetensors");
  for (size_t c = 0; c < sizeof corrupt_cases / sizeof corrupt_cases[0]; c++) {
    const corrupt_case *k = &corrupt_cases[c];
    size_t nj = strlen(k->json) + (strcmp(k->what, "NUL padding") == 0); /* that NUL is header */
    CHECK(write_st(path, k->len, k->json, nj, k->ndata) == 0);
    tg_state_dict sd = {0};
    tg_clear_error();
    int rc = tg_safetensors_read(path, &sd);
    if (!k->msg) {
      CHECK(rc == 0 && sd.n == 1);
    } else {
      CHECK(rc == TG_ERR_IO && sd.n == 0);
      CHECK(msg_has(k->msg) && msg_has("safetensors_read") && msg_has(path));
      if (!msg_has(k->msg)) printf("  case \"%s\": expected \"%s\", got \"%s\"\n", k->what, k->msg, tg_last_error());
    }
    tg_state_dict_free(&sd);
  }
  remove(path);
  tg_scope_end(s);
}

TEST(io_st_short_and_missing_files) {
  tg_scope *s = tg_scope_begin();
  const char *path = tmp_path("short.safetensors");
  static const unsigned char five[] = {8, 0, 0, 0, 0};
  struct { const void *data; size_t n; } shorts[] = {{"", 0}, {five, sizeof five}};
  for (size_t c = 0; c < 2; c++) {
    CHECK(write_bytes(path, shorts[c].data, shorts[c].n) == 0);
    tg_state_dict sd = {0};
    CHECK(tg_safetensors_read(path, &sd) == TG_ERR_IO && sd.n == 0);
    CHECK(msg_has("too short for the 8-byte header length"));
  }
  tg_state_dict sd = {0};
  CHECK(write_st(path, -1, "{}      ", 8, 0) == 0); /* no tensors is a valid file */
  CHECK(tg_safetensors_read(path, &sd) == 0 && sd.n == 0);
  CHECK(tg_safetensors_load(path, &sd) == 0);
  remove(path);
  const char *missing = tmp_path("missing.safetensors");
  CHECK(tg_safetensors_read(missing, &sd) == TG_ERR_IO && msg_has(missing) && msg_has("cannot open"));
  CHECK(tg_safetensors_read("/tmp", &sd) == TG_ERR_IO && msg_has("not a regular file"));
  CHECK(sd.n == 0);
  tg_scope_end(s);
}

/* A corrupt file given to load: the error comes before any tensor changes. */
TEST(io_st_load_corrupt_changes_nothing) {
  tg_scope *s = tg_scope_begin();
  tg_state_dict dst = {0};
  abc_state_dict(&dst, 7);
  const char *path = tmp_path("corrupt-load.safetensors");
  tg_state_dict src = {0};
  abc_state_dict(&src, 100);
  CHECK(tg_safetensors_save(path, &src) == 0);
  size_t n = 0;
  unsigned char *good = read_all(path, &n);
  CHECK(good && n > 40);
  if (good && n > 40) {
    CHECK(write_bytes(path, good, n - 1) == 0); /* the last data byte cut off */
    expect_load_fails(path, &dst, "past the end of the");
    CHECK(write_bytes(path, good, 20) == 0); /* the header cut */
    expect_load_fails(path, &dst, "past the end of the");
  }
  free(good);
  remove(path);
  tg_state_dict_free(&src);
  tg_state_dict_free(&dst);
  tg_scope_end(s);
}

/* ---------------------------------------------------------------- safetensors: argument errors */

TEST(io_st_argument_errors) {
  tg_scope *s = tg_scope_begin();
  static const float v[] = {1, 2};
  static const int64_t s2[] = {2};
  tg_state_dict sd = {0}, out = {0};
  CHECK(tg_state_dict_add(&sd, "w", f32_tensor(v, s2, 1)) == 0);
  const char *path = tmp_path("args.safetensors");
  CHECK(tg_safetensors_save(NULL, &sd) == TG_ERR_ARG && msg_has("safetensors_save: NULL path"));
  CHECK(tg_safetensors_save(path, NULL) == TG_ERR_ARG && msg_has("NULL state dict"));
  CHECK(tg_safetensors_read(NULL, &out) == TG_ERR_ARG && msg_has("safetensors_read: NULL path"));
  CHECK(tg_safetensors_read(path, NULL) == TG_ERR_ARG && msg_has("NULL state dict"));
  CHECK(tg_safetensors_load(NULL, &sd) == TG_ERR_ARG && msg_has("safetensors_load: NULL path"));
  CHECK(tg_safetensors_load(path, NULL) == TG_ERR_ARG && msg_has("NULL state dict"));
  CHECK(tg_safetensors_save(tmp_path("no-dir/x.safetensors"), &sd) == TG_ERR_IO && msg_has("cannot create"));

  /* names a file cannot hold, in a hand-built state dict */
  char *names[2] = {"w", "w"};
  tg_tensor *ts[2] = {sd.tensors[0], sd.tensors[0]};
  tg_state_dict bad = {2, 2, names, ts};
  CHECK(tg_safetensors_save(path, &bad) == TG_ERR_ARG && msg_has("duplicate tensor name \"w\""));
  names[1] = "__metadata__";
  CHECK(tg_safetensors_save(path, &bad) == TG_ERR_ARG && msg_has("reserved"));
  names[1] = "bad\xff";
  CHECK(tg_safetensors_save(path, &bad) == TG_ERR_ARG && msg_has("not valid UTF-8"));
  names[1] = "v", ts[1] = NULL;
  CHECK(tg_safetensors_save(path, &bad) == TG_ERR_ARG && msg_has("tensor \"v\" is NULL"));
  CHECK(tg_safetensors_load(path, &bad) == TG_ERR_ARG && msg_has("tensor \"v\" is NULL"));
  names[1] = NULL;
  CHECK(tg_safetensors_save(path, &bad) == TG_ERR_ARG && msg_has("NULL name"));
  CHECK(!file_exists(path));

  /* reading into a state dict that already has one of the names */
  CHECK(tg_safetensors_save(path, &sd) == 0);
  CHECK(tg_safetensors_read(path, &sd) == TG_ERR_ARG && msg_has("already has a tensor \"w\""));
  CHECK(sd.n == 1);
  CHECK(tg_safetensors_read(path, &out) == 0 && out.n == 1); /* then fine into another */
  CHECK(tg_safetensors_save(path, &out) == 0);               /* and overwriting the file too */
  remove(path);
  tg_state_dict_free(&out);
  tg_state_dict_free(&sd);
  tg_scope_end(s);
}

/* ---------------------------------------------------------------- IDX */

/* An IDX file: magic 00 00 type rank, big-endian dims, then the payload as given. */
static size_t idx_bytes(unsigned char *out, unsigned char type, int rank, const uint32_t *dims, const void *payload, size_t n) {
  size_t k = 0;
  out[k++] = 0, out[k++] = 0, out[k++] = type, out[k++] = (unsigned char)rank;
  for (int i = 0; i < rank; i++)
    for (int b = 3; b >= 0; b--) out[k++] = (unsigned char)(dims[i] >> (8 * b));
  if (n) memcpy(out + k, payload, n);
  return k + n;
}

/* n values of `size` bytes from host order to big-endian. */
static void to_big_endian(unsigned char *dst, const void *src, size_t n, size_t size) {
  const unsigned char *s = src;
  for (size_t i = 0; i < n; i++)
    for (size_t b = 0; b < size; b++) dst[i * size + b] = s[i * size + size - 1 - b];
}

TEST(io_idx_every_type_plain_and_gzip) {
  tg_scope *s = tg_scope_begin();
  static const uint8_t u8[6] = {0, 1, 2, 128, 254, 255};
  static const int8_t i8[6] = {-128, -1, 0, 1, 2, 127};
  static const int16_t i16[6] = {-32768, -300, 0, 1, 300, 32767};
  static const int32_t i32[6] = {INT32_MIN, -70000, 0, 1, 70000, INT32_MAX};
  static const float f32[6] = {-1.5f, 0, 0.1f, 3.0e38f, -INFINITY, 1e-40f};
  static const double f64[6] = {-1.5, 0, 0.1, 1e300, INFINITY, 5e-324};
  struct { unsigned char code; tg_dtype dt; const void *v; size_t size; } types[] = {
      {0x08, TG_UINT8, u8, 1}, {0x09, TG_INT8, i8, 1}, {0x0B, TG_INT16, i16, 2},
      {0x0C, TG_INT32, i32, 4}, {0x0D, TG_FLOAT32, f32, 4}, {0x0E, TG_FLOAT64, f64, 8}};
  static const uint32_t dims[2] = {2, 3};
  static const int64_t shape[2] = {2, 3};
  const char *path = tmp_path("every.idx");
  for (size_t t = 0; t < sizeof types / sizeof types[0]; t++)
    for (int gz = 0; gz < 2; gz++) {
      unsigned char payload[48], file[80];
      to_big_endian(payload, types[t].v, 6, types[t].size);
      size_t n = idx_bytes(file, types[t].code, 2, dims, payload, 6 * types[t].size);
      CHECK((gz ? write_gz(path, file, n) : write_bytes(path, file, n)) == 0);
      tg_tensor *x = tg_load_idx(path);
      CHECK(x && tg_get_dtype(x) == types[t].dt && same_shape(x, shape, 2));
      CHECK(bytes_equal(x, types[t].v, 6 * types[t].size));
    }
  remove(path);
  tg_scope_end(s);
}

TEST(io_idx_rank1_and_empty) {
  tg_scope *s = tg_scope_begin();
  const char *path = tmp_path("r1.idx");
  unsigned char file[32];
  static const uint8_t labels[4] = {3, 1, 4, 1};
  uint32_t four = 4, zero[2] = {0, 5};
  CHECK(write_bytes(path, file, idx_bytes(file, 0x08, 1, &four, labels, 4)) == 0);
  tg_tensor *x = tg_load_idx(path);
  CHECK(x && tg_ndim(x) == 1 && tg_dim(x, 0) == 4 && bytes_equal(x, labels, 4));
  CHECK(write_bytes(path, file, idx_bytes(file, 0x0D, 2, zero, NULL, 0)) == 0);
  tg_tensor *e = tg_load_idx(path);
  CHECK(e && tg_numel(e) == 0 && tg_dim(e, 1) == 5);
  remove(path);
  tg_scope_end(s);
}

/* file[0..n) (gzipped when gz) must fail to load with msg. */
static void expect_idx_error(const char *what, const unsigned char *file, size_t n, bool gz, const char *msg) {
  const char *path = tmp_path("bad.idx");
  CHECK((gz ? write_gz(path, file, n) : write_bytes(path, file, n)) == 0);
  tg_clear_error();
  CHECK(tg_load_idx(path) == NULL);
  CHECK(msg_has("load_idx") && msg_has(path) && msg_has(msg));
  if (!msg_has(msg)) printf("  case \"%s\": expected \"%s\", got \"%s\"\n", what, msg, tg_last_error());
  remove(path);
}

TEST(io_idx_bad_files) {
  tg_scope *s = tg_scope_begin();
  unsigned char f[64], payload[16] = {0};
  uint32_t dims[2] = {2, 3}, huge[3] = {65535, 65535, 65535};
  expect_idx_error("truncated data", f, idx_bytes(f, 0x08, 2, dims, payload, 5), false, "truncated: 5 of 6 data bytes");
  expect_idx_error("truncated gzip data", f, idx_bytes(f, 0x08, 2, dims, payload, 5), true, "truncated: 5 of 6 data bytes");
  expect_idx_error("truncated sizes", f, idx_bytes(f, 0x08, 2, dims, payload, 0) - 2, false, "truncated in the size of axis 1");
  expect_idx_error("truncated magic", f, 3, false, "truncated: 3 of the 4 magic bytes");
  expect_idx_error("empty file", f, 0, false, "truncated: 0 of the 4 magic bytes");
  expect_idx_error("trailing byte", f, idx_bytes(f, 0x08, 2, dims, payload, 7), false, "continues past the 6 bytes");
  expect_idx_error("unknown type", f, idx_bytes(f, 0x0A, 2, dims, payload, 6), false, "unknown element type 0x0a");
  expect_idx_error("rank 0", f, idx_bytes(f, 0x08, 0, dims, payload, 0), false, "rank 0");
  expect_idx_error("lying sizes", f, idx_bytes(f, 0x08, 3, huge, payload, 16), true, "truncated: 16 of 281462092005375");
  size_t n = idx_bytes(f, 0x08, 2, dims, payload, 6);
  f[1] = 8;
  expect_idx_error("bad magic", f, n, false, "bad magic 00 08");
  static const unsigned char fake_gz[] = {0x1f, 0x8b, 8, 0, 0, 0, 0, 0, 0, 3, 0xde, 0xad, 0xbe, 0xef, 0x12};
  expect_idx_error("corrupt gzip", fake_gz, sizeof fake_gz, false, "");
  const char *missing = tmp_path("missing.idx");
  CHECK(tg_load_idx(missing) == NULL && msg_has("cannot open") && msg_has(missing));
  CHECK(tg_load_idx(NULL) == NULL && msg_has("load_idx: NULL path"));
  tg_scope_end(s);
}

/* ---------------------------------------------------------------- MNIST */

/* A tiny MNIST-style directory: n images of 2x3 (pixel k of image i = 10 i + k), labels
 * i % 10; images gzipped, labels plain. Returns the directory path. */
static const char *write_tiny_mnist(int n, int nlabels) { /* dir is under 256 bytes */
  const char *dir = tmp_path("mnist");
  mkdir(dir, 0700);
  unsigned char *file = malloc(64 + (size_t)n * 6), *payload = malloc((size_t)n * 6 + 1);
  uint32_t dims[3] = {(uint32_t)n, 2, 3}, ldims = (uint32_t)nlabels;
  for (int i = 0; i < n * 6; i++) payload[i] = (unsigned char)(10 * (i / 6) + i % 6);
  char path[400];
  snprintf(path, sizeof path, "%s/train-images-idx3-ubyte.gz", dir);
  CHECK(write_gz(path, file, idx_bytes(file, 0x08, 3, dims, payload, (size_t)n * 6)) == 0);
  for (int i = 0; i < nlabels; i++) payload[i] = (unsigned char)(i % 10);
  snprintf(path, sizeof path, "%s/train-labels-idx1-ubyte", dir);
  CHECK(write_bytes(path, file, idx_bytes(file, 0x08, 1, &ldims, payload, (size_t)nlabels)) == 0);
  free(file), free(payload);
  return dir;
}

static void remove_tiny_mnist(const char *dir) {
  char path[400];
  snprintf(path, sizeof path, "%s/train-images-idx3-ubyte.gz", dir);
  remove(path);
  snprintf(path, sizeof path, "%s/train-labels-idx1-ubyte", dir);
  remove(path);
  rmdir(dir);
}

TEST(io_mnist_tiny_dataset) {
  tg_scope *s = tg_scope_begin();
  char dir[300];
  snprintf(dir, sizeof dir, "%s", write_tiny_mnist(12, 12));
  tg_dataset d;
  CHECK(tg_mnist_load(dir, true, &d) == 0);
  static const int64_t shape[4] = {12, 1, 2, 3};
  CHECK(d.n == 12 && same_shape(d.images, shape, 4) && tg_get_dtype(d.images) == TG_UINT8);
  CHECK(tg_get_dtype(d.labels) == TG_UINT8 && tg_numel(d.labels) == 12);
  unsigned char px[72], lab[12];
  CHECK(tg_to_host(d.images, px, 72) == 0 && tg_to_host(d.labels, lab, 12) == 0);
  CHECK(px[0] == 0 && px[5] == 5 && px[6] == 10 && px[71] == 115 && lab[11] == 1);
  tg_dataset_free(&d);
  CHECK(d.images == NULL && d.n == 0);

  /* dir NULL reads $TG_MNIST_DIR */
  const char *old = getenv("TG_MNIST_DIR");
  char *saved = old ? strdup(old) : NULL;
  setenv("TG_MNIST_DIR", dir, 1);
  CHECK(tg_mnist_load(NULL, true, &d) == 0 && d.n == 12);
  tg_dataset_free(&d);
  if (saved) setenv("TG_MNIST_DIR", saved, 1);
  else unsetenv("TG_MNIST_DIR");
  free(saved);

  CHECK(tg_mnist_load(dir, false, &d) == TG_ERR_IO && msg_has("t10k-images-idx3-ubyte") && d.images == NULL);
  char images[400];
  unsigned char file[128], payload[72] = {0};
  uint32_t flat[2] = {12, 6};
  snprintf(images, sizeof images, "%s/train-images-idx3-ubyte.gz", dir);
  CHECK(write_gz(images, file, idx_bytes(file, 0x08, 2, flat, payload, 72)) == 0); /* rank 2 */
  CHECK(tg_mnist_load(dir, true, &d) == TG_ERR_IO && msg_has("images are uint8 (12, 6), expected uint8 (N, rows, cols)"));
  CHECK(d.images == NULL && d.labels == NULL);
  remove_tiny_mnist(dir);
  snprintf(dir, sizeof dir, "%s", write_tiny_mnist(12, 11));
  CHECK(tg_mnist_load(dir, true, &d) == TG_ERR_IO && msg_has("labels are uint8 (11,), expected uint8 (12,)"));
  CHECK(d.images == NULL && d.labels == NULL && d.n == 0);
  remove_tiny_mnist(dir);
  CHECK(tg_mnist_load(dir, true, NULL) == TG_ERR_ARG && msg_has("mnist_load: NULL dataset"));
  tg_dataset_free(NULL);
  tg_scope_end(s);
}

TEST(io_mnist_fashion_files) {
  if (access(FASHION_DIR "/train-images-idx3-ubyte.gz", R_OK) != 0) SKIP("%s absent (package dataset-fashion-mnist)", FASHION_DIR);
  tg_scope *s = tg_scope_begin();
  struct { bool train; int64_t n; } splits[] = {{true, 60000}, {false, 10000}};
  for (int k = 0; k < 2; k++) {
    tg_dataset d;
    CHECK(tg_mnist_load(NULL, splits[k].train, &d) == 0);
    int64_t shape[4] = {splits[k].n, 1, 28, 28};
    CHECK(d.n == splits[k].n && same_shape(d.images, shape, 4) && tg_get_dtype(d.images) == TG_UINT8);
    uint8_t *labels = malloc((size_t)d.n);
    CHECK(tg_to_host(d.labels, labels, (size_t)d.n) == 0);
    int64_t count[256] = {0};
    for (int64_t i = 0; i < d.n; i++) count[labels[i]]++;
    for (int c = 0; c < 10; c++) CHECK(count[c] == d.n / 10); /* Fashion-MNIST is balanced */
    free(labels);
    tg_dataset_free(&d);
  }
  tg_scope_end(s);
}

/* ---------------------------------------------------------------- loader */

/* n images of shape (1, 2, 2): every pixel of image i is i; label i (int64). */
static void make_dataset(tg_dataset *d, int n) {
  uint8_t *px = malloc((size_t)n * 4);
  int64_t *lab = malloc(sizeof *lab * (size_t)n);
  for (int i = 0; i < n * 4; i++) px[i] = (uint8_t)(i / 4);
  for (int i = 0; i < n; i++) lab[i] = i;
  int64_t shape[4] = {n, 1, 2, 2};
  d->images = tg_from_data(px, TG_UINT8, shape, 4);
  d->labels = tg_from_data(lab, TG_INT64, shape, 1);
  d->n = n;
  free(px), free(lab);
}

/* One epoch: labels in order into out (at most cap), batch sizes checked against x.
 * Returns the number of rows seen, -1 on a malformed batch. */
static int run_epoch(tg_loader *l, int32_t *out, int cap, int64_t *nbatches) {
  int seen = 0;
  tg_tensor *x, *y;
  *nbatches = 0;
  for (int rc; (rc = tg_loader_next(l, &x, &y)) == 1;) {
    int64_t b = tg_dim(y, 0);
    float px[4 * 64];
    int32_t lab[64];
    if (b > 64 || seen + b > cap || tg_get_dtype(x) != TG_FLOAT32 || tg_get_dtype(y) != TG_INT32 || tg_dim(x, 0) != b ||
        tg_ndim(x) != 4 || tg_dim(x, 1) != 1 || tg_dim(x, 2) != 2 || tg_dim(x, 3) != 2)
      return -1;
    if (tg_to_host(x, px, sizeof(float) * 4 * (size_t)b) || tg_to_host(y, lab, sizeof(int32_t) * (size_t)b)) return -1;
    for (int64_t i = 0; i < b; i++) {
      for (int k = 0; k < 4; k++)
        if (px[4 * i + k] != (float)lab[i] / 255.0f) return -1; /* the row belongs to its label */
      out[seen++] = lab[i];
    }
    ++*nbatches;
  }
  return seen;
}

static bool is_permutation_prefix(const int32_t *v, int n, int of) {
  char hit[256] = {0};
  for (int i = 0; i < n; i++) {
    if (v[i] < 0 || v[i] >= of || hit[v[i]]) return false;
    hit[v[i]] = 1;
  }
  return true;
}

TEST(io_loader_epochs_cover_each_row_once) {
  tg_scope *s = tg_scope_begin();
  tg_dataset d;
  make_dataset(&d, 10);
  tg_manual_seed(1);
  tg_loader *l = tg_loader_new(&d, 3, true, false);
  CHECK(l != NULL);
  int32_t a[10], b[10];
  int64_t nb;
  CHECK(run_epoch(l, a, 10, &nb) == 10 && nb == 4); /* 3 + 3 + 3 + 1 */
  CHECK(is_permutation_prefix(a, 10, 10));
  CHECK(run_epoch(l, b, 10, &nb) == 10 && nb == 4); /* the next call started a new epoch */
  CHECK(is_permutation_prefix(b, 10, 10));
  CHECK(memcmp(a, b, sizeof a) != 0); /* reshuffled (1 chance in 10! to fail) */
  tg_loader_free(l);

  l = tg_loader_new(&d, 4, false, false); /* no shuffle: in order */
  CHECK(run_epoch(l, a, 10, &nb) == 10 && nb == 3);
  for (int i = 0; i < 10; i++) CHECK(a[i] == i);
  tg_loader_free(l);
  tg_dataset_free(&d);
  tg_scope_end(s);
}

TEST(io_loader_drop_last) {
  tg_scope *s = tg_scope_begin();
  tg_dataset d;
  make_dataset(&d, 10);
  int32_t a[10];
  int64_t nb;
  tg_loader *l = tg_loader_new(&d, 4, false, true);
  CHECK(run_epoch(l, a, 10, &nb) == 8 && nb == 2);
  for (int i = 0; i < 8; i++) CHECK(a[i] == i);
  tg_loader_free(l);
  l = tg_loader_new(&d, 4, true, true);
  for (int e = 0; e < 3; e++) {
    CHECK(run_epoch(l, a, 10, &nb) == 8 && nb == 2);
    CHECK(is_permutation_prefix(a, 8, 10));
  }
  tg_loader_free(l);
  l = tg_loader_new(&d, 11, false, true); /* batch above n: no batch at all */
  CHECK(run_epoch(l, a, 10, &nb) == 0 && nb == 0);
  tg_loader_free(l);
  l = tg_loader_new(&d, 5, false, true); /* n divisible: nothing dropped */
  CHECK(run_epoch(l, a, 10, &nb) == 10 && nb == 2);
  tg_loader_free(l);
  tg_dataset_free(&d);
  tg_scope_end(s);
}

TEST(io_loader_shuffle_reproducible_by_seed) {
  tg_scope *s = tg_scope_begin();
  tg_dataset d;
  make_dataset(&d, 50);
  int32_t runs[3][2][50];
  uint64_t seeds[3] = {42, 42, 43};
  for (int r = 0; r < 3; r++) {
    tg_manual_seed(seeds[r]);
    tg_loader *l = tg_loader_new(&d, 8, true, false);
    int64_t nb;
    for (int e = 0; e < 2; e++) CHECK(run_epoch(l, runs[r][e], 50, &nb) == 50 && nb == 7);
    tg_loader_free(l);
  }
  CHECK(memcmp(runs[0], runs[1], sizeof runs[0]) == 0);
  CHECK(memcmp(runs[0][0], runs[2][0], sizeof runs[0][0]) != 0);
  CHECK(memcmp(runs[0][0], runs[0][1], sizeof runs[0][0]) != 0);
  tg_dataset_free(&d);
  tg_scope_end(s);
}

/* Fisher–Yates gives each of the 3! orders with probability 1/6. */
TEST(io_loader_shuffle_is_uniform) {
  tg_scope *s = tg_scope_begin();
  tg_dataset d;
  make_dataset(&d, 3);
  tg_manual_seed(5);
  tg_loader *l = tg_loader_new(&d, 3, true, false);
  int count[3][3][3] = {{{0}}}, epochs = 1200;
  for (int e = 0; e < epochs; e++) {
    tg_scope *inner = tg_scope_begin();
    int32_t a[3];
    int64_t nb;
    CHECK(run_epoch(l, a, 3, &nb) == 3 && is_permutation_prefix(a, 3, 3));
    count[a[0]][a[1]][a[2]]++;
    tg_scope_end(inner);
  }
  int perms = 0;
  for (int i = 0; i < 27; i++) {
    int c = (&count[0][0][0])[i];
    if (!c) continue;
    perms++;
    CHECK(c > 140 && c < 260); /* 200 expected; about 5 standard deviations */
  }
  CHECK(perms == 6);
  tg_loader_free(l);
  tg_dataset_free(&d);
  tg_scope_end(s);
}

TEST(io_loader_errors) {
  tg_scope *s = tg_scope_begin();
  tg_dataset d;
  make_dataset(&d, 4);
  tg_tensor *x = (tg_tensor *)1, *y = (tg_tensor *)1;
  CHECK(tg_loader_new(NULL, 2, false, false) == NULL && msg_has("loader_new: NULL dataset"));
  CHECK(tg_loader_new(&d, 0, false, false) == NULL && msg_has("batch size 0"));
  CHECK(tg_loader_new(&d, -3, false, false) == NULL && msg_has("batch size -3"));
  tg_dataset bad = d;
  bad.n = 5;
  CHECK(tg_loader_new(&bad, 2, false, false) == NULL && msg_has("images are uint8 (4, 1, 2, 2), expected uint8 with 5 rows"));
  bad = d, bad.labels = NULL;
  CHECK(tg_loader_new(&bad, 2, false, false) == NULL && msg_has("without labels"));
  static const int64_t s4[] = {4}, s41[] = {4, 1};
  bad = d, bad.images = tg_zeros(s41, 2, TG_FLOAT32);
  CHECK(tg_loader_new(&bad, 2, false, false) == NULL && msg_has("images are float32"));
  bad = d, bad.labels = tg_zeros(s4, 1, TG_FLOAT32);
  CHECK(tg_loader_new(&bad, 2, false, false) == NULL && msg_has("labels are float32 (4,)"));
  bad = d, bad.labels = tg_zeros(s41, 2, TG_INT32);
  CHECK(tg_loader_new(&bad, 2, false, false) == NULL && msg_has("expected integers of shape (4,)"));
  static const int64_t big[4] = {0, 1, (int64_t)1 << 40, 3};
  bad = d, bad.labels = tg_from_data(big, TG_INT64, s4, 1);
  CHECK(tg_loader_new(&bad, 2, false, false) == NULL && msg_has("label 1099511627776 of row 2 does not fit int32"));
  tg_loader *l = tg_loader_new(&d, 2, false, false);
  CHECK(l != NULL);
  CHECK(tg_loader_next(NULL, &x, &y) == TG_ERR_ARG && x == NULL && y == NULL && msg_has("NULL loader"));
  CHECK(tg_loader_next(l, NULL, &y) == TG_ERR_ARG && msg_has("NULL output pointer"));
  tg_loader_free(l);
  tg_loader_free(NULL);
  tg_dataset_free(&d);

  tg_dataset empty;
  make_dataset(&empty, 0); /* an empty dataset: every epoch ends at once */
  l = tg_loader_new(&empty, 2, true, false);
  CHECK(l && tg_loader_next(l, &x, &y) == 0 && x == NULL && tg_loader_next(l, &x, &y) == 0);
  tg_loader_free(l);
  tg_dataset_free(&empty);
  tg_scope_end(s);
}

/* The loader copies the data: it outlives the dataset, and x is image / 255. */
TEST(io_loader_outlives_dataset_and_scales) {
  tg_scope *s = tg_scope_begin();
  tg_dataset d;
  make_dataset(&d, 6);
  tg_loader *l = tg_loader_new(&d, 6, false, false);
  tg_dataset_free(&d);
  tg_tensor *x, *y;
  CHECK(tg_loader_next(l, &x, &y) == 1);
  float px[24];
  CHECK(tg_to_host(x, px, sizeof px) == 0);
  for (int i = 0; i < 24; i++) CHECK(px[i] == (float)(i / 4) / 255.0f);
  CHECK(tg_loader_next(l, &x, &y) == 0);
  tg_loader_free(l);
  tg_scope_end(s);
}

TEST(io_loader_fashion_batches) {
  if (access(FASHION_DIR "/t10k-images-idx3-ubyte.gz", R_OK) != 0) SKIP("%s absent (package dataset-fashion-mnist)", FASHION_DIR);
  tg_scope *s = tg_scope_begin();
  tg_dataset d;
  CHECK(tg_mnist_load(FASHION_DIR, false, &d) == 0);
  uint8_t *px = malloc(10000 * 784), *lab = malloc(10000);
  CHECK(tg_to_host(d.images, px, 10000 * 784) == 0 && tg_to_host(d.labels, lab, 10000) == 0);
  tg_loader *l = tg_loader_new(&d, 256, false, true);
  tg_tensor *x, *y;
  int batches = 0;
  float *xb = malloc(sizeof *xb * 256 * 784);
  int32_t yb[256];
  for (int rc; (rc = tg_loader_next(l, &x, &y)) == 1; batches++) {
    static const int64_t shape[4] = {256, 1, 28, 28};
    CHECK(same_shape(x, shape, 4));
    if (batches == 0 || batches == 38) { /* the first and last full batch, in order */
      CHECK(tg_to_host(x, xb, sizeof *xb * 256 * 784) == 0 && tg_to_host(y, yb, sizeof yb) == 0);
      int64_t base = (int64_t)batches * 256, bad = 0;
      for (int64_t i = 0; i < 256 * 784; i++) bad += xb[i] != (float)px[base * 784 + i] / 255.0f;
      for (int i = 0; i < 256; i++) bad += yb[i] != lab[base + i];
      CHECK(bad == 0);
    }
    tg_free(x), tg_free(y);
  }
  CHECK(batches == 39); /* 10000 / 256, the partial batch dropped */
  free(xb), free(px), free(lab);
  tg_loader_free(l);
  tg_dataset_free(&d);
  tg_scope_end(s);
}
