/* test_realize_grad.c — reading a value never changes its gradient (docs/autograd.md,
 * "Realize keeps the history"). Every derivative here is taken once on a lazy graph and again
 * with realizes interleaved (tg_realize, tg_to_host, tg_item, tg_realize_many, and a tensor
 * realized as a side effect of realizing another one); both must equal the hand-computed
 * value. Also: the cuts that are allowed (tg_detach, tg_assign, int values) and that a
 * training step reads the same gradients whether or not the loss was printed first. */
#include <math.h>
#include <string.h>

#include "harness.h"

#define F64 TG_FLOAT64

static const double X2[2] = {2, 3};

static tg_tensor *vec2(void) { return tg_from_data(X2, F64, (int64_t[]){2}, 1); }
static tg_tensor *total(tg_tensor *t) { return tg_sum(t, NULL, 0, false); }

static tg_tensor *grad1(tg_tensor *y, tg_tensor *x) {
  tg_tensor *g = NULL;
  CHECK(tg_gradient(y, &x, 1, &g) == 0);
  return g;
}

static void check2(tg_tensor *t, double a, double b) {
  double out[2] = {-1, -1};
  CHECK(tg_to_host(t, out, sizeof out) == 0);
  CHECK_CLOSE(out[0], a, 1e-12);
  CHECK_CLOSE(out[1], b, 1e-12);
}

/* The example: y = sum(x^3), g = dy/dx read on the host, then d(sum g)/dx = 6x. */
TEST(realize_grad_second_derivative_after_to_host) {
  tg_scope *s = tg_scope_begin();
  tg_tensor *x = vec2();
  tg_tensor *g = grad1(total(tg_mul(tg_mul(x, x), x)), x);
  check2(g, 12, 27); /* 3x^2, read first */
  check2(grad1(total(g), x), 12, 18);
  tg_scope_end(s);
}

/* Ways of reading a value, applied to a tensor before its gradient is taken. */
typedef enum { READ_NONE, READ_REALIZE, READ_TO_HOST, READ_ITEM, READ_MANY, READ_COUNT } read_kind;

static void read_value(tg_tensor *t, read_kind how) {
  double buf[2];
  tg_tensor *pair[2] = {t, NULL};
  switch (how) {
    case READ_REALIZE: CHECK(tg_realize(t) == 0); break;
    case READ_TO_HOST: CHECK(tg_to_host(t, buf, sizeof(double) * (size_t)tg_numel(t)) == 0); break;
    case READ_ITEM: CHECK(tg_item(total(t)) == tg_item(total(t))); break; /* a reduce of t: t itself may fuse away */
    case READ_MANY:
      pair[1] = tg_exp(t);
      CHECK(tg_realize_many(pair, 2) == 0);
      break;
    default: break;
  }
}

/* y = sum(x^4): y' = 4x^3, y'' = 12x^2, y''' = 24x, with every combination of reads at the
 * four points (y, and each derivative before the next one is taken). */
TEST(realize_grad_third_derivative_reads_interleaved) {
  for (int mask = 0; mask < READ_COUNT * READ_COUNT * READ_COUNT * READ_COUNT; mask++) {
    tg_scope *s = tg_scope_begin();
    int m = mask;
    tg_tensor *x = vec2(), *sq = tg_mul(x, x);
    tg_tensor *y = total(tg_mul(sq, sq));
    read_value(y, (read_kind)(m % READ_COUNT)), m /= READ_COUNT;
    tg_tensor *d1 = grad1(y, x);
    read_value(d1, (read_kind)(m % READ_COUNT)), m /= READ_COUNT;
    tg_tensor *d2 = grad1(total(d1), x);
    read_value(d2, (read_kind)(m % READ_COUNT)), m /= READ_COUNT;
    tg_tensor *d3 = grad1(total(d2), x);
    read_value(d3, (read_kind)(m % READ_COUNT));
    check2(d1, 32, 108);
    check2(d2, 48, 108);
    check2(d3, 48, 72);
    if (harness_failed_checks) {
      printf("  read pattern %d\n", mask);
      tg_scope_end(s);
      return;
    }
    tg_scope_end(s);
  }
}

/* g is stored while realizing something else (a contiguous copy of it feeds another value),
 * then differentiated. */
