/* test_fuse_rows.c — row reductions fused into the kernel that consumes them (fusion policy
 * rule 2a, docs/architecture.md): softmax, log_softmax, layernorm and rmsnorm over the last
 * axis are one kernel on host devices when a row fits the cache, and compute what naive C
 * loops (in double) compute; a row too large for the cache, a reduction over another axis, a
 * consumer that permutes the row, and work-item devices keep the reductions as their own
 * kernels. Random optimizer actions on the fused kernel (test_opt's draws) must agree with it
 * unoptimized, and the actions that would redo a row's reductions per element are refused. */
#include <math.h>
#include <stdlib.h>
#include "harness.h"
#include "kernel_ast.h"
#include "codegen/codegen.h"
#include "device/device.h"
#include "schedule/schedule.h"
#include "uop/symbolic.h"
#include "tensor/tensor.h"
#include "tg_nn.h"

enum { SOFTMAX, LOG_SOFTMAX, LAYERNORM, RMSNORM, NKINDS };
static const char *const kind_names[NKINDS] = {"softmax", "log_softmax", "layernorm", "rmsnorm"};

#define EPS 1e-5

/* Values in about [-4, 4], varied along rows and columns. */
static float *inputs(int64_t n, int seed) {
  float *d = malloc(sizeof(float) * (size_t)(n ? n : 1));
  for (int64_t i = 0; i < n; i++) d[i] = (float)((i * 37 + seed * 11) % 101 - 50) * 0.08f;
  return d;
}

/* The naive reference of one row of c values, in double. */
static void ref_row(int kind, const float *x, double *y, int64_t c) {
  double m = -INFINITY, mean = 0, sq = 0, s = 0;
  for (int64_t j = 0; j < c; j++) m = fmax(m, x[j]), mean += x[j], sq += (double)x[j] * x[j];
  mean /= (double)c, sq /= (double)c;
  double var = 0;
  for (int64_t j = 0; j < c; j++) s += exp(x[j] - m), var += (x[j] - mean) * (x[j] - mean);
  var /= (double)c;
  for (int64_t j = 0; j < c; j++) {
    if (kind == SOFTMAX) y[j] = exp(x[j] - m) / s;
    else if (kind == LOG_SOFTMAX) y[j] = x[j] - m - log(s);
    else if (kind == LAYERNORM) y[j] = (x[j] - mean) / sqrt(var + EPS);
    else y[j] = x[j] / sqrt(sq + EPS);
  }
}

static tg_tensor *apply(int kind, tg_tensor *x, int naxes) {
  if (kind == SOFTMAX) return tg_softmax(x, -1);
  if (kind == LOG_SOFTMAX) return tg_log_softmax(x, -1);
  if (kind == LAYERNORM) return tg_layernorm(x, naxes, NULL, NULL, EPS);
  return tg_rmsnorm(x, naxes, NULL, EPS);
}

/* Host devices (loops, vector lanes) fuse; work-item devices keep the reductions apart. */
static bool fuses_here(void) { return device_default()->caps.max_local_size <= 1; }

/* Realize kind over the rows of x (r rows of c: its last naxes dims), compare with the naive
 * loops, and return the kernels it ran (and planned: the same). */
static int run_rows(int kind, const int64_t *shape, int nd, int naxes) {
  int64_t n = 1, c = 1;
  for (int i = 0; i < nd; i++) n *= shape[i];
  for (int i = nd - naxes; i < nd; i++) c *= shape[i];
  float *d = inputs(n, kind), *got = malloc(sizeof(float) * (size_t)n);
  double *want = malloc(sizeof(double) * (size_t)n);
  tg_scope *s = tg_scope_begin();
  tg_tensor *x = tg_from_data(d, TG_FLOAT32, shape, nd), *y = x && tg_realize(x) == 0 ? apply(kind, x, naxes) : NULL;
  CHECK(y != NULL);
  int planned = y ? tg_schedule_kernels(&y, 1) : -1;
  tg_reset_stats();
  CHECK(y && tg_to_host(y, got, sizeof(float) * (size_t)n) == 0);
  int ran = (int)tg_get_stats().kernels_run;
  CHECK(planned == ran);
  int bad = 0;
  double rtol = 2e-5 + 1e-9 * (double)c; /* float32 sums over long rows: a work-item adds one by one */
  for (int64_t r = 0; r < n / c; r++) ref_row(kind, d + r * c, want + r * c, c);
  for (int64_t i = 0; i < n && y; i++)
    if (!harness_close(got[i], want[i], 2e-6, rtol) && bad++ < 3)
      printf("  %s: element %lld: %.8g, want %.8g\n", kind_names[kind], (long long)i, got[i], want[i]);
  CHECK(bad == 0);
  tg_scope_end(s);
  free(d), free(got), free(want);
  return ran;
}

