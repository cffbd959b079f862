/* test_layers.c — layers and the state dict: PyTorch's default initialization (bounds and
 * statistics), shapes, state-dict names and order, forwards with given weights against
 * PyTorch (tests/gen_fixtures_optim.py → fixtures/optim.h), BatchNorm running statistics,
 * ownership, and error cases. */
#include <stdint.h>
#include <stdlib.h>

#include "fixtures/optim.h"
#include "harness.h"

/* ------------------------------------------------------------ helpers */

static int values_close(tg_tensor *t, const float *want, int64_t n, double tol, const char *what) {
  if (!t || tg_numel(t) != n || tg_get_dtype(t) != TG_FLOAT32) {
    printf("  %s: wrong tensor (numel %lld, expected %lld float32)\n", what, (long long)tg_numel(t), (long long)n);
    return 0;
  }
  float *got = malloc(sizeof(float) * (size_t)n);
  int ok = got && tg_to_host(t, got, sizeof(float) * (size_t)n) == 0;
  for (int64_t i = 0; ok && i < n; i++)
    if (!harness_close(got[i], want[i], tol, tol)) {
      printf("  %s[%lld] = %.9g, expected %.9g\n", what, (long long)i, got[i], want[i]);
      ok = 0;
    }
  free(got);
  return ok;
}

#define CHECK_VALUES(t, want, tol) CHECK(values_close((t), (want), (int64_t)(sizeof(want) / sizeof((want)[0])), (tol), #t))

static int shape_is(tg_tensor *t, const int64_t *shape, int nd) {
  int64_t got[8];
  if (tg_shape(t, got, 8) != nd) return 0;
  for (int i = 0; i < nd; i++)
    if (got[i] != shape[i]) return 0;
  return 1;
}

/* min, max, mean and standard deviation of a float32 tensor. */
typedef struct stats { double min, max, mean, std; } stats;

static stats stats_of(tg_tensor *t) {
  stats s = {INFINITY, -INFINITY, 0, 0};
  int64_t n = tg_numel(t);
  float *d = n > 0 ? malloc(sizeof(float) * (size_t)n) : NULL;
  if (!d || tg_to_host(t, d, sizeof(float) * (size_t)n) < 0) return free(d), (stats){NAN, NAN, NAN, NAN};
  for (int64_t i = 0; i < n; i++) {
    s.min = fmin(s.min, d[i]), s.max = fmax(s.max, d[i]);
    s.mean += d[i] / (double)n;
  }
  for (int64_t i = 0; i < n; i++) s.std += (d[i] - s.mean) * (d[i] - s.mean) / (double)n;
  s.std = sqrt(s.std);
  free(d);
  return s;
}

/* Uniform(-bound, bound): inside the bounds, reaching close to both ends, mean ~ 0 and
 * std ~ bound / sqrt(3) (n >= 4000 values, so 5% slack is > 4 sigma). */
static void check_uniform(tg_tensor *t, double bound, const char *what) {
  stats s = stats_of(t);
  int ok = s.min >= -bound && s.max <= bound && s.min < -0.95 * bound && s.max > 0.95 * bound &&
           fabs(s.mean) < 0.05 * bound && fabs(s.std / (bound / sqrt(3.0)) - 1) < 0.05;
  if (!ok) printf("  %s: min %g max %g mean %g std %g, bound %g\n", what, s.min, s.max, s.mean, s.std, bound);
  CHECK(ok);
}

static int is_param(tg_tensor *t) { return t && tg_get_requires_grad(t) && tg_is_realized(t); }

/* ------------------------------------------------------------ init */

