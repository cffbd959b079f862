/* optim.c — SGD (momentum, Nesterov, weight decay), Adam, AdamW and LAMB.
 *
 * One struct for every optimizer; the kind (a row of opt_kinds[]) supplies the per-parameter
 * update rule. A step builds lazily, with tg_assign, beta1^t and beta2^t, each parameter's
 * state (momentum buffer, or m and v) and value, and realizes all of it plus the caller's
 * `also` tensors in one tg_realize_many.
 *
 * The learning rate and beta1^t, beta2^t are float64 tensors on the device, not host numbers:
 * the step's kernels read them, so a new learning rate or step never compiles a new kernel,
 * and a step replayed by tg_jit (which runs no host code) still advances them. The scalar
 * factors are computed in float64 as the host did before and cast to the parameter's dtype.
 * The state starts as realized zeros, so step 1 already has the buffer layout of every later
 * step. See docs/optim.md for the formulas and their PyTorch equivalents. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "tensor/tensor.h"

typedef struct opt_kind opt_kind;

struct tg_optimizer {
  const opt_kind *kind;
  int n;              /* parameters */
  int nstate;         /* state tensors per parameter */
  tg_tensor **params; /* retained */
  tg_tensor **state;  /* n * nstate, retained; state[i * nstate + k] */
  tg_tensor *lr;      /* float64, 0-d, retained; written in place by tg_optimizer_set_lr */
  tg_tensor *b1t, *b2t; /* beta1^t, beta2^t (float64, 0-d, retained): bias corrections 1 - these */
  double momentum, weight_decay, beta1, beta2, eps;
  bool nesterov;
};

/* The new value of parameter p (lazy) given its gradient g; assigns the new state. */
typedef tg_tensor *(*update_fn)(tg_optimizer *o, tg_tensor *p, tg_tensor *g, tg_tensor **state);

struct opt_kind {
  const char *name;
  update_fn update;
  bool bias_correction; /* keeps beta1^t and beta2^t */
  bool decoupled_wd;    /* AdamW: p *= 1 - lr * wd before the Adam step */
};

/* ---------------------------------------------------------------- update rules */

/* A float64 scalar expression as a factor for tensors of p's dtype. */
static tg_tensor *factor(tg_tensor *p, tg_tensor *x) { return tg_cast(x, tg_get_dtype(p)); }

/* 1 - x (float64). */
static tg_tensor *one_minus(tg_tensor *x) { return tg_sub(tg_ones_like(x), x); }

/* PyTorch SGD: g += wd * p; buf = momentum * buf + g (buf = g on the first step, the same
 * thing since buf starts at 0); g = nesterov ? g + momentum * buf : buf; p -= lr * g. */
static tg_tensor *sgd_update(tg_optimizer *o, tg_tensor *p, tg_tensor *g, tg_tensor **state) {
  if (o->weight_decay != 0) g = tg_add(g, tg_mul_s(p, o->weight_decay));
  if (o->momentum != 0) {
    tg_tensor *buf = state[0];
    if (tg_assign(buf, tg_add(tg_mul_s(buf, o->momentum), g)) < 0) return NULL;
    g = o->nesterov ? tg_add(g, tg_mul_s(buf, o->momentum)) : buf;
  }
  return tg_sub(p, tg_mul(g, factor(p, o->lr)));
}

/* m and v after this step (assigned), shared by Adam, AdamW and LAMB. */
static int adam_moments(tg_optimizer *o, tg_tensor *g, tg_tensor **state) {
  tg_tensor *m = state[0], *v = state[1];
  int rc = tg_assign(m, tg_add(tg_mul_s(m, o->beta1), tg_mul_s(g, 1 - o->beta1)));
  if (rc < 0) return rc;
  return tg_assign(v, tg_add(tg_mul_s(v, o->beta2), tg_mul_s(tg_square(g), 1 - o->beta2)));
}

/* PyTorch Adam/AdamW (torch 1.13, non-fused):
 *   p *= 1 - lr * wd                                  (AdamW only)
 *   p -= lr / (1 - b1^t) * m / (sqrt(v) / sqrt(1 - b2^t) + eps) */
static tg_tensor *adam_update(tg_optimizer *o, tg_tensor *p, tg_tensor *g, tg_tensor **state) {
  if (adam_moments(o, g, state) < 0) return NULL;
  if (o->kind->decoupled_wd && o->weight_decay != 0) p = tg_mul(p, factor(p, one_minus(tg_mul_s(o->lr, o->weight_decay))));
  tg_tensor *denom = tg_add_s(tg_div(tg_sqrt(state[1]), factor(p, tg_sqrt(one_minus(o->b2t)))), o->eps);
  return tg_sub(p, tg_mul(tg_div(state[0], denom), factor(p, tg_div(o->lr, one_minus(o->b1t)))));
}

