/* layout.h — internal to src/schedule/: the layout rules (layout.c) as choices, and the search
 * that picks among them by timing (layout_search.c, under BEAM). docs/optimizer.md, "BEAM over
 * layouts". */
#ifndef TG_LAYOUT_H
#define TG_LAYOUT_H

#include "device/device.h"

enum { LAYOUT_MAX_CHOICES = 6 };

/* One layout rule. choices: what it may do with a reduction (its parameter: a panel width, a
 * chunk of images; 0 means "leave it"), the heuristic's choice first; none when it does not
 * apply. apply: the reduction rewritten for one choice, or NULL for "leave it". */
typedef struct layout_rule {
  const char *name;
  int (*choices)(const device_caps *caps, uop *reduce, int64_t *out);
  uop *(*apply)(const device_caps *caps, uop *reduce, int64_t choice);
} layout_rule;

/* The split rule (split_reduce.c): a reduction over a merged axis, reduced over its parts. */
int split_reduce_choices(const device_caps *caps, uop *reduce, int64_t *out);
uop *split_reduce_apply(const device_caps *caps, uop *reduce, int64_t choice);

/* graph_rebuild: the nodes of walk (default: *order; sources first) rebuilt, each source x
 * read as what source(ctx, user, x) names (NULL: x) as rebuilt so far, then each rebuilt node
 * passed through node(ctx, u) (NULL: kept); where a node a tensor handle holds (through
 * origin) became another, origin records it. *g and *order (its toposort) become the new
 * graph's; the new count, or -1 when out of memory. The layout rewrites (layout.c) and the
 * stored values (schedule.c share_stored) rebuild through it. */
typedef struct rebuild_fns {
  uop *(*source)(void *ctx, uop *user, uop *x);
  uop *(*node)(void *ctx, uop *u);
  void *ctx;
} rebuild_fns;
int graph_rebuild(uop **g, uop ***order, int n, uop **walk, const rebuild_fns *f, ptrmap *origin);

/* Whether this thread is scheduling a probe (its layout is chosen already). */
bool layout_probing(void);
/* Whether reductions on dev get their layout choices timed (BEAM > 0 on a host device, no
 * OPTS or NOOPT, and not already inside a search). */
bool layout_searching(const device *dev);
/* The fastest of choices[0..n) for reduce on dev: each is applied to a probe (the reduction
 * over scratch inputs), scheduled, and its kernels timed as the engine builds them; the answer
 * is remembered in memory and on disk (<cache>/layout-<hash>.txt). choices[0] when nothing
 * could be timed. */
int64_t layout_search(const layout_rule *rule, const device *dev, uop *reduce, const int64_t *choices, int n);

/* Test hook: time kernels with fn instead of running them (NULL: back to real timing), and
 * forget what was searched in memory. */
typedef double (*layout_timer_fn)(const device *dev, uop *ast, void *ctx);
void layout_set_timer(layout_timer_fn fn, void *ctx);
extern _Atomic uint64_t tg_layout_searches, tg_layout_cache_hits; /* searches run, answers from the disk cache */
#endif
