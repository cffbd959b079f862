/* opt.c — a kernel's shape state and the optimization actions that rewrite it.
 *
 * The state lists the kernel's axes in loop order. Each dim (an output dim, or a reduce dim
 * of the kernel's first reduction) starts as one axis; actions split an axis in two (the
 * dim's index becomes outer * inner_size + inner), change what an axis becomes in the code,
 * pad it, or reorder loops. Every action checks that it is valid first and otherwise returns
 * an error, so any sequence of accepted actions yields a correct kernel.
 *
 *   UPCAST(a, n)    output axis: split off n, unrolled (vector lanes when contiguous)
 *   UNROLL(a, n)    reduce axis: split off n, unrolled (vector partial sums when contiguous)
 *   THREAD(a, n)    output axis: split off the top n as the parallel axis (n = size: all)
 *   GROUPTOP(a, n)  reduce axis: the top n become the parallel axis; stage 2 combines
 *   GROUP(a, n)     same with the bottom n (threads interleave)
 *   PADTO(a, m)     pad an unsplit axis up to a multiple of m (masked); before any split
 *   SWAP(a, b)      exchange two loops of the same class (output or reduce)
 *   LOCAL(a, n)     output axis: split off n, each a work-item of one work-group
 *   TC(c, shape)    tensor cores: dim triple c of a matmul-shaped reduction becomes a warp's
 *                   tiles (M 16, N 8, K 16 for m16n8k16), its multiply-adds one WMMA op
 *
 * On a work-group device (kshape_use_workgroups: OpenCL, CUDA) GROUP/GROUPTOP split the
 * reduction across the work-items of one work-group instead: each sums its part, the partials
 * meet in local memory (one stage). There every action also checks the device's limits: the
 * work-items of a work-group (LOCAL and GROUP sizes) and the local memory of the partials. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "codegen/codegen.h"
#include "tensor/tensor.h"
#include "uop/dtype.h"

static const char *const opt_names[OPT_COUNT] = {"UPCAST", "UNROLL", "THREAD", "GROUP",
                                                 "GROUPTOP", "PADTO", "SWAP", "LOCAL", "TC"};
const char *opt_name(opt_kind k) { return k >= 0 && k < OPT_COUNT ? opt_names[k] : "?"; }

static bool is_unrolled(axis_kind k) { return k == AX_UPCAST || k == AX_UNROLL; }

/* A dim the kernel's reductions are broadcast along (kshape.row_dims). */
static bool row_dim(const kshape *ks, int d) { return d < 64 && (ks->row_dims >> d & 1); }

/* ---------------------------------------------------------------- init */

/* Does every path from u to r go through ALU ops and reshapes only? (memo: node → 1 ok, 2 bad) */
static bool direct_path(uop *u, uop *r, ptrmap *memo, ptrmap *reach) {
  if (u == r) return true;
  if (!ptrmap_has(reach, u)) return true; /* r is not below u */
  uintptr_t m = (uintptr_t)ptrmap_get(memo, u);
  if (m) return m == 1;
  bool ok = uop_is_alu(u) || u->op == OP_RESHAPE;
  for (int i = 0; ok && i < u->nsrc; i++) ok = direct_path(u->src[i], r, memo, reach);
  ptrmap_put(memo, u, (void *)(uintptr_t)(ok ? 1 : 2));
  return ok;
}

static bool group_possible(uop *ast, uop *r, uop **order, int n) {
  ptrmap reach = {0}, memo = {0};
  for (int i = 0; i < n; i++) { /* sources come first: a node reaches r if a source does */
    uop *u = order[i];
    bool hit = u == r;
    for (int j = 0; !hit && j < u->nsrc; j++) hit = ptrmap_has(&reach, u->src[j]);
    if (hit) ptrmap_put(&reach, u, u);
  }
  bool ok = direct_path(ast->src[0], r, &memo, &reach);
  ptrmap_free(&reach);
  ptrmap_free(&memo);
  return ok;
}

int kshape_init(kshape *ks, uop *ast) {
  memset(ks, 0, sizeof *ks);
  ks->reduce_op = -1;
  ks->out_dtype = ast->dtype;
  if (ast->narg > KS_MAX_DIMS / 2) return tg_set_error(TG_ERR_ARG, "kernel has %d dims (max %d)", ast->narg, KS_MAX_DIMS / 2);
  ks->nout = ast->narg;
  for (int d = 0; d < ks->nout; d++) ks->size[d] = ks->padded[d] = ast->arg[d];
  uop **order;
  int n = uop_toposort(ast, &order);
  if (n < 0) return tg_set_error(TG_ERR_NOMEM, "kshape: out of memory");
  uop *first = NULL;
  for (int i = 0; i < n; i++) {
    if (order[i]->op != OP_REDUCE_AXIS) continue;
    ks->nreduces++;
    if (!first) first = order[i];
  }
  if (first) {
    const int64_t *s = uop_shape(first->src[0]);
    ks->reduce_op = (int)first->arg[0];
    ks->red_dtype = first->dtype;
    ks->nred = first->narg - 1;
    for (int j = 0; j < ks->nred; j++) {
      int d = ks->nout + j;
      ks->size[d] = ks->padded[d] = s[first->arg[1 + j]];
    }
    ks->group_ok = ks->nreduces == 1 && group_possible(ast, first, order, n);
    if (ks->nout <= 63) {
      uint64_t moving = reduce_moving_dims(ast->src[0]);
      for (int d = 0; d < ks->nout; d++)
        if (ks->size[d] > 1 && !(moving >> d & 1)) ks->row_dims |= 1ull << d;
    }
  }
  free(order);
  for (int d = 0; d < ks->nout + ks->nred; d++) {
    if (ks->size[d] == 1) continue; /* a size-1 dim has index 0 and no axis */
    ks->ax[ks->nax++] = (kaxis){ks->size[d], 1, d, d < ks->nout ? AX_GLOBAL : AX_REDUCE, TC_ROLE_NONE};
  }
  tc_match(ks, ast);
  return 0;
}

/* ---------------------------------------------------------------- actions */

static int64_t unrolled_product(const kshape *ks) {
  int64_t p = 1;
  for (int i = 0; i < ks->nax; i++)
    if (is_unrolled(ks->ax[i].kind)) p *= ks->ax[i].size;
  return p;
}

static bool workgroups(const kshape *ks) { return ks->local_max > 1; }

void kshape_use_workgroups(kshape *ks, const device_caps *caps) {
  ks->scalar = true;
  ks->local_max = caps->max_local_size;
  ks->local_bytes = caps->local_bytes;
  ks->tc_caps = caps->warp == 32 && caps->max_local_size >= 32 ? caps->tc : 0; /* a warp of 32 lanes */
}

bool kshape_two_stages(const kshape *ks) {
  int a = kshape_parallel_axis(ks);
  return a >= 0 && ks->ax[a].kind == AX_GROUP && !workgroups(ks);
}

int64_t kshape_local_size(const kshape *ks) {
  int64_t n = 1;
  for (int i = 0; i < ks->nax; i++)
    if (ks->ax[i].kind == AX_LOCAL || (ks->ax[i].kind == AX_GROUP && workgroups(ks))) n *= ks->ax[i].size;
  return n;
}

/* A partial in local memory: bools as bytes, 16-bit floats as the floats they compute in,
 * narrow integers as the 32-bit registers PTX keeps them in. */
static int64_t partial_bytes(tg_dtype dt) {
  int64_t n = (int64_t)tg_dtype_size(dt);
  return dt == TG_BOOL ? 1 : n < 4 ? 4 : n;
}

/* One partial per work-item for each output copy (every UPCAST combination has its own
 * reduction, and its own local array). */
int64_t kshape_local_bytes(const kshape *ks) {
  int a = kshape_parallel_axis(ks);
  if (!workgroups(ks) || a < 0 || ks->ax[a].kind != AX_GROUP) return 0;
  int64_t copies = 1;
  for (int i = 0; i < ks->nax; i++)
    if (ks->ax[i].kind == AX_UPCAST) copies *= ks->ax[i].size;
  return copies * kshape_local_size(ks) * partial_bytes(ks->red_dtype);
}

int kshape_parallel_axis(const kshape *ks) {
  for (int i = 0; i < ks->nax; i++)
    if (ks->ax[i].kind == AX_THREAD || ks->ax[i].kind == AX_GROUP) return i;
  return -1;
}

