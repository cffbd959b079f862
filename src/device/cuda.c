/* cuda.c — the CUDA device (DEV=CUDA): CUDA C kernels (render_cuda, render/c.c) compiled by
 * NVRTC to a cubin for the GPU's architecture (sm_XY from its compute capability), loaded and
 * run on buffers in the GPU's memory with the driver API. Both libraries are loaded with dlopen
 * (libcuda.so.1, libnvrtc.so): tg links no CUDA library and needs no CUDA headers to build, and
 * a machine without a driver simply has no CUDA device.
 *
 *   source ─ NVRTC (--gpu-architecture=sm_XY, IEEE division and square root, no flush to
 *   zero) ─ cubin ─ disk cache (cuda-<hash>.cubin + a trailer hashing its bytes) ─
 *   cuModuleLoadData ─ cuModuleGetFunction ─ cuLaunchKernel (blocks of up to 256) ─ wait.
 *
 * One GPU (the first), its primary context, made current on the calling thread at every entry
 * point (compiles run on several threads at once; NVRTC and module loading are thread-safe).
 * Launches go to the default stream under one lock and wait for the context to finish, so a
 * launch's error is its own. Copies are synchronous (cuMemcpyHtoD/DtoH).
 *
 * CUDA_PTX=1: kernels are rendered straight to PTX (render_ptx, render/ptx.c) and the driver
 * JIT-compiles them (cuModuleLoadData takes PTX text as well as cubins); NVRTC is not used.
 *
 * NVRTC alone, with no driver or GPU, is also the offline check (TG_CUDA_CHECK=1): the CUDA C of
 * every kernel built for a work-item device is compiled for sm_90, and a kernel NVRTC rejects
 * fails; with CUDA_PTX=1 its PTX is also assembled by ptxas (the toolkit's, a subprocess). */
#include "device/cuda.h"

#include <dlfcn.h>
#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "device/device.h"
#include "device/disk_cache.h"
#include "runtime/helpers.h"

#define CUDA_LIBRARY "libcuda.so.1"
/* NVRTC's options besides the architecture: IEEE semantics (no --use_fast_math): exact division
 * and square root, denormals kept. Multiply-adds may fuse, as gcc and LLVM contract on the CPU. */
#define NVRTC_FLAGS "--ftz=false --prec-div=true --prec-sqrt=true --fmad=true"
static const char *const nvrtc_flags[] = {"--ftz=false", "--prec-div=true", "--prec-sqrt=true", "--fmad=true"};
enum { NFLAGS = sizeof nvrtc_flags / sizeof *nvrtc_flags };
/* Where NVRTC is looked for, after $TG_NVRTC_LIBRARY (that file only) and $CUDA_PATH/lib64. */
static const char *const nvrtc_paths[] = {"libnvrtc.so", "libnvrtc.so.13", "libnvrtc.so.12", "/usr/local/cuda/lib64/libnvrtc.so"};
#define CHECK_ARCH "sm_90" /* the offline check's target: the H100 */
/* Where ptxas is looked for, after $TG_PTXAS (that file only) and $CUDA_PATH/bin/ptxas. */
#define PTXAS_PATH "/usr/local/cuda/bin/ptxas"
#define BLOCK 256          /* threads per block (fewer for smaller launches) */
#define MAX_ARGS 128       /* buffers a launch passes */

/* ---------------------------------------------------------------- the two APIs */

typedef int CUresult; /* 0: CUDA_SUCCESS */
typedef int CUdevice;
typedef unsigned long long CUdeviceptr;

/* cuda.h's values of the constants used. */
enum {
  CUDA_ERROR_OUT_OF_MEMORY = 2,
  ATTR_MAX_THREADS_PER_BLOCK = 1, ATTR_MAX_GRID_DIM_X = 5, ATTR_MAX_SHARED_MEMORY_PER_BLOCK = 8, ATTR_WARP_SIZE = 10,
  ATTR_MULTIPROCESSOR_COUNT = 16, ATTR_L2_CACHE_SIZE = 38, ATTR_CC_MAJOR = 75, ATTR_CC_MINOR = 76,
  FUNC_ATTR_MAX_THREADS_PER_BLOCK = 0,
};

