/* search.c — BEAM=n: pick a kernel's optimizations by timing real runs.
 *
 * Start from the unoptimized state and the heuristics' choice; each round extends every state
 * in the beam by every (filtered) valid action, compiles and times the candidates on scratch
 * buffers of the kernel's shapes (in the device's own memory on GPU devices: filled from host
 * copies, the output read back to compare), checks their output against the heuristics' program, and
 * keeps the `width` fastest. It stops when a round brings no gain. The winner's actions are
 * cached on disk (disk_cache.h: <cache>/beam-<hash>.txt, keyed by the serialized AST and the
 * device: compiler, flags, threads), so a second run builds it directly; an entry that does not
 * parse (garbage, truncated) is removed and the search runs again.
 *
 * Knobs: BEAM=n (beam width), BEAM_CANDIDATES (per round, default 48), BEAM_TIMEOUT (seconds
 * per kernel, default 120), DEBUG>=1 progress and the counts of failed and wrong candidates. */
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "codegen/codegen.h"
#include "device/disk_cache.h"
#include "device/device.h"
#include "tensor/tensor.h"
#include "uop/dtype.h"

typedef struct bench {
  void *args[66]; /* host scratch buffers */
  size_t numel[66];
  tg_dtype dtype[66];
  int nbufs;
  void *ref; /* output of the reference program */
  const device *dev; /* GPU devices (bench_upload): args[] copied into mem[], where kernels run */
  void *mem[66];
} bench;

typedef struct candidate {
  kshape ks;
  double ms;
} candidate;

_Atomic uint64_t tg_beam_searches, tg_beam_cache_hits;

/* ---------------------------------------------------------------- buffers */

static void bench_free(bench *b) {
  for (int i = 0; i < 66; i++) {
    free(b->args[i]);
    if (b->dev && b->mem[i]) b->dev->free(b->mem[i]);
  }
  free(b->ref);
}

static size_t bench_bytes(const bench *b, int s) { return (b->numel[s] * tg_dtype_size(b->dtype[s]) + 63) / 64 * 64; }

/* GPU devices: every scratch buffer copied into device memory (with the slack every buffer
 * gets); kernels then run there (bench_args). Host devices: nothing to do. */
static int bench_upload(bench *b, const device *dev) {
  if (!device_is_gpu(dev)) return 0;
  b->dev = dev;
  for (int s = 0; s < b->nbufs; s++) {
    size_t bytes = bench_bytes(b, s) + BUFFER_SLACK;
    if (!(b->mem[s] = dev->alloc(bytes)) || dev->copy_in(b->mem[s], b->args[s], bytes) < 0) return TG_ERR_DEVICE;
  }
  return 0;
}

static void **bench_args(bench *b) { return b->dev ? b->mem : b->args; }

/* The output into args[0] (from device memory on GPU devices). */
static int bench_output(bench *b) {
  return b->dev ? b->dev->copy_out(b->args[0], b->mem[0], b->numel[0] * tg_dtype_size(b->dtype[0])) : 0;
}

/* Zero the output before a candidate runs (where it runs). */
static int bench_clear_output(bench *b) {
  size_t bytes = b->numel[0] * tg_dtype_size(b->dtype[0]);
  memset(b->args[0], 0, bytes);
  return b->dev ? b->dev->copy_in(b->mem[0], b->args[0], bytes) : 0;
}

