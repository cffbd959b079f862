/* test_cl.c — the OpenCL device (DEV=CL, src/device/cl.c, docs/devices.md): it opens or says
 * why not (no platform is "not available", never a crash); device memory round trips; a
 * hand-written kernel compiles, launches over a count that is not a multiple of the work-group
 * size and ignores buffers it does not declare; a bad source is TG_ERR_COMPILE with the build
 * log; binaries are cached on disk and a broken entry is rebuilt; compiles and launches from
 * several threads at once; tensors copied to CL and back keep their values; an elementwise op,
 * sums and a matmul on CL tensors match naive C loops; work-group reductions (local memory,
 * barriers) match naive C loops; kernels over the work-group limits are refused; BEAM on CL
 * searches in device memory and caches its choice. The rest of the suite runs under
 * DEV=CL as it is (`DEV=CL make test`). Every test skips, saying why, where CL is unavailable. */
#include <limits.h>
#include <math.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>
#include "harness.h"
#include "codegen/codegen.h"
#include "device/device.h"
#include "runtime/helpers.h"

/* LeakSanitizer (make test-sanitize): what the OpenCL runtime allocates for itself and keeps
 * until exit (PoCL: ~180 MB of compiler and work-group state, reported as leaks at exit) is not
 * tg's to free. Only allocations made inside those libraries are ignored; tg's own leaks,
 * OpenCL's or not, are still reported. (The test binary's one definition of this hook.) */
const char *__lsan_default_suppressions(void);
const char *__lsan_default_suppressions(void) { return "leak:libpocl.so\nleak:libOpenCL.so\n"; }

/* ------------------------------------------------------------ helpers */

/* The CL device, or NULL with the reason in why (for SKIP). */
static const device *open_cl(char *why, size_t n) {
  const device *d = device_get("CL");
  if (!d) snprintf(why, n, "%s", tg_last_error());
  tg_clear_error();
  return d;
}

#define NEED_CL(d)                                           \
  char why_[512];                                            \
  const device *d = open_cl(why_, sizeof why_);              \
  if (!d) SKIP("OpenCL is not available here: %s", why_)

/* Deterministic values in [-2, 2) (an LCG), so failures reproduce. */
static void fill(float *x, size_t n, uint32_t seed) {
  for (size_t i = 0; i < n; i++) {
    seed = seed * 1664525u + 1013904223u;
    x[i] = (float)(seed >> 8) / (float)(1u << 24) * 4.0f - 2.0f;
  }
}

/* Device memory holding n floats from src (with the slack every buffer gets), or NULL. */
static void *upload(const device *d, const float *src, size_t n) {
  void *m = d->alloc(n * sizeof(float) + BUFFER_SLACK);
  if (m && d->copy_in(m, src, n * sizeof(float)) < 0) d->free(m), m = NULL;
  return m;
}

/* c = (a - b) * k over n elements (the renderer's kernel signature: the count, then buffers).
 * No multiply-add, which the OpenCL compiler may fuse: the C loop gives the same bits. */
static const char *AXPY_SRC =
    "__kernel void axpy(long tg_n, __global float *c, __global const float *a, __global const float *b) {\n"
    "  long g = get_global_id(0);\n"
    "  if (g >= tg_n) return;\n"
    "  c[g] = (a[g] - b[g]) * K;\n"
    "}\n";

/* AXPY_SRC with K defined as k (or as the expression kexpr, whose value is k): a new k is a new
 * source for every cache. */
static char *axpy_source_expr(double k, const char *kexpr) {
  size_t n = strlen(AXPY_SRC) + 64 + (kexpr ? strlen(kexpr) : 0);
  char *s = malloc(n);
  if (s && kexpr) snprintf(s, n, "#define K ((float)(%s))\n%s", kexpr, AXPY_SRC);
  else if (s) snprintf(s, n, "#define K ((float)%.17g)\n%s", k, AXPY_SRC);
  return s;
}
static char *axpy_source(double k) { return axpy_source_expr(k, NULL); }

/* Compile axpy with k (kexpr: see axpy_source_expr), run it over n elements (nbuf buffers
 * passed: the kernel declares 3) and check every element against the C loop; 0 when all match. */
