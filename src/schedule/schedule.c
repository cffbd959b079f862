/* schedule.c — from the tensor graph of everything asked for to an ordered list of kernels.
 *
 * 1. Realized nodes are replaced by their buffers.
 * 2. The fusion policy picks the nodes that get buffers ("kernel roots"): what was asked for,
 *    CONTIGUOUS, reductions that cannot fuse into their consumer — a reduce fuses only if
 *    every path from its kernel root reaches it through elementwise ops and non-expanding
 *    views (RESHAPE, PERMUTE, SHRINK, FLIP); through EXPAND or PAD it would be recomputed per
 *    output element, inside another reduce it would nest, so it gets its own kernel — and
 *    elementwise nodes that would be recomputed (under EXPAND, or by two kernels) when that
 *    is costly (worth_storing). See docs/architecture.md, "Fusion policy".
 * 3. Each root becomes a kernel AST: SINK(expr) whose buffers are PARAM slots (slot 0 is the
 *    output), so equal computations on different buffers share one compiled program.
 * 4. The kernels are listed in topological order with their buffers (schedule.h); src/engine/
 *    runs them. A root a tensor handle can still read keeps its buffer (uop->realized); the
 *    memory of the others goes back after their last reader (plan_memory). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "schedule/schedule.h"
#include "schedule/layout.h"

#include "codegen/codegen.h"
#include "device/device.h"
#include "tensor/tensor.h"
#include "tensor/variable.h"
#include "uop/dtype.h"
#include "uop/rewrite.h"

typedef struct sched {
  const device *dev; /* where the kernels run */
  ptrmap roots;   /* node → BUFFER (NULL until allocated) */
  VEC(uop *) root_list;
  ptrmap owner;   /* fused reduce → the root that owns it */
  ptrmap reached; /* elementwise node → the first root whose kernel computes it */
  ptrmap users;   /* node → number of uses in the graph */
  ptrmap visited; /* (node | flag bits) per walk */
  ptrmap origin;  /* node made by the layout rewrites → the node a tensor handle holds */
  bool changed;
} sched;

static bool is_root(sched *s, uop *u) { return ptrmap_has(&s->roots, u); }

static void add_root(sched *s, uop *u) {
  if (is_root(s, u)) return;
  ptrmap_put(&s->roots, u, NULL);
  VEC_PUSH(s->root_list, u);
  s->changed = true;
}

static bool expands(uop *u) {
  uop *x = u->src[0];
  for (int i = 0; i < uop_ndim(u); i++)
    if (uop_shape(u)[i] != uop_shape(x)[i]) return true;
  return false;
}

/* ---- fusion cost: when recomputing an elementwise node costs more than storing it */

enum {
  RECOMPUTE_LIMIT = 6, /* ALU ops an expanded or shared node may repeat per use */
  COST_SEARCH = 256,   /* nodes a cost estimate looks at */
};

/* What an ALU op costs in the recompute estimate: one, a transcendental several on host
 * devices (exp2, log2 and sin are polynomials of ~20 vector ops there, transcendental.c; an
 * attention's softmax exp, under the product with V's EXPAND, was recomputed for every block
 * of output columns); work-item devices have native ones: one. */
static const uint8_t host_alu_costs[OP_COUNT] = {[OP_EXP2] = 4, [OP_LOG2] = 4, [OP_SIN] = 4};

static int alu_cost(const sched *s, const uop *u) {
  return s->dev->caps.max_local_size <= 1 && host_alu_costs[u->op] ? host_alu_costs[u->op] : 1;
}

typedef struct cost_walk {
  sched *s;
  ptrmap seen;
  int alu, steps;
  bool reduce; /* reaches a reduction that would fuse into the node and has no other use */
} cost_walk;

static bool stops_fusion(sched *s, uop *u) {
  return is_root(s, u) || u->op == OP_BUFFER || u->op == OP_CONTIGUOUS || u->op == OP_COPY;
}

/* fusable: the path from the start is elementwise ops and non-repeating views, each node
 * used once (so storing the start subsumes a reduction found this way). */
static void cost_visit(cost_walk *c, uop *u, bool fusable) {
  if (c->steps++ > COST_SEARCH || stops_fusion(c->s, u)) return;
  void *key = (void *)((uintptr_t)u | (uintptr_t)fusable);
  if (ptrmap_has(&c->seen, key)) return;
  ptrmap_put(&c->seen, key, u);
  if (u->op == OP_REDUCE_AXIS) { c->reduce |= fusable; return; }
  c->alu += uop_is_alu(u) ? alu_cost(c->s, u) : 0;
  if (u->op == OP_PAD || (u->op == OP_EXPAND && expands(u))) fusable = false;
  for (int i = 0; i < u->nsrc; i++)
    cost_visit(c, u->src[i], fusable && (uintptr_t)ptrmap_get(&c->s->users, u->src[i]) == 1);
}

/* Should the elementwise node u (about to be computed more than once per element: under an
 * EXPAND, or by a second kernel) get a buffer? Yes if its fused subgraph holds many ALU ops,
 * or a reduction that could fuse into it: then u's kernel is the reduction's kernel with the
 * elementwise tail after it (relu(conv + bias) stored once, not recomputed per use). */
static bool worth_storing(sched *s, uop *u) {
  cost_walk c = {s, {0}, 0, 0, false};
  cost_visit(&c, u, true);
  ptrmap_free(&c.seen);
  return c.alu >= RECOMPUTE_LIMIT || c.reduce;
}

