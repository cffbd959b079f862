/* lower.c — from a kernel AST (tensor ops over PARAMs) to a kernel graph of RANGE loops,
 * index math, LOAD, STORE and REDUCE, following the kernel's shape state (opt.c).
 *
 * The pass is one rule: INDEX(x, i0..in-1, valid) — "the element of x at these indices,
 * meaningful where valid" — is pushed down through x by a per-op lowering function
 * (lowerers[] below): views turn into index arithmetic, elementwise ops distribute, a
 * reduction opens its ranges, and a PARAM becomes a LOAD.
 *
 * The shape state decides the index of each dim: a sum over its axes of (axis value * stride)
 * where a loop axis is a RANGE, the lane axis is a RANGE of kind RANGE_LANE (rendered as
 * vector lanes), and every other unrolled axis is a constant: the output is stored once per
 * combination of their values, and an unrolled reduction accumulates one body per
 * combination. Padded dims mask their loads, gate their stores, and feed the identity to
 * their reduction. On a work-group device LOCAL axes and a GROUP axis are local ranges (digits
 * of the work-item's index in its work-group); a GROUPed reduction becomes the work-items'
 * partial sums, combined across the group axis by a REDUCE over its local range (the
 * renderers' local-memory combine), and only the group's first work-item stores.
 * After simplification, loads and stores whose index is base + lane become
 * vector accesses (LOAD/STORE arg = [lanes, aligned, checked]), and vectorize.c gives every
 * node that depends on the lane its vector type. */
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "codegen/codegen.h"
#include "codegen/transcendental.h"
#include "tensor/tensor.h"
#include "uop/dtype.h"
#include "uop/symbolic.h"

typedef struct lower_ctx {
  const kshape *ks;
  int stage;
  int next_range;
  uop *var[KS_MAX_AXES];    /* loop and lane axes: their RANGE; other unrolled axes: NULL */
  int64_t val[KS_MAX_AXES]; /* value of each unrolled axis in the copy being built */
  int lane;                 /* lane axis or -1 */
  int lane2;                /* an axis sharing the lane's range (kshape_row_lane_axis) or -1 */
  uop *lane_range;
  int64_t lanes;
  uop *scratch;             /* partials of a GROUPed reduction */
  int64_t out_numel;
  int64_t groups;
  ptrmap uses_lane;         /* node → 1 uses the lane, 2 does not */
  ptrmap plain_ranges;      /* REDUCE_AXIS → id of its first range + 1 (shared by all copies) */
  uop *partial_range;       /* stage 2: the loop over the groups */
  uop *group_local;         /* work-group devices: the GROUP axis's local range, or NULL */
  /* symbolic sizes (docs/symbolic.md): the kernel's variables (id, value read when it runs),
   * each dim's symbolic size (0: plain) and whether its loop ends there (no mask needed) */
  int nvars, var_id[8];
  uop *vars[8];
  int64_t dsym[KS_MAX_DIMS];
  bool bounded[KS_MAX_DIMS];
} lower_ctx;

static uop *new_range_to(int64_t id, uop *end, int kind) {
  int64_t arg[2] = {id, kind};
  return uop_new(OP_RANGE, TG_INT64, &end, 1, arg, 2);
}

static uop *new_range(int64_t id, int64_t end, int kind) { return new_range_to(id, uop_idx(end), kind); }

static uop *make_index(uop *x, uop **idx, int n, uop *valid) {
  uop *src[TG_MAX_DIMS + 2];
  src[0] = x;
  if (n) memcpy(src + 1, idx, sizeof(uop *) * (size_t)n);
  src[n + 1] = valid;
  return uop_new(OP_INDEX, x->dtype, src, n + 2, NULL, 0);
}

/* ---------------------------------------------------------------- symbolic sizes
 * A variable is read once from its 0-d view (the SINK's DEFINE_VAR sources) and clamped to
 * [min, max], so index math knows its range and a bad value cannot index out of bounds. A
 * buffer with a variable dim is laid out at the dim's largest size, so views index it with
 * plain strides; only loop bounds, masks and variable view offsets read the variable. */

static void setup_vars(lower_ctx *c, uop *ast) {
  for (int i = 1; i < ast->nsrc && c->nvars < 8; i++) {
    uop *d = ast->src[i], *hi = uop_idx(d->arg[2]);
    uop *x = uop_alu(OP_MAX, make_index(d->src[0], NULL, 0, uop_const_bool(true)), uop_idx(d->arg[1]));
    c->var_id[c->nvars] = (int)d->arg[0];
    c->vars[c->nvars++] = uop_alu(OP_SUB, hi, uop_alu(OP_MAX, uop_alu(OP_SUB, hi, x), uop_idx(0)));
  }
}

/* A size or offset: a constant, or coef * var + add. */
static uop *sym_uop(lower_ctx *c, int64_t v) {
  for (int i = 0; sym_is(v) && i < c->nvars; i++)
    if (c->var_id[i] == sym_var(v)) return uop_add(uop_mul(c->vars[i], uop_idx(sym_coef(v))), uop_idx(sym_add_of(v)));
  return uop_idx(sym_is(v) ? sym_hi(v) : v); /* not a kernel variable: the spec check prevents it */
}

static int64_t sym_dim_of(const uop *u, int i) { return u->sym && u->sym[i] ? u->sym[i] : uop_shape(u)[i]; }

/* Each kernel dim's symbolic size: the output's dims, then the reduced dims of the first
 * reduction (as kshape_init orders them). */
static void setup_dsym(lower_ctx *c, uop *ast, uop *r) {
  const kshape *ks = c->ks;
  for (int d = 0; d < ks->nout; d++) c->dsym[d] = ast->src[0]->sym ? ast->src[0]->sym[d] : 0;
  for (int j = 0; r && j < ks->nred && r->narg - 1 == ks->nred; j++) c->dsym[ks->nout + j] = r->src[0]->sym ? r->src[0]->sym[r->arg[1 + j]] : 0;
}

/* The end of a loop over the outer part of a variable dim (its other axes, unrolled, make up
 * `stride`): ceil(size / stride), so the loop skips what lies past the size; the mask stays
 * for the last iteration's tail, except for a loop over the whole dim (stride 1): no mask.
 * Output loops only where they are loops (not a work-item's digits, not the parallel axis). */
static uop *sym_range_end(lower_ctx *c, int i) {
  const kaxis *x = &c->ks->ax[i];
  int d = x->dim;
  bool loop = x->kind == AX_REDUCE || (x->kind == AX_GLOBAL && c->ks->local_max <= 1);
  if (!c->dsym[d] || !loop || x->stride * x->size != c->ks->padded[d]) return NULL;
  uop *size = sym_uop(c, c->dsym[d]);
  if (x->stride == 1) return c->bounded[d] = true, size;
  return uop_alu(OP_IDIV, uop_add(size, uop_idx(x->stride - 1)), uop_idx(x->stride));
}

/* Row-major flat index of idx in shape. */
static uop *flat_index(uop **idx, const int64_t *shape, int n) {
  uop *flat = uop_idx(0);
  for (int i = 0; i < n; i++) flat = uop_add(uop_mul(flat, uop_idx(shape[i])), idx[i]);
  return flat;
}

static uop *land(uop *a, uop *b) {
  if (uop_is_const_val(a, 1)) return b;
  if (uop_is_const_val(b, 1)) return a;
  return uop_alu(OP_AND, a, b);
}

/* ---------------------------------------------------------------- dims from axes */

