/* cpu.c — the CPU device: generated C (render/c.c) compiled by the system compiler into a
 * shared object, dlopened, and run on the thread pool. Compiled objects are cached on disk
 * (disk_cache.h: ~/.cache/tg or $TG_CACHE_DIR; CACHELEVEL=0 disables) keyed by a hash of
 * source + compiler + flags; a broken entry is removed and recompiled. */
#include <dlfcn.h>
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "device/device.h"
#include "device/disk_cache.h"
#include "runtime/helpers.h"
#include "runtime/threadpool.h"
#include "uop/rewrite.h"

/* -fno-tree-slp-vectorize: GCC 12 miscompiles lane-by-lane code on vector types under SLP
 * (a comparison stored into a vector lane and converted reads back as -1); kernels carry
 * their own vector code. */
#define CPU_BASE_FLAGS "-O2 -march=native -fwrapv -fno-math-errno -fno-tree-slp-vectorize -fPIC -shared"

/* What this CPU is, found once per process (any thread may ask first): the compiler flags —
 * -march=native plus the AVX-512 subsets this CPU has (a compiler older than the CPU does not
 * know it: GCC 12.2 takes Zen 5 for znver3, AVX-512 off, and then a 16-lane float vector is
 * split into two AVX2 halves, twice the registers, and a register tile of 16 accumulators
 * spills on every step: conv and matmul kernels ran 2-10x slower) — and the vector width. */
static struct {
  pthread_once_t once;
  char flags[256];
  int vector_bytes;
} cpu = {.once = PTHREAD_ONCE_INIT};

static void cpu_detect(void) {
  size_t n = (size_t)snprintf(cpu.flags, sizeof cpu.flags, "%s", CPU_BASE_FLAGS);
  cpu.vector_bytes = 16;
#if defined(__x86_64__) && defined(__GNUC__)
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx512f")) cpu.vector_bytes = 64;
  else if (__builtin_cpu_supports("avx")) cpu.vector_bytes = 32;
  if (__builtin_cpu_supports("avx512f")) n += (size_t)snprintf(cpu.flags + n, sizeof cpu.flags - n, " -mavx512f");
  if (__builtin_cpu_supports("avx512vl")) n += (size_t)snprintf(cpu.flags + n, sizeof cpu.flags - n, " -mavx512vl");
  if (__builtin_cpu_supports("avx512bw")) n += (size_t)snprintf(cpu.flags + n, sizeof cpu.flags - n, " -mavx512bw");
  if (__builtin_cpu_supports("avx512dq")) n += (size_t)snprintf(cpu.flags + n, sizeof cpu.flags - n, " -mavx512dq");
  if (__builtin_cpu_supports("avx512cd")) n += (size_t)snprintf(cpu.flags + n, sizeof cpu.flags - n, " -mavx512cd");
#endif
  (void)n;
  int env = tg_getenv_int("VECTOR_BYTES", 0);
  if (env == 16 || env == 32 || env == 64) cpu.vector_bytes = env;
}

static const char *cpu_flags(void) {
  pthread_once(&cpu.once, cpu_detect);
  return cpu.flags;
}

static const char *compiler(void) {
  const char *cc = getenv("CC");
  return cc && *cc ? cc : "cc";
}

/* Append s to the shell command in b, single-quoted (a quote inside becomes '\''). */
static void sb_quoted(strbuf *b, const char *s) {
  sb_printf(b, "'");
  for (const char *q; (q = strchr(s, '\'')); s = q + 1) sb_printf(b, "%.*s'\\''", (int)(q - s), s);
  sb_printf(b, "%s'", s);
}

