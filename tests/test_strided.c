/* test_strided.c — strided vector loads (docs/optimizer.md; lower.c vector_access and
 * lane_strided, render/llvm.c strided_load, vectorize.c lane_index, opt.c lane_friendly): a LOAD
 * whose vector lanes lie 2 to ks->load_stride elements apart (caps.load_stride: 4 on the LLVM
 * device, 0 elsewhere; STRIDED=0 turns it off) gets arg[4] = that stride (load_lane_stride);
 * the LLVM renderer reads stride * lanes elements at once (masked when the load is masked or
 * its lanes run through a padded dim's clamp) and keeps every stride-th; other renderers, and
 * the lane-by-lane test hook, split it into scalar loads at base + stride * lane.
 *
 * Structure (the LLVM device): x[:, ::s] * 2 + 1 (s = 2, 3, 4, from 0 and 1), a 3x3 stride-2
 * depthwise conv (padding 0 and 1) and a 3x3/2 max pool over rows of two vectors or more lower
 * under the heuristics to LOADs of lane stride s (2), the source keeps every s-th element of a
 * wide load, and with load stride 1 (STRIDED=0) no load is strided; with lanes forced along
 * the row, a stride is strided exactly when it is at most the load stride (::5 is a gather);
 * the C renderer's vector forms and the lane-by-lane hook split strided loads, LLVM's keep them,
 * and DEV=CPU's own kernels have none; STRIDED is read from the environment (fresh processes).
 * Values, exact against naive loops in double (dyadic inputs: float32 sums are exact): slices
 * of stride 2-5 in float32, float64, int32 and uint8 (odd rows: padded lanes, checked loads;
 * narrow rows: lanes down the rows), sums and maxes over strided elements, sums of strided
 * taps, a padded input (masked loads), a variable row length, depthwise convs (stride 2-4,
 * dilation 2) and max pools with padding — on the normal path, under the heuristics, lane by
 * lane, with lanes on the last and second last output dim, and under random optimizer actions,
 * with the load stride forced to 4 on every host device (DEV=CPU: the C renderer must split what
 * it has no vector form for) unless STRIDED=0. Every unchecked strided load built must keep its
 * lanes inside its buffer (value ranges) and its span within BUFFER_SLACK. The buffer edge: a
 * strided load whose last lane is a buffer's last element (the wide load reads up to
 * stride - 1 elements past it, into BUFFER_SLACK) is an unchecked wide load and reads right. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "kernel_ast.h"
#include "codegen/codegen.h"
#include "device/device.h"
#include "runtime/helpers.h"
#include "schedule/schedule.h"
#include "tensor/tensor.h"
#include "uop/symbolic.h"
#include "tg_nn.h"

/* ------------------------------------------------------------ helpers */

static bool llvm_here(void) { return device_default() == device_get("LLVM"); }
static bool host_here(void) { return device_default() && !device_is_gpu(device_default()); }

/* Float32 lanes of one vector register on the default device (0: none). */
static int f32_lanes(void) {
  const device *d = device_default();
  return d && d->vectors && d->caps.vector_bytes >= 8 ? caps_lanes(&d->caps, 4) : 0;
}

/* The load stride the value tests force on host devices: 4, or 1 under STRIDED=0. */
static int forced_stride(void) { return tg_getenv_int("STRIDED", 1) ? 4 : 1; }

/* Values in [-3.125, 3.125], multiples of 1/16: float32 sums of thousands of them (and of
 * products of two) are exact in any order, so every result must equal the naive loop's. */
static void fill(double *v, int64_t n, int seed) {
  for (int64_t i = 0; i < n; i++) v[i] = (double)((i * 37 + seed * 11) % 101 - 50) / 16;
}

/* A realized tensor of dtype dt holding v (integer types: 16 v, plus 50 for uint8, so
 * 2x + 1 fits); v is updated to the values it holds. */
static tg_tensor *tensor_of(double *v, const int64_t *shape, int nd, tg_dtype dt) {
  int64_t n = 1;
  for (int i = 0; i < nd; i++) n *= shape[i];
  void *b = malloc(tg_dtype_size(dt) * (size_t)n);
  for (int64_t i = 0; i < n; i++) {
    switch (dt) {
      case TG_FLOAT64: ((double *)b)[i] = v[i]; break;
      case TG_INT32: v[i] = ((int32_t *)b)[i] = (int32_t)(v[i] * 16); break;
      case TG_UINT8: v[i] = ((uint8_t *)b)[i] = (uint8_t)(v[i] * 16 + 50); break; /* 0..100: 2x + 1 fits */
      default: v[i] = ((float *)b)[i] = (float)v[i]; break;
    }
  }
  tg_tensor *t = tg_from_data(b, dt, shape, nd);
  free(b);
  CHECK(t && tg_realize(t) == 0);
  return t;
}

/* y's n elements as doubles (its dtype converted), or NULL. */
static double *host_values(tg_tensor *y, int64_t n) {
  if (!y) return NULL;
  tg_dtype dt = tg_get_dtype(y);
  size_t es = tg_dtype_size(dt);
  void *b = malloc(es * (size_t)(n ? n : 1));
  double *d = malloc(sizeof(double) * (size_t)(n ? n : 1));
  if (tg_to_host(y, b, es * (size_t)n) != 0) { free(b), free(d); return NULL; }
  for (int64_t i = 0; i < n; i++)
    d[i] = dt == TG_FLOAT64 ? ((double *)b)[i] : dt == TG_INT32 ? ((int32_t *)b)[i] : dt == TG_UINT8 ? ((uint8_t *)b)[i] : ((float *)b)[i];
  free(b);
  return d;
}

/* Elements of got not equal to want (exact: see fill), the first few printed; -1 if none came. */
static int mismatches(const char *what, const double *got, const double *want, int64_t n) {
  if (!got) return printf("  %s: no result (%s)\n", what, tg_last_error()), -1;
  int bad = 0;
  for (int64_t i = 0; i < n; i++)
    if (got[i] != want[i] && bad++ < 3) printf("  %s[%lld]: got %.9g, expected %.9g\n", what, (long long)i, got[i], want[i]);
  return bad;
}


