/* threadpool.c — persistent workers for the parallel axis of kernels (see threadpool.h).
 *
 * A job's range [0, n) is cut into chunks, a few per thread. Thread t owns a contiguous run
 * of them and takes them in order (the same thread sees the same part of the data in
 * consecutive kernels), then takes what is left of the other runs. Each run has one atomic
 * claim word {job, next chunk, end}: a claim is a compare-and-swap on it, so a thread that
 * starts late (still waking up, or sharing its core for a while) does less of the job
 * instead of holding up its end, and a thread still looking at an old job cannot take a
 * chunk of a new one.
 *
 * Between jobs a worker waits in phases (wait_phases): it spins with pause, then spins
 * offering its core to whatever else is runnable there, and only then sleeps on a condition
 * variable. Spinning through the host work between kernels keeps each worker on its core;
 * a worker that slept between kernels was placed anew by the OS scheduler at each wake-up
 * (docs/performance.md, "Threads in fresh processes"). */
#include "runtime/threadpool.h"

#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <unistd.h>

#include "runtime/helpers.h"

enum {
  MAX_THREADS = 256,
  CHUNKS_PER_THREAD = 4, /* a late thread's share moves in quarters */
  PAUSES_PER_CHECK = 64, /* ~1.6 us of pause on Zen 3 between looks at the clock */
};

/* How a thread waits: each phase runs until `until` seconds after the wait began; a thread
 * still waiting after the last one sleeps. Pause alone answers fastest but holds the core;
 * sched_yield offers the core to whatever else is runnable there (the caller, when the two
 * share a core). The worker's last phase outlasts the host work between the kernels of a
 * step (schedule and lower: ~2-4 ms for the demo). */
typedef struct wait_phase { double until; bool yield; } wait_phase;
static const wait_phase wait_phases[] = {{50e-6, false}, {20e-3, true}};

/* One run of chunks: {job (32 bits), next (16), end (16)}, on its own cache line. */
typedef struct run { _Alignas(64) atomic_ullong claim; } run;

static struct {
  pthread_mutex_t mu, busy;
  pthread_cond_t wake, done_cv;
  atomic_ulong gen;         /* the current job's number */
  atomic_int sleepers;      /* workers asleep (or about to sleep) on wake */
  atomic_bool caller_sleeps; /* the calling thread is asleep (or about to) on done_cv */
  atomic_int done;          /* chunks of the current job finished */
  int nthreads;             /* workers + the calling thread */
  bool started;
  /* the current job: written before its number is published, read after a claim */
  tp_kernel fn;
  void **args;
  long long n;
  int nchunks;
  run runs[MAX_THREADS];
} pool = {.mu = PTHREAD_MUTEX_INITIALIZER, .busy = PTHREAD_MUTEX_INITIALIZER,
          .wake = PTHREAD_COND_INITIALIZER, .done_cv = PTHREAD_COND_INITIALIZER};

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
    n = n < 1 ? 1 : n > MAX_THREADS ? MAX_THREADS : n;
    atomic_store_explicit(&size, n, memory_order_relaxed);
  }
  return n;
}

static inline unsigned long long claim_word(unsigned long job, int next, int end) {
  return (unsigned long long)(uint32_t)job << 32 | (unsigned long long)next << 16 | (unsigned long long)end;
}

/* Take the next chunk of run r for job `job`: its index, or -1 when the run is used up or
 * belongs to another job. */
static int claim(run *r, unsigned long job) {
  unsigned long long w = atomic_load_explicit(&r->claim, memory_order_acquire);
  for (;;) {
    int next = (int)(w >> 16 & 0xffff), end = (int)(w & 0xffff);
    if ((uint32_t)(w >> 32) != (uint32_t)job || next >= end) return -1;
    if (atomic_compare_exchange_weak_explicit(&r->claim, &w, claim_word(job, next + 1, end), memory_order_acq_rel,
                                              memory_order_acquire))
      return next;
  }
}

/* Run chunk c of the current job (the caller holds its claim, so the job cannot end and
 * be replaced meanwhile); the thread finishing the job's last chunk wakes a sleeping caller. */
static void run_chunk(int c) {
  long long n = pool.n, start = n * c / pool.nchunks, end = n * (c + 1) / pool.nchunks;
  int nchunks = pool.nchunks;
  if (start < end) pool.fn(pool.args, start, end);
  if (atomic_fetch_add(&pool.done, 1) + 1 == nchunks && atomic_load(&pool.caller_sleeps)) {
    pthread_mutex_lock(&pool.mu);
    pthread_cond_signal(&pool.done_cv);
    pthread_mutex_unlock(&pool.mu);
  }
}