static uop *dim_index(lower_ctx *c, int d) {
  uop *idx = uop_idx(0);
  for (int i = 0; i < c->ks->nax; i++) {
    const kaxis *x = &c->ks->ax[i];
    if (x->dim != d) continue;
    uop *v = c->var[i] ? c->var[i] : uop_idx(c->val[i]);
    idx = uop_add(idx, uop_mul(v, uop_idx(x->stride)));
  }
  return idx;
}

/* Inside the true size (only padded dims can leave it). */
static uop *dim_valid(lower_ctx *c, int d, uop *idx) {
  uop *v = c->ks->padded[d] == c->ks->size[d] ? uop_const_bool(true) : uop_alu(OP_CMPLT, idx, uop_idx(c->ks->size[d]));
  if (c->dsym[d] && !c->bounded[d]) v = land(v, uop_alu(OP_CMPLT, idx, sym_uop(c, c->dsym[d]))); /* a variable dim */
  return v;
}

/* The index a padded dim computes with: min(idx, size-1), spelled k - max(k - idx, 0) so its
 * value range is [0, k] and index math simplifies as for the true size. A padded position
 * then reads some real element (never out of bounds, never masked); its result is dropped
 * (gated store, reduce identity), so the value does not matter. */
static uop *dim_clamp(lower_ctx *c, int d, uop *idx) {
  if (c->ks->padded[d] == c->ks->size[d]) return idx;
  uop *k = uop_idx(c->ks->size[d] - 1);
  return uop_alu(OP_SUB, k, uop_alu(OP_MAX, uop_alu(OP_SUB, k, idx), uop_idx(0)));
}

/* Unrolled axes of a kind (except the lane) — the copies iterate over their values. */
static int dup_axes(lower_ctx *c, axis_kind k, int *out) {
  int n = 0;
  for (int i = 0; i < c->ks->nax; i++)
    if (c->ks->ax[i].kind == k && i != c->lane && i != c->lane2) out[n++] = i;
  return n;
}

/* Next combination of values of axes[0..n) (mixed radix); false after the last. */
static bool next_copy(lower_ctx *c, const int *axes, int n) {
  for (int j = n - 1; j >= 0; j--) {
    if (++c->val[axes[j]] < c->ks->ax[axes[j]].size) return true;
    c->val[axes[j]] = 0;
  }
  return false;
}

/* ---------------------------------------------------------------- lowerers */

typedef uop *(*lowerer)(lower_ctx *c, uop *x, uop **idx, int n, uop *valid);

static uop *lower_alu(lower_ctx *c, uop *x, uop **idx, int n, uop *valid) {
  (void)c;
  uop *src[3];
  for (int i = 0; i < x->nsrc; i++) src[i] = make_index(x->src[i], idx, n, valid);
  return uop_replace_src(x, src, x->nsrc);
}

static uop *lower_param(lower_ctx *c, uop *x, uop **idx, int n, uop *valid) {
  (void)c;
  int64_t garg[2] = {x->arg[0], shape_numel(uop_shape(x), uop_ndim(x))}; /* slot, elements */
  uop *g = uop_new(OP_DEFINE_GLOBAL, x->dtype, NULL, 0, garg, 2);
  uop *src[3] = {g, flat_index(idx, uop_shape(x), n), valid};
  return uop_new(OP_LOAD, x->dtype, src, 3, NULL, 0);
}

static uop *lower_const(lower_ctx *c, uop *x, uop **idx, int n, uop *valid) {
  (void)c, (void)idx, (void)n, (void)valid;
  return x;
}

static uop *lower_iota(lower_ctx *c, uop *x, uop **idx, int n, uop *valid) {
  (void)c, (void)n, (void)valid;
  return ucast(idx[0], x->dtype);
}

/* Reshape: dims are matched in groups of equal product (size-1 dims apart), so only a group
 * that splits one index into several needs / and %; inserting or removing size-1 dims and
 * merging dims is plain index arithmetic. */
static uop *lower_reshape(lower_ctx *c, uop *x, uop **idx, int n, uop *valid) {
  (void)c;
  uop *in = x->src[0], *out[TG_MAX_DIMS];
  int m = uop_ndim(in), i = 0, j = 0;
  const int64_t *s = uop_shape(in), *t = uop_shape(x);
  if (shape_numel(s, m) == 0) return make_index(in, idx, 0, valid); /* never run */
  for (;;) {
    while (i < m && s[i] == 1) out[i++] = uop_idx(0);
    while (j < n && t[j] == 1) j++;
    if (i >= m || j >= n) break;
    int gi = i, gj = j;
    int64_t pi = s[i++], pj = t[j++];
    while (pi != pj) {
      if (pi < pj) pi *= s[i++];
      else pj *= t[j++];
    }
    uop *flat = uop_idx(0); /* the group's row-major index in the output dims */
    for (int k = gj; k < j; k++) flat = uop_add(uop_mul(flat, uop_idx(t[k])), idx[k]);
    int64_t stride = 1;
    for (int k = i - 1; k >= gi; k--) {
      if (s[k] == 1) out[k] = uop_idx(0);
      else if (k == gi) out[k] = stride == 1 ? flat : uop_alu(OP_IDIV, flat, uop_idx(stride));
      else out[k] = uop_alu(OP_MOD, stride == 1 ? flat : uop_alu(OP_IDIV, flat, uop_idx(stride)), uop_idx(s[k]));
      stride *= s[k];
    }
  }
  while (i < m) out[i++] = uop_idx(0);
  return make_index(in, out, m, valid);
}

static uop *lower_permute(lower_ctx *c, uop *x, uop **idx, int n, uop *valid) {
  (void)c;
  uop *out[TG_MAX_DIMS];
  for (int i = 0; i < n; i++) out[x->arg[i]] = idx[i];
  return make_index(x->src[0], out, n, valid);
}

static uop *lower_expand(lower_ctx *c, uop *x, uop **idx, int n, uop *valid) {
  (void)c;
  uop *out[TG_MAX_DIMS];
  const int64_t *s = uop_shape(x->src[0]);
  for (int i = 0; i < n; i++) out[i] = s[i] == 1 ? uop_idx(0) : idx[i];
  return make_index(x->src[0], out, n, valid);
}

static uop *lower_shrink(lower_ctx *c, uop *x, uop **idx, int n, uop *valid) {
  uop *out[TG_MAX_DIMS];
  for (int i = 0; i < n; i++) out[i] = uop_add(idx[i], sym_uop(c, x->arg[2 * i]));
  return make_index(x->src[0], out, n, valid);
}

static uop *lower_flip(lower_ctx *c, uop *x, uop **idx, int n, uop *valid) {
  (void)c;
  uop *out[TG_MAX_DIMS];
  const int64_t *s = uop_shape(x);
  for (int i = 0; i < n; i++)
    out[i] = x->arg[i] ? uop_add(uop_mul(idx[i], uop_idx(-1)), uop_idx(s[i] - 1)) : idx[i];
  return make_index(x->src[0], out, n, valid);
}

/* Padded positions are invalid: loads there are masked and the value is 0. */
static uop *lower_pad(lower_ctx *c, uop *x, uop **idx, int n, uop *valid) {
  uop *out[TG_MAX_DIMS], *inside = uop_const_bool(true);
  for (int i = 0; i < n; i++) {
    int64_t before = x->arg[2 * i];
    out[i] = sym_is(before) ? uop_alu(OP_SUB, idx[i], sym_uop(c, before)) : uop_add(idx[i], uop_idx(-before));
    if (!before && !x->arg[2 * i + 1]) continue;
    uop *ge = uop_new1(OP_NOT, TG_BOOL, uop_alu(OP_CMPLT, out[i], uop_idx(0)));
    inside = land(inside, land(ge, uop_alu(OP_CMPLT, out[i], sym_uop(c, sym_dim_of(x->src[0], i)))));
  }
  uop *v = make_index(x->src[0], out, n, land(valid, inside));
  return uop_new3(OP_WHERE, x->dtype, inside, v, uop_const(x->dtype, 0));
}

