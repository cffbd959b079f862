/* program.c — the codegen driver: from a kernel AST to a program a device runs. Choose the
 * optimizations (OPTS, BEAM's cached or searched choice, or the heuristics, from the device's
 * capabilities), lower and linearize each stage, render with the device's renderer, compile
 * with its compiler; cache programs in memory by device + serialized AST (no lowering at all
 * on a repeat) and by source (different ASTs that render alike share one compile). */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "codegen/codegen.h"
#include "device/cuda.h"
#include "device/device.h"
#include "engine/engine.h"
#include "runtime/helpers.h"
#include "runtime/profile.h"

/* The program caches, shared by every thread (cache_lock). A program is built outside the
 * lock: two threads that miss the same kernel at once both build it, and the second to insert
 * uses the first one's program. */
static pthread_mutex_t cache_lock = PTHREAD_MUTEX_INITIALIZER;
static ptrmap by_ast;    /* serialized-AST hash → cached_program chain */
static ptrmap by_source; /* source hash → program, for equal source from other ASTs */

/* The functions of a program already built for dev from the same source, into fns; false if none. */
static bool same_source(const device *dev, const char *src, uint64_t key, void **fns) {
  pthread_mutex_lock(&cache_lock);
  program *same = ptrmap_get(&by_source, (void *)(uintptr_t)key);
  bool hit = same && same->dev == dev && !strcmp(same->src, src);
  if (hit) fns[0] = (void *)same->stage[0].fn, fns[1] = (void *)same->stage[1].fn;
  pthread_mutex_unlock(&cache_lock);
  return hit;
}

static void by_source_put(uint64_t key, program *p) {
  pthread_mutex_lock(&cache_lock);
  ptrmap_put(&by_source, (void *)(uintptr_t)key, p);
  pthread_mutex_unlock(&cache_lock);
}

static int parallel_iterations(const kshape *ks) {
  int a = kshape_parallel_axis(ks);
  return a < 0 ? 1 : (int)ks->ax[a].size;
}

static _Atomic bool lane_by_lane; /* test hook: every vector node goes lane by lane */
void program_set_lane_by_lane(bool on) { lane_by_lane = on; }

/* Lower (vector nodes the device's renderer has no form for go lane by lane), linearize and
 * check one stage. */
static int build_stage(const device *dev, uop *ast, const kshape *ks, int stage, kernel_info *info, lin_program *lin) {
  static const vector_forms scalar_only = {NULL};
  uop *sink = lower_kernel(ast, ks, stage, info);
  if (sink) sink = devectorize(sink, dev->vectors && !lane_by_lane ? dev->vectors : &scalar_only);
  if (!sink) return tg_last_error()[0] ? TG_ERR_COMPILE : tg_set_error(TG_ERR_COMPILE, "lowering %s failed", info->name);
  int rc = linearize(sink, lin, info);
  if (rc == 0 && tg_spec_checks()) rc = program_spec_check(lin);
  double real = 1; /* padded positions are not real work */
  for (int d = 0; d < ks->nout + ks->nred; d++) real *= (double)ks->size[d] / (double)ks->padded[d];
  info->flops = (uint64_t)((double)info->flops * real);
  return rc;
}

/* The one or two stages of a kernel under a shape state, linearized, and their names; the
 * number of stages, or a negative status. */
static int build_stages(const device *dev, uop *ast, const kshape *ks, lin_program *lin, char (*names)[128],
                        kernel_info *total) {
  bool grouped = kshape_two_stages(ks); /* host devices; work-group devices combine in one */
  for (int s = 0; s < 1 + grouped; s++) {
    kernel_info info = {0};
    int rc = build_stage(dev, ast, ks, grouped ? STAGE_PARTIAL + s : STAGE_ONLY, &info, &lin[s]);
    if (rc < 0) return rc;
    uint64_t flops = total->flops + info.flops;
    *total = info, total->flops = flops;
    snprintf(names[s], sizeof names[s], "%s%s", info.name, grouped ? (s ? "_combine" : "_partial") : "");
  }
  return 1 + grouped;
}