static void insert_axis(kshape *ks, int at, kaxis a) {
  memmove(ks->ax + at + 1, ks->ax + at, sizeof(kaxis) * (size_t)(ks->nax - at));
  ks->ax[at] = a;
  ks->nax++;
}

static kaxis remove_axis(kshape *ks, int at) {
  kaxis a = ks->ax[at];
  memmove(ks->ax + at, ks->ax + at + 1, sizeof(kaxis) * (size_t)(ks->nax - at - 1));
  ks->nax--;
  return a;
}

/* Split axis a: the inner n iterations become a new axis of kind k at position `at`
 * (-1: the end); n == size turns the whole axis into it. */
static void split_inner(kshape *ks, int a, int64_t n, axis_kind k, int at) {
  kaxis inner = ks->ax[a];
  inner.size = n, inner.kind = k;
  if (n == ks->ax[a].size) remove_axis(ks, a), at -= at > a; /* `at` counted the removed axis */
  else ks->ax[a].size /= n, ks->ax[a].stride *= n;
  insert_axis(ks, at < 0 ? ks->nax : at, inner);
}

/* Split axis a: the outer n iterations become a new axis of kind k at position 0. */
static void split_outer(kshape *ks, int a, int64_t n, axis_kind k) {
  kaxis outer = ks->ax[a];
  outer.size = n, outer.kind = k, outer.stride *= ks->ax[a].size / n;
  if (n == ks->ax[a].size) remove_axis(ks, a);
  else ks->ax[a].size /= n;
  insert_axis(ks, 0, outer);
}

static bool dim_split(const kshape *ks, int a) {
  for (int i = 0; i < ks->nax; i++)
    if (i != a && ks->ax[i].dim == ks->ax[a].dim) return true;
  return ks->ax[a].stride != 1 || ks->ax[a].size != ks->padded[ks->ax[a].dim];
}

/* Probing (candidates, heuristics) tries actions that may not fit: quietly. */
static _Thread_local bool quiet;
#define BAD(...) (quiet ? TG_ERR_ARG : tg_set_error(TG_ERR_ARG, __VA_ARGS__))

static int check_split(const kshape *ks, opt_action a, axis_kind need, const char *what) {
  const kaxis *x = &ks->ax[a.axis];
  if (x->kind != need) return BAD("%s(%d,%lld): axis %d is not %s", opt_name(a.kind), a.axis, (long long)a.amount, a.axis, what);
  if (a.amount < 2 || a.amount > x->size || x->size % a.amount)
    return BAD("%s(%d,%lld): amount must divide the axis size %lld", opt_name(a.kind), a.axis, (long long)a.amount, (long long)x->size);
  return 0;
}

static int apply_unroll(kshape *ks, opt_action a, axis_kind from, axis_kind to) {
  int rc = check_split(ks, a, from, from == AX_GLOBAL ? "an output loop" : "a reduce loop");
  if (rc) return rc;
  kshape t = *ks;
  split_inner(&t, a.axis, a.amount, to, -1);
  int lane = kshape_lane_axis(&t);
  if (unrolled_product(&t) / (lane >= 0 ? t.ax[lane].size : 1) > KS_MAX_UPCAST)
    return BAD("%s(%d,%lld): more than %d unrolled copies", opt_name(a.kind), a.axis, (long long)a.amount, KS_MAX_UPCAST);
  *ks = t;
  return 0;
}

static int apply_parallel(kshape *ks, opt_action a) {
  bool thread = a.kind == OPT_THREAD;
  int rc = check_split(ks, a, thread ? AX_GLOBAL : AX_REDUCE, thread ? "an output loop" : "a reduce loop");
  if (rc) return rc;
  if (kshape_parallel_axis(ks) >= 0) return BAD("%s(%d,%lld): the kernel already has a parallel axis", opt_name(a.kind), a.axis, (long long)a.amount);
  if (thread && row_dim(ks, ks->ax[a.axis].dim))
    return BAD("THREAD(%d,%lld): dim %d is a row's (each thread would redo the row's reductions)", a.axis, (long long)a.amount, ks->ax[a.axis].dim);
  if (!thread && !ks->group_ok)
    return BAD("%s(%d,%lld): needs a single reduction reached through elementwise ops", opt_name(a.kind), a.axis, (long long)a.amount);
  if (!thread && ks->tc) return BAD("%s(%d,%lld): the reduction is on tensor cores", opt_name(a.kind), a.axis, (long long)a.amount);
  if (a.kind == OPT_GROUP) split_inner(ks, a.axis, a.amount, AX_GROUP, 0);
  else split_outer(ks, a.axis, a.amount, thread ? AX_THREAD : AX_GROUP);
  return 0;
}

/* LOCAL: the inner n of an output loop become work-items of the work-group (the innermost
 * digits of the work-item index: neighbours read neighbouring elements). */
static int apply_local(kshape *ks, opt_action a) {
  if (!workgroups(ks)) return BAD("LOCAL(%d,%lld): the device has no work-groups", a.axis, (long long)a.amount);
  int rc = check_split(ks, a, AX_GLOBAL, "an output loop");
  if (rc) return rc;
  int at = -1; /* a tensor-core tile's lanes stay the innermost digits (lane = local id % 32) */
  for (int i = 0; i < ks->nax && at < 0; i++)
    if (ks->ax[i].tc == TC_ROLE_G) at = i;
  split_inner(ks, a.axis, a.amount, AX_LOCAL, at);
  return 0;
}

/* ---------------------------------------------------------------- tensor cores */

/* TC(c, TC_M16N8K16): triple c's dims (each one unsplit axis, sizes multiples of 16, 8, 16,
 * PADTO first otherwise) become a warp's tiles: M = 16 o + 8 mhi + g, N = 8 o + 2 t + nlo,
 * K = 16 o + k, with g (8) and t (4) the innermost work-group digits (lane = 4 g + t), mhi and
 * nlo UPCASTs (this lane's 4 elements of D, in the PTX ISA's C/D layout) and k inside the WMMA
 * op. Lowering (lower.c) gives each operand's fragment its own rows and columns. */
static int tc_split(kshape *ks, int dim, axis_kind outer, int64_t tile, const kaxis *parts, int nparts) {
  int a = -1;
  for (int i = 0; i < ks->nax; i++)
    if (ks->ax[i].dim == dim) a = a < 0 ? i : -2;
  if (a < 0) return BAD("TC: dim %d is %s", dim, a == -1 ? "of size 1" : "already split");
  kaxis *x = &ks->ax[a];
  if (x->kind != outer || x->stride != 1) return BAD("TC: dim %d is not an unsplit loop", dim);
  if (x->size % tile) return BAD("TC: dim %d has %lld, not a multiple of %lld (PADTO first)", dim, (long long)x->size, (long long)tile);
  x->size /= tile, x->stride = tile;
  if (x->size == 1) remove_axis(ks, a);
  for (int i = 0; i < nparts; i++) {
    kaxis p = parts[i];
    p.dim = dim;
    ks->ax[ks->nax++] = p;
  }
  return 0;
}

static int apply_tc(kshape *ks, opt_action a) {
  if (a.amount != TC_M16N8K16) return BAD("TC(%d,%lld): unknown tensor-core shape", a.axis, (long long)a.amount);
  if (!(ks->tc_caps & a.amount)) return BAD("TC(%d,%lld): the device has no tensor cores of this shape", a.axis, (long long)a.amount);
  if (ks->tc) return BAD("TC(%d,%lld): the kernel already uses tensor cores", a.axis, (long long)a.amount);
  if (!ks->ntc_cand)
    return BAD("TC(%d,%lld): not a float32 sum of products of float16 or bfloat16 operands", a.axis, (long long)a.amount);
  if (a.axis < 0 || a.axis >= ks->ntc_cand) return BAD("TC(%d,%lld): no dim triple %d (kernel has %d)", a.axis, (long long)a.amount, a.axis, ks->ntc_cand);
  if (kshape_parallel_axis(ks) >= 0) return BAD("TC(%d,%lld): the kernel already has a parallel axis", a.axis, (long long)a.amount);
  if (ks->nax + 5 >= KS_MAX_AXES) return BAD("TC: too many axes");
  tc_dims d = ks->tc_cand[a.axis];
  const kaxis m[] = {{2, 8, 0, AX_UPCAST, TC_ROLE_MHI}, {8, 1, 0, AX_LOCAL, TC_ROLE_G}};
  const kaxis n[] = {{4, 2, 0, AX_LOCAL, TC_ROLE_T}, {2, 1, 0, AX_UPCAST, TC_ROLE_NLO}};
  const kaxis k[] = {{16, 1, 0, AX_TC, TC_ROLE_K}};
  int rc = tc_split(ks, d.k, AX_REDUCE, 16, k, 1);
  if (!rc) rc = tc_split(ks, d.m, AX_GLOBAL, 16, m, 2);
  if (!rc) rc = tc_split(ks, d.n, AX_GLOBAL, 8, n, 2);
  if (rc) return rc; /* the tail is now k, mhi, g, t, nlo: t the innermost local digit */
  ks->tc = (int)a.amount, ks->tc_at = d;
  return 0;
}

