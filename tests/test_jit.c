/* test_jit.c — tg_jit (src/tensor/jit.c): replayed calls compute what plain calls compute (bit
 * for bit: the same kernels on the same data), without scheduling; the demo network trains the
 * same with and without it; wrong use is an error with a message; replays do not grow memory. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "runtime/helpers.h"
#include "../bench/nets.h"

/* ---- a small step: y = x @ w, loss = sum(y * y), w -= 0.01 * x^T (2 y); out = {loss, y} */

static int small_step(void *ctx, tg_tensor *const *in, int nin, tg_tensor **out, int nout) {
  tg_tensor *w = ctx, *x = in[0];
  if (nin != 1 || nout != 2) return -1;
  tg_tensor *y = tg_matmul(x, w);
  tg_tensor *grad = tg_matmul(tg_transpose(x, 0, 1), tg_mul_s(y, 2.0));
  out[0] = tg_sum(tg_mul(y, y), NULL, 0, false), out[1] = y;
  return tg_assign(w, tg_sub(w, tg_mul_s(grad, 0.01)));
}

static tg_tensor *weights(void) {
  float d[6] = {0.5f, -1.0f, 0.25f, 2.0f, -0.75f, 1.5f};
  tg_tensor *w = tg_from_data(d, TG_FLOAT32, (int64_t[]){3, 2}, 2);
  CHECK(w && tg_realize(w) == 0);
  return w;
}

static tg_tensor *batch(int step) {
  float d[12];
  for (int i = 0; i < 12; i++) d[i] = (float)((i * 7 + step * 3) % 11 - 5) * 0.125f;
  tg_tensor *x = tg_from_data(d, TG_FLOAT32, (int64_t[]){4, 3}, 2);
  CHECK(x != NULL);
  return x;
}

/* Eight steps through the JIT against eight plain calls on another copy of w: equal bits,
 * replays from the third call, and no schedule while replaying. */
TEST(jit_replays_match_plain_calls) {
  tg_scope *s = tg_scope_begin();
  tg_tensor *wj = weights(), *wp = weights();
  tg_jit *jit = tg_jit_new(small_step, wj);
  CHECK(jit != NULL);
  for (int step = 0; step < 8 && jit; step++) {
    tg_tensor *x = batch(step), *oj[2], *op[2];
    uint64_t schedules = tg_get_stats().schedules;
    CHECK(tg_jit_call(jit, &x, 1, oj, 2) == 0);
    bool replayed = tg_jit_replaying(jit) && tg_get_stats().schedules == schedules;
    CHECK(small_step(wp, &x, 1, op, 2) == 0 && tg_realize_many(op, 2) == 0);
    float lj, lp, yj[8], yp[8], wjd[6], wpd[6];
    CHECK(tg_to_host(oj[0], &lj, 4) == 0 && tg_to_host(op[0], &lp, 4) == 0 && lj == lp);
    CHECK(tg_to_host(oj[1], yj, 32) == 0 && tg_to_host(op[1], yp, 32) == 0 && !memcmp(yj, yp, 32));
    CHECK(tg_to_host(wj, wjd, 24) == 0 && tg_to_host(wp, wpd, 24) == 0 && !memcmp(wjd, wpd, 24));
    if (step >= 2) CHECK(replayed);
    if (step < 1) CHECK(!tg_jit_replaying(jit));
  }
  tg_jit_free(jit);
  tg_scope_end(s);
}

/* ---- the demo network (examples/mnist.c's, bench/nets.h), batch 8, Adam */

/* The losses of steps training the demo net from seed 0 on four seeded random batches in turn
 * (new input tensors every step; the net can learn 32 examples: the loss must fall). */
static int train(bool jit, int steps, float *losses) {
  net_run r;
  if (net_run_init(&r, true, 8) < 0) return -1;
  tg_jit *j = jit ? tg_jit_new(net_run_step, &r) : NULL;
  int rc = 0;
  for (int step = 0; step < steps && rc == 0; step++) {
    tg_scope *s = tg_scope_begin();
    tg_manual_seed(1000 + (uint64_t)(step % 4));
    tg_tensor *in[2] = {tg_rand((int64_t[]){8, 1, 28, 28}, 4, TG_FLOAT32), tg_randint((int64_t[]){8}, 1, 0, 10, TG_INT32)}, *loss;
    rc = jit ? tg_jit_call(j, in, 2, &loss, 1) : net_run_step(&r, in, 2, &loss, 1);
    if (rc == 0) rc = tg_to_host(loss, &losses[step], sizeof(float));
    tg_scope_end(s);
  }
  if (jit && !tg_jit_replaying(j)) rc = -1;
  tg_jit_free(j);
  net_run_free(&r);
  return rc;
}