/* TG_CUDA_CHECK=1 on a host device: the kernel is also optimized, lowered and rendered as the
 * CUDA device would build it (scalar work-items, an H100's capabilities) and checked (NVRTC;
 * ptxas too with CUDA_PTX=1), so a DEV=CPU suite run checks every kernel it makes without a
 * GPU and without PoCL. */
static int gpu_offline_check(uop *ast) {
  static const device_caps h100 = {.vector_bytes = 16, .vector_registers = 16, .l2_bytes = 50 << 20, .threads = 1,
                                   .local_bytes = 48 << 10, .max_local_size = 1024, .warp = 32};
  static const device gpu_shaped = {.name = "CUDA (offline check)"}; /* no vector forms */
  if (!cuda_offline_check_on()) return 0;
  kshape ks;
  if (kshape_init(&ks, ast) < 0) return TG_ERR_ARG;
  kshape_use_workgroups(&ks, &h100);
  kshape_optimize(&ks, ast, &h100);
  lin_program lin[2] = {{0}};
  char names[2][128];
  const char *name_ptrs[2] = {names[0], names[1]};
  kernel_info info = {0};
  int n = build_stages(&gpu_shaped, ast, &ks, lin, names, &info);
  int rc = n < 0 ? n : cuda_offline_check(lin, n, name_ptrs);
  free(lin[0].ops), free(lin[1].ops);
  return rc;
}

program *program_build(const device *dev, uop *ast, const kshape *ks) {
  size_t mark = uop_pool_mark();
  double t0 = tg_now();
  program *p = calloc(1, sizeof *p);
  lin_program lin[2] = {{0}};
  if (!p) { tg_set_error(TG_ERR_NOMEM, "program: out of memory"); goto fail; }
  p->ks = *ks, p->dev = dev;
  int par = kshape_parallel_axis(ks);
  bool grouped = kshape_two_stages(ks);
  char names[2][128];
  const char *name_ptrs[2] = {names[0], names[1]};
  if ((p->nstages = build_stages(dev, ast, ks, lin, names, &p->info)) < 0) goto fail;
  p->stage[0].parallel = parallel_iterations(ks), p->stage[1].parallel = 1;
  if (grouped) {
    uop *r = NULL, **order;
    int n = uop_toposort(ast, &order);
    for (int i = 0; i < n && !r; i++)
      if (order[i]->op == OP_REDUCE_AXIS) r = order[i];
    free(order);
    p->scratch_bytes = (size_t)ks->ax[par].size * (size_t)shape_numel(ast->arg, ast->narg) * tg_dtype_size(r->dtype);
  }
  for (int s = 0; s < p->nstages && device_is_gpu(dev); s++)
    p->stage[s].parallel = lin_work_items(&lin[s]), p->stage[s].local = lin_local_size(&lin[s]);
  p->src = dev->render(lin, p->nstages, name_ptrs);
  if (!p->src) { if (!tg_last_error()[0]) tg_set_error(TG_ERR_NOMEM, "render: out of memory"); goto fail; }
  /* TG_CUDA_CHECK=1: NVRTC (and ptxas) must also accept the GPU-style program (issue 14) */
  if (device_is_gpu(dev) ? cuda_offline_check(lin, p->nstages, name_ptrs) < 0 : gpu_offline_check(ast) < 0) goto fail;
  if (tg_debug() >= 4) fprintf(stderr, "%s\n", p->src);
  chunk_describe(p, ast);
  uint64_t key = hash_bytes(p->src, strlen(p->src), 7) | 1;
  void *fns[2] = {0};
  bool shared = same_source(dev, p->src, key, fns);
  double t1 = tg_now();
  profile_host("lower", names[0], t0, t1);
  if (!shared && dev->compile(p->src, name_ptrs, p->nstages, fns) < 0) goto fail;
  if (!shared) profile_host("compile", names[0], t1, tg_now());
  for (int s = 0; s < p->nstages; s++) p->stage[s].fn = (kernel_fn)fns[s];
  if (!shared) by_source_put(key, p); /* complete before other threads can see it */
  free(lin[0].ops), free(lin[1].ops);
  uop_pool_release(mark);
  return p;
fail:
  free(lin[0].ops), free(lin[1].ops);
  if (p) free(p->src);
  free(p);
  uop_pool_release(mark);
  if (!tg_last_error()[0]) tg_set_error(TG_ERR_COMPILE, "codegen failed");
  return NULL;
}