/* The device's limits, checked after every action on a work-group device. */
static int check_limits(const kshape *ks, opt_action a) {
  int64_t items = kshape_local_size(ks), bytes = kshape_local_bytes(ks);
  if (items > ks->local_max)
    return BAD("%s(%d,%lld): %lld work-items in a work-group, more than the device's %d", opt_name(a.kind), a.axis, (long long)a.amount,
               (long long)items, ks->local_max);
  if (bytes > ks->local_bytes)
    return BAD("%s(%d,%lld): %lld bytes of local memory, more than the device's %lld", opt_name(a.kind), a.axis, (long long)a.amount,
               (long long)bytes, (long long)ks->local_bytes);
  return 0;
}

static int apply_padto(kshape *ks, opt_action a) {
  kaxis *x = &ks->ax[a.axis];
  if (x->kind != AX_GLOBAL && x->kind != AX_REDUCE) return BAD("PADTO(%d,%lld): axis %d is not a loop", a.axis, (long long)a.amount, a.axis);
  if (dim_split(ks, a.axis)) return BAD("PADTO(%d,%lld): axis %d was already split or padded", a.axis, (long long)a.amount, a.axis);
  if (a.amount < 2 || a.amount > (1 << 20) || x->size % a.amount == 0)
    return BAD("PADTO(%d,%lld): size %lld is already a multiple (or bad amount)", a.axis, (long long)a.amount, (long long)x->size);
  x->size = (x->size + a.amount - 1) / a.amount * a.amount;
  ks->padded[x->dim] = x->size;
  return 0;
}

static int apply_swap(kshape *ks, opt_action a) {
  if (a.amount < 0 || a.amount >= ks->nax || a.amount == a.axis) return BAD("SWAP(%d,%lld): no such axis", a.axis, (long long)a.amount);
  kaxis *x = &ks->ax[a.axis], *y = &ks->ax[a.amount];
  bool same = (x->kind == AX_GLOBAL && y->kind == AX_GLOBAL) || (x->kind == AX_REDUCE && y->kind == AX_REDUCE);
  if (!same) return BAD("SWAP(%d,%lld): both axes must be output loops or both reduce loops", a.axis, (long long)a.amount);
  if (x->kind == AX_GLOBAL && row_dim(ks, x->dim) != row_dim(ks, y->dim))
    return BAD("SWAP(%d,%lld): a row's loop stays inside the others (its reductions run once per row)", a.axis, (long long)a.amount);
  kaxis t = *x;
  *x = *y, *y = t;
  return 0;
}

int kshape_apply(kshape *ks, opt_action a) {
  if (a.kind < 0 || a.kind >= OPT_COUNT) return BAD("unknown optimization %d", (int)a.kind);
  if (a.kind != OPT_TC && (a.axis < 0 || a.axis >= ks->nax)) return BAD("%s(%d,%lld): no axis %d (kernel has %d)", opt_name(a.kind), a.axis, (long long)a.amount, a.axis, ks->nax);
  if (ks->napplied == KS_MAX_ACTIONS) return BAD("%s: too many optimizations", opt_name(a.kind));
  if (ks->nax + 1 >= KS_MAX_AXES) return BAD("%s: too many axes", opt_name(a.kind));
  kshape t = *ks; /* applied to a copy: a refused action leaves the state as it was */
  int rc;
  switch (a.kind) {
    case OPT_UPCAST: rc = apply_unroll(&t, a, AX_GLOBAL, AX_UPCAST); break;
    case OPT_UNROLL: rc = apply_unroll(&t, a, AX_REDUCE, AX_UNROLL); break;
    case OPT_THREAD: case OPT_GROUP: case OPT_GROUPTOP: rc = apply_parallel(&t, a); break;
    case OPT_PADTO: rc = apply_padto(&t, a); break;
    case OPT_LOCAL: rc = apply_local(&t, a); break;
    case OPT_TC: rc = apply_tc(&t, a); break;
    default: rc = apply_swap(&t, a); break;
  }
  if (rc == 0 && workgroups(&t)) rc = check_limits(&t, a);
  if (rc) return rc;
  *ks = t;
  ks->applied[ks->napplied++] = a;
  return 0;
}

int kshape_candidates(const kshape *ks, opt_action *out, int cap) {
  static const int64_t amounts[] = {2, 3, 4, 5, 7, 8, 16, 32};
  int n = 0;
  for (int a = 0; a < ks->nax; a++) {
    for (int k = 0; k < OPT_COUNT; k++) {
      int64_t tries[16];
      int nt = 0;
      if (k == OPT_SWAP) {
        for (int b = a + 1; b < ks->nax && nt < 16; b++) tries[nt++] = b;
      } else if (k == OPT_TC) { /* a: the dim triple */
        if (a < ks->ntc_cand) tries[nt++] = TC_M16N8K16;
      } else {
        for (size_t i = 0; i < sizeof amounts / sizeof *amounts; i++) tries[nt++] = amounts[i];
        if (k == OPT_THREAD || k == OPT_GROUPTOP) tries[nt++] = ks->ax[a].size;
        bool wg = workgroups(ks) && (k == OPT_LOCAL || k == OPT_GROUP || k == OPT_GROUPTOP);
        for (int64_t big = 64; wg && big <= 256; big *= 2) tries[nt++] = big; /* work-group sizes */
      }
      for (int t = 0; t < nt && n < cap; t++) {
        kshape tmp = *ks;
        opt_action act = {(opt_kind)k, a, tries[t]};
        quiet = true;
        if (kshape_apply(&tmp, act) == 0) out[n++] = act;
        quiet = false;
      }
    }
  }
  return n;
}

/* ---------------------------------------------------------------- lanes and text */

static bool pow2_lanes(int64_t n) { return n >= 2 && n <= 16 && (n & (n - 1)) == 0; }

/* The lane axis: the first UPCAST or UNROLL applied of stride 1 and 2-16 lanes (unrolled axes
 * are appended, so it is the first in order). The heuristics apply their lane choice first
 * (choose_lanes); what they add later stays copies: a strided conv vectorized along its output
 * channels keeps them when its row is tiled after (a rule "the last output dim first" made
 * that tile of 2 the lanes, each a gather), a 1x1 conv's rows keep them when its 16 input
 * channels are unrolled after. */
int kshape_lane_axis(const kshape *ks) {
  static _Atomic int enabled = TG_ENV_UNREAD;
  if (ks->scalar || !tg_getenv_cached(&enabled, "VECTORIZE", 1)) return -1;
  for (int i = 0; i < ks->nax; i++)
    if (is_unrolled(ks->ax[i].kind) && ks->ax[i].stride == 1 && pow2_lanes(ks->ax[i].size)) return i;
  return -1;
}

int kshape_row_lane_axis(const kshape *ks) {
  int lane = kshape_lane_axis(ks);
  if (lane < 0 || !ks->row_dims) return -1;
  const kaxis *l = &ks->ax[lane];
  bool out = l->kind == AX_UPCAST;
  if (out && !row_dim(ks, l->dim)) return -1;
  for (int i = 0; i < ks->nax; i++) {
    const kaxis *x = &ks->ax[i];
    if (i == lane || x->stride != 1 || x->size != l->size) continue;
    if (x->kind == (out ? AX_UNROLL : AX_UPCAST) && (out || row_dim(ks, x->dim))) return i;
  }
  return -1;
}

void kshape_describe(const kshape *ks, char *buf, size_t n) {
  size_t len = 0;
  buf[0] = 0;
  for (int i = 0; i < ks->napplied && len < n; i++)
    len += (size_t)snprintf(buf + len, n - len, "%s%s(%d,%lld)", i ? " " : "", opt_name(ks->applied[i].kind),
                            ks->applied[i].axis, (long long)ks->applied[i].amount);
  if (!ks->napplied) snprintf(buf, n, "none");
}

