/* test_ops_audit.c — issue 12 close-out (/work/notes/audit12.md): what the audit of the issue's
 * items found untested in tests/test_ops_elementwise.c, test_ops_index.c and test_ops_conv.c.
 * Behaviour that needs no fixture: 0-d inputs to the indexing and sorting functions, empty
 * inputs, NaN and -0.0 in sort/topk, the float64 slope of hardsigmoid (a documented difference),
 * tg's leniency on 0-d axes where PyTorch raises, and the argument errors nothing else checks.
 *
 * Expected values are PyTorch 1.13's answers to the same calls (quoted in each test) or
 * hand-computed; the fixture-driven dtype runs the audit added live in the area files. */
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "harness.h"
#include "runtime/helpers.h" /* tg_error_status: the status a NULL-returning call set */

static tg_tensor *f32v(const float *v, int64_t n) { return tg_from_data(v, TG_FLOAT32, &n, 1); }
static tg_tensor *i64s(int64_t v) { return tg_from_data(&v, TG_INT64, NULL, 0); }

/* t has the given shape and dtype, and its values (as doubles) are want[0..n). */
static bool is(tg_tensor *t, tg_dtype dt, int nd, const int64_t *shape, const double *want) {
  if (!t) return printf("  NULL: %s\n", tg_last_error()), false;
  int64_t sh[8];
  bool ok = tg_get_dtype(t) == dt && tg_shape(t, sh, 8) == nd;
  for (int i = 0; ok && i < nd; i++) ok = sh[i] == shape[i];
  int64_t n = tg_numel(t);
  double got[64];
  ok = ok && n <= 64 && tg_to_host(tg_cast(t, TG_FLOAT64), got, sizeof(double) * (size_t)n) == 0;
  for (int64_t i = 0; ok && i < n; i++) ok = isnan(want[i]) ? isnan(got[i]) : got[i] == want[i] && signbit(got[i]) == signbit(want[i]);
  if (!ok) printf("  %s rank %d numel %lld: not as expected\n", tg_dtype_name(tg_get_dtype(t)), tg_ndim(t), (long long)n);
  return ok;
}
#define SCALAR_IS(t, dt, v) is((t), (dt), 0, NULL, (const double[]){v})
#define VEC_IS(t, dt, n, ...) is((t), (dt), 1, (const int64_t[]){n}, (const double[]){__VA_ARGS__})

/* ------------------------------------------------------------ 0-d inputs (issue 12, item 3) */

/* The indexing and sorting functions on a 0-d tensor with axis 0 or -1 (docs/errors.md's axis
 * rule): PyTorch 1.13 gives torch.sort(x, 0) = (2.5, 0), torch.topk(x, 1, 0) = (2.5, 0),
 * torch.gather(x, 0, tensor(0)) = 2.5, torch.scatter(x, 0, tensor(0), tensor(9.)) = 9,
 * scatter_reduce(..., tensor(4.), "sum") = 6.5, masked_fill(True, 7) = 7, masked_select = [2.5],
 * x.repeat_interleave(3) = [2.5, 2.5, 2.5], torch.roll(x, 1) = 2.5, einsum("->") = 2.5,
 * x.unfold(0, 1, 1) = [2.5], x.unfold(0, 0, 1) = [] (shape (0,)), index_select(x, 0, tensor(0)) =
 * 2.5. Each is a view or a selection of the one element: its gradient is 1. */