static int choose_opts(const device *dev, uop *ast, kshape *ks, bool per_image);

program *program_chained(program *p, uop *ast) {
  program *v = atomic_load(&p->chained);
  if (v) return v;
  kshape ks;
  if (choose_opts(p->dev, ast, &ks, true) < 0) return NULL;
  ks.stream_bytes = 0;
  if (!(v = program_build(p->dev, ast, &ks))) return NULL;
  if (!strcmp(v->src, p->src) || v->chunk_per != p->chunk_per) program_free(v), v = p;
  else if (tg_debug() >= 2) {
    char buf[512];
    kshape_describe(&ks, buf, sizeof buf);
    fprintf(stderr, "opt %-28s %s (chained)\n", v->info.name, buf);
  }
  program *none = NULL;
  if (!atomic_compare_exchange_strong(&p->chained, &none, v)) { /* another thread's came first */
    if (v != p) program_free(v);
    v = none;
  }
  return v;
}

void program_free(program *p) {
  if (!p) return;
  program *v = atomic_load(&p->chained);
  if (v && v != p) program_free(v);
  uint64_t key = hash_bytes(p->src, strlen(p->src), 7) | 1;
  pthread_mutex_lock(&cache_lock);
  if (ptrmap_get(&by_source, (void *)(uintptr_t)key) == p) ptrmap_put(&by_source, (void *)(uintptr_t)key, NULL);
  pthread_mutex_unlock(&cache_lock);
  free(p->src);
  free(p);
}

/* OPTS="UPCAST,1,16;THREAD,0,64" applies exactly these actions (for experiments); a kernel
 * they do not fit gets the heuristics. */
static int parse_opts(const char *text, kshape *ks) {
  char buf[512];
  snprintf(buf, sizeof buf, "%s", text);
  for (char *c = buf; *c; c++) /* DEBUG=2's form "UPCAST(1,8) THREAD(0,64)" too */
    if (*c == '(' || *c == ')') *c = *c == '(' ? ',' : ';';
  for (char *save = NULL, *tok = strtok_r(buf, ";", &save); tok; tok = strtok_r(NULL, ";", &save)) {
    if (strspn(tok, " \t") == strlen(tok)) continue;
    char name[16];
    int axis;
    long long amount;
    if (sscanf(tok, " %15[A-Z] , %d , %lld", name, &axis, &amount) != 3) return tg_set_error(TG_ERR_ARG, "OPTS: bad action '%s'", tok);
    int k = 0;
    while (k < OPT_COUNT && strcmp(opt_name((opt_kind)k), name)) k++;
    int rc = kshape_apply(ks, (opt_action){(opt_kind)k, axis, amount});
    if (rc < 0) return rc;
  }
  return 0;
}

/* The shape state a kernel is built with: OPTS, BEAM's cached or searched choice, or the
 * heuristics (NOOPT=1: none). */
/* The unoptimized state of a kernel for a device: on GPU devices scalar code in work-groups
 * within the device's limits. */
int program_shape_init(const device *dev, uop *ast, kshape *ks) {
  int rc = kshape_init(ks, ast);
  if (device_is_gpu(dev)) kshape_use_workgroups(ks, &dev->caps);
  else {
    ks->stream_bytes = tg_getenv_int("STREAM", 1) ? dev->caps.llc_bytes : 0; /* STREAM=0: none (debug.md) */
    ks->prefetch_bytes = tg_getenv_int("PREFETCH", 1) ? dev->caps.l2_bytes : 0; /* PREFETCH=0: none */
    ks->load_stride = tg_getenv_int("STRIDED", 1) ? dev->caps.load_stride : 1;  /* STRIDED=0: contiguous lanes only */
  }
  return rc;
}

/* OPTS_ONLY=08a7,1cbc: OPTS for the kernels whose names end in one of these hashes only (the
 * _xxxx DEBUG=2 prints), the heuristics for the others: one kernel's actions tried in a model. */
