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

static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

typedef struct net {
  tg_conv2d_layer c[4];
  tg_batchnorm2d bn[2];
  tg_linear fc[3];
  tg_state_dict sd;
  bool conv;
} net;

static int net_init(net *n, bool conv) {
  memset(n, 0, sizeof *n);
  n->conv = conv;
  char name[16];
  if (conv) {
    static const int64_t ch[5] = {1, 32, 32, 64, 64};
    for (int i = 0; i < 4; i++) {
      int k = i < 2 ? 5 : 3;
      snprintf(name, sizeof name, "c%d", i);
      if (tg_conv2d_init(&n->c[i], ch[i], ch[i + 1], k, k, 1, 0, 1, 1, true) < 0 ||
          tg_conv2d_state(&n->c[i], name, &n->sd) < 0) return -1;
    }
    for (int i = 0; i < 2; i++) {
      snprintf(name, sizeof name, "bn%d", i);
      if (tg_batchnorm2d_init(&n->bn[i], i ? 64 : 32) < 0 || tg_batchnorm2d_state(&n->bn[i], name, &n->sd) < 0) return -1;
    }
    return tg_linear_init(&n->fc[0], 576, 10, true) < 0 || tg_linear_state(&n->fc[0], "fc", &n->sd) < 0 ? -1 : 0;
  }
  static const int64_t dims[4] = {784, 512, 512, 10};
  for (int i = 0; i < 3; i++) {
    snprintf(name, sizeof name, "fc%d", i);
    if (tg_linear_init(&n->fc[i], dims[i], dims[i + 1], true) < 0 || tg_linear_state(&n->fc[i], name, &n->sd) < 0) return -1;
  }
  return 0;
}

static void net_free(net *n) {
  tg_state_dict_free(&n->sd);
  for (int i = 0; i < 4; i++) tg_conv2d_free(&n->c[i]);
  for (int i = 0; i < 2; i++) tg_batchnorm2d_free(&n->bn[i]);
  for (int i = 0; i < 3; i++) tg_linear_free(&n->fc[i]);
}

static tg_tensor *net_forward(net *n, tg_tensor *x) {
  static const int two[2] = {2, 2};
  if (!n->conv) {
    x = tg_relu(tg_linear_forward(&n->fc[0], tg_flatten(x, 1, -1)));
    x = tg_relu(tg_linear_forward(&n->fc[1], x));
    return tg_linear_forward(&n->fc[2], x);
  }
  for (int b = 0; b < 2; b++) {
    x = tg_relu(tg_conv2d_forward(&n->c[2 * b], x));
    x = tg_relu(tg_conv2d_forward(&n->c[2 * b + 1], x));
    x = tg_max_pool2d(tg_batchnorm2d_forward(&n->bn[b], x), two, NULL, NULL);
  }
  return tg_linear_forward(&n->fc[0], tg_flatten(x, 1, -1));
}

typedef struct step_time { double total, kernels, build, schedule, lower; } step_time;
static step_time first_step;       /* the first step of the last network run */
static uint64_t first_step_kernels; /* kernels it compiled (or loaded from the disk cache) */

static int cmp_total(const void *a, const void *b) {
  return cmp_double(&((const step_time *)a)->total, &((const step_time *)b)->total);
}

/* The median step of tg (ms), total < 0 on error. */
static step_time tg_step(bool conv, int64_t batch, int steps) {
  net n;
  tg_manual_seed(0);
  step_time result = {-1, 0, 0, 0, 0};
  if (net_init(&n, conv) < 0) { net_free(&n); return result; }
  int np;
  tg_tensor **params = tg_state_dict_parameters(&n.sd, &np);
  tg_optimizer *opt = params ? tg_adam(params, np, 1e-3, 0.9, 0.999, 1e-8) : NULL;
  int64_t xs[4] = {batch, 1, 28, 28}, ys[1] = {batch};
  tg_tensor *x = tg_rand(xs, 4, TG_FLOAT32), *y = tg_randint(ys, 1, 0, 10, TG_INT32);
  step_time *times = calloc((size_t)steps + 2, sizeof *times);
  if (opt && x && y && times && tg_realize(x) == 0 && tg_realize(y) == 0) {
    int i;
    for (i = 0; i < steps + 2; i++) {
      tg_scope *s = tg_scope_begin();
      tg_stats a = tg_get_stats();
      double t0 = now();
      tg_tensor *loss = tg_sparse_cross_entropy(net_forward(&n, x), y, 0.0, -1);
      int rc = !loss || tg_backward(loss) < 0 || tg_optimizer_step(opt, &loss, 1) < 0;
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
    if (i == steps + 2) {
      qsort(times + 2, (size_t)steps, sizeof *times, cmp_total);
      result = times[2 + steps / 2];
    }
  }
  if (result.total < 0) fprintf(stderr, "tg: %s\n", tg_last_error());
  free(times);
  tg_free(x), tg_free(y);
  tg_optimizer_free(opt);
  free(params);
  net_free(&n);
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
