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
#include "uop/dtype.h"

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
  printf("rc=%d rc2=%d out=%g %g %g %g sum=%.6g checked=%llu ptx=%llu err=%s\n", rc, rc2, out[0], out[1], out[2], out[3], sum,
         (unsigned long long)cuda_checked_kernels, (unsigned long long)cuda_ptx_checked_kernels, tg_last_error());
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

/* ------------------------------------------------------------ the PTX renderer (no GPU) */

#define NEED_PTXAS()                                                          \
  do {                                                                        \
    if (!cuda_ptxas_available()) {                                            \
      char w_[512];                                                           \
      snprintf(w_, sizeof w_, "%s", tg_last_error());                         \
      tg_clear_error();                                                       \
      SKIP("ptxas is not available here: %s", w_);                            \
    }                                                                         \
  } while (0)

/* Hand-built lowered kernels: buffers, loops, loads and stores as lower.c makes them. */
static uop *buf(tg_dtype dt, int slot, int64_t n) { return uop_new(OP_DEFINE_GLOBAL, dt, NULL, 0, (int64_t[]){slot, n}, 2); }
static uop *range(int64_t n, int id, int kind) { return uop_new(OP_RANGE, TG_INT64, (uop *[]){uop_idx(n)}, 1, (int64_t[]){id, kind}, 2); }
static uop *load(uop *g, uop *idx) { return uop_new(OP_LOAD, g->dtype, (uop *[]){g, idx}, 2, NULL, 0); }
static uop *store(uop *g, uop *idx, uop *v) { return uop_new(OP_STORE, v->dtype, (uop *[]){g, idx, v}, 3, NULL, 0); }
static uop *un(uop_op op, uop *a) { return uop_new1(op, a->dtype, a); }

/* Linearize a SINK of stores and render it as PTX for sm_90; NULL on error. */
static char *ptx_of(uop **stores, int n, const char *name) {
  lin_program prog = {0};
  kernel_info info = {0};
  uop *sink = uop_new(OP_SINK, TG_BOOL, stores, n, NULL, 0);
  if (linearize(sink, &prog, &info) < 0) return NULL;
  char *ptx = render_ptx(&prog, 1, &name, 90);
  free(prog.ops);
  return ptx;
}

/* Every ALU op tg has for dt (and a cast to every dtype, a bitcast, a masked load and a gated
 * store), one output buffer each, over 1000 work-items. */
static int all_ops(tg_dtype dt, uop **st) {
  const int64_t n = 1000;
  uop *i = range(n, 0, RANGE_GLOBAL), *a = load(buf(dt, 60, n), i), *b = load(buf(dt, 61, n), i);
  uop *m = load(buf(TG_BOOL, 62, n), i), *c = uop_alu(OP_CMPLT, a, b);
  uop *v[40];
  int k = 0;
  static const uop_op all[] = {OP_ADD, OP_SUB, OP_MUL, OP_MAX, OP_CMPLT, OP_CMPNE, OP_CMPEQ};
  static const uop_op ints[] = {OP_IDIV, OP_MOD, OP_AND, OP_OR, OP_XOR, OP_SHL, OP_SHR, OP_POW};
  static const uop_op floats[] = {OP_FDIV, OP_MOD, OP_POW};
  static const uop_op funcs[] = {OP_EXP2, OP_LOG2, OP_SIN, OP_SQRT, OP_RECIP, OP_TRUNC, OP_NEG};
  for (size_t j = 0; j < sizeof all / sizeof *all; j++) v[k++] = uop_alu(all[j], a, b);
  v[k++] = uop_new3(OP_WHERE, dt, c, a, b);
  if (dtype_is_int(dt)) {
    for (size_t j = 0; j < sizeof ints / sizeof *ints; j++) v[k++] = uop_alu(ints[j], a, b);
    v[k++] = un(OP_NOT, a), v[k++] = un(OP_NEG, a);
  } else if (dtype_is_float(dt)) {
    for (size_t j = 0; j < sizeof floats / sizeof *floats; j++) v[k++] = uop_alu(floats[j], a, b);
    for (size_t j = 0; j < sizeof funcs / sizeof *funcs; j++) v[k++] = un(funcs[j], a);
  } else {
    v[k++] = uop_alu(OP_AND, a, b), v[k++] = uop_alu(OP_OR, a, b), v[k++] = uop_alu(OP_XOR, a, b), v[k++] = un(OP_NOT, a);
  }
  for (int to = 0; to < TG_DTYPE_COUNT; to++) v[k++] = uop_new1(OP_CAST, (tg_dtype)to, a);
  static const tg_dtype same_size[9] = {[1] = TG_UINT8, [2] = TG_UINT16, [4] = TG_INT32, [8] = TG_INT64};
  v[k++] = uop_new1(OP_BITCAST, same_size[tg_dtype_size(dt)], a); /* and back */
  v[k++] = uop_new1(OP_BITCAST, dt, uop_new1(OP_BITCAST, same_size[tg_dtype_size(dt)], b));
  v[k++] = uop_new(OP_LOAD, dt, (uop *[]){buf(dt, 61, n), i, m}, 3, NULL, 0); /* masked */
  for (int j = 0; j < k; j++) st[j] = store(buf(v[j]->dtype, j, n), i, v[j]);
  st[k] = uop_new(OP_STORE, dt, (uop *[]){buf(dt, k, n), i, a, m}, 4, NULL, 0); /* gated */
  return k + 1;
}

