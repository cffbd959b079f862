/* threadpool.c — what one job of the kernel thread pool costs (src/runtime/threadpool.c):
 * µs per threadpool_run of a trivial kernel (n iterations of one float add each), back to back
 * and after a stretch of host work (a busy wait of GAP µs, not counted) such as the schedule
 * of the next step. A pool whose workers went to sleep in the gap pays their wake-up in every
 * job; a pool that waits for every worker pays for a worker that is not running.
 *
 *   build/bench_threadpool [REPS]     (internal API: links libtg.a and includes src/) */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "runtime/threadpool.h"

static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static float data[1 << 18];

static void add_one(void **args, long long start, long long end) {
  (void)args;
  for (long long i = start; i < end; i++) data[i] += 1.0f;
}

/* Best over 5 rounds of the mean µs per job of `reps` jobs of n iterations, GAP µs apart. */
static double us_per_job(long long n, double gap_us, int reps) {
  double best = 1e30;
  for (int round = 0; round < 5; round++) {
    double host = 0, t0 = now();
    for (int i = 0; i < reps; i++) {
      double h = now();
      while (now() - h < gap_us * 1e-6) {}
      host += now() - h;
      threadpool_run(add_one, NULL, n, 0);
    }
    double t = (now() - t0 - host) / reps;
    best = t < best ? t : best;
  }
  return best * 1e6;
}

int main(int argc, char **argv) {
  int reps = argc > 1 ? atoi(argv[1]) : 2000;
  if (reps < 1) return fprintf(stderr, "usage: bench_threadpool [REPS]\n"), 2;
  static const long long sizes[] = {64, 1 << 18};
  static const double gaps[] = {0, 50, 200, 1000};
  threadpool_run(add_one, NULL, 64, 0); /* starts the workers */
  printf("thread pool, %d threads: us per job (best of 5 rounds of %d jobs; host gap not counted)\n",
         threadpool_size(), reps);
  printf("%-22s", "iterations \\ gap");
  for (size_t g = 0; g < sizeof gaps / sizeof *gaps; g++) printf(" %8.0f us", gaps[g]);
  printf("\n");
  for (size_t s = 0; s < sizeof sizes / sizeof *sizes; s++) {
    printf("%-22lld", sizes[s]);
    for (size_t g = 0; g < sizeof gaps / sizeof *gaps; g++) {
      int r = gaps[g] >= 200 ? reps / 4 + 1 : reps; /* the gaps dominate the run time */
      printf(" %11.2f", us_per_job(sizes[s], gaps[g], r));
    }
    printf("\n");
  }
  return 0;
}