static int run_axpy_expr(const device *d, double k, const char *kexpr, size_t n, int nbuf) {
  float *a = malloc(n * sizeof *a), *b = malloc(n * sizeof *b), *c = malloc(n * sizeof *c);
  char *src = axpy_source_expr(k, kexpr);
  void *fn = NULL, *m[4] = {0};
  int rc = a && b && c && src ? 0 : TG_ERR_NOMEM;
  if (rc == 0) fill(a, n, 1), fill(b, n, 2);
  const char *names[] = {"axpy"};
  if (rc == 0) rc = d->compile(src, names, 1, &fn);
  if (rc == 0) {
    m[0] = d->alloc(n * sizeof(float) + BUFFER_SLACK), m[1] = upload(d, a, n), m[2] = upload(d, b, n);
    m[3] = d->alloc(64);
    rc = m[0] && m[1] && m[2] && m[3] ? d->launch((kernel_fn)fn, m, nbuf, (long long)n) : TG_ERR_DEVICE;
  }
  if (rc == 0) rc = d->copy_out(c, m[0], n * sizeof(float));
  for (size_t i = 0; rc == 0 && i < n; i++)
    if (c[i] != (a[i] - b[i]) * (float)k) rc = 1, printf("  axpy[%zu] = %g, expected %g\n", i, c[i], (a[i] - b[i]) * (float)k);
  for (int i = 0; i < 4; i++) d->free(m[i]);
  free(a), free(b), free(c), free(src);
  return rc;
}
static int run_axpy(const device *d, double k, size_t n, int nbuf) { return run_axpy_expr(d, k, NULL, n, nbuf); }

static bool make_temp_dir(char *buf, size_t n) {
  snprintf(buf, n, "/tmp/tg-cltest-XXXXXX");
  return mkdtemp(buf) != NULL;
}

static void remove_tree(const char *dir) {
  char cmd[PATH_MAX + 32];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
  if (system(cmd) != 0) printf("  could not remove %s\n", dir);
}

/* ------------------------------------------------------------ the device */

TEST(cl_opens_or_says_why) {
  char why[512];
  const device *d = open_cl(why, sizeof why);
  CHECK(tg_device_available("CL") == (d != NULL));
  if (!d) {
    CHECK(strstr(why, "CL") != NULL); /* a reason naming the device, and no crash */
    SKIP("OpenCL is not available here: %s", why);
  }
  CHECK(device_is_gpu(d));
  CHECK(d->caps.max_local_size > 1 && d->caps.threads == 1 && d->caps.vector_bytes == 16);
  CHECK(d->caps.warp >= 1 && d->caps.l2_bytes > 0);
  char desc[512] = "";
  d->describe(desc, sizeof desc);
  CHECK(!strncmp(desc, "cl ", 3) && strlen(desc) > 10);
}

/* Without a platform (the ICD loader pointed at an empty directory) the device is simply not
 * there: tg_device_available is 0 and a realize under DEV=CL fails with the reason. */
TEST_CHILD(cl_no_platform_child) {
  printf("available=%d\n", tg_device_available("CL"));
  tg_scope *s = tg_scope_begin();
  float out = 0;
  int rc = tg_to_host(tg_sum(tg_ones((int64_t[]){4}, 1, TG_FLOAT32), NULL, 0, false), &out, sizeof out);
  printf("rc=%d err=%s\n", rc, tg_last_error());
  CHECK(1);
  tg_scope_end(s);
}

TEST(cl_no_platform_is_unavailable) {
  char dir[64], env[256], out[4096];
  CHECK(make_temp_dir(dir, sizeof dir));
  snprintf(env, sizeof env, "OCL_ICD_VENDORS=%s DEV=CL", dir);
  CHECK(harness_run_child("cl_no_platform_child", env, out, sizeof out) == 0);
  if (strstr(out, "available=1")) { /* a vendor's own loader (NVIDIA's) may not read OCL_ICD_VENDORS */
    printf("  note: this OpenCL loader ignores OCL_ICD_VENDORS: no-platform case not checked here\n");
  } else {
    CHECK(strstr(out, "available=0") != NULL);
    CHECK(strstr(out, "rc=-4") && strstr(out, "device CL is not available here: CL: "));
    CHECK(strstr(out, "no OpenCL platform") || strstr(out, "libOpenCL.so.1 not found"));
  }
  remove_tree(dir);
  snprintf(env, sizeof env, "CL_DEVICE=99 DEV=CL"); /* a device that does not exist */
  CHECK(harness_run_child("cl_no_platform_child", env, out, sizeof out) == 0);
  char why[512];
  if (open_cl(why, sizeof why)) CHECK(strstr(out, "available=0") && strstr(out, "CL_DEVICE=99, but the OpenCL devices here are 0 to"));
}