TEST(ptx_every_dtype_and_op_assembles) {
  NEED_PTXAS();
  for (int dt = 0; dt < TG_DTYPE_COUNT; dt++) {
    size_t mark = uop_pool_mark();
    uop *st[48];
    char name[32];
    snprintf(name, sizeof name, "ops_%s", dtype_table[dt].name);
    int n = all_ops((tg_dtype)dt, st);
    char *ptx = ptx_of(st, n, name);
    CHECK(ptx != NULL);
    int rc = ptx ? cuda_ptxas_check(ptx, "sm_90", name) : -1;
    CHECK(rc == 0);
    if (rc) printf("  %s: %s\n", name, tg_last_error());
    if (ptx && dt == TG_FLOAT32) { /* IEEE division and square root; inputs read through the read-only path */
      CHECK(strstr(ptx, "div.rn.f32") && strstr(ptx, "sqrt.rn.f32") && strstr(ptx, "ld.global.nc.f32"));
      CHECK(strstr(ptx, ".visible .entry ops_float32(") && strstr(ptx, ".target sm_90"));
    }
    if (ptx && dt == TG_INT8) CHECK(strstr(ptx, "ld.global.nc.s8") && strstr(ptx, "cvt.s32.s8")); /* kept to 8 bits */
    if (ptx && dt == TG_FLOAT16) CHECK(strstr(ptx, "ld.global.nc.b16") && strstr(ptx, "cvt.rn.f16.f32")); /* rounded */
    if (ptx && dt == TG_BOOL) CHECK(strstr(ptx, "selp.u32") && strstr(ptx, "st.global.u8")); /* a byte 0/1 */
    if (ptx && dt == TG_FLOAT64) CHECK(!strstr(ptx, ".approx")); /* exp2/log2/sin/pow: polynomials, no f32 shortcut */
    free(ptx);
    tg_clear_error();
    uop_pool_release(mark);
  }
}

