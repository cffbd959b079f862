/* tensor.c — tensor handles, scopes, creation, inspection and realization. */
#include "tensor/tensor.h"

#include "device/device.h"
#include "schedule/schedule.h"
#include "tensor/shape.h"
#include "tensor/variable.h"

#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---------------------------------------------------------------- scopes */

struct tg_scope {
  VEC(tg_tensor *) items;
  tg_scope *parent;
};

static _Thread_local tg_scope *current_scope; /* each thread has its own scope stack */

static void scope_add(tg_scope *s, tg_tensor *t) {
  t->scope = NULL;
  if (!s || VEC_PUSH(s->items, t) < 0) return; /* on OOM the tensor becomes user-owned */
  t->scope = s, t->slot = s->items.n - 1;
}

static void scope_detach(tg_tensor *t) {
  if (t->scope) t->scope->items.v[t->slot] = NULL;
  t->scope = NULL;
}

tg_scope *tg_scope_begin(void) {
  tg_scope *s = calloc(1, sizeof *s);
  if (!s) return NULL;
  s->parent = current_scope;
  current_scope = s;
  return s;
}

/* ---------------------------------------------------------------- pending assigns
 * tg_assign gives a tensor a lazy new value. Like an in-place write in an eager framework it
 * must happen even if nobody asks for it (BatchNorm's running statistics): every realize also
 * realizes the pending assigns of its thread, so their graphs never pile up across steps.
 * One list for the process (a tensor may be freed by another thread than the one that
 * assigned it); each entry belongs to the thread that made the assign. */

static _Thread_local char this_thread; /* its address names the thread */

static struct {
  pthread_mutex_t lock;
  VEC(tg_tensor *) v;
} pending = {.lock = PTHREAD_MUTEX_INITIALIZER};

static void pending_add(tg_tensor *t) {
  pthread_mutex_lock(&pending.lock);
  if (!t->pending && !tensor_buffer(t) && VEC_PUSH(pending.v, t) == 0) t->pending = &this_thread;
  pthread_mutex_unlock(&pending.lock);
}

static void pending_remove(tg_tensor *t) {
  pthread_mutex_lock(&pending.lock);
  for (size_t i = 0; t->pending && i < pending.v.n; i++)
    if (pending.v.v[i] == t) pending.v.v[i] = pending.v.v[--pending.v.n], t->pending = NULL;
  pthread_mutex_unlock(&pending.lock);
}

/* This thread's pending tensors, written to out (room for every entry). */
static size_t pending_mine(tg_tensor **out) {
  size_t k = 0;
  pthread_mutex_lock(&pending.lock);
  for (size_t i = 0; i < pending.v.n; i++)
    if (pending.v.v[i]->pending == &this_thread) out[k++] = pending.v.v[i];
  pthread_mutex_unlock(&pending.lock);
  return k;
}

static size_t pending_count(void) {
  pthread_mutex_lock(&pending.lock);
  size_t n = pending.v.n;
  pthread_mutex_unlock(&pending.lock);
  return n;
}

/* Drop this thread's entries that are realized now. */
static void pending_prune(void) {
  pthread_mutex_lock(&pending.lock);
  size_t k = 0;
  for (size_t i = 0; i < pending.v.n; i++) {
    tg_tensor *t = pending.v.v[i];
    if (t->pending == &this_thread && tensor_buffer(t)) t->pending = NULL;
    else pending.v.v[k++] = t;
  }
  pending.v.n = k;
  if (!k) VEC_FREE(pending.v);
  pthread_mutex_unlock(&pending.lock);
}

void tensor_set_value(tg_tensor *t, uop *u) {
  uop *old = t->u;
  if (u) uop_incref(u), atomic_fetch_add_explicit(&u->handles, 1, memory_order_relaxed);
  t->u = u;
  if (old) atomic_fetch_sub_explicit(&old->handles, 1, memory_order_relaxed), uop_decref(old);
}