static void forget_below(sched *s, uop *u, ptrmap *seen) {
  for (int i = 0; i < u->nsrc; i++) {
    uop *x = u->src[i];
    if (is_root(s, x) || x->op == OP_BUFFER || ptrmap_has(seen, x)) continue;
    ptrmap_put(seen, x, x);
    if (ptrmap_get(&s->reached, x)) ptrmap_put(&s->reached, x, NULL);
    forget_below(s, x, seen);
  }
}

/* u was just stored because two kernels computed it: below u, the kernel that reached a node
 * first may no longer compute it, so those records are dropped (a record kept would make the
 * new root look like a second user and cut its chain into one kernel per op). Sharing missed
 * meanwhile is found by the next pass, which starts from a fresh map. */
static void forget_reached(sched *s, uop *u) {
  ptrmap seen = {0};
  forget_below(s, u, &seen);
  ptrmap_free(&seen);
}

/* ---- row reductions fused into their consumer (docs/architecture.md, "Fusion policy" 2a)
 * A reduction R over the last dims of x, broadcast back along those same dims (EXPAND) to a
 * kernel that iterates x's shape in order (its loops: the rows outside, the row's dims inside),
 * has one value per row: the linearizer computes it before the row's loops (hoisted), so the
 * kernel reads each row from memory once and again from cache (softmax: max, sum of exp and
 * the normalized row in one kernel). Only where a row fits the cache (device caps) and on
 * devices with loops (a work-item device would recompute R in every work-item). */

enum { ROW_CACHE_SHARE = 4 }; /* a row may use this fraction of the L2 (its passes, the output) */

/* The dims of size > 1 where `in` and `out` differ (bit d), or -1 if there are more than 63. */
static int64_t differing_dims(const uop *in, const uop *out) {
  int n = uop_ndim(out);
  int64_t m = 0;
  if (n > 63 || uop_ndim(in) != n) return -1;
  for (int d = 0; d < n; d++)
    if (uop_shape(in)[d] != uop_shape(out)[d]) m |= (int64_t)1 << d;
  return m;
}

/* Are the dims in mask the innermost dims of shape of size > 1 (after every other one)? */
static bool inner_dims(const uop *u, int64_t mask) {
  bool seen = false;
  for (int d = 0; d < uop_ndim(u); d++) {
    bool in = mask >> d & 1;
    if (in) seen = true;
    else if (seen && uop_shape(u)[d] > 1) return false;
  }
  return mask > 0;
}

/* Is a reduction under u, through ALU ops only (within the search budget)? */
static bool reduces_below(sched *s, uop *u, int *steps) {
  if (u->op == OP_REDUCE_AXIS) return !is_root(s, u);
  if (!uop_is_alu(u) || ++*steps > COST_SEARCH) return false;
  for (int i = 0; i < u->nsrc; i++)
    if (reduces_below(s, u->src[i], steps)) return true;
  return false;
}

/* An EXPAND of a per-row value computed from a reduction back along the row's dims (the last
 * ones), reached from a loop context in order: what it repeats is computed once per row (the
 * linearizer emits reductions, and what is computed from them, before the row's loops). A
 * broadcast of anything else stays an expansion (rule 3 weighs recomputing it). */
static bool row_expand(sched *s, uop *u) {
  int steps = 0;
  return u->op == OP_EXPAND && inner_dims(u, differing_dims(u->src[0], u)) && reduces_below(s, u->src[0], &steps);
}

/* ALU ops a pass over the row computes per element to get R: those of the row's shape under
 * R's source up to stored values, the bodies of reductions nested in it included (each is a
 * pass of its own that the kernel also runs); ops on per-row values (shape of a reduction's
 * result) run once per row and do not count. More than the search budget counts as too many. */
static int row_pass_alu(sched *s, uop *u, const uop *row, ptrmap *seen, int *steps) {
  if (stops_fusion(s, u) || ptrmap_has(seen, u)) return 0;
  if (++*steps > COST_SEARCH) return COST_SEARCH;
  ptrmap_put(seen, u, u);
  int n = uop_is_alu(u) && differing_dims(u, row) == 0;
  for (int i = 0; i < u->nsrc && n < COST_SEARCH; i++) n += row_pass_alu(s, u->src[i], row, seen, steps);
  return n;
}

/* R, reached below a row_expand of shape `row` through ALU ops, reduces exactly the expanded
 * dims of a row that fits the device's cache, and its pass repeats little work: the consumer
 * computes what R's source shares with it once more per element (x - mean(x) chained 100
 * times would nest every mean, quadratic work, without the bound). */
static bool row_reduce_fuses(sched *s, uop *r, const uop *row) {
  const device_caps *caps = &s->dev->caps;
  if (!row || caps->max_local_size > 1 || differing_dims(r->src[0], row) != 0) return false;
  int64_t bytes = (int64_t)tg_dtype_size(r->src[0]->dtype);
  for (int i = 1; i < r->narg; i++) bytes *= uop_shape(r->src[0])[r->arg[i]];
  if (bytes * ROW_CACHE_SHARE > caps->l2_bytes) return false;
  ptrmap seen = {0};
  int steps = 0, alu = row_pass_alu(s, r->src[0], r->src[0], &seen, &steps);
  ptrmap_free(&seen);
  return alu <= RECOMPUTE_LIMIT;
}

