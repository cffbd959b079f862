/* run.c — the engine: realize = schedule, then run the items (engine.h). Before running, the
 * programs a schedule lacks are built on several threads at once (a first step's hundred
 * kernels compile in parallel). */
#include "engine/engine.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "codegen/codegen.h"
#include "device/device.h"
#include "engine/queues.h"
#include "runtime/profile.h"
#include "tensor/tensor.h"

/* ---------------------------------------------------------------- building ahead */

typedef struct build_job {
  schedule *s;
  program **progs;        /* per item */
  _Atomic size_t next;    /* the next item to take */
  pthread_mutex_t lock;   /* the first failure */
  int rc;
  char error[1024];
} build_job;

typedef struct build_worker_arg {
  build_job *job;
  tg_stats stats; /* the worker thread's counters, for the caller to add */
} build_worker_arg;

static void build_items(build_job *j) {
  for (size_t i; (i = atomic_fetch_add(&j->next, 1)) < j->s->items.n;) {
    const sched_item *it = &j->s->items.v[i];
    if (!it->ast || it->numel == 0 || j->progs[i]) continue;
    if ((j->progs[i] = program_get(device_base(it->dev), it->ast))) continue;
    pthread_mutex_lock(&j->lock); /* errors are per thread: hand the first one to the caller */
    if (!j->rc) j->rc = tg_error_status_or(TG_ERR_COMPILE), snprintf(j->error, sizeof j->error, "%s", tg_last_error());
    pthread_mutex_unlock(&j->lock);
  }
}

static void *build_worker(void *arg) {
  build_worker_arg *w = arg;
  build_items(w->job);
  w->stats = tg_thread_stats;
  return NULL;
}

/* The program of every item into progs: found in the cache, or built — by as many threads as
 * the device has cores when two or more are missing. Their wall time counts as compiling. */
static int build_programs(schedule *s, program **progs) {
  size_t missing = 0;
  for (size_t i = 0; i < s->items.n; i++)
    if (s->items.v[i].ast && s->items.v[i].numel && !(progs[i] = program_find(device_base(s->items.v[i].dev), s->items.v[i].ast))) missing++;
  if (missing < 2 || !program_build_in_parallel()) return 0; /* run_kernel builds it inline */
  build_job j = {.s = s, .progs = progs, .lock = PTHREAD_MUTEX_INITIALIZER};
  enum { MAX_WORKERS = 64 };
  const device *dev = s->items.v[0].dev; /* compiling runs on the host's cores */
  int threads = device_is_gpu(dev) ? (int)sysconf(_SC_NPROCESSORS_ONLN) : dev->caps.threads;
  pthread_t th[MAX_WORKERS];
  build_worker_arg args[MAX_WORKERS];
  int started = 0;
  double t0 = tg_now(), lower0 = tg_thread_stats.lower_seconds, compile0 = tg_thread_stats.compile_seconds;
  for (; started + 1 < threads && (size_t)started + 1 < missing && started < MAX_WORKERS; started++) {
    args[started] = (build_worker_arg){&j, {0}};
    if (pthread_create(&th[started], NULL, build_worker, &args[started]) != 0) break;
  }
  build_items(&j);
  for (int t = 0; t < started; t++) {
    pthread_join(th[t], NULL);
    tg_thread_stats.kernels_compiled += args[t].stats.kernels_compiled;
    tg_thread_stats.disk_cache_hits += args[t].stats.disk_cache_hits;
  }
  /* threads overlap: the phase's wall time is the compile time (lowering included) */
  tg_thread_stats.lower_seconds = lower0;
  tg_thread_stats.compile_seconds = compile0 + (tg_now() - t0);
  if (j.rc) tg_set_error(j.rc, "%s", j.error);
  return j.rc;
}

/* ---------------------------------------------------------------- running */

/* A copy between devices (through the host when neither side is host memory). */
static int run_copy(const sched_item *it) {
  size_t bytes = (size_t)it->numel * tg_dtype_size((tg_dtype)it->bufs[0]->dtype);
  double t0 = tg_now();
  int rc = buffer_copy(it->bufs[0], it->bufs[1], bytes);
  if (rc < 0) return rc;
  const device *from = device_of_number(it->bufs[1]->device);
  char name[96];
  snprintf(name, sizeof name, "copy %s -> %s", from ? from->name : "?", it->dev->name);
  profile_device("copy", it->dev->name, name, t0, tg_now(), 0, 2 * (uint64_t)bytes, 1);
  if (tg_debug() >= 1) fprintf(stderr, "%-35s %9.3f ms %zu bytes\n", name, (tg_now() - t0) * 1e3, bytes);
  return 0;
}

/* A kernel item's arguments: its output's memory (allocated now) and every buffer's data;
 * 0 or a negative status (more than 64 buffers). */
