/* test_variable.c — symbolic sizes (docs/symbolic.md): shrink, pad and reshape by a variable,
 * reductions and a matmul over a variable-length axis, each checked against a naive C loop
 * for several bound values, with no kernel compiled after the first value; the errors; a
 * tg_jit that takes the variable's value from the binding at each call. */
#include <stdint.h>
#include <string.h>

#include "harness.h"

static uint64_t compiled(void) { return tg_get_stats().kernels_compiled; }

/* Deterministic test data in [-1, 1). */
static void fill(float *x, int n, unsigned seed) {
  for (int i = 0; i < n; i++) {
    seed = seed * 1103515245u + 12345u;
    x[i] = (float)((seed >> 8) & 0xffff) / 32768.0f - 1.0f;
  }
}

enum { R = 6, C = 16 };
static const int64_t values[] = {5, 1, 16, 9, 12, 2};
#define NVALUES ((int)(sizeof values / sizeof values[0]))

/* sum(x[:, :v], axis 1) and x[:, :v] * 2, copied out at the bound size. */
TEST(var_shrink_sum_and_to_host) {
  float xs[R * C];
  fill(xs, R * C, 1);
  tg_scope *outer = tg_scope_begin();
  tg_symvar *v = tg_variable("n", 1, C);
  tg_tensor *x = tg_from_data(xs, TG_FLOAT32, (int64_t[]){R, C}, 2);
  CHECK(v && x && tg_realize(x) == 0);
  uint64_t after_first = 0;
  for (int k = 0; k < NVALUES; k++) {
    int64_t n = values[k];
    CHECK(tg_var_bind(v, n) == 0);
    tg_scope *s = tg_scope_begin();
    tg_tensor *part = tg_shrink(x, (int64_t[]){0, 0}, (int64_t[]){R, tg_var_dim(v, 0)});
    tg_tensor *sum = tg_sum(part, (int[]){1}, 1, false), *twice = tg_mul_s(part, 2);
    int64_t shape[2] = {0, 0};
    CHECK(tg_shape_bound(twice, shape, 2) == 2 && shape[0] == R && shape[1] == n);
    CHECK(tg_dim(twice, 1) == C); /* the layout: the variable's largest value */
    float got[R], dbl[R * C];
    CHECK(tg_to_host(sum, got, sizeof got) == 0);
    CHECK(tg_to_host(twice, dbl, sizeof(float) * (size_t)(R * n)) == 0);
    for (int i = 0; i < R; i++) {
      float ref = 0;
      for (int j = 0; j < n; j++) ref += xs[i * C + j];
      CHECK_CLOSE(got[i], ref, 1e-5);
      for (int j = 0; j < n; j++) CHECK(dbl[i * n + j] == 2 * xs[i * C + j]);
    }
    tg_scope_end(s);
    if (k == 0) after_first = compiled();
  }
  CHECK(compiled() == after_first);
  tg_scope_end(outer);
}

/* A variable offset (x[:, v:v+3]) and a pad that brings a variable length back to C. */
TEST(var_shrink_offset_and_pad) {
  float xs[R * C];
  fill(xs, R * C, 2);
  tg_scope *outer = tg_scope_begin();
  tg_symvar *v = tg_variable("p", 0, C - 3);
  tg_tensor *x = tg_from_data(xs, TG_FLOAT32, (int64_t[]){R, C}, 2);
  uint64_t after_first = 0;
  for (int k = 0; k < NVALUES; k++) {
    int64_t p = values[k] % (C - 2);
    CHECK(tg_var_bind(v, p) == 0);
    tg_scope *s = tg_scope_begin();
    tg_tensor *win = tg_shrink(x, (int64_t[]){0, tg_var_dim(v, 0)}, (int64_t[]){R, tg_var_dim(v, 3)});
    tg_tensor *head = tg_shrink(x, (int64_t[]){0, 0}, (int64_t[]){R, tg_var_dim(v, 0)}); /* (R, p) */
    tg_tensor *back = tg_pad(head, (int64_t[]){0, 0}, (int64_t[]){0, tg_var_expr(v, -1, C)}, 7.0); /* (R, C) */
    tg_tensor *moved = tg_pad(tg_shrink(x, (int64_t[]){0, 0}, (int64_t[]){R, 3}), (int64_t[]){0, tg_var_dim(v, 0)},
                              (int64_t[]){0, tg_var_expr(v, -1, C - 3)}, 0.0); /* x[:, :3] placed at column p */
    float w[R * 3], b[R * C], m[R * C];
    CHECK(tg_to_host(win, w, sizeof w) == 0);
    CHECK(tg_dim(back, 1) == C && tg_to_host(back, b, sizeof b) == 0);
    CHECK(tg_to_host(moved, m, sizeof m) == 0);
    for (int i = 0; i < R; i++)
      for (int j = 0; j < C; j++) {
        if (j < 3) CHECK(w[i * 3 + j] == xs[i * C + p + j]);
        CHECK(b[i * C + j] == (j < p ? xs[i * C + j] : 7.0f));
        CHECK(m[i * C + j] == (j >= p && j < p + 3 ? xs[i * C + j - p] : 0.0f));
      }
    tg_scope_end(s);
    if (k == 0) after_first = compiled();
  }
  CHECK(compiled() == after_first);
  tg_scope_end(outer);
}