TEST(cl_memory_round_trip) {
  NEED_CL(d);
  enum { N = 100003 }; /* not a round size */
  unsigned char *src = malloc(N), *back = malloc(N);
  for (int i = 0; i < N; i++) src[i] = (unsigned char)(i * 131 + 7), back[i] = 0;
  void *m = d->alloc(N + BUFFER_SLACK);
  CHECK(m != NULL);
  CHECK(d->copy_in(m, src, N) == 0);
  CHECK(d->copy_out(back, m, N) == 0);
  CHECK(memcmp(src, back, N) == 0);
  CHECK(d->copy_out(back, m, 0) == 0); /* nothing to copy is not an error */
  d->free(m);
  d->free(NULL);
  free(src), free(back);
}

TEST(cl_hand_written_kernel) {
  NEED_CL(d);
  CHECK(run_axpy(d, 0.5, 1000, 3) == 0); /* 1000 = 3 work-groups of 256 and a part */
  CHECK(run_axpy(d, 0.5, 1, 3) == 0);
  CHECK(run_axpy(d, 0.5, 257, 4) == 0); /* a fourth buffer the kernel does not declare */
  CHECK(run_axpy(d, 0.5, 256 * 40 + 3, 3) == 0);
}

TEST(cl_launch_with_too_few_buffers_fails) {
  NEED_CL(d);
  tg_clear_error();
  CHECK(run_axpy(d, 0.75, 10, 2) == TG_ERR_DEVICE);
  CHECK(strstr(tg_last_error(), "CL: kernel launch") != NULL);
  tg_clear_error();
}

TEST(cl_bad_source_is_a_compile_error_with_the_log) {
  NEED_CL(d);
  const char *src = "__kernel void broken(long tg_n, __global float *a) { a[0] = no_such_name + 1; }\n";
  const char *names[] = {"broken"};
  void *fn = NULL;
  tg_clear_error();
  CHECK(d->compile(src, names, 1, &fn) == TG_ERR_COMPILE);
  CHECK(strstr(tg_last_error(), "CL: building the kernel source failed") != NULL);
  CHECK(strstr(tg_last_error(), "no_such_name") != NULL); /* the build log says what is wrong */
  const char *missing[] = {"not_there"};
  tg_clear_error();
  CHECK(d->compile(AXPY_SRC, missing, 1, &fn) != 0); /* K undefined: the log again */
  char *good = axpy_source(1.25);
  tg_clear_error();
  CHECK(d->compile(good, missing, 1, &fn) == TG_ERR_COMPILE); /* builds, but has no such kernel */
  CHECK(strstr(tg_last_error(), "no kernel not_there") != NULL);
  tg_clear_error();
  free(good);
}

/* ------------------------------------------------------------ the disk cache */

/* Compile and run axpy with TG_CL_K; prints what the compile counted. */
TEST_CHILD(cl_cache_child) {
  NEED_CL(d);
  tg_reset_stats();
  int rc = run_axpy(d, atof(getenv("TG_CL_K")), 300, 3);
  tg_stats st = tg_get_stats();
  printf("rc=%d compiled=%llu hits=%llu err=%s\n", rc, (unsigned long long)st.kernels_compiled,
         (unsigned long long)st.disk_cache_hits, tg_last_error());
  CHECK(rc == 0);
}

/* The one entry of the cache in dir: its path, or false. */
static bool cache_entry(const char *dir, char *path, size_t n) {
  char cmd[PATH_MAX + 64];
  snprintf(cmd, sizeof cmd, "ls '%s'/cl-*.bin 2>/dev/null", dir);
  FILE *p = popen(cmd, "r");
  bool ok = p && fgets(path, (int)n, p) != NULL;
  if (p) pclose(p);
  if (ok) path[strcspn(path, "\n")] = 0;
  return ok;
}

/* Rewrite a PoCL binary entry as if PoCL had serialized it without the program's bitcode
 * (its /program.bc record renamed), with a valid trailer (magic, hash of the bytes: cl.c), so
 * only cl.c's look inside the binary can catch it. False when the entry is not PoCL's. */
static bool drop_pocl_bitcode(const char *path) {
  FILE *f = fopen(path, "rb");
  static unsigned char data[1 << 22];
  size_t n = f ? fread(data, 1, sizeof data, f) : 0;
  if (f) fclose(f);
  if (n < 24 || n == sizeof data || memcmp(data, "poclbin", 8) != 0) return false;
  n -= 16; /* the trailer */
  unsigned char *r = memmem(data, n, "/program.bc", 11);
  if (!r) return false;
  r[8] = 'X'; /* "/programXbc" */
  uint64_t h = hash_bytes(data, n, 7);
  memcpy(data + n, "tgCLbin1", 8), memcpy(data + n + 8, &h, 8);
  f = fopen(path, "wb");
  bool ok = f && fwrite(data, 1, n + 16, f) == n + 16;
  if (f && fclose(f) != 0) ok = false;
  return ok;
}

