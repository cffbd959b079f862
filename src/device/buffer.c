/* buffer.c — buffers. A BUFFER UOp owns its memory: arg[0] is the address of a struct
 * cpu_buffer, arg[1..] the shape. The memory is freed when the UOp dies. On a device with its
 * own memory (OpenCL, CUDA: device.h) the data is that device's handle, reached only through
 * buffer_copy_in/out; on host devices it is host memory, described below.
 *
 * Freed memory goes to a cache, like tinygrad's LRU allocator: a training step allocates the
 * same activations and gradients every step, and taking them from fresh pages cost ~10% of
 * the step in page faults and zeroing. A request takes the smallest cached block that holds
 * it and is at most twice its size (the engine frees a schedule's intermediates after their
 * last reader, docs/architecture.md "Memory": later ones of another size reuse them). Cached
 * blocks are not zeroed again: every kernel writes all of its output, and tg_empty promises
 * uninitialized memory. The cache holds at most TG_BUFFER_CACHE_MB (default 1024) MiB, the
 * oldest blocks going first, and is emptied at exit (LeakSanitizer) or by buffer_cache_clear.
 *
 * Every buffer has BUFFER_SLACK readable bytes past its end (codegen.h): a vector load whose
 * first lane is in bounds never faults, so loads through a padded dim need no bounds check. */
#include <pthread.h>
#include <stdatomic.h>
#include <sys/mman.h>
#include <stdlib.h>
#include <string.h>

#include "codegen/codegen.h"
#include "device/device.h"
#include "tensor/tensor.h"

typedef struct cpu_buffer {
  void *data;
  size_t nbytes;
  size_t cap;        /* bytes of the block data points to */
  const device *dev; /* a device with its own memory that data belongs to, else NULL */
} cpu_buffer;

_Atomic uint64_t tg_buffers_alive, tg_bytes_alive, tg_bytes_peak; /* every thread's buffers */

/* ---------------------------------------------------------------- the free-block cache */

enum { CACHE_SLOTS = 512 };

typedef struct cached_block {
  void *data;
  size_t alloc; /* its size */
} cached_block;

static struct {
  pthread_mutex_t lock;
  cached_block block[CACHE_SLOTS]; /* oldest first */
  int n;
  size_t bytes, limit;
  bool exit_hook;
} cache = {.lock = PTHREAD_MUTEX_INITIALIZER};

void buffer_cache_clear(void) {
  pthread_mutex_lock(&cache.lock);
  for (int i = 0; i < cache.n; i++) free(cache.block[i].data);
  cache.n = 0, cache.bytes = 0;
  pthread_mutex_unlock(&cache.lock);
}

/* The smallest cached block of alloc to 2 * alloc bytes (of equal ones the newest: warmest in
 * cache), or NULL; *cap gets its size. */
static void *cache_take(size_t alloc, size_t *cap) {
  void *data = NULL;
  pthread_mutex_lock(&cache.lock);
  int best = -1;
  for (int i = cache.n - 1; i >= 0; i--) {
    size_t a = cache.block[i].alloc;
    if (a >= alloc && a / 2 <= alloc && (best < 0 || a < cache.block[best].alloc)) best = i;
  }
  if (best >= 0) {
    data = cache.block[best].data, *cap = cache.block[best].alloc;
    memmove(cache.block + best, cache.block + best + 1, sizeof(cached_block) * (size_t)(cache.n - best - 1));
    cache.n--, cache.bytes -= *cap;
  }
  pthread_mutex_unlock(&cache.lock);
  return data;
}

/* Keep a freed block, evicting the oldest to stay under the limit; false: free it instead. */
static bool cache_put(void *data, size_t alloc) {
  pthread_mutex_lock(&cache.lock);
  if (!cache.limit) cache.limit = (size_t)tg_getenv_int("TG_BUFFER_CACHE_MB", 1024) << 20;
  if (!cache.exit_hook) cache.exit_hook = atexit(buffer_cache_clear) == 0;
  bool keep = cache.exit_hook && alloc <= cache.limit;
  while (keep && cache.n && (cache.n == CACHE_SLOTS || cache.bytes + alloc > cache.limit)) {
    free(cache.block[0].data);
    cache.bytes -= cache.block[0].alloc;
    memmove(cache.block, cache.block + 1, sizeof(cached_block) * (size_t)--cache.n);
  }
  if (keep) cache.block[cache.n++] = (cached_block){data, alloc}, cache.bytes += alloc;
  pthread_mutex_unlock(&cache.lock);
  return keep;
}

/* ---------------------------------------------------------------- buffers */

/* New memory, 64-byte aligned. Blocks of 2 MiB and more are aligned to 2 MiB and asked to be
 * backed by huge pages: a kernel walking a big matrix down its columns touches a new 4 KiB
 * page per row, and past the TLB's reach (a 2048x2048 float matrix spans 4096 pages) every
 * load pays a page walk (sgemm 2048: 12 GFLOPS with 4 KiB pages). */
static void *fresh_block(size_t alloc) {
  enum { HUGE_PAGE = 2 << 20 };
  if (alloc < HUGE_PAGE) return aligned_alloc(64, alloc);
  void *data = aligned_alloc(HUGE_PAGE, (alloc + HUGE_PAGE - 1) / HUGE_PAGE * HUGE_PAGE);
#ifdef MADV_HUGEPAGE
  if (data) madvise(data, alloc, MADV_HUGEPAGE); /* advice only: failure changes nothing */
#endif
  return data;
}

