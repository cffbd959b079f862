/* sort.c — tg_sort's bitonic network at growing row lengths n, the same 2^20 elements each
 * time (rows = 2^20 / n): realize time of values and indices together, the kernels it runs,
 * and the time per element per network step (flat if the work is O(n log^2 n)), next to
 * qsort of the same rows on the host (one thread) and to a realize of the gradient.
 *
 *   build/bench_sort [REPEATS]
 *
 * Each measurement builds the graph anew on a realized input and realizes it; the first run
 * of each size compiles its kernels (not timed), then the minimum of REPEATS runs is shown. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <tg.h>

static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static int cmp_float(const void *a, const void *b) {
  float x = *(const float *)a, y = *(const float *)b;
  return (x > y) - (x < y);
}

/* Seconds for one sort (values and indices) or, with grad, one gradient of sum(values * w). */
static double run(tg_tensor *x, tg_tensor *w, bool grad, uint64_t *kernels) {
  tg_scope *s = tg_scope_begin();
  tg_tensor *v = NULL, *ix = NULL, *g = NULL;
  if (tg_sort(x, 1, false, &v, &ix) != 0) return -1;
  if (grad && tg_gradient(tg_sum(tg_mul(v, w), NULL, 0, false), &x, 1, &g) != 0) return -1;
  tg_tensor *both[2] = {v, ix};
  tg_reset_stats();
  double t0 = now();
  int rc = grad ? tg_realize(g) : tg_realize_many(both, 2);
  double t = now() - t0;
  *kernels = tg_get_stats().kernels_run;
  tg_scope_end(s);
  return rc == 0 ? t : -1;
}

int main(int argc, char **argv) {
  int repeats = argc > 1 ? atoi(argv[1]) : 5;
  enum { TOTAL = 1 << 20 };
  const int64_t sizes[] = {256, 4096, 65536};
  float *data = malloc(sizeof(float) * TOTAL), *copy = malloc(sizeof(float) * TOTAL);
  uint32_t seed = 1;
  for (int i = 0; i < TOTAL; i++) data[i] = (float)((seed = seed * 1664525u + 1013904223u) >> 8) / 16777216.0f;
  printf("%8s %6s %5s | %8s %9s %11s | %8s %9s | %9s\n", "n", "rows", "steps", "kernels", "sort ms", "ns/el/step",
         "kernels", "grad ms", "qsort ms");
  for (size_t k = 0; k < sizeof sizes / sizeof sizes[0]; k++) {
    int64_t n = sizes[k], rows = TOTAL / n, p = 0;
    while ((INT64_C(1) << p) < n) p++;
    int64_t steps = p * (p + 1) / 2;
    tg_tensor *x = tg_from_data(data, TG_FLOAT32, (int64_t[]){rows, n}, 2);
    tg_tensor *w = tg_from_data(data, TG_FLOAT32, (int64_t[]){rows, n}, 2);
    if (tg_realize(x) || tg_realize(w)) return fprintf(stderr, "realize: %s\n", tg_last_error()), 1;
    uint64_t ks = 0, kg = 0;
    double best = 1e30, best_g = 1e30, best_q = 1e30;
    run(x, w, false, &ks), run(x, w, true, &kg); /* compile */
    for (int r = 0; r < repeats; r++) {
      double t = run(x, w, false, &ks), tg_ = run(x, w, true, &kg);
      if (t < 0 || tg_ < 0) return fprintf(stderr, "sort: %s\n", tg_last_error()), 1;
      best = t < best ? t : best, best_g = tg_ < best_g ? tg_ : best_g;
      for (int i = 0; i < TOTAL; i++) copy[i] = data[i];
      double t0 = now();
      for (int64_t row = 0; row < rows; row++) qsort(copy + row * n, (size_t)n, sizeof(float), cmp_float);
      double tq = now() - t0;
      best_q = tq < best_q ? tq : best_q;
    }
    printf("%8lld %6lld %5lld | %8llu %9.1f %11.3f | %8llu %9.1f | %9.1f\n", (long long)n, (long long)rows, (long long)steps,
           (unsigned long long)ks, best * 1e3, best * 1e9 / ((double)TOTAL * (double)steps), (unsigned long long)kg,
           best_g * 1e3, best_q * 1e3);
    tg_free(x), tg_free(w);
  }
  free(data), free(copy);
  return 0;
}
