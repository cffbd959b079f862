/* test_split_reduce.c — the split layout rule (src/schedule/split_reduce.c): a reduction over an
 * axis that a RESHAPE of a computed value merged is reduced over the merged axes instead. Each
 * test checks that the rule applies (or not) to the graph's reduction and that the result
 * equals naive C loops over the same data: sums, a max, several reduced axes, a GGUF-like
 * blocked matrix-vector product, reshapes whose boundaries do not nest. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "codegen/codegen.h"
#include "device/device.h"
#include "schedule/schedule.h"
#include "schedule/layout.h"
#include "tensor/tensor.h"

static void fill(float *d, int64_t n, int seed) {
  for (int64_t i = 0; i < n; i++) d[i] = (float)((i * 7 + seed * 11) % 17 - 8) * 0.125f;
}

static tg_tensor *input(const float *d, const int64_t *shape, int nd) {
  tg_tensor *t = tg_from_data(d, TG_FLOAT32, shape, nd);
  CHECK(t != NULL && tg_realize(t) == 0);
  return t;
}

/* The REDUCE_AXIS under t's value (through views and casts), or NULL. */
static uop *reduction(tg_tensor *t) {
  uop *u = t ? t->u : NULL;
  while (u && (uop_is_movement(u) || u->op == OP_CAST)) u = u->src[0];
  return u && u->op == OP_REDUCE_AXIS ? u : NULL;
}

/* Whether the split rule applies to t's reduction. */
static bool splits(tg_tensor *t) {
  uop *r = reduction(t);
  int64_t choice[LAYOUT_MAX_CHOICES];
  CHECK(r != NULL && device_default() != NULL);
  return r && split_reduce_choices(&device_default()->caps, r, choice) == 1 && choice[0] == 1;
}

static void check_values(tg_tensor *t, const float *want, int64_t n, float tol) {
  float *got = malloc(sizeof(float) * (size_t)n);
  CHECK(got && tg_to_host(t, got, sizeof(float) * (size_t)n) == 0);
  int bad = 0;
  for (int64_t i = 0; got && i < n; i++) bad += !(fabsf(got[i] - want[i]) <= tol * (1 + fabsf(want[i])));
  CHECK(bad == 0);
  free(got);
}

/* sum over cols of exp(x) * 0.5 reshaped (6*4, 8) -> (6, 32): the 32 split into (4, 8). */
TEST(split_reduce_sum_of_reshaped_expression) {
  enum { R = 6, B = 4, K = 8 };
  float x[R * B * K], want[R];
  fill(x, R * B * K, 1);
  tg_scope *s = tg_scope_begin();
  tg_tensor *e = tg_mul_s(tg_exp(input(x, (int64_t[]){R * B, K}, 2)), 0.5);
  tg_tensor *y = tg_sum(tg_reshape(e, (int64_t[]){R, B * K}, 2), (const int[]){1}, 1, false);
  CHECK(splits(y));
  for (int r = 0; r < R; r++) {
    double acc = 0;
    for (int i = 0; i < B * K; i++) acc += exp((double)x[r * B * K + i]) * 0.5;
    want[r] = (float)acc;
  }
  check_values(y, want, R, 1e-5f);
  tg_scope_end(s);
}

/* max over axis 0 of a (12, 5) computed value reshaped from (3, 4, 5): the 12 split into (3, 4). */
TEST(split_reduce_max_over_merged_leading_axis) {
  float x[60], want[5];
  fill(x, 60, 2);
  tg_scope *s = tg_scope_begin();
  tg_tensor *v = tg_add_s(tg_mul(input(x, (int64_t[]){3, 4, 5}, 3), input(x, (int64_t[]){3, 4, 5}, 3)), -1);
  tg_tensor *y = tg_max(tg_reshape(v, (int64_t[]){12, 5}, 2), (const int[]){0}, 1, false);
  CHECK(splits(y));
  for (int j = 0; j < 5; j++) {
    float m = -INFINITY;
    for (int i = 0; i < 12; i++) m = fmaxf(m, x[i * 5 + j] * x[i * 5 + j] - 1);
    want[j] = m;
  }
  check_values(y, want, 5, 0);
  tg_scope_end(s);
}