/* 50 steps: the JIT's losses equal the plain run's, bit for bit, and the loss falls tenfold
 * (2.56 -> 0.0023 on CPU and CL; with a new random batch every step, random labels, it only
 * wandered around 2.5, and whether step 49 ended below step 0 was chance: it failed on CL). */
TEST(jit_demo_training_same_losses) {
  enum { STEPS = 50 };
  float plain[STEPS], jitted[STEPS];
  CHECK(train(false, STEPS, plain) == 0);
  CHECK(train(true, STEPS, jitted) == 0);
  int differ = 0;
  for (int i = 0; i < STEPS; i++) differ += plain[i] != jitted[i];
  CHECK(differ == 0);
  if (differ) printf("  step 49: plain %.9g, jit %.9g\n", plain[STEPS - 1], jitted[STEPS - 1]);
  CHECK(isfinite(jitted[STEPS - 1]) && jitted[STEPS - 1] < 0.1f * jitted[0]);
}

/* ---- wrong use */

static int double_it(void *ctx, tg_tensor *const *in, int nin, tg_tensor **out, int nout) {
  (void)ctx, (void)nin, (void)nout;
  out[0] = tg_mul_s(in[0], 2.0);
  return 0;
}

static int calls_made;

/* Reads data it makes itself, different each call: the replay would freeze it. */
static int fresh_data(void *ctx, tg_tensor *const *in, int nin, tg_tensor **out, int nout) {
  (void)ctx, (void)nin, (void)nout;
  float d[3] = {1, 2, (float)calls_made++};
  out[0] = tg_add(in[0], tg_from_data(d, TG_FLOAT32, (int64_t[]){3}, 1));
  return 0;
}

/* A scalar that changes each call (a kernel argument): frozen too. */
static int changing_scalar(void *ctx, tg_tensor *const *in, int nin, tg_tensor **out, int nout) {
  (void)ctx, (void)nin, (void)nout;
  out[0] = tg_mul_s(in[0], 1.0 + calls_made++);
  return 0;
}

/* Random numbers drawn inside (a dropout mask): the generator's counter is host state. */
static int random_inside(void *ctx, tg_tensor *const *in, int nin, tg_tensor **out, int nout) {
  (void)ctx, (void)nin, (void)nout;
  out[0] = tg_add(in[0], tg_rand((int64_t[]){3}, 1, TG_FLOAT32));
  return 0;
}

static int no_output(void *ctx, tg_tensor *const *in, int nin, tg_tensor **out, int nout) {
  (void)ctx, (void)in, (void)nin, (void)out, (void)nout;
  return 0;
}

static int fails(void *ctx, tg_tensor *const *in, int nin, tg_tensor **out, int nout) {
  (void)ctx, (void)in, (void)nin, (void)out, (void)nout;
  return tg_set_error(TG_ERR_ARG, "the function's own error");
}

static tg_tensor *ones3(tg_dtype dt, int64_t n) { return tg_full((int64_t[]){n}, 1, 1.0, dt); }

/* Calls fn through a new JIT until it replays or fails (at most 6 calls); the last status. */
static int run_calls(tg_jit_fn fn, int calls) {
  tg_jit *j = tg_jit_new(fn, NULL);
  int rc = 0;
  for (int i = 0; i < calls && rc == 0; i++) {
    tg_tensor *x = ones3(TG_FLOAT32, 3), *y;
    rc = tg_jit_call(j, &x, 1, &y, 1);
  }
  tg_jit_free(j);
  return rc;
}

