/* multi.c — the multi-device split: the scheduler's first rewrite. A sharded tensor is one
 * logical value, a MULTI node (tg_shard: src[i] the shard on device i, arg[0] the axis split
 * or -1 for a copy on every device), and ops on it build an ordinary graph of the whole
 * shapes (autograd sees only that graph). Before the graph is cut into kernels, every node
 * above a MULTI becomes one node per device, by a table of rules per op:
 *
 *   elementwise       each device applies the op to its shards; a replicated operand, a
 *                     constant or a tensor of one device (copied to each) is shrunk to the
 *                     device's slice of the split axis
 *   views             the same view of each shard, its argument moved to the shard's shape
 *                     (reshape/permute move the split axis; pad/shrink/flip may not touch it,
 *                     but a shrink to exactly one shard is that shard, on its one device)
 *   reduce            per device; over the split axis the partial results are allreduced
 *   COPY to a device  a gather: the shards copied there and put side by side
 *
 * The allreduce is written as copies and per-device ops (a ring: reduce-scatter, then
 * all-gather), which the scheduler turns into copy items and kernels like any others.
 * See docs/devices.md, "Several devices". */
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "device/device.h"
#include "schedule/schedule.h"
#include "tensor/tensor.h"

/* A node's value after the split: one node (no MULTI under it), or n shards. */
typedef struct mval {
  uop *plain;
  int n, axis; /* n > 0: shard i is sh[i]; axis -1: each shard is the whole value */
  uop **sh;    /* n entries, in the same allocation (none for a plain value: most nodes) */
} mval;

typedef struct mctx {
  ptrmap memo; /* node → its mval */
  VEC(mval *) all;
  bool failed;
} mctx;

static _Atomic bool multi_made; /* no MULTI was ever made: the split has nothing to do */

void multi_note_made(void) { atomic_store_explicit(&multi_made, true, memory_order_relaxed); }

