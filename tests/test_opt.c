/* test_opt.c — the kernel optimizer (src/codegen/opt.c) and the code it leads to.
 *
 * A set of kernels (matmul of odd sizes, conv2d, sums and maxes over each axis, broadcasts,
 * softmax, comparisons, int and float16 math, float16 and bfloat16 matmuls, sizes 1, 7, 129)
 * is run unoptimized (the reference) and then under many seeded random sequences of valid
 * actions, under explicit sequences (GROUP, PADTO, vector lanes), and under the default
 * heuristics; all must agree. Invalid actions must be refused with an error, and so must
 * actions over a work-group device's limits (work-items, local memory). On a work-group device
 * (DEV=CL) the random sequences include LOCAL and the work-group GROUP/GROUPTOP, and TC where
 * it has tensor cores (TC_EMULATE=1). The thread pool must cover every
 * iteration exactly once. */
#include <math.h>
#include <stdatomic.h>
#include <stdlib.h>
#include "harness.h"
#include "kernel_ast.h"
#include "codegen/codegen.h"
#include "device/device.h"
#include "runtime/threadpool.h"
#include "tensor/tensor.h"
#include "uop/dtype.h"

/* ------------------------------------------------------------ kernels under test */

typedef tg_tensor *(*builder)(tg_tensor **in);

typedef struct opt_case {
  const char *name;
  builder fn;
  int nin;
  tg_dtype dt;
  int nd[3];
  int64_t shape[3][4];
} opt_case;

static const int AX0[] = {0}, AX1[] = {1}, AX2[] = {2}, AXL[] = {-1};

static tg_tensor *b_matmul(tg_tensor **in) { return tg_matmul(in[0], in[1]); }
static tg_tensor *b_relu_linear(tg_tensor **in) { return tg_relu(tg_add(tg_matmul(in[0], in[1]), in[2])); }
/* GGUF's layout: W (out, in) row-major, y = x W^T + b + residual (GPT-2's projections) */
static tg_tensor *b_rows_matvec(tg_tensor **in) {
  return tg_add(tg_add(tg_matmul(in[0], tg_transpose(in[1], 0, 1)), in[2]), in[3]);
}
static tg_tensor *b_sum0(tg_tensor **in) { return tg_sum(in[0], AX0, 1, false); }
static tg_tensor *b_sum1(tg_tensor **in) { return tg_sum(in[0], AX1, 1, true); }
static tg_tensor *b_sum2(tg_tensor **in) { return tg_sum(in[0], AX2, 1, false); }
static tg_tensor *b_sum_all(tg_tensor **in) { return tg_sum(in[0], NULL, 0, false); }
static tg_tensor *b_max1(tg_tensor **in) { return tg_max(in[0], AX1, 1, false); }
static tg_tensor *b_bcast(tg_tensor **in) { return tg_mul(tg_add(in[0], in[1]), tg_sub_s(in[0], 0.5)); }
static tg_tensor *b_softmax(tg_tensor **in) { return tg_softmax(in[0], -1); }
static tg_tensor *b_where(tg_tensor **in) { return tg_where(tg_gt(in[0], in[1]), in[0], tg_neg(in[1])); }
static tg_tensor *b_mean_sq(tg_tensor **in) { return tg_mean(tg_square(in[0]), AXL, 1, false); }
static tg_tensor *b_two_sums(tg_tensor **in) { return tg_add(tg_sum(in[0], AX1, 1, false), tg_max(in[0], AX1, 1, false)); }
static tg_tensor *b_conv(tg_tensor **in) {
  return tg_conv2d(in[0], in[1], NULL, (const int[]){1, 1}, (const int[]){1, 1}, NULL, 1);
}
static tg_tensor *b_conv_grad_w(tg_tensor **in) { /* the weight gradient: a conv-shaped reduction over N, H, W */
  tg_tensor *y = tg_conv2d(in[0], in[1], NULL, (const int[]){1, 1}, (const int[]){0, 0}, NULL, 1);
  tg_tensor *w = NULL;
  tg_tensor *g = tg_mul(y, in[2]);
  tg_tensor *loss = tg_sum(g, NULL, 0, false);
  if (tg_gradient(loss, &in[1], 1, &w) < 0) return NULL;
  return w;
}

static tg_tensor *b_conv_valid(tg_tensor **in) { return tg_conv2d(in[0], in[1], NULL, NULL, NULL, NULL, 1); }
static tg_tensor *b_depthwise(tg_tensor **in) { /* 3x3, padding 1, a group per channel */
  return tg_conv2d(in[0], in[1], NULL, NULL, (const int[]){1, 1}, NULL, tg_dim(in[0], 1));
}
static tg_tensor *b_conv_grad_x(tg_tensor **in) { /* the input gradient: a padded transposed conv */
  tg_tensor *y = tg_conv2d(in[0], in[1], NULL, NULL, NULL, NULL, 1), *x = NULL;
  tg_tensor *loss = tg_sum(tg_mul(y, in[2]), NULL, 0, false);
  if (tg_gradient(loss, &in[0], 1, &x) < 0) return NULL;
  return x;
}

#define S1(a) {a}
static const opt_case cases[] = {
    {"matmul_7x129x16", b_matmul, 2, TG_FLOAT32, {2, 2}, {{7, 129}, {129, 16}}},
    {"matmul_16x16x32", b_matmul, 2, TG_FLOAT32, {2, 2}, {{16, 32}, {32, 16}}},
    {"matmul_1x33x1", b_matmul, 2, TG_FLOAT32, {2, 2}, {{1, 33}, {33, 1}}},
    {"matmul_batched", b_matmul, 2, TG_FLOAT32, {3, 2}, {{2, 5, 7}, {7, 9}}},
    {"matmul_int32", b_matmul, 2, TG_INT32, {2, 2}, {{8, 12}, {12, 6}}},
    {"matmul_f64", b_matmul, 2, TG_FLOAT64, {2, 2}, {{8, 10}, {10, 16}}},
    {"relu_linear", b_relu_linear, 3, TG_FLOAT32, {2, 2, 1}, {{12, 20}, {20, 32}, {32}}},
    {"sum_axis0", b_sum0, 1, TG_FLOAT32, {3}, {{7, 129, 5}}},
    {"sum_axis1", b_sum1, 1, TG_FLOAT32, {3}, {{7, 129, 5}}},
    {"sum_axis2", b_sum2, 1, TG_FLOAT32, {3}, {{7, 5, 129}}},
    {"sum_all", b_sum_all, 1, TG_FLOAT32, {2}, {{40, 64}}},
    {"sum_int8", b_sum1, 1, TG_INT8, {2}, {{6, 33}}},
    {"max_axis1", b_max1, 1, TG_FLOAT32, {2}, {{9, 64}}},
    {"max_int32", b_max1, 1, TG_INT32, {2}, {{9, 20}}},
    {"broadcast", b_bcast, 2, TG_FLOAT32, {3, 3}, {{7, 1, 16}, {1, 129, 16}}},
    {"broadcast_f16", b_bcast, 2, TG_FLOAT16, {2, 2}, {{3, 32}, {1, 32}}},
    {"softmax", b_softmax, 1, TG_FLOAT32, {2}, {{7, 129}}},
    {"where_cmp", b_where, 2, TG_FLOAT32, {2, 2}, {{8, 33}, {8, 33}}},
    {"mean_square", b_mean_sq, 1, TG_FLOAT32, {2}, {{1, 7}}},
    {"two_reductions", b_two_sums, 1, TG_FLOAT32, {2}, {{5, 48}}},
    {"conv2d", b_conv, 2, TG_FLOAT32, {4, 4}, {{2, 3, 9, 9}, {4, 3, 3, 3}}},
    {"conv2d_grad_w", b_conv_grad_w, 3, TG_FLOAT32, {4, 4, 4}, {{2, 3, 7, 7}, {4, 3, 3, 3}, {2, 4, 5, 5}}},
    {"max_11", b_max1, 1, TG_FLOAT32, {2}, {{5, 11}}},
    {"sum_11", b_sum1, 1, TG_FLOAT32, {2}, {{4, 11}}},
    /* the demo's conv shapes, small: odd 6x6 outputs (padded lanes), a padded input gradient */
    {"conv2d_6x6", b_conv_valid, 2, TG_FLOAT32, {4, 4}, {{2, 4, 8, 8}, {6, 4, 3, 3}}},
    {"conv2d_grad_x", b_conv_grad_x, 3, TG_FLOAT32, {4, 4, 4}, {{2, 3, 10, 10}, {4, 3, 3, 3}, {2, 4, 8, 8}}},
    /* 16-bit float matmuls: TC among the actions on a device with tensor cores (TC_EMULATE=1) */
    {"matmul_f16", b_matmul, 2, TG_FLOAT16, {2, 2}, {{32, 32}, {32, 16}}},
    {"matmul_bf16_odd", b_matmul, 2, TG_BFLOAT16, {2, 2}, {{20, 24}, {24, 9}}},
};
#define NCASES ((int)(sizeof cases / sizeof cases[0]))

