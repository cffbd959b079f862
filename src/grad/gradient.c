/* gradient.c — autograd: one derivative rule per primitive op, the reverse walk that chains
 * them, and the parameter API (requires_grad, backward, grad, zero_grad, detach).
 *
 * A rule gets the node u, the gradient g of the output (u's shape and dtype) and writes the
 * gradient of each source into d[i] (NULL: no gradient flows to that source). Rules build
 * graphs of primitives only, so gradients of gradients use the same table. */
#include "grad/gradient.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/profile.h"
#include "tensor/tensor.h"

/* ---------------------------------------------------------------- graph helpers */

static const double LN2 = 0.6931471805599453, HALF_PI = 1.5707963267948966;

static uop *k(uop *like, double v) { return uconst_like(like, v, like->dtype); }
static uop *un(uop_op op, uop *a) { return uop_new1(op, a->dtype, a); }
static uop *bin(uop_op op, uop *a, uop *b) { return uop_alu(op, a, b); }
static uop *mul(uop *a, uop *b) { return bin(OP_MUL, a, b); }
static uop *fdiv(uop *a, uop *b) { return bin(OP_FDIV, a, b); }
static uop *neg(uop *a) { return un(OP_NEG, a); }
static uop *where(uop *c, uop *a, uop *b) { return uop_new3(OP_WHERE, a->dtype, c, a, b); }
static uop *zeros(uop *like) { return k(like, 0); }

static uop *expand_to(uop *g, uop *like) { return ushape_expand(g, uop_shape(like), uop_ndim(like)); }

/* The reduced axes of a REDUCE_AXIS node (arg[0] is the op). */
static int reduce_axes(uop *u, int *axes) {
  for (int i = 1; i < u->narg; i++) axes[i - 1] = (int)u->arg[i];
  return u->narg - 1;
}

/* Sum over axes (keepdim); 16-bit floats accumulate in float32. */
static uop *sum_axes(uop *x, const int *axes, int n) {
  tg_dtype dt = x->dtype, acc = dtype_is_half(dt) ? TG_FLOAT32 : dt;
  return ucast(ureduce(ucast(x, acc), OP_ADD, axes, n), dt);
}

/* cos(x) as sin(x + pi/2), in float64 so the shift adds no visible rounding for float32 */
static uop *cosine(uop *x) {
  uop *xc = ucast(x, TG_FLOAT64);
  return ucast(un(OP_SIN, bin(OP_ADD, xc, k(xc, HALF_PI))), x->dtype);
}

/* ---------------------------------------------------------------- derivative rules */

typedef void (*grad_rule)(uop *u, uop *g, uop **d);

static void d_none(uop *u, uop *g, uop **d) { (void)u, (void)g, (void)d; }
static void d_pass(uop *u, uop *g, uop **d) { (void)u, d[0] = g; }
static void d_neg(uop *u, uop *g, uop **d) { (void)u, d[0] = neg(g); }
/* d 2^x = 2^x ln2 */
static void d_exp2(uop *u, uop *g, uop **d) { d[0] = mul(g, mul(u, k(u, LN2))); }
/* d log2 x = 1 / (x ln2) */
static void d_log2(uop *u, uop *g, uop **d) { d[0] = fdiv(g, mul(u->src[0], k(u, LN2))); }
static void d_sin(uop *u, uop *g, uop **d) { d[0] = mul(g, cosine(u->src[0])); }
/* d sqrt x = 1 / (2 sqrt x) */
static void d_sqrt(uop *u, uop *g, uop **d) { d[0] = fdiv(g, mul(u, k(u, 2))); }
/* d (1/x) = -1/x² = -u² */
static void d_recip(uop *u, uop *g, uop **d) { d[0] = neg(mul(g, mul(u, u))); }

static void d_cast(uop *u, uop *g, uop **d) {
  uop *x = u->src[0];
  if (dtype_is_float(x->dtype)) d[0] = ucast(g, x->dtype); /* ints get no gradient */
}

