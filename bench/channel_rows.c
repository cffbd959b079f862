/* channel_rows.c — how fast one thread reads an NCHW activation the way a 1x1 conv sums over
 * its input channels (docs/performance.md, "MobileNetV2 at batch 32"): for each tile of
 * positions, one row piece per channel, the rows H*W floats apart; against the same bytes read
 * as one stream, in the same run. With and without a software prefetch two tiles ahead. The
 * buffer is 2 MiB-aligned and advised huge pages, as tg's buffers (device/buffer.c).
 *
 *   build/bench_channel_rows [CHANNELS [POSITIONS [IMAGES]]]   (default 96 3136 32: MobileNetV2's
 *   96 channels at 56x56, batch 32) */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

typedef float vec __attribute__((vector_size(16)));

static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static vec sink;

/* Sum every element once: tile positions at a time, each channel's piece of the tile in turn
 * (tile 0: the whole buffer as one stream); 8 accumulators so that the adds do not bound it. */
static double read_once(const float *x, long images, long channels, long positions, long tile, int prefetch) {
  vec acc[8] = {{0}};
  double t0 = now();
  if (tile == 0) {
    long n = images * channels * positions;
    for (long i = 0; i + 32 <= n; i += 32)
      for (int k = 0; k < 8; k++) acc[k] += *(const vec *)(x + i + 4 * k);
  } else {
    for (long b = 0; b < images; b++)
      for (long p = 0; p + tile <= positions; p += tile)
        for (long c = 0; c < channels; c++) {
          const float *row = x + (b * channels + c) * positions + p;
          if (prefetch && p + 3 * tile <= positions)
            for (long k = 0; k < tile; k += 16) __builtin_prefetch(row + 2 * tile + k);
          for (long k = 0; k + 32 <= tile; k += 32)
            for (int v = 0; v < 8; v++) acc[v] += *(const vec *)(row + k + 4 * v);
        }
  }
  double t = now() - t0;
  for (int k = 0; k < 8; k++) sink += acc[k];
  return t;
}

static double best_of(int reps, const float *x, long images, long channels, long positions, long tile, int prefetch) {
  double best = 1e30;
  for (int r = 0; r < reps; r++) {
    double t = read_once(x, images, channels, positions, tile, prefetch);
    if (t < best) best = t;
  }
  return best;
}

int main(int argc, char **argv) {
  long channels = argc > 1 ? atol(argv[1]) : 96, positions = argc > 2 ? atol(argv[2]) : 3136,
       images = argc > 3 ? atol(argv[3]) : 32;
  if (channels < 1 || positions < 512 || images < 1) {
    fprintf(stderr, "usage: %s [CHANNELS [POSITIONS >= 512 [IMAGES]]]\n", argv[0]);
    return 1;
  }
  size_t bytes = (size_t)(images * channels * positions) * sizeof(float), huge = (size_t)2 << 20;
  float *x = aligned_alloc(huge, (bytes + huge - 1) / huge * huge);
  if (!x) return fprintf(stderr, "out of memory\n"), 1;
  madvise(x, bytes, MADV_HUGEPAGE);
  for (size_t i = 0; i < bytes / sizeof(float); i++) x[i] = (float)(i % 7);
  printf("one thread, %ld images x %ld channels x %ld positions (%.1f MB); best of 5\n", images, channels, positions,
         (double)bytes * 1e-6);
  printf("%-46s %9s %9s %10s\n", "read", "ms", "GB/s", "of stream");
  double stream = best_of(5, x, images, channels, positions, 0, 0);
  printf("%-46s %9.2f %9.1f %10.2f\n", "one stream (reference)", stream * 1e3, (double)bytes / stream * 1e-9, 1.0);
  static const long tiles[] = {32, 128, 512};
  for (int prefetch = 0; prefetch < 2; prefetch++)
    for (size_t i = 0; i < sizeof tiles / sizeof *tiles; i++) {
      double t = best_of(5, x, images, channels, positions, tiles[i], prefetch);
      char name[64];
      snprintf(name, sizeof name, "channel rows, %ld positions a tile%s", tiles[i], prefetch ? ", prefetch" : "");
      long used = positions / tiles[i] * tiles[i];
      double moved = (double)bytes * (double)used / (double)positions;
      printf("%-46s %9.2f %9.1f %10.2f\n", name, t * 1e3, moved / t * 1e-9, moved / t / ((double)bytes / stream));
    }
  free(x);
  return 0;
}