/* out[i] = sum_j a[16 i + j] and max_j a[16 i + j]: a reduce loop inside the work-item. */
TEST(ptx_reductions_assemble) {
  NEED_PTXAS();
  static const tg_dtype dts[] = {TG_FLOAT32, TG_FLOAT16, TG_BFLOAT16, TG_FLOAT64, TG_INT8, TG_INT32, TG_UINT64, TG_BOOL};
  for (size_t d = 0; d < sizeof dts / sizeof *dts; d++) {
    size_t mark = uop_pool_mark();
    tg_dtype dt = dts[d];
    uop *i = range(64, 0, RANGE_GLOBAL), *j = range(16, 1, RANGE_REDUCE), *g = buf(dt, 2, 1024);
    uop *x = load(g, uop_add(uop_mul(i, uop_idx(16)), j)), *st[2];
    for (int k = 0; k < 2; k++) {
      uop *red = uop_new(OP_REDUCE, dt, (uop *[]){x, j}, 2, (int64_t[]){k ? OP_MAX : OP_ADD, 1}, 2);
      st[k] = store(buf(dt, k, 64), i, red);
    }
    char name[32];
    snprintf(name, sizeof name, "sum_%s", dtype_table[dt].name);
    char *ptx = ptx_of(st, 2, name);
    CHECK(ptx && strstr(ptx, "bra B"));
    CHECK(ptx && cuda_ptxas_check(ptx, "sm_90", name) == 0);
    if (tg_last_error()[0]) printf("  %s: %s\n", name, tg_last_error());
    free(ptx);
    tg_clear_error();
    uop_pool_release(mark);
  }
}

/* A GROUPed sum's two stages in one module: 8 groups of partial sums into scratch (slot 2), then
 * the combine; the parallel range is a digit of the work-item index like any output loop. */
TEST(ptx_group_stages_assemble) {
  NEED_PTXAS();
  size_t mark = uop_pool_mark();
  uop *p = range(8, 0, RANGE_PARALLEL), *i = range(4, 1, RANGE_GLOBAL), *r = range(32, 2, RANGE_REDUCE);
  uop *a = load(buf(TG_FLOAT32, 1, 1024), uop_add(uop_mul(i, uop_idx(256)), uop_add(uop_mul(p, uop_idx(32)), r)));
  uop *part = uop_new(OP_REDUCE, TG_FLOAT32, (uop *[]){a, r}, 2, (int64_t[]){OP_ADD, 1}, 2);
  uop *s1 = store(buf(TG_FLOAT32, 2, 32), uop_add(uop_mul(p, uop_idx(4)), i), part);
  uop *i2 = range(4, 0, RANGE_GLOBAL), *q = range(8, 1, RANGE_REDUCE);
  uop *pl = load(buf(TG_FLOAT32, 2, 32), uop_add(uop_mul(q, uop_idx(4)), i2));
  uop *s2 = store(buf(TG_FLOAT32, 0, 4), i2, uop_new(OP_REDUCE, TG_FLOAT32, (uop *[]){pl, q}, 2, (int64_t[]){OP_ADD, 1}, 2));
  lin_program progs[2] = {{0}};
  kernel_info info = {0};
  CHECK(linearize(uop_new(OP_SINK, TG_BOOL, &s1, 1, NULL, 0), &progs[0], &info) == 0);
  CHECK(linearize(uop_new(OP_SINK, TG_BOOL, &s2, 1, NULL, 0), &progs[1], &info) == 0);
  const char *names[2] = {"r_4_partial", "r_4_combine"};
  char *ptx = render_ptx(progs, 2, names, 90);
  CHECK(ptx && strstr(ptx, ".entry r_4_partial(") && strstr(ptx, ".entry r_4_combine("));
  CHECK(ptx && cuda_ptxas_check(ptx, "sm_90", "r_4_partial") == 0);
  if (tg_last_error()[0]) printf("  %s\n", tg_last_error());
  free(ptx), free(progs[0].ops), free(progs[1].ops);
  tg_clear_error();
  uop_pool_release(mark);
}

/* A work-group reduction as lower.c makes it for a GPU device: 4 outputs (a global digit) x 2
 * LOCAL rows x a GROUP of 16 (local digits, the innermost), each work-item summing 32 of a row;
 * the partials combined by a REDUCE over the group's local range, and only group digit 0
 * stores. For every dtype class (f32 sum, f64 max, int32 sum, bool max): the PTX has .shared
 * partials and bar.sync 0 and ptxas takes it; the CUDA C has __shared__ and __syncthreads()
 * and NVRTC compiles it; both launch 128 work-items in blocks of 32 (lin_local_size). */
