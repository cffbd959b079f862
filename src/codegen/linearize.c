/* linearize.c — order a lowered kernel into a program with explicit loops.
 *
 * Every node depends on a set of ranges (bitmask; a REDUCE closes its own). A node is emitted
 * as soon as all its ranges are open: output loops are opened first (the parallel one
 * outermost); a REDUCE first emits the parts of its bodies that do not depend on its ranges
 * (hoisting invariants), then opens its loops one by one, emitting after each what needs only
 * the loops open so far (per-block work of a blocked reduction), and closes them. REDUCEs over
 * the same loops whose inputs are ready share one loop nest (the accumulators of a register
 * tile). Vector lanes are types (vcount), not loops. Local ranges (work-group devices) are
 * outer loops too, the innermost ones; a REDUCE over local ranges (a work-group combine) is
 * no loop but one value (L_VALUE) after its source. Output loops are opened one by one, and a
 * REDUCE that needs only the open ones (a row reduction fused into the kernel that consumes
 * it) is emitted before the next: once per row. Deterministic: sources in order. */
#include <stdlib.h>
#include <string.h>

#include "codegen/codegen.h"
#include "runtime/helpers.h"
#include "uop/symbolic.h"

typedef struct lin_ctx {
  ptrmap range_bit; /* RANGE → bit index + 1 */
  ptrmap deps;      /* node → mask (stored +1 so 0 means absent) */
  ptrmap emitted;   /* node → scope it was emitted in + 1 */
  VEC(bool) alive;  /* scope → still open (a node from a closed loop nest is emitted again) */
  int scope;
  ptrmap hoisted;   /* node → open mask + 1 of its last hoist visit (shared DAGs stay linear) */
  ptrmap has_reduce; /* node → 1 a REDUCE is under it, 2 none */
  ptrmap row_hoisted; /* as hoisted, for hoist_row_values */
  VEC(lin_op) ops;
  VEC(uop *) reduces; /* every REDUCE, sources first */
  uint64_t open;
  int64_t trips;    /* iterations of the currently open loops */
  kernel_info *info;
  int err;
  /* row scratch (below): the program's SINK (its output loops' values read the scratch), the
   * output loops, and each kept value → its STORE into a scratch array */
  uop **sink;
  uop *const *outer;
  size_t nouter;
  ptrmap scratch_store;
  int nscratch;
  int64_t scratch_bytes;
  /* next-row prefetch (below): the row loop, the buffers a row reduction of the row has read
   * (→ 1, or 2 once prefetched), and each LOAD → the PREFETCH emitted after it */
  uop *row;
  ptrmap row_read;
  ptrmap prefetch_after;
} lin_ctx;

static bool emitted(lin_ctx *c, uop *u) {
  uintptr_t v = (uintptr_t)ptrmap_get(&c->emitted, u);
  return v && c->alive.v[v - 1];
}

static void mark_emitted(lin_ctx *c, uop *u) { ptrmap_put(&c->emitted, u, (void *)(uintptr_t)(c->scope + 1)); }

static uint64_t deps_of(lin_ctx *c, uop *u) {
  void *v = ptrmap_get(&c->deps, u);
  if (v) return (uint64_t)(uintptr_t)v - 1;
  uint64_t m = 0;
  if (u->op == OP_RANGE) {
    uintptr_t bit = (uintptr_t)ptrmap_get(&c->range_bit, u);
    if (!bit) {
      bit = c->range_bit.count + 1;
      if (bit > 63) c->err = tg_set_error(TG_ERR_DEVICE, "kernel has more than 63 loops");
      ptrmap_put(&c->range_bit, u, (void *)bit);
    }
    m = 1ull << ((bit - 1) & 63);
  }
  for (int i = 0; i < u->nsrc; i++) m |= deps_of(c, u->src[i]);
  if (u->op == OP_REDUCE)
    for (int i = reduce_nbody(u); i < u->nsrc; i++) m &= ~deps_of(c, u->src[i]);
  ptrmap_put(&c->deps, u, (void *)(uintptr_t)(m + 1));
  return m;
}

static void push(lin_ctx *c, lin_kind k, uop *u) {
  if (VEC_PUSH(c->ops, ((lin_op){k, u})) < 0) c->err = TG_ERR_NOMEM;
}

static bool inline_node(const uop *u) {
  return u->op == OP_CONST || u->op == OP_RANGE || u->op == OP_DEFINE_GLOBAL;
}

static uint64_t lane_factor(const uop *u) { return u->vcount ? u->vcount : 1; }

static void emit(lin_ctx *c, uop *u);

static bool has_reduce(lin_ctx *c, uop *u);

/* Emit the nodes under u that need no range beyond the open ones (stops at emitted nodes);
 * with row_values only those computed from reductions (hoist_row_values). */
static void hoist_where(lin_ctx *c, uop *u, bool row_values) {
  if (emitted(c, u) || inline_node(u) || (row_values && (c->err || !has_reduce(c, u)))) return;
  if ((deps_of(c, u) & ~c->open) == 0) { emit(c, u); return; }
  ptrmap *seen = row_values ? &c->row_hoisted : &c->hoisted;
  void *visit = (void *)(uintptr_t)(c->open + 1);
  if (ptrmap_get(seen, u) == visit) return;
  ptrmap_put(seen, u, visit);
  int n = u->op == OP_REDUCE ? reduce_nbody(u) : u->nsrc;
  for (int i = 0; i < n; i++) hoist_where(c, u->src[i], row_values);
}