/* Inputs with small values (exact products for the int cases). */
static void make_inputs(const opt_case *c, tg_tensor **in) {
  for (int i = 0; i < c->nin; i++) {
    int64_t n = shape_numel(c->shape[i], c->nd[i]);
    double *v = malloc(sizeof(double) * (size_t)n);
    for (int64_t j = 0; j < n; j++) v[j] = (double)((j * 7 + i * 3) % 11) - 5.0 + (c->dt == TG_FLOAT32 ? 0.25 * (double)(j % 3) : 0);
    tg_scope *s = tg_scope_begin();
    in[i] = tg_keep(tg_cast(tg_from_data(v, TG_FLOAT64, c->shape[i], c->nd[i]), c->dt));
    tg_scope_end(s);
    tg_realize(in[i]);
    free(v);
  }
}

/* Run the case's expression (a fresh graph each time) and fetch the result as doubles. */
static int run_case(const opt_case *c, tg_tensor **in, double **out, int64_t *n) {
  tg_scope *s = tg_scope_begin();
  tg_tensor *y = tg_cast(c->fn(in), TG_FLOAT64);
  int rc = y ? 0 : TG_ERR_ARG;
  *n = y ? tg_numel(y) : 0;
  *out = malloc(sizeof(double) * (size_t)(*n ? *n : 1));
  tg_reset_stats();
  if (rc == 0) rc = tg_to_host(y, *out, sizeof(double) * (size_t)*n);
  if (rc == 0 && tg_get_stats().kernels_run == 0) rc = TG_ERR_DEVICE; /* it must really run */
  tg_scope_end(s);
  return rc;
}

static double tolerance(tg_dtype dt) { return dtype_is_half(dt) ? 2e-2 : dt == TG_FLOAT32 ? 1e-4 : 1e-12; }

static int compare(const char *what, const opt_case *c, const double *ref, const double *got, int64_t n) {
  int bad = 0;
  for (int64_t i = 0; i < n; i++) {
    if (harness_close(got[i], ref[i], tolerance(c->dt), tolerance(c->dt))) continue;
    if (bad++ < 3) printf("  [%s %s] element %lld: got %.9g, expected %.9g\n", c->name, what, (long long)i, got[i], ref[i]);
  }
  return bad;
}

/* ------------------------------------------------------------ hooks */

static int no_opts(uop *ast, kshape *ks, void *ctx) {
  (void)ast, (void)ks, (void)ctx;
  return 0;
}

static uint64_t next_random(uint64_t *s) {
  *s ^= *s << 13, *s ^= *s >> 7, *s ^= *s << 17;
  return *s;
}

typedef struct random_ctx {
  uint64_t state;
  int applied;
  int kinds[OPT_COUNT]; /* actions applied, by kind */
} random_ctx;

/* Up to 6 actions, each drawn from the ones valid at that point. */
static int random_opts(uop *ast, kshape *ks, void *ctx) {
  (void)ast;
  random_ctx *r = ctx;
  opt_action cand[512];
  int steps = (int)(next_random(&r->state) % 7);
  for (int i = 0; i < steps; i++) {
    int n = kshape_candidates(ks, cand, 512);
    if (n == 0) break;
    opt_action a = cand[next_random(&r->state) % (uint64_t)n];
    if (kshape_apply(ks, a) < 0) return -1; /* candidates are valid */
    r->applied++, r->kinds[a.kind]++;
  }
  return 0;
}

static int default_opts(uop *ast, kshape *ks, void *ctx) {
  (void)ctx;
  kshape_optimize(ks, ast, &device_default()->caps);
  return 0;
}

/* Apply a fixed list to the first kernel that accepts all of it (others stay unoptimized). */
typedef struct fixed_ctx {
  const opt_action *acts;
  int n, used;
} fixed_ctx;

static int fixed_opts(uop *ast, kshape *ks, void *ctx) {
  (void)ast;
  fixed_ctx *f = ctx;
  kshape t = *ks;
  for (int i = 0; i < f->n; i++)
    if (kshape_apply(&t, f->acts[i]) < 0) { tg_clear_error(); return 0; }
  *ks = t;
  f->used++;
  return 0;
}

static void free_inputs(tg_tensor **in, int n) {
  for (int i = 0; i < n; i++) tg_free(in[i]);
}

/* Reference result of a case (unoptimized). */
static double *reference(const opt_case *c, tg_tensor **in, int64_t *n) {
  double *ref;
  program_set_opt_hook(no_opts, NULL);
  int rc = run_case(c, in, &ref, n);
  program_set_opt_hook(NULL, NULL);
  CHECK(rc == 0);
  if (rc) { free(ref); return NULL; }
  return ref;
}

/* ------------------------------------------------------------ tests */

/* The heuristics' tests check the vector code of host devices; work-item devices run scalar. */
#define NEED_HOST_DEVICE()                                                                   \
  do {                                                                                       \
    if (device_default() && device_is_gpu(device_default()))                                 \
      SKIP("%s runs scalar work-items: these are the host devices' vector heuristics", device_default()->name); \
  } while (0)


/* On a work-group device (DEV=CL) the draws include LOCAL and the work-group GROUP/GROUPTOP
 * (local memory, barriers); on host devices GROUP/GROUPTOP are threads and a second stage. */
TEST(opt_random_actions_match_unoptimized) {
  int total = 0, applied = 0, kinds[OPT_COUNT] = {0};
  for (int k = 0; k < NCASES; k++) {
    const opt_case *c = &cases[k];
    tg_tensor *in[3];
    make_inputs(c, in);
    int64_t n, m;
    double *ref = reference(c, in, &n);
    int seeds = getenv("OPT_SEEDS") ? atoi(getenv("OPT_SEEDS")) : 6; /* more: OPT_SEEDS=n */
    for (int seed = 1; ref && seed <= seeds; seed++) {
      random_ctx r = {.state = 0x9e3779b97f4a7c15ull * (uint64_t)(seed * 97 + k)};
      double *got;
      program_set_opt_hook(random_opts, &r);
      int rc = run_case(c, in, &got, &m);
      program_set_opt_hook(NULL, NULL);
      CHECK(rc == 0 && m == n);
      if (rc == 0 && compare("random", c, ref, got, n)) {
        printf("  %s failed with seed %d\n", c->name, seed);
        CHECK(0);
      }
      total++, applied += r.applied;
      for (int a = 0; a < OPT_COUNT; a++) kinds[a] += r.kinds[a];
      free(got);
    }
    free(ref);
    free_inputs(in, c->nin);
  }
  CHECK(applied > total); /* the sequences really did something */
  CHECK(kinds[OPT_GROUP] + kinds[OPT_GROUPTOP] > 0 && kinds[OPT_UPCAST] > 0 && kinds[OPT_UNROLL] > 0);
  bool wg = device_default() && device_default()->caps.max_local_size > 1 && device_is_gpu(device_default());
  printf("  random actions: %d LOCAL, %d GROUP, %d GROUPTOP, %d UPCAST, %d UNROLL, %d TC (%s)\n", kinds[OPT_LOCAL], kinds[OPT_GROUP],
         kinds[OPT_GROUPTOP], kinds[OPT_UPCAST], kinds[OPT_UNROLL], kinds[OPT_TC], wg ? "work-groups" : "host");
  CHECK(device_default()->caps.tc || kinds[OPT_TC] == 0); /* only where the device has tensor cores */
  CHECK(wg ? kinds[OPT_LOCAL] > 0 : kinds[OPT_LOCAL] == 0);
}

/* Every case under the default heuristics against the unoptimized run, then through the
 * normal (cached) path; lane_by_lane: with every vector node split lane by lane instead
 * (devectorize with no vector forms, as for a renderer without vectors). */