TEST(layers_linear_init) {
  tg_manual_seed(1);
  tg_linear l;
  CHECK(tg_linear_init(&l, 64, 96, true) == 0);
  static const int64_t ws[2] = {96, 64}, bs[1] = {96};
  CHECK(shape_is(l.weight, ws, 2) && shape_is(l.bias, bs, 1));
  CHECK(is_param(l.weight) && is_param(l.bias));
  check_uniform(l.weight, 1.0 / 8, "linear weight"); /* kaiming_uniform(a=sqrt(5)): 1/sqrt(fan_in) */
  stats b = stats_of(l.bias);
  CHECK(b.min >= -1.0 / 8 && b.max <= 1.0 / 8 && b.max > b.min);
  tg_linear_free(&l);
  CHECK(l.weight == NULL && l.bias == NULL);
  tg_linear_free(&l); /* twice is fine */
  CHECK(tg_linear_init(&l, 3, 2, false) == 0);
  CHECK(l.bias == NULL && is_param(l.weight));
  tg_linear_free(&l);
}

TEST(layers_conv2d_init) {
  tg_manual_seed(2);
  tg_conv2d_layer c;
  CHECK(tg_conv2d_init(&c, 8, 64, 3, 5, 2, 1, 1, 2, true) == 0);
  static const int64_t ws[4] = {64, 4, 3, 5}, bs[1] = {64};
  CHECK(shape_is(c.weight, ws, 4) && shape_is(c.bias, bs, 1));
  CHECK(c.stride[0] == 2 && c.stride[1] == 2 && c.padding[1] == 1 && c.dilation[0] == 1 && c.groups == 2);
  CHECK(is_param(c.weight) && is_param(c.bias));
  double bound = 1.0 / sqrt(4 * 3 * 5); /* fan_in = cin/groups * kh * kw */
  check_uniform(c.weight, bound, "conv weight");
  stats b = stats_of(c.bias);
  CHECK(b.min >= -bound && b.max <= bound && b.max > b.min);
  tg_conv2d_free(&c);
}

TEST(layers_embedding_init) {
  tg_manual_seed(3);
  tg_embedding e;
  CHECK(tg_embedding_init(&e, 100, 60) == 0);
  static const int64_t ws[2] = {100, 60};
  CHECK(shape_is(e.weight, ws, 2) && e.num == 100 && e.dim == 60 && is_param(e.weight));
  stats s = stats_of(e.weight); /* normal(0, 1), 6000 draws */
  CHECK(fabs(s.mean) < 0.06 && fabs(s.std - 1) < 0.05 && s.min < -2.5 && s.max > 2.5);
  tg_embedding_free(&e);
}

TEST(layers_batchnorm_init) {
  tg_batchnorm2d b;
  CHECK(tg_batchnorm2d_init(&b, 3) == 0);
  static const float ones[3] = {1, 1, 1}, zeros[3] = {0, 0, 0};
  CHECK_VALUES(b.weight, ones, 0);
  CHECK_VALUES(b.bias, zeros, 0);
  CHECK_VALUES(b.running_mean, zeros, 0);
  CHECK_VALUES(b.running_var, ones, 0);
  CHECK(is_param(b.weight) && is_param(b.bias));
  CHECK(!tg_get_requires_grad(b.running_mean) && !tg_get_requires_grad(b.running_var));
  CHECK(tg_is_realized(b.running_mean) && tg_is_realized(b.running_var) && tg_is_realized(b.num_batches_tracked));
  CHECK(tg_get_dtype(b.num_batches_tracked) == TG_INT64 && tg_ndim(b.num_batches_tracked) == 0);
  CHECK(tg_item(b.num_batches_tracked) == 0);
  CHECK(b.momentum == 0.1 && b.eps == 1e-5 && b.training);
  tg_batchnorm2d_free(&b);
  CHECK(b.weight == NULL && b.num_batches_tracked == NULL);
}

