/* test_schedule.c — how many kernels the scheduler makes (tg_schedule_kernels: from the
 * schedule, nothing run) and then runs and compiles (tg_get_stats() kernels_run /
 * kernels_compiled after tg_reset_stats()), and that the fused kernels compute the right
 * values (checked against naive C loops).
 *
 * Inputs are realized before tg_reset_stats so that their upload is not counted. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include "harness.h"
#include "device/device.h"

#define TOL 1e-5

static void fill(float *d, int n, int seed) {
  for (int i = 0; i < n; i++) d[i] = (float)((i * 5 + seed * 7) % 13 - 6) * 0.25f;
}

/* A realized float32 tensor holding a copy of d. */
static tg_tensor *input(const float *d, const int64_t *shape, int ndim) {
  tg_tensor *t = tg_from_data(d, TG_FLOAT32, shape, ndim);
  CHECK(t != NULL);
  CHECK(tg_realize(t) == 0);
  CHECK(tg_is_realized(t));
  return t;
}

static uint64_t kernels_run(void) { return tg_get_stats().kernels_run; }

/* Realize t after a counter reset; returns the kernels it ran. */
static uint64_t realize_count(tg_tensor *t) {
  tg_reset_stats();
  CHECK(tg_realize(t) == 0);
  return kernels_run();
}

/* Copies t (float32, n elements) to out; copying a realized tensor runs no kernel. */
static void host(tg_tensor *t, float *out, int n) {
  uint64_t before = kernels_run();
  CHECK(tg_to_host(t, out, (size_t)n * sizeof(float)) == 0);
  CHECK(kernels_run() == before);
}

/* The schedule has n kernels, and realizing it runs exactly those. */
#define CHECK_KERNELS(t, n)                                                 \
  do {                                                                      \
    tg_tensor *t_ = (t);                                                    \
    int planned_ = tg_schedule_kernels(&t_, 1);                             \
    CHECK(planned_ == (n));                                                 \
    uint64_t k_ = realize_count(t_);                                        \
    CHECK(k_ == (uint64_t)(n));                                             \
    if (k_ != (uint64_t)(n))                                                \
      printf("  kernels_run = %llu, expected %d\n", (unsigned long long)k_, \
             (int)(n));                                                     \
  } while (0)

/* ------------------------------------------------ relu(x @ w + b): 1 kernel */

static void ref_linear_relu(const float *x, const float *w, const float *b, float *y,
                            int m, int k, int n) {
  for (int i = 0; i < m; i++)
    for (int j = 0; j < n; j++) {
      float acc = 0;
      for (int p = 0; p < k; p++) acc += x[i * k + p] * w[p * n + j];
      acc += b[j];
      y[i * n + j] = acc > 0 ? acc : 0;
    }
}

static tg_tensor *linear_relu(tg_tensor *x, tg_tensor *w, tg_tensor *b) {
  return tg_relu(tg_add(tg_matmul(x, w), b));
}

TEST(sched_linear_relu_one_kernel) {
  tg_scope *s = tg_scope_begin();
  enum { M = 4, K = 8, N = 5 };
  float xd[M * K], wd[K * N], bd[N];
  fill(xd, M * K, 1);
  fill(wd, K * N, 2);
  fill(bd, N, 3);
  const int64_t sx[] = {M, K}, sw[] = {K, N}, sb[] = {N};
  tg_tensor *x = input(xd, sx, 2), *w = input(wd, sw, 2), *b = input(bd, sb, 1);
  tg_tensor *y = linear_relu(x, w, b);
  CHECK(y != NULL);
  CHECK(tg_ndim(y) == 2 && tg_dim(y, 0) == M && tg_dim(y, 1) == N);
  CHECK_KERNELS(y, 1);
  float out[M * N], ref[M * N];
  host(y, out, M * N);
  ref_linear_relu(xd, wd, bd, ref, M, K, N);
  for (int i = 0; i < M * N; i++) CHECK_CLOSE(out[i], ref[i], TOL);
  tg_scope_end(s);
}

/* ------------------------------------------------------ (a*b).sum(): 1 kernel */

TEST(sched_mul_sum_one_kernel) {
  tg_scope *s = tg_scope_begin();
  enum { N = 100 };
  float ad[N], bd[N];
  fill(ad, N, 4);
  fill(bd, N, 5);
  const int64_t sh[] = {N};
  tg_tensor *a = input(ad, sh, 1), *b = input(bd, sh, 1);
  tg_tensor *r = tg_sum(tg_mul(a, b), NULL, 0, false);
  CHECK(r != NULL);
  CHECK(tg_ndim(r) == 0);
  CHECK_KERNELS(r, 1);
  float out = 0;
  host(r, &out, 1);
  double ref = 0;
  for (int i = 0; i < N; i++) ref += (double)ad[i] * bd[i];
  CHECK_CLOSE(out, ref, TOL);
  tg_scope_end(s);
}

TEST(sched_mul_sum_axis_one_kernel) {
  tg_scope *s = tg_scope_begin();
  enum { R = 8, C = 16 };
  float ad[R * C], bd[R * C];
  fill(ad, R * C, 6);
  fill(bd, R * C, 7);
  const int64_t sh[] = {R, C};
  tg_tensor *a = input(ad, sh, 2), *b = input(bd, sh, 2);
  const int ax[] = {1};
  tg_tensor *r = tg_sum(tg_mul(a, b), ax, 1, false);
  CHECK(r != NULL);
  CHECK_KERNELS(r, 1);
  float out[R];
  host(r, out, R);
  for (int i = 0; i < R; i++) {
    double ref = 0;
    for (int j = 0; j < C; j++) ref += (double)ad[i * C + j] * bd[i * C + j];
    CHECK_CLOSE(out[i], ref, TOL);
  }
  tg_scope_end(s);
}

/* ------------------------------------------------- softmax: at most 3 kernels */