static void check_default_heuristics(bool lane_by_lane) {
  for (int k = 0; k < NCASES; k++) {
    const opt_case *c = &cases[k];
    tg_tensor *in[3];
    make_inputs(c, in);
    int64_t n, m;
    double *ref = reference(c, in, &n), *got;
    program_set_opt_hook(default_opts, NULL);
    program_set_lane_by_lane(lane_by_lane);
    int rc = run_case(c, in, &got, &m);
    program_set_lane_by_lane(false);
    program_set_opt_hook(NULL, NULL);
    CHECK(rc == 0 && m == n);
    if (ref && rc == 0) CHECK(compare(lane_by_lane ? "lane by lane" : "default", c, ref, got, n) == 0);
    free(got);
    if (!lane_by_lane) {
      rc = run_case(c, in, &got, &m);
      if (ref && rc == 0) CHECK(compare("cached", c, ref, got, n) == 0);
      free(got);
    }
    free(ref);
    free_inputs(in, c->nin);
  }
}

TEST(opt_default_heuristics_match_unoptimized) { check_default_heuristics(false); }

/* The GEP/VECTORIZE form of the same kernels computes what their vector form does. */
TEST(opt_lane_by_lane_matches_vectors) {
  NEED_HOST_DEVICE(); /* work-item devices have no lanes to split */
  check_default_heuristics(true);
}

/* Explicit sequences that random draws may miss: both GROUP flavours (two stages), PADTO of
 * output and reduce dims before lanes, lanes on the reduce axis, swaps, threads. */
TEST(opt_explicit_sequences) {
  NEED_HOST_DEVICE(); /* the sequences fit the host devices' kernels (a packed matmul) */
  static const struct {
    int kase;
    opt_action acts[5];
    int n;
  } seqs[] = {
      {10, {{OPT_GROUPTOP, 0, 4}, {OPT_UNROLL, 2, 16}}, 2},                     /* sum_all 40x64 */
      {10, {{OPT_GROUP, 1, 8}}, 1},
      {7, {{OPT_GROUPTOP, 2, 7}, {OPT_UPCAST, 2, 5}}, 2},                      /* sum_axis0 */
      {0, {{OPT_PADTO, 0, 8}, {OPT_UPCAST, 0, 8}, {OPT_PADTO, 1, 16}, {OPT_UNROLL, 1, 16}, {OPT_UPCAST, 0, 16}}, 5},
      {0, {{OPT_PADTO, 0, 4}, {OPT_UPCAST, 0, 4}, {OPT_UPCAST, 1, 16}, {OPT_THREAD, 0, 2}}, 4},
      {9, {{OPT_PADTO, 2, 16}, {OPT_UNROLL, 2, 16}, {OPT_UNROLL, 2, 3}, {OPT_UPCAST, 0, 7}}, 4}, /* 7x5x129 */
      {1, {{OPT_SWAP, 0, 1}, {OPT_UPCAST, 1, 8}, {OPT_UNROLL, 2, 4}, {OPT_THREAD, 0, 16}}, 4},
      {16, {{OPT_PADTO, 1, 16}, {OPT_UPCAST, 1, 16}}, 2},                        /* softmax 7x129 */
      {17, {{OPT_UPCAST, 1, 3}, {OPT_UPCAST, 0, 8}, {OPT_THREAD, 0, 1}}, 3},     /* where_cmp (last is invalid) */
      {15, {{OPT_UPCAST, 1, 16}, {OPT_THREAD, 0, 3}}, 2},                        /* float16 lanes */
      {22, {{OPT_PADTO, 1, 16}, {OPT_UNROLL, 1, 16}}, 2},                        /* padding lanes skipped */
      {23, {{OPT_PADTO, 1, 8}, {OPT_UNROLL, 1, 16}, {OPT_UPCAST, 0, 2}}, 3},
  };
  for (size_t i = 0; i < sizeof seqs / sizeof seqs[0]; i++) {
    const opt_case *c = &cases[seqs[i].kase];
    tg_tensor *in[3];
    make_inputs(c, in);
    int64_t n, m;
    double *ref = reference(c, in, &n), *got;
    fixed_ctx f = {seqs[i].acts, seqs[i].n, 0};
    program_set_opt_hook(fixed_opts, &f);
    int rc = run_case(c, in, &got, &m);
    program_set_opt_hook(NULL, NULL);
    CHECK(rc == 0);
    bool expect_used = i != 8;
    if (expect_used != (f.used > 0)) printf("  sequence %zu on %s: used %d times\n", i, c->name, f.used);
    CHECK(expect_used == (f.used > 0));
    if (ref && rc == 0) CHECK(compare("explicit", c, ref, got, n) == 0);
    free(got);
    free(ref);
    free_inputs(in, c->nin);
  }
}

/* ------------------------------------------------------------ invalid actions */

typedef struct capture_ctx {
  uop *ast; /* the first kernel's AST (a strong reference) */
} capture_ctx;

static int capture(uop *ast, kshape *ks, void *ctx) {
  (void)ks;
  capture_ctx *c = ctx;
  if (!c->ast) uop_incref(c->ast = ast);
  return 0;
}

static uop *kernel_of(builder fn, tg_tensor **in) {
  capture_ctx c = {NULL};
  program_set_opt_hook(capture, &c);
  tg_scope *s = tg_scope_begin();
  tg_realize(fn(in));
  tg_scope_end(s);
  program_set_opt_hook(NULL, NULL);
  return c.ast;
}

static bool refused(kshape *ks, opt_kind k, int axis, int64_t amount, const char *needle) {
  tg_clear_error();
  kshape before = *ks;
  int rc = kshape_apply(ks, (opt_action){k, axis, amount});
  bool ok = rc < 0 && strstr(tg_last_error(), needle) && !memcmp(&before, ks, sizeof before);
  if (!ok) printf("  %s(%d,%lld): rc %d, error '%s'\n", opt_name(k), axis, (long long)amount, rc, tg_last_error());
  return ok;
}

TEST(opt_invalid_actions_are_refused) {
  tg_scope *s = tg_scope_begin();
  tg_tensor *in[2] = {tg_ones((int64_t[]){8, 10}, 2, TG_FLOAT32), tg_ones((int64_t[]){10, 12}, 2, TG_FLOAT32)};
  uop *ast = kernel_of(b_matmul, in);
  CHECK(ast != NULL);
  if (!ast) { tg_scope_end(s); return; }
  kshape ks;
  CHECK(kshape_init(&ks, ast) == 0);
  CHECK(ks.nax == 3 && ks.ax[0].size == 8 && ks.ax[1].size == 12 && ks.ax[2].size == 10);
  CHECK(ks.ax[2].kind == AX_REDUCE && ks.group_ok);
  CHECK(refused(&ks, OPT_UPCAST, 2, 2, "not an output loop"));
  CHECK(refused(&ks, OPT_UNROLL, 0, 2, "not a reduce loop"));
  CHECK(refused(&ks, OPT_UPCAST, 0, 3, "divide"));
  CHECK(refused(&ks, OPT_UPCAST, 0, 1, "divide"));
  CHECK(refused(&ks, OPT_UPCAST, 0, 16, "divide"));
  CHECK(refused(&ks, OPT_UPCAST, 3, 2, "no axis"));
  CHECK(refused(&ks, OPT_UPCAST, -1, 2, "no axis"));
  CHECK(refused(&ks, OPT_COUNT, 0, 2, "unknown"));
  CHECK(refused(&ks, OPT_SWAP, 0, 2, "both axes"));
  CHECK(refused(&ks, OPT_SWAP, 0, 0, "no such axis"));
  CHECK(refused(&ks, OPT_SWAP, 0, 9, "no such axis"));
  CHECK(refused(&ks, OPT_PADTO, 0, 4, "already a multiple"));
  CHECK(refused(&ks, OPT_THREAD, 2, 2, "not an output loop"));
  CHECK(refused(&ks, OPT_GROUP, 0, 2, "not a reduce loop"));
  CHECK(kshape_apply(&ks, (opt_action){OPT_PADTO, 1, 16}) == 0 && ks.ax[1].size == 16 && ks.padded[1] == 16);
  CHECK(kshape_apply(&ks, (opt_action){OPT_UPCAST, 1, 8}) == 0);
  CHECK(refused(&ks, OPT_PADTO, 1, 32, "already split"));
  CHECK(kshape_apply(&ks, (opt_action){OPT_THREAD, 0, 4}) == 0 && ks.ax[0].kind == AX_THREAD);
  CHECK(refused(&ks, OPT_THREAD, 1, 2, "already has a parallel axis"));
  CHECK(refused(&ks, OPT_GROUPTOP, 3, 2, "already has a parallel axis"));
  CHECK(refused(&ks, OPT_UPCAST, 0, 2, "not an output loop")); /* the thread axis */
  CHECK(ks.napplied == 3);
  /* too many unrolled copies */
  kshape k2;
  kshape_init(&k2, ast);
  CHECK(kshape_apply(&k2, (opt_action){OPT_UPCAST, 1, 12}) == 0 && kshape_apply(&k2, (opt_action){OPT_UNROLL, 1, 10}) == 0);
  CHECK(kshape_apply(&k2, (opt_action){OPT_UPCAST, 0, 2}) == 0 && kshape_lane_axis(&k2) == 3);
  CHECK(refused(&k2, OPT_UPCAST, 0, 4, "unrolled copies")); /* 12 * 10 * 4 copies beside 2 lanes */
  /* the candidates keep to the limit too: each applies, the refused upcast is not among them,
   * and what is left (a THREAD of the outer loop) is */
  opt_action c2[64];
  int n2 = kshape_candidates(&k2, c2, 64), threads = 0;
  CHECK(n2 > 0);
  for (int i = 0; i < n2; i++) {
    kshape t = k2;
    CHECK(kshape_apply(&t, c2[i]) == 0);
    CHECK(!(c2[i].kind == OPT_UPCAST && c2[i].axis == 0 && c2[i].amount == 4));
    threads += c2[i].kind == OPT_THREAD;
  }
  CHECK(threads > 0);
  uop_decref(ast);
  /* two reductions: no GROUP; a kernel with no reduction: no UNROLL */
  tg_tensor *x = tg_ones((int64_t[]){4, 8}, 2, TG_FLOAT32);
  ast = kernel_of(b_two_sums, &x);
  CHECK(ast && kshape_init(&ks, ast) == 0 && !ks.group_ok && ks.nreduces == 2);
  if (ast) CHECK(refused(&ks, OPT_GROUPTOP, 1, 2, "single reduction"));
  uop_decref(ast);
  tg_tensor *pair[2] = {x, x};
  ast = kernel_of(b_bcast, pair);
  CHECK(ast && kshape_init(&ks, ast) == 0 && ks.nred == 0 && ks.reduce_op == -1);
  if (ast) CHECK(refused(&ks, OPT_UNROLL, 1, 2, "not a reduce loop"));
  uop_decref(ast);
  tg_scope_end(s);
}

