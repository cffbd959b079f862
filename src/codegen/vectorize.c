/* vectorize.c — vector lanes as types: the two rule tables between lowering and linearizing.
 *
 * Lowering renders the lane axis as a RANGE of kind RANGE_LANE: any node that depends on it
 * holds one value per lane. `vectorize` makes that explicit in the IR, as tinygrad's
 * dtype.vec(n): every such node gets vcount = the lane count, the lane range becomes the
 * vector (0, 1, ..., w-1), a scalar operand of a vector op is broadcast by VECTORIZE(x), and a
 * reduction over the lanes becomes a vector accumulator followed by a horizontal combine of
 * its lanes (GEP). A vector LOAD/STORE with arg [lanes, aligned, checked] is a contiguous
 * access at a scalar base; one without arg is a gather/scatter of a vector index.
 *
 * `devectorize` then splits, lane by lane, every vector node its renderer has no vector form
 * for (the renderer's predicate): VECTORIZE of scalar ops on the lanes (GEP) of the sources;
 * a store becomes one store per lane; GEP of a VECTORIZE folds. A renderer thus only ever
 * sees vector nodes it can render as vectors, and never infers lanes itself.
 *
 * Masks and gates (a LOAD's src[2], a STORE's src[3]) and a WHERE's condition may stay scalar
 * under a vector node: one value for every lane. */
#include <stdlib.h>

#include "codegen/codegen.h"
#include "uop/rewrite.h"

static bool is_lane_range(const uop *u) { return u->op == OP_RANGE && u->arg[1] == RANGE_LANE; }

/* x as a vector of w lanes (a scalar is broadcast; w = 0: x itself). */
static uop *broadcast(uop *x, int w) {
  if (!w || x->vcount) return x;
  return uop_new_vec(OP_VECTORIZE, (tg_dtype)x->dtype, w, &x, 1, NULL, 0);
}

static int max_lanes(uop *const *src, int n) {
  int w = 0;
  for (int i = 0; i < n; i++)
    if (src[i]->vcount > w) w = src[i]->vcount;
  return w;
}

/* u with vcount w and its sources broadcast to w, except the first `keep` ones and the
 * sources from index `scalar_from` on (masks, gates, conditions); NULL when nothing changes. */
static uop *widen(uop *u, int w, int keep, int scalar_from) {
  uop *src[KS_MAX_UPCAST + KS_MAX_AXES];
  if (u->nsrc > (int)(sizeof src / sizeof *src)) return NULL;
  bool changed = u->vcount != w;
  for (int i = 0; i < u->nsrc; i++) {
    src[i] = i < keep || i >= scalar_from ? u->src[i] : broadcast(u->src[i], w);
    changed |= src[i] != u->src[i];
  }
  return changed ? uop_new_vec((uop_op)u->op, (tg_dtype)u->dtype, w, src, u->nsrc, u->arg, u->narg) : NULL;
}

/* Lane l of x (a scalar is every lane's value). */
static uop *lane_of(uop *x, int l) {
  if (!x->vcount) return x;
  int64_t at = l;
  return uop_new(OP_GEP, (tg_dtype)x->dtype, &x, 1, &at, 1);
}

/* ---------------------------------------------------------------- vectorize */

/* The lane range: the vector (0, 1, ..., w-1). */
static uop *lane_numbers(void *ctx, uop *u, uop **cap) {
  (void)ctx, (void)cap;
  if (!is_lane_range(u)) return NULL;
  int w = (int)uop_const_ivalue(u->src[0]);
  uop *lanes[KS_MAX_UPCAST];
  if (w < 2 || w > KS_MAX_UPCAST) return NULL;
  for (int l = 0; l < w; l++) lanes[l] = uop_idx(l);
  return uop_new_vec(OP_VECTORIZE, TG_INT64, w, lanes, w, NULL, 0);
}

/* An ALU op on any vector source is a vector op (a WHERE's condition may stay scalar). */
static uop *vector_alu(void *ctx, uop *u, uop **cap) {
  (void)ctx, (void)cap;
  if (!uop_is_alu(u)) return NULL;
  int w = max_lanes(u->src, u->nsrc);
  return w ? widen(u, w, u->op == OP_WHERE, u->nsrc) : NULL;
}

/* LOAD(g, idx[, mask]): contiguous (arg[0] lanes at a scalar base) or a gather of idx. */
static uop *vector_load(void *ctx, uop *u, uop **cap) {
  (void)ctx, (void)cap;
  int w = u->narg ? (int)u->arg[0] : max_lanes(u->src + 1, u->nsrc - 1);
  return w ? widen(u, w, u->narg ? 2 : 1, 2) : NULL;
}

/* STORE(g, idx, value[, gate]): contiguous, or a scatter of idx. */
static uop *vector_store(void *ctx, uop *u, uop **cap) {
  (void)ctx, (void)cap;
  int w = u->narg ? (int)u->arg[0] : max_lanes(u->src + 1, u->nsrc - 1);
  return w ? widen(u, w, u->narg ? 2 : 1, 3) : NULL;
}

/* REDUCE(bodies..., ranges...): a vector accumulator for vector bodies; one over the lanes
 * (the lane vector among its ranges) accumulates lanes apart, then combines them in order
 * (the first arg[2] when the rest are padding). */