/* ------------------------------------------------ one kernel per row-wise op */

TEST(fuse_rows_softmax_family_one_kernel) {
  static const int64_t shapes[][2] = {{64, 100}, {33, 7}, {16, 64}, {3, 4096}, {130, 9}};
  for (int k = 0; k < NKINDS; k++)
    for (size_t i = 0; i < sizeof shapes / sizeof *shapes; i++) {
      int ran = run_rows(k, shapes[i], 2, 1);
      CHECK(fuses_here() ? ran == 1 : ran > 1);
      if (fuses_here() && ran != 1) printf("  %s %lldx%lld: %d kernels\n", kind_names[k], (long long)shapes[i][0], (long long)shapes[i][1], ran);
    }
}

/* A 1-element row: the reductions are the element itself. Whatever the kernel count, values. */
TEST(fuse_rows_one_element_rows) {
  static const int64_t shape[2] = {5, 1};
  for (int k = 0; k < NKINDS; k++) CHECK(run_rows(k, shape, 2, 1) >= 1);
}

/* Rows over the last two dims (layernorm's normalized_shape of two dims), and a batch dim. */
TEST(fuse_rows_two_row_dims_and_batch) {
  static const int64_t shape[3] = {3, 6, 10};
  int ran = run_rows(LAYERNORM, shape, 3, 2);
  CHECK(fuses_here() ? ran == 1 : ran > 1);
  ran = run_rows(SOFTMAX, shape, 3, 1);
  CHECK(fuses_here() ? ran == 1 : ran > 1);
}

/* Softmax's kernels when its reductions are not fused: max, sum of exp, normalize; on host
 * devices the exp is stored once between them (exp2 is a polynomial there: recomputing it
 * in the normalizing kernel costs more than reading it, worth_storing). */
static int unfused_softmax_kernels(void) { return fuses_here() ? 4 : 3; }

/* A row that does not fit the cache share (ROW_CACHE_SHARE of caps.l2_bytes) is not fused:
 * each pass would read it from memory again. */
TEST(fuse_rows_too_large_row_not_fused) {
  int64_t cols = device_default()->caps.l2_bytes / (int64_t)sizeof(float) + 16, shape[2] = {2, cols};
  int ran = run_rows(SOFTMAX, shape, 2, 1);
  CHECK(ran == unfused_softmax_kernels());
  ran = run_rows(LAYERNORM, shape, 2, 1);
  CHECK(ran > 1);
}

/* ------------------------------------------------ where it must not fuse */

/* Naive softmax over axis 0 of a (r, c) matrix, in double. */
static void ref_softmax_cols(const float *x, double *y, int64_t r, int64_t c) {
  for (int64_t j = 0; j < c; j++) {
    double m = -INFINITY, s = 0;
    for (int64_t i = 0; i < r; i++) m = fmax(m, x[i * c + j]);
    for (int64_t i = 0; i < r; i++) s += exp(x[i * c + j] - m);
    for (int64_t i = 0; i < r; i++) y[i * c + j] = exp(x[i * c + j] - m) / s;
  }
}

/* Softmax over the first axis: the reduced dim is an outer loop of the consumer (its value
 * would be recomputed per element), and the transpose of a row softmax: the consumer's loops
 * run down the columns. Both keep their reductions apart, and both are right. */
