/* test_errors.c — every bad input gives NULL (or a negative status) and a message in
 * tg_last_error() naming the operation (and, for shape errors, the shapes written like
 * "(2, 3)"); nothing crashes or aborts; a NULL argument keeps the first message. */
#include <stdint.h>
#include <stdlib.h>
#include "harness.h"

static const int64_t S23[] = {2, 3};
static const int64_t S45[] = {4, 5};
static const float D23[] = {1, 2, 3, 4, 5, 6};

/* The current message is non-empty and contains s. */
static int msg_has(const char *s) {
  const char *m = tg_last_error();
  return m != NULL && m[0] != '\0' && strstr(m, s) != NULL;
}

static int msg_empty(void) {
  const char *m = tg_last_error();
  return m != NULL && m[0] == '\0';
}

static tg_tensor *f32(const int64_t *shape, int ndim, double v) {
  return tg_full(shape, ndim, v, TG_FLOAT32);
}

static tg_tensor *i32_data(const int32_t *d, const int64_t *shape, int ndim) {
  return tg_from_data(d, TG_INT32, shape, ndim);
}

/* expr must give NULL and leave a message mentioning opname. */
#define EXPECT_NULL(expr, opname)                                           \
  do {                                                                      \
    tg_clear_error();                                                       \
    tg_tensor *r_ = (expr);                                                 \
    CHECK(r_ == NULL);                                                      \
    CHECK(msg_has(opname));                                                 \
  } while (0)

/* expr (an int) must be negative and leave a message mentioning opname. */
#define EXPECT_NEG(expr, opname)                                            \
  do {                                                                      \
    tg_clear_error();                                                       \
    int rc_ = (expr);                                                       \
    CHECK(rc_ < 0);                                                         \
    CHECK(msg_has(opname));                                                 \
  } while (0)

/* ------------------------------------------------------------ broadcasting */

TEST(err_binary_incompatible_shapes) {
  tg_scope *s = tg_scope_begin();
  tg_tensor *a = f32(S23, 2, 1), *b = f32(S45, 2, 2);
  CHECK(a && b);
  struct { tg_tensor *(*fn)(tg_tensor *, tg_tensor *); const char *name; } ops[] = {
      {tg_add, "add"}, {tg_sub, "sub"},         {tg_mul, "mul"}, {tg_div, "div"},
      {tg_maximum, "maximum"}, {tg_lt, "lt"}, {tg_eq, "eq"},   {tg_pow, "pow"},
  };
  for (size_t i = 0; i < sizeof ops / sizeof ops[0]; i++) {
    tg_clear_error();
    tg_tensor *r = ops[i].fn(a, b);
    CHECK(r == NULL);
    CHECK(msg_has(ops[i].name));
    CHECK(msg_has("(2, 3)"));
    CHECK(msg_has("(4, 5)"));
    if (r != NULL || !msg_has(ops[i].name)) printf("  op: %s\n", ops[i].name);
  }
  tg_scope_end(s);
}

TEST(err_binary_incompatible_shapes_message_add) {
  tg_scope *s = tg_scope_begin();
  tg_tensor *a = f32(S23, 2, 1), *b = f32(S45, 2, 2);
  CHECK(a && b);
  tg_clear_error();
  CHECK(tg_add(a, b) == NULL);
  CHECK(msg_has("add"));
  CHECK(msg_has("(2, 3)"));
  CHECK(msg_has("(4, 5)"));
  tg_scope_end(s);
}

TEST(err_where_incompatible_shapes) {
  tg_scope *s = tg_scope_begin();
  tg_tensor *a = f32(S23, 2, 1), *b = f32(S45, 2, 2);
  tg_tensor *c = tg_full(S23, 2, 1, TG_BOOL);
  CHECK(a && b && c);
  EXPECT_NULL(tg_where(c, a, b), "where");
  CHECK(msg_has("(2, 3)"));
  CHECK(msg_has("(4, 5)"));
  EXPECT_NULL(tg_where(tg_full(S45, 2, 1, TG_BOOL), a, a), "where");
  tg_scope_end(s);
}

/* ------------------------------------------------------------------ matmul */

TEST(err_matmul_inner_dim_mismatch) {
  tg_scope *s = tg_scope_begin();
  tg_tensor *a = f32(S23, 2, 1), *b = f32(S45, 2, 2);
  CHECK(a && b);
  EXPECT_NULL(tg_matmul(a, b), "matmul");
  CHECK(msg_has("(2, 3)"));
  CHECK(msg_has("(4, 5)"));
  tg_scope_end(s);
}

TEST(err_matmul_1d_mismatch) {
  tg_scope *s = tg_scope_begin();
  const int64_t s3[] = {3}, s4[] = {4};
  tg_tensor *a = f32(s3, 1, 1), *b = f32(s4, 1, 1), *m = f32(S45, 2, 1);
  CHECK(a && b && m);
  EXPECT_NULL(tg_matmul(a, b), "matmul");
  EXPECT_NULL(tg_matmul(a, m), "matmul"); /* (3,) @ (4, 5) */
  EXPECT_NULL(tg_matmul(m, a), "matmul"); /* (4, 5) @ (3,) */
  tg_clear_error();
  CHECK(tg_dot(a, b) == NULL);
  CHECK(!msg_empty());
  tg_scope_end(s);
}

TEST(err_matmul_batch_mismatch) {
  tg_scope *s = tg_scope_begin();
  const int64_t sa[] = {2, 2, 3}, sb[] = {3, 3, 4};
  tg_tensor *a = f32(sa, 3, 1), *b = f32(sb, 3, 1);
  CHECK(a && b);
  EXPECT_NULL(tg_matmul(a, b), "matmul"); /* batch 2 vs 3 */
  tg_scope_end(s);
}

TEST(err_matmul_0d) {
  tg_scope *s = tg_scope_begin();
  tg_tensor *sc = tg_scalar(2, TG_FLOAT32), *m = f32(S23, 2, 1);
  CHECK(sc && m);
  EXPECT_NULL(tg_matmul(sc, m), "matmul");
  EXPECT_NULL(tg_matmul(m, sc), "matmul");
  EXPECT_NULL(tg_matmul(sc, sc), "matmul");
  tg_scope_end(s);
}

/* ----------------------------------------------------------------- reshape */