TEST(sched_softmax_at_most_three_kernels) {
  tg_scope *s = tg_scope_begin();
  enum { R = 4, C = 16 };
  float xd[R * C];
  fill(xd, R * C, 8);
  for (int i = 0; i < R * C; i++) xd[i] *= (float)(1 + i % 3);
  const int64_t sh[] = {R, C};
  tg_tensor *x = input(xd, sh, 2);
  tg_tensor *y = tg_softmax(x, -1);
  CHECK(y != NULL);
  uint64_t k = realize_count(y);
  CHECK(k >= 1 && k <= 3);
  if (k > 3) printf("  softmax ran %llu kernels\n", (unsigned long long)k);
  float out[R * C];
  host(y, out, R * C);
  for (int i = 0; i < R; i++) {
    double mx = -INFINITY, sum = 0;
    for (int j = 0; j < C; j++) mx = fmax(mx, xd[i * C + j]);
    for (int j = 0; j < C; j++) sum += exp(xd[i * C + j] - mx);
    for (int j = 0; j < C; j++) CHECK_CLOSE(out[i * C + j], exp(xd[i * C + j] - mx) / sum, TOL);
  }
  tg_scope_end(s);
}

/* ------------------------------------------- 20 elementwise ops: 1 kernel */

TEST(sched_elementwise_chain_of_20_one_kernel) {
  tg_scope *s = tg_scope_begin();
  enum { N = 64 };
  float xd[N], yd[N];
  fill(xd, N, 9);
  fill(yd, N, 10);
  const int64_t sh[] = {N};
  tg_tensor *x = input(xd, sh, 1), *y = input(yd, sh, 1);
  tg_tensor *t = x;
  t = tg_add(t, y);          /* 1 */
  t = tg_mul_s(t, 0.5);      /* 2 */
  t = tg_sub_s(t, 1.0);      /* 3 */
  t = tg_neg(t);             /* 4 */
  t = tg_abs(t);             /* 5 */
  t = tg_add_s(t, 0.25);     /* 6 */
  t = tg_sqrt(t);            /* 7 */
  t = tg_mul(t, x);          /* 8 */
  t = tg_relu(t);            /* 9 */
  t = tg_square(t);          /* 10 */
  t = tg_add(t, y);          /* 11 */
  t = tg_maximum(t, x);      /* 12 */
  t = tg_clip(t, -2.0, 5.0); /* 13 */
  t = tg_sub(t, y);          /* 14 */
  t = tg_mul_s(t, 3.0);      /* 15 */
  t = tg_div_s(t, 2.0);      /* 16 */
  t = tg_abs(t);             /* 17 */
  t = tg_add_s(t, 1.0);      /* 18 */
  t = tg_reciprocal(t);      /* 19 */
  t = tg_rsub_s(2.0, t);     /* 20 */
  CHECK(t != NULL);
  CHECK_KERNELS(t, 1);
  float out[N];
  host(t, out, N);
  for (int i = 0; i < N; i++) {
    float xv = xd[i], yv = yd[i], v = xv + yv;
    v = v * 0.5f;
    v = v - 1.0f;
    v = -v;
    v = fabsf(v);
    v = v + 0.25f;
    v = sqrtf(v);
    v = v * xv;
    v = v > 0 ? v : 0;
    v = v * v;
    v = v + yv;
    v = fmaxf(v, xv);
    v = fminf(fmaxf(v, -2.0f), 5.0f);
    v = v - yv;
    v = v * 3.0f;
    v = v / 2.0f;
    v = fabsf(v);
    v = v + 1.0f;
    v = 1.0f / v;
    v = 2.0f - v;
    CHECK_CLOSE(out[i], v, TOL);
  }
  tg_scope_end(s);
}

/* ------------------------------------ movement ops never add a copy kernel */

enum { A = 2, B = 3, C = 4 };
static float X234[A * B * C];
static tg_tensor *x234(void) {
  for (int i = 0; i < A * B * C; i++) X234[i] = (float)i - 7.5f;
  const int64_t sh[] = {A, B, C};
  return input(X234, sh, 3);
}
#define XAT(i, j, k) X234[((i) * B + (j)) * C + (k)]

TEST(sched_movement_reshape_no_copy) {
  tg_scope *s = tg_scope_begin();
  tg_tensor *x = x234();
  const int64_t sh[] = {6, 4};
  tg_tensor *y = tg_add_s(tg_reshape(x, sh, 2), 1.0);
  CHECK(y != NULL);
  CHECK_KERNELS(y, 1);
  float out[24];
  host(y, out, 24);
  for (int i = 0; i < 24; i++) CHECK_CLOSE(out[i], X234[i] + 1.0f, TOL);
  tg_scope_end(s);
}

TEST(sched_movement_permute_no_copy) {
  tg_scope *s = tg_scope_begin();
  tg_tensor *x = x234();
  const int order[] = {2, 0, 1}; /* (C, A, B) */
  tg_tensor *y = tg_mul_s(tg_permute(x, order, 3), 2.0);
  CHECK(y != NULL);
  CHECK(tg_dim(y, 0) == C && tg_dim(y, 1) == A && tg_dim(y, 2) == B);
  CHECK_KERNELS(y, 1);
  float out[24];
  host(y, out, 24);
  for (int k = 0; k < C; k++)
    for (int i = 0; i < A; i++)
      for (int j = 0; j < B; j++) CHECK_CLOSE(out[(k * A + i) * B + j], 2.0f * XAT(i, j, k), TOL);
  tg_scope_end(s);
}

