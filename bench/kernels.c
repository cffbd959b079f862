/* kernels.c — speed of generated CPU kernels next to references measured in the same run:
 * sgemm against OpenBLAS cblas_sgemm, elementwise kernels and reductions against the copy
 * bandwidth, the demo's conv layers (examples/mnist.c, batch 512; forward and both gradients)
 * against PyTorch when bench/kernels_torch.py finds torch. Each tg kernel is timed with the
 * default heuristics and, where marked, with BEAM=2 (the winner is cached on disk: the first
 * run searches, later ones reuse it).
 *
 *   make build/bench_kernels && ./build/bench_kernels [quick|full] [FILTER]
 *
 * quick: sgemm 512/1024 only; FILTER: only the rows whose group contains it ("sgemm", "add",
 * "conv2"). BENCH_BEAM=0 skips the BEAM rows; BEAM_TIMEOUT (default here 60 s per kernel).
 * Times are the best of several runs of the kernels alone (tg_stats.kernel_seconds), after a
 * warm-up run that compiles. The machine may be shared: compare rows of the same run. */
#include <cblas.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "codegen/codegen.h"
#include "device/device.h"
#include "runtime/threadpool.h"
#include "tg.h"

typedef tg_tensor *(*expr_fn)(tg_tensor **in);
typedef enum { MODE_DEFAULT, MODE_NOOPT, MODE_BEAM } opt_mode;

static int no_opts(uop *ast, kshape *ks, void *ctx) {
  (void)ast, (void)ks, (void)ctx;
  return 0;
}

static int beam_opts(uop *ast, kshape *ks, void *ctx) {
  (void)ctx;
  return beam_search(device_default(), ast, 2, ks);
}

/* Best kernel time (seconds) of `reps` realizations of a fresh graph; flops/bytes per run. */
static double time_expr(expr_fn fn, tg_tensor **in, int reps, opt_mode mode, double *flops, double *bytes) {
  double best = 1e30;
  if (mode != MODE_DEFAULT) program_set_opt_hook(mode == MODE_NOOPT ? no_opts : beam_opts, NULL);
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
  if (mode != MODE_DEFAULT) program_set_opt_hook(NULL, NULL);
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
static tg_tensor *e_mul(tg_tensor **in) { return tg_mul(in[0], in[1]); }
static tg_tensor *e_relu_scale(tg_tensor **in) { return tg_mul_s(tg_relu(in[0]), 0.5); }
static tg_tensor *e_sum_rows(tg_tensor **in) { return tg_sum(in[0], (const int[]){1}, 1, false); }
static tg_tensor *e_sum_cols(tg_tensor **in) { return tg_sum(in[0], (const int[]){0}, 1, false); }
static tg_tensor *e_sum_all(tg_tensor **in) { return tg_sum(in[0], NULL, 0, false); }
static tg_tensor *e_softmax(tg_tensor **in) { return tg_softmax(in[0], -1); }
static tg_tensor *e_exp2(tg_tensor **in) { return tg_exp2(in[0]); }
static tg_tensor *e_exp(tg_tensor **in) { return tg_exp(in[0]); } /* float32 computed in float64 */
/* softmax as a float32 composite of public ops (tg_softmax: the same math, with its own derivative) */
static tg_tensor *e_softmax_f32(tg_tensor **in) {
  int axis = 1;
  tg_tensor *e = tg_exp2(tg_mul_s(tg_sub(in[0], tg_detach(tg_max(in[0], &axis, 1, true))), 1.4426950408889634));
  return tg_div(e, tg_sum(e, &axis, 1, true));
}
/* d(sum(softmax(x) * w))/dx: softmax's backward row kernel (with the forward it needs) */
static tg_tensor *e_softmax_grad(tg_tensor **in) {
  tg_tensor *loss = tg_sum(tg_mul(tg_softmax(in[0], -1), in[1]), NULL, 0, false), *g = NULL;
  return tg_gradient(loss, &in[0], 1, &g) < 0 ? NULL : g;
}
static tg_tensor *e_conv(tg_tensor **in) { return tg_conv2d(in[0], in[1], NULL, NULL, NULL, NULL, 1); }
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

/* ------------------------------------------------------------ references */

/* Chunks [start, end) of 64 KiB blocks: memcpy(args[1] + i, args[0] + i). */
static void copy_chunks(void **args, long long start, long long end) {
  size_t block = 1 << 16, total = *(size_t *)args[2];
  size_t from = (size_t)start * block, to = (size_t)end * block < total ? (size_t)end * block : total;
  if (from < to) memcpy((char *)args[1] + from, (const char *)args[0] + from, to - from);
}

/* The machine's copy bandwidth (read + write bytes per second), memcpy split over the same
 * threads the kernels use; best of 5. */
static double memcpy_gbs(size_t n) {
  size_t bytes = n * 4;
  float *a = aligned_alloc(64, bytes), *b = aligned_alloc(64, bytes);
  memset(a, 1, bytes), memset(b, 0, bytes);
  void *args[3] = {a, b, &bytes};
  double best = 1e30;
  for (int r = 0; r < 5; r++) {
    double t0 = tg_now();
    threadpool_run(copy_chunks, args, (long long)((bytes + (1 << 16) - 1) >> 16), 0);
    double dt = tg_now() - t0;
    if (dt < best) best = dt;
  }
  volatile float sink = b[n / 2];
  (void)sink;
  free(a), free(b);
  return 2.0 * (double)bytes / best * 1e-9;
}

/* OpenBLAS sgemm GFLOPS on n x n (best of reps, after a warm-up). */
static double blas_gflops(int n, int reps) {
  size_t sz = (size_t)n * (size_t)n;
  float *a = malloc(sz * 4), *b = malloc(sz * 4), *c = malloc(sz * 4);
  for (size_t i = 0; i < sz; i++) a[i] = (float)(i % 7) * 0.1f, b[i] = (float)(i % 5) * 0.2f;
  double best = 1e30;
  for (int r = 0; r <= reps; r++) {
    double t0 = tg_now();
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, n, n, 1.0f, a, n, b, n, 0.0f, c, n);
    double dt = tg_now() - t0;
    if (r > 0 && dt < best) best = dt;
  }
  free(a), free(b), free(c);
  return 2.0 * (double)n * n * n / best * 1e-9;
}

