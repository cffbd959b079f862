/* test_depthwise.c — MobileNetV2's conv shapes: depthwise convs (groups = channels, stride 1
 * and 2, padding 0-2) and pointwise (1x1) convs, which conv.c runs as a matmul over the
 * flattened positions from 28x28 to 64x64 (pointwise_as_matmul), each followed by a bias and a clamp
 * as the ONNX import builds them. Values and gradients against naive C loops in double: odd
 * sizes, channel counts that are not multiples of the vector width, batch > 1. And the
 * schedule's tail rule (schedule.c, kernel_ast): a kernel ending in elementwise ops over a
 * reshaped reduction (bias, clamp, residual) computes in the reduction's own shape. */
#include <stdint.h>
#include <stdlib.h>

#include "harness.h"
#include "codegen/codegen.h"

/* Fills v with values in [-1, 1) from a seeded LCG. */
static void fill(float *v, int64_t n, uint32_t seed) {
  for (int64_t i = 0; i < n; i++) v[i] = (float)((seed = seed * 1664525u + 1013904223u) >> 9) / 8388608.0f - 1.0f;
}

/* A 2-D conv: n images of c input channels h x w, k output channels, square kernel ks,
 * stride st, padding p, groups g. */
typedef struct conv_case { int n, c, h, w, k, ks, st, p, g; } conv_case;

static int out_h(const conv_case *s) { return (s->h + 2 * s->p - s->ks) / s->st + 1; }
static int out_w(const conv_case *s) { return (s->w + 2 * s->p - s->ks) / s->st + 1; }
static int64_t x_count(const conv_case *s) { return (int64_t)s->n * s->c * s->h * s->w; }
static int64_t w_count(const conv_case *s) { return (int64_t)s->k * (s->c / s->g) * s->ks * s->ks; }
static int64_t y_count(const conv_case *s) { return (int64_t)s->n * s->k * out_h(s) * out_w(s); }

/* Calls fn for every (output, input, weight) triple the conv multiplies: y index, x index,
 * w index. The naive forward and both gradients are this one loop. */
typedef void (*tap_fn)(void *ctx, int64_t yi, int64_t xi, int64_t wi);

static void each_tap(const conv_case *s, tap_fn fn, void *ctx) {
  int oh = out_h(s), ow = out_w(s), cpg = s->c / s->g, kpg = s->k / s->g;
  for (int n = 0; n < s->n; n++)
    for (int k = 0; k < s->k; k++)
      for (int i = 0; i < oh; i++)
        for (int j = 0; j < ow; j++)
          for (int c = 0; c < cpg; c++)
            for (int u = 0; u < s->ks; u++)
              for (int v = 0; v < s->ks; v++) {
                int ih = i * s->st + u - s->p, iw = j * s->st + v - s->p, ci = k / kpg * cpg + c;
                if (ih < 0 || ih >= s->h || iw < 0 || iw >= s->w) continue;
                fn(ctx, (((int64_t)n * s->k + k) * oh + i) * ow + j, (((int64_t)n * s->c + ci) * s->h + ih) * s->w + iw,
                   (((int64_t)k * cpg + c) * s->ks + u) * s->ks + v);
              }
}

typedef struct naive { const float *x, *w, *gy; double *y, *gx, *gw; } naive;

static void tap_forward(void *ctx, int64_t yi, int64_t xi, int64_t wi) {
  naive *t = ctx;
  t->y[yi] += (double)t->x[xi] * t->w[wi];
}

static void tap_backward(void *ctx, int64_t yi, int64_t xi, int64_t wi) {
  naive *t = ctx;
  t->gx[xi] += (double)t->gy[yi] * t->w[wi], t->gw[wi] += (double)t->gy[yi] * t->x[xi];
}

/* Seeded data for a case, the tensors over it, and what tg computed. */
typedef struct data {
  float *x, *w, *b, *gy;
  tg_tensor *tx, *tw, *tb, *tgy;
} data;

