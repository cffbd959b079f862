/* spec.c — what may appear in a tensor graph and in a kernel AST, checked when SPEC=1 (always
 * in tests) so that a pass building an invalid graph fails loudly where it happens rather than
 * as a wrong kernel later. The third spec, for linearized programs, is program_spec_check in
 * codegen/linearize.c.
 *
 * One check per op, in a table; each returns NULL or what is wrong. Sources are checked
 * before their users (toposort). Shapes are computed when a node is made (uop.c), without
 * trusting its arguments: a dim it cannot compute is -1, which the checks here report. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/helpers.h"
#include "uop/dtype.h"
#include "uop/uop.h"

typedef const char *(*spec_fn)(uop *u);

static bool same_shape(uop *a, uop *b) {
  int n = uop_ndim(a);
  return n == uop_ndim(b) && (n == 0 || !memcmp(uop_shape(a), uop_shape(b), sizeof(int64_t) * (size_t)n));
}

/* ---------------------------------------------------------------- elementwise */

/* Which source dtypes an ALU op accepts (the frontend casts before building it). */
enum { ANY_DT, FLOAT_ONLY, NOT_FLOAT, INT_ONLY };
static const char alu_domain[OP_COUNT] = {
    [OP_EXP2] = FLOAT_ONLY, [OP_LOG2] = FLOAT_ONLY, [OP_SIN] = FLOAT_ONLY, [OP_SQRT] = FLOAT_ONLY,
    [OP_TRUNC] = FLOAT_ONLY, [OP_FDIV] = FLOAT_ONLY, [OP_NOT] = NOT_FLOAT, [OP_IDIV] = NOT_FLOAT,
    [OP_AND] = NOT_FLOAT,    [OP_OR] = NOT_FLOAT,    [OP_XOR] = NOT_FLOAT, [OP_SHL] = INT_ONLY,
    [OP_SHR] = INT_ONLY,
};

static const char *domain_error(uop *u, tg_dtype src) {
  switch (alu_domain[u->op]) {
    case FLOAT_ONLY: return dtype_is_float(src) ? NULL : "needs a float source";
    case NOT_FLOAT: return dtype_is_float(src) ? "needs an int or bool source" : NULL;
    case INT_ONLY: return dtype_is_int(src) ? NULL : "needs an int source";
    default: return NULL;
  }
}

static const char *spec_unary(uop *u) {
  tg_dtype src = u->src[0]->dtype;
  if (u->op == OP_CAST) return NULL;
  if (u->op == OP_BITCAST)
    return dtype_table[src].size == dtype_table[u->dtype].size ? NULL : "bitcast between sizes";
  if (u->dtype != src) return "dtype differs from its source";
  return domain_error(u, src);
}

static const char *spec_binary(uop *u) {
  uop *a = u->src[0], *b = u->src[1];
  bool cmp = uop_flags(u) & UOP_FLAG_CMP;
  if (a->dtype != b->dtype) return "sources of different dtypes";
  if (u->dtype != (cmp ? TG_BOOL : a->dtype)) return cmp ? "comparison is not bool" : "dtype differs from its sources";
  if (!same_shape(a, b)) return "sources of different shapes";
  return domain_error(u, a->dtype);
}

static const char *spec_where(uop *u) {
  if (u->src[0]->dtype != TG_BOOL) return "condition is not bool";
  if (u->src[1]->dtype != u->dtype || u->src[2]->dtype != u->dtype) return "branches differ from its dtype";
  if (!same_shape(u->src[0], u->src[1]) || !same_shape(u->src[1], u->src[2])) return "sources of different shapes";
  return NULL;
}

/* ---------------------------------------------------------------- leaves */

static const char *dims_error(const int64_t *dims, int n) {
  for (int i = 0; i < n; i++)
    if (dims[i] < 0) return "negative dimension";
  return NULL;
}

