/* jit.c — tg_jit: record the kernels a function runs, then replay them (tinygrad's TinyJit).
 *
 * Call 1 runs the function as usual and records every item the engine runs (engine.h's
 * capture hook); call 2 does the same and compares the two recordings; from call 3 on the
 * recording is replayed: no graph is built, scheduled or lowered, each item's program runs on
 * the buffers of this call. Every buffer a recorded item touches has a class:
 *
 *   input     the buffer of the call's input i                 → that input's buffer now
 *   state     a tensor's buffer before the function assigned it → that tensor's buffer now
 *   written   made by an item of the call: outputs and new state values → a fresh buffer
 *             each replay (tensors take them); intermediates → the same buffer each replay,
 *             given memory when written and back when last read, as the engine does
 *   external  read, made before (weights, an optimizer's learning rate)  → the same buffer
 *
 * After a replay each assigned tensor takes its new buffer and the outputs are new handles on
 * theirs. Wrong use is an error, never a wrong answer: an input of another shape or dtype;
 * a recording that differs between calls 1 and 2 (other kernels, or an external buffer made
 * inside the function whose contents changed: data or a scalar the replay would freeze). See
 * docs/jit.md. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tg.h"
#include "tensor/tensor.h"

#include "codegen/codegen.h"
#include "device/device.h"
#include "engine/engine.h"

enum { B_INPUT, B_STATE, B_WRITTEN, B_EXTERNAL };
static const char *const class_names[] = {"input", "state", "written", "external"};

typedef struct jbuf {
  uop *u; /* the recorded buffer (a reference) */
  int cls, index; /* input number, state number */
  bool kept;      /* written, and a tensor takes it (an output, a new state value) */
} jbuf;

typedef struct jitem {
  const device *dev;
  program *prog; /* NULL: a copy between devices */
  uop *ast;      /* a reference (NULL for a copy) */
  int64_t numel;
  int nbufs, nrelease;
  int *bufs, *release; /* indices into the recording's buffers */
  bool folded;         /* computes a constant: run when the recording was kept, never replayed */
} jitem;

typedef struct jstate {
  tg_tensor *t; /* retained */
  int old, now; /* buffer indices: before the call (-1: it had none), after */
} jstate;

typedef struct recording {
  VEC(jbuf) bufs;
  ptrmap index; /* uop → buffer index + 1 */
  VEC(jitem) items;
  VEC(jstate) state;
  int *outputs, noutputs;
  tg_tensor *const *inputs; /* while recording */
  int ninputs, failed;
} recording;

typedef struct input_sig {
  tg_dtype dtype;
  int ndim;
  int64_t shape[TG_MAX_DIMS];
} input_sig;

struct tg_jit {
  tg_jit_fn fn;
  void *ctx;
  int calls;
  recording rec[2];
  input_sig *sig;
  int ninputs, noutputs;
  bool ready;        /* recorded twice alike: calls replay */
  bool fold;         /* external buffers never change: fold what only they feed (jit_fold_constants) */
  char broken[512]; /* why it cannot replay (every later call fails with it) */
};

static _Thread_local recording *recording_now;

bool jit_recording(void) { return recording_now != NULL; }

/* ---------------------------------------------------------------- recording */

static void recording_free(recording *r) {
  for (size_t i = 0; i < r->bufs.n; i++) uop_decref(r->bufs.v[i].u);
  for (size_t i = 0; i < r->items.n; i++) {
    if (r->items.v[i].ast) uop_decref(r->items.v[i].ast);
    free(r->items.v[i].bufs), free(r->items.v[i].release);
  }
  for (size_t i = 0; i < r->state.n; i++) tg_free(r->state.v[i].t);
  VEC_FREE(r->bufs), VEC_FREE(r->items), VEC_FREE(r->state);
  ptrmap_free(&r->index);
  free(r->outputs);
  *r = (recording){0};
}

static int state_of_old(const recording *r, uop *u) {
  for (size_t k = 0; k < r->state.n; k++)
    if (r->state.v[k].old >= 0 && r->bufs.v[r->state.v[k].old].u == u) return (int)k;
  return -1;
}