/* Strided loads found reaching outside their buffer (the coverage and bounds checks). */
static int strided_seen, strided_outside;

/* LOADs of a lowered kernel (before devectorize) by lane stride: n[1] contiguous or scalar,
 * n[2..4] strided, n[0] any other stride. A strided load neither checked nor masked is read
 * whole (render/llvm.c strided_load): each of its lanes must lie inside the buffer for every
 * value its base can take (symbolic.c's range), and its span end within BUFFER_SLACK; one
 * that does not is counted in strided_outside and printed. */
static void count_lowered(uop *sink, int n[5]) {
  uop **order;
  int m = sink ? uop_toposort(sink, &order) : 0;
  for (int i = 0; i < m; i++) {
    uop *u = order[i];
    if (u->op != OP_LOAD) continue;
    int64_t s = load_lane_stride(u);
    n[s >= 1 && s <= 4 ? s : 0]++;
    if (s < 2 || (u->narg > 2 && u->arg[2]) || u->nsrc > 2 || u->src[0]->op != OP_DEFINE_GLOBAL) continue;
    int64_t lo = uop_vmin(u->src[1]), hi = uop_vmax(u->src[1]) + s * (u->arg[0] - 1), elems = u->src[0]->arg[1];
    int64_t span_end = (hi + s) * (int64_t)tg_dtype_size(u->dtype); /* bytes past the buffer's start */
    if (lo < 0 || hi >= elems || span_end > elems * (int64_t)tg_dtype_size(u->dtype) + BUFFER_SLACK) {
      strided_outside++;
      printf("  an unchecked stride-%lld load of %lld lanes reads elements %lld..%lld of %lld\n", (long long)s, (long long)u->arg[0], (long long)lo,
             (long long)hi, (long long)elems);
    }
  }
  if (m > 0) free(order);
}

/* ------------------------------------------------------------ structure */

/* The kernel of ast built for the default device with the heuristics under a load stride
 * (load_stride 1: STRIDED=0), or with lanes of a vector along the last output dim (force_lanes)
 * instead: its LOADs by lane stride as the renderer gets them (lowered,
 * devectorized for the device's vector forms, linearized: n as count_lowered), and whether the
 * rendered source keeps every s-th element of a wide load (a shufflevector <0, s, 2s, 3s, ...>,
 * for s = 2..4: bit s of *shuffles); *unchecked (if asked): strided loads neither checked nor
 * masked (one plain wide load). 0, or -1 if something failed. */
static int inspect(uop *ast, int load_stride, bool force_lanes, int n[5], int *shuffles, char *opts, size_t optn, int *unchecked) {
  static const vector_forms scalar_only = {NULL};
  const device *dev = device_default();
  memset(n, 0, sizeof(int) * 5), *shuffles = 0;
  kshape ks;
  if (program_shape_init(dev, ast, &ks) < 0) return -1;
  ks.load_stride = load_stride;
  if (force_lanes) { /* lanes along the last output dim, whatever the heuristics would say */
    int a = ks.nax - 1, L = f32_lanes();
    while (a >= 0 && (ks.ax[a].kind != AX_GLOBAL || ks.ax[a].dim != ks.nout - 1)) a--;
    if (a < 0 || (ks.ax[a].size % L && kshape_apply(&ks, (opt_action){OPT_PADTO, a, L}) < 0) ||
        kshape_apply(&ks, (opt_action){OPT_UPCAST, a, L}) < 0 || kshape_lane_axis(&ks) < 0)
      return -1;
  } else {
    kshape_optimize(&ks, ast, &dev->caps);
  }
  if (opts) kshape_describe(&ks, opts, optn);
  int rc = -1;
  size_t mark = uop_pool_mark();
  kernel_info info = {0};
  lin_program lin = {0};
  uop *sink = lower_kernel(ast, &ks, kshape_two_stages(&ks) ? STAGE_PARTIAL : STAGE_ONLY, &info);
  if (sink) sink = devectorize(sink, dev->vectors ? dev->vectors : &scalar_only);
  if (sink && linearize(sink, &lin, &info) == 0 && program_spec_check(&lin) == 0) {
    rc = 0;
    for (int i = 0; i < lin.n; i++) {
      uop *u = lin.ops[i].u;
      if (u->op != OP_LOAD || lin.ops[i].kind != L_VALUE) continue;
      int64_t s = load_lane_stride(u);
      n[s >= 1 && s <= 4 ? s : 0]++;
      if (unchecked && s > 1 && !(u->narg > 2 && u->arg[2]) && u->nsrc == 2) ++*unchecked;
    }
  }
  free(lin.ops);
  uop_pool_release(mark);
  program *p = rc == 0 ? program_build(dev, ast, &ks) : NULL;
  if (!p) return -1;
  for (int s = 2; s <= 4; s++) {
    char pat[64];
    snprintf(pat, sizeof pat, "<i32 0, i32 %d, i32 %d, i32 %d", s, 2 * s, 3 * s);
    if (strstr(p->src, pat) && strstr(p->src, "shufflevector")) *shuffles |= 1 << s;
  }
  program_free(p);
  return 0;
}

#define NEED_LLVM_VECTORS()                                                                                      \
  do {                                                                                                           \
    if (!llvm_here()) SKIP("strided vector loads are the LLVM device's (caps.load_stride); this is %s", device_default()->name); \
    if (f32_lanes() < 4) SKIP("the LLVM device has no vectors of 4 floats here");                               \
  } while (0)

/* One structure case: the kernel of y has strided loads of stride `want` with the device's
 * load stride, and none without. */
