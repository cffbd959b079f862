/* test_tc.c — tensor cores: the TC action (src/codegen/opt.c), its lowering to WMMA (lower.c)
 * and the renderers (render/c.c, render/ptx.c). docs/optimizer.md, "Tensor cores".
 *
 * Where the device has tensor cores (DEV=CL with TC_EMULATE=1: the WMMA emulated through local
 * memory, each fragment element placed where the PTX ISA puts it for its lane; DEV=CUDA on a
 * GPU): float16 and bfloat16 matmuls (sizes multiple of the tile and not, batched) and a conv
 * through TC against naive C loops. Inputs are multiples of 1/4 in [-1, 1] and K <= 64, so
 * every product and partial sum is exact in float32 and the result exact in float16: the
 * comparison is exact, whatever the order of the sums (a misplaced fragment element is not).
 * Everywhere: TC refused with an error on a float32 matmul, on a sum, and on a device without
 * the capability; with NVRTC and ptxas, a TC kernel as the CUDA device builds it compiles for
 * sm_90 (CUDA C with inline mma.sync, and PTX). */
#include <stdlib.h>
#include "harness.h"
#include "codegen/codegen.h"
#include "device/cuda.h"
#include "device/device.h"
#include "tensor/tensor.h"
#include "uop/dtype.h"

/* An H100's capabilities with its tensor cores (as src/device/cuda.c reports them on sm_80+). */
static const device_caps gpu_caps = {.vector_bytes = 16, .vector_registers = 16, .l2_bytes = 50 << 20, .threads = 1,
                                     .local_bytes = 48 << 10, .max_local_size = 1024, .warp = 32, .tc = TC_M16N8K16};

static bool device_has_tc(void) { return device_default() && device_default()->caps.tc; }

#define NEED_TC()                                                                                          \
  do {                                                                                                     \
    if (!device_has_tc())                                                                                  \
      SKIP("%s has no tensor cores (DEV=CL TC_EMULATE=1 emulates them; DEV=CUDA needs a GPU)",            \
           device_default() ? device_default()->name : "no device");                                      \
  } while (0)

/* Values k/4 in [-1, 1], deterministic. */
static void fill_quarters(float *x, int64_t n, uint32_t seed) {
  for (int64_t i = 0; i < n; i++) {
    seed = seed * 1664525u + 1013904223u;
    x[i] = (float)((int)(seed >> 24) % 9 - 4) / 4.0f;
  }
}

static tg_tensor *tensor_of(const float *x, const int64_t *shape, int nd, tg_dtype dt) {
  tg_scope *s = tg_scope_begin();
  tg_tensor *t = tg_keep(tg_cast(tg_from_data(x, TG_FLOAT32, shape, nd), dt));
  tg_scope_end(s);
  tg_realize(t);
  return t;
}

/* Hook: the heuristics, recording whether a kernel got TC. */
typedef struct tc_seen {
  int kernels, tc;
  char opts[256];
} tc_seen;

static int heuristics_seen(uop *ast, kshape *ks, void *ctx) {
  tc_seen *s = ctx;
  kshape_optimize(ks, ast, &device_default()->caps);
  s->kernels++;
  if (ks->tc) s->tc++, kshape_describe(ks, s->opts, sizeof s->opts);
  return 0;
}

/* Hook: TC(0) and the K loop unrolled by 2 (two WMMAs per REDUCE: the renderers add D to the
 * accumulators themselves instead of letting the mma do it). */
static int tc_unrolled(uop *ast, kshape *ks, void *ctx) {
  (void)ast;
  tc_seen *s = ctx;
  s->kernels++;
  kshape t = *ks;
  if (kshape_apply(&t, (opt_action){OPT_TC, 0, TC_M16N8K16}) < 0) { tg_clear_error(); return 0; }
  for (int i = 0; i < t.nax; i++)
    if (t.ax[i].kind == AX_REDUCE && kshape_apply(&t, (opt_action){OPT_UNROLL, i, 2}) == 0) break;
  tg_clear_error();
  *ks = t;
  s->tc++, kshape_describe(ks, s->opts, sizeof s->opts);
  return 0;
}

static opt_hook_fn matmul_hook = heuristics_seen;

/* y = a @ b for a (batch, n, k) and b (k, m) of dt (float16: through tg_matmul, a float16
 * result; bfloat16: casts to float32 first, a float32 result), realized with the heuristics;
 * every element against the naive loop, exactly. */