/* Two reduced axes, one merged: sum over axes 0 and 2 of (2, 3*4, 5) from a (2, 3, 4, 5) value. */
TEST(split_reduce_several_reduced_axes) {
  float x[120], want[12];
  fill(x, 120, 3);
  tg_scope *s = tg_scope_begin();
  tg_tensor *v = tg_neg(input(x, (int64_t[]){2, 3, 4, 5}, 4));
  tg_tensor *y = tg_sum(tg_reshape(v, (int64_t[]){2, 12, 5}, 3), (const int[]){0, 2}, 2, false);
  CHECK(!splits(y)); /* axis 0 and 2 are not merged; axis 1 is not reduced */
  tg_tensor *z = tg_sum(tg_reshape(v, (int64_t[]){2, 12, 5}, 3), (const int[]){1, 2}, 2, false);
  CHECK(splits(z));
  for (int j = 0; j < 12; j++) {
    double acc = 0;
    for (int a = 0; a < 2; a++)
      for (int k = 0; k < 5; k++) acc -= x[(a * 12 + j) * 5 + k];
    want[j] = (float)acc;
  }
  check_values(y, want, 12, 1e-6f);
  float wz[2];
  for (int a = 0; a < 2; a++) {
    double acc = 0;
    for (int i = 0; i < 60; i++) acc -= x[a * 60 + i];
    wz[a] = (float)acc;
  }
  check_values(z, wz, 2, 1e-6f);
  tg_scope_end(s);
}

/* A GGUF-like blocked weight: int8 values (R*NB, 32) times a per-block scale, reshaped to
 * (R, NB*32), times a vector: the reduction over cols splits into (NB, 32); one kernel. The
 * same through a transpose (x Wᵀ for a row x, a linear layer's form). */
TEST(split_reduce_blocked_matvec) {
  enum { R = 40, NB = 6, C = NB * 32 };
  signed char q[R * C];
  float d[R * NB], x[C], want[R];
  for (int i = 0; i < R * C; i++) q[i] = (signed char)((i * 37) % 255 - 127);
  fill(d, R * NB, 4), fill(x, C, 5);
  tg_scope *s = tg_scope_begin();
  tg_tensor *qt = tg_from_data(q, TG_INT8, (int64_t[]){R * NB, 32}, 2), *dt = input(d, (int64_t[]){R * NB, 1}, 2);
  CHECK(qt && tg_realize(qt) == 0);
  tg_tensor *w = tg_reshape(tg_mul(tg_cast(qt, TG_FLOAT32), dt), (int64_t[]){R, C}, 2);
  tg_tensor *y = tg_matmul(w, input(x, (int64_t[]){C}, 1));
  CHECK(splits(y));
  for (int r = 0; r < R; r++) {
    double acc = 0;
    for (int c = 0; c < C; c++) acc += (double)q[r * C + c] * d[r * NB + c / 32] * x[c];
    want[r] = (float)acc;
  }
  tg_reset_stats();
  check_values(y, want, R, 1e-5f);
  CHECK(tg_get_stats().kernels_run == 1);
  /* one row x Wᵀ, as a linear layer computes it: W reaches the product through two PERMUTEs */
  tg_tensor *yt = tg_matmul(input(x, (int64_t[]){1, C}, 2), tg_transpose(w, 0, 1));
  CHECK(splits(yt));
  check_values(yt, want, R, 1e-5f);
  tg_scope_end(s);
}

/* Left alone: a buffer's own reshape (plain strides already), a reshape whose boundaries do
 * not nest ((4, 6) -> (6, 4): axis 1 of the result is no run of input axes), an empty value;
 * values still right. */
