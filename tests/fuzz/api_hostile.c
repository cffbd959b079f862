/* api_hostile.c — the fuzzer's table of hostile calls: the public entry points with
 * argument generators that produce 0-size, negative and huge sizes, products that overflow,
 * ranks past the maximum, far and repeated axes, NULL tensors and arrays, invalid dtypes and
 * wrong byte counts. Each call only has to keep the contract (fuzz.h); results are kept for
 * later calls. Nothing computed from a huge lazy tensor is ever realized (fz_slot.cheap), and
 * anything that writes lazily (tg_assign, batchnorm's running statistics) gets cheap inputs
 * only: a pending write is realized by the next realize of anything. */
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz.h"

#define N_(a) ((int)(sizeof(a) / sizeof((a)[0])))
#define SHAPE_CAP 70 /* more than any rank the library accepts (it must not read past its limit) */

/* ---------------------------------------------------------------- generators */

typedef struct gshape { int nd; int64_t s[SHAPE_CAP]; } gshape;

/* A hostile shape; NULL sometimes. High ranks get sizes 1 mostly, so that some are valid. */
static const int64_t *gen_shape(gshape *g) {
  g->nd = fz_rank();
  for (int i = 0; i < SHAPE_CAP; i++) g->s[i] = g->nd > 8 && fz_chance(95) ? 1 : fz_size();
  return fz_chance(3) ? NULL : g->s;
}

/* A shape like t's with small changes (so that shape checks are passed and later ones run). */
static const int64_t *near_shape(tg_tensor *t, gshape *g) {
  g->nd = t ? tg_ndim(t) : fz_rank();
  if (t) tg_shape(t, g->s, SHAPE_CAP);
  for (int i = 0; i < SHAPE_CAP; i++) {
    if (i >= g->nd || fz_chance(20)) g->s[i] = fz_chance(50) ? -1 : fz_size();
  }
  if (g->nd >= 0 && g->nd <= SHAPE_CAP && fz_chance(10)) g->nd += (int)fz_below(3) - 1;
  return fz_chance(3) ? NULL : g->s;
}

/* An axis list of SHAPE_CAP entries and a count: small, negative or up to SHAPE_CAP (a larger
 * count would make the library read past our array, which is the caller's bug, not its). */
static int gen_axes(int *axes, int nd) {
  int n = fz_chance(85) ? (int)fz_below(4) : fz_int();
  for (int i = 0; i < SHAPE_CAP; i++) axes[i] = fz_axis(nd);
  return n > SHAPE_CAP ? SHAPE_CAP : n;
}

static int ndim_of(tg_tensor *t) { return t ? tg_ndim(t) : 0; }

/* A valid shape whose buffer would take more than 1 MiB: tg_empty allocates (and zeroes) at
 * once, so such calls are skipped (the machine's memory is not what is being tested). */
static bool big_allocation(const int64_t *s, int nd, tg_dtype dt) {
  if (!s || nd < 0 || nd > TG_FUZZ_MAXRANK || (int)dt < 0 || dt >= TG_DTYPE_COUNT) return false;
  __int128 bytes = (__int128)tg_dtype_size(dt);
  for (int i = 0; i < nd; i++) {
    if (s[i] < 0) return false;
    bytes *= s[i] ? s[i] : 1;
    if (bytes > INT64_MAX) return false; /* invalid: an error, no allocation */
  }
  for (int i = 0; i < nd; i++)
    if (s[i] == 0) return false; /* empty: nothing to allocate */
  return bytes > (1 << 20);
}
static bool cheap(tg_tensor *t) { return t && fz_tensor_cheap(t); }
static char data[1 << 14]; /* bytes for from_data and assign_data; never read past its size */

/* Keep a checked result: cheap when all its tensor inputs were. */
static void keep(const char *op, tg_tensor *r, bool inputs_cheap) { fz_keep(fz_check_tensor(op, r), inputs_cheap); }

/* ---------------------------------------------------------------- creation */

static void call_from_data(void) {
  gshape g;
  const int64_t *s = gen_shape(&g);
  tg_dtype dt = fz_dtype();
  __int128 need = dt >= 0 && dt < TG_DTYPE_COUNT ? (__int128)tg_dtype_size(dt) : 0;
  for (int i = 0; s && g.nd > 0 && i < g.nd && i < SHAPE_CAP && need <= (__int128)sizeof data; i++) need *= s[i] < 0 ? 0 : s[i];
  bool fits = need <= (__int128)sizeof data && g.nd <= TG_FUZZ_MAXRANK;
  fz_log("from_data(%s, %s, %s, %d)", fits ? "data" : "NULL", tg_dtype_name(dt), fz_shape_str(s, g.nd), g.nd);
  keep("from_data", tg_from_data(fits ? data : NULL, dt, s, g.nd), true);
}

static void call_full(void) {
  static const struct { const char *name; int kind; } kinds[] = {{"full", 0}, {"zeros", 1}, {"ones", 2}, {"empty", 3}};
  gshape g;
  const int64_t *s = gen_shape(&g);
  tg_dtype dt = fz_dtype();
  double v = fz_double();
  int k = (int)fz_below(4);
  if (k == 3 && big_allocation(s, g.nd, dt)) return;
  fz_log("%s(%s, %d, %g, %s)", kinds[k].name, fz_shape_str(s, g.nd), g.nd, v, tg_dtype_name(dt));
  tg_tensor *r = k == 0 ? tg_full(s, g.nd, v, dt) : k == 1 ? tg_zeros(s, g.nd, dt) : k == 2 ? tg_ones(s, g.nd, dt) : tg_empty(s, g.nd, dt);
  keep(kinds[k].name, r, true);
}

static void call_like(void) {
  tg_tensor *t = fz_tensor(true), *r;
  double v = fz_double();
  int k = (int)fz_below(4);
  if (k == 3 && t && tg_numel(t) * (int64_t)tg_dtype_size(tg_get_dtype(t)) > (1 << 20)) return; /* see big_allocation */
  fz_log("*_like#%d(t, %g)", k, v);
  r = k == 0 ? tg_full_like(t, v) : k == 1 ? tg_zeros_like(t) : k == 2 ? tg_ones_like(t) : tg_empty_like(t);
  keep("full_like", r, true);
}

static void call_ranges(void) {
  double a = fz_double(), b = fz_double(), c = fz_double();
  int64_t n = fz_size(), m = fz_size();
  tg_dtype dt = fz_dtype();
  int k = (int)fz_below(3);
  fz_log("%s(%g, %g, %g | %lld, %lld, %s)", k == 0 ? "arange" : k == 1 ? "linspace" : "eye", a, b, c, (long long)n,
         (long long)m, tg_dtype_name(dt));
  tg_tensor *r = k == 0 ? tg_arange(a, b, c, dt) : k == 1 ? tg_linspace(a, b, n, dt) : tg_eye(n, m, dt);
  keep(k == 0 ? "arange" : k == 1 ? "linspace" : "eye", r, true);
}