TEST(ptx_and_cuda_workgroup_combine_compile) {
  NEED_PTXAS();
  NEED_NVRTC();
  static const struct { tg_dtype dt; uop_op op; } kinds[] = {
      {TG_FLOAT32, OP_ADD}, {TG_FLOAT64, OP_MAX}, {TG_INT32, OP_ADD}, {TG_BOOL, OP_MAX}};
  for (size_t k = 0; k < sizeof kinds / sizeof *kinds; k++) {
    size_t mark = uop_pool_mark();
    tg_dtype dt = kinds[k].dt;
    uop *i = range(4, 0, RANGE_GLOBAL), *l = range(2, 1, RANGE_LOCAL), *g = range(16, 2, RANGE_LOCAL), *r = range(32, 3, RANGE_REDUCE);
    uop *row = uop_add(uop_mul(i, uop_idx(2)), l);
    uop *a = load(buf(dt, 1, 8 * 512), uop_add(uop_mul(row, uop_idx(512)), uop_add(uop_mul(g, uop_idx(32)), r)));
    uop *part = uop_new(OP_REDUCE, dt, (uop *[]){a, r}, 2, (int64_t[]){kinds[k].op, 1}, 2);
    uop *all = uop_new(OP_REDUCE, dt, (uop *[]){part, g}, 2, (int64_t[]){kinds[k].op, 1}, 2);
    uop *first = uop_alu(OP_CMPEQ, g, uop_idx(0));
    uop *st = uop_new(OP_STORE, dt, (uop *[]){buf(dt, 0, 8), row, all, first}, 4, NULL, 0);
    lin_program prog = {0};
    kernel_info info = {0};
    CHECK(linearize(uop_new(OP_SINK, TG_BOOL, &st, 1, NULL, 0), &prog, &info) == 0);
    CHECK(program_spec_check(&prog) == 0);
    CHECK(lin_work_items(&prog) == 128 && lin_local_size(&prog) == 32);
    const char *names[1] = {"r_8_wg"};
    char *ptx = render_ptx(&prog, 1, names, 90), *cu = render_cuda(&prog, 1, names), *cl = render_opencl(&prog, 1, names);
    CHECK(ptx && strstr(ptx, ".shared .align 8 .b8 tg_lds0[") && strstr(ptx, "bar.sync 0;"));
    CHECK(ptx && cuda_ptxas_check(ptx, "sm_90", names[0]) == 0);
    CHECK(cu && strstr(cu, "__shared__") && strstr(cu, "__syncthreads();"));
    CHECK(cl && strstr(cl, "__local") && strstr(cl, "barrier(CLK_LOCAL_MEM_FENCE);"));
    char *cubin = NULL;
    size_t len = 0;
    CHECK(cu && cuda_nvrtc_cubin(cu, "sm_90", names, &cubin, &len) == 0 && len > 0);
    if (tg_last_error()[0]) printf("  %s: %s\n", dtype_table[dt].name, tg_last_error());
    free(cubin), free(ptx), free(cu), free(cl), free(prog.ops);
    tg_clear_error();
    uop_pool_release(mark);
  }
}

