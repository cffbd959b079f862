/* queues.c — running a schedule whose items are on several devices (sharded tensors,
 * docs/devices.md): every device has its own thread, started on first use and kept, which
 * runs that device's items in schedule order; an item first waits until the items that wrote
 * its inputs have run. So kernels and copies of different devices run at the same time, and
 * each device's items stay in order. The calling thread hands out the work, then retires the
 * items in schedule order: an item's releases (the memory planner's frees) happen once it and
 * every item before it have run, so no memory is reused while a reader of it may still run.
 * Runs from several user threads take turns. */
#include "engine/queues.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "device/device.h"
#include "tensor/tensor.h"

enum { MAX_DEVICE_NUMBERS = 256 };

/* One run of a schedule: shared by the caller and the device threads. */
typedef struct run_ctx {
  schedule *s;
  program **progs;
  item_runner run;
  int *waits;      /* per item: index of the item that wrote input j is waits[first[i] + j], -1 none */
  int *first;      /* per item: where its entries in waits start (first[n]: the end) */
  char *done;      /* per item: ran (or skipped after a failure) */
  pthread_mutex_t lock;
  pthread_cond_t changed;
  int rc;          /* the first failure */
  char error[1024];
  tg_stats stats;  /* the device threads' counters, for the caller */
} run_ctx;

/* A device's thread and what it has to run: items[0..n) of ctx, in order. */
typedef struct dev_queue {
  pthread_t th;
  pthread_mutex_t lock;
  pthread_cond_t wake;
  run_ctx *ctx;
  int *items, n;
} dev_queue;

static struct {
  pthread_mutex_t lock;
  dev_queue *q[MAX_DEVICE_NUMBERS];
  /* one run at a time: two runs handing out work to the same devices in different orders
   * could each wait on a device the other holds */
  pthread_mutex_t running;
} queues = {.lock = PTHREAD_MUTEX_INITIALIZER, .running = PTHREAD_MUTEX_INITIALIZER};

static void stats_add(tg_stats *to, const tg_stats *d) {
  to->kernels_run += d->kernels_run, to->kernels_compiled += d->kernels_compiled;
  to->disk_cache_hits += d->disk_cache_hits, to->flops += d->flops, to->bytes_moved += d->bytes_moved;
  to->kernel_seconds += d->kernel_seconds, to->compile_seconds += d->compile_seconds;
  to->lower_seconds += d->lower_seconds, to->kernel_parts += d->kernel_parts;
}

static void run_one(run_ctx *c, int i) {
  pthread_mutex_lock(&c->lock);
  for (int k = c->first[i]; k < c->first[i + 1]; k++) /* its inputs are written */
    while (c->waits[k] >= 0 && !c->done[c->waits[k]]) pthread_cond_wait(&c->changed, &c->lock);
  bool skip = c->rc != 0;
  pthread_mutex_unlock(&c->lock);
  tg_stats before = tg_thread_stats;
  int rc = skip ? 0 : c->run(&c->s->items.v[i], c->progs[i]);
  pthread_mutex_lock(&c->lock);
  tg_stats delta = tg_thread_stats;
  delta.kernels_run -= before.kernels_run, delta.kernels_compiled -= before.kernels_compiled;
  delta.disk_cache_hits -= before.disk_cache_hits, delta.flops -= before.flops, delta.bytes_moved -= before.bytes_moved;
  delta.kernel_seconds -= before.kernel_seconds, delta.compile_seconds -= before.compile_seconds;
  delta.lower_seconds -= before.lower_seconds, delta.kernel_parts -= before.kernel_parts;
  stats_add(&c->stats, &delta);
  if (rc < 0 && !c->rc) c->rc = rc, snprintf(c->error, sizeof c->error, "%s", tg_last_error());
  c->done[i] = 1;
  pthread_cond_broadcast(&c->changed);
  pthread_mutex_unlock(&c->lock);
}

static void *device_thread(void *arg) {
  dev_queue *q = arg;
  for (;;) {
    pthread_mutex_lock(&q->lock);
    while (!q->ctx) pthread_cond_wait(&q->wake, &q->lock);
    run_ctx *c = q->ctx;
    int *items = q->items, n = q->n;
    pthread_mutex_unlock(&q->lock);
    for (int k = 0; k < n; k++) run_one(c, items[k]);
    pthread_mutex_lock(&q->lock);
    q->ctx = NULL, q->items = NULL, q->n = 0;
    pthread_cond_broadcast(&q->wake);
    pthread_mutex_unlock(&q->lock);
  }
  return NULL;
}

/* The thread of device number d, started on first use (NULL with the error set). */
static dev_queue *queue_of(int d) {
  pthread_mutex_lock(&queues.lock);
  dev_queue *q = queues.q[d];
  if (!q && (q = calloc(1, sizeof *q))) {
    pthread_mutex_init(&q->lock, NULL), pthread_cond_init(&q->wake, NULL);
    if (pthread_create(&q->th, NULL, device_thread, q) != 0) free(q), q = NULL;
    else pthread_detach(q->th), queues.q[d] = q;
  }
  pthread_mutex_unlock(&queues.lock);
  if (!q) tg_set_error(TG_ERR_NOMEM, "engine: cannot start a device thread");
  return q;
}

