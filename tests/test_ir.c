/* test_ir.c — the UOp IR (src/uop/uop.c) and its specs (src/uop/spec.c, program_spec_check):
 * interning (equal content → the same node), constants interned by bit pattern, reference
 * counts and the pool (memory stays flat), toposort and serialization, and the three specs
 * that SPEC=1 turns on — tensor graph, kernel AST, linearized program — each fed malformed
 * graphs that it must reject with a message naming the op, dtype and shapes. */
#include <stdint.h>
#include <stdlib.h>
#include "codegen/codegen.h"
#include "harness.h"
#include "tensor/tensor.h"
#include "uop/uop.h"

#define POOL_SCOPE(...)                                                     \
  do {                                                                      \
    size_t mark_ = uop_pool_mark();                                         \
    __VA_ARGS__;                                                            \
    uop_pool_release(mark_);                                                \
  } while (0)

static bool msg_has(const char *s) { return strstr(tg_last_error(), s) != NULL; }

static uop *range_var(int id, int64_t n) {
  int64_t arg[2] = {id, 0};
  uop *end = uop_idx(n);
  return uop_new(OP_RANGE, TG_INT64, &end, 1, arg, 2);
}

/* A kernel input: PARAM slot with a shape (arg = slot, dims…). */
static uop *param(int slot, tg_dtype dt, const int64_t *shape, int nd) {
  int64_t arg[8];
  arg[0] = slot;
  memcpy(arg + 1, shape, sizeof(int64_t) * (size_t)nd);
  return uop_new(OP_PARAM, dt, NULL, 0, arg, nd + 1);
}

static uop *mov(uop_op op, uop *x, const int64_t *arg, int narg) {
  return uop_new(op, x->dtype, &x, 1, arg, narg);
}

static const int64_t S23[] = {2, 3}, S32[] = {3, 2};

/* ------------------------------------------------------------ interning */

TEST(ir_intern_equal_content_same_node) {
  POOL_SCOPE({
    uop *x = range_var(0, 7), *y = range_var(1, 5);
    CHECK(range_var(0, 7) == x);
    CHECK(range_var(0, 8) != x); /* other source */
    CHECK(range_var(2, 7) != x); /* other arg */
    uop *a = uop_new2(OP_ADD, TG_INT64, x, y);
    CHECK(uop_new2(OP_ADD, TG_INT64, x, y) == a);
    CHECK(uop_new2(OP_ADD, TG_INT64, y, x) != a); /* source order is content */
    CHECK(uop_new2(OP_MUL, TG_INT64, x, y) != a);
    CHECK(uop_new2(OP_ADD, TG_INT32, x, y) != a);
    uop *p = param(1, TG_FLOAT32, S23, 2);
    CHECK(param(1, TG_FLOAT32, S23, 2) == p);
    CHECK(mov(OP_RESHAPE, p, S32, 2) == mov(OP_RESHAPE, p, S32, 2));
    CHECK(mov(OP_RESHAPE, p, S32, 2) != mov(OP_RESHAPE, p, (int64_t[]){6}, 1));
    CHECK(mov(OP_PERMUTE, p, (int64_t[]){1, 0}, 2) != mov(OP_RESHAPE, p, (int64_t[]){1, 0}, 2));
    /* a new node adds exactly one to the alive count, a found one nothing */
    uint64_t before = uop_alive_count();
    uop *fresh = uop_idx(0x5eed1234567);
    CHECK(uop_alive_count() == before + 1);
    CHECK(uop_idx(0x5eed1234567) == fresh);
    CHECK(uop_alive_count() == before + 1);
    /* each lookup hands the pool one more reference */
    CHECK(fresh->refcnt == 2);
  });
}

