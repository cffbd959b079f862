/* test_hostile.c — hostile arguments (issue 19): every call that once read or wrote out of
 * bounds, overflowed int64 or built a nonsense shape now returns NULL (or a negative status)
 * with a message naming the function, and builds nothing. Each test here failed before the
 * fix (a sanitizer report, a crash, or a result where an error was due), except where a
 * comment says it pins valid behaviour next to the fixed edge. The random-call fuzzer
 * (tests/fuzz/api_fuzz.c) and the file-loader fuzzers add their own findings below. */
#include <limits.h>
#include <stdint.h>
#include <stdlib.h>
#include <unistd.h>

#include "harness.h"
#include "runtime/helpers.h" /* tg_error_status: the status a NULL-returning call set */

static const int BAD_AXES[] = {64, 65, INT_MAX, INT_MIN, -1000001, 1000000, -65};
#define NBAD ((int)(sizeof BAD_AXES / sizeof BAD_AXES[0]))
#define BIG (INT64_C(1) << 40)

static int msg_has(const char *s) { return strstr(tg_last_error(), s) != NULL; }

/* r is NULL with status `status` and a message naming op and containing what (may be NULL). */
static int failed_with(tg_tensor *r, int status, const char *op, const char *what) {
  int ok = r == NULL && tg_error_status() == status && msg_has(op) && (!what || msg_has(what));
  if (!ok) printf("  %s: got %s, status %d, \"%s\"\n", op, r ? "a tensor" : "NULL", tg_error_status(), tg_last_error());
  tg_clear_error();
  return ok;
}

static double value0(tg_tensor *t) { return t ? tg_item(t) : NAN; }

/* A lazy float32 tensor of the given shape (never realized: it may be huge). */
static tg_tensor *lazy(const int64_t *shape, int nd) { return tg_full(shape, nd, 1, TG_FLOAT32); }

/* ---------------------------------------------------------------- item 1: axes */

/* Was a heap-buffer-overflow / SEGV in arg_extreme. */
TEST(hostile_argmax_0d_far_axis) {
  tg_scope *s = tg_scope_begin();
  tg_tensor *x = tg_scalar(3, TG_FLOAT32);
  char axis[32];
  for (int i = 0; i < NBAD; i++) {
    snprintf(axis, sizeof axis, "axis %d", BAD_AXES[i]);
    CHECK(failed_with(tg_argmax(x, BAD_AXES[i], false), TG_ERR_ARG, "argmax", axis));
    CHECK(failed_with(tg_argmin(x, BAD_AXES[i], true), TG_ERR_ARG, "argmin", "rank 0"));
  }
  CHECK(failed_with(tg_argmax(x, 1, false), TG_ERR_ARG, "argmax", "axis 1"));
  CHECK(failed_with(tg_argmin(x, -2, false), TG_ERR_ARG, "argmin", "axis -2"));
  CHECK(value0(tg_argmax(x, 0, false)) == 0 && value0(tg_argmin(x, -1, true)) == 0); /* valid: PyTorch gives 0 */
  tg_scope_end(s);
}

typedef tg_tensor *(*axis_fn)(tg_tensor *t, int axis);
static tg_tensor *f_sum(tg_tensor *t, int a) { return tg_sum(t, &a, 1, false); }
static tg_tensor *f_max(tg_tensor *t, int a) { return tg_max(t, &a, 1, true); }
static tg_tensor *f_mean(tg_tensor *t, int a) { return tg_mean(t, &a, 1, false); }
static tg_tensor *f_var(tg_tensor *t, int a) { return tg_var(t, &a, 1, false, 0); }
static tg_tensor *f_any(tg_tensor *t, int a) { return tg_any(t, &a, 1, false); }
static tg_tensor *f_std(tg_tensor *t, int a) { return tg_std(t, &a, 1, true, 0); }
static tg_tensor *f_lse(tg_tensor *t, int a) { return tg_logsumexp(t, a, false); }
static tg_tensor *f_flip(tg_tensor *t, int a) { return tg_flip(t, &a, 1); }
static tg_tensor *f_transpose(tg_tensor *t, int a) { return tg_transpose(t, a, 0); }
static tg_tensor *f_flatten(tg_tensor *t, int a) { return tg_flatten(t, a, -1); }
static tg_tensor *f_gather(tg_tensor *t, int a) { return tg_gather(t, a, tg_zeros_like(tg_cast(t, TG_INT32))); }
static tg_tensor *f_index_select(tg_tensor *t, int a) { return tg_index_select(t, a, tg_scalar(0, TG_INT64)); }
static tg_tensor *f_argmax(tg_tensor *t, int a) { return tg_argmax(t, a, false); }