TEST(ptx_rejected_by_ptxas_names_the_kernel) {
  NEED_PTXAS();
  const char *bad = ".version 8.0\n.target sm_90\n.address_size 64\n.visible .entry broken_kernel(.param .u64 tg_n)\n"
                    "{\n\tadd.f32 %f1, %f2, %f3;\n\tret;\n}\n"; /* registers never declared */
  char cache[PATH_MAX];
  CHECK(make_temp_dir(cache, sizeof cache));
  setenv("TG_CACHE_DIR", cache, 1); /* nothing remembered from another run */
  int rc = cuda_ptxas_check(bad, "sm_90", "broken_kernel");
  CHECK(rc == TG_ERR_COMPILE);
  CHECK(strstr(tg_last_error(), "ptxas rejects kernel broken_kernel (sm_90)") != NULL);
  CHECK(strstr(tg_last_error(), "%f1") != NULL); /* ptxas's log: the undeclared register */
  tg_clear_error();
  unsetenv("TG_CACHE_DIR");
  remove_tree(cache);
  setenv("TG_PTXAS", "/nonexistent/ptxas", 1);
  CHECK(cuda_ptxas_check(bad, "sm_90", "broken_kernel") == TG_ERR_COMPILE && strstr(tg_last_error(), "ptxas not found at /nonexistent/ptxas"));
  unsetenv("TG_PTXAS");
  tg_clear_error();
}

/* A kernel with vector lanes has no PTX: an error naming it, not bad assembly. */
TEST(ptx_vector_lanes_are_an_error) {
  size_t mark = uop_pool_mark();
  uop *l = range(4, 0, RANGE_LANE), *st = store(buf(TG_FLOAT32, 0, 4), l, load(buf(TG_FLOAT32, 1, 4), l));
  char *ptx = ptx_of(&st, 1, "vec_kernel");
  CHECK(ptx == NULL && strstr(tg_last_error(), "render_ptx: kernel vec_kernel: ") && strstr(tg_last_error(), "vector"));
  free(ptx);
  tg_clear_error();
  uop *i = range(4, 0, RANGE_GLOBAL), *x = load(buf(TG_FLOAT32, 1, 4), i); /* a vector node (vcount 4) */
  uop *v = uop_new_vec(OP_ADD, TG_FLOAT32, 4, (uop *[]){x, x}, 2, NULL, 0), *st2 = store(buf(TG_FLOAT32, 0, 4), i, v);
  ptx = ptx_of(&st2, 1, "vec_kernel2");
  CHECK(ptx == NULL && strstr(tg_last_error(), "render_ptx: kernel vec_kernel2: a vector value"));
  free(ptx);
  tg_clear_error();
  uop_pool_release(mark);
}

/* TG_CUDA_CHECK=1 CUDA_PTX=1 on dev: the kernels of a realize are also assembled (at least 2),
 * and a missing ptxas is an error. */
static void check_ptx_child(const char *dev) {
  char out[8192], env[256];
  snprintf(env, sizeof env, "DEV=%s TG_CUDA_CHECK=1 CUDA_PTX=1", dev);
  CHECK(harness_run_child("cuda_check_child", env, out, sizeof out) == 0);
  CHECK(strstr(out, "rc=0 rc2=0 out=7.5 0 18 0 sum=") != NULL);
  unsigned long long ptx = 0;
  const char *c = strstr(out, "ptx=");
  CHECK(c && sscanf(c, "ptx=%llu", &ptx) == 1 && ptx >= 2);
  snprintf(env, sizeof env, "DEV=%s TG_CUDA_CHECK=1 CUDA_PTX=1 TG_PTXAS=/nonexistent/ptxas", dev);
  CHECK(harness_run_child("cuda_check_child", env, out, sizeof out) == 0);
  CHECK(strstr(out, "rc=-3") && strstr(out, "ptxas not found")); /* asked for, but impossible: an error */
  if (!strstr(out, "rc=-3")) printf("%s\n", out);
}

/* On the OpenCL device: its own GPU-style programs. */
TEST(ptx_offline_check_assembles_rendered_kernels) {
  NEED_NVRTC();
  NEED_PTXAS();
  if (!tg_device_available("CL")) SKIP("no OpenCL device to build GPU-style programs for");
  check_ptx_child("CL");
}

/* On a host device the check builds each kernel as the CUDA device would (scalar work-items)
 * and checks that: a DEV=CPU run checks every kernel it makes, no PoCL needed. */
TEST(ptx_offline_check_on_a_host_device) {
  NEED_NVRTC();
  NEED_PTXAS();
  check_ptx_child("CPU");
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