TEST(layers_norm_init) {
  static const int64_t shape[2] = {3, 4};
  tg_layernorm_layer ln;
  CHECK(tg_layernorm_init(&ln, shape, 2, 1e-5, true) == 0);
  CHECK(shape_is(ln.weight, shape, 2) && shape_is(ln.bias, shape, 2) && is_param(ln.weight) && is_param(ln.bias));
  tg_scope *s = tg_scope_begin();
  CHECK(tg_item(tg_sum(ln.weight, NULL, 0, false)) == 12 && tg_item(tg_sum(tg_abs(ln.bias), NULL, 0, false)) == 0);
  tg_scope_end(s);
  CHECK(ln.naxes == 2 && ln.eps == 1e-5);
  tg_layernorm_free(&ln);
  CHECK(tg_layernorm_init(&ln, shape + 1, 1, 1e-6, false) == 0);
  CHECK(ln.weight == NULL && ln.bias == NULL && ln.naxes == 1);
  tg_layernorm_free(&ln);

  tg_rmsnorm_layer rms;
  CHECK(tg_rmsnorm_init(&rms, shape + 1, 1, 1e-6) == 0);
  static const float ones4[4] = {1, 1, 1, 1};
  CHECK_VALUES(rms.weight, ones4, 0);
  CHECK(is_param(rms.weight));
  tg_rmsnorm_free(&rms);

  tg_groupnorm_layer gn;
  CHECK(tg_groupnorm_init(&gn, 2, 4, 1e-5, true) == 0);
  static const float zeros4[4] = {0};
  CHECK_VALUES(gn.weight, ones4, 0);
  CHECK_VALUES(gn.bias, zeros4, 0);
  CHECK(gn.groups == 2);
  tg_groupnorm_free(&gn);
}

/* The same seed gives the same initial weights. */
TEST(layers_init_reproducible) {
  tg_linear a, b;
  tg_manual_seed(42);
  CHECK(tg_linear_init(&a, 5, 4, true) == 0);
  tg_manual_seed(42);
  CHECK(tg_linear_init(&b, 5, 4, true) == 0);
  float wa[20], wb[20];
  CHECK(tg_to_host(a.weight, wa, sizeof wa) == 0 && tg_to_host(b.weight, wb, sizeof wb) == 0);
  CHECK(memcmp(wa, wb, sizeof wa) == 0);
  tg_linear_free(&a), tg_linear_free(&b);
}

/* A layer built inside a scope outlives it (it owns its tensors). */
TEST(layers_outlive_scope) {
  tg_linear l;
  tg_scope *s = tg_scope_begin();
  CHECK(tg_linear_init(&l, 2, 2, true) == 0);
  tg_scope_end(s);
  s = tg_scope_begin();
  static const float x[2] = {1, 2};
  static const int64_t xs[1] = {2};
  CHECK(tg_linear_forward(&l, tg_from_data(x, TG_FLOAT32, xs, 1)) != NULL);
  CHECK(isfinite(tg_item(tg_sum(tg_linear_forward(&l, tg_from_data(x, TG_FLOAT32, xs, 1)), NULL, 0, false))));
  tg_scope_end(s);
  tg_linear_free(&l);
}

/* ------------------------------------------------------------ forwards vs PyTorch */

TEST(layers_linear_forward) {
  tg_linear l;
  CHECK(tg_linear_init(&l, 4, 3, true) == 0);
  CHECK(tg_assign_data(l.weight, lin_w, sizeof lin_w) == 0 && tg_assign_data(l.bias, lin_b, sizeof lin_b) == 0);
  tg_scope *s = tg_scope_begin();
  static const int64_t xs[3] = {2, 2, 4}, ys[3] = {2, 2, 3};
  tg_tensor *y = tg_linear_forward(&l, tg_from_data(lin_x, TG_FLOAT32, xs, 3));
  CHECK(shape_is(y, ys, 3));
  CHECK_VALUES(y, lin_y, 1e-5);
  tg_scope_end(s);
  tg_linear_free(&l);
}

TEST(layers_conv2d_forward) {
  tg_conv2d_layer c;
  CHECK(tg_conv2d_init(&c, 4, 6, 3, 3, 2, 1, 1, 2, true) == 0);
  CHECK(tg_assign_data(c.weight, conv_w, sizeof conv_w) == 0 && tg_assign_data(c.bias, conv_b, sizeof conv_b) == 0);
  tg_scope *s = tg_scope_begin();
  static const int64_t xs[4] = {2, 4, 5, 5}, ys[4] = {2, 6, 3, 3};
  tg_tensor *y = tg_conv2d_forward(&c, tg_from_data(conv_x, TG_FLOAT32, xs, 4));
  CHECK(shape_is(y, ys, 4));
  CHECK_VALUES(y, conv_y, 1e-5);
  tg_scope_end(s);
  tg_conv2d_free(&c);
}

