/* chunks.c — a few consecutive kernels run a chunk of images at a time. A conv net's layers each
 * read what the one before wrote: run whole, a layer's output (MobileNetV2's 16->96 @112 at
 * batch 32: 154 MB) goes to memory and comes back for the next. Run image chunk by image
 * chunk, the chain's kernels pass a chunk's few MB through the cache. A kernel can run a chunk
 * when its parallel axis is its output's dim 0 (the images), whole and outermost, so that the
 * iterations [b / u, (b + c) / u) compute images [b, b + c); a chain may form where every
 * buffer a kernel of it writes is read by the later ones image by image (the view chain from
 * the buffer to the kernel keeps dim 0 as it is), written once and not read before, and the
 * devices launch parts of a parallel axis (host devices). docs/architecture.md, "Chunks". */
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

static void walk_aligned(align_walk *w, uop *u, bool kept) {
  void *key = (void *)((uintptr_t)u | (uintptr_t)kept);
  if (!w->ok || ptrmap_has(&w->seen, key)) return;
  ptrmap_put(&w->seen, key, u);
  if (u->op == OP_PARAM) {
    if (u->arg[0] >= 64) w->ok = false;
    else if (!kept) w->unaligned |= (uint64_t)1 << u->arg[0];
    return;
  }
  if (u->op == OP_REDUCE_AXIS)
    for (int i = 1; i < u->narg; i++) kept &= u->arg[i] != 0;
  else if (uop_is_movement(u)) kept &= keeps_dim0(u);
  else if (!uop_is_alu(u) && u->op != OP_CONST && u->op != OP_IOTA) w->ok = false; /* DEFINE_VAR, anything new */
  for (int i = 0; i < u->nsrc; i++) walk_aligned(w, u->src[i], kept);
}

/* The PARAM slots the kernel reads other than image by image (across images, or the same
 * element for every image); *ok false when it reads something the walk does not know. */
static uint64_t unaligned_slots(uop *ast, bool *ok) {
  align_walk w = {{0}, 0, true};
  for (int i = 0; i < ast->nsrc; i++) walk_aligned(&w, ast->src[i], true);
  ptrmap_free(&w.seen);
  *ok = w.ok && ast->nsrc == 1;
  return w.unaligned;
}

/* ---- a kernel's images per parallel iteration */

