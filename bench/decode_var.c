/* decode_var.c — one decode step's attention over a KV cache, two ways, in the same run:
 * over cache[:, :, :pos+1] with pos a tg_variable (docs/symbolic.md), and over the whole cache
 * with a mask (arange <= pos, data), as GPT-2's JIT decode did before. Both compile once; the
 * variable reads pos+1 positions, the mask all max_len. GPT-2 124M's shapes: 12 heads of 64,
 * a cache of 1024 positions.
 *
 *   build/bench_decode_var [reps]   → per position: ms per attention, variable vs mask */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "runtime/helpers.h"
#include "tg.h"
#include "tg_nn.h"

enum { H = 12, D = 64, M = 1024 };

/* ms per realize of make(pos) at position pos, best of reps. */
static double time_attention(tg_tensor *(*make)(void *, int64_t), void *ctx, int64_t pos, int reps) {
  double best = 1e30;
  for (int r = 0; r < reps + 1; r++) {
    tg_scope *s = tg_scope_begin();
    tg_tensor *o = make(ctx, pos);
    double t0 = tg_now();
    if (!o || tg_realize(o) < 0) { fprintf(stderr, "%s\n", tg_last_error()); exit(1); }
    double dt = (tg_now() - t0) * 1e3;
    if (r > 0 && dt < best) best = dt; /* the first compiles */
    tg_scope_end(s);
  }
  return best;
}

typedef struct {
  tg_tensor *q, *k, *v;
  tg_symvar *pos;
} bench;

static tg_tensor *with_variable(void *ctx, int64_t pos) {
  bench *b = ctx;
  if (tg_var_bind(b->pos, pos) < 0) return NULL;
  int64_t from[4] = {0, 0, 0, 0}, to[4] = {1, H, tg_var_dim(b->pos, 1), D};
  return tg_scaled_dot_product_attention(b->q, tg_shrink(b->k, from, to), tg_shrink(b->v, from, to), NULL, false);
}

static tg_tensor *with_mask(void *ctx, int64_t pos) {
  bench *b = ctx;
  int32_t p = (int32_t)pos;
  int64_t one = 1, row[2] = {1, M};
  tg_tensor *keep = tg_le(tg_reshape(tg_arange(0, M, 1, TG_INT32), row, 2), tg_from_data(&p, TG_INT32, &one, 1));
  return tg_scaled_dot_product_attention(b->q, b->k, b->v, keep, false);
}

int main(int argc, char **argv) {
  int reps = argc > 1 ? atoi(argv[1]) : 20;
  tg_manual_seed(1);
  bench b = {tg_randn((int64_t[]){1, H, 1, D}, 4, TG_FLOAT32), tg_randn((int64_t[]){1, H, M, D}, 4, TG_FLOAT32),
             tg_randn((int64_t[]){1, H, M, D}, 4, TG_FLOAT32), tg_variable("pos", 0, M - 1)};
  tg_tensor *all[3] = {b.q, b.k, b.v};
  if (tg_realize_many(all, 3) < 0) return fprintf(stderr, "%s\n", tg_last_error()), 1;
  printf("attention of one query, %d heads of %d, cache of %d (best of %d, ms)\n", H, D, M, reps);
  printf("%6s %10s %10s\n", "pos", "variable", "mask");
  const int64_t at[] = {15, 127, 511, 1023};
  for (int i = 0; i < 4; i++)
    printf("%6lld %10.3f %10.3f\n", (long long)at[i], time_attention(with_variable, &b, at[i], reps), time_attention(with_mask, &b, at[i], reps));
  printf("kernels compiled in all: %llu\n", (unsigned long long)tg_get_stats().kernels_compiled);
  return 0;
}
