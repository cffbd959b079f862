/* engine.h — runs a schedule: for each item, the program (program_get: memory cache, disk
 * cache, or codegen + compile), the memory of its output, the launch; then what the memory
 * planner frees. See docs/architecture.md. */
#ifndef TG_ENGINE_H
#define TG_ENGINE_H

#include "codegen/codegen.h"
#include "schedule/schedule.h"

/* Run every item of s in order; on success the kept roots get their buffers (uop->realized).
 * 0, or a negative status with the error set. */
int engine_run(schedule *s);

/* The JIT (src/tensor/jit.c). While a capture function is set on this thread, engine_run calls
 * it after each item it ran, with the item's program (NULL when it was built inline, or for a
 * copy). engine_run_item runs one item as engine_run does (its output's memory, then the
 * kernel or the copy; p NULL: found or built), without its releases. */
typedef void (*engine_capture_fn)(void *ctx, const sched_item *it, program *p);
void engine_set_capture(engine_capture_fn fn, void *ctx);
int engine_run_item(const sched_item *it, program *p);

/* Chunks (chunks.c): the images of its output's dim 0 (*batch) that item it's program p
 * computes per iteration of its parallel axis, when it can run a part of them (else 0).
 * chunk_run runs images
 * [first, first + count) of it (multiples of that); chunk_chain picks how many of items[0..n)
 * run as one chain and the images per chunk (*chunk): 0 when they run as usual (CHUNKS=0: never).
 * *unaligned: the PARAM slots it reads other than image by image. */
/* At most this many kernels a chain: its buffers all live until its last kernel ran its last
 * chunk (MobileNetV2 at batch 32: chains of 4 kept 15% more memory resident than none, with
 * no limit 57%; chains of 2, 4 and unlimited ran 5%, 8% and 8% faster, performance.md). */
enum { CHUNK_CHAIN_MAX = 4 };
int64_t chunk_images(const sched_item *it, const program *p, int64_t *batch, uint64_t *unaligned);
int chunk_run(const sched_item *it, program *p, int64_t first, int64_t count);
int chunk_chain(const sched_item *const *items, program *const *progs, int n, int64_t *chunk);
#endif