static void hoist(lin_ctx *c, uop *u) { hoist_where(c, u, false); }

static bool same_loops(const uop *a, const uop *b) {
  int na = reduce_nbody(a), nb = reduce_nbody(b);
  if (a->nsrc - na != b->nsrc - nb) return false;
  for (int i = 0; i < a->nsrc - na; i++)
    if (a->src[na + i] != b->src[nb + i]) return false;
  return true;
}

/* Does u depend on x? */
static bool reaches(uop *u, uop *x, ptrmap *seen) {
  if (u == x) return true;
  if (ptrmap_has(seen, u)) return false;
  ptrmap_put(seen, u, u);
  for (int i = 0; i < u->nsrc; i++)
    if (reaches(u->src[i], x, seen)) return true;
  return false;
}

static bool independent(uop *a, uop *b) {
  ptrmap seen = {0};
  bool dep = reaches(a, b, &seen);
  ptrmap_free(&seen);
  if (dep) return false;
  dep = reaches(b, a, &seen);
  ptrmap_free(&seen);
  return !dep;
}

/* u and the other REDUCEs over the same loops that can be computed here. */
static int reduce_group(lin_ctx *c, uop *u, uop **group, int cap) {
  int n = 0;
  group[n++] = u;
  for (size_t i = 0; i < c->reduces.n && n < cap; i++) {
    uop *r = c->reduces.v[i];
    if (r == u || emitted(c, r) || !same_loops(u, r)) continue;
    if (deps_of(c, r) & ~c->open) continue;
    bool free = true; /* of every member: a row's sum of exp needs the row's max first */
    for (int g = 0; g < n && free; g++) free = independent(group[g], r);
    if (!free) continue;
    mark_emitted(c, r);
    group[n++] = r;
  }
  return n;
}

/* Iterations of a loop: its end, or for a variable end its largest value (flop counts). */
static int64_t trip_count(uop *r) { return r->src[0]->op == OP_CONST ? uop_const_ivalue(r->src[0]) : uop_vmax(r->src[0]); }

/* After a REDUCE's loop opens and before its next one does: what the group's bodies need from
 * the loops open so far (a quantized block's scale, loaded and decoded per block, not per
 * value of the block's inner loop). */
static void hoist_between_loops(lin_ctx *c, uop **group, int ng, int next) {
  uop *u = group[0];
  bool inner = false;
  for (int i = next; i < u->nsrc && !inner; i++) inner = u->src[i]->op == OP_RANGE;
  if (!inner) return;
  for (int g = 0; g < ng; g++)
    for (int i = 0; i < reduce_nbody(group[g]); i++) hoist(c, group[g]->src[i]);
}

static void stream_prefetch(lin_ctx *c, uop *u);

static void emit_reduce(lin_ctx *c, uop *u) {
  uop *group[64];
  int nb = reduce_nbody(u);
  for (int i = 0; i < nb; i++) hoist(c, u->src[i]);
  int ng = reduce_group(c, u, group, 64);
  for (int g = 0; g < ng; g++) stream_prefetch(c, group[g]);
  for (int g = 1; g < ng; g++)
    for (int i = 0; i < reduce_nbody(group[g]); i++) hoist(c, group[g]->src[i]);
  for (int g = 0; g < ng; g++) push(c, L_ACC_INIT, group[g]);
  uint64_t saved = c->open;
  int64_t saved_trips = c->trips;
  int saved_scope = c->scope;
  bool loops = false;
  for (int i = nb; i < u->nsrc; i++) {
    uop *r = u->src[i];
    loops |= r->op == OP_RANGE;
    /* a variable end (docs/symbolic.md): computed before its loop, in the enclosing scope (a
     * second loop over the same range, a row's sum after its max, reuses it) */
    if (r->op == OP_RANGE && r->src[0]->op != OP_CONST) hoist(c, r->src[0]);
  }
  if (loops) { /* a new scope for what the loops compute */
    c->scope = (int)c->alive.n;
    if (VEC_PUSH(c->alive, true) < 0) c->err = TG_ERR_NOMEM;
  }
  for (int i = nb; i < u->nsrc; i++) {
    uop *r = u->src[i];
    if (r->op != OP_RANGE) continue; /* a size-1 range folded to 0 */
    if (r->src[0]->op != OP_CONST) hoist(c, r->src[0]); /* an end that needs an outer loop of u's */
    push(c, L_LOOP, r);
    c->open |= deps_of(c, r);
    c->trips *= trip_count(r);
    hoist_between_loops(c, group, ng, i + 1);
  }
  for (int g = 0; g < ng; g++)
    for (int i = 0; i < reduce_nbody(group[g]); i++) emit(c, group[g]->src[i]);
  for (int g = 0; g < ng; g++) {
    push(c, L_ACC_UPDATE, group[g]);
    for (int i = 0; i < reduce_nbody(group[g]); i++) c->info->flops += (uint64_t)c->trips * lane_factor(group[g]->src[i]);
  }
  for (int i = u->nsrc - 1; i >= nb; i--)
    if (u->src[i]->op == OP_RANGE) push(c, L_END, u->src[i]);
  if (loops) c->alive.v[c->scope] = false;
  c->open = saved, c->trips = saved_trips, c->scope = saved_scope;
  for (int g = 0; g < ng; g++) push(c, L_ACC_FINAL, group[g]);
}