/* The index of buffer u in the recording, classified when first seen (written: an item's
 * output); -1 when out of memory. */
static int buf_index(recording *r, uop *u, bool written) {
  intptr_t at = (intptr_t)ptrmap_get(&r->index, u);
  if (at) return (int)at - 1;
  jbuf b = {u, B_EXTERNAL, 0, false};
  int k;
  if (written) b.cls = B_WRITTEN;
  else if ((k = state_of_old(r, u)) >= 0) b.cls = B_STATE, b.index = k;
  for (int i = 0; i < r->ninputs && !written; i++)
    if (tensor_buffer(r->inputs[i]) == u) b.cls = B_INPUT, b.index = i;
  if (VEC_PUSH(r->bufs, b) < 0 || ptrmap_put(&r->index, u, (void *)(intptr_t)r->bufs.n) < 0) return -1;
  uop_incref(u);
  return (int)r->bufs.n - 1;
}

static int *indices(recording *r, uop **bufs, int n, bool first_written) {
  int *out = malloc(sizeof(int) * (size_t)(n ? n : 1));
  for (int i = 0; out && i < n; i++)
    if ((out[i] = buf_index(r, bufs[i], first_written && i == 0)) < 0) return free(out), NULL;
  return out;
}

/* The engine's capture hook: one item that just ran. */
static void record_item(void *ctx, const sched_item *it, program *p) {
  recording *r = ctx;
  jitem j = {it->dev, p, it->ast, it->numel, it->nbufs, it->nrelease, NULL, NULL, false};
  if (it->ast && !j.prog) j.prog = program_get(device_base(it->dev), it->ast); /* as run_kernel finds it */
  j.bufs = indices(r, it->bufs, it->nbufs, true);
  j.release = indices(r, it->release, it->nrelease, false);
  if ((it->ast && !j.prog) || !j.bufs || !j.release || VEC_PUSH(r->items, j) < 0) {
    free(j.bufs), free(j.release), r->failed = 1;
    return;
  }
  if (j.ast) uop_incref(j.ast);
}

void jit_note_assign(tg_tensor *t) {
  recording *r = recording_now;
  if (!r) return;
  for (size_t k = 0; k < r->state.n; k++)
    if (r->state.v[k].t == t) return; /* assigned again: its value before the call stays */
  uop *old = tensor_buffer(t);
  jstate s = {tg_retain(t), old ? buf_index(r, old, false) : -1, -1};
  if (old && s.old < 0) r->failed = 1;
  if (VEC_PUSH(r->state, s) < 0) tg_free(t), r->failed = 1;
  else if (s.old >= 0) r->bufs.v[s.old].cls = B_STATE, r->bufs.v[s.old].index = (int)r->state.n - 1;
}

/* A sharded value (a MULTI of per-device buffers): not recorded yet. */
static int refuse_sharded(uop *b, const char *what, int i) {
  return b && b->op == OP_MULTI ? tg_set_error(TG_ERR_ARG, "jit: %s %d is sharded across devices; tg_jit does not record sharded tensors yet", what, i) : 0;
}

/* Does u's graph reach one of the inputs' nodes? */
static bool reaches_input(uop *u, tg_tensor *const *in, int nin, ptrmap *seen) {
  if (ptrmap_has(seen, u)) return false;
  ptrmap_put(seen, u, u);
  for (int i = 0; i < nin; i++)
    if (u == in[i]->u) return true;
  for (int i = 0; i < u->nsrc; i++)
    if (reaches_input(u->src[i], in, nin, seen)) return true;
  return false;
}

/* An output computed from the inputs whose buffer no recorded kernel wrote (external: the same
 * expression of the same input is held elsewhere, and interned nodes share their buffer) was
 * computed before this call: a replay would return that old buffer. */