/* ---------------------------------------------------------------- heuristics */

/* The loop axis of dim d of a kind (its outer part after splits), or -1. */
static int find_axis(const kshape *ks, int d, axis_kind k) {
  for (int i = 0; i < ks->nax; i++)
    if (ks->ax[i].dim == d && ks->ax[i].kind == k) return i;
  return -1;
}

static bool try_apply(kshape *ks, opt_kind k, int axis, int64_t amount) {
  if (axis < 0) return false;
  kshape t = *ks;
  quiet = true;
  int rc = kshape_apply(&t, (opt_action){k, axis, amount});
  quiet = false;
  if (rc < 0) return false;
  *ks = t;
  return true;
}

/* A load of one element for the whole kernel (a user value): the same in every lane. */
static bool scalar_load(const kaccess *a) {
  for (int d = 0; d < KS_MAX_DIMS; d++)
    if (a->coef[d] != 0) return false;
  return true;
}

/* Does load a move with the kernel's reduction (else it is hoisted out of the loop)? */
static bool moves_with_reduction(const kshape *ks, const kaccess *a) {
  for (int d = ks->nout; d < ks->nout + ks->nred; d++)
    if (a->coef[d] != 0) return true;
  return false;
}

/* Do the loads move contiguously (or not at all) along dim d, all but a few gathers (at most
 * a third)? Is one of them contiguous? Scalar loads do not count: a softmax's sum of
 * exp(c * (x - max)) has one gather (x along the rows), one contiguous load (max) and the
 * scalar c, which made the gather look like a third of its loads: lanes on 8 rows, each a
 * gather from 8 rows (142-172 ms for 4096x4096), not along the row. Nor, for a reduce dim,
 * do loads outside the reduction: a 1x1 conv's bias made its x (a gather along cin) one load
 * in three, so its lanes went along cin (960->320 at 7x7: 15 GFLOPS). For an output dim they
 * count (a matmul's bias is its one contiguous load there: its weight's packed panels index
 * by div/mod), but a gather that moves with the reduction is vetoed when no load that moves
 * with it is contiguous: a GGUF matrix-vector product's residual and bias outvoted its
 * weight's rows (a gather along the outputs every step; GPT-2's 3072->768 at one thread
 * 3.9 -> 0.47 ms a layer once its lanes went along the rows). A load whose lanes lie a few elements apart is no gather
 * where the device reads them as a wide load and a shuffle (caps.load_stride), on a dim of
 * at least `strided_from`: a stride-2 conv's output row of 56 or 112 (MobileNetV2's
 * depthwise 96 @112/2 at batch 32 15.0 -> 6.2 ms, its stem 9.3 -> 6.7); on shorter rows (28,
 * 14, 7: padded lanes, masks at both ends) the taps' lanes did better (optimizer.md, "Vector
 * code"). */
static bool lane_friendly(const kshape *ks, const kaccess *acc, int na, int d, int64_t strided_from, bool *contiguous) {
  int loads = 0, gathers = 0;
  bool inner_gather = false, inner_contiguous = false;
  *contiguous = false;
  for (int i = 0; i < na; i++) {
    if (acc[i].store || scalar_load(&acc[i])) continue;
    bool inner = ks->nred && moves_with_reduction(ks, &acc[i]);
    if (d >= ks->nout && !inner) continue;
    loads++;
    int64_t c = acc[i].coef[d];
    bool gather = c != 0 && c != 1 && !(c > 1 && c <= ks->load_stride && ks->size[d] >= strided_from);
    gathers += gather, *contiguous |= c == 1;
    inner_gather |= inner && gather && c > 1, inner_contiguous |= inner && c == 1;
  }
  if (inner_gather && !inner_contiguous) return false;
  return gathers == 0 || (*contiguous && 3 * gathers <= loads);
}

static bool broadcast_along(const kaccess *acc, int na, int d) {
  for (int i = 0; i < na; i++)
    if (!acc[i].store && acc[i].coef[d] == 0) return true;
  return false;
}

/* The same, not counting loads of one element (a clamp's bounds: loaded once per kernel). */
static bool shared_along(const kaccess *acc, int na, int d) {
  for (int i = 0; i < na; i++)
    if (!acc[i].store && acc[i].coef[d] == 0 && !scalar_load(&acc[i])) return true;
  return false;
}

/* Lanes to pad a short dim of n to, or 0: a dim that would get 2 vector lanes or none (the
 * widest power of two <= width dividing it) is padded to whole vectors of the smallest power
 * of two >= n (at most width) where that gives 4 times the lanes: 6 → 8, 5 → 8, 34 → 16 (48);
 * 20 keeps its 4 lanes. */
static int short_pad_lanes(int64_t n, int width) {
  int have = 1, want = 1;
  while (have < width && n % (2 * have) == 0) have *= 2;
  while (want < width && want < n) want *= 2;
  return have <= 2 && want >= 4 * have ? want : 0;
}

/* Pad dim d up to full vectors when more than half a vector would be used (conv rows of 6,
 * 10, 20, 24): masked lanes cost less than narrower vectors or scalar code when each output
 * does a reduction's worth of work (20 in vectors of 8 wastes 4 of 24 lanes; in vectors of 4
 * it takes 5 instructions instead of 3). A shorter output dim that would get 2 lanes or none
 * is padded to one vector of fewer lanes (short_pad_lanes: conv4's rows of 6 on AVX-512 in 8
 * lanes, not 2: 48 → 13 ms; a weight gradient's rows of 6 the same, masked). Reduce dims
 * only ever to one whole vector (pad_reduce_ok). */
static void pad_for_lanes(kshape *ks, int d, axis_kind k, int width) {
  int64_t n = ks->size[d];
  int lanes = short_pad_lanes(n, width);
  if (n % width && 2 * n > width && n < 64 * width) try_apply(ks, OPT_PADTO, find_axis(ks, d, k), width);
  else if (lanes && n % lanes) try_apply(ks, OPT_PADTO, find_axis(ks, d, k), lanes);
}

static int lanes_on(kshape *ks, int d, opt_kind op, axis_kind k, int width) {
  for (int w = width; w >= 2; w /= 2)
    if (try_apply(ks, op, find_axis(ks, d, k), w)) return d;
  return -1;
}

/* The fraction of vector lanes doing useful work when dim n is vectorized at `width`:
 * padded up to full vectors (pad_for_lanes; a short output dim to vectors of fewer lanes),
 * else the widest power of two dividing it. */
static double lane_use(int64_t n, int width, bool pad, bool short_pad) {
  int lanes = short_pad ? short_pad_lanes(n, width) : 0;
  if (n % width == 0) return 1;
  if (pad && 2 * n > width && n < 64 * width) return (double)n / (double)((n + width - 1) / width * width);
  if (lanes) return (double)n * lanes / ((double)((n + lanes - 1) / lanes * lanes) * width);
  int w = width;
  while (w >= 2 && n % w) w /= 2;
  return w >= 2 ? (double)w / width : 0;
}

/* A contiguous reduce dim worth unrolling into lanes, the innermost first, or -1: one that
 * fills more than half a vector, or half of one exactly (a weight gradient over rows of 8 in
 * AVX-512: vectors of 8 lanes instead of scalar code, conv3 52 → 17 ms, performance.md). */
static int reduce_lane_dim(const kshape *ks, const kaccess *acc, int na, int width) {
  bool contiguous;
  for (int d = ks->nout + ks->nred - 1; d >= ks->nout; d--) {
    int64_t n = ks->size[d];
    bool fills = 2 * n > width || (2 * n == width && n >= 4) || short_pad_lanes(n, width);
    if (fills && lane_friendly(ks, acc, na, d, INT64_MAX, &contiguous) && contiguous) return d;
  }
  return -1;
}

/* A reduce dim is padded for lanes only when it then is exactly one vector: the padded lanes
 * accumulate apart and the final combine skips them. Padded further (20 → 24 in vectors of 8),
 * every product needs a WHERE, which also breaks the multiply-add into three ops. */
static bool pad_reduce_ok(int64_t n, int width) { return n < width; }

/* An output dim before `last` that fills whole vectors and that the loads move along
 * contiguously (a pointwise conv's output channels, read from a channels-last weight), or -1. */