static void d_add(uop *u, uop *g, uop **d) { (void)u, d[0] = d[1] = g; }
static void d_sub(uop *u, uop *g, uop **d) { (void)u, d[0] = g, d[1] = neg(g); }
static void d_mul(uop *u, uop *g, uop **d) { d[0] = mul(g, u->src[1]), d[1] = mul(g, u->src[0]); }
/* d(a/b)/da = 1/b, d(a/b)/db = -(a/b)/b */
static void d_fdiv(uop *u, uop *g, uop **d) {
  uop *b = u->src[1];
  d[0] = fdiv(g, b), d[1] = neg(fdiv(mul(g, u), b));
}

/* A constant the library wrote (a CONST under views), as opposed to a tensor */
static bool is_literal(uop *x) {
  while (x->op == OP_EXPAND || x->op == OP_RESHAPE) x = x->src[0];
  return x->op == OP_CONST;
}

/* The larger source gets the gradient; on a tie each gets half (like torch.maximum). Against
 * a literal constant — relu's max(x, 0) — a tie gives nothing: relu'(0) = 0, like PyTorch. */
static void d_max(uop *u, uop *g, uop **d) {
  uop *a = u->src[0], *b = u->src[1];
  bool literal = is_literal(a) || is_literal(b);
  uop *tie = literal ? zeros(g) : where(bin(OP_CMPEQ, a, b), mul(g, k(g, 0.5)), zeros(g));
  d[0] = where(bin(OP_CMPLT, b, a), g, tie);
  d[1] = where(bin(OP_CMPLT, a, b), g, tie);
}

/* d a^b/da = b a^(b-1) (0 where b == 0); d a^b/db = a^b ln a (0 where a == 0 and b >= 0) */
static void d_pow(uop *u, uop *g, uop **d) {
  uop *a = u->src[0], *b = u->src[1];
  uop *da = mul(b, bin(OP_POW, a, bin(OP_SUB, b, k(b, 1))));
  d[0] = mul(g, where(bin(OP_CMPEQ, b, k(b, 0)), zeros(a), da));
  uop *db = mul(u, mul(un(OP_LOG2, a), k(a, LN2)));
  uop *a0 = bin(OP_AND, bin(OP_CMPEQ, a, k(a, 0)), un(OP_NOT, bin(OP_CMPLT, b, k(b, 0))));
  d[1] = mul(g, where(a0, zeros(b), db));
}

/* float a mod b = a - b trunc(a/b) (C fmod) */
static void d_mod(uop *u, uop *g, uop **d) {
  uop *a = u->src[0], *b = u->src[1];
  d[0] = g, d[1] = neg(mul(g, un(OP_TRUNC, fdiv(a, b))));
}

static void d_where(uop *u, uop *g, uop **d) {
  uop *c = u->src[0];
  d[1] = where(c, g, zeros(g)), d[2] = where(c, zeros(g), g);
}

/* Max: the gradient is shared equally by the elements equal to the max (like torch.amax). */
static uop *reduce_max_grad(uop *u, uop *ge, const int *axes, int n) {
  uop *x = u->src[0];
  uop *hit = ucast(bin(OP_CMPEQ, x, expand_to(u, x)), x->dtype);
  return fdiv(mul(hit, ge), expand_to(sum_axes(hit, axes, n), x));
}

/* Product: d/dx_i = prod_{j != i} x_j, exact with zeros: the product of the nonzero elements
 * divided by x_i when there are no zeros, that product at the single zero, 0 otherwise. */
static uop *reduce_prod_grad(uop *u, uop *ge, const int *axes, int n) {
  uop *x = u->src[0];
  uop *is0 = bin(OP_CMPEQ, x, zeros(x));
  uop *nzeros = expand_to(sum_axes(ucast(is0, x->dtype), axes, n), x);
  uop *p = expand_to(ureduce(where(is0, k(x, 1), x), OP_MUL, axes, n), x);
  uop *one_zero_here = bin(OP_AND, is0, bin(OP_CMPEQ, nzeros, k(x, 1)));
  uop *others = where(bin(OP_CMPEQ, nzeros, zeros(x)), fdiv(p, x), where(one_zero_here, p, zeros(x)));
  return mul(ge, others);
}