TEST(ir_intern_float_constants_by_bits) {
  POOL_SCOPE({
    CHECK(uop_const(TG_FLOAT32, NAN) == uop_const(TG_FLOAT32, NAN));
    CHECK(uop_const(TG_FLOAT64, NAN) == uop_const(TG_FLOAT64, NAN));
    CHECK(isnan(uop_const_value(uop_const(TG_FLOAT64, NAN))));
    CHECK(uop_const(TG_FLOAT32, NAN) != uop_const(TG_FLOAT64, NAN));
    /* -0.0 == 0.0 as values, but they are different constants */
    uop *pz = uop_const(TG_FLOAT32, 0.0), *nz = uop_const(TG_FLOAT32, -0.0);
    CHECK(pz != nz);
    CHECK(signbit(uop_const_value(nz)) && !signbit(uop_const_value(pz)));
    CHECK(uop_const(TG_FLOAT64, -0.0) != uop_const(TG_FLOAT64, 0.0));
    /* same value, other dtype: distinct */
    uop *f32 = uop_const(TG_FLOAT32, 1.0), *f64 = uop_const(TG_FLOAT64, 1.0);
    CHECK(f32 != f64 && f32->dtype == TG_FLOAT32 && f64->dtype == TG_FLOAT64);
    CHECK(uop_const_int(TG_INT32, 1) != f32 && uop_const_int(TG_INT32, 1) != uop_const_int(TG_INT64, 1));
    CHECK(uop_const(TG_FLOAT16, 1.0) != f32 && uop_const(TG_BFLOAT16, 1.0) != uop_const(TG_FLOAT16, 1.0));
    /* values are rounded to the dtype before interning */
    CHECK(uop_const(TG_FLOAT32, 0.1) == uop_const(TG_FLOAT32, (double)0.1f));
    CHECK(uop_const(TG_FLOAT64, 0.1) != uop_const(TG_FLOAT64, (double)0.1f));
    CHECK(uop_const(TG_FLOAT16, 1.0001) == uop_const(TG_FLOAT16, 1.0));
    CHECK(uop_const(TG_FLOAT32, INFINITY) == uop_const(TG_FLOAT32, 1e300)); /* overflows to inf */
    CHECK(uop_const(TG_FLOAT32, INFINITY) != uop_const(TG_FLOAT32, -INFINITY));
    /* ints and bools */
    CHECK(uop_const_bool(true) == uop_const_int(TG_BOOL, 5));
    CHECK(uop_const(TG_INT32, 3.9) == uop_const_int(TG_INT32, 3));
    CHECK(uop_const_value(uop_const_int(TG_UINT64, -1)) == 18446744073709551615.0);
    CHECK(uop_is_const_val(uop_const(TG_FLOAT32, 2.5), 2.5));
    CHECK(!uop_is_const_val(uop_const(TG_FLOAT32, 2.5), 2.0));
  });
}

/* ------------------------------------------------------------ reference counts */

TEST(ir_refcount_keep_and_release) {
  uint64_t base = uop_alive_count();
  uop *kept;
  POOL_SCOPE({
    uop *x = range_var(3, 0x7e57), *c = uop_idx(0x7e571);
    kept = uop_new2(OP_MUL, TG_INT64, x, c);
    uop_incref(kept);
  });
  /* the kept node holds its sources: MUL, RANGE and the two constants */
  CHECK(uop_alive_count() == base + 4);
  CHECK(kept->refcnt == 1 && kept->src[0]->refcnt == 1);
  uop_decref(kept);
  CHECK(uop_alive_count() == base);
  uop_incref(NULL);
  uop_decref(NULL);
}

/* A chain 200,000 nodes deep is freed without recursion. */
TEST(ir_deep_chain_freed_iteratively) {
  uint64_t base = uop_alive_count();
  uop *root;
  POOL_SCOPE({
    root = range_var(0, 0xdee9);
    for (int i = 0; i < 200000; i++) root = uop_new1(OP_NEG, TG_INT64, root);
    uop_incref(root);
  });
  CHECK(uop_alive_count() == base + 200002);
  uop_decref(root);
  CHECK(uop_alive_count() == base);
}

/* Building and freeing 10,000 graphs (each with fresh constants) keeps the count flat. */
TEST(ir_10000_graphs_flat) {
  uint64_t base = uop_alive_count();
  for (int i = 0; i < 10000; i++) {
    POOL_SCOPE({
      uop *x = range_var(0, 100 + i), *y = range_var(1, 7);
      uop *e = uop_add(uop_mul(x, uop_idx(1000003 + i)), uop_alu(OP_MOD, y, uop_idx(3)));
      e = uop_alu(OP_CMPLT, e, uop_idx(i));
      CHECK(uop_alive_count() > base);
    });
    if (uop_alive_count() != base) {
      CHECK(uop_alive_count() == base);
      break;
    }
  }
}