/* PyTorch ms for the demo's conv layers, from bench/kernels_torch.py ("name ms" lines); 0 if
 * python or torch is missing. */
typedef struct { char name[32]; double ms; } torch_row;
static torch_row torch_rows[16];
static int ntorch;

static void load_torch(void) {
  FILE *p = popen("python3 bench/kernels_torch.py 2>/dev/null", "r");
  if (!p) return;
  char line[128];
  while (ntorch < 16 && fgets(line, sizeof line, p))
    if (sscanf(line, "%31s %lf", torch_rows[ntorch].name, &torch_rows[ntorch].ms) == 2) ntorch++;
  pclose(p);
}

static double torch_ms(const char *key) {
  for (int i = 0; i < ntorch; i++)
    if (!strcmp(torch_rows[i].name, key)) return torch_rows[i].ms;
  return 0;
}

/* ------------------------------------------------------------ the table */

static const char *filter; /* argv[2]: run only the rows whose group name contains it */
static bool beam_rows = true;

static bool wanted(const char *group) { return !filter || strstr(group, filter); }

static void header(void) {
  printf("%-32s %10s %9s %8s   %-18s %9s %7s\n", "kernel", "tg ms", "GFLOPS", "GB/s", "reference", "value", "tg/ref");
}

/* One row; the reference is GFLOPS (ref_gbs false) or GB/s, or none when ref <= 0. */
static double row(const char *name, expr_fn fn, tg_tensor **in, int reps, opt_mode mode, const char *ref_name,
                  double ref, bool ref_gbs) {
  double flops, bytes, t = time_expr(fn, in, reps, mode, &flops, &bytes);
  double gf = flops / t * 1e-9, gb = bytes / t * 1e-9;
  printf("%-32s %10.3f %9.1f %8.1f", name, t * 1e3, gf, gb);
  if (ref > 0) printf("   %-18s %9.1f %7.2f", ref_name, ref, (ref_gbs ? gb : gf) / ref);
  printf("\n");
  fflush(stdout);
  return t;
}

