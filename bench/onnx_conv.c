/* onnx_conv.c — the convolutions of ResNet-18 and MobileNetV2 (the bench/onnx.sh models), each
 * realized alone with tg_conv2d (+ bias, as the ONNX import builds it) on realized inputs, so
 * a layer's kernels can be compared with a roofline: GFLOPS for the dense convs (against the
 * sgemm rate of bench_matmul), GB/s of input + output for the depthwise ones (against copy).
 *
 *   make build/bench_onnx_conv && ./build/bench_onnx_conv [BATCH [FILTER]]
 *
 * BATCH (default 1); FILTER: only the layers whose name contains it ("r18", "mb", "dw", "demo"); REPS
 * (env) runs per layer (default 5, 2 above 2 GMACs); NOBIAS=1 (env) times the conv without its bias
 * (the kernel then ends at the reduction: its own shape, e.g. a 1x1 conv's flattened positions). THREADS=1 gives steadier numbers on a
 * shared machine (a busy second core does not hold up every kernel). Times: best of the runs of the kernels alone (tg_stats.kernel_seconds) after a warm-up
 * that compiles; the kernel count includes the padded input copy (docs/onnx.md, "Speed"). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "tg.h"
#include "tg_nn.h"

typedef struct layer {
  const char *name;
  int cin, cout, hw, k, stride, groups, count; /* count: how often the models run it */
  int pad1; /* padding + 1; 0: k/2 (the models' convs) */
} layer;

/* Distinct conv shapes (input hw) of ResNet-18 and MobileNetV2 at 224x224, padding k/2; then
 * the demo's. WINO=0 runs the 3x3 stride-1 ones in the direct form (src/nn/winograd.c). */
static const layer layers[] = {
    {"r18 stem 7x7/2 3->64", 3, 64, 224, 7, 2, 1, 1, 0},
    {"r18 3x3 64->64 @56", 64, 64, 56, 3, 1, 1, 4, 0},
    {"r18 3x3/2 64->128 @56", 64, 128, 56, 3, 2, 1, 1, 0},
    {"r18 1x1/2 64->128 @56", 64, 128, 56, 1, 2, 1, 1, 0},
    {"r18 3x3 128->128 @28", 128, 128, 28, 3, 1, 1, 3, 0},
    {"r18 3x3/2 128->256 @28", 128, 256, 28, 3, 2, 1, 1, 0},
    {"r18 1x1/2 128->256 @28", 128, 256, 28, 1, 2, 1, 1, 0},
    {"r18 3x3 256->256 @14", 256, 256, 14, 3, 1, 1, 3, 0},
    {"r18 3x3/2 256->512 @14", 256, 512, 14, 3, 2, 1, 1, 0},
    {"r18 1x1/2 256->512 @14", 256, 512, 14, 1, 2, 1, 1, 0},
    {"r18 3x3 512->512 @7", 512, 512, 7, 3, 1, 1, 3, 0},
    {"mb stem 3x3/2 3->32", 3, 32, 224, 3, 2, 1, 1, 0},
    {"mb dw 3x3 32 @112", 32, 32, 112, 3, 1, 32, 1, 0},
    {"mb pw 32->16 @112", 32, 16, 112, 1, 1, 1, 1, 0},
    {"mb pw 16->96 @112", 16, 96, 112, 1, 1, 1, 1, 0},
    {"mb dw 3x3/2 96 @112", 96, 96, 112, 3, 2, 96, 1, 0},
    {"mb pw 96->24 @56", 96, 24, 56, 1, 1, 1, 1, 0},
    {"mb pw 24->144 @56", 24, 144, 56, 1, 1, 1, 2, 0},
    {"mb dw 3x3 144 @56", 144, 144, 56, 3, 1, 144, 1, 0},
    {"mb pw 144->24 @56", 144, 24, 56, 1, 1, 1, 1, 0},
    {"mb dw 3x3/2 144 @56", 144, 144, 56, 3, 2, 144, 1, 0},
    {"mb pw 144->32 @28", 144, 32, 28, 1, 1, 1, 1, 0},
    {"mb pw 32->192 @28", 32, 192, 28, 1, 1, 1, 3, 0},
    {"mb dw 3x3 192 @28", 192, 192, 28, 3, 1, 192, 2, 0},
    {"mb pw 192->32 @28", 192, 32, 28, 1, 1, 1, 2, 0},
    {"mb dw 3x3/2 192 @28", 192, 192, 28, 3, 2, 192, 1, 0},
    {"mb pw 192->64 @14", 192, 64, 14, 1, 1, 1, 1, 0},
    {"mb pw 64->384 @14", 64, 384, 14, 1, 1, 1, 4, 0},
    {"mb dw 3x3 384 @14", 384, 384, 14, 3, 1, 384, 4, 0},
    {"mb pw 384->64 @14", 384, 64, 14, 1, 1, 1, 3, 0},
    {"mb pw 384->96 @14", 384, 96, 14, 1, 1, 1, 1, 0},
    {"mb pw 96->576 @14", 96, 576, 14, 1, 1, 1, 3, 0},
    {"mb dw 3x3 576 @14", 576, 576, 14, 3, 1, 576, 2, 0},
    {"mb pw 576->96 @14", 576, 96, 14, 1, 1, 1, 2, 0},
    {"mb dw 3x3/2 576 @14", 576, 576, 14, 3, 2, 576, 1, 0},
    {"mb pw 576->160 @7", 576, 160, 7, 1, 1, 1, 1, 0},
    {"mb pw 160->960 @7", 160, 960, 7, 1, 1, 1, 3, 0},
    {"mb dw 3x3 960 @7", 960, 960, 7, 3, 1, 960, 3, 0},
    {"mb pw 960->160 @7", 960, 160, 7, 1, 1, 1, 2, 0},
    {"mb pw 960->320 @7", 960, 320, 7, 1, 1, 1, 1, 0},
    {"mb pw 320->1280 @7", 320, 1280, 7, 1, 1, 1, 1, 0},
    /* The demo's 3x3 convs (examples/mnist.c, batch 512: run `bench_onnx_conv 512 demo`), no
     * padding, and the convs of their input gradients (gy padded by 2, the weight transposed). */
    {"demo c3 3x3 32->64 @10", 32, 64, 10, 3, 1, 1, 1, 1},
    {"demo c4 3x3 64->64 @8", 64, 64, 8, 3, 1, 1, 1, 1},
    {"demo dx4 3x3 64->64 @6", 64, 64, 6, 3, 1, 1, 1, 3},
    {"demo dx3 3x3 64->32 @8", 64, 32, 8, 3, 1, 1, 1, 3},
};