static void d_reduce(uop *u, uop *g, uop **d) {
  int axes[TG_MAX_DIMS], n = reduce_axes(u, axes);
  uop *ge = expand_to(g, u->src[0]);
  switch (u->arg[0]) {
    case OP_ADD: d[0] = ge; break;
    case OP_MAX: d[0] = reduce_max_grad(u, ge, axes, n); break;
    case OP_MUL: d[0] = reduce_prod_grad(u, ge, axes, n); break;
    default: break; /* other reductions only occur on ints/bools, which get no gradient */
  }
}

static void d_reshape(uop *u, uop *g, uop **d) {
  d[0] = ushape_reshape(g, uop_shape(u->src[0]), uop_ndim(u->src[0]));
}

static void d_permute(uop *u, uop *g, uop **d) {
  int64_t inv[TG_MAX_DIMS];
  for (int i = 0; i < u->narg; i++) inv[u->arg[i]] = i;
  d[0] = uop_new(OP_PERMUTE, g->dtype, &g, 1, inv, u->narg);
}

/* Broadcast axes are summed back. */
static void d_expand(uop *u, uop *g, uop **d) {
  int axes[TG_MAX_DIMS], n = 0;
  const int64_t *in = uop_shape(u->src[0]), *out = uop_shape(u);
  for (int i = 0; i < uop_ndim(u); i++)
    if (in[i] != out[i]) axes[n++] = i;
  d[0] = sum_axes(g, axes, n);
}

/* The padded border gets nothing: crop it away. */
static void d_pad(uop *u, uop *g, uop **d) {
  int64_t arg[2 * TG_MAX_DIMS];
  const int64_t *in = uop_shape(u->src[0]);
  for (int i = 0; i < uop_ndim(u); i++) arg[2 * i] = u->arg[2 * i], arg[2 * i + 1] = u->arg[2 * i] + in[i];
  d[0] = uop_new(OP_SHRINK, g->dtype, &g, 1, arg, u->narg);
}

/* The cropped-away part gets zeros: pad back. */
static void d_shrink(uop *u, uop *g, uop **d) {
  int64_t arg[2 * TG_MAX_DIMS];
  const int64_t *in = uop_shape(u->src[0]);
  for (int i = 0; i < uop_ndim(u); i++) arg[2 * i] = u->arg[2 * i], arg[2 * i + 1] = in[i] - u->arg[2 * i + 1];
  d[0] = uop_new(OP_PAD, g->dtype, &g, 1, arg, u->narg);
}

static void d_flip(uop *u, uop *g, uop **d) { d[0] = uop_new(OP_FLIP, g->dtype, &g, 1, u->arg, u->narg); }

/* Back to the source's device (a source without one takes the gradient where it is). */
static void d_copy(uop *u, uop *g, uop **d) {
  int64_t dev = u->src[0]->device;
  d[0] = dev == DEVICE_NONE || dev == g->device ? g : uop_new(OP_COPY, g->dtype, &g, 1, &dev, 1);
}

/* A sharded tensor (tg_shard): source i, on device i, gets its slice of the gradient there; the
 * whole copies of a replicated one are one value, so the first takes the gradient. */
static void d_multi(uop *u, uop *g, uop **d) {
  int axis = (int)u->arg[0], nd = uop_ndim(u);
  for (int i = 0; i < u->nsrc && (axis >= 0 || i == 0); i++) {
    int64_t dev = u->src[i]->device, arg[2 * TG_MAX_DIMS];
    uop *part = g;
    if (axis >= 0) {
      int64_t len = uop_shape(u->src[i])[axis];
      for (int k = 0; k < nd; k++) arg[2 * k] = 0, arg[2 * k + 1] = uop_shape(u)[k];
      arg[2 * axis] = i * len, arg[2 * axis + 1] = (i + 1) * len;
      part = uop_new(OP_SHRINK, g->dtype, &g, 1, arg, 2 * nd);
    }
    d[i] = !part || part->device == dev ? part : uop_new(OP_COPY, g->dtype, &part, 1, &dev, 1);
  }
}