/* A root's kernel: everything reachable up to other roots and buffers. clean: the path from
 * the root is elementwise ops and views that neither repeat nor pad (a reduce met this way
 * fuses). expanded: the path passed an EXPAND since the last reduction (values below repeat).
 * inorder: the path from the kernel's loop context (the root, or a reduction over its input's
 * last dims) is ALU ops only, so u's dims are the loops in order. row: below a row_expand
 * (through ALU ops only), its node; NULL otherwise. */
static void walk(sched *s, uop *u, bool clean, bool expanded, bool inorder, const uop *row, uop *root) {
  if (u != root && (is_root(s, u) || u->op == OP_BUFFER)) return;
  uintptr_t bits = (uintptr_t)clean | (uintptr_t)expanded << 1 | (uintptr_t)inorder << 2 | (uintptr_t)(row != NULL) << 3;
  void *key = (void *)((uintptr_t)u | bits);
  if (ptrmap_has(&s->visited, key)) return;
  ptrmap_put(&s->visited, key, u);
  if (u != root && (u->op == OP_CONTIGUOUS || u->op == OP_COPY)) { add_root(s, u); return; }
  if (u->op == OP_COPY) { /* a copy item: what it copies is stored first, on its own device */
    if (u->src[0]->op != OP_BUFFER) add_root(s, u->src[0]);
    return;
  }
  if (u->op == OP_REDUCE_AXIS) {
    bool rows = u == root || clean || row_reduce_fuses(s, u, row);
    if (u != root) {
      uop *owner = ptrmap_get(&s->owner, u);
      if (!rows || (owner && owner != root)) { add_root(s, u); return; }
      ptrmap_put(&s->owner, u, root);
    }
    int64_t m = 0;
    for (int i = 1; i < u->narg && i < 64; i++) m |= (int64_t)1 << u->arg[i];
    bool ordered = (inorder || u == root || row) && inner_dims(u->src[0], m);
    walk(s, u->src[0], false, false, ordered, NULL, root);
    return;
  }
  if (u != root && uop_is_alu(u)) {
    uop *first = ptrmap_get(&s->reached, u);
    bool shared = first && first != root;
    if (!first) ptrmap_put(&s->reached, u, root);
    if ((expanded || shared) && worth_storing(s, u)) { add_root(s, u), forget_reached(s, u); return; }
  }
  bool alu = uop_is_alu(u);
  const uop *below = alu ? row : NULL;
  if (inorder && !expanded && row_expand(s, u)) below = u, clean = false; /* once per row: not "expanded" */
  else if (u->op == OP_EXPAND && expands(u)) clean = false, expanded = true;
  if (u->op == OP_PAD) clean = false;
  bool keeps_order = alu || (u == root && u->op == OP_CONTIGUOUS);
  for (int i = 0; i < u->nsrc; i++) walk(s, u->src[i], clean, expanded, inorder && keeps_order, below, root);
}

/* ---- inputs per kernel
 * A kernel's arguments are its buffers: the output, each stored input, a block per dtype of
 * user values, a buffer per variable and a GROUP scratch; the engine launches at most 64
 * (run.c; the renderers' tables hold 66). A kernel that would read more stored inputs than
 * MAX_KERNEL_INPUTS (a long chain over many realized tensors: a determinant's product of
 * pivots) gets one of its fused nodes stored first: the one reading the most inputs that still
 * fit, so the rest of the chain reads it as one. */
enum { MAX_KERNEL_INPUTS = 48 };

/* Distinct stored inputs (buffers, other roots) and value dtypes below u in root's kernel. */
static int count_inputs(sched *s, uop *u, uop *root, ptrmap *seen, uint32_t *value_dtypes) {
  if (ptrmap_has(seen, u)) return 0;
  ptrmap_put(seen, u, u);
  if (u != root && (u->op == OP_BUFFER || is_root(s, u))) return 1;
  if (u->op == OP_VALUE) {
    int fresh = !(*value_dtypes >> u->dtype & 1);
    *value_dtypes |= 1u << u->dtype;
    return fresh;
  }
  int n = 0;
  for (int i = 0; i < u->nsrc; i++) n += count_inputs(s, u->src[i], root, seen, value_dtypes);
  return n;
}

static int inputs_below(sched *s, uop *u, uop *root) {
  ptrmap seen = {0};
  uint32_t dts = 0;
  int n = count_inputs(s, u, root, &seen, &dts);
  ptrmap_free(&seen);
  return n;
}

/* The nodes root's kernel computes (below it, down to stored inputs), into nodes. */
typedef VEC(uop *) uop_list;
static void kernel_nodes(sched *s, uop *u, uop *root, ptrmap *seen, uop_list *nodes) {
  if (ptrmap_has(seen, u) || (u != root && (u->op == OP_BUFFER || is_root(s, u)))) return;
  ptrmap_put(seen, u, u);
  VEC_PUSH(*nodes, u);
  for (int i = 0; i < u->nsrc; i++) kernel_nodes(s, u->src[i], root, seen, nodes);
}

/* The node of root's kernel to store so that it reads fewer inputs: an ALU op or reduction
 * reading the most inputs within the limit (else the fewest above it), or NULL. */