/* sqrt(sum(x^2)) as a 0-d tensor. */
static tg_tensor *norm2(tg_tensor *x) { return tg_sqrt(tg_sum(tg_square(x), NULL, 0, false)); }

/* LAMB as in tinygrad (You et al. 2019, without clipping of the trust ratio):
 *   up = m / (1 - b1^t) / (sqrt(v / (1 - b2^t)) + eps) + wd * p
 *   r  = ||p|| / ||up||, or 1 when either norm is 0
 *   p -= lr * r * up */
static tg_tensor *lamb_update(tg_optimizer *o, tg_tensor *p, tg_tensor *g, tg_tensor **state) {
  if (adam_moments(o, g, state) < 0) return NULL;
  tg_tensor *m_hat = tg_div(state[0], factor(p, one_minus(o->b1t)));
  tg_tensor *v_hat = tg_div(state[1], factor(p, one_minus(o->b2t)));
  tg_tensor *up = tg_div(m_hat, tg_add_s(tg_sqrt(v_hat), o->eps));
  if (o->weight_decay != 0) up = tg_add(up, tg_mul_s(p, o->weight_decay));
  tg_tensor *r1 = norm2(p), *r2 = norm2(up);
  tg_tensor *one = tg_ones_like(r1);
  tg_tensor *ratio = tg_where(tg_gt(r1, tg_zeros_like(r1)),
                              tg_where(tg_gt(r2, tg_zeros_like(r2)), tg_div(r1, r2), one), one);
  return tg_sub(p, tg_mul(tg_mul(ratio, factor(p, o->lr)), up));
}

enum { OPT_SGD, OPT_ADAM, OPT_ADAMW, OPT_LAMB };

static const opt_kind opt_kinds[] = {
    /*            name     update       bias_correction decoupled_wd */
    [OPT_SGD] = {"sgd", sgd_update, false, false},
    [OPT_ADAM] = {"adam", adam_update, true, false},
    [OPT_ADAMW] = {"adamw", adam_update, true, true},
    [OPT_LAMB] = {"lamb", lamb_update, true, false},
};

/* ---------------------------------------------------------------- construction */

typedef struct opt_args {
  double lr, momentum, weight_decay, beta1, beta2, eps;
  bool nesterov;
} opt_args;

/* A hyperparameter check: the message is printed when ok is false. */
typedef struct arg_check {
  bool ok;
  const char *what;
  double value;
} arg_check;

static int check_args(const opt_kind *k, const opt_args *a) {
  bool adam = k->bias_correction;
  const arg_check checks[] = {
      {isfinite(a->lr) && a->lr >= 0, "learning rate must be finite and >= 0", a->lr},
      {isfinite(a->momentum) && a->momentum >= 0, "momentum must be finite and >= 0", a->momentum},
      {isfinite(a->weight_decay) && a->weight_decay >= 0, "weight_decay must be finite and >= 0", a->weight_decay},
      {!a->nesterov || a->momentum > 0, "nesterov needs momentum > 0, got momentum", a->momentum},
      {!adam || (a->beta1 >= 0 && a->beta1 < 1), "beta1 must be in [0, 1)", a->beta1},
      {!adam || (a->beta2 >= 0 && a->beta2 < 1), "beta2 must be in [0, 1)", a->beta2},
      {!adam || (isfinite(a->eps) && a->eps >= 0), "eps must be finite and >= 0", a->eps},
  };
  for (size_t i = 0; i < sizeof checks / sizeof checks[0]; i++)
    if (!checks[i].ok) return tg_set_error(TG_ERR_ARG, "%s: %s (got %g)", k->name, checks[i].what, checks[i].value);
  return 0;
}

static int check_params(const opt_kind *k, tg_tensor **params, int n) {
  if (!params || n <= 0) return tg_set_error(TG_ERR_ARG, "%s: no parameters (params=%p, n=%d)", k->name, (void *)params, n);
  for (int i = 0; i < n; i++) {
    tg_tensor *p = params[i];
    if (!p) return tg_set_error(TG_ERR_ARG, "%s: parameter %d is NULL", k->name, i);
    if (!tg_get_requires_grad(p))
      return tg_set_error(TG_ERR_ARG, "%s: parameter %d does not require grad (use tg_requires_grad)", k->name, i);
    if (!tg_dtype_is_float(tg_get_dtype(p)))
      return tg_set_error(TG_ERR_ARG, "%s: parameter %d has dtype %s; optimizers need floats", k->name, i,
                          tg_dtype_name(tg_get_dtype(p)));
    for (int j = 0; j < i; j++)
      if (params[j] == p) return tg_set_error(TG_ERR_ARG, "%s: parameter %d is listed twice (also at %d)", k->name, i, j);
  }
  return 0;
}