static int item_args(const sched_item *it, void **args) {
  int rc = buffer_alloc(it->bufs[0]); /* the output's memory, now that it is needed (an empty one too: its slack) */
  if (rc) return rc;
  if (it->nbufs > 64) return tg_set_error(TG_ERR_DEVICE, "kernel has %d buffers (max 64)", it->nbufs);
  for (int i = 0; i < it->nbufs; i++) args[i] = buffer_data(it->bufs[i]);
  return 0;
}

static int run_kernel(const sched_item *it, program *p) {
  void *args[64];
  if (!it->ast || it->numel == 0) {
    int rc = buffer_alloc(it->bufs[0]);
    return rc || it->numel == 0 ? rc : run_copy(it);
  }
  if (!p) {
    double t0 = tg_now(), compile0 = tg_thread_stats.compile_seconds;
    p = program_get(device_base(it->dev), it->ast);
    tg_thread_stats.lower_seconds += tg_now() - t0 - (tg_thread_stats.compile_seconds - compile0);
    if (!p) return TG_ERR_COMPILE;
  }
  int rc = item_args(it, args);
  return rc ? rc : program_run(p, args);
}

/* ---------------------------------------------------------------- the JIT's hooks */

static _Thread_local struct {
  engine_capture_fn fn;
  void *ctx;
} capture;

void engine_set_capture(engine_capture_fn fn, void *ctx) { capture.fn = fn, capture.ctx = ctx; }

int engine_run_item(const sched_item *it, program *p) { return run_kernel(it, p); }

/* ---------------------------------------------------------------- schedules */

/* Where a chain can start at item i (engine/chunks.c), run it: the number of items it ran
 * (their releases are the caller's), 0 for none, or a negative status. A JIT recording sees
 * every item run alone (its replays chain them). */
static int run_chain(schedule *s, program **progs, size_t i) {
  if (capture.fn || !progs[i] || !progs[i]->chunk_per) return 0;
  const sched_item *items[CHUNK_WINDOW];
  int last_read[CHUNK_WINDOW], n = 0;
  for (; n < CHUNK_WINDOW && i + (size_t)n < s->items.n; n++) items[n] = &s->items.v[i + (size_t)n];
  for (int k = 0; k < n; k++) { /* the item that drops item k's output */
    last_read[k] = CHUNK_WINDOW;
    for (int m = k; m < n && last_read[k] == CHUNK_WINDOW; m++)
      for (int q = 0; q < items[m]->nrelease; q++)
        if (items[m]->release[q] == items[k]->bufs[0]) last_read[k] = m;
  }
  return n >= 2 ? chunk_run_chain(items, progs + i, last_read, n) : 0;
}

int engine_run(schedule *s) {
  program **progs = calloc(s->items.n + 1, sizeof *progs);
  if (!progs) return tg_set_error(TG_ERR_NOMEM, "engine: out of memory");
  int rc = build_programs(s, progs);
  /* several devices: each runs on its own thread (a JIT recording sees the items in order) */
  bool spread = rc == 0 && !capture.fn && queues_devices(s) > 1;
  if (spread) rc = queues_run(s, progs, run_kernel);
  for (size_t i = 0; i < s->items.n && rc == 0 && !spread;) {
    int len = run_chain(s, progs, i);
    if (len == 0) {
      len = 1, rc = run_kernel(&s->items.v[i], progs[i]);
      if (rc == 0 && capture.fn) capture.fn(capture.ctx, &s->items.v[i], progs[i]);
    } else if (len < 0) {
      rc = len, len = 1;
    }
    for (size_t k = i; k < i + (size_t)len; k++)
      for (int j = 0; j < s->items.v[k].nrelease; j++) buffer_drop(s->items.v[k].release[j]);
    i += (size_t)len;
  }
  free(progs);
  for (size_t i = 0; i + 1 < s->keep.n && rc == 0; i += 2) uop_set_realized(s->keep.v[i], s->keep.v[i + 1]);
  return rc;
}

int engine_realize(uop **targets, int n, uop **out) {
  tg_stats before = tg_thread_stats;
  double t0 = tg_now();
  if (profile_last_realize_end() > 0) profile_host("build", "build (host time since the last realize)", profile_last_realize_end(), t0);
  schedule s;
  int rc = schedule_build(targets, n, &s);
  profile_host("schedule", "schedule", t0, tg_now());
  tg_thread_stats.schedules += rc == 0;
  if (rc == 0) rc = engine_run(&s);
  for (int i = 0; i < n && rc == 0; i++) uop_incref(out[i] = s.outputs[i]);
  schedule_free(&s);
  tg_thread_stats.schedule_seconds += tg_now() - t0 - (tg_thread_stats.kernel_seconds - before.kernel_seconds) -
                                      (tg_thread_stats.compile_seconds - before.compile_seconds) -
                                      (tg_thread_stats.lower_seconds - before.lower_seconds);
  profile_set_last_realize_end(tg_now());
  return rc;
}
