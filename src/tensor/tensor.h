/* tensor.h — internals of the tensor frontend shared by its files. */
#ifndef TG_TENSOR_H
#define TG_TENSOR_H

#include "runtime/helpers.h"
#include "uop/dtype.h"
#include "uop/uop.h"

struct tg_tensor {
  uop *u;             /* the lazy value (strong reference) */
  int refcnt;         /* handle references */
  tg_scope *scope;    /* owning scope, NULL if owned by the user */
  size_t slot;        /* index in the scope's list */
  tg_tensor *grad;    /* gradient filled by tg_backward */
  bool requires_grad; /* marked parameter */
  const void *pending; /* assigned a lazy value not realized yet: the thread that did (tensor.c) */
};

#define TG_MAX_DIMS 64

/* A new handle for u in the current scope (u gets a reference). NULL u → NULL. */
tg_tensor *tensor_wrap(uop *u);
/* Make u the value of t (u gets a reference and a handle count, the old value loses them);
 * the one way a handle's node changes. NULL u clears it. */
void tensor_set_value(tg_tensor *t, uop *u);
/* Record "op: NULL argument" unless an earlier error is pending; returns NULL. */
tg_tensor *null_arg(const char *op);
/* Error with a message; returns NULL. */
tg_tensor *tensor_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* t is about to be assigned: a JIT recording on this thread notes its buffer before (jit.c). */
void jit_note_assign(tg_tensor *t);
/* Whether a tg_jit is recording on this thread (a JIT inside it would take its capture). */
bool jit_recording(void);
/* Promise that the external buffers j's function reads (made before a call: a model's own
 * weights) never change: what only they feed is computed once when the recording is kept and
 * skipped by replays (jit.c, fold_constants). Before the first call. */
void jit_fold_constants(tg_jit *j);
/* Drop a dying marked tensor from the parameter registry (src/grad/gradient.c). */
void grad_forget(tg_tensor *t);

/* Graph building on uops (results belong to the uop pool). */
uop *ushape_reshape(uop *x, const int64_t *shape, int nd);
uop *ushape_expand(uop *x, const int64_t *shape, int nd);
uop *ucast(uop *x, tg_dtype dt);
uop *uconst_like(uop *x, double v, tg_dtype dt); /* a constant broadcast to x's shape */
uop *ureduce(uop *x, uop_op op, const int *axes, int naxes); /* keepdim, normalized axes */

/* Compute every root (schedule, then run: src/engine/engine.h); on success out[i] is a new
 * reference to the BUFFER holding roots[i]. */
int engine_realize(uop **roots, int n, uop **out);
/* A buffer on the default device as a BUFFER uop of the given shape (contents zeroed on host
 * devices). */
uop *buffer_new(tg_dtype dt, const int64_t *shape, int nd);
/* The same without memory yet (the engine allocates it when the kernel that writes it runs). */
uop *buffer_new_lazy(tg_dtype dt, const int64_t *shape, int nd);
/* Give a buffer its memory (0, or TG_ERR_NOMEM); give it back (to the free-block cache). */
int buffer_alloc(uop *buf);
void buffer_drop(uop *buf);
/* The memory of a buffer (NULL while it has none): host memory, or on a device with its own
 * memory (device_is_gpu) that device's handle, to pass to kernels only. */
void *buffer_data(uop *buf);
/* Copies between a buffer and host memory (the buffer gets memory first when it has none),
 * and between two buffers of any devices: 0 or a negative status. */
int buffer_copy_in(uop *buf, const void *src, size_t bytes);
int buffer_copy_out(uop *buf, void *dst, size_t bytes);
int buffer_copy(uop *dst, uop *src, size_t bytes);
/* A sharded value (a MULTI of buffers: shard.c) gathered into host memory dst; the devices
 * of a sharded node ("CPU:0,CPU:1", a thread's buffer). */
int multi_copy_out(uop *m, void *dst);
const char *multi_device_names(const uop *u);
/* tg_full_like of a sharded t: the constant copied whole to each of t's devices. */
tg_tensor *multi_full_like(tg_tensor *t, double value);
/* The BUFFER holding t's value (its node, or the buffer that node was realized into; a MULTI
 * of buffers when it is sharded), or NULL while t is unrealized. */
uop *tensor_buffer(const tg_tensor *t);
#endif