static uop *vector_reduce(void *ctx, uop *u, uop **cap) {
  (void)ctx, (void)cap;
  int nb = reduce_nbody(u), lanes = 0, nr = 0;
  uop *src[KS_MAX_UPCAST + KS_MAX_AXES];
  if (u->nsrc > (int)(sizeof src / sizeof *src)) return NULL;
  for (int i = nb; i < u->nsrc; i++)
    if (u->src[i]->op == OP_VECTORIZE) lanes = u->src[i]->vcount;
  if (!lanes) {
    int w = max_lanes(u->src, nb);
    return w ? widen(u, w, 0, nb) : NULL;
  }
  for (int i = 0; i < nb; i++) src[nr++] = broadcast(u->src[i], lanes);
  for (int i = nb; i < u->nsrc; i++)
    if (u->src[i]->op != OP_VECTORIZE) src[nr++] = u->src[i];
  int64_t arg[2] = {u->arg[0], nb};
  uop *acc = uop_new_vec(OP_REDUCE, (tg_dtype)u->dtype, lanes, src, nr, arg, 2);
  int n = u->narg > 2 && u->arg[2] > 0 && u->arg[2] < lanes ? (int)u->arg[2] : lanes;
  uop *out = NULL;
  for (int l = 0; l < n; l++) out = out ? uop_new2((uop_op)u->arg[0], (tg_dtype)u->dtype, out, lane_of(acc, l)) : lane_of(acc, l);
  return out;
}

static const rule vectorize_rules[] = {
    {"(RANGE x)", lane_numbers},
    {"(LOAD ...)", vector_load},
    {"(STORE ...)", vector_store},
    {"(REDUCE ...)", vector_reduce},
    {"x", vector_alu},
    {NULL, NULL},
};

uop *vectorize(uop *sink) {
  static rule_table *_Atomic table;
  return graph_rewrite(sink, rule_table_once(&table, "vectorize", vectorize_rules), NULL);
}

/* ---------------------------------------------------------------- devectorize */

/* GEP(VECTORIZE(x0..), l) → xl; of a broadcast VECTORIZE(x) → x. */
static uop *fold_gep(void *ctx, uop *u, uop **cap) {
  (void)ctx;
  uop *v = cap['v' - 'a'];
  return v->nsrc == 1 ? v->src[0] : u->arg[0] < v->nsrc ? v->src[u->arg[0]] : NULL;
}

/* Element index of lane l of a contiguous (or strided) access at base; a checked load's lanes are
 * clamped into the buffer (a lane past it is padding: any element will do). */
static uop *lane_index(uop *access, uop *base, int l) {
  uop *i = uop_add(base, uop_idx(l * load_lane_stride(access)));
  if (access->op != OP_LOAD || access->narg < 3 || !access->arg[2]) return i;
  uop *last = uop_idx(access->src[0]->arg[1] - 1);
  i = uop_alu(OP_MAX, i, uop_idx(0));
  return uop_alu(OP_SUB, last, uop_alu(OP_MAX, uop_alu(OP_SUB, last, i), uop_idx(0)));
}

/* Lane l of a vector node as a scalar node: the same op on its sources' lanes. */
static uop *scalar_lane(uop *u, int l) {
  uop *src[KS_MAX_UPCAST + KS_MAX_AXES];
  int n = u->nsrc;
  bool memory = u->op == OP_LOAD || u->op == OP_STORE;
  for (int i = 0; i < n; i++) {
    bool shared = u->op == OP_REDUCE && i >= reduce_nbody(u); /* its loops */
    src[i] = shared || (memory && i == 0) ? u->src[i] : lane_of(u->src[i], l);
  }
  if (memory && u->narg) src[1] = lane_index(u, u->src[1], l);
  int narg = memory ? 0 : u->op == OP_REDUCE ? 2 : u->narg;
  return uop_new((uop_op)u->op, (tg_dtype)u->dtype, src, n, u->arg, narg);
}

/* A vector node the renderer has no vector form for, lane by lane: VECTORIZE of the lanes
 * (stores: all of them, in lane order, under one SINK). A WMMA stays whole: its 4 lanes are
 * one warp-wide op (the GPU renderers read them with GEP). */
static uop *split_lanes(void *ctx, uop *u, uop **cap) {
  (void)cap;
  const vector_forms *forms = ctx;
  int w = u->vcount;
  if (!w || u->op == OP_VECTORIZE || u->op == OP_GEP || u->op == OP_WMMA || (forms->ok && forms->ok(u))) return NULL;
  if (u->nsrc > KS_MAX_UPCAST + KS_MAX_AXES || w > KS_MAX_UPCAST) return NULL;
  uop *lanes[KS_MAX_UPCAST];
  for (int l = 0; l < w; l++) lanes[l] = scalar_lane(u, l);
  if (u->op == OP_STORE) return uop_new(OP_SINK, TG_BOOL, lanes, w, NULL, 0);
  return uop_new_vec(OP_VECTORIZE, (tg_dtype)u->dtype, w, lanes, w, NULL, 0);
}

static const rule devectorize_rules[] = {
    {"(GEP v=(VECTORIZE ...))", fold_gep},
    {"x", split_lanes},
    {NULL, NULL},
};

uop *devectorize(uop *sink, const vector_forms *forms) {
  static rule_table *_Atomic table;
  return graph_rewrite(sink, rule_table_once(&table, "devectorize", devectorize_rules), (void *)forms);
}