TEST(fuse_rows_not_for_outer_axis_or_permuted_consumer) {
  enum { R = 24, C = 40 };
  int64_t shape[2] = {R, C};
  float *d = inputs(R * C, 3), got[R * C];
  double want[R * C], rows[R * C];
  tg_scope *s = tg_scope_begin();
  tg_tensor *x = tg_from_data(d, TG_FLOAT32, shape, 2);
  CHECK(x && tg_realize(x) == 0);
  tg_tensor *y = tg_softmax(x, 0);
  CHECK(tg_schedule_kernels(&y, 1) == unfused_softmax_kernels());
  CHECK(tg_to_host(y, got, sizeof got) == 0);
  ref_softmax_cols(d, want, R, C);
  int bad = 0;
  for (int i = 0; i < R * C; i++) bad += !harness_close(got[i], want[i], 2e-6, 2e-5);
  CHECK(bad == 0);
  int perm[2] = {1, 0};
  tg_tensor *t = tg_permute(tg_softmax(x, 1), perm, 2);
  CHECK(tg_schedule_kernels(&t, 1) > 1);
  CHECK(tg_to_host(t, got, sizeof got) == 0);
  for (int i = 0; i < R; i++) ref_row(SOFTMAX, d + i * C, rows + i * C, C);
  bad = 0;
  for (int i = 0; i < R; i++)
    for (int j = 0; j < C; j++) bad += !harness_close(got[j * R + i], rows[i * C + j], 2e-6, 2e-5);
  CHECK(bad == 0);
  tg_scope_end(s);
  free(d);
}

/* ------------------------------------------------ the optimizer on the fused kernel */

/* The kernel AST of a fused softmax (64, 100): the only item of its schedule. */
static uop *fused_softmax_ast(tg_tensor **keep) {
  int64_t shape[2] = {64, 100};
  float *d = inputs(64 * 100, 1);
  tg_tensor *x = tg_from_data(d, TG_FLOAT32, shape, 2);
  free(d);
  CHECK(x && tg_realize(x) == 0);
  *keep = tg_softmax(x, -1);
  schedule sc;
  uop *u = *keep ? (*keep)->u : NULL, *ast = NULL;
  if (u && schedule_build(&u, 1, &sc) == 0) {
    if (sc.items.n == 1) ast = sc.items.v[0].ast, uop_incref(ast);
    schedule_free(&sc);
  }
  return ast;
}

/* Its row dim is known; THREAD on it and a SWAP past it are refused (each would redo the row's
 * max and sum); the heuristics give the row shared lanes and thread over the rows. */
TEST(fuse_rows_optimizer_keeps_rows_inner) {
  if (!fuses_here()) SKIP("work-item devices do not fuse row reductions");
  tg_scope *s = tg_scope_begin();
  tg_tensor *y;
  uop *ast = fused_softmax_ast(&y);
  CHECK(ast != NULL);
  if (!ast) { tg_scope_end(s); return; }
  kshape ks;
  CHECK(kshape_init(&ks, ast) == 0);
  CHECK(ks.nout == 2 && ks.nred == 1 && ks.row_dims == 2); /* dim 1, the row */
  kshape t = ks;
  CHECK(kshape_apply(&t, (opt_action){OPT_THREAD, 1, 4}) < 0);
  t = ks;
  CHECK(kshape_apply(&t, (opt_action){OPT_SWAP, 0, 1}) < 0);
  t = ks;
  CHECK(kshape_apply(&t, (opt_action){OPT_THREAD, 0, 4}) == 0);
  kshape_optimize(&ks, ast, &device_default()->caps);
  bool thread_rows = false;
  for (int i = 0; i < ks.nax; i++) thread_rows |= ks.ax[i].kind == AX_THREAD && ks.ax[i].dim == 0;
  CHECK(kshape_lane_axis(&ks) < 0 || kshape_row_lane_axis(&ks) >= 0); /* vectors: max, sum and row alike */
  CHECK(thread_rows || device_default()->caps.threads < 2);
  uop_decref(ast);
  tg_scope_end(s);
}

static uint64_t next_random(uint64_t *s) {
  *s ^= *s << 13, *s ^= *s >> 7, *s ^= *s << 17;
  return *s;
}