static void call_random(void) {
  gshape g;
  const int64_t *s = gen_shape(&g);
  tg_dtype dt = fz_chance(80) ? TG_FLOAT32 : fz_dtype();
  double a = fz_double(), b = fz_double();
  int k = (int)fz_below(9);
  static const char *names[] = {"rand", "randn", "randint", "uniform", "normal", "kaiming_uniform", "kaiming_normal",
                                "glorot_uniform", "glorot_normal"};
  fz_log("%s(%s, %d, %g, %g, %s)", names[k], fz_shape_str(s, g.nd), g.nd, a, b, tg_dtype_name(dt));
  tg_tensor *r;
  switch (k) {
    case 0: r = tg_rand(s, g.nd, dt); break;
    case 1: r = tg_randn(s, g.nd, dt); break;
    case 2: r = tg_randint(s, g.nd, (int64_t)fz_size(), fz_size(), dt); break;
    case 3: r = tg_uniform(s, g.nd, a, b, dt); break;
    case 4: r = tg_normal(s, g.nd, a, b, dt); break;
    case 5: r = tg_kaiming_uniform(s, g.nd, a, dt); break;
    case 6: r = tg_kaiming_normal(s, g.nd, a, dt); break;
    case 7: r = tg_glorot_uniform(s, g.nd, dt); break;
    default: r = tg_glorot_normal(s, g.nd, dt); break;
  }
  keep(names[k], r, true);
}

/* ---------------------------------------------------------------- movement */

static void call_reshape_expand(void) {
  tg_tensor *t = fz_tensor(true);
  gshape g;
  const int64_t *s = near_shape(t, &g);
  bool expand = fz_chance(50);
  fz_log("%s(t rank %d, %s, %d)", expand ? "expand" : "reshape", ndim_of(t), fz_shape_str(s, g.nd), g.nd);
  keep(expand ? "expand" : "reshape", expand ? tg_expand(t, s, g.nd) : tg_reshape(t, s, g.nd), cheap(t));
}

static void call_permute(void) {
  tg_tensor *t = fz_tensor(true);
  int nd = ndim_of(t), order[SHAPE_CAP], n = fz_chance(85) ? nd : fz_rank();
  for (int i = 0; i < SHAPE_CAP; i++) order[i] = i < nd && fz_chance(90) ? nd - 1 - i : fz_axis(nd);
  fz_log("permute(t rank %d, order, %d)", nd, n);
  keep("permute", tg_permute(t, fz_chance(3) ? NULL : order, n), cheap(t));
}

static void call_pad_shrink(void) {
  tg_tensor *t = fz_tensor(true);
  int64_t a[SHAPE_CAP], b[SHAPE_CAP], s[SHAPE_CAP] = {0};
  int nd = ndim_of(t);
  if (t) tg_shape(t, s, SHAPE_CAP);
  bool pad = fz_chance(50);
  for (int i = 0; i < SHAPE_CAP; i++) {
    a[i] = fz_chance(70) ? fz_below(3) : fz_size();
    b[i] = pad ? (fz_chance(70) ? fz_below(3) : fz_size()) : (fz_chance(70) ? s[i] - fz_below(2) : fz_size());
  }
  double v = fz_double();
  fz_log("%s(t rank %d, %s, %s, %g)", pad ? "pad" : "shrink", nd, fz_shape_str(a, nd), fz_shape_str(b, nd), v);
  const int64_t *pa = fz_chance(3) ? NULL : a, *pb = fz_chance(3) ? NULL : b;
  keep(pad ? "pad" : "shrink", pad ? tg_pad(t, pa, pb, v) : tg_shrink(t, pa, pb), cheap(t));
}

static void call_axis_views(void) {
  tg_tensor *t = fz_tensor(true);
  int nd = ndim_of(t), a = fz_axis(nd), b = fz_axis(nd), axes[SHAPE_CAP], n = gen_axes(axes, nd);
  static const char *names[] = {"flip", "transpose", "squeeze", "unsqueeze", "flatten", "contiguous"};
  int k = (int)fz_below(6);
  fz_log("%s(t rank %d, %d, %d, n=%d)", names[k], nd, a, b, n);
  tg_tensor *r;
  switch (k) {
    case 0: r = tg_flip(t, fz_chance(3) ? NULL : axes, n); break;
    case 1: r = tg_transpose(t, a, b); break;
    case 2: r = tg_squeeze(t, fz_chance(20) ? TG_ALL_AXES : a); break;
    case 3: r = tg_unsqueeze(t, a); break;
    case 4: r = tg_flatten(t, a, b); break;
    default: r = tg_contiguous(t); break;
  }
  keep(names[k], r, cheap(t));
}

static void call_slice(void) {
  static const int64_t ends[] = {0, 1, 2, -1, -2, 5, INT64_MIN, INT64_MAX - 1, TG_SLICE_END, -1000};
  static const int64_t steps[] = {1, 2, 3, -1, -2, -3, 0, INT64_MIN, INT64_MAX, INT64_MAX - 1, -INT64_MAX};
  tg_tensor *t = fz_tensor(true);
  int axis = fz_axis(ndim_of(t));
  int64_t a = fz_chance(80) ? fz_pick(ends, N_(ends)) : (int64_t)fz_next(), b = fz_pick(ends, N_(ends));
  int64_t step = fz_chance(85) ? fz_pick(steps, N_(steps)) : (int64_t)fz_next();
  fz_log("slice(t rank %d, %d, %lld, %lld, %lld)", ndim_of(t), axis, (long long)a, (long long)b, (long long)step);
  keep("slice", tg_slice(t, axis, a, b, step), cheap(t));
}

static void call_cat_stack(void) {
  tg_tensor *ts[6];
  int n = fz_chance(90) ? 1 + (int)fz_below(4) : fz_int(), axis;
  bool all_cheap = true, stack = fz_chance(40);
  ts[0] = fz_tensor(true);
  for (int i = 1; i < 6; i++) ts[i] = fz_chance(60) ? ts[0] : fz_tensor(true);
  for (int i = 0; i < 6; i++) all_cheap &= cheap(ts[i]) || !ts[i];
  axis = fz_axis(ndim_of(ts[0]));
  fz_log("%s(ts, %d, %d)", stack ? "stack" : "cat", n, axis);
  tg_tensor **arg = fz_chance(3) ? NULL : ts;
  if (n > 6) n = 6; /* our array: a larger n would read past it (not a library bug) */
  keep(stack ? "stack" : "cat", stack ? tg_stack(arg, n, axis) : tg_cat(arg, n, axis), all_cheap);
}

static void call_split(void) {
  tg_tensor *t = fz_tensor(true), *out[5];
  int64_t sizes[5], s[SHAPE_CAP] = {0};
  int axis = fz_axis(ndim_of(t)), n = fz_chance(90) ? 1 + (int)fz_below(5) : fz_int();
  if (t) tg_shape(t, s, SHAPE_CAP);
  int64_t left = axis >= 0 && axis < ndim_of(t) ? s[axis] : 3;
  for (int i = 0; i < 5; i++) { /* mostly sizes that add up; the rest hostile (the subtraction wraps) */
    sizes[i] = fz_chance(80) ? (i == 4 || fz_chance(30) ? left : 0) : fz_size();
    left = (int64_t)((uint64_t)left - (uint64_t)sizes[i]);
  }
  if (n > 5) n = 5;
  fz_log("split(t rank %d, sizes, %d, %d)", ndim_of(t), n, axis);
  int rc = fz_check_status("split", tg_split(t, fz_chance(3) ? NULL : sizes, n, axis, out));
  for (int i = 0; rc == 0 && i < n; i++) keep("split", out[i], cheap(t));
}