/* Scratch buffers for every PARAM slot (small pseudo-random values) and the output. */
static int bench_alloc(uop *ast, bench *b) {
  memset(b, 0, sizeof *b);
  uop **order;
  int n = uop_toposort(ast, &order);
  if (n < 0) return TG_ERR_NOMEM;
  b->numel[0] = (size_t)shape_numel(ast->arg, ast->narg), b->dtype[0] = ast->dtype, b->nbufs = 1;
  for (int i = 0; i < n; i++) {
    uop *u = order[i];
    if (u->op != OP_PARAM || u->arg[0] >= 64) continue;
    int s = (int)u->arg[0];
    b->numel[s] = (size_t)shape_numel(u->arg + 1, u->narg - 1), b->dtype[s] = u->dtype;
    if (s + 1 > b->nbufs) b->nbufs = s + 1;
  }
  free(order);
  uint64_t state = 0x9e3779b97f4a7c15ull;
  for (int s = 0; s < b->nbufs; s++) {
    size_t bytes = bench_bytes(b, s);
    if (!(b->args[s] = aligned_alloc(64, bytes + BUFFER_SLACK))) return TG_ERR_NOMEM;
    memset(b->args[s], 0, bytes + BUFFER_SLACK);
    for (size_t i = 0; s > 0 && i < b->numel[s]; i++) {
      state = state * 6364136223846793005ull + 1442695040888963407ull;
      double v = (double)(state >> 40) / (double)(1ull << 24); /* [0, 1) */
      dtype_write(b->args[s], b->dtype[s], i, dtype_is_float(b->dtype[s]) ? 2 * v - 1 : floor(v * 8));
    }
  }
  return 0;
}

static bool output_matches(const bench *b) {
  for (size_t i = 0; i < b->numel[0]; i++) {
    double x = dtype_read(b->args[0], b->dtype[0], i), y = dtype_read(b->ref, b->dtype[0], i);
    if (isnan(x) && isnan(y)) continue;
    if (!(fabs(x - y) <= 1e-3 + 1e-3 * fabs(y))) return false;
  }
  return true;
}

/* Best of a few runs in ms; gives up early when a run is slower than limit ms. */
static double time_program(program *p, bench *b, double limit) {
  double best = INFINITY;
  for (int r = 0; r < 4; r++) {
    double t0 = tg_now();
    if (program_exec(p, bench_args(b)) < 0) return INFINITY;
    double ms = (tg_now() - t0) * 1e3;
    if (ms < best) best = ms;
    if (ms > limit) break;
  }
  return best;
}

/* ---------------------------------------------------------------- disk cache */

/* The entry name: beam-<hash of the serialized AST and the device>.txt. */
static void cache_name(const device *d, uop *ast, char *name, size_t n) {
  int64_t *key;
  int nkey = uop_serialize(ast, &key);
  uint64_t h = nkey < 0 ? 0 : hash_bytes(key, (size_t)nkey * sizeof *key, 21);
  if (nkey >= 0) free(key);
  char dev[512];
  d->describe(dev, sizeof dev);
  h = hash_mix(h, hash_bytes(dev, strlen(dev), 22));
  snprintf(name, n, "beam-%016llx.txt", (unsigned long long)h);
}

/* Read an entry: the action count, the actions, then "end" (a truncated file lacks it, even
 * when it was cut inside the last number). False when it does not parse or apply. */
static bool parse_entry(const char *path, const device *dev, uop *ast, kshape *ks) {
  FILE *f = fopen(path, "r");
  if (!f) return false;
  char end[4] = "";
  int n, ok = fscanf(f, "%d", &n) == 1 && n >= 0 && n <= KS_MAX_ACTIONS;
  if (ok) ok = program_shape_init(dev, ast, ks) == 0;
  for (int i = 0; ok && i < n; i++) {
    int k, axis;
    long long amount;
    ok = fscanf(f, "%d %d %lld", &k, &axis, &amount) == 3 && k >= 0 && k < OPT_COUNT &&
         kshape_apply(ks, (opt_action){(opt_kind)k, axis, amount}) == 0;
  }
  ok = ok && fscanf(f, " %3s", end) == 1 && !strcmp(end, "end");
  fclose(f);
  if (!ok) tg_clear_error();
  return ok;
}

/* The cached choice for ast; an entry that does not parse or apply is removed. */
static bool cache_load(const char *name, const device *dev, uop *ast, kshape *ks) {
  char path[PATH_MAX];
  int found = disk_cache_find(name, disk_cache_check_nonempty, path, sizeof path);
  if (found < 0) tg_clear_error();
  if (found <= 0) return false;
  if (parse_entry(path, dev, ast, ks)) return true;
  disk_cache_remove(path, "not a BEAM entry for this kernel");
  return false;
}

