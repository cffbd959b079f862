/* train_step.c — ms per training step (forward + backward + Adam, one realize) of the demo
 * conv net and of an MLP 784-512-512-10, next to PyTorch running the same network in the same
 * run (bench/train_step_torch.py, torch threads = 2), then the same steps replayed by tg_jit. The step's time outside kernels is split
 * (tg_get_stats) into schedule (fusion, kernel ASTs, buffers), lower (program cache lookups;
 * lowering and rendering when a kernel is new to the process) and build (the rest: the API
 * calls that build forward, backward and optimizer graphs, and autograd).
 *
 * `--processes P` runs the demo conv net's step in P fresh processes (processes.h): each
 * one's median step, the cores its steps kept busy (CPU time / wall time) and the other
 * processes' share of the machine; PASS when every process is within 15% of the median.
 * Last, the cold start (cold.h): the first step of a fresh process, empty cache and warm.
 * PYTHON names the python with PyTorch (default /usr/bin/python3); under DEV=CUDA it runs on the GPU.
 *   build/bench_train_step [BATCH] [STEPS]
 *   build/bench_train_step --processes P [BATCH [STEPS]]   (default P = 10, batch 512, 5 steps) */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <tg.h>

#include "nets.h"
#include "processes.h"
#include "cold.h"

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
static cpu_sample timed_cpu[2];     /* around the timed steps (after the warm-up) of the last run */
static double timed_wall[2];
static uint64_t first_step_kernels; /* kernels it compiled (or loaded from the disk cache) */

static int cmp_total(const void *a, const void *b) {
  return cmp_double(&((const step_time *)a)->total, &((const step_time *)b)->total);
}

/* The median step of tg (ms), total < 0 on error; with jit, steps through a tg_jit (its first
 * calls record, so 4 warm-up steps). */
