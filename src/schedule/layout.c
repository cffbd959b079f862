/* layout.c — layout rewrites: how the inputs of a kernel lie in memory, chosen from the
 * capabilities of the device that runs it, on the tensor graph before fusion. tensor/ and nn/
 * build plain graphs (a matmul is a sum of a broadcast product); these rules decide what a
 * device wants stored differently, so matmuls made by autograd get the same treatment as the
 * ones a user writes. No rule changes a value, except that chunking sums in another order.
 *
 *   panels  a large product-sum (a matmul) reads the operand that varies along the result's
 *           innermost axis through k-major panels of two vector registers' width;
 *   chunks  a reduction over the batch and other axes of a product of re-read inputs larger
 *           than half the L2 is summed per chunk of images, then over the partial sums;
 *   converted  a product's re-read operand converted from a 16-bit float is converted once
 *           and stored (host devices convert those in software);
 *   split   a reduction over an axis a reshape merged from a computed value's axes is summed
 *           over those axes (split_reduce.c).
 *
 * All are rules on REDUCE_AXIS (rules[] below), each a list of choices with the heuristic's
 * first; under BEAM the others are timed too (layout_search.c). docs/architecture.md, "Layout
 * rewrites"; docs/optimizer.md, "BEAM over layouts". */
#include <stdlib.h>
#include <string.h>

#include "schedule/schedule.h"
#include "schedule/layout.h"

#include "codegen/codegen.h"
#include "device/device.h"
#include "tensor/tensor.h"
#include "uop/dtype.h"

/* Products with fewer multiply-adds are not worth timing: their choices cost less than the
 * search's noise (a few microseconds), and each search compiles a kernel per choice. */
enum { SEARCH_MIN_MACS = 1 << 20 };

/* ---- view helpers (NULL in, NULL out) */

static uop *view(uop_op op, uop *x, const int64_t *arg, int narg) {
  return x ? uop_new(op, x->dtype, &x, 1, arg, narg) : NULL;
}

static uop *reshape(uop *x, const int64_t *shape, int nd) { return x ? ushape_reshape(x, shape, nd) : NULL; }
static uop *sum_axes(uop *x, const int *axes, int n) { return x ? ureduce(x, OP_ADD, axes, n) : NULL; }

/* x permuted so that axis i of the result is axis perm[i] of x: a RESHAPE when only unit axes
 * move (the flat order stays), nothing when the order stays. */
static uop *permute(uop *x, const int *perm) {
  if (!x) return NULL;
  int nd = uop_ndim(x), last = -1;
  int64_t arg[TG_MAX_DIMS], shape[TG_MAX_DIMS];
  bool in_order = true;
  for (int i = 0; i < nd; i++) {
    arg[i] = perm[i], shape[i] = uop_shape(x)[perm[i]];
    if (shape[i] == 1) continue;
    in_order &= perm[i] > last, last = perm[i];
  }
  return in_order ? reshape(x, shape, nd) : view(OP_PERMUTE, x, arg, nd);
}

/* ---- converted operands */

/* u's view chain rebuilt over `base` in place of the node it starts from. */
static uop *rebase(uop *u, uop *base) {
  if (!uop_is_movement(u) || !base) return base;
  uop *src = rebase(u->src[0], base);
  return src ? uop_replace_src(u, &src, 1) : NULL;
}

static bool repeats(uop *e) {
  return e->op == OP_EXPAND && shape_numel(uop_shape(e), uop_ndim(e)) > shape_numel(uop_shape(e->src[0]), uop_ndim(e));
}

static bool is_product_sum(uop *u) { return u->arg[0] == OP_ADD && u->src[0]->op == OP_MUL; }

/* Adds c to the n choices in out unless it is there already. */
static void add_choice(int64_t *out, int *n, int64_t c) {
  for (int i = 0; i < *n; i++)
    if (out[i] == c) return;
  if (*n < LAYOUT_MAX_CHOICES) out[(*n)++] = c;
}

/* The CAST from a 16-bit float that the repeated operand e reads, or NULL. */
static uop *half_conversion(uop *e) {
  uop *c = e;
  while (uop_is_movement(c)) c = c->src[0];
  return repeats(e) && c->op == OP_CAST && dtype_is_half(c->src[0]->dtype) ? c : NULL;
}