static void data_init(data *d, const conv_case *s) {
  d->x = malloc(sizeof(float) * (size_t)x_count(s)), d->w = malloc(sizeof(float) * (size_t)w_count(s));
  d->b = malloc(sizeof(float) * (size_t)s->k), d->gy = malloc(sizeof(float) * (size_t)y_count(s));
  fill(d->x, x_count(s), 1), fill(d->w, w_count(s), 2), fill(d->b, s->k, 3), fill(d->gy, y_count(s), 4);
  d->tx = tg_from_data(d->x, TG_FLOAT32, (int64_t[]){s->n, s->c, s->h, s->w}, 4);
  d->tw = tg_from_data(d->w, TG_FLOAT32, (int64_t[]){s->k, s->c / s->g, s->ks, s->ks}, 4);
  d->tb = tg_from_data(d->b, TG_FLOAT32, (int64_t[]){s->k}, 1);
  d->tgy = tg_from_data(d->gy, TG_FLOAT32, (int64_t[]){s->n, s->k, out_h(s), out_w(s)}, 4);
}

static void data_free(data *d) { free(d->x), free(d->w), free(d->b), free(d->gy); }

static tg_tensor *conv_of(const conv_case *s, const data *d) {
  return tg_conv2d(d->tx, d->tw, d->tb, (const int[]){s->st, s->st}, (const int[]){s->p, s->p}, NULL, s->g);
}

/* Elements of got outside want's tolerance (1e-5 of the largest |want|, as float32 sums of up
 * to a few hundred terms allow), the first few printed. */
static int mismatches(const char *what, const float *got, const double *want, int64_t n) {
  double m = 0;
  for (int64_t i = 0; i < n; i++) m = fabs(want[i]) > m ? fabs(want[i]) : m;
  int bad = 0;
  for (int64_t i = 0; i < n; i++)
    if (!(fabs(got[i] - want[i]) <= 1e-5 * (m > 1 ? m : 1)) && bad++ < 3)
      printf("  %s[%lld]: got %.9g, expected %.9g\n", what, (long long)i, got[i], want[i]);
  return bad;
}

/* clamp(conv(x, w) + b, 0, 6) (MobileNetV2's ReLU6) against the naive loop. */
static void check_values(const conv_case *s) {
  int64_t ny = y_count(s);
  tg_scope *sc = tg_scope_begin(); /* owns data_init's tensors */
  data d;
  data_init(&d, s);
  double *want = calloc((size_t)ny, sizeof(double));
  float *got = malloc(sizeof(float) * (size_t)ny);
  naive t = {d.x, d.w, NULL, want, NULL, NULL};
  each_tap(s, tap_forward, &t);
  int plane = out_h(s) * out_w(s);
  for (int64_t i = 0; i < ny; i++) {
    double v = want[i] + d.b[i / plane % s->k];
    want[i] = v < 0 ? 0 : v > 6 ? 6 : v;
  }
  tg_tensor *y = tg_clip(conv_of(s, &d), 0, 6);
  CHECK(y && tg_to_host(y, got, sizeof(float) * (size_t)ny) == 0);
  CHECK(mismatches("y", got, want, ny) == 0);
  tg_scope_end(sc);
  data_free(&d), free(want), free(got);
}