/* (v, 6) → (v, 2, 3) and (1, v, 6) by reshape, summed over the variable axis. */
TEST(var_reshape_and_reduce) {
  float xs[C * 6];
  fill(xs, C * 6, 3);
  tg_scope *outer = tg_scope_begin();
  tg_symvar *v = tg_variable("rows", 1, C);
  tg_tensor *x = tg_from_data(xs, TG_FLOAT32, (int64_t[]){C, 6}, 2);
  uint64_t after_first = 0;
  for (int k = 0; k < NVALUES; k++) {
    int64_t n = values[k];
    CHECK(tg_var_bind(v, n) == 0);
    tg_scope *s = tg_scope_begin();
    tg_tensor *rows = tg_shrink(x, (int64_t[]){0, 0}, (int64_t[]){tg_var_dim(v, 0), 6});
    tg_tensor *r3 = tg_reshape(rows, (int64_t[]){tg_var_dim(v, 0), 2, 3}, 3);
    tg_tensor *r1 = tg_reshape(rows, (int64_t[]){1, C, 6}, 3); /* plain sizes: the layout keeps the variable dim */
    tg_tensor *sum3 = tg_sum(r3, (int[]){0}, 1, false), *max1 = tg_max(r1, (int[]){1}, 1, false);
    float a[6], m[6];
    CHECK(tg_to_host(sum3, a, sizeof a) == 0 && tg_to_host(max1, m, sizeof m) == 0);
    for (int j = 0; j < 6; j++) {
      float ref = 0, mx = -1e30f;
      for (int i = 0; i < n; i++) ref += xs[i * 6 + j], mx = xs[i * 6 + j] > mx ? xs[i * 6 + j] : mx;
      CHECK_CLOSE(a[j], ref, 1e-5);
      CHECK(m[j] == mx);
    }
    tg_scope_end(s);
    if (k == 0) after_first = compiled();
  }
  CHECK(compiled() == after_first);
  tg_scope_end(outer);
}