static void check_matmul(tg_dtype dt, int64_t batch, int64_t n, int64_t k, int64_t m) {
  int64_t na = batch * n * k, nb = k * m, nc = batch * n * m;
  float *a = malloc(sizeof(float) * (size_t)na), *b = malloc(sizeof(float) * (size_t)nb), *c = malloc(sizeof(float) * (size_t)nc);
  fill_quarters(a, na, 7), fill_quarters(b, nb, 11);
  int64_t sa[3] = {batch, n, k}, sb[2] = {k, m};
  tg_tensor *ta = batch > 1 ? tensor_of(a, sa, 3, dt) : tensor_of(a, sa + 1, 2, dt), *tb = tensor_of(b, sb, 2, dt);
  tc_seen seen = {0};
  program_set_opt_hook(matmul_hook, &seen);
  tg_scope *s = tg_scope_begin();
  tg_tensor *y = dt == TG_FLOAT16 ? tg_matmul(ta, tb) : tg_matmul(tg_cast(ta, TG_FLOAT32), tg_cast(tb, TG_FLOAT32));
  int rc = y ? tg_to_host(tg_cast(y, TG_FLOAT32), c, sizeof(float) * (size_t)nc) : -1;
  tg_scope_end(s);
  program_set_opt_hook(NULL, NULL);
  CHECK(rc == 0);
  if (rc) printf("  %s\n", tg_last_error());
  CHECK(seen.tc == 1);
  printf("  %s %lldx%lldx%lldx%lld: %s\n", dtype_table[dt].name, (long long)batch, (long long)n, (long long)k, (long long)m, seen.opts);
  int bad = 0;
  for (int64_t p = 0; rc == 0 && p < batch; p++)
    for (int64_t i = 0; i < n; i++)
      for (int64_t j = 0; j < m; j++) {
        float ref = 0;
        for (int64_t q = 0; q < k; q++) ref += a[(p * n + i) * k + q] * b[q * m + j];
        float got = c[(p * n + i) * m + j];
        if (got != ref && bad++ < 4) printf("  [%lld,%lld,%lld] = %g, expected %g\n", (long long)p, (long long)i, (long long)j, got, ref);
      }
  CHECK(bad == 0);
  tg_free(ta), tg_free(tb);
  free(a), free(b), free(c);
}

TEST(tc_half_matmul_matches_naive) {
  NEED_TC();
  check_matmul(TG_FLOAT16, 1, 32, 32, 16); /* whole tiles */
  check_matmul(TG_FLOAT16, 1, 64, 64, 32); /* 2x2 WMMAs per warp */
  check_matmul(TG_FLOAT16, 1, 20, 40, 12); /* padded: 32 x 48 x 16 */
}

TEST(tc_bfloat16_matmul_matches_naive) {
  NEED_TC();
  check_matmul(TG_BFLOAT16, 1, 64, 64, 32);
  check_matmul(TG_BFLOAT16, 1, 17, 24, 9);
}

TEST(tc_batched_matmul_matches_naive) {
  NEED_TC();
  check_matmul(TG_FLOAT16, 3, 16, 32, 8);
}

TEST(tc_unrolled_k_matches_naive) {
  NEED_TC();
  matmul_hook = tc_unrolled;
  check_matmul(TG_FLOAT16, 1, 32, 64, 16);
  matmul_hook = heuristics_seen;
}

/* A float16 3x3 conv (padding 1) through TC: M along the output row, N the output channels,
 * K the input channels (kh, kw stay loops); against the naive loop. */
TEST(tc_conv_matches_naive) {
  NEED_TC();
  enum { B = 2, CI = 16, CO = 8, H = 16, W = 16 };
  float *x = malloc(sizeof(float) * B * CI * H * W), *w = malloc(sizeof(float) * CO * CI * 9), *y = malloc(sizeof(float) * B * CO * H * W);
  fill_quarters(x, B * CI * H * W, 3), fill_quarters(w, CO * CI * 9, 5);
  tg_tensor *tx = tensor_of(x, (const int64_t[]){B, CI, H, W}, 4, TG_FLOAT16), *tw = tensor_of(w, (const int64_t[]){CO, CI, 3, 3}, 4, TG_FLOAT16);
  tc_seen seen = {0};
  program_set_opt_hook(heuristics_seen, &seen);
  tg_scope *s = tg_scope_begin();
  tg_tensor *t = tg_conv2d(tx, tw, NULL, (const int[]){1, 1}, (const int[]){1, 1}, NULL, 1);
  int rc = t ? tg_to_host(tg_cast(t, TG_FLOAT32), y, sizeof(float) * B * CO * H * W) : -1;
  tg_scope_end(s);
  program_set_opt_hook(NULL, NULL);
  CHECK(rc == 0);
  CHECK(seen.tc == 1);
  printf("  conv: %s\n", seen.opts);
  int bad = 0;
  for (int b = 0; rc == 0 && b < B; b++)
    for (int o = 0; o < CO; o++)
      for (int i = 0; i < H; i++)
        for (int j = 0; j < W; j++) {
          float ref = 0;
          for (int c = 0; c < CI; c++)
            for (int p = 0; p < 3; p++)
              for (int q = 0; q < 3; q++) {
                int r = i + p - 1, u = j + q - 1;
                if (r >= 0 && r < H && u >= 0 && u < W) ref += x[((b * CI + c) * H + r) * W + u] * w[((o * CI + c) * 3 + p) * 3 + q];
              }
          float got = y[((b * CO + o) * H + i) * W + j];
          if (got != ref && bad++ < 4) printf("  y[%d,%d,%d,%d] = %g, expected %g\n", b, o, i, j, got, ref);
        }
  CHECK(bad == 0);
  tg_free(tx), tg_free(tw);
  free(x), free(w), free(y);
}

