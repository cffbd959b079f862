/* chunks.c — a few consecutive kernels run as a chain, group of images by group. A conv net's
 * layers each read what the one before wrote: run whole, a layer's output (MobileNetV2's
 * 16->96 @112 at batch 32: 154 MB) goes to memory and comes back for the next. Run as a chain,
 * each thread takes a group of images and runs every kernel of the chain on it, the outputs
 * only the chain reads living in a scratch block per thread that stays in its caches. A kernel
 * can run a group when its parallel axis is its output's dim 0 (the images), whole and
 * outermost, so that the iterations [b / u, (b + g) / u) compute images [b, b + g); a chain
 * may form where every buffer a kernel of it writes is read by the later ones image by image
 * (the view chain from the buffer to the kernel keeps dim 0 as it is), written once and not
 * read before, on a host device. docs/architecture.md, "Chunks". */
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/engine.h"

#include "device/device.h"
#include "runtime/helpers.h"
#include "runtime/threadpool.h"
#include "tensor/tensor.h"

/* ---- which buffers a kernel reads image by image */

typedef struct align_walk {
  ptrmap seen;
  uint64_t unaligned; /* PARAM slots reached with dim 0 not kept */
  bool across;        /* one of them read across images (not the same element for every image) */
  bool ok;            /* no op the walk does not know */
} align_walk;

/* Does view u keep dim 0 (its source's dim 0 is its own, element for element)? */
static bool keeps_dim0(const uop *u) {
  const uop *x = u->src[0];
  if (uop_ndim(u) < 1 || uop_ndim(x) < 1) return false;
  int64_t n = uop_shape(u)[0];
  switch (u->op) {
    case OP_RESHAPE: case OP_EXPAND: return uop_shape(x)[0] == n;
    case OP_PERMUTE: return u->arg[0] == 0;
    case OP_PAD: return u->arg[0] == 0 && u->arg[1] == 0;
    case OP_SHRINK: return u->arg[0] == 0 && u->arg[1] == n && uop_shape(x)[0] == n;
    case OP_FLIP: return u->arg[0] == 0;
    default: return false;
  }
}

/* Does view u broadcast one element along dim 0 (below it, nothing depends on the image)? */
static bool broadcasts_dim0(const uop *u) {
  return u->op == OP_EXPAND && uop_ndim(u) >= 1 && uop_ndim(u->src[0]) == uop_ndim(u) && uop_shape(u->src[0])[0] == 1;
}

/* kept: dim 0 of u is the kernel's (images); same: u is the same for every image. */
static void walk_aligned(align_walk *w, uop *u, bool kept, bool same) {
  void *key = (void *)((uintptr_t)u | (uintptr_t)kept | (uintptr_t)same << 1);
  if (!w->ok || ptrmap_has(&w->seen, key)) return;
  ptrmap_put(&w->seen, key, u);
  if (u->op == OP_PARAM) {
    if (u->arg[0] >= 64) w->ok = false;
    else if (!kept) w->unaligned |= (uint64_t)1 << u->arg[0], w->across |= !same;
    return;
  }
  if (u->op == OP_REDUCE_AXIS)
    for (int i = 1; i < u->narg; i++) kept &= u->arg[i] != 0;
  else if (uop_is_movement(u)) same |= kept && broadcasts_dim0(u), kept &= keeps_dim0(u);
  else if (!uop_is_alu(u) && u->op != OP_CONST && u->op != OP_IOTA) w->ok = false; /* DEFINE_VAR, anything new */
  for (int i = 0; i < u->nsrc; i++) walk_aligned(w, u->src[i], kept, same);
}

/* The PARAM slots the kernel reads other than image by image (the same element for every
 * image: weights); *ok false when it reads something the walk does not know, or a slot across
 * images (a flip or a sum over the batch: such a kernel computes its images from others). */
static uint64_t unaligned_slots(uop *ast, bool *ok) {
  align_walk w = {{0}, 0, false, true};
  for (int i = 0; i < ast->nsrc; i++) walk_aligned(&w, ast->src[i], true, false);
  ptrmap_free(&w.seen);
  *ok = w.ok && !w.across && ast->nsrc == 1;
  return w.unaligned;
}

/* ---- a kernel's images per parallel iteration */

void chunk_describe(program *p, uop *ast) {
  const kshape *ks = &p->ks;
  const uop *out = ast->nsrc ? ast->src[0] : ast; /* the value the SINK stores */
  p->chunk_per = 0;
  if (device_is_gpu(p->dev) || p->nstages != 1 || p->scratch_bytes) return;
  if (ks->nax < 1 || ks->ax[0].kind != AX_THREAD || ks->ax[0].dim != 0 || uop_ndim(out) < 1) return;
  int64_t n = uop_shape(out)[0], iters = ks->ax[0].size;
  if (n < 2 || iters < 1 || ks->size[0] != n || n % iters || p->stage[0].parallel != iters) return;
  bool ok;
  p->chunk_unaligned = unaligned_slots(ast, &ok);
  p->chunk_batch = n, p->chunk_per = ok ? n / iters : 0;
}