TEST(cl_binaries_are_cached_and_healed) {
  char why[512];
  if (!open_cl(why, sizeof why)) SKIP("OpenCL is not available here: %s", why);
  char dir[64], env[256], out[4096], entry[PATH_MAX];
  CHECK(make_temp_dir(dir, sizeof dir));
  snprintf(env, sizeof env, "TG_CACHE_DIR=%s TG_CL_K=2.375 DEBUG=1", dir);
  CHECK(harness_run_child("cl_cache_child", env, out, sizeof out) == 0);
  CHECK(strstr(out, "rc=0 compiled=1 hits=0") != NULL);
  CHECK(cache_entry(dir, entry, sizeof entry));
  CHECK(harness_run_child("cl_cache_child", env, out, sizeof out) == 0);
  CHECK(strstr(out, "rc=0 compiled=1 hits=1") != NULL); /* loaded, not built */
  FILE *f = fopen(entry, "r+b"); /* a flipped byte: the trailer's hash no longer matches */
  CHECK(f && fseek(f, 40, SEEK_SET) == 0 && fputc(0x5a ^ 0xff, f) != EOF);
  if (f) fclose(f);
  CHECK(harness_run_child("cl_cache_child", env, out, sizeof out) == 0);
  CHECK(strstr(out, "rc=0 compiled=1 hits=0") && strstr(out, "removed broken entry"));
  CHECK(harness_run_child("cl_cache_child", env, out, sizeof out) == 0);
  CHECK(strstr(out, "rc=0 compiled=1 hits=1") != NULL); /* rebuilt and stored again */
  if (drop_pocl_bitcode(entry)) { /* PoCL would abort loading it: removed, rebuilt, no crash */
    CHECK(harness_run_child("cl_cache_child", env, out, sizeof out) == 0);
    CHECK(strstr(out, "rc=0 compiled=1 hits=0") && strstr(out, "without the program's bitcode"));
    CHECK(harness_run_child("cl_cache_child", env, out, sizeof out) == 0);
    CHECK(strstr(out, "rc=0 compiled=1 hits=1") != NULL);
  }
  remove_tree(dir);
}

/* ------------------------------------------------------------ lean builds (PoCL) */

/* axpy with K = floor(2.5f): floor is not among the builtins a lean build declares. */
TEST_CHILD(cl_lean_child) {
  NEED_CL(d);
  int rc = run_axpy_expr(d, 2.0, "floor(2.5f)", 300, 3);
  printf("rc=%d err=%s\n", rc, tg_last_error());
  CHECK(1);
}

/* On PoCL a build skips opencl-c.h and declares the builtins tg's kernels call (cl.c); a
 * program calling another builtin is built again with the header (TG_CL_LEAN=1, the default),
 * is an error naming it with TG_CL_LEAN=2 (how CI proves the list is complete), and
 * TG_CL_LEAN=0 always builds with the header. */
TEST(cl_lean_builds_fall_back_to_the_whole_header) {
  NEED_CL(d);
  char desc[512], dir[64], env[256], out[4096];
  d->describe(desc, sizeof desc);
  if (!strstr(desc, "Portable Computing Language")) SKIP("lean builds are PoCL's; this platform: %s", desc);
  CHECK(make_temp_dir(dir, sizeof dir));
  const char *lean[3] = {"0", "1", "2"};
  for (int i = 0; i < 3; i++) {
    snprintf(env, sizeof env, "TG_CACHE_DIR=%s/%d TG_CL_LEAN=%s DEBUG=1", dir, i, lean[i]);
    CHECK(harness_run_child("cl_lean_child", env, out, sizeof out) == 0);
    bool again = strstr(out, "built again with opencl-c.h") != NULL;
    if (i < 2) CHECK(strstr(out, "rc=0 ") && again == (i == 1));
    else CHECK(strstr(out, "rc=-") && strstr(out, "building the kernel source failed") && strstr(out, "floor") && !again);
  }
  remove_tree(dir);
}

/* ------------------------------------------------------------ threads */

typedef struct {
  const device *d;
  double k;
  int rc;
} thread_job;

static void *axpy_thread(void *p) {
  thread_job *j = p;
  for (int i = 0; i < 20 && j->rc == 0; i++) j->rc = run_axpy(j->d, j->k, 700 + (size_t)i, 3);
  if (j->rc) printf("  thread with k=%g: %d, %s\n", j->k, j->rc, tg_last_error());
  return NULL;
}

/* Each thread compiles its own kernel (concurrent builds) and launches it 20 times while the
 * others launch theirs (the queue and clSetKernelArg under one lock). */