static int full_lane_dim(const kshape *ks, const kaccess *acc, int na, int last, int width) {
  bool contiguous;
  for (int d = last - 1; d >= 0; d--)
    if (ks->size[d] % width == 0 && lane_friendly(ks, acc, na, d, INT64_MAX, &contiguous) && contiguous) return d;
  return -1;
}

/* Vector lanes: the last output dim of size > 1 (convs keep size-1 dims for the reduced
 * axes) if the loads allow; for a reduction, a contiguous reduce dim instead when it fills
 * the lanes better (a weight gradient: kw = 5 of 8 lanes, ow = 20 of 24), or another output
 * dim of whole vectors when the last fills under half of them (a 7x7 map's rows, 7 of 16
 * lanes: MobileNetV2's 160->960 @7 at batch 32 3.24 -> 2.86 ms with its channels-last
 * weight); else another output dim (its stores go lane by lane). */
static int choose_lanes(kshape *ks, const kaccess *acc, int na, int width) {
  bool contiguous, reduce = ks->nred > 0;
  int last = ks->nout - 1;
  while (last >= 0 && ks->size[last] == 1) last--;
  int rd = reduce ? reduce_lane_dim(ks, acc, na, width) : -1, full = -1;
  if (reduce && last >= 0 && lane_use(ks->size[last], width, true, true) < 0.5) full = full_lane_dim(ks, acc, na, last, width);
  if (full >= 0 && lanes_on(ks, full, OPT_UPCAST, AX_GLOBAL, width) >= 0) return full;
  bool out_ok = last >= 0 && lane_friendly(ks, acc, na, last, 2 * (int64_t)width, &contiguous);
  bool rpad = rd >= 0 && pad_reduce_ok(ks->size[rd], width);
  if (out_ok && (rd < 0 || lane_use(ks->size[last], width, reduce, reduce) >= lane_use(ks->size[rd], width, rpad, rpad))) {
    if (reduce) pad_for_lanes(ks, last, AX_GLOBAL, width);
    if (lanes_on(ks, last, OPT_UPCAST, AX_GLOBAL, width) >= 0) return last;
  }
  if (!reduce) return -1; /* a transpose gets none: vectors along its input's rows measured the same */
  if (rd >= 0) {
    if (rpad) pad_for_lanes(ks, rd, AX_REDUCE, width);
    if (lanes_on(ks, rd, OPT_UNROLL, AX_REDUCE, width) >= 0) return rd;
  }
  for (int d = last - 1; d >= 0; d--) {
    if (2 * ks->size[d] <= width || !lane_friendly(ks, acc, na, d, INT64_MAX, &contiguous) || !contiguous) continue;
    pad_for_lanes(ks, d, AX_GLOBAL, width);
    if (lanes_on(ks, d, OPT_UPCAST, AX_GLOBAL, width) >= 0) return d;
  }
  return -1;
}

/* Register tile: the upcasts of output dims (some input broadcast along them, so a loaded
 * value serves several accumulators) that minimize the bytes loaded per multiply-add within
 * `budget` accumulators. A load contiguous along the lane dim moves a vector, a broadcast one
 * element: sgemm on a packed panel takes 8 rows x the panel's 2 vectors (8 broadcasts + 2
 * vectors per 16 accumulators, 350 GFLOPS at 2048) over 4 rows x 4 panels (4 + 4 vectors,
 * 230), although the second does fewer loads. A conv weight gradient has x reused along cout
 * and gy along cin, kh, kw. Searched exhaustively over small amounts (few dims); the lane dim
 * may add a second vector. */
enum { TILE_DIMS = 4, TILE_CHOICES = 6 };

typedef struct tile_dim {
  int dim;
  int64_t opts[TILE_CHOICES];
  int nopts;
} tile_dim;

/* s when access a reads output dim d at s times the step of reduce dim r, 1 <= s < k (a
 * window of k along r that the rows of d share: a conv's taps, a pool's), else 0. */
static int64_t window_step(const kaccess *a, int d, int r, int64_t k) {
  int64_t c = a->coef[r], s = c ? a->coef[d] / c : 0;
  return s >= 1 && s < k && s * c == a->coef[d] ? s : 0;
}

/* The loads of access a for n copies along output dim d, per tap of a window unrolled whole
 * (a conv's output row oh reads input row s*oh + kh, kh < k): the n rows' taps read (n-1)*s + k
 * distinct rows, not n*k (the same load serves the rows whose windows overlap); n without one.
 * Only windows that overlap by half or more count (a stride-1 3x3 conv): the Winograd input
 * transform's tiles (6 wide, 4 apart) tiled 7 ways so made ResNet-18's 128 @28 5% slower. */
static double window_copies(const kshape *ks, const kaccess *a, int d, int64_t n, bool any_overlap) {
  double best = (double)n;
  for (int x = 0; x < ks->nax; x++) {
    int r = ks->ax[x].dim;
    int64_t k = ks->ax[x].size, s = ks->ax[x].kind == AX_UNROLL && r >= ks->nout && k == ks->size[r] ? window_step(a, d, r, k) : 0;
    double rows = (double)((n - 1) * s + k) / (double)k;
    if (s && (any_overlap || 2 * s <= k) && rows < best) best = rows;
  }
  return best;
}

static bool reduce_unrolled(const kshape *ks) {
  for (int a = 0; a < ks->nax; a++)
    if (ks->ax[a].kind == AX_REDUCE) return false;
  return ks->nred > 0;
}

/* Bytes loaded per reduce step for a tile of n[i] along tile dims td[i] (loads moving with the
 * reduction only: the others are hoisted out of the loop). With the reduction unrolled whole
 * (a depthwise conv's 3x3 taps), a load that no tile dim nor the lanes move is hoisted too
 * (the taps' weights, per channel): tiling the batch, which only shares those, had MobileNetV2's
 * depthwise 192 @28 at batch 32 in 16 accumulators of 8 images each loading its own rows, 9
 * weights live beside them: spills, 2.5-2.9 ms; its output rows in 7s share each input row
 * with the windows around it, 0.5-0.7 ms. */
static double tile_bytes(const kshape *ks, const kaccess *acc, int na, int lane_dim, int width, const tile_dim *td,
                         const int64_t *n, int nt, bool windows) {
  double bytes = 0;
  bool unrolled = reduce_unrolled(ks);
  for (int i = 0; i < na; i++) {
    if (acc[i].store || !moves_with_reduction(ks, &acc[i])) continue;
    double copies = 1;
    bool moves_in_tile = false;
    for (int t = 0; t < nt; t++) {
      int d = td[t].dim;
      if (acc[i].coef[d] == 0) continue;
      copies *= d == lane_dim || !windows ? (double)n[t] : window_copies(ks, &acc[i], d, n[t], false);
      moves_in_tile |= shared_along(acc, na, d);
    }
    bool vector = lane_dim >= 0 && acc[i].coef[lane_dim] != 0;
    if (unrolled && !vector && !moves_in_tile) continue;
    bytes += copies * (vector ? width : 1) * (double)tg_dtype_size(acc[i].dtype);
  }
  return bytes;
}

/* Do the rows of output dim d share loads through an unrolled window (window_copies;
 * any_overlap: also windows that overlap by less than half)? */
static bool windowed(const kshape *ks, const kaccess *acc, int na, int d, bool any_overlap) {
  for (int i = 0; i < na; i++)
    if (!acc[i].store && acc[i].coef[d] && window_copies(ks, &acc[i], d, 2, any_overlap) < 2) return true;
  return false;
}

/* Candidate tile dims, innermost first: amounts 1 (not tiled) and the small divisors. */
static int tile_candidates(const kshape *ks, const kaccess *acc, int na, int lane_dim, tile_dim *td, bool windows) {
  static const int64_t amounts[] = {8, 6, 5, 4, 3, 2};
  int nt = 0;
  for (int d = ks->nout - 1; d >= 0 && nt < TILE_DIMS; d--) {
    int a = find_axis(ks, d, AX_GLOBAL);
    if (a < 0 || !broadcast_along(acc, na, d)) continue;
    tile_dim t = {d, {1}, 1};
    if (d == lane_dim && ks->ax[a].size <= 4) { /* a few vectors left (a packed panel): all of them */
      tile_dim l = {d, {ks->ax[a].size}, 1};
      for (int r = 0; r < ks->nout && windows && ks->ax[a].size == 4 && l.nopts == 1; r++)
        if (r != d && windowed(ks, acc, na, r, false)) l.opts[l.nopts++] = 2; /* or 2 under a window's rows (below) */
      td[nt++] = l;
      continue;
    }
    for (size_t i = 0; i < sizeof amounts / sizeof *amounts && t.nopts < TILE_CHOICES; i++)
      if (ks->ax[a].size % amounts[i] == 0 && (d != lane_dim || amounts[i] <= 2)) t.opts[t.nopts++] = amounts[i];
    if (d != lane_dim && ks->ax[a].size % 7 == 0 && (ks->ax[a].size == 7 || (windows && windowed(ks, acc, na, d, false))))
      t.opts[t.nopts++] = 7; /* a 7x7 map's row, whole (a strided conv's 14 -> 7); 7 rows of 14, 28, 56, 112 under a window */
    if (t.nopts > 1) td[nt++] = t;
  }
  return nt;
}

