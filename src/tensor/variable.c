/* variable.c — symbolic variables (tg_variable) and what the frontend checks about sizes built
 * from them (docs/symbolic.md).
 *
 * A variable is an id in uop.c's registry (name, range, bound value). Sizes and offsets that
 * use it are encoded int64s (sym_make) inside movement ops' arguments, so the graph, and the
 * kernel AST the scheduler cuts from it, never holds the value. When a kernel runs, it reads
 * the value from the variable's own one-element int64 buffer on the kernel's device:
 * tg_var_bind writes every such buffer, so a compiled kernel, or a tg_jit replay, sees each
 * new value without being rebuilt. */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "device/device.h"
#include "tensor/shape.h"
#include "tensor/tensor.h"
#include "tensor/variable.h"

struct tg_symvar {
  int id;
};

static tg_symvar handles[SYM_MAX_VARS + 1];

/* Each variable's buffer per device (made when a kernel on that device first reads it). */
static struct {
  pthread_mutex_t lock;
  VEC(uop *) bufs; /* BUFFERs; a buffer's variable is var_of[i] */
  VEC(int) var_of;
} vb = {.lock = PTHREAD_MUTEX_INITIALIZER};

tg_symvar *tg_variable(const char *name, int64_t min, int64_t max) {
  int id = uvar_new(name, min, max);
  if (id < 0) return NULL;
  handles[id].id = id;
  return &handles[id];
}

int64_t tg_var_value(const tg_symvar *v) {
  int64_t x;
  return v && uvar_value(v->id, &x) ? x : -1;
}

int tg_var_bind(tg_symvar *v, int64_t value) {
  if (!v) return tg_set_error(TG_ERR_ARG, "var_bind: NULL variable");
  if (value < uvar_min(v->id) || value > uvar_max(v->id))
    return tg_set_error(TG_ERR_ARG, "var_bind: %lld is outside the range [%lld, %lld] of variable '%s'", (long long)value,
                        (long long)uvar_min(v->id), (long long)uvar_max(v->id), uvar_name(v->id));
  int rc = 0;
  pthread_mutex_lock(&vb.lock);
  uvar_set(v->id, value);
  for (size_t i = 0; i < vb.bufs.n && rc == 0; i++)
    if (vb.var_of.v[i] == v->id) rc = buffer_copy_in(vb.bufs.v[i], &value, sizeof value);
  pthread_mutex_unlock(&vb.lock);
  return rc;
}

int64_t tg_var_expr(const tg_symvar *v, int64_t mul, int64_t k) {
  if (!v) return tg_set_error(TG_ERR_ARG, "var_dim: NULL variable"), SYM_BAD;
  if (mul == 0) return k;
  int64_t e = sym_make(v->id, mul, k);
  if (e == SYM_BAD) tg_set_error(TG_ERR_ARG, "var_expr: %lld * %s %+lld is out of range (|mul| < 128, |k| < 2^39)", (long long)mul, uvar_name(v->id), (long long)k);
  return e;
}

int64_t tg_var_dim(const tg_symvar *v, int64_t k) { return tg_var_expr(v, 1, k); }

uop *var_buffer(int id, const device *dev, int64_t *value) {
  if (!uvar_value(id, value)) return tg_set_error(TG_ERR_ARG, "realize: variable '%s' is not bound (tg_var_bind)", uvar_name(id)), NULL;
  int num = device_number(dev);
  uop *b = NULL;
  pthread_mutex_lock(&vb.lock);
  for (size_t i = 0; i < vb.bufs.n && !b; i++)
    if (vb.var_of.v[i] == id && vb.bufs.v[i]->device == num) b = vb.bufs.v[i];
  if (!b) {
    size_t mark = uop_pool_mark();
    int64_t one = 1;
    uop *nb = buffer_new_lazy(TG_INT64, &one, 1);
    if (nb) uop_set_device(nb, num);
    if (nb && buffer_copy_in(nb, value, sizeof *value) == 0 && VEC_PUSH(vb.var_of, id) == 0) {
      if (VEC_PUSH(vb.bufs, nb) == 0) uop_incref(b = nb); /* the registry's, for good */
      else vb.var_of.n--;
    }
    uop_pool_release(mark);
  }
  pthread_mutex_unlock(&vb.lock);
  return b ? b : (tg_error_status() < 0 ? NULL : (tg_set_error(TG_ERR_NOMEM, "realize: out of memory"), NULL));
}

/* ---- checks of symbolic arguments (movement.c) */

int64_t sym_end(int64_t v, bool hi) {
  int id = sym_var(v);
  return !id ? v : sym_at(v, hi ? uvar_max(id) : uvar_min(id));
}

