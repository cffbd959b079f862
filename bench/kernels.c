/* kernels.c — speed of generated CPU kernels: sgemm (default heuristics vs NOOPT), elementwise
 * add and reductions in GB/s against a plain C copy loop, and convolution-shaped kernels of a
 * small conv net at batch 512 (forward and both gradients).
 *
 *   make build/bench_kernels && ./build/bench_kernels [quick]
 *
 * Times are the best of several runs of the kernels alone (tg_stats.kernel_seconds), after a
 * warm-up run that compiles. NOOPT rows build every kernel unoptimized through the test hook. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "codegen/codegen.h"
#include "runtime/threadpool.h"
#include "tg.h"

static int no_opts(uop *ast, kshape *ks, void *ctx) {
  (void)ast, (void)ks, (void)ctx;
  return 0;
}

typedef tg_tensor *(*expr_fn)(tg_tensor **in);

/* Best kernel time (seconds) of `reps` realizations of a fresh graph; flops/bytes per run. */
static double time_expr(expr_fn fn, tg_tensor **in, int reps, bool noopt, double *flops, double *bytes) {
  double best = 1e30;
  if (noopt) program_set_opt_hook(no_opts, NULL);
  for (int r = 0; r <= reps; r++) {
    tg_scope *s = tg_scope_begin();
    tg_tensor *y = fn(in);
    tg_reset_stats();
    if (tg_realize(y) < 0) { fprintf(stderr, "error: %s\n", tg_last_error()); exit(1); }
    tg_stats st = tg_get_stats();
    if (r > 0 && st.kernel_seconds < best) best = st.kernel_seconds; /* run 0 compiles */
    *flops = (double)st.flops, *bytes = (double)st.bytes_moved;
    tg_scope_end(s);
  }
  if (noopt) program_set_opt_hook(NULL, NULL);
  return best;
}

static tg_tensor *random_buffer(const int64_t *shape, int nd) {
  tg_tensor *t = tg_keep(tg_randn(shape, nd, TG_FLOAT32));
  tg_realize(t);
  return t;
}

/* ------------------------------------------------------------ the kernels */

static tg_tensor *e_matmul(tg_tensor **in) { return tg_matmul(in[0], in[1]); }
static tg_tensor *e_add(tg_tensor **in) { return tg_add(in[0], in[1]); }
static tg_tensor *e_relu_scale(tg_tensor **in) { return tg_mul_s(tg_relu(in[0]), 0.5); }
static tg_tensor *e_sum_rows(tg_tensor **in) { return tg_sum(in[0], (const int[]){1}, 1, false); }
static tg_tensor *e_sum_cols(tg_tensor **in) { return tg_sum(in[0], (const int[]){0}, 1, false); }
static tg_tensor *e_sum_all(tg_tensor **in) { return tg_sum(in[0], NULL, 0, false); }
static tg_tensor *e_softmax(tg_tensor **in) { return tg_softmax(in[0], -1); }
static tg_tensor *e_conv(tg_tensor **in) {
  return tg_conv2d(in[0], in[1], NULL, NULL, NULL, NULL, 1);
}
/* d(sum(conv(x, w) * g))/dw and /dx: the two backward reductions of a conv layer */
static tg_tensor *e_conv_grad_w(tg_tensor **in) {
  tg_tensor *loss = tg_sum(tg_mul(tg_conv2d(in[0], in[1], NULL, NULL, NULL, NULL, 1), in[2]), NULL, 0, false), *g = NULL;
  return tg_gradient(loss, &in[1], 1, &g) < 0 ? NULL : g;
}
static tg_tensor *e_conv_grad_x(tg_tensor **in) {
  tg_tensor *loss = tg_sum(tg_mul(tg_conv2d(in[0], in[1], NULL, NULL, NULL, NULL, 1), in[2]), NULL, 0, false), *g = NULL;
  return tg_gradient(loss, &in[0], 1, &g) < 0 ? NULL : g;
}
static tg_tensor *e_maxpool(tg_tensor **in) { return tg_max_pool2d(in[0], (const int[]){2, 2}, NULL, NULL); }