/* A (4, v) @ (v, 5) matmul and a softmax over a variable axis. */
TEST(var_matmul_k_and_softmax) {
  enum { M = 4, N = 5 };
  float as[M * C], bs[C * N];
  fill(as, M * C, 4), fill(bs, C * N, 5);
  tg_scope *outer = tg_scope_begin();
  tg_symvar *v = tg_variable("k", 1, C);
  tg_tensor *a = tg_from_data(as, TG_FLOAT32, (int64_t[]){M, C}, 2), *b = tg_from_data(bs, TG_FLOAT32, (int64_t[]){C, N}, 2);
  uint64_t after_first = 0;
  for (int t = 0; t < NVALUES; t++) {
    int64_t k = values[t];
    CHECK(tg_var_bind(v, k) == 0);
    tg_scope *s = tg_scope_begin();
    tg_tensor *ak = tg_shrink(a, (int64_t[]){0, 0}, (int64_t[]){M, tg_var_dim(v, 0)});
    tg_tensor *bk = tg_shrink(b, (int64_t[]){0, 0}, (int64_t[]){tg_var_dim(v, 0), N});
    tg_tensor *c = tg_matmul(ak, bk), *sm = tg_softmax(ak, 1);
    float got[M * N], p[M * C];
    CHECK(tg_to_host(c, got, sizeof got) == 0);
    CHECK(tg_to_host(sm, p, sizeof(float) * (size_t)(M * k)) == 0);
    for (int i = 0; i < M; i++) {
      for (int j = 0; j < N; j++) {
        float ref = 0;
        for (int q = 0; q < k; q++) ref += as[i * C + q] * bs[q * N + j];
        CHECK_CLOSE(got[i * N + j], ref, 1e-5);
      }
      double mx = -1e30, z = 0;
      for (int q = 0; q < k; q++) mx = as[i * C + q] > mx ? as[i * C + q] : mx;
      for (int q = 0; q < k; q++) z += exp(as[i * C + q] - mx);
      for (int q = 0; q < k; q++) CHECK_CLOSE(p[i * k + q], exp(as[i * C + q] - mx) / z, 1e-6);
    }
    tg_scope_end(s);
    if (t == 0) after_first = compiled();
  }
  CHECK(compiled() == after_first);
  tg_scope_end(outer);
}

/* A realized tensor with a variable dim read by a later graph: the reader sees the dim. */
TEST(var_realized_value_keeps_its_dim) {
  float xs[C];
  fill(xs, C, 6);
  tg_scope *outer = tg_scope_begin();
  tg_symvar *v = tg_variable("len", 1, C);
  tg_tensor *x = tg_from_data(xs, TG_FLOAT32, (int64_t[]){C}, 1);
  CHECK(tg_var_bind(v, 7) == 0);
  tg_tensor *sq = tg_mul(tg_shrink(x, (int64_t[]){0}, (int64_t[]){tg_var_dim(v, 0)}), tg_shrink(x, (int64_t[]){0}, (int64_t[]){tg_var_dim(v, 0)}));
  CHECK(tg_realize(sq) == 0);
  float got = 0, ref = 0;
  CHECK(tg_to_host(tg_sum(sq, NULL, 0, false), &got, sizeof got) == 0);
  for (int i = 0; i < 7; i++) ref += xs[i] * xs[i];
  CHECK_CLOSE(got, ref, 1e-5);
  tg_scope_end(outer);
}