/* A REDUCE across the work-items of a work-group: its ranges are local ranges. */
static bool group_combine(const uop *u) {
  for (int i = reduce_nbody(u); i < u->nsrc; i++)
    if (u->src[i]->op != OP_RANGE || u->src[i]->arg[1] != RANGE_LOCAL) return false;
  return u->nsrc > reduce_nbody(u);
}

static void emit(lin_ctx *c, uop *u) {
  if (c->err || emitted(c, u)) return;
  mark_emitted(c, u);
  if (inline_node(u)) return;
  if (u->op == OP_REDUCE && !group_combine(u)) { emit_reduce(c, u); return; }
  for (int i = 0; i < u->nsrc; i++) emit(c, u->src[i]);
  if (u->op == OP_SINK) return;
  if (uop_is_alu(u) && u->dtype != TG_INT64) c->info->flops += (uint64_t)c->trips * lane_factor(u);
  if (u->op == OP_WMMA) c->info->flops += (uint64_t)c->trips * 2 * 16 * 8 * 16 / 32; /* a lane's share of the tile */
  push(c, u->op == OP_STORE || u->op == OP_PREFETCH ? L_STORE : L_VALUE, u); /* L_STORE: no value */
  uop *keep = ptrmap_get(&c->scratch_store, u); /* a row reduction's operand the output reads again */
  if (keep) emit(c, keep);
  uop *next_row = ptrmap_get(&c->prefetch_after, u);
  if (next_row) emit(c, next_row);
}

static bool has_reduce(lin_ctx *c, uop *u) {
  uintptr_t v = (uintptr_t)ptrmap_get(&c->has_reduce, u);
  if (v) return v == 1;
  bool r = u->op == OP_REDUCE;
  for (int i = 0; i < u->nsrc && !r; i++) r = has_reduce(c, u->src[i]);
  ptrmap_put(&c->has_reduce, u, (void *)(uintptr_t)(r ? 1 : 2));
  return r;
}

/* Emit what under u computes from reductions and needs only the open loops (the final
 * combine of a sum's lanes, 1 / sum): once per row too. */
static void hoist_row_values(lin_ctx *c, uop *u) { hoist_where(c, u, true); }

/* ---------------------------------------------------------------- row scratch */

/* A row reduction's operand E that the row's output loop computes again (softmax's
 * exp2(c·(x − max)): the sum's body and every output's numerator) is stored into a per-row
 * local array in the reduction's loop and loaded back in the output loop instead of being
 * recomputed (docs/optimizer.md, "Row scratch"); a later row reduction that computes E again
 * reads it too (later_reduce_reads). The output's E is the reduction's with the
 * reduce range replaced by the output loop's (equal nodes: interned), over the same end, so
 * element i of the array holds exactly the value the output needs at i. Only where E costs at
 * least ROW_SCRATCH_MIN_OPS ALU ops per element (else the store and load cost as much), for
 * float values, while the arrays fit ROW_SCRATCH_BYTES; on host devices only
 * (kernel_info.row_scratch: a work-item's output loops are no loops). */
typedef struct scratch_ctx {
  lin_ctx *c;
  uop *r, *o;     /* the reduction's range, the output loop's */
  uint64_t rbit;
  ptrmap subst;   /* node → the node with r replaced by o */
  ptrmap outputs; /* nodes the output loops compute */
  ptrmap seen;
  ptrmap loads;   /* the output's E → its scratch LOAD; a later reduction → itself reading them */
  uop *kept[ROW_SCRATCH_MAX], *array[ROW_SCRATCH_MAX]; /* each kept E with r, and its array */
  int nkept;
} scratch_ctx;

static uop *subst_range(scratch_ctx *s, uop *u) {
  if (u == s->r) return s->o;
  if (!(deps_of(s->c, u) & s->rbit)) return u;
  uop *v = ptrmap_get(&s->subst, u), *src[64];
  if (v || u->nsrc > 64) return v;
  for (int i = 0; i < u->nsrc; i++)
    if (!(src[i] = subst_range(s, u->src[i]))) return NULL;
  v = uop_replace_src(u, src, u->nsrc);
  ptrmap_put(&s->subst, u, v);
  return v;
}

/* ALU ops of u's subtree that run per element of the row (depend on r), each counted once;
 * index math (int64, and comparisons of it) is not the value's cost. */
static int row_ops(scratch_ctx *s, uop *u, ptrmap *seen) {
  if (!(deps_of(s->c, u) & s->rbit) || ptrmap_has(seen, u) || u->op == OP_REDUCE) return 0;
  ptrmap_put(seen, u, u);
  int n = uop_is_alu(u) && u->dtype != TG_INT64 && !(u->nsrc && u->src[0]->dtype == TG_INT64);
  for (int i = 0; i < u->nsrc; i++) n += row_ops(s, u->src[i], seen);
  return n;
}