static int refuse_computed_before(const recording *r, tg_tensor **out, int nout) {
  for (int i = 0; i < nout; i++) {
    if (r->bufs.v[r->outputs[i]].cls != B_EXTERNAL) continue;
    ptrmap seen = {0};
    bool from_input = reaches_input(out[i]->u, r->inputs, r->ninputs, &seen);
    ptrmap_free(&seen);
    if (from_input)
      return tg_set_error(TG_ERR_ARG, "jit: output %d was computed from the inputs before this call (the same expression "
                                      "is held elsewhere), so no kernel made it: a replay would return that old value", i);
  }
  return 0;
}

/* Call fn once, recording into r: the items of every realize it does, and of realizing its
 * outputs (and pending assigns) at the end. */
static int record_call(tg_jit *j, recording *r, tg_tensor *const *in, int nin, tg_tensor **out, int nout) {
  *r = (recording){.inputs = in, .ninputs = nin};
  for (int i = 0; i < nin; i++) /* the inputs' own buffers exist before the call */
    if (buf_index(r, tensor_buffer(in[i]), false) < 0) return tg_set_error(TG_ERR_NOMEM, "jit: out of memory");
  recording_now = r;
  engine_set_capture(record_item, r);
  for (int i = 0; i < nout; i++) out[i] = NULL;
  int rc = j->fn(j->ctx, in, nin, out, nout);
  for (int i = 0; i < nout && rc == 0; i++)
    if (!out[i]) rc = tg_set_error(TG_ERR_ARG, "jit: the function left output %d unset", i);
  if (rc == 0) rc = tg_realize_many(out, nout);
  engine_set_capture(NULL, NULL);
  recording_now = NULL;
  if (rc < 0) return rc;
  if (r->failed) return tg_set_error(TG_ERR_NOMEM, "jit: out of memory while recording");
  if (!(r->outputs = malloc(sizeof(int) * (size_t)(nout ? nout : 1)))) return tg_set_error(TG_ERR_NOMEM, "jit: out of memory");
  for (int i = 0; i < nout; i++) {
    if ((rc = refuse_sharded(tensor_buffer(out[i]), "output", i)) < 0) return rc;
    if ((r->outputs[r->noutputs++] = buf_index(r, tensor_buffer(out[i]), false)) < 0) return tg_set_error(TG_ERR_NOMEM, "jit: out of memory");
  }
  if ((rc = refuse_computed_before(r, out, nout)) < 0) return rc;
  for (size_t k = 0; k < r->state.n; k++) {
    uop *now = tensor_buffer(r->state.v[k].t);
    if (!now) return tg_set_error(TG_ERR_ARG, "jit: an assigned tensor has no value after the call");
    if ((rc = refuse_sharded(now, "assigned tensor", (int)k)) < 0) return rc;
    if ((r->state.v[k].now = buf_index(r, now, false)) < 0) return tg_set_error(TG_ERR_NOMEM, "jit: out of memory");
  }
  return 0;
}

/* ---------------------------------------------------------------- checks */

static void describe_sig(const input_sig *s, char *buf, size_t n) {
  char shape[256];
  snprintf(buf, n, "%s %s", tg_dtype_name(s->dtype), tg_fmt_shape(shape, sizeof shape, s->shape, s->ndim));
}

static void sig_of(tg_tensor *t, input_sig *s) {
  s->dtype = tg_get_dtype(t), s->ndim = tg_ndim(t);
  for (int d = 0; d < s->ndim; d++) s->shape[d] = tg_dim(t, d);
}

static int check_inputs(tg_jit *j, tg_tensor *const *in, int nin, int nout) {
  if (nin != j->ninputs || nout != j->noutputs)
    return tg_set_error(TG_ERR_ARG, "jit: called with %d inputs and %d outputs, recorded with %d and %d", nin, nout, j->ninputs, j->noutputs);
  for (int i = 0; i < nin; i++) {
    if (!in[i]) return tg_set_error(TG_ERR_ARG, "jit: input %d is NULL", i);
    input_sig now;
    sig_of(in[i], &now);
    if (now.dtype == j->sig[i].dtype && now.ndim == j->sig[i].ndim && !memcmp(now.shape, j->sig[i].shape, sizeof(int64_t) * (size_t)now.ndim)) continue;
    char was[320], is[320];
    describe_sig(&j->sig[i], was, sizeof was), describe_sig(&now, is, sizeof is);
    return tg_set_error(TG_ERR_ARG, "jit: input %d is %s, but the function was recorded with %s (a new shape or dtype needs a new tg_jit)", i, is, was);
  }
  return 0;
}

