/* test_memory.c — ownership (scopes, tg_keep, tg_retain, tg_free) and flat memory:
 * the alive counters of tg_get_stats() (uops_alive, buffers_alive, bytes_alive) come
 * back exactly to where they were once everything built has been freed.
 *
 * Caches (compiled kernels, interned constants) may legitimately keep UOps alive after
 * the first use of an expression, so every "flat" check runs its body once to warm up,
 * takes a baseline, runs it again and compares. */
#include <stdint.h>
#include <stdlib.h>
#include "harness.h"

typedef struct {
  uint64_t uops, buffers, bytes;
} alive_t;

static alive_t alive(void) {
  tg_stats s = tg_get_stats();
  return (alive_t){s.uops_alive, s.buffers_alive, s.bytes_alive};
}

static int alive_eq(alive_t a, alive_t b) {
  return a.uops == b.uops && a.buffers == b.buffers && a.bytes == b.bytes;
}

static void print_alive(const char *what, alive_t a) {
  printf("  %s: uops_alive=%llu buffers_alive=%llu bytes_alive=%llu\n", what,
         (unsigned long long)a.uops, (unsigned long long)a.buffers,
         (unsigned long long)a.bytes);
}

#define CHECK_ALIVE_EQ(a, b)                                                \
  do {                                                                      \
    alive_t a__ = (a), b__ = (b);                                           \
    CHECK(a__.uops == b__.uops);                                            \
    CHECK(a__.buffers == b__.buffers);                                      \
    CHECK(a__.bytes == b__.bytes);                                          \
    if (!alive_eq(a__, b__)) {                                              \
      print_alive(#a, a__);                                                 \
      print_alive(#b, b__);                                                 \
    }                                                                       \
  } while (0)

/* Buffers and bytes only: UOps may be cached by the first use of an expression. */
#define CHECK_BUFS_EQ(a, b)                                                 \
  do {                                                                      \
    alive_t a__ = (a), b__ = (b);                                           \
    CHECK(a__.buffers == b__.buffers);                                      \
    CHECK(a__.bytes == b__.bytes);                                          \
    if (a__.buffers != b__.buffers || a__.bytes != b__.bytes) {             \
      print_alive(#a, a__);                                                 \
      print_alive(#b, b__);                                                 \
    }                                                                       \
  } while (0)

/* Runs body twice; the second run must leave the alive counters unchanged. */
#define CHECK_FLAT(body)                                                    \
  do {                                                                      \
    body();                                                                 \
    alive_t base_ = alive();                                                \
    body();                                                                 \
    CHECK_ALIVE_EQ(alive(), base_);                                         \
  } while (0)

static const int64_t S48[] = {4, 8};

static void fill(float *d, int n, int seed) {
  for (int i = 0; i < n; i++) d[i] = (float)((i * 7 + seed * 3) % 11) - 5.0f;
}

/* ------------------------------------------------------------ the long loop */

/* One iteration: e = sum(relu(a*b + a), axis 1) * 0.5, realized and checked when asked.
 * Returns the number of wrong values. */
static int loop_iter(int i, int realize) {
  float da[32], db[32];
  fill(da, 32, i);
  fill(db, 32, i + 1);
  int bad = 0;
  tg_scope *s = tg_scope_begin();
  tg_tensor *a = tg_from_data(da, TG_FLOAT32, S48, 2);
  tg_tensor *b = tg_from_data(db, TG_FLOAT32, S48, 2);
  tg_tensor *c = tg_relu(tg_add(tg_mul(a, b), a));
  const int ax[] = {1};
  tg_tensor *e = tg_mul_s(tg_sum(c, ax, 1, false), 0.5);
  if (!e) bad++;
  if (realize && e) {
    float out[4] = {0};
    if (tg_realize(e) != 0 || tg_to_host(e, out, sizeof out) != 0) bad++;
    for (int r = 0; r < 4; r++) {
      float acc = 0;
      for (int k = 0; k < 8; k++) {
        float v = da[r * 8 + k] * db[r * 8 + k] + da[r * 8 + k];
        acc += v > 0 ? v : 0;
      }
      if (!harness_close(out[r], acc * 0.5f, 1e-5, 1e-5)) bad++;
    }
  }
  tg_scope_end(s);
  return bad;
}

TEST(mem_loop_10000_iterations_flat) {
  /* warm up both paths (built only, and built + realized) */
  int bad = loop_iter(0, 1) + loop_iter(1, 0);
  CHECK(bad == 0);
  alive_t base = alive();
  alive_t mid = base;
  for (int i = 0; i < 10000; i++) {
    bad += loop_iter(i, i % 100 == 0);
    if (i == 5000) mid = alive();
  }
  CHECK(bad == 0);
  CHECK_ALIVE_EQ(mid, base);
  CHECK_ALIVE_EQ(alive(), base);
}

/* The same without scopes: every tensor freed explicitly with tg_free. */
TEST(mem_loop_explicit_free_flat) {
  int bad = 0;
  for (int w = 0; w < 2; w++) {
    float da[32];
    fill(da, 32, w);
    tg_tensor *a = tg_from_data(da, TG_FLOAT32, S48, 2);
    tg_tensor *b = tg_mul_s(a, 2.0);
    float out[32];
    if (tg_to_host(b, out, sizeof out) != 0) bad++;
    tg_free(b);
    tg_free(a);
  }
  alive_t base = alive();
  for (int i = 0; i < 2000; i++) {
    float da[32];
    fill(da, 32, i);
    tg_tensor *a = tg_from_data(da, TG_FLOAT32, S48, 2);
    tg_tensor *b = tg_mul_s(a, 2.0);
    if (i % 100 == 0) {
      float out[32];
      if (tg_to_host(b, out, sizeof out) != 0) bad++;
      for (int k = 0; k < 32; k++)
        if (out[k] != 2.0f * da[k]) bad++;
    }
    tg_free(b);
    tg_free(a);
  }
  CHECK(bad == 0);
  CHECK_ALIVE_EQ(alive(), base);
}

/* ------------------------------------------------------------------ tg_keep */

static const float K6[] = {1, -2, 3, -4, 5, -6};
static const int64_t S23[] = {2, 3};

static void keep_lazy_body(void) {
  alive_t start = alive();
  tg_tensor *kept;
  tg_scope *s = tg_scope_begin();
  tg_tensor *a = tg_from_data(K6, TG_FLOAT32, S23, 2);
  tg_tensor *b = tg_full(S23, 2, 10.0, TG_FLOAT32);
  tg_tensor *c = tg_mul(tg_add(a, b), a); /* lazy */
  kept = tg_keep(c);
  CHECK(kept == c);
  tg_scope_end(s);
  /* kept survived the scope (and so did the graph it needs) */
  CHECK(kept != NULL);
  CHECK(tg_ndim(kept) == 2 && tg_numel(kept) == 6);
  float out[6] = {0};
  CHECK(tg_to_host(kept, out, sizeof out) == 0);
  for (int i = 0; i < 6; i++) CHECK_CLOSE(out[i], (K6[i] + 10.0f) * K6[i], 1e-6);
  tg_free(kept);
  CHECK(alive().buffers == start.buffers);
  CHECK(alive().bytes == start.bytes);
}

TEST(mem_keep_lazy_tensor_survives_scope) { CHECK_FLAT(keep_lazy_body); }

static void keep_realized_body(void) {
  alive_t start = alive();
  tg_tensor *kept;
  tg_scope *s = tg_scope_begin();
  tg_tensor *a = tg_from_data(K6, TG_FLOAT32, S23, 2);
  tg_tensor *c = tg_sub_s(tg_mul_s(a, 3.0), 1.0);
  CHECK(tg_realize(c) == 0);
  kept = tg_keep(c);
  tg_scope_end(s);
  CHECK(tg_is_realized(kept));
  float out[6] = {0};
  CHECK(tg_to_host(kept, out, sizeof out) == 0);
  for (int i = 0; i < 6; i++) CHECK_CLOSE(out[i], K6[i] * 3.0f - 1.0f, 1e-6);
  /* the realized result holds exactly its own buffer now */
  CHECK(alive().buffers >= start.buffers + 1);
  CHECK(alive().bytes >= start.bytes + sizeof out);
  tg_free(kept);
  CHECK(alive().buffers == start.buffers);
  CHECK(alive().bytes == start.bytes);
}

TEST(mem_keep_realized_tensor_survives_scope) { CHECK_FLAT(keep_realized_body); }

/* tg_keep moves one level: from the inner scope to the outer one, which frees it. */
static void keep_nested_body(void) {
  alive_t start = alive();
  tg_scope *outer = tg_scope_begin();
  tg_tensor *a = tg_from_data(K6, TG_FLOAT32, S23, 2);
  CHECK(tg_realize(a) == 0);
  tg_scope *inner = tg_scope_begin();
  tg_tensor *c = tg_keep(tg_add_s(a, 0.5));
  CHECK(tg_realize(c) == 0);
  tg_tensor *tmp = tg_mul_s(a, 100.0);
  CHECK(tg_realize(tmp) == 0);
  tg_scope_end(inner);
  float out[6] = {0};
  CHECK(tg_to_host(c, out, sizeof out) == 0);
  for (int i = 0; i < 6; i++) CHECK_CLOSE(out[i], K6[i] + 0.5f, 1e-6);
  CHECK(tg_to_host(a, out, sizeof out) == 0);
  for (int i = 0; i < 6; i++) CHECK(out[i] == K6[i]);
  tg_scope_end(outer); /* frees a and c */
  CHECK_BUFS_EQ(alive(), start);
}

TEST(mem_keep_moves_one_level) { CHECK_FLAT(keep_nested_body); }

/* tg_keep through three levels reaches the user, who frees it. */
static void keep_three_levels_body(void) {
  alive_t start = alive();
  tg_tensor *t;
  tg_scope *s1 = tg_scope_begin();
  tg_scope *s2 = tg_scope_begin();
  tg_scope *s3 = tg_scope_begin();
  t = tg_keep(tg_mul_s(tg_from_data(K6, TG_FLOAT32, S23, 2), -1.0));
  tg_scope_end(s3);
  tg_keep(t);
  tg_scope_end(s2);
  tg_keep(t);
  tg_scope_end(s1);
  float out[6] = {0};
  CHECK(tg_to_host(t, out, sizeof out) == 0);
  for (int i = 0; i < 6; i++) CHECK(out[i] == -K6[i]);
  tg_free(t);
  CHECK_BUFS_EQ(alive(), start);
}

TEST(mem_keep_three_levels_to_user) { CHECK_FLAT(keep_three_levels_body); }

/* ----------------------------------------------------------- nested scopes */

static void nested_body(void) {
  alive_t start = alive();
  tg_scope *outer = tg_scope_begin();
  tg_tensor *a = tg_from_data(K6, TG_FLOAT32, S23, 2);
  CHECK(tg_realize(a) == 0);
  alive_t after_a = alive();
  CHECK(after_a.buffers >= start.buffers + 1);
  CHECK(after_a.bytes >= start.bytes + 6 * sizeof(float));
  for (int rep = 0; rep < 3; rep++) {
    alive_t before_inner = alive();
    tg_scope *inner = tg_scope_begin();
    tg_tensor *b = tg_square(a);
    tg_tensor *c = tg_add(b, a);
    CHECK(tg_realize(b) == 0);
    CHECK(tg_realize(c) == 0);
    CHECK(alive().buffers >= before_inner.buffers + 2);
    float out[6] = {0};
    CHECK(tg_to_host(c, out, sizeof out) == 0);
    for (int i = 0; i < 6; i++) CHECK_CLOSE(out[i], K6[i] * K6[i] + K6[i], 1e-6);
    tg_scope *innermost = tg_scope_begin();
    tg_tensor *d = tg_neg(c);
    CHECK(tg_realize(d) == 0);
    tg_scope_end(innermost);
    /* c is still fine after the innermost scope freed d */
    CHECK(tg_to_host(c, out, sizeof out) == 0);
    for (int i = 0; i < 6; i++) CHECK_CLOSE(out[i], K6[i] * K6[i] + K6[i], 1e-6);
    tg_scope_end(inner);
    CHECK(alive().buffers == before_inner.buffers);
    CHECK(alive().bytes == before_inner.bytes);
  }
  /* the outer tensor is untouched */
  float out[6] = {0};
  CHECK(tg_to_host(a, out, sizeof out) == 0);
  for (int i = 0; i < 6; i++) CHECK(out[i] == K6[i]);
  tg_scope_end(outer);
  CHECK_BUFS_EQ(alive(), start);
}

TEST(mem_nested_scopes) { CHECK_FLAT(nested_body); }

/* ------------------------------------------------- tg_free inside a scope */

static void free_in_scope_body(void) {
  alive_t start = alive();
  tg_scope *s = tg_scope_begin();
  tg_tensor *a = tg_from_data(K6, TG_FLOAT32, S23, 2);
  tg_tensor *b = tg_add_s(a, 1.0);
  CHECK(tg_realize(b) == 0);
  tg_tensor *c = tg_mul(b, a);
  tg_free(b); /* freed early: the scope must not free it again */
  tg_free(a); /* c still needs a's data */
  float out[6] = {0};
  CHECK(tg_to_host(c, out, sizeof out) == 0);
  for (int i = 0; i < 6; i++) CHECK_CLOSE(out[i], (K6[i] + 1.0f) * K6[i], 1e-6);
  tg_tensor *d = tg_neg(c);
  tg_free(d); /* a never-realized tensor */
  tg_free(c);
  tg_scope_end(s);
  CHECK_BUFS_EQ(alive(), start);
}

TEST(mem_free_inside_scope_no_double_free) { CHECK_FLAT(free_in_scope_body); }

/* Every tensor of the scope freed by hand before tg_scope_end. */
static void free_all_in_scope_body(void) {
  alive_t start = alive();
  tg_scope *s = tg_scope_begin();
  tg_tensor *ts[8];
  ts[0] = tg_from_data(K6, TG_FLOAT32, S23, 2);
  for (int i = 1; i < 8; i++) ts[i] = tg_add_s(ts[i - 1], 1.0);
  CHECK(tg_realize(ts[7]) == 0);
  CHECK(tg_item(tg_sum(ts[7], NULL, 0, false)) == -3.0 + 6 * 7.0);
  for (int i = 0; i < 8; i++) tg_free(ts[i]);
  tg_scope_end(s);
  CHECK_BUFS_EQ(alive(), start);
}

TEST(mem_free_all_inside_scope) { CHECK_FLAT(free_all_in_scope_body); }

/* ---------------------------------------------------------------- tg_retain */

static void retain_scope_body(void) {
  alive_t start = alive();
  tg_scope *s = tg_scope_begin();
  tg_tensor *a = tg_from_data(K6, TG_FLOAT32, S23, 2);
  tg_tensor *b = tg_mul_s(a, 2.0);
  CHECK(tg_realize(b) == 0);
  tg_tensor *r = tg_retain(b);
  CHECK(r == b);
  tg_scope_end(s); /* drops the scope's reference; ours remains */
  float out[6] = {0};
  CHECK(tg_to_host(r, out, sizeof out) == 0);
  for (int i = 0; i < 6; i++) CHECK(out[i] == 2.0f * K6[i]);
  tg_free(r);
  CHECK_BUFS_EQ(alive(), start);
}

TEST(mem_retain_survives_scope) { CHECK_FLAT(retain_scope_body); }

static void retain_no_scope_body(void) {
  alive_t start = alive();
  tg_tensor *a = tg_from_data(K6, TG_FLOAT32, S23, 2);
  CHECK(tg_realize(a) == 0);
  alive_t with_a = alive();
  CHECK(with_a.buffers >= start.buffers + 1);
  CHECK(tg_retain(a) == a);
  tg_retain(a);
  tg_free(a);
  tg_free(a);
  /* one reference left: still alive and intact */
  CHECK(alive().buffers == with_a.buffers);
  float out[6] = {0};
  CHECK(tg_to_host(a, out, sizeof out) == 0);
  for (int i = 0; i < 6; i++) CHECK(out[i] == K6[i]);
  tg_free(a);
  CHECK_BUFS_EQ(alive(), start);
}

TEST(mem_retain_refcount_without_scope) { CHECK_FLAT(retain_no_scope_body); }

/* A retained tensor inside a scope: the scope's reference and ours are separate. */
static void retain_then_free_in_scope_body(void) {
  alive_t start = alive();
  tg_scope *s = tg_scope_begin();
  tg_tensor *a = tg_from_data(K6, TG_FLOAT32, S23, 2);
  tg_retain(a);
  tg_free(a); /* drops one of the two references */
  float out[6] = {0};
  CHECK(tg_to_host(a, out, sizeof out) == 0);
  for (int i = 0; i < 6; i++) CHECK(out[i] == K6[i]);
  tg_scope_end(s); /* drops the other */
  CHECK_BUFS_EQ(alive(), start);
}

TEST(mem_retain_then_free_in_scope) { CHECK_FLAT(retain_then_free_in_scope_body); }

/* --------------------------------------- results outlive their input handles */

/* Allocate and realize some unrelated tensors, so freed memory gets reused. */
static void churn(void) {
  tg_scope *s = tg_scope_begin();
  float junk[64];
  for (int i = 0; i < 64; i++) junk[i] = 1000.0f + (float)i;
  const int64_t sh[] = {64};
  for (int r = 0; r < 4; r++) {
    tg_tensor *t = tg_add_s(tg_from_data(junk, TG_FLOAT32, sh, 1), (double)r);
    tg_realize(t);
  }
  const int64_t s23[] = {2, 3};
  tg_tensor *u = tg_full(s23, 2, -777.0, TG_FLOAT32);
  tg_realize(tg_contiguous(u));
  tg_scope_end(s);
}

static void realized_outlives_inputs_body(void) {
  alive_t start = alive();
  tg_tensor *a = tg_from_data(K6, TG_FLOAT32, S23, 2);
  const float bd[] = {0.5f, 0.25f, 2, 4, -1, 3};
  tg_tensor *b = tg_from_data(bd, TG_FLOAT32, S23, 2);
  tg_tensor *m = tg_mul(a, b);
  tg_tensor *c = tg_add(m, b);
  CHECK(tg_realize(c) == 0);
  tg_free(m);
  tg_free(a);
  tg_free(b);
  churn();
  float out[6] = {0};
  CHECK(tg_to_host(c, out, sizeof out) == 0);
  for (int i = 0; i < 6; i++) CHECK_CLOSE(out[i], K6[i] * bd[i] + bd[i], 1e-6);
  tg_free(c);
  CHECK_BUFS_EQ(alive(), start);
}

TEST(mem_realized_value_unchanged_after_inputs_freed) {
  CHECK_FLAT(realized_outlives_inputs_body);
}

static void lazy_outlives_inputs_body(void) {
  alive_t start = alive();
  tg_scope *s = tg_scope_begin();
  tg_tensor *a = tg_from_data(K6, TG_FLOAT32, S23, 2);
  CHECK(tg_realize(a) == 0);
  const float bd[] = {0.5f, 0.25f, 2, 4, -1, 3};
  tg_tensor *b = tg_from_data(bd, TG_FLOAT32, S23, 2);
  tg_tensor *t = tg_mul(a, b);
  tg_tensor *c = tg_keep(tg_sub(t, b)); /* lazy; needs a and b */
  tg_scope_end(s); /* frees the handles a, b, t */
  churn();
  float out[6] = {0};
  CHECK(tg_to_host(c, out, sizeof out) == 0);
  for (int i = 0; i < 6; i++) CHECK_CLOSE(out[i], K6[i] * bd[i] - bd[i], 1e-6);
  tg_free(c);
  CHECK_BUFS_EQ(alive(), start);
}

TEST(mem_lazy_result_outlives_input_handles) { CHECK_FLAT(lazy_outlives_inputs_body); }

/* ---------------------------------------------- freeing everything is flat */

static void free_everything_body(void) {
  alive_t start = alive();
  enum { N = 16 };
  tg_tensor *ts[N];
  const int64_t sh[] = {256};
  float d[256];
  for (int i = 0; i < 256; i++) d[i] = (float)i;
  for (int i = 0; i < N; i++) {
    ts[i] = tg_from_data(d, TG_FLOAT32, sh, 1);
    CHECK(tg_realize(ts[i]) == 0);
  }
  alive_t full = alive();
  CHECK(full.buffers >= start.buffers + N);
  CHECK(full.bytes >= start.bytes + N * sizeof d);
  for (int i = 0; i < N; i++) tg_free(ts[i]);
  CHECK_BUFS_EQ(alive(), start);
}

TEST(mem_free_everything_returns_to_start) { CHECK_FLAT(free_everything_body); }

static void scope_frees_everything_body(void) {
  alive_t start = alive();
  tg_scope *s = tg_scope_begin();
  const int64_t sh[] = {16, 16};
  float ones[256];
  for (int i = 0; i < 256; i++) ones[i] = 1.0f;
  tg_tensor *x = tg_from_data(ones, TG_FLOAT32, sh, 2);
  tg_tensor *y = tg_matmul(x, tg_transpose(x, 0, 1));
  tg_tensor *z = tg_softmax(y, -1);
  tg_tensor *ts[] = {y, z};
  CHECK(tg_realize_many(ts, 2) == 0);
  const int64_t sz[] = {8, 8};
  tg_tensor *parts[2] = {0};
  CHECK(tg_split(z, sz, 2, 0, parts) == 0);
  tg_tensor *w = tg_cat(parts, 2, 1);
  CHECK(tg_realize(w) == 0);
  CHECK_CLOSE(tg_item(tg_sum(w, NULL, 0, false)), 16.0, 1e-5);
  CHECK(alive().buffers > start.buffers);
  tg_scope_end(s);
  CHECK_BUFS_EQ(alive(), start);
}

TEST(mem_scope_end_frees_everything) { CHECK_FLAT(scope_frees_everything_body); }

/* Results of expressions made only of constants (no input buffer) are freed too:
 * realizing sum(full(v)) for many different v must not pin a buffer (or UOps) per v. */
static int const_expr_iter(int i) {
  tg_scope *s = tg_scope_begin();
  const int64_t sh[] = {16, 16};
  tg_tensor *y = tg_sum(tg_full(sh, 2, (double)i, TG_FLOAT32), NULL, 0, false);
  int bad = tg_realize(y) != 0 || tg_item(y) != 256.0 * i;
  tg_scope_end(s);
  return bad;
}

TEST(mem_const_expression_results_are_freed) {
  int bad = const_expr_iter(0) + const_expr_iter(1);
  alive_t base = alive();
  for (int i = 2; i < 50; i++) bad += const_expr_iter(i);
  CHECK(bad == 0);
  CHECK_ALIVE_EQ(alive(), base);
}

static void const_expr_body(void) {
  alive_t start = alive();
  tg_scope *s = tg_scope_begin();
  const int64_t sh[] = {16, 16};
  tg_tensor *x = tg_ones(sh, 2, TG_FLOAT32);
  tg_tensor *y = tg_softmax(tg_matmul(x, tg_transpose(x, 0, 1)), -1);
  CHECK(tg_realize(y) == 0);
  CHECK_CLOSE(tg_item(tg_sum(y, NULL, 0, false)), 16.0, 1e-5);
  tg_scope_end(s);
  CHECK_BUFS_EQ(alive(), start);
}

TEST(mem_const_expression_buffers_freed_at_scope_end) { CHECK_FLAT(const_expr_body); }

/* ---------------------------------------------------------- alive counters */

TEST(mem_bytes_alive_counts_buffer_bytes) {
  tg_scope *s = tg_scope_begin();
  alive_t start = alive();
  const int64_t sh[] = {1000};
  static double d[1000];
  tg_tensor *a = tg_from_data(d, TG_FLOAT64, sh, 1);
  CHECK(tg_realize(a) == 0);
  alive_t mid = alive();
  CHECK(mid.buffers >= start.buffers + 1);
  CHECK(mid.bytes >= start.bytes + 8000);
  tg_scope_end(s);
  CHECK(alive().buffers == start.buffers);
  CHECK(alive().bytes == start.bytes);
}

TEST(mem_reset_stats_keeps_alive_counts) {
  tg_scope *s = tg_scope_begin();
  tg_tensor *a = tg_from_data(K6, TG_FLOAT32, S23, 2);
  CHECK(tg_realize(a) == 0);
  alive_t before = alive();
  tg_reset_stats();
  CHECK_ALIVE_EQ(alive(), before);
  tg_stats st = tg_get_stats();
  CHECK(st.kernels_run == 0 && st.kernels_compiled == 0 && st.schedules == 0);
  tg_scope_end(s);
}