/* Every function that takes an axis reads a 0-d tensor as having one axis: 0 and -1 work and
 * give x (or what the function gives for one element), as in PyTorch. Most of these were
 * "axis out of range" errors before; squeeze and flip would have read out of bounds. */
static const struct { const char *name; axis_fn fn; double want; } scalar_axis_ops[] = {
    {"sum", f_sum, 2.5},         {"max", f_max, 2.5},         {"mean", f_mean, 2.5},
    {"var", f_var, 0},           {"any", f_any, 1},           {"std", f_std, 0},           {"softmax", tg_softmax, 1},
    {"log_softmax", tg_log_softmax, 0}, {"logsumexp", f_lse, 2.5}, {"cumsum", tg_cumsum, 2.5},
    {"flip", f_flip, 2.5},       {"squeeze", tg_squeeze, 2.5}, {"transpose", f_transpose, 2.5},
    {"flatten", f_flatten, 2.5}, {"gather", f_gather, 2.5},   {"index_select", f_index_select, 2.5},
    {"argmax", f_argmax, 0},
};
#define NSCALAR ((int)(sizeof scalar_axis_ops / sizeof scalar_axis_ops[0]))

TEST(hostile_axis_0d_takes_0_and_minus1) {
  for (int i = 0; i < NSCALAR; i++) {
    for (int a = -1; a <= 0; a++) {
      tg_scope *s = tg_scope_begin();
      tg_tensor *r = scalar_axis_ops[i].fn(tg_scalar(2.5, TG_FLOAT32), a);
      bool ok = r && tg_numel(r) == 1 && tg_ndim(r) <= 1 && value0(r) == scalar_axis_ops[i].want;
      CHECK(ok);
      if (!ok) printf("  %s(0-d, %d): %s\n", scalar_axis_ops[i].name, a, r ? "wrong value" : tg_last_error());
      tg_scope_end(s);
      tg_clear_error();
    }
  }
}

/* Far axes on 0-d and rank-3 tensors: an error naming the function, the axis and the rank. */
TEST(hostile_axis_far_out_of_range_names_op_axis_rank) {
  tg_scope *s = tg_scope_begin();
  tg_tensor *xs[2] = {tg_scalar(1, TG_FLOAT32), tg_full((int64_t[]){2, 3, 4}, 3, 1, TG_FLOAT32)};
  char axis[32], rank[32];
  for (int k = 0; k < 2; k++) {
    snprintf(rank, sizeof rank, "rank %d", tg_ndim(xs[k]));
    for (int i = 0; i < NSCALAR; i++) {
      for (int j = 0; j < NBAD; j++) {
        if (scalar_axis_ops[i].fn == tg_squeeze && BAD_AXES[j] == TG_ALL_AXES) continue;
        snprintf(axis, sizeof axis, "axis %d", BAD_AXES[j]);
        tg_clear_error();
        tg_tensor *r = scalar_axis_ops[i].fn(xs[k], BAD_AXES[j]);
        bool ok = r == NULL && msg_has(scalar_axis_ops[i].name) && msg_has(axis) && msg_has(rank);
        CHECK(ok);
        if (!ok) printf("  %s(%s, %d): \"%s\"\n", scalar_axis_ops[i].name, rank, BAD_AXES[j], tg_last_error());
      }
    }
    CHECK(tg_dim(xs[k], INT_MIN) == -1 && msg_has("dim") && msg_has("axis -2147483648") && msg_has(rank));
    CHECK(failed_with(tg_unsqueeze(xs[k], INT_MAX), TG_ERR_ARG, "unsqueeze", "axis 2147483647"));
    CHECK(failed_with(tg_stack(&xs[k], 1, -1000000), TG_ERR_ARG, "stack", rank));
    CHECK(failed_with(tg_slice(xs[k], 64, 0, 1, 1), TG_ERR_ARG, "slice", "axis 64"));
    CHECK(failed_with(tg_cat(&xs[k], 1, INT_MIN), TG_ERR_ARG, "cat", rank));
    if (k == 1) CHECK(failed_with(tg_permute(xs[k], (int[]){64, 0, 1}, 3), TG_ERR_ARG, "permute", "64"));
    tg_tensor *parts[2];
    CHECK(tg_split(xs[k], (int64_t[]){1, 1}, 2, 1000000, parts) == TG_ERR_ARG && msg_has("split") && msg_has(rank));
    CHECK(parts[0] == NULL && parts[1] == NULL);
  }
  tg_scope_end(s);
}