/* Every candidate applies; SWAP and PADTO appear; applying one changes the state. LOCAL only
 * on a work-group device's state (a fake one: 64 work-items, 4 KiB). */
TEST(opt_candidates_are_valid) {
  tg_scope *s = tg_scope_begin();
  tg_tensor *in[2] = {tg_ones((int64_t[]){6, 7}, 2, TG_FLOAT32), tg_ones((int64_t[]){7, 20}, 2, TG_FLOAT32)};
  uop *ast = kernel_of(b_matmul, in);
  for (int wg = 0; wg < 2; wg++) {
    kshape ks;
    CHECK(ast && kshape_init(&ks, ast) == 0);
    if (wg) kshape_use_workgroups(&ks, &(device_caps){.max_local_size = 64, .local_bytes = 4096});
    opt_action cand[512];
    int n = ast ? kshape_candidates(&ks, cand, 512) : 0;
    int kinds[OPT_COUNT] = {0};
    for (int i = 0; i < n; i++) {
      kshape t = ks;
      CHECK(kshape_apply(&t, cand[i]) == 0);
      CHECK(t.napplied == 1);
      kinds[cand[i].kind]++;
    }
    for (int k = 0; k < OPT_COUNT; k++) /* TC: not a float16 product, no tensor cores (test_tc.c) */
      CHECK((k == OPT_LOCAL && !wg) || k == OPT_TC ? kinds[k] == 0 : kinds[k] > 0);
  }
  uop_decref(ast);
  tg_scope_end(s);
}

/* A work-group device's limits: more work-items in a work-group (LOCAL and GROUP together) or
 * more local memory for the partials (a GROUP times the UPCAST copies) than the device has is
 * refused, the state unchanged; the same actions within the limits apply. Host devices refuse
 * LOCAL. A sum over 64x512 on a fake device of 64 work-items and 1 KiB. */
TEST(opt_workgroup_limits_are_refused) {
  tg_scope *s = tg_scope_begin();
  tg_tensor *in[1] = {tg_ones((int64_t[]){64, 512}, 2, TG_FLOAT32)};
  uop *ast = kernel_of(b_sum1, in);
  kshape host, ks;
  CHECK(ast && kshape_init(&host, ast) == 0 && kshape_init(&ks, ast) == 0);
  if (!ast) { tg_scope_end(s); return; }
  CHECK(refused(&host, OPT_LOCAL, 0, 8, "no work-groups"));
  kshape_use_workgroups(&ks, &(device_caps){.max_local_size = 64, .local_bytes = 1024});
  CHECK(refused(&ks, OPT_GROUP, 1, 128, "work-items in a work-group"));
  kshape t = ks; /* axes: GROUP 16, GLOBAL 64, REDUCE 32 */
  CHECK(kshape_apply(&t, (opt_action){OPT_GROUPTOP, 1, 16}) == 0);
  CHECK(refused(&t, OPT_LOCAL, 1, 8, "work-items in a work-group"));
  CHECK(kshape_apply(&t, (opt_action){OPT_LOCAL, 1, 4}) == 0);
  CHECK(kshape_local_size(&t) == 64 && kshape_local_bytes(&t) == 64 * 4);
  CHECK(refused(&t, OPT_LOCAL, 1, 2, "work-items in a work-group"));
  CHECK(kshape_apply(&t, (opt_action){OPT_UPCAST, 1, 4}) == 0); /* 4 copies: 1 KiB */
  CHECK(kshape_local_bytes(&t) == 1024);
  CHECK(refused(&t, OPT_UPCAST, 1, 2, "bytes of local memory")); /* 8 copies: 2 KiB */
  CHECK(!kshape_two_stages(&t));
  kshape h = host; /* the same GROUPTOP on a host device: threads and a second stage */
  CHECK(kshape_apply(&h, (opt_action){OPT_GROUPTOP, 1, 16}) == 0 && kshape_two_stages(&h) && kshape_local_bytes(&h) == 0);
  uop_decref(ast);
  tg_scope_end(s);
}

/* ------------------------------------------------------------ what the heuristics do */

typedef struct inspect_ctx {
  char opts[256];
  char *src;
  int nstages;
  long long parallel;
  int threads; /* the caps' threads for the heuristics (0: the device's) */
  bool per_image; /* the kernel as a chain runs it (kshape per_image) */
} inspect_ctx;

static int inspect(uop *ast, kshape *ks, void *ctx) {
  inspect_ctx *c = ctx;
  device_caps caps = device_default()->caps;
  if (c->threads) caps.threads = c->threads;
  ks->per_image = c->per_image;
  kshape_optimize(ks, ast, &caps);
  kshape_describe(ks, c->opts, sizeof c->opts);
  program *p = program_build(device_default(), ast, ks);
  if (!p) return -1;
  free(c->src);
  c->src = strdup(p->src);
  c->nstages = p->nstages, c->parallel = p->stage[0].parallel;
  program_free(p);
  return 0;
}

static void heuristics_of(builder fn, tg_tensor **in, inspect_ctx *c) {
  program_set_opt_hook(inspect, c);
  tg_scope *s = tg_scope_begin();
  CHECK(tg_realize(fn(in)) == 0);
  tg_scope_end(s);
  program_set_opt_hook(NULL, NULL);
}

/* A realized buffer of ones (a plain tg_ones is a constant: no loads). */
static tg_tensor *ones_buffer(const int64_t *shape, int nd) {
  tg_tensor *t = tg_contiguous(tg_ones(shape, nd, TG_FLOAT32));
  tg_realize(t);
  return t;
}

/* A spelling the checks look for in a kernel's source: C (DEV=CPU) or LLVM IR (the LLVM device). */
static bool dev_llvm(void) { return device_default() == device_get("LLVM"); }
static const char *spelled(const char *c, const char *llvm) { return dev_llvm() ? llvm : c; }

/* Nodes by op and by vector width in a lowered kernel. */
typedef struct vec_census {
  int lane_ranges, geps, vectorizes, vectors, bad_sources;
} vec_census;