static void call_repeat(void) {
  tg_tensor *t = fz_tensor(true);
  int64_t reps[SHAPE_CAP];
  int n = fz_chance(85) ? ndim_of(t) + (int)fz_below(2) : fz_rank();
  for (int i = 0; i < SHAPE_CAP; i++) reps[i] = fz_chance(70) ? fz_below(3) : fz_size();
  fz_log("repeat(t rank %d, %s, %d)", ndim_of(t), fz_shape_str(reps, n), n);
  keep("repeat", tg_repeat(t, fz_chance(3) ? NULL : reps, n), cheap(t));
}

/* ---------------------------------------------------------------- elementwise */

typedef tg_tensor *(*un_fn)(tg_tensor *);
typedef tg_tensor *(*bin_fn)(tg_tensor *, tg_tensor *);
static const struct { const char *name; un_fn fn; } unary_ops[] = {
    {"neg", tg_neg}, {"exp", tg_exp}, {"exp2", tg_exp2}, {"log", tg_log}, {"log2", tg_log2}, {"sqrt", tg_sqrt},
    {"rsqrt", tg_rsqrt}, {"relu", tg_relu}, {"abs", tg_abs}, {"sign", tg_sign}, {"reciprocal", tg_reciprocal},
    {"square", tg_square}, {"sin", tg_sin}, {"cos", tg_cos}, {"tan", tg_tan}, {"tanh", tg_tanh},
    {"sigmoid", tg_sigmoid}, {"floor", tg_floor}, {"ceil", tg_ceil}, {"round", tg_round}, {"trunc", tg_trunc},
    {"isnan", tg_isnan}, {"isinf", tg_isinf}, {"logical_not", tg_logical_not}, {"bitwise_not", tg_bitwise_not},
    {"contiguous", tg_contiguous}, {"detach", tg_detach}, {"gelu", tg_gelu}, {"silu", tg_silu},
};
static const struct { const char *name; bin_fn fn; } binary_ops[] = {
    {"add", tg_add}, {"sub", tg_sub}, {"mul", tg_mul}, {"div", tg_div}, {"floordiv", tg_floordiv}, {"idiv", tg_idiv},
    {"mod", tg_mod}, {"pow", tg_pow}, {"maximum", tg_maximum}, {"minimum", tg_minimum}, {"eq", tg_eq}, {"ne", tg_ne},
    {"lt", tg_lt}, {"le", tg_le}, {"gt", tg_gt}, {"ge", tg_ge}, {"logical_and", tg_logical_and},
    {"logical_or", tg_logical_or}, {"logical_xor", tg_logical_xor}, {"bitwise_and", tg_bitwise_and},
    {"bitwise_or", tg_bitwise_or}, {"bitwise_xor", tg_bitwise_xor}, {"matmul", tg_matmul}, {"dot", tg_dot},
    {"mse_loss", tg_mse_loss}, {"bce_loss", tg_bce_loss}, {"bce_with_logits_loss", tg_bce_with_logits_loss},
    {"nll_loss", tg_nll_loss},
};

static void call_unary(void) {
  int k = (int)fz_below(N_(unary_ops));
  tg_tensor *t = fz_tensor(true);
  fz_log("%s(t rank %d)", unary_ops[k].name, ndim_of(t));
  keep(unary_ops[k].name, unary_ops[k].fn(t), cheap(t));
}

static void call_binary(void) {
  int k = (int)fz_below(N_(binary_ops));
  tg_tensor *a = fz_tensor(true), *b = fz_chance(30) ? a : fz_tensor(true);
  fz_log("%s(a rank %d, b rank %d)", binary_ops[k].name, ndim_of(a), ndim_of(b));
  keep(binary_ops[k].name, binary_ops[k].fn(a, b), cheap(a) && cheap(b));
}

static void call_scalar_ops(void) {
  tg_tensor *t = fz_tensor(true), *c = fz_tensor(true), *e = fz_tensor(true), *r;
  double v = fz_double(), w = fz_double();
  int bits = fz_int(), k = (int)fz_below(12);
  fz_log("scalar op %d(t rank %d, %g, %g, bits %d)", k, ndim_of(t), v, w, bits);
  switch (k) {
    case 0: r = tg_add_s(t, v); break;
    case 1: r = tg_sub_s(t, v); break;
    case 2: r = tg_mul_s(t, v); break;
    case 3: r = tg_div_s(t, v); break;
    case 4: r = tg_pow_s(t, v); break;
    case 5: r = tg_rsub_s(v, t); break;
    case 6: r = tg_shl(t, bits); break;
    case 7: r = tg_shr(t, bits); break;
    case 8: r = tg_clip(t, v, w); break;
    case 9: r = tg_where(c, t, e); break;
    case 10: r = tg_leaky_relu(t, v); break;
    default: r = tg_softplus(t, v); break;
  }
  keep("scalar op", r, true);
}

static void call_cast(void) {
  tg_tensor *t = fz_tensor(true);
  tg_dtype dt = fz_dtype();
  bool bit = fz_chance(30);
  fz_log("%s(t, %s)", bit ? "bitcast" : "cast", tg_dtype_name(dt));
  keep(bit ? "bitcast" : "cast", bit ? tg_bitcast(t, dt) : tg_cast(t, dt), cheap(t));
}

/* ---------------------------------------------------------------- reductions, indexing */

static void call_reduce(void) {
  typedef tg_tensor *(*red_fn)(tg_tensor *, const int *, int, bool);
  static const struct { const char *name; red_fn fn; } ops[] = {
      {"sum", tg_sum}, {"prod", tg_prod}, {"max", tg_max}, {"min", tg_min}, {"mean", tg_mean}, {"any", tg_any}, {"all", tg_all}};
  tg_tensor *t = fz_tensor(true);
  int axes[SHAPE_CAP], n = gen_axes(axes, ndim_of(t)), k = (int)fz_below(N_(ops) + 2);
  bool keepdim = fz_chance(50);
  const int *ax = fz_chance(3) ? NULL : axes;
  fz_log("reduce %d(t rank %d, axes, %d, %d)", k, ndim_of(t), n, keepdim);
  tg_tensor *r = k < N_(ops) ? ops[k].fn(t, ax, n, keepdim)
                 : k == N_(ops) ? tg_var(t, ax, n, keepdim, fz_double()) : tg_std(t, ax, n, keepdim, fz_double());
  keep("reduce", r, cheap(t));
}

static void call_axis_fns(void) {
  static const char *names[] = {"argmax", "argmin", "softmax", "log_softmax", "logsumexp", "cumsum"};
  tg_tensor *t = fz_tensor(true), *r;
  int axis = fz_axis(ndim_of(t)), k = (int)fz_below(6);
  bool keepdim = fz_chance(50);
  fz_log("%s(t rank %d, %d, %d)", names[k], ndim_of(t), axis, keepdim);
  switch (k) {
    case 0: r = tg_argmax(t, axis, keepdim); break;
    case 1: r = tg_argmin(t, axis, keepdim); break;
    case 2: r = tg_softmax(t, axis); break;
    case 3: r = tg_log_softmax(t, axis); break;
    case 4: r = tg_logsumexp(t, axis, keepdim); break;
    default: r = tg_cumsum(t, axis); break;
  }
  keep(names[k], r, cheap(t));
}

