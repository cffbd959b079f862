/* uop.c — op table, interning, reference counts, the autorelease pool, constants, shapes. */
#include "uop/uop.h"

#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/helpers.h"
#include "uop/dtype.h"

const uop_info uop_ops[OP_COUNT] = {
#define UOP_INFO(name, n, f) [OP_##name] = {#name, n, f},
    UOP_LIST(UOP_INFO)
#undef UOP_INFO
};

/* ---------------------------------------------------------------- interning
 * One table shared by every thread: lookups and inserts hold table.lock. A node whose count
 * drops to 0 is dying: lookups skip it (they only take a reference from a count above 0), and
 * its last owner unlinks it under the lock and frees it. So a node is never found dead. */

static struct {
  pthread_mutex_t lock;
  uop **slots;
  size_t cap, count;
} table = {.lock = PTHREAD_MUTEX_INITIALIZER};

uint64_t uop_alive_count(void) {
  pthread_mutex_lock(&table.lock);
  uint64_t n = table.count;
  pthread_mutex_unlock(&table.lock);
  return n;
}

static uint64_t content_hash(uop_op op, tg_dtype dt, int vc, uop *const *src, int nsrc, const int64_t *arg,
                             int narg) {
  uint64_t h = hash_mix((uint64_t)op * 131u + (uint64_t)dt + ((uint64_t)vc << 24), (uint64_t)nsrc * 977u + (uint64_t)narg);
  for (int i = 0; i < nsrc; i++) h = hash_mix(h, src[i]->hash);
  for (int i = 0; i < narg; i++) h = hash_mix(h, (uint64_t)arg[i]);
  return h;
}

static bool same_content(const uop *u, uop_op op, tg_dtype dt, int vc, uop *const *src, int nsrc,
                         const int64_t *arg, int narg) {
  if (u->op != op || u->dtype != dt || u->vcount != vc || u->nsrc != nsrc || u->narg != narg) return false;
  for (int i = 0; i < nsrc; i++)
    if (u->src[i] != src[i]) return false;
  return narg == 0 || memcmp(u->arg, arg, (size_t)narg * sizeof *arg) == 0;
}

/* Under table.lock. */
static int table_grow(void) {
  size_t ncap = table.cap ? table.cap * 2 : 4096;
  uop **ns = calloc(ncap, sizeof *ns);
  if (!ns) return -1;
  for (size_t i = 0; i < table.cap; i++) {
    for (uop *u = table.slots[i], *next; u; u = next) {
      next = u->next;
      size_t j = (size_t)u->hash & (ncap - 1);
      u->next = ns[j];
      ns[j] = u;
    }
  }
  free(table.slots);
  table.slots = ns, table.cap = ncap;
  return 0;
}

static void table_unlink(uop *u) {
  pthread_mutex_lock(&table.lock);
  uop **pp = &table.slots[(size_t)u->hash & (table.cap - 1)];
  while (*pp != u) pp = &(*pp)->next;
  *pp = u->next;
  table.count--;
  pthread_mutex_unlock(&table.lock);
}

/* ---------------------------------------------------------------- reference counts */

void uop_incref(uop *u) {
  if (u) atomic_fetch_add_explicit(&u->refcnt, 1, memory_order_relaxed);
}

/* A reference from the table, unless the node is dying (count 0). */
static bool ref_unless_dying(uop *u) {
  uint32_t c = atomic_load_explicit(&u->refcnt, memory_order_relaxed);
  while (c)
    if (atomic_compare_exchange_weak_explicit(&u->refcnt, &c, c + 1, memory_order_acquire, memory_order_relaxed)) return true;
  return false;
}

/* Drop a reference; true when it was the last (the caller then unlinks and frees u). */
static bool release(uop *u) { return atomic_fetch_sub_explicit(&u->refcnt, 1, memory_order_acq_rel) == 1; }

extern void buffer_release_hook(uop *u); /* device/buffer.c */

/* Push a node whose count reached 0 onto the list of nodes to free (linked through `next`,
 * free once the node is out of the table): freeing never recurses and never allocates. */
