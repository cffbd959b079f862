/* test_onnx_replay.c — tg_onnx_run's replays (src/onnx/replay.c, docs/onnx.md "Replays"): a
 * model called again with inputs of the same signature runs its recorded kernels with no
 * schedule, and gives what the model computes (hand-computed references) on every call; a new
 * shape records again; a run whose work depends on input values (a shape read from input data)
 * is never replayed; threads calling one model get right values; tg_jit refuses an output
 * computed before the call. Models from tests/onnx/gen_fixtures.py. */
#include <math.h>
#include <pthread.h>
#include <string.h>

#include "harness.h"
#include "tg_onnx.h"
#include "tensor/tensor.h"

#define FIX "tests/fixtures/onnx/"

/* add_relu.onnx: Y = relu(X + W) - 1, Z = X W^T, W = [[1,2,3],[4,5,6]]. Max error of one call
 * (infinite if it failed; no CHECK here: threads call it). */
static double add_relu_call(tg_onnx_model *m, int call, bool *scheduled) {
  static const float w[6] = {1, 2, 3, 4, 5, 6};
  float x[6], y[6], z[4];
  for (int i = 0; i < 6; i++) x[i] = (float)((i * 7 + call * 3) % 11) - 5;
  tg_scope *s = tg_scope_begin();
  tg_tensor *in = tg_from_data(x, TG_FLOAT32, (int64_t[]){2, 3}, 2), *out[2] = {NULL, NULL};
  bool ready = in && tg_realize(in) == 0;
  uint64_t before = tg_get_stats().schedules;
  double worst = INFINITY;
  if (ready && tg_onnx_run(m, &in, 1, out, 2) == 0 && tg_realize_many(out, 2) == 0) {
    *scheduled = tg_get_stats().schedules != before;
    if (tg_to_host(out[0], y, sizeof y) == 0 && tg_to_host(out[1], z, sizeof z) == 0) {
      worst = 0;
      for (int i = 0; i < 6; i++) worst = fmax(worst, fabs(y[i] - (fmaxf(x[i] + w[i], 0) - 1)));
      for (int r = 0; r < 2; r++)
        for (int c = 0; c < 2; c++) {
          double ref = 0;
          for (int k = 0; k < 3; k++) ref += x[r * 3 + k] * w[c * 3 + k];
          worst = fmax(worst, fabs(z[r * 2 + c] - ref));
        }
    }
  }
  tg_scope_end(s);
  return worst;
}

/* Calls 1 and 2 record, later ones replay (no schedule) with each call's values. */
TEST(onnx_replay_matches_each_call) {
  tg_onnx_model *m = tg_onnx_load(FIX "add_relu.onnx");
  CHECK(m != NULL);
  for (int call = 0; m && call < 6; call++) {
    bool scheduled = true;
    double err = add_relu_call(m, call, &scheduled);
    CHECK(err < 1e-6);
    if (call >= 2) CHECK(!scheduled);
    if (call == 0) CHECK(scheduled);
  }
  tg_onnx_free(m);
}

/* A call whose outputs another handle holds already (the same input again: add_relu's graph has
 * no scalars, so the nodes intern to the held ones and no kernel runs) cannot be recorded; it
 * gives the held values, and once the handles are gone the signature records and replays. */
TEST(onnx_replay_after_a_held_output) {
  tg_onnx_model *m = tg_onnx_load(FIX "add_relu.onnx");
  CHECK(m != NULL);
  if (!m) return;
  float x[6] = {1, -2, 3, -4, 5, -6}, y1[6], y2[6];
  tg_scope *s = tg_scope_begin();
  tg_tensor *in = tg_from_data(x, TG_FLOAT32, (int64_t[]){2, 3}, 2), *held[2], *again[2];
  CHECK(tg_onnx_run(m, &in, 1, held, 2) == 0 && tg_realize_many(held, 2) == 0);
  CHECK(tg_onnx_run(m, &in, 1, again, 2) == 0 && tg_realize_many(again, 2) == 0);
  CHECK(tg_to_host(held[0], y1, sizeof y1) == 0 && tg_to_host(again[0], y2, sizeof y2) == 0 && !memcmp(y1, y2, sizeof y1));
  tg_scope_end(s);
  for (int call = 0; call < 5; call++) {
    bool scheduled = true;
    CHECK(add_relu_call(m, call, &scheduled) < 1e-6);
    if (call >= 2) CHECK(!scheduled);
  }
  tg_onnx_free(m);
}