/* The kernel AST tg_matmul makes on a work-group device for a (n, k) @ (k, m) of dt (operands
 * cast to float32, broadcast, multiplied, summed over k, cast back); sum: the row sums of x
 * instead (a reduction that is no product). */
static uop *matmul_ast(tg_dtype dt, int64_t n, int64_t k, int64_t m, bool sum) {
  tg_dtype acc = dtype_is_half(dt) ? TG_FLOAT32 : dt;
  uop *x = uop_new(OP_PARAM, dt, NULL, 0, (int64_t[]){1, n, k}, 3), *y = uop_new(OP_PARAM, dt, NULL, 0, (int64_t[]){2, k, m}, 3);
  x = uop_new(OP_RESHAPE, acc, (uop *[]){uop_new1(OP_CAST, acc, x)}, 1, (int64_t[]){n, 1, k}, 3);
  x = uop_new(OP_EXPAND, acc, &x, 1, (int64_t[]){n, m, k}, 3);
  y = uop_new(OP_PERMUTE, acc, (uop *[]){uop_new1(OP_CAST, acc, y)}, 1, (int64_t[]){1, 0}, 2);
  y = uop_new(OP_EXPAND, acc, (uop *[]){uop_new(OP_RESHAPE, acc, &y, 1, (int64_t[]){1, m, k}, 3)}, 1, (int64_t[]){n, m, k}, 3);
  uop *p = sum ? uop_new2(OP_ADD, acc, x, x) : uop_new2(OP_MUL, acc, x, y);
  uop *r = uop_new1(OP_CAST, dt, uop_new(OP_REDUCE_AXIS, acc, &p, 1, (int64_t[]){OP_ADD, 2}, 2));
  return uop_new(OP_SINK, dt, &r, 1, (int64_t[]){n, m, 1}, 3);
}

/* TC(0) on the kernel's state for a work-group device with tensor cores (caps_tc) or without:
 * 0, or the error with its message in why. */
static int try_tc(uop *ast, int caps_tc, char *why, size_t n) {
  kshape ks;
  device_caps caps = gpu_caps;
  caps.tc = caps_tc;
  if (kshape_init(&ks, ast) < 0) return -1;
  kshape_use_workgroups(&ks, &caps);
  int rc = kshape_apply(&ks, (opt_action){OPT_TC, 0, TC_M16N8K16});
  snprintf(why, n, "%s", rc < 0 ? tg_last_error() : "");
  tg_clear_error();
  return rc;
}

TEST(tc_refused_on_float32_matmul) {
  size_t mark = uop_pool_mark();
  char why[256];
  CHECK(try_tc(matmul_ast(TG_FLOAT32, 32, 32, 32, false), TC_M16N8K16, why, sizeof why) < 0);
  CHECK(strstr(why, "not a float32 sum of products of float16 or bfloat16") != NULL);
  printf("  %s\n", why);
  uop_pool_release(mark);
}

TEST(tc_refused_on_a_sum) {
  size_t mark = uop_pool_mark();
  char why[256];
  CHECK(try_tc(matmul_ast(TG_FLOAT16, 32, 32, 32, true), TC_M16N8K16, why, sizeof why) < 0);
  CHECK(strstr(why, "not a float32 sum of products") != NULL);
  uop_pool_release(mark);
}