/* Ops missing here have no derivative: reaching one on a path to a target is an error
 * (BITCAST between float types, for instance). Integer and bool nodes never carry gradients,
 * so the rules of ops with such outputs (comparisons, bit ops) are never called; they are
 * listed to say that their gradient is zero. */
static const grad_rule grad_rules[OP_COUNT] = {
    [OP_NEG] = d_neg,         [OP_EXP2] = d_exp2,       [OP_LOG2] = d_log2,
    [OP_SIN] = d_sin,         [OP_SQRT] = d_sqrt,       [OP_RECIP] = d_recip,
    [OP_TRUNC] = d_none,      [OP_NOT] = d_none,        [OP_CAST] = d_cast,
    [OP_ADD] = d_add,         [OP_MUL] = d_mul,         [OP_SUB] = d_sub,
    [OP_FDIV] = d_fdiv,       [OP_IDIV] = d_none,       [OP_MOD] = d_mod,
    [OP_MAX] = d_max,         [OP_AND] = d_none,        [OP_OR] = d_none,
    [OP_XOR] = d_none,        [OP_SHL] = d_none,        [OP_SHR] = d_none,
    [OP_POW] = d_pow,         [OP_CMPLT] = d_none,      [OP_CMPNE] = d_none,
    [OP_CMPEQ] = d_none,      [OP_WHERE] = d_where,     [OP_REDUCE_AXIS] = d_reduce,
    [OP_CONTIGUOUS] = d_pass,  [OP_COPY] = d_copy, [OP_DETACH] = d_none,     [OP_RESHAPE] = d_reshape,
    [OP_PERMUTE] = d_permute, [OP_EXPAND] = d_expand,   [OP_PAD] = d_pad,
    [OP_SHRINK] = d_shrink,   [OP_FLIP] = d_flip,       [OP_MULTI] = d_multi,
};

bool grad_has_rule(uop_op op) { return op < OP_COUNT && (grad_rules[op] || op == OP_GRADFN); }

/* ---------------------------------------------------------------- custom rules */

enum { MAX_CUSTOM_RULES = 16 };
static _Atomic(grad_custom_rule) custom_rules[MAX_CUSTOM_RULES];
static pthread_mutex_t custom_lock = PTHREAD_MUTEX_INITIALIZER;

int grad_register_custom(grad_custom_rule rule) {
  int id = -1;
  pthread_mutex_lock(&custom_lock);
  for (int i = 0; i < MAX_CUSTOM_RULES && id < 0; i++) {
    grad_custom_rule have = atomic_load(&custom_rules[i]);
    if (have == rule) id = i;
    else if (!have) atomic_store(&custom_rules[i], rule), id = i;
  }
  pthread_mutex_unlock(&custom_lock);
  return id;
}

/* GRADFN: the registered rule; no gradient flows into the value's own graph (src[0]). */
static void d_custom(uop *u, uop *g, uop **d) {
  int64_t id = u->arg[0];
  grad_custom_rule rule = id >= 0 && id < MAX_CUSTOM_RULES ? atomic_load(&custom_rules[id]) : NULL;
  if (rule) rule(u, g, d);
  d[0] = NULL;
}

/* ---------------------------------------------------------------- the reverse walk */

typedef struct walk {
  ptrmap targets;  /* target uop → its index + 1 */
  ptrmap relevant; /* node → 1 if it lies on a differentiable path to a target */
  ptrmap grads;    /* node → accumulated gradient */
} walk;

/* The target a node stands for: itself, or the buffer it was realized into. */
static uop *target_of(walk *w, uop *u) {
  if (ptrmap_has(&w->targets, u)) return u;
  uop *buf = uop_realized(u);
  if (buf && ptrmap_has(&w->targets, buf)) return buf;
  return NULL;
}

static bool is_relevant(walk *w, uop *u) { return ptrmap_get(&w->relevant, u) != NULL; }

/* Walk down the relevant nodes from u, not entering `stop`: into `seen`. */
static int mark_below(walk *w, uop *u, const ptrmap *stop, ptrmap *seen) {
  if (!is_relevant(w, u) || (stop && ptrmap_has(stop, u)) || ptrmap_has(seen, u)) return 0;
  if (ptrmap_put(seen, u, u) < 0) return TG_ERR_NOMEM;
  for (int i = 0; i < u->nsrc; i++)
    if (mark_below(w, u->src[i], stop, seen) < 0) return TG_ERR_NOMEM;
  return 0;
}