static const char *spec_buffer(uop *u) {
  if (u->narg < 1) return "no arguments";
  if (u->op == OP_PARAM && u->arg[0] < 0) return "negative slot";
  return dims_error(u->arg + 1, u->narg - 1);
}

static const char *spec_const(uop *u) { return u->narg == 1 ? NULL : "constant without exactly one value"; }
static const char *spec_value(uop *u) { return u->narg == 2 ? NULL : "value without a constant and a serial"; }

static const char *spec_iota(uop *u) {
  if (u->narg != 1 || u->arg[0] < 0) return "needs one non-negative length";
  return dtype_is_int(u->dtype) ? NULL : "not an int dtype";
}

/* ---------------------------------------------------------------- reduce, movement */

static const char *spec_reduce(uop *u) {
  int nd = uop_ndim(u->src[0]);
  uint64_t seen[2] = {0, 0};
  if (u->narg < 2) return "no axes";
  if (u->arg[0] != OP_ADD && u->arg[0] != OP_MUL && u->arg[0] != OP_MAX) return "reduce op is not ADD, MUL or MAX";
  for (int i = 1; i < u->narg; i++) {
    int64_t ax = u->arg[i];
    if (ax < 0 || ax >= nd || ax >= 128) return "axis out of range";
    if (seen[ax / 64] >> (ax % 64) & 1) return "axis repeated";
    seen[ax / 64] |= 1ull << (ax % 64);
  }
  return u->dtype == u->src[0]->dtype ? NULL : "dtype differs from its source";
}

static const char *spec_same(uop *u) { return u->dtype == u->src[0]->dtype ? NULL : "dtype differs from its source"; }

/* GRADFN(value, inputs...): the value's dtype; at least one input; custom rule id in arg[0] */
static const char *spec_gradfn(uop *u) {
  if (u->nsrc < 2 || u->narg < 1) return "needs a value, inputs and a rule id";
  return spec_same(u);
}

static const char *spec_reshape(uop *u) {
  uop *x = u->src[0];
  const char *e = dims_error(uop_shape(u), uop_ndim(u)); /* symbolic sizes: their layout */
  if (e) return e;
  return shape_numel(uop_shape(u), uop_ndim(u)) == shape_numel(uop_shape(x), uop_ndim(x)) ? NULL : "element count changes";
}

/* ---- symbolic sizes (docs/symbolic.md): a movement argument holds at both ends of its
 * variable's range, and every dim of a node has one symbolic form (sym_is or 0) */

static int64_t at_end(int64_t v, int hi) {
  int id = sym_var(v);
  return !id ? v : sym_at(v, hi ? uvar_max(id) : uvar_min(id));
}

static const char *sym_error(uop *u) {
  for (int i = 0; u->sym && i < u->ndim; i++)
    if (u->sym[i] == SYM_BAD) return "a dim mixes two variables or leaves their range";
  return NULL;
}

static const char *spec_permute(uop *u) {
  int nd = uop_ndim(u->src[0]);
  if (u->narg != nd) return "order has the wrong length";
  uint64_t seen[2] = {0, 0};
  for (int i = 0; i < nd; i++) {
    int64_t a = u->arg[i];
    if (a < 0 || a >= nd || a >= 128 || (seen[a / 64] >> (a % 64) & 1)) return "not a permutation";
    seen[a / 64] |= 1ull << (a % 64);
  }
  return NULL;
}

static const char *spec_expand(uop *u) {
  int nd = uop_ndim(u->src[0]);
  const int64_t *s = uop_shape(u->src[0]);
  if (u->narg != nd) return "shape has the wrong rank";
  for (int i = 0; i < nd; i++)
    if (uop_shape(u)[i] != s[i] && (s[i] != 1 || uop_shape(u)[i] < 0)) return "expands an axis that is not 1";
  return sym_error(u);
}