TEST(cl_compiles_and_launches_from_threads) {
  NEED_CL(d);
  enum { T = 4 };
  pthread_t th[T];
  thread_job jobs[T];
  for (int t = 0; t < T; t++) {
    jobs[t] = (thread_job){d, 3.0 + 0.125 * t, 0};
    CHECK(pthread_create(&th[t], NULL, axpy_thread, &jobs[t]) == 0);
  }
  for (int t = 0; t < T; t++) {
    pthread_join(th[t], NULL);
    CHECK(jobs[t].rc == 0);
  }
}

/* ------------------------------------------------------------ tensors on CL */

/* t's values as floats (n of them), read to the host; 0 or the status. */
static int read_floats(tg_tensor *t, float *out, size_t n) { return tg_to_host(t, out, n * sizeof(float)); }

TEST(cl_to_and_back_keeps_values) {
  NEED_CL(d);
  (void)d;
  tg_scope *s = tg_scope_begin();
  enum { N = 1031 };
  float x[N], back[N];
  fill(x, N, 3);
  tg_tensor *t = tg_from_data(x, TG_FLOAT32, (int64_t[]){N}, 1);
  tg_tensor *on_cl = tg_to(t, "CL");
  CHECK(on_cl && !strcmp(tg_device_of(on_cl), "CL"));
  CHECK(read_floats(on_cl, back, N) == 0 && !memcmp(x, back, sizeof x)); /* read straight from CL */
  tg_tensor *home = tg_to(on_cl, "CPU");
  CHECK(home && !strcmp(tg_device_of(home), "CPU"));
  memset(back, 0, sizeof back);
  CHECK(read_floats(home, back, N) == 0 && !memcmp(x, back, sizeof x));
  int64_t ints[5] = {INT64_MIN, -1, 0, 1, INT64_MAX}, iback[5] = {0};
  tg_tensor *it = tg_to(tg_from_data(ints, TG_INT64, (int64_t[]){5}, 1), "CL");
  CHECK(tg_to_host(tg_to(it, "CPU"), iback, sizeof iback) == 0 && !memcmp(ints, iback, sizeof ints));
  tg_scope_end(s);
}

TEST(cl_elementwise_matches_c) {
  NEED_CL(d);
  (void)d;
  tg_scope *s = tg_scope_begin();
  enum { R = 37, C = 53 };
  float x[R * C], y[C], out[R * C];
  fill(x, R * C, 4), fill(y, C, 5);
  tg_tensor *tx = tg_to(tg_from_data(x, TG_FLOAT32, (int64_t[]){R, C}, 2), "CL");
  tg_tensor *ty = tg_to(tg_from_data(y, TG_FLOAT32, (int64_t[]){C}, 1), "CL");
  tg_tensor *z = tg_relu(tg_add_s(tg_mul(tx, ty), 0.25)); /* y broadcast over the rows */
  CHECK(z && !strcmp(tg_device_of(z), "CL"));
  CHECK(read_floats(z, out, R * C) == 0);
  int bad = 0; /* exact, with or without the multiply-add fused (C and OpenCL both allow it) */
  for (int i = 0; i < R; i++)
    for (int j = 0; j < C; j++) {
      float want = x[i * C + j] * y[j] + 0.25f, fused = fmaf(x[i * C + j], y[j], 0.25f);
      bad += out[i * C + j] != (want > 0 ? want : 0) && out[i * C + j] != (fused > 0 ? fused : 0);
    }
  CHECK(bad == 0);
  int32_t a[6] = {7, -3, 100000, -2147483647, 5, 0}, b[6] = {3, 3, 30000, 2, -5, 9}, ab[6];
  tg_tensor *ta = tg_to(tg_from_data(a, TG_INT32, (int64_t[]){6}, 1), "CL");
  tg_tensor *tb = tg_to(tg_from_data(b, TG_INT32, (int64_t[]){6}, 1), "CL");
  CHECK(tg_to_host(tg_sub(tg_mul(ta, tb), tb), ab, sizeof ab) == 0);
  for (int i = 0; i < 6; i++) CHECK(ab[i] == (int32_t)((uint32_t)a[i] * (uint32_t)b[i] - (uint32_t)b[i])); /* wraps */
  tg_scope_end(s);
}