static vec_census census(uop *sink, int w) {
  vec_census v = {0};
  uop **order;
  int n = uop_toposort(sink, &order);
  for (int i = 0; i < n; i++) {
    uop *u = order[i];
    v.lane_ranges += u->op == OP_RANGE && u->arg[1] == RANGE_LANE;
    v.geps += u->op == OP_GEP, v.vectorizes += u->op == OP_VECTORIZE;
    v.vectors += u->vcount != 0;
    if (u->vcount && u->vcount != w) v.bad_sources++;
    for (int j = u->op == OP_WHERE; uop_is_alu(u) && u->vcount && j < u->nsrc; j++) /* operands are vectors */
      v.bad_sources += u->src[j]->vcount != u->vcount;
  }
  free(order);
  return v;
}

/* vectorize gives every node that depends on the lanes its vector type, with explicit
 * broadcasts and a horizontal sum (GEPs); devectorize with no vector forms leaves none. */
TEST(opt_vectorize_types_lane_nodes) {
  NEED_HOST_DEVICE();
  tg_scope *s = tg_scope_begin();
  tg_tensor *x = ones_buffer((int64_t[]){64, 1024}, 2);
  uop *ast = kernel_of(b_sum1, &x);
  kshape ks;
  CHECK(ast && kshape_init(&ks, ast) == 0);
  kshape_optimize(&ks, ast, &device_default()->caps);
  int lane = kshape_lane_axis(&ks);
  CHECK(lane >= 0);
  if (ast && lane >= 0) {
    int w = (int)ks.ax[lane].size;
    size_t mark = uop_pool_mark();
    kernel_info info;
    uop *sink = lower_kernel(ast, &ks, STAGE_ONLY, &info);
    vec_census v = census(sink, w);
    CHECK(v.lane_ranges == 0 && v.vectors > 0 && v.bad_sources == 0);
    CHECK(v.geps > 0 && v.geps % w == 0); /* each lane of the partial sums, combined */
    static const vector_forms none = {NULL};
    v = census(devectorize(sink, &none), w);
    CHECK(v.vectors == 0 && v.geps == 0 && v.vectorizes == 0);
    uop_pool_release(mark);
  }
  if (ast) uop_decref(ast);
  tg_scope_end(s);
}

TEST(opt_heuristics_vectorize_tile_and_thread) {
  NEED_HOST_DEVICE();
  tg_scope *s = tg_scope_begin();
  inspect_ctx c = {{0}, NULL, 0, 0, 0, false};
  /* lanes fill one vector register of this CPU: 16 floats with AVX-512, 8 with AVX2 */
  int w = device_default()->caps.vector_bytes / 4 > 16 ? 16 : device_default()->caps.vector_bytes / 4;
  char upcast[32], vec[32], aligned[48], last[16];
  snprintf(upcast, sizeof upcast, "UPCAST(1,%d)", w);
  snprintf(vec, sizeof vec, spelled("tg_f32x%d v", "<%d x float>"), w);
  snprintf(aligned, sizeof aligned, spelled("*(const tg_f32x%da *)", "align %d\n"), dev_llvm() ? w * 4 : w);
  snprintf(last, sizeof last, spelled("[%d];\n", "i32 %d\n"), w - 1); /* the last lane's GEP */
  tg_tensor *mm[2] = {ones_buffer((int64_t[]){256, 128}, 2), ones_buffer((int64_t[]){128, 256}, 2)};
  heuristics_of(b_matmul, mm, &c);
  CHECK(strstr(c.opts, upcast) && c.src && strstr(c.src, vec));
  CHECK(c.src && strstr(c.src, aligned)); /* aligned vector loads of B */
  if (threadpool_size() > 1) CHECK(strstr(c.opts, "THREAD") && c.parallel > 1);
  /* a sum over the contiguous axis: vector partial sums and a horizontal combine */
  tg_tensor *x = ones_buffer((int64_t[]){64, 1024}, 2);
  heuristics_of(b_sum1, &x, &c);
  CHECK(strstr(c.opts, "UNROLL") && c.src && strstr(c.src, last));
  /* a full reduction: split over the threads, combined by a second stage */
  tg_tensor *big = ones_buffer((int64_t[]){1 << 18}, 1);
  heuristics_of(b_sum_all, &big, &c);
  if (threadpool_size() > 1) CHECK(strstr(c.opts, "GROUPTOP") && c.nstages == 2);
  /* a small elementwise kernel: vectors, no threads */
  tg_tensor *pair[2] = {ones_buffer((int64_t[]){4, 32}, 2), ones_buffer((int64_t[]){4, 32}, 2)};
  heuristics_of(b_bcast, pair, &c);
  CHECK(!strcmp(c.opts, upcast) && c.parallel == 1);
  free(c.src);
  tg_scope_end(s);
}

/* A large matmul reads B from packed panels of two vectors (reduce.c). The register tile
 * holds rows x the whole panel (AVX-512: 8 broadcasts + 2 vector loads per 16 multiply-adds), not
 * several panels (as many loads, but each a vector: more bytes per step), and the threads
 * split the panels, so that each panel stays in cache while the rows walk past it. */
TEST(opt_heuristics_packed_matmul_tile) {
  NEED_HOST_DEVICE();
  tg_scope *s = tg_scope_begin();
  inspect_ctx c = {{0}, NULL, 0, 0, 0, false};
  int w = device_default()->caps.vector_bytes / 4 > 16 ? 16 : device_default()->caps.vector_bytes / 4;
  char lanes[32], rows[32]; /* 16 accumulators with 32 vector registers, 8 (12 do not divide) with 16 */
  snprintf(rows, sizeof rows, "UPCAST(0,%d)", device_default()->caps.vector_registers >= 32 ? 8 : 4);
  tg_tensor *mm[2] = {ones_buffer((int64_t[]){256, 256}, 2), ones_buffer((int64_t[]){256, 256}, 2)};
  heuristics_of(b_matmul, mm, &c); /* the last kernel: axes rows, panels, panel width | k */
  snprintf(lanes, sizeof lanes, "UPCAST(2,%d)", w);
  CHECK(strstr(c.opts, lanes) && strstr(c.opts, "UPCAST(2,2)") && strstr(c.opts, rows));
  CHECK(!strstr(c.opts, "UPCAST(1,"));
  /* the panel axis, moved outside the rows' (SWAP) where A fits in the L2 */
  if (threadpool_size() > 1) CHECK(strstr(c.opts, strstr(c.opts, "SWAP(0,1)") ? "THREAD(0," : "THREAD(1,"));
  free(c.src);
  tg_scope_end(s);
}

/* A short, wide matmul (GPT-2's prefill: 64 tokens times a 768 x 3072 weight) walks its rows
 * inside the panel loop: the 9 MB weight is read once, the 196 KB of rows again per panel
 * from cache (opt.c keep_inside); a large square one (both inputs past the L2) keeps its order.
 * The 8-lane tile reads the 16-wide panels with vector loads, not gathers (symbolic.c,
 * divmod_small_part). */
TEST(opt_heuristics_short_matmul_reads_the_weight_once) {
  NEED_HOST_DEVICE();
  tg_scope *s = tg_scope_begin();
  inspect_ctx c = {{0}, NULL, 0, 0, 0, false};
  tg_tensor *mm[2] = {ones_buffer((int64_t[]){64, 768}, 2), ones_buffer((int64_t[]){768, 3072}, 2)};
  int64_t half_l2 = device_default()->caps.l2_bytes / 2;
  heuristics_of(b_matmul, mm, &c);
  CHECK(!!strstr(c.opts, "SWAP(0,1)") == (half_l2 >= 64 * 768 * 4 && 768 * 3072 * 4 > 2 * half_l2));
  CHECK(c.src && !strstr(c.src, "gather") && !strstr(c.src, "/ 16") && !strstr(c.src, "sdiv <"));
  printf("  opts: %s (half the L2: %lld bytes)\n", c.opts, (long long)half_l2);
  tg_tensor *big[2] = {ones_buffer((int64_t[]){1024, 1024}, 2), ones_buffer((int64_t[]){1024, 1024}, 2)};
  heuristics_of(b_matmul, big, &c);
  CHECK(!strstr(c.opts, "SWAP") == (half_l2 < 1024 * 1024 * 4));
  free(c.src);
  tg_scope_end(s);
}

/* A matrix-vector product over a weight stored (out, in) with a bias and a residual fused:
 * the weight's rows are read along the reduction, not gathered with lanes along the outputs
 * (the bias and residual, contiguous along the outputs but read once per output, outvoted
 * the weight: GPT-2's GGUF float32 decode at a third of its speed, performance.md). */
