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
 *   SWAP(a, b)      exchange two loops of the same class (output or reduce) */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "codegen/codegen.h"
#include "runtime/threadpool.h"
#include "tensor/tensor.h"
#include "uop/dtype.h"

static const char *const opt_names[OPT_COUNT] = {"UPCAST", "UNROLL", "THREAD", "GROUP",
                                                 "GROUPTOP", "PADTO", "SWAP"};
const char *opt_name(opt_kind k) { return k >= 0 && k < OPT_COUNT ? opt_names[k] : "?"; }

static bool is_unrolled(axis_kind k) { return k == AX_UPCAST || k == AX_UNROLL; }

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
    ks->nred = first->narg - 1;
    for (int j = 0; j < ks->nred; j++) {
      int d = ks->nout + j;
      ks->size[d] = ks->padded[d] = s[first->arg[1 + j]];
    }
    ks->group_ok = ks->nreduces == 1 && group_possible(ast, first, order, n);
  }
  free(order);
  for (int d = 0; d < ks->nout + ks->nred; d++) {
    if (ks->size[d] == 1) continue; /* a size-1 dim has index 0 and no axis */
    ks->ax[ks->nax++] = (kaxis){ks->size[d], 1, d, d < ks->nout ? AX_GLOBAL : AX_REDUCE};
  }
  return 0;
}

/* ---------------------------------------------------------------- actions */

static int64_t unrolled_product(const kshape *ks) {
  int64_t p = 1;
  for (int i = 0; i < ks->nax; i++)
    if (is_unrolled(ks->ax[i].kind)) p *= ks->ax[i].size;
  return p;
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
  if (n == ks->ax[a].size) remove_axis(ks, a);
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
  if (!thread && !ks->group_ok)
    return BAD("%s(%d,%lld): needs a single reduction reached through elementwise ops", opt_name(a.kind), a.axis, (long long)a.amount);
  if (a.kind == OPT_GROUP) split_inner(ks, a.axis, a.amount, AX_GROUP, 0);
  else split_outer(ks, a.axis, a.amount, thread ? AX_THREAD : AX_GROUP);
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
  kaxis t = *x;
  *x = *y, *y = t;
  return 0;
}