TEST(split_reduce_leaves_plain_and_non_nesting_reshapes) {
  float x[24], want[6];
  fill(x, 24, 6);
  tg_scope *s = tg_scope_begin();
  tg_tensor *in = input(x, (int64_t[]){4, 6}, 2);
  tg_tensor *plain = tg_sum(tg_reshape(in, (int64_t[]){2, 12}, 2), (const int[]){1}, 1, false);
  CHECK(!splits(plain));
  tg_tensor *y = tg_sum(tg_reshape(tg_mul_s(in, 3), (int64_t[]){6, 4}, 2), (const int[]){1}, 1, false);
  CHECK(!splits(y));
  for (int r = 0; r < 6; r++) {
    double acc = 0;
    for (int k = 0; k < 4; k++) acc += 3.0 * x[r * 4 + k];
    want[r] = (float)acc;
  }
  check_values(y, want, 6, 1e-6f);
  float wp[2] = {0, 0};
  for (int i = 0; i < 24; i++) wp[i / 12] += x[i];
  check_values(plain, wp, 2, 1e-6f);
  /* an empty value: (3, 0, 4) reshaped to (3, 0) and summed is zeros (no sizes to divide) */
  tg_tensor *empty = tg_neg(tg_from_data(x, TG_FLOAT32, (int64_t[]){3, 0, 4}, 3));
  tg_tensor *z = tg_sum(tg_reshape(empty, (int64_t[]){3, 0}, 2), (const int[]){1}, 1, false);
  CHECK(!splits(z));
  check_values(z, (const float[]){0, 0, 0}, 3, 0);
  tg_scope_end(s);
}

/* The reduce's source after the rule: the shape it reduces (the inner RESHAPE's), in shape[];
 * its rank, or 0 when the rule does not apply. */
static int split_shape(tg_tensor *t, int64_t *shape) {
  uop *r = reduction(t), *out = r && device_default() ? split_reduce_apply(&device_default()->caps, r, 1) : NULL;
  while (out && out->op != OP_REDUCE_AXIS) out = out->src[0];
  if (!out) return 0;
  memcpy(shape, uop_shape(out->src[0]), sizeof(int64_t) * (size_t)uop_ndim(out->src[0]));
  return uop_ndim(out->src[0]);
}

/* Both operands merged: x from (heads, dim) = (3, 8) (attention's output), W's rows from
 * blocks of 4 (GGUF's (rows * blocks, 32)). The sum over 24 runs over (3, 2, 4), both cuts
 * (8 and 4 values from the end) kept, whichever operand comes first; cuts that do not nest
 * ((4, 6) against blocks of 8) keep the first operand's. Values against a naive loop. */
TEST(split_reduce_refines_by_every_operand) {
  enum { R = 5, H = 3, D = 8, Q = 4, C = H * D };
  float x[C], w[R * C], want[R];
  fill(x, C, 7), fill(w, R * C, 8);
  for (int r = 0; r < R; r++) {
    double acc = 0;
    for (int c = 0; c < C; c++) acc += exp((double)x[c]) * exp((double)w[r * C + c]);
    want[r] = (float)acc;
  }
  tg_scope *s = tg_scope_begin();
  tg_tensor *xe = tg_reshape(tg_exp(input(x, (int64_t[]){H, D}, 2)), (int64_t[]){1, C}, 2);
  tg_tensor *we = tg_reshape(tg_exp(input(w, (int64_t[]){R * C / Q, Q}, 2)), (int64_t[]){R, C}, 2);
  int64_t shape[TG_MAX_DIMS];
  tg_tensor *ys[2] = {tg_sum(tg_mul(xe, we), (const int[]){1}, 1, false), tg_sum(tg_mul(we, xe), (const int[]){1}, 1, false)};
  for (int i = 0; i < 2; i++) {
    CHECK(split_shape(ys[i], shape) == 4);
    CHECK(shape[0] == R && shape[1] == H && shape[2] == D / Q && shape[3] == Q);
    check_values(ys[i], want, R, 1e-5f);
  }
  /* (4, 6) against blocks of 8: 6 does not divide 8, x's split alone */
  tg_tensor *x46 = tg_reshape(tg_exp(input(x, (int64_t[]){4, 6}, 2)), (int64_t[]){1, C}, 2);
  tg_tensor *w8 = tg_reshape(tg_exp(input(w, (int64_t[]){R * 3, 8}, 2)), (int64_t[]){R, C}, 2);
  tg_tensor *y = tg_sum(tg_mul(x46, w8), (const int[]){1}, 1, false);
  CHECK(split_shape(y, shape) == 3);
  CHECK(shape[0] == R && shape[1] == 4 && shape[2] == 6);
  check_values(y, want, R, 1e-5f);
  tg_scope_end(s);
}

