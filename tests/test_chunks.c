/* test_chunks.c — replays and plain realizes run chains of kernels group of images by group
 * (src/engine/chunks.c, docs/architecture.md "Chunks"): the same bits as kernel by kernel; a
 * kernel that reads a chained buffer across images (the batch flipped, a mean over the batch)
 * is not chained to it; buffers read only inside a chain live in scratch blocks (a group per thread);
 * CHUNKS=0 turns chunks off. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "tg_nn.h"
#include "device/device.h"
#include "runtime/threadpool.h"

enum { N = 16, C = 16, E = 48, H = 14 };

/* MobileNetV2's inverted residual block: 1x1 conv C -> E, relu6, depthwise 3x3, relu6, 1x1
 * conv E -> C, + x. ctx: the weights w1 (E, C, 1, 1), wd (E, 1, 3, 3), w2 (C, E, 1, 1). With
 * nout 2, also a second output that reads the block's result across images: flipped along
 * the batch (mode 1) or minus its mean over the batch (mode 2). */
typedef struct block_ctx {
  tg_tensor *w[3];
  int mode;
} block_ctx;

static tg_tensor *relu6(tg_tensor *x) { return tg_clip(x, 0, 6); }

static int block(void *ctx, tg_tensor *const *in, int nin, tg_tensor **out, int nout) {
  block_ctx *b = ctx;
  if (nin != 1 || nout != 1) return -1;
  tg_tensor *x = in[0];
  tg_tensor *e = relu6(tg_conv2d(x, b->w[0], NULL, NULL, NULL, NULL, 1));
  tg_tensor *d = relu6(tg_conv2d(e, b->w[1], NULL, NULL, (const int[]){1, 1}, NULL, E));
  tg_tensor *y = tg_add(tg_conv2d(d, b->w[2], NULL, NULL, NULL, NULL, 1), x);
  if (b->mode == 1) y = tg_conv2d(tg_flip(y, (const int[]){0}, 1), b->w[0], NULL, NULL, NULL, NULL, 1);
  if (b->mode == 2) y = tg_conv2d(tg_sub(y, tg_mean(y, (const int[]){0}, 1, true)), b->w[0], NULL, NULL, NULL, NULL, 1);
  out[0] = y;
  return 0;
}

static tg_tensor *seeded(const int64_t *shape, int nd, float scale) {
  tg_tensor *t = tg_mul_s(tg_randn(shape, nd, TG_FLOAT32), scale);
  CHECK(t && tg_realize(t) == 0);
  return t;
}

/* Whether chains can form: a host device, and kernels with a parallel axis (2+ threads). */
static bool chunks_possible(void) { return !device_is_gpu(device_default()) && threadpool_size() >= 2; }
static const char *why_not(void) { return device_is_gpu(device_default()) ? "the device runs kernels whole" : "one thread: kernels have no parallel axis"; }

/* The block's output for x computed kernel by kernel (CHUNKS=0, whatever the caller set). */
static void unchained(block_ctx *b, tg_tensor *x, float *y, size_t n) {
  const char *was = getenv("CHUNKS");
  char *saved = was ? strdup(was) : NULL;
  tg_tensor *o;
  setenv("CHUNKS", "0", 1);
  CHECK(block(b, &x, 1, &o, 1) == 0 && tg_to_host(o, y, n * 4) == 0);
  if (saved) setenv("CHUNKS", saved, 1);
  else unsetenv("CHUNKS");
  free(saved);
}

/* Five calls through the JIT against the block run kernel by kernel: equal bits; *parts: the
 * group calls the last replay ran, *peak: the most bytes in buffers during it. */
static void compare_peak(block_ctx *b, uint64_t *parts, uint64_t *peak) {
  tg_jit *jit = tg_jit_new(block, b);
  CHECK(jit != NULL);
  size_t n = (size_t)N * (b->mode ? E : C) * H * H;
  float *yj = malloc(n * 4), *yp = malloc(n * 4);
  CHECK(yj && yp);
  for (int call = 0; call < 5 && jit && yj && yp; call++) {
    tg_scope *s = tg_scope_begin();
    tg_tensor *x = seeded((int64_t[]){N, C, H, H}, 4, 1), *oj;
    unchained(b, x, yp, n);
    tg_reset_stats();
    CHECK(tg_jit_call(jit, &x, 1, &oj, 1) == 0);
    *parts = tg_get_stats().kernel_parts, *peak = tg_get_stats().bytes_peak;
    CHECK(tg_to_host(oj, yj, n * 4) == 0);
    CHECK(!memcmp(yj, yp, n * 4));
    tg_scope_end(s);
  }
  CHECK(tg_jit_replaying(jit));
  free(yj), free(yp);
  tg_jit_free(jit);
}

static void compare(block_ctx *b, uint64_t *parts) {
  uint64_t peak;
  compare_peak(b, parts, &peak);
}

static block_ctx weights(int mode) {
  tg_manual_seed(7);
  return (block_ctx){{seeded((int64_t[]){E, C, 1, 1}, 4, 0.25f), seeded((int64_t[]){E, 1, 3, 3}, 4, 0.3f),
                      seeded((int64_t[]){C, E, 1, 1}, 4, 0.15f)}, mode};
}

TEST(chunks_replay_matches_plain_calls) {
  tg_scope *s = tg_scope_begin();
  block_ctx b = weights(0);
  uint64_t parts = 0;
  compare(&b, &parts);
  if (chunks_possible()) CHECK(parts > 0);
  else printf("  skip the parts check: %s\n", why_not());
  tg_scope_end(s);
}