static void destroy_tensor(tg_tensor *t) {
  pending_remove(t);
  if (t->requires_grad) grad_forget(t);
  tensor_set_value(t, NULL);
  tg_free(t->grad);
  free(t);
}

void tg_scope_end(tg_scope *s) {
  if (!s) return;
  while (current_scope && current_scope != s) tg_scope_end(current_scope); /* close inner ones */
  for (size_t i = 0; i < s->items.n; i++) {
    tg_tensor *t = s->items.v[i];
    if (!t) continue;
    t->scope = NULL;
    if (--t->refcnt == 0) destroy_tensor(t);
  }
  if (current_scope == s) current_scope = s->parent;
  VEC_FREE(s->items);
  free(s);
}

tg_tensor *tg_keep(tg_tensor *t) {
  if (!t || !t->scope) return t;
  tg_scope *parent = t->scope->parent;
  scope_detach(t);
  scope_add(parent, t);
  return t;
}

tg_tensor *tg_retain(tg_tensor *t) {
  if (t) t->refcnt++;
  return t;
}

void tg_free(tg_tensor *t) {
  if (!t) return;
  if (t->refcnt > 1) { t->refcnt--; return; }
  scope_detach(t);
  destroy_tensor(t);
}

/* Two differing devices of u's sources (u is DEVICE_MIXED), for the error: a source's own
 * device, not what lies below it (a COPY's source is on another device by design). */
static void mixed_devices(uop *u, int *a, int *b) {
  for (int i = 0; i < u->nsrc && !*b; i++) {
    int d = u->src[i]->device;
    if (d == DEVICE_MIXED) mixed_devices(u->src[i], a, b);
    else if (d != DEVICE_NONE && !*a) *a = d;
    else if (d != DEVICE_NONE && d != *a) *b = d;
  }
}

/* Two variables met in one dim (an op on tensors sized by different variables). */
static bool sym_conflict(const uop *u) {
  for (int i = 0; u->sym && i < u->ndim; i++)
    if (u->sym[i] == SYM_BAD) return true;
  return false;
}

tg_tensor *tensor_wrap(uop *u) {
  if (!u || !shape_check_uop("tensor result", u)) return NULL; /* every tensor's shape is valid (shape.h) */
  if (sym_conflict(u))
    return tensor_error("%s: dims sized by two different variables (or beyond one's range) meet: not supported", uop_ops[u->op].name);
  if (u->device == DEVICE_MIXED) { /* the one place every op's result passes */
    int a = DEVICE_NONE, b = DEVICE_NONE;
    mixed_devices(u, &a, &b);
    const device *da = device_of_number(a), *db = device_of_number(b);
    const char *multi = "several (sharded)";
    return tensor_error("an op on tensors of different devices (%s and %s): copy one with tg_to", da ? da->name : a == DEVICE_MULTI ? multi : "?",
                        db ? db->name : b == DEVICE_MULTI ? multi : "?");
  }
  tg_tensor *t = calloc(1, sizeof *t);
  if (!t) return tensor_error("out of memory"), NULL;
  tensor_set_value(t, u);
  t->refcnt = 1;
  scope_add(current_scope, t);
  return t;
}

tg_tensor *null_arg(const char *op) {
  if (!tg_last_error()[0]) tg_set_error(TG_ERR_ARG, "%s: NULL tensor argument", op);
  return NULL;
}

tg_tensor *tensor_error(const char *fmt, ...) {
  char msg[900];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  tg_set_error(TG_ERR_ARG, "%s", msg);
  return NULL;
}

/* ---------------------------------------------------------------- validation */

static bool check_dtype(const char *op, tg_dtype dt) {
  if (dtype_valid((int)dt)) return true;
  tensor_error("%s: invalid dtype %d", op, (int)dt);
  return false;
}

/* A valid dtype and a valid shape of it (tensor/shape.h). */
static bool check_request(const char *op, tg_dtype dt, const int64_t *shape, int nd) {
  return check_dtype(op, dt) && shape_check(op, shape, nd, dt);
}