/* For each item, the items that wrote its inputs (the latest earlier writer of each buffer). */
static int find_waits(run_ctx *c) {
  size_t n = c->s->items.n, total = 0;
  for (size_t i = 0; i < n; i++) total += (size_t)c->s->items.v[i].nbufs;
  c->waits = malloc(sizeof(int) * (total + 1)), c->first = malloc(sizeof(int) * (n + 1));
  c->done = calloc(n + 1, 1);
  ptrmap writer = {0}; /* buffer → writing item + 1 */
  int rc = c->waits && c->first && c->done ? 0 : TG_ERR_NOMEM, at = 0;
  for (size_t i = 0; i < n && !rc; i++) {
    const sched_item *it = &c->s->items.v[i];
    c->first[i] = at;
    for (int j = 1; j < it->nbufs; j++) c->waits[at++] = (int)(intptr_t)ptrmap_get(&writer, it->bufs[j]) - 1;
    if (it->nbufs && ptrmap_put(&writer, it->bufs[0], (void *)(intptr_t)(i + 1)) < 0) rc = TG_ERR_NOMEM;
  }
  if (!rc) c->first[n] = at;
  ptrmap_free(&writer);
  return rc ? tg_set_error(rc, "engine: out of memory") : 0;
}

/* Hand device d's items to its thread. */
static int dispatch(run_ctx *c, int d, int *items, int n) {
  dev_queue *q = queue_of(d);
  if (!q) return TG_ERR_NOMEM;
  pthread_mutex_lock(&q->lock);
  while (q->ctx) pthread_cond_wait(&q->wake, &q->lock); /* another thread's run on this device */
  q->ctx = c, q->items = items, q->n = n;
  pthread_cond_broadcast(&q->wake);
  pthread_mutex_unlock(&q->lock);
  return 0;
}

/* Wait until device d's thread has finished this run. */
static void wait_queue(run_ctx *c, int d) {
  dev_queue *q = queues.q[d];
  pthread_mutex_lock(&q->lock);
  while (q->ctx == c) pthread_cond_wait(&q->wake, &q->lock);
  pthread_mutex_unlock(&q->lock);
}

int queues_devices(const schedule *s) {
  int first = -1;
  for (size_t i = 0; i < s->items.n; i++) {
    int d = device_number(s->items.v[i].dev);
    if (first < 0) first = d;
    else if (d != first) return 2;
  }
  return first < 0 ? 0 : 1;
}

int queues_run(schedule *s, program **progs, item_runner run) {
  run_ctx c = {.s = s, .progs = progs, .run = run, .lock = PTHREAD_MUTEX_INITIALIZER, .changed = PTHREAD_COND_INITIALIZER};
  size_t n = s->items.n;
  int *order = malloc(sizeof(int) * (n + 1)), start[MAX_DEVICE_NUMBERS + 1] = {0}, used[MAX_DEVICE_NUMBERS] = {0};
  int rc = order ? find_waits(&c) : tg_set_error(TG_ERR_NOMEM, "engine: out of memory"), ndev = 0;
  /* the items of each device, in order, one after the other in `order` */
  for (size_t i = 0; i < n && !rc; i++) start[device_number(s->items.v[i].dev) + 1]++;
  for (int d = 0; d < MAX_DEVICE_NUMBERS; d++) start[d + 1] += start[d];
  int fill[MAX_DEVICE_NUMBERS];
  pthread_mutex_lock(&queues.running);
  memcpy(fill, start, sizeof fill);
  for (size_t i = 0; i < n && !rc; i++) order[fill[device_number(s->items.v[i].dev)]++] = (int)i;
  for (int d = 0; d < MAX_DEVICE_NUMBERS && !rc; d++)
    if (start[d + 1] > start[d] && (rc = dispatch(&c, d, order + start[d], start[d + 1] - start[d])) == 0) used[ndev++] = d;
  if (rc) { /* nothing may run after a failed hand-out: mark the rest failed, let started ones end */
    pthread_mutex_lock(&c.lock);
    if (!c.rc) c.rc = rc, snprintf(c.error, sizeof c.error, "%s", tg_last_error());
    pthread_mutex_unlock(&c.lock);
  }
  for (size_t i = 0; i < n && !rc; i++) { /* retire in order: then the item's releases are safe */
    pthread_mutex_lock(&c.lock);
    while (!c.done[i]) pthread_cond_wait(&c.changed, &c.lock);
    pthread_mutex_unlock(&c.lock);
    for (int j = 0; j < s->items.v[i].nrelease; j++) buffer_drop(s->items.v[i].release[j]);
  }
  for (int k = 0; k < ndev; k++) wait_queue(&c, used[k]);
  pthread_mutex_unlock(&queues.running);
  stats_add(&tg_thread_stats, &c.stats);
  if (c.rc) rc = tg_set_error(c.rc, "%s", c.error);
  free(order), free(c.waits), free(c.first), free(c.done);
  pthread_mutex_destroy(&c.lock), pthread_cond_destroy(&c.changed);
  return rc;
}