/* A 0-d tensor has no axis 0 for what needs a real axis (PyTorch errors too). Pins behaviour
 * next to the fix: these were errors before as well. */
TEST(hostile_axis_0d_rejects_where_an_axis_is_needed) {
  tg_scope *s = tg_scope_begin();
  tg_tensor *x = tg_scalar(1, TG_FLOAT32), *parts[1];
  CHECK(tg_dim(x, 0) == -1 && msg_has("dim") && msg_has("rank 0"));
  CHECK(failed_with(tg_slice(x, 0, 0, 1, 1), TG_ERR_ARG, "slice", "rank 0"));
  CHECK(failed_with(tg_cat(&x, 1, -1), TG_ERR_ARG, "cat", "rank 0"));
  CHECK(tg_split(x, (int64_t[]){1}, 1, 0, parts) == TG_ERR_ARG && msg_has("split"));
  CHECK(tg_ndim(tg_unsqueeze(x, -1)) == 1 && tg_ndim(tg_stack(&x, 1, 0)) == 1); /* a new axis: fine */
  tg_scope_end(s);
}

/* ---------------------------------------------------------------- item 2: shapes */

/* UBSan "signed integer overflow" in OP_PAD's shape; the plain build returned negative dims. */
TEST(hostile_pad_overflow) {
  tg_scope *s = tg_scope_begin();
  tg_tensor *x = tg_full((int64_t[]){2, 3}, 2, 1, TG_FLOAT32);
  int64_t big[2] = {INT64_MAX, 0}, half[2] = {INT64_MAX / 2, 0}, zero[2] = {0, 0};
  CHECK(failed_with(tg_pad(x, big, big, 0), TG_ERR_SHAPE, "pad", "overflows int64"));
  CHECK(failed_with(tg_pad(x, half, half, 1), TG_ERR_SHAPE, "pad", NULL));
  CHECK(failed_with(tg_pad(x, zero, (int64_t[]){0, INT64_MAX - 3}, 0), TG_ERR_SHAPE, "pad", "too large"));
  /* bytes decide: (2, 2^61) float32 is 2^64 bytes, (1, 2^62) int8 is fine (lazy) */
  CHECK(failed_with(tg_pad(x, zero, (int64_t[]){0, (INT64_C(1) << 61) - 3}, 0), TG_ERR_SHAPE, "pad", "float32"));
  tg_tensor *b = tg_full((int64_t[]){1, 1}, 2, 1, TG_INT8);
  tg_tensor *p = tg_pad(b, zero, (int64_t[]){0, (INT64_C(1) << 62) - 1}, 0);
  CHECK(p && tg_dim(p, 1) == INT64_C(1) << 62 && tg_numel(p) == INT64_C(1) << 62);
  tg_scope_end(s);
}

/* UBSan in tg_repeat's shape (reps * size) and in shape_numel. */
TEST(hostile_repeat_overflow) {
  tg_scope *s = tg_scope_begin();
  tg_tensor *x = tg_full((int64_t[]){2, 3}, 2, 1, TG_FLOAT32);
  CHECK(failed_with(tg_repeat(x, (int64_t[]){INT64_MAX, 2}, 2), TG_ERR_SHAPE, "repeat", "overflow"));
  CHECK(failed_with(tg_repeat(x, (int64_t[]){BIG, BIG}, 2), TG_ERR_SHAPE, "repeat", "too large"));
  CHECK(failed_with(tg_repeat(x, (int64_t[]){1, 1}, INT_MAX), TG_ERR_SHAPE, "repeat", "rank"));
  CHECK(failed_with(tg_repeat(x, (int64_t[]){1, -1}, 2), TG_ERR_ARG, "repeat", "negative"));
  tg_scope_end(s);
}