/* The same through the tensor API: graphs built and dropped in a scope. */
TEST(ir_10000_tensor_graphs_flat) {
  static const float d[6] = {1, -2, 3, -4, 5, -6};
  tg_tensor *x = tg_from_data(d, TG_FLOAT32, S23, 2);
  CHECK(x != NULL);
  const int ax[] = {1};
  uint64_t base = 0;
  for (int i = 0; i < 10000; i++) {
    tg_scope *s = tg_scope_begin();
    tg_tensor *y = tg_sum(tg_relu(tg_add_s(tg_mul_s(x, 1.0 + i), (double)i)), ax, 1, false);
    CHECK(y != NULL);
    if (i % 2500 == 0) CHECK(tg_realize(y) == 0); /* some realized, most dropped lazy */
    tg_scope_end(s);
    if (i == 0) base = uop_alive_count(); /* after the first: interned helpers exist */
  }
  CHECK(uop_alive_count() == base);
  tg_free(x);
}

/* ------------------------------------------------------------ traversal */

TEST(ir_toposort_sources_first) {
  POOL_SCOPE({
    uop *x = range_var(0, 4), *y = range_var(1, 4);
    uop *s = uop_add(x, y), *root = uop_mul(s, uop_add(s, x));
    uop **order;
    int n = uop_toposort(root, &order);
    CHECK(n == 6); /* the shared end 4, x, y, s, s + x, root */
    CHECK(order[n - 1] == root);
    for (int i = 0; i < n; i++)
      for (int j = 0; j < order[i]->nsrc; j++) {
        int at = -1;
        for (int k = 0; k < n; k++)
          if (order[k] == order[i]->src[j]) at = k;
        CHECK(at >= 0 && at < i);
      }
    for (int i = 0; i < n; i++)
      for (int k = i + 1; k < n; k++) CHECK(order[i] != order[k]);
    free(order);
  });
}

TEST(ir_serialize_equal_graphs) {
  int64_t *first = NULL, *second = NULL, *other = NULL;
  int n1 = -1, n2 = -1, n3 = -1;
  POOL_SCOPE({
    uop *p = param(1, TG_FLOAT32, S23, 2);
    uop *e = uop_new2(OP_MUL, TG_FLOAT32, p, mov(OP_EXPAND, mov(OP_RESHAPE, uop_const(TG_FLOAT32, 0.25), (int64_t[]){1, 1}, 2), S23, 2));
    n1 = uop_serialize(e, &first);
  });
  POOL_SCOPE({ /* built again after everything died: new nodes, same encoding */
    uop *p = param(1, TG_FLOAT32, S23, 2);
    uop *e = uop_new2(OP_MUL, TG_FLOAT32, p, mov(OP_EXPAND, mov(OP_RESHAPE, uop_const(TG_FLOAT32, 0.25), (int64_t[]){1, 1}, 2), S23, 2));
    n2 = uop_serialize(e, &second);
    uop *f = uop_new2(OP_MUL, TG_FLOAT32, p, mov(OP_EXPAND, mov(OP_RESHAPE, uop_const(TG_FLOAT32, 0.5), (int64_t[]){1, 1}, 2), S23, 2));
    n3 = uop_serialize(f, &other);
  });
  CHECK(n1 > 0 && n1 == n2 && !memcmp(first, second, sizeof(int64_t) * (size_t)n1));
  CHECK(n3 == n1 && memcmp(first, other, sizeof(int64_t) * (size_t)n1) != 0);
  free(first), free(second), free(other);
}

/* ------------------------------------------------------------ tensor spec */