TEST(layers_embedding_forward_and_grad) {
  tg_embedding e;
  CHECK(tg_embedding_init(&e, 5, 3) == 0);
  CHECK(tg_assign_data(e.weight, emb_w, sizeof emb_w) == 0);
  tg_scope *s = tg_scope_begin();
  static const int64_t is[2] = {3, 2}, ys[3] = {3, 2, 3};
  tg_tensor *idx = tg_from_data(emb_idx, TG_INT32, is, 2);
  tg_tensor *y = tg_embedding_forward(&e, idx);
  CHECK(shape_is(y, ys, 3));
  /* backward before y is realized: realizing y would cut it from the graph of the weight */
  CHECK(tg_backward(tg_sum(tg_mul(y, tg_from_data(emb_gw, TG_FLOAT32, ys, 3)), NULL, 0, false)) == 0);
  CHECK_VALUES(y, emb_y, 0);
  CHECK_VALUES(tg_grad(e.weight), emb_grad, 1e-6);
  tg_zero_grad(e.weight);
  /* int64 indices work too */
  int64_t idx64[6];
  for (int i = 0; i < 6; i++) idx64[i] = emb_idx[i];
  CHECK_VALUES(tg_embedding_forward(&e, tg_from_data(idx64, TG_INT64, is, 2)), emb_y, 0);
  tg_scope_end(s);
  tg_embedding_free(&e);
}

TEST(layers_layernorm_forward) {
  static const int64_t xs[3] = {2, 3, 4}, one[1] = {4}, two[2] = {3, 4};
  tg_scope *s = tg_scope_begin();
  tg_tensor *x = tg_from_data(norm_x, TG_FLOAT32, xs, 3);
  tg_layernorm_layer a, b, c;
  CHECK(tg_layernorm_init(&a, one, 1, 1e-5, true) == 0 && tg_layernorm_init(&b, two, 2, 1e-5, true) == 0);
  CHECK(tg_layernorm_init(&c, one, 1, 1e-5, false) == 0);
  CHECK(tg_assign_data(a.weight, ln1_w, sizeof ln1_w) == 0 && tg_assign_data(a.bias, ln1_b, sizeof ln1_b) == 0);
  CHECK(tg_assign_data(b.weight, ln2_w, sizeof ln2_w) == 0 && tg_assign_data(b.bias, ln2_b, sizeof ln2_b) == 0);
  CHECK_VALUES(tg_layernorm_forward(&a, x), ln1_y, 1e-5);
  CHECK_VALUES(tg_layernorm_forward(&b, x), ln2_y, 1e-5);
  CHECK_VALUES(tg_layernorm_forward(&c, x), ln_noaffine_y, 1e-5);
  tg_layernorm_free(&a), tg_layernorm_free(&b), tg_layernorm_free(&c);
  tg_scope_end(s);
}

TEST(layers_rmsnorm_forward) {
  static const int64_t xs[3] = {2, 3, 4}, one[1] = {4};
  tg_scope *s = tg_scope_begin();
  tg_rmsnorm_layer r;
  CHECK(tg_rmsnorm_init(&r, one, 1, 1e-6) == 0);
  CHECK(tg_assign_data(r.weight, ln1_w, sizeof ln1_w) == 0);
  CHECK_VALUES(tg_rmsnorm_forward(&r, tg_from_data(norm_x, TG_FLOAT32, xs, 3)), rms_y, 1e-5);
  tg_rmsnorm_free(&r);
  tg_scope_end(s);
}

TEST(layers_groupnorm_forward) {
  static const int64_t xs[4] = {2, 4, 3, 3};
  tg_scope *s = tg_scope_begin();
  tg_groupnorm_layer g;
  CHECK(tg_groupnorm_init(&g, 2, 4, 1e-5, true) == 0);
  CHECK(tg_assign_data(g.weight, gn_w, sizeof gn_w) == 0 && tg_assign_data(g.bias, gn_b, sizeof gn_b) == 0);
  CHECK_VALUES(tg_groupnorm_forward(&g, tg_from_data(gn_x, TG_FLOAT32, xs, 4)), gn_y, 1e-5);
  tg_groupnorm_free(&g);
  tg_scope_end(s);
}