TEST(oa_scalar_indexing_and_sorting) {
  tg_scope *s = tg_scope_begin();
  tg_tensor *x = tg_scalar(2.5, TG_FLOAT32), *v = NULL, *ix = NULL, *yes = tg_scalar(1, TG_BOOL);
  CHECK(tg_sort(x, 0, false, &v, &ix) == 0 && SCALAR_IS(v, TG_FLOAT32, 2.5) && SCALAR_IS(ix, TG_INT64, 0));
  CHECK(SCALAR_IS(tg_argsort(x, -1, true), TG_INT64, 0));
  v = ix = NULL;
  CHECK(tg_topk(x, 1, -1, true, &v, &ix) == 0 && SCALAR_IS(v, TG_FLOAT32, 2.5) && SCALAR_IS(ix, TG_INT64, 0));
  CHECK(SCALAR_IS(tg_gather(x, 0, i64s(0)), TG_FLOAT32, 2.5));
  CHECK(SCALAR_IS(tg_index_select(x, -1, i64s(0)), TG_FLOAT32, 2.5));
  CHECK(SCALAR_IS(tg_scatter(x, 0, i64s(0), tg_scalar(9, TG_FLOAT32)), TG_FLOAT32, 9));
  CHECK(SCALAR_IS(tg_scatter_reduce(x, 0, i64s(0), tg_scalar(4, TG_FLOAT32), TG_SCATTER_SUM, true), TG_FLOAT32, 6.5));
  CHECK(SCALAR_IS(tg_masked_fill(x, yes, 7), TG_FLOAT32, 7));
  CHECK(VEC_IS(tg_masked_select(x, yes), TG_FLOAT32, 1, 2.5));
  CHECK(VEC_IS(tg_repeat_interleave(x, 3, TG_ALL_AXES), TG_FLOAT32, 3, 2.5, 2.5, 2.5));
  CHECK(SCALAR_IS(tg_roll(x, (const int64_t[]){1}, NULL, 1), TG_FLOAT32, 2.5));
  CHECK(SCALAR_IS(tg_einsum("->", &x, 1), TG_FLOAT32, 2.5));
  CHECK(VEC_IS(tg_unfold(x, 0, 1, 1), TG_FLOAT32, 1, 2.5));
  CHECK(is(tg_unfold(x, -1, 0, 2), TG_FLOAT32, 1, (const int64_t[]){0}, NULL));
  /* gradients of sum(f(x)) */
  tg_tensor *sorted = NULL, *fs[4], *g[4];
  CHECK(tg_sort(x, 0, true, &sorted, NULL) == 0);
  fs[0] = sorted, fs[1] = tg_gather(x, 0, i64s(0)), fs[2] = tg_unfold(x, 0, 1, 1), fs[3] = tg_masked_select(x, yes);
  for (int i = 0; i < 4; i++) {
    CHECK(tg_gradient(tg_sum(fs[i], NULL, 0, false), &x, 1, &g[i]) == 0);
    CHECK(SCALAR_IS(g[i], TG_FLOAT32, 1));
  }
  tg_scope_end(s);
}

/* Documented leniency (semantics.md, differences): roll and repeat_interleave of a 0-d tensor
 * along axis 0 or -1 treat it as one element, where PyTorch 1.13 raises ("Dimension specified as
 * 0 but tensor has no dimensions"); torch.roll(x, 1) without dims and x.repeat_interleave(2)
 * (flattened) agree with these values. unflatten of a 0-d tensor is an error, as in PyTorch. */
TEST(oa_scalar_axis_leniency) {
  tg_scope *s = tg_scope_begin();
  tg_tensor *x = tg_scalar(-4, TG_INT32);
  CHECK(SCALAR_IS(tg_roll(x, (const int64_t[]){3}, (const int[]){0}, 1), TG_INT32, -4));
  CHECK(SCALAR_IS(tg_roll(x, (const int64_t[]){-1}, (const int[]){-1}, 1), TG_INT32, -4));
  CHECK(VEC_IS(tg_repeat_interleave(x, 2, 0), TG_INT32, 2, -4, -4));
  CHECK(VEC_IS(tg_repeat_interleave_t(x, i64s(3), -1), TG_INT32, 3, -4, -4, -4));
  tg_clear_error();
  CHECK(tg_unflatten(x, 0, (const int64_t[]){1}, 1) == NULL && strstr(tg_last_error(), "unflatten: axis 0"));
  tg_scope_end(s);
}

/* ------------------------------------------------------------ empty inputs */

/* Empty batches and empty selections give empty results of PyTorch's shapes (each quoted), and
 * empty reductions PyTorch's values: F.conv1d(zeros(0, 2, 5), ones(3, 2, 2)) is (0, 3, 4),
 * F.max_pool1d(zeros(0, 2, 5), 2) (0, 2, 2), F.interpolate(zeros(0, 2, 5), 10, "linear")
 * (0, 2, 10), F.nll_loss of 0 samples 0 (sum) and NaN (mean); scatter with an empty index
 * leaves the tensor as it is. The weight gradient of an empty batch is zero. */