TEST(err_reshape_wrong_count) {
  tg_scope *s = tg_scope_begin();
  tg_tensor *a = f32(S23, 2, 1);
  CHECK(a);
  EXPECT_NULL(tg_reshape(a, S45, 2), "reshape");
  CHECK(msg_has("(2, 3)"));
  CHECK(msg_has("(4, 5)"));
  const int64_t s7[] = {7};
  EXPECT_NULL(tg_reshape(a, s7, 1), "reshape");
  tg_scope_end(s);
}

TEST(err_reshape_two_minus_one) {
  tg_scope *s = tg_scope_begin();
  tg_tensor *a = f32(S23, 2, 1);
  CHECK(a);
  const int64_t sh[] = {-1, -1};
  EXPECT_NULL(tg_reshape(a, sh, 2), "reshape");
  const int64_t sh3[] = {-1, 2, -1};
  EXPECT_NULL(tg_reshape(a, sh3, 3), "reshape");
  tg_scope_end(s);
}

TEST(err_reshape_minus_one_indivisible) {
  tg_scope *s = tg_scope_begin();
  tg_tensor *a = f32(S23, 2, 1);
  CHECK(a);
  const int64_t sh[] = {4, -1};
  EXPECT_NULL(tg_reshape(a, sh, 2), "reshape");
  const int64_t sh2[] = {-1, 5};
  EXPECT_NULL(tg_reshape(a, sh2, 2), "reshape");
  tg_scope_end(s);
}

TEST(err_reshape_negative_dim) {
  tg_scope *s = tg_scope_begin();
  tg_tensor *a = f32(S23, 2, 1);
  CHECK(a);
  const int64_t sh[] = {-2, -3}; /* product is 6, still invalid */
  EXPECT_NULL(tg_reshape(a, sh, 2), "reshape");
  const int64_t sh2[] = {3, -2};
  EXPECT_NULL(tg_reshape(a, sh2, 2), "reshape");
  const int64_t sh3[] = {-6};
  EXPECT_NULL(tg_reshape(a, sh3, 1), "reshape");
  tg_scope_end(s);
}

TEST(err_reshape_bad_ndim_or_null_shape) {
  tg_scope *s = tg_scope_begin();
  tg_tensor *a = f32(S23, 2, 1);
  CHECK(a);
  EXPECT_NULL(tg_reshape(a, S23, -1), "reshape");
  EXPECT_NULL(tg_reshape(a, NULL, 2), "reshape");
  tg_scope_end(s);
}

TEST(err_creation_negative_dim) {
  tg_scope *s = tg_scope_begin();
  const int64_t sh[] = {2, -3};
  EXPECT_NULL(tg_full(sh, 2, 1.0, TG_FLOAT32), "full");
  tg_clear_error();
  CHECK(tg_zeros(sh, 2, TG_FLOAT32) == NULL);
  CHECK(!msg_empty());
  tg_clear_error();
  CHECK(tg_ones(sh, 2, TG_INT32) == NULL);
  CHECK(!msg_empty());
  tg_clear_error();
  CHECK(tg_empty(sh, 2, TG_FLOAT32) == NULL);
  CHECK(!msg_empty());
  float d[6] = {0};
  EXPECT_NULL(tg_from_data(d, TG_FLOAT32, sh, 2), "from_data");
  const int64_t sh1[] = {-1}; /* -1 is only special in reshape/expand */
  EXPECT_NULL(tg_full(sh1, 1, 1.0, TG_FLOAT32), "full");
  tg_clear_error();
  CHECK(tg_eye(-1, 2, TG_FLOAT32) == NULL);
  CHECK(!msg_empty());
  tg_scope_end(s);
}

/* ----------------------------------------------------------------- permute */

TEST(err_permute_duplicate_axes) {
  tg_scope *s = tg_scope_begin();
  tg_tensor *a = f32(S23, 2, 1);
  CHECK(a);
  const int o[] = {0, 0};
  EXPECT_NULL(tg_permute(a, o, 2), "permute");
  const int o2[] = {1, -1}; /* the same axis after normalisation */
  EXPECT_NULL(tg_permute(a, o2, 2), "permute");
  tg_scope_end(s);
}

TEST(err_permute_out_of_range) {
  tg_scope *s = tg_scope_begin();
  tg_tensor *a = f32(S23, 2, 1);
  CHECK(a);
  const int o[] = {0, 2};
  EXPECT_NULL(tg_permute(a, o, 2), "permute");
  const int o2[] = {-3, 0};
  EXPECT_NULL(tg_permute(a, o2, 2), "permute");
  tg_scope_end(s);
}

TEST(err_permute_wrong_length) {
  tg_scope *s = tg_scope_begin();
  tg_tensor *a = f32(S23, 2, 1);
  CHECK(a);
  const int o3[] = {0, 1, 2};
  EXPECT_NULL(tg_permute(a, o3, 3), "permute");
  const int o1[] = {0};
  EXPECT_NULL(tg_permute(a, o1, 1), "permute");
  EXPECT_NULL(tg_permute(a, NULL, 2), "permute");
  tg_scope_end(s);
}

/* ------------------------------------------------------------------ expand */

TEST(err_expand_non_one_axis) {
  tg_scope *s = tg_scope_begin();
  tg_tensor *a = f32(S23, 2, 1);
  CHECK(a);
  const int64_t sh[] = {4, 3};
  EXPECT_NULL(tg_expand(a, sh, 2), "expand");
  CHECK(msg_has("(2, 3)"));
  CHECK(msg_has("(4, 3)"));
  const int64_t sh2[] = {2, 6};
  EXPECT_NULL(tg_expand(a, sh2, 2), "expand");
  tg_scope_end(s);
}

TEST(err_expand_fewer_dims_or_negative) {
  tg_scope *s = tg_scope_begin();
  tg_tensor *a = f32(S23, 2, 1);
  CHECK(a);
  const int64_t sh1[] = {3};
  EXPECT_NULL(tg_expand(a, sh1, 1), "expand");
  const int64_t sh2[] = {2, -2};
  EXPECT_NULL(tg_expand(a, sh2, 2), "expand");
  tg_scope_end(s);
}

/* ------------------------------------------------------------- pad, shrink */

/* Negative padding crops (F.pad), but not more than the axis has. */
TEST(err_pad_crops_too_much) {
  tg_scope *s = tg_scope_begin();
  tg_tensor *a = f32(S23, 2, 1);
  CHECK(a);
  const int64_t z[] = {0, 0}, neg[] = {0, -4}, neg2[] = {0, -2};
  EXPECT_NULL(tg_pad(a, neg, z, 0.0), "pad");
  EXPECT_NULL(tg_pad(a, z, neg, 0.0), "pad");
  EXPECT_NULL(tg_pad(a, neg2, neg2, 0.0), "crops more");
  tg_scope_end(s);
}

