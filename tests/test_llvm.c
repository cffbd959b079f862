/* test_llvm.c — the LLVM device (DEV=LLVM, docs/devices.md): every ALU op on every dtype, the
 * reductions and a matmul compute what the C device computes (each device in a child process,
 * the results compared element by element); its disk cache writes, loads and heals objects; it
 * forks no compiler; one IR compiled twice links once and two kernels of one name do not
 * clash; a missing libLLVM or an unknown DEV is a clear error, not a crash. The rest of the
 * suite runs under DEV=LLVM as it is (`DEV=LLVM make test`). */
#include <dirent.h>
#include <limits.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>
#include "harness.h"
#include "device/llvm.h"
#include "uop/dtype.h"

/* ------------------------------------------------------------ helpers */

static bool make_temp_dir(char *buf, size_t n) {
  snprintf(buf, n, "/tmp/tg-llvmtest-XXXXXX");
  return mkdtemp(buf) != NULL;
}

static bool ends_with(const char *s, const char *suffix) {
  size_t a = strlen(s), b = strlen(suffix);
  return a >= b && !strcmp(s + a - b, suffix);
}

/* Apply fn (may be NULL) to every file in dir ending with suffix; how many. */
static int for_each_file(const char *dir, const char *suffix, void (*fn)(const char *path, int how), int how) {
  DIR *d = opendir(dir);
  if (!d) return 0;
  int n = 0;
  char path[PATH_MAX + 300];
  for (struct dirent *e; (e = readdir(d));) {
    if (!ends_with(e->d_name, suffix) || !strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
    snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
    if (fn) fn(path, how);
    n++;
  }
  closedir(d);
  return n;
}

static void remove_tree(const char *dir) {
  char cmd[PATH_MAX + 32];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
  if (system(cmd) != 0) printf("  could not remove %s\n", dir);
}

static bool read_text(const char *path, char **out) {
  FILE *f = fopen(path, "rb");
  struct stat st;
  *out = NULL;
  if (!f || fstat(fileno(f), &st) < 0) { if (f) fclose(f); return false; }
  *out = calloc(1, (size_t)st.st_size + 1);
  bool ok = *out && fread(*out, 1, (size_t)st.st_size, f) == (size_t)st.st_size;
  fclose(f);
  return ok;
}

/* ------------------------------------------------------------ a realize in a child */

/* The child side: realizes sum(x * k + 1, axis 1) for x = 0..5 as (2, 3), TG_LLVM_K giving k
 * (a new k is a new kernel for any cache), twice; prints one RESULT line. */
static int run_graph(double k, float out[2]) {
  tg_scope *s = tg_scope_begin();
  tg_tensor *x = tg_reshape(tg_arange(0, 6, 1, TG_FLOAT32), (int64_t[]){2, 3}, 2);
  const int ax[] = {1};
  tg_tensor *y = tg_sum(tg_add_s(tg_mul_s(x, k), 1.0), ax, 1, false);
  out[0] = out[1] = NAN;
  int rc = y ? tg_to_host(y, out, 2 * sizeof(float)) : TG_ERR_ARG;
  tg_scope_end(s);
  return rc;
}

TEST_CHILD(llvm_realize_child) {
  double k = atof(getenv("TG_LLVM_K") ? getenv("TG_LLVM_K") : "1.5");
  float out[2];
  tg_reset_stats();
  int rc = run_graph(k, out), again = run_graph(k, out); /* the second also after a failure */
  bool ok = rc == 0 && harness_close(out[0], k * 3 + 3, 1e-5, 1e-5) && harness_close(out[1], k * 12 + 3, 1e-5, 1e-5);
  tg_stats st = tg_get_stats();
  printf("RESULT rc=%d again=%d compiled=%llu hits=%llu ok=%d err=%s\n", rc, again, (unsigned long long)st.kernels_compiled,
         (unsigned long long)st.disk_cache_hits, ok, tg_last_error());
  CHECK(true);
}

typedef struct child_result {
  bool ran;
  int rc, again, ok, healed;
  unsigned long long compiled, hits;
  char err[512];
} child_result;

static child_result run_child(const char *env) {
  static char out[1 << 16];
  child_result r = {0};
  int status = harness_run_child("llvm_realize_child", env, out, sizeof out);
  for (char *save = NULL, *line = strtok_r(out, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
    int off = 0;
    r.healed += strstr(line, "broken entry") != NULL;
    if (sscanf(line, "RESULT rc=%d again=%d compiled=%llu hits=%llu ok=%d err=%n", &r.rc, &r.again, &r.compiled, &r.hits,
               &r.ok, &off) == 5)
      r.ran = true, snprintf(r.err, sizeof r.err, "%s", line + off);
  }
  if (!r.ran || status != 0) printf("  child (%s): status %d, ran %d, rc %d, err \"%s\"\n", env, status, r.ran, r.rc, r.err);
  return r;
}

#define NEED_LLVM()                                                         \
  do {                                                                      \
    if (!tg_device_available("LLVM")) SKIP("libLLVM-14 is not installed");  \
  } while (0)

/* ------------------------------------------------------------ errors */

/* No libLLVM: the LLVM device is not available, realizes fail with the reason, the process
 * goes on. */
TEST(llvm_missing_library_is_an_error) {
  child_result r = run_child("DEV=LLVM TG_LLVM_LIBRARY=/nonexistent/libLLVM-14.so.1");
  CHECK(r.ran && r.rc == TG_ERR_DEVICE && r.again == TG_ERR_DEVICE && !r.ok);
  CHECK(strstr(r.err, "device LLVM is not available here: /nonexistent/libLLVM-14.so.1 not found") != NULL);
}

TEST(llvm_is_a_known_device) {
  child_result r = run_child("DEV=TPU");
  CHECK(r.ran && r.rc < 0 && r.again < 0 && strstr(r.err, "tg knows CPU, LLVM") != NULL);
}

/* ------------------------------------------------------------ compile */

/* out[i] = in[i] * factor over [start, end): a kernel named k. */
static char *scale_ir(int factor) {
  static const char *fmt =
      "define void @k(i8** %%args, i64 %%s, i64 %%e) {\n"
      "entry:\n  %%p0 = load i8*, i8** %%args\n  %%d0 = bitcast i8* %%p0 to float*\n"
      "  %%a1 = getelementptr i8*, i8** %%args, i64 1\n  %%p1 = load i8*, i8** %%a1\n  %%d1 = bitcast i8* %%p1 to float*\n"
      "  br label %%L\nL:\n  %%i = phi i64 [%%s, %%entry], [%%n, %%B]\n  %%c = icmp slt i64 %%i, %%e\n"
      "  br i1 %%c, label %%B, label %%X\nB:\n  %%q = getelementptr float, float* %%d1, i64 %%i\n"
      "  %%v = load float, float* %%q\n  %%w = fmul float %%v, %d.0\n  %%o = getelementptr float, float* %%d0, i64 %%i\n"
      "  store float %%w, float* %%o\n  %%n = add i64 %%i, 1\n  br label %%L\nX:\n  ret void\n}\n";
  char *s = NULL;
  return asprintf(&s, fmt, factor) < 0 ? NULL : s;
}

typedef void (*kfn)(void **, long long, long long);

/* Two different kernels named k live side by side (symbols are renamed by IR hash); the same
 * IR again is the same code; bad IR is TG_ERR_COMPILE with LLVM's message. */
TEST(llvm_compile_kernels_of_one_name) {
  NEED_LLVM();
  char *ir2 = scale_ir(2), *ir3 = scale_ir(3);
  const char *names[] = {"k"};
  void *f2[1] = {0}, *f3[1] = {0}, *again[1] = {0};
  CHECK(llvm_compile(ir2, names, 1, f2) == 0 && llvm_compile(ir3, names, 1, f3) == 0);
  CHECK(llvm_compile(ir2, names, 1, again) == 0 && again[0] == f2[0] && f2[0] != f3[0]);
  float in[5] = {1, -2, 3.5f, 0, 8}, out2[5], out3[5];
  void *a2[2] = {out2, in}, *a3[2] = {out3, in};
  if (f2[0] && f3[0]) {
    ((kfn)f2[0])(a2, 0, 5), ((kfn)f3[0])(a3, 0, 5);
    for (int i = 0; i < 5; i++) CHECK(out2[i] == in[i] * 2 && out3[i] == in[i] * 3);
  }
  void *bad[1];
  CHECK(llvm_compile("define void @k( {", names, 1, bad) == TG_ERR_COMPILE && strstr(tg_last_error(), "does not parse"));
  const char *missing[] = {"nope"};
  CHECK(llvm_compile(ir2 ? ir2 : "", missing, 1, bad) < 0);
  free(ir2), free(ir3);
}

/* The LLVM device needs no compiler process: a C compiler that does not exist is never run. */
TEST(llvm_forks_no_compiler) {
  NEED_LLVM();
  child_result r = run_child("DEV=LLVM CC=/nonexistent/cc CACHELEVEL=0 TG_LLVM_K=2.375");
  CHECK(r.ran && r.rc == 0 && r.again == 0 && r.ok && r.compiled >= 1 && r.hits == 0);
}

/* ------------------------------------------------------------ the disk cache */

TEST(llvm_disk_cache_written_then_loaded) {
  NEED_LLVM();
  char dir[64], env[256];
  CHECK(make_temp_dir(dir, sizeof dir));
  /* the offline CUDA check (TG_CUDA_CHECK, docs/devices.md) would add its own cache entries */
  snprintf(env, sizeof env, "DEV=LLVM TG_CACHE_DIR=%s TG_LLVM_K=3.8125 TG_CUDA_CHECK=0", dir);
  child_result a = run_child(env);
  CHECK(a.ran && a.rc == 0 && a.ok && a.compiled >= 1 && a.hits == 0);
  int n = for_each_file(dir, ".o", NULL, 0);
  CHECK(n >= 1 && (unsigned long long)n == a.compiled && for_each_file(dir, "", NULL, 0) == n); /* no temp files */
  child_result b = run_child(env); /* a new process loads them */
  CHECK(b.ran && b.rc == 0 && b.ok && b.compiled == a.compiled && b.hits == b.compiled);
  snprintf(env, sizeof env, "DEV=LLVM TG_CACHE_DIR=%s TG_LLVM_K=4.8125 CACHELEVEL=0", dir);
  child_result c = run_child(env);
  CHECK(c.ran && c.rc == 0 && c.ok && c.hits == 0 && for_each_file(dir, ".o", NULL, 0) == n); /* nothing written */
  remove_tree(dir);
}

/* How an object entry is broken: garbage, empty, cut in half, one byte flipped inside. */
enum { BREAK_GARBAGE, BREAK_EMPTY, BREAK_HALF, BREAK_FLIP, BREAK_KINDS };

static void break_entry(const char *path, int how) {
  char *data = NULL;
  struct stat st;
  if (stat(path, &st) < 0 || !read_text(path, &data)) { printf("  cannot read %s\n", path); free(data); return; }
  size_t n = (size_t)st.st_size;
  if (how == BREAK_GARBAGE) for (size_t i = 0; i < n; i++) data[i] = "not an object\n"[i % 14];
  if (how == BREAK_FLIP) data[n / 3] ^= 0x5a;
  n = how == BREAK_EMPTY ? 0 : how == BREAK_HALF ? n / 2 : n;
  FILE *f = fopen(path, "wb");
  if (!f || fwrite(data, 1, n, f) != n) printf("  cannot break %s\n", path);
  if (f) fclose(f);
  free(data);
}

/* Each kind of broken entry: the next process (DEBUG=1) says it removed it, compiles again
 * and computes the right values; the process after that loads the rebuilt entry. */
TEST(llvm_broken_entry_is_removed_and_rebuilt) {
  NEED_LLVM();
  for (int how = 0; how < BREAK_KINDS; how++) {
    char dir[64], env[256];
    CHECK(make_temp_dir(dir, sizeof dir));
    snprintf(env, sizeof env, "DEV=LLVM DEBUG=1 TG_CACHE_DIR=%s TG_LLVM_K=%g", dir, 6.25 + how);
    child_result a = run_child(env);
    CHECK(a.ran && a.ok && a.hits == 0);
    int n = for_each_file(dir, ".o", break_entry, how);
    CHECK(n >= 1 && (unsigned long long)n == a.compiled);
    child_result b = run_child(env);
    CHECK(b.ran && b.ok && b.hits == 0 && b.compiled == a.compiled && b.healed == n);
    child_result c = run_child(env);
    CHECK(c.ran && c.ok && c.hits == c.compiled && c.healed == 0);
    remove_tree(dir);
  }
}

/* ------------------------------------------------------------ ops against the C device */

/* Inputs: NV values of each dtype (ints wrap to the dtype's width, floats round to it). */
#define NV 24
static const double fvals[NV] = {0.0, -0.0, 1, -1, 2, -3, 0.5, -2.5, 7, 100, 65504, 65520,
                                 1e10, -1e-8, 3e-5, 1e-40, 1.00048828125, 3.14159265358979, 255, -128,
                                 NAN, INFINITY, -INFINITY, 2147483648.0};
static const int64_t ivals[NV] = {0, 1, -1, 2, -3, 7, 5, -5, 100, 127, -128, 255,
                                  256, 32767, -32768, 65535, 2147483647, INT32_MIN, 4294967295LL, 12345678901LL,
                                  INT64_MAX, INT64_MIN, 31, 63};

static void put_value(void *p, tg_dtype dt, size_t i, size_t k) {
  size_t sz = tg_dtype_size(dt);
  char *at = (char *)p + i * sz;
  if (dt == TG_BOOL) { at[0] = ivals[k] != 0; return; }
  if (!dtype_is_float(dt)) { memcpy(at, &ivals[k], sz); return; } /* little endian: the low bytes */
  uint16_t h = dt == TG_FLOAT16 ? float_to_half((float)fvals[k]) : float_to_bf16((float)fvals[k]);
  float f = (float)fvals[k];
  if (dt == TG_FLOAT64) memcpy(at, &fvals[k], 8);
  else if (dt == TG_FLOAT32) memcpy(at, &f, 4);
  else memcpy(at, &h, 2);
}

/* An NV x NV (or NV, or 1 x NV) tensor of dt: element (i, j) is value (i * a + j * b) % NV. */
static tg_tensor *input(tg_dtype dt, const int64_t *shape, int nd, int a, int b) {
  size_t n = (size_t)(nd == 2 ? shape[0] * shape[1] : shape[0]);
  char *buf = calloc(n, tg_dtype_size(dt));
  for (size_t e = 0; buf && e < n; e++) {
    size_t i = nd == 2 ? e / (size_t)shape[1] : 0, j = nd == 2 ? e % (size_t)shape[1] : e;
    put_value(buf, dt, e, (i * (size_t)a + j * (size_t)b) % NV);
  }
  tg_tensor *t = buf ? tg_from_data(buf, dt, shape, nd) : NULL;
  free(buf);
  return t;
}

typedef tg_tensor *(*unary_fn)(tg_tensor *);
typedef tg_tensor *(*binary_fn)(tg_tensor *, tg_tensor *);
static tg_tensor *where_lt(tg_tensor *a, tg_tensor *b) { return tg_where(tg_lt(a, b), a, b); }
static tg_tensor *floor_of(tg_tensor *a) { return tg_floor(a); }
static const unary_fn unaries[] = {tg_neg, tg_exp2, tg_log2, tg_sqrt, tg_sin, tg_trunc, tg_reciprocal, tg_bitwise_not,
                                   tg_logical_not, tg_abs, tg_sign, floor_of, tg_round, tg_isnan, tg_exp, tg_tanh,
                                   tg_sigmoid};
static const binary_fn binaries[] = {tg_add, tg_sub, tg_mul, tg_div, tg_idiv, tg_floordiv, tg_mod, tg_maximum, tg_minimum,
                                     tg_pow, tg_bitwise_and, tg_bitwise_or, tg_bitwise_xor, tg_bitwise_left_shift,
                                     tg_bitwise_right_shift, tg_eq, tg_ne, tg_lt, tg_le, tg_logical_and, tg_logical_xor,
                                     where_lt, tg_fmod, tg_copysign};

/* A result as one line: "label n v..." with ints exact and floats as hex floats. */
static void write_values(FILE *f, const char *label, tg_tensor *t) {
  if (!t) { fprintf(f, "%s error\n", label); tg_clear_error(); return; }
  tg_dtype dt = tg_get_dtype(t);
  int64_t n = 1, shape[8];
  int nd = tg_shape(t, shape, 8);
  for (int d = 0; d < nd; d++) n *= shape[d];
  char *buf = malloc((size_t)n * tg_dtype_size(dt) + 1);
  if (!buf || tg_to_host(t, buf, (size_t)n * tg_dtype_size(dt)) < 0) { fprintf(f, "%s error\n", label); free(buf); tg_clear_error(); return; }
  fprintf(f, "%s %s %lld", label, dtype_is_float(dt) ? "f" : "i", (long long)n);
  for (int64_t i = 0; i < n; i++) {
    if (dtype_is_float(dt)) fprintf(f, " %a", dtype_read(buf, dt, (size_t)i));
    else if (dt == TG_UINT64) fprintf(f, " %llu", (unsigned long long)((uint64_t *)buf)[i]);
    else if (dt == TG_INT64) fprintf(f, " %lld", (long long)((int64_t *)buf)[i]);
    else fprintf(f, " %.0f", dtype_read(buf, dt, (size_t)i));
  }
  fprintf(f, "\n");
  free(buf);
}

/* All unary and binary ops of one dtype, stacked into as few kernels as the output dtypes
 * (stacking fuses: every op is computed in one kernel per output dtype). */
static void ops_of(FILE *f, tg_dtype dt) {
  tg_tensor *col = input(dt, (int64_t[]){NV, 1}, 2, 1, 0), *row = input(dt, (int64_t[]){1, NV}, 2, 0, 1);
  tg_tensor *x = input(dt, (int64_t[]){NV}, 1, 0, 1);
  tg_tensor *outs[64];
  int n = 0;
  for (size_t i = 0; i < sizeof unaries / sizeof *unaries; i++) {
    tg_tensor *y = unaries[i](tg_expand(x, (int64_t[]){NV, NV}, 2));
    if (y) outs[n++] = y;
    tg_clear_error();
  }
  for (size_t i = 0; i < sizeof binaries / sizeof *binaries; i++) {
    tg_tensor *y = binaries[i](col, row);
    if (y) outs[n++] = y;
    tg_clear_error();
  }
  for (int d = 0; d < TG_DTYPE_COUNT; d++) { /* casts to every dtype, and bitcasts where sizes match */
    outs[n++] = tg_cast(tg_expand(x, (int64_t[]){NV, NV}, 2), (tg_dtype)d);
    if (d != (int)dt && tg_dtype_size((tg_dtype)d) == tg_dtype_size(dt)) outs[n++] = tg_bitcast(tg_expand(x, (int64_t[]){NV, NV}, 2), (tg_dtype)d);
  }
  tg_tensor *wide_f[64], *wide_i[64], *same[64];
  int nf = 0, ni = 0, ns = 0;
  for (int i = 0; i < n; i++) {
    if (!outs[i]) { tg_clear_error(); continue; }
    tg_dtype o = tg_get_dtype(outs[i]);
    if (o == dt) same[ns++] = outs[i];
    if (dtype_is_float(o)) wide_f[nf++] = tg_cast(outs[i], TG_FLOAT64);
    else wide_i[ni++] = tg_cast(outs[i], o == TG_UINT64 ? TG_UINT64 : TG_INT64);
  }
  char label[64];
  snprintf(label, sizeof label, "%s:floats", tg_dtype_name(dt));
  write_values(f, label, nf ? tg_stack(wide_f, nf, 0) : NULL);
  snprintf(label, sizeof label, "%s:ints", tg_dtype_name(dt));
  write_values(f, label, ni ? tg_stack(wide_i, ni, 0) : NULL);
  snprintf(label, sizeof label, "%s:stored", tg_dtype_name(dt)); /* stores of dt itself */
  write_values(f, label, ns ? tg_stack(same, ns, 0) : NULL);
}

/* Sum, product and max along each axis (vector partials along the contiguous one), a sum of
 * everything (split over the threads) and a matmul (register tiles). */
static void reductions_of(FILE *f, tg_dtype dt) {
  tg_tensor *m = input(dt, (int64_t[]){NV, 40}, 2, 5, 3);
  char label[64];
  for (int axis = 0; axis < 2; axis++) {
    const int ax[] = {axis};
    snprintf(label, sizeof label, "%s:sum%d", tg_dtype_name(dt), axis);
    write_values(f, label, tg_sum(m, ax, 1, false));
    snprintf(label, sizeof label, "%s:prod%d", tg_dtype_name(dt), axis);
    write_values(f, label, tg_prod(m, ax, 1, false));
    snprintf(label, sizeof label, "%s:max%d", tg_dtype_name(dt), axis);
    write_values(f, label, tg_max(m, ax, 1, false));
  }
  tg_tensor *big = input(dt, (int64_t[]){1 << 16}, 1, 0, 7);
  snprintf(label, sizeof label, "%s:sum_all", tg_dtype_name(dt));
  write_values(f, label, tg_sum(big, NULL, 0, false));
  if (dt == TG_FLOAT32 || dt == TG_INT32 || dt == TG_FLOAT16) {
    tg_tensor *a = tg_cast(tg_reshape(tg_arange(0, 96 * 64, 1, TG_FLOAT32), (int64_t[]){96, 64}, 2), dt);
    tg_tensor *b = tg_cast(tg_reshape(tg_arange(0, 64 * 80, 1, TG_FLOAT32), (int64_t[]){64, 80}, 2), dt);
    snprintf(label, sizeof label, "%s:matmul", tg_dtype_name(dt));
    write_values(f, label, tg_matmul(tg_mod(a, tg_full((int64_t[]){1}, 1, 7, dt)), tg_mod(b, tg_full((int64_t[]){1}, 1, 5, dt))));
  }
}

/* Writes every result to the file TG_LLVM_OPS_OUT. */
TEST_CHILD(llvm_ops_child) {
  const char *path = getenv("TG_LLVM_OPS_OUT");
  FILE *f = path ? fopen(path, "w") : NULL;
  CHECK(f != NULL);
  if (!f) return;
  for (int dt = 0; dt < TG_DTYPE_COUNT; dt++) {
    tg_scope *s = tg_scope_begin();
    ops_of(f, (tg_dtype)dt);
    reductions_of(f, (tg_dtype)dt);
    tg_scope_end(s);
  }
  CHECK(fclose(f) == 0);
}

/* Float values agree when both are NaN, or zeros of one sign, or equal, or within 2^-20 relative (fma contraction:
 * gcc and LLVM may fuse different multiply-adds of one expression). */
static bool same_value(const char *kind, const char *a, const char *b) {
  if (*kind == 'i') return !strcmp(a, b);
  double x = strtod(a, NULL), y = strtod(b, NULL);
  if (x == 0 && y == 0) return signbit(x) == signbit(y);
  return (isnan(x) && isnan(y)) || x == y || fabs(x - y) <= 0x1p-20 * fmax(fabs(x), fabs(y));
}

/* Compare two result files line by line; the number of differing values (details printed). */
static int compare_results(char *a, char *b, int *lines) {
  int bad = 0;
  char *sa = NULL, *sb = NULL;
  *lines = 0;
  for (char *la = strtok_r(a, "\n", &sa), *lb = strtok_r(b, "\n", &sb); la || lb;
       la = strtok_r(NULL, "\n", &sa), lb = strtok_r(NULL, "\n", &sb), ++*lines) {
    if (!la || !lb) { printf("  one file has more lines\n"); return bad + 1; }
    char *ta = NULL, *tb = NULL, *label = strtok_r(la, " ", &ta), *kind = strtok_r(NULL, " ", &ta);
    char *label_b = strtok_r(lb, " ", &tb), *kind_b = strtok_r(NULL, " ", &tb);
    if (!label || !label_b || strcmp(label, label_b) || !kind || !kind_b || strcmp(kind, kind_b)) {
      printf("  line %d: %s %s vs %s %s\n", *lines, label, kind, label_b, kind_b);
      bad++;
      continue;
    }
    int i = -1;
    for (char *x = strtok_r(NULL, " ", &ta), *y = strtok_r(NULL, " ", &tb); x || y;
         x = strtok_r(NULL, " ", &ta), y = strtok_r(NULL, " ", &tb), i++) {
      if (x && y && (i < 0 ? !strcmp(x, y) : same_value(kind, x, y))) continue;
      if (bad++ < 12) printf("  %s element %d: C %s, LLVM %s\n", label, i, x ? x : "(none)", y ? y : "(none)");
    }
  }
  return bad;
}

TEST(llvm_ops_match_the_c_device) {
  NEED_LLVM();
  char dir[64], env[300], out[4096], path[2][128];
  const char *devs[2] = {"CPU", "LLVM"};
  CHECK(make_temp_dir(dir, sizeof dir));
  char *text[2] = {NULL, NULL};
  for (int d = 0; d < 2; d++) {
    snprintf(path[d], sizeof path[d], "%s/%s.txt", dir, devs[d]);
    snprintf(env, sizeof env, "DEV=%s TG_LLVM_OPS_OUT=%s", devs[d], path[d]);
    int status = harness_run_child("llvm_ops_child", env, out, sizeof out);
    if (status != 0) printf("  DEV=%s: status %d\n%s\n", devs[d], status, out);
    CHECK(status == 0 && read_text(path[d], &text[d]));
  }
  int lines = 0;
  if (text[0] && text[1]) CHECK(compare_results(text[0], text[1], &lines) == 0);
  CHECK(lines >= TG_DTYPE_COUNT * 10); /* 3 op stacks and 7-8 reductions per dtype */
  free(text[0]), free(text[1]);
  remove_tree(dir);
}