/* ---- chains */

static int64_t gcd64(int64_t a, int64_t b) { return b ? gcd64(b, a % b) : a; }

/* Does items[k] read the buffers the chain's earlier kernels write (and its own output, if
 * it reads it) image by image, write a buffer no other kernel of the chain writes and none
 * before it reads? */
static bool joins_chain(const sched_item *const *items, int k, uint64_t unaligned) {
  const sched_item *it = items[k];
  for (int j = 0; j < k; j++)
    for (int s = 0; s < items[j]->nbufs; s++)
      if (items[j]->bufs[s] == it->bufs[0]) return false; /* written again, or read before: its old contents */
  for (int s = 0; s < it->nbufs; s++) {
    bool written = s == 0;
    for (int j = 0; j < k && !written; j++) written = items[j]->bufs[0] == it->bufs[s];
    if (written && unaligned >> s & 1) return false;
  }
  return true;
}

/* The fewest images every kernel of items[0..n) computes whole: a multiple of each one's
 * images per parallel iteration. */
static int64_t group_images(const int64_t *per, int n) {
  int64_t g = 1;
  for (int k = 0; k < n; k++) g = g / gcd64(g, per[k]) * per[k];
  return g;
}

/* Bytes that ending a chain after items[k] sends to memory: none where its output is read
 * after the window anyway (a block's output kept for its residual) or where the next item
 * cannot join (the chain ends there whatever comes before), else the whole output, which a
 * longer chain would keep in a scratch block. */
static int64_t cut_bytes(const sched_item *const *items, const int *last_read, int n, bool next_joins, int k) {
  if (last_read[k] >= n || !next_joins) return 0;
  return items[k]->numel * (int64_t)tg_dtype_size((tg_dtype)items[k]->bufs[0]->dtype);
}

/* How many of items[0..n) run as one chain (0: none), and the images per group: of the
 * lengths that can join, the one whose end sends the fewest bytes to memory (MobileNetV2: after
 * a projecting conv, whose output is small or kept for a residual, not after the expanding
 * conv that follows it), the longest of those. */
static int chunk_chain(const sched_item *const *items, program *const *progs, const int *last_read, int n, int64_t *group) {
  int64_t per[CHUNK_CHAIN_MAX];
  int len = 0;
  if (!tg_getenv_int("CHUNKS", 1)) return 0;
  for (; len < n && len < CHUNK_CHAIN_MAX; len++) {
    const sched_item *it = items[len];
    const program *p = progs[len];
    bool parts = it->ast && it->nbufs <= 64 && p && (per[len] = p->chunk_per) != 0;
    if (!parts || p->chunk_batch != progs[0]->chunk_batch || it->dev != items[0]->dev ||
        !joins_chain(items, len, p->chunk_unaligned))
      break;
  }
  bool forced = len < n && len < CHUNK_CHAIN_MAX; /* items[len] cannot join */
  int best = len;
  for (int l = len - 1; l >= 2; l--)
    if (cut_bytes(items, last_read, n, true, l - 1) < cut_bytes(items, last_read, n, !forced, best - 1)) best = l;
  len = best;
  *group = len >= 2 ? group_images(per, len) : 0;
  return *group && progs[0]->chunk_batch % *group == 0 && progs[0]->chunk_batch / *group >= 2 ? len : 0;
}

/* ---- running a chain */

/* A chain runs group by group (a group: the fewest images every kernel of it computes whole).
 * The thread pool hands groups to threads, and a thread runs every kernel of the chain on its
 * group before it takes the next one: no thread waits for another between kernels, and a
 * group's data stays in the caches of the core that made it. The chain's outputs that no
 * kernel after it reads live in scratch blocks of one group per thread, which each thread
 * reuses group after group: their lines stay in its cache from one kernel to the next instead
 * of going to memory and coming back (and being fetched before they are written). */
typedef struct chain {
  const sched_item *const *items;
  program *progs[CHUNK_CHAIN_MAX]; /* program_chained's variant where it touches a scratch block */
  int len;
  int64_t group;
  uop *scratch[CHUNK_CHAIN_MAX]; /* item k's output blocks, or NULL where it lives on */
  int64_t image_bytes[CHUNK_CHAIN_MAX];
  _Atomic uint64_t ns[CHUNK_CHAIN_MAX]; /* each kernel's time, all threads */
} chain;

static int scratch_of(const chain *c, const uop *buf) {
  for (int k = 0; k < c->len; k++)
    if (c->scratch[k] && c->items[k]->bufs[0] == buf) return k;
  return -1;
}