/* The driver API functions used: return type, name, parameters (handles as void *). */
#define CU_API(X)                                                                                \
  X(CUresult, cuInit, (unsigned))                                                                \
  X(CUresult, cuDriverGetVersion, (int *))                                                       \
  X(CUresult, cuGetErrorString, (CUresult, const char **))                                       \
  X(CUresult, cuDeviceGetCount, (int *))                                                         \
  X(CUresult, cuDeviceGet, (CUdevice *, int))                                                    \
  X(CUresult, cuDeviceGetName, (char *, int, CUdevice))                                          \
  X(CUresult, cuDeviceGetAttribute, (int *, int, CUdevice))                                      \
  X(CUresult, cuDevicePrimaryCtxRetain, (void **, CUdevice))                                     \
  X(CUresult, cuCtxSetCurrent, (void *))                                                         \
  X(CUresult, cuCtxSynchronize, (void))                                                          \
  X(CUresult, cuMemAlloc_v2, (CUdeviceptr *, size_t))                                            \
  X(CUresult, cuMemFree_v2, (CUdeviceptr))                                                       \
  X(CUresult, cuMemcpyHtoD_v2, (CUdeviceptr, const void *, size_t))                             \
  X(CUresult, cuMemcpyDtoH_v2, (void *, CUdeviceptr, size_t))                                   \
  X(CUresult, cuModuleLoadData, (void **, const void *))                                         \
  X(CUresult, cuModuleUnload, (void *))                                                          \
  X(CUresult, cuModuleGetFunction, (void **, void *, const char *))                              \
  X(CUresult, cuFuncGetAttribute, (int *, int, void *))                                          \
  X(CUresult, cuLaunchKernel, (void *, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, void *, void **, void **)) \
  X(CUresult, cuEventCreate, (void **, unsigned))                                                \
  X(CUresult, cuEventRecord, (void *, void *))                                                   \
  X(CUresult, cuEventElapsedTime, (float *, void *, void *))                                     \
  X(CUresult, cuEventDestroy_v2, (void *))

/* The NVRTC functions used (nvrtcProgram is a pointer; nvrtcResult 0 is success). */
#define NVRTC_API(X)                                                                             \
  X(int, nvrtcVersion, (int *, int *))                                                           \
  X(const char *, nvrtcGetErrorString, (int))                                                    \
  X(int, nvrtcCreateProgram, (void **, const char *, const char *, int, const char *const *, const char *const *)) \
  X(int, nvrtcCompileProgram, (void *, int, const char *const *))                                \
  X(int, nvrtcGetProgramLogSize, (void *, size_t *))                                             \
  X(int, nvrtcGetProgramLog, (void *, char *))                                                   \
  X(int, nvrtcGetCUBINSize, (void *, size_t *))                                                  \
  X(int, nvrtcGetCUBIN, (void *, char *))                                                        \
  X(int, nvrtcDestroyProgram, (void **))

#define API_FIELD(ret, name, params) ret(*name) params;
typedef struct cu_api {
  CU_API(API_FIELD)
} cu_api;
typedef struct nvrtc_api {
  NVRTC_API(API_FIELD)
} nvrtc_api;
#undef API_FIELD

typedef struct api_name {
  const char *name;
  size_t at;
} api_name;
#define CU_ENTRY(ret, name, params) {#name, offsetof(cu_api, name)},
#define NVRTC_ENTRY(ret, name, params) {#name, offsetof(nvrtc_api, name)},
static const api_name cu_names[] = {CU_API(CU_ENTRY)};
static const api_name nvrtc_names[] = {NVRTC_API(NVRTC_ENTRY)};
#undef CU_ENTRY
#undef NVRTC_ENTRY

/* Resolve names[0..n) from lib into the table at base; false with why set when one is missing. */
static bool load_table(void *lib, const char *path, const api_name *names, size_t n, void *base, char *why, size_t wn) {
  for (size_t i = 0; i < n; i++) {
    void *p = dlsym(lib, names[i].name);
    if (!p) {
      snprintf(why, wn, "%s lacks %s", path, names[i].name);
      return false;
    }
    memcpy((char *)base + names[i].at, &p, sizeof p);
  }
  return true;
}

/* ---------------------------------------------------------------- NVRTC */

static struct {
  pthread_once_t once;
  nvrtc_api f;
  char why[512];    /* why NVRTC is unavailable ("" when it is available) */
  char version[32]; /* "nvrtc 13.0": part of every cache key */
} N = {.once = PTHREAD_ONCE_INIT};

static void *open_nvrtc(char *tried, size_t n) {
  const char *env = getenv("TG_NVRTC_LIBRARY"), *cuda = getenv("CUDA_PATH");
  if (env && *env) {
    void *lib = dlopen(env, RTLD_NOW | RTLD_LOCAL);
    if (!lib) snprintf(tried, n, "TG_NVRTC_LIBRARY=%s: %s", env, dlerror());
    return lib;
  }
  char path[PATH_MAX];
  snprintf(tried, n, "none of $CUDA_PATH/lib64/libnvrtc.so, %s, ... %s loads", nvrtc_paths[0], nvrtc_paths[3]);
  if (cuda && *cuda) {
    snprintf(path, sizeof path, "%s/lib64/libnvrtc.so", cuda);
    void *lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (lib) return lib;
  }
  for (size_t i = 0; i < sizeof nvrtc_paths / sizeof *nvrtc_paths; i++) {
    void *lib = dlopen(nvrtc_paths[i], RTLD_NOW | RTLD_LOCAL);
    if (lib) return lib;
  }
  return NULL;
}