static uop *split_point(sched *s, uop *root, int total) {
  ptrmap seen = {0};
  uop_list nodes = {0};
  kernel_nodes(s, root, root, &seen, &nodes);
  ptrmap_free(&seen);
  uop *best = NULL;
  int best_n = 0;
  for (size_t i = 0; i < nodes.n; i++) {
    uop *u = nodes.v[i];
    if (u == root || (!uop_is_alu(u) && u->op != OP_REDUCE_AXIS)) continue;
    int k = inputs_below(s, u, root);
    if (k < 2 || k >= total) continue;
    bool fits = k <= MAX_KERNEL_INPUTS, best_fits = best_n && best_n <= MAX_KERNEL_INPUTS;
    if (!best || (fits && (!best_fits || k > best_n)) || (!fits && !best_fits && k < best_n)) best = u, best_n = k;
  }
  VEC_FREE(nodes);
  return best;
}

/* Grow the root set until every reduce is either fused cleanly or a root itself, no costly
 * elementwise node is recomputed, and no kernel reads more than MAX_KERNEL_INPUTS inputs. */
static void choose_roots(sched *s) {
  do {
    s->changed = false;
    ptrmap_free(&s->owner);
    ptrmap_free(&s->reached);
    for (size_t i = 0; i < s->root_list.n; i++) {
      ptrmap_free(&s->visited);
      uop *root = s->root_list.v[i];
      walk(s, root, true, false, true, NULL, root);
      int total = s->changed ? 0 : inputs_below(s, root, root);
      uop *cut = total > MAX_KERNEL_INPUTS ? split_point(s, root, total) : NULL;
      if (cut) add_root(s, cut), forget_reached(s, cut);
    }
  } while (s->changed);
  ptrmap_free(&s->visited);
}

/* ---- a stored value is read by every kernel that needs it
 * CONTIGUOUS(u) stores a computed u (a conv stores its computed input once, conv.c); every
 * other use of u reads that buffer too instead of computing u again. MobileNetV2's block
 * output, stored for the next block's pointwise conv, was also recomputed by the residual
 * add, which claimed the conv's reduction: the reduction got a kernel of its own and every
 * later residual added the bias again (an extra elementwise kernel per block, and 2-3
 * residual reads in a conv whose lanes then went along its rows instead of its channels). */
static bool stores_computed(const uop *c) {
  return c->op == OP_CONTIGUOUS && (uop_is_alu(c->src[0]) || c->src[0]->op == OP_REDUCE_AXIS);
}

/* order (sources first) with each stored CONTIGUOUS(u) right after u, so that it precedes
 * every other user of u; stored maps u to it. */
static uop **stored_first(uop **order, int n, const ptrmap *stored) {
  uop **moved = malloc(sizeof(uop *) * (size_t)n);
  int k = 0;
  for (int i = 0; i < n && moved; i++) {
    uop *u = order[i], *c = ptrmap_get(stored, u);
    if (stores_computed(u) && ptrmap_get(stored, u->src[0]) == u) continue; /* placed after its source */
    moved[k++] = u;
    if (c) moved[k++] = c;
  }
  return moved;
}

/* A user other than CONTIGUOUS(x) itself reads x's stored value. */
static uop *stored_source(void *stored, uop *user, uop *x) {
  uop *c = ptrmap_get(stored, x);
  return c && c != user ? c : x;
}

/* Rewrite *g so that the other uses of each stored u read CONTIGUOUS(u), with *order its
 * nodes again; the new count, or -1 when out of memory. */
static int share_stored(uop **g, ptrmap *origin, uop ***order, int n) {
  ptrmap stored = {0}; /* u -> CONTIGUOUS(u) */
  for (int i = 0; i < n; i++)
    if (stores_computed((*order)[i]) && !ptrmap_has(&stored, (*order)[i]->src[0]) &&
        ptrmap_put(&stored, (*order)[i]->src[0], (*order)[i]) < 0)
      return ptrmap_free(&stored), -1;
  uop **walk = stored.count ? stored_first(*order, n, &stored) : NULL;
  rebuild_fns f = {stored_source, NULL, &stored};
  int rc = !stored.count ? n : walk ? graph_rebuild(g, order, n, walk, &f, origin) : -1;
  free(walk);
  ptrmap_free(&stored);
  return rc;
}

/* ---- kernel ASTs */

typedef struct kctx {
  sched *s;
  const device *dev; /* the kernel's */
  uop *root;
  VEC(uop *) bufs;                 /* slot → BUFFER */
  ptrmap value_index;              /* user VALUE → its index in its dtype's block + 1 */
  int64_t nvalues[TG_DTYPE_COUNT]; /* values of each dtype in this kernel */
  uop *values[TG_DTYPE_COUNT];     /* the block (a BUFFER) holding them */
} kctx;

/* The PARAM of buf's slot, read as `shape` (buf's own shape, or a reshape of it). */
static uop *to_param(kctx *k, uop *buf, const int64_t *shape, int nd) {
  size_t slot = 0;
  while (slot < k->bufs.n && k->bufs.v[slot] != buf) slot++;
  if (slot == k->bufs.n && VEC_PUSH(k->bufs, buf) < 0) return NULL;
  int64_t arg[TG_MAX_DIMS + 1];
  arg[0] = (int64_t)slot;
  memcpy(arg + 1, shape, sizeof(int64_t) * (size_t)nd);
  return uop_new(OP_PARAM, buf->dtype, NULL, 0, arg, 1 + nd);
}

