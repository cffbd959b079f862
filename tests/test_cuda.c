/* test_cuda.c — the CUDA device (DEV=CUDA, src/device/cuda.c, docs/devices.md) and its offline
 * check. Without a driver: the device is not available, with the reason, and a tensor sent to
 * it is an error, never a crash. With NVRTC (no GPU needed): a hand-written kernel compiles to an
 * sm_90 cubin, a bad source is TG_ERR_COMPILE with NVRTC's log, cubins are cached on disk and a
 * broken entry is rebuilt, and TG_CUDA_CHECK=1 compiles the CUDA C of the kernels a realize on
 * the CPU builds. With a GPU: memory round trips, a hand-written kernel over a count that is not
 * a multiple of the block, launches from threads, a failing kernel named in the error (and the
 * CPU still working), tensors copied to CUDA and back, an elementwise op, sums and a matmul
 * against naive C loops. Each test skips, saying why, where what it needs is missing. */
#include <limits.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <unistd.h>
#include "harness.h"
#include "codegen/codegen.h"
#include "device/cuda.h"
#include "device/device.h"
#include "device/disk_cache.h"

/* ------------------------------------------------------------ helpers */

/* The CUDA device, or NULL with the reason in why (for SKIP). */
static const device *open_cuda(char *why, size_t n) {
  const device *d = device_get("CUDA");
  if (!d) snprintf(why, n, "%s", tg_last_error());
  tg_clear_error();
  return d;
}

#define NEED_CUDA(d)                                         \
  char why_[512];                                            \
  const device *d = open_cuda(why_, sizeof why_);            \
  if (!d) SKIP("no CUDA GPU here: %s", why_)

#define NEED_NVRTC()                                                          \
  do {                                                                        \
    if (!cuda_nvrtc_available()) {                                            \
      char w_[512];                                                           \
      snprintf(w_, sizeof w_, "%s", tg_last_error());                         \
      tg_clear_error();                                                       \
      SKIP("NVRTC is not available here: %s", w_);                            \
    }                                                                         \
  } while (0)

/* Deterministic values in [-2, 2) (an LCG), so failures reproduce. */
static void fill(float *x, size_t n, uint32_t seed) {
  for (size_t i = 0; i < n; i++) {
    seed = seed * 1664525u + 1013904223u;
    x[i] = (float)(seed >> 8) / (float)(1u << 24) * 4.0f - 2.0f;
  }
}

/* c = (a - b) * K over tg_n elements, in the renderer's signature (the count, then buffers). */
static const char *AXPY_SRC =
    "extern \"C\" __global__ void axpy(long long tg_n, float *c, const float *a, const float *b) {\n"
    "  long long g = (long long)blockIdx.x * blockDim.x + threadIdx.x;\n"
    "  if (g >= tg_n) return;\n"
    "  c[g] = (a[g] - b[g]) * K;\n"
    "}\n";

/* AXPY_SRC with K defined as k: a new k is a new source for every cache. */
static char *axpy_source(double k) {
  size_t n = strlen(AXPY_SRC) + 64;
  char *s = malloc(n);
  if (s) snprintf(s, n, "#define K ((float)%.17g)\n%s", k, AXPY_SRC);
  return s;
}

/* Device memory holding n floats from src (with the slack every buffer gets), or NULL. */
static void *upload(const device *d, const float *src, size_t n) {
  void *m = d->alloc(n * sizeof(float) + BUFFER_SLACK);
  if (m && d->copy_in(m, src, n * sizeof(float)) < 0) d->free(m), m = NULL;
  return m;
}

/* Compile axpy with k, run it over n elements (nbuf buffers passed: the kernel declares 3) and
 * check every element against the C loop; 0 when all match. */