TEST(realize_grad_after_side_effect_realize) {
  tg_scope *s = tg_scope_begin();
  tg_tensor *x = vec2();
  tg_tensor *g = tg_contiguous(grad1(total(tg_mul(tg_mul(x, x), x)), x)); /* 3x^2 */
  tg_tensor *other = tg_sum(tg_exp(g), NULL, 0, false);
  CHECK(tg_realize(other) == 0);
  CHECK(tg_is_realized(g)); /* a kernel root: stored on the way */
  check2(grad1(total(g), x), 12, 18);
  /* a graph built from the realized value after the fact still reaches x */
  check2(grad1(total(tg_mul(g, x)), x), 36, 81); /* d(3x^3) = 9x^2 */
  tg_scope_end(s);
}

/* A value realized before it is used, with its consumer realized too: y = sin(x) read, then
 * z = y * x read, then dz/dx = x cos x + sin x. */
TEST(realize_grad_chain_of_read_values) {
  tg_scope *s = tg_scope_begin();
  tg_tensor *x = vec2();
  tg_tensor *y = tg_sin(x);
  CHECK(tg_realize(y) == 0);
  tg_tensor *z = total(tg_mul(y, x));
  CHECK(tg_item(z) == tg_item(z));
  check2(grad1(z, x), 2 * cos(2.0) + sin(2.0), 3 * cos(3.0) + sin(3.0));
  /* and with respect to the realized intermediate itself: dz/dy = x */
  check2(grad1(z, y), 2, 3);
  tg_scope_end(s);
}

/* The allowed cuts. tg_detach: no gradient, before or after realize; a detached realized
 * value is its buffer (no kernel to read it). */
TEST(realize_grad_detach_cuts_before_and_after_realize) {
  tg_scope *s = tg_scope_begin();
  tg_tensor *x = vec2();
  tg_tensor *y = tg_mul(x, x);
  tg_tensor *lazy = tg_detach(y);
  check2(grad1(total(tg_mul(lazy, x)), x), 4, 9); /* d(c x) = c = x^2 */
  CHECK(tg_realize(y) == 0);
  tg_reset_stats();
  tg_tensor *d = tg_detach(y);
  check2(d, 4, 9);
  CHECK(tg_get_stats().kernels_run == 0);
  check2(grad1(total(tg_mul(d, x)), x), 4, 9);
  check2(grad1(total(tg_mul(y, x)), x), 12, 27); /* y itself still has its history */
  tg_scope_end(s);
}

/* tg_assign writes a value: the assigned tensor carries no gradient to the value's inputs,
 * whether it was realized or not (an optimizer step, a running statistic). */
TEST(realize_grad_assign_is_a_detached_write) {
  tg_scope *s = tg_scope_begin();
  tg_tensor *x = vec2();
  tg_tensor *w = tg_zeros((int64_t[]){2}, 1, F64);
  CHECK(tg_realize(w) == 0);
  CHECK(tg_assign(w, tg_mul(x, x)) == 0);
  check2(grad1(total(tg_mul(w, x)), x), 4, 9); /* w is a constant x^2 */
  CHECK(tg_realize(w) == 0);
  check2(grad1(total(tg_mul(w, x)), x), 4, 9);
  check2(grad1(total(tg_mul(w, w)), w), 8, 18); /* with respect to w itself: 2w */
  tg_scope_end(s);
}

/* Int values carry no gradient, realized or not: a float made from one is a constant. */
TEST(realize_grad_int_values) {
  tg_scope *s = tg_scope_begin();
  tg_tensor *x = vec2();
  tg_tensor *i = tg_cast(tg_mul_s(x, 10), TG_INT32);
  tg_tensor *y = total(tg_mul(tg_cast(i, F64), x));
  check2(grad1(y, x), 20, 30);
  CHECK(tg_realize(i) == 0);
  check2(grad1(y, x), 20, 30);
  tg_scope_end(s);
}

/* One training step of a linear model, once with the loss printed (read) before tg_backward
 * and once without: the same loss, the same gradients, the same updated weights. */
static void linear_step(bool read_loss_first, double *loss_out, double *grad_out, double *w_out) {
  static const double xd[6] = {1, 2, 3, -1, 0.5, 2}, yd[2] = {1, -2}, w0[3] = {0.1, -0.2, 0.3};
  tg_scope *s = tg_scope_begin();
  tg_tensor *w = tg_from_data(w0, F64, (int64_t[]){3}, 1);
  CHECK(tg_requires_grad(w, true) == w);
  tg_tensor *x = tg_from_data(xd, F64, (int64_t[]){2, 3}, 2), *y = tg_from_data(yd, F64, (int64_t[]){2}, 1);
  tg_tensor *loss = tg_mse_loss(tg_matmul(x, w), y);
  if (read_loss_first) *loss_out = tg_item(loss);
  CHECK(tg_backward(loss) == 0);
  if (!read_loss_first) *loss_out = tg_item(loss);
  CHECK(tg_to_host(tg_grad(w), grad_out, 3 * sizeof(double)) == 0);
  CHECK(tg_assign(w, tg_sub(w, tg_mul_s(tg_grad(w), 0.1))) == 0);
  CHECK(tg_to_host(w, w_out, 3 * sizeof(double)) == 0);
  tg_scope_end(s);
}