static uop *reduce_identity(uop_op op, tg_dtype dt) {
  if (op == OP_ADD) return uop_const(dt, 0);
  if (op == OP_MUL) return uop_const(dt, 1);
  if (dtype_is_float(dt)) return uop_const(dt, -INFINITY);
  return uop_const_int(dt, dt == TG_BOOL ? 0 : (int64_t)dtype_table[dt].min);
}

/* A reduction over dims that are not the kernel's first: plain loops. */
static uop *reduce_plain(lower_ctx *c, uop *x, uop **idx, int n, uop *valid) {
  uop *out[TG_MAX_DIMS], *src[TG_MAX_DIMS + 1];
  int nr = 0;
  memcpy(out, idx, sizeof(uop *) * (size_t)n);
  int64_t first = (int64_t)(intptr_t)ptrmap_get(&c->plain_ranges, x) - 1;
  if (first < 0) {
    first = c->next_range;
    c->next_range += x->narg - 1;
    ptrmap_put(&c->plain_ranges, x, (void *)(intptr_t)(first + 1));
  }
  for (int i = 1; i < x->narg; i++) {
    int ax = (int)x->arg[i];
    out[ax] = src[1 + nr++] = new_range_to(first + i - 1, sym_uop(c, sym_dim_of(x->src[0], ax)), RANGE_REDUCE);
  }
  src[0] = make_index(x->src[0], out, n, valid);
  int64_t arg[2] = {x->arg[0], 1};
  return uop_new(OP_REDUCE, x->dtype, src, nr + 1, arg, 2);
}

/* Stage 2 of a GROUPed reduction: combine the partials of every group. */
static uop *reduce_partials(lower_ctx *c, uop *x, uop **idx, int n, uop *valid) {
  if (!c->partial_range) c->partial_range = new_range(c->next_range++, c->groups, RANGE_REDUCE);
  uop *g = c->partial_range;
  uop *at = uop_add(uop_mul(g, uop_idx(c->out_numel)), flat_index(idx, uop_shape(x), n));
  uop *load = uop_new3(OP_LOAD, x->dtype, c->scratch, at, valid);
  uop *src[2] = {load, g};
  int64_t arg[2] = {x->arg[0], 1};
  return uop_new(OP_REDUCE, x->dtype, src, 2, arg, 2);
}

static bool is_kernel_reduce(lower_ctx *c, uop *x) {
  const kshape *ks = c->ks;
  if (x->narg - 1 != ks->nred) return false;
  const int64_t *s = uop_shape(x->src[0]);
  for (int j = 0; j < ks->nred; j++)
    if (s[x->arg[1 + j]] != ks->size[ks->nout + j]) return false;
  return true;
}

static uop *reduce_tc(lower_ctx *c, uop *x, uop **idx, int n, uop *valid);
static uop *first_reduce(uop *ast);

/* The reduce axis on the vector lanes (the lane axis, or the one sharing it), or -1. */
static int reduce_lane(const lower_ctx *c) {
  if (c->lane >= 0 && c->ks->ax[c->lane].kind == AX_UNROLL) return c->lane;
  return c->lane2 >= 0 && c->ks->ax[c->lane2].kind == AX_UNROLL ? c->lane2 : -1;
}

static uop *lower_reduce(lower_ctx *c, uop *x, uop **idx, int n, uop *valid) {
  if (!is_kernel_reduce(c, x)) return reduce_plain(c, x, idx, n, valid);
  if (c->stage == STAGE_COMBINE) return reduce_partials(c, x, idx, n, valid);
  if (c->ks->tc) return reduce_tc(c, x, idx, n, valid);
  const kshape *ks = c->ks;
  uop *src[KS_MAX_UPCAST + KS_MAX_AXES];
  int dup[KS_MAX_AXES], ndup = dup_axes(c, AX_UNROLL, dup), nb = 0;
  /* a padded reduce dim that is exactly the lane axis: its padded lanes accumulate apart and
   * the final combine skips them (arg[2] = lanes to combine) instead of masking every body */
  int lane_only = -1, rlane = reduce_lane(c);
  if (rlane >= 0) {
    int d = ks->ax[rlane].dim;
    if (ks->padded[d] != ks->size[d] && ks->padded[d] == c->lanes) lane_only = d;
  }
  for (int j = 0; j < ndup; j++) c->val[dup[j]] = 0;
  do { /* one body per combination of the unrolled reduce axes */
    uop *out[TG_MAX_DIMS], *rvalid = uop_const_bool(true);
    memcpy(out, idx, sizeof(uop *) * (size_t)n);
    for (int j = 0; j < ks->nred; j++) {
      uop *ri = dim_index(c, ks->nout + j);
      out[x->arg[1 + j]] = dim_clamp(c, ks->nout + j, ri);
      if (ks->nout + j != lane_only) rvalid = land(rvalid, dim_valid(c, ks->nout + j, ri));
    }
    uop *body = make_index(x->src[0], out, n, valid);
    if (!uop_is_const_val(rvalid, 1)) body = uop_new3(OP_WHERE, x->dtype, rvalid, body, reduce_identity((uop_op)x->arg[0], x->dtype));
    src[nb++] = body;
  } while (next_copy(c, dup, ndup));
  int ns = nb;
  for (int i = 0; i < ks->nax; i++) /* its loops in loop order, then the lane */
    if (ks->ax[i].kind == AX_REDUCE) src[ns++] = c->var[i];
  if (rlane >= 0) src[ns++] = c->lane_range;
  int64_t arg[3] = {x->arg[0], nb, lane_only >= 0 ? ks->size[lane_only] : 0};
  uop *partial = uop_new(OP_REDUCE, x->dtype, src, ns, arg, lane_only >= 0 ? 3 : 2);
  if (!c->group_local) return partial;
  uop *across[2] = {partial, c->group_local}; /* the work-group's partials combined */
  return uop_new(OP_REDUCE, x->dtype, across, 2, (int64_t[]){x->arg[0], 1}, 2);
}

/* ---------------------------------------------------------------- tensor cores */

/* The 16-bit float dtype u's values come from: u's own, or a cast from it under views (a
 * matmul casts its operands to float32 before broadcasting them); 0 for none. */
static tg_dtype half_origin(uop *u) {
  while (uop_is_movement(u)) u = u->src[0];
  if (dtype_is_half(u->dtype)) return (tg_dtype)u->dtype;
  return u->op == OP_CAST && dtype_is_half(u->src[0]->dtype) ? (tg_dtype)u->src[0]->dtype : (tg_dtype)0;
}

/* The product of a tensor-core reduction: MUL(a, b) (possibly inside a cast to float32 of a
 * 16-bit product), each operand exactly a value of the same 16-bit float type (half_origin:
 * float32 operands convert back exactly); its dtype, or 0. */
static tg_dtype tc_operands(uop *r, uop **op) {
  uop *m = r->src[0];
  if (m->op == OP_CAST && m->src[0]->op == OP_MUL && dtype_is_half(m->src[0]->dtype)) m = m->src[0];
  if (m->op != OP_MUL) return 0;
  op[0] = m->src[0], op[1] = m->src[1];
  tg_dtype a = half_origin(op[0]);
  return a && a == half_origin(op[1]) ? a : (tg_dtype)0;
}