static bool opts_meant_for(const uop *ast) {
  const char *only = getenv("OPTS_ONLY");
  char tag[16];
  snprintf(tag, sizeof tag, "%04llx", (unsigned long long)(ast->hash & 0xffff));
  return !only || !*only || strstr(only, tag);
}

static int choose_opts(const device *dev, uop *ast, kshape *ks, bool per_image) {
  if (program_shape_init(dev, ast, ks) < 0) return TG_ERR_ARG;
  ks->per_image = per_image;
  const char *opts = opts_meant_for(ast) ? getenv("OPTS") : NULL;
  if (opts && *opts && parse_opts(opts, ks) == 0) return 0;
  int beam = tg_getenv_int("BEAM", 0);
  if ((!opts || !*opts) && beam > 0 && !tg_getenv_int("NOOPT", 0) && beam_search(dev, ast, beam, ks) == 0) return 0;
  if ((opts && *opts) || beam > 0) {
    if (tg_debug() >= 1) fprintf(stderr, "opt: falling back to the heuristics: %s\n", tg_last_error());
    tg_clear_error();
  }
  if (program_shape_init(dev, ast, ks) < 0) return TG_ERR_ARG;
  ks->per_image = per_image;
  kshape_optimize(ks, ast, &dev->caps);
  return 0;
}

static program *build_program(const device *dev, uop *ast) {
  kshape ks;
  if (choose_opts(dev, ast, &ks, false) < 0) return NULL;
  program *p = program_build(dev, ast, &ks);
  if (p && tg_debug() >= 2) {
    char buf[512];
    kshape_describe(&ks, buf, sizeof buf);
    fprintf(stderr, "opt %-28s %s\n", p->info.name, buf);
  }
  return p;
}

/* Programs are found by the serialized AST (not by node pointer), so the cache never keeps a
 * tensor graph alive: a loop that builds fresh graphs keeps memory flat. */
typedef struct cached_program {
  int64_t *key;
  int nkey;
  program *prog;
  struct cached_program *next; /* same hash */
} cached_program;

/* The test hook: kernels built with the hook's state, uncached, freed when it is reset (tests
 * only: not for use while other threads realize). */
static struct {
  opt_hook_fn fn;
  void *ctx;
  VEC(program *) built;
} hook;

void program_set_opt_hook(opt_hook_fn fn, void *ctx) {
  for (size_t i = 0; i < hook.built.n; i++) program_free(hook.built.v[i]);
  VEC_FREE(hook.built);
  hook.fn = fn, hook.ctx = ctx;
}

static program *build_hooked(const device *dev, uop *ast) {
  kshape ks;
  if (program_shape_init(dev, ast, &ks) < 0 || hook.fn(ast, &ks, hook.ctx) < 0) return NULL;
  program *p = program_build(dev, ast, &ks);
  if (p && VEC_PUSH(hook.built, p) < 0) { program_free(p); return NULL; }
  return p;
}

/* The cached program of a serialized AST for dev, or NULL (under cache_lock). */
static program *cached(const device *dev, uint64_t h, const int64_t *key, int nkey) {
  for (cached_program *c = ptrmap_get(&by_ast, (void *)(uintptr_t)h); c; c = c->next)
    if (c->prog->dev == dev && c->nkey == nkey && !memcmp(c->key, key, (size_t)nkey * sizeof *key)) return c->prog;
  return NULL;
}

program *program_find(const device *dev, uop *ast) {
  if (hook.fn) return NULL;
  int64_t *key;
  int nkey = uop_serialize(ast, &key);
  if (nkey < 0) return NULL;
  uint64_t h = hash_mix(hash_bytes(key, (size_t)nkey * sizeof *key, 11), (uint64_t)(uintptr_t)dev) | 1;
  pthread_mutex_lock(&cache_lock);
  program *p = cached(dev, h, key, nkey);
  pthread_mutex_unlock(&cache_lock);
  free(key);
  return p;
}

bool program_build_in_parallel(void) {
  return !hook.fn && tg_getenv_int("BEAM", 0) <= 0; /* BEAM times candidates: alone on the machine */
}