/* Whether two buffers made inside the function hold the same bytes. */
static bool same_contents(uop *a, uop *b) {
  size_t n = (size_t)shape_numel(uop_shape(a), uop_ndim(a)) * tg_dtype_size(a->dtype);
  if (a->dtype != b->dtype || n != (size_t)shape_numel(uop_shape(b), uop_ndim(b)) * tg_dtype_size(b->dtype)) return false;
  unsigned char *x = malloc(n ? n : 1), *y = malloc(n ? n : 1);
  bool same = x && y && buffer_copy_out(a, x, n) == 0 && buffer_copy_out(b, y, n) == 0 && !memcmp(x, y, n);
  free(x), free(y);
  tg_clear_error();
  return same;
}

static const char *item_name(const jitem *it) { return it->prog ? it->prog->info.name : "a copy"; }

/* The two recordings describe the same work: same programs in the same order, each buffer of
 * the same class; an external buffer made anew in each call holds the same bytes. 0 when they
 * do; 1 when the later call did other work (a first call also initializes what was lazy:
 * parameters, optimizer state); -1, with why, when the later one cannot be replayed. */
static int compare(const recording *a, const recording *b, char *why, size_t n) {
  if (a->items.n != b->items.n || a->state.n != b->state.n) {
    snprintf(why, n, "jit: the function ran %zu kernels and assigned %zu tensors on one call, %zu and %zu on the next: it must do the same work each call",
             a->items.n, a->state.n, b->items.n, b->state.n);
    return 1;
  }
  for (size_t i = 0; i < a->items.n; i++) {
    const jitem *x = &a->items.v[i], *y = &b->items.v[i];
    if (x->prog != y->prog || x->nbufs != y->nbufs || x->numel != y->numel)
      return snprintf(why, n, "jit: kernel %zu was %s on one call and %s on the next: the function must build the same graph each call", i, item_name(x), item_name(y)), 1;
    for (int s = 0; s < x->nbufs; s++) {
      const jbuf *p = &a->bufs.v[x->bufs[s]], *q = &b->bufs.v[y->bufs[s]];
      bool same = p->cls == q->cls && (p->cls == B_WRITTEN ? x->bufs[s] == y->bufs[s] : p->index == q->index);
      if (same && p->cls == B_EXTERNAL) same = p->u == q->u || same_contents(p->u, q->u);
      if (same) continue;
      if (p->cls == B_EXTERNAL && q->cls == B_EXTERNAL)
        return snprintf(why, n, "jit: kernel %zu (%s) reads data made inside the function that changed between calls (a tensor built from host data, or a scalar): a replay would freeze it; pass it as an input", i, item_name(x)), -1;
      return snprintf(why, n, "jit: buffer %d of kernel %zu (%s) was %s on one call and %s on the next", s, i, item_name(x), class_names[p->cls], class_names[q->cls]), 1;
    }
  }
  for (size_t k = 0; k < a->state.n; k++)
    if (a->state.v[k].t != b->state.v[k].t) return snprintf(why, n, "jit: the function assigned other tensors on one call than on the next"), 1;
  return 0;
}

/* A buffer without memory of u's dtype, shape and device (NULL when out of memory). */
static uop *lazy_like(uop *u) {
  uop *b = buffer_new_lazy(u->dtype, uop_shape(u), uop_ndim(u));
  if (b) uop_set_device(b, u->device);
  return b;
}

/* Where external buffers never change (jit_fold_constants: a model's own weights), an item
 * that reads only them, or what such items made, computes the same value every call (a
 * weight's packed panels, a Winograd weight transform): it runs once more here, into its
 * recorded buffer, which the recording keeps as external and no release list gives back; a
 * replay skips it. Only an intermediate's sole writer folds (not an output or a new state). */