static size_t block_size(size_t nbytes) { return (nbytes + 63) / 64 * 64 + BUFFER_SLACK; } /* aligned_alloc's rounding */

/* Raise the peak to now's bytes alive. */
static void note_peak(uint64_t now) {
  uint64_t peak = atomic_load_explicit(&tg_bytes_peak, memory_order_relaxed);
  while (now > peak && !atomic_compare_exchange_weak(&tg_bytes_peak, &peak, now)) {}
}

/* The device whose memory a buffer lives in, when it has its own. */
static const device *memory_device(const uop *buf) {
  const device *d = device_of_number(buf->device);
  return d && device_is_gpu(d) ? d : NULL;
}

int buffer_alloc(uop *buf) {
  cpu_buffer *b = (cpu_buffer *)(intptr_t)buf->arg[0];
  if (b->data) return 0;
  size_t alloc = block_size(b->nbytes), cap = alloc;
  void *data = NULL;
  if ((b->dev = memory_device(buf))) {
    if (!(data = b->dev->alloc(alloc))) return tg_error_status_or(TG_ERR_NOMEM);
  } else {
    if (!(data = cache_take(alloc, &cap)) && (data = fresh_block(alloc))) memset(data, 0, alloc);
    if (!data) return tg_set_error(TG_ERR_NOMEM, "out of memory allocating %zu bytes", b->nbytes);
  }
  b->data = data, b->cap = cap;
  atomic_fetch_add(&tg_buffers_alive, 1);
  note_peak(atomic_fetch_add(&tg_bytes_alive, b->nbytes) + b->nbytes);
  return 0;
}

void buffer_drop(uop *buf) {
  cpu_buffer *b = (cpu_buffer *)(intptr_t)buf->arg[0];
  if (!b->data) return;
  atomic_fetch_sub(&tg_buffers_alive, 1), atomic_fetch_sub(&tg_bytes_alive, b->nbytes);
  if (b->dev) b->dev->free(b->data);
  else if (!cache_put(b->data, b->cap)) free(b->data);
  b->data = NULL;
}

int buffer_copy_in(uop *buf, const void *src, size_t bytes) {
  cpu_buffer *b = (cpu_buffer *)(intptr_t)buf->arg[0];
  int rc = buffer_alloc(buf);
  if (rc || !bytes) return rc;
  if (b->dev) return b->dev->copy_in(b->data, src, bytes);
  memcpy(b->data, src, bytes);
  return 0;
}

int buffer_copy_out(uop *buf, void *dst, size_t bytes) {
  cpu_buffer *b = (cpu_buffer *)(intptr_t)buf->arg[0];
  if (!bytes) return 0;
  if (!b->data) return tg_set_error(TG_ERR_DEVICE, "buffer: read before it was written");
  if (b->dev) return b->dev->copy_out(dst, b->data, bytes);
  memcpy(dst, b->data, bytes);
  return 0;
}

int buffer_copy(uop *dst, uop *src, size_t bytes) {
  cpu_buffer *d = (cpu_buffer *)(intptr_t)dst->arg[0], *s = (cpu_buffer *)(intptr_t)src->arg[0];
  int rc = buffer_alloc(dst);
  if (rc || !bytes) return rc;
  if (!d->dev) return buffer_copy_out(src, d->data, bytes);
  if (!s->dev) return buffer_copy_in(dst, s->data, bytes);
  void *host = malloc(bytes); /* between two devices: through the host */
  if (!host) return tg_set_error(TG_ERR_NOMEM, "copy: out of memory for %zu bytes", bytes);
  rc = buffer_copy_out(src, host, bytes);
  if (rc == 0) rc = buffer_copy_in(dst, host, bytes);
  free(host);
  return rc;
}

uop *buffer_new_lazy(tg_dtype dt, const int64_t *shape, int nd) {
  cpu_buffer *b = calloc(1, sizeof *b);
  if (!b) return tg_set_error(TG_ERR_NOMEM, "out of memory"), NULL;
  b->nbytes = (size_t)shape_numel(shape, nd) * tg_dtype_size(dt);
  int64_t arg[TG_MAX_DIMS + 2];
  arg[0] = (int64_t)(intptr_t)b;
  if (nd) memcpy(arg + 1, shape, sizeof(int64_t) * (size_t)nd); /* shape may be NULL for scalars */
  uop *u = uop_new(OP_BUFFER, dt, NULL, 0, arg, nd + 1);
  if (!u) free(b);
  else uop_set_device(u, device_number(device_default())); /* the scheduler retags its own */
  return u;
}

uop *buffer_new(tg_dtype dt, const int64_t *shape, int nd) {
  uop *u = buffer_new_lazy(dt, shape, nd);
  return u && buffer_alloc(u) == 0 ? u : NULL; /* a failed one is freed with the pool */
}

void *buffer_data(uop *buf) { return ((cpu_buffer *)(intptr_t)buf->arg[0])->data; }

void buffer_release_hook(uop *u) {
  buffer_drop(u);
  free((cpu_buffer *)(intptr_t)u->arg[0]);
}