int kshape_apply(kshape *ks, opt_action a) {
  if (a.kind < 0 || a.kind >= OPT_COUNT) return BAD("unknown optimization %d", (int)a.kind);
  if (a.axis < 0 || a.axis >= ks->nax) return BAD("%s(%d,%lld): no axis %d (kernel has %d)", opt_name(a.kind), a.axis, (long long)a.amount, a.axis, ks->nax);
  if (ks->napplied == KS_MAX_ACTIONS) return BAD("%s: too many optimizations", opt_name(a.kind));
  if (ks->nax + 1 >= KS_MAX_AXES) return BAD("%s: too many axes", opt_name(a.kind));
  int rc;
  switch (a.kind) {
    case OPT_UPCAST: rc = apply_unroll(ks, a, AX_GLOBAL, AX_UPCAST); break;
    case OPT_UNROLL: rc = apply_unroll(ks, a, AX_REDUCE, AX_UNROLL); break;
    case OPT_THREAD: case OPT_GROUP: case OPT_GROUPTOP: rc = apply_parallel(ks, a); break;
    case OPT_PADTO: rc = apply_padto(ks, a); break;
    default: rc = apply_swap(ks, a); break;
  }
  if (rc == 0) ks->applied[ks->napplied++] = a;
  return rc;
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
      } else {
        for (size_t i = 0; i < sizeof amounts / sizeof *amounts; i++) tries[nt++] = amounts[i];
        if (k == OPT_THREAD || k == OPT_GROUPTOP) tries[nt++] = ks->ax[a].size;
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

int kshape_lane_axis(const kshape *ks) {
  static int enabled = -1;
  if (enabled < 0) enabled = tg_getenv_int("VECTORIZE", 1) != 0;
  if (!enabled) return -1;
  int unroll = -1, upcast = -1;
  for (int i = 0; i < ks->nax; i++) {
    const kaxis *x = &ks->ax[i];
    if (x->stride != 1 || !pow2_lanes(x->size)) continue;
    if (x->kind == AX_UPCAST && x->dim == ks->nout - 1) return i; /* contiguous output */
    if (x->kind == AX_UNROLL && (unroll < 0 || x->dim > ks->ax[unroll].dim)) unroll = i;
    if (x->kind == AX_UPCAST && upcast < 0) upcast = i;
  }
  return unroll >= 0 ? unroll : upcast;
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

/* Do the loads move contiguously (or not at all) along dim d, all but a few gathers (at most
 * a third)? Is one of them contiguous? */
static bool lane_friendly(const kaccess *acc, int na, int d, bool *contiguous) {
  int loads = 0, gathers = 0;
  *contiguous = false;
  for (int i = 0; i < na; i++) {
    if (acc[i].store) continue;
    loads++;
    gathers += acc[i].coef[d] != 0 && acc[i].coef[d] != 1;
    *contiguous |= acc[i].coef[d] == 1;
  }
  return gathers == 0 || (*contiguous && 3 * gathers <= loads);
}

static bool broadcast_along(const kaccess *acc, int na, int d) {
  for (int i = 0; i < na; i++)
    if (!acc[i].store && acc[i].coef[d] == 0) return true;
  return false;
}

/* Pad dim d up to full vectors when it is not a multiple of 4 (masked lanes cost less than
 * scalar code when each output does a reduction's worth of work). */
static void pad_for_lanes(kshape *ks, int d, axis_kind k, int width) {
  int64_t n = ks->size[d];
  if (n >= 8 && n % 4 && n < 64 * width) try_apply(ks, OPT_PADTO, find_axis(ks, d, k), n >= width ? width : 8);
}

static int lanes_on(kshape *ks, int d, opt_kind op, axis_kind k, int width) {
  for (int w = width; w >= 2; w /= 2)
    if (try_apply(ks, op, find_axis(ks, d, k), w)) return d;
  return -1;
}

/* Vector lanes: the contiguous output dim if the loads allow; for a reduction else a
 * contiguous reduce dim, else another output dim (its stores go lane by lane). */
static int choose_lanes(kshape *ks, const kaccess *acc, int na, int width) {
  bool contiguous, reduce = ks->nred > 0;
  int last = ks->nout - 1;
  if (last >= 0 && ks->size[last] > 1 && lane_friendly(acc, na, last, &contiguous)) {
    if (reduce) pad_for_lanes(ks, last, AX_GLOBAL, width);
    if (lanes_on(ks, last, OPT_UPCAST, AX_GLOBAL, width) >= 0) return last;
  }
  if (!reduce) return -1;
  for (int d = ks->nout + ks->nred - 1; d >= ks->nout; d--) {
    if (ks->size[d] < 8 || !lane_friendly(acc, na, d, &contiguous) || !contiguous) continue;
    pad_for_lanes(ks, d, AX_REDUCE, width);
    if (lanes_on(ks, d, OPT_UNROLL, AX_REDUCE, width) >= 0) return d;
  }
  for (int d = last - 1; d >= 0; d--) {
    if (ks->size[d] < 8 || !lane_friendly(acc, na, d, &contiguous) || !contiguous) continue;
    pad_for_lanes(ks, d, AX_GLOBAL, width);
    if (lanes_on(ks, d, OPT_UPCAST, AX_GLOBAL, width) >= 0) return d;
  }
  return -1;
}

/* Register tile: upcast output dims along which some input is reused (broadcast), up to
 * `budget` accumulators; the lane dim last (a second vector per row). Small dims go whole. */
static void register_tile(kshape *ks, const kaccess *acc, int na, int lane_dim, int64_t budget) {
  for (int pass = 0; pass < 2; pass++) {
    for (int d = ks->nout - 1; d >= 0 && budget > 1; d--) {
      if ((d == lane_dim) != (pass == 1) || !broadcast_along(acc, na, d)) continue;
      int a = find_axis(ks, d, AX_GLOBAL);
      int64_t amounts[4] = {a >= 0 && ks->ax[a].size <= 8 ? ks->ax[a].size : 8, 8, 4, 2};
      for (size_t i = 0; i < 4; i++) {
        int64_t n = amounts[i] > budget ? 0 : amounts[i];
        if (pass == 1 && n > 2) continue;
        if (n && try_apply(ks, OPT_UPCAST, a, n)) { budget /= n; break; }
      }
    }
  }
}

/* Short reductions (pooling windows, small kernels) are unrolled completely. */
static void unroll_short_reduce(kshape *ks) {
  int64_t left = 1;
  for (int i = 0; i < ks->nax; i++)
    if (ks->ax[i].kind == AX_REDUCE) left *= ks->ax[i].size;
  if (left > 16) return;
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

/* Parallel axis: the outermost output loop big enough, else split the reduction. */
static void parallelize(kshape *ks, int64_t work) {
  int threads = threadpool_size();
  if (threads < 2 || work < (1 << 16)) return;
  for (int i = 0; i < ks->nax; i++) {
    if (ks->ax[i].kind != AX_GLOBAL || ks->ax[i].size < threads) continue;
    if (try_apply(ks, OPT_THREAD, i, ks->ax[i].size)) return;
  }
  if (!ks->group_ok) return;
  int best = -1;
  for (int i = 0; i < ks->nax; i++)
    if (ks->ax[i].kind == AX_REDUCE && (best < 0 || ks->ax[i].size > ks->ax[best].size)) best = i;
  for (int n = threads; n >= 2; n--)
    if (try_apply(ks, OPT_GROUPTOP, best, n)) return;
}

void kshape_optimize(kshape *ks, uop *ast) {
  if (tg_getenv_int("NOOPT", 0)) return;
  enum { MAXACC = 64 };
  kaccess *acc = malloc(sizeof(kaccess) * MAXACC);
  int na = acc ? kernel_accesses(ast, acc, MAXACC) : -1;
  if (na < 0) { free(acc); tg_clear_error(); return; }
  size_t widest = 1;
  for (int i = 0; i < na; i++)
    if (tg_dtype_size(acc[i].dtype) > widest) widest = tg_dtype_size(acc[i].dtype);
  int width = (int)(64 / widest) > 16 ? 16 : (int)(64 / widest);
  int64_t work = 1;
  for (int d = 0; d < ks->nout + ks->nred; d++) work *= ks->size[d];
  int lane_dim = choose_lanes(ks, acc, na, width);
  if (ks->nred > 0) {
    unroll_short_reduce(ks);
    int64_t before = copies(ks);
    register_tile(ks, acc, na, lane_dim, 16);
    if (copies(ks) == before && lane_dim >= 0 && lane_dim < ks->nout) widen_lanes(ks, lane_dim);
  }
  parallelize(ks, work);
  free(acc);
}