static void call_indexing(void) {
  tg_tensor *t = fz_tensor(true), *idx = fz_tensor(true), *r;
  int axis = fz_axis(ndim_of(t)), k = (int)fz_below(3);
  int64_t n = fz_size();
  tg_dtype dt = fz_dtype();
  fz_log("%s(t rank %d, %d, idx rank %d, %lld, %s)", k == 0 ? "gather" : k == 1 ? "index_select" : "one_hot", ndim_of(t),
         axis, ndim_of(idx), (long long)n, tg_dtype_name(dt));
  if (idx && fz_chance(50)) idx = tg_cast(idx, TG_INT32);
  r = k == 0 ? tg_gather(t, axis, idx) : k == 1 ? tg_index_select(t, axis, idx) : tg_one_hot(idx, n, dt);
  keep(k == 0 ? "gather" : k == 1 ? "index_select" : "one_hot", r, cheap(t) && cheap(idx));
}

/* ---------------------------------------------------------------- nn */

static const int *gen_pair(int *p, int lo) {
  p[0] = fz_chance(80) ? lo + (int)fz_below(3) : fz_int();
  p[1] = fz_chance(80) ? lo + (int)fz_below(3) : fz_int();
  return fz_chance(10) ? NULL : p;
}

static void call_conv_pool(void) {
  tg_tensor *x = fz_tensor(true), *w = fz_tensor(true), *b = fz_chance(50) ? NULL : fz_tensor(true), *r;
  int st[2], pad[2], dil[2], opad[2], k[2], groups = fz_chance(80) ? 1 + (int)fz_below(2) : fz_int();
  const int *pst = gen_pair(st, 1), *ppad = gen_pair(pad, 0), *pdil = gen_pair(dil, 1), *popad = gen_pair(opad, 0);
  const int *pk = gen_pair(k, 1);
  int which = (int)fz_below(4);
  static const char *names[] = {"conv2d", "conv_transpose2d", "max_pool2d", "avg_pool2d"};
  fz_log("%s(x rank %d, w rank %d, groups %d)", names[which], ndim_of(x), ndim_of(w), groups);
  switch (which) {
    case 0: r = tg_conv2d(x, w, b, pst, ppad, pdil, groups); break;
    case 1: r = tg_conv_transpose2d(x, w, b, pst, ppad, popad, pdil, groups); break;
    case 2: r = tg_max_pool2d(x, pk, pst, ppad); break;
    default: r = tg_avg_pool2d(x, pk, pst, ppad); break;
  }
  keep(names[which], r, cheap(x) && (which >= 2 || (cheap(w) && (!b || cheap(b)))));
}

static void call_norms(void) {
  tg_tensor *x = fz_tensor(true), *w = fz_chance(50) ? NULL : fz_tensor(true), *b = fz_chance(50) ? NULL : fz_tensor(true);
  int n = fz_chance(80) ? (int)fz_below(4) : fz_int(), which = (int)fz_below(5);
  double eps = fz_chance(80) ? 1e-5 : fz_double(), p = fz_chance(50) ? 0.5 : fz_double();
  bool all_cheap = cheap(x) && (!w || cheap(w)) && (!b || cheap(b)), r = false;
  tg_tensor *y;
  static const char *names[] = {"layernorm", "rmsnorm", "groupnorm", "batchnorm", "dropout"};
  fz_log("%s(x rank %d, %d, eps %g, p %g)", names[which], ndim_of(x), n, eps, p);
  switch (which) {
    case 0: y = tg_layernorm(x, n, w, b, eps); break;
    case 1: y = tg_rmsnorm(x, n, w, eps); break;
    case 2: y = tg_groupnorm(x, n, w, b, eps); break;
    case 3: /* training with running statistics writes them lazily: cheap inputs only */
      r = all_cheap && fz_chance(50);
      y = tg_batchnorm(x, w, b, r ? w : NULL, r ? b : NULL, r || fz_chance(50), p, eps);
      if (r) fz_mutated(w), fz_mutated(b);
      break;
    default: y = tg_dropout(x, p, fz_chance(50)); break;
  }
  keep(names[which], y, all_cheap);
}

static void call_losses(void) {
  tg_tensor *a = fz_tensor(true), *b = fz_tensor(true), *c = fz_tensor(true), *r;
  int which = (int)fz_below(3);
  double ls = fz_chance(70) ? 0.1 : fz_double();
  fz_log("loss %d(a rank %d, b rank %d, %g)", which, ndim_of(a), ndim_of(b), ls);
  if (which == 0) r = tg_cross_entropy(a, b, ls);
  else if (which == 1) r = tg_sparse_cross_entropy(a, b, ls, fz_size());
  else r = tg_scaled_dot_product_attention(a, b, c, fz_chance(50) ? NULL : fz_tensor(true), fz_chance(50));
  keep("loss", r, cheap(a) && cheap(b) && cheap(c));
}

/* ---------------------------------------------------------------- inspection, realization */

static void call_inspect(void) {
  tg_tensor *t = fz_tensor(true);
  int axis = fz_axis(ndim_of(t)), cap = fz_chance(80) ? (int)fz_below(SHAPE_CAP) : fz_int();
  int64_t out[SHAPE_CAP];
  fz_log("inspect(t rank %d, axis %d, cap %d)", ndim_of(t), axis, cap);
  int64_t d = tg_dim(t, axis);
  if (d < 0 && !tg_last_error()[0]) fz_violation("dim returned %lld without a message", (long long)d);
  tg_clear_error();
  int nd = tg_shape(t, fz_chance(10) ? NULL : out, cap > SHAPE_CAP ? SHAPE_CAP : cap);
  if (nd < 0 && !tg_last_error()[0]) fz_violation("shape returned -1 without a message");
  (void)tg_numel(t), (void)tg_ndim(t), (void)tg_get_dtype(t), (void)tg_is_realized(t), (void)tg_get_requires_grad(t);
}

static void call_realize(void) {
  tg_tensor *ts[4];
  int n = fz_chance(85) ? (int)fz_below(4) : fz_int();
  bool ok = true;
  for (int i = 0; i < 4; i++) ts[i] = fz_tensor(true), ok &= !ts[i] || cheap(ts[i]);
  if (!ok && n > 0) return; /* never realize a tensor computed from a huge one */
  if (n > 4) n = 4;
  bool no_list = fz_chance(3), any_null = false;
  fz_log("realize_many(%s, %d)", no_list ? "NULL" : "ts", n);
  int rc = fz_check_status("realize_many", tg_realize_many(no_list ? NULL : ts, n));
  for (int i = 0; i < n && i < 4; i++) any_null |= !ts[i];
  if (rc < 0 && !no_list && n >= 0 && !any_null) fz_violation("realizing small valid tensors failed: %s", tg_last_error());
}