/* Run the compiler on src (written to a temp .c beside the entry name); the object lands at out. */
static int run_compiler(const char *src, const char *name, const char *out) {
  char c_path[PATH_MAX];
  int rc = disk_cache_temp(name, ".c", c_path, sizeof c_path);
  if (rc < 0) return rc;
  FILE *f = fopen(c_path, "w");
  bool written = f && fputs(src, f) >= 0;
  if (f && fclose(f) != 0) written = false; /* a full disk shows here */
  if (!written) { unlink(c_path); return tg_set_error(TG_ERR_COMPILE, "compile: cannot write %s: %s", c_path, strerror(errno)); }
  strbuf cmd = {0};
  sb_printf(&cmd, "%s %s -o ", compiler(), cpu_flags());
  sb_quoted(&cmd, out), sb_printf(&cmd, " "), sb_quoted(&cmd, c_path), sb_printf(&cmd, " -lm 2>&1");
  FILE *p = cmd.s ? popen(cmd.s, "r") : NULL;
  sb_free(&cmd);
  if (!p) { unlink(c_path); return tg_set_error(TG_ERR_COMPILE, "compile: cannot run %s", compiler()); }
  char msg[700] = {0};
  size_t got = fread(msg, 1, sizeof msg - 1, p);
  char sink[4096];
  while (fread(sink, 1, sizeof sink, p) > 0) {}
  int status = pclose(p);
  msg[got] = 0;
  unlink(c_path);
  if (status != 0) return tg_set_error(TG_ERR_COMPILE, "compile failed (%s): %s", compiler(), got ? msg : "no output");
  return 0;
}

static void cpu_describe(char *buf, size_t n) {
  snprintf(buf, n, "cpu %s %s threads=%d vector=%d", compiler(), cpu_flags(), threadpool_size(), cpu.vector_bytes);
}

/* dlopen the object at path and find names in it: the handle, or NULL and why. */
static void *load_object(const char *path, const char *const *names, int n, void **fns, char *why, size_t wn) {
  void *lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  if (!lib) { snprintf(why, wn, "%s", dlerror()); return NULL; }
  for (int i = 0; i < n; i++) {
    if ((fns[i] = dlsym(lib, names[i]))) continue;
    snprintf(why, wn, "symbol %s missing", names[i]);
    dlclose(lib);
    return NULL;
  }
  return lib;
}

/* Compile into a temp file, load that, then publish it as the entry: only objects that loaded
 * are stored, and this process never depends on the path other processes may replace. */
static int compile_fresh(const char *src, const char *name, const char *const *names, int n, void **fns) {
  char tmp[PATH_MAX], why[512];
  int rc = disk_cache_temp(name, "", tmp, sizeof tmp);
  if (rc < 0) return rc;
  rc = run_compiler(src, name, tmp);
  if (rc == 0 && !load_object(tmp, names, n, fns, why, sizeof why))
    rc = tg_set_error(TG_ERR_COMPILE, "compile: dlopen %s failed: %s", tmp, why);
  if (rc < 0) unlink(tmp);
  else disk_cache_publish(tmp, name);
  return rc;
}

static int cpu_compile(const char *src, const char *const *names, int n, void **fns) {
  const char *parts[] = {src, compiler(), cpu_flags()};
  char name[128], path[PATH_MAX], why[512];
  disk_cache_key(name, sizeof name, "", parts, 3, ".so");
  double t0 = tg_now();
  int found = disk_cache_find(name, disk_cache_check_elf, path, sizeof path);
  if (found < 0) return found;
  bool hit = found && load_object(path, names, n, fns, why, sizeof why);
  if (found && !hit) disk_cache_remove(path, why); /* it passed the checks but does not load */
  if (!hit) {
    int rc = compile_fresh(src, name, names, n, fns);
    if (rc < 0) return rc;
  }
  tg_thread_stats.kernels_compiled++;
  tg_thread_stats.disk_cache_hits += hit;
  tg_thread_stats.compile_seconds += tg_now() - t0;
  return 0; /* the library stays loaded for the life of the process */
}


/* ---------------------------------------------------------------- the device */

static int cpu_open(void);

device cpu_device = {
    .name = "CPU",
    .open = cpu_open,
    .render = render_c,
    .vectors = &c_vector_forms,
    .compile = cpu_compile,
    .launch = host_launch,
    .describe = cpu_describe,
};

/* The capabilities, from what cpu_detect found (written once, before any use: device.c opens a
 * device under its lock). */
static int cpu_open(void) {
  pthread_once(&cpu.once, cpu_detect);
  int64_t l2 = host_cache_bytes(2), l3 = host_cache_bytes(3);
  cpu_device.caps = (device_caps){.vector_bytes = cpu.vector_bytes, .vector_registers = cpu.vector_bytes == 64 ? 32 : 16,
                     .l2_bytes = l2 > 0 ? l2 : 1 << 20, .llc_bytes = l3 > 0 ? l3 : 0, .threads = threadpool_size(), .max_local_size = 1, .warp = 1};
  return 0;
}