/* replay_shape.onnx: Y = reshape(X + 1, [N, -1]), N read on the host from Shape(X) (a value of
 * the shape, not the data: replayed). Batches 2 and 5 alternate: each signature records, then
 * replays. */
TEST(onnx_replay_per_shape_and_shape_reads) {
  tg_onnx_model *m = tg_onnx_load(FIX "replay_shape.onnx");
  CHECK(m != NULL);
  for (int call = 0; m && call < 8; call++) {
    int n = call % 2 ? 5 : 2;
    float x[30], y[30];
    for (int i = 0; i < n * 6; i++) x[i] = (float)(i * 3 + call);
    tg_scope *s = tg_scope_begin();
    tg_tensor *in = tg_from_data(x, TG_FLOAT32, (int64_t[]){n, 2, 3}, 3), *out = NULL;
    CHECK(tg_realize(in) == 0);
    uint64_t before = tg_get_stats().schedules;
    CHECK(tg_onnx_run(m, &in, 1, &out, 1) == 0 && tg_realize(out) == 0);
    bool scheduled = tg_get_stats().schedules != before;
    int64_t shape[4] = {0};
    CHECK(tg_shape(out, shape, 4) == 2 && shape[0] == n && shape[1] == 6);
    CHECK(tg_to_host(out, y, sizeof(float) * (size_t)n * 6) == 0);
    int bad = 0;
    for (int i = 0; i < n * 6; i++) bad += y[i] != x[i] + 1;
    CHECK(bad == 0);
    if (call >= 4) CHECK(!scheduled);
    tg_scope_end(s);
  }
  tg_onnx_free(m);
}

/* replay_steer.onnx: Y = reshape(2 X, S), S a graph input: the output's shape is input data, so
 * the signature (X (2,6), S (2,)) never replays; every call has the shape its S asks for. The
 * first three calls ask for the same shape (their recordings agree: the JIT alone would replay
 * that shape from then on). */
TEST(onnx_replay_not_when_values_steer_the_work) {
  tg_onnx_model *m = tg_onnx_load(FIX "replay_steer.onnx");
  CHECK(m != NULL);
  static const int64_t shapes[][2] = {{3, 4}, {3, 4}, {3, 4}, {4, 3}, {12, 1}, {6, 2}};
  for (int call = 0; m && call < 6; call++) {
    float x[12], y[12];
    for (int i = 0; i < 12; i++) x[i] = (float)(i - call);
    tg_scope *s = tg_scope_begin();
    tg_tensor *in[2] = {tg_from_data(x, TG_FLOAT32, (int64_t[]){2, 6}, 2), tg_from_data(shapes[call], TG_INT64, (int64_t[]){2}, 1)};
    tg_tensor *out = NULL;
    CHECK(tg_onnx_run(m, in, 2, &out, 1) == 0);
    int64_t shape[4] = {0};
    CHECK(out && tg_shape(out, shape, 4) == 2 && shape[0] == shapes[call][0] && shape[1] == shapes[call][1]);
    CHECK(out && tg_to_host(out, y, sizeof y) == 0);
    int bad = 0;
    for (int i = 0; i < 12; i++) bad += y[i] != 2 * x[i];
    CHECK(bad == 0);
    tg_scope_end(s);
  }
  tg_onnx_free(m);
}

/* Two threads call one model 12 times each: one records or replays at a time, the other runs
 * unreplayed meanwhile; every call's values are right. */
static void *caller(void *model) {
  int bad = 0;
  for (int call = 0; call < 12; call++) {
    bool scheduled;
    bad += !(add_relu_call(model, call, &scheduled) < 1e-6);
  }
  return (void *)(intptr_t)bad;
}