static void check_structure(const char *what, tg_tensor *y, int want) {
  const device *dev = device_default();
  uop *ast = only_ast(y);
  CHECK(ast != NULL);
  if (!ast) { printf("  %s: not one kernel\n", what); return; }
  int on[5], off[5], shuf_on, shuf_off;
  char opts_on[256] = "", opts_off[256] = "";
  CHECK(dev->caps.load_stride == 4);
  CHECK(inspect(ast, dev->caps.load_stride, false, on, &shuf_on, opts_on, sizeof opts_on, NULL) == 0);
  CHECK(inspect(ast, 1, false, off, &shuf_off, opts_off, sizeof opts_off, NULL) == 0);
  bool ok_on = on[want] >= 1 && (shuf_on & 1 << want), ok_off = off[2] + off[3] + off[4] + off[0] == 0;
  CHECK(ok_on);
  CHECK(ok_off);
  if (!ok_on || !ok_off)
    printf("  %s: stride %d loads %d (source shuffle %d) with [%s]; strided loads without: %d [%s]\n", what, want, on[want],
           !!(shuf_on & 1 << want), opts_on, off[2] + off[3] + off[4] + off[0], opts_off);
  uop_decref(ast);
}

/* x[:, start::s] * 2 + 1 of an (rows, cols) float32 tensor. */
static tg_tensor *slice_affine(tg_tensor *x, int64_t start, int64_t s) {
  return tg_add_s(tg_mul_s(tg_slice(x, 1, start, TG_SLICE_END, s), 2.0), 1.0);
}

TEST(strided_loads_in_slices_convs_and_pools) {
  NEED_LLVM_VECTORS();
  int L = f32_lanes();
  /* output rows of two vectors or more (opt.c lane_friendly's strided_from): 3 whole vectors
   * for the slices (an elementwise kernel's row is not padded for lanes), an odd 2L + 5 for
   * the conv and the pool (padded lanes: checked loads) */
  int64_t w = 3 * L;
  tg_scope *sc = tg_scope_begin();
  for (int s = 2; s <= 4; s++) {
    int64_t shape[2] = {64, s * w};
    double *v = malloc(sizeof(double) * (size_t)(64 * s * w));
    fill(v, 64 * s * w, s);
    tg_tensor *x = tensor_of(v, shape, 2, TG_FLOAT32);
    char what[64];
    snprintf(what, sizeof what, "x[:, ::%d] * 2 + 1", s);
    check_structure(what, slice_affine(x, 0, s), s);
    snprintf(what, sizeof what, "x[:, 1::%d] * 2 + 1", s);
    check_structure(what, slice_affine(x, 1, s), s);
    free(v);
  }
  /* 3x3 stride-2 depthwise conv, padding 1 (masked taps), and max pool 3x3/2 with padding 1 */
  w = 2 * L + 5;
  int64_t xs[4] = {2, 4, 9, 2 * w}, ws[4] = {4, 1, 3, 3};
  double *xv = malloc(sizeof(double) * (size_t)(2 * 4 * 9 * 2 * w)), wv[36];
  fill(xv, 2 * 4 * 9 * 2 * w, 1), fill(wv, 36, 2);
  tg_tensor *x = tensor_of(xv, xs, 4, TG_FLOAT32), *wt = tensor_of(wv, ws, 4, TG_FLOAT32);
  check_structure("depthwise 3x3/2 pad 1", tg_conv2d(x, wt, NULL, (const int[]){2, 2}, (const int[]){1, 1}, NULL, 4), 2);
  check_structure("depthwise 3x3/2 pad 0", tg_conv2d(x, wt, NULL, (const int[]){2, 2}, (const int[]){0, 0}, NULL, 4), 2);
  check_structure("max_pool 3x3/2 pad 1", tg_max_pool2d(x, (const int[]){3, 3}, (const int[]){2, 2}, (const int[]){1, 1}), 2);
  free(xv);
  tg_scope_end(sc);
}

/* Lanes along the last output dim (forced, not the heuristics' choice) lie s elements apart in
 * x[:, ::s]: a strided load of stride s exactly when 2 <= s <= the load stride (4; 2 and 1
 * tried too), else a gather (::5 with the device's 4) or a contiguous load (::1). */
TEST(strided_loads_only_up_to_the_load_stride) {
  NEED_LLVM_VECTORS();
  int L = f32_lanes();
  int64_t w = 3 * L, shape[2] = {64, 5 * w};
  double *v = malloc(sizeof(double) * (size_t)(64 * 5 * w));
  fill(v, 64 * 5 * w, 3);
  tg_scope *sc = tg_scope_begin();
  tg_tensor *x = tensor_of(v, shape, 2, TG_FLOAT32);
  for (int s = 1; s <= 5; s++) {
    uop *ast = only_ast(slice_affine(x, 0, s));
    CHECK(ast != NULL);
    for (int ls = 1; ast && ls <= 4; ls++) {
      if (ls == 3) continue;
      int n[5], shuf;
      CHECK(inspect(ast, ls, true, n, &shuf, NULL, 0, NULL) == 0);
      int strided = n[0] + n[2] + n[3] + n[4];
      bool want = s >= 2 && s <= ls, ok = want ? n[s] >= 1 && n[s] == strided && (shuf & 1 << s) : strided == 0;
      CHECK(ok);
      if (!ok) printf("  x[:, ::%d], load stride %d: %d strided loads (%d of stride %d), shuffle %d\n", s, ls, strided, s <= 4 ? n[s] : n[0], s, !!(shuf & 1 << s));
    }
    if (ast) uop_decref(ast);
  }
  tg_scope_end(sc);
  free(v);
}

/* The lowered kernel of x[:, ::2] * 2 + 1 (rows of 64) with 8 lanes along its row and load
 * stride 4 (any device: no renderer involved) has stride-2 LOADs; the LLVM renderer's vector
 * forms keep them, the C renderer's (c_vector_ok) and none at all (the lane-by-lane hook) split
 * each into 8 scalar loads: no strided or vector LOAD is left. As the default device builds it,
 * only the LLVM device (STRIDED on) has strided loads: DEV=CPU's kernel has none. */