TEST(sched_movement_expand_no_copy) {
  tg_scope *s = tg_scope_begin();
  tg_tensor *x = x234();
  const float vd[] = {10, 20, 30};
  const int64_t sv[] = {1, B, 1}, se[] = {A, B, C};
  tg_tensor *v = input(vd, sv, 3);
  tg_tensor *y = tg_add(tg_expand(v, se, 3), x);
  CHECK(y != NULL);
  CHECK_KERNELS(y, 1);
  float out[24];
  host(y, out, 24);
  for (int i = 0; i < A; i++)
    for (int j = 0; j < B; j++)
      for (int k = 0; k < C; k++)
        CHECK_CLOSE(out[(i * B + j) * C + k], XAT(i, j, k) + vd[j], TOL);
  tg_scope_end(s);
}

TEST(sched_movement_pad_no_copy) {
  tg_scope *s = tg_scope_begin();
  tg_tensor *x = x234();
  const int64_t before[] = {0, 1, 0}, after[] = {1, 0, 2};
  tg_tensor *y = tg_add_s(tg_pad(x, before, after, -5.0), 1.0); /* (3, 4, 6) */
  CHECK(y != NULL);
  CHECK(tg_dim(y, 0) == 3 && tg_dim(y, 1) == 4 && tg_dim(y, 2) == 6);
  CHECK_KERNELS(y, 1);
  float out[72];
  host(y, out, 72);
  for (int i = 0; i < 3; i++)
    for (int j = 0; j < 4; j++)
      for (int k = 0; k < 6; k++) {
        int si = i, sj = j - 1, sk = k;
        int in = si < A && sj >= 0 && sj < B && sk < C;
        float ref = (in ? XAT(si, sj, sk) : -5.0f) + 1.0f;
        CHECK_CLOSE(out[(i * 4 + j) * 6 + k], ref, TOL);
      }
  tg_scope_end(s);
}

TEST(sched_movement_shrink_no_copy) {
  tg_scope *s = tg_scope_begin();
  tg_tensor *x = x234();
  const int64_t st[] = {1, 1, 1}, en[] = {2, 3, 4};
  tg_tensor *y = tg_mul_s(tg_shrink(x, st, en), -1.0); /* (1, 2, 3) */
  CHECK(y != NULL);
  CHECK_KERNELS(y, 1);
  float out[6];
  host(y, out, 6);
  for (int j = 0; j < 2; j++)
    for (int k = 0; k < 3; k++) CHECK_CLOSE(out[j * 3 + k], -XAT(1, j + 1, k + 1), TOL);
  tg_scope_end(s);
}

TEST(sched_movement_flip_no_copy) {
  tg_scope *s = tg_scope_begin();
  tg_tensor *x = x234();
  const int ax[] = {0, 2};
  tg_tensor *y = tg_add_s(tg_flip(x, ax, 2), 0.5);
  CHECK(y != NULL);
  CHECK_KERNELS(y, 1);
  float out[24];
  host(y, out, 24);
  for (int i = 0; i < A; i++)
    for (int j = 0; j < B; j++)
      for (int k = 0; k < C; k++)
        CHECK_CLOSE(out[(i * B + j) * C + k], XAT(A - 1 - i, j, C - 1 - k) + 0.5f, TOL);
  tg_scope_end(s);
}

TEST(sched_movement_slice_no_copy) {
  tg_scope *s = tg_scope_begin();
  tg_tensor *x = x234();
  /* x[:, :, 3:0:-2] -> k = 3, 1 */
  tg_tensor *y = tg_add_s(tg_slice(x, 2, 3, 0, -2), 0.0);
  CHECK(y != NULL);
  CHECK(tg_dim(y, 2) == 2);
  CHECK_KERNELS(y, 1);
  float out[12];
  host(y, out, 12);
  for (int i = 0; i < A; i++)
    for (int j = 0; j < B; j++)
      for (int k = 0; k < 2; k++) CHECK_CLOSE(out[(i * B + j) * 2 + k], XAT(i, j, 3 - 2 * k), TOL);
  tg_scope_end(s);
}

TEST(sched_movement_chain_no_copy) {
  tg_scope *s = tg_scope_begin();
  tg_tensor *x = x234();
  /* transpose -> (A, C, B); flip axis 1; shrink C to 1..3 -> (A, 2, B);
   * pad B by 1 after -> (A, 2, B+1); reshape -> (A*2, B+1); unsqueeze 0 -> (1, 2A, B+1);
   * expand to (2, 2A, B+1); then one elementwise op */
  tg_tensor *t = tg_transpose(x, 1, 2);
  const int fax[] = {1};
  t = tg_flip(t, fax, 1);
  const int64_t st[] = {0, 1, 0}, en[] = {A, 3, B};
  t = tg_shrink(t, st, en);
  const int64_t pb[] = {0, 0, 0}, pa[] = {0, 0, 1};
  t = tg_pad(t, pb, pa, 100.0);
  const int64_t rs[] = {A * 2, B + 1};
  t = tg_reshape(t, rs, 2);
  t = tg_unsqueeze(t, 0);
  const int64_t ex[] = {2, -1, -1};
  t = tg_expand(t, ex, 3);
  tg_tensor *y = tg_mul_s(t, 2.0);
  CHECK(y != NULL);
  CHECK(tg_numel(y) == 2 * A * 2 * (B + 1));
  CHECK_KERNELS(y, 1);
  float out[2 * A * 2 * (B + 1)];
  host(y, out, 2 * A * 2 * (B + 1));
  for (int e = 0; e < 2; e++)
    for (int i = 0; i < A; i++)
      for (int c = 0; c < 2; c++)
        for (int b = 0; b <= B; b++) {
          /* transposed+flipped index along C: C-1-(c+1) */
          float ref = b < B ? XAT(i, b, C - 1 - (c + 1)) : 100.0f;
          CHECK_CLOSE(out[((e * A + i) * 2 + c) * (B + 1) + b], 2.0f * ref, TOL);
        }
  tg_scope_end(s);
}