/* As test_opt's draws: up to 6 actions, each one the state offers. */
static int random_opts(uop *ast, kshape *ks, void *ctx) {
  (void)ast;
  uint64_t *st = ctx;
  opt_action cand[512];
  int steps = (int)(next_random(st) % 7);
  for (int i = 0; i < steps; i++) {
    int n = kshape_candidates(ks, cand, 512);
    if (n == 0) break;
    if (kshape_apply(ks, cand[next_random(st) % (uint64_t)n]) < 0) return -1;
  }
  return 0;
}

static int no_opts(uop *ast, kshape *ks, void *ctx) {
  (void)ast, (void)ks, (void)ctx;
  return 0;
}

/* Softmax, log_softmax and layernorm of rows of 100 (not a multiple of the lanes) and 7:
 * unoptimized, under 12 random action sequences each, and with the heuristics, all agree
 * with the naive loops (run_rows checks each). */
TEST(fuse_rows_random_actions_match) {
  static const int64_t shapes[][2] = {{12, 100}, {9, 7}};
  for (int k = 0; k < NKINDS - 1; k++)
    for (int i = 0; i < 2; i++) {
      program_set_opt_hook(no_opts, NULL);
      run_rows(k, shapes[i], 2, 1);
      for (int seed = 1; seed <= 12; seed++) {
        uint64_t st = 0x9e3779b97f4a7c15ull * (uint64_t)(seed * 31 + k * 7 + i);
        program_set_opt_hook(random_opts, &st);
        run_rows(k, shapes[i], 2, 1);
      }
      program_set_opt_hook(NULL, NULL);
    }
}

/* Softmax over x[:, :n] with n a variable (docs/symbolic.md): the max's and the sum's loops end
 * at n, both computed from one variable end before them (the C device once defined it twice
 * in one block: a compile error), one kernel for every n, values against the naive loops. */
TEST(fuse_rows_variable_row_length) {
  enum { R = 5, C = 24 };
  static const int64_t ns[] = {7, 1, 24, 16};
  float *d = inputs(R * C, 2), got[R * C];
  double want[C];
  tg_scope *outer = tg_scope_begin();
  tg_symvar *v = tg_variable("fuse_rows_n", 1, C);
  tg_tensor *x = tg_from_data(d, TG_FLOAT32, (int64_t[]){R, C}, 2);
  CHECK(v && x && tg_realize(x) == 0);
  for (size_t k = 0; k < sizeof ns / sizeof *ns; k++) {
    int64_t n = ns[k];
    CHECK(tg_var_bind(v, n) == 0);
    tg_scope *s = tg_scope_begin();
    tg_tensor *y = tg_softmax(tg_shrink(x, (int64_t[]){0, 0}, (int64_t[]){R, tg_var_dim(v, 0)}), -1);
    CHECK(y && tg_schedule_kernels(&y, 1) == (fuses_here() ? 1 : unfused_softmax_kernels()));
    CHECK(y && tg_to_host(y, got, sizeof(float) * (size_t)(R * n)) == 0);
    int bad = 0;
    for (int i = 0; i < R; i++) {
      ref_row(SOFTMAX, d + i * C, want, n);
      for (int j = 0; j < n; j++) bad += !harness_close(got[i * n + j], want[j], 2e-6, 2e-5);
    }
    CHECK(bad == 0);
    tg_scope_end(s);
  }
  tg_scope_end(outer);
  free(d);
}

/* ------------------------------------------------ the row scratch (linearize.c) */


/* A realized float32 (rows, cols) tensor of inputs(seed); *d keeps the data (the caller frees it). */
static tg_tensor *realized(const int64_t shape[2], int seed, float **d) {
  *d = inputs(shape[0] * shape[1], seed);
  tg_tensor *x = tg_from_data(*d, TG_FLOAT32, shape, 2);
  CHECK(x && tg_realize(x) == 0);
  return x;
}

/* The one kernel AST of kind k over x's rows (a reference of the caller's), checked present. */
static uop *kind_ast(int k, tg_tensor *x) {
  uop *ast = only_ast(apply(k, x, 1));
  CHECK(ast != NULL);
  return ast;
}