/* torch.repeat of a rank-40 tensor: was refused (the old code needed 2 * rank axes). */
TEST(hostile_repeat_high_rank_values) {
  tg_scope *s = tg_scope_begin();
  int64_t shape[40], reps[40];
  for (int i = 0; i < 40; i++) shape[i] = 1, reps[i] = 1;
  shape[39] = 3, reps[38] = 2, reps[39] = 2;
  float d[3] = {1, 2, 3}, out[12], want[12] = {1, 2, 3, 1, 2, 3, 1, 2, 3, 1, 2, 3};
  tg_tensor *r = tg_repeat(tg_from_data(d, TG_FLOAT32, shape, 40), reps, 40);
  CHECK(r && tg_ndim(r) == 40 && tg_dim(r, 38) == 2 && tg_dim(r, 39) == 6);
  CHECK(r && tg_to_host(r, out, sizeof out) == 0 && !memcmp(out, want, sizeof out));
  tg_scope_end(s);
}

/* tg_expand to a shape whose element count overflows: returned as success before. */
TEST(hostile_expand_and_broadcast_overflow) {
  tg_scope *s = tg_scope_begin();
  tg_tensor *one = tg_full((int64_t[]){1, 1}, 2, 1, TG_FLOAT32);
  CHECK(failed_with(tg_expand(one, (int64_t[]){BIG, BIG}, 2), TG_ERR_SHAPE, "expand", "too large"));
  CHECK(failed_with(tg_expand(one, (int64_t[]){INT64_MAX / 2, INT64_MAX / 2}, 2), TG_ERR_SHAPE, "expand", NULL));
  CHECK(failed_with(tg_expand(one, (int64_t[]){1, 1}, INT_MAX), TG_ERR_SHAPE, "expand", "rank"));
  /* broadcasting two valid shapes to an invalid one: caught where the result becomes a tensor */
  tg_tensor *col = lazy((int64_t[]){BIG, 1}, 2), *row = lazy((int64_t[]){1, BIG}, 2);
  CHECK(col && row);
  CHECK(failed_with(tg_add(col, row), TG_ERR_SHAPE, "(1099511627776, 1099511627776)", "too large"));
  CHECK(failed_with(tg_where(tg_cast(col, TG_BOOL), row, col), TG_ERR_SHAPE, "too large", NULL));
  CHECK(failed_with(tg_matmul(lazy((int64_t[]){BIG, BIG / 1024}, 2), lazy((int64_t[]){BIG / 1024, BIG}, 2)),
                    TG_ERR_SHAPE, "too large", NULL));
  tg_scope_end(s);
}

/* Shapes from user numbers: the extent (zeros counted as 1) times the element size must fit.
 * Before: (0, 2^62, 2^62) and an INT64_MAX-long linspace were accepted; reshape's product and
 * eye's n*m overflowed. */