/* ---------------------------------------------------------------- graph helpers */

static bool same_shape(uop *x, const int64_t *shape, int nd) {
  return uop_ndim(x) == nd && (nd == 0 || !memcmp(uop_shape(x), shape, sizeof(int64_t) * (size_t)nd));
}

uop *ushape_reshape(uop *x, const int64_t *shape, int nd) {
  if (same_shape(x, shape, nd)) return x;
  return uop_new(OP_RESHAPE, x->dtype, &x, 1, shape, nd);
}

uop *ushape_expand(uop *x, const int64_t *shape, int nd) {
  if (same_shape(x, shape, nd)) return x;
  return uop_new(OP_EXPAND, x->dtype, &x, 1, shape, nd);
}

uop *ucast(uop *x, tg_dtype dt) { return x->dtype == dt ? x : uop_new1(OP_CAST, dt, x); }

/* A 0-d node broadcast to shape. */
static uop *ubroadcast_scalar(uop *c, const int64_t *shape, int nd) {
  int64_t ones[TG_MAX_DIMS];
  for (int i = 0; i < nd; i++) ones[i] = 1;
  return c ? ushape_expand(ushape_reshape(c, ones, nd), shape, nd) : NULL;
}

/* With x's variable dims (a constant padded by a variable amount must have them). */
uop *uconst_like(uop *x, double v, tg_dtype dt) { return sym_like(ubroadcast_scalar(uop_const(dt, v), uop_shape(x), uop_ndim(x)), x); }

static uop *uiota(int64_t n) { return uop_new(OP_IOTA, TG_INT64, NULL, 0, &n, 1); }

/* ---------------------------------------------------------------- creation */

#define POOL_BEGIN size_t pool_mark_ = uop_pool_mark()
#define POOL_END(u) do { tg_tensor *r_ = tensor_wrap(u); uop_pool_release(pool_mark_); return r_; } while (0)

tg_tensor *tg_from_data(const void *data, tg_dtype dtype, const int64_t *shape, int ndim) {
  if (!check_request("from_data", dtype, shape, ndim)) return NULL;
  int64_t numel = shape_numel(shape, ndim);
  if (!data && numel) return tensor_error("from_data: data is NULL");
  POOL_BEGIN;
  uop *b = buffer_new(dtype, shape, ndim);
  unsigned char *bools = dtype == TG_BOOL && numel ? malloc((size_t)numel) : NULL; /* only 0/1 are valid _Bool bytes */
  for (int64_t i = 0; bools && i < numel; i++) bools[i] = ((const unsigned char *)data)[i] != 0;
  if (b && dtype == TG_BOOL && numel && !bools) b = NULL, tg_set_error(TG_ERR_NOMEM, "from_data: out of memory");
  if (b && buffer_copy_in(b, bools ? bools : data, (size_t)numel * tg_dtype_size(dtype)) < 0) b = NULL;
  free(bools);
  POOL_END(b);
}

tg_tensor *tg_full(const int64_t *shape, int ndim, double value, tg_dtype dtype) {
  if (!check_request("full", dtype, shape, ndim)) return NULL;
  POOL_BEGIN;
  POOL_END(ubroadcast_scalar(uop_value(dtype, value), shape, ndim)); /* the value is a kernel argument */
}

tg_tensor *tg_zeros(const int64_t *shape, int ndim, tg_dtype dtype) { return tg_full(shape, ndim, 0, dtype); }
tg_tensor *tg_ones(const int64_t *shape, int ndim, tg_dtype dtype) { return tg_full(shape, ndim, 1, dtype); }
tg_tensor *tg_scalar(double value, tg_dtype dtype) { return tg_full(NULL, 0, value, dtype); }

tg_tensor *tg_empty(const int64_t *shape, int ndim, tg_dtype dtype) {
  if (!check_request("empty", dtype, shape, ndim)) return NULL;
  POOL_BEGIN;
  POOL_END(buffer_new(dtype, shape, ndim));
}

