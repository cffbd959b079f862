/* layout_search.c — BEAM over layouts: which of a layout rule's choices (layout.c: panel
 * widths, chunks of images, converted operands) runs fastest, found by timing real kernels.
 *
 * A layout choice changes the kernels a reduction becomes (panels add a packing kernel, chunks
 * a second sum), so it cannot be timed as one kernel's optimization. The search builds a probe:
 * the reduction with every input it reads from memory replaced by a scratch buffer of the same
 * shape; for each choice, the probe rewritten that way is scheduled (without layout rewrites:
 * the choice is the layout) and its kernels are built as the engine builds them (under BEAM,
 * each kernel's own search runs too) and timed on scratch memory; the total decides. The answer
 * is kept in memory and on disk (<cache>/layout-<hash>.txt, keyed by the probe's graph, the rule,
 * its choices and the device), so later schedules and processes do not search again. */
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "schedule/layout.h"
#include "schedule/schedule.h"

#include "codegen/codegen.h"
#include "device/disk_cache.h"
#include "tensor/tensor.h"

enum { PROBE_DEPTH = 64 }; /* nodes deeper than this below the reduction become inputs */

_Atomic uint64_t tg_layout_searches, tg_layout_cache_hits;

static _Thread_local bool probing;
static struct {
  pthread_mutex_t lock;
  ptrmap known; /* key → choice + 1 */
  layout_timer_fn timer;
  void *ctx;
} state = {PTHREAD_MUTEX_INITIALIZER, {0}, NULL, NULL};

bool layout_probing(void) { return probing; }

bool layout_searching(const device *dev) {
  if (probing || device_is_gpu(dev) || tg_getenv_int("BEAM", 0) <= 0 || tg_getenv_int("NOOPT", 0)) return false;
  const char *opts = getenv("OPTS"); /* fixed kernel actions: nothing is searched */
  return !opts || !*opts;
}

void layout_set_timer(layout_timer_fn fn, void *ctx) {
  pthread_mutex_lock(&state.lock);
  state.timer = fn, state.ctx = ctx;
  ptrmap_free(&state.known);
  pthread_mutex_unlock(&state.lock);
}

/* ---------------------------------------------------------------- the probe */

typedef struct probe {
  uop *root;
  bool buffers;   /* inputs become lazy buffers (to schedule) or PARAM slots (the key) */
  uint8_t device; /* of the buffers */
  int inputs;
  ptrmap done;    /* node → its probe node */
} probe;

/* What a kernel computes from its inputs: the reduction, views, elementwise math, constants. */
static bool computed(const probe *p, uop *u) {
  return u == p->root || uop_is_movement(u) || uop_is_alu(u) || u->op == OP_CONST || u->op == OP_IOTA;
}

static uop *input(probe *p, uop *u) {
  int64_t arg[TG_MAX_DIMS + 1] = {p->inputs++};
  if (!p->buffers) {
    memcpy(arg + 1, uop_shape(u), sizeof(int64_t) * (size_t)uop_ndim(u));
    return uop_new(OP_PARAM, u->dtype, NULL, 0, arg, uop_ndim(u) + 1);
  }
  uop *b = buffer_new_lazy(u->dtype, uop_shape(u), uop_ndim(u));
  if (b) uop_set_device(b, p->device);
  return b;
}

static uop *probe_node(probe *p, uop *u, int depth) {
  uop *now = ptrmap_get(&p->done, u), *src[3];
  if (now) return now;
  if (!computed(p, u) || depth > PROBE_DEPTH || u->nsrc > 3) now = input(p, u);
  else if (!u->nsrc) now = u;
  else {
    for (int i = 0; i < u->nsrc; i++)
      if (!(src[i] = probe_node(p, u->src[i], depth + 1))) return NULL;
    now = uop_replace_src(u, src, u->nsrc);
  }
  if (now && ptrmap_put(&p->done, u, now) < 0) now = NULL;
  return now;
}

static uop *probe_of(uop *reduce, const device *dev, bool buffers) {
  probe p = {.root = reduce, .buffers = buffers, .device = (uint8_t)device_number(dev)};
  uop *g = probe_node(&p, reduce, 0);
  ptrmap_free(&p.done);
  return g;
}

/* ---------------------------------------------------------------- the key */

/* The probe's graph (inputs as slots), the rule, its choices and the device; 0 on failure. */
static uint64_t search_key(const layout_rule *rule, const device *dev, uop *reduce, const int64_t *choices, int n) {
  uop *g = probe_of(reduce, dev, false);
  int64_t *words;
  int nwords = g ? uop_serialize(g, &words) : -1;
  if (nwords < 0) return 0;
  uint64_t h = hash_bytes(words, (size_t)nwords * sizeof *words, 31);
  free(words);
  char describe[512];
  dev->describe(describe, sizeof describe);
  h = hash_mix(h, hash_bytes(describe, strlen(describe), 32));
  h = hash_mix(h, hash_bytes(rule->name, strlen(rule->name), 33));
  return hash_mix(h, hash_bytes(choices, sizeof *choices * (size_t)n, 34)) | 1;
}