static void nvrtc_once(void) {
  char tried[384];
  void *lib = open_nvrtc(tried, sizeof tried);
  if (!lib) {
    snprintf(N.why, sizeof N.why, "NVRTC not found (install the CUDA toolkit, or set CUDA_PATH): %s", tried);
    return;
  }
  if (!load_table(lib, "libnvrtc", nvrtc_names, sizeof nvrtc_names / sizeof *nvrtc_names, &N.f, N.why, sizeof N.why)) return;
  int major = 0, minor = 0;
  N.f.nvrtcVersion(&major, &minor);
  snprintf(N.version, sizeof N.version, "nvrtc %d.%d", major, minor);
}

bool cuda_nvrtc_available(void) {
  pthread_once(&N.once, nvrtc_once);
  if (!N.why[0]) return true;
  tg_set_error(TG_ERR_DEVICE, "CUDA: %s", N.why);
  return false;
}

/* NVRTC's log of a program (malloc'd, "" when empty), or NULL. */
static char *program_log(void *prog) {
  size_t n = 0;
  if (N.f.nvrtcGetProgramLogSize(prog, &n) != 0) return NULL;
  char *log = calloc(1, n + 1);
  if (log && n && N.f.nvrtcGetProgramLog(prog, log) != 0) log[0] = 0;
  return log;
}

/* Compile src for arch with NVRTC: 0 and the cubin, or TG_ERR_COMPILE with its log (DEBUG>=1:
 * the whole log on stderr). */
static int nvrtc_compile(const char *src, const char *arch, const char *kernel, char **cubin, size_t *len) {
  void *prog = NULL;
  char file[160], archopt[48];
  snprintf(file, sizeof file, "%s.cu", kernel);
  snprintf(archopt, sizeof archopt, "--gpu-architecture=%s", arch);
  int r = N.f.nvrtcCreateProgram(&prog, src, file, 0, NULL, NULL);
  if (r != 0) return tg_set_error(TG_ERR_COMPILE, "NVRTC: cannot create the program of kernel %s: %s", kernel, N.f.nvrtcGetErrorString(r));
  const char *opts[NFLAGS + 1] = {archopt};
  memcpy(opts + 1, nvrtc_flags, sizeof nvrtc_flags);
  r = N.f.nvrtcCompileProgram(prog, NFLAGS + 1, opts);
  int rc = 0;
  if (r != 0) {
    char *log = program_log(prog);
    if (tg_debug() >= 1) fprintf(stderr, "NVRTC log of kernel %s (%s):\n%s\n", kernel, arch, log ? log : "");
    rc = tg_set_error(TG_ERR_COMPILE, "NVRTC: kernel %s does not compile for %s (%s): %.700s", kernel, arch, N.f.nvrtcGetErrorString(r),
                      log && *log ? log : "no log");
    free(log);
  } else if (N.f.nvrtcGetCUBINSize(prog, len) != 0 || !*len || !(*cubin = malloc(*len)) || N.f.nvrtcGetCUBIN(prog, *cubin) != 0) {
    free(*cubin), *cubin = NULL;
    rc = tg_set_error(TG_ERR_COMPILE, "NVRTC: no cubin for kernel %s (%s)", kernel, arch);
  }
  N.f.nvrtcDestroyProgram(&prog);
  return rc;
}

/* ---------------------------------------------------------------- the disk cache */

/* An entry is the cubin's bytes, then this trailer: a magic and a hash of those bytes, so a
 * truncated or garbled entry is found before the driver reads it. */
#define TRAILER_MAGIC "tgCUBIN1"
typedef struct trailer {
  char magic[8];
  uint64_t hash;
} trailer;

static bool read_file(const char *path, char **data, size_t *len) {
  FILE *f = fopen(path, "rb");
  struct stat st;
  if (!f || fstat(fileno(f), &st) < 0 || st.st_size <= 0) { if (f) fclose(f); return false; }
  *len = (size_t)st.st_size;
  *data = malloc(*len);
  bool ok = *data && fread(*data, 1, *len, f) == *len;
  fclose(f);
  if (!ok) free(*data), *data = NULL;
  return ok;
}

/* The cubin inside an entry's bytes: its length, or 0 when the trailer does not vouch for it. */
static size_t entry_cubin(const char *data, size_t len) {
  trailer t;
  if (len <= sizeof t) return 0;
  memcpy(&t, data + len - sizeof t, sizeof t);
  size_t n = len - sizeof t;
  return !memcmp(t.magic, TRAILER_MAGIC, 8) && t.hash == hash_bytes(data, n, 11) ? n : 0;
}

static bool check_entry(const char *path, char *why, size_t n) {
  char *data = NULL;
  size_t len = 0;
  bool ok = read_file(path, &data, &len) && entry_cubin(data, len) > 0;
  if (!ok) snprintf(why, n, "%s", data ? "its trailer does not match its bytes" : "cannot be read");
  free(data);
  return ok;
}

/* Store the cubin as entry name (it grows by the trailer: *cubin may move). */
static void store_entry(const char *name, char **cubin, size_t len) {
  if (!disk_cache_enabled()) return;
  char *data = realloc(*cubin, len + sizeof(trailer));
  if (!data) return;
  *cubin = data;
  trailer t;
  memcpy(t.magic, TRAILER_MAGIC, 8);
  t.hash = hash_bytes(data, len, 11);
  memcpy(data + len, &t, sizeof t);
  disk_cache_write(name, data, len + sizeof t);
}

