/* buffer.c — CPU buffers. A BUFFER UOp owns its memory: arg[0] is the address of a
 * struct cpu_buffer, arg[1..] the shape. The memory is freed when the UOp dies. */
#include <stdlib.h>
#include <string.h>

#include "tensor/tensor.h"

typedef struct cpu_buffer {
  void *data;
  size_t nbytes;
} cpu_buffer;

uint64_t tg_buffers_alive, tg_bytes_alive;
static uint64_t buffer_serial;

uop *buffer_new(tg_dtype dt, const int64_t *shape, int nd) {
  int64_t numel = shape_numel(shape, nd);
  size_t nbytes = (size_t)numel * tg_dtype_size(dt);
  size_t alloc = (nbytes + 63) / 64 * 64; /* 64-byte aligned, rounded for aligned_alloc */
  cpu_buffer *b = malloc(sizeof *b);
  void *data = aligned_alloc(64, alloc ? alloc : 64);
  if (!b || !data) {
    free(b), free(data);
    tg_set_error(TG_ERR_NOMEM, "out of memory allocating %zu bytes", nbytes);
    return NULL;
  }
  memset(data, 0, alloc ? alloc : 64);
  b->data = data, b->nbytes = nbytes;
  int64_t arg[TG_MAX_DIMS + 2];
  arg[0] = (int64_t)(intptr_t)b;
  if (nd) memcpy(arg + 1, shape, sizeof(int64_t) * (size_t)nd); /* shape may be NULL for scalars */
  uop *u = uop_new(OP_BUFFER, dt, NULL, 0, arg, nd + 1);
  if (!u) { free(data), free(b); return NULL; }
  tg_buffers_alive++, tg_bytes_alive += nbytes, buffer_serial++;
  return u;
}

void *buffer_data(uop *buf) { return ((cpu_buffer *)(intptr_t)buf->arg[0])->data; }

void buffer_release_hook(uop *u) {
  cpu_buffer *b = (cpu_buffer *)(intptr_t)u->arg[0];
  tg_buffers_alive--, tg_bytes_alive -= b->nbytes;
  free(b->data);
  free(b);
}