/* Kernel k's arguments for the group from image `first` on thread `slot`, run as its first
 * group (iterations from 0): a buffer it reads image by image (and its output) from the
 * group's first image on, a scratch block at the thread's slot, the others (weights) as they
 * are. So every address the kernel forms, a padded position's included, stays among the group's
 * images (or the buffer's slack), as it would for the whole batch. */
static void group_args(const chain *c, int k, int64_t first, int slot, void **args) {
  const sched_item *it = c->items[k];
  int64_t batch = c->progs[0]->chunk_batch;
  for (int s = 0; s < it->nbufs; s++) {
    const uop *b = it->bufs[s];
    int m = scratch_of(c, b);
    char *data = m >= 0 ? buffer_data(c->scratch[m]) : buffer_data(it->bufs[s]);
    int64_t image_bytes = shape_numel(uop_shape(b), uop_ndim(b)) / batch * (int64_t)tg_dtype_size((tg_dtype)b->dtype);
    if (m >= 0) data += slot * c->group * c->image_bytes[m];
    else if (!(c->progs[k]->chunk_unaligned >> s & 1)) data += first * image_bytes;
    args[s] = data;
  }
}

/* The thread pool's function: groups [g0, g1), every kernel of the chain on each. */
static void run_groups(void **ctx, long long g0, long long g1) {
  chain *c = (chain *)ctx;
  int slot = threadpool_thread_index();
  void *args[64];
  for (long long g = g0; g < g1; g++)
    for (int k = 0; k < c->len; k++) {
      const program *p = c->progs[k];
      group_args(c, k, g * c->group, slot, args);
      double t0 = tg_now();
      p->stage[0].fn(args, 0, c->group / p->chunk_per);
      atomic_fetch_add(&c->ns[k], (uint64_t)((tg_now() - t0) * 1e9));
    }
}

/* Memory for the outputs that live on; scratch blocks (one group per thread) for those read
 * for the last time inside the chain (last_read < len); the kernels that read or write them
 * built for the chain (program_chained: per image, stores through the cache). */
static int chain_memory(chain *c, const int *last_read) {
  for (int k = 0; k < c->len; k++) {
    const sched_item *it = c->items[k];
    tg_dtype dt = (tg_dtype)it->bufs[0]->dtype;
    int64_t image = it->numel / c->progs[0]->chunk_batch, numel = threadpool_size() * c->group * image;
    c->image_bytes[k] = image * (int64_t)tg_dtype_size(dt);
    bool inner = last_read[k] < c->len && tg_getenv_int("CHUNK_SCRATCH", 1);
    if (inner && !(c->scratch[k] = buffer_new_lazy(dt, &numel, 1))) return TG_ERR_NOMEM;
    int rc = buffer_alloc(inner ? c->scratch[k] : it->bufs[0]);
    if (rc) return rc;
  }
  for (int k = 0; k < c->len; k++) { /* reading or writing a scratch block: the chained variant */
    bool scratch = false;
    for (int s = 0; s < c->items[k]->nbufs; s++) scratch |= scratch_of(c, c->items[k]->bufs[s]) >= 0;
    if (scratch && !(c->progs[k] = program_chained(c->progs[k], c->items[k]->ast))) return TG_ERR_COMPILE;
  }
  return 0;
}

int chunk_run_chain(const sched_item *const *items, program *const *progs, const int *last_read, int n) {
  chain c = {.items = items};
  c.len = chunk_chain(items, progs, last_read, n, &c.group);
  if (c.len < 2) return 0;
  memcpy(c.progs, progs, sizeof(program *) * (size_t)c.len);
  size_t mark = uop_pool_mark();
  int rc = chain_memory(&c, last_read);
  if (tg_debug() >= 2) {
    int inner = 0;
    for (int k = 0; k < c.len; k++) inner += c.scratch[k] != NULL;
    fprintf(stderr, "chain of %d kernels from %s: %lld images a group, %d outputs in scratch\n", c.len,
            progs[0]->info.name, (long long)c.group, inner);
  }
  if (rc == 0) {
    long long groups = progs[0]->chunk_batch / c.group;
    double t0 = tg_now(), total = 0;
    rc = items[0]->dev->launch(run_groups, (void **)&c, 0, groups);
    double wall = tg_now() - t0;
    for (int k = 0; k < c.len; k++) total += (double)atomic_load(&c.ns[k]);
    for (int k = 0; k < c.len && rc == 0; k++) /* the wall time shared out by each kernel's time */
      program_count_run(c.progs[k], t0, total > 0 ? wall * (double)atomic_load(&c.ns[k]) / total : 0, (uint64_t)groups);
  }
  for (int k = 0; k < c.len; k++)
    if (c.scratch[k]) buffer_drop(c.scratch[k]);
  uop_pool_release(mark);
  return rc < 0 ? rc : c.len;
}