/* The cubin of src for arch: from entry (1; its path in path), compiled and stored (0), or a
 * negative status. A broken entry is removed and compiled again. */
static int cubin_for(const char *src, const char *arch, const char *kernel, char **cubin, size_t *len, char *path, size_t pn) {
  char name[128];
  const char *parts[] = {src, N.version, arch, NVRTC_FLAGS};
  disk_cache_key(name, sizeof name, "cuda-", parts, 4, ".cubin");
  *cubin = NULL;
  int found = disk_cache_find(name, check_entry, path, pn);
  if (found < 0) return found;
  size_t got = 0;
  if (found && read_file(path, cubin, &got) && (*len = entry_cubin(*cubin, got)) > 0) return 1;
  if (found) disk_cache_remove(path, "it changed while being read");
  free(*cubin), *cubin = NULL;
  int rc = nvrtc_compile(src, arch, kernel, cubin, len);
  if (rc == 0) store_entry(name, cubin, *len);
  return rc;
}

int cuda_nvrtc_cubin(const char *src, const char *arch, const char *const *names, char **cubin, size_t *len) {
  char path[PATH_MAX];
  if (!cuda_nvrtc_available()) return TG_ERR_COMPILE;
  int rc = cubin_for(src, arch, names[0], cubin, len, path, sizeof path);
  return rc < 0 ? rc : 0;
}

/* ---------------------------------------------------------------- ptxas */

/* Read once: the device's renderer and its compiler must agree for the life of the process. */
static pthread_once_t ptx_once = PTHREAD_ONCE_INIT;
static bool ptx_mode;
static void ptx_mode_once(void) { ptx_mode = tg_getenv_int("CUDA_PTX", 0) != 0; }

bool cuda_ptx_mode(void) {
  pthread_once(&ptx_once, ptx_mode_once);
  return ptx_mode;
}

/* ptxas: $TG_PTXAS, $CUDA_PATH/bin/ptxas or PTXAS_PATH; false with why when none runs. */
static bool find_ptxas(char *path, size_t n, char *why, size_t wn) {
  const char *env = getenv("TG_PTXAS"), *cuda = getenv("CUDA_PATH");
  if (env && *env) snprintf(path, n, "%s", env);
  else if (cuda && *cuda) snprintf(path, n, "%s/bin/ptxas", cuda);
  else snprintf(path, n, "%s", PTXAS_PATH);
  if (access(path, X_OK) == 0) return true;
  snprintf(why, wn, "ptxas not found at %s (install the CUDA toolkit, or set CUDA_PATH or TG_PTXAS)", path);
  return false;
}

bool cuda_ptxas_available(void) {
  char path[PATH_MAX], why[PATH_MAX + 96];
  if (find_ptxas(path, sizeof path, why, sizeof why)) return true;
  tg_set_error(TG_ERR_COMPILE, "CUDA: %s", why);
  return false;
}

/* Append s to the shell command in b, single-quoted (a quote inside becomes '\''). */
static void sb_quoted(strbuf *b, const char *s) {
  sb_printf(b, "'");
  for (const char *q; (q = strchr(s, '\'')); s = q + 1) sb_printf(b, "%.*s'\\''", (int)(q - s), s);
  sb_printf(b, "%s'", s);
}

/* Run ptxas -arch=arch on the PTX in file: 0, or its exit status with its output in log. */
static int run_ptxas(const char *ptxas, const char *arch, const char *file, char *log, size_t n) {
  strbuf cmd = {0};
  sb_quoted(&cmd, ptxas);
  sb_printf(&cmd, " -arch=%s -o /dev/null ", arch);
  sb_quoted(&cmd, file);
  sb_printf(&cmd, " 2>&1");
  FILE *p = cmd.s ? popen(cmd.s, "r") : NULL;
  sb_free(&cmd);
  if (!p) return snprintf(log, n, "cannot run %.200s", ptxas), -1;
  size_t got = fread(log, 1, n - 1, p);
  char sink[4096];
  while (fread(sink, 1, sizeof sink, p) > 0) {}
  log[got] = 0;
  return pclose(p);
}

int cuda_ptxas_check(const char *ptx, const char *arch, const char *kernel) {
  char ptxas[PATH_MAX], why[PATH_MAX + 96], name[128], path[PATH_MAX], tmp[PATH_MAX], log[1200];
  if (!find_ptxas(ptxas, sizeof ptxas, why, sizeof why)) return tg_set_error(TG_ERR_COMPILE, "CUDA: %s", why);
  const char *parts[] = {ptx, arch, ptxas};
  disk_cache_key(name, sizeof name, "ptxas-", parts, 3, ".ok");
  if (disk_cache_find(name, NULL, path, sizeof path) == 1) return 0; /* assembled before */
  int rc = disk_cache_temp(name, ".ptx", tmp, sizeof tmp);
  if (rc < 0) return rc;
  FILE *f = fopen(tmp, "w");
  bool written = f && fputs(ptx, f) >= 0;
  if (f && fclose(f) != 0) written = false;
  int status = written ? run_ptxas(ptxas, arch, tmp, log, sizeof log) : -1;
  unlink(tmp);
  if (!written) return tg_set_error(TG_ERR_COMPILE, "ptxas: cannot write %s", tmp);
  if (status != 0) return tg_set_error(TG_ERR_COMPILE, "ptxas rejects kernel %s (%s): %.900s", kernel, arch, log[0] ? log : "no output");
  disk_cache_write(name, "ok\n", 3);
  return 0;
}