/* A GRADFN's rule gives gradients for its inputs only. A target that the value's graph reaches
 * other than through the inputs (a view of the input made inside a convolution) would get
 * nothing through it: an error, never a silent zero. */
static int check_custom_value(walk *w, uop *u) {
  if (!is_relevant(w, u->src[0])) return 0;
  ptrmap inputs = {0}, inside = {0};
  int rc = 0;
  for (int i = 1; i < u->nsrc && !rc; i++) rc = mark_below(w, u->src[i], NULL, &inputs);
  if (!rc) rc = mark_below(w, u->src[0], &inputs, &inside);
  for (size_t i = 0; i < inside.cap && !rc; i++)
    if (inside.keys[i] && target_of(w, (uop *)inside.keys[i]))
      rc = tg_set_error(TG_ERR_ARG, "gradient: a target lies inside the value of an op with its own derivative "
                        "(GRADFN: convolution, max pooling, sort) and is not one of its inputs; take the gradient with respect to "
                        "the op's inputs");
  ptrmap_free(&inputs), ptrmap_free(&inside);
  return rc == TG_ERR_NOMEM ? tg_set_error(rc, "gradient: out of memory") : rc;
}

/* Sources first: a float node is relevant when one of its sources is; DETACH cuts; a GRADFN
 * is relevant through its inputs only (and checked: check_custom_value). */
static int mark_relevant(walk *w, uop **order, int n) {
  for (int i = 0; i < n; i++) {
    uop *u = order[i];
    int rc = u->op == OP_GRADFN ? check_custom_value(w, u) : 0;
    if (rc < 0) return rc;
    bool rel = target_of(w, u) != NULL;
    if (!rel && dtype_is_float(u->dtype) && u->op != OP_DETACH)
      for (int j = u->op == OP_GRADFN; j < u->nsrc && !rel; j++) rel = is_relevant(w, u->src[j]);
    if (rel && ptrmap_put(&w->relevant, u, (void *)1) < 0) return tg_set_error(TG_ERR_NOMEM, "gradient: out of memory");
  }
  return 0;
}

static int accumulate(ptrmap *m, uop *key, uop *g) {
  uop *have = ptrmap_get(m, key);
  uop *sum = have ? bin(OP_ADD, have, g) : g;
  return sum && ptrmap_put(m, key, sum) == 0 ? 0 : TG_ERR_NOMEM;
}

/* Push the gradient of u to its relevant sources. */
static int backprop_node(walk *w, uop *u, uop *g) {
  bool any = false;
  for (int j = 0; j < u->nsrc; j++) any |= is_relevant(w, u->src[j]);
  if (!any) return 0; /* a target leaf */
  grad_rule rule = u->op == OP_GRADFN ? d_custom : grad_rules[u->op];
  enum { MAX_SRC = 16 }; /* a MULTI's shards (schedule.h MULTI_MAX) */
  if (!rule || u->nsrc > (u->op == OP_GRADFN ? GRAD_CUSTOM_MAX_SRC : MAX_SRC))
    return tg_set_error(TG_ERR_ARG, "gradient: op %s (%s) has no derivative rule and lies between y and a target",
                        uop_ops[u->op].name, tg_dtype_name(u->dtype));
  uop *d[MAX_SRC] = {NULL};
  rule(u, g, d);
  for (int j = 0; j < u->nsrc; j++)
    if (d[j] && is_relevant(w, u->src[j]) && accumulate(&w->grads, u->src[j], d[j]) < 0)
      return tg_set_error(TG_ERR_NOMEM, "gradient: out of memory");
  return 0;
}

static int backward_walk(walk *w, uop **order, int n, uop *y) {
  if (!is_relevant(w, y)) return 0;
  if (ptrmap_put(&w->grads, y, k(y, 1)) < 0) return tg_set_error(TG_ERR_NOMEM, "gradient: out of memory");
  for (int i = n - 1; i >= 0; i--) {
    uop *u = order[i], *g = ptrmap_get(&w->grads, u);
    int rc = g && is_relevant(w, u) ? backprop_node(w, u, g) : 0;
    if (rc < 0) return rc;
  }
  return 0;
}