/* The dims of u's shape its value moves along (bit d): views map them, a broadcast (EXPAND of
 * a size-1 dim) does not move, a reshape moves a whole group of equal product if any of its
 * dims moves, a padded dim moves (its mask does). Conservative: anything else moves along all.
 * reduces: count only the values of reductions (a leaf moves along nothing, a reduction along
 * all its dims): the dims a kernel's reductions are broadcast along are the rest. memo: node →
 * mask | bit 63 (shapes of at most 63 dims; a DAG is walked once). */
typedef struct moving_ctx {
  bool reduces;
  ptrmap memo;
} moving_ctx;

static uint64_t moving_in(moving_ctx *mc, uop *u);

static uint64_t moving_compute(moving_ctx *mc, uop *u) {
  int n = uop_ndim(u);
  const int64_t *s = uop_shape(u);
  uint64_t all = 0, m = 0;
  for (int d = 0; d < n && d < 64; d++)
    if (s[d] > 1) all |= 1ull << d;
  if (u->op == OP_CONST || u->op == OP_VALUE) return 0;
  if (mc->reduces && (u->op == OP_PARAM || u->op == OP_IOTA)) return 0;
  if (uop_is_alu(u)) {
    for (int i = 0; i < u->nsrc; i++) m |= moving_in(mc, u->src[i]);
    return m & all;
  }
  uop *x = u->nsrc ? u->src[0] : NULL;
  switch (u->op) {
    case OP_EXPAND: case OP_SHRINK: case OP_FLIP: return moving_in(mc, x) & all;
    case OP_PAD:
      m = moving_in(mc, x);
      for (int d = 0; d < n && d < 64; d++)
        if (u->arg[2 * d] || u->arg[2 * d + 1]) m |= 1ull << d;
      return m & all;
    case OP_PERMUTE: {
      uint64_t in = moving_in(mc, x);
      for (int d = 0; d < n && d < 64; d++)
        if (in >> u->arg[d] & 1) m |= 1ull << d;
      return m & all;
    }
    case OP_RESHAPE: { /* group-wise, as lower_reshape: size-1 dims apart, groups of equal product */
      uint64_t in = moving_in(mc, x);
      const int64_t *xs = uop_shape(x);
      int xn = uop_ndim(x), i = 0, j = 0;
      for (;;) {
        while (i < xn && xs[i] == 1) i++;
        while (j < n && s[j] == 1) j++;
        if (i >= xn || j >= n) break;
        int gi = i, gj = j;
        int64_t pi = xs[i++], pj = s[j++];
        while (pi != pj) {
          if (pi < pj && i < xn) pi *= xs[i++];
          else if (pj < pi && j < n) pj *= s[j++];
          else return all; /* no matching groups (an empty shape): everything moves */
        }
        bool mv = false;
        for (int k = gi; k < i; k++) mv |= k < 64 && (in >> k & 1);
        for (int k = gj; k < j && mv && k < 64; k++) m |= 1ull << k;
      }
      return m & all;
    }
    default: return all;
  }
}

static uint64_t moving_in(moving_ctx *mc, uop *u) {
  uintptr_t v = (uintptr_t)ptrmap_get(&mc->memo, u);
  if (v) return (uint64_t)v & ~(1ull << 63);
  uint64_t m = uop_ndim(u) > 63 ? ~0ull >> 1 : moving_compute(mc, u);
  ptrmap_put(&mc->memo, u, (void *)(uintptr_t)(m | 1ull << 63));
  return m;
}

static uint64_t moving_dims(uop *u) {
  moving_ctx mc = {false, {0}};
  uint64_t m = moving_in(&mc, u);
  ptrmap_free(&mc.memo);
  return m;
}

uint64_t reduce_moving_dims(uop *u) {
  moving_ctx mc = {true, {0}};
  uint64_t m = moving_in(&mc, u);
  ptrmap_free(&mc.memo);
  return m;
}

/* The reduce-input position of each kernel dim (-1: none): the reduce dims by the reduction's
 * axes, the output dims of size > 1 in order onto its other dims of size > 1; false when they
 * do not line up (a reshape that merges or splits output dims). */
static bool tc_positions(const kshape *ks, uop *r, int *pos) {
  const int64_t *s = uop_shape(r->src[0]);
  int n = uop_ndim(r->src[0]), d = 0;
  bool reduced[TG_MAX_DIMS] = {0};
  for (int i = 0; i < ks->nout + ks->nred; i++) pos[i] = -1;
  for (int j = 0; j < ks->nred; j++) pos[ks->nout + j] = (int)r->arg[1 + j], reduced[r->arg[1 + j]] = true;
  for (int i = 0; i < n; i++) {
    if (reduced[i] || s[i] == 1) continue;
    while (d < ks->nout && ks->size[d] == 1) d++;
    if (d == ks->nout || ks->size[d] != s[i]) return false;
    pos[d++] = i;
  }
  while (d < ks->nout && ks->size[d] == 1) d++;
  return d == ks->nout;
}

void tc_match(kshape *ks, uop *ast) {
  ks->ntc_cand = 0;
  if (ks->nreduces != 1 || ks->reduce_op != OP_ADD || ks->red_dtype != TG_FLOAT32 || !ks->group_ok) return;
  uop *r = first_reduce(ast), *op[2];
  int pos[KS_MAX_DIMS];
  tg_dtype in = r ? tc_operands(r, op) : (tg_dtype)0;
  if (!in || uop_ndim(r->src[0]) > 64 || !tc_positions(ks, r, pos)) return;
  uint64_t mv[2] = {moving_dims(op[0]), moving_dims(op[1])};
  ks->tc_in = in;
  for (int n = ks->nout - 1; n >= 0; n--) /* innermost dims first: N (D's pairs) along the last */
    for (int m = ks->nout - 1; m >= 0; m--)
      for (int k = ks->nout + ks->nred - 1; k >= ks->nout; k--)
        for (int a = 0; a < 2 && ks->ntc_cand < KS_MAX_TC; a++) {
          if (pos[m] < 0 || pos[n] < 0 || pos[k] < 0) continue;
          uint64_t am = mv[a], bm = mv[1 - a], pm = 1ull << pos[m], pn = 1ull << pos[n], pk = 1ull << pos[k];
          if ((am & pm) && !(bm & pm) && (bm & pn) && !(am & pn) && (am & pk) && (bm & pk))
            ks->tc_cand[ks->ntc_cand++] = (tc_dims){m, n, k, a};
        }
}

/* Dim d's index from its axes, leaving out the tensor-core tile's (the fragments add theirs). */
static uop *dim_index_outer(lower_ctx *c, int d) {
  uop *idx = uop_idx(0);
  for (int i = 0; i < c->ks->nax; i++) {
    const kaxis *x = &c->ks->ax[i];
    if (x->dim != d || x->tc) continue;
    uop *v = c->var[i] ? c->var[i] : uop_idx(c->val[i]);
    idx = uop_add(idx, uop_mul(v, uop_idx(x->stride)));
  }
  return idx;
}

static int tc_axis(const kshape *ks, int role) {
  for (int i = 0; i < ks->nax; i++)
    if (ks->ax[i].tc == role) return i;
  return -1;
}

/* One fragment element of an operand: the operand at the reduce input's indices with its tile
 * dim (M for A, N for B) at base + at and K at kbase + k, masked to 0 where a reduce dim is
 * padded. */