TEST(strided_loads_split_where_a_renderer_has_no_form) {
  static const vector_forms scalar_only = {NULL};
  int64_t shape[2] = {16, 2 * 64};
  double *v = malloc(sizeof(double) * 16 * 128);
  fill(v, 16 * 128, 1);
  tg_scope *sc = tg_scope_begin();
  tg_tensor *x = tensor_of(v, shape, 2, TG_FLOAT32);
  uop *ast = only_ast(slice_affine(x, 0, 2));
  kshape ks;
  CHECK(ast && kshape_init(&ks, ast) == 0);
  if (ast) {
    ks.load_stride = 4;
    int a = ks.nax - 1;
    while (a >= 0 && (ks.ax[a].kind != AX_GLOBAL || ks.ax[a].dim != ks.nout - 1)) a--;
    CHECK(a >= 0 && kshape_apply(&ks, (opt_action){OPT_UPCAST, a, 8}) == 0 && kshape_lane_axis(&ks) >= 0);
    size_t mark = uop_pool_mark();
    kernel_info info = {0};
    uop *sink = lower_kernel(ast, &ks, STAGE_ONLY, &info);
    CHECK(sink != NULL);
    const vector_forms *forms[3] = {&llvm_vector_forms, &c_vector_forms, &scalar_only};
    for (int f = 0; f < 3 && sink; f++) {
      uop *d = devectorize(sink, forms[f]), **order;
      int m = d ? uop_toposort(d, &order) : 0, strided = 0, vec = 0, scalar = 0;
      for (int i = 0; i < m; i++)
        if (order[i]->op == OP_LOAD && order[i]->src[0]->arg[0] == 1) { /* x, not the scalars' buffer */
          strided += load_lane_stride(order[i]) == 2;
          vec += order[i]->vcount > 1, scalar += order[i]->vcount <= 1;
        }
      if (m > 0) free(order);
      bool ok = f == 0 ? strided >= 1 && strided == vec : strided == 0 && vec == 0 && scalar >= 8;
      CHECK(d && ok);
      if (!ok) printf("  forms %d: %d strided, %d vector and %d scalar loads of x\n", f, strided, vec, scalar);
    }
    uop_pool_release(mark);
    /* as the default device builds it (its own load stride, the heuristics, its vector forms):
     * strided loads only on the LLVM device, with vectors and STRIDED on (DEV=CPU: none) */
    const device *dev = device_default();
    kshape own;
    int n[5], shuf;
    CHECK(program_shape_init(dev, ast, &own) == 0);
    CHECK(llvm_here() ? own.load_stride == (tg_getenv_int("STRIDED", 1) ? 4 : 1) : own.load_stride <= 1);
    if (!device_is_gpu(dev)) {
      CHECK(inspect(ast, own.load_stride, false, n, &shuf, NULL, 0, NULL) == 0);
      bool want = llvm_here() && own.load_stride > 1 && f32_lanes() >= 2 && 64 >= 2 * f32_lanes();
      CHECK(want ? n[2] >= 1 && (shuf & 1 << 2) : n[0] + n[2] + n[3] + n[4] == 0 && !shuf);
    }
    uop_decref(ast);
  }
  tg_scope_end(sc);
  free(v);
}

/* Run in a fresh process with STRIDED=0 or 1: program_shape_init's load stride is the device's
 * (1 when off), the heuristics' x[:, ::2] * 2 + 1 has stride-2 loads iff it is on, and the
 * normal (cached) path builds with that state. */
TEST_CHILD(strided_env_child) {
  const device *dev = device_default();
  bool on = tg_getenv_int("STRIDED", 1) != 0;
  int64_t w = 3 * f32_lanes(), shape[2] = {64, 2 * w};
  double *v = malloc(sizeof(double) * (size_t)(128 * w));
  fill(v, 128 * w, 4);
  tg_scope *sc = tg_scope_begin();
  tg_tensor *x = tensor_of(v, shape, 2, TG_FLOAT32);
  uop *ast = only_ast(slice_affine(x, 0, 2));
  CHECK(ast != NULL);
  kshape ks;
  CHECK(ast && program_shape_init(dev, ast, &ks) == 0);
  CHECK(ks.load_stride == (on ? dev->caps.load_stride : 1));
  int n[5], shuf;
  CHECK(ast && inspect(ast, ks.load_stride, false, n, &shuf, NULL, 0, NULL) == 0);
  CHECK(on ? n[2] >= 1 : n[2] == 0);
  /* the normal (cached) path builds with that state */
  program *p = ast ? program_get(dev, ast) : NULL;
  CHECK(p && p->ks.load_stride == ks.load_stride);
  if (ast) uop_decref(ast);
  tg_scope_end(sc);
  free(v);
}

TEST(strided_env_knob_turns_it_off) {
  NEED_LLVM_VECTORS();
  static char out[1 << 14];
  for (int on = 0; on <= 1; on++) {
    int st = harness_run_child("strided_env_child", on ? "STRIDED=1" : "STRIDED=0", out, sizeof out);
    CHECK(st == 0);
    if (st) printf("  STRIDED=%d child: status %d\n%s\n", on, st, out);
  }
}

/* ------------------------------------------------------------ values */

static uint64_t next_random(uint64_t *s) {
  *s ^= *s << 13, *s ^= *s >> 7, *s ^= *s << 17;
  return *s;
}

/* How the kernels of a value run are built (the program hook): the heuristics or random
 * actions, with load_stride forced (forced_stride) on host devices; what the builds made. */
typedef struct hook_ctx {
  bool random;
  uint64_t rng;
  int lanes_from_last;  /* > 0: instead, lanes_amount lanes on output dim nout - lanes_from_last (padded) */
  int64_t lanes_amount;
  int kernels, strided; /* kernels built and their strided LOADs as lowered (before devectorize) */
  char opts[1024];      /* the actions of each kernel, for a failure's message */
} hook_ctx;

/* Up to 6 random actions (test_opt's draws); half the time first lanes of 2-16 on an output
 * axis (the last output dim's more often: the strided rows), padded to fit. */
