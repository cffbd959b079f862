/* test_stream.c — streaming stores (lower.c vector_access, docs/optimizer.md "Streaming
 * stores"): on a host device, an aligned, unmasked vector store to a buffer larger than the
 * device's last-level cache (kshape.stream_bytes, from caps.llc_bytes) is marked streaming;
 * the LLVM renderer writes it !nontemporal and ends the kernel with a fence. Here the
 * threshold is lowered through the program hook (kernels built uncached with that state), so
 * small tensors take the streaming path: the values must equal naive loops, on every thread
 * count the pool has, and a threshold of 0 marks nothing. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "harness.h"
#include "codegen/codegen.h"
#include "device/device.h"
#include "tensor/tensor.h"
#include "tg_nn.h"

typedef struct stream_ctx {
  int64_t stream_bytes;
  int kernels, streaming, fences;
} stream_ctx;

static int count_of(const char *s, const char *what) {
  int n = 0;
  for (const char *p = s; p && (p = strstr(p, what)); p += strlen(what)) n++;
  return n;
}

static int hook(uop *ast, kshape *ks, void *ctx) {
  stream_ctx *c = ctx;
  kshape_optimize(ks, ast, &device_default()->caps);
  ks->stream_bytes = c->stream_bytes;
  program *p = program_build(device_default(), ast, ks);
  if (!p) return -1;
  c->kernels++;
  c->streaming += count_of(p->src, "!nontemporal");
  c->fences += count_of(p->src, "fence seq_cst");
  program_free(p);
  return 0;
}

static bool llvm_device(void) { return device_default() == device_get("LLVM"); }

/* y = 2x + 1 and softmax over rows of 320 (whole vectors), against naive loops. */
static void run_and_check(stream_ctx *c) {
  enum { ROWS = 64, COLS = 320 };
  float *x = malloc(sizeof(float) * ROWS * COLS), *y = malloc(sizeof(float) * ROWS * COLS);
  CHECK(x && y);
  if (!x || !y) { free(x), free(y); return; }
  for (int i = 0; i < ROWS * COLS; i++) x[i] = (float)((i * 37) % 101 - 50) * 0.05f;
  program_set_opt_hook(hook, c);
  tg_scope *s = tg_scope_begin();
  tg_tensor *t = tg_from_data(x, TG_FLOAT32, (int64_t[]){ROWS, COLS}, 2);
  CHECK(tg_to_host(tg_add(tg_mul(t, tg_scalar(2.0, TG_FLOAT32)), tg_scalar(1.0, TG_FLOAT32)), y, sizeof(float) * ROWS * COLS) == 0);
  int bad = 0;
  for (int i = 0; i < ROWS * COLS; i++) bad += y[i] != 2 * x[i] + 1;
  CHECK(bad == 0);
  CHECK(tg_to_host(tg_softmax(t, -1), y, sizeof(float) * ROWS * COLS) == 0);
  double worst = 0;
  for (int r = 0; r < ROWS; r++) {
    const float *row = x + r * COLS;
    double m = row[0], sum = 0;
    for (int k = 1; k < COLS; k++) m = row[k] > m ? row[k] : m;
    for (int k = 0; k < COLS; k++) sum += exp((double)row[k] - m);
    for (int k = 0; k < COLS; k++) worst = fmax(worst, fabs(y[r * COLS + k] - exp((double)row[k] - m) / sum));
  }
  CHECK(worst < 1e-6);
  tg_scope_end(s);
  program_set_opt_hook(NULL, NULL);
  free(x), free(y);
}

TEST(stream_stores_past_a_small_threshold) {
  if (device_default() && device_is_gpu(device_default())) SKIP("streaming stores are for host devices");
  stream_ctx c = {.stream_bytes = 4096};
  run_and_check(&c);
  CHECK(c.kernels >= 2);
  if (llvm_device()) { /* the C renderer leaves the hint out: values only */
    CHECK(c.streaming >= 2 && c.fences >= 2);
    if (c.streaming < 2) printf("  %d kernels, %d streaming stores, %d fences\n", c.kernels, c.streaming, c.fences);
  }
  stream_ctx none = {.stream_bytes = 0};
  run_and_check(&none);
  CHECK(none.streaming == 0 && none.fences == 0);
}

/* The device's own threshold is its last-level cache (0 where the host does not say). */
TEST(stream_threshold_is_the_last_level_cache) {
  const device *d = device_default();
  if (!d || device_is_gpu(d)) SKIP("streaming stores are for host devices");
  CHECK(d->caps.llc_bytes >= 0);
  if (d->caps.llc_bytes) CHECK(d->caps.llc_bytes >= d->caps.l2_bytes);
  printf("  L2 %lld bytes, last-level cache %lld bytes\n", (long long)d->caps.l2_bytes, (long long)d->caps.llc_bytes);
}

/* A register tile stores many vectors a step (a matmul's rows): those stream only where one
 * vector is a whole 64-byte line (AVX-512's 16 floats), which needs no write-combining across
 * stores; half lines (AVX2's 8 floats) from a dozen rows at once ran slower streamed
 * (docs/optimizer.md "Streaming stores"). Values against a naive loop either way. */
TEST(stream_tiled_stores_only_whole_lines) {
  const device *d = device_default();
  if (!d || device_is_gpu(d)) SKIP("streaming stores are for host devices");
  enum { M = 48, K = 24, N = 256 };
  float *a = malloc(sizeof(float) * M * K), *b = malloc(sizeof(float) * K * N), *y = malloc(sizeof(float) * M * N);
  CHECK(a && b && y);
  if (!a || !b || !y) { free(a), free(b), free(y); return; }
  for (int i = 0; i < M * K; i++) a[i] = (float)((i * 7) % 13 - 6);
  for (int i = 0; i < K * N; i++) b[i] = (float)((i * 5) % 11 - 5);
  stream_ctx c = {.stream_bytes = 4096};
  program_set_opt_hook(hook, &c);
  tg_scope *s = tg_scope_begin();
  tg_tensor *ta = tg_from_data(a, TG_FLOAT32, (int64_t[]){M, K}, 2), *tb = tg_from_data(b, TG_FLOAT32, (int64_t[]){K, N}, 2);
  CHECK(ta && tb && tg_realize(ta) == 0 && tg_realize(tb) == 0);
  c.kernels = c.streaming = c.fences = 0;
  CHECK(tg_to_host(tg_matmul(ta, tb), y, sizeof(float) * M * N) == 0);
  int bad = 0;
  for (int i = 0; i < M; i++)
    for (int j = 0; j < N; j++) {
      float want = 0;
      for (int k = 0; k < K; k++) want += a[i * K + k] * b[k * N + j];
      bad += y[i * N + j] != want;
    }
  CHECK(bad == 0);
  tg_scope_end(s);
  program_set_opt_hook(NULL, NULL);
  if (llvm_device()) {
    bool whole_lines = caps_lanes(&d->caps, 4) * 4 >= 64;
    CHECK(whole_lines ? c.streaming > 2 : c.streaming == 0);
    printf("  %d kernels, %d streaming stores (%d-byte vectors)\n", c.kernels, c.streaming, caps_lanes(&d->caps, 4) * 4);
  }
  free(a), free(b), free(y);
}