TEST(opt_heuristics_matvec_rows_not_gathered_under_a_bias) {
  NEED_HOST_DEVICE();
  tg_scope *s = tg_scope_begin();
  inspect_ctx c = {{0}, NULL, 0, 0, 0, false};
  tg_tensor *in[4] = {ones_buffer((int64_t[]){1, 768}, 2), ones_buffer((int64_t[]){256, 768}, 2),
                      ones_buffer((int64_t[]){256}, 1), ones_buffer((int64_t[]){1, 256}, 2)};
  heuristics_of(b_rows_matvec, in, &c);
  CHECK(c.src && !strstr(c.src, "gather"));
  CHECK(strstr(c.opts, "UNROLL(") != NULL); /* the lanes along the rows of W */
  printf("  opts: %s\n", c.opts);
  free(c.src);
  tg_scope_end(s);
}

/* b_depthwise of ones (images x channels = nc maps of h x h): a padded 3x3 window counts its
 * taps inside the map (4 at a corner, 6 on an edge, 9 inside). */
static void check_ones_window(tg_tensor **in, int nc, int h) {
  size_t n = (size_t)nc * (size_t)h * (size_t)h;
  float *y = malloc(n * sizeof *y);
  CHECK(y && tg_to_host(b_depthwise(in), y, n * sizeof *y) == 0);
  for (size_t i = 0; y && i < n; i++) {
    int r = (int)(i / (size_t)h % (size_t)h), q = (int)(i % (size_t)h);
    CHECK_CLOSE(y[i], (float)((3 - (r == 0) - (r == h - 1)) * (3 - (q == 0) - (q == h - 1))), 0);
  }
  free(y);
}

/* A depthwise 3x3 conv (its taps unrolled whole) tiles its output rows, which share input
 * rows through the window, and not the batch: the taps' weights, all an image tile would
 * share, are loaded once per channel anyway (MobileNetV2's 192 @28 at batch 32: 8 images per
 * tile spilled, 2.5-2.9 ms; 7 rows per tile 0.5-0.7, optimizer.md). */
TEST(opt_heuristics_depthwise_tiles_rows_not_images) {
  NEED_HOST_DEVICE();
  tg_scope *s = tg_scope_begin();
  inspect_ctx c = {{0}, NULL, 0, 0, 0, false};
  enum { N = 8, C = 16, H = 28 };
  tg_tensor *in[2] = {ones_buffer((int64_t[]){N, C, H, H}, 4), ones_buffer((int64_t[]){C, 1, 3, 3}, 4)};
  heuristics_of(b_depthwise, in, &c); /* axes: n, c, oh, ow | kh, kw */
  printf("  opts: %s\n", c.opts);
  CHECK(strstr(c.opts, "UPCAST(2,") && !strstr(c.opts, "UPCAST(0,") && strstr(c.opts, "UNROLL("));
  check_ones_window(in, N * C, H);
  free(c.src);
  tg_scope_end(s);
}

/* A depthwise conv at 7x7 over 32 images: its weights (960 x 9 floats, the input kept while
 * the tiles walk the images) fit in the L2, so the images, 8 or more a thread, are still the
 * parallel axis (the conv can then run in a chain, image by image), not the channels. */
TEST(opt_heuristics_small_kept_input_leaves_images_parallel) {
  NEED_HOST_DEVICE();
  tg_scope *s = tg_scope_begin();
  inspect_ctx c = {{0}, NULL, 0, 0, 2, false};
  enum { N = 32, C = 960, H = 7 };
  tg_tensor *in[2] = {ones_buffer((int64_t[]){N, C, H, H}, 4), ones_buffer((int64_t[]){C, 1, 3, 3}, 4)};
  heuristics_of(b_depthwise, in, &c); /* axes: n, c, oh, ow | kh, kw */
  printf("  opts: %s\n", c.opts);
  CHECK(strstr(c.opts, "THREAD(0,") != NULL);
  check_ones_window(in, N * C, H);
  free(c.src);
  tg_scope_end(s);
}

/* A product-sum over 16 steps (a pointwise conv's 16 input channels) stays a loop under its
 * register tile: unrolled, all its loads were scheduled first and spilled (MobileNetV2's
 * 16->96 @112, 6.8 -> 6.2 ms). The depthwise conv's 9 taps, a window, are unrolled (above). */
TEST(opt_heuristics_short_matmul_reduction_stays_a_loop) {
  NEED_HOST_DEVICE();
  tg_scope *s = tg_scope_begin();
  inspect_ctx c = {{0}, NULL, 0, 0, 0, false};
  tg_tensor *in[2] = {ones_buffer((int64_t[]){256, 16}, 2), ones_buffer((int64_t[]){16, 256}, 2)};
  heuristics_of(b_matmul, in, &c);
  printf("  opts: %s\n", c.opts);
  CHECK(strstr(c.opts, "UPCAST(") && !strstr(c.opts, "UNROLL("));
  static float y[256 * 256];
  CHECK(tg_to_host(b_matmul(in), y, sizeof y) == 0);
  for (int i = 0; i < 256 * 256; i++) CHECK_CLOSE(y[i], 16, 0);
  free(c.src);
  tg_scope_end(s);
}

/* The same conv over an input larger than the last-level cache reads its rows in order, one
 * output row at a time: from memory, tiles of rows made the prefetcher's streams jump
 * (MobileNetV2's 144 @56 at batch 32, 58 MB: 8 rows a tile 8-9 ms, a row 3.0-3.6). */
TEST(opt_heuristics_depthwise_from_memory_rows_in_order) {
  NEED_HOST_DEVICE();
  tg_scope *s = tg_scope_begin();
  inspect_ctx c = {{0}, NULL, 0, 0, 0, false};
  const device_caps *caps = &device_default()->caps;
  int64_t cache = caps->llc_bytes ? caps->llc_bytes : caps->l2_bytes, per_image = 16 * 56 * 56 * 4;
  tg_tensor *in[2] = {ones_buffer((int64_t[]){cache / per_image + 1, 16, 56, 56}, 4), ones_buffer((int64_t[]){16, 1, 3, 3}, 4)};
  heuristics_of(b_depthwise, in, &c);
  printf("  opts: %s\n", c.opts);
  CHECK(!strstr(c.opts, "UPCAST(2,") && !strstr(c.opts, "UPCAST(0,"));
  /* built for a chain, which runs it image by image on what the kernel before it has just
   * written into the cache: one image's 200 KB, rows tiled */
  c.per_image = true;
  heuristics_of(b_depthwise, in, &c);
  printf("  per image: %s\n", c.opts);
  CHECK(strstr(c.opts, "UPCAST(2,") && !strstr(c.opts, "UPCAST(0,"));
  free(c.src);
  tg_scope_end(s);
}

/* OPTS takes its own form and the one DEBUG=2 prints (debug.md). */
TEST(opt_env_takes_both_forms) {
  NEED_HOST_DEVICE();
  const char *forms[] = {"UPCAST,1,4;THREAD,0,6", "UPCAST(1,4) THREAD(0,6) "};
  for (int f = 0; f < 2; f++) {
    tg_scope *s = tg_scope_begin();
    uop *ast = only_ast(tg_mul_s(ones_buffer((int64_t[]){6, 20 + 4 * f}, 2), 3.25));
    setenv("OPTS", forms[f], 1);
    program *p = ast ? program_get(device_default(), ast) : NULL;
    unsetenv("OPTS");
    char buf[128] = "";
    if (p) kshape_describe(&p->ks, buf, sizeof buf);
    CHECK(!strcmp(buf, "UPCAST(1,4) THREAD(0,6)"));
    if (ast) uop_decref(ast);
    tg_scope_end(s);
  }
}

/* Conv-shaped reductions: odd rows (6) are padded to whole vectors (AVX2: of the CPU's width;
 * AVX-512: of 8 lanes, where 16 would waste 10 and unpadded rows get 2), the
 * padded lanes load without a bounds check (buffers have slack), and the register tile takes
 * the dims that save the most loads (a weight gradient tiles its output channels: x is
 * reused along them, while gy is reused along cin, kh, kw). */