/* Graphs the frontend builds pass the tensor spec. */
TEST(ir_spec_tensor_accepts_frontend_graphs) {
  tg_scope *s = tg_scope_begin();
  float d[24];
  for (int i = 0; i < 24; i++) d[i] = (float)(i % 7) - 3.0f;
  int64_t s234[] = {2, 3, 4}, s43[] = {4, 3};
  tg_tensor *x = tg_from_data(d, TG_FLOAT32, s234, 3), *w = tg_from_data(d, TG_FLOAT32, s43, 2);
  const int ax1[] = {1}, perm[] = {2, 0, 1};
  int64_t before[] = {1, 0, 2}, after[] = {0, 1, 1}, st[] = {0, 1, 1}, en[] = {2, 3, 3};
  tg_tensor *graphs[] = {
      tg_relu(tg_add(tg_matmul(x, w), tg_ones(S23 + 1, 1, TG_FLOAT32))),
      tg_softmax(x, -1),
      tg_log_softmax(tg_permute(x, perm, 3), 0),
      tg_pad(x, before, after, 1.5),
      tg_flip(tg_shrink(x, st, en), ax1, 1),
      tg_cumsum(x, 2),
      tg_argmax(x, 1, false),
      tg_where(tg_lt(x, tg_scalar(0, TG_FLOAT32)), tg_cast(x, TG_FLOAT32), tg_sqrt(tg_abs(x))),
      tg_floordiv(tg_cast(x, TG_INT32), tg_scalar(-2, TG_INT32)),
      tg_bitcast(x, TG_INT32),
      tg_arange(0, 10, 3, TG_INT32),
      tg_eye(3, 4, TG_BOOL),
      tg_std(x, ax1, 1, true, 1),
      tg_shl(tg_cast(x, TG_INT64), 3),
  };
  for (size_t i = 0; i < sizeof graphs / sizeof graphs[0]; i++) {
    CHECK(graphs[i] != NULL);
    if (!graphs[i]) continue;
    int rc = uop_spec_tensor(graphs[i]->u);
    CHECK(rc == 0);
    if (rc) printf("  graph %zu: %s\n", i, tg_last_error());
  }
  tg_scope_end(s);
}

typedef struct bad_graph {
  const char *what;    /* expected in the message */
  const char *op;      /* op name expected in the message */
  uop *(*build)(void); /* the malformed graph (in the pool) */
} bad_graph;