tg_tensor *tg_full_like(tg_tensor *t, double value) {
  if (!t) return null_arg("full_like");
  if (t->u->device == DEVICE_MULTI) return multi_full_like(t, value);
  return tg_full(uop_shape(t->u), uop_ndim(t->u), value, t->u->dtype);
}
tg_tensor *tg_zeros_like(tg_tensor *t) { return t ? tg_full_like(t, 0) : null_arg("zeros_like"); }
tg_tensor *tg_ones_like(tg_tensor *t) { return t ? tg_full_like(t, 1) : null_arg("ones_like"); }
tg_tensor *tg_empty_like(tg_tensor *t) {
  if (!t) return null_arg("empty_like");
  return tg_empty(uop_shape(t->u), uop_ndim(t->u), t->u->dtype);
}

/* Does v fit dt (the largest finite value for floats; ints whose 64-bit limits are not exact
 * doubles compare below 2^63 / 2^64)? */
static bool value_fits(double v, tg_dtype dt) {
  static const double float_max[TG_DTYPE_COUNT] = {[TG_FLOAT16] = 65504.0, [TG_BFLOAT16] = 0x1.fep127,
                                                   [TG_FLOAT32] = 0x1.fffffep127, [TG_FLOAT64] = 0x1.fffffffffffffp1023};
  if (dtype_is_float(dt)) return fabs(v) <= float_max[dt];
  if (dt == TG_INT64) return v >= -0x1p63 && v < 0x1p63;
  if (dt == TG_UINT64) return v >= 0 && v < 0x1p64;
  return v >= dtype_table[dt].min && v <= dtype_table[dt].max;
}

tg_tensor *tg_arange(double start, double stop, double step, tg_dtype dtype) {
  if (!check_dtype("arange", dtype)) return NULL;
  if (step == 0 || !isfinite(start) || !isfinite(stop) || !isfinite(step))
    return tensor_error("arange: invalid range start=%g stop=%g step=%g", start, stop, step);
  double count = ceil((stop - start) / step); /* may be inf: compared before any cast */
  if (!(count <= 0x1p62))
    return shape_error("arange: too many elements (%g) for start=%g stop=%g step=%g", count, start, stop, step);
  int64_t n = count > 0 ? (int64_t)count : 0;
  if (!shape_check("arange", &n, 1, dtype)) return NULL;
  double last = start + (double)(n - 1) * step; /* the first and last values must fit (PyTorch wraps) */
  if (n && (!value_fits(start, dtype) || !value_fits(last, dtype)))
    return tensor_error("arange: values from %g to %g do not fit %s", start, last, tg_dtype_name(dtype));
  POOL_BEGIN;
  bool exact_int = !dtype_is_float(dtype) && start == floor(start) && step == floor(step);
  tg_dtype calc = exact_int ? TG_INT64 : TG_FLOAT64; /* numpy computes start + i*step in 64 bits */
  uop *i = ucast(uiota(n), calc);
  uop *v = uop_add(uop_mul(i, uconst_like(i, step, calc)), uconst_like(i, start, calc));
  POOL_END(ucast(v, dtype));
}