TEST(opt_heuristics_conv_shapes) {
  NEED_HOST_DEVICE();
  tg_scope *s = tg_scope_begin();
  inspect_ctx c = {{0}, NULL, 0, 0, 0, false};
  int w = device_default()->caps.vector_bytes / 4 > 16 ? 16 : device_default()->caps.vector_bytes / 4;
  char pad[32], lanes[32];
  tg_tensor *in[3] = {ones_buffer((int64_t[]){2, 16, 8, 8}, 4), ones_buffer((int64_t[]){16, 16, 3, 3}, 4),
                      ones_buffer((int64_t[]){2, 16, 6, 6}, 4)};
  heuristics_of(b_conv_valid, in, &c); /* axes: n, cout, oh, ow | cin, kh, kw */
  snprintf(pad, sizeof pad, "PADTO(3,%d)", w);
  snprintf(lanes, sizeof lanes, "UPCAST(3,%d)", w);
  if (2 * 6 <= w) { /* AVX-512: rows of 6 would get 2 lanes; padded to one vector of 8 */
    snprintf(pad, sizeof pad, "PADTO(3,8)");
    snprintf(lanes, sizeof lanes, "UPCAST(3,8)");
  }
  CHECK(strstr(c.opts, pad) && strstr(c.opts, lanes));
  CHECK(c.src && !strstr(c.src, spelled(">= 0 &&", "icmp sge <"))); /* padded lanes: no bounds check per load */
  CHECK(strstr(c.opts, "UPCAST(1,")); /* output channels share each loaded row */
  /* rows tiled (oh) share their input rows with kh: kh becomes the innermost loop (axes of
   * the reduction: cin, kh, kw → cin, kw, kh) */
  if (strstr(c.opts, "UPCAST(2,")) CHECK(strstr(c.opts, "SWAP("));
  heuristics_of(b_conv_grad_w, in, &c); /* axes: cout, cin, kh, kw | n, oh, ow */
  CHECK(strstr(c.opts, "UPCAST(0,"));
  if (w >= 8) { /* rows of half a vector: vectors of half the width along ow, not scalar code */
    int64_t h = w / 2;
    tg_tensor *half[3] = {ones_buffer((int64_t[]){2, 16, h + 2, h + 2}, 4), ones_buffer((int64_t[]){16, 16, 3, 3}, 4),
                          ones_buffer((int64_t[]){2, 16, h, h}, 4)};
    heuristics_of(b_conv_grad_w, half, &c);
    snprintf(lanes, sizeof lanes, "UNROLL(6,%lld)", (long long)h);
    CHECK(strstr(c.opts, lanes));
  }
  free(c.src);
  tg_scope_end(s);
}

/* ------------------------------------------------------------ thread pool */

static atomic_int hits[1000];

static void count_hits(void **args, long long start, long long end) {
  (void)args;
  for (long long i = start; i < end; i++) atomic_fetch_add(&hits[i], 1);
}

TEST(opt_threadpool_covers_each_iteration_once) {
  CHECK(threadpool_size() >= 1);
  static const long long sizes[] = {1, 2, 3, 7, 64, 1000};
  for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
    for (int maxt = 0; maxt <= 3; maxt++) {
      for (int j = 0; j < 1000; j++) atomic_store(&hits[j], 0);
      threadpool_run(count_hits, NULL, sizes[i], maxt);
      int bad = 0;
      for (long long j = 0; j < 1000; j++) bad += atomic_load(&hits[j]) != (j < sizes[i]);
      CHECK(bad == 0);
    }
  }
  threadpool_run(count_hits, NULL, 0, 0); /* nothing to do */
  for (int rep = 0; rep < 200; rep++) threadpool_run(count_hits, NULL, 2, 0); /* back to back */
  CHECK(atomic_load(&hits[0]) == 201 && atomic_load(&hits[1]) == 201);
}

/* ------------------------------------------------------------ BEAM */

/* A real (small) search in a fresh cache directory, then the same kernel again: the answer
 * comes from the disk cache, and the kernel it picks computes the right result. On GPU devices
 * (DEV=CL) the candidates run in device memory. */
TEST(opt_beam_search_and_cache) {
  char dir[] = "/tmp/tg-beam-XXXXXX";
  if (!mkdtemp(dir)) { CHECK(0); return; }
  const char *old = getenv("TG_CACHE_DIR");
  char *saved = old ? strdup(old) : NULL;
  setenv("TG_CACHE_DIR", dir, 1);
  setenv("BEAM_CANDIDATES", "6", 1);
  tg_scope *s = tg_scope_begin();
  tg_tensor *in[2] = {ones_buffer((int64_t[]){32, 48}, 2), ones_buffer((int64_t[]){48, 64}, 2)};
  uop *ast = kernel_of(b_matmul, in);
  CHECK(ast != NULL);
  if (ast) {
    kshape first, again;
    uint64_t searches = tg_beam_searches, hits = tg_beam_cache_hits;
    CHECK(beam_search(device_default(), ast, 2, &first) == 0);
    CHECK(tg_beam_searches == searches + 1 && tg_beam_cache_hits == hits);
    CHECK(beam_search(device_default(), ast, 2, &again) == 0);
    CHECK(tg_beam_searches == searches + 1 && tg_beam_cache_hits == hits + 1);
    char a[256], b[256];
    kshape_describe(&first, a, sizeof a), kshape_describe(&again, b, sizeof b);
    CHECK(!strcmp(a, b));
    fixed_ctx f = {first.applied, first.napplied, 0};
    program_set_opt_hook(fixed_opts, &f);
    float out[32 * 64];
    CHECK(tg_to_host(tg_matmul(in[0], in[1]), out, sizeof out) == 0);
    program_set_opt_hook(NULL, NULL);
    CHECK(f.used == 1 && out[0] == 48.0f && out[32 * 64 - 1] == 48.0f);
    uop_decref(ast);
  }
  tg_scope_end(s);
  unsetenv("BEAM_CANDIDATES");
  if (saved) setenv("TG_CACHE_DIR", saved, 1);
  else unsetenv("TG_CACHE_DIR");
  free(saved);
  char cmd[64];
  snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
  CHECK(system(cmd) == 0);
}

/* A softmax's sum of exp2(c * (x - max)) over rows: the lanes run along the row (UNROLL of
 * the reduce axis, contiguous loads), not across 8 rows (UPCAST of axis 0: every x a gather).
 * The scalar c is a load too; it once made the gather look like a third of the loads. */
static tg_tensor *b_sum_exp_shifted(tg_tensor **in) {
  int axis = 1;
  return tg_sum(tg_exp2(tg_mul_s(tg_sub(in[0], in[1]), 1.4426950408889634)), &axis, 1, true);
}

TEST(opt_heuristic_row_sum_lanes_along_the_row) {
  if (device_default() && device_is_gpu(device_default())) SKIP("vector lanes are for host devices");
  inspect_ctx c = {0};
  tg_scope *s = tg_scope_begin();
  tg_tensor *in[2] = {ones_buffer((int64_t[]){64, 1024}, 2), ones_buffer((int64_t[]){64, 1}, 2)};
  heuristics_of(b_sum_exp_shifted, in, &c);
  CHECK(strstr(c.opts, "UNROLL(1,")); /* rows may still be upcast: 8 rows' accumulators side by side */
  if (!strstr(c.opts, "UNROLL(1,")) printf("  opts: %s\n", c.opts);
  free(c.src);
  tg_scope_end(s);
}

/* Work-group combines that follow one another (one per UPCAST output) share one local array
 * and one pair of barriers (render/c.c, issue 14): 8 outputs per work-item, each a sum over a
 * loop then across a group of 16, render to OpenCL with 2 barriers, not 16; and on a
 * work-group device, the random sequence that took PoCL minutes to build (a float16 matmul
 * with UPCAST 32 x 8 = 256 outputs per work-item and GROUPTOP 2: 512 barriers before) runs
 * and matches the unoptimized kernel. */
static uop *lin_range(int64_t n, int id, int kind) { return uop_new(OP_RANGE, TG_INT64, (uop *[]){uop_idx(n)}, 1, (int64_t[]){id, kind}, 2); }
static uop *lin_buf(int slot, int64_t n) { return uop_new(OP_DEFINE_GLOBAL, TG_FLOAT32, NULL, 0, (int64_t[]){slot, n}, 2); }

static int count_of(const char *s, const char *what) {
  int n = 0;
  for (const char *p = s; p && (p = strstr(p, what)); p += strlen(what)) n++;
  return n;
}