static uop *pf(void) { return param(1, TG_FLOAT32, S23, 2); }
static uop *pi(void) { return param(2, TG_INT32, S23, 2); }
static uop *bad_add_dtypes(void) { return uop_new2(OP_ADD, TG_FLOAT32, pf(), pi()); }
static uop *bad_add_shapes(void) { return uop_new2(OP_ADD, TG_FLOAT32, pf(), param(3, TG_FLOAT32, S32, 2)); }
static uop *bad_add_result(void) { return uop_new2(OP_ADD, TG_FLOAT64, pf(), pf()); }
static uop *bad_cmp_result(void) { return uop_new2(OP_CMPLT, TG_FLOAT32, pf(), pf()); }
static uop *bad_add_arity(void) { return uop_new3(OP_ADD, TG_FLOAT32, pf(), pf(), pf()); }
static uop *bad_where_cond(void) { return uop_new3(OP_WHERE, TG_FLOAT32, pf(), pf(), pf()); }
static uop *bad_where_branch(void) {
  return uop_new3(OP_WHERE, TG_FLOAT32, uop_new2(OP_CMPLT, TG_BOOL, pf(), pf()), pf(), pi());
}
static uop *bad_exp2_int(void) { return uop_new1(OP_EXP2, TG_INT32, pi()); }
static uop *bad_neg_dtype(void) { return uop_new1(OP_NEG, TG_FLOAT64, pf()); }
static uop *bad_shl_float(void) { return uop_new2(OP_SHL, TG_FLOAT32, pf(), pf()); }
static uop *bad_idiv_float(void) { return uop_new2(OP_IDIV, TG_FLOAT32, pf(), pf()); }
static uop *bad_fdiv_int(void) { return uop_new2(OP_FDIV, TG_INT32, pi(), pi()); }
static uop *bad_bitcast(void) { return uop_new1(OP_BITCAST, TG_FLOAT64, pf()); }
static uop *bad_permute_dup(void) { return mov(OP_PERMUTE, pf(), (int64_t[]){0, 0}, 2); }
static uop *bad_permute_len(void) { return mov(OP_PERMUTE, pf(), (int64_t[]){0}, 1); }
static uop *bad_permute_range(void) { return mov(OP_PERMUTE, pf(), (int64_t[]){0, 2}, 2); }
static uop *bad_reshape_numel(void) { return mov(OP_RESHAPE, pf(), (int64_t[]){4, 2}, 2); }
static uop *bad_reshape_neg(void) { return mov(OP_RESHAPE, pf(), (int64_t[]){-2, -3}, 2); }
static uop *bad_expand(void) { return mov(OP_EXPAND, pf(), (int64_t[]){2, 5}, 2); }
static uop *bad_expand_rank(void) { return mov(OP_EXPAND, pf(), (int64_t[]){4, 2, 3}, 3); }
static uop *bad_pad_args(void) { return mov(OP_PAD, pf(), (int64_t[]){1, 1}, 2); }
static uop *bad_pad_neg(void) { return mov(OP_PAD, pf(), (int64_t[]){0, 0, -1, 0}, 4); }
static uop *bad_shrink_end(void) { return mov(OP_SHRINK, pf(), (int64_t[]){0, 2, 0, 4}, 4); }
static uop *bad_shrink_order(void) { return mov(OP_SHRINK, pf(), (int64_t[]){1, 0, 0, 3}, 4); }
static uop *bad_flip(void) { return mov(OP_FLIP, pf(), (int64_t[]){0, 2}, 2); }
static uop *bad_reduce_axis(void) { return mov(OP_REDUCE_AXIS, pf(), (int64_t[]){OP_ADD, 2}, 2); }
static uop *bad_reduce_repeat(void) { return mov(OP_REDUCE_AXIS, pf(), (int64_t[]){OP_ADD, 1, 1}, 3); }
static uop *bad_reduce_op(void) { return mov(OP_REDUCE_AXIS, pf(), (int64_t[]){OP_SUB, 1}, 2); }
static uop *bad_reduce_none(void) { return mov(OP_REDUCE_AXIS, pf(), (int64_t[]){OP_ADD}, 1); }
static uop *bad_range_in_tensor(void) { return uop_new2(OP_ADD, TG_INT64, range_var(0, 4), uop_idx(1)); }
static uop *bad_const_args(void) { return uop_new(OP_CONST, TG_INT32, NULL, 0, (int64_t[]){1, 2}, 2); }
static uop *bad_iota(void) { return uop_new(OP_IOTA, TG_INT64, NULL, 0, (int64_t[]){-3}, 1); }
static uop *bad_param_dim(void) { return param(1, TG_FLOAT32, (int64_t[]){2, -1}, 2); }
static uop *bad_contiguous(void) { return uop_new1(OP_CONTIGUOUS, TG_INT32, pf()); }
static uop *bad_dtype(void) { return uop_new(OP_CONST, (tg_dtype)TG_DTYPE_COUNT, NULL, 0, (int64_t[]){0}, 1); }
/* the error is deep inside a valid graph: the inner node is named */
static uop *bad_inner(void) {
  uop *inner = mov(OP_PERMUTE, pf(), (int64_t[]){1, 1}, 2);
  return uop_new1(OP_NEG, TG_FLOAT32, uop_new1(OP_SQRT, TG_FLOAT32, inner));
}

static const bad_graph bad_tensor_graphs[] = {
    {"different dtypes", "ADD", bad_add_dtypes},
    {"different shapes", "ADD", bad_add_shapes},
    {"differs from its sources", "ADD", bad_add_result},
    {"not bool", "CMPLT", bad_cmp_result},
    {"number of sources", "ADD", bad_add_arity},
    {"condition is not bool", "WHERE", bad_where_cond},
    {"branches", "WHERE", bad_where_branch},
    {"float source", "EXP2", bad_exp2_int},
    {"differs from its source", "NEG", bad_neg_dtype},
    {"int source", "SHL", bad_shl_float},
    {"int or bool", "IDIV", bad_idiv_float},
    {"float source", "FDIV", bad_fdiv_int},
    {"sizes", "BITCAST", bad_bitcast},
    {"permutation", "PERMUTE", bad_permute_dup},
    {"wrong length", "PERMUTE", bad_permute_len},
    {"permutation", "PERMUTE", bad_permute_range},
    {"element count", "RESHAPE", bad_reshape_numel},
    {"negative dimension", "RESHAPE", bad_reshape_neg},
    {"not 1", "EXPAND", bad_expand},
    {"rank", "EXPAND", bad_expand_rank},
    {"per axis", "PAD", bad_pad_args},
    {"negative padding", "PAD", bad_pad_neg},
    {"outside the axis", "SHRINK", bad_shrink_end},
    {"outside the axis", "SHRINK", bad_shrink_order},
    {"0 or 1", "FLIP", bad_flip},
    {"out of range", "REDUCE_AXIS", bad_reduce_axis},
    {"repeated", "REDUCE_AXIS", bad_reduce_repeat},
    {"reduce op", "REDUCE_AXIS", bad_reduce_op},
    {"no axes", "REDUCE_AXIS", bad_reduce_none},
    {"not a tensor-graph op", "RANGE", bad_range_in_tensor},
    {"exactly one value", "CONST", bad_const_args},
    {"non-negative length", "IOTA", bad_iota},
    {"negative dimension", "PARAM", bad_param_dim},
    {"differs from its source", "CONTIGUOUS", bad_contiguous},
    {"invalid dtype", "CONST", bad_dtype},
    {"permutation", "PERMUTE", bad_inner},
};