static void call_to_host(void) {
  static char buf[1 << 14];
  tg_tensor *t = fz_tensor(true);
  size_t need = t ? (size_t)tg_numel(t) * tg_dtype_size(tg_get_dtype(t)) : 0;
  static const int64_t delta[] = {0, 0, 1, -1, 8, INT64_MIN};
  size_t nbytes = need + (size_t)fz_pick(delta, N_(delta));
  if (fz_chance(10)) nbytes = (size_t)fz_size();
  bool right = nbytes == need;
  if (right && (!cheap(t) || need > sizeof buf)) return; /* would realize something huge, or write past buf */
  bool item = fz_chance(25);
  fz_log("%s(t rank %d, buf, %zu of %zu)", item ? "item" : "to_host", ndim_of(t), nbytes, need);
  if (item) {
    if (t && tg_numel(t) == 1 && !cheap(t)) return;
    double v = tg_item(t);
    if (isnan(v) && !tg_last_error()[0] && (!t || tg_numel(t) != 1)) fz_violation("item failed without a message");
    return;
  }
  fz_check_status("to_host", tg_to_host(t, fz_chance(5) ? NULL : buf, nbytes));
}

static void call_assign(void) {
  tg_tensor *dst = fz_tensor(true), *src = fz_chance(40) ? dst : fz_tensor(true);
  bool same = dst && src && tg_ndim(dst) == tg_ndim(src) && tg_numel(dst) == tg_numel(src);
  if (same && !(cheap(dst) && cheap(src))) return; /* a pending write is realized by the next realize */
  size_t need = dst ? (size_t)tg_numel(dst) * tg_dtype_size(tg_get_dtype(dst)) : 0;
  size_t nbytes = fz_chance(50) ? need : (size_t)fz_size();
  bool by_data = fz_chance(40);
  if (by_data && nbytes == need && need > sizeof data) return;
  fz_log("%s(dst rank %d, src rank %d, %zu)", by_data ? "assign_data" : "assign", ndim_of(dst), ndim_of(src), nbytes);
  if (by_data) fz_check_status("assign_data", tg_assign_data(dst, fz_chance(5) ? NULL : data, nbytes));
  else fz_check_status("assign", tg_assign(dst, src));
  fz_mutated(dst);
}

static void call_grad(void) {
  tg_tensor *y = fz_tensor(true), *xs[3] = {fz_tensor(true), fz_tensor(true), fz_tensor(true)}, *g[3];
  int n = fz_chance(85) ? (int)fz_below(4) : fz_int(), k = (int)fz_below(5);
  fz_log("grad op %d(y rank %d, n %d)", k, ndim_of(y), n);
  if (n > 3) n = 3;
  switch (k) {
    case 0: fz_keep(fz_check_tensor("requires_grad", tg_requires_grad(xs[0], fz_chance(70))), cheap(xs[0])); break;
    case 1: {
      int rc = fz_check_status("gradient", tg_gradient(y, fz_chance(5) ? NULL : xs, n, fz_chance(5) ? NULL : g));
      for (int i = 0; rc == 0 && i < n; i++) keep("gradient", g[i], cheap(y));
      break;
    }
    case 2: fz_check_status("backward", tg_backward(y)); break;
    case 3: keep("grad", tg_mul_s(tg_grad(y) ? tg_grad(y) : y, 1), false); break; /* a copy: the grad is y's */
    default: tg_zero_grad(y); break;
  }
}

/* One differentiable step of a gradient chain on x (any rank, 0-size axes included). */
static tg_tensor *grad_step(tg_tensor *x) {
  int nd = ndim_of(x), axis = fz_axis(nd), k = (int)fz_below(9);
  int64_t lo[SHAPE_CAP] = {0}, hi[SHAPE_CAP];
  for (int i = 0; i < SHAPE_CAP; i++) hi[i] = fz_below(2);
  switch (k) {
    case 0: return unary_ops[fz_below(N_(unary_ops))].fn(x);
    case 1: return tg_softmax(x, axis);
    case 2: return tg_cumsum(x, axis);
    case 3: return tg_max(x, &axis, 1, fz_chance(50));
    case 4: return tg_flip(x, &axis, 1);
    case 5: return tg_pad(x, lo, hi, fz_double());
    case 6: return tg_mul(x, tg_transpose(x, axis, fz_axis(nd)));
    case 7: return nd == 2 ? tg_matmul(x, tg_transpose(x, 0, 1)) : tg_logsumexp(x, axis, fz_chance(50));
    default: return tg_slice(x, axis, fz_below(3) - 1, TG_SLICE_END, fz_chance(50) ? 2 : -1);
  }
}

/* d sum(f(x)) / dx for a random chain f: the derivative rules meet 0-d tensors, empty axes and
 * high ranks. Cheap inputs only: the gradient may be realized later. */
static void call_grad_chain(void) {
  tg_tensor *x = fz_tensor(false), *y, *g = NULL;
  if (!x || !cheap(x) || !tg_dtype_is_float(tg_get_dtype(x))) return;
  int steps = 1 + (int)fz_below(3);
  fz_log("gradient of a %d-step chain on x rank %d", steps, ndim_of(x));
  y = x;
  for (int i = 0; i < steps && y; i++) y = grad_step(y);
  y = y ? tg_sum(y, NULL, 0, false) : NULL;
  if (!y) return (void)fz_check_tensor("gradient chain", NULL);
  if (fz_check_status("gradient", tg_gradient(y, &x, 1, &g)) == 0) keep("gradient", g, true);
}

/* ---------------------------------------------------------------- layers, optimizers, files */

static int64_t layer_size(void) {
  static const int64_t v[] = {1, 2, 3, 0, -1, INT64_MAX, INT64_C(1) << 62}; /* products: tiny or invalid */
  return fz_pick(v, N_(v));
}

static void call_layers(void) {
  int which = (int)fz_below(4), rc;
  tg_tensor *x = fz_tensor(true);
  fz_log("layer %d(x rank %d)", which, ndim_of(x));
  if (which == 0) {
    tg_linear l;
    if ((rc = fz_check_status("linear_init", tg_linear_init(&l, layer_size(), layer_size(), fz_chance(50)))) == 0) {
      keep("linear_forward", tg_linear_forward(&l, x), cheap(x));
      tg_linear_free(&l);
    }
  } else if (which == 1) {
    tg_conv2d_layer c;
    rc = tg_conv2d_init(&c, layer_size(), layer_size(), (int)layer_size(), (int)layer_size(), fz_int(), fz_int(),
                        fz_int(), fz_int(), fz_chance(50));
    if (fz_check_status("conv2d_init", rc) == 0) keep("conv2d_forward", tg_conv2d_forward(&c, x), cheap(x)), tg_conv2d_free(&c);
  } else if (which == 2) {
    tg_batchnorm2d b;
    if (fz_check_status("batchnorm2d_init", tg_batchnorm2d_init(&b, layer_size())) == 0) {
      if (cheap(x)) keep("batchnorm2d_forward", tg_batchnorm2d_forward(&b, x), true);
      tg_batchnorm2d_free(&b);
    }
  } else {
    tg_embedding e;
    if (fz_check_status("embedding_init", tg_embedding_init(&e, layer_size(), layer_size())) == 0) {
      keep("embedding_forward", tg_embedding_forward(&e, x), cheap(x));
      tg_embedding_free(&e);
    }
  }
}