TEST(var_errors) {
  tg_scope *outer = tg_scope_begin();
  tg_symvar *v = tg_variable("start_pos", 0, 31), *w = tg_variable("other", 0, 31);
  CHECK(tg_variable("bad", 5, 2) == NULL && strstr(tg_last_error(), "range"));
  CHECK(tg_var_bind(v, 32) == TG_ERR_ARG && strstr(tg_last_error(), "outside the range [0, 31]") && strstr(tg_last_error(), "start_pos"));
  CHECK(tg_var_bind(v, -1) == TG_ERR_ARG);
  CHECK(tg_var_value(v) == -1); /* still unbound */
  tg_tensor *x = tg_zeros((int64_t[]){4, 40}, 2, TG_FLOAT32);
  tg_tensor *a = tg_shrink(x, (int64_t[]){0, 0}, (int64_t[]){4, tg_var_dim(v, 1)});
  CHECK(a != NULL);
  float buf[4 * 40];
  CHECK(tg_realize(tg_sum(a, NULL, 0, false)) < 0 && strstr(tg_last_error(), "variable 'start_pos' is not bound"));
  CHECK(tg_to_host(a, buf, 16) < 0 && strstr(tg_last_error(), "not bound"));
  /* out of bounds at the top of the range */
  CHECK(tg_shrink(x, (int64_t[]){0, 0}, (int64_t[]){4, tg_var_dim(v, 10)}) == NULL && strstr(tg_last_error(), "out of bounds"));
  /* an op that cannot take one: flip of a variable axis */
  CHECK(tg_flip(a, (int[]){1}, 1) == NULL && strstr(tg_last_error(), "variable size"));
  /* two variables in one op, and two variables' dims meeting */
  CHECK(tg_shrink(x, (int64_t[]){0, tg_var_dim(w, 0)}, (int64_t[]){4, tg_var_dim(v, 1)}) == NULL && strstr(tg_last_error(), "two variables"));
  tg_tensor *b = tg_shrink(x, (int64_t[]){0, 0}, (int64_t[]){4, tg_var_dim(w, 1)});
  CHECK(b && tg_add(a, b) == NULL && strstr(tg_last_error(), "two different variables"));
  /* a reshape that would merge the variable dim with another */
  CHECK(tg_reshape(a, (int64_t[]){4 * 32}, 1) == NULL && strstr(tg_last_error(), "must stay a dim of its own"));
  /* a pad by an amount that goes negative over the range */
  CHECK(tg_pad(x, (int64_t[]){0, 0}, (int64_t[]){0, tg_var_expr(v, -1, 10)}, 0) == NULL && strstr(tg_last_error(), ">= 0"));
  CHECK(tg_var_expr(v, 1000, 0) != 0 && strstr(tg_last_error(), "out of range"));
  CHECK(tg_var_dim(NULL, 0) != 0 && strstr(tg_last_error(), "NULL variable"));
  /* a huge negative number that is no variable's encoding */
  CHECK(tg_shrink(x, (int64_t[]){0, 0}, (int64_t[]){4, INT64_MIN + 12345}) == NULL && strstr(tg_last_error(), "invalid size"));
  CHECK(tg_reshape(x, (int64_t[]){INT64_MIN / 2 - 7, 4}, 2) == NULL && strstr(tg_last_error(), "invalid size"));
  /* bound: the size at the wrong byte count is refused */
  CHECK(tg_var_bind(v, 3) == 0 && tg_var_value(v) == 3);
  CHECK(tg_to_host(a, buf, sizeof buf) < 0 && strstr(tg_last_error(), "bound values"));
  CHECK(tg_to_host(a, buf, sizeof(float) * 16) == 0);
  tg_scope_end(outer);
}

/* A tg_jit function using the variable: every call reads the current binding. */
typedef struct {
  tg_symvar *v;
} jit_ctx;

static int prefix_sum_fn(void *ctx, tg_tensor *const *in, int nin, tg_tensor **out, int nout) {
  jit_ctx *c = ctx;
  (void)nin, (void)nout;
  tg_tensor *part = tg_shrink(in[0], (int64_t[]){0, 0}, (int64_t[]){R, tg_var_dim(c->v, 0)});
  out[0] = tg_sum(part, (int[]){1}, 1, false);
  return out[0] ? 0 : -1;
}

TEST(var_jit_reads_the_binding) {
  float xs[R * C];
  fill(xs, R * C, 7);
  tg_scope *outer = tg_scope_begin();
  jit_ctx c = {tg_variable("jit_n", 1, C)};
  tg_jit *jit = tg_jit_new(prefix_sum_fn, &c);
  uint64_t after = 0;
  for (int call = 0; call < 8; call++) {
    int64_t n = values[call % NVALUES];
    if (call == 3) after = compiled();
    CHECK(tg_var_bind(c.v, n) == 0);
    tg_scope *s = tg_scope_begin();
    tg_tensor *x = tg_from_data(xs, TG_FLOAT32, (int64_t[]){R, C}, 2), *y = NULL;
    CHECK(tg_jit_call(jit, &x, 1, &y, 1) == 0);
    float got[R];
    CHECK(y && tg_to_host(y, got, sizeof got) == 0);
    for (int i = 0; i < R; i++) {
      float ref = 0;
      for (int j = 0; j < n; j++) ref += xs[i * C + j];
      CHECK_CLOSE(got[i], ref, 1e-5);
    }
    tg_scope_end(s);
  }
  CHECK(compiled() == after);
  tg_jit_free(jit);
  tg_scope_end(outer);
}

/* A variable-length axis long enough to stay a loop (the loop ends at the variable's value,
 * read before the loop opens) rather than be unrolled and masked: sums and a (1, v) @ (v, 8)
 * product for v up to 300. */