/* A product-sum reads each broadcast operand once per element of the other's axes. An operand
 * converted from a 16-bit float (in software on a host device: a dozen integer ops per load,
 * inside the reduction) is converted once and stored in the product's dtype instead (1), or
 * converted per load (0). */
static int converted_choices(const device_caps *caps, uop *u, int64_t *out) {
  if (caps->max_local_size > 1 || !is_product_sum(u)) return 0;
  if (!half_conversion(u->src[0]->src[0]) && !half_conversion(u->src[0]->src[1])) return 0;
  out[0] = 1, out[1] = 0;
  return 2;
}

static uop *converted_apply(const device_caps *caps, uop *u, int64_t choice) {
  int64_t choices[LAYOUT_MAX_CHOICES];
  if (!choice || !converted_choices(caps, u, choices)) return NULL;
  uop *mul = u->src[0], *src[2];
  for (int i = 0; i < 2; i++) {
    uop *c = half_conversion(src[i] = mul->src[i]);
    if (c && !(src[i] = rebase(mul->src[i], view(OP_CONTIGUOUS, c, NULL, 0)))) return NULL;
  }
  uop *product = uop_replace_src(mul, src, 2);
  return product ? uop_replace_src(u, &product, 1) : NULL;
}

/* ---- panels */

typedef struct product {
  uop *x0, *y0;     /* the operands before their broadcast: y0 varies along `along`, x0 not */
  int nd, reduce, along;
  const int64_t *shape; /* of the product */
} product;

/* u = REDUCE_AXIS(ADD, one axis) of MUL(EXPAND x0, EXPAND y0) where x0 is broadcast along the
 * result's innermost axis that y0 varies along, and y0 along an axis x0 varies along: a
 * matmul, with x0 the left operand and y0 the right one. rows: the left operand's rows. */
static bool match_product(uop *u, product *p, int64_t *rows) {
  if (u->arg[0] != OP_ADD || u->narg != 2 || u->src[0]->op != OP_MUL) return false;
  uop *mul = u->src[0], *a = mul->src[0], *b = mul->src[1];
  if (a->op != OP_EXPAND || b->op != OP_EXPAND) return false;
  p->nd = uop_ndim(mul), p->reduce = (int)u->arg[1], p->shape = uop_shape(mul), p->along = -1;
  for (int i = p->nd - 1; i >= 0 && p->along < 0; i--)
    if (i != p->reduce && p->shape[i] > 1) p->along = i;
  if (p->along < 0) return false;
  bool a_varies = uop_shape(a->src[0])[p->along] > 1;
  p->x0 = a_varies ? b->src[0] : a->src[0], p->y0 = a_varies ? a->src[0] : b->src[0];
  const int64_t *xs = uop_shape(p->x0), *ys = uop_shape(p->y0);
  if (xs[p->along] != 1 || ys[p->along] != p->shape[p->along]) return false;
  if (xs[p->reduce] != p->shape[p->reduce] || ys[p->reduce] != p->shape[p->reduce]) return false;
  *rows = 1;
  for (int i = 0; i < p->nd; i++)
    if (ys[i] == 1 && xs[i] > 1) *rows *= xs[i];
  return *rows > 1;
}

/* Columns per panel for an (n, k) @ (k, m) product, or 0 to read the right operand in place.
 * A large product reads it down its columns: one row per step of k, so a new page (past the
 * TLB's reach) and, for power-of-two widths, the same few cache sets every step. Like BLAS,
 * it is first copied into panels of w columns stored k-major, which the register tile then
 * reads as one stream; w is two vector registers, the tile's row width. The copy costs k*m
 * moves against n*k*m multiply-adds. Devices of scalar work-items read in place. */
static int64_t panel_width(const device_caps *caps, int64_t n, int64_t k, int64_t m, int nd, tg_dtype dt) {
  if (caps->max_local_size > 1) return 0;
  int64_t w = 2 * caps->vector_bytes / (int64_t)tg_dtype_size(dt);
  bool big = n >= 32 && k >= 32 && m >= 4 * w && (double)n * (double)k * (double)m >= (double)(1 << 24);
  return big && nd + 1 <= TG_MAX_DIMS ? w : 0;
}

/* in (a shape of the product's rank) with the `along` axis split in place into (outer, w),
 * or into (1, 1) where in is broadcast along it. */
static void split_shape(const product *p, const int64_t *in, int64_t outer, int64_t w, int64_t *out) {
  int k = 0;
  for (int i = 0; i < p->nd; i++) {
    if (i != p->along) out[k++] = in[i];
    else out[k++] = in[i] == 1 ? 1 : outer, out[k++] = in[i] == 1 ? 1 : w;
  }
}