/* The buffer a kernel input is stored in (a BUFFER, or another root's), or NULL. */
static uop *stored_input(kctx *k, uop *u) {
  if (u->op == OP_BUFFER) return u;
  return u != k->root && is_root(k->s, u) ? ptrmap_get(&k->s->roots, u) : NULL;
}

/* ---- user values: kernel arguments
 * The VALUEs a kernel reads (tg_full, tg_mul_s, ... : docs/architecture.md) are packed, per
 * dtype, into one small block made for this run; each VALUE becomes element i of its block's
 * PARAM. The AST holds only the counts and indices, never the numbers, so a new value finds
 * the same program; and a kernel reading a thousand scalars needs one slot per dtype. */

static int collect_values(kctx *k, uop *u, ptrmap *seen) {
  if (ptrmap_has(seen, u)) return 0;
  if (ptrmap_put(seen, u, u) < 0) return TG_ERR_NOMEM;
  if (u->op == OP_VALUE) return ptrmap_put(&k->value_index, u, (void *)(intptr_t)++k->nvalues[u->dtype]);
  if (u != k->root && stored_input(k, u)) return 0;
  for (int i = 0; i < u->nsrc; i++)
    if (collect_values(k, u->src[i], seen) < 0) return TG_ERR_NOMEM;
  return 0;
}

/* The values of dtype dt, in their dtype (ints from their bits), into a new block on the
 * kernel's device. */
static int make_value_block(kctx *k, tg_dtype dt) {
  size_t size = tg_dtype_size(dt);
  unsigned char *host = calloc((size_t)k->nvalues[dt], size);
  uop *block = host ? buffer_new_lazy(dt, &k->nvalues[dt], 1) : NULL;
  if (!block) return free(host), TG_ERR_NOMEM;
  for (size_t i = 0; i < k->value_index.cap; i++) {
    uop *v = (uop *)k->value_index.keys[i];
    if (!v || v->dtype != dt) continue;
    unsigned char *data = host + ((size_t)(intptr_t)k->value_index.vals[i] - 1) * size;
    if (dtype_is_float(dt)) dtype_write(data, dt, 0, uop_const_value(v));
    else memcpy(data, &v->arg[0], size); /* exact bits (little-endian) */
  }
  uop_set_device(block, device_number(k->dev));
  int rc = buffer_copy_in(block, host, (size_t)k->nvalues[dt] * size);
  free(host);
  k->values[dt] = block;
  return rc;
}

/* The block of each dtype holding the kernel's user values. */
static int make_value_blocks(kctx *k, uop *expr) {
  ptrmap seen = {0};
  int rc = collect_values(k, expr, &seen);
  ptrmap_free(&seen);
  for (int dt = 0; dt < TG_DTYPE_COUNT && !rc; dt++)
    if (k->nvalues[dt]) rc = make_value_block(k, (tg_dtype)dt);
  return rc;
}

/* VALUE → its element of the block: a 0-d view of PARAM (n,) at [i, i+1). */
static uop *value_rule(void *ctx, uop *u, uop **cap) {
  (void)cap;
  kctx *k = ctx;
  int64_t at = (int64_t)(intptr_t)ptrmap_get(&k->value_index, u) - 1, range[2] = {at, at + 1};
  uop *block = k->values[u->dtype];
  uop *p = to_param(k, block, uop_shape(block), 1);
  uop *one = p ? uop_new(OP_SHRINK, u->dtype, &p, 1, range, 2) : NULL;
  return one ? uop_new(OP_RESHAPE, u->dtype, &one, 1, NULL, 0) : NULL;
}

/* ---- symbolic sizes (docs/symbolic.md)
 * A value with a variable dim is stored at its layout size; only [0, size) of that dim holds
 * elements. Where such a value is read from its buffer (a realized node, another kernel's
 * output), the buffer is viewed as SHRINK(buffer, [0, size)) so its readers see the variable
 * dim, and reductions over it stop at the bound value. */
static uop *sym_view(uop *x, const uop *like) {
  if (!like->sym || !x) return x;
  int64_t arg[2 * TG_MAX_DIMS];
  for (int i = 0; i < like->ndim; i++) arg[2 * i] = 0, arg[2 * i + 1] = like->sym[i] ? like->sym[i] : uop_shape(x)[i];
  return uop_new(OP_SHRINK, x->dtype, &x, 1, arg, 2 * like->ndim);
}

/* The variables the kernel's sizes name, as SINK sources after expr: DEFINE_VAR [id, min, max]
 * of a 0-d view of the variable's buffer on the kernel's device (its value when it runs). */
static int kernel_vars(kctx *k, uop *expr, uop **out, int cap) {
  uop **order;
  int n = uop_toposort(expr, &order), nv = 0, rc = n < 0 ? TG_ERR_NOMEM : 0;
  for (int i = 0; i < n && !rc; i++) {
    int id = uop_sym_var(order[i]);
    bool seen = !id;
    for (int j = 0; j < nv && !seen; j++) seen = out[j]->arg[0] == id;
    if (seen) continue;
    if (nv == cap) { rc = tg_set_error(TG_ERR_ARG, "schedule: a kernel with more than %d variables", cap); break; }
    int64_t value, one = 1, def[3] = {id, uvar_min(id), uvar_max(id)};
    uop *buf = var_buffer(id, k->dev, &value), *p = buf ? to_param(k, buf, &one, 1) : NULL;
    uop *view = p ? uop_new(OP_RESHAPE, TG_INT64, &p, 1, NULL, 0) : NULL;
    if (!(out[nv] = view ? uop_new(OP_DEFINE_VAR, TG_INT64, &view, 1, def, 3) : NULL)) rc = tg_error_status_or(TG_ERR_NOMEM);
    else nv++;
  }
  free(n > 0 ? order : NULL);
  return rc < 0 ? rc : nv;
}