TEST(sched_contiguous_permute_one_kernel) {
  tg_scope *s = tg_scope_begin();
  tg_tensor *x = x234();
  const int order[] = {2, 1, 0}; /* (C, B, A) */
  tg_tensor *y = tg_contiguous(tg_permute(x, order, 3));
  CHECK(y != NULL);
  CHECK_KERNELS(y, 1);
  CHECK(tg_is_realized(y));
  float out[24];
  host(y, out, 24);
  for (int k = 0; k < C; k++)
    for (int j = 0; j < B; j++)
      for (int i = 0; i < A; i++) CHECK(out[(k * B + j) * A + i] == XAT(i, j, k));
  tg_scope_end(s);
}

/* ----------------------------------------- already realized: no kernels */

TEST(sched_realize_already_realized_runs_nothing) {
  tg_scope *s = tg_scope_begin();
  tg_tensor *x = x234();
  CHECK_KERNELS(x, 0);
  tg_tensor *y = tg_add_s(x, 1.0);
  CHECK_KERNELS(y, 1);
  CHECK_KERNELS(y, 0);
  tg_tensor *ts[] = {x, y};
  tg_reset_stats();
  CHECK(tg_realize_many(ts, 2) == 0);
  CHECK(kernels_run() == 0);
  float out[24];
  tg_reset_stats();
  CHECK(tg_to_host(y, out, sizeof out) == 0);
  CHECK(kernels_run() == 0);
  CHECK(tg_get_stats().kernels_compiled == 0);
  for (int i = 0; i < 24; i++) CHECK_CLOSE(out[i], X234[i] + 1.0f, TOL);
  tg_scope_end(s);
}

/* ----------------------------------- same expression again: no compilation */

TEST(sched_same_expression_fresh_inputs_compiles_nothing) {
  tg_scope *s = tg_scope_begin();
  enum { M = 3, K = 7, N = 6 };
  const int64_t sx[] = {M, K}, sw[] = {K, N}, sb[] = {N};
  for (int round = 0; round < 3; round++) {
    float xd[M * K], wd[K * N], bd[N];
    fill(xd, M * K, 11 + round);
    fill(wd, K * N, 12 + 2 * round);
    fill(bd, N, 13 + 3 * round);
    tg_tensor *x = input(xd, sx, 2), *w = input(wd, sw, 2), *b = input(bd, sb, 1);
    tg_tensor *y = tg_mul_s(linear_relu(x, w, b), 0.75);
    CHECK(y != NULL);
    tg_reset_stats();
    CHECK(tg_realize(y) == 0);
    tg_stats st = tg_get_stats();
    CHECK(st.kernels_run == 1);
    if (round > 0) {
      CHECK(st.kernels_compiled == 0);
      if (st.kernels_compiled != 0)
        printf("  round %d compiled %llu kernels\n", round,
               (unsigned long long)st.kernels_compiled);
    }
    float out[M * N], ref[M * N];
    host(y, out, M * N);
    ref_linear_relu(xd, wd, bd, ref, M, K, N);
    for (int i = 0; i < M * N; i++) CHECK_CLOSE(out[i], ref[i] * 0.75f, TOL);
  }
  tg_scope_end(s);
}

TEST(sched_same_elementwise_fresh_inputs_compiles_nothing) {
  tg_scope *s = tg_scope_begin();
  const int64_t sh[] = {5, 7};
  for (int round = 0; round < 2; round++) {
    float ad[35], bd[35];
    fill(ad, 35, 20 + round);
    fill(bd, 35, 30 + round);
    tg_tensor *a = input(ad, sh, 2), *b = input(bd, sh, 2);
    tg_tensor *y = tg_sub(tg_mul(a, b), tg_square(a));
    tg_reset_stats();
    CHECK(tg_realize(y) == 0);
    tg_stats st = tg_get_stats();
    CHECK(st.kernels_run == 1);
    if (round == 1) CHECK(st.kernels_compiled == 0);
    float out[35];
    host(y, out, 35);
    for (int i = 0; i < 35; i++) CHECK_CLOSE(out[i], ad[i] * bd[i] - ad[i] * ad[i], TOL);
  }
  tg_scope_end(s);
}

/* ------------------------------------------------------- the tg.h example */

TEST(sched_header_example_one_kernel) {
  tg_scope *s = tg_scope_begin();
  const float xd[] = {1, -2, 3, 4, 5, -6};
  const int64_t sx[] = {2, 3}, sw[] = {3, 4};
  tg_tensor *x = input(xd, sx, 2);
  tg_tensor *w = tg_full(sw, 2, 0.5, TG_FLOAT32);
  tg_tensor *y = tg_relu(tg_add(tg_matmul(x, w), tg_arange(0, 4, 1, TG_FLOAT32)));
  CHECK(y != NULL);
  CHECK(tg_ndim(y) == 2 && tg_dim(y, 0) == 2 && tg_dim(y, 1) == 4);
  CHECK_KERNELS(y, 1);
  /* rows of x sum to 2 and 3, times 0.5: 1 and 1.5; plus 0..3 */
  const float ref[] = {1, 2, 3, 4, 1.5f, 2.5f, 3.5f, 4.5f};
  float out[8];
  host(y, out, 8);
  for (int i = 0; i < 8; i++) CHECK_CLOSE(out[i], ref[i], TOL);
  tg_scope_end(s);
}

TEST(sched_header_example_relu_clamps) {
  tg_scope *s = tg_scope_begin();
  const float xd[] = {1, -2, -3, 4, 5, -6};
  const int64_t sx[] = {2, 3}, sw[] = {3, 4};
  tg_tensor *x = input(xd, sx, 2);
  tg_tensor *w = tg_full(sw, 2, 0.5, TG_FLOAT32);
  tg_tensor *y = tg_relu(tg_add(tg_matmul(x, w), tg_arange(0, 4, 1, TG_FLOAT32)));
  CHECK(y != NULL);
  CHECK_KERNELS(y, 1);
  /* row sums -4 and 3 -> -2 and 1.5; plus 0..3; relu */
  const float ref[] = {0, 0, 0, 1, 1.5f, 2.5f, 3.5f, 4.5f};
  float out[8];
  host(y, out, 8);
  for (int i = 0; i < 8; i++) CHECK_CLOSE(out[i], ref[i], TOL);
  tg_scope_end(s);
}