TEST(realize_grad_training_step_prints_loss_before_backward) {
  double l1, l2, g1[3], g2[3], w1[3], w2[3];
  linear_step(true, &l1, g1, w1);
  linear_step(false, &l2, g2, w2);
  /* by hand: pred = x w = (0.6, 0.4); err = pred - y = (-0.4, 2.4); loss = mean(err^2) = 2.96;
   * grad = 2/2 * x^T err = (-0.4 - 2.4, -0.8 + 1.2, -1.2 + 4.8) = (-2.8, 0.4, 3.6) */
  CHECK_CLOSE(l1, 2.96, 1e-12);
  CHECK(l1 == l2);
  const double want[3] = {-2.8, 0.4, 3.6};
  for (int i = 0; i < 3; i++) {
    CHECK_CLOSE(g1[i], want[i], 1e-12);
    CHECK(g1[i] == g2[i] && w1[i] == w2[i]);
  }
}

/* A target that only a convolution's own graph reaches (the weight view it multiplies the
 * windows by) cannot get its gradient from the conv's derivative rule, which knows only the
 * conv's inputs: an error, not zeros. Through the inputs themselves the gradient is exact. */
TEST(realize_grad_target_inside_custom_op_is_an_error) {
  tg_scope *s = tg_scope_begin();
  static const double xd[16] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16};
  tg_tensor *x = tg_from_data(xd, F64, (int64_t[]){1, 1, 4, 4}, 4);
  tg_tensor *w = tg_ones((int64_t[]){1, 1, 3, 3}, 4, F64);
  tg_tensor *y = total(tg_conv2d(x, w, NULL, (int[]){1, 1}, (int[]){1, 1}, (int[]){1, 1}, 1));
  tg_tensor *view = tg_reshape(w, (int64_t[]){1, 1, 1, 1, 1, 1, 3, 3}, 8); /* conv.c's weight view */
  tg_tensor *g = NULL;
  tg_clear_error();
  CHECK(tg_gradient(y, &view, 1, &g) == TG_ERR_ARG && g == NULL);
  CHECK(strstr(tg_last_error(), "inside the value of an op with its own derivative") != NULL);
  /* dy/dx[i][j] = number of 3x3 windows (padding 1) covering (i, j): 4 at corners, 6 on edges, 9 inside */
  double gx[16];
  CHECK(tg_gradient(y, &x, 1, &g) == 0 && tg_to_host(g, gx, sizeof gx) == 0);
  for (int i = 0; i < 4; i++)
    for (int j = 0; j < 4; j++) CHECK(gx[i * 4 + j] == (double)((i % 3 ? 3 : 2) * (j % 3 ? 3 : 2)));
  tg_scope_end(s);
}

/* A loop that feeds its realized state into the next step (an RNN) stays flat when it
 * detaches the state, as the docs say (docs/autograd.md, "Memory"). */
TEST(realize_grad_detached_state_loop_is_flat) {
  tg_scope *outer = tg_scope_begin();
  tg_tensor *w = tg_full((int64_t[]){4}, 1, 0.5, F64), *x = tg_full((int64_t[]){4}, 1, 0.25, F64);
  tg_tensor *h = tg_keep(tg_zeros((int64_t[]){4}, 1, F64));
  tg_stats mid = {0};
  double ref = 0;
  for (int step = 0; step < 60; step++) {
    tg_scope *s = tg_scope_begin();
    tg_tensor *next = tg_tanh(tg_add(tg_mul(h, w), x));
    CHECK(tg_realize(next) == 0);
    tg_free(h);
    h = tg_keep(tg_detach(next));
    tg_scope_end(s);
    ref = tanh(ref * 0.5 + 0.25);
    if (step == 9) mid = tg_get_stats();
  }
  tg_stats end = tg_get_stats();
  CHECK(end.uops_alive == mid.uops_alive && end.buffers_alive == mid.buffers_alive);
  double out[4];
  CHECK(tg_to_host(h, out, sizeof out) == 0);
  CHECK_CLOSE(out[0], ref, 1e-12);
  tg_free(h);
  tg_scope_end(outer);
}