/* Inputs of a kernel: other roots and buffers become PARAM slots. */
static uop *param_rule(void *ctx, uop *u, uop **cap) {
  (void)cap;
  uop *buf = stored_input(ctx, u);
  return buf ? sym_view(to_param(ctx, buf, uop_shape(buf), uop_ndim(buf)), u) : NULL;
}

/* A reshape of a stored input is the same buffer under another shape (buffers are contiguous):
 * one PARAM of the reshaped shape. Through the reshape the index is div/mod math that hides
 * the plain strides from the optimizer: a sum over the flattened partials of a conv weight
 * gradient was scalar code; with the PARAM reshaped it is the same kernel as a plain sum. */
static uop *reshaped_param_rule(void *ctx, uop *u, uop **cap) {
  uop *x = cap['x' - 'a'];
  while (x->op == OP_RESHAPE) x = x->src[0];
  uop *buf = x->sym || u->sym ? NULL : stored_input(ctx, x); /* variable dims: param_rule's view */
  return buf ? to_param(ctx, buf, uop_shape(u), uop_ndim(u)) : NULL;
}

static const rule param_rules_list[] = {
    {"(VALUE)", value_rule}, {"(RESHAPE x)", reshaped_param_rule}, {"x", param_rule}, {NULL, NULL}};

/* ---- a kernel's elementwise tail over its reduction (kernel_ast) */

/* Does u read only stored inputs and constants through reshapes and broadcasts (a bias, a
 * clamp's bounds, a residual), maybe combined elementwise? Reshaped to the reduction's shape,
 * such a view stays plain strides; a permuted or padded one would become div/mod math. */
static bool tail_operand(kctx *k, uop *u, int depth) {
  if (u->nsrc == 0 || (u != k->root && is_root(k->s, u))) return true;
  bool view = u->op == OP_RESHAPE || u->op == OP_EXPAND, alu = (uop_flags(u) & UOP_FLAG_ALU) != 0;
  if (depth == 0 || (!view && !alu)) return false;
  for (int i = 0; i < u->nsrc; i++)
    if (!tail_operand(k, u->src[i], depth - 1)) return false;
  return true;
}

#define TAIL_DEPTH 12
#define TAIL_OPERAND ((uop *)&tail_operand_mark)
static const char tail_operand_mark;

/* The one reduction that u computes elementwise over, through reshapes, with tail operands
 * for its other inputs; TAIL_OPERAND if u is one; NULL if neither (two reductions, another
 * movement, a stored value on the way). */
static uop *tail_reduction(kctx *k, uop *u, int depth) {
  if (tail_operand(k, u, TAIL_DEPTH)) return TAIL_OPERAND;
  if (u->op == OP_REDUCE_AXIS) return u;
  if (depth == 0 || (u->op != OP_RESHAPE && !(uop_flags(u) & UOP_FLAG_ALU))) return NULL;
  uop *r = TAIL_OPERAND;
  for (int i = 0; i < u->nsrc; i++) {
    uop *s = tail_reduction(k, u->src[i], depth - 1);
    if (!s || (s != TAIL_OPERAND && r != TAIL_OPERAND && s != r)) return NULL;
    if (s != TAIL_OPERAND) r = s;
  }
  return r;
}

/* u rebuilt over the reduction r in r's shape: reshapes on the way dropped, the views that
 * tail operands read reshaped to r's shape (an elementwise operand rebuilt over reshaped
 * views: a reshape over the op would index its views by div/mod math, no vector lanes). */
static uop *tail_rebuild(kctx *k, uop *u, uop *r) {
  if (u == r) return r;
  bool operand = tail_operand(k, u, TAIL_DEPTH), alu = (uop_flags(u) & UOP_FLAG_ALU) != 0;
  if (operand && (!alu || u == k->root || is_root(k->s, u))) return ushape_reshape(u, uop_shape(r), uop_ndim(r));
  if (u->op == OP_RESHAPE) return tail_rebuild(k, u->src[0], r);
  enum { MAX_SRC = 4 };
  uop *src[MAX_SRC];
  if (u->nsrc > MAX_SRC) return NULL;
  for (int i = 0; i < u->nsrc; i++)
    if (!(src[i] = tail_rebuild(k, u->src[i], r))) return NULL;
  return uop_replace_src(u, src, u->nsrc);
}