int grad_uops(uop *y, uop *const *targets, int n, uop **out) {
  walk w = {0};
  uop **order = NULL;
  int norder = uop_toposort(y, &order), rc = norder < 0 ? TG_ERR_NOMEM : 0;
  for (int i = 0; i < n && !rc; i++) rc = ptrmap_put(&w.targets, targets[i], (void *)(intptr_t)(i + 1));
  if (rc) rc = tg_set_error(TG_ERR_NOMEM, "gradient: out of memory");
  if (!rc) rc = mark_relevant(&w, order, norder);
  if (!rc) rc = backward_walk(&w, order, norder, y);
  /* a target may appear as several nodes (its buffer and expressions realized into it) */
  ptrmap per_target = {0};
  for (int i = 0; i < norder && !rc; i++) {
    uop *t = target_of(&w, order[i]), *g = ptrmap_get(&w.grads, order[i]);
    if (t && g && accumulate(&per_target, t, g) < 0) rc = tg_set_error(TG_ERR_NOMEM, "gradient: out of memory");
  }
  for (int i = 0; i < n; i++) out[i] = rc ? NULL : ptrmap_get(&per_target, targets[i]);
  ptrmap_free(&per_target);
  ptrmap_free(&w.targets), ptrmap_free(&w.relevant), ptrmap_free(&w.grads);
  free(order);
  return rc;
}

/* ---------------------------------------------------------------- tensor API */

static bool check_scalar(const char *op, tg_tensor *y) {
  if (tg_numel(y) == 1) return true;
  char buf[256];
  tensor_error("%s: y must have one element, got shape %s", op, tg_fmt_shape(buf, sizeof buf, uop_shape(y->u), uop_ndim(y->u)));
  return false;
}

int tg_gradient(tg_tensor *y, tg_tensor **xs, int n, tg_tensor **grads_out) {
  if (grads_out)
    for (int i = 0; i < n; i++) grads_out[i] = NULL;
  if (!y) return null_arg("gradient"), TG_ERR_ARG;
  if (n < 0 || (n > 0 && (!xs || !grads_out)))
    return tg_set_error(TG_ERR_ARG, "gradient: invalid list of %d tensors (xs or grads_out NULL)", n);
  for (int i = 0; i < n; i++)
    if (!xs[i]) return null_arg("gradient"), TG_ERR_ARG;
  if (!check_scalar("gradient", y)) return TG_ERR_ARG;
  uop **targets = malloc(sizeof(uop *) * 2 * (size_t)(n ? n : 1)), **g = targets + n;
  if (!targets) return tg_set_error(TG_ERR_NOMEM, "gradient: out of memory");
  for (int i = 0; i < n; i++) targets[i] = xs[i]->u;
  size_t mark = uop_pool_mark();
  double t0 = tg_now();
  int rc = grad_uops(y->u, targets, n, g);
  profile_host("autograd", "gradient", t0, tg_now());
  for (int i = 0; i < n && !rc; i++) {
    grads_out[i] = tensor_wrap(g[i] ? g[i] : zeros(xs[i]->u));
    if (!grads_out[i]) rc = TG_ERR_NOMEM;
  }
  uop_pool_release(mark);
  free(targets);
  return rc;
}

/* ---- parameters: a registry of handles marked requires_grad, for every thread. tg_backward
 * reads it whole (another thread's parameters are skipped: its loss does not reach them), so
 * it holds the lock throughout; freeing a parameter meanwhile waits. Recursive: nothing in a
 * backward frees a parameter today, and if it did it would not deadlock. */

static VEC(tg_tensor *) params;
static pthread_mutex_t params_lock = PTHREAD_RECURSIVE_MUTEX_INITIALIZER_NP;

