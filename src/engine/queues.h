/* queues.h — running a schedule whose items are on several devices: one thread per device,
 * each running its items in order after the items they read from (queues.c). */
#ifndef TG_QUEUES_H
#define TG_QUEUES_H

#include "codegen/codegen.h"
#include "schedule/schedule.h"

/* How many devices s's items run on: 0 (no items), 1, or 2 for several. */
int queues_devices(const schedule *s);
/* Run item it with its program (NULL: built on the spot): the engine's run_kernel. */
typedef int (*item_runner)(const sched_item *it, program *p);
/* Run every item of s on its device's thread (progs[i]: item i's program or NULL), the
 * memory planner's releases in schedule order once safe. 0, or the first failure's status with
 * its error set in the calling thread; the device threads' work counters are added to it. */
int queues_run(schedule *s, program **progs, item_runner run);
#endif