static void cache_store(const char *name, const kshape *ks) {
  strbuf b = {0};
  sb_printf(&b, "%d\n", ks->napplied);
  for (int i = 0; i < ks->napplied; i++)
    sb_printf(&b, "%d %d %lld\n", (int)ks->applied[i].kind, ks->applied[i].axis, (long long)ks->applied[i].amount);
  sb_printf(&b, "end\n");
  if (b.s) disk_cache_write(name, b.s, b.n);
  sb_free(&b);
}

/* ---------------------------------------------------------------- the search */

/* The actions worth timing: common split sizes, whole-axis threads, padding to vectors; on a
 * work-group device work-groups of 8 to 256 (LOCAL, GROUP, GROUPTOP). */
static bool worth_trying(const kshape *ks, opt_action a, int threads) {
  int64_t size = ks->ax[a.axis].size;
  bool wg_size = a.amount >= 8 && a.amount <= 256 && (a.amount & (a.amount - 1)) == 0;
  if (ks->local_max > 1 && (a.kind == OPT_LOCAL || a.kind == OPT_GROUP || a.kind == OPT_GROUPTOP)) return wg_size || a.amount == size;
  if (ks->local_max > 1 && a.kind == OPT_THREAD) return false; /* no threads on a GPU */
  switch (a.kind) {
    case OPT_UPCAST: case OPT_UNROLL: return a.amount == 2 || a.amount == 3 || a.amount == 4 || a.amount == 5 || a.amount == 8 || a.amount == 16;
    case OPT_THREAD: return a.amount == size;
    case OPT_GROUPTOP: return a.amount == threads || a.amount == 2 * threads;
    case OPT_GROUP: return false;
    case OPT_PADTO: return a.amount == 8 || a.amount == 16;
    case OPT_LOCAL: return false;
    default: return true;
  }
}

static bool same_state(const kshape *a, const kshape *b) {
  return a->nax == b->nax && !memcmp(a->ax, b->ax, sizeof(kaxis) * (size_t)a->nax) &&
         !memcmp(a->padded, b->padded, sizeof(int64_t) * (size_t)(a->nout + a->nred));
}

typedef struct search {
  const device *dev;
  uop *ast;
  bench b;
  candidate *pool;
  int npool, cap;
  int tried, failed, wrong;
  double best_ms, deadline;
} search;

static bool seen(const search *s, const kshape *ks) {
  for (int i = 0; i < s->npool; i++)
    if (same_state(&s->pool[i].ks, ks)) return true;
  return false;
}

/* Compile, check and time one state; adds it to the pool. */
static void try_state(search *s, const kshape *ks) {
  if (seen(s, ks) || tg_now() > s->deadline) return;
  if (s->npool == s->cap) {
    int cap = s->cap ? 2 * s->cap : 64;
    candidate *p = realloc(s->pool, sizeof *p * (size_t)cap);
    if (!p) return;
    s->pool = p, s->cap = cap;
  }
  candidate *c = &s->pool[s->npool++];
  c->ks = *ks, c->ms = INFINITY;
  s->tried++;
  program *p = program_build(s->dev, s->ast, ks);
  if (!p) { s->failed++; tg_clear_error(); return; }
  double ms = bench_clear_output(&s->b) < 0 ? INFINITY : time_program(p, &s->b, 4 * s->best_ms + 1);
  if (!isfinite(ms) || bench_output(&s->b) < 0) s->failed++, c->ms = INFINITY, tg_clear_error();
  else if (!output_matches(&s->b)) s->wrong++;
  else c->ms = ms;
  if (c->ms < s->best_ms) s->best_ms = c->ms;
  program_free(p);
}

static int by_time(const void *a, const void *b) {
  double x = ((const candidate *)a)->ms, y = ((const candidate *)b)->ms;
  return (x > y) - (x < y);
}

/* One round: extend each beam state by every action worth trying (at most `limit`). */
static void round_of(search *s, const candidate *beam, int nbeam, int limit) {
  opt_action acts[1024];
  int budget = limit;
  for (int i = 0; i < nbeam && budget > 0; i++) {
    int n = kshape_candidates(&beam[i].ks, acts, 1024);
    for (int j = 0; j < n && budget > 0; j++) {
      if (!worth_trying(&beam[i].ks, acts[j], s->dev->caps.threads)) continue;
      kshape next = beam[i].ks;
      if (kshape_apply(&next, acts[j]) < 0) { tg_clear_error(); continue; }
      if (seen(s, &next)) continue;
      try_state(s, &next);
      budget--;
    }
  }
}