static void call_optimizer(void) {
  tg_tensor *ps[3];
  int n = fz_chance(80) ? (int)fz_below(4) : fz_int();
  for (int i = 0; i < 3; i++) {
    ps[i] = fz_tensor(true);
    if (ps[i] && !cheap(ps[i])) return; /* creating an optimizer realizes its parameters */
    if (ps[i] && fz_chance(80)) tg_requires_grad(ps[i], true);
  }
  if (n > 3) n = 3;
  double lr = fz_double();
  fz_log("sgd/adam(ps, %d, lr %g)", n, lr);
  tg_clear_error();
  for (int i = 0; i < 3; i++) tg_zero_grad(ps[i]); /* a gradient from a huge graph must not be realized */
  tg_optimizer *o = fz_chance(50) ? tg_sgd(fz_chance(5) ? NULL : ps, n, lr, fz_double(), fz_double(), fz_chance(50))
                                  : tg_adam(ps, n, lr, fz_double(), fz_double(), fz_double());
  if (!o && !tg_last_error()[0]) fz_violation("optimizer returned NULL without a message");
  if (o && fz_chance(30)) fz_check_status("optimizer_step", tg_optimizer_step(o, NULL, 0));
  for (int i = 0; i < 3; i++) fz_mutated(ps[i]);
  tg_optimizer_free(o);
  for (int i = 0; i < 3; i++) tg_requires_grad(ps[i], false);
}

static void call_files(void) {
  static const char *paths[] = {NULL, "", "/", "/nonexistent/x.safetensors", "/dev/null", "/proc/self/status"};
  const char *path = paths[fz_below(N_(paths))];
  tg_state_dict sd = {0};
  int which = (int)fz_below(5);
  fz_log("file op %d(%s)", which, path ? path : "NULL");
  if (which == 0) fz_check_status("safetensors_read", tg_safetensors_read(path, fz_chance(10) ? NULL : &sd));
  else if (which == 1) fz_check_status("safetensors_load", tg_safetensors_load(path, &sd));
  else if (which == 2) fz_check_status("safetensors_save", tg_safetensors_save(NULL, &sd));
  else if (which == 3) {
    tg_tensor *t = tg_load_idx(path);
    if (!t && !tg_last_error()[0]) fz_violation("load_idx returned NULL without a message");
    fz_keep(t, true);
  } else {
    tg_dataset d = {0};
    fz_check_status("mnist_load", tg_mnist_load(path ? path : "/nonexistent", fz_chance(50), fz_chance(5) ? NULL : &d));
    tg_dataset_free(&d);
  }
  tg_state_dict_free(&sd);
}

static void call_state_dict(void) {
  static const char *names[] = {NULL, "", "w", "w", "__metadata__", "a.b", "\xff\xfe"};
  tg_state_dict sd = {0};
  for (int i = 0; i < 4; i++) {
    const char *name = names[fz_below(N_(names))];
    tg_tensor *t = fz_tensor(true);
    fz_log("state_dict_add(%s, t rank %d)", name ? name : "NULL", ndim_of(t));
    fz_check_status("state_dict_add", tg_state_dict_add(fz_chance(3) ? NULL : &sd, name, t));
  }
  tg_clear_error();
  if (!tg_state_dict_get(&sd, "w") && !tg_last_error()[0]) fz_violation("state_dict_get NULL without a message");
  int n = 0;
  free(tg_state_dict_parameters(fz_chance(5) ? NULL : &sd, &n));
  tg_state_dict_free(&sd);
}

static void call_loader(void) {
  tg_tensor *images = fz_tensor(true), *labels = fz_tensor(true);
  if ((images && !cheap(images)) || (labels && !cheap(labels))) return; /* the loader copies them to the host */
  tg_dataset d = {images, labels, images && tg_ndim(images) > 0 ? tg_dim(images, 0) : fz_size()};
  if (fz_chance(20)) d.n = fz_size();
  int64_t batch = fz_chance(70) ? 1 + fz_below(3) : fz_size();
  fz_log("loader_new(images rank %d, labels rank %d, n %lld, batch %lld)", ndim_of(images), ndim_of(labels), (long long)d.n,
         (long long)batch);
  tg_loader *l = tg_loader_new(fz_chance(5) ? NULL : &d, batch, fz_chance(50), fz_chance(50));
  if (!l && !tg_last_error()[0]) fz_violation("loader_new returned NULL without a message");
  tg_tensor *x, *y;
  for (int i = 0; l && i < 3; i++) {
    int rc = tg_loader_next(l, &x, &y); /* 1: a batch, 0: the end of an epoch */
    if (rc == 1) keep("loader x", x, true), keep("loader y", y, true);
    else fz_check_status("loader_next", rc);
  }
  tg_loader_free(l);
}

static void call_lifetimes(void) {
  int which = (int)fz_below(5), i = fz_slot_any();
  fz_log("lifetime op %d", which);
  if (which == 0 && i >= 0) { /* free a kept tensor early (the scope lets go of it) */
    tg_free(fz_slots[i].t);
    fz_slots[i].t = NULL;
  } else if (which == 1) { /* a nested scope whose one result is kept */
    tg_tensor *t = fz_tensor(true);
    tg_scope *s = tg_scope_begin();
    tg_tensor *r = tg_keep(tg_add(t, t));
    tg_scope_end(s);
    keep("scope", r, cheap(t));
  } else if (which == 2) {
    tg_free(NULL), tg_scope_end(NULL), (void)tg_keep(NULL), (void)tg_retain(NULL);
  } else if (which == 3) {
    uint32_t u[4];
    tg_random_u32(fz_chance(30) ? NULL : u, (size_t)fz_below(5));
  } else {
    (void)tg_promote_types(fz_dtype(), fz_dtype()), (void)tg_dtype_name(fz_dtype()), (void)tg_dtype_size(fz_dtype());
  }
}

/* Devices by name, and the kernel count of a schedule (nothing runs). */
static void call_devices_schedule(void) {
  static const char *names[] = {NULL, "", "CPU", "CPU:0", "CPU:-1", "CPU:99999999999", "LLVM", "CUDA", "cpu", ":0",
                                "CPU:", "CPU:0:0", "\xff"};
  tg_tensor *ts[4] = {fz_tensor(true), fz_tensor(true), fz_tensor(true), fz_tensor(true)};
  int n = fz_chance(85) ? (int)fz_below(5) : fz_int();
  const char *name = names[fz_below(N_(names))];
  fz_log("device_available(%s); schedule_kernels(ts, %d)", name ? name : "NULL", n);
  int a = tg_device_available(name);
  if (a != 0 && a != 1) fz_violation("device_available returned %d", a);
  tg_clear_error();
  int k = tg_schedule_kernels(fz_chance(3) ? NULL : ts, n > 4 ? 4 : n);
  if (k < 0) fz_check_status("schedule_kernels", k);
}

/* ---------------------------------------------------------------- the ops of issue 12 */