static void sgemm_rows(bool quick) {
  char name[64];
  for (int64_t n = 512; n <= (quick ? 1024 : 4096); n *= 2) {
    tg_tensor *in[2] = {random_buffer((int64_t[]){n, n}, 2), random_buffer((int64_t[]){n, n}, 2)};
    double blas = blas_gflops((int)n, n >= 4096 ? 2 : 4);
    snprintf(name, sizeof name, "sgemm %lld", (long long)n);
    row(name, e_matmul, in, n >= 4096 ? 2 : 4, MODE_DEFAULT, "OpenBLAS GFLOPS", blas, false);
    if (beam_rows && n <= 1024) {
      snprintf(name, sizeof name, "sgemm %lld BEAM=2", (long long)n);
      row(name, e_matmul, in, 4, MODE_BEAM, "OpenBLAS GFLOPS", blas, false);
    }
    if (n == 512) row("sgemm 512 NOOPT", e_matmul, in, 1, MODE_NOOPT, "OpenBLAS GFLOPS", blas, false);
    tg_free(in[0]), tg_free(in[1]);
  }
}

/* Softmax over the last axis of 4096x4096 float32 (issue 21's target: 70% of copy bandwidth):
 * the row's GB/s counts every kernel's traffic; the line after it counts the tensor's own
 * bytes (64 MiB read + 64 MiB written) per second, the copy-equivalent rate.
 * TRANSCENDENTAL=0 in the environment gives the libm-per-lane exp2 for comparison. */
static void softmax_big_row(double bw) {
  tg_tensor *x = random_buffer((int64_t[]){4096, 4096}, 2);
  static const struct { const char *name; expr_fn fn; } rows[] = {{"softmax 4096x4096", e_softmax},
                                                                   {"softmax 4096x4096 in float32", e_softmax_f32}};
  for (int i = 0; i < 2; i++) {
    double t = row(rows[i].name, rows[i].fn, &x, 5, MODE_DEFAULT, "copy GB/s", bw, true);
    double gbs = 2.0 * 4096 * 4096 * 4 / t * 1e-9;
    printf("%-32s %10s %9s %8.1f   %-18s %9.1f %7.2f\n", "  (tensor bytes: read + write)", "", "", gbs, "copy GB/s", bw, gbs / bw);
  }
  tg_free(x);
}

static void memory_rows(void) {
  if (!wanted("add") && !wanted("mul") && !wanted("relu") && !wanted("sum") && !wanted("softmax")) return;
  int64_t big = 1 << 24;
  double bw = memcpy_gbs((size_t)big);
  tg_tensor *v[2] = {random_buffer(&big, 1), random_buffer(&big, 1)};
  if (wanted("add")) row("add 16M floats", e_add, v, 5, MODE_DEFAULT, "copy GB/s", bw, true);
  if (wanted("add")) row("add 16M floats NOOPT", e_add, v, 2, MODE_NOOPT, "copy GB/s", bw, true);
  if (wanted("mul")) row("mul 16M floats", e_mul, v, 5, MODE_DEFAULT, "copy GB/s", bw, true);
  if (wanted("relu")) row("relu*0.5 16M floats", e_relu_scale, v, 5, MODE_DEFAULT, "copy GB/s", bw, true);
  if (wanted("sum")) row("sum all 16M floats", e_sum_all, v, 5, MODE_DEFAULT, "copy GB/s", bw, true);
  if (wanted("softmax")) row("exp2 16M floats", e_exp2, v, 5, MODE_DEFAULT, "copy GB/s", bw, true);
  if (wanted("softmax")) row("exp 16M floats (in float64)", e_exp, v, 5, MODE_DEFAULT, "copy GB/s", bw, true);
  tg_free(v[0]), tg_free(v[1]);
  tg_tensor *m = random_buffer((int64_t[]){4096, 4096}, 2);
  if (wanted("sum")) row("sum rows 4096x4096 (axis 1)", e_sum_rows, &m, 5, MODE_DEFAULT, "copy GB/s", bw, true);
  if (wanted("sum")) row("sum cols 4096x4096 (axis 0)", e_sum_cols, &m, 5, MODE_DEFAULT, "copy GB/s", bw, true);
  if (wanted("sum")) row("sum rows 4096x4096 NOOPT", e_sum_rows, &m, 1, MODE_NOOPT, "copy GB/s", bw, true);
  tg_free(m);
  if (!wanted("softmax")) return;
  tg_tensor *sm = random_buffer((int64_t[]){512, 1000}, 2);
  row("softmax 512x1000", e_softmax, &sm, 5, MODE_DEFAULT, "copy GB/s", bw, true);
  tg_free(sm);
  /* rows that stay in the cache: the kernel's compute (best of 200: little noise from load) */
  tg_tensor *cached = random_buffer((int64_t[]){64, 4096}, 2), *cv = random_buffer((int64_t[]){64 * 4096}, 1);
  row("softmax 64x4096 (in cache)", e_softmax, &cached, 200, MODE_DEFAULT, NULL, 0, true);
  row("exp2 256K floats (in cache)", e_exp2, &cv, 200, MODE_DEFAULT, NULL, 0, true);
  tg_tensor *xw[2] = {random_buffer((int64_t[]){32, 4096}, 2), random_buffer((int64_t[]){32, 4096}, 2)};
  row("softmax grad 32x4096 (in cache)", e_softmax_grad, xw, 200, MODE_DEFAULT, NULL, 0, true);
  tg_free(cached), tg_free(cv), tg_free(xw[0]), tg_free(xw[1]);
  softmax_big_row(bw);
}