static int fold_constants(recording *r) {
  int *writers = calloc(r->bufs.n + 1, sizeof(int));
  bool *constant = calloc(r->bufs.n + 1, sizeof(bool));
  int rc = writers && constant ? 0 : tg_set_error(TG_ERR_NOMEM, "jit: out of memory");
  for (size_t i = 0; i < r->items.n && rc == 0; i++) writers[r->items.v[i].bufs[0]]++;
  for (size_t b = 0; b < r->bufs.n && rc == 0; b++) constant[b] = r->bufs.v[b].cls == B_EXTERNAL;
  for (size_t i = 0; i < r->items.n && rc == 0; i++) {
    jitem *j = &r->items.v[i];
    jbuf *out = &r->bufs.v[j->bufs[0]];
    bool fold = out->cls == B_WRITTEN && !out->kept && writers[j->bufs[0]] == 1 && j->nbufs <= 64;
    for (int s = 1; s < j->nbufs && fold; s++) fold = constant[j->bufs[s]];
    if (!fold) continue;
    uop *bufs[64];
    for (int s = 0; s < j->nbufs; s++) bufs[s] = r->bufs.v[j->bufs[s]].u;
    sched_item it = {j->dev, j->ast, bufs, j->nbufs, j->numel, NULL, 0};
    rc = engine_run_item(&it, j->prog);
    j->folded = true, constant[j->bufs[0]] = true, out->cls = B_EXTERNAL;
  }
  for (size_t i = 0; i < r->items.n && rc == 0; i++) { /* folded buffers are never given back */
    jitem *j = &r->items.v[i];
    int n = 0;
    for (int k = 0; k < j->nrelease; k++)
      if (!constant[j->release[k]]) j->release[n++] = j->release[k];
    j->nrelease = n;
  }
  free(writers), free(constant);
  return rc;
}

/* Once a recording is accepted, it keeps only what a replay reads: the external buffers. The
 * others become lazy buffers of the same dtype, shape and device (templates without memory),
 * so the recording holds no call's inputs, intermediates or old state. */
static int keep_templates(recording *r) {
  for (int i = 0; i < r->noutputs; i++) r->bufs.v[r->outputs[i]].kept = true;
  for (size_t k = 0; k < r->state.n; k++) r->bufs.v[r->state.v[k].now].kept = true;
  size_t mark = uop_pool_mark(); /* the recording takes its own references */
  int rc = 0;
  for (size_t b = 0; b < r->bufs.n && rc == 0; b++) {
    jbuf *x = &r->bufs.v[b];
    if (x->cls == B_EXTERNAL) continue;
    uop *t = lazy_like(x->u);
    if (t) uop_incref(t), uop_decref(x->u), x->u = t;
    else rc = TG_ERR_NOMEM;
  }
  uop_pool_release(mark);
  ptrmap_free(&r->index);
  return rc;
}

/* ---------------------------------------------------------------- replay */

/* The buffer recorded as b, for this call. */
static uop *buffer_now(const recording *r, const jbuf *b, tg_tensor *const *in) {
  switch (b->cls) {
    case B_INPUT: return tensor_buffer(in[b->index]);
    case B_STATE: return tensor_buffer(r->state.v[b->index].t);
    case B_WRITTEN: return b->kept ? lazy_like(b->u) : b->u;
    default: return b->u;
  }
}

/* The items from i on, folded ones skipped, as the engine runs them: up to CHUNK_WINDOW where
 * the first can start a chain (engine/chunks.c: at most CHUNK_CHAIN_MAX of them, the rest tell
 * where its outputs are read), else that one; their count; at[k] is item k's index in r. */
typedef struct item_window {
  uop *bufs[CHUNK_WINDOW][64];
  sched_item it[CHUNK_WINDOW];
  const sched_item *items[CHUNK_WINDOW];
  program *progs[CHUNK_WINDOW];
  size_t at[CHUNK_WINDOW];
  int last_read[CHUNK_WINDOW]; /* the window item that releases item k's output, or CHUNK_WINDOW */
} item_window;