static const struct { const char *name; un_fn fn; } unary_ops2[] = {
    {"log10", tg_log10}, {"log1p", tg_log1p}, {"expm1", tg_expm1}, {"asin", tg_asin}, {"acos", tg_acos},
    {"atan", tg_atan}, {"sinh", tg_sinh}, {"cosh", tg_cosh}, {"asinh", tg_asinh}, {"acosh", tg_acosh},
    {"atanh", tg_atanh}, {"erf", tg_erf}, {"isfinite", tg_isfinite}, {"selu", tg_selu}, {"relu6", tg_relu6},
    {"hardsigmoid", tg_hardsigmoid}, {"hardswish", tg_hardswish}, {"mish", tg_mish}, {"softsign", tg_softsign},
    {"logsigmoid", tg_logsigmoid}, {"quick_gelu", tg_quick_gelu},
};
static const struct { const char *name; bin_fn fn; } binary_ops2[] = {
    {"atan2", tg_atan2}, {"copysign", tg_copysign}, {"fmod", tg_fmod}, {"logaddexp", tg_logaddexp},
    {"bitwise_left_shift", tg_bitwise_left_shift}, {"bitwise_right_shift", tg_bitwise_right_shift},
};

static void call_elementwise2(void) {
  tg_tensor *a = fz_tensor(true), *b = fz_tensor(true), *c = fz_tensor(true), *r;
  double x = fz_double(), y = fz_double();
  int k = (int)fz_below(N_(unary_ops2) + N_(binary_ops2) + 6);
  fz_log("elementwise2 %d(a rank %d, b rank %d, %g, %g)", k, ndim_of(a), ndim_of(b), x, y);
  if (k < N_(unary_ops2)) r = unary_ops2[k].fn(a);
  else if ((k -= N_(unary_ops2)) < N_(binary_ops2)) r = binary_ops2[k].fn(a, b);
  else switch (k - N_(binary_ops2)) {
      case 0: r = tg_elu(a, x); break;
      case 1: r = tg_celu(a, x); break;
      case 2: r = tg_hardtanh(a, x, y); break;
      case 3: r = tg_isclose(a, b, x, y, fz_chance(50)); break;
      case 4: r = tg_lerp(a, b, c); break;
      default: r = tg_masked_fill(a, b, x); break;
    }
  keep("elementwise2", r, true);
}

/* Calls that read values on the host (the shape of their result depends on them): cheap only. */
static void call_host_reading(void) {
  tg_tensor *a = fz_tensor(true), *b = fz_tensor(true);
  if ((a && !cheap(a)) || (b && !cheap(b))) return;
  int k = (int)fz_below(4), axis = fz_axis(ndim_of(a));
  fz_log("host-reading %d(a rank %d, b rank %d, axis %d)", k, ndim_of(a), ndim_of(b), axis);
  if (k == 0) keep("masked_select", tg_masked_select(a, b), true);
  else if (k == 1) keep("nonzero", tg_nonzero(a), true);
  else if (k == 2) keep("repeat_interleave_t", tg_repeat_interleave_t(a, b, axis), true);
  else {
    int rc = tg_allclose(a, b, fz_double(), fz_double(), fz_chance(50));
    if (rc < 0) fz_check_status("allclose", rc);
    else if (rc > 1) fz_violation("allclose returned %d", rc);
  }
}

static void call_axis_ops2(void) {
  tg_tensor *t = fz_tensor(true), *r;
  int nd = ndim_of(t), axis = fz_axis(nd), b = fz_axis(nd), n = fz_chance(85) ? (int)fz_below(4) : fz_int();
  int64_t v = fz_chance(70) ? fz_below(5) - 2 : fz_size(), w = fz_chance(70) ? 1 + fz_below(3) : fz_size();
  int64_t sizes[SHAPE_CAP], before[SHAPE_CAP], after[SHAPE_CAP];
  int axes[SHAPE_CAP], k = (int)fz_below(13);
  for (int i = 0; i < SHAPE_CAP; i++) {
    sizes[i] = fz_chance(70) ? (fz_chance(30) ? -1 : 1 + fz_below(3)) : fz_size();
    before[i] = fz_chance(70) ? fz_below(5) - 2 : fz_size(), after[i] = fz_chance(70) ? fz_below(5) - 2 : fz_size();
    axes[i] = fz_axis(nd);
  }
  if (n > SHAPE_CAP) n = SHAPE_CAP;
  fz_log("axis op2 %d(t rank %d, axis %d, %d, n %d, %lld, %lld)", k, nd, axis, b, n, (long long)v, (long long)w);
  switch (k) {
    case 0: r = tg_cumprod(t, axis); break;
    case 1: r = tg_logcumsumexp(t, axis); break;
    case 2: r = tg_softmin(t, axis); break;
    case 3: r = tg_argsort(t, axis, fz_chance(50)); break;
    case 4: r = tg_normalize(t, fz_double(), axis, fz_double()); break;
    case 5: r = tg_unfold(t, axis, v, w); break;
    case 6: r = tg_unflatten(t, axis, fz_chance(3) ? NULL : sizes, n); break;
    case 7: r = tg_repeat_interleave(t, v, axis); break;
    case 8: r = tg_diagonal(t, v, axis, b); break;
    case 9: r = fz_chance(50) ? tg_tril(t, v) : tg_triu(t, v); break;
    case 10: r = tg_diag(t, v); break;
    case 11: r = tg_roll(t, fz_chance(3) ? NULL : before, fz_chance(20) ? NULL : axes, n); break;
    default: r = tg_pad_mode(t, before, after, (tg_padding)(fz_chance(90) ? fz_below(4) : fz_int()), fz_double()); break;
  }
  keep("axis op2", r, true);
}

static void call_multi_out(void) {
  tg_tensor *t = fz_tensor(true), *o[8] = {0};
  int axis = fz_axis(ndim_of(t)), k = (int)fz_below(6), axes[SHAPE_CAP], n = gen_axes(axes, ndim_of(t)), rc;
  bool null_out = fz_chance(10);
  fz_log("multi-out %d(t rank %d, axis %d, n %d)", k, ndim_of(t), axis, n);
  switch (k) {
    case 0: rc = tg_cummax(t, axis, null_out ? NULL : &o[0], fz_chance(50) ? NULL : &o[1]); break;
    case 1: rc = tg_cummin(t, axis, null_out ? NULL : &o[0], &o[1]); break;
    case 2: rc = tg_sort(t, axis, fz_chance(50), null_out ? NULL : &o[0], fz_chance(50) ? NULL : &o[1]); break;
    case 3: rc = tg_topk(t, fz_chance(70) ? fz_below(4) : fz_size(), axis, fz_chance(50), &o[0], null_out ? NULL : &o[1]); break;
    case 4: rc = tg_var_mean(t, axes, n, fz_chance(50), fz_double(), &o[0], null_out ? NULL : &o[1]); break;
    default: { /* meshgrid of up to 3 tensors */
      tg_tensor *ts[3] = {t, fz_tensor(true), fz_tensor(true)};
      int m = fz_chance(85) ? (int)fz_below(4) : fz_int();
      rc = tg_meshgrid(ts, m > 3 ? 3 : m, fz_chance(50), null_out ? NULL : o);
      break;
    }
  }
  fz_check_status("multi-out", rc);
  for (int i = 0; rc == 0 && i < 8; i++)
    if (o[i]) keep("multi-out", o[i], true); /* outputs not asked for stay NULL */
}