/* -------------------------------- lazy constants fuse into the consumer */

TEST(sched_consts_fuse_into_elementwise) {
  tg_scope *s = tg_scope_begin();
  tg_tensor *x = x234();
  const int64_t sh[] = {A, B, C};
  tg_tensor *y = tg_add(tg_mul(x, tg_full(sh, 3, 3.0, TG_FLOAT32)), tg_ones(sh, 3, TG_FLOAT32));
  CHECK(y != NULL);
  CHECK_KERNELS(y, 1);
  float out[24];
  host(y, out, 24);
  for (int i = 0; i < 24; i++) CHECK_CLOSE(out[i], X234[i] * 3.0f + 1.0f, TOL);
  tg_scope_end(s);
}

/* ------------------------------------------ fusion cost: what gets stored */

/* A chain of 8 elementwise ops on a vector, broadcast into a matrix-vector product: the chain
 * would be recomputed 64 times per element, so it gets its own kernel (2 in all). */
TEST(sched_costly_chain_under_expand_is_stored) {
  tg_scope *s = tg_scope_begin();
  enum { N = 64 };
  float xd[N], wd[N * N], want[N];
  fill(xd, N, 3), fill(wd, N * N, 4);
  tg_tensor *x = input(xd, (int64_t[]){N}, 1), *w = input(wd, (int64_t[]){N, N}, 2);
  tg_tensor *f = x;
  for (int i = 0; i < 4; i++) f = tg_mul_s(tg_add_s(f, 0.5), 0.75);
  tg_tensor *y = tg_matmul(w, f); /* (N, N) @ (N): x repeats along w's rows */
  CHECK_KERNELS(y, 2);
  for (int i = 0; i < N; i++) {
    double acc = 0;
    for (int j = 0; j < N; j++) {
      double v = xd[j];
      for (int r = 0; r < 4; r++) v = (v + 0.5) * 0.75;
      acc += wd[i * N + j] * v;
    }
    want[i] = (float)acc;
  }
  float out[N];
  host(y, out, N);
  for (int i = 0; i < N; i++) CHECK_CLOSE(out[i], want[i], 1e-4);
  tg_scope_end(s);
}

/* One cheap op under the same broadcast stays fused (1 kernel). */
TEST(sched_cheap_op_under_expand_stays_fused) {
  tg_scope *s = tg_scope_begin();
  enum { N = 16 };
  float xd[N], wd[N * N];
  fill(xd, N, 5), fill(wd, N * N, 6);
  tg_tensor *x = input(xd, (int64_t[]){N}, 1), *w = input(wd, (int64_t[]){N, N}, 2);
  CHECK_KERNELS(tg_matmul(w, tg_relu(x)), 1);
  tg_scope_end(s);
}

/* x = x - mean(x) a hundred times: without storing intermediate values every mean would
 * recompute the whole chain and read every earlier mean (quadratic work, and past 64 inputs
 * a kernel has too many buffers). Centering twice changes nothing, so the result is x - mean(x). */
TEST(sched_long_center_chain_stays_linear) {
  tg_scope *s = tg_scope_begin();
  enum { R = 4, C = 32, STEPS = 100 };
  float xd[R * C];
  fill(xd, R * C, 9);
  tg_tensor *x = input(xd, (int64_t[]){R, C}, 2);
  const int axis[1] = {1};
  for (int i = 0; i < STEPS; i++) x = tg_sub(x, tg_mean(x, axis, 1, true));
  uint64_t k = realize_count(x);
  CHECK(k >= STEPS && k <= 2 * STEPS);
  float out[R * C];
  host(x, out, R * C);
  for (int r = 0; r < R; r++) {
    double m = 0;
    for (int c = 0; c < C; c++) m += xd[r * C + c];
    m /= C;
    for (int c = 0; c < C; c++) CHECK_CLOSE(out[r * C + c], xd[r * C + c] - m, 1e-4);
  }
  tg_scope_end(s);
}

/* ---------------------------------------- pending assigns realize with anything */

TEST(sched_pending_assign_realizes_with_next_realize) {
  tg_scope *s = tg_scope_begin();
  const float zero = 0, xd[2] = {1, 2};
  tg_tensor *counter = input(&zero, NULL, 0), *other = tg_mul_s(input(xd, (int64_t[]){2}, 1), 3);
  for (int i = 0; i < 10; i++) CHECK(tg_assign(counter, tg_add_s(counter, 1)) == 0);
  CHECK(!tg_is_realized(counter));
  CHECK_KERNELS(other, 2); /* the other tensor and the counter */
  CHECK(tg_is_realized(counter));
  float v;
  host(counter, &v, 1);
  CHECK(v == 10.0f);
  /* a freed tensor with a pending assign is simply dropped */
  tg_tensor *gone = input(&zero, NULL, 0);
  CHECK(tg_assign(gone, tg_add_s(gone, 1)) == 0);
  tg_free(gone);
  CHECK_KERNELS(tg_add_s(other, 1), 1);
  tg_scope_end(s);
}

/* ------------------------------------------------ a large matmul packs its right operand */

/* y[b] = a[b] @ w in doubles (a: nb x n x k, w: k x m). */
static void ref_matmul(const float *a, const float *w, double *y, int nb, int n, int k, int m) {
  for (int b = 0; b < nb; b++)
    for (int i = 0; i < n; i++)
      for (int j = 0; j < m; j++) {
        double acc = 0;
        for (int p = 0; p < k; p++) acc += (double)a[(b * n + i) * k + p] * w[p * m + j];
        y[(b * n + i) * m + j] = acc;
      }
}