TEST(oa_empty_inputs) {
  tg_scope *s = tg_scope_begin();
  tg_tensor *x = tg_zeros((const int64_t[]){0, 2, 5}, 3, TG_FLOAT32), *w = tg_ones((const int64_t[]){3, 2, 2}, 3, TG_FLOAT32);
  tg_tensor *c = tg_conv1d(x, w, NULL, NULL, NULL, NULL, 1), *gw = NULL;
  CHECK(is(c, TG_FLOAT32, 3, (const int64_t[]){0, 3, 4}, NULL));
  CHECK(tg_gradient(tg_sum(c, NULL, 0, false), &w, 1, &gw) == 0);
  CHECK(is(gw, TG_FLOAT32, 3, (const int64_t[]){3, 2, 2}, (const double[]){0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0}));
  CHECK(is(tg_max_pool1d(x, (const int[]){2}, NULL, NULL), TG_FLOAT32, 3, (const int64_t[]){0, 2, 2}, NULL));
  CHECK(is(tg_avg_pool1d(x, (const int[]){2}, NULL, NULL), TG_FLOAT32, 3, (const int64_t[]){0, 2, 2}, NULL));
  CHECK(is(tg_interpolate(x, (const int64_t[]){10}, NULL, TG_INTERP_LINEAR, false), TG_FLOAT32, 3,
           (const int64_t[]){0, 2, 10}, NULL));
  tg_tensor *lp = tg_zeros((const int64_t[]){0, 3}, 2, TG_FLOAT32), *lab = tg_zeros((const int64_t[]){0}, 1, TG_INT64);
  CHECK(SCALAR_IS(tg_nll_loss_ex(lp, lab, NULL, -100, TG_REDUCTION_SUM), TG_FLOAT32, 0));
  CHECK(SCALAR_IS(tg_nll_loss_ex(lp, lab, NULL, -100, TG_REDUCTION_MEAN), TG_FLOAT32, NAN));
  CHECK(is(tg_nll_loss_ex(lp, lab, NULL, -100, TG_REDUCTION_NONE), TG_FLOAT32, 1, (const int64_t[]){0}, NULL));
  tg_tensor *t = tg_ones((const int64_t[]){2, 3}, 2, TG_FLOAT32), *none = tg_zeros((const int64_t[]){0, 3}, 2, TG_INT64);
  CHECK(is(tg_gather(t, 0, none), TG_FLOAT32, 2, (const int64_t[]){0, 3}, NULL));
  CHECK(is(tg_scatter(t, 0, none, lp), TG_FLOAT32, 2, (const int64_t[]){2, 3}, (const double[]){1, 1, 1, 1, 1, 1}));
  /* torch.einsum("ij,jk->ik", ones(2, 0), ones(0, 2)): zeros (2, 2), an empty contraction */
  tg_tensor *ab[2] = {tg_ones((const int64_t[]){2, 0}, 2, TG_FLOAT32), tg_ones((const int64_t[]){0, 2}, 2, TG_FLOAT32)};
  CHECK(is(tg_einsum("ij,jk->ik", ab, 2), TG_FLOAT32, 2, (const int64_t[]){2, 2}, (const double[]){0, 0, 0, 0}));
  tg_tensor *v = NULL, *ix = NULL;
  CHECK(tg_cummin(lp, 1, &v, &ix) == 0 && is(v, TG_FLOAT32, 2, (const int64_t[]){0, 3}, NULL) &&
        is(ix, TG_INT64, 2, (const int64_t[]){0, 3}, NULL));
  CHECK(is(tg_cumprod(lp, 0), TG_FLOAT32, 2, (const int64_t[]){0, 3}, NULL));
  CHECK(is(tg_nonzero(lp), TG_INT64, 2, (const int64_t[]){0, 2}, NULL));
  CHECK(is(tg_masked_select(lp, tg_ones((const int64_t[]){0, 3}, 2, TG_BOOL)), TG_FLOAT32, 1, (const int64_t[]){0}, NULL));
  tg_scope_end(s);
}