tg_tensor *tg_linspace(double start, double stop, int64_t n, tg_dtype dtype) {
  if (!check_dtype("linspace", dtype)) return NULL;
  if (!isfinite(start) || !isfinite(stop)) return tensor_error("linspace: start=%g and stop=%g must be finite", start, stop);
  if (!shape_check("linspace", &n, 1, dtype)) return NULL;
  if (n && (!value_fits(start, dtype) || !value_fits(stop, dtype)))
    return tensor_error("linspace: start=%g and stop=%g do not fit %s", start, stop, tg_dtype_name(dtype));
  POOL_BEGIN;
  if (!dtype_is_float(dtype) && n > 1) { /* the exact start + i (stop - start) / (n - 1), truncated */
    uop *i = ucast(uiota(n), TG_FLOAT64);
    uop *num = uop_add(uop_mul(i, uconst_like(i, stop - start, TG_FLOAT64)), uconst_like(i, start * (double)(n - 1), TG_FLOAT64));
    POOL_END(ucast(uop_alu(OP_FDIV, num, uconst_like(i, (double)(n - 1), TG_FLOAT64)), dtype));
  }
  double step = n > 1 ? (stop - start) / (double)(n - 1) : 0;
  uop *idx = uiota(n), *i = ucast(idx, TG_FLOAT64);
  uop *v = uop_add(uop_mul(i, uconst_like(i, step, TG_FLOAT64)), uconst_like(i, start, TG_FLOAT64));
  uop *last = uop_alu(OP_CMPEQ, idx, uconst_like(idx, n > 1 ? (double)(n - 1) : -1.0, TG_INT64));
  v = uop_new3(OP_WHERE, TG_FLOAT64, last, uconst_like(i, stop, TG_FLOAT64), v);
  POOL_END(ucast(v, dtype));
}

tg_tensor *tg_eye(int64_t n, int64_t m, tg_dtype dtype) {
  if (!check_dtype("eye", dtype)) return NULL;
  int64_t s[2] = {n, m}, col[2] = {n, 1}, row[2] = {1, m};
  if (!shape_check("eye", s, 2, dtype)) return NULL;
  POOL_BEGIN;
  uop *a = ushape_expand(ushape_reshape(uiota(n), col, 2), s, 2);
  uop *b = ushape_expand(ushape_reshape(uiota(m), row, 2), s, 2);
  POOL_END(ucast(uop_alu(OP_CMPEQ, a, b), dtype));
}

/* ---------------------------------------------------------------- inspection */

const char *tg_device_of(const tg_tensor *t) {
  if (!t) return null_arg("device_of"), NULL;
  if (t->u->device == DEVICE_MULTI) return multi_device_names(t->u);
  const device *d = t->u->device == DEVICE_NONE ? device_default() : device_of_number(t->u->device);
  return d ? d->name : NULL; /* a constant lives where it is used: the default device */
}

tg_tensor *tg_to(tg_tensor *t, const char *name) {
  if (!t) return null_arg("to");
  const device *d = device_get(name);
  if (!d) return NULL;
  int64_t n = device_number(d);
  if (t->u->device == n) return tensor_wrap(t->u); /* already there: the same value */
  POOL_BEGIN;
  POOL_END(uop_new(OP_COPY, t->u->dtype, &t->u, 1, &n, 1));
}

int tg_ndim(const tg_tensor *t) { return t ? uop_ndim(t->u) : -1; }

int64_t tg_dim(const tg_tensor *t, int axis) {
  if (!t) return null_arg("dim"), -1;
  if (!normalize_axis("dim", &axis, uop_ndim(t->u), AXIS_OF)) return -1;
  return uop_shape(t->u)[axis];
}

int64_t tg_numel(const tg_tensor *t) { return t ? shape_numel(uop_shape(t->u), uop_ndim(t->u)) : -1; }
tg_dtype tg_get_dtype(const tg_tensor *t) { return t ? (tg_dtype)t->u->dtype : TG_DTYPE_COUNT; }

int tg_shape(const tg_tensor *t, int64_t *out, int cap) {
  if (!t) return null_arg("shape"), -1;
  if (!out && cap > 0) return tensor_error("shape: out is NULL (cap %d)", cap), -1;
  int nd = uop_ndim(t->u);
  for (int i = 0; i < nd && i < cap; i++) out[i] = uop_shape(t->u)[i];
  return nd;
}

/* A sharded value whose shards are all stored (what a realize leaves) is its own buffers. */
static bool stored_multi(const uop *u) {
  bool all = u->op == OP_MULTI;
  for (int i = 0; all && i < u->nsrc; i++) all = u->src[i]->op == OP_BUFFER;
  return all;
}

