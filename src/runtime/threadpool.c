/* threadpool.c — persistent workers for the parallel axis of kernels (see threadpool.h).
 *
 * A job is published by bumping a generation counter. Workers spin briefly on it (kernels of
 * one schedule follow each other closely) and then sleep on a condition variable. Every worker
 * acknowledges every job, so no worker can lag behind into the next one. */
#include "runtime/threadpool.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <unistd.h>

#include "runtime/helpers.h"

#define SPIN_ROUNDS 4000

static struct {
  pthread_mutex_t mu, busy;
  pthread_cond_t wake, done;
  atomic_ulong gen;
  atomic_int pending;
  int nthreads; /* workers + the calling thread */
  bool started;
  /* the current job */
  tp_kernel fn;
  void **args;
  long long n;
  int used;
} pool = {.mu = PTHREAD_MUTEX_INITIALIZER, .busy = PTHREAD_MUTEX_INITIALIZER,
          .wake = PTHREAD_COND_INITIALIZER, .done = PTHREAD_COND_INITIALIZER};

static inline void cpu_relax(void) {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#endif
}

int threadpool_size(void) {
  static _Atomic int size; /* any thread may ask first: both compute the same number */
  int n = atomic_load_explicit(&size, memory_order_relaxed);
  if (!n) {
    long online = sysconf(_SC_NPROCESSORS_ONLN);
    n = tg_getenv_int("THREADS", online > 0 ? (int)online : 1);
    n = n < 1 ? 1 : n > 256 ? 256 : n;
    atomic_store_explicit(&size, n, memory_order_relaxed);
  }
  return n;
}

static void run_chunk(int t) {
  long long start = pool.n * t / pool.used, end = pool.n * (t + 1) / pool.used;
  if (start < end) pool.fn(pool.args, start, end);
}

static void *worker(void *arg) {
  int t = (int)(intptr_t)arg;
  unsigned long seen = 0;
  for (;;) {
    for (int i = 0; i < SPIN_ROUNDS && atomic_load_explicit(&pool.gen, memory_order_acquire) == seen; i++)
      cpu_relax();
    if (atomic_load_explicit(&pool.gen, memory_order_acquire) == seen) {
      pthread_mutex_lock(&pool.mu);
      while (atomic_load(&pool.gen) == seen) pthread_cond_wait(&pool.wake, &pool.mu);
      pthread_mutex_unlock(&pool.mu);
    }
    seen = atomic_load_explicit(&pool.gen, memory_order_acquire);
    if (t < pool.used) run_chunk(t);
    if (atomic_fetch_sub_explicit(&pool.pending, 1, memory_order_acq_rel) == 1) {
      pthread_mutex_lock(&pool.mu);
      pthread_cond_signal(&pool.done);
      pthread_mutex_unlock(&pool.mu);
    }
  }
  return NULL;
}

/* Start the workers; on failure run with the ones that did start. */
static void start_workers(void) {
  pool.started = true;
  pool.nthreads = 1;
  for (int t = 1; t < threadpool_size(); t++) {
    pthread_t th;
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    int rc = pthread_create(&th, &attr, worker, (void *)(intptr_t)t);
    pthread_attr_destroy(&attr);
    if (rc) break;
    pool.nthreads++;
  }
}

void threadpool_run(tp_kernel fn, void **args, long long n, int max_threads) {
  if (n <= 0) return;
  int want = threadpool_size();
  if (max_threads > 0 && max_threads < want) want = max_threads;
  if (n < want) want = (int)n;
  if (want <= 1) { fn(args, 0, n); return; }
  pthread_mutex_lock(&pool.busy);
  if (!pool.started) start_workers();
  if (want > pool.nthreads) want = pool.nthreads;
  if (want <= 1) {
    pthread_mutex_unlock(&pool.busy);
    fn(args, 0, n);
    return;
  }
  pool.fn = fn, pool.args = args, pool.n = n, pool.used = want;
  atomic_store(&pool.pending, pool.nthreads - 1);
  atomic_fetch_add_explicit(&pool.gen, 1, memory_order_release);
  pthread_mutex_lock(&pool.mu);
  pthread_cond_broadcast(&pool.wake);
  pthread_mutex_unlock(&pool.mu);
  run_chunk(0);
  for (int i = 0; i < SPIN_ROUNDS && atomic_load_explicit(&pool.pending, memory_order_acquire); i++) cpu_relax();
  if (atomic_load_explicit(&pool.pending, memory_order_acquire)) {
    pthread_mutex_lock(&pool.mu);
    while (atomic_load(&pool.pending)) pthread_cond_wait(&pool.done, &pool.mu);
    pthread_mutex_unlock(&pool.mu);
  }
  pthread_mutex_unlock(&pool.busy);
}