static void random_actions(kshape *ks, uint64_t *st) {
  opt_action cand[512];
  if (next_random(st) % 2) {
    int axes[KS_MAX_AXES], na = 0, last = -1;
    for (int a = 0; a < ks->nax; a++)
      if (ks->ax[a].kind == AX_GLOBAL && ks->ax[a].size > 1) {
        axes[na++] = a;
        if (ks->ax[a].dim == ks->nout - 1) last = a;
      }
    if (na) {
      int a = last >= 0 && next_random(st) % 3 ? last : axes[next_random(st) % (uint64_t)na];
      int64_t amount = 2 << (next_random(st) % 4);
      if (ks->ax[a].size % amount) kshape_apply(ks, (opt_action){OPT_PADTO, a, amount});
      kshape_apply(ks, (opt_action){OPT_UPCAST, a, amount});
    }
  }
  int steps = (int)(next_random(st) % 7);
  for (int i = 0; i < steps; i++) {
    int n = kshape_candidates(ks, cand, 512);
    if (n == 0) break;
    kshape_apply(ks, cand[next_random(st) % (uint64_t)n]);
  }
  tg_clear_error(); /* a refused action's message */
}

static int value_hook(uop *ast, kshape *ks, void *ctx) {
  hook_ctx *h = ctx;
  const device *dev = device_default();
  if (!device_is_gpu(dev)) ks->load_stride = forced_stride();
  if (h->random) random_actions(ks, &h->rng);
  else if (h->lanes_from_last > 0) {
    int a = ks->nax - 1;
    while (a >= 0 && (ks->ax[a].kind != AX_GLOBAL || ks->ax[a].dim != ks->nout - h->lanes_from_last)) a--;
    if (a >= 0 && ks->ax[a].size % h->lanes_amount) kshape_apply(ks, (opt_action){OPT_PADTO, a, h->lanes_amount});
    if (a >= 0) kshape_apply(ks, (opt_action){OPT_UPCAST, a, h->lanes_amount});
  } else kshape_optimize(ks, ast, &dev->caps);
  size_t mark = uop_pool_mark();
  int n[5] = {0};
  for (int s = 0; s < (kshape_two_stages(ks) ? 2 : 1); s++) {
    kernel_info info = {0};
    count_lowered(lower_kernel(ast, ks, kshape_two_stages(ks) ? STAGE_PARTIAL + s : STAGE_ONLY, &info), n);
  }
  uop_pool_release(mark);
  tg_clear_error();
  h->kernels++, h->strided += n[0] + n[2] + n[3] + n[4];
  size_t len = strlen(h->opts);
  if (len + 2 < sizeof h->opts) {
    char d[512];
    kshape_describe(ks, d, sizeof d);
    snprintf(h->opts + len, sizeof h->opts - len, "%s[%s]%s", len ? " " : "", d, n[0] + n[2] + n[3] + n[4] ? "*" : "");
  }
  return 0;
}

/* A value case: builds its output from fresh inputs, fills want (*n elements), returns y. */
typedef tg_tensor *(*case_fn)(const void *arg, double **want, int64_t *n);

/* Run one case under a build mode: mismatches (-1: no result). */
static int run_once(const char *name, case_fn f, const void *arg, const char *mode, hook_ctx *h, bool lane_by_lane) {
  tg_scope *sc = tg_scope_begin();
  if (h) program_set_opt_hook(value_hook, h);
  program_set_lane_by_lane(lane_by_lane);
  double *want = NULL;
  int64_t n = 0;
  tg_tensor *y = f(arg, &want, &n);
  double *got = host_values(y, n);
  char what[160];
  snprintf(what, sizeof what, "%s (%s)", name, mode);
  int bad = want ? mismatches(what, got, want, n) : -1;
  if (bad && h) printf("  %s: actions %s\n", what, h->opts);
  program_set_lane_by_lane(false);
  if (h) program_set_opt_hook(NULL, NULL), strided_seen += h->strided;
  free(want), free(got);
  tg_scope_end(sc);
  return bad;
}

/* Every mode: the normal path (cached programs), the heuristics (load stride forced), the same
 * lane by lane, a vector of lanes (and 4 lanes, on the LLVM device) along the last and the
 * second last output dim, and `seeds` random action sequences (every third lane by lane; a third
 * as many off the LLVM device, whose kernels each take a C compiler; STRIDED_SEEDS=n: n). */
static void check_case(const char *name, case_fn f, const void *arg, int seeds) {
  CHECK(run_once(name, f, arg, "default", NULL, false) == 0);
  hook_ctx h = {0};
  CHECK(run_once(name, f, arg, "heuristics", &h, false) == 0);
  hook_ctx hl = {0};
  CHECK(run_once(name, f, arg, "heuristics, lane by lane", &hl, true) == 0);
  int L = f32_lanes();
  for (int k = 1; k <= 2 && L >= 2; k++) /* lanes down the last and the second last output dim */
    for (int64_t amount = L > 4 && llvm_here() ? 4 : L;; amount = L) {
      hook_ctx d = {.lanes_from_last = k, .lanes_amount = amount};
      char mode[64];
      snprintf(mode, sizeof mode, "%lld lanes on output dim -%d", (long long)amount, k);
      CHECK(run_once(name, f, arg, mode, &d, false) == 0);
      if (amount == L) break;
    }
  if (!llvm_here()) seeds = (seeds + 2) / 3; /* a C compiler per kernel: fewer */
  if (tg_getenv_int("STRIDED_SEEDS", 0) > 0) seeds = tg_getenv_int("STRIDED_SEEDS", 0); /* more: STRIDED_SEEDS=n */
  uint64_t key = 1469598103934665603ull; /* the case's name (FNV-1a): the same draws every run */
  for (const char *p = name; *p; p++) key = (key ^ (unsigned char)*p) * 1099511628211ull;
  for (int seed = 1; seed <= seeds; seed++) {
    hook_ctx r = {.random = true, .rng = (key + 0x9e3779b97f4a7c15ull * (uint64_t)seed) | 1};
    char mode[64];
    bool lbl = seed % 3 == 0;
    snprintf(mode, sizeof mode, "random seed %d%s", seed, lbl ? ", lane by lane" : "");
    CHECK(run_once(name, f, arg, mode, &r, lbl) == 0);
  }
}

/* The checks at a value test's end: forced strided lanes were really made, and none of the
 * unchecked ones could reach outside its buffer (count_lowered). */