TEST(hostile_creation_shapes) {
  tg_scope *s = tg_scope_begin();
  int64_t empty_huge[3] = {0, INT64_C(1) << 62, INT64_C(1) << 62}, neg[2] = {2, -1};
  CHECK(failed_with(tg_full(empty_huge, 3, 0, TG_FLOAT32), TG_ERR_SHAPE, "full", "too large"));
  CHECK(failed_with(tg_empty(empty_huge, 3, TG_INT8), TG_ERR_SHAPE, "empty", NULL));
  CHECK(failed_with(tg_from_data(NULL, TG_FLOAT32, empty_huge, 3), TG_ERR_SHAPE, "from_data", NULL));
  CHECK(failed_with(tg_zeros(neg, 2, TG_FLOAT32), TG_ERR_SHAPE, "full", "negative"));
  CHECK(failed_with(tg_ones(neg, 65, TG_FLOAT32), TG_ERR_SHAPE, "full", "rank 65"));
  CHECK(failed_with(tg_ones(NULL, 2, TG_FLOAT32), TG_ERR_ARG, "full", "NULL"));
  CHECK(failed_with(tg_linspace(0, 1, INT64_MAX, TG_FLOAT32), TG_ERR_SHAPE, "linspace", "too large"));
  CHECK(failed_with(tg_linspace(0, 1, -1, TG_FLOAT32), TG_ERR_SHAPE, "linspace", "negative"));
  CHECK(failed_with(tg_eye(BIG, BIG, TG_FLOAT32), TG_ERR_SHAPE, "eye", "too large"));
  CHECK(failed_with(tg_eye(INT64_MAX, INT64_MAX, TG_BOOL), TG_ERR_SHAPE, "eye", NULL));
  CHECK(failed_with(tg_eye(2, INT64_MAX / 2, TG_UINT64), TG_ERR_SHAPE, "eye", "8-byte")); /* api_fuzz, seed 1 */
  /* api_fuzz, seed 1: an empty shape with a huge extent passed the random functions' check */
  CHECK(failed_with(tg_glorot_uniform((int64_t[]){0, 5, INT64_MAX}, 3, TG_FLOAT32), TG_ERR_SHAPE, "glorot_uniform", NULL));
  CHECK(failed_with(tg_rand((int64_t[]){0, INT64_C(1) << 62, 4}, 3, TG_FLOAT16), TG_ERR_SHAPE, "rand", "too large"));
  CHECK(failed_with(tg_arange(-1e308, 1e308, 1e-300, TG_FLOAT32), TG_ERR_SHAPE, "arange", "too many")); /* inf count */
  CHECK(failed_with(tg_arange(0, 0x1p61, 1, TG_FLOAT64), TG_ERR_SHAPE, "arange", "too large"));
  tg_tensor *x = tg_full((int64_t[]){2, 3}, 2, 1, TG_FLOAT32), *e = tg_full((int64_t[]){0}, 1, 1, TG_FLOAT32);
  CHECK(failed_with(tg_reshape(x, (int64_t[]){INT64_C(1) << 62, INT64_C(1) << 62, 0}, 3), TG_ERR_SHAPE, "reshape", NULL));
  CHECK(failed_with(tg_reshape(e, empty_huge, 3), TG_ERR_SHAPE, "reshape", "too large"));
  CHECK(failed_with(tg_reshape(x, (int64_t[]){6}, -1), TG_ERR_SHAPE, "reshape", "rank -1"));
  CHECK(failed_with(tg_one_hot(tg_full((int64_t[]){1 << 20}, 1, 0, TG_INT32), INT64_MAX / 2, TG_FLOAT32), TG_ERR_SHAPE,
                    "one_hot", "too large"));
  /* the edge itself: INT64_MAX bool elements is a valid lazy tensor (was refused) */
  tg_tensor *edge = tg_full((int64_t[]){INT64_MAX}, 1, 0, TG_BOOL);
  CHECK(edge && tg_numel(edge) == INT64_MAX);
  CHECK(failed_with(tg_full((int64_t[]){INT64_C(1) << 61}, 1, 0, TG_FLOAT32), TG_ERR_SHAPE, "full", "4-byte"));
  CHECK(tg_full((int64_t[]){(INT64_C(1) << 61) - 1}, 1, 0, TG_FLOAT32) != NULL);
  tg_scope_end(s);
}

/* tg_cat's total and tg_split's sum overflowed; a failed split left outputs behind. */
TEST(hostile_cat_split_overflow) {
  tg_scope *s = tg_scope_begin();
  tg_tensor *big = tg_full((int64_t[]){INT64_C(1) << 62}, 1, 0, TG_INT8), *ts[3] = {big, big, big};
  CHECK(failed_with(tg_cat(ts, 2, 0), TG_ERR_SHAPE, "cat", "2^63")); /* 2^63: one too many */
  CHECK(failed_with(tg_cat(ts, 3, 0), TG_ERR_SHAPE, "cat", "2^63"));
  CHECK(failed_with(tg_stack(ts, 3, 0), TG_ERR_SHAPE, "stack", "too large")); /* (3, 2^62) */
  tg_tensor *c = tg_cat(ts, 1, 0); /* one piece: fine */
  CHECK(c && tg_numel(c) == INT64_C(1) << 62);
  tg_tensor *x = tg_full((int64_t[]){6}, 1, 1, TG_FLOAT32), *out[3] = {x, x, x};
  CHECK(tg_split(x, (int64_t[]){INT64_MAX, INT64_MAX, 2}, 3, 0, out) == TG_ERR_SHAPE && msg_has("split"));
  CHECK(out[0] == NULL && out[1] == NULL && out[2] == NULL);
  tg_scope_end(s);
}

/* Python's slice lengths, computed in 128 bits (CPython's PySlice_AdjustIndices). */
static int64_t py_slice_len(int64_t n, int64_t start, int64_t stop, int64_t step, int64_t *first) {
  __int128 st = start, sp = stop, k = step;
  bool open_start = start == TG_SLICE_END, open_stop = stop == TG_SLICE_END;
  if (open_start) st = k > 0 ? 0 : n - 1;
  else if (st < 0) st = st + n < 0 ? (k < 0 ? -1 : 0) : st + n;
  else if (st >= n) st = k < 0 ? n - 1 : n;
  if (open_stop) sp = k > 0 ? n : -1;
  else if (sp < 0) sp = sp + n < 0 ? (k < 0 ? -1 : 0) : sp + n;
  else if (sp >= n) sp = k < 0 ? n - 1 : n;
  *first = (int64_t)st;
  if (k > 0) return sp > st ? (int64_t)((sp - st - 1) / k + 1) : 0;
  return st > sp ? (int64_t)((st - sp - 1) / (-k) + 1) : 0;
}