/* ------------------------------------------------------------ sort and topk: NaN and -0.0 */

/* x = [1, nan, 3, -0., 0., nan, -inf]. PyTorch 1.13: topk(x, 3) = ([nan, nan, 3], [1, 5, 2]),
 * topk(x, 3, largest=False) = ([-inf, -0., 0.], [6, 3, 4]), sort(x, stable=True) =
 * ([-inf, -0., 0., 1, 3, nan, nan], [6, 3, 4, 0, 2, 1, 5]), descending
 * ([nan, nan, 3, 1, -0., 0., -inf], [1, 5, 2, 0, 3, 4, 6]): NaN above +inf, -0.0 equal to 0.0
 * (stable: the earlier one first, either direction). */
TEST(oa_sort_topk_nan_and_signed_zero) {
  tg_scope *s = tg_scope_begin();
  tg_tensor *x = f32v((const float[]){1, NAN, 3, -0.0f, 0.0f, NAN, -INFINITY}, 7), *v = NULL, *ix = NULL;
  CHECK(tg_topk(x, 3, 0, true, &v, &ix) == 0);
  CHECK(VEC_IS(v, TG_FLOAT32, 3, NAN, NAN, 3) && VEC_IS(ix, TG_INT64, 3, 1, 5, 2));
  CHECK(tg_topk(x, 3, 0, false, &v, &ix) == 0);
  CHECK(VEC_IS(v, TG_FLOAT32, 3, -INFINITY, -0.0, 0.0) && VEC_IS(ix, TG_INT64, 3, 6, 3, 4));
  CHECK(tg_sort(x, 0, false, &v, &ix) == 0);
  CHECK(VEC_IS(v, TG_FLOAT32, 7, -INFINITY, -0.0, 0.0, 1, 3, NAN, NAN) && VEC_IS(ix, TG_INT64, 7, 6, 3, 4, 0, 2, 1, 5));
  CHECK(tg_sort(x, 0, true, &v, &ix) == 0);
  CHECK(VEC_IS(v, TG_FLOAT32, 7, NAN, NAN, 3, 1, -0.0, 0.0, -INFINITY) && VEC_IS(ix, TG_INT64, 7, 1, 5, 2, 0, 3, 4, 6));
  tg_scope_end(s);
}

/* The packed network (src/tensor/index.c) against a stable insertion sort in C, for every key
 * dtype it takes, ascending and descending: 37 elements (padded to 64) drawn from a few values
 * with many ties, the extremes of each dtype (INT32_MIN and INT32_MAX next to the padding),
 * ±inf, NaN of both signs and ±0.0 (each keeps its sign; NaN sorts above +inf). Then the
 * gradient of sum(values * w) in float16 (the gradient's bits ride in the packed int64). */
static double sort_rank(double v) { return isnan(v) ? INFINITY : v; } /* NaN above +inf (ties with it broken below) */
static bool sorts_before(double a, double b, bool desc) {
  if (isnan(a) != isnan(b)) return desc ? isnan(a) : isnan(b);
  if (isnan(a)) return false;
  return desc ? sort_rank(a) > sort_rank(b) : sort_rank(a) < sort_rank(b);
}

