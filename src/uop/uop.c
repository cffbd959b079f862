/* uop.c — op table, interning, reference counts, the autorelease pool, constants, shapes. */
#include "uop/uop.h"

#include <math.h>
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

/* ---------------------------------------------------------------- interning */

static struct {
  uop **slots;
  size_t cap, count;
} table;

uint64_t uop_alive_count(void) { return table.count; }

static uint64_t content_hash(uop_op op, tg_dtype dt, uop *const *src, int nsrc, const int64_t *arg,
                             int narg) {
  uint64_t h = hash_mix((uint64_t)op * 131u + (uint64_t)dt, (uint64_t)nsrc * 977u + (uint64_t)narg);
  for (int i = 0; i < nsrc; i++) h = hash_mix(h, src[i]->hash);
  for (int i = 0; i < narg; i++) h = hash_mix(h, (uint64_t)arg[i]);
  return h;
}

static bool same_content(const uop *u, uop_op op, tg_dtype dt, uop *const *src, int nsrc,
                         const int64_t *arg, int narg) {
  if (u->op != op || u->dtype != dt || u->nsrc != nsrc || u->narg != narg) return false;
  for (int i = 0; i < nsrc; i++)
    if (u->src[i] != src[i]) return false;
  return narg == 0 || memcmp(u->arg, arg, (size_t)narg * sizeof *arg) == 0;
}

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

/* ---------------------------------------------------------------- pool */

static VEC(uop *) pool;

size_t uop_pool_mark(void) { return pool.n; }

uop *uop_pool_add(uop *u) {
  if (!u) return NULL;
  u->refcnt++;
  if (VEC_PUSH(pool, u) < 0) abort();
  return u;
}

void uop_pool_release(size_t mark) {
  while (pool.n > mark) uop_decref(pool.v[--pool.n]);
}

void uop_incref(uop *u) {
  if (u) u->refcnt++;
}

extern void buffer_release_hook(uop *u); /* device/buffer.c */

static void destroy(uop *u) {
  /* unlink from the intern table */
  uop **pp = &table.slots[(size_t)u->hash & (table.cap - 1)];
  while (*pp != u) pp = &(*pp)->next;
  *pp = u->next;
  table.count--;
  if (u->op == OP_BUFFER) buffer_release_hook(u);
  free(u->shape);
}

void uop_decref(uop *u) {
  if (!u || --u->refcnt) return;
  /* iterative release: deep graphs must not recurse */
  VEC(uop *) work = {0};
  uop *cur = u;
  for (;;) {
    destroy(cur);
    for (int i = 0; i < cur->nsrc; i++)
      if (--cur->src[i]->refcnt == 0 && VEC_PUSH(work, cur->src[i]) < 0) abort();
    if (cur->realized && --cur->realized->refcnt == 0 && VEC_PUSH(work, cur->realized) < 0) abort();
    free(cur);
    if (!work.n) break;
    cur = work.v[--work.n];
  }
  VEC_FREE(work);
}

uop *uop_new(uop_op op, tg_dtype dt, uop *const *src, int nsrc, const int64_t *arg, int narg) {
  for (int i = 0; i < nsrc; i++)
    if (!src[i]) return NULL;
  uint64_t h = content_hash(op, dt, src, nsrc, arg, narg);
  if (table.cap) {
    for (uop *u = table.slots[(size_t)h & (table.cap - 1)]; u; u = u->next) {
      if (u->hash == h && same_content(u, op, dt, src, nsrc, arg, narg)) {
        u->refcnt++;
        if (VEC_PUSH(pool, u) < 0) abort();
        return u;
      }
    }
  }
  if (table.count + 1 > table.cap && table_grow() < 0) return NULL;
  size_t bytes = sizeof(uop) + (size_t)nsrc * sizeof(uop *) + (size_t)narg * sizeof(int64_t);
  uop *u = calloc(1, bytes);
  if (!u) return NULL;
  u->op = (uint16_t)op, u->dtype = (uint8_t)dt, u->hash = h;
  u->nsrc = nsrc, u->narg = narg, u->ndim = -1;
  u->src = (uop **)(u + 1);
  u->arg = (int64_t *)(u->src + nsrc);
  for (int i = 0; i < nsrc; i++) (u->src[i] = src[i])->refcnt++;
  if (narg) memcpy(u->arg, arg, (size_t)narg * sizeof *arg);
  size_t j = (size_t)h & (table.cap - 1);
  u->next = table.slots[j];
  table.slots[j] = u;
  table.count++;
  u->refcnt = 1;
  if (VEC_PUSH(pool, u) < 0) abort();
  return u;
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
  return uop_new(u->op, u->dtype, src, nsrc, u->arg, u->narg);
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

/* Fill u->shape/ndim from op, sources and arg. */
static void compute_shape(uop *u) {
  u->shape_done = 1;
  int nd = -1;
  const int64_t *base = NULL;
  uop *s0 = u->nsrc ? u->src[0] : NULL;
  switch (u->op) {
    case OP_BUFFER: case OP_PARAM: nd = u->narg - 1, base = u->arg + 1; break;
    case OP_CONST: case OP_VALUE: nd = 0; break;
    case OP_IOTA: nd = 1, base = u->arg; break;
    case OP_RESHAPE: case OP_EXPAND: nd = u->narg, base = u->arg; break;
    case OP_SINK: case OP_INDEX: case OP_DEFINE_GLOBAL: case OP_RANGE: case OP_LOAD:
    case OP_STORE: case OP_REDUCE: return;
    default:
      if (!s0 || uop_ndim(s0) < 0) return;
      nd = uop_ndim(s0), base = uop_shape(s0);
      if (u->op == OP_WHERE && uop_ndim(u->src[1]) >= 0) base = uop_shape(u->src[1]);
  }
  u->ndim = nd;
  u->shape = malloc(sizeof(int64_t) * (size_t)(nd > 0 ? nd : 1));
  if (!u->shape) { u->ndim = -1; return; }
  if (base) memcpy(u->shape, base, sizeof(int64_t) * (size_t)nd);
  for (int i = 0; i < nd; i++) {
    switch (u->op) {
      case OP_PERMUTE: u->shape[i] = uop_shape(s0)[u->arg[i]]; break;
      case OP_PAD: case OP_SHRINK: u->shape[i] = view_size(u, i, u->shape[i]); break;
      default: break;
    }
  }
  if (u->op == OP_REDUCE_AXIS)
    for (int i = 1; i < u->narg; i++) u->shape[u->arg[i]] = 1;
}

int uop_ndim(uop *u) {
  if (!u->shape_done) compute_shape(u);
  return u->ndim;
}

const int64_t *uop_shape(uop *u) {
  if (!u->shape_done) compute_shape(u);
  return u->shape;
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
    rc |= VEC_PUSH(w, ((int64_t)u->op << 40) | ((int64_t)u->dtype << 32) | u->nsrc);
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
    fprintf(f, "  %3d %-13s %-8s src=[", i, uop_ops[u->op].name, tg_dtype_name(u->dtype));
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
