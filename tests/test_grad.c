/* test_grad.c — autograd: every derivative rule checked against central finite differences
 * in float64, composite functions against PyTorch (tests/fixtures/grad.h from
 * tests/gen_fixtures_grad.py), higher-order gradients, the parameter API (requires_grad,
 * backward accumulation, zero_grad, detach) and the errors.
 *
 * A finite-difference check builds y = f(x) (a scalar), asks tg_gradient for dy/dx and
 * compares every element with (f(x + h e_i) - f(x - h e_i)) / 2h evaluated by tg itself. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "fixtures/grad.h"
#include "harness.h"

#define F64 TG_FLOAT64

typedef tg_tensor *(*scalar_fn)(tg_tensor **x);

typedef struct fd_input {
  const double *data;
  int ndim;
  int64_t shape[4];
} fd_input;

static int64_t numel_of(const fd_input *in) {
  int64_t n = 1;
  for (int i = 0; i < in->ndim; i++) n *= in->shape[i];
  return n;
}

static tg_tensor *f64(const double *d, const int64_t *shape, int nd) {
  tg_tensor *t = tg_from_data(d, F64, shape, nd);
  CHECK(t != NULL);
  return t;
}

/* Weights that make a scalar out of any tensor while telling every element apart. */
static tg_tensor *weights_like(tg_tensor *t) {
  int64_t shape[8];
  int nd = tg_shape(t, shape, 8);
  tg_tensor *i = tg_arange(0, (double)tg_numel(t), 1, F64);
  tg_tensor *w = tg_add_s(tg_cos(tg_add_s(tg_mul_s(i, 0.9), 0.3)), 0.25);
  return tg_cast(tg_reshape(w, shape, nd), tg_get_dtype(t));
}

static tg_tensor *wsum(tg_tensor *t) { return tg_sum(tg_mul(t, weights_like(t)), NULL, 0, false); }

/* f at the inputs with element j of input k moved by delta. */
static double eval_at(scalar_fn f, const fd_input *in, int n, int k, int64_t j, double delta) {
  tg_scope *s = tg_scope_begin();
  tg_tensor *xs[4];
  double *moved = malloc(sizeof(double) * (size_t)numel_of(&in[k]));
  memcpy(moved, in[k].data, sizeof(double) * (size_t)numel_of(&in[k]));
  moved[j] += delta;
  for (int i = 0; i < n; i++) xs[i] = f64(i == k ? moved : in[i].data, in[i].shape, in[i].ndim);
  double v = tg_item(f(xs));
  free(moved);
  tg_scope_end(s);
  return v;
}

/* dy/dx of every input by tg_gradient against central differences with step h. */
static void fd_check_h(scalar_fn f, const fd_input *in, int n, double h, double tol) {
  tg_scope *s = tg_scope_begin();
  tg_tensor *xs[4], *g[4];
  for (int i = 0; i < n; i++) xs[i] = f64(in[i].data, in[i].shape, in[i].ndim);
  CHECK(tg_gradient(f(xs), xs, n, g) == 0);
  for (int k = 0; k < n; k++) {
    int64_t m = numel_of(&in[k]);
    double *got = calloc((size_t)m, sizeof(double));
    CHECK(g[k] && tg_get_dtype(g[k]) == F64 && tg_numel(g[k]) == m);
    CHECK(tg_to_host(g[k], got, sizeof(double) * (size_t)m) == 0);
    int bad = 0;
    for (int64_t j = 0; j < m; j++) {
      double fd = (eval_at(f, in, n, k, j, h) - eval_at(f, in, n, k, j, -h)) / (2 * h);
      if (!harness_close(got[j], fd, tol, tol) && bad++ < 4) {
        harness_failed_checks++;
        printf("  input %d element %lld: gradient %.10g, finite difference %.10g\n", k, (long long)j, got[j], fd);
      }
    }
    free(got);
  }
  tg_scope_end(s);
}

static void fd_check(scalar_fn f, const fd_input *in, int n) { fd_check_h(f, in, n, 1e-6, 1e-6); }

/* Gradients of f at the inputs, copied to out[k] (numel of input k doubles each). */
static void grads_of(scalar_fn f, const fd_input *in, int n, double **out) {
  tg_scope *s = tg_scope_begin();
  tg_tensor *xs[4], *g[4];
  for (int i = 0; i < n; i++) xs[i] = f64(in[i].data, in[i].shape, in[i].ndim);
  CHECK(tg_gradient(f(xs), xs, n, g) == 0);
  for (int k = 0; k < n; k++) CHECK(tg_to_host(g[k], out[k], sizeof(double) * (size_t)numel_of(&in[k])) == 0);
  tg_scope_end(s);
}

/* ------------------------------------------------------------------ inputs */

static const double A6[6] = {0.3, -1.2, 0.7, 1.9, -0.4, 1.1};   /* (2, 3), no ties, no zeros */
static const double P6[6] = {0.3, 1.2, 0.7, 1.9, 0.45, 1.1};    /* positive */
static const double B3[3] = {0.5, -0.8, 1.35};
static const double C12[12] = {0.2, -0.7, 1.3, 0.9, -1.1, 0.4, 1.7, -0.3, 0.6, -1.6, 1.05, -0.15};

#define IN23(d) {(d), 2, {2, 3}}
#define IN3(d) {(d), 1, {3}}