/* UBSan "negation of INT64_MIN" and "signed integer overflow" in tg_slice for extreme steps
 * and bounds; the lengths and (for a sample) the values now match Python's. */
TEST(hostile_slice_extremes_match_python) {
  const int64_t n = 7, ends[] = {INT64_MIN, INT64_MIN + 1, -100, -8, -7, -1, 0, 1, 6, 7, 100, INT64_MAX - 1, TG_SLICE_END};
  const int64_t steps[] = {1, 2, 3, -1, -2, -3, 6, -6, INT64_MAX, INT64_MIN, INT64_MAX - 1, -INT64_MAX};
  float d[7] = {0, 1, 2, 3, 4, 5, 6};
  tg_scope *s = tg_scope_begin();
  tg_tensor *x = tg_from_data(d, TG_FLOAT32, &n, 1);
  int checked = 0, bad = 0;
  for (size_t a = 0; a < sizeof ends / sizeof ends[0]; a++)
    for (size_t b = 0; b < sizeof ends / sizeof ends[0]; b++)
      for (size_t c = 0; c < sizeof steps / sizeof steps[0]; c++) {
        int64_t first, len = py_slice_len(n, ends[a], ends[b], steps[c], &first);
        tg_scope *inner = tg_scope_begin();
        tg_tensor *r = tg_slice(x, 0, ends[a], ends[b], steps[c]);
        bool ok = r && tg_dim(r, 0) == len;
        if (ok && (a + b + c) % 17 == 0) { /* values of a sample: a kernel each */
          float out[7] = {0};
          ok = tg_to_host(r, out, sizeof(float) * (size_t)len) == 0;
          for (int64_t i = 0; ok && i < len; i++) ok = out[i] == (float)(first + i * steps[c]);
          checked++;
        }
        if (!ok && bad++ < 5)
          printf("  slice(%lld, %lld, %lld): want %lld elements\n", (long long)ends[a], (long long)ends[b],
                 (long long)steps[c], (long long)len);
        tg_scope_end(inner);
      }
  CHECK(bad == 0 && checked > 50);
  tg_scope_end(s);
}

/* cumsum's (n, n) mask of a long axis: an overflowing intermediate, now a named error. */
TEST(hostile_cumsum_long_axis) {
  tg_scope *s = tg_scope_begin();
  CHECK(failed_with(tg_cumsum(lazy((int64_t[]){INT64_C(1) << 32}, 1), 0), TG_ERR_SHAPE, "cumsum", "too large"));
  tg_scope_end(s);
}

/* Geometry of convolutions and pooling: dilation * kernel, (n-1) * stride and the window
 * rows k * (2i + d) overflowed (UBSan) before any shape was checked. */
TEST(hostile_conv_pool_geometry_overflow) {
  tg_scope *s = tg_scope_begin();
  tg_tensor *x = lazy((int64_t[]){1, 1, BIG, 1}, 4), *w = lazy((int64_t[]){1, 1, BIG / 2, 1}, 4);
  tg_tensor *w1 = lazy((int64_t[]){1, 1, 1, 1}, 4);
  CHECK(failed_with(tg_conv2d(x, w, NULL, NULL, NULL, (int[]){INT_MAX, 1}, 1), TG_ERR_ARG, "conv2d", "does not fit"));
  CHECK(failed_with(tg_conv2d(x, lazy((int64_t[]){1, 1, INT_MAX, 1}, 4), NULL, (int[]){1, 1}, NULL, (int[]){2, 1}, 1),
                    TG_ERR_SHAPE, "conv2d", "overflow"));
  CHECK(failed_with(tg_conv_transpose2d(x, w1, NULL, (int[]){INT_MAX, 1}, NULL, NULL, NULL, 1), TG_ERR_SHAPE,
                    "conv_transpose2d", "overflow"));
  CHECK(failed_with(tg_conv2d(x, w1, NULL, NULL, NULL, NULL, INT_MAX), TG_ERR_ARG, "conv2d", "groups"));
  tg_tensor *p = lazy((int64_t[]){1, BIG, 1}, 3);
  CHECK(failed_with(tg_max_pool2d(p, (int[]){INT_MAX, 1}, (int[]){1, 1}, NULL), TG_ERR_SHAPE, "max_pool2d", "overflow"));
  CHECK(failed_with(tg_avg_pool2d(p, (int[]){INT_MAX, 1}, (int[]){1, 1}, NULL), TG_ERR_SHAPE, "avg_pool2d", NULL));
  tg_scope_end(s);
}