/* Two training batches (running statistics realized after each, as a training loop passes
 * them to tg_optimizer_step), then eval mode. */
TEST(layers_batchnorm_running_stats) {
  static const int64_t xs[4] = {4, 3, 2, 2}, es[4] = {2, 3, 2, 2};
  const float *bx[2] = {bn_x0, bn_x1}, *by[2] = {bn_y0, bn_y1}, *bm[2] = {bn_mean0, bn_mean1}, *bv[2] = {bn_var0, bn_var1};
  tg_batchnorm2d b;
  CHECK(tg_batchnorm2d_init(&b, 3) == 0);
  CHECK(tg_assign_data(b.weight, bn_w, sizeof bn_w) == 0 && tg_assign_data(b.bias, bn_b, sizeof bn_b) == 0);
  for (int i = 0; i < 2; i++) {
    tg_scope *s = tg_scope_begin();
    tg_tensor *y = tg_batchnorm2d_forward(&b, tg_from_data(bx[i], TG_FLOAT32, xs, 4));
    tg_tensor *all[4] = {y, b.running_mean, b.running_var, b.num_batches_tracked};
    CHECK(tg_realize_many(all, 4) == 0);
    CHECK(values_close(y, by[i], 48, 1e-5, "batchnorm train y"));
    CHECK(values_close(b.running_mean, bm[i], 3, 1e-5, "running_mean"));
    CHECK(values_close(b.running_var, bv[i], 3, 1e-5, "running_var"));
    tg_scope_end(s);
  }
  CHECK(tg_item(b.num_batches_tracked) == BN_BATCHES_TRACKED);
  b.training = false;
  tg_scope *s = tg_scope_begin();
  CHECK(values_close(tg_batchnorm2d_forward(&b, tg_from_data(bn_x_eval, TG_FLOAT32, es, 4)), bn_y_eval, 24, 1e-5,
                     "batchnorm eval y"));
  CHECK(tg_item(b.num_batches_tracked) == BN_BATCHES_TRACKED); /* eval does not count */
  CHECK(values_close(b.running_mean, bn_mean1, 3, 1e-5, "running_mean after eval"));
  tg_scope_end(s);
  tg_batchnorm2d_free(&b);
}

/* ------------------------------------------------------------ state dict */

TEST(layers_state_dict_names_and_order) {
  tg_linear fc;
  tg_conv2d_layer conv;
  tg_batchnorm2d bn;
  tg_layernorm_layer ln;
  tg_embedding emb;
  static const int64_t four[1] = {4};
  CHECK(tg_linear_init(&fc, 4, 2, true) == 0 && tg_conv2d_init(&conv, 1, 3, 3, 3, 1, 1, 1, 1, false) == 0);
  CHECK(tg_batchnorm2d_init(&bn, 3) == 0 && tg_layernorm_init(&ln, four, 1, 1e-5, true) == 0);
  CHECK(tg_embedding_init(&emb, 10, 4) == 0);
  tg_state_dict sd = {0};
  CHECK(tg_conv2d_state(&conv, "features.0", &sd) == 0);
  CHECK(tg_batchnorm2d_state(&bn, "features.1", &sd) == 0);
  CHECK(tg_embedding_state(&emb, "tok", &sd) == 0);
  CHECK(tg_layernorm_state(&ln, "", &sd) == 0);
  CHECK(tg_linear_state(&fc, "head", &sd) == 0);
  static const char *const want[] = {"features.0.weight", "features.1.weight", "features.1.bias",
                                     "features.1.running_mean", "features.1.running_var",
                                     "features.1.num_batches_tracked", "tok.weight", "weight", "bias",
                                     "head.weight", "head.bias"};
  int nwant = (int)(sizeof want / sizeof want[0]);
  CHECK(sd.n == nwant);
  for (int i = 0; i < sd.n && i < nwant; i++) {
    if (strcmp(sd.names[i], want[i])) printf("  entry %d is \"%s\", expected \"%s\"\n", i, sd.names[i], want[i]);
    CHECK(!strcmp(sd.names[i], want[i]));
  }
  CHECK(tg_state_dict_get(&sd, "features.1.running_var") == bn.running_var);
  CHECK(tg_state_dict_get(&sd, "head.bias") == fc.bias);
  CHECK(tg_state_dict_get(&sd, "head.nope") == NULL && strstr(tg_last_error(), "head.nope"));
  int np = -1;
  tg_tensor **ps = tg_state_dict_parameters(&sd, &np);
  tg_tensor *want_ps[] = {conv.weight, bn.weight, bn.bias, emb.weight, ln.weight, ln.bias, fc.weight, fc.bias};
  CHECK(ps != NULL && np == 8);
  for (int i = 0; ps && i < np && i < 8; i++) CHECK(ps[i] == want_ps[i]);
  free(ps);
  /* the dict holds its own references: layers can go first */
  tg_linear_free(&fc), tg_conv2d_free(&conv), tg_batchnorm2d_free(&bn), tg_layernorm_free(&ln), tg_embedding_free(&emb);
  CHECK(tg_numel(tg_state_dict_get(&sd, "head.weight")) == 8);
  CHECK(tg_item(tg_state_dict_get(&sd, "features.1.num_batches_tracked")) == 0);
  tg_state_dict_free(&sd);
  CHECK(sd.n == 0 && sd.names == NULL);
  tg_state_dict_free(&sd);
  tg_state_dict_free(NULL);
}