static void collect_outputs(scratch_ctx *s, uop *u) {
  if (ptrmap_has(&s->outputs, u) || !(deps_of(s->c, u) & deps_of(s->c, s->o))) return;
  ptrmap_put(&s->outputs, u, u);
  for (int i = 0; i < u->nsrc; i++) collect_outputs(s, u->src[i]);
}

/* Keep u (E with r) for v (E with o): its array, the STORE after u, the LOAD for v. */
static void keep_in_scratch(scratch_ctx *s, uop *u, uop *v) {
  lin_ctx *c = s->c;
  int w = u->vcount;
  int64_t n = trip_count(s->r) * (w ? w : 1), bytes = n * (int64_t)tg_dtype_size(u->dtype);
  ptrmap seen = {0};
  int ops = row_ops(s, u, &seen);
  ptrmap_free(&seen);
  bool fl = u->dtype == TG_FLOAT32 || u->dtype == TG_FLOAT64;
  if (!fl || ops < ROW_SCRATCH_MIN_OPS || c->nscratch >= ROW_SCRATCH_MAX || c->scratch_bytes + bytes > ROW_SCRATCH_BYTES) return;
  int64_t garg[3] = {ROW_SCRATCH_SLOT + c->nscratch++, n, 1}, arg[3] = {w, 1, 0};
  c->scratch_bytes += bytes;
  uop *g = uop_new(OP_DEFINE_GLOBAL, u->dtype, NULL, 0, garg, 3);
  uop *at = w ? uop_mul(s->r, uop_idx(w)) : s->r, *st[3] = {g, at, u};
  uop *ld[2] = {g, w ? uop_mul(s->o, uop_idx(w)) : s->o};
  ptrmap_put(&c->scratch_store, u, uop_new_vec(OP_STORE, u->dtype, w, st, 3, arg, w ? 3 : 0));
  ptrmap_put(&s->loads, v, uop_new_vec(OP_LOAD, u->dtype, w, ld, 2, arg, w ? 3 : 0));
  s->kept[s->nkept] = u, s->array[s->nkept++] = g;
}

/* The largest subexpressions of the reduction's body that the output computes too. */
static void find_shared(scratch_ctx *s, uop *u) {
  if (!(deps_of(s->c, u) & s->rbit) || ptrmap_has(&s->seen, u) || u->op == OP_REDUCE) return;
  ptrmap_put(&s->seen, u, u);
  uop *v = subst_range(s, u);
  if (v && ptrmap_has(&s->outputs, v)) { keep_in_scratch(s, u, v); return; }
  for (int i = 0; i < u->nsrc; i++) find_shared(s, u->src[i]);
}

/* u with the nodes of s->loads replaced (the output's E by its LOAD, a later reduction by
 * its copy reading the arrays). */
static uop *use_loads(scratch_ctx *s, uop *u, ptrmap *memo) {
  uop *l = ptrmap_get(&s->loads, u), *v, *src[256];
  if (l && l->op != OP_REDUCE) return l;
  if (l) u = l; /* a later reduction's copy: what it reads of other such reductions too */
  if (u->nsrc == 0 || u->nsrc > 256) return u;
  if ((v = ptrmap_get(memo, u))) return v;
  for (int i = 0; i < u->nsrc; i++) src[i] = use_loads(s, u->src[i], memo);
  v = uop_replace_src(u, src, u->nsrc);
  ptrmap_put(memo, u, v);
  return v;
}

/* In x (a later reduction's body, over range r2): the kept values, with r2 for r, replaced by
 * their arrays' elements at r2 (kept: E with r2 → its LOAD). */
static uop *read_kept(scratch_ctx *s, uop *x, uop *r2, ptrmap *kept, ptrmap *memo) {
  uop *l = ptrmap_get(kept, x), *v, *src[256];
  if (l) return l;
  if (!(deps_of(s->c, x) & deps_of(s->c, r2)) || x->nsrc > 256) return x;
  if ((v = ptrmap_get(memo, x))) return v;
  for (int i = 0; i < x->nsrc; i++) src[i] = read_kept(s, x->src[i], r2, kept, memo);
  v = uop_replace_src(x, src, x->nsrc);
  ptrmap_put(memo, x, v);
  return v;
}

/* A later row reduction R2 (it needs u's value, so it runs after u's loop) over the row's
 * elements (a range with r's end) that computes a kept value again (softmax's backward: the
 * sum of g·y recomputes y's exp) reads it from the array instead: R2 → its copy, in s->loads. */