/* Pooling a rank-64 tensor overran the rank-64 arrays of its window views (stack overflow). */
TEST(hostile_pool_rank_limit) {
  tg_scope *s = tg_scope_begin();
  int64_t shape[64];
  for (int i = 0; i < 64; i++) shape[i] = i < 62 ? 1 : 4;
  tg_tensor *x = tg_full(shape, 64, 1, TG_FLOAT32);
  CHECK(failed_with(tg_max_pool2d(x, (int[]){2, 2}, NULL, NULL), TG_ERR_SHAPE, "max_pool2d", "rank 64"));
  tg_tensor *y = tg_max_pool2d(tg_reshape(x, shape + 4, 60), (int[]){2, 2}, NULL, NULL); /* rank 60: fine */
  CHECK(y && tg_ndim(y) == 60 && tg_dim(y, -1) == 2 && value0(tg_sum(y, NULL, 0, false)) == 4);
  tg_scope_end(s);
}

/* conv2d_init's fan-in cin/groups * kh * kw overflowed; the error was reported as NOMEM. */
TEST(hostile_layer_init_sizes) {
  tg_conv2d_layer c;
  CHECK(tg_conv2d_init(&c, INT64_C(1) << 62, 1, INT_MAX, INT_MAX, 1, 0, 1, 1, true) == TG_ERR_SHAPE);
  CHECK(c.weight == NULL && c.bias == NULL && msg_has("kaiming_uniform"));
  tg_linear l;
  CHECK(tg_linear_init(&l, INT64_MAX, INT64_MAX, true) == TG_ERR_SHAPE && l.weight == NULL);
  tg_embedding e;
  CHECK(tg_embedding_init(&e, BIG, BIG) == TG_ERR_SHAPE && e.weight == NULL && msg_has("normal"));
  tg_clear_error();
}

/* tg_shape with a NULL out and a positive cap wrote through NULL. */
TEST(hostile_shape_null_out) {
  tg_scope *s = tg_scope_begin();
  tg_tensor *x = tg_full((int64_t[]){2, 3}, 2, 1, TG_FLOAT32);
  CHECK(tg_shape(x, NULL, 4) == -1 && msg_has("shape") && msg_has("NULL"));
  CHECK(tg_shape(x, NULL, 0) == 2); /* asking only for the rank is fine */
  tg_scope_end(s);
}

/* A failing call leaves nothing behind: no UOps, no buffers, no scope entries. */
TEST(hostile_failures_build_nothing) {
  tg_scope *s = tg_scope_begin();
  tg_tensor *x = tg_full((int64_t[]){2, 3}, 2, 1, TG_FLOAT32), *ts[2] = {x, x};
  tg_tensor *big = tg_full((int64_t[]){INT64_C(1) << 62}, 1, 0, TG_INT8), *bigs[2] = {big, big};
  tg_tensor *s0 = tg_scalar(1, TG_FLOAT32), *col = lazy((int64_t[]){BIG, 1}, 2), *row = lazy((int64_t[]){1, BIG}, 2);
  tg_stats before = tg_get_stats();
  for (int i = 0; i < 3; i++) {
    CHECK(tg_pad(x, (int64_t[]){INT64_MAX, 0}, (int64_t[]){1, 0}, 5) == NULL);
    CHECK(tg_repeat(x, (int64_t[]){INT64_MAX, 1}, 2) == NULL);
    CHECK(tg_cat(bigs, 2, 0) == NULL && tg_cat(ts, 2, 7) == NULL);
    CHECK(tg_cumsum(big, 0) == NULL && tg_argmax(s0, 64, false) == NULL);
    CHECK(tg_mul(col, row) == NULL && tg_where(tg_lt(col, row), col, row) == NULL);
  }
  tg_stats after = tg_get_stats();
  CHECK(after.uops_alive == before.uops_alive && after.buffers_alive == before.buffers_alive);
  tg_scope_end(s);
  tg_clear_error();
}

/* ---------------------------------------------------------------- file loaders */

