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

/* Chunks (chunks.c, docs/architecture.md "Chunks"; engine_run and JIT replays call it):
 * where a chain of kernels starts at items[0] (of n, with their programs), run it group of
 * images by group, each thread every kernel of it on its group: the number of items it ran
 * (2 or more; their releases are the caller's, after it), 0 when none starts there
 * (CHUNKS=0: never), or a negative status. n is at most CHUNK_WINDOW: the items past a
 * chain's longest tell where its outputs are read.
 * last_read[k]: the item that reads item k's output for the last time (n or more: one after
 * them); an output read for the last time inside the chain lives in a scratch block of one
 * group per thread instead. At most CHUNK_CHAIN_MAX items a chain (MobileNetV2 at batch 32:
 * chains of 4 and 8 ran alike, 2 and 16 slower, performance.md). */
enum { CHUNK_CHAIN_MAX = 4, CHUNK_WINDOW = 8 };
int chunk_run_chain(const sched_item *const *items, program *const *progs, const int *last_read, int n);
/* Fill p's chunk_ fields from its AST (program_build, once: a replay only compares them). */
void chunk_describe(program *p, uop *ast);
#endif