void grad_forget(tg_tensor *t) {
  pthread_mutex_lock(&params_lock);
  for (size_t i = 0; i < params.n; i++)
    if (params.v[i] == t) { params.v[i] = params.v[--params.n]; break; }
  if (!params.n) VEC_FREE(params);
  pthread_mutex_unlock(&params_lock);
  t->requires_grad = false;
}

tg_tensor *tg_requires_grad(tg_tensor *t, bool on) {
  if (!t) return null_arg("requires_grad");
  if (on == t->requires_grad) return t;
  if (!on) { grad_forget(t); return t; }
  if (!dtype_is_float(t->u->dtype))
    return tensor_error("requires_grad: only float tensors can have gradients, got %s", tg_dtype_name(t->u->dtype));
  pthread_mutex_lock(&params_lock);
  int rc = VEC_PUSH(params, t);
  pthread_mutex_unlock(&params_lock);
  if (rc < 0) return tensor_error("requires_grad: out of memory");
  t->requires_grad = true;
  return t;
}

bool tg_get_requires_grad(const tg_tensor *t) { return t && t->requires_grad; }

tg_tensor *tg_grad(tg_tensor *t) { return t ? t->grad : null_arg("grad"); }

void tg_zero_grad(tg_tensor *t) {
  if (!t) return;
  tg_free(t->grad);
  t->grad = NULL;
}

/* A handle owned by nobody's scope (the parameter owns it). */
static tg_tensor *wrap_unscoped(uop *u) {
  tg_tensor *t = tensor_wrap(u);
  while (t && t->scope) tg_keep(t);
  return t;
}

/* p.grad += g (a lazy sum; the handle stays the same so borrowed pointers see the update) */
static int add_to_grad(tg_tensor *p, uop *g) {
  if (!p->grad) return (p->grad = wrap_unscoped(g)) ? 0 : TG_ERR_NOMEM;
  uop *sum = bin(OP_ADD, p->grad->u, ucast(g, p->grad->u->dtype));
  if (!sum) return tg_set_error(TG_ERR_NOMEM, "backward: out of memory");
  tensor_set_value(p->grad, sum);
  return 0;
}

/* Under params_lock. */
static int backward_locked(tg_tensor *loss) {
  size_t n = params.n;
  if (!n) return tg_set_error(TG_ERR_ARG, "backward: no tensor is marked with tg_requires_grad");
  tg_tensor **ps = malloc(sizeof *ps * n);
  uop **targets = malloc(sizeof(uop *) * 2 * n), **g = targets ? targets + n : NULL;
  if (!ps || !targets) return free(ps), free(targets), tg_set_error(TG_ERR_NOMEM, "backward: out of memory");
  memcpy(ps, params.v, sizeof *ps * n);
  for (size_t i = 0; i < n; i++) targets[i] = ps[i]->u;
  size_t mark = uop_pool_mark();
  int rc = grad_uops(loss->u, targets, (int)n, g);
  for (size_t i = 0; i < n && !rc; i++) /* a parameter the loss does not reach keeps its gradient */
    if (g[i]) rc = add_to_grad(ps[i], g[i]);
  uop_pool_release(mark);
  free(ps), free(targets);
  return rc;
}

int tg_backward(tg_tensor *loss) {
  if (!loss) return null_arg("backward"), TG_ERR_ARG;
  if (!check_scalar("backward", loss)) return TG_ERR_ARG;
  double t0 = tg_now();
  pthread_mutex_lock(&params_lock);
  int rc = backward_locked(loss);
  pthread_mutex_unlock(&params_lock);
  profile_host("autograd", "backward", t0, tg_now());
  return rc;
}

/* A realized computed value detaches to its buffer: a new leaf with no history and nothing to
 * run. A leaf buffer (or a lazy value) gets a DETACH node: it must stay a node of its own, or
 * x * detach(x) would see the same target twice. */
tg_tensor *tg_detach(tg_tensor *t) {
  if (!t) return null_arg("detach");
  if (t->u->op != OP_BUFFER && uop_realized(t->u)) return tensor_wrap(uop_realized(t->u));
  size_t mark = uop_pool_mark();
  tg_tensor *r = tensor_wrap(uop_new1(OP_DETACH, t->u->dtype, t->u));
  uop_pool_release(mark);
  return r;
}