TEST(layers_state_dict_basics) {
  tg_state_dict sd = {0};
  tg_scope *s = tg_scope_begin();
  tg_tensor *a = tg_scalar(1, TG_FLOAT32), *b = tg_requires_grad(tg_scalar(2, TG_FLOAT32), true);
  char name[32];
  for (int i = 0; i < 40; i++) { /* grows past the first allocation */
    snprintf(name, sizeof name, "t%d", i);
    CHECK(tg_state_dict_add(&sd, name, i % 2 ? b : a) == 0);
  }
  CHECK(sd.n == 40 && sd.cap >= 40);
  tg_scope_end(s); /* the dict keeps a and b alive */
  CHECK(tg_item(tg_state_dict_get(&sd, "t39")) == 2 && tg_item(tg_state_dict_get(&sd, "t0")) == 1);
  int np = 0;
  tg_tensor **ps = tg_state_dict_parameters(&sd, &np);
  CHECK(ps && np == 20);
  free(ps);
  /* names are copied */
  snprintf(name, sizeof name, "t%d", 3);
  name[0] = 'x';
  CHECK(tg_state_dict_get(&sd, "t3") != NULL);
  tg_state_dict_free(&sd);

  tg_state_dict empty = {0};
  ps = tg_state_dict_parameters(&empty, &np);
  CHECK(ps != NULL && np == 0); /* never NULL on success */
  free(ps);
}