TEST(err_shrink_out_of_bounds) {
  tg_scope *s = tg_scope_begin();
  tg_tensor *a = f32(S23, 2, 1);
  CHECK(a);
  const int64_t st[] = {0, 0}, en[] = {2, 4}; /* 4 > 3 */
  EXPECT_NULL(tg_shrink(a, st, en), "shrink");
  const int64_t st2[] = {-1, 0}, en2[] = {2, 3};
  EXPECT_NULL(tg_shrink(a, st2, en2), "shrink");
  const int64_t st3[] = {0, 0}, en3[] = {3, 3}; /* 3 > 2 */
  EXPECT_NULL(tg_shrink(a, st3, en3), "shrink");
  tg_scope_end(s);
}

TEST(err_shrink_start_after_end) {
  tg_scope *s = tg_scope_begin();
  tg_tensor *a = f32(S23, 2, 1);
  CHECK(a);
  const int64_t st[] = {1, 2}, en[] = {2, 1};
  EXPECT_NULL(tg_shrink(a, st, en), "shrink");
  tg_scope_end(s);
}

/* -------------------------------------------------------------- reductions */

TEST(err_reduce_axis_out_of_range) {
  tg_scope *s = tg_scope_begin();
  tg_tensor *a = f32(S23, 2, 1);
  CHECK(a);
  const int ax2[] = {2}, axm3[] = {-3};
  EXPECT_NULL(tg_sum(a, ax2, 1, false), "sum");
  EXPECT_NULL(tg_sum(a, axm3, 1, true), "sum");
  EXPECT_NULL(tg_max(a, ax2, 1, false), "max");
  EXPECT_NULL(tg_min(a, axm3, 1, false), "min");
  EXPECT_NULL(tg_mean(a, ax2, 1, false), "mean");
  EXPECT_NULL(tg_prod(a, ax2, 1, false), "prod");
  tg_clear_error();
  CHECK(tg_var(a, ax2, 1, false, 1.0) == NULL);
  CHECK(!msg_empty());
  tg_scope_end(s);
}

TEST(err_reduce_duplicate_axes) {
  tg_scope *s = tg_scope_begin();
  tg_tensor *a = f32(S23, 2, 1);
  CHECK(a);
  const int dup[] = {0, 0}, dup2[] = {1, -1};
  EXPECT_NULL(tg_sum(a, dup, 2, false), "sum");
  EXPECT_NULL(tg_sum(a, dup2, 2, false), "sum");
  EXPECT_NULL(tg_max(a, dup2, 2, true), "max");
  tg_scope_end(s);
}

TEST(err_reduce_negative_naxes) {
  tg_scope *s = tg_scope_begin();
  tg_tensor *a = f32(S23, 2, 1);
  CHECK(a);
  const int ax[] = {0};
  EXPECT_NULL(tg_sum(a, ax, -1, false), "sum");
  tg_scope_end(s);
}

TEST(err_argmax_axis_out_of_range) {
  tg_scope *s = tg_scope_begin();
  tg_tensor *a = f32(S23, 2, 1);
  CHECK(a);
  EXPECT_NULL(tg_argmax(a, 2, false), "argmax");
  EXPECT_NULL(tg_argmax(a, -3, true), "argmax");
  EXPECT_NULL(tg_argmin(a, 5, false), "argmin");
  tg_scope_end(s);
}

TEST(err_softmax_cumsum_axis_out_of_range) {
  tg_scope *s = tg_scope_begin();
  tg_tensor *a = f32(S23, 2, 1);
  CHECK(a);
  EXPECT_NULL(tg_softmax(a, 2), "softmax");
  EXPECT_NULL(tg_log_softmax(a, -3), "log_softmax");
  EXPECT_NULL(tg_logsumexp(a, 2, false), "logsumexp");
  EXPECT_NULL(tg_cumsum(a, 2), "cumsum");
  tg_scope_end(s);
}

/* ---------------------------------------------------- slice, cat, split, … */

TEST(err_slice_step_zero) {
  tg_scope *s = tg_scope_begin();
  tg_tensor *a = f32(S23, 2, 1);
  CHECK(a);
  EXPECT_NULL(tg_slice(a, 1, 0, 2, 0), "slice");
  EXPECT_NULL(tg_slice(a, 0, 0, TG_SLICE_END, 0), "slice");
  tg_scope_end(s);
}

TEST(err_slice_axis_out_of_range) {
  tg_scope *s = tg_scope_begin();
  tg_tensor *a = f32(S23, 2, 1);
  CHECK(a);
  EXPECT_NULL(tg_slice(a, 2, 0, 1, 1), "slice");
  EXPECT_NULL(tg_slice(a, -3, 0, 1, 1), "slice");
  tg_scope_end(s);
}

TEST(err_cat_mismatched_shapes) {
  tg_scope *s = tg_scope_begin();
  tg_tensor *a = f32(S23, 2, 1), *b = f32(S45, 2, 2);
  CHECK(a && b);
  tg_tensor *ts[] = {a, b};
  EXPECT_NULL(tg_cat(ts, 2, 0), "cat");
  CHECK(msg_has("(2, 3)"));
  CHECK(msg_has("(4, 5)"));
  EXPECT_NULL(tg_cat(ts, 2, 1), "cat");
  const int64_t s1[] = {3};
  tg_tensor *c = f32(s1, 1, 1);
  tg_tensor *ts2[] = {a, c}; /* rank mismatch */
  EXPECT_NULL(tg_cat(ts2, 2, 0), "cat");
  tg_tensor *ts3[] = {a, a};
  EXPECT_NULL(tg_cat(ts3, 2, 2), "cat"); /* axis out of range */
  tg_scope_end(s);
}

TEST(err_cat_n_zero) {
  tg_scope *s = tg_scope_begin();
  tg_tensor *a = f32(S23, 2, 1);
  tg_tensor *ts[] = {a};
  EXPECT_NULL(tg_cat(ts, 0, 0), "cat");
  EXPECT_NULL(tg_cat(ts, -1, 0), "cat");
  EXPECT_NULL(tg_cat(NULL, 0, 0), "cat");
  EXPECT_NULL(tg_stack(ts, 0, 0), "stack");
  tg_scope_end(s);
}