static void later_reduce_reads(scratch_ctx *s, uop *u, uop *r2red) {
  int nb = reduce_nbody(r2red);
  uop *r2 = r2red->src[nb];
  if (r2red->nsrc != nb + 1 || r2->op != OP_RANGE || r2->src[0] != s->r->src[0]) return;
  ptrmap seen = {0};
  bool after = reaches(r2red, u, &seen);
  ptrmap_free(&seen);
  if (!after) return;
  scratch_ctx t = {.c = s->c, .r = s->r, .o = r2, .rbit = s->rbit};
  ptrmap kept = {0}, memo = {0};
  for (int k = 0; k < s->nkept; k++) {
    uop *w = subst_range(&t, s->kept[k]), *g = s->array[k];
    int vc = s->kept[k]->vcount;
    int64_t arg[3] = {vc, 1, 0};
    uop *ld[2] = {g, vc ? uop_mul(r2, uop_idx(vc)) : r2};
    if (w) ptrmap_put(&kept, w, uop_new_vec(OP_LOAD, w->dtype, vc, ld, 2, arg, vc ? 3 : 0));
  }
  uop *src[64];
  bool changed = false;
  for (int i = 0; i < r2red->nsrc && i < 64; i++) {
    src[i] = i < nb ? read_kept(s, r2red->src[i], r2, &kept, &memo) : r2red->src[i];
    changed |= src[i] != r2red->src[i];
  }
  if (changed && r2red->nsrc <= 64) ptrmap_put(&s->loads, r2red, uop_replace_src(r2red, src, r2red->nsrc));
  ptrmap_free(&t.subst), ptrmap_free(&kept), ptrmap_free(&memo);
}

/* The not yet open output loop over r's end (the row's elements), or NULL. */
static uop *row_output_loop(lin_ctx *c, uop *r) {
  for (size_t i = 0; i < c->nouter; i++) {
    uop *o = c->outer[i];
    if (o->arg[1] == RANGE_GLOBAL && o->src[0] == r->src[0] && !(deps_of(c, o) & c->open)) return o;
  }
  return NULL;
}

/* Before row reduction u is emitted: keep what its output loop would recompute. */
static bool plan_scratch(lin_ctx *c, uop *u) {
  int nb = reduce_nbody(u);
  if (!c->info->row_scratch || u->nsrc != nb + 1 || u->src[nb]->op != OP_RANGE) return false;
  scratch_ctx s = {.c = c, .r = u->src[nb]};
  if (!(s.o = row_output_loop(c, s.r))) return false;
  s.rbit = deps_of(c, s.r);
  collect_outputs(&s, *c->sink);
  for (int i = 0; i < nb; i++) find_shared(&s, u->src[i]);
  for (size_t i = 0; i < c->reduces.n && s.nkept; i++)
    if (c->reduces.v[i] != u && !emitted(c, c->reduces.v[i])) later_reduce_reads(&s, u, c->reduces.v[i]);
  if (s.loads.count) {
    ptrmap memo = {0};
    *c->sink = use_loads(&s, *c->sink, &memo);
    ptrmap_free(&memo);
    c->reduces.n = 0; /* the output's REDUCEs are new nodes now */
    uop **order;
    int n = uop_toposort(*c->sink, &order);
    if (n < 0) c->err = TG_ERR_NOMEM;
    for (int i = 0; i < n; i++)
      if (order[i]->op == OP_REDUCE) VEC_PUSH(c->reduces, order[i]);
    if (n >= 0) free(order);
  }
  bool changed = s.loads.count > 0;
  ptrmap_free(&s.subst), ptrmap_free(&s.outputs), ptrmap_free(&s.seen), ptrmap_free(&s.loads);
  return changed;
}

/* ---------------------------------------------------------------- next-row prefetch */

/* A row kernel reads a row of a buffer in one loop (softmax's max: from memory, bandwidth-
 * bound) and again in a later one (the sum of exps: from the cache, compute-bound). In the
 * later loop each load is followed by a prefetch of the same element of the next row, so the
 * memory works while the ALUs do instead of between rows (docs/optimizer.md, "Next-row
 * prefetch"). Host devices, buffers larger than the L2 (kernel_info.prefetch_bytes: a smaller
 * one stays cached), unmasked loads, rows of at most ROW_SCRATCH_BYTES (a row must still be
 * cached when its own turn comes); the last row prefetches the first ((row + 1) mod rows), so
 * no address leaves the buffer. */
typedef struct prefetch_walk {
  lin_ctx *c;
  ptrmap seen;
  bool plan; /* plan prefetches (a later loop), else note what the row's loops read */
} prefetch_walk;

/* Elements of a row u's index walks (the product of its loops that are not open yet). */
static int64_t row_elements(lin_ctx *c, uop *u, ptrmap *seen) {
  if (ptrmap_has(seen, u) || !(deps_of(c, u) & ~c->open)) return 1;
  ptrmap_put(seen, u, u);
  int64_t n = u->op == OP_RANGE ? trip_count(u) : 1;
  for (int i = 0; i < u->nsrc; i++) n *= row_elements(c, u->src[i], seen);
  return n;
}

static void prefetch_next_row(lin_ctx *c, uop *ld) {
  uop *g = ld->src[0], *row = c->row;
  ptrmap seen = {0};
  int64_t bytes = row_elements(c, ld->src[1], &seen) * (ld->vcount ? ld->vcount : 1) * (int64_t)tg_dtype_size(ld->dtype);
  ptrmap_free(&seen);
  if (bytes > ROW_SCRATCH_BYTES) return;
  scratch_ctx s = {.c = c, .r = row, .o = uop_alu(OP_MOD, uop_add(row, uop_idx(1)), row->src[0]), .rbit = deps_of(c, row)};
  uop *src[2] = {g, subst_range(&s, ld->src[1])};
  ptrmap_free(&s.subst);
  if (!src[1]) return;
  ptrmap_put(&c->prefetch_after, ld, uop_new(OP_PREFETCH, ld->dtype, src, 2, NULL, 0));
  ptrmap_put(&c->row_read, g, (void *)2);
}