static mval *fail(mctx *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static mval *fail(mctx *c, const char *fmt, ...) {
  if (c->failed) return NULL;
  char msg[512];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  c->failed = true;
  tg_set_error(TG_ERR_ARG, "%s", msg);
  return NULL;
}

static mval *new_mval(mctx *c, uop *plain, int n, int axis) {
  mval *m = calloc(1, sizeof *m + sizeof(uop *) * (size_t)n);
  if (!m || VEC_PUSH(c->all, m) < 0) return free(m), fail(c, "multi-device split: out of memory");
  m->plain = plain, m->n = n, m->axis = axis, m->sh = (uop **)(m + 1);
  return m;
}

/* "CPU:0,CPU:1": the devices of a split value, for messages. */
static const char *devices_of(const mval *m, char *buf, size_t cap) {
  buf[0] = 0;
  for (int i = 0; i < m->n; i++) {
    const device *d = device_of_number(m->sh[i]->device);
    snprintf(buf + strlen(buf), cap - strlen(buf), "%s%s", i ? "," : "", d ? d->name : "?");
  }
  return buf;
}

static bool same_devices(const mval *a, const mval *b) {
  if (a->n != b->n) return false;
  for (int i = 0; i < a->n; i++)
    if (a->sh[i]->device != b->sh[i]->device) return false;
  return true;
}

/* ---------------------------------------------------------------- views and copies */

static uop *view_axis(uop_op op, uop *x, int axis, int64_t lo, int64_t hi) {
  int nd = uop_ndim(x);
  int64_t arg[2 * TG_MAX_DIMS];
  for (int i = 0; i < nd; i++) arg[2 * i] = 0, arg[2 * i + 1] = op == OP_SHRINK ? uop_shape(x)[i] : 0;
  arg[2 * axis] = lo, arg[2 * axis + 1] = hi;
  return uop_new(op, x->dtype, &x, 1, arg, 2 * nd);
}

/* Elements [lo, hi) of axis; x padded with before and after zeros along axis. */
static uop *shrink_axis(uop *x, int axis, int64_t lo, int64_t hi) { return view_axis(OP_SHRINK, x, axis, lo, hi); }
static uop *pad_axis(uop *x, int axis, int64_t before, int64_t after) { return view_axis(OP_PAD, x, axis, before, after); }

static uop *copy_to(uop *x, int dev) {
  if (!x || x->device == dev) return x;
  int64_t d = dev;
  return uop_new(OP_COPY, x->dtype, &x, 1, &d, 1);
}

/* parts[0..n) side by side along axis, on device dev. Each part is padded to the whole size and
 * selected where its slice lies (WHERE, not a sum of pads: a -0.0 stays -0.0). */
static uop *concat_on(uop *const *parts, int n, int axis, int dev) {
  int64_t total = 0, off = 0;
  for (int i = 0; i < n; i++) total += uop_shape(parts[i])[axis];
  uop *acc = NULL, *idx = NULL;
  for (int i = 0; i < n && (i == 0 || acc); i++) {
    uop *p = copy_to(parts[i], dev);
    int64_t size = p ? uop_shape(p)[axis] : 0;
    p = p ? pad_axis(p, axis, off, total - off - size) : NULL;
    if (i == 0) { acc = p, off += size; continue; }
    if (!idx) { /* the index along axis, broadcast to the whole shape */
      int nd = uop_ndim(p);
      int64_t one[TG_MAX_DIMS];
      for (int k = 0; k < nd; k++) one[k] = k == axis ? total : 1;
      idx = ushape_expand(ushape_reshape(uop_new(OP_IOTA, TG_INT64, NULL, 0, &total, 1), one, nd), uop_shape(p), nd);
    }
    uop *before = idx && p ? uop_alu(OP_CMPLT, idx, uconst_like(idx, (double)off, TG_INT64)) : NULL;
    acc = before ? uop_new3(OP_WHERE, acc->dtype, before, acc, p) : NULL;
    off += size;
  }
  return acc;
}

/* The whole value of m on device dev. */
static uop *gather(const mval *m, int dev) {
  if (m->axis < 0) {
    for (int i = 0; i < m->n; i++)
      if (m->sh[i]->device == dev) return m->sh[i];
    return copy_to(m->sh[0], dev);
  }
  return concat_on(m->sh, m->n, m->axis, dev);
}

/* ---------------------------------------------------------------- allreduce (ring) */

/* Every device's partial p[d] (one shape) combined with op into the whole on every device.
 * Flattened and cut into n chunks (rows when n divides the size); reduce-scatter: in n-1 steps each device passes a chunk to
 * the next, which combines it with its own, so that device d ends with chunk d+1 complete;
 * all-gather: n-1 more steps pass the complete chunks around; each device then puts its chunks
 * side by side. Fewer elements than devices: each device combines every other's partial. */
static bool allreduce(uop_op op, uop *const *partial, int n, uop **out) {
  uop *p[MULTI_MAX]; /* out may be partial */
  memcpy(p, partial, sizeof(uop *) * (size_t)n);
  int nd = uop_ndim(p[0]);
  int64_t N = shape_numel(uop_shape(p[0]), nd);
  if (N < n) {
    for (int d = 0; d < n; d++) {
      out[d] = p[d];
      for (int k = 1; k < n && out[d]; k++) out[d] = uop_alu(op, out[d], copy_to(p[(d + k) % n], p[d]->device));
    }
    for (int d = 0; d < n; d++) if (!out[d]) return false;
    return true;
  }
  /* chunk k: row k of the partial seen as (n, N/n) when n divides N (each copy, combine and
   * the final concat is then a plain loop over whole rows), else elements [kN/n, (k+1)N/n) */
  uop *chunk[MULTI_MAX][MULTI_MAX];
  int64_t rows[2] = {n, N / n};
  int axis = N % n ? 0 : 1;
  for (int d = 0; d < n; d++) {
    uop *flat = axis ? ushape_reshape(p[d], rows, 2) : ushape_reshape(p[d], &N, 1);
    for (int k = 0; k < n; k++) chunk[d][k] = !flat ? NULL : axis ? shrink_axis(flat, 0, k, k + 1) : shrink_axis(flat, 0, k * N / n, (k + 1) * N / n);
  }
  for (int s = 0; s < n - 1; s++) /* reduce-scatter: device d sends chunk d-s to d+1 */
    for (int d = 0; d < n; d++) {
      int to = (d + 1) % n, k = ((d - s) % n + n) % n;
      uop *got = copy_to(chunk[d][k], p[to]->device);
      chunk[to][k] = got && chunk[to][k] ? uop_alu(op, chunk[to][k], got) : NULL;
    }
  for (int s = 0; s < n - 1; s++) /* all-gather: device d sends its complete chunk d+1-s to d+1 */
    for (int d = 0; d < n; d++) {
      int to = (d + 1) % n, k = ((d + 1 - s) % n + n) % n;
      chunk[to][k] = copy_to(chunk[d][k], p[to]->device);
    }
  for (int d = 0; d < n; d++) {
    uop *whole = concat_on(chunk[d], n, 0, p[d]->device); /* along the rows, or the flat axis */
    if (!(out[d] = whole ? ushape_reshape(whole, uop_shape(p[0]), nd) : NULL)) return false;
  }
  return true;
}

/* ---------------------------------------------------------------- rules */

typedef mval *(*split_rule)(mctx *c, uop *u, mval **s);

/* No source is split: u itself, or u over its sources' rewritten nodes (a gather under it). */
static mval *keep_plain(mctx *c, uop *u, mval **s) {
  uop *src[64];
  bool same = true;
  if (u->nsrc > 64) return fail(c, "multi-device split: %s has %d sources", uop_ops[u->op].name, u->nsrc);
  for (int i = 0; i < u->nsrc; i++) src[i] = s[i]->plain, same &= src[i] == u->src[i];
  uop *r = same ? u : uop_replace_src(u, src, u->nsrc);
  return r ? new_mval(c, r, 0, -1) : fail(c, "multi-device split: out of memory");
}

/* The split every operand agrees on: the devices, and the axis (a replicated operand follows). */
static mval *common_split(mctx *c, uop *u, mval **s, int *axis) {
  mval *first = NULL;
  char a[128], b[128];
  *axis = -1;
  for (int i = 0; i < u->nsrc; i++) {
    mval *m = s[i];
    if (!m->n) continue;
    if (first && !same_devices(first, m))
      return fail(c, "%s: tensors sharded over different devices (%s and %s)", uop_ops[u->op].name, devices_of(first, a, sizeof a),
                  devices_of(m, b, sizeof b));
    if (!first) first = m;
    if (m->axis >= 0 && *axis >= 0 && m->axis != *axis)
      return fail(c, "%s: cannot combine a tensor sharded on axis %d with one sharded on axis %d (gather one with tg_to and shard it again)",
                  uop_ops[u->op].name, *axis, m->axis);
    if (m->axis >= 0) *axis = m->axis;
  }
  return first;
}

static mval *split_alu(mctx *c, uop *u, mval **s) {
  int axis;
  mval *first = common_split(c, u, s, &axis);
  if (!first) return c->failed ? NULL : keep_plain(c, u, s);
  if (u->nsrc > 8) return fail(c, "multi-device split: %s has %d sources", uop_ops[u->op].name, u->nsrc);
  mval *r = new_mval(c, NULL, first->n, axis);
  int64_t len = axis >= 0 ? uop_shape(u)[axis] / first->n : 0;
  for (int d = 0; r && d < r->n; d++) {
    uop *src[8];
    for (int i = 0; i < u->nsrc; i++) {
      mval *m = s[i];
      src[i] = m->n ? m->sh[d] : copy_to(m->plain, m->plain->device == DEVICE_NONE ? DEVICE_NONE : first->sh[d]->device);
      if (axis >= 0 && (!m->n || m->axis < 0)) src[i] = shrink_axis(src[i], axis, d * len, (d + 1) * len);
    }
    if (!(r->sh[d] = uop_replace_src(u, src, u->nsrc))) return fail(c, "multi-device split: out of memory");
  }
  return r;
}

static mval *pass_first(mctx *c, uop *u, mval **s) { (void)c, (void)u; return s[0]; } /* GRADFN */

/* The split axis after a reshape of x (split on a into n) to shape out, or -1 when the shards
 * are not slices of one axis of out: the axis b whose outer product equals a's and whose
 * size n divides. */
static int reshaped_axis(uop *x, int a, int n, const int64_t *out, int nd) {
  int64_t outer = 1, o = 1;
  for (int i = 0; i < a; i++) outer *= uop_shape(x)[i];
  for (int b = 0; b < nd; o *= out[b], b++)
    if (o == outer && out[b] % n == 0) return b;
  return -1;
}

/* A view of each shard: the argument made for the shard's shape. */
static mval *split_view(mctx *c, uop *u, mval **s) {
  mval *m = s[0];
  if (!m->n) return keep_plain(c, u, s);
  int a = m->axis, nd = uop_ndim(u), axis = a;
  int64_t arg[2 * TG_MAX_DIMS], len = a >= 0 ? uop_shape(m->sh[0])[a] : 0, whole = a >= 0 ? uop_shape(u->src[0])[a] : 0;
  memcpy(arg, u->arg, sizeof(int64_t) * (size_t)u->narg);
  const char *name = uop_ops[u->op].name;
  if (a >= 0) switch (u->op) {
    case OP_RESHAPE:
      if ((axis = reshaped_axis(u->src[0], a, m->n, u->arg, nd)) < 0)
        return fail(c, "RESHAPE: a tensor sharded on axis %d cannot be reshaped to a shape that cuts its shards", a);
      arg[axis] /= m->n;
      break;
    case OP_PERMUTE:
      for (int b = 0; b < nd; b++) if (u->arg[b] == a) axis = b;
      break;
    case OP_EXPAND: arg[a] = len; break;
    case OP_PAD: case OP_SHRINK:
      if (u->op == OP_SHRINK && u->arg[2 * a + 1] - u->arg[2 * a] == len && u->arg[2 * a] % len == 0) {
        arg[2 * a] = 0, arg[2 * a + 1] = len; /* exactly one shard (a gradient of tg_shard): it, on its device */
        uop *one = uop_new(OP_SHRINK, u->dtype, &m->sh[u->arg[2 * a] / len], 1, arg, u->narg);
        return one ? new_mval(c, one, 0, -1) : fail(c, "multi-device split: out of memory");
      }
      if (u->arg[2 * a] != 0 || u->arg[2 * a + 1] != (u->op == OP_PAD ? 0 : whole))
        return fail(c, "%s of the sharded axis %d is not supported (gather with tg_to first)", name, a);
      if (u->op == OP_SHRINK) arg[2 * a + 1] = len;
      break;
    case OP_FLIP:
      if (u->arg[a]) return fail(c, "FLIP of the sharded axis %d is not supported (gather with tg_to first)", a);
      break;
    default: break;
  }
  mval *r = new_mval(c, NULL, m->n, axis);
  for (int d = 0; r && d < m->n; d++)
    if (!(r->sh[d] = uop_new(u->op, u->dtype, &m->sh[d], 1, arg, u->narg))) return fail(c, "multi-device split: out of memory");
  return r;
}

static mval *split_reduce(mctx *c, uop *u, mval **s) {
  mval *m = s[0];
  if (!m->n) return keep_plain(c, u, s);
  bool over_split = false;
  for (int i = 1; i < u->narg; i++) over_split |= u->arg[i] == m->axis;
  mval *r = new_mval(c, NULL, m->n, over_split ? -1 : m->axis);
  bool ones = true; /* every reduced axis of a shard has size 1: its partial is the shard */
  for (int i = 1; i < u->narg; i++) ones &= uop_shape(m->sh[0])[u->arg[i]] == 1;
  for (int d = 0; r && d < m->n; d++)
    if (!(r->sh[d] = ones ? m->sh[d] : uop_replace_src(u, &m->sh[d], 1))) return fail(c, "multi-device split: out of memory");
  if (r && over_split && !allreduce((uop_op)u->arg[0], r->sh, r->n, r->sh)) return fail(c, "multi-device split: out of memory");
  return r;
}

static mval *split_copy(mctx *c, uop *u, mval **s) {
  if (!s[0]->n) return keep_plain(c, u, s);
  uop *g = gather(s[0], (int)u->arg[0]);
  return g ? new_mval(c, g, 0, -1) : fail(c, "multi-device split: out of memory");
}

static mval *split_leaf(mctx *c, uop *u, mval **s) {
  (void)s;
  if (u->nsrc > MULTI_MAX) return fail(c, "MULTI of %d shards (at most %d)", u->nsrc, MULTI_MAX);
  mval *r = new_mval(c, NULL, u->nsrc, (int)u->arg[0]);
  for (int d = 0; r && d < u->nsrc; d++) r->sh[d] = u->src[d];
  return r;
}

static mval *split_other(mctx *c, uop *u, mval **s) {
  for (int i = 0; i < u->nsrc; i++)
    if (s[i]->n) return fail(c, "%s on a sharded tensor is not supported", uop_ops[u->op].name);
  return keep_plain(c, u, s);
}

static split_rule rule_of(uop_op op) {
  if (uop_ops[op].flags & (UOP_FLAG_ALU)) return split_alu;
  if (uop_ops[op].flags & UOP_FLAG_MOVEMENT) return split_view;
  static const split_rule table[OP_COUNT] = {
      [OP_DETACH] = split_alu, [OP_CONTIGUOUS] = split_alu, [OP_GRADFN] = pass_first,
      [OP_REDUCE_AXIS] = split_reduce, [OP_COPY] = split_copy, [OP_MULTI] = split_leaf,
  };
  return table[op] ? table[op] : split_other;
}

static mval *lower(mctx *c, uop *u) {
  mval *m = ptrmap_get(&c->memo, u);
  if (m || c->failed) return m;
  mval *s[64];
  if (u->op != OP_MULTI && u->nsrc > 64) return fail(c, "multi-device split: %s has %d sources", uop_ops[u->op].name, u->nsrc);
  for (int i = 0; i < u->nsrc && u->op != OP_MULTI; i++)
    if (!(s[i] = lower(c, u->src[i]))) return NULL;
  m = rule_of((uop_op)u->op)(c, u, s);
  if (m && ptrmap_put(&c->memo, u, m) < 0) return fail(c, "multi-device split: out of memory");
  return m;
}

int multi_split(uop **g, multi_target *map) {
  uop *sink = *g;
  for (int i = 0; i < sink->nsrc; i++) map[i] = (multi_target){i, 0, -1};
  if (!atomic_load_explicit(&multi_made, memory_order_relaxed)) return 0;
  mctx c = {0};
  VEC(uop *) src = {0};
  int rc = 0;
  for (int i = 0; i < sink->nsrc && !rc; i++) {
    mval *m = lower(&c, sink->src[i]);
    if (!m) { rc = tg_error_status_or(TG_ERR_ARG); break; }
    map[i] = (multi_target){(int)src.n, m->n, m->axis};
    for (int d = 0; d < (m->n ? m->n : 1) && !rc; d++)
      if (VEC_PUSH(src, m->n ? m->sh[d] : m->plain) < 0) rc = tg_set_error(TG_ERR_NOMEM, "schedule: out of memory");
  }
  if (!rc && !(*g = uop_new(OP_SINK, sink->dtype, src.v, (int)src.n, NULL, 0))) rc = tg_set_error(TG_ERR_NOMEM, "schedule: out of memory");
  for (size_t i = 0; i < c.all.n; i++) free(c.all.v[i]);
  VEC_FREE(c.all);
  VEC_FREE(src);
  ptrmap_free(&c.memo);
  return rc;
}