static char *temp_file(const void *data, size_t n) {
  static char path[64];
  snprintf(path, sizeof path, "/tmp/tg_hostile_XXXXXX");
  int fd = mkstemp(path);
  if (fd < 0) return NULL;
  bool ok = write(fd, data, n) == (ssize_t)n;
  close(fd);
  return ok ? path : NULL;
}

/* A safetensors entry of shape (0, 2^62, 2^62): zero bytes, but no tensor can have that shape
 * (was read into one). */
TEST(hostile_safetensors_extent) {
  const char json[] = "{\"a\":{\"dtype\":\"F32\",\"shape\":[0,4611686018427387904,4611686018427387904],"
                      "\"data_offsets\":[0,0]}}";
  unsigned char file[8 + sizeof json - 1];
  uint64_t n = sizeof json - 1;
  for (int i = 0; i < 8; i++) file[i] = (unsigned char)(n >> (8 * i));
  memcpy(file + 8, json, n);
  char *path = temp_file(file, sizeof file);
  CHECK(path != NULL);
  tg_state_dict sd = {0};
  CHECK(path && tg_safetensors_read(path, &sd) == TG_ERR_IO && sd.n == 0 && msg_has("too large"));
  if (path) unlink(path);
  tg_state_dict_free(&sd);
  tg_clear_error();
}

/* An IDX header (0, 2^32-1, 2^32-1, 2^32-1) of uint8: no data needed, no valid shape. */
TEST(hostile_idx_extent) {
  unsigned char file[4 + 16] = {0, 0, 0x08, 4, 0, 0, 0, 0};
  memset(file + 8, 0xff, 12);
  char *path = temp_file(file, sizeof file);
  CHECK(path != NULL);
  CHECK(path && tg_load_idx(path) == NULL && tg_error_status() == TG_ERR_IO && msg_has("too large"));
  if (path) unlink(path);
  tg_clear_error();
}

/* ---------------------------------------------------------------- api_fuzz findings */

/* api_fuzz (seed 1, call 277; "closing the scope left 1 UOps alive"): tg_pad_mode with nothing to
 * pad (a 0-d tensor, or zero amounts) in reflect/replicate/circular mode returned its input
 * through tg_keep, which moved the caller's tensor out of the caller's scope: a leaked tensor. */
TEST(hostile_pad_mode_nothing_to_pad_leaks_nothing) {
  tg_stats before = tg_get_stats();
  for (int mode = TG_PAD_REFLECT; mode <= TG_PAD_CIRCULAR; mode++) {
    tg_scope *s = tg_scope_begin();
    tg_tensor *x0 = tg_scalar(2, TG_FLOAT32), *x2 = tg_full((int64_t[]){2, 3}, 2, 1, TG_FLOAT32);
    int64_t zero[2] = {0, 0};
    tg_tensor *r0 = tg_pad_mode(x0, zero, zero, (tg_padding)mode, 0), *r2 = tg_pad_mode(x2, zero, zero, (tg_padding)mode, 0);
    CHECK(r0 && r0 != x0 && value0(r0) == 2);
    CHECK(r2 && r2 != x2 && tg_numel(r2) == 6);
    tg_free(r0); /* the result is a handle of its own: freeing it leaves x0 alive */
    CHECK(value0(x0) == 2);
    tg_scope_end(s);
  }
  CHECK(tg_get_stats().uops_alive == before.uops_alive);
}

/* api_fuzz (seed 90094, call 129; heap-buffer-overflow): tg_repeat_interleave_t read the size of
 * the out-of-range axis before it looked at normalize_axis's answer. */
TEST(hostile_repeat_interleave_t_far_axis) {
  tg_scope *s = tg_scope_begin();
  tg_tensor *x = tg_full((int64_t[]){3}, 1, 1, TG_FLOAT32), *reps = tg_full((int64_t[]){3}, 1, 2, TG_INT32);
  for (int i = 0; i < NBAD; i++)
    CHECK(failed_with(tg_repeat_interleave_t(x, reps, BAD_AXES[i]), TG_ERR_ARG, "repeat_interleave", "rank 1"));
  CHECK(failed_with(tg_repeat_interleave_t(x, reps, 2), TG_ERR_ARG, "repeat_interleave", "axis 2"));
  tg_tensor *r = tg_repeat_interleave_t(x, reps, -1);
  CHECK(r && tg_numel(r) == 6);
  tg_scope_end(s);
}
