/* replay.c — tg_onnx_run replays a model's kernels: called again with inputs of the same
 * dtypes and shapes, it runs the kernels recorded from earlier calls (a tg_jit, docs/jit.md) on
 * the new inputs, with no graph built, scheduled or lowered (docs/onnx.md, "Replays"). The first
 * two calls with a signature record; a model keeps OX_REPLAYS signatures (the least recently
 * used one goes). A run is watched while it records (load.c, ox_env.derived): one that reads a
 * value computed from an input's data on the host (a shape taken from the data, an If on a
 * computed condition, NonZero) does work that depends on the values, which a replay would
 * freeze, so its signature never replays; nor does one the JIT refuses (work or data made
 * inside that differs between calls). Such a signature runs as before. What only the
 * model's initializers feed is folded (jit_fold_constants). TG_ONNX_JIT=0: no replays. */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "onnx/onnx_int.h"
#include "runtime/helpers.h"
#include "tensor/tensor.h"

#define OX_REPLAYS 4

typedef struct watched_call {
  tg_onnx_model *m;
  int rc;          /* the run's own status */
  bool reads_data; /* it read a value computed from input data on the host */
  bool held;       /* an output was realized already: the same graph's output is held elsewhere */
} watched_call;

typedef struct ox_replay {
  int64_t *sig; /* per input: dtype, rank, dims */
  int nsig;
  tg_jit *jit;
  watched_call call; /* the JIT's context */
  bool off;          /* this signature runs without replays */
  uint64_t used;
} ox_replay;

struct ox_replays {
  pthread_mutex_t lock; /* one call records or replays at a time; others run without */
  ox_replay r[OX_REPLAYS];
  uint64_t clock;
};

struct ox_replays *ox_replays_new(void) {
  struct ox_replays *r = calloc(1, sizeof *r);
  if (r) pthread_mutex_init(&r->lock, NULL);
  return r;
}

static void replay_clear(ox_replay *r) {
  tg_jit_free(r->jit);
  free(r->sig);
  *r = (ox_replay){0};
}

void ox_replays_free(struct ox_replays *r) {
  if (!r) return;
  for (int i = 0; i < OX_REPLAYS; i++) replay_clear(&r->r[i]);
  pthread_mutex_destroy(&r->lock);
  free(r);
}

/* The inputs' dtypes and shapes as one array (*n entries); NULL if out of memory. */
static int64_t *signature(tg_tensor *const *in, int nin, int *n) {
  int64_t *s = malloc(sizeof(int64_t) * (size_t)(nin * (OX_MAX_DIMS + 2) + 1));
  int k = 0;
  for (int i = 0; s && i < nin; i++) {
    s[k++] = tg_get_dtype(in[i]);
    int nd = tg_shape(in[i], s + k + 1, OX_MAX_DIMS);
    s[k] = nd;
    k += 1 + (nd > 0 ? nd : 0);
  }
  *n = k;
  return s;
}

/* The entry for the signature: found, else a new one in place of the least recently used. */
static ox_replay *entry_for(struct ox_replays *t, int64_t *sig, int n) {
  ox_replay *lru = &t->r[0];
  for (int i = 0; i < OX_REPLAYS; i++) {
    ox_replay *r = &t->r[i];
    if (r->sig && r->nsig == n && !memcmp(r->sig, sig, sizeof(int64_t) * (size_t)n)) return free(sig), r->used = ++t->clock, r;
    if (r->used < lru->used) lru = r;
  }
  replay_clear(lru);
  *lru = (ox_replay){.sig = sig, .nsig = n, .used = ++t->clock};
  return lru;
}

static int run_watched(void *ctx, tg_tensor *const *in, int nin, tg_tensor **out, int nout) {
  watched_call *c = ctx;
  c->rc = ox_run_tensors(c->m, in, nin, out, nout, &c->reads_data);
  for (int i = 0; c->rc == 0 && i < nout; i++) c->held |= tensor_buffer(out[i]) != NULL;
  return c->rc;
}

/* One call through entry r's JIT: 0 with the outputs, 1 if it did not run (the JIT refused:
 * run it plainly), or the run's own error. A run that steered its work by input values still
 * gave its outputs; its signature is not replayed from then on. A refusal because the same
 * graph's output is held elsewhere (the JIT cannot record what ran before the call) only starts
 * the recording over at a later call. */
static int call_jit(tg_onnx_model *m, ox_replay *r, tg_tensor *const *in, int nin, tg_tensor **out, int nout) {
  r->call = (watched_call){m, 0, false, false};
  if (!r->jit && !(r->jit = tg_jit_new(run_watched, &r->call))) return r->off = true, 1;
  jit_fold_constants(r->jit); /* a model's initializers never change */
  int rc = tg_jit_call(r->jit, in, nin, out, nout);
  if (rc < 0 && r->call.rc < 0) return rc; /* the model failed: its error */
  if (rc == 0 && !r->call.reads_data) return 0;
  tg_jit_free(r->jit), r->jit = NULL, r->off = rc == 0 || !r->call.held;
  if (rc == 0) return 0;
  for (int i = 0; i < nout; i++) tg_free(out[i]), out[i] = NULL;
  tg_clear_error();
  return 1;
}

int tg_onnx_run(tg_onnx_model *m, tg_tensor *const *inputs, int n_inputs, tg_tensor **outputs, int n_outputs) {
  bool may = m && m->replays && inputs && outputs && n_inputs >= 0 && n_outputs > 0 && !jit_recording() &&
             tg_getenv_int("TG_ONNX_JIT", 1);
  for (int i = 0; may && i < n_inputs; i++) may = inputs[i] != NULL; /* an omitted input: no replay */
  if (!may || pthread_mutex_trylock(&m->replays->lock)) return ox_run_tensors(m, inputs, n_inputs, outputs, n_outputs, NULL);
  int n, rc = 1;
  int64_t *sig = signature(inputs, n_inputs, &n);
  ox_replay *r = sig ? entry_for(m->replays, sig, n) : NULL;
  if (r && !r->off) rc = call_jit(m, r, inputs, n_inputs, outputs, n_outputs);
  pthread_mutex_unlock(&m->replays->lock);
  return rc <= 0 ? rc : ox_run_tensors(m, inputs, n_inputs, outputs, n_outputs, NULL);
}