TEST(err_stack_mismatched_shapes) {
  tg_scope *s = tg_scope_begin();
  tg_tensor *a = f32(S23, 2, 1), *b = f32(S45, 2, 2);
  CHECK(a && b);
  tg_tensor *ts[] = {a, b};
  EXPECT_NULL(tg_stack(ts, 2, 0), "stack");
  tg_tensor *ts2[] = {a, a};
  EXPECT_NULL(tg_stack(ts2, 2, 3), "stack"); /* valid axes are -3..2 */
  tg_scope_end(s);
}

TEST(err_split_sizes_not_summing) {
  tg_scope *s = tg_scope_begin();
  const int64_t s6[] = {6};
  tg_tensor *a = f32(s6, 1, 1);
  CHECK(a);
  tg_tensor *out[3] = {0};
  const int64_t sz[] = {2, 3};
  EXPECT_NEG(tg_split(a, sz, 2, 0, out), "split");
  const int64_t sz2[] = {4, 4};
  EXPECT_NEG(tg_split(a, sz2, 2, 0, out), "split");
  const int64_t sz3[] = {7, -1}; /* sums to 6 but has a negative piece */
  EXPECT_NEG(tg_split(a, sz3, 2, 0, out), "split");
  const int64_t sz4[] = {3, 3};
  EXPECT_NEG(tg_split(a, sz4, 2, 1, out), "split"); /* axis out of range */
  EXPECT_NEG(tg_split(a, sz4, 2, 0, NULL), "split");
  tg_scope_end(s);
}

TEST(err_squeeze_non_one_axis) {
  tg_scope *s = tg_scope_begin();
  tg_tensor *a = f32(S23, 2, 1);
  CHECK(a);
  EXPECT_NULL(tg_squeeze(a, 0), "squeeze");
  EXPECT_NULL(tg_squeeze(a, -1), "squeeze");
  EXPECT_NULL(tg_squeeze(a, 2), "squeeze"); /* out of range */
  tg_scope_end(s);
}

TEST(err_unsqueeze_out_of_range) {
  tg_scope *s = tg_scope_begin();
  tg_tensor *a = f32(S23, 2, 1);
  CHECK(a);
  EXPECT_NULL(tg_unsqueeze(a, 3), "unsqueeze");
  EXPECT_NULL(tg_unsqueeze(a, -4), "unsqueeze");
  /* the edges of the valid range work */
  tg_tensor *u = tg_unsqueeze(a, 2), *v = tg_unsqueeze(a, -3);
  CHECK(u && v);
  CHECK(tg_ndim(u) == 3 && tg_dim(u, 2) == 1);
  CHECK(tg_ndim(v) == 3 && tg_dim(v, 0) == 1);
  tg_scope_end(s);
}

TEST(err_transpose_bad_axis) {
  tg_scope *s = tg_scope_begin();
  tg_tensor *a = f32(S23, 2, 1);
  CHECK(a);
  EXPECT_NULL(tg_transpose(a, 0, 2), "transpose");
  EXPECT_NULL(tg_transpose(a, -3, 1), "transpose");
  tg_scope_end(s);
}

TEST(err_flip_bad_axes) {
  tg_scope *s = tg_scope_begin();
  tg_tensor *a = f32(S23, 2, 1);
  CHECK(a);
  const int ax[] = {2}, dup[] = {0, 0};
  EXPECT_NULL(tg_flip(a, ax, 1), "flip");
  EXPECT_NULL(tg_flip(a, dup, 2), "flip");
  tg_scope_end(s);
}

TEST(err_flatten_bad_range) {
  tg_scope *s = tg_scope_begin();
  tg_tensor *a = f32(S23, 2, 1);
  CHECK(a);
  EXPECT_NULL(tg_flatten(a, 1, 0), "flatten");
  EXPECT_NULL(tg_flatten(a, 0, 2), "flatten");
  tg_scope_end(s);
}

TEST(err_repeat_bad_reps) {
  tg_scope *s = tg_scope_begin();
  tg_tensor *a = f32(S23, 2, 1);
  CHECK(a);
  const int64_t r1[] = {2};
  EXPECT_NULL(tg_repeat(a, r1, 1), "repeat"); /* fewer reps than dims */
  const int64_t rn[] = {1, -1};
  EXPECT_NULL(tg_repeat(a, rn, 2), "repeat");
  tg_scope_end(s);
}

/* --------------------------------------------------------- NULL arguments */

/* Sets a known first error and returns a copy of its message. */
static void make_first_error(char *buf, size_t n) {
  tg_clear_error();
  tg_tensor *a = tg_full(S23, 2, 1.0, TG_FLOAT32);
  tg_tensor *bad = tg_reshape(a, S45, 2);
  (void)bad;
  snprintf(buf, n, "%s", tg_last_error());
}

#define KEEPS(expr)                                                         \
  do {                                                                      \
    tg_tensor *r_ = (expr);                                                 \
    CHECK(r_ == NULL);                                                      \
    CHECK(strcmp(tg_last_error(), first) == 0);                             \
  } while (0)

#define KEEPS_NEG(expr)                                                     \
  do {                                                                      \
    int rc_ = (expr);                                                       \
    CHECK(rc_ < 0);                                                         \
    CHECK(strcmp(tg_last_error(), first) == 0);                             \
  } while (0)

TEST(err_null_keeps_first_message) {
  tg_scope *s = tg_scope_begin();
  tg_tensor *a = f32(S23, 2, 1), *y = f32(S23, 2, 2);
  CHECK(a && y);
  tg_clear_error();
  tg_tensor *x = tg_reshape(a, S45, 2);
  CHECK(x == NULL);
  char first[512];
  snprintf(first, sizeof first, "%s", tg_last_error());
  CHECK(first[0] != '\0');
  CHECK(strstr(first, "reshape") != NULL);
  KEEPS(tg_add(x, y));
  KEEPS(tg_add(y, x));
  /* a whole expression built on the failed one still reports the first error */
  tg_tensor *z = tg_relu(tg_mul_s(tg_add(x, y), 2.0));
  CHECK(z == NULL);
  CHECK(strcmp(tg_last_error(), first) == 0);
  KEEPS_NEG(tg_realize(z));
  float buf[6];
  KEEPS_NEG(tg_to_host(z, buf, sizeof buf));
  tg_scope_end(s);
}

TEST(err_null_arg_without_prior_error_sets_message) {
  tg_scope *s = tg_scope_begin();
  tg_tensor *a = f32(S23, 2, 1);
  CHECK(a);
  tg_clear_error();
  CHECK(tg_add(NULL, a) == NULL);
  CHECK(!msg_empty());
  tg_clear_error();
  CHECK(tg_relu(NULL) == NULL);
  CHECK(!msg_empty());
  tg_clear_error();
  CHECK(tg_realize(NULL) < 0);
  CHECK(!msg_empty());
  tg_scope_end(s);
}