TEST(var_long_axis_loops_end_at_the_value) {
  enum { L = 300, N = 8 };
  static float xs[2 * L], ws[L * N];
  fill(xs, 2 * L, 8), fill(ws, L * N, 9);
  tg_scope *outer = tg_scope_begin();
  tg_symvar *v = tg_variable("len", 1, L);
  tg_tensor *x = tg_from_data(xs, TG_FLOAT32, (int64_t[]){2, L}, 2), *w = tg_from_data(ws, TG_FLOAT32, (int64_t[]){L, N}, 2);
  const int64_t lens[] = {300, 1, 77, 255, 128};
  uint64_t after_first = 0;
  for (int t = 0; t < 5; t++) {
    int64_t n = lens[t];
    CHECK(tg_var_bind(v, n) == 0);
    tg_scope *s = tg_scope_begin();
    tg_tensor *xn = tg_shrink(x, (int64_t[]){0, 0}, (int64_t[]){2, tg_var_dim(v, 0)});
    tg_tensor *wn = tg_shrink(w, (int64_t[]){0, 0}, (int64_t[]){tg_var_dim(v, 0), N});
    float sums[2], prod[2 * N];
    CHECK(tg_to_host(tg_sum(tg_exp(xn), (int[]){1}, 1, false), sums, sizeof sums) == 0);
    CHECK(tg_to_host(tg_matmul(xn, wn), prod, sizeof prod) == 0);
    for (int i = 0; i < 2; i++) {
      double ref = 0;
      for (int j = 0; j < n; j++) ref += exp(xs[i * L + j]);
      CHECK_CLOSE(sums[i], ref, 1e-4);
      for (int k = 0; k < N; k++) {
        double r = 0;
        for (int j = 0; j < n; j++) r += xs[i * L + j] * ws[j * N + k];
        CHECK_CLOSE(prod[i * N + k], r, 1e-4);
      }
    }
    tg_scope_end(s);
    if (t == 0) after_first = compiled();
  }
  CHECK(compiled() == after_first);
  tg_scope_end(outer);
}

/* Ops that divide by a count along a variable axis (mean, var, std, layernorm) count the bound
 * elements (a sum of ones whose loop ends at the value): two bound values, one set of
 * kernels, against naive loops. */
TEST(var_mean_var_std_layernorm) {
  float xs[R * C];
  fill(xs, R * C, 10);
  tg_scope *outer = tg_scope_begin();
  tg_symvar *v = tg_variable("cnt", 1, C);
  tg_tensor *x = tg_from_data(xs, TG_FLOAT32, (int64_t[]){R, C}, 2);
  const int64_t ns[] = {5, 12, 5};
  uint64_t after_first = 0;
  for (int t = 0; t < 3; t++) {
    int64_t n = ns[t];
    CHECK(tg_var_bind(v, n) == 0);
    tg_scope *s = tg_scope_begin();
    tg_tensor *xv = tg_shrink(x, (int64_t[]){0, 0}, (int64_t[]){R, tg_var_dim(v, 0)});
    float mean[R], var[R], std[R], all, ln[R * C];
    CHECK(tg_to_host(tg_mean(xv, (int[]){1}, 1, false), mean, sizeof mean) == 0);
    CHECK(tg_to_host(tg_var(xv, (int[]){1}, 1, false, 1), var, sizeof var) == 0);
    CHECK(tg_to_host(tg_std(xv, (int[]){-1}, 1, true, 0), std, sizeof std) == 0);
    CHECK(tg_to_host(tg_mean(xv, NULL, 0, false), &all, sizeof all) == 0);
    CHECK(tg_to_host(tg_layernorm(xv, 1, NULL, NULL, 1e-5), ln, sizeof(float) * (size_t)(R * n)) == 0);
    double tot = 0;
    for (int i = 0; i < R; i++) {
      double m = 0, ss = 0;
      for (int j = 0; j < n; j++) m += xs[i * C + j];
      tot += m, m /= (double)n;
      for (int j = 0; j < n; j++) ss += (xs[i * C + j] - m) * (xs[i * C + j] - m);
      CHECK_CLOSE(mean[i], m, 1e-5);
      CHECK_CLOSE(var[i], ss / (double)(n - 1), 1e-5);
      CHECK_CLOSE(std[i], sqrt(ss / (double)n), 1e-5);
      for (int j = 0; j < n; j++) CHECK_CLOSE(ln[i * n + j], (xs[i * C + j] - m) / sqrt(ss / (double)n + 1e-5), 1e-4);
    }
    CHECK_CLOSE(all, tot / (double)(R * n), 1e-5);
    tg_scope_end(s);
    if (t == 0) after_first = compiled();
  }
  CHECK(compiled() == after_first);
  tg_scope_end(outer);
}