static uop *tc_element(lower_ctx *c, uop *operand, uop **idx, int n, uop *valid, int dim, uop *base, uop *at, uop *kbase, uop *k,
                       const int *pos, uop *rvalid) {
  const kshape *ks = c->ks;
  uop *out[TG_MAX_DIMS];
  memcpy(out, idx, sizeof(uop *) * (size_t)n);
  uop *ti = uop_add(base, at), *ki = uop_add(kbase, k);
  out[pos[dim]] = dim_clamp(c, dim, ti);
  out[pos[ks->tc_at.k]] = dim_clamp(c, ks->tc_at.k, ki);
  uop *v = land(rvalid, dim_valid(c, ks->tc_at.k, ki));
  uop *e = make_index(operand, out, n, valid);
  if (!uop_is_const_val(v, 1)) e = uop_new3(OP_WHERE, operand->dtype, v, e, uop_const(operand->dtype, 0));
  return e;
}

/* The kernel's reduction on tensor cores: per K step (and per UNROLL copy) one WMMA of this
 * lane's A, B fragments (the m16n8k16 layout: lane = 4 g + t; A element i at row
 * g + 8 ((i >> 1) & 1), column 2 t + (i & 1) + 8 (i >> 2); B element i at row (k)
 * 2 t + (i & 1) + 8 (i >> 1), column g) and a zero C; this output copy's element of D (the
 * UPCASTs mhi, nlo: 2 mhi + nlo) is accumulated by a REDUCE over the K loops. Every copy's
 * REDUCE shares the one WMMA (interned), which the linearizer emits once per step. */
static uop *reduce_tc(lower_ctx *c, uop *x, uop **idx, int n, uop *valid) {
  const kshape *ks = c->ks;
  tc_dims td = ks->tc_at;
  uop *op[2], *src[KS_MAX_UPCAST + KS_MAX_AXES];
  int pos[KS_MAX_DIMS], dup[KS_MAX_AXES], ndup = dup_axes(c, AX_UNROLL, dup), nb = 0;
  if (!tc_operands(x, op) || !tc_positions(ks, x, pos)) return NULL;
  uop *a = op[td.a], *b = op[1 - td.a], *g = c->var[tc_axis(ks, TC_ROLE_G)], *t = c->var[tc_axis(ks, TC_ROLE_T)];
  int64_t lane = 2 * c->val[tc_axis(ks, TC_ROLE_MHI)] + c->val[tc_axis(ks, TC_ROLE_NLO)];
  for (int j = 0; j < ndup; j++) c->val[dup[j]] = 0;
  do {
    uop *rin[TG_MAX_DIMS], *rvalid = uop_const_bool(true), *frag[WMMA_A + WMMA_B + WMMA_C];
    memcpy(rin, idx, sizeof(uop *) * (size_t)n);
    for (int j = 0; j < ks->nred; j++) { /* the other reduce dims: loops as usual */
      int d = ks->nout + j;
      if (d == td.k) continue;
      uop *ri = dim_index(c, d);
      rin[pos[d]] = dim_clamp(c, d, ri);
      rvalid = land(rvalid, dim_valid(c, d, ri));
    }
    uop *mb = dim_index_outer(c, td.m), *nbase = dim_index_outer(c, td.n), *kb = dim_index_outer(c, td.k);
    uop *t2 = uop_mul(t, uop_idx(2));
    for (int i = 0; i < WMMA_A; i++)
      frag[i] = tc_element(c, a, rin, n, valid, td.m, mb, uop_add(g, uop_idx(8 * ((i >> 1) & 1))), kb,
                           uop_add(t2, uop_idx((i & 1) + 8 * (i >> 2))), pos, rvalid);
    for (int i = 0; i < WMMA_B; i++)
      frag[WMMA_A + i] = tc_element(c, b, rin, n, valid, td.n, nbase, g, kb, uop_add(t2, uop_idx((i & 1) + 8 * (i >> 1))), pos, rvalid);
    for (int i = 0; i < WMMA_C; i++) frag[WMMA_A + WMMA_B + i] = uop_const(TG_FLOAT32, 0);
    int64_t arg[2] = {ks->tc, ks->tc_in};
    uop *w = uop_new_vec(OP_WMMA, TG_FLOAT32, 4, frag, WMMA_A + WMMA_B + WMMA_C, arg, 2);
    src[nb++] = uop_new(OP_GEP, TG_FLOAT32, &w, 1, &lane, 1);
  } while (next_copy(c, dup, ndup));
  int ns = nb;
  for (int i = 0; i < ks->nax; i++)
    if (ks->ax[i].kind == AX_REDUCE) src[ns++] = c->var[i];
  return uop_new(OP_REDUCE, x->dtype, src, ns, (int64_t[]){OP_ADD, nb}, 2);
}

static const lowerer lowerers[OP_COUNT] = {
    [OP_PARAM] = lower_param,     [OP_CONST] = lower_const,     [OP_IOTA] = lower_iota,
    [OP_RESHAPE] = lower_reshape, [OP_PERMUTE] = lower_permute, [OP_EXPAND] = lower_expand,
    [OP_SHRINK] = lower_shrink,   [OP_FLIP] = lower_flip,       [OP_PAD] = lower_pad,
    [OP_REDUCE_AXIS] = lower_reduce,
};

static uop *lower_index(void *ctx, uop *u, uop **cap) {
  (void)cap;
  uop *x = u->src[0];
  int n = u->nsrc - 2;
  lowerer f = uop_is_alu(x) ? lower_alu : lowerers[x->op];
  if (!f) return NULL; /* reported by the spec check */
  return f(ctx, x, u->src + 1, n, u->src[n + 1]);
}

/* After simplification: drop validity that became always-true, and masks already on loads. */
static uop *load_always_valid(void *ctx, uop *u, uop **cap) {
  (void)ctx;
  uop *src[2] = {cap['g' - 'a'], cap['i' - 'a']};
  return uop_new(OP_LOAD, u->dtype, src, 2, u->arg, u->narg);
}
static uop *masked_load(void *ctx, uop *u, uop **cap) {
  (void)ctx, (void)u;
  return cap['l' - 'a'];
}
static uop *store_always_valid(void *ctx, uop *u, uop **cap) {
  (void)ctx, (void)cap;
  return uop_new(OP_STORE, u->dtype, u->src, 3, u->arg, u->narg);
}

static const rule lower_rule_list[] = {{"(INDEX ...)", lower_index}, {NULL, NULL}};
static const rule cleanup_rule_list[] = {
    {"(LOAD g i true)", load_always_valid},
    {"(WHERE v l=(LOAD g i v) 0)", masked_load},
    {"(STORE g i v true)", store_always_valid},
    {NULL, NULL},
};

/* ---------------------------------------------------------------- vector accesses */

static bool uses_lane(lower_ctx *c, uop *u) {
  if (u == c->lane_range) return true;
  uintptr_t m = (uintptr_t)ptrmap_get(&c->uses_lane, u);
  if (m) return m == 1;
  bool r = false;
  for (int i = 0; i < u->nsrc && !r; i++) r = uses_lane(c, u->src[i]);
  ptrmap_put(&c->uses_lane, u, (void *)(uintptr_t)(r ? 1 : 2));
  return r;
}

static bool lane_strided(lower_ctx *c, uop *idx, int max_stride, uop **base, int *stride, bool *aligned, bool *clamped);

/* A padded dim's clamp k - max(k - e, 0) of a contiguous e: its lanes run on (past k: don't
 * care). The base is e's. */
static bool clamped_lane(lower_ctx *c, uop *u, uop **base, bool *aligned) {
  if (u->op != OP_SUB || u->src[0]->op != OP_CONST) return false;
  uop *m = u->src[1], *k = u->src[0];
  if (m->op != OP_MAX || !uop_is_const_val(m->src[1], 0) || m->src[0]->op != OP_SUB || m->src[0]->src[0] != k) return false;
  bool inner;
  int one;
  return lane_strided(c, m->src[0]->src[1], 1, base, &one, aligned, &inner) && !inner;
}