TEST(err_null_creation_like) {
  tg_scope *s = tg_scope_begin();
  char first[512];
  make_first_error(first, sizeof first);
  CHECK(first[0] != '\0');
  KEEPS(tg_full_like(NULL, 1.0));
  KEEPS(tg_zeros_like(NULL));
  KEEPS(tg_ones_like(NULL));
  KEEPS(tg_empty_like(NULL));
  tg_scope_end(s);
}

TEST(err_null_unary) {
  tg_scope *s = tg_scope_begin();
  char first[512];
  make_first_error(first, sizeof first);
  CHECK(first[0] != '\0');
  tg_tensor *(*fns[])(tg_tensor *) = {
      tg_neg,   tg_exp,         tg_exp2,   tg_log,   tg_log2,     tg_sqrt,  tg_rsqrt,
      tg_relu,  tg_abs,         tg_sign,   tg_reciprocal, tg_square, tg_sin, tg_cos,
      tg_tan,   tg_tanh,        tg_sigmoid, tg_floor, tg_ceil,    tg_round, tg_trunc,
      tg_isnan, tg_isinf,       tg_logical_not, tg_bitwise_not, tg_contiguous,
  };
  for (size_t i = 0; i < sizeof fns / sizeof fns[0]; i++) {
    tg_tensor *r = fns[i](NULL);
    CHECK(r == NULL);
    CHECK(strcmp(tg_last_error(), first) == 0);
    if (r || strcmp(tg_last_error(), first) != 0) printf("  unary fn #%zu\n", i);
  }
  KEEPS(tg_clip(NULL, 0, 1));
  KEEPS(tg_cast(NULL, TG_INT32));
  KEEPS(tg_bitcast(NULL, TG_INT32));
  KEEPS(tg_shl(NULL, 1));
  KEEPS(tg_shr(NULL, 1));
  tg_scope_end(s);
}

TEST(err_null_binary) {
  tg_scope *s = tg_scope_begin();
  tg_tensor *a = f32(S23, 2, 1);
  tg_tensor *ai = tg_full(S23, 2, 1, TG_INT32);
  CHECK(a && ai);
  char first[512];
  make_first_error(first, sizeof first);
  CHECK(first[0] != '\0');
  tg_tensor *(*fns[])(tg_tensor *, tg_tensor *) = {
      tg_add, tg_sub, tg_mul, tg_div, tg_floordiv, tg_idiv, tg_mod, tg_pow, tg_maximum,
      tg_minimum, tg_eq, tg_ne, tg_lt, tg_le, tg_gt, tg_ge, tg_logical_and, tg_logical_or,
      tg_logical_xor, tg_matmul, tg_dot,
  };
  for (size_t i = 0; i < sizeof fns / sizeof fns[0]; i++) {
    tg_tensor *r1 = fns[i](NULL, a), *r2 = fns[i](a, NULL), *r3 = fns[i](NULL, NULL);
    CHECK(r1 == NULL && r2 == NULL && r3 == NULL);
    CHECK(strcmp(tg_last_error(), first) == 0);
  }
  tg_tensor *(*ifns[])(tg_tensor *, tg_tensor *) = {tg_bitwise_and, tg_bitwise_or,
                                                    tg_bitwise_xor};
  for (size_t i = 0; i < sizeof ifns / sizeof ifns[0]; i++) {
    KEEPS(ifns[i](NULL, ai));
    KEEPS(ifns[i](ai, NULL));
  }
  tg_tensor *c = tg_full(S23, 2, 1, TG_BOOL);
  CHECK(c);
  make_first_error(first, sizeof first);
  KEEPS(tg_where(NULL, a, a));
  KEEPS(tg_where(c, NULL, a));
  KEEPS(tg_where(c, a, NULL));
  tg_scope_end(s);
}

TEST(err_null_scalar_ops) {
  tg_scope *s = tg_scope_begin();
  char first[512];
  make_first_error(first, sizeof first);
  CHECK(first[0] != '\0');
  KEEPS(tg_add_s(NULL, 1));
  KEEPS(tg_sub_s(NULL, 1));
  KEEPS(tg_mul_s(NULL, 1));
  KEEPS(tg_div_s(NULL, 1));
  KEEPS(tg_pow_s(NULL, 1));
  KEEPS(tg_rsub_s(1, NULL));
  tg_scope_end(s);
}

TEST(err_null_reductions) {
  tg_scope *s = tg_scope_begin();
  char first[512];
  make_first_error(first, sizeof first);
  CHECK(first[0] != '\0');
  const int ax[] = {0};
  KEEPS(tg_sum(NULL, ax, 1, false));
  KEEPS(tg_sum(NULL, NULL, 0, false));
  KEEPS(tg_prod(NULL, NULL, 0, false));
  KEEPS(tg_max(NULL, ax, 1, true));
  KEEPS(tg_min(NULL, NULL, 0, false));
  KEEPS(tg_mean(NULL, NULL, 0, false));
  KEEPS(tg_var(NULL, NULL, 0, false, 1.0));
  KEEPS(tg_std(NULL, NULL, 0, false, 1.0));
  KEEPS(tg_any(NULL, NULL, 0, false));
  KEEPS(tg_all(NULL, NULL, 0, false));
  KEEPS(tg_argmax(NULL, 0, false));
  KEEPS(tg_argmin(NULL, 0, false));
  KEEPS(tg_softmax(NULL, -1));
  KEEPS(tg_log_softmax(NULL, -1));
  KEEPS(tg_logsumexp(NULL, -1, false));
  KEEPS(tg_cumsum(NULL, 0));
  tg_scope_end(s);
}

TEST(err_null_movement) {
  tg_scope *s = tg_scope_begin();
  char first[512];
  make_first_error(first, sizeof first);
  CHECK(first[0] != '\0');
  const int64_t sh[] = {6}, z[] = {0, 0}, one[] = {1, 1};
  const int order[] = {1, 0}, ax[] = {0};
  KEEPS(tg_reshape(NULL, sh, 1));
  KEEPS(tg_permute(NULL, order, 2));
  KEEPS(tg_expand(NULL, S23, 2));
  KEEPS(tg_pad(NULL, z, z, 0));
  KEEPS(tg_shrink(NULL, z, one));
  KEEPS(tg_flip(NULL, ax, 1));
  KEEPS(tg_transpose(NULL, 0, 1));
  KEEPS(tg_squeeze(NULL, 0));
  KEEPS(tg_squeeze(NULL, TG_ALL_AXES));
  KEEPS(tg_unsqueeze(NULL, 0));
  KEEPS(tg_flatten(NULL, 0, -1));
  KEEPS(tg_slice(NULL, 0, 0, 1, 1));
  KEEPS(tg_repeat(NULL, one, 2));
  KEEPS(tg_contiguous(NULL));
  tg_scope_end(s);
}