/* The program of ast as the default device builds it, under its heuristics' actions (or none:
 * scalar code), prefetching rows of buffers larger than prefetch_bytes (0: none); 0 or an
 * error. The caller frees lin->ops and releases the pool to its mark. */
static int build_program(uop *ast, bool optimize, int64_t prefetch_bytes, lin_program *lin) {
  static const vector_forms scalar_only = {NULL};
  const device *dev = device_default();
  kshape ks;
  if (kshape_init(&ks, ast) < 0) return -2;
  if (optimize) kshape_optimize(&ks, ast, &dev->caps);
  ks.prefetch_bytes = prefetch_bytes;
  kernel_info info = {0};
  uop *sink = lower_kernel(ast, &ks, STAGE_ONLY, &info);
  if (sink) sink = devectorize(sink, dev->vectors ? dev->vectors : &scalar_only);
  return sink && linearize(sink, lin, &info) == 0 && program_spec_check(lin) == 0 ? 0 : -2;
}

/* Stores into row scratch arrays in the program of ast (build_program, no prefetches) and the
 * loads from them (*loads, if asked); -1 if fewer loads than stores (a kept value nobody reads). */
static int scratch_counts(uop *ast, bool optimize, int *loads_out) {
  size_t mark = uop_pool_mark();
  lin_program lin = {0};
  int stores = -2, loads = 0;
  if (build_program(ast, optimize, 0, &lin) == 0) {
    stores = 0;
    for (int i = 0; i < lin.n; i++) {
      uop *u = lin.ops[i].u;
      bool scratch = (u->op == OP_STORE || u->op == OP_LOAD) && is_row_scratch(u->src[0]);
      stores += scratch && lin.ops[i].kind == L_STORE;
      loads += scratch && lin.ops[i].kind == L_VALUE;
    }
  }
  free(lin.ops);
  uop_pool_release(mark);
  if (loads_out) *loads_out = loads;
  return stores >= 0 && loads < stores ? -1 : stores;
}

static int scratch_stores(uop *ast, bool optimize) { return scratch_counts(ast, optimize, NULL); }

/* e / sum(e) over rows, e = (x*x + 1) * 2 (3 ALU ops per element), plus 3 when `four`. */
static tg_tensor *ratio_of(tg_tensor *x, bool four) {
  int axis = -1;
  tg_tensor *e = tg_mul_s(tg_add_s(tg_mul(x, x), 1.0), 2.0);
  if (four) e = tg_add_s(e, 3.0);
  return tg_div(e, tg_sum(e, &axis, 1, true));
}

static double ratio_ref(float x, bool four) { return ((double)x * x + 1) * 2 + (four ? 3 : 0); }

/* The cost rule: softmax's exp (a polynomial of ~30 ops) is kept per row, vectorized or
 * scalar; log_softmax shares only x − max with its sum (a cast and a subtraction), layernorm
 * x − mean, rmsnorm nothing: no scratch. e / sum(e) keeps e at 4 ops, not at 3. A row past ROW_SCRATCH_BYTES
 * keeps nothing (still one kernel). Values of every case against the naive loops. */