TEST(oa_sort_packed_dtypes_against_insertion_sort) {
  enum { N = 37 };
  static const tg_dtype dts[] = {TG_BOOL, TG_INT8, TG_UINT8, TG_INT16, TG_UINT16, TG_INT32, TG_FLOAT16, TG_BFLOAT16, TG_FLOAT32};
  const double ints[] = {3, -2, 0, 7, -2, 3, 127, -128, 5}, i32[] = {INT32_MIN, INT32_MAX, 0, -1, 5},
               floats[] = {1.5, -0.0, 0.0, INFINITY, -INFINITY, NAN, -NAN, -2.25, 1.5};
  tg_scope *s = tg_scope_begin();
  for (size_t d = 0; d < sizeof dts / sizeof dts[0]; d++) {
    for (int desc = 0; desc < 2; desc++) {
      tg_dtype dt = dts[d];
      double x[N], got[N];
      int64_t ref[N], ix[N];
      for (int i = 0; i < N; i++) {
        int r = (i * 7 + 3) % 9;
        x[i] = tg_dtype_is_float(dt) ? floats[r] : dt == TG_INT32 ? i32[r % 5] : dt == TG_BOOL ? r % 2 : ints[r];
        if (dt == TG_UINT8 || dt == TG_UINT16) x[i] = fabs(x[i]);
      }
      for (int i = 0; i < N; i++) { /* stable insertion sort of the positions */
        int j = i;
        for (; j > 0 && sorts_before(x[i], x[ref[j - 1]], desc); j--) ref[j] = ref[j - 1];
        ref[j] = i;
      }
      tg_tensor *t = tg_cast(tg_from_data(x, TG_FLOAT64, (const int64_t[]){N}, 1), dt), *v = NULL, *ti = NULL;
      CHECK(tg_sort(t, 0, desc, &v, &ti) == 0 && tg_get_dtype(v) == dt);
      CHECK(tg_to_host(tg_cast(v, TG_FLOAT64), got, sizeof got) == 0 && tg_to_host(ti, ix, sizeof ix) == 0);
      int bad = 0;
      for (int i = 0; i < N; i++) {
        double want = x[ref[i]];
        bool same = (isnan(want) ? isnan(got[i]) : got[i] == want) && signbit(got[i]) == signbit(want);
        bad += ix[i] != ref[i] || !same;
      }
      if (bad) printf("  %s %s: %d of %d differ\n", tg_dtype_name(dt), desc ? "descending" : "ascending", bad, N);
      CHECK(bad == 0);
    }
  }
  /* float16 gradient: w[j] lands at the position value j came from */
  float xv[N], wv[N];
  for (int i = 0; i < N; i++) xv[i] = (float)((i * 11) % 13) - 6.0f, wv[i] = (float)i / 8.0f;
  tg_tensor *x16 = tg_cast(tg_from_data(xv, TG_FLOAT32, (const int64_t[]){N}, 1), TG_FLOAT16), *v = NULL, *ti = NULL, *g = NULL;
  CHECK(tg_sort(x16, 0, true, &v, &ti) == 0);
  tg_tensor *w16 = tg_cast(tg_from_data(wv, TG_FLOAT32, (const int64_t[]){N}, 1), TG_FLOAT16);
  CHECK(tg_gradient(tg_sum(tg_mul(v, w16), NULL, 0, false), &x16, 1, &g) == 0 && tg_get_dtype(g) == TG_FLOAT16);
  double gv[N];
  int64_t iv[N];
  CHECK(tg_to_host(tg_cast(g, TG_FLOAT64), gv, sizeof gv) == 0 && tg_to_host(ti, iv, sizeof iv) == 0);
  int bad = 0;
  for (int j = 0; j < N; j++) bad += gv[iv[j]] != (double)wv[j];
  CHECK(bad == 0);
  tg_scope_end(s);
}

/* ------------------------------------------------------------ a documented difference */

/* hardsigmoid's slope is exactly 1/6 inside (-3, 3) in float64 (PyTorch 1.13's float64 backward
 * multiplies by float32's 1/6, 0.1666666716337204); 0 at and beyond the bounds (PyTorch's
 * kinks). The fixture hardsigmoid_f64 agrees with PyTorch to 1e-7 only, because of this. */
TEST(oa_hardsigmoid_f64_slope) {
  tg_scope *s = tg_scope_begin();
  double xv[6] = {-3, -2.5, 0, 1, 2.999, 3};
  tg_tensor *x = tg_from_data(xv, TG_FLOAT64, (const int64_t[]){6}, 1), *g = NULL;
  CHECK(tg_gradient(tg_sum(tg_hardsigmoid(x), NULL, 0, false), &x, 1, &g) == 0);
  CHECK(VEC_IS(g, TG_FLOAT64, 6, 0, 1.0 / 6, 1.0 / 6, 1.0 / 6, 1.0 / 6, 0));
  tg_scope_end(s);
}

/* sigmoid and tanh at ±inf (issue 12, item 2: large inputs gave NaN): 1, 0 and ±1, gradient 0,
 * as PyTorch (torch.sigmoid(tensor([inf, -inf])) = [1, 0], its gradient [0, 0]). The fixtures
 * sigmoid_large_* and tanh_large check ±1e30 and the 16-bit dtypes. */