/* idx == base + stride * lane with base free of the lane and 1 <= stride <= max_stride? Then
 * *base, *stride and whether the vector is aligned (contiguous, base a multiple of the lane
 * count: buffers are 64-byte aligned). *clamped: the lane runs through a padded dim's clamp,
 * so the vector may reach past the buffer. */
static bool lane_strided(lower_ctx *c, uop *idx, int max_stride, uop **base, int *stride, bool *aligned, bool *clamped) {
  term t[64];
  int64_t k = 0;
  int n = index_terms(idx, 1, t, 0, 64, &k), at = -1;
  if (n < 0) return false;
  *aligned = k % c->lanes == 0, *clamped = false, *stride = 1;
  uop *inner = NULL;
  bool inner_aligned = true;
  for (int i = 0; i < n; i++) {
    bool lane_step = t[i].coef >= 1 && t[i].coef <= max_stride && at < 0;
    if (lane_step && t[i].base == c->lane_range) { at = i, *stride = (int)t[i].coef; continue; }
    if (lane_step && clamped_lane(c, t[i].base, &inner, &inner_aligned)) {
      at = i, *clamped = true, *stride = (int)t[i].coef;
      continue;
    }
    if (uses_lane(c, t[i].base)) return false;
    if (t[i].coef % c->lanes) *aligned = false;
  }
  if (at < 0) return false;
  *aligned = *aligned && *stride == 1;
  uop *s = inner ? inner : uop_idx(k);
  if (inner) s = uop_add(uop_mul(inner, uop_idx(*stride)), uop_idx(k)), *aligned = *aligned && inner_aligned;
  for (int i = 0; i < n; i++)
    if (i != at) s = uop_add(s, uop_mul(t[i].base, uop_idx(t[i].coef)));
  *base = uop_simplify(s);
  return *base != NULL;
}

static bool vector_dtype(tg_dtype dt) { return dt != TG_BOOL && !dtype_is_half(dt); }

/* Stores a kernel makes per step (one per combination of its upcast output axes). */
static int64_t store_copies(lower_ctx *c) {
  int dup[KS_MAX_AXES], n = dup_axes(c, AX_UPCAST, dup);
  int64_t copies = 1;
  for (int j = 0; j < n; j++) copies *= c->ks->ax[dup[j]].size;
  return copies;
}

/* LOAD/STORE(g, base + lane, …) → LOAD/STORE(g, base, …) with arg [lanes, aligned, checked],
 * and for an aligned, unmasked store to a buffer larger than the last-level cache a fourth,
 * streaming: written past the caches (no read of each line before its write: softmax and
 * elementwise kernels over 64 MB moved a third more bytes than a copy). Only in kernels that
 * store one or two vectors a step, or whose vector is a whole 64-byte line: a register tile
 * writing many rows of half lines at once fills the write-combining buffers with partial
 * lines (AVX2: MobileNetV2's 1x1 convs, 12 stores a step, ran 3-4% slower streamed); with
 * AVX-512's whole lines its 16->96 @112 at batch 32 went 26 -> 11 ms streamed.
 * A checked load (its mask differs per lane, or its lanes run through a padded dim's clamp)
 * reads the whole vector only when it lies inside the buffer (DEFINE_GLOBAL arg[1] elements),
 * keeping the valid lanes, and otherwise reads lane k at base + k clamped into the buffer.
 * That is exact for every lane that matters: a lane the clamp changes is a padded position,
 * whose value is never stored (UPCAST) or is left out of the final combine (UNROLL), so no
 * per-lane index vector is needed (64-bit index lanes cost two registers per 4 lanes).
 * A store gated per lane is one vector store when every lane is on, else lane by lane.
 * A load whose lanes lie 2 to ks->load_stride elements apart (a stride-2 conv's or pooling's
 * taps along a row, Winograd-like tiles) gets arg[4] = that stride: the LLVM renderer reads
 * the span with one wide load and keeps every stride-th element (load_lane_stride). */
static uop *vector_access(void *ctx, uop *u, uop **cap) {
  (void)cap;
  lower_ctx *c = ctx;
  bool store = u->op == OP_STORE;
  int mask_at = store ? 3 : 2;
  tg_dtype dt = store ? u->src[2]->dtype : u->dtype;
  if (u->narg || !vector_dtype(dt) || !uses_lane(c, u->src[1])) return NULL;
  bool lane_mask = u->nsrc > mask_at && uses_lane(c, u->src[mask_at]);
  uop *base;
  bool aligned, clamped;
  int stride;
  int max_stride = !store && c->ks->load_stride > 1 ? c->ks->load_stride : 1;
  if (!lane_strided(c, u->src[1], max_stride, &base, &stride, &aligned, &clamped)) return NULL;
  if (clamped && store) return NULL;
  bool checked = lane_mask || clamped;
  uop *src[4];
  memcpy(src, u->src, sizeof(uop *) * (size_t)u->nsrc);
  src[1] = base;
  int64_t arg[5] = {c->lanes, aligned, checked, 0, stride};
  uop *g = u->src[0];
  if (store && aligned && !checked && u->nsrc == 3 && c->ks->stream_bytes > 0 && g->op == OP_DEFINE_GLOBAL && (store_copies(c) <= 2 || c->lanes * tg_dtype_size(dt) >= 64))
    arg[3] = (double)g->arg[1] * (double)tg_dtype_size(dt) > (double)c->ks->stream_bytes;
  return uop_new(u->op, u->dtype, src, u->nsrc, arg, stride > 1 ? 5 : arg[3] ? 4 : 3);
}

static const rule vector_rule_list[] = {
    {"(LOAD g i)", vector_access},
    {"(LOAD g i m)", vector_access},
    {"(STORE g i v)", vector_access},
    {"(STORE g i v m)", vector_access},
    {NULL, NULL},
};

/* ---------------------------------------------------------------- the kernel */

/* Name (r_ for reductions, E_ for elementwise, then the output shape) and buffer traffic. */
static void kernel_facts(uop *ast, kernel_info *info) {
  uop **order;
  int n = uop_toposort(ast, &order);
  bool reduce = false;
  info->bytes = (uint64_t)shape_numel(ast->arg, ast->narg) * tg_dtype_size(ast->dtype);
  info->nbufs = 1;
  for (int i = 0; i < n; i++) {
    reduce |= order[i]->op == OP_REDUCE_AXIS;
    if (order[i]->op != OP_PARAM) continue;
    bool seen = false; /* a buffer read under two shapes is one PARAM per shape */
    for (int j = 0; j < i && !seen; j++) seen = order[j]->op == OP_PARAM && order[j]->arg[0] == order[i]->arg[0];
    if (!seen) info->bytes += (uint64_t)shape_numel(order[i]->arg + 1, order[i]->narg - 1) * tg_dtype_size(order[i]->dtype);
    if (order[i]->arg[0] + 1 > info->nbufs) info->nbufs = (int)order[i]->arg[0] + 1;
  }
  free(order);
  int len = snprintf(info->name, sizeof info->name, "%s", reduce ? "r" : "E");
  for (int i = 0; i < ast->narg && len < (int)sizeof info->name - 24; i++) /* size-1 dims say nothing */
    if (ast->arg[i] != 1) len += snprintf(info->name + len, sizeof info->name - (size_t)len, "_%lld", (long long)ast->arg[i]);
  snprintf(info->name + len, sizeof info->name - (size_t)len, "_%04llx", (unsigned long long)(ast->hash & 0xffff));
}