TEST(fuse_rows_scratch_where_cost_says) {
  if (!fuses_here()) SKIP("work-item devices do not fuse row reductions (no row scratch either)");
  static const int want[NKINDS] = {1, 0, 0, 0};
  int64_t shape[2] = {6, 100}, big[2] = {2, ROW_SCRATCH_BYTES / (int64_t)sizeof(float) + 8};
  tg_scope *s = tg_scope_begin();
  float *d, *db;
  tg_tensor *x = realized(shape, 4, &d);
  for (int k = 0; k < NKINDS; k++) {
    uop *ast = kind_ast(k, x);
    if (!ast) continue;
    int vec = scratch_stores(ast, true), scalar = scratch_stores(ast, false);
    CHECK(vec == want[k] && scalar == want[k]);
    if (vec != want[k] || scalar != want[k]) printf("  %s: %d and %d scratch stores, want %d\n", kind_names[k], vec, scalar, want[k]);
    uop_decref(ast);
    run_rows(k, shape, 2, 1);
  }
  for (int four = 0; four < 2; four++) {
    tg_tensor *y = ratio_of(x, four);
    uop *ast = only_ast(y);
    CHECK(ast && scratch_stores(ast, true) == four && scratch_stores(ast, false) == four);
    if (ast) uop_decref(ast);
    float got[6 * 100];
    CHECK(tg_to_host(y, got, sizeof got) == 0);
    int bad = 0;
    for (int r = 0; r < 6; r++) {
      double sum = 0;
      for (int j = 0; j < 100; j++) sum += ratio_ref(d[r * 100 + j], four);
      for (int j = 0; j < 100; j++) bad += !harness_close(got[r * 100 + j], ratio_ref(d[r * 100 + j], four) / sum, 2e-6, 2e-5);
    }
    CHECK(bad == 0);
  }
  tg_tensor *xb = realized(big, 5, &db);
  bool fused = big[1] * (int64_t)sizeof(float) * 4 <= device_default()->caps.l2_bytes; /* ROW_CACHE_SHARE */
  uop *ast = xb && fused ? only_ast(tg_softmax(xb, -1)) : NULL;
  CHECK(!fused || (ast && scratch_stores(ast, true) == 0));
  if (ast) uop_decref(ast);
  CHECK(run_rows(SOFTMAX, big, 2, 1) == (fused ? 1 : unfused_softmax_kernels()));
  tg_scope_end(s);
  free(d), free(db);
}

/* Softmax over rows of 1..17 and 33 elements (not multiples of the lanes, a 1-element row),
 * with the heuristics and under random actions: the kept exp read back where the output
 * needs it (values against the naive loops, in run_rows). */
TEST(fuse_rows_scratch_odd_rows) {
  for (int64_t c = 1; c <= 33; c += c < 17 ? 1 : 16) {
    int64_t shape[2] = {5, c};
    CHECK(run_rows(SOFTMAX, shape, 2, 1) >= 1);
    for (int seed = 1; seed <= 4; seed++) {
      uint64_t st = 0x9e3779b97f4a7c15ull * (uint64_t)(seed * 131 + c);
      program_set_opt_hook(random_opts, &st);
      run_rows(SOFTMAX, shape, 2, 1);
    }
    program_set_opt_hook(NULL, NULL);
  }
}

/* Softmax's backward, d/dx sum(softmax(x) · w) = y · (w − sum(y · w)): one row kernel whose
 * max, sum of exp, sum of y · w and output all need the exp; it is computed once (the sum of
 * exp's pass stores it) and read twice (the sum of y · w and the output). Values against the
 * naive loops, rows of 100 (padded lanes) and 32, with the heuristics and (t >= 2) under
 * random actions. 32 is two vectors at 16 lanes (AVX-512): a row of one vector has no loop,
 * its exp is computed once anyway (interned) and nothing is kept. */
TEST(fuse_rows_scratch_softmax_backward) {
  static const int64_t cols[] = {100, 32};
  for (int t = 0; t < 10; t++) {
    int64_t c = cols[t % 2], shape[2] = {5, c}, n = 5 * c;
    uint64_t st = 0x9e3779b97f4a7c15ull * (uint64_t)(t * 17 + 3);
    program_set_opt_hook(t >= 2 ? random_opts : NULL, t >= 2 ? &st : NULL);
    float *d = inputs(n, 6), *wd = inputs(n, 7), *got = malloc(sizeof(float) * (size_t)n);
    tg_scope *s = tg_scope_begin();
    tg_tensor *x = tg_from_data(d, TG_FLOAT32, shape, 2), *w = tg_from_data(wd, TG_FLOAT32, shape, 2), *g = NULL;
    CHECK(x && w && tg_realize(x) == 0 && tg_realize(w) == 0);
    tg_tensor *loss = tg_sum(tg_mul(tg_softmax(x, -1), w), NULL, 0, false);
    CHECK(tg_gradient(loss, &x, 1, &g) == 0 && g);
    if (fuses_here() && g && t < 2) {
      uop *ast = only_ast(g);
      int loads = 0;
      CHECK(ast && scratch_counts(ast, true, &loads) == 1 && loads == 2);
      if (ast) uop_decref(ast);
    }
    CHECK(g && tg_to_host(g, got, sizeof(float) * (size_t)n) == 0);
    int bad = 0;
    for (int64_t r = 0; r < 5; r++) {
      double y[100], m = -INFINITY, sum = 0, yw = 0;
      const float *xr = d + r * c, *wr = wd + r * c;
      for (int64_t j = 0; j < c; j++) m = fmax(m, xr[j]);
      for (int64_t j = 0; j < c; j++) sum += exp(xr[j] - m);
      for (int64_t j = 0; j < c; j++) y[j] = exp(xr[j] - m) / sum, yw += y[j] * wr[j];
      for (int64_t j = 0; j < c; j++) bad += !harness_close(got[r * c + j], y[j] * (wr[j] - yw), 2e-6, 2e-5);
    }
    CHECK(bad == 0);
    program_set_opt_hook(NULL, NULL);
    tg_scope_end(s);
    free(d), free(wd), free(got);
  }
}

