/* attr.c — what ONNX op handlers share: reading a node's attributes by name, small tensors'
 * values on the host (shapes, axes, pads given as inputs), axis checks, the node error
 * message, and the lookup over the op tables. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "onnx/onnx_int.h"
#include "runtime/helpers.h"

const Onnx__AttributeProto *ox_attr(const ox_node *n, const char *name) {
  for (size_t i = 0; i < n->np->n_attribute; i++)
    if (n->np->attribute[i]->name && !strcmp(n->np->attribute[i]->name, name)) return n->np->attribute[i];
  return NULL;
}

int64_t ox_attr_i(const ox_node *n, const char *name, int64_t dflt) {
  const Onnx__AttributeProto *a = ox_attr(n, name);
  return a ? a->i : dflt;
}

double ox_attr_f(const ox_node *n, const char *name, double dflt) {
  const Onnx__AttributeProto *a = ox_attr(n, name);
  return a ? a->f : dflt;
}

const char *ox_attr_s(ox_node *n, const char *name, const char *dflt) {
  const Onnx__AttributeProto *a = ox_attr(n, name);
  if (!a) return dflt;
  char *buf = n->sbuf[n->snext++ & 3];
  size_t len = a->s.len < sizeof n->sbuf[0] - 1 ? a->s.len : sizeof n->sbuf[0] - 1;
  if (len) memcpy(buf, a->s.data, len);
  buf[len] = 0;
  return buf;
}

int ox_attr_ints(const ox_node *n, const char *name, int64_t *out, int cap) {
  const Onnx__AttributeProto *a = ox_attr(n, name);
  if (!a) return -1;
  if (a->n_ints > (size_t)cap) return ox_fail(n, TG_ERR_ARG, "attribute %s has %zu values (at most %d)", name, a->n_ints, cap), -2;
  for (size_t i = 0; i < a->n_ints; i++) out[i] = a->ints[i];
  return (int)a->n_ints;
}

int ox_attr_floats(const ox_node *n, const char *name, double *out, int cap) {
  const Onnx__AttributeProto *a = ox_attr(n, name);
  if (!a) return -1;
  if (a->n_floats > (size_t)cap)
    return ox_fail(n, TG_ERR_ARG, "attribute %s has %zu values (at most %d)", name, a->n_floats, cap), -2;
  for (size_t i = 0; i < a->n_floats; i++) out[i] = a->floats[i];
  return (int)a->n_floats;
}

int ox_fail(const ox_node *n, int status, const char *fmt, ...) {
  char msg[700];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  return tg_set_error(status, "ONNX %s node '%.100s': %s", n->np->op_type, n->np->name ? n->np->name : "", msg);
}

/* ---------------------------------------------------------------- host values */

static _Thread_local ox_reads *watched;

void ox_watch_reads(ox_reads *r) { watched = r; }

/* Realize t (at most cap elements) cast to dt into out; count or negative. */
static int host_read(tg_tensor *t, tg_dtype dt, void *out, int cap) {
  if (!t) return tg_set_error(TG_ERR_ARG, "ONNX: a required input is missing");
  if (watched && watched->n < OX_MAX_READS) watched->t[watched->n++] = t;
  else if (watched) watched->more = true;
  int64_t n = tg_numel(t);
  if (n > cap) return tg_set_error(TG_ERR_ARG, "ONNX: an input read as a list has %lld values (at most %d)", (long long)n, cap);
  tg_scope *s = tg_scope_begin();
  tg_tensor *v = tg_get_dtype(t) == dt ? t : tg_cast(t, dt); /* shapes are int64 already: no kernel */
  int rc = n ? tg_to_host(v, out, (size_t)n * tg_dtype_size(dt)) : 0;
  tg_scope_end(s);
  return rc < 0 ? rc : (int)n;
}

int ox_host_ints(tg_tensor *t, int64_t *out, int cap) { return host_read(t, TG_INT64, out, cap); }
int ox_host_doubles(tg_tensor *t, double *out, int cap) { return host_read(t, TG_FLOAT64, out, cap); }

int ox_axis(const ox_node *n, int64_t axis, int ndim) {
  if (axis < -ndim || axis >= ndim || (ndim == 0 && axis != 0))
    return ox_fail(n, TG_ERR_ARG, "axis %lld out of range for rank %d", (long long)axis, ndim), -1;
  return (int)(axis < 0 ? axis + ndim : axis);
}

/* ---------------------------------------------------------------- the op tables */

const ox_op *ox_find_op(const char *op_type, bool *values) {
  const ox_op *tables[] = {ox_ops_seq, ox_ops_math, ox_ops_shape, ox_ops_nn, ox_ops_resize, ox_ops_extra, ox_ops_rnn, ox_ops_grid, ox_ops_control, ox_ops_signal, ox_ops_nms, ox_ops_unique, ox_ops_tfidf};
  for (int t = 0; t < (int)(sizeof tables / sizeof tables[0]); t++)
    for (const ox_op *o = tables[t]; o->name; o++)
      if (!strcmp(o->name, op_type)) return *values = t == 0, o;
  return NULL;
}