/* A plain C copy of n floats: the bandwidth reference for elementwise kernels. */
static double copy_gbs(size_t n) {
  float *a = aligned_alloc(64, n * 4), *b = aligned_alloc(64, n * 4);
  memset(a, 1, n * 4), memset(b, 0, n * 4);
  double best = 1e30;
  for (int r = 0; r < 5; r++) {
    double t0 = tg_now();
    memcpy(b, a, n * 4);
    double dt = tg_now() - t0;
    if (dt < best) best = dt;
  }
  volatile float sink = b[n / 2];
  (void)sink;
  free(a), free(b);
  return 2.0 * (double)n * 4 / best * 1e-9;
}

static void row(const char *name, expr_fn fn, tg_tensor **in, int reps, bool noopt) {
  double flops, bytes, t = time_expr(fn, in, reps, noopt, &flops, &bytes);
  printf("%-34s %9.3f ms %9.1f GFLOPS %8.1f GB/s\n", name, t * 1e3, flops / t * 1e-9, bytes / t * 1e-9);
  fflush(stdout);
}

int main(int argc, char **argv) {
  bool quick = argc > 1 && !strcmp(argv[1], "quick");
  tg_manual_seed(1);
  printf("threads: %d\n", threadpool_size());
  char name[64];
  for (int64_t n = 512; n <= (quick ? 1024 : 4096); n *= 2) {
    tg_tensor *in[2] = {random_buffer((int64_t[]){n, n}, 2), random_buffer((int64_t[]){n, n}, 2)};
    snprintf(name, sizeof name, "sgemm %lld", (long long)n);
    row(name, e_matmul, in, n >= 4096 ? 2 : 4, false);
    if (n <= 512) {
      snprintf(name, sizeof name, "sgemm %lld NOOPT", (long long)n);
      row(name, e_matmul, in, 1, true);
    }
    tg_free(in[0]), tg_free(in[1]);
  }
  int64_t big = 1 << 24;
  printf("%-34s %35.1f GB/s\n", "C memcpy 64 MB (reference)", copy_gbs((size_t)big));
  tg_tensor *v[2] = {random_buffer(&big, 1), random_buffer(&big, 1)};
  row("add 16M floats", e_add, v, 5, false);
  row("add 16M floats NOOPT", e_add, v, 2, true);
  row("relu*0.5 16M floats", e_relu_scale, v, 5, false);
  row("sum all 16M floats", e_sum_all, v, 5, false);
  tg_free(v[0]), tg_free(v[1]);
  tg_tensor *m = random_buffer((int64_t[]){4096, 4096}, 2);
  row("sum rows 4096x4096 (axis 1)", e_sum_rows, &m, 5, false);
  row("sum cols 4096x4096 (axis 0)", e_sum_cols, &m, 5, false);
  row("sum rows 4096x4096 NOOPT", e_sum_rows, &m, 1, true);
  tg_free(m);
  tg_tensor *sm = random_buffer((int64_t[]){512, 1000}, 2);
  row("softmax 512x1000", e_softmax, &sm, 5, false);
  tg_free(sm);
  /* a small conv net at batch 512: conv 1→32 on 28x28, conv 32→64 on 13x13, max pool */
  static const struct { const char *name; int64_t x[4], w[4]; } convs[] = {
      {"conv 1->32 3x3 28x28 b512", {512, 1, 28, 28}, {32, 1, 3, 3}},
      {"conv 32->64 3x3 13x13 b512", {512, 32, 13, 13}, {64, 32, 3, 3}},
  };
  for (size_t i = 0; i < sizeof convs / sizeof convs[0]; i++) {
    int64_t oh = convs[i].x[2] - 2;
    tg_tensor *in[3] = {random_buffer(convs[i].x, 4), random_buffer(convs[i].w, 4),
                        random_buffer((int64_t[]){convs[i].x[0], convs[i].w[0], oh, oh}, 4)};
    row(convs[i].name, e_conv, in, 3, false);
    snprintf(name, sizeof name, "  grad w");
    row(name, e_conv_grad_w, in, 3, false);
    snprintf(name, sizeof name, "  grad x");
    row(name, e_conv_grad_x, in, 3, false);
    if (quick || i == 0) {
      snprintf(name, sizeof name, "  forward NOOPT");
      row(name, e_conv, in, 1, true);
    }
    tg_free(in[0]), tg_free(in[1]), tg_free(in[2]);
  }
  tg_tensor *act = random_buffer((int64_t[]){512, 32, 26, 26}, 4);
  row("max_pool 2x2 512x32x26x26", e_maxpool, &act, 3, false);
  tg_free(act);
  return 0;
}