/* Fill w->last_read: where each window item's output is released (read for the last time). */
static void find_last_reads(const recording *r, item_window *w, int n) {
  for (int k = 0; k < n; k++) {
    int out = r->items.v[w->at[k]].bufs[0];
    w->last_read[k] = CHUNK_WINDOW;
    for (int m = k; m < n && w->last_read[k] == CHUNK_WINDOW; m++) {
      const jitem *j = &r->items.v[w->at[m]];
      for (int q = 0; q < j->nrelease; q++)
        if (j->release[q] == out) w->last_read[k] = m;
    }
  }
}

static int next_items(const recording *r, uop **now, size_t i, item_window *w) {
  int n = 0;
  for (; i < r->items.n && n < CHUNK_WINDOW; i++) {
    const jitem *j = &r->items.v[i];
    if (j->folded) continue;
    for (int s = 0; s < j->nbufs && s < 64; s++) w->bufs[n][s] = now[j->bufs[s]];
    w->it[n] = (sched_item){j->dev, j->ast, w->bufs[n], j->nbufs, j->numel, NULL, 0};
    w->items[n] = &w->it[n], w->progs[n] = j->prog, w->at[n++] = i;
    if (n == 1 && (!j->prog || !j->prog->chunk_per)) break;
  }
  return n;
}

/* The items in order; where a few in a row can, a chunk of images at a time (engine/chunks.c),
 * their releases after the chain's last chunk. */
static int run_items(const recording *r, uop **now) {
  item_window *w = malloc(sizeof *w);
  int rc = w ? 0 : tg_set_error(TG_ERR_NOMEM, "jit: out of memory");
  for (size_t i = 0; i < r->items.n && rc == 0;) {
    int n = next_items(r, now, i, w);
    if (!n) break;
    find_last_reads(r, w, n);
    int len = n >= 2 ? chunk_run_chain(w->items, w->progs, w->last_read, n) : 0;
    if (len == 0) len = 1, rc = engine_run_item(w->items[0], w->progs[0]);
    else if (len < 0) rc = len, len = 1;
    for (int k = 0; k < len; k++)
      for (int q = 0; q < r->items.v[w->at[k]].nrelease; q++) buffer_drop(now[r->items.v[w->at[k]].release[q]]);
    i = w->at[len - 1] + 1;
  }
  free(w);
  return rc;
}

static int replay(tg_jit *j, tg_tensor *const *in, tg_tensor **out) {
  const recording *r = &j->rec[1];
  for (size_t k = 0; k < r->state.n; k++)
    if (r->state.v[k].old >= 0 && !tensor_buffer(r->state.v[k].t) && tg_realize(r->state.v[k].t) < 0) return tg_error_status_or(TG_ERR_ARG);
  size_t mark = uop_pool_mark();
  uop **now = malloc(sizeof(uop *) * (r->bufs.n ? r->bufs.n : 1));
  int rc = now ? 0 : tg_set_error(TG_ERR_NOMEM, "jit: out of memory");
  for (size_t b = 0; b < r->bufs.n && rc == 0; b++)
    if (!(now[b] = buffer_now(r, &r->bufs.v[b], in))) rc = tg_error_status_or(TG_ERR_NOMEM);
  if (rc == 0) rc = run_items(r, now);
  for (size_t b = 0; b < r->bufs.n && now; b++) /* intermediates no item released (a handle held them) */
    if (r->bufs.v[b].cls == B_WRITTEN && !r->bufs.v[b].kept) buffer_drop(r->bufs.v[b].u);
  for (size_t k = 0; k < r->state.n && rc == 0; k++) tensor_set_value(r->state.v[k].t, now[r->state.v[k].now]);
  for (int i = 0; i < r->noutputs && rc == 0; i++)
    if (!(out[i] = tensor_wrap(now[r->outputs[i]]))) rc = tg_error_status_or(TG_ERR_NOMEM);
  free(now);
  uop_pool_release(mark);
  return rc;
}