TEST(err_null_cat_stack_split) {
  tg_scope *s = tg_scope_begin();
  tg_tensor *a = f32(S23, 2, 1);
  CHECK(a);
  char first[512];
  make_first_error(first, sizeof first);
  CHECK(first[0] != '\0');
  tg_tensor *ts[] = {a, NULL};
  tg_tensor *ts2[] = {NULL, a};
  KEEPS(tg_cat(ts, 2, 0));
  KEEPS(tg_cat(ts2, 2, 0));
  KEEPS(tg_stack(ts, 2, 0));
  tg_tensor *out[2] = {0};
  const int64_t sz[] = {1, 1};
  KEEPS_NEG(tg_split(NULL, sz, 2, 0, out));
  tg_scope_end(s);
}

TEST(err_null_indexing_and_linear) {
  tg_scope *s = tg_scope_begin();
  tg_tensor *a = f32(S23, 2, 1);
  const int32_t idx[] = {0, 1, 0, 1, 0, 1};
  tg_tensor *ix = i32_data(idx, S23, 2);
  CHECK(a && ix);
  char first[512];
  make_first_error(first, sizeof first);
  CHECK(first[0] != '\0');
  KEEPS(tg_gather(NULL, 0, ix));
  KEEPS(tg_gather(a, 0, NULL));
  KEEPS(tg_index_select(NULL, 0, ix));
  KEEPS(tg_index_select(a, 0, NULL));
  KEEPS(tg_one_hot(NULL, 3, TG_FLOAT32));
  KEEPS(tg_matmul(NULL, a));
  KEEPS(tg_dot(a, NULL));
  tg_scope_end(s);
}

TEST(err_null_realize_and_host) {
  tg_scope *s = tg_scope_begin();
  tg_tensor *a = f32(S23, 2, 1);
  CHECK(a);
  char first[512];
  make_first_error(first, sizeof first);
  CHECK(first[0] != '\0');
  float buf[6];
  KEEPS_NEG(tg_realize(NULL));
  KEEPS_NEG(tg_to_host(NULL, buf, sizeof buf));
  tg_tensor *ts[] = {a, NULL};
  KEEPS_NEG(tg_realize_many(ts, 2));
  KEEPS_NEG(tg_assign_data(NULL, buf, sizeof buf));
  KEEPS_NEG(tg_assign(NULL, a));
  KEEPS_NEG(tg_assign(a, NULL));
  CHECK(isnan(tg_item(NULL)));
  CHECK(strcmp(tg_last_error(), first) == 0);
  tg_scope_end(s);
}

TEST(err_null_realize_returns_negative) {
  tg_clear_error();
  CHECK(tg_realize(NULL) < 0);
  float buf[4];
  CHECK(tg_to_host(NULL, buf, sizeof buf) < 0);
  CHECK(tg_realize_many(NULL, 1) < 0);
}

TEST(err_null_inspection) {
  int64_t shp[4];
  CHECK(tg_ndim(NULL) == -1);
  CHECK(tg_dim(NULL, 0) == -1);
  CHECK(tg_numel(NULL) == -1);
  CHECK(tg_get_dtype(NULL) == TG_DTYPE_COUNT);
  CHECK(tg_shape(NULL, shp, 4) == -1);
  CHECK(!tg_is_realized(NULL));
}

TEST(err_dim_axis_out_of_range) {
  tg_scope *s = tg_scope_begin();
  tg_tensor *a = f32(S23, 2, 1);
  CHECK(a);
  CHECK(tg_dim(a, 2) == -1);
  CHECK(tg_dim(a, -3) == -1);
  CHECK(tg_dim(a, -1) == 3);
  CHECK(tg_dim(a, 0) == 2);
  tg_scope_end(s);
}

TEST(err_null_keep_retain_free) {
  tg_clear_error();
  CHECK(tg_keep(NULL) == NULL);
  CHECK(tg_retain(NULL) == NULL);
  tg_free(NULL);
  tg_scope_end(NULL);
  tg_free(NULL);
  CHECK(msg_empty());
}

TEST(err_free_null_and_scope_end_null_are_noops) {
  tg_clear_error();
  tg_scope *s = tg_scope_begin();
  CHECK(s != NULL);
  tg_free(NULL);
  tg_scope_end(NULL);
  CHECK(msg_empty());
  /* the real scope still works after the no-ops */
  tg_tensor *a = tg_from_data(D23, TG_FLOAT32, S23, 2);
  tg_tensor *b = tg_add_s(a, 1.0);
  float out[6] = {0};
  CHECK(tg_to_host(b, out, sizeof out) == 0);
  for (int i = 0; i < 6; i++) CHECK_CLOSE(out[i], D23[i] + 1.0f, 1e-6);
  tg_scope_end(s);
}

/* ---------------------------------------------------------------- to_host */

TEST(err_to_host_too_small) {
  tg_scope *s = tg_scope_begin();
  tg_tensor *a = tg_from_data(D23, TG_FLOAT32, S23, 2);
  CHECK(a);
  unsigned char buf[32];
  memset(buf, 0xAB, sizeof buf);
  EXPECT_NEG(tg_to_host(a, buf, 20), "to_host");
  for (int i = 20; i < 32; i++) CHECK(buf[i] == 0xAB); /* nothing written past nbytes */
  EXPECT_NEG(tg_to_host(a, buf, 0), "to_host");
  tg_scope_end(s);
}

TEST(err_to_host_too_large) {
  tg_scope *s = tg_scope_begin();
  tg_tensor *a = tg_from_data(D23, TG_FLOAT32, S23, 2);
  CHECK(a);
  float buf[8];
  EXPECT_NEG(tg_to_host(a, buf, 28), "to_host");
  EXPECT_NEG(tg_to_host(a, buf, sizeof buf), "to_host");
  tg_scope_end(s);
}

TEST(err_to_host_null_dst) {
  tg_scope *s = tg_scope_begin();
  tg_tensor *a = tg_from_data(D23, TG_FLOAT32, S23, 2);
  CHECK(a);
  EXPECT_NEG(tg_to_host(a, NULL, 24), "to_host");
  tg_scope_end(s);
}