/* A long output dim that no tile amount of 4 or more divides (GPT-2's 50257 logits: 29 x
 * 1733) is padded to a multiple of 8 first (masked rows, under 3% of them): else its rows go
 * one at a time, each reduce step loading the broadcast input again for a single output
 * (the logits' matrix-vector product: one row per loop, 20 ms of a 60 ms decode step). */
static void pad_tile_dims(kshape *ks, const kaccess *acc, int na, int lane_dim) {
  for (int d = ks->nout - 1; d >= 0; d--) {
    int64_t n = ks->size[d];
    if (d == lane_dim || n < 256 || n % 8 == 0 || n % 6 == 0 || n % 5 == 0 || n % 4 == 0) continue;
    if (broadcast_along(acc, na, d)) try_apply(ks, OPT_PADTO, find_axis(ks, d, AX_GLOBAL), 8);
  }
}

/* Accumulators of a register tile: one vector register each, leaving room for the loaded
 * row and the broadcasts of a step (16 AVX2 registers: 12; more would spill every step). */
static int64_t tile_budget(const device_caps *caps) {
  int64_t n = caps->vector_registers - 4;
  return n > 16 ? 16 : n;
}

/* Do the loads of a reduction unrolled whole come from the cache (each load's extent over the
 * output dims at most the last-level cache)? Then rows tiled under a window share loads. From
 * memory, rows in order stream best: MobileNetV2's depthwise 144 @56 at batch 32 (58 MB in) in
 * tiles of 8 rows 8-9 ms, of 4 rows 4.4-7.4, a row at a time 3.0-3.6; 192 @28 (19 MB) in 7s
 * 0.5-0.6, a row at a time 0.94. A kernel built to run in a chain (per_image) reads one
 * image's extent, which the chain's previous kernel has just written into the cache: there
 * MobileNetV2's 32 @112, 144 @56 and 96 @112/2 ran 25-40% faster in tiles of rows (2026-12-06). */
static bool cached_windows(const kshape *ks, const kaccess *acc, int na, const device_caps *caps) {
  if (!reduce_unrolled(ks)) return false;
  double cache = (double)(caps->llc_bytes ? caps->llc_bytes : caps->l2_bytes);
  for (int i = 0; i < na; i++) {
    double bytes = (double)tg_dtype_size(acc[i].dtype);
    for (int d = ks->per_image; d < ks->nout; d++)
      if (acc[i].coef[d]) bytes *= (double)ks->size[d];
    if (!acc[i].store && bytes > cache) return false;
  }
  return true;
}

static void register_tile(kshape *ks, const kaccess *acc, int na, int lane_dim, int width, const device_caps *caps) {
  int64_t budget = tile_budget(caps);
  bool windows = cached_windows(ks, acc, na, caps), streamed = false;
  for (int d = 0; d < ks->nout && !windows && reduce_unrolled(ks); d++) streamed |= windowed(ks, acc, na, d, true);
  pad_tile_dims(ks, acc, na, lane_dim);
  tile_dim td[TILE_DIMS];
  int nt = tile_candidates(ks, acc, na, lane_dim, td, windows), total = 1;
  for (int t = 0; t < nt; t++) total *= td[t].nopts;
  int64_t best[TILE_DIMS] = {1, 1, 1, 1}, best_accs = 1;
  double best_ratio = 1e30;
  for (int code = 0; code < total; code++) {
    int64_t n[TILE_DIMS], accs = 1;
    for (int t = 0, c = code; t < nt; t++, c /= td[t - 1].nopts) n[t] = td[t].opts[c % td[t].nopts], accs *= n[t];
    if (accs > budget) continue;
    double ratio = tile_bytes(ks, acc, na, lane_dim, width, td, n, nt, windows) / (double)accs;
    bool preferred = streamed ? accs < best_accs : accs > best_accs; /* at equal loads (below) */
    if (ratio < best_ratio - 1e-9 || (ratio < best_ratio + 1e-9 && preferred)) {
      best_ratio = ratio, best_accs = accs;
      memcpy(best, n, sizeof(int64_t) * (size_t)nt);
    }
  }
  for (int pass = 0; pass < 2; pass++) /* the lane dim last: its second vector is the inner copy */
    for (int t = 0; t < nt; t++)
      if (best[t] > 1 && (td[t].dim == lane_dim) == (pass == 1)) try_apply(ks, OPT_UPCAST, find_axis(ks, td[t].dim, AX_GLOBAL), best[t]);
}

/* Does some load read through such a window (any reduce dim, before unrolling)? */
static bool window_reduction(const kshape *ks, const kaccess *acc, int na) {
  for (int i = 0; i < na; i++)
    for (int d = 0; d < ks->nout && !acc[i].store; d++)
      for (int r = ks->nout; r < ks->nout + ks->nred; r++)
        if (window_step(&acc[i], d, r, ks->size[r])) return true;
  return false;
}

/* Short reductions (pooling windows, small kernels) are unrolled completely; a matmul-like
 * one (no window) only below 8 steps: MobileNetV2's 16->96 @112 unrolled its 16 input
 * channels under a tile of 16 accumulators, all 160 loads scheduled first and spilled (400
 * spill and reload instructions): 6.8-6.9 ms at batch 32, as a loop 6.1-6.3. */
static void unroll_short_reduce(kshape *ks, const kaccess *acc, int na) {
  int64_t left = 1;
  for (int i = 0; i < ks->nax; i++)
    if (ks->ax[i].kind == AX_REDUCE) left *= ks->ax[i].size;
  if (left > 16 || (left >= 8 && !window_reduction(ks, acc, na))) return;
  for (int i = ks->nax - 1; i >= 0; i--)
    if (ks->ax[i].kind == AX_REDUCE) try_apply(ks, OPT_UNROLL, i, ks->ax[i].size);
}

/* No reuse to exploit: more output vectors per reduce step (ILP, longer rows of memory). */
static void widen_lanes(kshape *ks, int lane_dim) {
  static const int64_t amounts[] = {8, 4, 2};
  for (size_t i = 0; i < 3; i++)
    if (try_apply(ks, OPT_UPCAST, find_axis(ks, lane_dim, AX_GLOBAL), amounts[i])) return;
}

static int64_t copies(const kshape *ks) {
  int64_t n = 1;
  int lane = kshape_lane_axis(ks);
  for (int i = 0; i < ks->nax; i++)
    if (i != lane && (ks->ax[i].kind == AX_UPCAST || ks->ax[i].kind == AX_UNROLL)) n *= ks->ax[i].size;
  return n;
}

/* The output dim to keep inside the others (just outside the reduction loops): one along
 * which an input's block per register tile (its elements over the reduction, times the tile's
 * copies) does not move, so that block stays in cache while the tiles walk that dim; -1 for
 * none. Only a block that fits in L2 counts. The input read most in all is kept in blocks (it
 * then comes from memory once, the others are walked again per block), the larger block among
 * inputs of one size. sgemm 2048 on a packed B (equal inputs): rows inside 101 GFLOPS, panels
 * 56; GPT-2's prefill (64 x 768) @ (768 x 3072): the 9 MB weight kept, not read 8 times. */