/* A realized tensor owned by the optimizer (see layers.c: realized one by one, so equal
 * initial values still get distinct buffers). */
static tg_tensor *own(tg_tensor *t) { return t && tg_realize(t) == 0 ? tg_retain(t) : NULL; }

/* A float64 0-d tensor of its own buffer (tg_from_data: never shared, so it can be written in
 * place). */
static tg_tensor *own_scalar(double v) { return own(tg_from_data(&v, TG_FLOAT64, NULL, 0)); }

/* Everything that may fail: the state and the parameter list. */
static int alloc_state(tg_optimizer *o, tg_tensor **params) {
  o->params = calloc((size_t)o->n, sizeof *o->params);
  o->state = calloc((size_t)o->n * (size_t)o->nstate + 1, sizeof *o->state);
  if (!o->params || !o->state) return tg_set_error(TG_ERR_NOMEM, "%s: out of memory", o->kind->name);
  if (!(o->lr = own_scalar(0)) || !(o->b1t = own_scalar(1)) || !(o->b2t = own_scalar(1))) return TG_ERR_NOMEM;
  for (int i = 0; i < o->n; i++) {
    if (!tg_is_realized(params[i]) && tg_realize(params[i]) < 0) return TG_ERR_DEVICE;
    o->params[i] = tg_retain(params[i]);
    for (int k = 0; k < o->nstate; k++)
      if (!(o->state[i * o->nstate + k] = own(tg_zeros_like(params[i])))) return TG_ERR_NOMEM;
  }
  return 0;
}

static tg_optimizer *optimizer_new(const opt_kind *k, tg_tensor **params, int n, const opt_args *a) {
  if (check_params(k, params, n) < 0 || check_args(k, a) < 0) return NULL;
  tg_optimizer *o = calloc(1, sizeof *o);
  if (!o) return tg_set_error(TG_ERR_NOMEM, "%s: out of memory", k->name), NULL;
  *o = (tg_optimizer){.kind = k, .n = n, .momentum = a->momentum, .weight_decay = a->weight_decay,
                      .beta1 = a->beta1, .beta2 = a->beta2, .eps = a->eps, .nesterov = a->nesterov};
  o->nstate = k->bias_correction ? 2 : a->momentum > 0 ? 1 : 0;
  tg_scope *s = tg_scope_begin();
  int rc = alloc_state(o, params);
  tg_scope_end(s);
  if (rc == 0) rc = tg_optimizer_set_lr(o, a->lr);
  if (rc == 0) return o;
  tg_optimizer_free(o);
  return NULL;
}

tg_optimizer *tg_sgd(tg_tensor **params, int n, double lr, double momentum, double weight_decay, bool nesterov) {
  opt_args a = {.lr = lr, .momentum = momentum, .weight_decay = weight_decay, .nesterov = nesterov};
  return optimizer_new(&opt_kinds[OPT_SGD], params, n, &a);
}

tg_optimizer *tg_adam(tg_tensor **params, int n, double lr, double beta1, double beta2, double eps) {
  opt_args a = {.lr = lr, .beta1 = beta1, .beta2 = beta2, .eps = eps};
  return optimizer_new(&opt_kinds[OPT_ADAM], params, n, &a);
}

tg_optimizer *tg_adamw(tg_tensor **params, int n, double lr, double beta1, double beta2, double eps,
                       double weight_decay) {
  opt_args a = {.lr = lr, .beta1 = beta1, .beta2 = beta2, .eps = eps, .weight_decay = weight_decay};
  return optimizer_new(&opt_kinds[OPT_ADAMW], params, n, &a);
}

tg_optimizer *tg_lamb(tg_tensor **params, int n, double lr, double beta1, double beta2, double eps,
                      double weight_decay) {
  opt_args a = {.lr = lr, .beta1 = beta1, .beta2 = beta2, .eps = eps, .weight_decay = weight_decay};
  return optimizer_new(&opt_kinds[OPT_LAMB], params, n, &a);
}

/* ---------------------------------------------------------------- stepping */