_Atomic uint64_t cuda_ptx_checked_kernels;

/* The arch's number: "sm_90" → 90. */
static int arch_number(const char *arch) { return atoi(arch + 3); }

/* CUDA_PTX=1 under TG_CUDA_CHECK: the programs' PTX must assemble with ptxas. */
static int ptx_offline_check(const lin_program *progs, int n, const char *const *names);

/* ---------------------------------------------------------------- the offline check */

_Atomic uint64_t cuda_checked_kernels;

static struct {
  pthread_once_t once;
  char arch[16]; /* "" when the check is off */
} check = {.once = PTHREAD_ONCE_INIT};

/* TG_CUDA_CHECK: unset, "" or "0" off; "sm_XY" that architecture; anything else sm_90. */
static void check_once(void) {
  const char *env = getenv("TG_CUDA_CHECK");
  if (!env || !*env || !strcmp(env, "0")) return;
  snprintf(check.arch, sizeof check.arch, "%s", strncmp(env, "sm_", 3) ? CHECK_ARCH : env);
}

bool cuda_offline_check_on(void) {
  pthread_once(&check.once, check_once);
  return check.arch[0] != 0;
}

int cuda_offline_check(const lin_program *progs, int n, const char *const *names) {
  pthread_once(&check.once, check_once);
  if (!check.arch[0]) return 0;
  char why[900];
  if (!cuda_nvrtc_available()) {
    snprintf(why, sizeof why, "%s", tg_last_error()); /* tg_set_error's own buffer: copy it first */
    return tg_set_error(TG_ERR_COMPILE, "TG_CUDA_CHECK: %s", why);
  }
  char *src = render_cuda(progs, n, names);
  if (!src) {
    snprintf(why, sizeof why, "%s", tg_last_error());
    return tg_set_error(TG_ERR_COMPILE, "TG_CUDA_CHECK: render_cuda failed for kernel %s: %s", names[0], why);
  }
  char *cubin = NULL, path[PATH_MAX];
  size_t len = 0;
  int rc = cubin_for(src, check.arch, names[0], &cubin, &len, path, sizeof path);
  free(cubin);
  if (rc < 0) { /* a renderer bug: everything needed to report it */
    snprintf(why, sizeof why, "%s", tg_last_error());
    fprintf(stderr, "TG_CUDA_CHECK: NVRTC rejects kernel %s (%s):\n%s\n---- its CUDA C ----\n%s----\n", names[0], check.arch, why, src);
    tg_set_error(TG_ERR_COMPILE, "TG_CUDA_CHECK: %s", why);
  } else {
    cuda_checked_kernels++;
  }
  free(src);
  if (rc >= 0 && cuda_ptx_mode()) rc = ptx_offline_check(progs, n, names);
  return rc < 0 ? rc : 0;
}

static int ptx_offline_check(const lin_program *progs, int n, const char *const *names) {
  char why[1200];
  char *ptx = render_ptx(progs, n, names, arch_number(check.arch));
  if (!ptx) {
    snprintf(why, sizeof why, "%s", tg_last_error());
    return tg_set_error(TG_ERR_COMPILE, "TG_CUDA_CHECK: %s", why);
  }
  int rc = cuda_ptxas_check(ptx, check.arch, names[0]);
  if (rc < 0) {
    snprintf(why, sizeof why, "%s", tg_last_error());
    fprintf(stderr, "TG_CUDA_CHECK: %s\n---- its PTX ----\n%s----\n", why, ptx);
    tg_set_error(TG_ERR_COMPILE, "TG_CUDA_CHECK: %s", why);
  } else {
    cuda_ptx_checked_kernels++;
  }
  free(ptx);
  return rc < 0 ? rc : 0;
}

/* ---------------------------------------------------------------- the driver */

/* What a launch needs to know about a kernel: its name (for errors) and its block limit. */
typedef struct kernel_rec {
  char name[128];
  int max_threads;
} kernel_rec;

static struct {
  pthread_once_t once;
  cu_api f;
  char why[512]; /* why the device is unavailable ("" when it is available) */
  CUdevice dev;
  void *ctx;
  char name[128], arch[16];
  int driver, max_threads, max_grid, shared, warp, l2, sms;
  pthread_mutex_t lock; /* launches, and the kernel records */
  ptrmap kernels;       /* CUfunction → kernel_rec */
} D = {.once = PTHREAD_ONCE_INIT, .lock = PTHREAD_MUTEX_INITIALIZER};