program *program_get(const device *dev, uop *ast) {
  if (hook.fn) return build_hooked(dev, ast);
  int64_t *key;
  int nkey = uop_serialize(ast, &key);
  if (nkey < 0) { tg_set_error(TG_ERR_NOMEM, "program cache: out of memory"); return NULL; }
  uint64_t h = hash_mix(hash_bytes(key, (size_t)nkey * sizeof *key, 11), (uint64_t)(uintptr_t)dev) | 1;
  pthread_mutex_lock(&cache_lock);
  program *p = cached(dev, h, key, nkey);
  pthread_mutex_unlock(&cache_lock);
  if (p || !(p = build_program(dev, ast))) { free(key); return p; }
  pthread_mutex_lock(&cache_lock);
  program *first = cached(dev, h, key, nkey); /* another thread built it meanwhile */
  cached_program *c = first ? NULL : malloc(sizeof *c);
  if (c) {
    *c = (cached_program){key, nkey, p, ptrmap_get(&by_ast, (void *)(uintptr_t)h)};
    if (ptrmap_put(&by_ast, (void *)(uintptr_t)h, c) < 0) free(c), c = NULL;
  }
  pthread_mutex_unlock(&cache_lock);
  if (c) return p;
  free(key);
  program_free(p);
  if (!first) tg_set_error(TG_ERR_NOMEM, "program cache: out of memory");
  return first;
}

int program_exec(program *p, void **args) {
  void *all[66];
  int n = p->info.nbufs;
  if (n > 64) return tg_set_error(TG_ERR_DEVICE, "kernel %s has %d buffers (max 64)", p->info.name, n);
  memcpy(all, args, sizeof(void *) * (size_t)n);
  void *scratch = NULL;
  if (p->scratch_bytes) {
    scratch = device_mem_alloc(p->dev, (p->scratch_bytes + 63) / 64 * 64 + BUFFER_SLACK);
    if (!scratch) return tg_set_error(TG_ERR_NOMEM, "kernel %s: out of memory for %zu bytes of partials", p->info.name, p->scratch_bytes);
    all[n] = scratch;
  }
  int rc = 0;
  for (int s = 0; s < p->nstages && rc == 0; s++) {
    const program_stage *st = &p->stage[s];
    if (st->local > 0 && !p->dev->launch_local) rc = tg_set_error(TG_ERR_DEVICE, "%s: kernel %s needs work-groups", p->dev->name, p->info.name);
    else if (st->local > 0) rc = p->dev->launch_local(st->fn, all, n + (scratch != NULL), st->parallel, st->local);
    else rc = p->dev->launch(st->fn, all, n + (scratch != NULL), st->parallel);
  }
  if (scratch) device_mem_free(p->dev, scratch);
  return rc;
}

/* Count a run of p (parts: the group calls it ran in, engine/chunks.c; 0: one launch). */
static void account_run(const program *p, double t0, double dt, uint64_t parts) {
  tg_thread_stats.kernels_run++;
  tg_thread_stats.kernel_parts += parts;
  tg_thread_stats.kernel_seconds += dt;
  tg_thread_stats.flops += p->info.flops;
  tg_thread_stats.bytes_moved += p->info.bytes;
  profile_device("kernel", p->dev->name, p->info.name, t0, t0 + dt, p->info.flops, p->info.bytes, p->stage[0].parallel);
  if (tg_debug() >= 1)
    fprintf(stderr, "kernel %-28s %9.3f ms %8.2f GFLOPS %8.2f GB/s%s\n", p->info.name, dt * 1e3,
            dt > 0 ? (double)p->info.flops / dt * 1e-9 : 0.0, dt > 0 ? (double)p->info.bytes / dt * 1e-9 : 0.0,
            parts ? " (chained)" : "");
}

int program_run(program *p, void **args) {
  double t0 = tg_now();
  int rc = program_exec(p, args);
  if (rc == 0) account_run(p, t0, tg_now() - t0, 0);
  return rc;
}

void program_count_run(program *p, double t0, double seconds, uint64_t parts) { account_run(p, t0, seconds, parts); }