/* ------------------------------------------------ a block's factor out of its values' loop */

/* Whether u has a REDUCE whose bodies hold another REDUCE (lower.c nest_reduce). */
static bool has_nested_reduce(uop *u, bool inside, int depth) {
  if (depth > 64) return false;
  if (u->op == OP_REDUCE && inside) return true;
  for (int i = 0; i < u->nsrc; i++)
    if (has_nested_reduce(u->src[i], inside || (u->op == OP_REDUCE && i < reduce_nbody(u)), depth + 1)) return true;
  return false;
}

/* t's one kernel, optimized by the default device's heuristics and lowered: whether a REDUCE
 * is nested in another's body; -1 when t is not one kernel or does not lower. */
static int lowered_nested(tg_tensor *t) {
  schedule sc;
  uop *u = t->u;
  int r = -1;
  size_t mark = uop_pool_mark();
  if (schedule_build(&u, 1, &sc) == 0) {
    if (sc.items.n == 1) {
      uop *ast = sc.items.v[0].ast;
      kshape ks;
      kernel_info info = {0};
      if (kshape_init(&ks, ast) == 0) {
        kshape_optimize(&ks, ast, &device_default()->caps);
        uop *sink = lower_kernel(ast, &ks, STAGE_ONLY, &info);
        if (sink) r = has_nested_reduce(sink, false, 0);
      }
    }
    schedule_free(&sc);
  }
  uop_pool_release(mark);
  return r;
}

/* The blocked matrix-vector product of split_reduce_blocked_matvec: the per-block scale
 * multiplies the sum of its block's q*x once (a REDUCE over the values inside the REDUCE over
 * blocks), values equal to a naive loop's; a float32 product (each factor depends on every
 * reduce index) is left one REDUCE. 16 blocks: with 8 and 16 lanes (AVX-512) the heuristics
 * unrolled the whole short reduction (8 blocks x 2 vectors), leaving no loop to nest. */
TEST(split_reduce_block_scale_multiplies_partial_sums) {
  enum { R = 24, NB = 16, C = NB * 32 };
  signed char q[R * C];
  float d[R * NB], x[C], want[R], wf[R * C];
  for (int i = 0; i < R * C; i++) q[i] = (signed char)((i * 53) % 251 - 125);
  fill(d, R * NB, 9), fill(x, C, 10), fill(wf, R * C, 11);
  tg_scope *s = tg_scope_begin();
  tg_tensor *qt = tg_from_data(q, TG_INT8, (int64_t[]){R * NB, 32}, 2), *dt = input(d, (int64_t[]){R * NB, 1}, 2);
  CHECK(qt && tg_realize(qt) == 0);
  tg_tensor *w = tg_reshape(tg_mul(tg_cast(qt, TG_FLOAT32), dt), (int64_t[]){R, C}, 2);
  tg_tensor *y = tg_matmul(input(x, (int64_t[]){1, C}, 2), tg_transpose(w, 0, 1));
  CHECK(lowered_nested(y) == 1);
  for (int r = 0; r < R; r++) {
    double acc = 0;
    for (int c = 0; c < C; c++) acc += (double)q[r * C + c] * d[r * NB + c / 32] * x[c];
    want[r] = (float)acc;
  }
  check_values(y, want, R, 1e-5f);
  tg_tensor *yf = tg_matmul(input(wf, (int64_t[]){R, C}, 2), input(x, (int64_t[]){C}, 1));
  CHECK(lowered_nested(yf) == 0);
  tg_scope_end(s);
}