/* ------------------------------------------------ next-row prefetch (linearize.c) */

/* PREFETCHes in the program of ast (build_program), or -1 if one is misplaced: each must sit
 * inside the row loop and a loop over the row, after a load of its buffer in that loop, with an
 * index that never leaves the buffer (its value range, symbolic.c, within [0, elements)). */
static int prefetches(uop *ast, bool optimize, int64_t prefetch_bytes) {
  size_t mark = uop_pool_mark();
  lin_program lin = {0};
  int n = -2, depth = 0, loaded_at = -1;
  uop *loaded = NULL; /* the buffer of the last load, at depth loaded_at */
  if (build_program(ast, optimize, prefetch_bytes, &lin) == 0) {
    n = 0;
    for (int i = 0; i < lin.n && n >= 0; i++) {
      uop *u = lin.ops[i].u;
      depth += (lin.ops[i].kind == L_LOOP) - (lin.ops[i].kind == L_END);
      if (u->op == OP_LOAD) loaded_at = depth, loaded = u->src[0];
      if (u->op != OP_PREFETCH) continue;
      uop *g = u->src[0], *idx = u->src[1];
      bool after_load = loaded_at == depth && loaded == g;
      n = depth >= 2 && after_load && uop_vmin(idx) >= 0 && uop_vmax(idx) < g->arg[1] ? n + 1 : -1;
    }
  }
  free(lin.ops);
  uop_pool_release(mark);
  return n;
}

/* Softmax, log_softmax and layernorm read a row twice in row reductions (max then sum; mean
 * then variance): the second loop prefetches the next row, one PREFETCH per load of x (none
 * when off, none for a buffer within the threshold, by default the L2, none in rmsnorm: one
 * reduction). Rows past ROW_SCRATCH_BYTES prefetch nothing. Values under the prefetches: every
 * kind against the naive loops (run_rows), rows of 1..33 elements with random actions. */
TEST(fuse_rows_prefetch_next_row) {
  if (!fuses_here()) SKIP("work-item devices do not fuse row reductions (no row loops to prefetch in)");
  static const int want[NKINDS] = {1, 1, 1, 0};
  int64_t shape[2] = {6, 128}, big[2] = {2, ROW_SCRATCH_BYTES / (int64_t)sizeof(float) + 8};
  tg_scope *s = tg_scope_begin();
  float *d, *db;
  tg_tensor *x = realized(shape, 4, &d);
  for (int k = 0; k < NKINDS; k++) {
    uop *ast = kind_ast(k, x);
    if (!ast) continue;
    int vec = prefetches(ast, true, 1), scalar = prefetches(ast, false, 1), off = prefetches(ast, true, 0);
    int cached = prefetches(ast, true, device_default()->caps.l2_bytes); /* the default: x (3 KB) stays cached */
    CHECK(vec == want[k] && scalar == want[k] && off == 0 && cached == 0);
    if (vec != want[k] || scalar != want[k] || off || cached)
      printf("  %s: %d, %d, %d and %d prefetches, want %d\n", kind_names[k], vec, scalar, off, cached, want[k]);
    uop_decref(ast);
    run_rows(k, shape, 2, 1);
  }
  tg_tensor *xb = realized(big, 5, &db);
  uop *ast = xb ? only_ast(tg_softmax(xb, -1)) : NULL;
  CHECK(!ast || prefetches(ast, true, 1) == 0);
  if (ast) uop_decref(ast);
  for (int64_t c = 1; c <= 33; c += c < 17 ? 1 : 16) {
    int64_t odd[2] = {5, c};
    for (int seed = 1; seed <= 3; seed++) {
      uint64_t st = 0x9e3779b97f4a7c15ull * (uint64_t)(seed * 31 + c);
      program_set_opt_hook(random_opts, &st);
      for (int k = 0; k < NKINDS; k++) run_rows(k, odd, 2, 1);
    }
    program_set_opt_hook(NULL, NULL);
  }
  tg_scope_end(s);
  free(d), free(db);
}