static const char *cu_error(CUresult r) {
  static _Thread_local char buf[48];
  const char *s = NULL;
  if (D.f.cuGetErrorString && D.f.cuGetErrorString(r, &s) == 0 && s) return s;
  snprintf(buf, sizeof buf, "CUDA error %d", r);
  return buf;
}

/* AddressSanitizer's shadow gap takes the address range CUDA's unified addressing reserves:
 * cuInit fails with "out of memory" unless ASAN_OPTIONS has protect_shadow_gap=0. */
#if defined(__SANITIZE_ADDRESS__)
#define ASAN_HINT " (under AddressSanitizer, CUDA needs ASAN_OPTIONS=protect_shadow_gap=0)"
#else
#define ASAN_HINT ""
#endif

static int attribute(int what) {
  int v = 0;
  return D.f.cuDeviceGetAttribute(&v, what, D.dev) == 0 ? v : 0;
}

/* The first GPU, its primary context and its limits; false with D.why set. */
static bool find_gpu(void) {
  int count = 0;
  CUresult r = D.f.cuInit(0);
  if (r != 0) {
    snprintf(D.why, sizeof D.why, "cuInit failed: %s%s", cu_error(r), ASAN_HINT);
    return false;
  }
  if ((r = D.f.cuDeviceGetCount(&count)) != 0 || count == 0) {
    snprintf(D.why, sizeof D.why, "no CUDA GPU (%s)", r ? cu_error(r) : "the driver sees none");
    return false;
  }
  if ((r = D.f.cuDeviceGet(&D.dev, 0)) != 0 || (r = D.f.cuDevicePrimaryCtxRetain(&D.ctx, D.dev)) != 0) {
    snprintf(D.why, sizeof D.why, "cannot open GPU 0: %s", cu_error(r));
    return false;
  }
  if (D.f.cuDeviceGetName(D.name, sizeof D.name, D.dev) != 0) snprintf(D.name, sizeof D.name, "GPU 0");
  D.f.cuDriverGetVersion(&D.driver);
  snprintf(D.arch, sizeof D.arch, "sm_%d%d", attribute(ATTR_CC_MAJOR), attribute(ATTR_CC_MINOR));
  D.max_threads = attribute(ATTR_MAX_THREADS_PER_BLOCK), D.max_grid = attribute(ATTR_MAX_GRID_DIM_X);
  D.shared = attribute(ATTR_MAX_SHARED_MEMORY_PER_BLOCK), D.warp = attribute(ATTR_WARP_SIZE);
  D.l2 = attribute(ATTR_L2_CACHE_SIZE), D.sms = attribute(ATTR_MULTIPROCESSOR_COUNT);
  return true;
}

static void driver_once(void) {
  const char *path = getenv("TG_CUDA_LIBRARY");
  if (!path || !*path) path = CUDA_LIBRARY;
  void *lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  if (!lib) {
    snprintf(D.why, sizeof D.why, "%s not found (no NVIDIA driver): %s", path, dlerror());
    return;
  }
  if (!load_table(lib, path, cu_names, sizeof cu_names / sizeof *cu_names, &D.f, D.why, sizeof D.why) || !find_gpu()) return;
  if (cuda_ptx_mode()) return; /* the driver compiles PTX itself */
  pthread_once(&N.once, nvrtc_once); /* kernels need NVRTC too */
  if (N.why[0]) snprintf(D.why, sizeof D.why, "%s", N.why);
}

/* The driver and a GPU, with the context current on this thread; false with the error set. */
static bool ready(void) {
  pthread_once(&D.once, driver_once);
  if (D.why[0]) return tg_set_error(TG_ERR_DEVICE, "CUDA: %s", D.why), false;
  CUresult r = D.f.cuCtxSetCurrent(D.ctx);
  if (r != 0) return tg_set_error(TG_ERR_DEVICE, "CUDA: cannot make the context current: %s", cu_error(r)), false;
  return true;
}

/* ---------------------------------------------------------------- memory */

static void *cuda_alloc(size_t bytes) {
  if (!ready()) return NULL;
  CUdeviceptr p = 0;
  CUresult r = D.f.cuMemAlloc_v2(&p, bytes ? bytes : 1);
  if (r == 0) return (void *)(uintptr_t)p;
  tg_set_error(r == CUDA_ERROR_OUT_OF_MEMORY ? TG_ERR_NOMEM : TG_ERR_DEVICE, "CUDA: cannot allocate %zu bytes on %s: %s", bytes, D.name,
               cu_error(r));
  return NULL;
}

static void cuda_free(void *mem) {
  if (mem && ready()) D.f.cuMemFree_v2((CUdeviceptr)(uintptr_t)mem);
}

static int cuda_copy_in(void *mem, const void *src, size_t bytes) {
  if (!bytes) return 0;
  if (!ready()) return TG_ERR_DEVICE;
  CUresult r = D.f.cuMemcpyHtoD_v2((CUdeviceptr)(uintptr_t)mem, src, bytes);
  return r == 0 ? 0 : tg_set_error(TG_ERR_DEVICE, "CUDA: copy of %zu bytes to %s failed: %s", bytes, D.name, cu_error(r));
}