static void check_coverage(void) {
  if (host_here() && f32_lanes() >= 2 && forced_stride() > 1) {
    CHECK(strided_seen > 0);
    printf("  %d strided loads in the hooked builds\n", strided_seen);
  }
  CHECK(strided_outside == 0);
  strided_seen = strided_outside = 0;
}

/* ---- slices: y = x[:, start::s] * 2 + 1 */

typedef struct slice_case {
  tg_dtype dt;
  int64_t rows, cols, start, s;
} slice_case;

static tg_tensor *slice_run(const void *arg, double **want, int64_t *n) {
  const slice_case *c = arg;
  int64_t w = (c->cols - c->start + c->s - 1) / c->s, shape[2] = {c->rows, c->cols};
  double *v = malloc(sizeof(double) * (size_t)(c->rows * c->cols));
  fill(v, c->rows * c->cols, (int)c->s);
  tg_tensor *x = tensor_of(v, shape, 2, c->dt);
  *n = c->rows * w, *want = malloc(sizeof(double) * (size_t)*n);
  for (int64_t r = 0; r < c->rows; r++)
    for (int64_t j = 0; j < w; j++) (*want)[r * w + j] = v[r * c->cols + c->start + c->s * j] * 2 + 1;
  free(v);
  return slice_affine(x, c->start, c->s);
}

static const char *dtype_name(tg_dtype dt) {
  return dt == TG_FLOAT64 ? "float64" : dt == TG_INT32 ? "int32" : dt == TG_UINT8 ? "uint8" : "float32";
}

/* Strides 2, 3, 4 from offsets 0 and 1, output rows of 37 and 45 (odd: padded lanes) and 64
 * (whole vectors), in float32, float64, int32 and uint8; stride 5 (past the load stride); and
 * rows of 2 to 4 outputs, whose lanes down the rows store 2-4 apart (stores stay contiguous
 * or scatter: never strided) and load s*(w-1)+1 apart. */
TEST(strided_slice_values) {
  for (int s = 2; s <= 5; s++)
    for (int64_t w = 2; w <= 4; w++) {
      slice_case c = {TG_FLOAT32, 64, s * (w - 1) + 1, 0, s};
      char name[96];
      snprintf(name, sizeof name, "narrow x[:, ::%d] (%lldx%lld)", s, (long long)c.rows, (long long)c.cols);
      check_case(name, slice_run, &c, 2);
    }
  slice_case five = {TG_FLOAT32, 3, 5 * 40, 0, 5};
  check_case("x[:, ::5] (3x200)", slice_run, &five, 3);
  static const int64_t widths[] = {37, 45, 64};
  static const tg_dtype dts[] = {TG_FLOAT32, TG_FLOAT64, TG_INT32, TG_UINT8};
  for (int s = 2; s <= 4; s++)
    for (int k = 0; k < 3; k++)
      for (int start = 0; start <= 1; start++) {
        int64_t w = widths[k];
        slice_case c = {TG_FLOAT32, 3, start + s * (w - 1) + 1 + (k == 1 ? s - 1 : 0), start, s};
        for (size_t d = 0; d < (k == 0 ? 4 : 1); d++) {
          c.dt = dts[d];
          char name[96];
          snprintf(name, sizeof name, "%s x[:, %d::%d] (%lldx%lld)", dtype_name(c.dt), start, s, (long long)c.rows, (long long)c.cols);
          check_case(name, slice_run, &c, 4);
        }
      }
  check_coverage();
}

/* ---- sums over strided taps */

typedef struct taps_case {
  int64_t rows, w, s;
  bool overlap; /* x[:, t::s][:, :w] for t < 3 (windows of 3 every s), else reshape (w, s) and sum */
} taps_case;

static tg_tensor *taps_run(const void *arg, double **want, int64_t *n) {
  const taps_case *c = arg;
  int64_t cols = c->overlap ? c->s * (c->w - 1) + 3 : c->w * c->s, shape[2] = {c->rows, cols};
  double *v = malloc(sizeof(double) * (size_t)(c->rows * cols));
  fill(v, c->rows * cols, 5);
  tg_tensor *x = tensor_of(v, shape, 2, TG_FLOAT32), *y;
  int taps = c->overlap ? 3 : (int)c->s;
  *n = c->rows * c->w, *want = calloc((size_t)*n, sizeof(double));
  for (int64_t r = 0; r < c->rows; r++)
    for (int64_t j = 0; j < c->w; j++)
      for (int t = 0; t < taps; t++) (*want)[r * c->w + j] += v[r * cols + c->s * j + t];
  free(v);
  if (c->overlap) {
    y = NULL;
    for (int t = 0; t < 3; t++) {
      tg_tensor *tap = tg_slice(x, 1, t, t + c->s * (c->w - 1) + 1, c->s);
      y = y ? tg_add(y, tap) : tap;
    }
  } else {
    int axis = 2;
    y = tg_sum(tg_reshape(x, (int64_t[]){c->rows, c->w, c->s}, 3), &axis, 1, false);
  }
  return y;
}

/* ---- reductions over strided elements: y[r] = sum (or max) of x[r, start::s] (the lanes of an
 * unrolled reduce dim lie s apart; padded ones accumulate apart), and the whole sum (GROUP: two
 * stages) */

typedef struct reduce_case {
  int64_t rows, cols, start, s;
  bool max, all;
} reduce_case;

static tg_tensor *reduce_run(const void *arg, double **want, int64_t *n) {
  const reduce_case *c = arg;
  int64_t shape[2] = {c->rows, c->cols}, w = (c->cols - c->start + c->s - 1) / c->s;
  double *v = malloc(sizeof(double) * (size_t)(c->rows * c->cols));
  fill(v, c->rows * c->cols, 10);
  tg_tensor *x = tensor_of(v, shape, 2, TG_FLOAT32);
  *n = c->all ? 1 : c->rows, *want = malloc(sizeof(double) * (size_t)*n);
  for (int64_t r = 0; r < *n; r++) {
    double acc = c->max ? -INFINITY : 0;
    for (int64_t q = c->all ? 0 : r; q < (c->all ? c->rows : r + 1); q++)
      for (int64_t j = 0; j < w; j++) {
        double e = v[q * c->cols + c->start + c->s * j];
        acc = c->max ? fmax(acc, e) : acc + e;
      }
    (*want)[r] = acc;
  }
  free(v);
  tg_tensor *xs = tg_slice(x, 1, c->start, TG_SLICE_END, c->s);
  int axis = 1;
  return c->all ? tg_sum(xs, NULL, 0, false) : c->max ? tg_max(xs, &axis, 1, false) : tg_sum(xs, &axis, 1, false);
}