/* The order the product is summed in: the split shape with w moved last (a register tile row
 * of w lanes). The reduce axis keeps its index; perm[i] is the split axis at position i. */
static void sum_order(const product *p, int *perm) {
  int k = 0;
  for (int i = 0; i <= p->nd; i++)
    if (i != p->along + 1) perm[k++] = i;
  perm[k] = p->along + 1;
}

/* The right operand stored in panels: padded to whole panels, split, laid out as (other axes,
 * panel, k, w) and stored; returned in the sum's order. */
static uop *panels_of(const product *p, int64_t mp, int64_t w) {
  int nd = p->nd, stored[TG_MAX_DIMS + 1], at[TG_MAX_DIMS + 1], order[TG_MAX_DIMS + 1], back[TG_MAX_DIMS + 1], n = 0;
  int reduce = p->reduce < p->along ? p->reduce : p->reduce + 1; /* in the split shape */
  int64_t pad[2 * TG_MAX_DIMS] = {0}, padded[TG_MAX_DIMS], split[TG_MAX_DIMS + 1];
  memcpy(padded, uop_shape(p->y0), sizeof(int64_t) * (size_t)nd);
  padded[p->along] = mp, pad[2 * p->along + 1] = mp - p->shape[p->along];
  uop *y = mp == p->shape[p->along] ? p->y0 : view(OP_PAD, p->y0, pad, 2 * nd);
  split_shape(p, padded, mp / w, w, split);
  for (int i = 0; i <= nd; i++)
    if (i != p->along && i != p->along + 1 && i != reduce) stored[n++] = i;
  stored[n++] = p->along, stored[n++] = reduce, stored[n++] = p->along + 1;
  for (int i = 0; i <= nd; i++) at[stored[i]] = i;
  sum_order(p, order);
  for (int i = 0; i <= nd; i++) back[i] = at[order[i]];
  return permute(view(OP_CONTIGUOUS, permute(reshape(y, split, nd + 1), stored), NULL, 0), back);
}

/* Columns per panel: the heuristic's width (panel_width) first; for a product large enough to
 * time, also in place and panels of one, two and four vectors. */
static int panel_choices(const device_caps *caps, uop *u, int64_t *out) {
  product p;
  int64_t rows;
  if (caps->max_local_size > 1 || !match_product(u, &p, &rows)) return 0;
  int64_t k = p.shape[p.reduce], m = p.shape[p.along], lanes = caps->vector_bytes / (int64_t)tg_dtype_size(u->dtype);
  int n = 0;
  add_choice(out, &n, panel_width(caps, rows, k, m, p.nd, u->dtype));
  if ((double)rows * (double)k * (double)m < SEARCH_MIN_MACS || p.nd + 1 > TG_MAX_DIMS) return n;
  const int64_t widths[] = {0, lanes, 2 * lanes, 4 * lanes};
  for (size_t i = 0; i < sizeof widths / sizeof *widths; i++)
    if (widths[i] <= m) add_choice(out, &n, widths[i]);
  return n;
}

static uop *panel_apply(const device_caps *caps, uop *u, int64_t w) {
  product p;
  int64_t rows;
  if (w <= 0 || !match_product(u, &p, &rows) || p.nd + 1 > TG_MAX_DIMS) return NULL;
  int64_t m = p.shape[p.along];
  int64_t mp = (m + w - 1) / w * w, split[TG_MAX_DIMS + 1], xsplit[TG_MAX_DIMS + 1], sum_shape[TG_MAX_DIMS + 1];
  int order[TG_MAX_DIMS + 1];
  split_shape(&p, p.shape, mp / w, w, split);
  split_shape(&p, uop_shape(p.x0), 1, 1, xsplit);
  sum_order(&p, order);
  for (int i = 0; i <= p.nd; i++) sum_shape[i] = split[order[i]];
  uop *x = permute(reshape(p.x0, xsplit, p.nd + 1), order), *y = panels_of(&p, mp, w);
  x = x ? ushape_expand(x, sum_shape, p.nd + 1) : NULL;
  y = y ? ushape_expand(y, sum_shape, p.nd + 1) : NULL;
  if (!x || !y) return NULL;
  int axis = p.reduce;
  uop *sum = sum_axes(uop_new2(OP_MUL, u->src[0]->dtype, x, y), &axis, 1);
  uop *converted = sum ? converted_apply(caps, sum, 1) : NULL; /* x, when converted: y's panels are */
  int64_t out[TG_MAX_DIMS];
  memcpy(out, uop_shape(u), sizeof(int64_t) * (size_t)p.nd);
  out[p.along] = mp; /* w moved past unit and reduced axes only: the flat order is the same */
  uop *r = reshape(converted ? converted : sum, out, p.nd);
  if (mp == m) return r;
  /* the padded product is stored whole: computed under the shrink, its index math would gather */
  int64_t keep[2 * TG_MAX_DIMS];
  for (int i = 0; i < p.nd; i++) keep[2 * i] = 0, keep[2 * i + 1] = uop_shape(u)[i];
  return view(OP_SHRINK, view(OP_CONTIGUOUS, r, NULL, 0), keep, 2 * p.nd);
}