static int cuda_copy_out(void *dst, void *mem, size_t bytes) {
  if (!bytes) return 0;
  if (!ready()) return TG_ERR_DEVICE;
  CUresult r = D.f.cuMemcpyDtoH_v2(dst, (CUdeviceptr)(uintptr_t)mem, bytes);
  return r == 0 ? 0 : tg_set_error(TG_ERR_DEVICE, "CUDA: copy of %zu bytes from %s failed: %s", bytes, D.name, cu_error(r));
}

/* ---------------------------------------------------------------- compiling */

/* Remember a kernel's name and block limit for its launches. */
static int record_kernel(void *fn, const char *name) {
  kernel_rec *k = calloc(1, sizeof *k);
  if (!k) return tg_set_error(TG_ERR_NOMEM, "CUDA: out of memory");
  snprintf(k->name, sizeof k->name, "%s", name);
  if (D.f.cuFuncGetAttribute(&k->max_threads, FUNC_ATTR_MAX_THREADS_PER_BLOCK, fn) != 0 || k->max_threads <= 0) k->max_threads = 1;
  pthread_mutex_lock(&D.lock);
  kernel_rec *old = ptrmap_get(&D.kernels, fn);
  int rc = old ? 0 : ptrmap_put(&D.kernels, fn, k);
  pthread_mutex_unlock(&D.lock);
  if (old || rc < 0) free(k);
  return rc < 0 ? tg_set_error(TG_ERR_NOMEM, "CUDA: out of memory") : 0;
}

/* Load a cubin (or PTX text, JIT-compiled by the driver) and find names[0..n) in it; the module
 * stays loaded for the life of the process. */
static int load_module(const char *cubin, const char *const *names, int n, void **fns) {
  void *mod = NULL;
  CUresult r = D.f.cuModuleLoadData(&mod, cubin);
  if (r != 0)
    return tg_set_error(TG_ERR_COMPILE, "CUDA: the driver refuses the %s of kernel %s: %s", cuda_ptx_mode() ? "PTX" : "cubin", names[0],
                        cu_error(r));
  for (int i = 0; i < n; i++) {
    if ((r = D.f.cuModuleGetFunction(&fns[i], mod, names[i])) == 0 && record_kernel(fns[i], names[i]) == 0) continue;
    if (r != 0) tg_set_error(TG_ERR_COMPILE, "CUDA: the cubin has no kernel %s: %s", names[i], cu_error(r));
    D.f.cuModuleUnload(mod);
    return TG_ERR_COMPILE;
  }
  return 0;
}

/* CUDA_PTX=1: the driver JIT-compiles the PTX for its GPU (and caches it in its own cache). */
static int compile_ptx(const char *src, const char *const *names, int n, void **fns) {
  double t0 = tg_now();
  int rc = load_module(src, names, n, fns);
  if (rc < 0) return rc;
  tg_thread_stats.kernels_compiled++;
  tg_thread_stats.compile_seconds += tg_now() - t0;
  return 0;
}

static int cuda_compile(const char *src, const char *const *names, int n, void **fns) {
  if (!ready()) return TG_ERR_DEVICE;
  if (cuda_ptx_mode()) return compile_ptx(src, names, n, fns);
  double t0 = tg_now();
  char *cubin = NULL, path[PATH_MAX];
  size_t len = 0;
  int found = cubin_for(src, D.arch, names[0], &cubin, &len, path, sizeof path), rc = found < 0 ? found : load_module(cubin, names, n, fns);
  if (rc < 0 && found == 1) { /* a cached cubin the driver refuses: compile it again */
    disk_cache_remove(path, tg_last_error());
    free(cubin);
    tg_clear_error();
    found = 0;
    rc = nvrtc_compile(src, D.arch, names[0], &cubin, &len);
    if (rc == 0) rc = load_module(cubin, names, n, fns);
  }
  free(cubin);
  if (rc < 0) return rc;
  tg_thread_stats.kernels_compiled++;
  tg_thread_stats.disk_cache_hits += found == 1;
  tg_thread_stats.compile_seconds += tg_now() - t0;
  return 0;
}

/* ---------------------------------------------------------------- launching */

/* Launch and wait; under D.lock. DEBUG >= 2: the kernel's time on the GPU, from two events
 * around it on the default stream. */