TEST(oa_sigmoid_tanh_infinite) {
  tg_scope *s = tg_scope_begin();
  tg_tensor *x = f32v((const float[]){INFINITY, -INFINITY, 1e30f, -1e30f}, 4), *g = NULL;
  tg_tensor *sg = tg_sigmoid(x), *th = tg_tanh(x);
  CHECK(VEC_IS(sg, TG_FLOAT32, 4, 1, 0, 1, 0) && VEC_IS(th, TG_FLOAT32, 4, 1, -1, 1, -1));
  CHECK(tg_gradient(tg_sum(tg_add(sg, th), NULL, 0, false), &x, 1, &g) == 0);
  CHECK(VEC_IS(g, TG_FLOAT32, 4, 0, 0, 0, 0));
  tg_scope_end(s);
}

/* ------------------------------------------------------------ argument errors nothing else checks */

/* r is NULL with TG_ERR_ARG and a message containing frag. */
static bool refused(const void *r, const char *frag) {
  bool ok = r == NULL && tg_error_status() == TG_ERR_ARG && strstr(tg_last_error(), frag) != NULL;
  if (!ok) printf("  got %s, \"%s\" (expected \"%s\")\n", r ? "a result" : "NULL", tg_last_error(), frag);
  tg_clear_error();
  return ok;
}

TEST(oa_err_arguments) {
  tg_scope *s = tg_scope_begin();
  tg_tensor *x = tg_ones((const int64_t[]){3, 4}, 2, TG_FLOAT32), *i23 = tg_zeros((const int64_t[]){2, 3}, 2, TG_INT64);
  tg_clear_error();
  CHECK(refused(tg_softmin(tg_cast(x, TG_BOOL), 1), "softmin: not defined for dtype bool"));
  CHECK(refused(tg_gather(x, 0, tg_zeros((const int64_t[]){2, 5}, 2, TG_INT64)), "gather: index (2, 5) larger than input (3, 4)"));
  CHECK(refused(tg_repeat_interleave_t(x, i23, 0), "repeats must be a 0-d or 1-D integer tensor, got int64 rank 2"));
  int64_t shifts[65] = {0};
  int axes[65] = {0};
  CHECK(refused(tg_roll(x, shifts, axes, 65), "roll: 65 axes (at most 64)"));
  CHECK(refused(tg_max_unpool1d(tg_zeros((const int64_t[]){1, 2, 0}, 3, TG_FLOAT32), tg_zeros((const int64_t[]){1, 2, 0}, 3, TG_INT64),
                                (const int[]){2}, NULL, NULL, NULL),
                "max_unpool1d: x (1, 2, 0) has no windows to unpool on axis 0"));
  CHECK(refused(tg_one_hot(tg_zeros((const int64_t[]){3}, 1, TG_INT32), -2, TG_FLOAT32), "one_hot: negative class count -2"));
  CHECK(refused(tg_lerp_s(tg_zeros((const int64_t[]){2}, 1, TG_INT32), tg_zeros((const int64_t[]){2}, 1, TG_INT32), 0.5),
                "lerp"));
  CHECK(refused(tg_index_select(x, 1, tg_zeros((const int64_t[]){2}, 1, TG_FLOAT32)), "index_select: index must be an integer"));
  /* the class losses take (N, C) only (nn.md): PyTorch's (N, C, d) form is refused by name */
  tg_tensor *x3 = tg_zeros((const int64_t[]){2, 3, 4}, 3, TG_FLOAT32), *l2 = tg_zeros((const int64_t[]){2, 4}, 2, TG_INT64);
  CHECK(refused(tg_nll_loss_ex(x3, l2, NULL, -100, TG_REDUCTION_MEAN), "nll_loss: log_probs must be (N, C), got (2, 3, 4)"));
  CHECK(refused(tg_sparse_cross_entropy_ex(x3, l2, NULL, -100, 0, TG_REDUCTION_NONE), "sparse_cross_entropy: logits must be (N, C)"));
  tg_scope_end(s);
}