/* A load of a kernel buffer larger than the L2 (a smaller one stays cached) whose index moves
 * with the row loop. */
static bool row_load(lin_ctx *c, uop *u) {
  uop *g = u->op == OP_LOAD ? u->src[0] : NULL;
  return g && g->op == OP_DEFINE_GLOBAL && !is_row_scratch(g) && (deps_of(c, u->src[1]) & deps_of(c, c->row)) &&
         (double)g->arg[1] * (double)tg_dtype_size(u->dtype) > (double)c->info->prefetch_bytes;
}

/* Unmasked, and not a gather: its address is one scalar index. */
static bool plain_load(const uop *u) { return u->nsrc == 2 && !(u->narg > 2 && u->arg[2]) && !u->src[1]->vcount; }

static void walk_row_loads(prefetch_walk *w, uop *u) {
  lin_ctx *c = w->c;
  if (u->op == OP_REDUCE || ptrmap_has(&w->seen, u) || !(deps_of(c, u) & ~c->open)) return;
  ptrmap_put(&w->seen, u, u);
  for (int i = 0; i < u->nsrc; i++) walk_row_loads(w, u->src[i]);
  if (!row_load(c, u)) return;
  uintptr_t state = (uintptr_t)ptrmap_get(&c->row_read, u->src[0]);
  if (!w->plan && !state) ptrmap_put(&c->row_read, u->src[0], (void *)1);
  else if (w->plan && state == 1 && plain_load(u)) prefetch_next_row(c, u);
}

/* A kernel whose only output loop is the parallel one (a matrix-vector product: each iteration
 * reads a few rows of a large weight, a few KB) reads short streams, which the hardware
 * prefetcher learns anew each iteration: a Q8_0 row of 768 values is 816 bytes. So each REDUCE
 * there prefetches, for the loads of a buffer larger than the L2 directly in its body, what the
 * next iteration of the parallel loop reads ((it + 1) mod its end) where that is at most
 * STREAM_AHEAD_BYTES ahead (float32 rows of 768, 24 KiB an iteration, stream well without);
 * loads whose indices differ by a constant inside one 64-byte line share one prefetch
 * (docs/optimizer.md, "Next-row prefetch"). */
enum { STREAM_AHEAD_BYTES = 8 << 10 };
typedef struct stream_walk {
  lin_ctx *c;
  uint64_t rbits; /* the REDUCE's ranges */
  ptrmap seen;
  int n;
  uop *pick[64]; /* per line: the load with the smallest offset, */
  uop *key_g[64], *key_base[64]; /* its buffer and index less the constant */
  int64_t key_off[64];
} stream_walk;

static void stream_pick(stream_walk *w, uop *ld) {
  uop *idx = ld->src[1], *base = idx;
  int64_t k = 0, es = (int64_t)tg_dtype_size(ld->dtype);
  if (idx->op == OP_ADD && idx->src[1]->op == OP_CONST) base = idx->src[0], k = uop_const_ivalue(idx->src[1]);
  for (int i = 0; i < w->n; i++) {
    if (w->key_g[i] != ld->src[0] || w->key_base[i] != base || (w->key_off[i] * es) >> 6 != (k * es) >> 6) continue;
    if (k < w->key_off[i]) w->pick[i] = ld, w->key_off[i] = k;
    return;
  }
  if (w->n < 64) w->pick[w->n] = ld, w->key_g[w->n] = ld->src[0], w->key_base[w->n] = base, w->key_off[w->n++] = k;
}

static void walk_stream_loads(stream_walk *w, uop *u) {
  lin_ctx *c = w->c;
  if (ptrmap_has(&w->seen, u) || !(deps_of(c, u) & w->rbits) || u->op == OP_REDUCE) return; /* a nested one: its own */
  ptrmap_put(&w->seen, u, u);
  for (int i = 0; i < u->nsrc; i++) walk_stream_loads(w, u->src[i]);
  if (row_load(c, u) && plain_load(u)) stream_pick(w, u);
}

/* min(e, K) as lowering writes a padded dim's clamp: K - max(K - e, 0); e, or NULL. */
static uop *clamped(uop *u) {
  uop *m = u->op == OP_SUB && u->src[0]->op == OP_CONST ? u->src[1] : NULL;
  bool clamp = m && m->op == OP_MAX && uop_is_const_val(m->src[1], 0) && m->src[0]->op == OP_SUB && m->src[0]->src[0] == u->src[0];
  return clamp ? m->src[0]->src[1] : NULL;
}

/* How far ahead ld's next iteration reads, in bytes: the parallel index's coefficient in ld's
 * index, through a padded dim's clamp (-1: not a plain term of it). */