static uop *kernel_ast(kctx *k, uop *root) {
  static rule_table *_Atomic table;
  rule_table *rules = rule_table_once(&table, "kernel_params", param_rules_list);
  uop *out = ptrmap_get(&k->s->roots, root);
  if (!to_param(k, out, uop_shape(out), uop_ndim(out))) return NULL; /* slot 0 */
  k->root = root;
  uop *expr = root->op == OP_CONTIGUOUS ? root->src[0] : root;
  /* A reshape leaves the flat order alone, and so does an elementwise op (the cast of a half
   * matmul's result, a bias and a clamp) whose other operands are reshaped along: a kernel
   * ending in those computes the shape under them (a reduction's own dims, which the optimizer
   * tiles) and stores the same elements. */
  uop *under = tail_reduction(k, expr, TAIL_DEPTH), *flat = NULL;
  if (under && under != TAIL_OPERAND && under != expr && !(flat = tail_rebuild(k, expr, under))) tg_clear_error();
  if (flat) expr = flat; /* else the expression's own shape, as before */
  if (make_value_blocks(k, expr) < 0) return NULL;
  uop *src[8];
  int n = expr->nsrc;
  if (n > 8) return NULL;
  for (int i = 0; i < n; i++)
    if (!(src[i] = graph_rewrite_ex(expr->src[i], rules, k, true))) return NULL;
  if (expr->op == OP_VALUE) expr = value_rule(k, expr, NULL);
  else if (expr->op == OP_BUFFER || (expr != root && is_root(k->s, expr))) expr = param_rule(k, expr, NULL);
  else if (n) expr = uop_replace_src(expr, src, n);
  enum { MAX_VARS = 8 };
  uop *sink[1 + MAX_VARS] = {expr};
  int nv = expr ? kernel_vars(k, expr, sink + 1, MAX_VARS) : 0;
  if (nv < 0) return NULL;
  return uop_new(OP_SINK, root->dtype, sink, 1 + nv, uop_shape(expr), uop_ndim(expr));
}

/* ---- realized substitution */

static uop *realized_rule(void *ctx, uop *u, uop **cap) {
  (void)ctx, (void)cap;
  return u->op == OP_GRADFN ? u->src[0] : sym_view(uop_realized(u), u); /* GRADFN only matters to autograd */
}
/* DETACH only matters to autograd: kernels never see it */
static uop *strip_detach(void *ctx, uop *u, uop **cap) {
  (void)ctx, (void)u;
  return cap['x' - 'a'];
}
static const rule realized_rules_list[] = {{"(DETACH x)", strip_detach}, {"x", realized_rule}, {NULL, NULL}};

/* ---- the list */

/* Which buffers an item frees after it runs: the buffers this schedule made that nobody keeps,
 * at their last use. Memory then comes back while the schedule runs, and the free-block
 * cache hands it to the next buffer of that size (docs/architecture.md, "Memory"). */
static int plan_memory(schedule *out, sched *s, ptrmap *kept) {
  ptrmap last = {0}; /* buffer → index of the last item that reads or writes it + 1 */
  for (size_t i = 0; i < out->items.n; i++)
    for (int j = 0; j < out->items.v[i].nbufs; j++)
      if (ptrmap_put(&last, out->items.v[i].bufs[j], (void *)(uintptr_t)(i + 1)) < 0) return TG_ERR_NOMEM;
  int rc = 0;
  for (size_t r = 0; r < s->root_list.n && !rc; r++) {
    uop *buf = ptrmap_get(&s->roots, s->root_list.v[r]);
    size_t at = (size_t)(uintptr_t)ptrmap_get(&last, buf);
    if (!buf || !at || ptrmap_has(kept, buf)) continue;
    sched_item *it = &out->items.v[at - 1];
    uop **grown = realloc(it->release, sizeof(uop *) * (size_t)(it->nrelease + 1));
    if (!grown) rc = TG_ERR_NOMEM;
    else it->release = grown, it->release[it->nrelease++] = buf;
  }
  ptrmap_free(&last);
  return rc;
}

/* A copy of another root's (or a BUFFER's) value to r's device. */
static int add_copy(schedule *out, sched *s, uop *r, const device *dev, uop *buf) {
  kctx k = {.s = s, .root = r};
  uop *from = stored_input(&k, r->src[0]), **bufs = malloc(2 * sizeof *bufs);
  if (!from || !bufs) return free(bufs), TG_ERR_NOMEM;
  bufs[0] = buf, bufs[1] = from;
  sched_item it = {dev, NULL, bufs, 2, shape_numel(uop_shape(r), uop_ndim(r)), NULL, 0};
  if (VEC_PUSH(out->items, it) == 0) return 0;
  free(bufs);
  return TG_ERR_NOMEM;
}

/* The item computing root r (its buffer is made now, its memory when it runs), on r's device
 * (a value with none, made of constants, on the default one). */
static int add_item(schedule *out, sched *s, uop *r) {
  const device *dev = r->device == DEVICE_NONE ? s->dev : device_of_number(r->device);
  uop *buf = buffer_new_lazy(r->dtype, uop_shape(r), uop_ndim(r));
  if (!buf || ptrmap_put(&s->roots, r, buf) < 0) return TG_ERR_NOMEM;
  uop_set_device(buf, device_number(dev));
  if (r->op == OP_COPY) return add_copy(out, s, r, dev, buf);
  kctx k = {.s = s, .dev = dev};
  uop *ast = kernel_ast(&k, r);
  ptrmap_free(&k.value_index);
  if (ast && tg_debug() >= 3) fprintf(stderr, "kernel AST:\n"), uop_print(ast, stderr);
  int rc = !ast ? TG_ERR_NOMEM : tg_spec_checks() ? uop_spec_kernel(ast) : 0;
  sched_item it = {dev, ast, k.bufs.v, (int)k.bufs.n, shape_numel(uop_shape(r), uop_ndim(r)), NULL, 0};
  if (rc == 0 && VEC_PUSH(out->items, it) == 0) return 0;
  VEC_FREE(k.bufs);
  return rc ? rc : TG_ERR_NOMEM;
}

/* Roots whose buffer outlives the run: the targets, and what a tensor handle can still read
 * (not a kernel without inputs: its node may be a constant other graphs share). */