TEST(cl_sums_match_c) {
  NEED_CL(d);
  (void)d;
  tg_scope *s = tg_scope_begin();
  enum { R = 29, C = 301 };
  static float x[R * C];
  float rows[R], cols[C], all = 0;
  fill(x, R * C, 6);
  tg_tensor *t = tg_to(tg_from_data(x, TG_FLOAT32, (int64_t[]){R, C}, 2), "CL");
  CHECK(read_floats(tg_sum(t, (int[]){1}, 1, false), rows, R) == 0);
  CHECK(read_floats(tg_sum(t, (int[]){0}, 1, false), cols, C) == 0);
  CHECK(read_floats(tg_sum(t, NULL, 0, false), &all, 1) == 0);
  double total = 0;
  for (int i = 0; i < R; i++) {
    double r = 0;
    for (int j = 0; j < C; j++) r += x[i * C + j];
    CHECK_CLOSE(rows[i], r, 1e-4);
    total += r;
  }
  for (int j = 0; j < C; j++) {
    double c = 0;
    for (int i = 0; i < R; i++) c += x[i * C + j];
    CHECK_CLOSE(cols[j], c, 1e-4);
  }
  CHECK_CLOSE(all, total, 1e-4);
  tg_scope_end(s);
}

TEST(cl_matmul_matches_c) {
  NEED_CL(d);
  (void)d;
  tg_scope *s = tg_scope_begin();
  enum { M = 33, K = 47, N = 29 };
  float a[M * K], b[K * N], c[M * N];
  fill(a, M * K, 7), fill(b, K * N, 8);
  tg_tensor *ta = tg_to(tg_from_data(a, TG_FLOAT32, (int64_t[]){M, K}, 2), "CL");
  tg_tensor *tb = tg_to(tg_from_data(b, TG_FLOAT32, (int64_t[]){K, N}, 2), "CL");
  tg_tensor *tc = tg_matmul(ta, tb);
  CHECK(tc && !strcmp(tg_device_of(tc), "CL"));
  CHECK(read_floats(tc, c, M * N) == 0);
  int bad = 0;
  for (int i = 0; i < M; i++)
    for (int j = 0; j < N; j++) {
      double want = 0;
      for (int k = 0; k < K; k++) want += (double)a[i * K + k] * b[k * N + j];
      bad += !harness_close(c[i * N + j], want, 1e-4, 1e-4);
    }
  CHECK(bad == 0);
  tg_scope_end(s);
}

/* ------------------------------------------------------------ work-groups (GPU-style codegen) */

static int capture_ast(uop *ast, kshape *ks, void *ctx) {
  (void)ks;
  uop **first = ctx;
  if (!*first) uop_incref(*first = ast);
  return 0;
}

/* The AST of the first kernel realizing t needs (a strong reference), or NULL. */
static uop *ast_of(tg_tensor *t) {
  uop *ast = NULL;
  program_set_opt_hook(capture_ast, &ast);
  tg_realize(t);
  program_set_opt_hook(NULL, NULL);
  return ast;
}

/* Run p (built for d) on x (n floats, slot 1) into out (m floats); 0 or a negative status. */
static int run_on(const device *d, program *p, const float *x, size_t n, float *out, size_t m) {
  void *mem[2] = {d->alloc(m * sizeof(float) + BUFFER_SLACK), upload(d, x, n)};
  int rc = mem[0] && mem[1] ? program_exec(p, mem) : TG_ERR_DEVICE;
  if (rc == 0) rc = d->copy_out(out, mem[0], m * sizeof(float));
  d->free(mem[0]), d->free(mem[1]);
  return rc;
}

/* Sums and maxes over rows of 1000 (not a multiple of any group size: the axis is padded with
 * the identity), split across a work-group: GROUPTOP and GROUP, with LOCAL rows beside the
 * group, an UNROLL and UPCAST copies (one local array each), and the heuristics' choice. Each
 * kernel's source has __local partials and barriers, its launch the work-group the shape state
 * says, and every row matches a naive C loop. */
