/* lower.c — from a kernel AST (tensor ops over PARAMs) to a kernel graph of RANGE loops,
 * index math, LOAD, STORE and REDUCE.
 *
 * The pass is one rule: INDEX(x, i0..in-1, valid) — "the element of x at these indices,
 * meaningful where valid" — is pushed down through x by a per-op lowering function
 * (lowerers[] below): views turn into index arithmetic, elementwise ops distribute, a
 * reduction opens new ranges, and a PARAM becomes a LOAD. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "codegen/codegen.h"
#include "runtime/helpers.h"
#include "tensor/tensor.h"
#include "uop/symbolic.h"

typedef struct lower_ctx {
  int next_range;
} lower_ctx;

static uop *range(lower_ctx *c, int64_t end, int kind) {
  int64_t arg[2] = {c->next_range++, kind};
  uop *e = uop_idx(end);
  return uop_new(OP_RANGE, TG_INT64, &e, 1, arg, 2);
}

static uop *make_index(uop *x, uop **idx, int n, uop *valid) {
  uop *src[TG_MAX_DIMS + 2];
  src[0] = x;
  memcpy(src + 1, idx, sizeof(uop *) * (size_t)n);
  src[n + 1] = valid;
  return uop_new(OP_INDEX, x->dtype, src, n + 2, NULL, 0);
}

/* Row-major flat index of idx in shape. */
static uop *flat_index(uop **idx, const int64_t *shape, int n) {
  uop *flat = uop_idx(0);
  for (int i = 0; i < n; i++) flat = uop_add(uop_mul(flat, uop_idx(shape[i])), idx[i]);
  return flat;
}

static uop *land(uop *a, uop *b) { return uop_alu(OP_AND, a, b); }

typedef uop *(*lowerer)(lower_ctx *c, uop *x, uop **idx, int n, uop *valid);

static uop *lower_alu(lower_ctx *c, uop *x, uop **idx, int n, uop *valid) {
  (void)c;
  uop *src[3];
  for (int i = 0; i < x->nsrc; i++) src[i] = make_index(x->src[i], idx, n, valid);
  return uop_replace_src(x, src, x->nsrc);
}

