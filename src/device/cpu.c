/* cpu.c — the CPU device: compile generated C with the system compiler into a shared object,
 * dlopen it, and run kernels. Compiled objects are cached on disk (~/.cache/tg, or
 * $TG_CACHE_DIR; CACHELEVEL=0 disables) keyed by a hash of compiler + flags + source, and
 * programs are cached in memory by kernel AST (no lowering at all on a repeat). */
#include <dlfcn.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "codegen/codegen.h"
#include "runtime/helpers.h"
#include "uop/rewrite.h"

#define CPU_FLAGS "-O2 -march=native -fwrapv -fno-math-errno -fPIC -shared"

static const char *compiler(void) {
  const char *cc = getenv("CC");
  return cc && *cc ? cc : "cc";
}

static int mkdirs(const char *path) {
  char tmp[1024];
  snprintf(tmp, sizeof tmp, "%s", path);
  for (char *p = tmp + 1; *p; p++) {
    if (*p != '/') continue;
    *p = 0;
    if (mkdir(tmp, 0755) < 0 && errno != EEXIST) return -1;
    *p = '/';
  }
  return mkdir(tmp, 0755) < 0 && errno != EEXIST ? -1 : 0;
}

static void cache_dir(char *buf, size_t n) {
  const char *d = getenv("TG_CACHE_DIR"), *xdg = getenv("XDG_CACHE_HOME"), *home = getenv("HOME");
  if (d && *d) snprintf(buf, n, "%s", d);
  else if (xdg && *xdg) snprintf(buf, n, "%s/tg", xdg);
  else snprintf(buf, n, "%s/.cache/tg", home && *home ? home : "/tmp");
}

/* Run the compiler on src; the object lands at so_path. */
static int run_compiler(const char *src, const char *so_path) {
  char c_path[1200], cmd[4096];
  snprintf(c_path, sizeof c_path, "%s.%d.c", so_path, (int)getpid());
  FILE *f = fopen(c_path, "w");
  if (!f) return tg_set_error(TG_ERR_COMPILE, "compile: cannot write %s: %s", c_path, strerror(errno));
  fputs(src, f);
  fclose(f);
  char tmp_so[1200];
  snprintf(tmp_so, sizeof tmp_so, "%s.%d.tmp", so_path, (int)getpid());
  snprintf(cmd, sizeof cmd, "%s %s -o '%s' '%s' -lm 2>&1", compiler(), CPU_FLAGS, tmp_so, c_path);
  FILE *p = popen(cmd, "r");
  if (!p) { unlink(c_path); return tg_set_error(TG_ERR_COMPILE, "compile: cannot run %s", compiler()); }
  char out[700] = {0};
  size_t got = fread(out, 1, sizeof out - 1, p);
  char sink[4096];
  while (fread(sink, 1, sizeof sink, p) > 0) {}
  int status = pclose(p);
  out[got] = 0;
  unlink(c_path);
  if (status != 0) {
    unlink(tmp_so);
    return tg_set_error(TG_ERR_COMPILE, "compile failed (%s): %s", compiler(), got ? out : "no output");
  }
  if (rename(tmp_so, so_path) < 0) return tg_set_error(TG_ERR_COMPILE, "compile: rename failed: %s", strerror(errno));
  return 0;
}

void *cpu_compile(const char *src, const char *name) {
  char dir[1024], so_path[1100];
  bool disk = tg_getenv_int("CACHELEVEL", 1) > 0;
  uint64_t h1 = hash_bytes(src, strlen(src), 1), h2 = hash_bytes(src, strlen(src), 2);
  h1 = hash_mix(h1, hash_bytes(compiler(), strlen(compiler()), 3));
  h2 = hash_mix(h2, hash_bytes(CPU_FLAGS, strlen(CPU_FLAGS), 4));
  if (disk) cache_dir(dir, sizeof dir);
  else snprintf(dir, sizeof dir, "%s", P_tmpdir);
  if (mkdirs(dir) < 0) {
    tg_set_error(TG_ERR_COMPILE, "compile: cannot create cache directory %s", dir);
    return NULL;
  }
  snprintf(so_path, sizeof so_path, "%s/%s%016llx%016llx.so", dir, disk ? "" : "tg-nocache-",
           (unsigned long long)h1, (unsigned long long)h2);
  double t0 = tg_now();
  bool cached = disk && access(so_path, R_OK) == 0;
  if (!cached && run_compiler(src, so_path) < 0) return NULL;
  void *lib = dlopen(so_path, RTLD_NOW | RTLD_LOCAL);
  if (!disk) unlink(so_path);
  if (!lib) {
    tg_set_error(TG_ERR_COMPILE, "compile: dlopen %s failed: %s", so_path, dlerror());
    return NULL;
  }
  void *fn = dlsym(lib, name);
  if (!fn) {
    tg_set_error(TG_ERR_COMPILE, "compile: symbol %s missing", name);
    return NULL;
  }
  tg_global_stats.kernels_compiled++;
  tg_global_stats.disk_cache_hits += cached;
  tg_global_stats.compile_seconds += tg_now() - t0;
  return fn; /* the library stays loaded for the life of the process */
}