/* Gradients of sum(conv(x, w, b) * gy) for x, w and b against the naive loop. */
static void check_grads(const conv_case *s) {
  int64_t nx = x_count(s), nw = w_count(s), ny = y_count(s);
  tg_scope *sc = tg_scope_begin();
  data d;
  data_init(&d, s);
  double *gx = calloc((size_t)nx, sizeof(double)), *gw = calloc((size_t)nw, sizeof(double));
  double *gb = calloc((size_t)s->k, sizeof(double));
  float *got = malloc(sizeof(float) * (size_t)(nx > nw ? nx : nw));
  naive t = {d.x, d.w, d.gy, NULL, gx, gw};
  each_tap(s, tap_backward, &t);
  int plane = out_h(s) * out_w(s);
  for (int64_t i = 0; i < ny; i++) gb[i / plane % s->k] += d.gy[i];
  tg_tensor *wrt[3] = {d.tx, d.tw, d.tb}, *g[3] = {0};
  CHECK(tg_gradient(tg_sum(tg_mul(conv_of(s, &d), d.tgy), NULL, 0, false), wrt, 3, g) == 0);
  CHECK(g[0] && tg_to_host(g[0], got, sizeof(float) * (size_t)nx) == 0 && mismatches("dx", got, gx, nx) == 0);
  CHECK(g[1] && tg_to_host(g[1], got, sizeof(float) * (size_t)nw) == 0 && mismatches("dw", got, gw, nw) == 0);
  CHECK(g[2] && tg_to_host(g[2], got, sizeof(float) * (size_t)s->k) == 0 && mismatches("db", got, gb, s->k) == 0);
  tg_scope_end(sc);
  data_free(&d), free(gx), free(gw), free(gb), free(got);
}

/* Depthwise: odd sizes, 3x3 at stride 1 and 2 (padding 0-2), a 5x5, channels 3-17. */
static const conv_case depthwise_cases[] = {
    {2, 5, 13, 11, 5, 3, 1, 1, 5},  {3, 12, 9, 10, 12, 3, 2, 1, 12}, {1, 9, 7, 7, 9, 3, 2, 0, 9},
    {2, 3, 6, 5, 3, 5, 1, 2, 3},    {2, 17, 15, 15, 17, 3, 2, 1, 17}, {1, 16, 12, 12, 16, 3, 1, 1, 16},
};

/* Pointwise: from 14x14 (196 positions) up the flattened matmul, below it the direct form. */
static const conv_case pointwise_cases[] = {
    {2, 5, 29, 29, 7, 1, 1, 0, 1}, {1, 16, 28, 28, 24, 1, 1, 0, 1}, {3, 9, 14, 14, 11, 1, 1, 0, 1},
    {2, 24, 31, 27, 3, 1, 1, 0, 1},
};

#define N_CASES(a) (sizeof a / sizeof *a)

TEST(depthwise_values_match_naive) {
  for (size_t i = 0; i < N_CASES(depthwise_cases); i++) check_values(&depthwise_cases[i]);
}

TEST(depthwise_grads_match_naive) {
  for (size_t i = 0; i < N_CASES(depthwise_cases); i++) check_grads(&depthwise_cases[i]);
}

TEST(pointwise_values_match_naive) {
  for (size_t i = 0; i < N_CASES(pointwise_cases); i++) check_values(&pointwise_cases[i]);
}

TEST(pointwise_grads_match_naive) {
  for (size_t i = 0; i < N_CASES(pointwise_cases); i++) check_grads(&pointwise_cases[i]);
}

/* ------------------------------------------------------------ the kernels' shapes */

/* The output dims of the reduction kernels built while the hook is set (the last one's). */
typedef struct dims_ctx {
  int nout;
  int64_t size[KS_MAX_DIMS];
} dims_ctx;

static int record_dims(uop *ast, kshape *ks, void *ctx) {
  (void)ast;
  dims_ctx *c = ctx;
  if (ks->nred == 0) return 0;
  c->nout = 0;
  for (int d = 0; d < ks->nout; d++)
    if (ks->size[d] > 1) c->size[c->nout++] = ks->size[d];
  return 0;
}

/* Kernels run to realize y, and the last reduction kernel's output dims of size > 1. */
static uint64_t kernels_and_dims(tg_tensor *y, dims_ctx *c) {
  *c = (dims_ctx){0};
  program_set_opt_hook(record_dims, c);
  tg_reset_stats();
  CHECK(tg_realize(y) == 0);
  program_set_opt_hook(NULL, NULL);
  return tg_get_stats().kernels_run;
}