TEST(strided_reduction_values) {
  static const reduce_case cases[] = {
      {8, 2 * 37, 0, 2, false, false}, {8, 3 * 64, 1, 3, false, false}, {5, 4 * 45 + 1, 0, 4, true, false},
      {6, 2 * 64, 1, 2, true, false},  {16, 3 * 50, 0, 3, false, true},  {4, 2 * 4096, 0, 2, false, true},
  };
  for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
    const reduce_case *c = &cases[i];
    char name[96];
    snprintf(name, sizeof name, "%s x[:, %lld::%lld] (%lldx%lld)%s", c->max ? "max" : "sum", (long long)c->start, (long long)c->s, (long long)c->rows,
             (long long)c->cols, c->all ? " all" : "");
    check_case(name, reduce_run, c, 6);
  }
  check_coverage();
}

TEST(strided_tap_sum_values) {
  for (int s = 2; s <= 4; s++)
    for (int overlap = 0; overlap <= 1; overlap++)
      for (int64_t w = 37; w <= 64; w += 27) {
        taps_case c = {4, w, s, overlap};
        char name[96];
        snprintf(name, sizeof name, "%s taps, stride %d, row %lld", overlap ? "overlapping" : "reshaped", s, (long long)w);
        check_case(name, taps_run, &c, 4);
      }
  check_coverage();
}

/* ---- a padded input: y = pad(x, before, after, 0.5)[:, ::s] * 2 + 1 (the pad masks the loads) */

typedef struct pad_case {
  int64_t rows, cols, before, after, s;
} pad_case;

static tg_tensor *pad_run(const void *arg, double **want, int64_t *n) {
  const pad_case *c = arg;
  int64_t shape[2] = {c->rows, c->cols}, pc = c->before + c->cols + c->after, w = (pc + c->s - 1) / c->s;
  double *v = malloc(sizeof(double) * (size_t)(c->rows * c->cols));
  fill(v, c->rows * c->cols, 6);
  tg_tensor *x = tensor_of(v, shape, 2, TG_FLOAT32);
  *n = c->rows * w, *want = malloc(sizeof(double) * (size_t)*n);
  for (int64_t r = 0; r < c->rows; r++)
    for (int64_t j = 0; j < w; j++) {
      int64_t q = c->s * j - c->before;
      (*want)[r * w + j] = (q >= 0 && q < c->cols ? v[r * c->cols + q] : 0.5) * 2 + 1;
    }
  free(v);
  tg_tensor *xp = tg_pad(x, (int64_t[]){0, c->before}, (int64_t[]){0, c->after}, 0.5);
  return tg_add_s(tg_mul_s(tg_slice(xp, 1, 0, TG_SLICE_END, c->s), 2.0), 1.0);
}

TEST(strided_padded_input_values) {
  for (int s = 2; s <= 4; s++)
    for (int k = 0; k < 3; k++) {
      pad_case c = {3, s * 35 + k, 1 + k, 2 + k, s};
      char name[96];
      snprintf(name, sizeof name, "pad(x %lldx%lld, %lld, %lld)[:, ::%d]", (long long)c.rows, (long long)c.cols, (long long)c.before,
               (long long)c.after, s);
      check_case(name, pad_run, &c, 4);
    }
  check_coverage();
}

/* ---- depthwise convs and max pools */

typedef struct window_case {
  bool pool;              /* max pool, else a depthwise conv with bias */
  int n, c, h, w, k, st, p, dil;
} window_case;

static int wout(const window_case *c, int size) { return (size + 2 * c->p - c->dil * (c->k - 1) - 1) / c->st + 1; }

static tg_tensor *window_run(const void *arg, double **want, int64_t *n) {
  const window_case *c = arg;
  int oh = wout(c, c->h), ow = wout(c, c->w);
  int64_t nx = (int64_t)c->n * c->c * c->h * c->w, nw = (int64_t)c->c * c->k * c->k;
  double *x = malloc(sizeof(double) * (size_t)nx), *wv = malloc(sizeof(double) * (size_t)nw), *b = malloc(sizeof(double) * (size_t)c->c);
  fill(x, nx, 7), fill(wv, nw, 8), fill(b, c->c, 9);
  tg_tensor *tx = tensor_of(x, (int64_t[]){c->n, c->c, c->h, c->w}, 4, TG_FLOAT32);
  tg_tensor *tw = tensor_of(wv, (int64_t[]){c->c, 1, c->k, c->k}, 4, TG_FLOAT32), *tb = tensor_of(b, (int64_t[]){c->c}, 1, TG_FLOAT32);
  *n = (int64_t)c->n * c->c * oh * ow, *want = malloc(sizeof(double) * (size_t)*n);
  for (int i = 0; i < c->n; i++)
    for (int ch = 0; ch < c->c; ch++)
      for (int r = 0; r < oh; r++)
        for (int q = 0; q < ow; q++) {
          double acc = c->pool ? -INFINITY : b[ch];
          for (int u = 0; u < c->k; u++)
            for (int v = 0; v < c->k; v++) {
              int ih = r * c->st + u * c->dil - c->p, iw = q * c->st + v * c->dil - c->p;
              if (ih < 0 || ih >= c->h || iw < 0 || iw >= c->w) continue;
              double xv = x[(((int64_t)i * c->c + ch) * c->h + ih) * c->w + iw];
              acc = c->pool ? fmax(acc, xv) : acc + xv * wv[((int64_t)ch * c->k + u) * c->k + v];
            }
          (*want)[(((int64_t)i * c->c + ch) * oh + r) * ow + q] = acc;
        }
  free(x), free(wv), free(b);
  const int st[2] = {c->st, c->st}, pd[2] = {c->p, c->p}, ks[2] = {c->k, c->k}, dl[2] = {c->dil, c->dil};
  tg_pool_opts po = {.stride = st, .padding = pd, .dilation = dl};
  return c->pool ? tg_max_pool(tx, 2, ks, &po, NULL) : tg_conv2d(tx, tw, tb, st, pd, dl, c->c);
}