/* The tensors a step changes, with their values before the step (to roll back on failure). */
typedef struct step_list {
  tg_tensor **ts;
  uop **old;
  int n;
} step_list;

static void step_push(step_list *l, tg_tensor *t) {
  uop_incref(t->u);
  l->old[l->n] = t->u;
  l->ts[l->n++] = t;
}

static bool any_grad(const tg_optimizer *o) {
  for (int i = 0; i < o->n; i++)
    if (tg_grad(o->params[i])) return true;
  return false;
}

/* Build the lazy updates of every parameter with a gradient, after beta1^t and beta2^t. */
static int build_step(tg_optimizer *o, step_list *l) {
  int rc = 0;
  if (o->kind->bias_correction) {
    step_push(l, o->b1t), step_push(l, o->b2t);
    rc = tg_assign(o->b1t, tg_mul_s(o->b1t, o->beta1));
    if (rc == 0) rc = tg_assign(o->b2t, tg_mul_s(o->b2t, o->beta2));
  }
  for (int i = 0; i < o->n && rc == 0; i++) {
    tg_tensor *p = o->params[i], *g = tg_grad(p), **state = o->state + i * o->nstate;
    if (!g) continue; /* not used by the loss: parameter and state stay as they are */
    step_push(l, p);
    for (int k = 0; k < o->nstate; k++) step_push(l, state[k]);
    tg_tensor *np = o->kind->update(o, p, g, state);
    rc = np ? tg_assign(p, np) : TG_ERR_ARG;
  }
  return rc;
}

/* A step in which no parameter has a gradient changes nothing (like PyTorch, where it is a
 * no-op); otherwise the step count and beta^t advance, and go back if the step fails. */
int tg_optimizer_step(tg_optimizer *o, tg_tensor **also, int nalso) {
  if (!o) return tg_set_error(TG_ERR_ARG, "optimizer_step: NULL optimizer");
  if (nalso < 0 || (nalso > 0 && !also)) return tg_set_error(TG_ERR_ARG, "optimizer_step: invalid also list (n=%d)", nalso);
  for (int i = 0; i < nalso; i++)
    if (!also[i]) return tg_set_error(TG_ERR_ARG, "optimizer_step: also[%d] is NULL", i);
  size_t cap = (size_t)o->n * (size_t)(1 + o->nstate) + 2;
  step_list l = {malloc(sizeof(tg_tensor *) * (cap + (size_t)nalso + 1)), malloc(sizeof(uop *) * (cap + 1)), 0};
  if (!l.ts || !l.old) return free(l.ts), free(l.old), tg_set_error(TG_ERR_NOMEM, "optimizer_step: out of memory");
  tg_scope *s = tg_scope_begin();
  int rc = any_grad(o) ? build_step(o, &l) : 0;
  int nchanged = l.n;
  for (int i = 0; i < nalso; i++) l.ts[l.n++] = also[i];
  if (rc == 0) rc = tg_realize_many(l.ts, l.n);
  tg_scope_end(s);
  for (int i = 0; i < nchanged; i++) { /* on failure every changed tensor gets its old value back */
    if (rc < 0) tensor_set_value(l.ts[i], l.old[i]);
    uop_decref(l.old[i]);
  }
  free(l.ts), free(l.old);
  if (rc == 0) tg_optimizer_zero_grad(o);
  return rc;
}

int tg_optimizer_set_lr(tg_optimizer *o, double lr) {
  if (!o) return tg_set_error(TG_ERR_ARG, "optimizer_set_lr: NULL optimizer");
  if (!isfinite(lr) || lr < 0) return tg_set_error(TG_ERR_ARG, "%s: learning rate must be finite and >= 0 (got %g)", o->kind->name, lr);
  uop *buf = tensor_buffer(o->lr);
  /* in place: the step's kernels (and a tg_jit replaying them) read this buffer */
  return buf ? buffer_copy_in(buf, &lr, sizeof lr) : tg_set_error(TG_ERR_ARG, "%s: the learning rate is not realized", o->kind->name);
}

void tg_optimizer_zero_grad(tg_optimizer *o) {
  if (!o) return;
  for (int i = 0; i < o->n; i++) tg_zero_grad(o->params[i]);
}

void tg_optimizer_free(tg_optimizer *o) {
  if (!o) return;
  for (int i = 0; o->params && i < o->n; i++) tg_free(o->params[i]);
  for (int i = 0; o->state && i < o->n * o->nstate; i++) tg_free(o->state[i]);
  tg_free(o->lr), tg_free(o->b1t), tg_free(o->b2t);
  free(o->params), free(o->state), free(o);
}
