/* schedule.h — from the tensor graph of everything asked for to an ordered list of items.
 * Nothing runs here: src/engine/ runs the list. See docs/architecture.md ("Fusion policy",
 * "Schedule, then run", "Memory"). */
#ifndef TG_SCHEDULE_H
#define TG_SCHEDULE_H

#include "runtime/helpers.h"
#include "uop/uop.h"

/* One kernel: its AST (SINK(expr over PARAM slots)), the BUFFER of each slot (slot 0 is the
 * output), and the buffers no later item reads that nobody keeps: their memory goes back as
 * soon as this item has run (the memory planner). A copy between devices (tg_to) has no AST:
 * bufs = {destination, source}. */
typedef struct device device;

typedef struct sched_item {
  const device *dev; /* where it runs */
  uop *ast;
  uop **bufs;
  int nbufs;
  int64_t numel; /* output elements: 0 means nothing to run */
  uop **release;
  int nrelease;
} sched_item;

typedef struct schedule {
  VEC(sched_item) items;
  uop **outputs;        /* the BUFFER holding each target */
  int noutputs;
  VEC(uop *) keep;      /* pairs (node, BUFFER): roots whose buffer outlives the run */
  size_t mark;          /* the uop pool mark under every node above */
} schedule;

/* The schedule that computes every target (their buffers are allocated when their kernel
 * runs). 0, or a negative status with the error set; free it either way. */
int schedule_build(uop **targets, int n, schedule *s);
/* Internal (layout.c): *g replaced by g with the layout rewrites chosen for each node's
 * device (dflt for nodes of none), and *order by its nodes in order (sources first; caller
 * frees): their number, or -1 when out of memory. origin gets (new node → old node) for each
 * rewritten node a tensor handle holds, so that its buffer can still become its value. */
int layout_rewrite(uop **g, const device *dflt, ptrmap *origin, uop ***order);
/* Internal (multi.c): the multi-device split. *g, a SINK of targets, becomes the SINK of
 * their values per device: target i is entries [first, first + n) (n shards split on axis, -1
 * for copies of the whole), or the one entry first (n = 0) when it is not sharded. 0, or a
 * negative status with the error set (an op the shards cannot do: docs/devices.md). */
enum { MULTI_MAX = 16 }; /* shards of one tensor */
typedef struct multi_target {
  int first, n, axis;
} multi_target;
int multi_split(uop **g, multi_target *map);
/* tg_shard made a MULTI: from now on schedules run the split (before, it costs nothing). */
void multi_note_made(void);
/* Release what schedule_build made (the pool back to s->mark). */
void schedule_free(schedule *s);
#endif