/* Matmul panels are for vector lanes: work-item devices read operands in place. */
#define NEED_PANELS()                                                                        \
  do {                                                                                       \
    if (device_default() && device_is_gpu(device_default()))                                 \
      SKIP("matmul packing is for vector lanes: off on %s", device_default()->name);         \
  } while (0)

/* How many of n results are not close to the reference. */
static int count_far(const float *got, const double *want, int n, double rtol, double atol) {
  int bad = 0;
  for (int i = 0; i < n; i++) bad += !harness_close(got[i], want[i], rtol, atol);
  return bad;
}

/* (2, 64, 512) @ (512, 512): 2^24 multiply-adds per matrix, so w is first copied into
 * panels of whole vector rows (src/schedule/layout.c, panel_width): 2 kernels, same values as
 * a naive loop, and the gradients (through the packed copy) match the hand-derived sums. */
TEST(sched_large_matmul_packs_right_operand) {
  NEED_PANELS();
  tg_scope *s = tg_scope_begin();
  enum { NB = 2, N = 64, K = 512, M = 512 };
  float *ad = malloc(sizeof(float) * NB * N * K), *wd = malloc(sizeof(float) * K * M);
  float *out = malloc(sizeof(float) * NB * N * M), *ga = malloc(sizeof(float) * NB * N * K), *gw = malloc(sizeof(float) * K * M);
  double *want = malloc(sizeof(double) * NB * N * M);
  fill(ad, NB * N * K, 8), fill(wd, K * M, 9);
  tg_tensor *a = input(ad, (int64_t[]){NB, N, K}, 3), *w = input(wd, (int64_t[]){K, M}, 2);
  tg_tensor *y = tg_matmul(a, w);
  CHECK(tg_ndim(y) == 3 && tg_dim(y, 0) == NB && tg_dim(y, 1) == N && tg_dim(y, 2) == M);
  CHECK_KERNELS(y, 2);
  ref_matmul(ad, wd, want, NB, N, K, M);
  host(y, out, NB * N * M);
  int bad = count_far(out, want, NB * N * M, 1e-3, 1e-5);
  CHECK(bad == 0);
  /* d sum(a @ w) / da[b,i,p] = sum_j w[p,j]; / dw[p,j] = sum_{b,i} a[b,i,p] */
  tg_tensor *xs[2] = {a, w}, *g[2];
  CHECK(tg_gradient(tg_sum(tg_matmul(a, w), NULL, 0, false), xs, 2, g) == 0);
  CHECK(tg_to_host(g[0], ga, sizeof(float) * NB * N * K) == 0 && tg_to_host(g[1], gw, sizeof(float) * K * M) == 0);
  for (int p = 0; p < K; p++) {
    double row = 0, col = 0;
    for (int j = 0; j < M; j++) row += wd[p * M + j];
    for (int b = 0; b < NB * N; b++) col += ad[b * K + p];
    for (int b = 0; b < NB * N; b++) bad += !harness_close(ga[b * K + p], row, 1e-3, 1e-5);
    for (int j = 0; j < M; j++) bad += !harness_close(gw[p * M + j], col, 1e-3, 1e-5);
  }
  CHECK(bad == 0);
  free(ad), free(wd), free(out), free(ga), free(gw), free(want);
  tg_scope_end(s);
}

/* 516 columns are not whole panels (of 8, 16 or 32 columns): w is padded with zero columns,
 * the product stored whole and the padding cut off (3 kernels: pack, product, the slice's
 * copy when realized). */
TEST(sched_large_matmul_pads_partial_panel) {
  NEED_PANELS();
  tg_scope *s = tg_scope_begin();
  enum { N = 64, K = 512, M = 516 };
  float *ad = malloc(sizeof(float) * N * K), *wd = malloc(sizeof(float) * K * M), *out = malloc(sizeof(float) * N * M);
  double *want = malloc(sizeof(double) * N * M);
  fill(ad, N * K, 10), fill(wd, K * M, 11);
  tg_tensor *y = tg_matmul(input(ad, (int64_t[]){N, K}, 2), input(wd, (int64_t[]){K, M}, 2));
  CHECK(tg_ndim(y) == 2 && tg_dim(y, 0) == N && tg_dim(y, 1) == M);
  CHECK_KERNELS(y, 3);
  ref_matmul(ad, wd, want, 1, N, K, M);
  host(y, out, N * M);
  CHECK(count_far(out, want, N * M, 1e-3, 1e-5) == 0);
  free(ad), free(wd), free(out), free(want);
  tg_scope_end(s);
}

/* The matmuls autograd makes are packed like the ones a user writes (src/schedule/layout.c
 * rewrites every large product-sum, wherever it came from): for y = a @ w and the loss
 * sum(y * c), da = c @ w^T reads w^T from panels and dw = a^T @ c reads a from panels: 2
 * kernels each (panels, product), values as naive loops. */
TEST(sched_autograd_matmuls_pack_too) {
  NEED_PANELS();
  tg_scope *s = tg_scope_begin();
  enum { N = 128, K = 384, M = 512 };
  float *ad = malloc(sizeof(float) * N * K), *wd = malloc(sizeof(float) * K * M), *cd = malloc(sizeof(float) * N * M);
  float *ga = malloc(sizeof(float) * N * K), *gw = malloc(sizeof(float) * K * M);
  fill(ad, N * K, 3), fill(wd, K * M, 4), fill(cd, N * M, 5);
  tg_tensor *a = input(ad, (int64_t[]){N, K}, 2), *w = input(wd, (int64_t[]){K, M}, 2), *c = input(cd, (int64_t[]){N, M}, 2);
  tg_tensor *xs[2] = {a, w}, *g[2];
  CHECK(tg_gradient(tg_sum(tg_mul(tg_matmul(a, w), c), NULL, 0, false), xs, 2, g) == 0);
  CHECK_KERNELS(g[0], 2);
  CHECK_KERNELS(g[1], 2);
  host(g[0], ga, N * K), host(g[1], gw, K * M);
  int bad = 0;
  for (int i = 0; i < N; i++)
    for (int p = 0; p < K; p++) { /* da[i,p] = sum_j c[i,j] w[p,j] */
      double want = 0;
      for (int j = 0; j < M; j++) want += (double)cd[i * M + j] * wd[p * M + j];
      bad += !harness_close(ga[i * K + p], want, 1e-3, 1e-4);
    }
  for (int p = 0; p < K; p++)
    for (int j = 0; j < M; j++) { /* dw[p,j] = sum_i a[i,p] c[i,j] */
      double want = 0;
      for (int i = 0; i < N; i++) want += (double)ad[i * K + p] * cd[i * M + j];
      bad += !harness_close(gw[p * M + j], want, 1e-3, 1e-4);
    }
  CHECK(bad == 0);
  free(ad), free(wd), free(cd), free(ga), free(gw);
  tg_scope_end(s);
}