TEST(tc_refused_without_the_capability) {
  size_t mark = uop_pool_mark();
  char why[256];
  uop *ast = matmul_ast(TG_FLOAT16, 32, 32, 32, false);
  CHECK(try_tc(ast, 0, why, sizeof why) < 0);
  CHECK(strstr(why, "no tensor cores") != NULL);
  printf("  %s\n", why);
  CHECK(try_tc(ast, TC_M16N8K16, why, sizeof why) == 0); /* the same kernel with them: accepted */
  kshape host; /* a host state (no work-groups) never has them */
  CHECK(kshape_init(&host, ast) == 0);
  CHECK(kshape_apply(&host, (opt_action){OPT_TC, 0, TC_M16N8K16}) < 0);
  tg_clear_error();
  CHECK(try_tc(matmul_ast(TG_FLOAT16, 20, 32, 32, false), TC_M16N8K16, why, sizeof why) < 0); /* 20 rows: PADTO first */
  CHECK(strstr(why, "not a multiple of 16") != NULL);
  uop_pool_release(mark);
}

/* On a state with tensor cores, TC is among the candidates (the random sequences of test_opt.c
 * draw from them), and each triple's action applies. */
TEST(tc_is_a_candidate) {
  size_t mark = uop_pool_mark();
  kshape ks;
  uop *ast = matmul_ast(TG_BFLOAT16, 32, 32, 16, false);
  CHECK(kshape_init(&ks, ast) == 0);
  kshape_use_workgroups(&ks, &gpu_caps);
  CHECK(ks.ntc_cand == 2); /* rows x columns, and the transposed tiling */
  opt_action cand[512];
  int n = kshape_candidates(&ks, cand, 512), tc = 0;
  for (int i = 0; i < n; i++) {
    if (cand[i].kind != OPT_TC) continue;
    kshape t = ks;
    CHECK(kshape_apply(&t, cand[i]) == 0 && t.tc == TC_M16N8K16);
    tc++;
  }
  CHECK(tc == ks.ntc_cand);
  uop_pool_release(mark);
}

/* A kernel as the CUDA device with tensor cores builds it (the heuristics on an H100 state),
 * rendered as CUDA C and PTX for sm_90: NVRTC and ptxas accept both, both hold mma.sync, and
 * the mma accumulates in place (no float adds left); PTX for sm_75 is refused (m16n8k16 needs
 * sm_80). */
static void check_offline(uop *ast, const char *name) {
  static const vector_forms scalar = {NULL};
  kshape g;
  kernel_info info = {0};
  CHECK(kshape_init(&g, ast) == 0);
  kshape_use_workgroups(&g, &gpu_caps);
  kshape_optimize(&g, ast, &gpu_caps);
  char opts[256];
  kshape_describe(&g, opts, sizeof opts);
  printf("  %s: %s\n", name, opts);
  CHECK(g.tc == TC_M16N8K16);
  uop *sink = lower_kernel(ast, &g, STAGE_ONLY, &info);
  if (sink) sink = devectorize(sink, &scalar);
  lin_program lin = {0};
  CHECK(sink && linearize(sink, &lin, &info) == 0 && program_spec_check(&lin) == 0);
  char *cu = render_cuda(&lin, 1, &name), *ptx = render_ptx(&lin, 1, &name, 90), *cubin = NULL;
  size_t len = 0;
  CHECK(cu && strstr(cu, "mma.sync.aligned.m16n8k16.row.col.f32."));
  CHECK(ptx && strstr(ptx, "mma.sync.aligned.m16n8k16.row.col.f32."));
  CHECK(ptx && !strstr(ptx, "add.f32")); /* the mma adds into the accumulators itself (lin_wmma_accs) */
  CHECK(cu && cuda_nvrtc_cubin(cu, "sm_90", &name, &cubin, &len) == 0 && len > 0);
  if (tg_last_error()[0]) printf("  NVRTC: %s\n", tg_last_error());
  tg_clear_error();
  CHECK(ptx && cuda_ptxas_check(ptx, "sm_90", name) == 0);
  if (tg_last_error()[0]) printf("  ptxas: %s\n", tg_last_error());
  tg_clear_error();
  char *old = render_ptx(&lin, 1, &name, 75);
  CHECK(!old && strstr(tg_last_error(), "sm_80"));
  tg_clear_error();
  free(old), free(cu), free(ptx), free(cubin), free(lin.ops);
}

TEST(tc_kernels_pass_nvrtc_and_ptxas) {
  if (!cuda_nvrtc_available() || !cuda_ptxas_available()) {
    char why[512];
    snprintf(why, sizeof why, "%s", tg_last_error());
    tg_clear_error();
    SKIP("NVRTC or ptxas is not available here: %s", why);
  }
  size_t mark = uop_pool_mark();
  check_offline(matmul_ast(TG_FLOAT16, 64, 64, 32, false), "r_tc_f16");
  check_offline(matmul_ast(TG_BFLOAT16, 48, 40, 24, false), "r_tc_bf16"); /* padded */
  uop_pool_release(mark);
}