TEST(layers_state_dict_errors) {
  tg_state_dict sd = {0};
  tg_scope *s = tg_scope_begin();
  tg_tensor *a = tg_scalar(1, TG_FLOAT32);
  CHECK(tg_state_dict_add(&sd, "a", a) == 0);
  CHECK(tg_state_dict_add(&sd, "a", a) == TG_ERR_ARG && strstr(tg_last_error(), "duplicate"));
  CHECK(tg_state_dict_add(&sd, "", a) == TG_ERR_ARG);
  CHECK(tg_state_dict_add(&sd, NULL, a) == TG_ERR_ARG);
  CHECK(tg_state_dict_add(NULL, "b", a) == TG_ERR_ARG);
  tg_clear_error();
  CHECK(tg_state_dict_add(&sd, "b", NULL) == TG_ERR_ARG && strstr(tg_last_error(), "\"b\""));
  CHECK(sd.n == 1);
  CHECK(tg_state_dict_get(NULL, "a") == NULL && tg_state_dict_get(&sd, NULL) == NULL);
  int n = 5;
  CHECK(tg_state_dict_parameters(NULL, &n) == NULL && n == 0);
  CHECK(tg_state_dict_parameters(&sd, NULL) == NULL);

  /* layer *_state: all names checked before any is added */
  tg_linear l;
  CHECK(tg_linear_init(&l, 2, 2, true) == 0);
  CHECK(tg_state_dict_add(&sd, "fc.bias", a) == 0);
  CHECK(tg_linear_state(&l, "fc", &sd) == TG_ERR_ARG && strstr(tg_last_error(), "fc.bias"));
  CHECK(sd.n == 2 && tg_state_dict_get(&sd, "fc.weight") == NULL);
  CHECK(tg_linear_state(&l, "fc", NULL) == TG_ERR_ARG);
  CHECK(tg_linear_state(NULL, "fc", &sd) == TG_ERR_ARG);
  char longp[600];
  memset(longp, 'p', sizeof longp - 1), longp[sizeof longp - 1] = 0;
  CHECK(tg_linear_state(&l, longp, &sd) == TG_ERR_ARG && strstr(tg_last_error(), "prefix"));
  tg_linear_free(&l);
  CHECK(tg_linear_state(&l, "fc2", &sd) == TG_ERR_ARG && strstr(tg_last_error(), "not initialized"));
  tg_scope_end(s);
  tg_state_dict_free(&sd);
}

/* ------------------------------------------------------------ errors */

TEST(layers_init_errors) {
  tg_linear l;
  tg_conv2d_layer c;
  tg_batchnorm2d b;
  tg_layernorm_layer ln;
  tg_rmsnorm_layer r;
  tg_groupnorm_layer g;
  tg_embedding e;
  static const int64_t bad[2] = {3, 0}, good[1] = {3};
  CHECK(tg_linear_init(NULL, 2, 2, true) == TG_ERR_ARG);
  CHECK(tg_linear_init(&l, 0, 2, true) == TG_ERR_ARG && strstr(tg_last_error(), "in=0") && l.weight == NULL);
  CHECK(tg_linear_init(&l, 2, -1, true) == TG_ERR_ARG);
  CHECK(tg_conv2d_init(&c, 3, 4, 3, 3, 1, 0, 1, 2, true) == TG_ERR_ARG && strstr(tg_last_error(), "groups=2"));
  CHECK(tg_conv2d_init(&c, 4, 3, 3, 3, 1, 0, 1, 2, true) == TG_ERR_ARG);
  CHECK(tg_conv2d_init(&c, 4, 4, 0, 3, 1, 0, 1, 1, true) == TG_ERR_ARG);
  CHECK(tg_conv2d_init(&c, 4, 4, 3, 3, 0, 0, 1, 1, true) == TG_ERR_ARG);
  CHECK(tg_conv2d_init(&c, 4, 4, 3, 3, 1, -1, 1, 1, true) == TG_ERR_ARG);
  CHECK(tg_conv2d_init(&c, 4, 4, 3, 3, 1, 0, 0, 1, true) == TG_ERR_ARG);
  CHECK(tg_conv2d_init(&c, 4, 4, 3, 3, 1, 0, 1, 0, true) == TG_ERR_ARG);
  CHECK(tg_conv2d_init(NULL, 4, 4, 3, 3, 1, 0, 1, 1, true) == TG_ERR_ARG);
  CHECK(tg_batchnorm2d_init(&b, 0) == TG_ERR_ARG && tg_batchnorm2d_init(NULL, 3) == TG_ERR_ARG);
  CHECK(tg_layernorm_init(&ln, bad, 2, 1e-5, true) == TG_ERR_ARG);
  CHECK(tg_layernorm_init(&ln, NULL, 1, 1e-5, true) == TG_ERR_ARG);
  CHECK(tg_layernorm_init(&ln, good, 0, 1e-5, true) == TG_ERR_ARG);
  CHECK(tg_layernorm_init(&ln, good, 1, -1, true) == TG_ERR_ARG && strstr(tg_last_error(), "eps"));
  CHECK(tg_layernorm_init(&ln, good, 1, NAN, true) == TG_ERR_ARG);
  CHECK(tg_rmsnorm_init(&r, bad, 2, 1e-6) == TG_ERR_ARG && tg_rmsnorm_init(&r, good, 1, -1) == TG_ERR_ARG);
  CHECK(tg_groupnorm_init(&g, 3, 4, 1e-5, true) == TG_ERR_ARG && strstr(tg_last_error(), "3 groups"));
  CHECK(tg_groupnorm_init(&g, 0, 4, 1e-5, true) == TG_ERR_ARG);
  CHECK(tg_groupnorm_init(&g, 2, 4, -1e-5, true) == TG_ERR_ARG);
  CHECK(tg_embedding_init(&e, 0, 4) == TG_ERR_ARG && tg_embedding_init(&e, 4, 0) == TG_ERR_ARG);
  CHECK(tg_embedding_init(NULL, 4, 4) == TG_ERR_ARG);
  /* frees of failed / zeroed layers are no-ops */
  tg_linear_free(&l), tg_conv2d_free(&c), tg_batchnorm2d_free(&b), tg_layernorm_free(&ln);
  tg_rmsnorm_free(&r), tg_groupnorm_free(&g), tg_embedding_free(&e);
  tg_linear_free(NULL), tg_conv2d_free(NULL), tg_batchnorm2d_free(NULL), tg_layernorm_free(NULL);
  tg_rmsnorm_free(NULL), tg_groupnorm_free(NULL), tg_embedding_free(NULL);
}