/* Realized float16/bfloat16 copies of float data, and the values they hold, as floats. */
static tg_tensor *half_input(const float *d, const int64_t *shape, int nd, tg_dtype dt, float *held) {
  tg_tensor *h = tg_cast(input(d, shape, nd), dt);
  CHECK(tg_realize(h) == 0);
  int64_t n = 1;
  for (int i = 0; i < nd; i++) n *= shape[i];
  /* read through a product by 1: a realized cast would be the conversion the matmul needs */
  CHECK(tg_to_host(tg_mul_s(tg_cast(h, TG_FLOAT32), 1.0), held, sizeof(float) * (size_t)n) == 0);
  return h;
}

/* A 16-bit float matmul converts its left operand once and stores it as float32 (the host
 * devices convert 16-bit floats in software: converted at every read inside the product,
 * float16 1024 took 1003 ms against 12 for float32); the right one is converted by its panel
 * copy: 3 kernels (conversion, panels, product cast to the result's dtype), values as a
 * naive loop over the same 16-bit inputs. */
TEST(sched_half_matmul_converts_operands_once) {
  if (device_default() && device_is_gpu(device_default())) SKIP("16-bit operands are converted in hardware on %s", device_default()->name);
  tg_scope *s = tg_scope_begin();
  enum { N = 64, K = 512, M = 512 };
  float *ad = malloc(sizeof(float) * N * K), *wd = malloc(sizeof(float) * K * M), *out = malloc(sizeof(float) * N * M);
  double *want = malloc(sizeof(double) * N * M);
  const tg_dtype dts[2] = {TG_FLOAT16, TG_BFLOAT16};
  for (int t = 0; t < 2; t++) {
    fill(ad, N * K, 12 + t), fill(wd, K * M, 13 + t);
    tg_tensor *a = half_input(ad, (int64_t[]){N, K}, 2, dts[t], ad), *w = half_input(wd, (int64_t[]){K, M}, 2, dts[t], wd);
    tg_tensor *y = tg_matmul(a, w);
    CHECK(tg_get_dtype(y) == dts[t]);
    CHECK_KERNELS(y, 3);
    ref_matmul(ad, wd, want, 1, N, K, M);
    CHECK(tg_to_host(tg_cast(y, TG_FLOAT32), out, sizeof(float) * N * M) == 0);
    CHECK(count_far(out, want, N * M, t ? 1e-2 : 2e-3, 1e-2) == 0);
  }
  free(ad), free(wd), free(out), free(want);
  tg_scope_end(s);
}

/* A layout rewrite makes new nodes above the product it changes; a node a tensor handle holds
 * still gets its buffer: h (stored, packed, 516 columns cut from whole panels) is realized by
 * realizing sum(h), and reading it runs nothing. */
TEST(sched_layout_rewrite_keeps_held_values) {
  NEED_PANELS();
  tg_scope *s = tg_scope_begin();
  enum { N = 64, K = 512, M = 516 };
  float *ad = malloc(sizeof(float) * N * K), *wd = malloc(sizeof(float) * K * M), *out = malloc(sizeof(float) * N * M);
  double *want = malloc(sizeof(double) * N * M), total = 0;
  fill(ad, N * K, 6), fill(wd, K * M, 7);
  tg_tensor *h = tg_contiguous(tg_matmul(input(ad, (int64_t[]){N, K}, 2), input(wd, (int64_t[]){K, M}, 2)));
  tg_tensor *z = tg_sum(h, NULL, 0, false);
  CHECK(tg_realize(z) == 0);
  CHECK(tg_is_realized(h));
  ref_matmul(ad, wd, want, 1, N, K, M);
  host(h, out, N * M);
  CHECK(count_far(out, want, N * M, 1e-3, 1e-5) == 0);
  for (int i = 0; i < N * M; i++) total += want[i];
  float zv;
  host(z, &zv, 1);
  CHECK(harness_close(zv, total, 1e-3, 1e-2));
  free(ad), free(wd), free(out), free(want);
  tg_scope_end(s);
}

/* d sum(conv2d(x, w) * c) / dw for one channel and a 3x3 kernel, N images of side hw: 1 or 2
 * kernels planned, values against a naive loop. */
static void check_conv_weight_grad(int n, int hw, int kernels) {
  int o = hw - 2;
  float *xd = malloc(sizeof(float) * (size_t)(n * hw * hw)), *cd = malloc(sizeof(float) * (size_t)(n * o * o)), wd[9], gw[9];
  fill(xd, n * hw * hw, 8), fill(cd, n * o * o, 9), fill(wd, 9, 10);
  tg_tensor *x = input(xd, (int64_t[]){n, 1, hw, hw}, 4), *w = input(wd, (int64_t[]){1, 1, 3, 3}, 4);
  tg_tensor *c = input(cd, (int64_t[]){n, 1, o, o}, 4), *g;
  tg_tensor *y = tg_conv2d(x, w, NULL, (const int[]){1, 1}, (const int[]){0, 0}, (const int[]){1, 1}, 1);
  CHECK(tg_gradient(tg_sum(tg_mul(y, c), NULL, 0, false), &w, 1, &g) == 0);
  CHECK_KERNELS(g, kernels);
  host(g, gw, 9);
  for (int i = 0; i < 3; i++)
    for (int j = 0; j < 3; j++) CHECK(harness_close(gw[i * 3 + j], harness_conv3x3_weight_grad(xd, cd, n, hw, i, j), 1e-3, 1e-3));
  free(xd), free(cd);
}