TEST(threads_call_one_onnx_model) {
  tg_onnx_model *m = tg_onnx_load(FIX "add_relu.onnx");
  CHECK(m != NULL);
  if (!m) return;
  pthread_t t[2];
  void *bad[2] = {0};
  for (int i = 0; i < 2; i++) CHECK(pthread_create(&t[i], NULL, caller, m) == 0);
  for (int i = 0; i < 2; i++) CHECK(pthread_join(t[i], &bad[i]) == 0 && bad[i] == NULL);
  tg_onnx_free(m);
}

/* tg_jit: an output computed from the inputs before the call (the same expression held by
 * another handle: interned nodes share one buffer) ran no kernel in the call, so the JIT
 * refuses to record it rather than replay the old value. */
static int negated(void *ctx, tg_tensor *const *in, int nin, tg_tensor **out, int nout) {
  (void)ctx, (void)nin, (void)nout;
  out[0] = tg_neg(in[0]);
  return out[0] ? 0 : -1;
}

TEST(jit_refuses_an_output_computed_before_the_call) {
  tg_scope *s = tg_scope_begin();
  float x[4] = {1, 2, 3, 4};
  tg_tensor *in = tg_from_data(x, TG_FLOAT32, (int64_t[]){4}, 1), *held = tg_neg(in), *out = NULL;
  CHECK(tg_realize(in) == 0 && tg_realize(held) == 0);
  tg_jit *j = tg_jit_new(negated, NULL);
  CHECK(tg_jit_call(j, &in, 1, &out, 1) < 0);
  CHECK(strstr(tg_last_error(), "computed from the inputs before this call") != NULL);
  tg_jit_free(j);
  j = tg_jit_new(negated, NULL); /* without the held handle: records and replays */
  for (int call = 0; call < 4; call++) {
    float v[4], y[4];
    for (int i = 0; i < 4; i++) v[i] = (float)(i * call + 1);
    tg_tensor *vin = tg_from_data(v, TG_FLOAT32, (int64_t[]){4}, 1), *o = NULL;
    CHECK(tg_jit_call(j, &vin, 1, &o, 1) == 0 && tg_to_host(o, y, sizeof y) == 0);
    for (int i = 0; i < 4; i++) CHECK(y[i] == -v[i]);
  }
  CHECK(tg_jit_replaying(j));
  tg_jit_free(j);
  tg_scope_end(s);
}

/* jit_fold_constants (the ONNX replays' promise that a model's weights never change): an item
 * reading only external buffers (w*w*1, stored by tg_contiguous; the scalar makes it a new node
 * each call, not the last call's realized one) runs when the recording is kept and never in a
 * replay: one kernel a replay instead of two, the values those of y = x + w*w. */
static int plus_weight_squared(void *w, tg_tensor *const *in, int nin, tg_tensor **out, int nout) {
  (void)nin, (void)nout;
  out[0] = tg_add(in[0], tg_contiguous(tg_mul_s(tg_mul(w, w), 1.0)));
  return out[0] ? 0 : -1;
}

TEST(jit_folds_what_only_weights_feed) {
  tg_scope *s = tg_scope_begin();
  float wd[5] = {1, -2, 3, 0.5f, -1.5f};
  tg_tensor *w = tg_from_data(wd, TG_FLOAT32, (int64_t[]){5}, 1);
  CHECK(tg_realize(w) == 0);
  for (int fold = 0; fold < 2; fold++) {
    tg_jit *j = tg_jit_new(plus_weight_squared, w);
    if (fold) jit_fold_constants(j);
    for (int call = 0; call < 5; call++) {
      float x[5], y[5];
      for (int i = 0; i < 5; i++) x[i] = (float)(i * call) - 2;
      tg_tensor *in = tg_from_data(x, TG_FLOAT32, (int64_t[]){5}, 1), *o = NULL;
      CHECK(tg_realize(in) == 0);
      uint64_t before = tg_get_stats().kernels_run;
      CHECK(tg_jit_call(j, &in, 1, &o, 1) == 0 && tg_to_host(o, y, sizeof y) == 0);
      if (call >= 2) CHECK(tg_get_stats().kernels_run - before == (fold ? 1u : 2u));
      for (int i = 0; i < 5; i++) CHECK(y[i] == x[i] + wd[i] * wd[i]);
    }
    CHECK(tg_jit_replaying(j));
    tg_jit_free(j);
  }
  tg_scope_end(s);
}