/* ---- chunks */

/* Bytes of the node a view chain reads, and whether the chain repeats its elements. */
static double read_bytes(uop *u, bool *expands) {
  for (; uop_is_movement(u); u = u->src[0]) *expands |= repeats(u);
  return (double)shape_numel(uop_shape(u), uop_ndim(u)) * (double)tg_dtype_size(u->dtype);
}

/* The largest divisor of n that is at most c (1 when c < 1). */
static int64_t divisor_at_most(int64_t n, int64_t c) {
  for (c = c < n ? c : n; c > 1; c--)
    if (n % c == 0) return c;
  return 1;
}

/* For a reduction over the batch (axis 0) and other axes of a product of re-read inputs (a
 * conv weight gradient): the images whose inputs fit in half the L2 (*batch: the batch), or -1
 * when the rule does not apply. */
static int64_t images_in_half_l2(const device_caps *caps, uop *u, int64_t *batch) {
  if (!is_product_sum(u) || u->narg < 3 || caps->max_local_size > 1) return -1;
  bool over_batch = false, ea = false, eb = false;
  for (int i = 1; i < u->narg; i++) over_batch |= u->arg[i] == 0;
  uop *mul = u->src[0];
  int64_t n = *batch = uop_shape(mul)[0];
  if (!over_batch || n < 2 || uop_ndim(mul) + 1 > TG_MAX_DIMS) return -1;
  double image = (read_bytes(mul->src[0], &ea) + read_bytes(mul->src[1], &eb)) / (double)n;
  if (!ea || !eb) return -1;
  return image > 0 ? (int64_t)((double)caps->l2_bytes / 2 / image) : n;
}

/* Images per partial sum, or 0 to sum in one kernel. Summed over the whole batch at once, the
 * kernel walks all of its inputs once per register tile of outputs; summed per chunk of images
 * whose inputs fit in half the L2, each chunk is read from memory once and the partial sums are
 * added by a second kernel. The heuristic: the largest such divisor of the batch; for a product
 * large enough to time, also one kernel and chunks of about twice and half as many images. */
static int chunk_choices(const device_caps *caps, uop *u, int64_t *out) {
  int64_t n, fit = images_in_half_l2(caps, u, &n);
  if (fit < 0) return 0;
  int count = 0;
  const int64_t tries[] = {divisor_at_most(n, fit), n, divisor_at_most(n, 2 * fit), divisor_at_most(n, fit / 2)};
  for (size_t i = 0; i < sizeof tries / sizeof *tries; i++) {
    add_choice(out, &count, tries[i] < n ? tries[i] : 0);
    if (shape_numel(uop_shape(u->src[0]), uop_ndim(u->src[0])) < SEARCH_MIN_MACS) break;
  }
  return count;
}

static uop *chunk_apply(const device_caps *caps, uop *u, int64_t chunk) {
  int64_t n;
  if (chunk <= 0 || images_in_half_l2(caps, u, &n) < 0 || n % chunk) return NULL;
  uop *mul = u->src[0];
  int nd = uop_ndim(mul), axes[TG_MAX_DIMS], na = 0;
  int64_t split[TG_MAX_DIMS], flat[2];
  split[0] = uop_shape(mul)[0] / chunk, split[1] = chunk;
  memcpy(split + 2, uop_shape(mul) + 1, sizeof(int64_t) * (size_t)(nd - 1));
  axes[na++] = 1;
  for (int i = 1; i < u->narg; i++)
    if (u->arg[i] != 0) axes[na++] = (int)u->arg[i] + 1;
  uop *part = sum_axes(reshape(mul, split, nd + 1), axes, na); /* (batch/chunk, 1, outputs) */
  /* the partials flat, (batch/chunk, outputs): their sum runs in whole vectors */
  flat[0] = split[0], flat[1] = shape_numel(uop_shape(u), nd);
  int first = 0;
  return reshape(sum_axes(reshape(part, flat, 2), &first, 1), uop_shape(u), nd);
}