/* A pointwise conv at 28x28 and up with its bias and clamp is one kernel over the flattened
 * positions (the matmul's own dims, the tail computed under the reshape); at 14x14, and above
 * 4096 positions, over (H, W). */
TEST(pointwise_kernel_over_flat_positions) {
  static const struct { int c, hw, k; int64_t flat; } cases[] = {{8, 29, 6, 841}, {8, 14, 6, 196}, {8, 12, 6, 0}, {4, 65, 5, 0}};
  for (size_t i = 0; i < N_CASES(cases); i++) {
    conv_case s = {2, cases[i].c, cases[i].hw, cases[i].hw, cases[i].k, 1, 1, 0, 1};
    tg_scope *sc = tg_scope_begin();
    data d;
    data_init(&d, &s);
    dims_ctx c;
    CHECK(kernels_and_dims(tg_clip(conv_of(&s, &d), 0, 6), &c) == 1);
    bool flat = c.nout == 3 && c.size[2] == cases[i].flat, grid = c.nout == 4 && c.size[2] == s.h && c.size[3] == s.w;
    CHECK(cases[i].flat ? flat : grid);
    tg_scope_end(sc);
    data_free(&d);
  }
}

/* The schedule's tail rule on a plain matmul: (6, 10) @ (10, 12) seen as (6, 3, 4), plus a
 * bias per row and a residual, clamped, is one kernel over (6, 12) with the naive values. A
 * transposed residual stays in the (6, 3, 4) shape (reshaped, its reads would be div/mod
 * math): the same values either way. */
TEST(depthwise_schedule_tail_over_reduction) {
  float a[60], b[120], bias[6], r[72];
  fill(a, 60, 5), fill(b, 120, 6), fill(bias, 6, 7), fill(r, 72, 8);
  for (int transposed = 0; transposed < 2; transposed++) {
    double want[72];
    for (int i = 0; i < 6; i++)
      for (int j = 0; j < 12; j++) {
        double acc = bias[i] + (transposed ? r[(j % 4 * 3 + j / 4) * 6 + i] : r[i * 12 + j]);
        for (int k = 0; k < 10; k++) acc += (double)a[i * 10 + k] * b[k * 12 + j];
        want[i * 12 + j] = acc < -1 ? -1 : acc > 1 ? 1 : acc;
      }
    tg_scope *sc = tg_scope_begin();
    tg_tensor *ta = tg_from_data(a, TG_FLOAT32, (int64_t[]){6, 10}, 2), *tb = tg_from_data(b, TG_FLOAT32, (int64_t[]){10, 12}, 2);
    tg_tensor *tbias = tg_from_data(bias, TG_FLOAT32, (int64_t[]){6, 1, 1}, 3);
    tg_tensor *tr = tg_from_data(r, TG_FLOAT32, transposed ? (int64_t[]){4, 3, 6} : (int64_t[]){6, 3, 4}, 3);
    CHECK(tg_realize(ta) == 0 && tg_realize(tb) == 0 && tg_realize(tbias) == 0 && tg_realize(tr) == 0);
    if (transposed) tr = tg_permute(tr, (const int[]){2, 1, 0}, 3);
    tg_tensor *mm = tg_reshape(tg_matmul(ta, tb), (const int64_t[]){6, 3, 4}, 3);
    tg_tensor *y = tg_clip(tg_add(tg_add(mm, tbias), tr), -1, 1);
    dims_ctx c;
    CHECK(kernels_and_dims(y, &c) == 1);
    CHECK(transposed ? c.nout == 3 : (c.nout == 2 && c.size[0] == 6 && c.size[1] == 12));
    float got[72];
    CHECK(tg_to_host(y, got, sizeof got) == 0);
    CHECK(mismatches("y", got, want, 72) == 0);
    tg_scope_end(sc);
  }
}