static uop *push_dead(uop *u, uop *dead) {
  table_unlink(u);
  u->next = dead;
  return u;
}

void uop_decref(uop *u) {
  if (!u || !release(u)) return;
  uop *dead = push_dead(u, NULL);
  while (dead) {
    uop *cur = dead, *buf = uop_realized(cur);
    dead = cur->next;
    for (int i = 0; i < cur->nsrc; i++)
      if (release(cur->src[i])) dead = push_dead(cur->src[i], dead);
    if (buf && release(buf)) dead = push_dead(buf, dead);
    if (cur->op == OP_BUFFER) buffer_release_hook(cur);
    free(cur);
  }
}

void uop_set_device(uop *buffer, int device) { buffer->device = (uint8_t)device; }

uop *uop_set_realized(uop *u, uop *buf) {
  uop *none = NULL;
  uop_incref(buf);
  if (atomic_compare_exchange_strong_explicit(&u->realized, &none, buf, memory_order_acq_rel, memory_order_acquire))
    return buf;
  uop_decref(buf); /* another thread was first: its buffer holds the same value */
  return none;
}

/* ---------------------------------------------------------------- pool
 * Each thread has its own autorelease stack. */

static _Thread_local VEC(uop *) pool;

size_t uop_pool_mark(void) { return pool.n; }

/* Hand one reference of u (already taken) to the pool; on failure drop it and return NULL. */
static uop *pool_own(uop *u) {
  if (VEC_PUSH(pool, u) == 0) return u;
  uop_decref(u);
  return NULL;
}

uop *uop_pool_add(uop *u) {
  if (!u) return NULL;
  uop_incref(u);
  return pool_own(u);
}

void uop_pool_release(size_t mark) {
  while (pool.n > mark) uop_decref(pool.v[--pool.n]);
  if (!pool.n) VEC_FREE(pool); /* a thread that ends leaves nothing behind */
}

/* ---------------------------------------------------------------- nodes */

static int shape_rank(uop_op op, uop *const *src, int nsrc, int narg);
static void fill_shape(uop *u);

/* A new node, complete (shape included) before any other thread can see it. */
static uop *make_node(uint64_t h, uop_op op, tg_dtype dt, int vc, uop *const *src, int nsrc, const int64_t *arg, int narg) {
  int nd = shape_rank(op, src, nsrc, narg);
  size_t bytes = sizeof(uop) + (size_t)nsrc * sizeof(uop *) + (size_t)(narg + (nd > 0 ? nd : 0)) * sizeof(int64_t);
  uop *u = calloc(1, bytes);
  if (!u) return NULL;
  u->op = (uint16_t)op, u->dtype = (uint8_t)dt, u->vcount = (uint8_t)vc, u->hash = h;
  u->nsrc = nsrc, u->narg = narg, u->ndim = nd;
  u->src = (uop **)(u + 1);
  u->arg = (int64_t *)(u->src + nsrc);
  u->shape = u->arg + narg;
  for (int i = 0; i < nsrc; i++) uop_incref(u->src[i] = src[i]);
  if (narg) memcpy(u->arg, arg, (size_t)narg * sizeof *arg);
  fill_shape(u);
  u->device = op == OP_COPY && narg > 0 && arg[0] > 0 && arg[0] < DEVICE_MIXED ? (uint8_t)arg[0] : DEVICE_NONE;
  if (op == OP_MULTI) u->device = DEVICE_MULTI;
  for (int i = 0; i < nsrc && op != OP_COPY && op != OP_MULTI; i++) { /* sources agree, or the node is mixed */
    uint8_t d = src[i]->device, was = u->device;
    if (d == DEVICE_NONE || d == was) continue;
    bool multi = (was == DEVICE_MULTI || d == DEVICE_MULTI) && was != DEVICE_MIXED && d != DEVICE_MIXED;
    u->device = was == DEVICE_NONE ? d : multi ? DEVICE_MULTI : DEVICE_MIXED; /* one device's operand goes to every shard */
  }
  atomic_init(&u->refcnt, 1);
  return u;
}