/* Ops that compute sizes or offsets from a dim's number along a variable axis refuse it by
 * name (they would see the layout); along a plain axis they work on variable-dim tensors. */
TEST(var_ops_refuse_a_variable_axis) {
  float xs[R * C];
  fill(xs, R * C, 11);
  tg_scope *outer = tg_scope_begin();
  tg_symvar *v = tg_variable("seq", 1, C - 1);
  CHECK(tg_var_bind(v, 4) == 0);
  tg_tensor *x = tg_from_data(xs, TG_FLOAT32, (int64_t[]){R, C}, 2);
  tg_tensor *xv = tg_shrink(x, (int64_t[]){0, 0}, (int64_t[]){R, tg_var_dim(v, 1)}), *two[2] = {xv, xv}, *o[2], *w;
  int32_t id[R] = {0};
#define REFUSED(call, op) CHECK((call) && strstr(tg_last_error(), op ": axis 1 has a variable size (seq+1, variable 'seq')"))
  REFUSED(tg_cat(two, 2, 1) == NULL, "cat");
  REFUSED(tg_split(xv, (int64_t[]){2, C - 2}, 2, 1, o) < 0, "split");
  REFUSED(tg_cumsum(xv, 1) == NULL, "cumsum");
  REFUSED(tg_cumprod(xv, 1) == NULL, "cumprod");
  REFUSED(tg_logcumsumexp(xv, -1) == NULL, "logcumsumexp");
  REFUSED(tg_sort(xv, 1, false, &o[0], &o[1]) < 0, "sort");
  REFUSED(tg_topk(xv, 2, 1, true, &o[0], &o[1]) < 0, "topk");
  REFUSED(tg_roll(xv, (int64_t[]){1}, (int[]){1}, 1) == NULL, "roll");
  REFUSED(tg_pad_mode(xv, (int64_t[]){0, 1}, (int64_t[]){0, 1}, TG_PAD_REFLECT, 0) == NULL, "pad");
  REFUSED(tg_diagonal(xv, 0, 0, 1) == NULL, "diagonal");
  tg_tensor *row = tg_reshape(tg_shrink(x, (int64_t[]){0, 0}, (int64_t[]){1, tg_var_dim(v, 0)}), (int64_t[]){tg_var_dim(v, 0)}, 1);
  CHECK(row && tg_diag(row, 0) == NULL && strstr(tg_last_error(), "diag: axis 0 has a variable size (seq, variable 'seq')"));
  REFUSED(tg_unfold(xv, 1, 2, 1) == NULL, "unfold");
  REFUSED(tg_repeat(xv, (int64_t[]){1, 2}, 2) == NULL, "repeat");
  REFUSED(tg_repeat_interleave(xv, 2, 1) == NULL, "repeat_interleave");
  REFUSED(tg_slice(xv, 1, 0, 2, 1) == NULL, "slice");
  REFUSED(tg_gather(xv, 1, tg_from_data(id, TG_INT32, (int64_t[]){R, 1}, 2)) == NULL, "gather");
#undef REFUSED
  /* a plain axis of the same tensors: cat along rows keeps the variable dim; a variable dim
   * meeting a plain one of its layout size is refused */
  float got[2 * R * C];
  CHECK(tg_to_host(tg_cat(two, 2, 0), got, sizeof(float) * 2 * R * 5) == 0);
  for (int i = 0; i < 2 * R; i++)
    for (int j = 0; j < 5; j++) CHECK(got[i * 5 + j] == xs[(i % R) * C + j]);
  CHECK((w = tg_zeros((int64_t[]){R, C}, 2, TG_FLOAT32)) && tg_cat((tg_tensor *[]){xv, w}, 2, 0) == NULL &&
        strstr(tg_last_error(), "differ outside axis 0"));
  tg_scope_end(outer);
}