static uop *lower_param(lower_ctx *c, uop *x, uop **idx, int n, uop *valid) {
  (void)c;
  uop *g = uop_new(OP_DEFINE_GLOBAL, x->dtype, NULL, 0, x->arg, 1);
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

static uop *lower_reshape(lower_ctx *c, uop *x, uop **idx, int n, uop *valid) {
  (void)c;
  uop *in = x->src[0], *out[TG_MAX_DIMS];
  int m = uop_ndim(in);
  const int64_t *s = uop_shape(in);
  uop *flat = flat_index(idx, uop_shape(x), n);
  int64_t stride = 1;
  for (int i = m - 1; i >= 0; i--) {
    out[i] = s[i] == 1 ? uop_idx(0) : uop_alu(OP_MOD, uop_alu(OP_IDIV, flat, uop_idx(stride)), uop_idx(s[i]));
    stride *= s[i];
  }
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
  (void)c;
  uop *out[TG_MAX_DIMS];
  for (int i = 0; i < n; i++) out[i] = uop_add(idx[i], uop_idx(x->arg[2 * i]));
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
  (void)c;
  uop *out[TG_MAX_DIMS], *inside = uop_const_bool(true);
  const int64_t *s = uop_shape(x->src[0]);
  for (int i = 0; i < n; i++) {
    int64_t before = x->arg[2 * i];
    out[i] = uop_add(idx[i], uop_idx(-before));
    if (!before && !x->arg[2 * i + 1]) continue;
    uop *ge = uop_new1(OP_NOT, TG_BOOL, uop_alu(OP_CMPLT, out[i], uop_idx(0)));
    inside = land(inside, land(ge, uop_alu(OP_CMPLT, out[i], uop_idx(s[i]))));
  }
  uop *v = make_index(x->src[0], out, n, land(valid, inside));
  return uop_new3(OP_WHERE, x->dtype, inside, v, uop_const(x->dtype, 0));
}

static uop *lower_reduce(lower_ctx *c, uop *x, uop **idx, int n, uop *valid) {
  uop *out[TG_MAX_DIMS], *src[TG_MAX_DIMS + 1];
  const int64_t *s = uop_shape(x->src[0]);
  int nr = 0;
  memcpy(out, idx, sizeof(uop *) * (size_t)n);
  for (int i = 1; i < x->narg; i++) {
    int ax = (int)x->arg[i];
    out[ax] = src[1 + nr++] = range(c, s[ax], 1);
  }
  src[0] = make_index(x->src[0], out, n, valid);
  int64_t op = x->arg[0];
  return uop_new(OP_REDUCE, x->dtype, src, nr + 1, &op, 1);
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
  (void)ctx, (void)u;
  return uop_new2(OP_LOAD, u->dtype, cap['g' - 'a'], cap['i' - 'a']);
}
static uop *masked_load(void *ctx, uop *u, uop **cap) {
  (void)ctx, (void)u;
  return cap['l' - 'a'];
}

static const rule lower_rule_list[] = {{"(INDEX ...)", lower_index}, {NULL, NULL}};
static const rule cleanup_rule_list[] = {
    {"(LOAD g i true)", load_always_valid},
    {"(WHERE v l=(LOAD g i v) 0)", masked_load},
    {NULL, NULL},
};

/* Name (r_ for reductions, E_ for elementwise, then the output shape) and buffer traffic. */
static void kernel_facts(uop *ast, uop *sink, kernel_info *info) {
  bool reduce = false;
  uop **order;
  int n = uop_toposort(sink, &order);
  for (int i = 0; i < n; i++) reduce |= order[i]->op == OP_REDUCE;
  free(order);
  info->bytes = (uint64_t)shape_numel(ast->arg, ast->narg) * tg_dtype_size(ast->dtype);
  info->nbufs = 1;
  n = uop_toposort(ast, &order);
  for (int i = 0; i < n; i++) {
    if (order[i]->op != OP_PARAM) continue;
    info->bytes += (uint64_t)shape_numel(order[i]->arg + 1, order[i]->narg - 1) * tg_dtype_size(order[i]->dtype);
    info->nbufs++;
  }
  free(order);
  int len = snprintf(info->name, sizeof info->name, "%s", reduce ? "r" : "E");
  for (int i = 0; i < ast->narg && len < (int)sizeof info->name - 24; i++)
    len += snprintf(info->name + len, sizeof info->name - (size_t)len, "_%lld", (long long)ast->arg[i]);
  snprintf(info->name + len, sizeof info->name - (size_t)len, "_%04llx", (unsigned long long)(ast->hash & 0xffff));
}

uop *lower_kernel(uop *ast, kernel_info *info) {
  static rule_table *lower_rules, *cleanup;
  if (!lower_rules) {
    lower_rules = rule_table_compile("lower", lower_rule_list);
    static rule_table *parts[2];
    parts[0] = rule_table_compile("lower_cleanup", cleanup_rule_list);
    parts[1] = (rule_table *)symbolic_rules();
    cleanup = rule_table_merge("lower_cleanup+symbolic", parts, 2);
  }
  lower_ctx c = {0};
  int nd = ast->narg;
  uop *idx[TG_MAX_DIMS];
  for (int i = 0; i < nd; i++) idx[i] = ast->arg[i] == 1 ? uop_idx(0) : range(&c, ast->arg[i], 0);
  uop *expr = make_index(ast->src[0], idx, nd, uop_const_bool(true));
  uop *out = uop_new(OP_DEFINE_GLOBAL, ast->dtype, NULL, 0, (int64_t[]){0}, 1);
  uop *store = uop_new3(OP_STORE, ast->dtype, out, flat_index(idx, ast->arg, nd), expr);
  uop *sink = uop_new(OP_SINK, TG_BOOL, &store, 1, NULL, 0);
  sink = graph_rewrite(sink, lower_rules, &c);
  sink = graph_rewrite(sink, cleanup, NULL);
  if (sink) kernel_facts(ast, sink, info);
  return sink;
}