static int choose_kept(schedule *out, sched *s, uop *g, ptrmap *kept) {
  int rc = 0;
  for (size_t i = 0; i < out->items.n && !rc; i++) {
    uop *r = s->root_list.v[i], *buf = ptrmap_get(&s->roots, r), *old = ptrmap_get(&s->origin, r);
    bool target = false;
    for (int j = 0; j < g->nsrc && !target; j++) target = g->src[j] == r;
    uop *held = old ? old : r; /* before the layout rewrites: the node a handle holds */
    if (!buf || (!target && !atomic_load_explicit(&held->handles, memory_order_relaxed))) continue;
    rc = ptrmap_put(kept, buf, buf);
    const uop *ast = out->items.v[i].ast;
    if (!rc && (!ast || ast->src[0] != r) && (VEC_PUSH(out->keep, held) || VEC_PUSH(out->keep, buf))) rc = TG_ERR_NOMEM;
  }
  return rc;
}

/* The buffer holding target t (entry m->first of g), or for a sharded one a MULTI of its
 * shards' buffers (its realized value: tg_to_host gathers it, a later graph splits it). */
static uop *target_output(sched *s, uop *g, const multi_target *m, uop *t) {
  uop *bufs[MULTI_MAX];
  for (int d = 0; d < (m->n ? m->n : 1); d++) {
    uop *x = g->src[m->first + d];
    bufs[d] = x->op == OP_BUFFER ? x : ptrmap_get(&s->roots, x);
  }
  if (!m->n) return bufs[0];
  int64_t arg[TG_MAX_DIMS + 1] = {m->axis};
  memcpy(arg + 1, uop_shape(t), sizeof(int64_t) * (size_t)uop_ndim(t));
  return uop_new(OP_MULTI, t->dtype, bufs, m->n, arg, 1 + uop_ndim(t));
}

int schedule_build(uop **targets, int n, schedule *out) {
  static rule_table *_Atomic table;
  rule_table *realized_rules = rule_table_once(&table, "realized", realized_rules_list);
  *out = (schedule){.mark = uop_pool_mark()};
  sched s = {.dev = device_default()};
  ptrmap kept = {0};
  uop **order = NULL;
  multi_target *map = NULL;
  int rc = 0, norder = 0;
  if (!s.dev) { rc = tg_error_status_or(TG_ERR_DEVICE); goto done; }
  uop *sink = uop_new(OP_SINK, TG_BOOL, targets, n, NULL, 0);
  uop *g = sink ? graph_rewrite_ex(sink, realized_rules, NULL, true) : NULL;
  if (!g) { rc = tg_set_error(TG_ERR_NOMEM, "schedule: out of memory"); goto done; }
  if (!(map = malloc(sizeof *map * (size_t)(n ? n : 1)))) { rc = tg_set_error(TG_ERR_NOMEM, "schedule: out of memory"); goto done; }
  if ((rc = multi_split(&g, map)) < 0) goto done; /* sharded targets: one per device (multi.c) */
  if (tg_spec_checks() && (rc = uop_spec_tensor(g)) < 0) goto done;
  if ((norder = layout_rewrite(&g, s.dev, &s.origin, &order)) < 0 || (norder = share_stored(&g, &s.origin, &order, norder)) < 0) { rc = tg_set_error(TG_ERR_NOMEM, "schedule: out of memory"); goto done; }
  for (int i = 0; i < g->nsrc; i++)
    if (g->src[i]->op != OP_BUFFER) add_root(&s, g->src[i]);
  for (int i = 0; i < norder; i++)
    for (int j = 0; j < order[i]->nsrc; j++)
      ptrmap_put(&s.users, order[i]->src[j], (void *)((uintptr_t)ptrmap_get(&s.users, order[i]->src[j]) + 1));
  choose_roots(&s);
  s.root_list.n = 0; /* from here: the roots in the order their items run */
  for (int i = 0; i < norder && rc == 0; i++)
    if (is_root(&s, order[i]) && (rc = VEC_PUSH(s.root_list, order[i])) == 0) rc = add_item(out, &s, order[i]);
  if (!rc && !(out->outputs = malloc(sizeof(uop *) * (size_t)(n ? n : 1)))) rc = TG_ERR_NOMEM;
  for (int i = 0; i < n && rc == 0; i++)
    if (!(out->outputs[out->noutputs++] = target_output(&s, g, &map[i], targets[i])) && map[i].n) rc = TG_ERR_NOMEM;
  if (!rc) rc = choose_kept(out, &s, g, &kept);
  if (!rc) rc = plan_memory(out, &s, &kept);
  if (rc == TG_ERR_NOMEM && !tg_last_error()[0]) tg_set_error(rc, "schedule: out of memory");
done:
  free(order), free(map);
  ptrmap_free(&kept);
  ptrmap_free(&s.roots), ptrmap_free(&s.owner), ptrmap_free(&s.reached), ptrmap_free(&s.users), ptrmap_free(&s.origin);
  VEC_FREE(s.root_list);
  return rc;
}

void schedule_free(schedule *s) {
  for (size_t i = 0; i < s->items.n; i++) free(s->items.v[i].bufs), free(s->items.v[i].release);
  VEC_FREE(s->items);
  VEC_FREE(s->keep);
  free(s->outputs);
  uop_pool_release(s->mark);
  *s = (schedule){0};
}