static int inner_dim(const kshape *ks, const kaccess *acc, int na, const device_caps *caps, double *kept_bytes) {
  double cached_block = (double)caps->l2_bytes / 2; /* the tile's other data shares the L2 */
  double best_total = 0, best_block = 0;
  int best = -1;
  for (int i = 0; i < na; i++) {
    if (acc[i].store) continue;
    double block = 1, total = 1;
    for (int d = 0; d < ks->nout + ks->nred; d++)
      if (acc[i].coef[d]) total *= (double)ks->size[d], block *= d >= ks->nout ? (double)ks->size[d] : 1;
    for (int a = 0; a < ks->nax; a++)
      if (ks->ax[a].kind == AX_UPCAST && acc[i].coef[ks->ax[a].dim]) block *= (double)ks->ax[a].size;
    if (total < best_total || (total == best_total && block <= best_block)) continue;
    if (block == 1 || block * (double)tg_dtype_size(acc[i].dtype) > cached_block) continue;
    for (int a = ks->nax - 1; a >= 0; a--)
      if (ks->ax[a].kind == AX_GLOBAL && !acc[i].coef[ks->ax[a].dim]) {
        best_total = total, best_block = block, best = ks->ax[a].dim;
        *kept_bytes = total * (double)tg_dtype_size(acc[i].dtype);
        break;
      }
  }
  return best;
}

/* The kept dim's loop innermost among the output loops, so that each kept block is read once
 * and reused by every tile of the walked dim, when the inputs that move along that dim fit in
 * the L2 whole (walked again per block from cache), the kept input does not (read again per
 * tile of the walked dim, it would come from memory every time), and the output is at most a
 * quarter of it (the walked dim innermost scatters the output's rows: MobileNetV2's 1x1 convs
 * at batch 32, whose outputs are as large as their inputs, ran 20% slower so). GPT-2's prefill (64 x 768) @ (768 x 3072):
 * the weight read once instead of once per 8 rows, 30 -> 65 GFLOPS; the logits against the
 * 154 MB embedding 25 -> 83 (one thread). Where they do not fit, the order stays: sgemm 2048
 * with its rows walked innermost fell from 175 to 90 GFLOPS. */
static void keep_inside(kshape *ks, const kaccess *acc, int na, const device_caps *caps, int inner, double kept_bytes) {
  int at = inner >= 0 ? find_axis(ks, inner, AX_GLOBAL) : -1, last = -1;
  for (int a = 0; a < ks->nax; a++)
    if (ks->ax[a].kind == AX_GLOBAL) last = a;
  if (at < 0 || last <= at) return;
  double walked = 0, written = 0;
  for (int i = 0; i < na; i++) {
    if (!acc[i].store && !acc[i].coef[inner]) continue;
    double n = (double)tg_dtype_size(acc[i].dtype);
    for (int d = 0; d < ks->nout + ks->nred; d++)
      if (acc[i].coef[d]) n *= (double)ks->size[d];
    *(acc[i].store ? &written : &walked) += n;
  }
  if (walked <= (double)caps->l2_bytes / 2 && kept_bytes > (double)caps->l2_bytes && 4 * written <= kept_bytes)
    try_apply(ks, OPT_SWAP, at, last);
}

/* Parallel axis: the outermost output loop big enough (not the dim to keep inside if another
 * will do, unless the kept input is under an eighth of the L2 and that dim gives each thread 8
 * iterations or more: each thread then reads that small input once into its own cache, which
 * costs nothing), else split the reduction. A depthwise conv's weights (960 x 9 floats) so keep its
 * images outermost, which lets it run in a chain image by image (engine/chunks.c; MobileNetV2
 * at batch 32 1.6% faster, optimizer.md heuristic 5). */
static void parallelize(kshape *ks, int64_t work, int inner, double kept_bytes, const device_caps *caps) {
  int threads = caps->threads;
  if (threads < 2 || work < (1 << 16)) return;
  int at = inner >= 0 ? find_axis(ks, inner, AX_GLOBAL) : -1;
  if (at >= 0 && kept_bytes <= (double)caps->l2_bytes / 8 && ks->ax[at].size >= 8 * threads) inner = -1;
  for (int pass = 0; pass < 2; pass++)
    for (int i = 0; i < ks->nax; i++) {
      int64_t n = ks->ax[i].size;
      if (ks->ax[i].kind != AX_GLOBAL || n < threads) continue;
      if (pass == 0 && (ks->ax[i].dim == inner || (n % threads && n < 8 * threads))) continue; /* balanced */
      if (try_apply(ks, OPT_THREAD, i, ks->ax[i].size)) return;
    }
  if (!ks->group_ok) return;
  int best = -1;
  for (int i = 0; i < ks->nax; i++)
    if (ks->ax[i].kind == AX_REDUCE && (best < 0 || ks->ax[i].size > ks->ax[best].size)) best = i;
  for (int n = threads; n >= 2; n--)
    if (try_apply(ks, OPT_GROUPTOP, best, n)) return;
}

/* A sliding window (a conv reads input row oh + kh) tiled along its output dim: the window's
 * reduce dim becomes the innermost loop. BEAM found this for the demo's conv forwards and input
 * gradients (conv2 forward 129–138 → 89 ms, optimizer.md); the likely reason is that consecutive iterations read
 * the rows the tile's other copies have just read. */
static void window_innermost(kshape *ks, const kaccess *acc, int na, int lane_dim) {
  int last = -1;
  for (int a = 0; a < ks->nax; a++)
    if (ks->ax[a].kind == AX_REDUCE) last = a;
  for (int a = 0; a < ks->nax && last >= 0; a++) {
    if (ks->ax[a].kind != AX_UPCAST || ks->ax[a].dim == lane_dim) continue;
    int od = ks->ax[a].dim;
    for (int r = last; r >= 0; r--) {
      if (ks->ax[r].kind != AX_REDUCE) continue;
      for (int i = 0; i < na; i++) {
        int64_t co = acc[i].coef[od], cr = acc[i].coef[ks->ax[r].dim];
        if (acc[i].store || !co || (co != cr && co != -cr)) continue;
        if (r != last) try_apply(ks, OPT_SWAP, r, last);
        return;
      }
    }
  }
}

/* A device with work-items (max_local_size > 1) runs one per output element, in scalar code.
 * A reduction whose last two output dims are each read broadcast by some load (a matmul: x is
 * the same along m, y along n) gets a 4x4 register tile per work-item, each dim tiled only
 * while 64Ki work-items remain (a device of ~130 cores x 2048 resident threads stays fed). */
static void optimize_work_items(kshape *ks, const kaccess *acc, int na) {
  if (ks->nred == 0 || ks->nout < 2) return;
  int64_t items = 1;
  for (int d = 0; d < ks->nout; d++) items *= ks->size[d];
  for (int d = ks->nout - 1; d >= ks->nout - 2; d--)
    if (ks->size[d] % 4 == 0 && items / 4 >= (1 << 16) && broadcast_along(acc, na, d) &&
        try_apply(ks, OPT_UPCAST, find_axis(ks, d, AX_GLOBAL), 4))
      items /= 4;
}

/* Work-group sizes the heuristics use: at most 256 work-items (a few warps; PoCL and GPUs
 * alike run that well), at least 16 for a split reduction. */
enum { WG_ITEMS = 256, WG_MIN_GROUP = 16, WG_MAX_GROUP = 32 };

/* A reduction with few outputs (fewer than 16Ki work-items would idle a GPU) over a long axis
 * is split across one work-group (GROUPTOP): each work-item sums a contiguous part, the
 * partials meet in local memory. The group is the largest power of two from `cap` down to 16
 * that leaves each work-item 8 elements or more, dividing the axis if one does, else the axis
 * is padded to a multiple of the largest (the padding adds the identity). */
static bool group_reduction(kshape *ks, int64_t items, int64_t cap) {
  if (ks->nred == 0 || !ks->group_ok || items > (1 << 14)) return false;
  int best = -1;
  for (int i = 0; i < ks->nax; i++)
    if (ks->ax[i].kind == AX_REDUCE && (best < 0 || ks->ax[i].size > ks->ax[best].size)) best = i;
  if (best < 0) return false;
  int64_t size = ks->ax[best].size, top = 0;
  for (int64_t g = cap < WG_MAX_GROUP ? cap : WG_MAX_GROUP; g >= WG_MIN_GROUP; g /= 2) { /* the combine reads G each */
    if (g > ks->local_max || size < 8 * g) continue;
    if (!top) top = g;
    if (size % g == 0) return try_apply(ks, OPT_GROUPTOP, best, g);
  }
  if (!top || !try_apply(ks, OPT_PADTO, best, top)) return false;
  return try_apply(ks, OPT_GROUPTOP, best, top);
}