static uop *first_reduce(uop *ast) {
  uop **order, *r = NULL;
  int n = uop_toposort(ast, &order);
  for (int i = 0; i < n && !r; i++)
    if (order[i]->op == OP_REDUCE_AXIS) r = order[i];
  free(order);
  return r;
}

static void setup_axes(lower_ctx *c, int stage) {
  const kshape *ks = c->ks;
  c->lane = kshape_lane_axis(ks);
  c->lane2 = kshape_row_lane_axis(ks);
  c->next_range = ks->nax;
  for (int i = 0; i < ks->nax; i++) {
    const kaxis *x = &ks->ax[i];
    c->var[i] = NULL;
    if (i == c->lane) {
      c->var[i] = c->lane_range = new_range(i, x->size, RANGE_LANE);
      c->lanes = x->size;
    } else if (i == c->lane2) {
      continue; /* after the loop: the lane's range */
    } else if (x->kind == AX_GLOBAL || x->kind == AX_REDUCE) {
      uop *end = sym_range_end(c, i); /* a variable dim's loop: to its size */
      int kind = x->kind == AX_GLOBAL ? RANGE_GLOBAL : RANGE_REDUCE;
      c->var[i] = end ? new_range_to(i, end, kind) : new_range(i, x->size, kind);
    }
    else if (x->kind == AX_THREAD || (x->kind == AX_GROUP && stage == STAGE_PARTIAL))
      c->var[i] = new_range(i, x->size, RANGE_PARALLEL);
    else if (x->kind == AX_LOCAL || (x->kind == AX_GROUP && ks->local_max > 1))
      c->var[i] = new_range(i, x->size, RANGE_LOCAL);
    if (x->kind == AX_GROUP) c->groups = x->size;
    if (x->kind == AX_GROUP && ks->local_max > 1) c->group_local = c->var[i];
  }
  if (c->lane2 >= 0) c->var[c->lane2] = c->lane_range;
}

/* The value stored for one output element: the kernel's expression, or in stage 1 the
 * partial of its reduction (the reduce reached through ALU ops and reshapes only). */
static uop *output_value(lower_ctx *c, uop *ast, uop **idx, uop *valid) {
  if (c->stage != STAGE_PARTIAL) return make_index(ast->src[0], idx, ast->narg, valid);
  uop *r = first_reduce(ast);
  uop *view = uop_new(OP_RESHAPE, r->dtype, &r, 1, ast->arg, ast->narg);
  return make_index(view, idx, ast->narg, valid);
}

static const rule_table *tables(int which);

/* Lower a copy's value at once (a tensor-core kernel: reduce_tc reads the copy's UPCAST values
 * from the context, which the next copy changes). */
static uop *lower_now(lower_ctx *c, uop *value) { return graph_rewrite(value, tables(0), c); }

static uop *lower_stores(lower_ctx *c, uop *ast, kernel_info *info) {
  const kshape *ks = c->ks;
  int nd = ast->narg, dup[KS_MAX_AXES], ndup = dup_axes(c, AX_UPCAST, dup);
  uop *out = uop_new(OP_DEFINE_GLOBAL, ast->dtype, NULL, 0, (int64_t[]){0, c->out_numel}, 2);
  uop *stores[KS_MAX_UPCAST];
  int ns = 0;
  if (c->stage != STAGE_ONLY) {
    uop *r = first_reduce(ast);
    c->scratch = uop_new(OP_DEFINE_GLOBAL, r->dtype, NULL, 0, (int64_t[]){info->nbufs, c->groups * c->out_numel}, 2);
  }
  for (int j = 0; j < ndup; j++) c->val[dup[j]] = 0;
  do { /* one store per combination of the unrolled output axes */
    uop *idx[TG_MAX_DIMS], *math[TG_MAX_DIMS], *valid = uop_const_bool(true);
    for (int d = 0; d < nd; d++) {
      idx[d] = dim_index(c, d);
      math[d] = dim_clamp(c, d, idx[d]);
      valid = land(valid, dim_valid(c, d, idx[d]));
    }
    if (c->group_local) /* every work-item of the group has the combined value: the first stores */
      valid = land(valid, uop_alu(OP_CMPEQ, c->group_local, uop_idx(0)));
    uop *value = output_value(c, ast, math, uop_const_bool(true)), *at = flat_index(idx, ast->arg, nd), *buf = out;
    if (ks->tc) value = lower_now(c, value); /* the copy's D element: its UPCAST values are read */
    if (c->stage == STAGE_PARTIAL) {
      int g = kshape_parallel_axis(ks);
      at = uop_add(uop_mul(c->var[g], uop_idx(c->out_numel)), at);
      buf = c->scratch;
    }
    uop *src[4] = {buf, at, value, valid};
    stores[ns++] = uop_new(OP_STORE, value->dtype, src, 4, NULL, 0);
  } while (next_copy(c, dup, ndup));
  return uop_new(OP_SINK, TG_BOOL, stores, ns, NULL, 0);
}

/* ---------------------------------------------------------------- factors out of inner loops
 * sum over (b, i) of f_b * g_bi = sum over b of f_b * (sum over i of g_bi): a factor of every
 * body that depends on none of a REDUCE(ADD)'s inner loops (nor its lane range) multiplies a
 * partial sum once per outer iteration instead of every term. A GGUF Q8_0 block's scale times
 * (its 32 int8 values times x): one multiply per block and row instead of one per vector of
 * values (the vmulps of every 8 values). The partial sums change the order of the float
 * additions: a sum rounds as any other order would. NEST=0 leaves the REDUCEs alone (debug.md). */
enum { NEST_MAX_FACTORS = 16, NEST_MAX_RANGES = 8 };

typedef struct nest_ctx {
  uop *ranges[NEST_MAX_RANGES]; /* the REDUCE's loops in order, then its lane range (if any) */
  int nranges;
  ptrmap mask; /* node → bitmask of ranges[] it uses, + 1; NEST_OPAQUE for a nested REDUCE */
} nest_ctx;

#define NEST_OPAQUE ((uint64_t)1 << 40)

static uint64_t nest_uses(nest_ctx *n, uop *u) {
  uintptr_t m = (uintptr_t)ptrmap_get(&n->mask, u);
  if (m) return (uint64_t)m - 1;
  uint64_t r = u->op == OP_REDUCE ? NEST_OPAQUE : 0;
  for (int i = 0; i < n->nranges; i++)
    if (u == n->ranges[i]) r |= (uint64_t)1 << i;
  for (int i = 0; i < u->nsrc && !(r & NEST_OPAQUE); i++) r |= nest_uses(n, u->src[i]);
  ptrmap_put(&n->mask, u, (void *)(uintptr_t)(r + 1));
  return r;
}

/* The factors of body's MUL tree (same dtype), in order; 0 when there are too many. */
static int nest_factors(uop *u, tg_dtype dt, uop **f, int n) {
  if (u->op != OP_MUL || u->dtype != dt) return n < NEST_MAX_FACTORS ? (f[n] = u, n + 1) : 0;
  n = nest_factors(u->src[0], dt, f, n);
  return n ? nest_factors(u->src[1], dt, f, n) : 0;
}

/* The product of the factors of f[0..n) whose mask is (or is not, keep false) free of
 * `inner`; NULL when there is none. */
static uop *nest_product(nest_ctx *c, uop **f, int n, uint64_t inner, bool keep) {
  uop *p = NULL;
  for (int i = 0; i < n; i++)
    if (!(nest_uses(c, f[i]) & inner) == keep) p = p ? uop_alu(OP_MUL, p, f[i]) : f[i];
  return p;
}