TEST(opt_upcast_group_combines_share_barriers) {
  size_t mark = uop_pool_mark();
  uop *i = lin_range(4, 0, RANGE_GLOBAL), *g = lin_range(16, 1, RANGE_LOCAL), *r = lin_range(32, 2, RANGE_REDUCE), *st[8];
  for (int c = 0; c < 8; c++) { /* out[8 i + c] = sum over g, r of x[((8 i + c) * 16 + g) * 32 + r] */
    uop *row = uop_add(uop_mul(i, uop_idx(8)), uop_idx(c));
    uop *at = uop_add(uop_mul(uop_add(uop_mul(row, uop_idx(16)), g), uop_idx(32)), r);
    uop *a = uop_new(OP_LOAD, TG_FLOAT32, (uop *[]){lin_buf(1, 32 * 16 * 32), at}, 2, NULL, 0);
    uop *part = uop_new(OP_REDUCE, TG_FLOAT32, (uop *[]){a, r}, 2, (int64_t[]){OP_ADD, 1}, 2);
    uop *all = uop_new(OP_REDUCE, TG_FLOAT32, (uop *[]){part, g}, 2, (int64_t[]){OP_ADD, 1}, 2);
    st[c] = uop_new(OP_STORE, TG_FLOAT32, (uop *[]){lin_buf(0, 32), row, all, uop_alu(OP_CMPEQ, g, uop_idx(0))}, 4, NULL, 0);
  }
  lin_program prog = {0};
  kernel_info info = {0};
  CHECK(linearize(uop_new(OP_SINK, TG_BOOL, st, 8, NULL, 0), &prog, &info) == 0);
  CHECK(program_spec_check(&prog) == 0);
  const char *names[1] = {"r_upcast_wg"};
  char *cl = render_opencl(&prog, 1, names);
  CHECK(cl && count_of(cl, "barrier(CLK_LOCAL_MEM_FENCE);") == 2);
  CHECK(cl && strstr(cl, "__local float tg_lds0[128];") && !strstr(cl, "tg_lds1")); /* 8 slots of 16 */
  CHECK(cl && strstr(cl, "tg_lds0[112 + tg_lid] = ")); /* the eighth partial's slot */
  free(cl), free(prog.ops);
  uop_pool_release(mark);
  bool wg = device_default() && device_default()->caps.max_local_size > 1 && device_is_gpu(device_default());
  if (!wg) return;
  const opt_case *c = &cases[NCASES - 2]; /* matmul_f16 */
  static const opt_action acts[] = {{OPT_UPCAST, 0, 32}, {OPT_UPCAST, 0, 8}, {OPT_GROUPTOP, 1, 2}};
  tg_tensor *in[3];
  make_inputs(c, in);
  int64_t n, m;
  double *ref = reference(c, in, &n), *got;
  fixed_ctx f = {acts, 3, 0};
  program_set_opt_hook(fixed_opts, &f);
  int rc = run_case(c, in, &got, &m);
  program_set_opt_hook(NULL, NULL);
  CHECK(rc == 0 && m == n && f.used == 1 && !strcmp(c->name, "matmul_f16"));
  if (ref && rc == 0) CHECK(compare("upcast 256 + grouptop", c, ref, got, n) == 0);
  free(got), free(ref);
  free_inputs(in, c->nin);
}

/* Loop-invariant work between a REDUCE's loops (linearize.c, hoist_between_loops): a blocked
 * matrix-vector product out[i] = sum over b, k of q[(i * 6 + b) * 32 + k] * s[i * 6 + b] *
 * x[b * 32 + k], the reduction over (blocks b, values k) as the split rule makes it for GGUF
 * weights. The block's scale s (and its decode, here 2 * s) depends on b only: it is loaded
 * once, after b's loop opens and before k's does, not once per value; the value loads stay
 * inside k's loop. */
TEST(opt_linearize_hoists_per_block_values) {
  size_t mark = uop_pool_mark();
  uop *i = lin_range(4, 0, RANGE_GLOBAL), *b = lin_range(6, 1, RANGE_REDUCE), *k = lin_range(32, 2, RANGE_REDUCE);
  uop *blk = uop_add(uop_mul(i, uop_idx(6)), b);
  uop *qv = uop_new(OP_LOAD, TG_FLOAT32, (uop *[]){lin_buf(1, 4 * 6 * 32), uop_add(uop_mul(blk, uop_idx(32)), k)}, 2, NULL, 0);
  uop *sv = uop_new(OP_LOAD, TG_FLOAT32, (uop *[]){lin_buf(2, 4 * 6), blk}, 2, NULL, 0);
  uop *xv = uop_new(OP_LOAD, TG_FLOAT32, (uop *[]){lin_buf(3, 6 * 32), uop_add(uop_mul(b, uop_idx(32)), k)}, 2, NULL, 0);
  uop *scale = uop_alu(OP_MUL, sv, uop_const(TG_FLOAT32, 2.0));
  uop *prod = uop_alu(OP_MUL, uop_alu(OP_MUL, qv, scale), xv);
  uop *red = uop_new(OP_REDUCE, TG_FLOAT32, (uop *[]){prod, b, k}, 3, (int64_t[]){OP_ADD, 1}, 2);
  uop *st = uop_new(OP_STORE, TG_FLOAT32, (uop *[]){lin_buf(0, 4), i, red}, 3, NULL, 0);
  lin_program prog = {0};
  kernel_info info = {0};
  CHECK(linearize(uop_new(OP_SINK, TG_BOOL, &st, 1, NULL, 0), &prog, &info) == 0);
  CHECK(program_spec_check(&prog) == 0);
  int at_b = -1, at_k = -1, at_s = -1, at_scale = -1, at_q = -1, loads = 0;
  for (int j = 0; j < prog.n; j++) {
    uop *u = prog.ops[j].u;
    if (prog.ops[j].kind == L_LOOP && u == b) at_b = j;
    if (prog.ops[j].kind == L_LOOP && u == k) at_k = j;
    if (prog.ops[j].kind != L_VALUE) continue;
    if (u == sv) at_s = j;
    if (u == scale) at_scale = j;
    if (u == qv) at_q = j;
    loads += u->op == OP_LOAD;
  }
  CHECK(at_b >= 0 && at_b < at_s && at_s < at_scale && at_scale < at_k && at_k < at_q);
  CHECK(loads == 3); /* each load emitted once */
  free(prog.ops);
  uop_pool_release(mark);
}

/* An output dim of 259 rows (7 x 37: no tile amount of 4 or more divides it) in a
 * matrix-vector product: the default optimizer pads it to 264 (PADTO 8) and upcasts 8 rows
 * (opt.c, pad_tile_dims), and the 5 padded rows are neither stored nor change the others:
 * values against a naive loop. A CPU-device rule (work-group devices keep one row an item). */
typedef struct padded_ctx {
  bool padto, upcast;
} padded_ctx;

static int default_opts_seen(uop *ast, kshape *ks, void *ctx) {
  padded_ctx *p = ctx;
  kshape_optimize(ks, ast, &device_default()->caps);
  for (int i = 0; i < ks->napplied; i++) {
    p->padto |= ks->applied[i].kind == OPT_PADTO && ks->applied[i].axis == 0 && ks->applied[i].amount == 8;
    p->upcast |= ks->applied[i].kind == OPT_UPCAST && ks->applied[i].axis == 0 && ks->applied[i].amount == 8;
  }
  return 0;
}

TEST(opt_pads_odd_rows_for_register_tile) {
  enum { R = 259, C = 96 };
  static float w[R * C], x[C], want[R], got[R];
  for (int i = 0; i < R * C; i++) w[i] = (float)((i * 13) % 23 - 11) * 0.0625f;
  for (int i = 0; i < C; i++) x[i] = (float)(i % 7 - 3) * 0.5f;
  for (int r = 0; r < R; r++) {
    double acc = 0;
    for (int c = 0; c < C; c++) acc += (double)w[r * C + c] * x[c];
    want[r] = (float)acc;
  }
  tg_scope *s = tg_scope_begin();
  tg_tensor *wt = tg_from_data(w, TG_FLOAT32, (int64_t[]){R, C}, 2), *xt = tg_from_data(x, TG_FLOAT32, (int64_t[]){C}, 1);
  CHECK(wt && xt && tg_realize(wt) == 0 && tg_realize(xt) == 0);
  padded_ctx p = {false, false};
  program_set_opt_hook(default_opts_seen, &p);
  tg_tensor *y = tg_matmul(wt, xt);
  int rc = tg_to_host(y, got, sizeof got);
  program_set_opt_hook(NULL, NULL);
  CHECK(rc == 0);
  int bad = 0;
  for (int r = 0; r < R; r++) bad += !(fabsf(got[r] - want[r]) <= 1e-4f * (1 + fabsf(want[r])));
  CHECK(bad == 0);
  if (device_default()->caps.max_local_size <= 1) CHECK(p.padto && p.upcast);
  tg_scope_end(s);
}