static step_time tg_step(bool conv, int64_t batch, int steps, bool jit) {
  step_time result = {-1, 0, 0, 0, 0};
  net_run r;
  if (net_run_init(&r, conv, batch) < 0) {
    fprintf(stderr, "tg: %s\n", tg_last_error());
    return result;
  }
  int warm = jit ? 4 : 2;
  step_time *times = calloc((size_t)(steps + warm), sizeof *times);
  tg_jit *j = jit ? tg_jit_new(net_run_step, &r) : NULL;
  tg_tensor *batch_xy[2] = {r.x, r.y};
  int i;
  for (i = 0; times && i < steps + warm; i++) {
    if (i == warm) timed_cpu[0] = cpu_sample_now(), timed_wall[0] = now();
    tg_scope *s = tg_scope_begin();
    tg_stats a = tg_get_stats();
    double t0 = now();
    tg_tensor *loss;
    int rc = (j ? tg_jit_call(j, batch_xy, 2, &loss, 1) : net_run_step(&r, batch_xy, 2, &loss, 1)) < 0;
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
  timed_cpu[1] = cpu_sample_now(), timed_wall[1] = now();
  if (times && i == steps + warm) {
    qsort(times + warm, (size_t)steps, sizeof *times, cmp_total);
    result = times[warm + steps / 2];
  } else {
    fprintf(stderr, "tg: %s\n", tg_last_error());
  }
  free(times);
  tg_jit_free(j);
  net_run_free(&r);
  return result;
}

static double torch_step_ms(const char *kind, int64_t batch, int steps) {
  char cmd[512];
  const char *py = getenv("PYTHON"), *dev = getenv("DEV");
  bool cuda = dev && !strncasecmp(dev, "CUDA", 4); /* then PyTorch runs on the same GPU */
  snprintf(cmd, sizeof cmd, "TORCH_DEVICE=%s %s bench/train_step_torch.py %s %lld %d 2>/dev/null", cuda ? "cuda" : "cpu",
           py && *py ? py : "/usr/bin/python3", kind, (long long)batch, steps);
  FILE *p = popen(cmd, "r");
  double ms = -1;
  if (p) {
    if (fscanf(p, "%lf", &ms) != 1) ms = -1;
    pclose(p);
  }
  return ms;
}

/* One process of --processes: "RESULT step-ms kernel-ms cores others-percent" of the demo net. */
static int child(int64_t batch, int steps) {
  step_time t = tg_step(true, batch, steps, false);
  if (t.total < 0) return 1;
  printf("RESULT %.2f %.2f %.2f %.1f\n", t.total, t.kernels,
         (timed_cpu[1].self - timed_cpu[0].self) / (timed_wall[1] - timed_wall[0]),
         others_percent(timed_cpu[0], timed_cpu[1]));
  return 0;
}

/* --processes: P fresh processes of child(), a row each, then the spread over them. */
static int processes(const char *self, int count, int64_t batch, int steps) {
  double v[PROC_MAX][PROC_MAX_VALUES], col[PROC_MAX];
  char b[32], st[32], *args[] = {(char *)self, "--child", b, st, NULL};
  snprintf(b, sizeof b, "%lld", (long long)batch), snprintf(st, sizeof st, "%d", steps);
  printf("demo conv net training step, batch %lld, median of %d steps, %d fresh processes\n", (long long)batch, steps,
         count);
  printf("%7s %10s %10s %9s %9s\n", "process", "step ms", "kernels", "cores", "others %");
  int done = 0;
  for (int p = 0; p < count; p++) {
    if (run_child(args, v[done]) != 4) { fprintf(stderr, "process %d failed\n", p + 1); continue; }
    double *r = v[done++];
    printf("%7d %10.1f %10.1f %9.2f %9.1f\n", p + 1, r[0], r[1], r[2], r[3]);
  }
  if (done == 0) return 1;
  for (int p = 0; p < done; p++) col[p] = v[p][0];
  double dev = print_spread("step", "ms", col, done);
  for (int p = 0; p < done; p++) col[p] = v[p][1];
  print_spread("kernels", "ms", col, done);
  bool pass = done == count && dev <= 15;
  printf("%s: every process's step within 15%% of the median over processes (max deviation %.1f%%)\n",
         pass ? "PASS" : "FAIL", dev);
  return pass ? 0 : 1;
}

int main(int argc, char **argv) {
  if (argc > 3 && !strcmp(argv[1], "--cold")) return cold_child(argv[2], atoll(argv[3]));
  if (argc > 1 && (!strcmp(argv[1], "--child") || !strcmp(argv[1], "--processes"))) {
    bool is_child = !strcmp(argv[1], "--child");
    int at = is_child ? 2 : 3, count = !is_child && argc > 2 ? atoi(argv[2]) : 10;
    int64_t batch = argc > at ? atoll(argv[at]) : 512;
    int steps = argc > at + 1 ? atoi(argv[at + 1]) : 5;
    if (count < 1 || count > PROC_MAX || batch < 1 || steps < 1)
      return fprintf(stderr, "usage: bench_train_step --processes P [BATCH [STEPS]]   (1 <= P <= %d)\n", PROC_MAX), 2;
    return is_child ? child(batch, steps) : processes(argv[0], count, batch, steps);
  }
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
    step_time t = tg_step(rows[i].conv, batch, steps, false);
    double r = torch_step_ms(rows[i].kind, batch, steps);
    printf("%-20s %9.1f %9.1f %9.2f %9.2f %9.2f %9.1f %9.2f\n", rows[i].name, t.total, t.kernels, t.build, t.schedule,
           t.lower, r, t.total > 0 && r > 0 ? r / t.total : 0.0);
    lowered[i] = first_step;
    nlowered[i] = first_step_kernels;
  }
  printf("\nthe same steps through tg_jit (replayed: no build, schedule or lowering; host = step - kernels):\n");
  printf("%-20s %9s %9s %9s\n", "network", "tg ms", "kernels", "host ms");
  for (int i = 0; i < 2; i++) {
    step_time t = tg_step(rows[i].conv, batch, steps, true);
    printf("%-20s %9.1f %9.1f %9.3f\n", rows[i].name, t.total, t.kernels, t.total - t.kernels);
  }
  printf("\nfirst step in the process (kernels new to it: lowered, then compiled or loaded from the disk cache):\n");
  for (int i = 0; i < 2; i++)
    printf("%-20s %4llu kernels: build %.2f ms, schedule %.2f ms, lower %.2f ms (%.0f us per kernel)\n", rows[i].name,
           (unsigned long long)nlowered[i], lowered[i].build, lowered[i].schedule, lowered[i].lower,
           nlowered[i] ? lowered[i].lower * 1e3 / (double)nlowered[i] : 0.0);
  printf("\ncold start of the demo step: a fresh process initializes the net and runs its first step, with an\n"
         "empty kernel cache, then with the cache that run filled (the steady step is the table's first row):\n");
  cold_header();
  const char *devs[2] = {"LLVM", "CPU"};
  for (int d = 0; d < 2; d++)
    if (tg_device_available(devs[d])) cold_start(argv[0], devs[d], batch);
  return 0;
}