TEST(ir_spec_tensor_rejects_malformed) {
  for (size_t i = 0; i < sizeof bad_tensor_graphs / sizeof bad_tensor_graphs[0]; i++) {
    const bad_graph *b = &bad_tensor_graphs[i];
    POOL_SCOPE({
      tg_clear_error();
      int rc = uop_spec_tensor(b->build());
      CHECK(rc == TG_ERR_DEVICE);
      bool ok = msg_has("tensor spec") && msg_has(b->what) && msg_has(b->op);
      CHECK(ok);
      if (rc != TG_ERR_DEVICE || !ok) printf("  case %zu (%s): rc %d, message \"%s\"\n", i, b->what, rc, tg_last_error());
    });
  }
  CHECK(uop_spec_tensor(NULL) == TG_ERR_ARG);
}

/* The message shows the sources' dtypes and shapes. */
TEST(ir_spec_message_names_shapes) {
  POOL_SCOPE({
    CHECK(uop_spec_tensor(bad_add_shapes()) < 0);
    CHECK(msg_has("float32 (2, 3)") && msg_has("float32 (3, 2)"));
    CHECK(uop_spec_tensor(bad_add_dtypes()) < 0);
    CHECK(msg_has("float32 (2, 3), int32 (2, 3)"));
  });
}

/* ------------------------------------------------------------ kernel spec */

static uop *kernel(uop *expr, const int64_t *shape, int nd) {
  return uop_new(OP_SINK, expr->dtype, &expr, 1, shape, nd);
}

TEST(ir_spec_kernel_accepts_well_formed) {
  POOL_SCOPE({
    uop *a = param(1, TG_FLOAT32, S23, 2), *b = param(2, TG_FLOAT32, S32, 2);
    uop *bt = mov(OP_PERMUTE, b, (int64_t[]){1, 0}, 2);
    uop *sum = mov(OP_REDUCE_AXIS, uop_new2(OP_MUL, TG_FLOAT32, a, bt), (int64_t[]){OP_ADD, 1}, 2);
    CHECK(uop_spec_kernel(kernel(sum, (int64_t[]){2, 1}, 2)) == 0);
    uop *iota = uop_new(OP_IOTA, TG_INT64, NULL, 0, (int64_t[]){6}, 1);
    CHECK(uop_spec_kernel(kernel(iota, (int64_t[]){6}, 1)) == 0);
    uop *c = uop_const(TG_FLOAT32, 2.0);
    CHECK(uop_spec_kernel(kernel(c, NULL, 0)) == 0);
  });
}