static bool is_choice(int64_t c, const int64_t *choices, int n) {
  for (int i = 0; i < n; i++)
    if (choices[i] == c) return true;
  return false;
}

static bool remembered(uint64_t key, int64_t *choice) {
  pthread_mutex_lock(&state.lock);
  uintptr_t v = (uintptr_t)ptrmap_get(&state.known, (void *)(uintptr_t)key);
  pthread_mutex_unlock(&state.lock);
  *choice = (int64_t)v - 1;
  return v != 0;
}

static void remember(uint64_t key, int64_t choice) {
  pthread_mutex_lock(&state.lock);
  ptrmap_put(&state.known, (void *)(uintptr_t)key, (void *)(uintptr_t)(choice + 1)); /* lost when out of memory */
  pthread_mutex_unlock(&state.lock);
}

/* An entry is the choice, then "end" (a truncated file lacks it); one that does not parse or
 * is not among today's choices is removed. */
static bool disk_load(const char *name, const int64_t *choices, int n, int64_t *choice) {
  char path[4096], end[4] = "";
  int found = disk_cache_find(name, disk_cache_check_nonempty, path, sizeof path);
  if (found < 0) tg_clear_error();
  if (found <= 0) return false;
  FILE *f = fopen(path, "r");
  long long c = -1;
  bool ok = f && fscanf(f, "%lld %3s", &c, end) == 2 && !strcmp(end, "end") && is_choice(c, choices, n);
  if (f) fclose(f);
  if (!ok) disk_cache_remove(path, "not a layout entry for this reduction");
  *choice = c;
  return ok;
}

/* ---------------------------------------------------------------- timing */

static double time_ast(const device *dev, uop *ast) {
  return state.timer ? state.timer(dev, ast, state.ctx) : beam_time_kernel(dev, ast);
}

/* Milliseconds the probe's kernels take with choice applied (INFINITY: it does not build). */
static double time_choice(const layout_rule *rule, const device *dev, uop *probe_root, int64_t choice) {
  uop *g = choice ? rule->apply(&dev->caps, probe_root, choice) : probe_root, *base = g;
  if (!g) return INFINITY;
  while (uop_is_movement(base)) base = base->src[0];
  if (base->op == OP_CONTIGUOUS) g = base; /* views of what is stored: its consumer reads them */
  schedule s;
  probing = true;
  int rc = schedule_build(&g, 1, &s);
  probing = false;
  double ms = rc < 0 ? INFINITY : 0;
  for (size_t i = 0; i < s.items.n && rc == 0; i++)
    if (s.items.v[i].ast && s.items.v[i].numel > 0) ms += time_ast(s.items.v[i].dev, s.items.v[i].ast);
  schedule_free(&s);
  if (rc < 0) tg_clear_error();
  return ms;
}

static int64_t fastest(const layout_rule *rule, const device *dev, uop *reduce, const int64_t *choices, int n) {
  uop *root = probe_of(reduce, dev, true);
  int best = 0;
  double ms[LAYOUT_MAX_CHOICES];
  for (int i = 0; i < n; i++) {
    ms[i] = root ? time_choice(rule, dev, root, choices[i]) : INFINITY;
    if (ms[i] < ms[best]) best = i;
  }
  if (tg_debug() >= 1) {
    fprintf(stderr, "layout %s:", rule->name);
    for (int i = 0; i < n; i++) fprintf(stderr, " %lld %.3f ms%s", (long long)choices[i], ms[i], i == best ? " (picked)" : "");
    fprintf(stderr, "\n");
  }
  return isfinite(ms[best]) ? choices[best] : -1;
}

int64_t layout_search(const layout_rule *rule, const device *dev, uop *reduce, const int64_t *choices, int n) {
  uint64_t key = search_key(rule, dev, reduce, choices, n);
  int64_t choice;
  if (!key) return tg_clear_error(), choices[0];
  if (remembered(key, &choice) && is_choice(choice, choices, n)) return choice;
  char name[64];
  snprintf(name, sizeof name, "layout-%016llx.txt", (unsigned long long)key);
  if (disk_load(name, choices, n, &choice)) {
    tg_layout_cache_hits++;
    remember(key, choice);
    return choice;
  }
  tg_layout_searches++;
  if ((choice = fastest(rule, dev, reduce, choices, n)) < 0) return choices[0];
  char entry[64];
  int len = snprintf(entry, sizeof entry, "%lld\nend\n", (long long)choice);
  disk_cache_write(name, entry, (size_t)len);
  remember(key, choice);
  return choice;
}