TEST(layers_forward_errors) {
  tg_scope *s = tg_scope_begin();
  tg_linear l;
  tg_batchnorm2d b;
  tg_embedding e;
  tg_conv2d_layer c;
  CHECK(tg_linear_init(&l, 4, 2, true) == 0 && tg_batchnorm2d_init(&b, 3) == 0 && tg_embedding_init(&e, 5, 2) == 0);
  CHECK(tg_conv2d_init(&c, 2, 2, 3, 3, 1, 0, 1, 1, true) == 0);
  static const int64_t s23[2] = {2, 3}, s2[1] = {2}, s4d[4] = {1, 2, 2, 2}, s3d[3] = {1, 3, 4};
  tg_tensor *x23 = tg_zeros(s23, 2, TG_FLOAT32);
  CHECK(tg_linear_forward(&l, x23) == NULL && strstr(tg_last_error(), "(2, 3)"));
  CHECK(tg_linear_forward(&l, tg_scalar(1, TG_FLOAT32)) == NULL);
  CHECK(tg_linear_forward(NULL, x23) == NULL && strstr(tg_last_error(), "NULL layer"));
  tg_clear_error();
  CHECK(tg_linear_forward(&l, NULL) == NULL && strstr(tg_last_error(), "NULL"));
  CHECK(tg_batchnorm2d_forward(&b, tg_zeros(s4d, 4, TG_FLOAT32)) == NULL && strstr(tg_last_error(), "(1, 2, 2, 2)"));
  CHECK(tg_batchnorm2d_forward(&b, tg_zeros(s3d, 3, TG_FLOAT32)) == NULL && strstr(tg_last_error(), "rank 4"));
  CHECK(tg_item(b.num_batches_tracked) == 0); /* refused forwards count nothing */
  CHECK(tg_embedding_forward(&e, tg_zeros(s2, 1, TG_FLOAT32)) == NULL && strstr(tg_last_error(), "float32"));
  CHECK(tg_embedding_forward(&e, tg_zeros(s2, 1, TG_BOOL)) == NULL);
  CHECK(tg_conv2d_forward(&c, x23) == NULL);
  tg_linear_free(&l);
  CHECK(tg_linear_forward(&l, x23) == NULL && strstr(tg_last_error(), "not initialized"));
  tg_rmsnorm_layer r = {0};
  tg_layernorm_layer ln = {0};
  tg_groupnorm_layer g = {0};
  CHECK(tg_rmsnorm_forward(&r, x23) == NULL && tg_layernorm_forward(&ln, x23) == NULL && tg_groupnorm_forward(&g, x23) == NULL);
  tg_batchnorm2d_free(&b), tg_embedding_free(&e), tg_conv2d_free(&c);
  tg_scope_end(s);
}
