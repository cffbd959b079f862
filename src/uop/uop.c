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
static void fill_sym(uop *u);

/* A new node, complete (shape included) before any other thread can see it. */
static uop *make_node(uint64_t h, uop_op op, tg_dtype dt, int vc, uop *const *src, int nsrc, const int64_t *arg, int narg) {
  int nd = shape_rank(op, src, nsrc, narg);
  size_t bytes = sizeof(uop) + (size_t)nsrc * sizeof(uop *) + (size_t)(narg + 2 * (nd > 0 ? nd : 0)) * sizeof(int64_t);
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
  fill_sym(u);
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

/* Does dim i of a PAD or SHRINK involve a symbolic size (its source's dim or an argument)? */
static bool sym_view(const uop *u, int i) {
  const uop *x = u->src[0];
  return (x->sym && x->sym[i]) || sym_is(u->arg[2 * i]) || sym_is(u->arg[2 * i + 1]);
}

/* Dim i of a PAD or SHRINK as a symbolic size (SYM_BAD where it has none). */
static int64_t sym_view_size(const uop *u, int i) {
  const uop *x = u->src[0];
  int64_t in = x->sym && x->sym[i] ? x->sym[i] : uop_shape(x)[i], lo = u->arg[2 * i], hi = u->arg[2 * i + 1];
  return u->op == OP_PAD ? sym_add(sym_add(in, lo), hi) : sym_sub(hi, lo);
}

static int64_t sym_hi_or_bad(int64_t v) { return v == SYM_BAD ? -1 : sym_hi(v); }

/* The rank of a node made from op, sources and arg (-1: kernel-level ops have no shape). */
static int shape_rank(uop_op op, uop *const *src, int nsrc, int narg) {
  switch (op) {
    case OP_BUFFER: case OP_PARAM: case OP_MULTI: return narg - 1;
    case OP_CONST: case OP_VALUE: return 0;
    case OP_IOTA: return 1;
    case OP_RESHAPE: case OP_EXPAND: return narg;
    case OP_SINK: case OP_INDEX: case OP_DEFINE_GLOBAL: case OP_RANGE: case OP_LOAD:
    case OP_STORE: case OP_REDUCE: case OP_DEFINE_VAR: case OP_PREFETCH: return -1;
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
  for (int i = 0; i < nd; i++)
    if (sym_is(u->shape[i])) u->shape[i] = sym_hi(u->shape[i]); /* a symbolic size: its layout */
  bool views_ok = u->narg >= (u->op == OP_PERMUTE ? nd : 2 * nd);
  for (int i = 0; i < nd; i++) {
    switch (u->op) {
      case OP_PERMUTE: u->shape[i] = views_ok && u->arg[i] >= 0 && u->arg[i] < nd ? base[u->arg[i]] : -1; break;
      case OP_PAD: case OP_SHRINK: u->shape[i] = !views_ok ? -1 : sym_view(u, i) ? sym_hi_or_bad(sym_view_size(u, i)) : view_size(u, i, u->shape[i]); break;
      default: break;
    }
  }
  if (u->op == OP_REDUCE_AXIS)
    for (int i = 1; i < u->narg; i++)
      if (u->arg[i] >= 0 && u->arg[i] < nd) u->shape[u->arg[i]] = 1;
}

/* ---------------------------------------------------------------- symbolic sizes
 * coef * var + add packed below -2^62: bits 61..48 the variable's id, 47..40 coef (int8),
 * 39..0 add + 2^39. Variables live in a fixed registry: an id is published (count) after its
 * entry is written, and entries never change but for the bound value. */

enum { SYM_ADD_BITS = 40 };
#define SYM_ADD_LIM (INT64_C(1) << (SYM_ADD_BITS - 1))

static struct uvar {
  char name[32];
  int64_t min, max;
  _Atomic int64_t value;
  _Atomic bool bound;
} uvars[SYM_MAX_VARS + 1];
static _Atomic int uvar_count;
static pthread_mutex_t uvar_lock = PTHREAD_MUTEX_INITIALIZER;

int uvar_new(const char *name, int64_t min, int64_t max) {
  if (min < 0 || max < min || max >= SYM_ADD_LIM / 128)
    return tg_set_error(TG_ERR_ARG, "variable: range [%lld, %lld] must satisfy 0 <= min <= max < 2^32", (long long)min, (long long)max);
  pthread_mutex_lock(&uvar_lock);
  int id = atomic_load(&uvar_count) + 1;
  if (id <= SYM_MAX_VARS) {
    struct uvar *v = &uvars[id];
    snprintf(v->name, sizeof v->name, "%s", name && name[0] ? name : "var");
    v->min = min, v->max = max;
    atomic_store(&uvar_count, id);
  }
  pthread_mutex_unlock(&uvar_lock);
  return id <= SYM_MAX_VARS ? id : tg_set_error(TG_ERR_ARG, "variable: more than %d variables", SYM_MAX_VARS);
}

bool uvar_known(int id) { return id > 0 && id <= atomic_load(&uvar_count); }
static bool uvar_ok(int id) { return uvar_known(id); }
const char *uvar_name(int id) { return uvar_ok(id) ? uvars[id].name : "?"; }
int64_t uvar_min(int id) { return uvar_ok(id) ? uvars[id].min : 0; }
int64_t uvar_max(int id) { return uvar_ok(id) ? uvars[id].max : 0; }
bool uvar_value(int id, int64_t *out) {
  if (!uvar_ok(id) || !atomic_load(&uvars[id].bound)) return false;
  *out = atomic_load(&uvars[id].value);
  return true;
}
void uvar_set(int id, int64_t value) {
  if (!uvar_ok(id)) return;
  atomic_store(&uvars[id].value, value);
  atomic_store(&uvars[id].bound, true);
}

int64_t sym_make(int id, int64_t coef, int64_t add) {
  if (coef == 0) return add;
  if (!uvar_ok(id) || coef < -128 || coef > 127 || add < -SYM_ADD_LIM || add >= SYM_ADD_LIM) return SYM_BAD;
  uint64_t bits = (uint64_t)id << 48 | (uint64_t)(uint8_t)(int8_t)coef << SYM_ADD_BITS | (uint64_t)(add + SYM_ADD_LIM);
  return INT64_MIN + (int64_t)bits;
}

static uint64_t sym_bits(int64_t v) { return (uint64_t)(v - INT64_MIN); }
int sym_var(int64_t v) { return sym_is(v) ? (int)(sym_bits(v) >> 48 & 0x3fff) : 0; }
int64_t sym_coef(int64_t v) { return sym_is(v) ? (int8_t)(uint8_t)(sym_bits(v) >> SYM_ADD_BITS) : 0; }
int64_t sym_add_of(int64_t v) {
  return sym_is(v) ? (int64_t)(sym_bits(v) & ((UINT64_C(1) << SYM_ADD_BITS) - 1)) - SYM_ADD_LIM : v;
}

int64_t sym_add(int64_t a, int64_t b) {
  if (a == SYM_BAD || b == SYM_BAD) return SYM_BAD;
  int va = sym_var(a), vb = sym_var(b);
  if (va && vb && va != vb) return SYM_BAD; /* two variables in one size */
  int64_t add;
  if (!ck_add(sym_add_of(a), sym_add_of(b), &add)) return SYM_BAD;
  return sym_make(va ? va : vb, sym_coef(a) + sym_coef(b), add);
}

int64_t sym_sub(int64_t a, int64_t b) {
  if (b == SYM_BAD) return SYM_BAD;
  if (!sym_is(b)) return b == INT64_MIN ? SYM_BAD : sym_add(a, -b);
  return sym_add(a, sym_make(sym_var(b), -sym_coef(b), -sym_add_of(b)));
}

int64_t sym_at(int64_t v, int64_t x) { return sym_is(v) ? sym_coef(v) * x + sym_add_of(v) : v; }
int64_t sym_hi(int64_t v) {
  int id = sym_var(v);
  return !id ? v : sym_at(v, sym_coef(v) > 0 ? uvars[id].max : uvars[id].min);
}
int64_t sym_lo(int64_t v) {
  int id = sym_var(v);
  return !id ? v : sym_at(v, sym_coef(v) > 0 ? uvars[id].min : uvars[id].max);
}

const char *sym_str(int64_t v, char *buf, size_t n) {
  int64_t c = sym_coef(v), a = sym_add_of(v);
  if (!sym_is(v)) snprintf(buf, n, "%lld", (long long)v);
  else if (c == 1 || c == -1) snprintf(buf, n, "%s%s%+lld", c < 0 ? "-" : "", uvar_name(sym_var(v)), (long long)a);
  else snprintf(buf, n, "%lld*%s%+lld", (long long)c, uvar_name(sym_var(v)), (long long)a);
  size_t len = strlen(buf); /* "v+0" → "v" */
  if (sym_is(v) && !a && len >= 2) buf[len - 2] = 0;
  return buf;
}

/* ---- the symbolic dims of a node (u->sym), derived from its sources and arguments */

/* Merge two symbolic forms of one dim: either, or SYM_BAD when two differ. */
static int64_t sym_merge(int64_t a, int64_t b) { return !a ? b : !b || a == b ? a : SYM_BAD; }

/* A reshape keeps a source's symbolic dim where the target has a dim of the same layout size
 * after the same number of elements (layout row-major order): the dim is kept, only size-1
 * dims and other plain dims change around it. */
static void reshape_sym(uop *u, int64_t *out) {
  const uop *x = u->src[0];
  if (!x->sym) return;
  int m = uop_ndim(x), n = u->ndim;
  int64_t before = 1;
  for (int i = 0; i < m; i++) {
    if (x->sym[i]) {
      int64_t tb = 1;
      for (int j = 0; j < n; j++) {
        if (tb == before && u->shape[j] == x->shape[i] && !out[j]) { out[j] = x->sym[i]; break; }
        if (!ck_mul(tb, u->shape[j] < 0 ? 0 : u->shape[j], &tb)) break;
      }
    }
    if (!ck_mul(before, x->shape[i] < 0 ? 0 : x->shape[i], &before)) return;
  }
}

static void fill_sym(uop *u) {
  int nd = u->ndim;
  if (nd <= 0) return;
  int64_t *out = u->shape + nd;
  bool from_args = u->op == OP_RESHAPE || u->op == OP_EXPAND;
  for (int i = 0; i < nd; i++) {
    int64_t v = 0;
    if (from_args) v = sym_is(u->arg[i]) ? u->arg[i] : 0;
    if (u->op == OP_EXPAND && !v && u->src[0]->sym && u->arg[i] == uop_shape(u->src[0])[i]) v = u->src[0]->sym[i];
    if (u->op == OP_PAD || u->op == OP_SHRINK) {
      int64_t r = u->narg >= 2 * nd && sym_view(u, i) ? sym_view_size(u, i) : 0;
      v = sym_is(r) || r == SYM_BAD ? r : 0;
    }
    if (u->op == OP_PERMUTE && u->src[0]->sym && u->arg[i] >= 0 && u->arg[i] < nd) v = u->src[0]->sym[u->arg[i]];
    out[i] = v;
  }
  if (u->op == OP_RESHAPE) reshape_sym(u, out);
  bool elementwise = uop_is_alu(u) || (u->nsrc >= 1 && !uop_is_movement(u) && u->op != OP_MULTI && u->op != OP_SINK);
  for (int s = 0; elementwise && s < (u->op == OP_GRADFN ? 1 : u->nsrc); s++) /* same-shaped sources: one symbolic form per dim */
    for (int i = 0; u->src[s]->sym && uop_ndim(u->src[s]) == nd && i < nd; i++) out[i] = sym_merge(out[i], u->src[s]->sym[i]);
  if (u->op == OP_REDUCE_AXIS)
    for (int i = 1; i < u->narg; i++)
      if (u->arg[i] >= 0 && u->arg[i] < nd) out[u->arg[i]] = 0;
  for (int i = 0; i < nd; i++)
    if (out[i]) { u->sym = out; return; }
}

int uop_sym_var(const uop *u) {
  for (int i = 0; u->sym && i < u->ndim; i++)
    if (sym_is(u->sym[i])) return sym_var(u->sym[i]);
  bool args = u->op == OP_RESHAPE || u->op == OP_EXPAND || u->op == OP_PAD || u->op == OP_SHRINK;
  for (int i = 0; args && i < u->narg; i++)
    if (sym_is(u->arg[i])) return sym_var(u->arg[i]);
  return 0;
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