/* Thread t's part of job `job`: its own run, then what is left of the others. A thread with
 * an empty run of its own (beyond max_threads) takes nothing. */
static void work(int t, unsigned long job) {
  unsigned long long own = atomic_load_explicit(&pool.runs[t].claim, memory_order_acquire);
  if ((uint32_t)(own >> 32) != (uint32_t)job || (own & 0xffff) == 0) return;
  for (int c; (c = claim(&pool.runs[t], job)) >= 0;) run_chunk(c);
  for (int i = 1; i < pool.nthreads; i++)
    for (int c, v = (t + i) % pool.nthreads; (c = claim(&pool.runs[v], job)) >= 0;) run_chunk(c);
}

static bool new_job(void *seen) { return atomic_load_explicit(&pool.gen, memory_order_acquire) != *(unsigned long *)seen; }
static bool job_done(void *nchunks) { return atomic_load_explicit(&pool.done, memory_order_acquire) == *(int *)nchunks; }

/* Spin through wait_phases until ready(arg); false when they ran out (the caller sleeps). */
static bool spin_until(bool (*ready)(void *), void *arg) {
  double start = tg_now();
  for (size_t p = 0; p < sizeof wait_phases / sizeof *wait_phases; p++)
    for (;;) {
      for (int i = 0; i < PAUSES_PER_CHECK; i++) {
        if (ready(arg)) return true;
        cpu_relax();
      }
      if (wait_phases[p].yield) sched_yield();
      if (tg_now() - start > wait_phases[p].until) break;
    }
  return ready(arg);
}

/* A worker's wait for the job after `seen`; returns its number. The sleeper count is raised
 * before gen is read again, and the caller reads it after raising gen: one of the two sees
 * the other (sequentially consistent), so no wake-up is lost. */
static unsigned long wait_job(unsigned long seen) {
  if (!spin_until(new_job, &seen)) {
    atomic_fetch_add(&pool.sleepers, 1);
    pthread_mutex_lock(&pool.mu);
    while (atomic_load(&pool.gen) == seen) pthread_cond_wait(&pool.wake, &pool.mu);
    pthread_mutex_unlock(&pool.mu);
    atomic_fetch_sub(&pool.sleepers, 1);
  }
  return atomic_load_explicit(&pool.gen, memory_order_acquire);
}

static _Thread_local int thread_index; /* the caller's: 0 */

int threadpool_thread_index(void) { return thread_index; }

static void *worker(void *arg) {
  int t = (int)(intptr_t)arg;
  thread_index = t;
  for (unsigned long job = 0;;) {
    job = wait_job(job);
    work(t, job);
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

/* Publish a job for `used` threads: its data, then a run per thread, then its number. */
static unsigned long publish(tp_kernel fn, void **args, long long n, int used) {
  unsigned long job = atomic_load(&pool.gen) + 1;
  pool.fn = fn, pool.args = args, pool.n = n;
  pool.nchunks = n < (long long)used * CHUNKS_PER_THREAD ? (int)n : used * CHUNKS_PER_THREAD;
  atomic_store(&pool.done, 0);
  for (int t = 0; t < pool.nthreads; t++) {
    int first = t < used ? pool.nchunks * t / used : 0, end = t < used ? pool.nchunks * (t + 1) / used : 0;
    atomic_store_explicit(&pool.runs[t].claim, claim_word(job, first, end), memory_order_release);
  }
  atomic_store(&pool.gen, job);
  if (atomic_load(&pool.sleepers)) {
    pthread_mutex_lock(&pool.mu);
    pthread_cond_broadcast(&pool.wake);
    pthread_mutex_unlock(&pool.mu);
  }
  return job;
}

/* The caller's wait for the chunks other threads still run (see wait_job for the order). */
static void wait_done(void) {
  int nchunks = pool.nchunks;
  if (spin_until(job_done, &nchunks)) return;
  atomic_store(&pool.caller_sleeps, true);
  pthread_mutex_lock(&pool.mu);
  while (!job_done(&nchunks)) pthread_cond_wait(&pool.done_cv, &pool.mu);
  pthread_mutex_unlock(&pool.mu);
  atomic_store(&pool.caller_sleeps, false);
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
  work(0, publish(fn, args, n, want));
  wait_done();
  pthread_mutex_unlock(&pool.busy);
}