uop *uop_new(uop_op op, tg_dtype dt, uop *const *src, int nsrc, const int64_t *arg, int narg) {
  return uop_new_vec(op, dt, 0, src, nsrc, arg, narg);
}

uop *uop_new_vec(uop_op op, tg_dtype dt, int vc, uop *const *src, int nsrc, const int64_t *arg, int narg) {
  for (int i = 0; i < nsrc; i++)
    if (!src[i]) return NULL;
  if (vc < 0 || vc > 255) return NULL;
  uint64_t h = content_hash(op, dt, vc, src, nsrc, arg, narg);
  uop *u = NULL;
  pthread_mutex_lock(&table.lock);
  for (uop *c = table.cap ? table.slots[(size_t)h & (table.cap - 1)] : NULL; c && !u; c = c->next)
    if (c->hash == h && same_content(c, op, dt, vc, src, nsrc, arg, narg) && ref_unless_dying(c)) u = c;
  if (!u && (table.count + 1 <= table.cap || table_grow() == 0) && (u = make_node(h, op, dt, vc, src, nsrc, arg, narg))) {
    size_t j = (size_t)h & (table.cap - 1);
    u->next = table.slots[j];
    table.slots[j] = u;
    table.count++;
  }
  pthread_mutex_unlock(&table.lock);
  return u ? pool_own(u) : NULL;
}

uop *uop_new1(uop_op op, tg_dtype dt, uop *a) { return uop_new(op, dt, &a, 1, NULL, 0); }
uop *uop_new2(uop_op op, tg_dtype dt, uop *a, uop *b) {
  uop *s[2] = {a, b};
  return uop_new(op, dt, s, 2, NULL, 0);
}
uop *uop_new3(uop_op op, tg_dtype dt, uop *a, uop *b, uop *c) {
  uop *s[3] = {a, b, c};
  return uop_new(op, dt, s, 3, NULL, 0);
}
uop *uop_replace_src(uop *u, uop *const *src, int nsrc) {
  return uop_new_vec(u->op, u->dtype, u->vcount, src, nsrc, u->arg, u->narg);
}

/* ---------------------------------------------------------------- constants */

uop *uop_const_int(tg_dtype dt, int64_t v) {
  if (dtype_is_float(dt)) return uop_const(dt, (double)v);
  if (dt == TG_BOOL) v = v != 0;
  return uop_new(OP_CONST, dt, NULL, 0, &v, 1);
}

uop *uop_const(tg_dtype dt, double v) {
  int64_t bits;
  if (dtype_is_float(dt)) {
    if (dt == TG_FLOAT32) v = (float)v;
    else if (dt == TG_FLOAT16) v = half_to_float(float_to_half((float)v));
    else if (dt == TG_BFLOAT16) v = bf16_to_float(float_to_bf16((float)v));
    memcpy(&bits, &v, 8);
    return uop_new(OP_CONST, dt, NULL, 0, &bits, 1);
  }
  if (dt == TG_BOOL) return uop_const_int(dt, v != 0);
  if (dt == TG_UINT64 && v >= 9223372036854775808.0) { /* the bits of the uint64 value */
    bits = dtype_double_to_int(v, true);
    return uop_new(OP_CONST, dt, NULL, 0, &bits, 1);
  }
  return uop_const_int(dt, dtype_double_to_int(v, false));
}

uop *uop_const_bool(bool v) { return uop_const_int(TG_BOOL, v); }

uop *uop_value(tg_dtype dt, double v) {
  static _Atomic uint64_t serial;
  uop *c = uop_const(dt, v); /* the same encoding as a constant (rounded to dt) */
  if (!c) return NULL;
  int64_t arg[2] = {c->arg[0], (int64_t)atomic_fetch_add(&serial, 1)};
  return uop_new(OP_VALUE, dt, NULL, 0, arg, 2);
}

double uop_const_value(const uop *c) {
  if (dtype_is_float(c->dtype)) {
    double d;
    memcpy(&d, &c->arg[0], 8);
    return d;
  }
  if (c->dtype == TG_UINT64) return (double)(uint64_t)c->arg[0];
  return (double)c->arg[0];
}