/* ---- the pass */

/* Each rule gets the previous one's result while that is still a reduction (panels, which
 * are not, convert the operand of the sum they make). */
static const layout_rule rules[] = {
    {"panels", panel_choices, panel_apply},
    {"converted", converted_choices, converted_apply},
    {"chunks", chunk_choices, chunk_apply},
    {"split", split_reduce_choices, split_reduce_apply}, /* split_reduce.c */
};

static const device *device_for(uop *u, const device *dflt) {
  return u->device == DEVICE_NONE || u->device == DEVICE_MIXED ? dflt : device_of_number(u->device);
}

/* A reduction with each rule's choice applied: the heuristic's, or under BEAM the fastest. */
static uop *apply_rules(uop *now, const device *dflt) {
  const device *dev = device_for(now, dflt);
  for (size_t r = 0; dev && now && now->op == OP_REDUCE_AXIS && r < sizeof rules / sizeof *rules; r++) {
    int64_t choices[LAYOUT_MAX_CHOICES];
    int n = rules[r].choices(&dev->caps, now, choices);
    if (!n) continue;
    int64_t pick = n > 1 && layout_searching(dev) ? layout_search(&rules[r], dev, now, choices, n) : choices[0];
    uop *better = rules[r].apply(&dev->caps, now, pick);
    if (better) now = better;
  }
  return now;
}

/* The nodes of walk (sources first), rebuilt (graph_rebuild); the new root or NULL. */
static uop *rebuild_in_order(uop **walk, int n, uop *g, const rebuild_fns *f, ptrmap *origin) {
  ptrmap done = {0}; /* old node -> new node, where they differ */
  uop *result = g;
  for (int i = 0; i < n && result; i++) {
    uop *u = walk[i], *now = u, **src = NULL;
    for (int j = 0; j < u->nsrc && result; j++) {
      uop *x = f->source ? f->source(f->ctx, u, u->src[j]) : u->src[j], *to = done.count ? ptrmap_get(&done, x) : NULL;
      if (to) x = to;
      if (x == u->src[j]) continue;
      if (!src && (src = malloc(sizeof(uop *) * (size_t)u->nsrc))) memcpy(src, u->src, sizeof(uop *) * (size_t)u->nsrc);
      if (src) src[j] = x; /* from the first changed source on, a copy */
      else result = NULL;
    }
    if (src && result) now = uop_replace_src(u, src, u->nsrc);
    free(src);
    if (now && result && f->node) now = f->node(f->ctx, now);
    if (!now || !result) { result = NULL; break; }
    if (now == u) continue;
    uop *held = ptrmap_get(origin, u) ? ptrmap_get(origin, u) : u; /* the node a tensor handle holds */
    if (ptrmap_put(&done, u, now) < 0) result = NULL;
    else if (atomic_load_explicit(&held->handles, memory_order_relaxed) && ptrmap_put(origin, now, held) < 0) result = NULL;
    if (u == g) result = now;
  }
  ptrmap_free(&done);
  return result;
}

int graph_rebuild(uop **g, uop ***order, int n, uop **walk, const rebuild_fns *f, ptrmap *origin) {
  uop *now = rebuild_in_order(walk ? walk : *order, n, *g, f, origin);
  if (now == *g) return n;
  free(*order), *order = NULL;
  if (!now) return -1;
  *g = now;
  return uop_toposort(now, order);
}

static uop *layout_node(void *ctx, uop *u) { return u->op == OP_REDUCE_AXIS ? apply_rules(u, ctx) : u; }

int layout_rewrite(uop **g, const device *dflt, ptrmap *origin, uop ***order) {
  int n = uop_toposort(*g, order);
  if (n < 0 || layout_probing()) return n; /* a probe has its layout already */
  rebuild_fns f = {NULL, layout_node, (void *)dflt};
  return graph_rebuild(g, order, n, NULL, &f, origin);
}