static int64_t stream_ahead(lin_ctx *c, uop *ld) {
  term t[64];
  int64_t k = 0;
  int n = index_terms(ld->src[1], 1, t, 0, 64, &k);
  for (int i = 0; i < n && i < 64; i++) {
    uop *e = clamped(t[i].base);
    if (e) n = index_terms(e, t[i].coef, t, n, 64, &k);
    else if (t[i].base == c->row) return llabs(t[i].coef) * (int64_t)tg_dtype_size(ld->dtype);
  }
  return -1;
}

static void stream_prefetch(lin_ctx *c, uop *u) {
  if (!c->info->prefetch_bytes || c->nouter != 1 || !c->row || c->row->arg[1] != RANGE_PARALLEL) return;
  stream_walk w = {.c = c};
  for (int i = reduce_nbody(u); i < u->nsrc; i++) w.rbits |= deps_of(c, u->src[i]);
  for (int i = 0; i < reduce_nbody(u); i++) walk_stream_loads(&w, u->src[i]);
  ptrmap_free(&w.seen);
  for (int i = 0; i < w.n; i++) {
    int64_t ahead = ptrmap_has(&c->prefetch_after, w.pick[i]) ? -1 : stream_ahead(c, w.pick[i]);
    if (ahead > 0 && ahead <= STREAM_AHEAD_BYTES) prefetch_next_row(c, w.pick[i]);
  }
}

/* Before row reduction u (plan) or after it: its loops' loads of the row. */
static void row_prefetch(lin_ctx *c, uop *u, bool plan) {
  if (!c->info->prefetch_bytes || !c->row) return;
  prefetch_walk w = {.c = c, .plan = plan};
  for (int i = 0; i < reduce_nbody(u); i++) walk_row_loads(&w, u->src[i]);
  ptrmap_free(&w.seen);
}

/* Between output loops: the REDUCEs that need no loop not yet open (a row's max or sum fused
 * into the kernel that normalizes the row, docs/architecture.md "Fusion policy"): computed
 * once per row, before the loops over the row's elements, not once per element. */
static void emit_row_reduces(lin_ctx *c) {
  bool any = false;
  for (size_t i = 0; i < c->reduces.n && !c->err; i++) {
    uop *r = c->reduces.v[i];
    if (emitted(c, r) || group_combine(r) || (deps_of(c, r) & ~c->open)) continue;
    bool changed = plan_scratch(c, r);
    row_prefetch(c, r, true);
    emit(c, r);
    row_prefetch(c, r, false);
    any = true;
    if (changed) i = (size_t)-1; /* a new list: from its start (emitted ones are skipped) */
  }
  if (any) hoist_row_values(c, *c->sink);
}

/* Output loops go outermost: the parallel range first, local ranges last (the work-group's
 * digits of the work-item index are its innermost), else by range id (= axis order). */
static int outer_order(const uop *a, const uop *b) {
  int ra = a->arg[1] == RANGE_PARALLEL ? 0 : a->arg[1] == RANGE_LOCAL ? 2 : 1;
  int rb = b->arg[1] == RANGE_PARALLEL ? 0 : b->arg[1] == RANGE_LOCAL ? 2 : 1;
  if (ra != rb) return ra < rb ? -1 : 1;
  return a->arg[0] < b->arg[0] ? -1 : a->arg[0] > b->arg[0];
}

int linearize(uop *sink, lin_program *prog, kernel_info *info) {
  lin_ctx c = {.info = info, .trips = 1, .sink = &sink};
  if (VEC_PUSH(c.alive, true) < 0) return tg_set_error(TG_ERR_NOMEM, "linearize: out of memory");
  uop **order;
  int n = uop_toposort(sink, &order);
  if (n < 0) return tg_set_error(TG_ERR_NOMEM, "linearize: out of memory");
  VEC(uop *) outer = {0};
  for (int i = 0; i < n; i++) {
    uop *u = order[i];
    if (u->op == OP_REDUCE) VEC_PUSH(c.reduces, u);
    if (u->op != OP_RANGE) continue;
    if (u->arg[1] == RANGE_GLOBAL || u->arg[1] == RANGE_PARALLEL || u->arg[1] == RANGE_LOCAL) VEC_PUSH(outer, u);
  }
  free(order);
  c.outer = outer.v, c.nouter = outer.n;
  for (size_t i = 1; i < outer.n; i++) /* insertion sort */
    for (size_t j = i; j > 0 && outer_order(outer.v[j - 1], outer.v[j]) > 0; j--) {
      uop *t = outer.v[j];
      outer.v[j] = outer.v[j - 1], outer.v[j - 1] = t;
    }
  for (size_t i = 0; i < outer.n; i++) {
    if (outer.v[i]->src[0]->op != OP_CONST) hoist(&c, outer.v[i]->src[0]); /* a variable end */
    push(&c, L_LOOP, outer.v[i]);
    c.open |= deps_of(&c, outer.v[i]);
    c.trips *= trip_count(outer.v[i]);
    c.row = outer.v[i];
    if (i + 1 < outer.n) emit_row_reduces(&c);
  }
  emit(&c, sink);
  for (size_t i = outer.n; i > 0; i--) push(&c, L_END, outer.v[i - 1]);
  VEC_FREE(outer);
  VEC_FREE(c.reduces);
  VEC_FREE(c.alive);
  ptrmap_free(&c.range_bit);
  ptrmap_free(&c.deps);
  ptrmap_free(&c.emitted);
  ptrmap_free(&c.hoisted);
  ptrmap_free(&c.has_reduce);
  ptrmap_free(&c.row_hoisted);
  ptrmap_free(&c.scratch_store);
  ptrmap_free(&c.row_read);
  ptrmap_free(&c.prefetch_after);
  if (c.err) { VEC_FREE(c.ops); return c.err; }
  prog->ops = c.ops.v, prog->n = (int)c.ops.n;
  return 0;
}