/* ---------------------------------------------------------------- API */

tg_jit *tg_jit_new(tg_jit_fn fn, void *ctx) {
  if (!fn) return tg_set_error(TG_ERR_ARG, "jit_new: the function is NULL"), NULL;
  tg_jit *j = calloc(1, sizeof *j);
  if (!j) return tg_set_error(TG_ERR_NOMEM, "jit_new: out of memory"), NULL;
  j->fn = fn, j->ctx = ctx;
  return j;
}

void tg_jit_free(tg_jit *j) {
  if (!j) return;
  recording_free(&j->rec[0]), recording_free(&j->rec[1]);
  free(j->sig);
  free(j);
}

bool tg_jit_replaying(const tg_jit *j) { return j && j->ready; }

void jit_fold_constants(tg_jit *j) {
  if (j) j->fold = true;
}

static int first_call(tg_jit *j, tg_tensor *const *in, int nin, tg_tensor **out, int nout) {
  if (!(j->sig = malloc(sizeof *j->sig * (size_t)(nin ? nin : 1)))) return tg_set_error(TG_ERR_NOMEM, "jit: out of memory");
  for (int i = 0; i < nin; i++) sig_of(in[i], &j->sig[i]);
  j->ninputs = nin, j->noutputs = nout;
  return record_call(j, &j->rec[0], in, nin, out, nout);
}

/* Calls 2 and later until the recording settles: record, compare with the previous one. */
enum { SETTLE_CALLS = 4 }; /* the most recorded calls before the work must repeat */

static int record_and_compare(tg_jit *j, tg_tensor *const *in, int nin, tg_tensor **out, int nout) {
  int rc = record_call(j, &j->rec[1], in, nin, out, nout);
  if (rc < 0) return recording_free(&j->rec[1]), rc;
  char why[512];
  int same = compare(&j->rec[0], &j->rec[1], why, sizeof why);
  recording_free(&j->rec[0]);
  if (same == 0) {
    if (j->fold && (rc = fold_constants(&j->rec[1])) < 0) return recording_free(&j->rec[1]), tg_error_status_or(rc);
    if (keep_templates(&j->rec[1]) < 0) return recording_free(&j->rec[1]), tg_set_error(TG_ERR_NOMEM, "jit: out of memory");
    return 1; /* ready to replay */
  }
  j->rec[0] = j->rec[1], j->rec[1] = (recording){0};
  if (same > 0 && j->calls + 1 < SETTLE_CALLS) return 0; /* the first calls may differ: try again */
  snprintf(j->broken, sizeof j->broken, "%s", why);
  return tg_set_error(TG_ERR_ARG, "%s", why);
}

int tg_jit_call(tg_jit *j, tg_tensor *const *in, int nin, tg_tensor **out, int nout) {
  if (!j || (nin && !in) || (nout && !out) || nin < 0 || nout < 0) return tg_set_error(TG_ERR_ARG, "jit_call: NULL or negative argument");
  if (j->broken[0]) return tg_set_error(TG_ERR_ARG, "%s", j->broken);
  for (int i = 0; i < nin; i++)
    if (!in[i]) return tg_set_error(TG_ERR_ARG, "jit: input %d is NULL", i);
  int rc = j->calls ? check_inputs(j, in, nin, nout) : 0;
  if (rc == 0) rc = tg_realize_many((tg_tensor **)in, nin); /* before recording: not part of the function */
  for (int i = 0; i < nin && rc == 0; i++) rc = refuse_sharded(tensor_buffer(in[i]), "input", i);
  if (rc < 0) return rc;
  if (j->ready) rc = replay(j, in, out);
  else if (j->calls == 0) {
    if ((rc = first_call(j, in, nin, out, nout)) < 0) recording_free(&j->rec[0]), free(j->sig), j->sig = NULL;
  } else if ((rc = record_and_compare(j, in, nin, out, nout)) > 0) j->ready = true, rc = 0;
  if (rc == 0) j->calls++;
  return rc;
}