TEST(err_to_host_status_code) {
  tg_scope *s = tg_scope_begin();
  tg_tensor *a = tg_from_data(D23, TG_FLOAT32, S23, 2);
  CHECK(a);
  float buf[8];
  CHECK(tg_to_host(a, buf, 20) == TG_ERR_ARG);
  CHECK(tg_to_host(a, NULL, 24) == TG_ERR_ARG);
  CHECK(tg_to_host(NULL, buf, 24) == TG_ERR_ARG);
  /* the right size still works */
  CHECK(tg_to_host(a, buf, 24) == TG_OK);
  for (int i = 0; i < 6; i++) CHECK(buf[i] == D23[i]);
  tg_scope_end(s);
}

TEST(err_assign_data_wrong_size) {
  tg_scope *s = tg_scope_begin();
  tg_tensor *a = tg_from_data(D23, TG_FLOAT32, S23, 2);
  CHECK(a);
  float buf[8] = {0};
  EXPECT_NEG(tg_assign_data(a, buf, 20), "assign_data");
  EXPECT_NEG(tg_assign_data(a, buf, 32), "assign_data");
  EXPECT_NEG(tg_assign_data(a, NULL, 24), "assign_data");
  /* a is untouched */
  float out[6];
  CHECK(tg_to_host(a, out, sizeof out) == 0);
  for (int i = 0; i < 6; i++) CHECK(out[i] == D23[i]);
  tg_scope_end(s);
}

TEST(err_assign_shape_mismatch) {
  tg_scope *s = tg_scope_begin();
  tg_tensor *a = f32(S23, 2, 1), *b = f32(S45, 2, 2);
  CHECK(a && b);
  EXPECT_NEG(tg_assign(a, b), "assign");
  tg_scope_end(s);
}

/* ------------------------------------------------------------------ dtypes */

TEST(err_invalid_dtype_full) {
  tg_scope *s = tg_scope_begin();
  EXPECT_NULL(tg_full(S23, 2, 1.0, (tg_dtype)99), "full");
  EXPECT_NULL(tg_full(S23, 2, 1.0, TG_DTYPE_COUNT), "full");
  EXPECT_NULL(tg_full(S23, 2, 1.0, (tg_dtype)-1), "full");
  tg_clear_error();
  CHECK(tg_zeros(S23, 2, (tg_dtype)99) == NULL);
  CHECK(!msg_empty());
  tg_clear_error();
  CHECK(tg_ones(S23, 2, TG_DTYPE_COUNT) == NULL);
  CHECK(!msg_empty());
  tg_clear_error();
  CHECK(tg_empty(S23, 2, TG_DTYPE_COUNT) == NULL);
  CHECK(!msg_empty());
  tg_clear_error();
  CHECK(tg_scalar(1.0, (tg_dtype)99) == NULL);
  CHECK(!msg_empty());
  tg_clear_error();
  CHECK(tg_eye(2, 2, (tg_dtype)99) == NULL);
  CHECK(!msg_empty());
  tg_scope_end(s);
}

TEST(err_invalid_dtype_cast) {
  tg_scope *s = tg_scope_begin();
  tg_tensor *a = f32(S23, 2, 1);
  CHECK(a);
  EXPECT_NULL(tg_cast(a, (tg_dtype)99), "cast");
  EXPECT_NULL(tg_cast(a, TG_DTYPE_COUNT), "cast");
  EXPECT_NULL(tg_bitcast(a, TG_DTYPE_COUNT), "bitcast");
  tg_scope_end(s);
}

TEST(err_invalid_dtype_from_data) {
  tg_scope *s = tg_scope_begin();
  EXPECT_NULL(tg_from_data(D23, (tg_dtype)99, S23, 2), "from_data");
  EXPECT_NULL(tg_from_data(D23, TG_DTYPE_COUNT, S23, 2), "from_data");
  tg_scope_end(s);
}

TEST(err_invalid_dtype_arange_linspace) {
  tg_scope *s = tg_scope_begin();
  EXPECT_NULL(tg_arange(0, 4, 1, (tg_dtype)99), "arange");
  EXPECT_NULL(tg_arange(0, 4, 1, TG_DTYPE_COUNT), "arange");
  EXPECT_NULL(tg_linspace(0, 1, 5, TG_DTYPE_COUNT), "linspace");
  tg_scope_end(s);
}

TEST(err_invalid_dtype_queries) {
  CHECK(tg_dtype_size((tg_dtype)99) == 0);
  CHECK(tg_dtype_size(TG_DTYPE_COUNT) == 0);
  CHECK(strcmp(tg_dtype_name((tg_dtype)99), "invalid") == 0);
  CHECK(strcmp(tg_dtype_name(TG_DTYPE_COUNT), "invalid") == 0);
  CHECK(!tg_dtype_is_float((tg_dtype)99));
  CHECK(tg_dtype_size(TG_FLOAT32) == 4);
  CHECK(strcmp(tg_dtype_name(TG_FLOAT32), "float32") == 0);
}

TEST(err_bitcast_different_sizes) {
  tg_scope *s = tg_scope_begin();
  tg_tensor *a = f32(S23, 2, 1);
  CHECK(a);
  EXPECT_NULL(tg_bitcast(a, TG_INT16), "bitcast");
  EXPECT_NULL(tg_bitcast(a, TG_FLOAT64), "bitcast");
  EXPECT_NULL(tg_bitcast(a, TG_BOOL), "bitcast");
  /* same size works */
  tg_tensor *b = tg_bitcast(a, TG_INT32);
  CHECK(b != NULL);
  int32_t out[6] = {0};
  CHECK(tg_to_host(b, out, sizeof out) == 0);
  CHECK(out[0] == 0x3f800000); /* 1.0f */
  tg_scope_end(s);
}

TEST(err_shift_on_float) {
  tg_scope *s = tg_scope_begin();
  tg_tensor *a = f32(S23, 2, 1);
  CHECK(a);
  EXPECT_NULL(tg_shl(a, 1), "shl");
  EXPECT_NULL(tg_shr(a, 1), "shr");
  tg_scope_end(s);
}