uop *tensor_buffer(const tg_tensor *t) { return t->u->op == OP_BUFFER || stored_multi(t->u) ? t->u : uop_realized(t->u); }

bool tg_is_realized(const tg_tensor *t) { return t && tensor_buffer(t); }

/* ---------------------------------------------------------------- realization */

/* Can a gradient flow through t's value? Not through an int or bool, nor out of a DETACH
 * (tg_detach, tg_assign): there the history can go once the value is stored. */
static bool carries_gradient(const uop *u) { return dtype_is_float(u->dtype) && u->op != OP_DETACH; }

/* After a realize: the buffer becomes the value's node's `realized` (the scheduler attached
 * it when it was a kernel root; a value that needed no kernel, a BUFFER under a view or a
 * DETACH, gets it here). The handle keeps its expression — its history, which gradients are
 * taken through — unless no gradient can flow through it: then the buffer replaces it and the
 * history can be freed. */
static void attach_buffer(tg_tensor *t, uop *buf) {
  uop *view = NULL;
  size_t mark = uop_pool_mark();
  if (!carries_gradient(t->u) && t->u->sym) /* a variable dim lives in the node: a view of the buffer, realized as it */
    if ((view = sym_like(buf, t->u))) uop_set_realized(view, buf);
  if (!carries_gradient(t->u)) tensor_set_value(t, view ? view : buf);
  else uop_set_realized(t->u, buf);
  uop_pool_release(mark);
  uop_decref(buf);
}

/* What a realize of ts[0..n) computes: the unrealized ones and this thread's pending assigns,
 * as handles (*all) and their nodes (*nodes, with room for as many outputs after them). */
typedef struct targets {
  tg_tensor **all;
  uop **nodes;
  int n;
} targets;

static int collect_targets(const char *op, tg_tensor **ts, int n, targets *t) {
  *t = (targets){0};
  if (!ts || n < 0) return tg_set_error(TG_ERR_ARG, "%s: invalid tensor list", op);
  for (int i = 0; i < n; i++)
    if (!ts[i]) return null_arg(op), TG_ERR_ARG;
  size_t cap = (size_t)n + pending_count() + 1; /* only this thread adds its own entries meanwhile */
  t->all = malloc(sizeof(tg_tensor *) * cap), t->nodes = malloc(sizeof(uop *) * 2 * cap);
  if (!t->all || !t->nodes) return free(t->all), free(t->nodes), tg_set_error(TG_ERR_NOMEM, "%s: out of memory", op);
  memcpy(t->all, ts, sizeof(tg_tensor *) * (size_t)n);
  size_t total = (size_t)n + pending_mine(t->all + n);
  for (size_t i = 0; i < total; i++)
    if (!tensor_buffer(t->all[i])) t->all[t->n] = t->all[i], t->nodes[t->n++] = t->all[i]->u;
  return 0;
}

/* Realize ts[0..n) and then every pending assign, in one schedule. */
int tg_realize_many(tg_tensor **ts, int n) {
  targets t;
  int rc = collect_targets("realize", ts, n, &t);
  uop **bufs = t.nodes ? t.nodes + t.n : NULL;
  if (rc == 0 && t.n) rc = engine_realize(t.nodes, t.n, bufs);
  for (int j = 0; j < t.n && rc == 0; j++) { /* bufs[j] is a new reference */
    if (tensor_buffer(t.all[j])) uop_decref(bufs[j]); /* the same tensor listed twice */
    else attach_buffer(t.all[j], bufs[j]);
  }
  free(t.all), free(t.nodes);
  if (rc == 0) pending_prune();
  return rc;
}

int tg_schedule_kernels(tg_tensor **ts, int n) {
  targets t;
  int rc = collect_targets("schedule_kernels", ts, n, &t);
  schedule s = {0};
  if (rc == 0 && t.n) rc = schedule_build(t.nodes, t.n, &s);
  int kernels = 0;
  for (size_t i = 0; i < s.items.n; i++) kernels += s.items.v[i].ast && s.items.v[i].numel > 0;
  schedule_free(&s);
  free(t.all), free(t.nodes);
  return rc < 0 ? rc : kernels;
}

