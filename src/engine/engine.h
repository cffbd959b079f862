/* engine.h — runs a schedule: for each item, the program (program_get: memory cache, disk
 * cache, or codegen + compile), the memory of its output, the launch; then what the memory
 * planner frees. See docs/architecture.md. */
#ifndef TG_ENGINE_H
#define TG_ENGINE_H

#include "schedule/schedule.h"

/* Run every item of s in order; on success the kept roots get their buffers (uop->realized).
 * 0, or a negative status with the error set. */
int engine_run(schedule *s);
#endif