static uop *kbad_shape(void) { return kernel(pf(), S32, 2); }
static uop *kbad_rank(void) { return kernel(pf(), S23, 1); }
static uop *kbad_root(void) { return uop_new1(OP_NEG, TG_FLOAT32, pf()); }
static uop *kbad_root_srcs(void) { return uop_new(OP_SINK, TG_FLOAT32, (uop *[]){pf(), pf()}, 2, S23, 2); }
static uop *kbad_root_dtype(void) { return uop_new(OP_SINK, TG_INT32, (uop *[]){pf()}, 1, S23, 2); }
static uop *kbad_buffer(void) {
  uop *b = buffer_new(TG_FLOAT32, S23, 2);
  return kernel(uop_new2(OP_ADD, TG_FLOAT32, b, pf()), S23, 2);
}
static uop *kbad_contiguous(void) { return kernel(uop_new1(OP_NEG, TG_FLOAT32, uop_new1(OP_CONTIGUOUS, TG_FLOAT32, pf())), S23, 2); }
static uop *kbad_detach(void) { return kernel(uop_new1(OP_DETACH, TG_FLOAT32, pf()), S23, 2); }
static uop *kbad_slot(void) { /* slot 1 again, 8 elements where the other PARAM has 6 */
  uop *other = mov(OP_SHRINK, param(1, TG_FLOAT32, (int64_t[]){2, 4}, 2), (int64_t[]){0, 2, 0, 3}, 4);
  return kernel(uop_new2(OP_ADD, TG_FLOAT32, pf(), other), S23, 2);
}
/* The same buffer under two shapes (a reshaped input) is fine. */
static uop *kok_slot_reshaped(void) {
  uop *other = mov(OP_RESHAPE, param(1, TG_FLOAT32, S32, 2), S23, 2);
  return kernel(uop_new2(OP_ADD, TG_FLOAT32, pf(), other), S23, 2);
}
static uop *kbad_slot_dtype(void) {
  return kernel(uop_new2(OP_ADD, TG_FLOAT32, pf(), uop_new1(OP_CAST, TG_FLOAT32, param(1, TG_INT32, S23, 2))), S23, 2);
}
static uop *kbad_inner_sink(void) { return kernel(uop_new(OP_SINK, TG_FLOAT32, (uop *[]){pf()}, 1, S23, 2), S23, 2); }
static uop *kbad_tensor_rule(void) { return kernel(bad_add_dtypes(), S23, 2); }

static const bad_graph bad_kernels[] = {
    {"root shape differs", "SINK", kbad_shape},
    {"root shape differs", "SINK", kbad_rank},
    {"root is not SINK", "NEG", kbad_root},
    {"root is not SINK", "SINK", kbad_root_srcs},
    {"root dtype", "SINK", kbad_root_dtype},
    {"not allowed inside a kernel", "BUFFER", kbad_buffer},
    {"not allowed inside a kernel", "CONTIGUOUS", kbad_contiguous},
    {"not allowed inside a kernel", "DETACH", kbad_detach},
    {"PARAMs of one slot differ", "PARAM", kbad_slot},
    {"PARAMs of one slot differ", "PARAM", kbad_slot_dtype},
    {"not allowed inside a kernel", "SINK", kbad_inner_sink},
    {"different dtypes", "ADD", kbad_tensor_rule},
};

TEST(ir_spec_kernel_rejects_malformed) {
  for (size_t i = 0; i < sizeof bad_kernels / sizeof bad_kernels[0]; i++) {
    const bad_graph *b = &bad_kernels[i];
    POOL_SCOPE({
      tg_clear_error();
      int rc = uop_spec_kernel(b->build());
      CHECK(rc == TG_ERR_DEVICE);
      bool ok = msg_has("kernel spec") && msg_has(b->what) && msg_has(b->op);
      CHECK(ok);
      if (rc != TG_ERR_DEVICE || !ok) printf("  case %zu (%s): rc %d, message \"%s\"\n", i, b->what, rc, tg_last_error());
    });
  }
  CHECK(uop_spec_kernel(NULL) == TG_ERR_ARG);
  POOL_SCOPE(CHECK(uop_spec_kernel(kok_slot_reshaped()) == 0));
}

/* With SPEC=1 the scheduler checks every graph it is given: a malformed graph that reaches
 * tg_realize is an error, not a miscompiled kernel. SPEC is read once per process, so the
 * check runs in a child started with SPEC=1, whatever the suite's own environment. */
TEST_CHILD(ir_spec_realize_child) {
  CHECK(tg_spec_checks());
  tg_scope *s = tg_scope_begin();
  static const float df[6] = {1, 2, 3, 4, 5, 6};
  static const int32_t di[6] = {1, 2, 3, 4, 5, 6};
  tg_tensor *a = tg_from_data(df, TG_FLOAT32, S23, 2), *b = tg_from_data(di, TG_INT32, S23, 2);
  size_t mark = uop_pool_mark();
  tg_tensor *bad = tensor_wrap(uop_new2(OP_ADD, TG_FLOAT32, a->u, b->u));
  uop_pool_release(mark);
  tg_clear_error();
  CHECK(tg_realize(bad) == TG_ERR_DEVICE);
  CHECK(msg_has("tensor spec") && msg_has("ADD") && msg_has("different dtypes"));
  CHECK(!tg_is_realized(bad));
  /* a well-formed graph on the same inputs still works */
  float out[6];
  CHECK(tg_to_host(tg_add(a, tg_cast(b, TG_FLOAT32)), out, sizeof out) == 0);
  CHECK(out[5] == 12.0f);
  tg_scope_end(s);
}