/* ---------------------------------------------------------------- programs */

static ptrmap by_ast;    /* serialized-AST hash → cached_program chain */
static ptrmap by_source; /* interned source hash → program, for equal source from other ASTs */

static program *build_program(uop *ast) {
  size_t mark = uop_pool_mark();
  program *p = calloc(1, sizeof *p);
  lin_program lin = {0};
  if (!p) goto fail;
  uop *sink = lower_kernel(ast, &p->info);
  if (!sink || linearize(sink, &lin, &p->info) < 0) goto fail;
  if (tg_spec_checks() && program_spec_check(&lin) < 0) goto fail;
  p->src = render_c(&lin, &p->info);
  if (!p->src) goto fail;
  if (tg_debug() >= 4) fprintf(stderr, "%s\n", p->src);
  uint64_t key = hash_bytes(p->src, strlen(p->src), 7) | 1;
  program *same = ptrmap_get(&by_source, (void *)(uintptr_t)key);
  if (same && !strcmp(same->src, p->src)) p->fn = same->fn;
  else if (!(p->fn = (void (*)(void **))cpu_compile(p->src, p->info.name))) goto fail;
  ptrmap_put(&by_source, (void *)(uintptr_t)key, p);
  free(lin.ops);
  uop_pool_release(mark);
  return p;
fail:
  free(lin.ops);
  if (p) free(p->src);
  free(p);
  uop_pool_release(mark);
  if (!tg_last_error()[0]) tg_set_error(TG_ERR_COMPILE, "codegen failed");
  return NULL;
}

/* Programs are found by the serialized AST (not by node pointer), so the cache never keeps a
 * tensor graph alive: a loop that builds fresh graphs keeps memory flat. */
typedef struct cached_program {
  int64_t *key;
  int nkey;
  program *prog;
  struct cached_program *next; /* same hash */
} cached_program;

program *program_get(uop *ast) {
  int64_t *key;
  int nkey = uop_serialize(ast, &key);
  if (nkey < 0) { tg_set_error(TG_ERR_NOMEM, "program cache: out of memory"); return NULL; }
  uint64_t h = hash_bytes(key, (size_t)nkey * sizeof *key, 11) | 1;
  cached_program *head = ptrmap_get(&by_ast, (void *)(uintptr_t)h);
  for (cached_program *c = head; c; c = c->next)
    if (c->nkey == nkey && !memcmp(c->key, key, (size_t)nkey * sizeof *key)) { free(key); return c->prog; }
  program *p = build_program(ast);
  cached_program *c = p ? malloc(sizeof *c) : NULL;
  if (!c) { free(key); return p; } /* uncached: built again next time */
  *c = (cached_program){key, nkey, p, head};
  ptrmap_put(&by_ast, (void *)(uintptr_t)h, c);
  return p;
}

int program_run(program *p, void **args) {
  double t0 = tg_now();
  p->fn(args);
  double dt = tg_now() - t0;
  tg_global_stats.kernels_run++;
  tg_global_stats.kernel_seconds += dt;
  tg_global_stats.flops += p->info.flops;
  tg_global_stats.bytes_moved += p->info.bytes;
  if (tg_debug() >= 1)
    fprintf(stderr, "kernel %-28s %9.3f ms %8.2f GFLOPS\n", p->info.name, dt * 1e3,
            dt > 0 ? (double)p->info.flops / dt * 1e-9 : 0.0);
  return 0;
}