static CUresult run_locked(const kernel_rec *k, void *fn, unsigned grid, unsigned block, void **params) {
  void *ev[2] = {NULL, NULL};
  bool timed = tg_debug() >= 2 && D.f.cuEventCreate(&ev[0], 0) == 0 && D.f.cuEventCreate(&ev[1], 0) == 0;
  if (timed) D.f.cuEventRecord(ev[0], NULL);
  CUresult r = D.f.cuLaunchKernel(fn, grid, 1, 1, block, 1, 1, 0, NULL, params, NULL);
  if (timed && r == 0) D.f.cuEventRecord(ev[1], NULL);
  if (r == 0) r = D.f.cuCtxSynchronize();
  float ms = 0;
  if (timed && r == 0 && D.f.cuEventElapsedTime(&ms, ev[0], ev[1]) == 0)
    fprintf(stderr, "cuda %-32s %9.3f ms on the GPU, %u blocks of %u\n", k ? k->name : "?", ms, grid, block);
  for (int i = 0; i < 2; i++)
    if (ev[i]) D.f.cuEventDestroy_v2(ev[i]);
  return r;
}

/* n work-items in blocks of `want` (a kernel's work-group size), else of min(n, 256, the
 * kernel's limit); kernelParams: &n, then a pointer to each buffer handle (a kernel that
 * declares fewer buffers ignores the rest). A block the kernel cannot take is an error before
 * anything runs. */
static int cuda_launch_local(kernel_fn fn, void **args, int nargs, long long n, long long want) {
  if (n <= 0) return 0; /* nothing to compute */
  if (!ready()) return TG_ERR_DEVICE;
  if (nargs < 0 || nargs > MAX_ARGS) return tg_set_error(TG_ERR_DEVICE, "CUDA: a launch with %d buffers (at most %d)", nargs, MAX_ARGS);
  void *f, *params[MAX_ARGS + 1] = {&n};
  memcpy(&f, &fn, sizeof f);
  for (int i = 0; i < nargs; i++) params[i + 1] = &args[i];
  pthread_mutex_lock(&D.lock);
  kernel_rec *k = ptrmap_get(&D.kernels, f);
  long long block = k && k->max_threads < BLOCK ? k->max_threads : BLOCK;
  block = want > 0 ? want : n < block ? n : block;
  if (want > 0 && ((k && want > k->max_threads) || n % want)) {
    pthread_mutex_unlock(&D.lock);
    return tg_set_error(TG_ERR_DEVICE, "CUDA: kernel %s: blocks of %lld threads for %lld work-items: it allows %d", k ? k->name : "?", want,
                        n, k ? k->max_threads : 0);
  }
  long long grid = (n + block - 1) / block;
  CUresult r = grid <= (D.max_grid > 0 ? D.max_grid : INT_MAX) ? run_locked(k, f, (unsigned)grid, (unsigned)block, params) : -1;
  pthread_mutex_unlock(&D.lock);
  const char *name = k ? k->name : "?";
  if (r == -1) return tg_set_error(TG_ERR_DEVICE, "CUDA: kernel %s: %lld work-items need %lld blocks, more than %s allows", name, n, grid, D.name);
  if (r != 0)
    return tg_set_error(TG_ERR_DEVICE, "CUDA: kernel %s (%lld work-items, %lld blocks of %lld, %d buffers) failed on %s: %s", name, n, grid,
                        block, nargs, D.name, cu_error(r));
  return 0;
}

static int cuda_launch(kernel_fn fn, void **args, int nargs, long long n) { return cuda_launch_local(fn, args, nargs, n, 0); }

/* ---------------------------------------------------------------- the device */

static void cuda_describe(char *buf, size_t n) {
  if (cuda_ptx_mode()) snprintf(buf, n, "cuda %s %s driver %d ptx block %d", D.name, D.arch, D.driver, BLOCK);
  else snprintf(buf, n, "cuda %s %s driver %d %s %s block %d", D.name, D.arch, D.driver, N.version, NVRTC_FLAGS, BLOCK);
}

/* CUDA_PTX=1: the GPU's architecture picks the PTX target. */
static char *render_ptx_gpu(const lin_program *progs, int n, const char *const *names) {
  return render_ptx(progs, n, names, arch_number(D.arch));
}

static int cuda_open(void);

device cuda_device = {
    .name = "CUDA",
    .open = cuda_open,
    .render = render_cuda,
    .compile = cuda_compile,
    .launch = cuda_launch,
    .launch_local = cuda_launch_local,
    .describe = cuda_describe,
    .alloc = cuda_alloc,
    .free = cuda_free,
    .copy_in = cuda_copy_in,
    .copy_out = cuda_copy_out,
};

/* Load the driver and NVRTC, open GPU 0; the capabilities are the GPU's (threads: the host
 * threads that build programs, 1). */
static int cuda_open(void) {
  if (!ready()) return TG_ERR_DEVICE;
  cuda_device.render = cuda_ptx_mode() ? render_ptx_gpu : render_cuda;
  cuda_device.caps = (device_caps){.vector_bytes = 16, .vector_registers = 16, .l2_bytes = D.l2 > 0 ? D.l2 : 1 << 20, .threads = 1,
                                   .local_bytes = D.shared, .max_local_size = D.max_threads > 1 ? D.max_threads : 1024,
                                   .warp = D.warp > 0 ? D.warp : 32,
                                   .tc = atoi(D.arch + 3) >= 80 ? TC_M16N8K16 : 0}; /* mma.sync m16n8k16: sm_80+ */
  return 0;
}
