/* run.c — the engine: realize = schedule, then run the items (engine.h). */
#include "engine/engine.h"

#include "codegen/codegen.h"
#include "tensor/tensor.h"

static int run_kernel(const sched_item *it) {
  int rc = buffer_alloc(it->bufs[0]); /* the output's memory, now that it is needed (an empty one too: its slack) */
  if (rc || it->numel == 0) return rc;
  void *args[64];
  if (it->nbufs > 64) return tg_set_error(TG_ERR_DEVICE, "kernel has %d buffers (max 64)", it->nbufs);
  double t0 = tg_now(), compile0 = tg_thread_stats.compile_seconds;
  program *p = program_get(it->dev, it->ast);
  tg_thread_stats.lower_seconds += tg_now() - t0 - (tg_thread_stats.compile_seconds - compile0);
  if (!p) return TG_ERR_COMPILE;
  for (int i = 0; i < it->nbufs; i++) args[i] = buffer_data(it->bufs[i]);
  return program_run(p, args);
}

int engine_run(schedule *s) {
  int rc = 0;
  for (size_t i = 0; i < s->items.n && rc == 0; i++) {
    const sched_item *it = &s->items.v[i];
    rc = run_kernel(it);
    for (int j = 0; j < it->nrelease; j++) buffer_drop(it->release[j]);
  }
  for (size_t i = 0; i + 1 < s->keep.n && rc == 0; i += 2) uop_set_realized(s->keep.v[i], s->keep.v[i + 1]);
  return rc;
}

int engine_realize(uop **targets, int n, uop **out) {
  tg_stats before = tg_thread_stats;
  double t0 = tg_now();
  schedule s;
  int rc = schedule_build(targets, n, &s);
  tg_thread_stats.schedules += rc == 0;
  if (rc == 0) rc = engine_run(&s);
  for (int i = 0; i < n && rc == 0; i++) uop_incref(out[i] = s.outputs[i]);
  schedule_free(&s);
  tg_thread_stats.schedule_seconds += tg_now() - t0 - (tg_thread_stats.kernel_seconds - before.kernel_seconds) -
                                      (tg_thread_stats.compile_seconds - before.compile_seconds) -
                                      (tg_thread_stats.lower_seconds - before.lower_seconds);
  return rc;
}