void chunk_describe(program *p, uop *ast) {
  const kshape *ks = &p->ks;
  const uop *out = ast->nsrc ? ast->src[0] : ast; /* the value the SINK stores */
  p->chunk_per = 0;
  if (!p->dev->launch_part || p->nstages != 1 || p->scratch_bytes || p->stage[0].local) return;
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

/* Images per chunk: a multiple of every kernel's images per iteration, times the threads so
 * that each gets a part, doubled while a chunk of the chain's outputs stays within a quarter
 * of the last-level cache (they pass through it) and the batch divides. MobileNetV2 at batch
 * 32: 2 images at 112x112 (a chain's outputs there are 8 MB an image), 4 at 28x28, 16 at
 * 14x14; a quarter measured as fast as a half and an eighth, and as a fixed 4 images. */
static int64_t chunk_size(const sched_item *const *items, const int64_t *per, int n, int64_t batch) {
  int64_t c = 1, bytes = 0;
  for (int k = 0; k < n; k++) {
    c = c / gcd64(c, per[k]) * per[k];
    bytes += items[k]->numel * (int64_t)tg_dtype_size((tg_dtype)items[k]->bufs[0]->dtype) / batch;
  }
  c *= threadpool_size();
  const device_caps *caps = &items[0]->dev->caps;
  int64_t cache = caps->llc_bytes ? caps->llc_bytes : caps->l2_bytes;
  while (batch % (2 * c) == 0 && 2 * c < batch && 2 * c * bytes <= cache / 4) c *= 2;
  return batch % c == 0 && c < batch ? c : 0;
}

/* How many of items[0..n) run as one chain (0: none), and the images per chunk. */
static int chunk_chain(const sched_item *const *items, program *const *progs, int n, int64_t *chunk) {
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
  *chunk = len >= 2 ? chunk_size(items, per, len, progs[0]->chunk_batch) : 0;
  return *chunk ? len : 0;
}

/* ---- running a chain */

/* A chain's outputs that no kernel after it reads live in scratch blocks of one chunk's images,
 * which every chunk reuses: its lines stay in the cache from one kernel to the next instead of
 * going to memory and coming back (and being fetched before they are written). */
typedef struct chain {
  const sched_item *const *items;
  program *progs[CHUNK_CHAIN_MAX]; /* a scratch block's writer: its stores through the cache */
  int len;
  uop *scratch[CHUNK_CHAIN_MAX]; /* item k's output block, or NULL where it lives on */
  int64_t image_bytes[CHUNK_CHAIN_MAX];
} chain;

static int scratch_of(const chain *c, const uop *buf) {
  for (int k = 0; k < c->len; k++)
    if (c->scratch[k] && c->items[k]->bufs[0] == buf) return k;
  return -1;
}

/* Kernel k's arguments for images [first, ...): a scratch block's address moved back by the
 * chunk's first image, so that the kernel's own indexing lands in it. */
static int chunk_args(const chain *c, int k, int64_t first, void **args) {
  const sched_item *it = c->items[k];
  for (int s = 0; s < it->nbufs; s++) {
    int m = scratch_of(c, it->bufs[s]);
    int rc = m < 0 && s == 0 ? buffer_alloc(it->bufs[0]) : 0;
    if (rc) return rc;
    args[s] = m < 0 ? buffer_data(it->bufs[s])
                    : (void *)((uintptr_t)buffer_data(c->scratch[m]) - (uintptr_t)(first * c->image_bytes[m]));
  }
  return 0;
}

/* Scratch blocks for the outputs read for the last time inside the chain (last_read < len). */
static int make_scratch(chain *c, const int *last_read, int64_t chunk) {
  for (int k = 0; k < c->len; k++) {
    const sched_item *it = c->items[k];
    tg_dtype dt = (tg_dtype)it->bufs[0]->dtype;
    int64_t image = it->numel / c->progs[0]->chunk_batch, numel = chunk * image;
    c->image_bytes[k] = image * (int64_t)tg_dtype_size(dt);
    c->scratch[k] = last_read[k] < c->len && tg_getenv_int("CHUNK_SCRATCH", 1) ? buffer_new_lazy(dt, &numel, 1) : NULL;
    int rc = c->scratch[k] ? buffer_alloc(c->scratch[k]) : 0;
    if (rc) return rc;
    if (c->scratch[k] && !(c->progs[k] = program_cached_stores(c->progs[k], it->ast))) return TG_ERR_COMPILE;
  }
  return 0;
}

int chunk_run_chain(const sched_item *const *items, program *const *progs, const int *last_read, int n) {
  int64_t chunk;
  chain c = {items, {0}, chunk_chain(items, progs, n, &chunk), {0}, {0}};
  if (c.len < 2) return 0;
  memcpy(c.progs, progs, sizeof(program *) * (size_t)c.len);
  size_t mark = uop_pool_mark();
  int rc = make_scratch(&c, last_read, chunk);
  void *args[64];
  for (int64_t first = 0; first < progs[0]->chunk_batch && rc == 0; first += chunk)
    for (int k = 0; k < c.len && rc == 0; k++) {
      program *p = c.progs[k];
      rc = chunk_args(&c, k, first, args);
      if (rc == 0) rc = program_run_part(p, args, first / p->chunk_per, (first + chunk) / p->chunk_per, first == 0);
    }
  for (int k = 0; k < c.len; k++)
    if (c.scratch[k]) buffer_drop(c.scratch[k]);
  uop_pool_release(mark);
  return rc < 0 ? rc : c.len;
}