/* 3x3 stride-2 depthwise convs and 3x3/2 max pools, padding 0 and 1, output rows of 33 to 40
 * (odd and even), a 5x5 stride-3 and a 3x3 stride-4 conv (lanes 3 and 4 apart), and dilation
 * 2 (taps 2 apart: strided lanes along the kernel's reduce dims). */
TEST(strided_depthwise_and_pool_values) {
  static const window_case cases[] = {
      {false, 2, 3, 9, 67, 3, 2, 1, 1}, {false, 1, 5, 7, 66, 3, 2, 0, 1}, {false, 2, 2, 8, 80, 3, 2, 1, 1},
      {false, 1, 3, 9, 100, 5, 3, 2, 1}, {false, 1, 2, 9, 140, 3, 4, 1, 1},
      {true, 2, 3, 9, 67, 3, 2, 1, 1},  {true, 1, 4, 7, 66, 3, 2, 0, 1},  {true, 1, 3, 8, 79, 3, 2, 1, 1},
      {false, 1, 3, 9, 70, 3, 1, 2, 2}, {false, 1, 2, 11, 75, 3, 2, 2, 2}, {true, 1, 3, 9, 70, 3, 1, 1, 2},
  };
  for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
    const window_case *c = &cases[i];
    char name[128];
    snprintf(name, sizeof name, "%s %dx%d/%d pad %d dilation %d (%dx%dx%dx%d)", c->pool ? "max_pool" : "depthwise", c->k, c->k, c->st, c->p,
             c->dil, c->n, c->c, c->h, c->w);
    check_case(name, window_run, c, 6);
  }
  check_coverage();
}

/* ---- a variable row length (docs/symbolic.md): y = x.reshape(R, C, s)[:, :n, 0] * 2 + 1, n a
 * variable: the row's lanes are masked by the variable end (checked loads) */

typedef struct var_case {
  tg_symvar *v;
  int64_t rows, cols, s, n;
} var_case;

static tg_tensor *var_run(const void *arg, double **want, int64_t *n) {
  const var_case *c = arg;
  int64_t shape[2] = {c->rows, c->cols * c->s};
  double *v = malloc(sizeof(double) * (size_t)(shape[0] * shape[1]));
  fill(v, shape[0] * shape[1], 12);
  tg_tensor *x = tensor_of(v, shape, 2, TG_FLOAT32);
  *n = c->rows * c->n, *want = malloc(sizeof(double) * (size_t)*n);
  for (int64_t r = 0; r < c->rows; r++)
    for (int64_t j = 0; j < c->n; j++) (*want)[r * c->n + j] = v[r * shape[1] + c->s * j] * 2 + 1;
  free(v);
  CHECK(tg_var_bind(c->v, c->n) == 0);
  int64_t end = tg_var_dim(c->v, 0);
  tg_tensor *t = tg_shrink(tg_reshape(x, (int64_t[]){c->rows, c->cols, c->s}, 3), (int64_t[]){0, 0, 0}, (int64_t[]){c->rows, end, 1});
  return tg_add_s(tg_mul_s(tg_reshape(t, (int64_t[]){c->rows, end}, 2), 2.0), 1.0);
}

TEST(strided_variable_row_values) {
  static const int64_t ns[] = {37, 80, 1, 64};
  tg_symvar *v = tg_variable("strided_n", 1, 80);
  CHECK(v != NULL);
  for (int s = 2; v && s <= 3; s++)
    for (size_t k = 0; k < sizeof ns / sizeof *ns; k++) {
      var_case c = {v, 5, 80, s, ns[k]};
      char name[96];
      snprintf(name, sizeof name, "x.reshape(5, 80, %d)[:, :n, 0], n = %lld", s, (long long)ns[k]);
      check_case(name, var_run, &c, 3);
    }
  check_coverage();
}

/* ---- the buffer's edge: the last lane of the last strided load is the buffer's last element */

/* x[:, start::s] * 2 + 1 with cols = start + s * (w - 1) + 1: each row's last lane reads its
 * last element, and the last row's is the buffer's last; whole vectors (w a multiple of 4
 * vectors), so on the LLVM device the loads are unchecked wide loads reading s - 1 elements
 * past that element (BUFFER_SLACK). One row and five, from offsets 0 and s - 1 (then the
 * last lane is element s*w - 1). The structure part checks that the kernel really has an
 * unchecked strided load. */
TEST(strided_load_at_the_buffer_end) {
  int L = f32_lanes() ? f32_lanes() : 8;
  for (int s = 2; s <= 4; s++)
    for (int64_t rows = 1; rows <= 5; rows += 4)
      for (int start = 0; start <= s - 1; start += s - 1) {
        int64_t w = 4 * L;
        slice_case c = {TG_FLOAT32, rows, start + s * (w - 1) + 1, start, s};
        char name[96];
        snprintf(name, sizeof name, "edge x[:, %d::%d] (%lldx%lld)", start, s, (long long)rows, (long long)c.cols);
        check_case(name, slice_run, &c, 3);
        if (!llvm_here() || f32_lanes() < 4) continue;
        tg_scope *sc = tg_scope_begin();
        double *want = NULL;
        int64_t n;
        uop *ast = only_ast(slice_run(&c, &want, &n));
        int cnt[5], shuf, unchecked = 0;
        CHECK(ast && inspect(ast, 4, false, cnt, &shuf, NULL, 0, &unchecked) == 0);
        CHECK(cnt[s] >= 1 && unchecked >= 1);
        if (cnt[s] < 1 || unchecked < 1) printf("  %s: %d stride-%d loads, %d unchecked\n", name, cnt[s], s, unchecked);
        if (ast) uop_decref(ast);
        free(want);
        tg_scope_end(sc);
      }
  check_coverage();
}