TEST(cl_workgroup_reduction_matches_c) {
  NEED_CL(d);
  enum { R = 6, C = 1000 };
  static float x[R * C];
  fill(x, R * C, 9);
  static const struct {
    opt_action acts[4];
    int n;
    long long local;
  } seqs[] = {
      {{{OPT_PADTO, 1, 64}, {OPT_GROUPTOP, 1, 64}}, 2, 64},
      {{{OPT_PADTO, 1, 48}, {OPT_GROUP, 1, 48}, {OPT_LOCAL, 1, 3}, {OPT_UNROLL, 2, 7}}, 4, 144},
      {{{OPT_PADTO, 1, 32}, {OPT_GROUPTOP, 1, 32}, {OPT_UPCAST, 1, 2}, {OPT_LOCAL, 1, 3}}, 4, 96},
      {{{OPT_LOCAL, 0, 6}}, 1, 6}, /* no group: one work-item per row, 6 to a work-group */
      {{{OPT_PADTO, 0, 0}}, -1, 0}, /* the heuristics */
  };
  for (int op = 0; op < 2; op++) {
    tg_scope *s = tg_scope_begin();
    tg_tensor *t = tg_to(tg_from_data(x, TG_FLOAT32, (int64_t[]){R, C}, 2), "CL");
    uop *ast = ast_of(op ? tg_max(t, (int[]){1}, 1, false) : tg_sum(t, (int[]){1}, 1, false));
    CHECK(ast != NULL);
    for (size_t q = 0; ast && q < sizeof seqs / sizeof *seqs; q++) {
      kshape ks;
      CHECK(kshape_init(&ks, ast) == 0);
      kshape_use_workgroups(&ks, &d->caps);
      for (int i = 0; i < seqs[q].n; i++) CHECK(kshape_apply(&ks, seqs[q].acts[i]) == 0);
      if (seqs[q].n < 0) kshape_optimize(&ks, ast, &d->caps);
      program *p = program_build(d, ast, &ks);
      CHECK(p != NULL);
      if (!p) { printf("  %s\n", tg_last_error()); continue; }
      bool grouped = kshape_local_bytes(&ks) > 0;
      CHECK(p->nstages == 1 && p->stage[0].local == (seqs[q].n < 0 ? kshape_local_size(&ks) : seqs[q].local));
      CHECK(!grouped || (strstr(p->src, "__local") && strstr(p->src, "barrier(CLK_LOCAL_MEM_FENCE)")));
      CHECK(seqs[q].n >= 0 || grouped); /* the heuristics split these rows across a work-group */
      float out[R];
      CHECK(run_on(d, p, x, R * C, out, R) == 0);
      for (int i = 0; i < R; i++) {
        double want = op ? -INFINITY : 0;
        for (int j = 0; j < C; j++) want = op ? fmax(want, x[i * C + j]) : want + x[i * C + j];
        if (!harness_close(out[i], want, 1e-4, 1e-4)) {
          char text[256];
          kshape_describe(&ks, text, sizeof text);
          printf("  %s row %d under %s: %g, expected %g\n", op ? "max" : "sum", i, text, out[i], want);
          CHECK(0);
        }
      }
      program_free(p);
    }
    if (ast) uop_decref(ast);
    tg_scope_end(s);
  }
}

/* Over the device's limits: a work-group larger than max_local_size, or partials larger than
 * its local memory, is refused by the optimizer (kshape_apply), and a launch asking for more
 * work-items per group than the device allows fails before running. OPTS that do not fit get
 * the heuristics instead, and the result is right. */