static int run_axpy(const device *d, double k, size_t n, int nbuf) {
  float *a = malloc(n * sizeof *a), *b = malloc(n * sizeof *b), *c = malloc(n * sizeof *c);
  char *src = axpy_source(k);
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

static bool make_temp_dir(char *buf, size_t n) {
  snprintf(buf, n, "/tmp/tg-cudatest-XXXXXX");
  return mkdtemp(buf) != NULL;
}

static void remove_tree(const char *dir) {
  char cmd[PATH_MAX + 32];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
  if (system(cmd) != 0) printf("  could not remove %s\n", dir);
}

/* Whether the n bytes at p contain the string s (a kernel's name in a cubin's symbol table). */
static bool has_bytes(const char *p, size_t n, const char *s) {
  size_t k = strlen(s);
  for (size_t i = 0; i + k <= n; i++)
    if (!memcmp(p + i, s, k)) return true;
  return false;
}

/* ------------------------------------------------------------ without a GPU */

TEST(cuda_opens_or_says_why) {
  char why[512];
  const device *d = open_cuda(why, sizeof why);
  CHECK(tg_device_available("CUDA") == (d != NULL));
  if (!d) {
    CHECK(strstr(why, "device CUDA is not available here: CUDA: ") != NULL); /* a reason, and no crash */
    CHECK(strstr(why, "libcuda.so.1 not found (no NVIDIA driver)") || strstr(why, "no CUDA GPU") || strstr(why, "cuInit failed") || strstr(why, "NVRTC"));
    SKIP("no CUDA GPU here: %s", why);
  }
  CHECK(device_is_gpu(d));
  CHECK(d->caps.max_local_size > 1 && d->caps.threads == 1 && d->caps.vector_bytes == 16);
  CHECK(d->caps.warp == 32 && d->caps.l2_bytes > 0 && d->caps.local_bytes > 0);
  char desc[512] = "";
  d->describe(desc, sizeof desc);
  CHECK(!strncmp(desc, "cuda ", 5) && strstr(desc, " sm_") && strstr(desc, "nvrtc "));
}

/* Availability, a realize under DEV, and tg_to, as a fresh process sees them. */
TEST_CHILD(cuda_unavailable_child) {
  printf("available=%d\n", tg_device_available("CUDA"));
  tg_scope *s = tg_scope_begin();
  float out = 0;
  int rc = tg_to_host(tg_sum(tg_ones((int64_t[]){4}, 1, TG_FLOAT32), NULL, 0, false), &out, sizeof out);
  printf("rc=%d err=%s\n", rc, tg_last_error());
  tg_clear_error();
  tg_tensor *t = tg_to(tg_from_data((float[]){1, 2}, TG_FLOAT32, (int64_t[]){2}, 1), "CUDA");
  float back[2] = {0};
  int to_rc = t ? tg_to_host(t, back, sizeof back) : tg_error_status();
  printf("to_rc=%d to_err=%s\n", to_rc, tg_last_error());
  CHECK(1);
  tg_scope_end(s);
}

/* A driver library that is not there (TG_CUDA_LIBRARY): not available, with the reason, on any
 * machine; a realize under DEV=CUDA and tg_to(t, "CUDA") are errors that say why. */
TEST(cuda_without_a_driver_is_unavailable) {
  char out[4096];
  CHECK(harness_run_child("cuda_unavailable_child", "TG_CUDA_LIBRARY=/nonexistent/libcuda.so.1 DEV=CUDA", out, sizeof out) == 0);
  CHECK(strstr(out, "available=0") != NULL);
  CHECK(strstr(out, "rc=-4") && strstr(out, "device CUDA is not available here: CUDA: /nonexistent/libcuda.so.1 not found (no NVIDIA driver)"));
  CHECK(strstr(out, "to_rc=-4 to_err=device CUDA is not available here") != NULL);
  CHECK(harness_run_child("cuda_unavailable_child", "TG_CUDA_LIBRARY=/nonexistent/libcuda.so.1 DEV=CPU", out, sizeof out) == 0);
  CHECK(strstr(out, "rc=0 ") && strstr(out, "to_rc=-4 to_err=device CUDA is not available here")); /* the CPU still works */
  if (!strstr(out, "to_rc=-4")) printf("%s\n", out);
}

/* ------------------------------------------------------------ NVRTC, no GPU needed */

TEST(cuda_nvrtc_compiles_a_hand_written_kernel_for_sm90) {
  NEED_NVRTC();
  char *src = axpy_source(0.5), *cubin = NULL;
  size_t len = 0;
  const char *names[] = {"axpy"};
  CHECK(cuda_nvrtc_cubin(src, "sm_90", names, &cubin, &len) == 0);
  CHECK(cubin && len > 64 && !memcmp(cubin, "\x7f" "ELF", 4)); /* a cubin is an ELF file */
  CHECK(cubin && has_bytes(cubin, len, "axpy"));                  /* holding the kernel */
  char *again = NULL;
  size_t len2 = 0;
  CHECK(cuda_nvrtc_cubin(src, "sm_90", names, &again, &len2) == 0); /* the cached one: the same bytes */
  CHECK(again && len2 == len && !memcmp(cubin, again, len));
  free(cubin), free(again), free(src);
}

TEST(cuda_nvrtc_rejects_a_bad_source_with_its_log) {
  NEED_NVRTC();
  const char *src = "extern \"C\" __global__ void broken(long long tg_n, float *a) { a[0] = no_such_name + 1; }\n";
  const char *names[] = {"broken"};
  char *cubin = NULL;
  size_t len = 0;
  tg_clear_error();
  CHECK(cuda_nvrtc_cubin(src, "sm_90", names, &cubin, &len) == TG_ERR_COMPILE);
  CHECK(cubin == NULL);
  CHECK(strstr(tg_last_error(), "NVRTC: kernel broken does not compile for sm_90") != NULL);
  CHECK(strstr(tg_last_error(), "no_such_name") != NULL); /* NVRTC's log says what is wrong */
  tg_clear_error();
  CHECK(cuda_nvrtc_cubin(AXPY_SRC, "sm_90", names, &cubin, &len) == TG_ERR_COMPILE); /* K undefined */
  CHECK(strstr(tg_last_error(), "\"K\"") || strstr(tg_last_error(), "identifier"));
  tg_clear_error();
}

/* Compile axpy(TG_CUDA_K) with NVRTC; prints the cubin's size and the entries removed. */
TEST_CHILD(cuda_cache_child) {
  NEED_NVRTC();
  char *src = axpy_source(atof(getenv("TG_CUDA_K"))), *cubin = NULL;
  size_t len = 0;
  const char *names[] = {"axpy"};
  int rc = cuda_nvrtc_cubin(src, "sm_90", names, &cubin, &len);
  printf("rc=%d elf=%d removed=%llu err=%s\n", rc, cubin && !memcmp(cubin, "\x7f" "ELF", 4), (unsigned long long)disk_cache_removed,
         tg_last_error());
  CHECK(rc == 0);
  free(cubin), free(src);
}

/* The one cubin entry of the cache in dir: its path, or false. */
static bool cache_entry(const char *dir, char *path, size_t n) {
  char cmd[PATH_MAX + 64];
  snprintf(cmd, sizeof cmd, "ls '%s'/cuda-*.cubin 2>/dev/null", dir);
  FILE *p = popen(cmd, "r");
  bool ok = p && fgets(path, (int)n, p) != NULL;
  if (p) pclose(p);
  if (ok) path[strcspn(path, "\n")] = 0;
  return ok;
}

TEST(cuda_cubins_are_cached_and_healed) {
  NEED_NVRTC();
  char dir[64], env[256], out[4096], entry[PATH_MAX];
  CHECK(make_temp_dir(dir, sizeof dir));
  snprintf(env, sizeof env, "TG_CACHE_DIR=%s TG_CUDA_K=1.625 DEBUG=1", dir);
  CHECK(harness_run_child("cuda_cache_child", env, out, sizeof out) == 0);
  CHECK(strstr(out, "rc=0 elf=1 removed=0") != NULL);
  CHECK(cache_entry(dir, entry, sizeof entry));
  FILE *f = fopen(entry, "r+b"); /* a flipped byte: the trailer's hash no longer matches */
  CHECK(f && fseek(f, 40, SEEK_SET) == 0 && fputc(0xa5, f) != EOF);
  if (f) fclose(f);
  CHECK(harness_run_child("cuda_cache_child", env, out, sizeof out) == 0);
  CHECK(strstr(out, "rc=0 elf=1 removed=1") && strstr(out, "removed broken entry"));
  CHECK(truncate(entry, 100) == 0); /* a truncated one */
  CHECK(harness_run_child("cuda_cache_child", env, out, sizeof out) == 0);
  CHECK(strstr(out, "rc=0 elf=1 removed=1") != NULL);
  CHECK(harness_run_child("cuda_cache_child", env, out, sizeof out) == 0);
  CHECK(strstr(out, "rc=0 elf=1 removed=0") != NULL); /* rebuilt and stored again */
  if (!strstr(out, "removed=0")) printf("%s\n", out);
  remove_tree(dir);
}

/* A realize with TG_CUDA_CHECK: its kernels' CUDA C goes through NVRTC too. */
TEST_CHILD(cuda_check_child) {
  tg_scope *s = tg_scope_begin();
  float a[6] = {1, 2, 3, 4, 5, 6}, b[6] = {0.5f, -1, 2, 0, 1, -3}, out[4] = {0};
  tg_tensor *ta = tg_from_data(a, TG_FLOAT32, (int64_t[]){2, 3}, 2), *tb = tg_from_data(b, TG_FLOAT32, (int64_t[]){3, 2}, 2);
  int rc = tg_to_host(tg_relu(tg_matmul(ta, tb)), out, sizeof out);
  float sum = 0;
  int rc2 = tg_to_host(tg_sum(tg_exp(ta), NULL, 0, false), &sum, sizeof sum);
  printf("rc=%d rc2=%d out=%g %g %g %g sum=%.6g checked=%llu err=%s\n", rc, rc2, out[0], out[1], out[2], out[3], sum,
         (unsigned long long)cuda_checked_kernels, tg_last_error());
  CHECK(1);
  tg_scope_end(s);
}

/* The check covers programs built for GPU-style devices (scalar code, one work-item per output):
 * here the OpenCL device's, which need no GPU with PoCL. */
TEST(cuda_offline_check_compiles_rendered_kernels) {
  NEED_NVRTC();
  if (!tg_device_available("CL")) SKIP("no OpenCL device to build GPU-style programs for");
  char out[8192];
  /* [[1,2,3],[4,5,6]] @ [[.5,-1],[2,0],[1,-3]] = [[7.5,-10],[18,-22]]; relu: 7.5 0 18 0 */
  CHECK(harness_run_child("cuda_check_child", "DEV=CL TG_CUDA_CHECK=1", out, sizeof out) == 0);
  CHECK(strstr(out, "rc=0 rc2=0 out=7.5 0 18 0 sum=") != NULL);
  unsigned long long checked = 0;
  const char *c = strstr(out, "checked=");
  CHECK(c && sscanf(c, "checked=%llu", &checked) == 1 && checked >= 2); /* the matmul's kernel and the sum's */
  CHECK(harness_run_child("cuda_check_child", "DEV=CL TG_CUDA_CHECK=0", out, sizeof out) == 0);
  CHECK(strstr(out, "rc=0 rc2=0 out=7.5 0 18 0") && strstr(out, "checked=0 ")); /* off: nothing compiled */
  CHECK(harness_run_child("cuda_check_child", "DEV=CL TG_CUDA_CHECK=1 TG_NVRTC_LIBRARY=/nonexistent/libnvrtc.so", out, sizeof out) == 0);
  CHECK(strstr(out, "rc=-3") && strstr(out, "TG_CUDA_CHECK: CUDA: NVRTC not found")); /* asked for, but impossible: an error */
  if (!strstr(out, "rc=-3")) printf("%s\n", out);
}

/* ------------------------------------------------------------ with a GPU */

TEST(cuda_memory_round_trip) {
  NEED_CUDA(d);
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
  tg_clear_error();
  CHECK(d->alloc((size_t)1 << 50) == NULL && strstr(tg_last_error(), "CUDA: cannot allocate")); /* a petabyte */
  tg_clear_error();
  free(src), free(back);
}

TEST(cuda_hand_written_kernel) {
  NEED_CUDA(d);
  CHECK(run_axpy(d, 0.5, 1000, 3) == 0); /* 1000 = 3 blocks of 256 and a part */
  CHECK(run_axpy(d, 0.5, 1, 3) == 0);
  CHECK(run_axpy(d, 0.5, 257, 4) == 0); /* a fourth buffer the kernel does not declare */
  CHECK(run_axpy(d, 0.5, 256 * 4000 + 3, 3) == 0);
}

TEST(cuda_bad_source_is_a_compile_error) {
  NEED_CUDA(d);
  const char *src = "extern \"C\" __global__ void broken2(long long tg_n, float *a) { a[0] = nothing_here; }\n";
  const char *names[] = {"broken2"}, *missing[] = {"not_there"};
  void *fn = NULL;
  tg_clear_error();
  CHECK(d->compile(src, names, 1, &fn) == TG_ERR_COMPILE && strstr(tg_last_error(), "nothing_here"));
  char *good = axpy_source(1.25);
  tg_clear_error();
  CHECK(d->compile(good, missing, 1, &fn) == TG_ERR_COMPILE); /* compiles, but has no such kernel */
  CHECK(strstr(tg_last_error(), "no kernel not_there") != NULL);
  tg_clear_error();
  free(good);
}

/* A kernel that writes through a null pointer: the launch fails, naming the kernel; the
 * context is lost (CUDA errors of this kind are sticky), but the CPU still computes. */
TEST_CHILD(cuda_fault_child) {
  NEED_CUDA(d);
  const char *src = "extern \"C\" __global__ void faulty(long long tg_n, float *a) { ((volatile float *)0)[threadIdx.x * 1000] = 1; }\n";
  const char *names[] = {"faulty"};
  void *fn = NULL, *m = d->alloc(256);
  int rc = d->compile(src, names, 1, &fn);
  if (rc == 0) rc = d->launch((kernel_fn)fn, &m, 1, 64);
  printf("rc=%d err=%s\n", rc, tg_last_error());
  tg_clear_error();
  tg_scope *s = tg_scope_begin();
  float out = 0;
  tg_tensor *t = tg_to(tg_from_data((float[]){1, 2, 3}, TG_FLOAT32, (int64_t[]){3}, 1), "CPU");
  int cpu = tg_to_host(tg_sum(t, NULL, 0, false), &out, sizeof out);
  printf("cpu=%d out=%g\n", cpu, out);
  CHECK(1);
  tg_scope_end(s);
}

TEST(cuda_failed_launch_names_the_kernel) {
  NEED_CUDA(d);
  (void)d;
  char out[4096];
  CHECK(harness_run_child("cuda_fault_child", "DEV=CPU", out, sizeof out) == 0);
  CHECK(strstr(out, "rc=-4 err=CUDA: kernel faulty (64 work-items") != NULL);
  CHECK(strstr(out, "cpu=0 out=6") != NULL);
  if (!strstr(out, "out=6")) printf("%s\n", out);
}

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

/* Each thread compiles its own kernel (concurrent NVRTC builds and module loads, the context
 * made current on each thread) and launches it 20 times while the others launch theirs. */
TEST(cuda_compiles_and_launches_from_threads) {
  NEED_CUDA(d);
  enum { T = 4 };
  pthread_t th[T];
  thread_job jobs[T];
  for (int t = 0; t < T; t++) {
    jobs[t] = (thread_job){d, 5.0 + 0.125 * t, 0};
    CHECK(pthread_create(&th[t], NULL, axpy_thread, &jobs[t]) == 0);
  }
  for (int t = 0; t < T; t++) {
    pthread_join(th[t], NULL);
    CHECK(jobs[t].rc == 0);
  }
}

/* ------------------------------------------------------------ tensors on CUDA */

static int read_floats(tg_tensor *t, float *out, size_t n) { return tg_to_host(t, out, n * sizeof(float)); }

TEST(cuda_to_and_back_keeps_values) {
  NEED_CUDA(d);
  (void)d;
  tg_scope *s = tg_scope_begin();
  enum { N = 1031 };
  float x[N], back[N];
  fill(x, N, 3);
  tg_tensor *t = tg_from_data(x, TG_FLOAT32, (int64_t[]){N}, 1);
  tg_tensor *on = tg_to(t, "CUDA");
  CHECK(on && !strcmp(tg_device_of(on), "CUDA"));
  CHECK(read_floats(on, back, N) == 0 && !memcmp(x, back, sizeof x)); /* read straight from the GPU */
  tg_tensor *home = tg_to(on, "CPU");
  CHECK(home && !strcmp(tg_device_of(home), "CPU"));
  memset(back, 0, sizeof back);
  CHECK(read_floats(home, back, N) == 0 && !memcmp(x, back, sizeof x));
  int64_t ints[5] = {INT64_MIN, -1, 0, 1, INT64_MAX}, iback[5] = {0};
  tg_tensor *it = tg_to(tg_from_data(ints, TG_INT64, (int64_t[]){5}, 1), "CUDA");
  CHECK(tg_to_host(tg_to(it, "CPU"), iback, sizeof iback) == 0 && !memcmp(ints, iback, sizeof ints));
  tg_scope_end(s);
}

TEST(cuda_elementwise_matches_c) {
  NEED_CUDA(d);
  (void)d;
  tg_scope *s = tg_scope_begin();
  enum { R = 37, C = 53 };
  float x[R * C], y[C], out[R * C];
  fill(x, R * C, 4), fill(y, C, 5);
  tg_tensor *tx = tg_to(tg_from_data(x, TG_FLOAT32, (int64_t[]){R, C}, 2), "CUDA");
  tg_tensor *ty = tg_to(tg_from_data(y, TG_FLOAT32, (int64_t[]){C}, 1), "CUDA");
  tg_tensor *z = tg_relu(tg_sub_s(tg_mul(tx, ty), 0.25)); /* y broadcast over the rows */
  CHECK(z && !strcmp(tg_device_of(z), "CUDA"));
  CHECK(read_floats(z, out, R * C) == 0);
  int bad = 0;
  for (int i = 0; i < R; i++)
    for (int j = 0; j < C; j++) {
      double want = (double)x[i * C + j] * y[j] - 0.25; /* a fused multiply-add rounds once */
      want = want > 0 ? want : 0;
      bad += !harness_close(out[i * C + j], want, 1e-6, 1e-6);
    }
  CHECK(bad == 0);
  int32_t a[6] = {7, -3, 100000, -2147483647, 5, 0}, b[6] = {3, 3, 30000, 2, -5, 9}, ab[6];
  tg_tensor *ta = tg_to(tg_from_data(a, TG_INT32, (int64_t[]){6}, 1), "CUDA");
  tg_tensor *tb = tg_to(tg_from_data(b, TG_INT32, (int64_t[]){6}, 1), "CUDA");
  CHECK(tg_to_host(tg_sub(tg_mul(ta, tb), tb), ab, sizeof ab) == 0);
  for (int i = 0; i < 6; i++) CHECK(ab[i] == (int32_t)((uint32_t)a[i] * (uint32_t)b[i] - (uint32_t)b[i])); /* wraps */
  tg_scope_end(s);
}

TEST(cuda_sums_match_c) {
  NEED_CUDA(d);
  (void)d;
  tg_scope *s = tg_scope_begin();
  enum { R = 29, C = 301 };
  static float x[R * C];
  float rows[R], cols[C], all = 0;
  fill(x, R * C, 6);
  tg_tensor *t = tg_to(tg_from_data(x, TG_FLOAT32, (int64_t[]){R, C}, 2), "CUDA");
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

TEST(cuda_matmul_matches_c) {
  NEED_CUDA(d);
  (void)d;
  tg_scope *s = tg_scope_begin();
  enum { M = 33, K = 47, N = 29 };
  float a[M * K], b[K * N], c[M * N];
  fill(a, M * K, 7), fill(b, K * N, 8);
  tg_tensor *ta = tg_to(tg_from_data(a, TG_FLOAT32, (int64_t[]){M, K}, 2), "CUDA");
  tg_tensor *tb = tg_to(tg_from_data(b, TG_FLOAT32, (int64_t[]){K, N}, 2), "CUDA");
  tg_tensor *tc = tg_matmul(ta, tb);
  CHECK(tc && !strcmp(tg_device_of(tc), "CUDA"));
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