/* The largest divisor of n that is at most cap (1 if none above 1). */
static int64_t divisor_upto(int64_t n, int64_t cap) {
  for (int64_t d = cap < n ? cap : n; d >= 2; d--)
    if (n % d == 0) return d;
  return 1;
}

/* LOCAL on the output dims, innermost first (neighbouring work-items read neighbouring
 * elements), until the work-group has `budget` work-items or no dim divides further. */
static void local_outputs(kshape *ks, int64_t budget) {
  for (int d = ks->nout - 1; d >= 0 && budget >= 2; d--) {
    int a = find_axis(ks, d, AX_GLOBAL);
    int64_t n = a < 0 ? 1 : divisor_upto(ks->ax[a].size, budget);
    if (n >= 2 && try_apply(ks, OPT_LOCAL, a, n)) budget /= n;
  }
}

/* The innermost output dim some load reads contiguously (a sum over columns: the row), or -1. */
static int contiguous_output_dim(const kshape *ks, const kaccess *acc, int na) {
  for (int d = ks->nout - 1; d >= 0; d--)
    for (int i = 0; i < na && ks->size[d] > 1; i++)
      if (!acc[i].store && acc[i].coef[d] == 1) return d;
  return -1;
}

/* Work-group devices: the register tile of a matmul (optimize_work_items), a GROUPTOP work-group
 * for a reduction with few outputs, and LOCAL work-groups of the output for the rest: a matmul
 * of 16x16 work-items each 4x4 outputs, an elementwise kernel 256 consecutive elements. A
 * reduction whose input is contiguous along an output dim (a sum over columns) first gets up
 * to 16 neighbouring outputs as LOCAL (neighbouring work-items read neighbouring elements), the
 * group the rest of the 256: sums over the columns of 4096² on PoCL took 259 ms as GROUPTOP
 * alone (each work-item walking a column), NOOPT's one work-item per column less. */
static bool optimize_tc(kshape *ks);

static void optimize_workgroups(kshape *ks, const kaccess *acc, int na) {
  if (optimize_tc(ks)) return;
  optimize_work_items(ks, acc, na);
  int64_t items = 1;
  for (int i = 0; i < ks->nax; i++)
    if (ks->ax[i].kind == AX_GLOBAL) items *= ks->ax[i].size;
  int d = ks->nred && ks->group_ok ? contiguous_output_dim(ks, acc, na) : -1;
  kshape t = *ks;
  int a = d < 0 ? -1 : find_axis(&t, d, AX_GLOBAL);
  int64_t n = a < 0 ? 1 : divisor_upto(t.ax[a].size, 16);
  if (n >= 2 && try_apply(&t, OPT_LOCAL, a, n) && group_reduction(&t, items, WG_ITEMS / n)) { *ks = t; return; }
  if (d < 0 && group_reduction(ks, items, WG_ITEMS)) return;
  bool tile = false;
  for (int i = 0; i < ks->nax; i++) tile |= ks->ax[i].kind == AX_UPCAST;
  if (!tile) { local_outputs(ks, ks->local_max < WG_ITEMS ? ks->local_max : WG_ITEMS); return; }
  for (int d = ks->nout - 1, dims = 0; d >= 0 && dims < 2; d--) { /* 16x16 over the last two dims > 1 */
    int a = find_axis(ks, d, AX_GLOBAL);
    int64_t n = a < 0 ? 1 : divisor_upto(ks->ax[a].size, 16);
    if (ks->size[d] > 1) dims++;
    if (n >= 2) try_apply(ks, OPT_LOCAL, a, n);
  }
}

/* Tensor cores (a device with caps.tc): a matmul-shaped float32 sum of 16-bit float products
 * takes TC on its first dim triple whose dims are at least a tile (M 16, N 8, K 16; padded up
 * to whole tiles), then, where the outer loops divide, a 2x2 tile of WMMAs per warp (A and B
 * fragments each serve two: UPCAST on the M and N outer loops) and 2x2 warps per work-group
 * (LOCAL on them, outside the lanes: 128 work-items). */
static bool optimize_tc(kshape *ks) {
  static const int64_t tile[3] = {16, 8, 16};
  for (int c = 0; c < ks->ntc_cand && ks->tc_caps; c++) {
    kshape t = *ks;
    tc_dims d = t.tc_cand[c];
    const int dims[3] = {d.m, d.n, d.k};
    bool ok = true;
    for (int i = 0; i < 3 && ok; i++) {
      int a = find_axis(&t, dims[i], i < 2 ? AX_GLOBAL : AX_REDUCE);
      ok = a >= 0 && t.ax[a].size >= tile[i] && (t.ax[a].size % tile[i] == 0 || try_apply(&t, OPT_PADTO, a, tile[i]));
    }
    if (!ok || !try_apply(&t, OPT_TC, c, TC_M16N8K16)) continue;
    for (int i = 0; i < 2; i++) try_apply(&t, OPT_UPCAST, find_axis(&t, dims[i], AX_GLOBAL), 2);
    for (int i = 0; i < 2; i++) try_apply(&t, OPT_LOCAL, find_axis(&t, dims[i], AX_GLOBAL), 2);
    *ks = t;
    return true;
  }
  return false;
}

/* A kernel whose reductions are per row (row dims: a softmax, a layernorm fused into one
 * kernel): the row's innermost dim gets vector lanes as outputs and, sharing them, as the
 * reduce dim of the same size (kshape_row_lane_axis), so the max, the sum and the normalized
 * row all run on vectors; a row not a multiple of the lanes is padded (masked). No register
 * tile (rows' reductions interleaved gained nothing); threads split the rows. */
static bool row_lanes(kshape *ks, int width) {
  int j = ks->nout - 1, k = ks->nout + ks->nred - 1;
  while (j >= 0 && ks->size[j] == 1) j--;
  if (j < 0 || !row_dim(ks, j) || ks->nred == 0 || ks->size[k] != ks->size[j]) return false;
  int64_t n = ks->size[j];
  kshape t = *ks;
  if (n % width && 2 * n > width && n < 64 * width) {
    if (!try_apply(&t, OPT_PADTO, find_axis(&t, j, AX_GLOBAL), width) || !try_apply(&t, OPT_PADTO, find_axis(&t, k, AX_REDUCE), width))
      t = *ks;
  }
  for (int w = width; w >= 2; w /= 2) {
    kshape u = t;
    if (try_apply(&u, OPT_UPCAST, find_axis(&u, j, AX_GLOBAL), w) && try_apply(&u, OPT_UNROLL, find_axis(&u, k, AX_REDUCE), w) &&
        kshape_row_lane_axis(&u) >= 0) {
      *ks = u;
      return true;
    }
  }
  return false;
}

void kshape_optimize(kshape *ks, uop *ast, const device_caps *caps) {
  if (tg_getenv_int("NOOPT", 0)) return;
  enum { MAXACC = 64 };
  kaccess *acc = malloc(sizeof(kaccess) * MAXACC);
  int na = acc ? kernel_accesses(ast, acc, MAXACC) : -1;
  if (na < 0) { free(acc); tg_clear_error(); return; }
  if (caps->max_local_size > 1) {
    if (workgroups(ks)) optimize_workgroups(ks, acc, na);
    else optimize_work_items(ks, acc, na);
    free(acc);
    return;
  }
  size_t widest = 1;
  for (int i = 0; i < na; i++)
    if (tg_dtype_size(acc[i].dtype) > widest) widest = tg_dtype_size(acc[i].dtype);
  int width = caps_lanes(caps, widest);
  int64_t work = 1;
  for (int d = 0; d < ks->nout + ks->nred; d++) work *= ks->size[d];
  if (ks->row_dims && row_lanes(ks, width)) {
    parallelize(ks, work, -1, 0, caps);
    free(acc);
    return;
  }
  int lane_dim = choose_lanes(ks, acc, na, width);
  if (ks->nred > 0) {
    unroll_short_reduce(ks, acc, na);
    int64_t before = copies(ks);
    register_tile(ks, acc, na, lane_dim, width, caps);
    if (copies(ks) == before && lane_dim >= 0 && lane_dim < ks->nout) widen_lanes(ks, lane_dim);
    window_innermost(ks, acc, na, lane_dim);
  }
  double kept_bytes = 0;
  int inner = ks->nred > 0 ? inner_dim(ks, acc, na, caps, &kept_bytes) : -1;
  keep_inside(ks, acc, na, caps, inner, kept_bytes);
  parallelize(ks, work, inner, kept_bytes, caps);
  free(acc);
}