TEST(cl_over_limit_kernels_are_refused) {
  NEED_CL(d);
  tg_scope *s = tg_scope_begin();
  int64_t n = 2 * (int64_t)d->caps.max_local_size * 4;
  tg_tensor *t = tg_to(tg_ones((int64_t[]){n}, 1, TG_FLOAT32), "CL");
  uop *ast = ast_of(tg_add_s(t, 1));
  kshape ks;
  CHECK(ast && kshape_init(&ks, ast) == 0);
  if (!ast) { tg_scope_end(s); return; }
  kshape_use_workgroups(&ks, &d->caps);
  tg_clear_error();
  CHECK(kshape_apply(&ks, (opt_action){OPT_LOCAL, 0, 2 * d->caps.max_local_size}) < 0);
  CHECK(strstr(tg_last_error(), "work-items in a work-group") != NULL);
  CHECK(kshape_apply(&ks, (opt_action){OPT_LOCAL, 0, d->caps.max_local_size}) == 0);
  uop_decref(ast);
  /* a float64 sum whose work-group partials (8 bytes per work-item and UPCAST copy) would need
   * more than the device's local memory: a full work-group (GROUPTOP and LOCAL rows) */
  int64_t rows = 512, cols = d->caps.max_local_size < 1024 ? d->caps.max_local_size : 1024;
  int64_t lrows = d->caps.max_local_size / cols, copies = d->caps.local_bytes / (8 * cols * lrows) + 1, u = 2;
  while (u < copies && u < 64) u *= 2; /* the smallest power of two over the memory */
  printf("  %s: %d work-items per group, %lld bytes of local memory: UPCAST %lld\n", d->name, d->caps.max_local_size,
         (long long)d->caps.local_bytes, (long long)u);
  double *zeros = calloc((size_t)(rows * cols), sizeof(double));
  tg_tensor *m = zeros ? tg_to(tg_from_data(zeros, TG_FLOAT64, (int64_t[]){rows, cols}, 2), "CL") : NULL;
  free(zeros);
  ast = m && u >= copies ? ast_of(tg_sum(m, (int[]){1}, 1, false)) : NULL;
  CHECK(ast != NULL);
  if (ast) {
    CHECK(kshape_init(&ks, ast) == 0);
    kshape_use_workgroups(&ks, &d->caps);
    CHECK(kshape_apply(&ks, (opt_action){OPT_GROUPTOP, 1, cols}) == 0); /* axes: GROUP, rows */
    if (lrows > 1) CHECK(kshape_apply(&ks, (opt_action){OPT_LOCAL, 1, lrows}) == 0);
    tg_clear_error();
    CHECK(kshape_apply(&ks, (opt_action){OPT_UPCAST, 1, u}) < 0);
    CHECK(strstr(tg_last_error(), "bytes of local memory") != NULL);
    CHECK(kshape_apply(&ks, (opt_action){OPT_UPCAST, 1, u / 2}) == 0 || u / 2 >= copies); /* half fits */
    uop_decref(ast);
  }
  /* the launch itself refuses a work-group over the device's limit */
  char *src = axpy_source(2);
  void *fn = NULL, *mem[3] = {0};
  const char *names[] = {"axpy"};
  long long big = (long long)d->caps.max_local_size * 2;
  CHECK(src && d->compile(src, names, 1, &fn) == 0);
  for (int i = 0; i < 3; i++) mem[i] = d->alloc((size_t)big * sizeof(float) + BUFFER_SLACK);
  tg_clear_error();
  CHECK(d->launch_local((kernel_fn)fn, mem, 3, big, big) < 0 && strstr(tg_last_error(), "work-groups of"));
  for (int i = 0; i < 3; i++) d->free(mem[i]);
  free(src);
  /* OPTS over the limit: the kernel gets the heuristics */
  char opts[64];
  snprintf(opts, sizeof opts, "LOCAL,0,%lld", (long long)d->caps.max_local_size * 2);
  setenv("OPTS", opts, 1);
  float *out = malloc(sizeof(float) * (size_t)n);
  CHECK(out && tg_to_host(tg_mul_s(t, 3), out, sizeof(float) * (size_t)n) == 0);
  unsetenv("OPTS");
  int bad = 0;
  for (int64_t i = 0; out && i < n; i++) bad += out[i] != 3;
  CHECK(out && bad == 0);
  free(out);
  tg_scope_end(s);
}

/* BEAM on CL: a real (small) search times candidates in device memory, finds a choice that
 * computes the right result, and caches it: the second search answers from the disk cache. */
TEST(cl_beam_finds_and_caches_a_choice) {
  NEED_CL(d);
  char dir[PATH_MAX];
  CHECK(make_temp_dir(dir, sizeof dir));
  const char *old = getenv("TG_CACHE_DIR");
  char *saved = old ? strdup(old) : NULL;
  setenv("TG_CACHE_DIR", dir, 1);
  setenv("BEAM_CANDIDATES", "4", 1);
  tg_scope *s = tg_scope_begin();
  enum { R = 8, C = 512 };
  static float x[R * C];
  fill(x, R * C, 10);
  tg_tensor *t = tg_to(tg_from_data(x, TG_FLOAT32, (int64_t[]){R, C}, 2), "CL");
  uop *ast = ast_of(tg_sum(t, (int[]){1}, 1, false));
  CHECK(ast != NULL);
  if (ast) {
    kshape first, again;
    uint64_t searches = tg_beam_searches, hits = tg_beam_cache_hits;
    CHECK(beam_search(d, ast, 1, &first) == 0);
    CHECK(tg_beam_searches == searches + 1 && tg_beam_cache_hits == hits);
    CHECK(beam_search(d, ast, 1, &again) == 0);
    CHECK(tg_beam_searches == searches + 1 && tg_beam_cache_hits == hits + 1);
    char a[256], b[256];
    kshape_describe(&first, a, sizeof a), kshape_describe(&again, b, sizeof b);
    CHECK(!strcmp(a, b));
    CHECK(first.local_max == d->caps.max_local_size); /* a work-group state, as built for CL */
    program *p = program_build(d, ast, &again);
    float out[R];
    CHECK(p && run_on(d, p, x, R * C, out, R) == 0);
    for (int i = 0; p && i < R; i++) {
      double want = 0;
      for (int j = 0; j < C; j++) want += x[i * C + j];
      CHECK_CLOSE(out[i], want, 1e-4);
    }
    program_free(p);
    uop_decref(ast);
  }
  tg_scope_end(s);
  unsetenv("BEAM_CANDIDATES");
  if (saved) setenv("TG_CACHE_DIR", saved, 1);
  else unsetenv("TG_CACHE_DIR");
  free(saved);
  remove_tree(dir);
}