TEST(ir_spec_realize_rejects_malformed_graph) {
  char out[8192];
  int status = harness_run_child("ir_spec_realize_child", "SPEC=1", out, sizeof out);
  CHECK(status == 0);
  if (status != 0) printf("  child exited with %d:\n%s", status, out);
}

/* ------------------------------------------------------------ program spec */

TEST(ir_spec_program) {
  POOL_SCOPE({
    uop *r0 = range_var(0, 4), *r1 = range_var(1, 3);
    uop *v = uop_add(r0, r1), *w = uop_mul(v, v);
    struct { const char *what; lin_op ops[7]; int n; } cases[] = {
        {NULL, {{L_LOOP, r0}, {L_LOOP, r1}, {L_VALUE, v}, {L_VALUE, w}, {L_END, r1}, {L_END, r0}}, 6},
        {"unbalanced loop", {{L_END, r0}}, 1},
        {"unbalanced loop", {{L_LOOP, r0}, {L_LOOP, r1}, {L_END, r0}, {L_END, r1}}, 4},
        {"loop left open", {{L_LOOP, r0}}, 1},
        {"used before definition", {{L_LOOP, r0}, {L_VALUE, v}, {L_END, r0}}, 3}, /* r1 not open */
        {"used before definition", {{L_LOOP, r0}, {L_LOOP, r1}, {L_VALUE, w}, {L_END, r1}, {L_END, r0}}, 5},
        /* values and loop variables are scoped: gone after their loop's END */
        {"outside its loop", {{L_LOOP, r0}, {L_LOOP, r1}, {L_END, r1}, {L_VALUE, v}, {L_END, r0}}, 5},
        {"outside its loop", {{L_LOOP, r0}, {L_LOOP, r1}, {L_VALUE, v}, {L_END, r1}, {L_VALUE, w}, {L_END, r0}}, 6},
        {NULL, {{L_LOOP, r0}, {L_END, r0}, {L_LOOP, r0}, {L_LOOP, r1}, {L_VALUE, v}, {L_END, r1}, {L_END, r0}}, 7},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
      lin_program p = {cases[i].ops, cases[i].n};
      tg_clear_error();
      int rc = program_spec_check(&p);
      if (!cases[i].what) {
        CHECK(rc == 0);
      } else {
        CHECK(rc < 0 && msg_has("program spec") && msg_has(cases[i].what));
        if (rc >= 0) printf("  program case %zu accepted\n", i);
      }
    }
  });
}

/* Every kernel the suite runs passes the three specs; one realize here exercises all of them
 * (tensor graph → kernel AST → lowered program) on a graph with a reduce, views and padding. */
TEST(ir_spec_all_three_on_real_kernels) {
  tg_scope *s = tg_scope_begin();
  float d[24];
  for (int i = 0; i < 24; i++) d[i] = (float)i;
  int64_t s46[] = {4, 6}, b[] = {1, 0}, a[] = {0, 2};
  tg_tensor *x = tg_from_data(d, TG_FLOAT32, s46, 2);
  const int ax[] = {1};
  tg_tensor *y = tg_sum(tg_pad(tg_transpose(tg_reshape(x, (int64_t[]){6, 4}, 2), 0, 1), b, a, 1.0), ax, 1, false);
  float out[5];
  tg_clear_error();
  CHECK(tg_to_host(y, out, sizeof out) == 0);
  /* row 0 is padding: 6 + 2 ones; row i (1..4) is column i-1 of the (6,4) reshape + 2 ones */
  CHECK(out[0] == 8.0f);
  for (int i = 1; i < 5; i++) {
    float want = 2;
    for (int r = 0; r < 6; r++) want += d[r * 4 + (i - 1)];
    CHECK(out[i] == want);
  }
  tg_scope_end(s);
}
