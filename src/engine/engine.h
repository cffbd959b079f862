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
/* A kernel item's arguments: its output's memory (allocated now) and every buffer's data;
 * 0 or a negative status (more than 64 buffers). */
int engine_item_args(const sched_item *it, void **args);

/* Chunks (chunks.c, docs/architecture.md "Chunks"): where a chain of kernels starts at
 * items[0] (of n, with their programs), run it a chunk of images at a time, every kernel of
 * it per chunk: the number of items it ran (2 or more; their releases are the caller's, after
 * it), 0 when none starts there (CHUNKS=0: never), or a negative status. last_read[k]: the
 * item that reads item k's output for the last time (n or more: one after them); an output
 * read for the last time inside the chain lives in a scratch block of one chunk instead. At most
 * CHUNK_CHAIN_MAX items a chain: their buffers all live until its last chunk (MobileNetV2 at
 * batch 32: chains of 4 kept 15% more memory resident than none, with no limit 57%; chains of
 * 2, 4 and unlimited ran 5%, 8% and 8% faster, performance.md). */
enum { CHUNK_CHAIN_MAX = 4 };
int chunk_run_chain(const sched_item *const *items, program *const *progs, const int *last_read, int n);
/* Fill p's chunk_ fields from its AST (program_build, once: a replay only compares them). */
void chunk_describe(program *p, uop *ast);
#endif