/* A realized float32 tensor of the shape, filled from a fixed LCG in [-1, 1). */
static tg_tensor *filled(const int64_t *shape, int nd, unsigned seed) {
  int64_t n = 1;
  for (int i = 0; i < nd; i++) n *= shape[i];
  float *v = malloc(sizeof(float) * (size_t)n);
  if (!v) return NULL;
  for (int64_t i = 0; i < n; i++) seed = seed * 1664525u + 1013904223u, v[i] = (float)(seed >> 8) / 8388608.0f - 1.0f;
  tg_tensor *t = tg_from_data(v, TG_FLOAT32, shape, nd);
  free(v);
  if (t && tg_realize(t) < 0) tg_free(t), t = NULL;
  return t;
}

static double cpu_now(void) {
  struct timespec t;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
  return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* Best kernel seconds of `reps` runs of the layer (after a compiling one); kernels per run;
 * *cpu: the best process CPU seconds of a run less its scheduling and lowering (with THREADS=1,
 * the kernels' own cost even when other processes take turns on the core). */
static double time_layer(const layer *l, tg_tensor *x, tg_tensor *w, tg_tensor *b, int reps, int *kernels, double *cpu) {
  double best = 1e30;
  *cpu = 1e30;
  int p = l->pad1 ? l->pad1 - 1 : l->k / 2, stride[2] = {l->stride, l->stride}, pad[2] = {p, p};
  for (int r = 0; r <= reps; r++) {
    tg_scope *s = tg_scope_begin();
    tg_reset_stats();
    double c0 = cpu_now();
    tg_tensor *y = tg_conv2d(x, w, getenv("NOBIAS") ? NULL : b, stride, pad, NULL, l->groups);
    if (!y || tg_realize(y) < 0) {
      fprintf(stderr, "%s: %s\n", l->name, tg_last_error());
      tg_scope_end(s);
      return -1;
    }
    tg_stats st = tg_get_stats();
    double c = cpu_now() - c0 - st.schedule_seconds - st.lower_seconds;
    if (r > 0 && st.kernel_seconds < best) best = st.kernel_seconds;
    if (r > 0 && c < *cpu) *cpu = c;
    *kernels = (int)st.kernels_run;
    tg_scope_end(s);
  }
  return best;
}

int main(int argc, char **argv) {
  int batch = argc > 1 ? atoi(argv[1]) : 1;
  const char *filter = argc > 2 ? argv[2] : "";
  if (batch < 1) return fprintf(stderr, "usage: %s [BATCH [FILTER]]\n", argv[0]), 2;
  printf("batch %d; best of the kernel times; GFLOPS = 2 * MACs / time, GB/s = (input + output bytes) / time\n", batch);
  printf("%-26s %3s %9s %8s %7s %9s %9s %9s\n", "layer", "k#", "ms", "GFLOPS", "GB/s", "x count", "total ms", "cpu ms");
  double total = 0, total_cpu = 0;
  for (size_t i = 0; i < sizeof layers / sizeof *layers; i++) {
    const layer *l = &layers[i];
    if (!strstr(l->name, filter)) continue;
    int64_t oh = (l->hw + 2 * (l->pad1 ? l->pad1 - 1 : l->k / 2) - l->k) / l->stride + 1;
    int64_t xs[4] = {batch, l->cin, l->hw, l->hw}, ws[4] = {l->cout, l->cin / l->groups, l->k, l->k}, bs[1] = {l->cout};
    tg_tensor *x = filled(xs, 4, 1), *w = filled(ws, 4, 2), *b = filled(bs, 1, 3);
    int kernels = 0;
    int64_t macs = (int64_t)batch * l->cout * oh * oh * (l->cin / l->groups) * l->k * l->k;
    double bytes = 4.0 * (double)batch * ((double)l->cin * l->hw * l->hw + (double)l->cout * oh * oh);
    int reps = getenv("REPS") ? atoi(getenv("REPS")) : macs > 2000000000LL ? 2 : 5;
    double cpu = 0, t = x && w && b ? time_layer(l, x, w, b, reps, &kernels, &cpu) : -1;
    tg_free(x), tg_free(w), tg_free(b);
    if (t < 0) continue;
    total += t * l->count, total_cpu += cpu * l->count;
    printf("%-26s %3d %9.3f %8.1f %7.1f %9d %9.2f %9.3f\n", l->name, kernels, 1e3 * t, 2.0 * (double)macs / t / 1e9,
           bytes / t / 1e9, l->count, 1e3 * t * l->count, 1e3 * cpu);
  }
  printf("total (each layer x count) %.1f ms, cpu %.1f ms\n", 1e3 * total, 1e3 * total_cpu);
  return 0;
}