/* r with its loops [k, nloops) (and the lane) taken inside: the common factor f of its bodies
 * that needs none of them times a REDUCE of the rest over them; NULL when a body has no such
 * factor or they differ. */
static uop *nest_at(nest_ctx *c, uop *r, int nb, int k, int nloops) {
  uint64_t inner = ((((uint64_t)1 << c->nranges) - 1) & ~(((uint64_t)1 << k) - 1)) | NEST_OPAQUE;
  uop *f = NULL, *src[NEST_MAX_FACTORS + NEST_MAX_RANGES];
  for (int j = 0; j < nb; j++) {
    uop *fs[NEST_MAX_FACTORS];
    int nf = nest_uses(c, r->src[j]) & NEST_OPAQUE ? 0 : nest_factors(r->src[j], r->dtype, fs, 0); /* no REDUCE inside */
    uop *fj = nf ? nest_product(c, fs, nf, inner, true) : NULL;
    if (!fj || (f && f != fj)) return NULL;
    f = fj;
    if (!(src[j] = nest_product(c, fs, nf, inner, false))) return NULL;
  }
  int n = nb, no = 1;
  for (int i = k; i < nloops; i++) src[n++] = c->ranges[i];
  uop *osrc[1 + NEST_MAX_RANGES];
  osrc[0] = uop_alu(OP_MUL, f, uop_new(OP_REDUCE, r->dtype, src, n, (int64_t[]){OP_ADD, nb}, 2));
  for (int i = 0; i < c->nranges; i++)
    if (i < k || c->ranges[i]->arg[1] == RANGE_LANE) osrc[no++] = c->ranges[i];
  int64_t arg[3] = {OP_ADD, 1, r->narg > 2 ? r->arg[2] : 0};
  return uop_new(OP_REDUCE, r->dtype, osrc, no, arg, r->narg > 2 ? 3 : 2);
}

/* A REDUCE(ADD) of floats over two or more loops (then possibly its lane range): nested at
 * the innermost split its bodies allow (nest_at), or NULL. */
static uop *nest_reduce(void *ctx, uop *r, uop **cap) {
  (void)ctx, (void)cap;
  int nb = reduce_nbody(r), nloops = 0;
  if (r->arg[0] != OP_ADD || !dtype_is_float(r->dtype) || nb > NEST_MAX_FACTORS || r->nsrc - nb > NEST_MAX_RANGES) return NULL;
  nest_ctx c = {.nranges = 0};
  for (int i = nb; i < r->nsrc; i++) {
    uop *g = r->src[i];
    if (g->op != OP_RANGE || (g->arg[1] != RANGE_REDUCE && g->arg[1] != RANGE_LANE)) return NULL;
    if (g->arg[1] == RANGE_REDUCE && i > nb && r->src[i - 1]->arg[1] == RANGE_LANE) return NULL; /* the lane last */
    nloops += g->arg[1] == RANGE_REDUCE;
    c.ranges[c.nranges++] = g;
  }
  uop *out = NULL;
  for (int k = 1; k < nloops && !out; k++) out = nest_at(&c, r, nb, k, nloops);
  ptrmap_free(&c.mask);
  return out;
}

static const rule nest_rule_list[] = {{"(REDUCE ...)", nest_reduce}, {NULL, NULL}};

static rule_table *lower_tables[4];

static void compile_tables(void) {
  static rule_table *parts[2]; /* kept: the merged table refers to them */
  lower_tables[0] = rule_table_compile("lower", lower_rule_list);
  parts[0] = rule_table_compile("lower_cleanup", cleanup_rule_list), parts[1] = (rule_table *)symbolic_rules();
  lower_tables[1] = rule_table_merge("lower_cleanup+symbolic", parts, 2);
  lower_tables[2] = rule_table_compile("vector_access", vector_rule_list);
  lower_tables[3] = rule_table_compile("nest_factors", nest_rule_list);
}

static const rule_table *tables(int which) {
  static pthread_once_t once = PTHREAD_ONCE_INIT;
  pthread_once(&once, compile_tables);
  return lower_tables[which];
}

uop *lower_kernel(uop *ast, const kshape *ks_in, int stage, kernel_info *info) {
  kshape plain;
  if (!ks_in) {
    if (kshape_init(&plain, ast) < 0) return NULL;
    ks_in = &plain;
  }
  lower_ctx c = {.ks = ks_in, .stage = stage, .lane = -1, .lane2 = -1, .out_numel = shape_numel(ast->arg, ast->narg)};
  kernel_facts(ast, info);
  /* host devices (codegen.h): a work-item device's state is scalar (kshape_use_workgroups) */
  info->row_scratch = ks_in != &plain && !ks_in->scalar && ks_in->local_max <= 1;
  info->prefetch_bytes = info->row_scratch ? ks_in->prefetch_bytes : 0;
  setup_vars(&c, ast);
  setup_dsym(&c, ast, first_reduce(ast));
  setup_axes(&c, stage);
  uop *sink = lower_stores(&c, ast, info);
  sink = graph_rewrite(sink, tables(0), &c);
  sink = graph_rewrite(sink, tables(1), NULL);
  if (sink && tg_getenv_int("NEST", 1)) sink = graph_rewrite(sink, tables(3), NULL); /* nest_reduce */
  sink = transcendental_rewrite(sink, c.ks); /* exp2/log2/sin as polynomials (transcendental.c) */
  if (sink && c.lane_range) sink = vectorize(graph_rewrite(sink, tables(2), &c));
  ptrmap_free(&c.uses_lane);
  ptrmap_free(&c.plain_ranges);
  return sink;
}

/* ---------------------------------------------------------------- access analysis */

/* How each buffer access of the unoptimized kernel moves with each dim: the coefficient of
 * the dim's index in the element index (0: independent of it, -1: not linear in it). */
int kernel_accesses(uop *ast, kaccess *out, int cap) {
  kshape ks;
  kernel_info info;
  if (kshape_init(&ks, ast) < 0) return -1;
  size_t mark = uop_pool_mark();
  uop *sink = lower_kernel(ast, &ks, STAGE_ONLY, &info);
  uop **order;
  int n = sink ? uop_toposort(sink, &order) : -1, na = 0;
  if (n < 0) { uop_pool_release(mark); return -1; }
  uop *range_of[KS_MAX_DIMS] = {0};
  for (int i = 0; i < n; i++) /* range ids are axis indices */
    if (order[i]->op == OP_RANGE && order[i]->arg[0] < ks.nax) range_of[ks.ax[order[i]->arg[0]].dim] = order[i];
  for (int i = 0; i < n && na < cap; i++) {
    uop *u = order[i];
    if (u->op != OP_LOAD && u->op != OP_STORE) continue;
    kaccess *a = &out[na++];
    memset(a, 0, sizeof *a);
    a->slot = (int)u->src[0]->arg[0], a->store = u->op == OP_STORE;
    a->dtype = u->op == OP_STORE ? u->src[2]->dtype : u->dtype;
    term t[64];
    int64_t k = 0;
    int nt = index_terms(u->src[1], 1, t, 0, 64, &k);
    for (int d = 0; d < ks.nout + ks.nred; d++) {
      if (!range_of[d]) continue;
      lower_ctx probe = {.lane_range = range_of[d]};
      for (int j = 0; j < nt && a->coef[d] >= 0; j++) {
        if (t[j].base == range_of[d]) a->coef[d] += t[j].coef;
        else if (uses_lane(&probe, t[j].base)) a->coef[d] = -1;
      }
      if (nt < 0) a->coef[d] = -1;
      ptrmap_free(&probe.uses_lane);
    }
  }
  free(order);
  uop_pool_release(mark);
  return na;
}