static const char *spec_pad(uop *u) {
  if (u->narg != 2 * uop_ndim(u->src[0])) return "needs (before, after) per axis";
  for (int hi = 0; hi < 2; hi++)
    for (int i = 0; i < u->narg; i++)
      if (at_end(u->arg[i], hi) < 0) return "negative padding";
  return sym_error(u);
}

static const char *spec_shrink(uop *u) {
  int nd = uop_ndim(u->src[0]);
  const int64_t *s = uop_shape(u->src[0]);
  if (u->narg != 2 * nd) return "needs (start, end) per axis";
  for (int hi = 0; hi < 2; hi++)
    for (int i = 0; i < nd; i++) {
      int64_t lo = at_end(u->arg[2 * i], hi), end = at_end(u->arg[2 * i + 1], hi);
      int64_t n = at_end(u->src[0]->sym && u->src[0]->sym[i] ? u->src[0]->sym[i] : s[i], hi);
      if (lo < 0 || lo > end || end > n) return "range outside the axis";
    }
  return sym_error(u);
}

static const char *spec_flip(uop *u) {
  if (u->narg != uop_ndim(u->src[0])) return "needs one flag per axis";
  for (int i = 0; i < u->narg; i++)
    if (u->arg[i] != 0 && u->arg[i] != 1) return "flag is not 0 or 1";
  return NULL;
}

static const char *spec_sink(uop *u) { (void)u; return NULL; }

/* DEFINE_VAR(view): [id, min, max] of a registered variable, read from a 0-d int64 view */
static const char *spec_define_var(uop *u) {
  if (u->narg != 3 || u->arg[0] != sym_var(sym_make((int)u->arg[0], 1, 0)) || u->dtype != TG_INT64) return "not a registered int64 variable";
  return uop_ndim(u->src[0]) == 0 && u->src[0]->dtype == TG_INT64 ? NULL : "its source is not a 0-d int64 value";
}

static const spec_fn tensor_specs[OP_COUNT] = {
    [OP_BUFFER] = spec_buffer,   [OP_PARAM] = spec_buffer,     [OP_CONST] = spec_const,  [OP_VALUE] = spec_value,
    [OP_IOTA] = spec_iota,       [OP_REDUCE_AXIS] = spec_reduce, [OP_CONTIGUOUS] = spec_same,
    [OP_DETACH] = spec_same,     [OP_COPY] = spec_same,     [OP_GRADFN] = spec_gradfn,     [OP_RESHAPE] = spec_reshape,  [OP_PERMUTE] = spec_permute,
    [OP_EXPAND] = spec_expand,   [OP_PAD] = spec_pad,          [OP_SHRINK] = spec_shrink,
    [OP_FLIP] = spec_flip,       [OP_SINK] = spec_sink,        [OP_DEFINE_VAR] = spec_define_var,
};

static spec_fn spec_of(uop *u) {
  unsigned f = uop_flags(u);
  if (!(f & UOP_FLAG_ALU)) return tensor_specs[u->op];
  return f & UOP_FLAG_UNARY ? spec_unary : f & UOP_FLAG_BINARY ? spec_binary : spec_where;
}

/* ---------------------------------------------------------------- walking */

/* Ops a kernel AST may hold besides its root: what lower.c knows how to lower. */
static bool kernel_op(uop *u) {
  return uop_is_alu(u) || uop_is_movement(u) || u->op == OP_PARAM || u->op == OP_CONST ||
         u->op == OP_IOTA || u->op == OP_REDUCE_AXIS || u->op == OP_DEFINE_VAR;
}

