/* test_threadpool.c — the thread pool (src/runtime/threadpool.c): every iteration runs once
 * whatever the size, thread limit or timing; a thread that is late does less of the job; the
 * sleep/wake path after the spin phases; several user threads calling at once. Run with the
 * suite's THREADS and again in a child with THREADS=4 (more threads than this machine's cores). */
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>
#include <time.h>

#include "harness.h"
#include "runtime/threadpool.h"

enum { MAX_N = 100000 };

static atomic_int hits[MAX_N];
static atomic_llong by_caller; /* iterations the calling thread ran */
static pthread_t caller;

static void sleep_ms(int ms) {
  struct timespec t = {ms / 1000, (long)(ms % 1000) * 1000000L};
  nanosleep(&t, NULL);
}

static void count_hits(void **args, long long start, long long end) {
  (void)args;
  for (long long i = start; i < end; i++) atomic_fetch_add(&hits[i], 1);
  if (pthread_equal(pthread_self(), caller)) atomic_fetch_add(&by_caller, end - start);
}

/* Iterations of [0, MAX_N) hit a number of times other than once inside [0, n), zero outside. */
static long long wrong_hits(long long n) {
  long long bad = 0;
  for (long long j = 0; j < MAX_N; j++) bad += atomic_load(&hits[j]) != (j < n);
  return bad;
}

static void clear_hits(void) {
  for (int j = 0; j < MAX_N; j++) atomic_store(&hits[j], 0);
  atomic_store(&by_caller, 0);
  caller = pthread_self();
}

static void check_sizes(void) {
  /* around the chunk counts (4 per thread) and the thread counts */
  static const long long sizes[] = {1, 2, 3, 4, 5, 7, 8, 9, 15, 16, 17, 63, 64, 65, 1000, MAX_N};
  for (size_t i = 0; i < sizeof sizes / sizeof *sizes; i++)
    for (int maxt = 0; maxt <= 5; maxt++) {
      clear_hits();
      threadpool_run(count_hits, NULL, sizes[i], maxt);
      CHECK(wrong_hits(sizes[i]) == 0);
      if (maxt == 1) CHECK(atomic_load(&by_caller) == sizes[i]); /* one thread: the caller's own */
    }
}

TEST(threadpool_each_iteration_once) {
  CHECK(threadpool_size() >= 1);
  check_sizes();
  clear_hits();
  threadpool_run(count_hits, NULL, 0, 0); /* nothing to do */
  threadpool_run(count_hits, NULL, -5, 0);
  CHECK(wrong_hits(0) == 0);
  for (int rep = 0; rep < 2000; rep++) threadpool_run(count_hits, NULL, 3, 0); /* back to back */
  CHECK(atomic_load(&hits[0]) == 2000 && atomic_load(&hits[1]) == 2000 && atomic_load(&hits[2]) == 2000);
  CHECK(atomic_load(&hits[3]) == 0);
}

/* A worker that stops in its first chunk until every other chunk is done (at most 2 s): the
 * other threads, the caller first, take the rest of the job, the stalled worker's own run
 * included. A pool that left each thread its own run would time out here. */
static atomic_int stalls_left, stall_timed_out, job_no;
static atomic_llong total, by_staller; /* iterations run by all threads, by the stalled one */
static long long stall_n;
static _Thread_local int stalled_in_job; /* the job_no this thread stalled in */

static void count_total(void **args, long long start, long long end) {
  count_hits(args, start, end);
  atomic_fetch_add(&total, end - start);
  if (stalled_in_job == atomic_load(&job_no)) atomic_fetch_add(&by_staller, end - start);
}

static void stall_once(void **args, long long start, long long end) {
  if (!pthread_equal(pthread_self(), caller) && atomic_fetch_sub(&stalls_left, 1) > 0) {
    stalled_in_job = atomic_load(&job_no);
    int waited = 0;
    while (atomic_load(&total) < stall_n - (end - start) && waited++ < 2000) sleep_ms(1);
    if (atomic_load(&total) < stall_n - (end - start)) atomic_store(&stall_timed_out, 1);
  }
  count_total(args, start, end);
}

/* One job of n iterations with one stalling worker; false if the stall timed out. */
static bool run_with_stall(long long n) {
  clear_hits();
  atomic_store(&total, 0), atomic_store(&by_staller, 0), atomic_store(&stall_timed_out, 0);
  atomic_store(&stalls_left, 1), atomic_fetch_add(&job_no, 1);
  stall_n = n;
  threadpool_run(stall_once, NULL, n, 0);
  return !atomic_load(&stall_timed_out);
}

/* n = 8000 is a multiple of every chunk count here: the stalled worker runs exactly one
 * chunk, n / (4 chunks x threads), if it started at all (it may wake after the job ended). */
static void check_stalled_job(long long n) {
  CHECK(run_with_stall(n));
  CHECK(wrong_hits(n) == 0);
  if (atomic_load(&stalls_left) < 1) CHECK(atomic_load(&by_staller) == n / (4 * threadpool_size()));
}

TEST(threadpool_late_thread_does_less) {
  if (threadpool_size() < 2) SKIP("one thread (THREADS=1)");
  for (int rep = 0; rep < 3; rep++) {
    check_stalled_job(8000);
    /* 2 threads, 8 chunks: the caller runs all but the stalled one (if the worker woke in time) */
    if (threadpool_size() == 2 && atomic_load(&stalls_left) < 1) CHECK(atomic_load(&by_caller) == 7000);
  }
}

/* Pauses longer than the spin phases (20 ms): the workers go to sleep and are woken again. */
TEST(threadpool_wakes_sleeping_workers) {
  for (int rep = 0; rep < 3; rep++) {
    sleep_ms(30);
    clear_hits();
    threadpool_run(count_hits, NULL, 1000, 0);
    CHECK(wrong_hits(1000) == 0);
  }
}

/* Two user threads running jobs at once: the pool serializes them, each job complete. */
static atomic_int counts2[2][64];

static void count2(void **args, long long start, long long end) {
  atomic_int *c = (atomic_int *)args;
  for (long long i = start; i < end; i++) atomic_fetch_add(&c[i], 1);
}

static void *user_thread(void *arg) {
  atomic_int *c = arg;
  for (int rep = 0; rep < 500; rep++) threadpool_run(count2, (void **)c, 64, 0);
  return NULL;
}

TEST(threadpool_concurrent_callers) {
  pthread_t th[2];
  for (int t = 0; t < 2; t++) CHECK(pthread_create(&th[t], NULL, user_thread, counts2[t]) == 0);
  for (int t = 0; t < 2; t++) pthread_join(th[t], NULL);
  int bad = 0;
  for (int t = 0; t < 2; t++)
    for (int i = 0; i < 64; i++) bad += atomic_load(&counts2[t][i]) != 500;
  CHECK(bad == 0);
}

/* The same checks with 4 threads on this machine's cores (a fresh process: THREADS is read once). */
TEST_CHILD(threadpool_four_threads_child) {
  CHECK(threadpool_size() == 4);
  check_sizes();
  for (int rep = 0; rep < 3; rep++) check_stalled_job(8000);
}

TEST(threadpool_four_threads) {
  char out[8192];
  int status = harness_run_child("threadpool_four_threads_child", "THREADS=4", out, sizeof out);
  CHECK(status == 0);
  if (status != 0) printf("  child exited with %d:\n%s", status, out);
}