TEST(jit_wrong_use_is_an_error) {
  tg_scope *s = tg_scope_begin();
  tg_jit *j = tg_jit_new(double_it, NULL);
  tg_tensor *x = ones3(TG_FLOAT32, 3), *y = NULL;
  for (int i = 0; i < 3; i++) CHECK(tg_jit_call(j, &x, 1, &y, 1) == 0);
  CHECK(tg_jit_replaying(j));
  tg_tensor *longer = ones3(TG_FLOAT32, 4), *ints = ones3(TG_INT32, 3);
  CHECK(tg_jit_call(j, &longer, 1, &y, 1) == TG_ERR_ARG && strstr(tg_last_error(), "input 0 is float32 (4,)") &&
        strstr(tg_last_error(), "recorded with float32 (3,)"));
  CHECK(tg_jit_call(j, &ints, 1, &y, 1) == TG_ERR_ARG && strstr(tg_last_error(), "int32 (3,)"));
  tg_tensor *two[2] = {x, x};
  CHECK(tg_jit_call(j, two, 2, &y, 1) == TG_ERR_ARG && strstr(tg_last_error(), "2 inputs"));
  tg_tensor *none = NULL;
  CHECK(tg_jit_call(j, &none, 1, &y, 1) == TG_ERR_ARG && strstr(tg_last_error(), "input 0 is NULL"));
  CHECK(tg_jit_call(NULL, &x, 1, &y, 1) == TG_ERR_ARG);
  float got[3];
  CHECK(tg_jit_call(j, &x, 1, &y, 1) == 0 && tg_to_host(y, got, sizeof got) == 0 && got[0] == 2 && got[2] == 2); /* still replays */
  const char *devs[2] = {"CPU:0", "CPU:1"};
  tg_tensor *sharded = tg_device_available("CPU:1") ? tg_shard(ones3(TG_FLOAT32, 4), devs, 2, 0) : NULL;
  tg_jit *fresh = tg_jit_new(double_it, NULL);
  if (sharded) CHECK(tg_jit_call(fresh, &sharded, 1, &y, 1) == TG_ERR_ARG && strstr(tg_last_error(), "input 0 is sharded"));
  tg_jit_free(fresh);
  tg_jit_free(j);
  CHECK(tg_jit_new(NULL, NULL) == NULL && strstr(tg_last_error(), "NULL"));
  calls_made = 0;
  CHECK(run_calls(fresh_data, 6) == TG_ERR_ARG && strstr(tg_last_error(), "changed between calls"));
  calls_made = 0;
  CHECK(run_calls(changing_scalar, 6) == TG_ERR_ARG && strstr(tg_last_error(), "changed between calls"));
  CHECK(run_calls(random_inside, 6) == TG_ERR_ARG && strstr(tg_last_error(), "changed between calls"));
  CHECK(run_calls(no_output, 1) == TG_ERR_ARG && strstr(tg_last_error(), "output 0 unset"));
  CHECK(run_calls(fails, 1) == TG_ERR_ARG && strstr(tg_last_error(), "the function's own error"));
  tg_scope_end(s);
}

/* A broken JIT says why on every later call. */
TEST(jit_broken_stays_broken) {
  tg_scope *s = tg_scope_begin();
  calls_made = 0;
  tg_jit *j = tg_jit_new(fresh_data, NULL);
  tg_tensor *x = ones3(TG_FLOAT32, 3), *y;
  CHECK(tg_jit_call(j, &x, 1, &y, 1) == 0);
  CHECK(tg_jit_call(j, &x, 1, &y, 1) == TG_ERR_ARG);
  float got[3];
  CHECK(y && tg_to_host(y, got, sizeof got) == 0 && got[2] == 2); /* that call's output is set */
  CHECK(tg_jit_call(j, &x, 1, &y, 1) == TG_ERR_ARG && strstr(tg_last_error(), "changed between calls"));
  tg_jit_free(j);
  tg_scope_end(s);
}

/* 40 replays of the small step: live buffers and bytes the same after 10 as after 40. */
TEST(jit_replays_keep_memory_flat) {
  tg_scope *s = tg_scope_begin();
  tg_tensor *w = weights();
  tg_jit *j = tg_jit_new(small_step, w);
  tg_stats at10 = {0};
  for (int step = 0; step < 40; step++) {
    tg_scope *inner = tg_scope_begin();
    tg_tensor *x = batch(step), *out[2];
    CHECK(tg_jit_call(j, &x, 1, out, 2) == 0);
    tg_scope_end(inner);
    if (step == 9) at10 = tg_get_stats();
  }
  tg_stats at40 = tg_get_stats();
  CHECK(at40.buffers_alive == at10.buffers_alive && at40.bytes_alive == at10.bytes_alive);
  tg_jit_free(j);
  tg_scope_end(s);
}