bool sym_arg_check(const char *op, const int64_t *args, int n, int64_t *out) {
  int var = 0;
  for (int i = 0; i < n; i++) {
    if (sym_is(args[i]) && !uvar_known(sym_var(args[i]))) /* a huge negative number, not a tg_var_dim */
      return tg_set_error(TG_ERR_ARG, "%s: invalid size %lld", op, (long long)args[i]), false;
    if (args[i] == SYM_BAD) { /* tg_var_dim's error (NULL variable, out of range) comes first */
      if (tg_error_status() == 0) tg_set_error(TG_ERR_ARG, "%s: invalid variable size", op);
      return false;
    }
    int id = sym_var(args[i]);
    if (id && var && id != var)
      return tg_set_error(TG_ERR_ARG, "%s: sizes of two variables ('%s' and '%s') in one op are not supported", op, uvar_name(var), uvar_name(id)), false;
    if (id) var = id;
    if (out) out[i] = sym_hi(args[i]);
  }
  return true;
}

/* Ops that compute sizes from a dim's number (cat's offsets, split's pieces, the scans' square
 * views) would see the layout: they refuse a variable axis by name instead. */
bool sym_axis_plain(const char *op, const uop *u, int axis) {
  int64_t d = sym_dim(u, axis);
  if (!sym_is(d)) return true;
  char b[64];
  tg_set_error(TG_ERR_ARG, "%s: axis %d has a variable size (%s, variable '%s'): not supported", op, axis, sym_str(d, b, sizeof b),
               uvar_name(sym_var(d)));
  return false;
}

/* The dim of u (its symbolic form where it has one). */
int64_t sym_dim(const uop *u, int i) { return u->sym && u->sym[i] ? u->sym[i] : uop_shape(u)[i]; }

uop *sym_like(uop *c, const uop *x) {
  if (!c || !x->sym) return c;
  int64_t arg[2 * TG_MAX_DIMS];
  for (int i = 0; i < x->ndim; i++) arg[2 * i] = 0, arg[2 * i + 1] = sym_dim(x, i);
  return uop_new(OP_SHRINK, c->dtype, &c, 1, arg, 2 * x->ndim);
}

int tg_shape_bound(const tg_tensor *t, int64_t *out, int cap) {
  if (!t) return null_arg("shape_bound"), -1;
  if (!out && cap > 0) return tensor_error("shape_bound: out is NULL (cap %d)", cap), -1;
  int nd = uop_ndim(t->u);
  for (int i = 0; i < nd && i < cap; i++) {
    int64_t d = sym_dim(t->u, i), x = 0;
    if (sym_is(d) && !uvar_value(sym_var(d), &x))
      return tensor_error("shape_bound: variable '%s' is not bound", uvar_name(sym_var(d))), -1;
    out[i] = sym_at(d, x);
  }
  return nd;
}

/* Copy the bound box [0, bound) of a layout-shaped host array src into dst, row-major. */
static void compact(unsigned char *dst, const unsigned char *src, const int64_t *lay, const int64_t *now, int nd, size_t es) {
  if (nd == 0) { memcpy(dst, src, es); return; }
  size_t inner = es;
  for (int i = 1; i < nd; i++) inner *= (size_t)lay[i];
  size_t out_inner = es;
  for (int i = 1; i < nd; i++) out_inner *= (size_t)now[i];
  for (int64_t j = 0; j < now[0]; j++) compact(dst + (size_t)j * out_inner, src + (size_t)j * inner, lay + 1, now + 1, nd - 1, es);
}

int sym_to_host(tg_tensor *t, void *dst, size_t nbytes) {
  int64_t now[TG_MAX_DIMS];
  int nd = tg_shape_bound(t, now, TG_MAX_DIMS);
  if (nd < 0) return tg_error_status_or(TG_ERR_ARG);
  size_t es = tg_dtype_size(t->u->dtype), need = (size_t)shape_numel(now, nd) * es;
  size_t all = (size_t)shape_numel(uop_shape(t->u), nd) * es;
  if (nbytes != need || (!dst && need))
    return tg_set_error(TG_ERR_ARG, "to_host: buffer of %zu bytes, the tensor has %zu at its variables' bound values", nbytes, need);
  unsigned char *tmp = malloc(all ? all : 1);
  if (!tmp) return tg_set_error(TG_ERR_NOMEM, "to_host: out of memory");
  int rc = tg_realize(t);
  uop *b = rc < 0 ? NULL : tensor_buffer(t);
  if (rc == 0) rc = b && b->op == OP_BUFFER ? buffer_copy_out(b, tmp, all) : tg_set_error(TG_ERR_ARG, "to_host: a sharded tensor with a variable dim");
  if (rc == 0 && need) compact(dst, tmp, uop_shape(t->u), now, nd, es);
  free(tmp);
  return rc;
}