static void call_scatter(void) {
  tg_tensor *t = fz_tensor(true), *idx = fz_tensor(true), *src = fz_tensor(true), *r;
  int axis = fz_axis(ndim_of(t)), k = (int)fz_below(3);
  if (idx && fz_chance(60)) idx = tg_cast(idx, TG_INT64);
  fz_log("scatter %d(t rank %d, %d, idx rank %d, src rank %d)", k, ndim_of(t), axis, ndim_of(idx), ndim_of(src));
  if (k == 0) r = tg_scatter(t, axis, idx, src);
  else if (k == 1) r = tg_scatter_add(t, axis, idx, src);
  else r = tg_scatter_reduce(t, axis, idx, src, (tg_scatter_op)(fz_chance(90) ? fz_below(5) : fz_int()), fz_chance(50));
  keep("scatter", r, true);
}

static void call_einsum(void) {
  static const char *eqs[] = {"ij,jk->ik", "ii->i", "ii", "...ij->...ji", "i,i", "ab->ba", "a->", "->", "iii",
                              ",->", "ij->ijk", "...", "a...b,b...->a", "bij,bjk->bik", "i,j->ij", "", "->->", "a,a,a",
                              "ij->j", "\xff", "aA", "a..b", "...->...", "ij,ij,ij->", "abcdefghijklmnopqrstuvwxyz->"};
  char big[300];
  memset(big, 'a', sizeof big - 1), big[sizeof big - 1] = 0;
  tg_tensor *ts[3] = {fz_tensor(true), fz_tensor(true), fz_tensor(true)};
  int n = fz_chance(85) ? (int)fz_below(4) : fz_int();
  const char *eq = fz_chance(3) ? NULL : fz_chance(3) ? big : eqs[fz_below(N_(eqs))];
  fz_log("einsum(\"%.40s\", ts, %d)", eq ? eq : "(null)", n);
  keep("einsum", tg_einsum(eq, fz_chance(3) ? NULL : ts, n > 3 ? 3 : n), true);
}

static void call_conv_pool_nd(void) {
  tg_tensor *x = fz_tensor(true), *w = fz_tensor(true), *b = fz_chance(50) ? NULL : fz_tensor(true), *idx = NULL, *r;
  int st[SHAPE_CAP], pad[SHAPE_CAP], dil[SHAPE_CAP], k[SHAPE_CAP], opad[SHAPE_CAP], pad2[SHAPE_CAP];
  int64_t out[SHAPE_CAP];
  double scale[SHAPE_CAP];
  for (int i = 0; i < SHAPE_CAP; i++) {
    st[i] = fz_chance(85) ? 1 + (int)fz_below(2) : fz_int(), pad[i] = fz_chance(85) ? (int)fz_below(2) : fz_int();
    dil[i] = fz_chance(85) ? 1 + (int)fz_below(2) : fz_int(), k[i] = fz_chance(85) ? 1 + (int)fz_below(3) : fz_int();
    opad[i] = fz_chance(85) ? 0 : fz_int(), pad2[i] = fz_chance(85) ? (int)fz_below(2) : fz_int();
    out[i] = fz_chance(70) ? 1 + fz_below(4) : fz_size(), scale[i] = fz_chance(70) ? 0.5 + (double)fz_below(4) : fz_double();
  }
  int nsp = fz_chance(85) ? 1 + (int)fz_below(3) : fz_int(), groups = fz_chance(85) ? 1 : fz_int(), which = (int)fz_below(6);
  tg_pool_opts o = {fz_chance(30) ? NULL : st, fz_chance(50) ? NULL : pad, fz_chance(80) ? NULL : pad2,
                    fz_chance(50) ? NULL : dil, fz_chance(30), fz_chance(30), fz_chance(80) ? 0 : fz_int()};
  fz_log("conv/pool nd %d(x rank %d, w rank %d, nsp %d, groups %d)", which, ndim_of(x), ndim_of(w), nsp, groups);
  switch (which) {
    case 0: r = tg_conv(x, w, b, nsp, st, pad, dil, groups); break;
    case 1: r = tg_conv_transpose(x, w, b, nsp, st, pad, opad, dil, groups); break;
    case 2: r = tg_max_pool(x, nsp, fz_chance(5) ? NULL : k, fz_chance(10) ? NULL : &o, fz_chance(50) ? &idx : NULL); break;
    case 3: r = tg_avg_pool(x, nsp, k, fz_chance(10) ? NULL : &o); break;
    case 4: r = tg_max_unpool(x, w, nsp, k, fz_chance(30) ? NULL : st, fz_chance(50) ? NULL : pad, fz_chance(50) ? NULL : out); break;
    default:
      r = tg_interpolate(x, fz_chance(50) ? out : NULL, fz_chance(50) ? scale : NULL,
                         (tg_interp_mode)(fz_chance(90) ? fz_below(5) : fz_int()), fz_chance(50));
      break;
  }
  keep("conv/pool nd", r, true);
  if (r && idx) keep("max_pool indices", idx, true);
}

const fz_call fz_hostile_calls[] = {
    {"from_data", 6, call_from_data}, {"full", 6, call_full},      {"like", 2, call_like},
    {"ranges", 3, call_ranges},       {"random", 4, call_random},  {"reshape_expand", 6, call_reshape_expand},
    {"permute", 3, call_permute},     {"pad_shrink", 5, call_pad_shrink}, {"axis_views", 6, call_axis_views},
    {"slice", 4, call_slice},         {"cat_stack", 4, call_cat_stack}, {"split", 2, call_split},
    {"repeat", 3, call_repeat},       {"unary", 5, call_unary},    {"binary", 6, call_binary},
    {"scalar_ops", 3, call_scalar_ops}, {"cast", 2, call_cast},    {"reduce", 5, call_reduce},
    {"axis_fns", 5, call_axis_fns},   {"indexing", 3, call_indexing}, {"conv_pool", 4, call_conv_pool},
    {"norms", 3, call_norms},         {"losses", 2, call_losses},  {"inspect", 3, call_inspect},
    {"realize", 3, call_realize},     {"to_host", 3, call_to_host}, {"assign", 2, call_assign},
    {"grad", 2, call_grad},           {"grad_chain", 3, call_grad_chain},           {"layers", 1, call_layers},  {"optimizer", 1, call_optimizer},
    {"files", 1, call_files},         {"state_dict", 1, call_state_dict}, {"loader", 1, call_loader},
    {"lifetimes", 2, call_lifetimes},
    {"elementwise2", 4, call_elementwise2}, {"host_reading", 2, call_host_reading}, {"axis_ops2", 6, call_axis_ops2},
    {"multi_out", 3, call_multi_out},  {"scatter", 3, call_scatter}, {"einsum", 3, call_einsum},
    {"conv_pool_nd", 4, call_conv_pool_nd}, {"devices_schedule", 1, call_devices_schedule},
};
const int fz_hostile_ncalls = N_(fz_hostile_calls);