/* Program spec: loops nest properly and every source is defined (emitted, inline, or an open
 * loop variable) before it is used; accumulators are initialised before they are updated. */
/* Values are scoped like the C they become: a value (or loop variable) defined inside a loop
 * is gone after the loop's END. defined: value → its loop depth + 1 (NULL: out of scope). */
int program_spec_check(const lin_program *p) {
  ptrmap defined = {0}, accs = {0};
  VEC(uop *) loops = {0};
  VEC(uop *) order = {0}; /* values in definition order, to drop a closed loop's values */
  int rc = 0;
  for (int i = 0; i < p->n && !rc; i++) {
    const lin_op *o = &p->ops[i];
    uop *u = o->u;
    if (o->kind == L_END) {
      if (!loops.n || loops.v[loops.n - 1] != u) { rc = tg_set_error(TG_ERR_DEVICE, "program spec: unbalanced loop"); continue; }
      loops.n--;
      while (order.n && (uintptr_t)ptrmap_get(&defined, order.v[order.n - 1]) > loops.n + 1)
        ptrmap_put(&defined, order.v[--order.n], NULL);
      continue;
    }
    if (o->kind == L_ACC_INIT) { ptrmap_put(&accs, u, u); continue; }
    if ((o->kind == L_ACC_UPDATE || o->kind == L_ACC_FINAL) && !ptrmap_has(&accs, u)) {
      rc = tg_set_error(TG_ERR_DEVICE, "program spec: accumulator used before its initialisation");
      continue;
    }
    int last = o->kind == L_LOOP ? 1 : o->kind == L_ACC_UPDATE ? reduce_nbody(u) : o->kind == L_ACC_FINAL ? 0 : u->nsrc;
    for (int j = 0; j < last && !rc; j++) {
      uop *s = u->src[j];
      if (!ptrmap_get(&defined, s) && s->op != OP_CONST && s->op != OP_DEFINE_GLOBAL)
        rc = tg_set_error(TG_ERR_DEVICE, "program spec: %s used before definition or outside its loop", uop_ops[s->op].name);
    }
    if (o->kind == L_ACC_UPDATE) continue;
    bool outer = o->kind == L_LOOP; /* a loop variable lives inside its loop */
    ptrmap_put(&defined, u, (void *)(uintptr_t)(loops.n + 1 + outer));
    VEC_PUSH(order, u);
    if (outer) VEC_PUSH(loops, u);
  }
  if (!rc && loops.n) rc = tg_set_error(TG_ERR_DEVICE, "program spec: loop left open");
  VEC_FREE(loops);
  VEC_FREE(order);
  ptrmap_free(&defined);
  ptrmap_free(&accs);
  return rc;
}

/* ---------------------------------------------------------------- tensor cores */

/* Whether u reads GEP(w, *). */
static bool reads_wmma(const uop *u, const uop *w, int from, int to) {
  for (int i = from; i < to; i++)
    if (u->src[i]->op == OP_GEP && u->src[i]->src[0] == w) return true;
  return false;
}

int lin_wmma_accs(const lin_program *p, int at, uop **accs) {
  uop *w = p->ops[at].u;
  for (int i = 0; i < WMMA_C; i++) {
    accs[i] = NULL;
    if (!uop_is_const_val(w->src[WMMA_A + WMMA_B + i], 0)) return -1;
  }
  for (int j = 0; j < p->n; j++) {
    uop *u = p->ops[j].u;
    lin_kind k = p->ops[j].kind;
    if (k == L_ACC_INIT || k == L_ACC_FINAL || (k == L_VALUE && u->op == OP_GEP)) continue;
    bool acc = k == L_ACC_UPDATE;
    if (!reads_wmma(u, w, 0, acc ? reduce_nbody(u) : u->nsrc)) continue;
    if (!acc || j < at || reduce_nbody(u) != 1 || u->arg[0] != OP_ADD || u->dtype != TG_FLOAT32 || u->vcount) return -1;
    int lane = (int)u->src[0]->arg[0];
    if (lane < 0 || lane >= WMMA_C || accs[lane]) return -1;
    bool init_before = false; /* the accumulator is set up before the WMMA (not hoisted past it) */
    for (int i = 0; i < at && !init_before; i++) init_before = p->ops[i].kind == L_ACC_INIT && p->ops[i].u == u;
    if (!init_before) return -1;
    accs[lane] = u;
  }
  for (int i = 0; i < WMMA_C; i++)
    if (!accs[i]) return -1;
  return 0;
}