/* What is wrong with u alone (its sources already passed), or NULL. */
static const char *node_error(uop *u, bool kernel, uop *root) {
  if (u->op >= OP_COUNT || !(uop_flags(u) & UOP_FLAG_TENSOR)) return "not a tensor-graph op";
  if (!dtype_valid(u->dtype)) return "invalid dtype";
  if (uop_ops[u->op].nsrc >= 0 && u->nsrc != uop_ops[u->op].nsrc) return "wrong number of sources";
  if (kernel && u != root && !kernel_op(u)) return "not allowed inside a kernel";
  for (int i = 0; i < u->nsrc; i++) /* but a kernel SINK's variables (DEFINE_VAR) */
    if (uop_ndim(u->src[i]) < 0 && !(u->op == OP_SINK && u->src[i]->op == OP_DEFINE_VAR)) return "a source has no shape";
  spec_fn f = spec_of(u);
  const char *why = f ? f(u) : "no spec for this op";
  return why ? why : sym_error(u);
}

static int report(const char *what, uop *u, const char *why) {
  char buf[512];
  size_t n = 0;
  buf[0] = 0;
  for (int i = 0; i < u->nsrc && i < 3 && n < sizeof buf - 64; i++) {
    char s[256];
    int nd = uop_ndim(u->src[i]);
    n += (size_t)snprintf(buf + n, sizeof buf - n, "%s%s %s", i ? ", " : " of ", tg_dtype_name(u->src[i]->dtype),
                          nd < 0 ? "(no shape)" : tg_fmt_shape(s, sizeof s, uop_shape(u->src[i]), nd));
  }
  return tg_set_error(TG_ERR_DEVICE, "%s: %s %s%s: %s", what, u->op < OP_COUNT ? uop_ops[u->op].name : "?",
                      dtype_valid(u->dtype) ? tg_dtype_name(u->dtype) : "?", buf, why);
}

/* The kernel root: SINK(expr) with arg = expr's shape, one PARAM node per slot. */
static const char *kernel_root_error(uop *ast) {
  if (ast->op != OP_SINK || ast->nsrc < 1) return "root is not SINK(expr)";
  for (int i = 1; i < ast->nsrc; i++) /* then the variables its sizes name */
    if (ast->src[i]->op != OP_DEFINE_VAR) return "root is not SINK(expr, DEFINE_VAR...)";
  uop *x = ast->src[0];
  if (ast->dtype != x->dtype) return "root dtype differs from expr";
  int nd = uop_ndim(x);
  if (nd != ast->narg || (nd > 0 && memcmp(uop_shape(x), ast->arg, sizeof(int64_t) * (size_t)nd)))
    return "root shape differs from expr";
  return NULL;
}

static int check_graph(uop *root, bool kernel) {
  const char *what = kernel ? "kernel spec" : "tensor spec";
  uop **order;
  int n = uop_toposort(root, &order);
  if (n < 0) return tg_set_error(TG_ERR_NOMEM, "%s: out of memory", what);
  int rc = 0;
  ptrmap slots = {0}; /* slot + 1 → PARAM */
  for (int i = 0; i < n && !rc; i++) {
    uop *u = order[i];
    const char *why = node_error(u, kernel, root);
    if (!why && kernel && u->op == OP_PARAM) {
      void *key = (void *)(uintptr_t)(u->arg[0] + 1);
      uop *other = ptrmap_get(&slots, key);
      /* a slot may be read under several shapes (a reshaped input), never as another buffer */
      if (other && (other->dtype != u->dtype || shape_numel(uop_shape(other), uop_ndim(other)) !=
                                                    shape_numel(uop_shape(u), uop_ndim(u))))
        why = "PARAMs of one slot differ in dtype or size";
      else ptrmap_put(&slots, key, u);
    }
    if (why) rc = report(what, u, why);
  }
  if (!rc && kernel) {
    const char *why = kernel_root_error(root);
    if (why) rc = report(what, root, why);
  }
  ptrmap_free(&slots);
  free(order);
  return rc;
}

int uop_spec_tensor(uop *root) { return root ? check_graph(root, false) : tg_set_error(TG_ERR_ARG, "tensor spec: NULL graph"); }
int uop_spec_kernel(uop *ast) { return ast ? check_graph(ast, true) : tg_set_error(TG_ERR_ARG, "kernel spec: NULL AST"); }
