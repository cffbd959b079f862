/* test_scalar_args.c — a user's scalar is a kernel argument, not a constant in the kernel
 * source (docs/architecture.md, "Values are kernel arguments"): a loop that changes the value
 * compiles once; the value reaches the kernel exactly (64-bit ints, 16-bit floats, bools);
 * two equal scalars are still two gradient targets. */
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "harness.h"

static uint64_t compiled(void) { return tg_get_stats().kernels_compiled; }

/* The loop: (x + full(shape, i)) * x for i = 0..2999 compiles at most 2 kernels. */
TEST(scalar_args_loop_compiles_once) {
  const int64_t shape[2] = {4, 5};
  float xs[20];
  for (int i = 0; i < 20; i++) xs[i] = 0.25f * (float)i - 2;
  tg_scope *outer = tg_scope_begin();
  tg_tensor *x = tg_from_data(xs, TG_FLOAT32, shape, 2);
  uint64_t before = compiled();
  int bad = 0;
  for (int i = 0; i < 3000; i++) {
    tg_scope *s = tg_scope_begin();
    float out[20];
    tg_tensor *y = tg_mul(tg_add(x, tg_full(shape, 2, i, TG_FLOAT32)), x);
    if (tg_to_host(y, out, sizeof out) < 0) bad++;
    for (int j = 0; j < 20; j += 7) bad += out[j] != (xs[j] + (float)i) * xs[j];
    tg_scope_end(s);
  }
  CHECK(bad == 0);
  CHECK(compiled() - before <= 2);
  tg_scope_end(outer);
}

/* A learning-rate schedule written the obvious way: tg_mul_s with a new value every step. */
TEST(scalar_args_mul_s_schedule_compiles_once) {
  double xs[3] = {1, -2, 0.5};
  tg_scope *outer = tg_scope_begin();
  tg_tensor *w = tg_from_data(xs, TG_FLOAT64, (int64_t[]){3}, 1);
  CHECK(tg_realize(w) == 0);
  double ref[3] = {1, -2, 0.5};
  uint64_t before = 0;
  for (int step = 0; step < 50; step++) {
    double lr = 0.1 * cos(step * 0.05); /* 0.1 falling toward 0: every value is new */
    if (step == 1) before = compiled(); /* step 0 may compile */
    CHECK(tg_assign(w, tg_sub(w, tg_mul_s(w, lr))) == 0);
    CHECK(tg_realize(w) == 0);
    for (int i = 0; i < 3; i++) ref[i] -= ref[i] * lr;
  }
  CHECK(compiled() == before);
  double out[3];
  CHECK(tg_to_host(w, out, sizeof out) == 0);
  for (int i = 0; i < 3; i++) CHECK_CLOSE(out[i], ref[i], 1e-12);
  tg_scope_end(outer);
}

/* Every scalar entry point takes its value at run time: clip bounds, where's scalar branch,
 * rsub, div_s, a comparison against a scalar. */
TEST(scalar_args_every_entry_point) {
  const float xs[4] = {-3, -0.5f, 0.5f, 3};
  uint64_t before = 0;
  for (int round = 0; round < 4; round++) {
    tg_scope *s = tg_scope_begin();
    if (round == 1) before = compiled();
    double v = 1 + round * 0.5;
    tg_tensor *x = tg_from_data(xs, TG_FLOAT32, (int64_t[]){4}, 1);
    tg_tensor *y = tg_add(tg_clip(x, -v, v), tg_div_s(tg_rsub_s(v, x), v));
    y = tg_where(tg_lt(x, tg_scalar(v - 2, TG_FLOAT32)), y, tg_full_like(y, v * 10));
    float out[4];
    CHECK(tg_to_host(y, out, sizeof out) == 0);
    for (int i = 0; i < 4; i++) {
      float c = fminf(fmaxf(xs[i], (float)-v), (float)v), r = ((float)v - xs[i]) / (float)v;
      CHECK_CLOSE(out[i], xs[i] < (float)(v - 2) ? c + r : (float)(v * 10), 1e-6);
    }
    tg_scope_end(s);
  }
  CHECK(compiled() == before);
}

/* The value reaches the kernel exactly, in every dtype (ints as bits, not through a double). */
TEST(scalar_args_values_exact) {
  tg_scope *s = tg_scope_begin();
  const int64_t big = ((int64_t)1 << 53) + 1; /* not a double */
  int64_t i64 = 0;
  CHECK(tg_to_host(tg_add(tg_full(NULL, 0, 0, TG_INT64), tg_scalar((double)0, TG_INT64)), &i64, 8) == 0 && i64 == 0);
  tg_tensor *b = tg_from_data(&big, TG_INT64, NULL, 0);
  CHECK(tg_to_host(tg_add_s(b, 2), &i64, 8) == 0 && i64 == big + 2);
  uint64_t u64 = 0;
  CHECK(tg_to_host(tg_full(NULL, 0, 18446744073709549568.0, TG_UINT64), &u64, 8) == 0); /* 2^64 - 2048 */
  CHECK(u64 == UINT64_C(18446744073709549568));
  uint16_t h = 0;
  CHECK(tg_to_host(tg_full(NULL, 0, 1.5, TG_FLOAT16), &h, 2) == 0 && h == 0x3e00);
  CHECK(tg_to_host(tg_full(NULL, 0, -2.0, TG_BFLOAT16), &h, 2) == 0 && h == 0xc000);
  bool flag = false;
  CHECK(tg_to_host(tg_logical_or(tg_full(NULL, 0, 0, TG_BOOL), tg_full(NULL, 0, 7, TG_BOOL)), &flag, 1) == 0 && flag);
  int8_t small = 0;
  CHECK(tg_to_host(tg_add_s(tg_full(NULL, 0, 100, TG_INT8), 27), &small, 1) == 0 && small == 127);
  double nan_out = 0;
  CHECK(tg_to_host(tg_mul_s(tg_full(NULL, 0, 2, TG_FLOAT64), NAN), &nan_out, 8) == 0 && isnan(nan_out));
  tg_scope_end(s);
}

/* Two tensors made from the same number are two leaves: gradients do not mix them up. */
TEST(scalar_args_equal_values_are_distinct_targets) {
  tg_scope *s = tg_scope_begin();
  tg_tensor *a = tg_ones((int64_t[]){2}, 1, TG_FLOAT64), *b = tg_ones((int64_t[]){2}, 1, TG_FLOAT64);
  tg_tensor *xs[2] = {a, b}, *g[2] = {NULL, NULL};
  CHECK(tg_gradient(tg_sum(tg_mul(tg_mul(a, b), tg_full_like(a, 3)), NULL, 0, false), xs, 2, g) == 0);
  double ga[2], gb[2];
  CHECK(tg_to_host(g[0], ga, sizeof ga) == 0 && tg_to_host(g[1], gb, sizeof gb) == 0);
  for (int i = 0; i < 2; i++) CHECK(ga[i] == 3 && gb[i] == 3); /* d(3ab)/da = 3b, not 6a */
  tg_scope_end(s);
}

/* pow_s keeps its exponent in the code (it picks the algorithm): exact squares. */
TEST(scalar_args_pow_s_exponent_is_literal) {
  tg_scope *s = tg_scope_begin();
  const float xs[3] = {3, -1.5f, 1e-3f};
  float out[3];
  CHECK(tg_to_host(tg_pow_s(tg_from_data(xs, TG_FLOAT32, (int64_t[]){3}, 1), 2), out, sizeof out) == 0);
  for (int i = 0; i < 3; i++) CHECK(out[i] == xs[i] * xs[i]);
  tg_scope_end(s);
}