TEST(err_bitwise_on_float) {
  tg_scope *s = tg_scope_begin();
  tg_tensor *a = f32(S23, 2, 1), *b = f32(S23, 2, 2);
  tg_tensor *ai = tg_full(S23, 2, 3, TG_INT32);
  CHECK(a && b && ai);
  EXPECT_NULL(tg_bitwise_and(a, b), "bitwise_and");
  EXPECT_NULL(tg_bitwise_or(a, b), "bitwise_or");
  EXPECT_NULL(tg_bitwise_xor(a, b), "bitwise_xor");
  EXPECT_NULL(tg_bitwise_not(a), "bitwise_not");
  EXPECT_NULL(tg_bitwise_and(ai, a), "bitwise_and"); /* int & float */
  tg_scope_end(s);
}

TEST(err_gather_float_index) {
  tg_scope *s = tg_scope_begin();
  tg_tensor *a = f32(S23, 2, 1);
  tg_tensor *fi = tg_zeros(S23, 2, TG_FLOAT32);
  CHECK(a && fi);
  EXPECT_NULL(tg_gather(a, 0, fi), "gather");
  EXPECT_NULL(tg_index_select(a, 0, fi), "index_select");
  EXPECT_NULL(tg_one_hot(fi, 3, TG_FLOAT32), "one_hot");
  tg_scope_end(s);
}

TEST(err_gather_bad_axis_or_rank) {
  tg_scope *s = tg_scope_begin();
  tg_tensor *a = f32(S23, 2, 1);
  const int32_t idx[] = {0, 1, 0, 1, 0, 1};
  const int64_t s6[] = {6};
  tg_tensor *ix = i32_data(idx, S23, 2), *ix1 = i32_data(idx, s6, 1);
  CHECK(a && ix && ix1);
  EXPECT_NULL(tg_gather(a, 2, ix), "gather");
  EXPECT_NULL(tg_gather(a, 0, ix1), "gather"); /* index rank must equal t's */
  EXPECT_NULL(tg_index_select(a, 2, ix1), "index_select");
  tg_scope_end(s);
}

TEST(err_from_data_null_data) {
  tg_scope *s = tg_scope_begin();
  EXPECT_NULL(tg_from_data(NULL, TG_FLOAT32, S23, 2), "from_data");
  tg_scope_end(s);
}

TEST(err_from_data_negative_ndim) {
  tg_scope *s = tg_scope_begin();
  EXPECT_NULL(tg_from_data(D23, TG_FLOAT32, S23, -1), "from_data");
  EXPECT_NULL(tg_from_data(D23, TG_FLOAT32, NULL, 2), "from_data");
  tg_clear_error();
  CHECK(tg_full(S23, -1, 1.0, TG_FLOAT32) == NULL);
  CHECK(!msg_empty());
  tg_scope_end(s);
}

TEST(err_arange_step_zero) {
  tg_scope *s = tg_scope_begin();
  EXPECT_NULL(tg_arange(0, 4, 0, TG_FLOAT32), "arange");
  EXPECT_NULL(tg_arange(0, 4, 0, TG_INT32), "arange");
  tg_scope_end(s);
}

TEST(err_linspace_negative_n) {
  tg_scope *s = tg_scope_begin();
  EXPECT_NULL(tg_linspace(0, 1, -1, TG_FLOAT32), "linspace");
  EXPECT_NULL(tg_linspace(0, 1, -100, TG_FLOAT32), "linspace");
  tg_scope_end(s);
}

TEST(err_item_more_than_one_element) {
  tg_scope *s = tg_scope_begin();
  tg_tensor *a = tg_from_data(D23, TG_FLOAT32, S23, 2);
  CHECK(a);
  tg_clear_error();
  double v = tg_item(a);
  CHECK(isnan(v));
  CHECK(msg_has("item"));
  /* one element works, whatever its rank */
  const int64_t s11[] = {1, 1};
  const float seven = 7.0f;
  tg_tensor *b = tg_from_data(&seven, TG_FLOAT32, s11, 2);
  CHECK(tg_item(b) == 7.0);
  tg_scope_end(s);
}

/* ------------------------------------------------- recovery after errors */

TEST(err_valid_ops_work_after_errors) {
  tg_scope *s = tg_scope_begin();
  tg_tensor *a = tg_from_data(D23, TG_FLOAT32, S23, 2);
  tg_tensor *b = f32(S45, 2, 2);
  CHECK(a && b);
  /* a bunch of failures, including some on realize paths */
  CHECK(tg_add(a, b) == NULL);
  CHECK(tg_matmul(a, a) == NULL);
  CHECK(tg_reshape(a, S45, 2) == NULL);
  CHECK(tg_realize(NULL) < 0);
  float small[2];
  CHECK(tg_to_host(a, small, sizeof small) < 0);
  CHECK(tg_full(S23, 2, 1, TG_DTYPE_COUNT) == NULL);
  tg_tensor *bad = tg_relu(tg_add(a, b));
  CHECK(bad == NULL);
  CHECK(tg_realize(bad) < 0);
  CHECK(!msg_empty());
  tg_clear_error();
  CHECK(msg_empty());
  /* now a valid expression: relu(a^T @ a - 20) summed over axis 0 */
  tg_tensor *at = tg_transpose(a, 0, 1);
  tg_tensor *m = tg_matmul(at, a); /* (3, 3) */
  tg_tensor *r = tg_relu(tg_sub_s(m, 20.0));
  const int ax0[] = {0};
  tg_tensor *sm = tg_sum(r, ax0, 1, false);
  CHECK(sm != NULL);
  CHECK(tg_realize(sm) == 0);
  float out[3] = {0};
  CHECK(tg_to_host(sm, out, sizeof out) == 0);
  float ref[3] = {0, 0, 0};
  for (int i = 0; i < 3; i++)
    for (int j = 0; j < 3; j++) {
      float acc = 0;
      for (int k = 0; k < 2; k++) acc += D23[k * 3 + i] * D23[k * 3 + j];
      acc -= 20.0f;
      ref[j] += acc > 0 ? acc : 0;
    }
  for (int j = 0; j < 3; j++) CHECK_CLOSE(out[j], ref[j], 1e-5);
  CHECK(msg_empty());
  tg_scope_end(s);
}

TEST(err_scope_still_frees_after_errors) {
  tg_stats before = tg_get_stats();
  tg_scope *s = tg_scope_begin();
  tg_tensor *a = tg_from_data(D23, TG_FLOAT32, S23, 2);
  CHECK(tg_realize(a) == 0);
  CHECK(tg_add(a, tg_full(S45, 2, 1, TG_FLOAT32)) == NULL);
  CHECK(tg_reshape(a, S45, 2) == NULL);
  tg_scope_end(s);
  tg_stats after = tg_get_stats();
  CHECK(after.buffers_alive == before.buffers_alive);
}