int64_t uop_const_ivalue(const uop *c) {
  if (dtype_is_float(c->dtype)) {
    double d = uop_const_value(c);
    return isfinite(d) && fabs(d) < 9.2e18 ? (int64_t)d : 0;
  }
  return c->arg[0];
}

bool uop_is_const_val(const uop *u, double v) {
  return u && u->op == OP_CONST && uop_const_value(u) == v;
}

uop *uop_idx(int64_t v) { return uop_const_int(TG_INT64, v); }

uop *uop_alu(uop_op op, uop *a, uop *b) {
  tg_dtype dt = (uop_ops[op].flags & UOP_FLAG_CMP) ? TG_BOOL : (tg_dtype)a->dtype;
  return uop_new2(op, dt, a, b);
}
uop *uop_add(uop *a, uop *b) { return uop_alu(OP_ADD, a, b); }
uop *uop_mul(uop *a, uop *b) { return uop_alu(OP_MUL, a, b); }

/* ---------------------------------------------------------------- shapes */

/* -1 for a negative size or an overflow (never for the shape of a tensor: see tensor/shape.h). */
int64_t shape_numel(const int64_t *shape, int ndim) {
  int64_t n = 1;
  for (int i = 0; i < ndim; i++)
    if (shape[i] < 0 || !ck_mul(n, shape[i], &n)) return -1;
  return n;
}

/* Size i of a PAD or SHRINK from its source size; -1 (an invalid size the frontend rejects)
 * where the exact result does not fit in int64. */
static int64_t view_size(const uop *u, int i, int64_t in) {
  int64_t r, lo = u->arg[2 * i], hi = u->arg[2 * i + 1];
  bool ok = u->op == OP_PAD ? ck_add(in, lo, &r) && ck_add(r, hi, &r) : ck_sub(hi, lo, &r);
  return ok ? r : -1;
}

/* The rank of a node made from op, sources and arg (-1: kernel-level ops have no shape). */
static int shape_rank(uop_op op, uop *const *src, int nsrc, int narg) {
  switch (op) {
    case OP_BUFFER: case OP_PARAM: case OP_MULTI: return narg - 1;
    case OP_CONST: case OP_VALUE: return 0;
    case OP_IOTA: return 1;
    case OP_RESHAPE: case OP_EXPAND: return narg;
    case OP_SINK: case OP_INDEX: case OP_DEFINE_GLOBAL: case OP_RANGE: case OP_LOAD:
    case OP_STORE: case OP_REDUCE: return -1;
    default: return nsrc ? uop_ndim(src[0]) : -1;
  }
}

/* Fill u->shape (u->ndim entries) from op, sources and arg. Nothing is trusted: the spec
 * check runs after the node exists, so a malformed argument (an axis out of range, too few
 * pads) gives a dim of -1 here, which the spec reports, never a read out of bounds. */
static void fill_shape(uop *u) {
  int nd = u->ndim;
  if (nd <= 0) return;
  const int64_t *base = u->nsrc ? uop_shape(u->src[0]) : NULL;
  switch (u->op) {
    case OP_BUFFER: case OP_PARAM: case OP_MULTI: base = u->arg + 1; break;
    case OP_IOTA: case OP_RESHAPE: case OP_EXPAND: base = u->arg; break;
    case OP_WHERE: if (uop_ndim(u->src[1]) == nd) base = uop_shape(u->src[1]); break;
    default: break;
  }
  memcpy(u->shape, base, sizeof(int64_t) * (size_t)nd);
  bool views_ok = u->narg >= (u->op == OP_PERMUTE ? nd : 2 * nd);
  for (int i = 0; i < nd; i++) {
    switch (u->op) {
      case OP_PERMUTE: u->shape[i] = views_ok && u->arg[i] >= 0 && u->arg[i] < nd ? base[u->arg[i]] : -1; break;
      case OP_PAD: case OP_SHRINK: u->shape[i] = views_ok ? view_size(u, i, u->shape[i]) : -1; break;
      default: break;
    }
  }
  if (u->op == OP_REDUCE_AXIS)
    for (int i = 1; i < u->narg; i++)
      if (u->arg[i] >= 0 && u->arg[i] < nd) u->shape[u->arg[i]] = 1;
}