/* A plain realize (no JIT) runs its chains too: the same bits as kernel by kernel. */
TEST(chunks_plain_realize_chains_too) {
  tg_scope *s = tg_scope_begin();
  block_ctx b = weights(0);
  size_t n = (size_t)N * C * H * H;
  float *y = malloc(n * 4), *ref = malloc(n * 4);
  CHECK(y && ref);
  tg_tensor *x = seeded((int64_t[]){N, C, H, H}, 4, 1), *o;
  unchained(&b, x, ref, n);
  tg_reset_stats();
  CHECK(block(&b, &x, 1, &o, 1) == 0 && tg_to_host(o, y, n * 4) == 0);
  if (chunks_possible()) CHECK(tg_get_stats().kernel_parts > 0);
  else printf("  skip the parts check: %s\n", why_not());
  CHECK(!memcmp(y, ref, n * 4));
  free(y), free(ref);
  tg_scope_end(s);
}

/* A flip of the batch or a mean over it reads the block's output across images: those kernels
 * run after the chain's last chunk (the values prove it: a chunk would read images not
 * computed yet). */
TEST(chunks_reads_across_images_wait_for_the_chain) {
  tg_scope *s = tg_scope_begin();
  for (int mode = 1; mode <= 2; mode++) {
    block_ctx b = weights(mode);
    uint64_t parts = 0;
    compare(&b, &parts);
  }
  tg_scope_end(s);
}

/* The block's expanded and depthwise outputs (N x E x H x H floats each) are read only inside
 * the chain: they live in scratch blocks (a group of images per thread), not in buffers of the
 * batch. */
TEST(chunks_inner_buffers_live_in_scratch_blocks) {
  if (!chunks_possible()) SKIP("%s", why_not());
  if (threadpool_size() > 4) SKIP("%d threads: their scratch blocks hold half the test's batch or more", threadpool_size());
  tg_scope *s = tg_scope_begin();
  block_ctx b = weights(0);
  uint64_t parts, peak, peak_whole;
  compare_peak(&b, &parts, &peak);
  setenv("CHUNK_SCRATCH", "0", 1);
  compare_peak(&b, &parts, &peak_whole);
  unsetenv("CHUNK_SCRATCH");
  uint64_t inner = (uint64_t)N * E * H * H * 4;
  CHECK(parts > 0);
  CHECK(peak + inner <= peak_whole); /* two of them, each at most half a batch as scratch */
  tg_scope_end(s);
}

/* Two blocks, each ending in a projection with a residual: a chain of up to four kernels ends
 * after the first projection (its output is small, and kept for the second residual anyway),
 * not after the second block's expansion. Seen in the peak memory with every output in a batch
 * buffer (CHUNK_SCRATCH=0, so that it does not depend on the threads): a chain holds its
 * buffers until its end, two expanded ones (and the projections') per block, three had it taken
 * the second expansion in. */
enum { N2 = 32, C2 = 8, E2 = 48, H2 = 14 };

static int two_blocks(void *ctx, tg_tensor *const *in, int nin, tg_tensor **out, int nout) {
  tg_tensor **w = ctx;
  if (nin != 1 || nout != 1) return -1;
  tg_tensor *x = in[0];
  for (int b = 0; b < 2; b++) {
    tg_tensor *e = relu6(tg_conv2d(x, w[0], NULL, NULL, NULL, NULL, 1));
    tg_tensor *d = relu6(tg_conv2d(e, w[1], NULL, NULL, (const int[]){1, 1}, NULL, E2));
    x = tg_add(tg_conv2d(d, w[2], NULL, NULL, NULL, NULL, 1), x);
  }
  out[0] = x;
  return 0;
}

TEST(chunks_chain_ends_where_the_output_is_small) {
  if (!chunks_possible()) SKIP("%s", why_not());
  tg_scope *s = tg_scope_begin();
  tg_manual_seed(3);
  tg_tensor *w[3] = {seeded((int64_t[]){E2, C2, 1, 1}, 4, 0.3f), seeded((int64_t[]){E2, 1, 3, 3}, 4, 0.3f),
                     seeded((int64_t[]){C2, E2, 1, 1}, 4, 0.15f)};
  tg_jit *jit = tg_jit_new(two_blocks, w);
  uint64_t grew = 0, expanded = (uint64_t)N2 * E2 * H2 * H2 * 4;
  setenv("CHUNK_SCRATCH", "0", 1);
  for (int call = 0; call < 4 && jit; call++) {
    tg_scope *c = tg_scope_begin();
    tg_tensor *x = seeded((int64_t[]){N2, C2, H2, H2}, 4, 1), *y;
    tg_reset_stats();
    uint64_t before = tg_get_stats().bytes_alive;
    CHECK(tg_jit_call(jit, &x, 1, &y, 1) == 0);
    grew = tg_get_stats().bytes_peak - before;
    tg_scope_end(c);
  }
  unsetenv("CHUNK_SCRATCH");
  CHECK(jit && tg_jit_replaying(jit));
  CHECK(grew < 3 * expanded);
  tg_jit_free(jit);
  tg_scope_end(s);
}

TEST(chunks_env_knob_turns_them_off) {
  tg_scope *s = tg_scope_begin();
  block_ctx b = weights(0);
  uint64_t parts = 1;
  setenv("CHUNKS", "0", 1);
  compare(&b, &parts);
  unsetenv("CHUNKS");
  CHECK(parts == 0);
  tg_scope_end(s);
}