/* The matrix-vector form (linearize.c stream_prefetch): a kernel whose only output loop is the
 * parallel one prefetches the rows the next iteration reads when they are at most 8 KiB ahead
 * (W (4099, 200): an odd row count, padded to the register tile, so the rows pass through the
 * padded dim's clamp), not for long rows (W (600, 2048): 64 KiB ahead), nor in a matmul (two
 * output loops), nor when off. Values with every buffer prefetched, against naive loops. */
static int prefetch_everything(uop *ast, kshape *ks, void *ctx) {
  (void)ctx;
  kshape_optimize(ks, ast, &device_default()->caps);
  ks->prefetch_bytes = 1;
  return 0;
}

TEST(fuse_rows_prefetch_matvec_streams) {
  if (!fuses_here()) SKIP("work-item devices get no prefetches");
  enum { R = 4099, C = 200 };
  float *w = inputs(R * C, 8), *v = inputs(C, 9), *wl = inputs(600 * 2048, 10), *vl = inputs(2048, 11);
  tg_scope *s = tg_scope_begin();
  tg_tensor *tw = tg_from_data(w, TG_FLOAT32, (int64_t[]){R, C}, 2), *tv = tg_from_data(v, TG_FLOAT32, (int64_t[]){C}, 1);
  tg_tensor *twl = tg_from_data(wl, TG_FLOAT32, (int64_t[]){600, 2048}, 2), *tvl = tg_from_data(vl, TG_FLOAT32, (int64_t[]){2048}, 1);
  tg_tensor *sq = tg_from_data(w, TG_FLOAT32, (int64_t[]){40, 40}, 2);
  CHECK(tg_realize(tw) == 0 && tg_realize(tv) == 0 && tg_realize(twl) == 0 && tg_realize(tvl) == 0 && tg_realize(sq) == 0);
  uop *mv = only_ast(tg_matmul(tw, tv)), *lng = only_ast(tg_matmul(twl, tvl)), *mm = only_ast(tg_matmul(sq, sq));
  CHECK(mv && lng && mm);
  if (mv && lng && mm) {
    int short_rows = prefetches(mv, true, 1), off = prefetches(mv, true, 0), long_rows = prefetches(lng, true, 1), matmul = prefetches(mm, true, 1);
    CHECK(short_rows > 0 && off == 0 && long_rows == 0 && matmul == 0);
    if (!(short_rows > 0 && off == 0 && long_rows == 0 && matmul == 0))
      printf("  prefetches: short rows %d, off %d, long rows %d, matmul %d\n", short_rows, off, long_rows, matmul);
  }
  if (mv) uop_decref(mv);
  if (lng) uop_decref(lng);
  if (mm) uop_decref(mm);
  program_set_opt_hook(prefetch_everything, NULL);
  float y[R];
  CHECK(tg_to_host(tg_matmul(tw, tv), y, sizeof y) == 0);
  int bad = 0;
  for (int r = 0; r < R; r++) {
    double ref = 0;
    for (int k = 0; k < C; k++) ref += (double)w[r * C + k] * v[k];
    bad += !harness_close(y[r], ref, 1e-5, 1e-5);
  }
  CHECK(bad == 0);
  program_set_opt_hook(NULL, NULL);
  tg_scope_end(s);
  free(w), free(v), free(wl), free(vl);
}
