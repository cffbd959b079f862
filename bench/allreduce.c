/* allreduce.c — the allreduce of sharded tensors (docs/devices.md, "Several devices"): 64 MB
 * of float32 on each of 2 and 4 logical devices summed so that every device holds the total,
 * next to a memcpy of the same 64 MB.
 *
 *   build/bench_allreduce [MB [REPEATS]]
 *
 * Method (public API only): x of shape (n, MB/4 Mi) is split along axis 0 over CPU:0..CPU:n-1
 * (LLVM:n when the default device is LLVM) and realized, so each device holds one 64 MB row;
 * each repeat builds sum(x, axis 0) — an allreduce, the ring the scheduler writes: partial
 * sums, n-1 reduce-scatter steps (copy + add), n-1 all-gather copies, a concat per device — and
 * times its realize (the first, which compiles, is not counted). Reported: the minimum and
 * median over REPEATS, and GB/s as NCCL counts them: algbw = bytes / time; busbw = algbw *
 * 2(n-1)/n, the bytes each device sends and receives in a ring. memcpy: the same bytes from
 * one malloc'ed block to another, already touched, minimum over REPEATS. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <tg.h>

#include "runtime/helpers.h" /* tg_now */

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

static double memcpy_seconds(size_t bytes, int repeats) {
  char *a = malloc(bytes), *b = malloc(bytes);
  if (!a || !b) return free(a), free(b), -1;
  memset(a, 1, bytes), memset(b, 2, bytes);
  double best = 1e30;
  for (int r = 0; r < repeats; r++) {
    double t0 = tg_now();
    memcpy(b, a, bytes);
    double dt = tg_now() - t0;
    best = dt < best ? dt : best;
  }
  volatile char sink = b[bytes / 2];
  (void)sink;
  free(a), free(b);
  return best;
}

/* Times of the allreduce of `bytes` per device over n devices into t[0..repeats), sorted.
 * 0, or -1 with tg's error. */
static int allreduce_seconds(int n, size_t bytes, int repeats, double *t) {
  char kind[16], names[8][24];
  const char *devs[8];
  tg_scope *s = tg_scope_begin();
  snprintf(kind, sizeof kind, "%s", tg_device_of(tg_scalar(0, TG_FLOAT32)));
  kind[strcspn(kind, ":")] = 0;
  for (int i = 0; i < n; i++) snprintf(names[i], sizeof names[i], "%s:%d", kind, i), devs[i] = names[i];
  int64_t shape[2] = {n, (int64_t)(bytes / sizeof(float))};
  tg_tensor *x = tg_shard(tg_rand(shape, 2, TG_FLOAT32), devs, n, 0);
  int rc = tg_realize(x);
  for (int r = -1; r < repeats && rc == 0; r++) { /* r = -1: compiles */
    tg_scope *inner = tg_scope_begin();
    tg_tensor *sum = tg_sum(x, (int[]){0}, 1, false);
    double t0 = tg_now();
    rc = tg_realize(sum);
    if (r >= 0) t[r] = tg_now() - t0;
    tg_scope_end(inner);
  }
  tg_scope_end(s);
  qsort(t, (size_t)repeats, sizeof *t, cmp_double);
  return rc;
}

int main(int argc, char **argv) {
  double mb = argc > 1 ? atof(argv[1]) : 64;
  int repeats = argc > 2 ? atoi(argv[2]) : 7;
  if (mb <= 0 || repeats < 1 || repeats > 1000) return fprintf(stderr, "usage: bench_allreduce [MB [REPEATS]]\n"), 2;
  size_t bytes = (size_t)(mb * 1024 * 1024) / 64 * 64;
  double *t = malloc(sizeof(double) * (size_t)repeats), mc = memcpy_seconds(bytes, repeats);
  if (!t || mc < 0) return fprintf(stderr, "out of memory\n"), 1;
  printf("allreduce (sum) of %.0f MB float32 per device; memcpy of the same bytes: %.2f ms, %.2f GB/s\n\n", mb, mc * 1e3,
         (double)bytes / mc / 1e9);
  printf("| devices | min ms | median ms | algbw GB/s | busbw GB/s | vs memcpy |\n");
  printf("|---|---|---|---|---|---|\n");
  static const int ns[] = {2, 4};
  for (size_t k = 0; k < sizeof ns / sizeof ns[0]; k++) {
    int n = ns[k];
    if (allreduce_seconds(n, bytes, repeats, t) < 0) return fprintf(stderr, "allreduce over %d devices: %s\n", n, tg_last_error()), 1;
    double algbw = (double)bytes / t[0] / 1e9, busbw = algbw * 2 * (n - 1) / n;
    printf("| %d | %.1f | %.1f | %.2f | %.2f | %.2fx |\n", n, t[0] * 1e3, t[repeats / 2] * 1e3, algbw, busbw, mc / t[0]);
  }
  free(t);
  return 0;
}