/* The demo's conv layers: forward, grad w, grad x; default, BEAM=2, and torch (ms). */
static void conv_rows(void) {
  static const struct { const char *name, *key; int64_t x[4], w[4]; } convs[] = {
      {"conv1 1->32 5x5 28x28", "conv1", {512, 1, 28, 28}, {32, 1, 5, 5}},
      {"conv2 32->32 5x5 24x24", "conv2", {512, 32, 24, 24}, {32, 32, 5, 5}},
      {"conv3 32->64 3x3 10x10", "conv3", {512, 32, 10, 10}, {64, 32, 3, 3}},
      {"conv4 64->64 3x3 8x8", "conv4", {512, 64, 8, 8}, {64, 64, 3, 3}},
  };
  static const struct { const char *suffix, *key; expr_fn fn; } parts[] = {
      {"", "fwd", e_conv}, {"  grad w", "gradw", e_conv_grad_w}, {"  grad x", "gradx", e_conv_grad_x}};
  for (size_t i = 0; i < sizeof convs / sizeof convs[0]; i++) {
    if (!wanted(convs[i].name)) continue;
    int64_t oh = convs[i].x[2] - convs[i].w[2] + 1;
    tg_tensor *in[3] = {random_buffer(convs[i].x, 4), random_buffer(convs[i].w, 4),
                        random_buffer((int64_t[]){convs[i].x[0], convs[i].w[0], oh, oh}, 4)};
    for (size_t p = 0; p < 3; p++) {
      char name[64], key[32];
      snprintf(key, sizeof key, "%s_%s", convs[i].key, parts[p].key);
      snprintf(name, sizeof name, "%s", p ? parts[p].suffix : convs[i].name);
      double t = row(name, parts[p].fn, in, 3, MODE_DEFAULT, NULL, 0, false), ref = torch_ms(key);
      if (ref > 0) printf("%-32s %10.3f %38s %7.2f\n", "    torch (2 threads)", ref, "tg speed / torch:", ref / (t * 1e3));
      if (beam_rows) {
        snprintf(name, sizeof name, "    BEAM=2");
        row(name, parts[p].fn, in, 3, MODE_BEAM, NULL, 0, false);
      }
    }
    tg_free(in[0]), tg_free(in[1]), tg_free(in[2]);
  }
  if (!wanted("max_pool")) return;
  tg_tensor *act = random_buffer((int64_t[]){512, 32, 20, 20}, 4);
  row("max_pool 2x2 512x32x20x20", e_maxpool, &act, 3, MODE_DEFAULT, NULL, 0, false);
  tg_free(act);
}

int main(int argc, char **argv) {
  bool quick = argc > 1 && !strcmp(argv[1], "quick");
  filter = argc > 2 ? argv[2] : NULL;
  beam_rows = tg_getenv_int("BENCH_BEAM", 1) != 0;
  setenv("BEAM_TIMEOUT", getenv("BEAM_TIMEOUT") ? getenv("BEAM_TIMEOUT") : "60", 1);
  tg_manual_seed(1);
  if (wanted("conv")) load_torch();
  printf("threads: %d, vector bytes: %d, torch reference: %s\n", threadpool_size(), device_default()->caps.vector_bytes,
         ntorch ? "yes" : "no (bench/kernels_torch.py needs python3 with torch)");
  header();
  if (wanted("sgemm")) sgemm_rows(quick);
  memory_rows();
  conv_rows();
  return 0;
}