#define FD1(name, expr, data)                                        \
  static tg_tensor *f_##name(tg_tensor **x) { return wsum(expr); } \
  TEST(grad_fd_##name) {                                             \
    fd_input in[1] = {IN23(data)};                                   \
    fd_check(f_##name, in, 1);                                       \
  }

/* ------------------------------------------------------------------ elementwise rules */

FD1(neg, tg_neg(x[0]), A6)
FD1(exp2, tg_exp2(x[0]), A6)
FD1(exp, tg_exp(x[0]), A6)
FD1(log2, tg_log2(x[0]), P6)
FD1(log, tg_log(x[0]), P6)
FD1(sin, tg_sin(x[0]), A6)
FD1(cos, tg_cos(x[0]), A6)
FD1(tan, tg_tan(x[0]), A6)
FD1(sqrt, tg_sqrt(x[0]), P6)
FD1(rsqrt, tg_rsqrt(x[0]), P6)
FD1(recip, tg_reciprocal(x[0]), A6)
FD1(square, tg_square(x[0]), A6)
FD1(tanh, tg_tanh(x[0]), A6)
FD1(sigmoid, tg_sigmoid(x[0]), A6)
FD1(abs, tg_abs(x[0]), A6)
FD1(relu, tg_relu(x[0]), A6)
FD1(clip, tg_clip(x[0], -0.5, 1.0), A6)
FD1(pow_s, tg_pow_s(x[0], 2.5), P6)
FD1(add_s, tg_add_s(x[0], 2.5), A6)
FD1(rsub_s, tg_rsub_s(2.5, x[0]), A6)
FD1(div_s, tg_div_s(x[0], -1.5), A6)
FD1(trunc, tg_trunc(tg_mul_s(x[0], 3)), A6) /* zero almost everywhere */
FD1(floor, tg_floor(tg_mul_s(x[0], 3)), A6)
FD1(contiguous, tg_contiguous(tg_mul(x[0], x[0])), A6)

TEST(grad_trunc_is_zero) {
  tg_scope *s = tg_scope_begin();
  tg_tensor *x = f64(A6, (int64_t[]){2, 3}, 2), *g;
  CHECK(tg_gradient(wsum(tg_round(x)), &x, 1, &g) == 0);
  double out[6];
  CHECK(tg_to_host(g, out, sizeof out) == 0);
  for (int i = 0; i < 6; i++) CHECK(out[i] == 0);
  tg_scope_end(s);
}

/* cast: float64 -> float32 -> float64 carries the gradient (with float32 rounding) */
static tg_tensor *f_cast(tg_tensor **x) {
  tg_tensor *h = tg_cast(x[0], TG_FLOAT32);
  return wsum(tg_cast(tg_mul(h, h), F64));
}
TEST(grad_fd_cast) {
  fd_input in[1] = {IN23(A6)};
  fd_check_h(f_cast, in, 1, 1e-3, 1e-3);
}

/* cast to an int carries no gradient: d/dx (int(3x) + x) = 1 */
TEST(grad_cast_to_int_is_zero) {
  tg_scope *s = tg_scope_begin();
  tg_tensor *x = f64(A6, (int64_t[]){2, 3}, 2), *g;
  tg_tensor *y = tg_sum(tg_add(tg_cast(tg_cast(tg_mul_s(x, 3), TG_INT32), F64), x), NULL, 0, false);
  CHECK(tg_gradient(y, &x, 1, &g) == 0);
  double out[6];
  CHECK(tg_to_host(g, out, sizeof out) == 0);
  for (int i = 0; i < 6; i++) CHECK(out[i] == 1);
  tg_scope_end(s);
}

/* binary ops with broadcasting: a (2, 3), b (3,) — b's gradient is summed over axis 0 */
#define FD2(name, expr, da, db)                                           \
  static tg_tensor *f_##name(tg_tensor **x) { return wsum(expr); }      \
  TEST(grad_fd_##name) {                                                  \
    fd_input in[2] = {IN23(da), IN3(db)};                                 \
    fd_check(f_##name, in, 2);                                            \
  }

FD2(add, tg_add(x[0], x[1]), A6, B3)
FD2(sub, tg_sub(x[0], x[1]), A6, B3)
FD2(mul, tg_mul(x[0], x[1]), A6, B3)
FD2(div, tg_div(x[0], x[1]), A6, B3)
FD2(maximum, tg_maximum(x[0], x[1]), A6, B3)
FD2(minimum, tg_minimum(x[0], x[1]), A6, B3)
FD2(pow, tg_pow(x[0], x[1]), P6, B3)
FD2(mod, tg_mod(x[0], x[1]), A6, B3)
FD2(floordiv_zero, tg_floordiv(x[0], x[1]), A6, B3)
FD2(atan_like, tg_div(x[0], tg_add_s(tg_mul(x[1], x[1]), 1)), A6, B3)

static tg_tensor *f_where(tg_tensor **x) {
  static const bool c[6] = {true, false, false, true, true, false};
  tg_tensor *cond = tg_from_data(c, TG_BOOL, (int64_t[]){2, 3}, 2);
  return wsum(tg_where(cond, tg_mul(x[0], x[0]), tg_sin(x[1])));
}
TEST(grad_fd_where) {
  fd_input in[2] = {IN23(A6), IN3(B3)};
  fd_check(f_where, in, 2);
}

/* comparisons give bools: no gradient through the condition */
static tg_tensor *f_compare(tg_tensor **x) {
  tg_tensor *mask = tg_cast(tg_lt(x[0], tg_scalar(0.5, F64)), F64);
  return wsum(tg_mul(mask, x[0]));
}
TEST(grad_fd_compare) {
  fd_input in[1] = {IN23(A6)};
  fd_check(f_compare, in, 1);
}

/* Ties: maximum(a, a) splits the gradient in halves (like torch.maximum); relu and abs are
 * selects, not max, and get 0 at 0 (like PyTorch; tests/test_ops_elementwise.c has the other kinks). */
TEST(grad_maximum_tie_splits) {
  tg_scope *s = tg_scope_begin();
  static const double a[3] = {1.0, 0.0, -2.0}, b[3] = {1.0, 3.0, -2.0};
  tg_tensor *x[2] = {f64(a, (int64_t[]){3}, 1), f64(b, (int64_t[]){3}, 1)}, *g[2];
  CHECK(tg_gradient(tg_sum(tg_maximum(x[0], x[1]), NULL, 0, false), x, 2, g) == 0);
  double ga[3], gb[3];
  CHECK(tg_to_host(g[0], ga, sizeof ga) == 0 && tg_to_host(g[1], gb, sizeof gb) == 0);
  CHECK(ga[0] == 0.5 && gb[0] == 0.5);
  CHECK(ga[1] == 0 && gb[1] == 1);
  CHECK(ga[2] == 0.5 && gb[2] == 0.5);
  tg_tensor *z = f64((double[]){0.0}, NULL, 0), *gz;
  CHECK(tg_gradient(tg_relu(z), &z, 1, &gz) == 0);
  CHECK(tg_item(gz) == 0);
  CHECK(tg_gradient(tg_abs(z), &z, 1, &gz) == 0);
  CHECK(tg_item(gz) == 0);
  tg_scope_end(s);
}

/* pow at base 0: d/da 0^2 = 0, d/db 0^b = 0 (not NaN from log 0); b = 0: d/da a^0 = 0 */
TEST(grad_pow_special_points) {
  tg_scope *s = tg_scope_begin();
  static const double a[3] = {0.0, 0.0, 2.0}, b[3] = {2.0, 0.0, 0.0};
  tg_tensor *x[2] = {f64(a, (int64_t[]){3}, 1), f64(b, (int64_t[]){3}, 1)}, *g[2];
  CHECK(tg_gradient(tg_sum(tg_pow(x[0], x[1]), NULL, 0, false), x, 2, g) == 0);
  double ga[3], gb[3];
  CHECK(tg_to_host(g[0], ga, sizeof ga) == 0 && tg_to_host(g[1], gb, sizeof gb) == 0);
  CHECK(ga[0] == 0 && gb[0] == 0);
  CHECK(ga[1] == 0 && gb[1] == 0);
  CHECK(ga[2] == 0);
  CHECK_CLOSE(gb[2], log(2.0), 1e-12);
  tg_scope_end(s);
}

/* ------------------------------------------------------------------ reductions */

#define FD12(name, expr)                                                  \
  static tg_tensor *f_##name(tg_tensor **x) { return wsum(expr); }      \
  TEST(grad_fd_##name) {                                                  \
    fd_input in[1] = {{C12, 2, {3, 4}}};                                  \
    fd_check(f_##name, in, 1);                                            \
  }

static const int AX0[1] = {0}, AX1[1] = {1};
FD12(sum_axis, tg_sum(x[0], AX1, 1, false))
FD12(sum_all, tg_sum(tg_mul(x[0], x[0]), NULL, 0, true))
FD12(max_axis, tg_max(x[0], AX0, 1, false))
FD12(min_axis, tg_min(x[0], AX1, 1, true))
FD12(prod_axis, tg_prod(x[0], AX1, 1, false))
FD12(mean, tg_mean(x[0], AX0, 1, false))
FD12(var, tg_var(x[0], AX1, 1, false, 1))
FD12(std, tg_std(x[0], AX0, 1, true, 0))
FD12(softmax, tg_softmax(x[0], 1))
FD12(log_softmax, tg_log_softmax(x[0], 0))
FD12(logsumexp, tg_logsumexp(x[0], 1, false))
FD12(cumsum, tg_cumsum(x[0], 1))

/* prod with zeros: exact derivatives (prod of the others), checked by differences too */
static const double Z8[8] = {0.0, 1.5, -2.0, 0.5, 0.0, 3.0, 0.0, 1.25};
static const double Z8b[8] = {1.0, 2.0, 0.0, -0.5, 1.5, 0.75, -2.0, 0.5};
static tg_tensor *f_prod(tg_tensor **x) { return wsum(tg_prod(x[0], AX1, 1, false)); }
TEST(grad_fd_prod_with_zeros) {
  fd_input in[1] = {{Z8, 2, {2, 4}}}; /* row 0: one zero, row 1: two zeros */
  fd_check(f_prod, in, 1);
  fd_input in2[1] = {{Z8b, 2, {2, 4}}}; /* row 0: one zero, row 1: none */
  fd_check(f_prod, in2, 1);
  double got[8], *out[1] = {got};
  grads_of(f_prod, in, 1, out);
  for (int i = 1; i < 8; i++) CHECK(got[i] == 0); /* nonzeros beside a zero, or two zeros: 0 */
  CHECK(got[0] != 0);                                 /* the single zero: the product of the rest */
}

/* max with ties shares the gradient equally (like torch.amax) */
TEST(grad_max_ties_share) {
  tg_scope *s = tg_scope_begin();
  static const double d[8] = {1, 3, 3, 2, 5, 5, 5, 5};
  tg_tensor *x = f64(d, (int64_t[]){2, 4}, 2), *g;
  CHECK(tg_gradient(tg_sum(tg_max(x, AX1, 1, false), NULL, 0, false), &x, 1, &g) == 0);
  double out[8];
  CHECK(tg_to_host(g, out, sizeof out) == 0);
  static const double want[8] = {0, 0.5, 0.5, 0, 0.25, 0.25, 0.25, 0.25};
  for (int i = 0; i < 8; i++) CHECK(out[i] == want[i]);
  tg_scope_end(s);
}

/* ------------------------------------------------------------------ movement */

static const int PERM[3] = {2, 0, 1}, FLIP1[1] = {1};
FD12(reshape, tg_reshape(tg_mul(x[0], x[0]), (int64_t[]){2, 6}, 2))
FD12(permute, tg_mul(tg_permute(tg_reshape(x[0], (int64_t[]){3, 2, 2}, 3), PERM, 3), tg_reshape(x[0], (int64_t[]){2, 3, 2}, 3)))
FD12(transpose, tg_mul(tg_transpose(x[0], 0, 1), tg_transpose(x[0], 0, 1)))
FD12(expand, tg_expand(tg_reshape(x[0], (int64_t[]){3, 1, 4}, 3), (int64_t[]){3, 5, 4}, 3))
FD12(pad, tg_pad(tg_mul(x[0], x[0]), (int64_t[]){1, 0}, (int64_t[]){2, 3}, 0.5))
FD12(shrink, tg_shrink(tg_exp(x[0]), (int64_t[]){1, 1}, (int64_t[]){3, 3}))
FD12(flip, tg_mul(tg_flip(x[0], FLIP1, 1), x[0]))
FD12(slice_step, tg_slice(tg_sin(x[0]), 1, TG_SLICE_END, 0, -2))
FD12(repeat, tg_repeat(tg_square(x[0]), (int64_t[]){2, 1, 3}, 3))
FD12(squeeze, tg_squeeze(tg_unsqueeze(tg_exp(x[0]), 1), 1))

static tg_tensor *f_cat(tg_tensor **x) {
  tg_tensor *parts[3] = {tg_sin(x[0]), tg_square(x[0]), x[0]};
  return tg_add(wsum(tg_cat(parts, 3, 1)), wsum(tg_stack(parts, 2, 0)));
}
TEST(grad_fd_cat_stack) {
  fd_input in[1] = {{C12, 2, {3, 4}}};
  fd_check(f_cat, in, 1);
}

static tg_tensor *f_gather(tg_tensor **x) {
  static const int32_t idx[6] = {2, 0, 2, 1, 1, 0};
  tg_tensor *i = tg_from_data(idx, TG_INT32, (int64_t[]){3, 2}, 2);
  return tg_add(wsum(tg_gather(x[0], 1, i)), wsum(tg_index_select(x[0], 0, tg_reshape(i, (int64_t[]){6}, 1))));
}
TEST(grad_fd_gather_index_select) {
  fd_input in[1] = {{C12, 2, {3, 4}}};
  fd_check(f_gather, in, 1);
}

/* ------------------------------------------------------------------ matmul and chains */

FD2(matmul_vec, tg_matmul(x[0], x[1]), A6, B3)
static tg_tensor *f_matmul(tg_tensor **x) { return wsum(tg_matmul(x[0], x[1])); }
TEST(grad_fd_matmul) {
  fd_input in[2] = {{C12, 2, {3, 4}}, {C12, 2, {4, 3}}};
  fd_check(f_matmul, in, 2);
  fd_input batched[2] = {{C12, 3, {2, 2, 3}}, {A6, 2, {3, 2}}}; /* b broadcast over the batch */
  fd_check(f_matmul, batched, 2);
}

static tg_tensor *f_mlp(tg_tensor **x) {
  tg_tensor *in = tg_reshape(tg_arange(0, 8, 1, F64), (int64_t[]){2, 4}, 2);
  tg_tensor *h = tg_tanh(tg_add(tg_matmul(tg_mul_s(in, 0.25), x[0]), x[1]));
  return tg_mean(tg_square(tg_sub(tg_log_softmax(h, 1), tg_full((int64_t[]){2, 3}, 2, -1.0, F64))), NULL, 0, false);
}
TEST(grad_fd_small_net) {
  fd_input in[2] = {{C12, 2, {4, 3}}, IN3(B3)};
  fd_check(f_mlp, in, 2);
}

/* ------------------------------------------------------------------ higher order */

/* d/dx (dy/dx) as a tensor (new graph each time) */
static tg_tensor *second(tg_tensor *y, tg_tensor *x) {
  tg_tensor *g, *gg;
  if (tg_gradient(y, &x, 1, &g) < 0) return NULL;
  if (tg_gradient(g, &x, 1, &gg) < 0) return NULL;
  return gg;
}

TEST(grad_second_order_scalar_functions) {
  tg_scope *s = tg_scope_begin();
  for (double v = -1.5; v <= 1.6; v += 0.75) {
    tg_tensor *x = tg_scalar(v, F64);
    CHECK(tg_realize(x) == 0);
    CHECK_CLOSE(tg_item(second(tg_mul(tg_mul(x, x), x), x)), 6 * v, 1e-12); /* (x^3)'' = 6x */
    CHECK_CLOSE(tg_item(second(tg_sin(x), x)), -sin(v), 1e-12);
    CHECK_CLOSE(tg_item(second(tg_exp(tg_mul_s(x, 2)), x)), 4 * exp(2 * v), 1e-12);
    CHECK_CLOSE(tg_item(second(tg_pow_s(x, 4), x)), 12 * v * v, 1e-12);
    CHECK_CLOSE(tg_item(second(tg_sigmoid(x), x)), /* s'' = s(1-s)(1-2s) */
                (1 / (1 + exp(-v))) * (1 - 1 / (1 + exp(-v))) * (1 - 2 / (1 + exp(-v))), 1e-12);
    tg_tensor *g, *gg, *ggg;
    CHECK(tg_gradient(tg_pow_s(x, 4), &x, 1, &g) == 0); /* third order: 24x */
    CHECK(tg_gradient(g, &x, 1, &gg) == 0);
    CHECK(tg_gradient(gg, &x, 1, &ggg) == 0);
    CHECK_CLOSE(tg_item(ggg), 24 * v, 1e-12);
  }
  tg_scope_end(s);
}

/* sigmoid is built from exp(-|x|): no inf in the value or the derivative at huge |x| */
TEST(grad_sigmoid_extreme_inputs_finite) {
  tg_scope *s = tg_scope_begin();
  const double xs[4] = {-800, -30, 30, 800};
  tg_tensor *x = f64(xs, (int64_t[]){4}, 1), *g;
  tg_tensor *y = tg_sigmoid(x);
  CHECK(tg_gradient(tg_sum(y, NULL, 0, false), &x, 1, &g) == 0);
  double v[4], d[4];
  CHECK(tg_to_host(y, v, sizeof v) == 0 && tg_to_host(g, d, sizeof d) == 0);
  for (int i = 0; i < 4; i++) {
    double want = 1 / (1 + exp(-xs[i]));
    CHECK_CLOSE(v[i], want, 1e-15);
    CHECK_CLOSE(d[i], want * (1 - want), 1e-15);
  }
  tg_scope_end(s);
}

/* The squared norm of a gradient, differentiated again (checked by differences). */
static tg_tensor *f_grad_norm(tg_tensor **x) {
  tg_tensor *in = tg_reshape(tg_arange(0, 8, 1, F64), (int64_t[]){2, 4}, 2);
  tg_tensor *loss = tg_sum(tg_square(tg_tanh(tg_matmul(tg_mul_s(in, 0.3), x[0]))), NULL, 0, false);
  tg_tensor *g;
  if (tg_gradient(loss, x, 1, &g) < 0) return NULL;
  return tg_sum(tg_mul(g, g), NULL, 0, false);
}
TEST(grad_fd_gradient_norm) {
  fd_input in[1] = {{C12, 2, {4, 3}}};
  fd_check(f_grad_norm, in, 1);
}

/* Convolutions carry a custom derivative (GRADFN): checked by differences with stride,
 * padding, dilation and groups, through conv_transpose2d, and to second order. */
static double CX[60], CW[24];
static void conv_inputs(void) {
  for (int i = 0; i < 60; i++) CX[i] = sin(0.7 * i + 0.2);
  for (int i = 0; i < 24; i++) CW[i] = cos(1.3 * i) * 0.5;
}
static tg_tensor *f_conv(tg_tensor **x) { /* x (1,4,3,5), w (4,2,3,1): groups 2 */
  return wsum(tg_conv2d(x[0], x[1], NULL, (int[]){2, 1}, (int[]){1, 1}, (int[]){1, 2}, 2));
}
TEST(grad_fd_conv2d_custom_rule) {
  conv_inputs();
  fd_input in[2] = {{CX, 4, {1, 4, 3, 5}}, {CW, 4, {4, 2, 3, 1}}};
  fd_check(f_conv, in, 2);
}
static tg_tensor *f_conv_transpose(tg_tensor **x) { /* x (1,4,3,5), w (4,1,3,2): groups 2 → 2 channels */
  return wsum(tg_conv_transpose2d(x[0], x[1], NULL, (int[]){2, 2}, (int[]){1, 0}, (int[]){1, 0}, NULL, 2));
}
TEST(grad_fd_conv_transpose2d_custom_rule) {
  conv_inputs();
  fd_input in[2] = {{CX, 4, {1, 4, 3, 5}}, {CW, 4, {4, 1, 3, 2}}};
  fd_check(f_conv_transpose, in, 2);
}
/* |d wsum(conv(x, w)^2) / dx|^2, differentiated again with respect to x and w */
static tg_tensor *f_conv_grad_norm(tg_tensor **x) {
  tg_tensor *y = tg_conv2d(x[0], x[1], NULL, NULL, (int[]){1, 0}, NULL, 1);
  tg_tensor *g;
  if (tg_gradient(wsum(tg_square(y)), x, 1, &g) < 0) return NULL;
  return tg_sum(tg_square(g), NULL, 0, false);
}
TEST(grad_fd_conv2d_second_order) {
  conv_inputs();
  fd_input in[2] = {{CX, 4, {1, 4, 3, 5}}, {CW, 4, {2, 4, 3, 1}}};
  fd_check_h(f_conv_grad_norm, in, 2, 1e-5, 1e-5);
}

/* ------------------------------------------------------------------ against PyTorch */

static void check_all(const char *what, tg_tensor *t, const double *want, int n, double tol) {
  double *got = calloc((size_t)n, sizeof(double));
  CHECK(t && tg_numel(t) == n);
  CHECK(tg_to_host(t, got, sizeof(double) * (size_t)n) == 0);
  int bad = 0;
  for (int i = 0; i < n; i++)
    if (!harness_close(got[i], want[i], tol, tol) && bad++ < 4) {
      harness_failed_checks++;
      printf("  %s[%d] = %.12g, torch %.12g\n", what, i, got[i], want[i]);
    }
  free(got);
}

#define FIX(name, ...) f64(gf_##name, (int64_t[]){__VA_ARGS__}, (int)(sizeof((int64_t[]){__VA_ARGS__}) / 8))

TEST(grad_torch_chain) {
  tg_scope *s = tg_scope_begin();
  tg_tensor *x = FIX(chain_x, 3, 4), *g;
  tg_tensor *y = tg_sum(tg_add(tg_mul(tg_tanh(x), tg_sigmoid(x)), tg_mul(tg_exp(tg_neg(tg_mul(x, x))), tg_cos(x))), NULL, 0, false);
  CHECK(tg_gradient(y, &x, 1, &g) == 0);
  CHECK_CLOSE(tg_item(y), gf_chain_y[0], 1e-12);
  check_all("dx", g, gf_chain_dx, 12, 1e-12);
  tg_scope_end(s);
}

TEST(grad_torch_cross_entropy) {
  tg_scope *s = tg_scope_begin();
  tg_tensor *z = FIX(xent_z, 4, 5), *t = FIX(xent_t, 4, 5), *g;
  int ax = 1;
  tg_tensor *y = tg_neg(tg_mean(tg_sum(tg_mul(t, tg_log_softmax(z, 1)), &ax, 1, false), NULL, 0, false));
  CHECK(tg_gradient(y, &z, 1, &g) == 0);
  CHECK_CLOSE(tg_item(y), gf_xent_y[0], 1e-12);
  check_all("dz", g, gf_xent_dz, 20, 1e-12);
  tg_scope_end(s);
}

TEST(grad_torch_layernorm) {
  tg_scope *s = tg_scope_begin();
  tg_tensor *x = FIX(layernorm_x, 3, 6), *w = FIX(layernorm_w, 3, 6), *g;
  int ax = 1;
  tg_tensor *xc = tg_sub(x, tg_mean(x, &ax, 1, true));
  tg_tensor *n = tg_div(xc, tg_sqrt(tg_add_s(tg_var(x, &ax, 1, true, 0), 1e-5)));
  tg_tensor *y = tg_sum(tg_mul(n, w), NULL, 0, false);
  CHECK(tg_gradient(y, &x, 1, &g) == 0);
  CHECK_CLOSE(tg_item(y), gf_layernorm_y[0], 1e-12);
  check_all("dx", g, gf_layernorm_dx, 18, 1e-10);
  tg_scope_end(s);
}

static tg_tensor *mlp_loss(tg_tensor *w1, tg_tensor *b1, tg_tensor *w2, tg_tensor *x, tg_tensor *t, bool use_tanh) {
  tg_tensor *pre = tg_add(tg_matmul(x, w1), b1);
  tg_tensor *h = use_tanh ? tg_tanh(pre) : tg_relu(pre);
  return tg_mean(tg_square(tg_sub(tg_matmul(h, w2), t)), NULL, 0, false);
}

TEST(grad_torch_mlp) {
  tg_scope *s = tg_scope_begin();
  tg_tensor *p[3] = {FIX(mlp_w1, 3, 5), FIX(mlp_b1, 5), FIX(mlp_w2, 5, 2)}, *g[3];
  tg_tensor *y = mlp_loss(p[0], p[1], p[2], FIX(mlp_x, 4, 3), FIX(mlp_t, 4, 2), false);
  CHECK(tg_gradient(y, p, 3, g) == 0);
  CHECK_CLOSE(tg_item(y), gf_mlp_y[0], 1e-12);
  check_all("dw1", g[0], gf_mlp_dw1, 15, 1e-12);
  check_all("db1", g[1], gf_mlp_db1, 5, 1e-12);
  check_all("dw2", g[2], gf_mlp_dw2, 10, 1e-12);
  tg_scope_end(s);
}

TEST(grad_torch_gradient_norm_second_order) {
  tg_scope *s = tg_scope_begin();
  tg_tensor *w1 = FIX(gradnorm_w1, 3, 5), *g, *gg;
  tg_tensor *loss = mlp_loss(w1, FIX(gradnorm_b1, 5), FIX(gradnorm_w2, 5, 2), FIX(gradnorm_x, 4, 3), FIX(gradnorm_t, 4, 2), true);
  CHECK(tg_gradient(loss, &w1, 1, &g) == 0);
  tg_tensor *y = tg_sum(tg_mul(g, g), NULL, 0, false);
  CHECK(tg_gradient(y, &w1, 1, &gg) == 0);
  CHECK_CLOSE(tg_item(y), gf_gradnorm_y[0], 1e-12);
  check_all("dw1", gg, gf_gradnorm_dw1, 15, 1e-10);
  tg_scope_end(s);
}

TEST(grad_torch_amax_ties) {
  tg_scope *s = tg_scope_begin();
  tg_tensor *x = FIX(amax_ties_x, 4, 5), *g;
  int ax = 1;
  tg_tensor *y = tg_sum(tg_mul(tg_max(x, &ax, 1, false), FIX(amax_ties_w, 4)), NULL, 0, false);
  CHECK(tg_gradient(y, &x, 1, &g) == 0);
  CHECK_CLOSE(tg_item(y), gf_amax_ties_y[0], 1e-12);
  check_all("dx", g, gf_amax_ties_dx, 20, 1e-12);
  tg_scope_end(s);
}

TEST(grad_torch_views) {
  tg_scope *s = tg_scope_begin();
  tg_tensor *x = FIX(views_x, 3, 4), *g;
  int ax0 = 0;
  tg_tensor *parts[2] = {tg_slice(x, 1, 0, TG_SLICE_END, 2), tg_flip(x, &ax0, 1)};
  tg_tensor *c = tg_cat(parts, 2, 1);
  tg_tensor *y = tg_add(tg_sum(tg_mul(tg_square(c), FIX(views_w, 3, 6)), NULL, 0, false),
                        tg_sum(tg_mul(tg_cumsum(x, 1), FIX(views_v, 3, 4)), NULL, 0, false));
  CHECK(tg_gradient(y, &x, 1, &g) == 0);
  CHECK_CLOSE(tg_item(y), gf_views_y[0], 1e-12);
  check_all("dx", g, gf_views_dx, 12, 1e-12);
  tg_scope_end(s);
}

TEST(grad_torch_pow_std_prod) {
  tg_scope *s = tg_scope_begin();
  tg_tensor *x[2] = {FIX(powstd_a, 2, 3), FIX(powstd_b, 2, 3)}, *g[2];
  int ax0 = 0, ax1 = 1;
  tg_tensor *y = tg_add(tg_add(tg_sum(tg_pow(x[0], x[1]), NULL, 0, false),
                               tg_sum(tg_std(tg_mul(x[0], x[1]), &ax1, 1, false, 1), NULL, 0, false)),
                        tg_sum(tg_prod(tg_add(x[0], x[1]), &ax0, 1, false), NULL, 0, false));
  CHECK(tg_gradient(y, x, 2, g) == 0);
  CHECK_CLOSE(tg_item(y), gf_powstd_y[0], 1e-12);
  check_all("da", g[0], gf_powstd_da, 6, 1e-11);
  check_all("db", g[1], gf_powstd_db, 6, 1e-11);
  tg_scope_end(s);
}

/* ------------------------------------------------------------------ tg_gradient API */

TEST(grad_independent_input_gives_zeros) {
  tg_scope *s = tg_scope_begin();
  tg_tensor *x = f64(A6, (int64_t[]){2, 3}, 2), *z = tg_ones((int64_t[]){4}, 1, TG_FLOAT32), *g[2];
  tg_tensor *xs[2] = {x, z};
  CHECK(tg_gradient(tg_sum(x, NULL, 0, false), xs, 2, g) == 0);
  CHECK(tg_ndim(g[1]) == 1 && tg_dim(g[1], 0) == 4 && tg_get_dtype(g[1]) == TG_FLOAT32);
  float out[4] = {1, 1, 1, 1};
  CHECK(tg_to_host(g[1], out, sizeof out) == 0);
  for (int i = 0; i < 4; i++) CHECK(out[i] == 0);
  tg_scope_end(s);
}

TEST(grad_with_respect_to_intermediate) {
  tg_scope *s = tg_scope_begin();
  tg_tensor *x = f64(A6, (int64_t[]){2, 3}, 2);
  tg_tensor *h = tg_mul_s(x, 3), *g[2];
  tg_tensor *xs[2] = {h, x};
  CHECK(tg_gradient(tg_sum(tg_square(h), NULL, 0, false), xs, 2, g) == 0);
  double gh[6], gx[6];
  CHECK(tg_to_host(g[0], gh, sizeof gh) == 0 && tg_to_host(g[1], gx, sizeof gx) == 0);
  for (int i = 0; i < 6; i++) {
    CHECK_CLOSE(gh[i], 6 * A6[i], 1e-12);
    CHECK_CLOSE(gx[i], 18 * A6[i], 1e-12);
  }
  tg_scope_end(s);
}

TEST(grad_float32_input) {
  tg_scope *s = tg_scope_begin();
  float d[3] = {0.5f, -1.0f, 2.0f}, out[3];
  tg_tensor *x = tg_from_data(d, TG_FLOAT32, (int64_t[]){3}, 1), *g;
  CHECK(tg_gradient(tg_sum(tg_mul(x, tg_exp(x)), NULL, 0, false), &x, 1, &g) == 0);
  CHECK(tg_get_dtype(g) == TG_FLOAT32);
  CHECK(tg_to_host(g, out, sizeof out) == 0);
  for (int i = 0; i < 3; i++) CHECK_CLOSE(out[i], (1 + d[i]) * exp(d[i]), 1e-6);
  tg_scope_end(s);
}

TEST(grad_error_non_scalar_y) {
  tg_scope *s = tg_scope_begin();
  tg_tensor *x = f64(A6, (int64_t[]){2, 3}, 2), *g = (tg_tensor *)1;
  tg_clear_error();
  CHECK(tg_gradient(tg_mul(x, x), &x, 1, &g) == TG_ERR_ARG);
  CHECK(g == NULL);
  CHECK(strstr(tg_last_error(), "gradient") && strstr(tg_last_error(), "(2, 3)"));
  tg_clear_error();
  CHECK(tg_backward(tg_mul(x, x)) == TG_ERR_ARG);
  CHECK(strstr(tg_last_error(), "backward") != NULL);
  tg_scope_end(s);
}

TEST(grad_error_null_arguments) {
  tg_scope *s = tg_scope_begin();
  tg_tensor *x = f64(A6, (int64_t[]){2, 3}, 2), *y = tg_sum(x, NULL, 0, false), *g;
  tg_clear_error();
  CHECK(tg_gradient(NULL, &x, 1, &g) == TG_ERR_ARG && g == NULL);
  CHECK(strstr(tg_last_error(), "gradient") != NULL);
  tg_tensor *xs[2] = {x, NULL}, *gs[2];
  tg_clear_error();
  CHECK(tg_gradient(y, xs, 2, gs) == TG_ERR_ARG && gs[0] == NULL && gs[1] == NULL);
  tg_clear_error();
  CHECK(tg_gradient(y, NULL, 1, &g) == TG_ERR_ARG);
  CHECK(tg_gradient(y, &x, 1, NULL) == TG_ERR_ARG);
  CHECK(tg_gradient(y, &x, -1, &g) == TG_ERR_ARG);
  CHECK(tg_gradient(y, NULL, 0, NULL) == 0); /* nothing asked, nothing done */
  tg_clear_error();
  CHECK(tg_backward(NULL) == TG_ERR_ARG && strstr(tg_last_error(), "backward"));
  tg_clear_error();
  CHECK(tg_requires_grad(NULL, true) == NULL && strstr(tg_last_error(), "requires_grad"));
  CHECK(!tg_get_requires_grad(NULL));
  CHECK(tg_grad(NULL) == NULL);
  tg_zero_grad(NULL);
  tg_clear_error();
  CHECK(tg_detach(NULL) == NULL && strstr(tg_last_error(), "detach"));
  tg_scope_end(s);
}

/* BITCAST between float types has no derivative: an error naming the op, not a crash */
TEST(grad_error_op_without_rule) {
  tg_scope *s = tg_scope_begin();
  tg_tensor *x = tg_ones((int64_t[]){3}, 1, TG_FLOAT16), *g = (tg_tensor *)1;
  tg_tensor *y = tg_sum(tg_cast(tg_bitcast(x, TG_BFLOAT16), TG_FLOAT32), NULL, 0, false);
  tg_clear_error();
  CHECK(tg_gradient(y, &x, 1, &g) == TG_ERR_ARG && g == NULL);
  CHECK(strstr(tg_last_error(), "BITCAST") != NULL);
  /* a bitcast to an int on the way is fine: ints carry no gradient */
  tg_tensor *f = tg_ones((int64_t[]){3}, 1, TG_FLOAT32);
  tg_tensor *y2 = tg_sum(tg_add(tg_cast(tg_bitcast(f, TG_INT32), TG_FLOAT32), f), NULL, 0, false);
  CHECK(tg_gradient(y2, &f, 1, &g) == 0);
  CHECK(tg_item(tg_sum(g, NULL, 0, false)) == 3);
  tg_scope_end(s);
}

/* ------------------------------------------------------------------ parameters */

static tg_tensor *param(const double *d, const int64_t *shape, int nd) {
  tg_tensor *p = f64(d, shape, nd);
  CHECK(tg_realize(p) == 0);
  CHECK(tg_requires_grad(p, true) == p && tg_get_requires_grad(p));
  return p;
}

TEST(grad_backward_accumulates) {
  tg_scope *s = tg_scope_begin();
  tg_tensor *w = param(A6, (int64_t[]){2, 3}, 2);
  tg_tensor *x = f64(B3, (int64_t[]){3}, 1); /* not marked: gets no gradient */
  CHECK(tg_grad(w) == NULL);
  tg_tensor *loss = tg_sum(tg_mul(tg_square(w), x), NULL, 0, false); /* d/dw = 2 w x */
  CHECK(tg_backward(loss) == 0);
  tg_tensor *g = tg_grad(w);
  CHECK(g != NULL && tg_grad(x) == NULL);
  double out[6];
  CHECK(tg_to_host(g, out, sizeof out) == 0);
  for (int i = 0; i < 6; i++) CHECK_CLOSE(out[i], 2 * A6[i] * B3[i % 3], 1e-12);
  CHECK(tg_backward(loss) == 0); /* accumulates into the same handle */
  CHECK(tg_grad(w) == g);
  CHECK(tg_to_host(g, out, sizeof out) == 0);
  for (int i = 0; i < 6; i++) CHECK_CLOSE(out[i], 4 * A6[i] * B3[i % 3], 1e-12);
  tg_zero_grad(w);
  CHECK(tg_grad(w) == NULL);
  CHECK(tg_backward(tg_sum(w, NULL, 0, false)) == 0);
  CHECK(tg_to_host(tg_grad(w), out, sizeof out) == 0);
  for (int i = 0; i < 6; i++) CHECK(out[i] == 1);
  tg_scope_end(s); /* the gradient is freed with w (LSan checks) */
}

TEST(grad_backward_two_params_shared_use) {
  tg_scope *s = tg_scope_begin();
  tg_tensor *a = param(A6, (int64_t[]){2, 3}, 2), *b = param(B3, (int64_t[]){3}, 1);
  /* a is used twice, b is broadcast: gradients sum over uses and over the broadcast */
  tg_tensor *loss = tg_sum(tg_add(tg_mul(a, b), tg_square(a)), NULL, 0, false);
  CHECK(tg_backward(loss) == 0);
  double ga[6], gb[3];
  CHECK(tg_to_host(tg_grad(a), ga, sizeof ga) == 0 && tg_to_host(tg_grad(b), gb, sizeof gb) == 0);
  for (int i = 0; i < 6; i++) CHECK_CLOSE(ga[i], B3[i % 3] + 2 * A6[i], 1e-12);
  for (int j = 0; j < 3; j++) CHECK_CLOSE(gb[j], A6[j] + A6[j + 3], 1e-12);
  tg_requires_grad(b, false);
  CHECK(!tg_get_requires_grad(b));
  tg_zero_grad(a), tg_zero_grad(b);
  CHECK(tg_backward(loss) == 0);
  CHECK(tg_grad(a) != NULL && tg_grad(b) == NULL); /* unmarked b is skipped */
  tg_scope_end(s);
}

/* A parameter realized after the loss was built: the loss graph holds the old expression,
 * which now points at the parameter's buffer (uop->realized), and is still matched. */
TEST(grad_backward_param_realized_after_loss) {
  tg_scope *s = tg_scope_begin();
  tg_tensor *w = tg_mul_s(f64(A6, (int64_t[]){2, 3}, 2), 2.0); /* lazy */
  CHECK(tg_requires_grad(w, true) == w);
  tg_tensor *loss = tg_sum(tg_square(w), NULL, 0, false);
  CHECK(tg_realize(w) == 0 && tg_is_realized(w));
  CHECK(tg_backward(loss) == 0);
  double out[6];
  CHECK(tg_to_host(tg_grad(w), out, sizeof out) == 0);
  for (int i = 0; i < 6; i++) CHECK_CLOSE(out[i], 4 * A6[i], 1e-12);
  tg_scope_end(s);
}

/* An optimizer-style step: w <- w - lr * grad with tg_assign, realize, new forward. */
TEST(grad_backward_after_assign_step) {
  tg_scope *s = tg_scope_begin();
  tg_tensor *w = param(A6, (int64_t[]){2, 3}, 2);
  double cur[6];
  memcpy(cur, A6, sizeof cur);
  for (int step = 0; step < 3; step++) {
    tg_scope *inner = tg_scope_begin();
    tg_tensor *loss = tg_sum(tg_square(tg_sub_s(w, 1.0)), NULL, 0, false); /* grad 2(w - 1) */
    CHECK(tg_backward(loss) == 0);
    CHECK(tg_assign(w, tg_sub(w, tg_mul_s(tg_grad(w), 0.25))) == 0);
    CHECK(tg_realize(w) == 0);
    tg_zero_grad(w);
    tg_scope_end(inner);
    for (int i = 0; i < 6; i++) cur[i] -= 0.25 * 2 * (cur[i] - 1);
  }
  double out[6];
  CHECK(tg_to_host(w, out, sizeof out) == 0);
  for (int i = 0; i < 6; i++) CHECK_CLOSE(out[i], cur[i], 1e-12);
  tg_scope_end(s);
}

TEST(grad_backward_skips_freed_params) {
  tg_scope *s = tg_scope_begin();
  tg_tensor *w = param(A6, (int64_t[]){2, 3}, 2);
  tg_scope *inner = tg_scope_begin();
  tg_tensor *dead = param(B3, (int64_t[]){3}, 1);
  (void)dead;
  tg_scope_end(inner); /* dead is freed and leaves the registry (ASan would catch a use) */
  CHECK(tg_backward(tg_sum(w, NULL, 0, false)) == 0);
  CHECK(tg_grad(w) != NULL);
  tg_scope_end(s);
}

/* A loss that no marked tensor reaches backpropagates nothing and succeeds (issue 12: PyTorch
 * accepts it); the parameter's gradient is left alone. */
TEST(grad_backward_without_reached_params) {
  tg_scope *s = tg_scope_begin();
  tg_tensor *x = f64(A6, (int64_t[]){2, 3}, 2);
  tg_tensor *w = param(B3, (int64_t[]){3}, 1); /* marked but unused by the loss */
  tg_clear_error();
  CHECK(tg_backward(tg_sum(x, NULL, 0, false)) == 0);
  CHECK(tg_grad(w) == NULL);
  tg_scope_end(s);
}

TEST(grad_error_requires_grad_on_int) {
  tg_scope *s = tg_scope_begin();
  tg_tensor *i = tg_zeros((int64_t[]){3}, 1, TG_INT32);
  tg_clear_error();
  CHECK(tg_requires_grad(i, true) == NULL);
  CHECK(strstr(tg_last_error(), "requires_grad") && strstr(tg_last_error(), "int32"));
  CHECK(!tg_get_requires_grad(i));
  CHECK(tg_requires_grad(i, false) == i); /* unmarking is always fine */
  tg_scope_end(s);
}

TEST(grad_detach) {
  tg_scope *s = tg_scope_begin();
  tg_tensor *x = f64(A6, (int64_t[]){2, 3}, 2), *g;
  tg_tensor *d = tg_detach(x);
  CHECK(d != NULL && tg_ndim(d) == 2 && tg_get_dtype(d) == F64);
  /* y = x * detach(x): dy/dx = detach(x) = x, not 2x */
  CHECK(tg_gradient(tg_sum(tg_mul(x, d), NULL, 0, false), &x, 1, &g) == 0);
  double out[6];
  CHECK(tg_to_host(g, out, sizeof out) == 0);
  for (int i = 0; i < 6; i++) CHECK(out[i] == A6[i]);
  /* the value is unchanged; realizing a detached buffer runs no kernel */
  tg_reset_stats();
  CHECK(tg_to_host(d, out, sizeof out) == 0);
  CHECK(tg_get_stats().kernels_run == 0);
  for (int i = 0; i < 6; i++) CHECK(out[i] == A6[i]);
  tg_tensor *e = tg_detach(tg_exp(x));
  CHECK(tg_to_host(e, out, sizeof out) == 0);
  for (int i = 0; i < 6; i++) CHECK_CLOSE(out[i], exp(A6[i]), 1e-12);
  /* everything through the detach gets zeros */
  CHECK(tg_gradient(tg_sum(tg_exp(tg_detach(tg_square(x))), NULL, 0, false), &x, 1, &g) == 0);
  CHECK(tg_item(tg_sum(tg_abs(g), NULL, 0, false)) == 0);
  tg_scope_end(s);
}

/* forward + backward of a small MLP realize together in a handful of kernels */
TEST(grad_mlp_forward_backward_kernels) {
  tg_scope *s = tg_scope_begin();
  tg_tensor *p[3] = {FIX(mlp_w1, 3, 5), FIX(mlp_b1, 5), FIX(mlp_w2, 5, 2)};
  tg_tensor *x = FIX(mlp_x, 4, 3), *t = FIX(mlp_t, 4, 2);
  for (int i = 0; i < 3; i++) CHECK(tg_realize(p[i]) == 0 && tg_requires_grad(p[i], true));
  CHECK(tg_realize(x) == 0 && tg_realize(t) == 0);
  tg_tensor *loss = mlp_loss(p[0], p[1], p[2], x, t, false);
  CHECK(tg_backward(loss) == 0);
  tg_tensor *all[4] = {loss, tg_grad(p[0]), tg_grad(p[1]), tg_grad(p[2])};
  tg_reset_stats();
  CHECK(tg_realize_many(all, 4) == 0);
  uint64_t k = tg_get_stats().kernels_run;
  if (k > 7) printf("  forward+backward ran %llu kernels\n", (unsigned long long)k);
  CHECK(k <= 7); /* measured: 7 (3 forward, 4 backward) */
  CHECK_CLOSE(tg_item(loss), gf_mlp_y[0], 1e-12);
  check_all("dw1", all[1], gf_mlp_dw1, 15, 1e-12);
  check_all("db1", all[2], gf_mlp_db1, 5, 1e-12);
  check_all("dw2", all[3], gf_mlp_dw2, 10, 1e-12);
  tg_scope_end(s);
}

/* A training loop (random batch, backward, an SGD step with tg_assign, zero_grad) keeps the
 * number of live uops and buffers flat: gradients and random state do not pile up. */
TEST(grad_training_loop_memory_flat) {
  tg_manual_seed(3);
  tg_tensor *w = tg_kaiming_uniform((int64_t[]){4, 3}, 2, 0, TG_FLOAT32);
  tg_tensor *b = tg_zeros((int64_t[]){3}, 1, TG_FLOAT32);
  CHECK(tg_realize(w) == 0 && tg_realize(b) == 0);
  tg_requires_grad(w, true), tg_requires_grad(b, true);
  tg_stats base = {0};
  for (int step = 0; step < 60; step++) {
    tg_scope *s = tg_scope_begin();
    tg_tensor *x = tg_randn((int64_t[]){8, 4}, 2, TG_FLOAT32);
    tg_tensor *y = tg_dropout(tg_tanh(tg_add(tg_matmul(x, w), b)), 0.25, true);
    tg_tensor *loss = tg_mean(tg_square(tg_sub_s(y, 0.5)), NULL, 0, false);
    CHECK(tg_backward(loss) == 0);
    CHECK(tg_assign(w, tg_sub(w, tg_mul_s(tg_grad(w), 0.1))) == 0);
    CHECK(tg_assign(b, tg_sub(b, tg_mul_s(tg_grad(b), 0.1))) == 0);
    tg_tensor *all[3] = {w, b, loss};
    CHECK(tg_realize_many(all, 3) == 0);
    tg_zero_grad(w), tg_zero_grad(b);
    tg_scope_end(s);
    if (step == 9) base = tg_get_stats();
  }
  tg_stats end = tg_get_stats();
  CHECK(end.uops_alive == base.uops_alive);
  CHECK(end.buffers_alive == base.buffers_alive);
  if (end.uops_alive != base.uops_alive)
    printf("  uops alive: %llu after 10 steps, %llu after 60\n", (unsigned long long)base.uops_alive,
           (unsigned long long)end.uops_alive);
  tg_free(w), tg_free(b);
}
