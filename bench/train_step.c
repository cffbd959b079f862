/* train_step.c — ms per training step (forward + backward + Adam, one realize) of the demo
 * conv net and of an MLP 784-512-512-10, next to PyTorch running the same network in the same
 * run (bench/train_step_torch.py, torch threads = 2). The step's time outside kernels is split
 * (tg_get_stats) into schedule (fusion, kernel ASTs, buffers), lower (program cache lookups;
 * lowering and rendering when a kernel is new to the process) and build (the rest: the API
 * calls that build forward, backward and optimizer graphs, and autograd).
 *   build/bench_train_step [BATCH] [STEPS] */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <tg.h>

#include "nets.h"

static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

typedef struct step_time { double total, kernels, build, schedule, lower; } step_time;
static step_time first_step;       /* the first step of the last network run */
static uint64_t first_step_kernels; /* kernels it compiled (or loaded from the disk cache) */

static int cmp_total(const void *a, const void *b) {
  return cmp_double(&((const step_time *)a)->total, &((const step_time *)b)->total);
}

/* The median step of tg (ms), total < 0 on error. */
static step_time tg_step(bool conv, int64_t batch, int steps) {
  step_time result = {-1, 0, 0, 0, 0};
  net_run r;
  if (net_run_init(&r, conv, batch) < 0) {
    fprintf(stderr, "tg: %s\n", tg_last_error());
    return result;
  }
  step_time *times = calloc((size_t)steps + 2, sizeof *times);
  int i;
  for (i = 0; times && i < steps + 2; i++) {
    tg_scope *s = tg_scope_begin();
    tg_stats a = tg_get_stats();
    double t0 = now();
    tg_tensor *loss = net_run_loss(&r);
    int rc = !loss || tg_backward(loss) < 0 || tg_optimizer_step(r.opt, &loss, 1) < 0;
    double total = now() - t0;
    tg_stats b = tg_get_stats();
    step_time *t = &times[i];
    t->total = total * 1e3, t->kernels = (b.kernel_seconds - a.kernel_seconds) * 1e3;
    t->schedule = (b.schedule_seconds - a.schedule_seconds) * 1e3, t->lower = (b.lower_seconds - a.lower_seconds) * 1e3;
    t->build = t->total - t->kernels - t->schedule - t->lower - (b.compile_seconds - a.compile_seconds) * 1e3;
    if (i == 0) first_step = *t, first_step_kernels = b.kernels_compiled - a.kernels_compiled;
    tg_scope_end(s);
    if (rc) break;
  }
  if (times && i == steps + 2) {
    qsort(times + 2, (size_t)steps, sizeof *times, cmp_total);
    result = times[2 + steps / 2];
  } else {
    fprintf(stderr, "tg: %s\n", tg_last_error());
  }
  free(times);
  net_run_free(&r);
  return result;
}

static double torch_step_ms(const char *kind, int64_t batch, int steps) {
  char cmd[512];
  snprintf(cmd, sizeof cmd, "/usr/bin/python3 bench/train_step_torch.py %s %lld %d 2>/dev/null", kind,
           (long long)batch, steps);
  FILE *p = popen(cmd, "r");
  double ms = -1;
  if (p) {
    if (fscanf(p, "%lf", &ms) != 1) ms = -1;
    pclose(p);
  }
  return ms;
}

int main(int argc, char **argv) {
  int64_t batch = argc > 1 ? atoll(argv[1]) : 512;
  int steps = argc > 2 ? atoi(argv[2]) : 5;
  printf("training step, batch %lld, median of %d steps (after 2 warmup steps)\n", (long long)batch, steps);
  printf("%-20s %9s %9s %9s %9s %9s %9s %9s\n", "network", "tg ms", "kernels", "build", "schedule", "lower",
         "torch ms", "torch/tg");
  const struct { const char *name, *kind; bool conv; } rows[] = {
      {"conv net (demo)", "conv", true}, {"MLP 784-512-512-10", "mlp", false}};
  step_time lowered[2];
  uint64_t nlowered[2];
  for (int i = 0; i < 2; i++) {
    step_time t = tg_step(rows[i].conv, batch, steps);
    double r = torch_step_ms(rows[i].kind, batch, steps);
    printf("%-20s %9.1f %9.1f %9.2f %9.2f %9.2f %9.1f %9.2f\n", rows[i].name, t.total, t.kernels, t.build, t.schedule,
           t.lower, r, t.total > 0 && r > 0 ? r / t.total : 0.0);
    lowered[i] = first_step;
    nlowered[i] = first_step_kernels;
  }
  printf("\nfirst step in the process (kernels new to it: lowered, then compiled or loaded from the disk cache):\n");
  for (int i = 0; i < 2; i++)
    printf("%-20s %4llu kernels: build %.2f ms, schedule %.2f ms, lower %.2f ms (%.0f us per kernel)\n", rows[i].name,
           (unsigned long long)nlowered[i], lowered[i].build, lowered[i].schedule, lowered[i].lower,
           nlowered[i] ? lowered[i].lower * 1e3 / (double)nlowered[i] : 0.0);
  return 0;
}
