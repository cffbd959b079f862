/* shard.c — tensors split across devices. tg_shard makes a MULTI node (uop.h): its sources are
 * the shards, each a copy of a slice of the tensor to its device. Ops on it build the usual
 * graph of whole shapes; the scheduler splits that graph per device (src/schedule/multi.c).
 * Reading one back gathers the shards' buffers into host memory. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "device/device.h"
#include "schedule/schedule.h"
#include "tensor/shape.h"
#include "tensor/tensor.h"

/* The devices of a list: numbers, each known, available and listed once. */
static bool shard_devices(const char **names, int n, int *out) {
  for (int i = 0; i < n; i++) {
    if (!names[i]) return tensor_error("shard: device %d is NULL", i), false;
    const device *d = device_get(names[i]);
    if (!d) {
      char why[700];
      snprintf(why, sizeof why, "%s", tg_last_error());
      return tg_set_error(TG_ERR_DEVICE, "shard: %s", why), false;
    }
    out[i] = device_number(d);
    for (int j = 0; j < i; j++)
      if (out[j] == out[i]) return tensor_error("shard: device %s is listed twice (devices %d and %d)", d->name, j, i), false;
  }
  return true;
}

/* Slice [lo, hi) of axis. */
static uop *slice(uop *x, int axis, int64_t lo, int64_t hi) {
  int nd = uop_ndim(x);
  int64_t arg[2 * TG_MAX_DIMS];
  for (int i = 0; i < nd; i++) arg[2 * i] = 0, arg[2 * i + 1] = uop_shape(x)[i];
  arg[2 * axis] = lo, arg[2 * axis + 1] = hi;
  return uop_new(OP_SHRINK, x->dtype, &x, 1, arg, 2 * nd);
}

tg_tensor *tg_shard(tg_tensor *t, const char **devices, int n, int axis) {
  if (!t) return null_arg("shard");
  if (!devices || n < 1 || n > MULTI_MAX) return tensor_error("shard: %d devices given (1 to %d, devices %s)", n, MULTI_MAX, devices ? "set" : "NULL");
  if (t->u->device == DEVICE_MULTI) return tensor_error("shard: the tensor is sharded already (gather it with tg_to, then shard that)");
  int nd = uop_ndim(t->u), dev[MULTI_MAX];
  if (axis < -1 || axis >= nd) return tensor_error("shard: axis %d out of range for a %d-d tensor (0 to %d, or -1 to copy it whole to each device)", axis, nd, nd - 1);
  int64_t size = axis >= 0 ? uop_shape(t->u)[axis] : 0, len = size / n;
  if (axis >= 0 && size % n)
    return tensor_error("shard: axis %d has size %lld, which %d devices cannot split evenly (shards are not padded)", axis, (long long)size, n);
  if (!shard_devices(devices, n, dev)) return NULL;
  size_t mark = uop_pool_mark();
  uop *shards[MULTI_MAX];
  for (int i = 0; i < n; i++) {
    uop *x = axis >= 0 ? slice(t->u, axis, i * len, (i + 1) * len) : t->u;
    int64_t d = dev[i];
    shards[i] = x && x->device != d ? uop_new(OP_COPY, x->dtype, &x, 1, &d, 1) : x;
  }
  int64_t arg[TG_MAX_DIMS + 1] = {axis};
  memcpy(arg + 1, uop_shape(t->u), sizeof(int64_t) * (size_t)nd);
  uop *m = uop_new(OP_MULTI, t->u->dtype, shards, n, arg, 1 + nd);
  if (m) multi_note_made();
  tg_tensor *r = m ? tensor_wrap(m) : tensor_error("shard: out of memory");
  uop_pool_release(mark);
  return r;
}

int multi_copy_out(uop *m, void *dst) {
  size_t elem = tg_dtype_size(m->dtype);
  int nd = uop_ndim(m), axis = (int)m->arg[0];
  int64_t numel = shape_numel(uop_shape(m), nd);
  if (axis < 0) return buffer_copy_out(m->src[0], dst, (size_t)numel * elem);
  size_t outer = 1, inner = elem;
  for (int i = 0; i < axis; i++) outer *= (size_t)uop_shape(m)[i];
  for (int i = axis + 1; i < nd; i++) inner *= (size_t)uop_shape(m)[i];
  size_t len = (size_t)uop_shape(m->src[0])[axis], rows = len * inner, whole = (size_t)uop_shape(m)[axis] * inner;
  unsigned char *tmp = outer > 1 ? malloc(outer * rows + 1) : NULL;
  if (outer > 1 && !tmp) return tg_set_error(TG_ERR_NOMEM, "to_host: out of memory");
  int rc = 0;
  for (int d = 0; d < m->nsrc && !rc; d++) { /* shard d: rows of len * inner bytes at d * rows */
    unsigned char *at = (unsigned char *)dst + (size_t)d * rows;
    rc = buffer_copy_out(m->src[d], outer > 1 ? tmp : at, outer * rows);
    for (size_t o = 0; o < outer && outer > 1 && !rc; o++) memcpy(at + o * whole, tmp + o * rows, rows);
  }
  free(tmp);
  return rc;
}

/* The MULTI under a node on several devices (through a source that is on several). */
static const uop *multi_leaf(const uop *u) {
  while (u && u->op != OP_MULTI) {
    const uop *next = NULL;
    for (int i = 0; i < u->nsrc && !next; i++)
      if (u->src[i]->device == DEVICE_MULTI) next = u->src[i];
    u = next;
  }
  return u;
}

const char *multi_device_names(const uop *u) {
  static _Thread_local char names[MULTI_MAX * 8];
  names[0] = 0;
  u = multi_leaf(u);
  for (int i = 0; u && i < u->nsrc; i++) {
    const device *d = device_of_number(u->src[i]->device);
    snprintf(names + strlen(names), sizeof names - strlen(names), "%s%s", i ? "," : "", d ? d->name : "?");
  }
  return names;
}

/* A constant like a sharded t lives on t's devices, whole on each (tinygrad's zeros_like of a
 * sharded tensor): an optimizer's state beside replicated weights. */
tg_tensor *multi_full_like(tg_tensor *t, double value) {
  const uop *m = multi_leaf(t->u);
  const char *names[MULTI_MAX];
  for (int i = 0; m && i < m->nsrc; i++) {
    const device *d = device_of_number(m->src[i]->device);
    names[i] = d ? d->name : "?";
  }
  tg_tensor *full = tg_full(uop_shape(t->u), uop_ndim(t->u), value, t->u->dtype);
  return m ? tg_shard(full, names, m->nsrc, -1) : tensor_error("full_like: no sharded tensor under a node on several devices");
}