int tg_realize(tg_tensor *t) {
  if (!t) return null_arg("realize"), TG_ERR_ARG;
  return tg_realize_many(&t, 1);
}

int tg_to_host(tg_tensor *t, void *dst, size_t nbytes) {
  if (!t) return null_arg("to_host"), TG_ERR_ARG;
  if (t->u->sym) return sym_to_host(t, dst, nbytes); /* the elements at the bound values */
  size_t need = (size_t)tg_numel(t) * tg_dtype_size(t->u->dtype);
  if (!dst && need) return tg_set_error(TG_ERR_ARG, "to_host: dst is NULL");
  if (nbytes != need) {
    char buf[256];
    return tg_set_error(TG_ERR_ARG, "to_host: buffer of %zu bytes, tensor %s %s needs %zu", nbytes,
                        tg_fmt_shape(buf, sizeof buf, uop_shape(t->u), uop_ndim(t->u)),
                        tg_dtype_name(t->u->dtype), need);
  }
  int rc = tg_realize(t);
  if (rc < 0) return rc;
  uop *b = tensor_buffer(t);
  return b->op == OP_MULTI ? multi_copy_out(b, dst) : buffer_copy_out(b, dst, need);
}

double tg_item(tg_tensor *t) {
  if (!t) return null_arg("item"), NAN;
  if (tg_numel(t) != 1) return tensor_error("item: tensor has %lld elements, expected 1", (long long)tg_numel(t)), NAN;
  unsigned char buf[8];
  if (tg_to_host(t, buf, tg_dtype_size(t->u->dtype)) < 0) return NAN;
  return dtype_read(buf, t->u->dtype, 0);
}

int tg_assign_data(tg_tensor *t, const void *data, size_t nbytes) {
  if (!t) return null_arg("assign_data"), TG_ERR_ARG;
  size_t need = (size_t)tg_numel(t) * tg_dtype_size(t->u->dtype);
  if (nbytes != need || (!data && need))
    return tg_set_error(TG_ERR_ARG, "assign_data: got %zu bytes, tensor needs %zu", nbytes, need);
  tg_scope *s = tg_scope_begin();
  tg_tensor *fresh = tg_from_data(data, t->u->dtype, uop_shape(t->u), uop_ndim(t->u));
  int rc = fresh ? 0 : TG_ERR_NOMEM;
  if (fresh) tensor_set_value(t, fresh->u); /* a new buffer: graphs built on the old value keep seeing it */
  tg_scope_end(s);
  return rc;
}

int tg_assign(tg_tensor *dst, tg_tensor *src) {
  if (!dst || !src) return null_arg("assign"), TG_ERR_ARG;
  int nd = uop_ndim(dst->u);
  if (nd != uop_ndim(src->u) || memcmp(uop_shape(dst->u), uop_shape(src->u), sizeof(int64_t) * (size_t)nd)) {
    char a[256], b[256];
    return tg_set_error(TG_ERR_ARG, "assign: shape %s cannot take a value of shape %s",
                        tg_fmt_shape(a, sizeof a, uop_shape(dst->u), nd),
                        tg_fmt_shape(b, sizeof b, uop_shape(src->u), uop_ndim(src->u)));
  }
  jit_note_assign(dst); /* a JIT recording this call: dst is state */
  size_t m = uop_pool_mark();
  uop *v = uop_new1(OP_DETACH, dst->u->dtype, ucast(src->u, dst->u->dtype)); /* a write, not a function */
  if (!v) return uop_pool_release(m), tg_set_error(TG_ERR_NOMEM, "assign: out of memory");
  tensor_set_value(dst, v);
  uop_pool_release(m);
  pending_add(dst);
  return 0;
}