/* A conv weight gradient over a batch whose inputs exceed half the L2 is summed per chunk of
 * images, then over the partial sums (src/schedule/layout.c): 2 kernels; a batch that fits
 * sums in one. The side is chosen from the device's L2 so that one image (x and gy) is larger
 * than half of it. */
TEST(sched_conv_weight_grad_chunks_batch_by_cache) {
  const device *d = device_default();
  if (d && device_is_gpu(d)) SKIP("batch chunks are for a CPU's cache: off on %s", d->name);
  int64_t l2 = d ? d->caps.l2_bytes : 1 << 20;
  int side = 8;
  while ((int64_t)side * side * 8 <= l2 / 2) side *= 2;
  if (side > 2048) SKIP("an L2 of %lld bytes needs images too large for a unit test", (long long)l2);
  tg_scope *s = tg_scope_begin();
  check_conv_weight_grad(4, 8, 1);
  check_conv_weight_grad(4, side, 2);
  tg_scope_end(s);
}

/* A costly chain used by a reduction and by its consumer (x - mean(x)) is stored once:
 * 3 kernels (chain, mean, subtraction). Before the scheduler restarted its pass after
 * storing a shared node, the chain was cut into one kernel per op near its end (6). */
TEST(sched_shared_chain_stored_once) {
  tg_scope *s = tg_scope_begin();
  enum { R = 8, C = 16 };
  float xd[R * C], out[R * C];
  fill(xd, R * C, 12);
  tg_tensor *x = input(xd, (int64_t[]){R, C}, 2);
  const int ax[] = {1};
  for (int i = 0; i < 9; i++) x = i % 2 ? tg_mul_s(x, 1.0 + 0.01 * i) : tg_add_s(x, 0.1 * i);
  tg_tensor *y = tg_contiguous(tg_sub(x, tg_mean(x, ax, 1, true)));
  CHECK_KERNELS(y, 3);
  host(y, out, R * C);
  for (int r = 0; r < R; r++) {
    double v[C], mean = 0;
    for (int c = 0; c < C; c++) {
      v[c] = xd[r * C + c];
      for (int i = 0; i < 9; i++) v[c] = i % 2 ? v[c] * (1.0 + 0.01 * i) : v[c] + 0.1 * i;
      mean += v[c] / C;
    }
    for (int c = 0; c < C; c++) CHECK_CLOSE(out[r * C + c], v[c] - mean, 1e-4);
  }
  tg_scope_end(s);
}

/* A computed value stored by CONTIGUOUS is read from that buffer by its other users (a conv
 * stores its computed input, and a residual add reads the same value): two kernels. Before,
 * the second user claimed the reduction too, so it got a kernel of its own and both users
 * added the bias again: three (schedule.c, "a stored value is read"). */
TEST(sched_stored_value_read_by_its_other_users) {
  tg_scope *s = tg_scope_begin();
  enum { R = 8, C = 16 };
  float ad[R * C], bd[R], out[2][R];
  fill(ad, R * C, 13);
  fill(bd, R, 14);
  tg_tensor *a = input(ad, (int64_t[]){R, C}, 2), *b = input(bd, (int64_t[]){R}, 1);
  tg_tensor *y = tg_add(tg_sum(a, (const int[]){1}, 1, false), b);
  tg_tensor *t[2] = {tg_contiguous(y), NULL};
  t[1] = tg_add(tg_mul_s(y, 2), t[0]);
  CHECK(tg_schedule_kernels(t, 2) == 2);
  tg_reset_stats();
  CHECK(tg_realize_many(t, 2) == 0);
  CHECK(kernels_run() == 2);
  host(t[0], out[0], R), host(t[1], out[1], R);
  for (int r = 0; r < R; r++) {
    double v = bd[r];
    for (int c = 0; c < C; c++) v += ad[r * C + c];
    CHECK_CLOSE(out[0][r], v, 1e-4);
    CHECK_CLOSE(out[1][r], 3 * v, 1e-4);
  }
  tg_scope_end(s);
}

/* A chain over 150 realized tensors (and 150 user values) fuses into kernels of at most 48
 * stored inputs each (schedule.c, "inputs per kernel"): once a kernel of 151 arguments that no
 * renderer declared ("d66 undeclared"; an ONNX Det of 32 x 32 and up). */
TEST(sched_kernel_inputs_are_capped) {
  enum { N = 150, E = 16 };
  tg_scope *s = tg_scope_begin();
  tg_tensor *t[N], *acc = NULL;
  for (int i = 0; i < N; i++) {
    t[i] = tg_full((int64_t[]){E}, 1, (double)i, TG_FLOAT32);
    CHECK(tg_realize(t[i]) == 0);
    tg_tensor *term = tg_mul_s(t[i], 1.0 + i % 3); /* a value per step */
    acc = acc ? tg_add(acc, term) : term;
  }
  int planned = tg_schedule_kernels(&acc, 1);
  CHECK(planned == 4); /* 150 inputs (and a value block) in pieces of at most 48 */
  float got[E];
  CHECK(tg_to_host(acc, got, sizeof got) == 0);
  double want = 0;
  for (int i = 0; i < N; i++) want += (double)i * (1.0 + i % 3);
  for (int e = 0; e < E; e++) CHECK_CLOSE(got[e], want, 1e-6 * want);
  tg_scope_end(s);
}