static int run_search(search *s, int width, kshape *best) {
  kshape start;
  if (program_shape_init(s->dev, s->ast, &start) < 0) return TG_ERR_ARG;
  kshape heur = start;
  kshape_optimize(&heur, s->ast, &s->dev->caps);
  program *ref = program_build(s->dev, s->ast, &heur);
  if (!ref) return TG_ERR_COMPILE;
  s->best_ms = time_program(ref, &s->b, INFINITY);
  if (!isfinite(s->best_ms) || bench_output(&s->b) < 0) { program_free(ref); return TG_ERR_DEVICE; }
  size_t bytes = s->b.numel[0] * tg_dtype_size(s->b.dtype[0]);
  s->b.ref = malloc(bytes ? bytes : 1);
  if (!s->b.ref) { program_free(ref); return TG_ERR_NOMEM; }
  memcpy(s->b.ref, s->b.args[0], bytes);
  program_free(ref);
  try_state(s, &heur);
  try_state(s, &start);
  int limit = tg_getenv_int("BEAM_CANDIDATES", 48);
  double last = INFINITY;
  for (int r = 0; r < KS_MAX_ACTIONS && tg_now() < s->deadline; r++) {
    qsort(s->pool, (size_t)s->npool, sizeof *s->pool, by_time);
    int nbeam = s->npool < width ? s->npool : width;
    candidate *beam = malloc(sizeof *beam * (size_t)(nbeam ? nbeam : 1));
    if (!beam) break;
    memcpy(beam, s->pool, sizeof *beam * (size_t)nbeam);
    if (tg_debug() >= 1) {
      char text[512];
      kshape_describe(&beam[0].ks, text, sizeof text);
      fprintf(stderr, "BEAM round %d: %d tried (%d failed, %d wrong), best %.3f ms: %s\n", r, s->tried, s->failed,
              s->wrong, beam[0].ms, text);
    }
    bool gain = beam[0].ms < 0.99 * last;
    last = beam[0].ms;
    if (gain) round_of(s, beam, nbeam, limit);
    free(beam);
    if (!gain) break;
  }
  qsort(s->pool, (size_t)s->npool, sizeof *s->pool, by_time);
  if (!s->npool || !isfinite(s->pool[0].ms)) return TG_ERR_COMPILE;
  *best = s->pool[0].ks;
  return 0;
}

int beam_search(const device *dev, uop *ast, int width, kshape *best) {
  char name[64];
  cache_name(dev, ast, name, sizeof name);
  if (cache_load(name, dev, ast, best)) { tg_beam_cache_hits++; return 0; }
  search s = {.dev = dev, .ast = ast, .deadline = tg_now() + tg_getenv_int("BEAM_TIMEOUT", 120)};
  int rc = bench_alloc(ast, &s.b);
  if (rc == 0) rc = bench_upload(&s.b, dev);
  if (rc == 0) rc = run_search(&s, width < 1 ? 1 : width, best);
  if (rc == 0) cache_store(name, best);
  if (tg_debug() >= 1)
    fprintf(stderr, "BEAM done: %d candidates, %d failed to compile, %d gave wrong results\n", s.tried, s.failed, s.wrong);
  tg_beam_searches++;
  free(s.pool);
  bench_free(&s.b);
  return rc;
}

/* ---------------------------------------------------------------- one kernel */

double beam_time_kernel(const device *dev, uop *ast) {
  if (device_is_gpu(dev)) return INFINITY; /* scratch buffers are host memory */
  program *p = program_get(dev, ast);
  bench b;
  double ms = INFINITY;
  if (p && bench_alloc(ast, &b) == 0) ms = time_program(p, &b, INFINITY);
  if (p) bench_free(&b);
  if (!p) tg_clear_error();
  return ms;
}