/* ---------------------------------------------------------------- traversal */

int uop_toposort(uop *root, uop ***out) {
  VEC(uop *) order = {0};
  VEC(uop *) stack = {0};
  ptrmap seen = {0};
  int rc = 0;
  if (VEC_PUSH(stack, root) < 0) rc = -1;
  /* iterative DFS; a set low pointer bit on a stack entry means "sources done, emit it" */
  while (!rc && stack.n) {
    uintptr_t raw = (uintptr_t)stack.v[--stack.n];
    uop *u = (uop *)(raw & ~(uintptr_t)1);
    if (raw & 1) { /* sources done: emit */
      if (ptrmap_put(&seen, u, (void *)2) < 0 || VEC_PUSH(order, u) < 0) rc = -1;
      continue;
    }
    if (ptrmap_has(&seen, u)) continue;
    if (ptrmap_put(&seen, u, (void *)1) < 0 || VEC_PUSH(stack, (uop *)(raw | 1)) < 0) rc = -1;
    for (int i = u->nsrc - 1; i >= 0 && !rc; i--)
      if (!ptrmap_has(&seen, u->src[i]) && VEC_PUSH(stack, u->src[i]) < 0) rc = -1;
  }
  VEC_FREE(stack);
  ptrmap_free(&seen);
  if (rc) { VEC_FREE(order); return -1; }
  *out = order.v;
  return (int)order.n;
}

int uop_serialize(uop *root, int64_t **out) {
  uop **order;
  int n = uop_toposort(root, &order);
  if (n < 0) return -1;
  VEC(int64_t) w = {0};
  ptrmap ids = {0};
  int rc = 0;
  for (int i = 0; i < n && !rc; i++) {
    uop *u = order[i];
    rc |= ptrmap_put(&ids, u, (void *)(intptr_t)(i + 1));
    rc |= VEC_PUSH(w, ((int64_t)u->vcount << 48) | ((int64_t)u->op << 40) | ((int64_t)u->dtype << 32) | u->nsrc);
    rc |= VEC_PUSH(w, u->narg);
    for (int j = 0; j < u->nsrc && !rc; j++) rc |= VEC_PUSH(w, (intptr_t)ptrmap_get(&ids, u->src[j]));
    for (int j = 0; j < u->narg && !rc; j++) rc |= VEC_PUSH(w, u->arg[j]);
  }
  ptrmap_free(&ids);
  free(order);
  if (rc) { VEC_FREE(w); return -1; }
  *out = w.v;
  return (int)w.n;
}

void uop_print(uop *root, FILE *f) {
  uop **order;
  int n = uop_toposort(root, &order);
  if (n < 0) return;
  ptrmap ids = {0};
  for (int i = 0; i < n; i++) {
    uop *u = order[i];
    ptrmap_put(&ids, u, (void *)(intptr_t)(i + 1));
    char dt[24];
    snprintf(dt, sizeof dt, u->vcount ? "%s.vec(%d)" : "%s", tg_dtype_name(u->dtype), u->vcount);
    fprintf(f, "  %3d %-13s %-8s src=[", i, uop_ops[u->op].name, dt);
    for (int j = 0; j < u->nsrc; j++)
      fprintf(f, j ? ",%d" : "%d", (int)(intptr_t)ptrmap_get(&ids, u->src[j]) - 1);
    fprintf(f, "] arg=[");
    for (int j = 0; j < u->narg; j++) {
      if ((u->op == OP_CONST || (u->op == OP_VALUE && j == 0)) && dtype_is_float(u->dtype)) fprintf(f, "%g", uop_const_value(u));
      else if (u->op == OP_BUFFER && j == 0) fprintf(f, "buf");
      else fprintf(f, j ? ",%lld" : "%lld", (long long)u->arg[j]);
    }
    fprintf(f, "]\n");
  }
  ptrmap_free(&ids);
  free(order);
}
