/* overhead.c — what tg costs besides running kernels: building the lazy graph, scheduling
 * it, and lowering its kernels to C, in µs per tensor-graph UOp, for graphs of N elementwise
 * and reduce ops (N = 10, 100, 1000) and for an MLP and a transformer block.
 *
 *   build/bench_overhead [REPEATS [NAME-FILTER]]
 *
 * Method (public API only): each measurement runs in a fresh child process (fork before the
 * parent realizes anything), after a first child has compiled every kernel into the disk
 * cache. In the child:
 *   build     time of the API calls that make the graph;
 *   cold      first realize: schedule + lower + render + load the cached .so + run;
 *   warm      realize of the same graph built again: schedule + in-memory program lookup + run.
 * From tg_get_stats: compile_seconds (here only dlopen of cached objects) and kernel_seconds.
 *   schedule = warm - kernel time;   lower = cold - load - kernel time - schedule.
 * The minimum over REPEATS children is reported.
 *
 * Second table: the demo network's training step (forward, backward, Adam; batch 64), split
 * by stage with tg_get_stats, for the first step in a fresh process (every kernel lowered to
 * source; compiled objects loaded from the disk cache) and for a steady step (programs found
 * in memory).
 *
 * Third table: a loop that realizes (x + full(shape, v)) * x 3000 times with a new v each time
 * (user scalars are kernel arguments: one kernel), next to the same loop with v fixed. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <tg.h>

#include "nets.h"

static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

/* ------------------------------------------------------------ workloads */

/* Inputs are made (and realized) before timing; a workload only builds the graph on them. */
#define MAX_INPUTS 8
typedef struct inputs {
  tg_tensor *t[MAX_INPUTS];
} inputs;
typedef tg_tensor *(*workload_fn)(const inputs *in, int n);

static tg_tensor *input(const int64_t *shape, int nd, double scale) {
  int64_t numel = 1;
  for (int i = 0; i < nd; i++) numel *= shape[i];
  float *d = malloc(sizeof(float) * (size_t)numel);
  if (!d) return NULL;
  for (int64_t i = 0; i < numel; i++) d[i] = (float)(((i * 7919) % 1000) / 1000.0 - 0.5) * (float)scale;
  tg_tensor *t = tg_from_data(d, TG_FLOAT32, shape, nd);
  free(d);
  return t;
}

static void square_input(inputs *in) { in->t[0] = input((int64_t[]){64, 64}, 2, 1.0); }

/* n elementwise ops on a (64, 64) input: one fused kernel. */
static tg_tensor *elementwise_chain(const inputs *in, int n) {
  tg_tensor *x = in->t[0];
  for (int i = 0; i < n; i++) {
    switch (i % 4) {
      case 0: x = tg_mul_s(x, 0.999); break;
      case 1: x = tg_add_s(x, 0.001 * (i % 7)); break;
      case 2: x = tg_relu(x); break;
      default: x = tg_maximum(x, tg_neg(x)); break;
    }
  }
  return x;
}

/* n ops in blocks of 10 ending in x - mean(x, axis 1), each block made contiguous (a reduce
 * kernel and an elementwise kernel per block). The constants differ per block, so every
 * kernel is a different program to lower. */
static tg_tensor *reduce_blocks(const inputs *in, int n) {
  tg_tensor *x = in->t[0];
  const int ax[] = {1};
  for (int i = 0; i < n; i++) {
    if (i % 10 == 9) x = tg_contiguous(tg_sub(x, tg_mean(x, ax, 1, true)));
    else if (i % 2) x = tg_mul_s(x, 1.0 + 1e-4 * i);
    else x = tg_add_s(x, 1e-3 * i);
  }
  return x;
}

/* The same without contiguous: nothing between the reductions is materialized, so every
 * reduce kernel recomputes the chain from the input and reads all earlier reduce results. */
static tg_tensor *reduce_chain(const inputs *in, int n) {
  tg_tensor *x = in->t[0];
  const int ax[] = {1};
  for (int i = 0; i < n; i++) {
    if (i % 10 == 9) x = tg_sub(x, tg_mean(x, ax, 1, true));
    else if (i % 2) x = tg_mul_s(x, 1.0 + 1e-4 * i);
    else x = tg_add_s(x, 1e-3 * i);
  }
  return x;
}

static void mlp_inputs(inputs *in) {
  in->t[0] = input((int64_t[]){64, 784}, 2, 1.0);
  in->t[1] = input((int64_t[]){784, 256}, 2, 0.05), in->t[2] = input((int64_t[]){256}, 1, 0.1);
  in->t[3] = input((int64_t[]){256, 10}, 2, 0.1), in->t[4] = input((int64_t[]){10}, 1, 0.1);
}

/* MLP 784-256-10 on a batch of 64: mean of log_softmax at the labels (one-hot). */
static tg_tensor *mlp(const inputs *in, int n) {
  (void)n;
  tg_tensor *x = in->t[0], *w1 = in->t[1], *b1 = in->t[2], *w2 = in->t[3], *b2 = in->t[4];
  tg_tensor *h = tg_relu(tg_add(tg_matmul(x, w1), b1));
  tg_tensor *logp = tg_log_softmax(tg_add(tg_matmul(h, w2), b2), 1);
  tg_tensor *onehot = tg_one_hot(tg_arange(0, 64, 1, TG_INT32), 10, TG_FLOAT32);
  return tg_neg(tg_mean(tg_mul(logp, onehot), NULL, 0, false));
}

static tg_tensor *layernorm(tg_tensor *x) {
  const int ax[] = {-1};
  tg_tensor *mu = tg_mean(x, ax, 1, true);
  tg_tensor *xc = tg_sub(x, mu);
  tg_tensor *var = tg_mean(tg_mul(xc, xc), ax, 1, true);
  return tg_mul(xc, tg_rsqrt(tg_add_s(var, 1e-5)));
}

enum { T = 64, D = 128, H = 4, HD = 32 };

static void block_inputs(inputs *in) {
  in->t[0] = input((int64_t[]){T, D}, 2, 1.0);
  for (int i = 1; i <= 4; i++) in->t[i] = input((int64_t[]){D, D}, 2, 0.1);
  in->t[5] = input((int64_t[]){D, 4 * D}, 2, 0.1), in->t[6] = input((int64_t[]){4 * D, D}, 2, 0.05);
}

/* One pre-norm transformer block: sequence 64, width 128, 4 heads, MLP 512. */
static tg_tensor *transformer_block(const inputs *in, int n) {
  (void)n;
  tg_tensor *x = in->t[0], *wq = in->t[1], *wk = in->t[2], *wv = in->t[3], *wo = in->t[4];
  tg_tensor *w1 = in->t[5], *w2 = in->t[6];
  tg_tensor *h = layernorm(x);
  const int to_heads[] = {1, 0, 2};
  int64_t split[] = {T, H, HD};
  tg_tensor *q = tg_permute(tg_reshape(tg_matmul(h, wq), split, 3), to_heads, 3); /* (H, T, HD) */
  tg_tensor *k = tg_permute(tg_reshape(tg_matmul(h, wk), split, 3), to_heads, 3);
  tg_tensor *v = tg_permute(tg_reshape(tg_matmul(h, wv), split, 3), to_heads, 3);
  tg_tensor *att = tg_softmax(tg_mul_s(tg_matmul(q, tg_transpose(k, 1, 2)), 1.0 / 5.656854), -1);
  tg_tensor *o = tg_reshape(tg_permute(tg_matmul(att, v), to_heads, 3), (int64_t[]){T, D}, 2);
  x = tg_add(x, tg_matmul(o, wo));
  tg_tensor *m = tg_matmul(tg_gelu(tg_matmul(layernorm(x), w1)), w2);
  return tg_add(x, m);
}

typedef struct workload {
  const char *name;
  void (*setup)(inputs *in);
  workload_fn build;
  int n;
} workload;

static const workload workloads[] = {
    {"elementwise x10", square_input, elementwise_chain, 10},
    {"elementwise x100", square_input, elementwise_chain, 100},
    {"elementwise x1000", square_input, elementwise_chain, 1000},
    {"reduce blocks x10", square_input, reduce_blocks, 10},
    {"reduce blocks x100", square_input, reduce_blocks, 100},
    {"reduce blocks x1000", square_input, reduce_blocks, 1000},
    {"reduce chain x100", square_input, reduce_chain, 100},
    {"mlp 784-256-10", mlp_inputs, mlp, 0},
    {"transformer block", block_inputs, transformer_block, 0},
};
#define NWORK ((int)(sizeof workloads / sizeof workloads[0]))

/* ------------------------------------------------------------ one measurement */

typedef struct sample {
  double build, cold, warm, load, kernels_cold, kernels_warm;
  double uops, kernels;
  int ok;
} sample;

/* Build w, realize it twice (cold, then rebuilt and warm), in the current process. */
static sample measure(const workload *w) {
  sample s = {0};
  inputs in = {{0}};
  w->setup(&in);
  for (int i = 0; i < MAX_INPUTS; i++)
    if (in.t[i]) tg_realize(in.t[i]);
  tg_scope *sc = tg_scope_begin();
  uint64_t alive0 = tg_get_stats().uops_alive;
  double t0 = now();
  tg_tensor *y = w->build(&in, w->n);
  s.build = now() - t0;
  s.uops = (double)(tg_get_stats().uops_alive - alive0);
  tg_reset_stats();
  t0 = now();
  int rc = y ? tg_realize(y) : -1;
  s.cold = now() - t0;
  tg_stats st = tg_get_stats();
  s.load = st.compile_seconds, s.kernels_cold = st.kernel_seconds;
  s.kernels = (double)st.kernels_run;
  tg_scope_end(sc);
  double best = 1e30, best_k = 0;
  for (int r = 0; r < 3 && rc == 0; r++) { /* warm: every program is in memory now */
    sc = tg_scope_begin();
    y = w->build(&in, w->n);
    tg_reset_stats();
    t0 = now();
    rc = y ? tg_realize(y) : -1;
    double t = now() - t0;
    if (t < best) best = t, best_k = tg_get_stats().kernel_seconds;
    tg_scope_end(sc);
  }
  s.warm = best, s.kernels_warm = best_k;
  s.ok = rc == 0;
  for (int i = 0; i < MAX_INPUTS; i++) tg_free(in.t[i]);
  if (!s.ok) fprintf(stderr, "%s: %s\n", w->name, tg_last_error());
  return s;
}

/* Run measure(w) in a child process; false if it failed. */
static bool measure_in_child(const workload *w, sample *out) {
  int fd[2];
  if (pipe(fd) < 0) return false;
  pid_t pid = fork();
  if (pid < 0) return false;
  if (pid == 0) {
    close(fd[0]);
    tg_tensor *warmup = tg_add_s(tg_ones((int64_t[]){4}, 1, TG_FLOAT32), 1); /* one-time setup */
    tg_realize(warmup);
    tg_free(warmup);
    sample s = measure(w);
    ssize_t wr = write(fd[1], &s, sizeof s);
    _exit(wr == (ssize_t)sizeof s ? 0 : 1);
  }
  close(fd[1]);
  ssize_t got = read(fd[0], out, sizeof *out);
  close(fd[0]);
  int status;
  waitpid(pid, &status, 0);
  return got == (ssize_t)sizeof *out && WIFEXITED(status) && WEXITSTATUS(status) == 0 && out->ok;
}

static double min2(double a, double b) { return a < b ? a : b; }

/* ------------------------------------------------------------ the demo training step */

enum { STAGE_FORWARD, STAGE_BACKWARD, STAGE_SCHEDULE, STAGE_LOWER, STAGE_LOAD, STAGE_KERNELS, NSTAGES };
static const char *const stage_names[NSTAGES] = {"build forward graph", "autograd (backward graph)",
                                                 "schedule", "lower (optimize, lower, render)",
                                                 "load compiled kernels", "run kernels"};
typedef struct step_stages {
  double ms[NSTAGES];
  double kernels;
  int ok;
  double peak_mb; /* the most buffer memory in use at once during the step */
} step_stages;

static step_stages train_step_stages(net_run *r) {
  step_stages st = {{0}, 0, 0, 0};
  tg_scope *s = tg_scope_begin();
  tg_reset_stats(); /* the memory peak starts at what is alive before the step */
  double t0 = now();
  tg_tensor *loss = net_run_loss(r);
  double t1 = now();
  int rc = loss ? tg_backward(loss) : -1;
  double t2 = now();
  tg_stats a = tg_get_stats();
  if (rc == 0) rc = tg_optimizer_step(r->opt, &loss, 1);
  tg_stats b = tg_get_stats();
  tg_scope_end(s);
  st.ms[STAGE_FORWARD] = (t1 - t0) * 1e3, st.ms[STAGE_BACKWARD] = (t2 - t1) * 1e3;
  st.ms[STAGE_SCHEDULE] = (b.schedule_seconds - a.schedule_seconds) * 1e3;
  st.ms[STAGE_LOWER] = (b.lower_seconds - a.lower_seconds) * 1e3;
  st.ms[STAGE_LOAD] = (b.compile_seconds - a.compile_seconds) * 1e3;
  st.ms[STAGE_KERNELS] = (b.kernel_seconds - a.kernel_seconds) * 1e3;
  st.kernels = (double)(b.kernels_run - a.kernels_run);
  st.peak_mb = (double)b.bytes_peak / (1 << 20);
  st.ok = rc == 0;
  return st;
}

/* In a child: the first step and the best of three steady steps. */
static bool train_step_in_child(int64_t batch, step_stages out[2]) {
  int fd[2];
  if (pipe(fd) < 0) return false;
  pid_t pid = fork();
  if (pid < 0) return false;
  if (pid == 0) {
    close(fd[0]);
    net_run r;
    step_stages res[2] = {{{0}, 0, 0, 0}, {{0}, 0, 0, 0}};
    if (net_run_init(&r, true, batch) == 0) {
      res[0] = train_step_stages(&r);
      for (int i = 0; i < 3 && res[0].ok; i++) {
        step_stages s = train_step_stages(&r);
        double host = 0, best = 0;
        for (int k = 0; k < STAGE_KERNELS; k++) host += s.ms[k], best += res[1].ms[k];
        if (i == 0 || host < best) res[1] = s;
      }
      net_run_free(&r);
    }
    ssize_t wr = write(fd[1], res, sizeof res);
    _exit(wr == (ssize_t)sizeof res ? 0 : 1);
  }
  close(fd[1]);
  ssize_t got = read(fd[0], out, 2 * sizeof *out);
  close(fd[0]);
  int status;
  waitpid(pid, &status, 0);
  return got == (ssize_t)(2 * sizeof *out) && WIFEXITED(status) && out[0].ok && out[1].ok;
}

static void train_step_table(int64_t batch) {
  step_stages warmup[2], s[2];
  printf("\ndemo network training step (batch %lld): ms per stage\n\n", (long long)batch);
  if (!train_step_in_child(batch, warmup) || !train_step_in_child(batch, s)) { /* the first fills the disk cache */
    printf("failed: %s\n", tg_last_error());
    return;
  }
  printf("%-32s %14s %14s\n", "stage", "first step", "steady step");
  double host[2] = {0, 0};
  for (int k = 0; k < NSTAGES; k++) {
    printf("%-32s %14.2f %14.2f\n", stage_names[k], s[0].ms[k], s[1].ms[k]);
    if (k != STAGE_LOAD && k != STAGE_KERNELS) host[0] += s[0].ms[k], host[1] += s[1].ms[k];
  }
  printf("%-32s %14.2f %14.2f\n", "build + schedule + lower", host[0], host[1]);
  printf("%-32s %14.1f %14.1f\n", "peak buffer memory (MB)", s[0].peak_mb, s[1].peak_mb);
  printf("(%.0f kernels per step; the first step lowers every kernel, a steady step finds them in memory)\n",
         s[1].kernels);
}

/* ------------------------------------------------- a scalar that changes every iteration */

/* ms for `iters` realizes of (x + full(shape, v)) * x, with v = i (changing) or v = 1 (fixed),
 * and the kernels compiled meanwhile; in a fresh child so nothing is in the program cache. */
static bool scalar_loop_in_child(bool changing, int iters, double out[2]) {
  int fd[2];
  if (pipe(fd) < 0) return false;
  pid_t pid = fork();
  if (pid == 0) {
    close(fd[0]);
    const int64_t shape[2] = {64, 64};
    tg_tensor *x = input(shape, 2, 1.0);
    tg_realize(x);
    tg_reset_stats();
    double t0 = now(), r[2];
    for (int i = 0; i < iters; i++) {
      tg_scope *s = tg_scope_begin();
      tg_realize(tg_mul(tg_add(x, tg_full(shape, 2, changing ? i : 1, TG_FLOAT32)), x));
      tg_scope_end(s);
    }
    r[0] = (now() - t0) * 1e3, r[1] = (double)tg_get_stats().kernels_compiled;
    ssize_t w = write(fd[1], r, sizeof r);
    _exit(w == (ssize_t)sizeof r ? 0 : 1);
  }
  close(fd[1]);
  ssize_t got = read(fd[0], out, 2 * sizeof *out);
  close(fd[0]);
  int status;
  waitpid(pid, &status, 0);
  return got == (ssize_t)(2 * sizeof *out) && WIFEXITED(status) && WEXITSTATUS(status) == 0;
}

static void scalar_loop_table(int repeats) {
  enum { ITERS = 3000 };
  printf("\n(x + full((64, 64), v)) * x realized %d times in a fresh process (min of %d)\n\n", ITERS, repeats);
  printf("%-24s %10s %10s %12s\n", "v", "total ms", "µs/iter", "compiled");
  const char *names[2] = {"1 every time (reference)", "i = 0, 1, ..., 2999"};
  for (int changing = 0; changing < 2; changing++) {
    double best[2] = {1e30, 0}, r[2];
    for (int k = 0; k < repeats; k++)
      if (scalar_loop_in_child(changing, ITERS, r) && r[0] < best[0]) best[0] = r[0], best[1] = r[1];
    printf("%-24s %10.1f %10.1f %12.0f\n", names[changing], best[0], best[0] * 1e3 / ITERS, best[1]);
  }
}

int main(int argc, char **argv) {
  int repeats = argc > 1 ? atoi(argv[1]) : 3;
  const char *filter = argc > 2 ? argv[2] : NULL;
  if (repeats < 1) repeats = 1;
  printf("tg overhead per tensor-graph UOp (µs/UOp; min of %d fresh processes, kernels cached on disk)\n\n", repeats);
  printf("%-20s %6s %7s %9s %9s %9s %9s %11s %11s\n", "graph", "UOps", "kernels", "build", "schedule",
         "lower", "total", "cold ms", "warm ms");
  for (int i = 0; i < NWORK; i++) {
    const workload *w = &workloads[i];
    if (filter && !strstr(w->name, filter)) continue;
    sample first, best = {0};
    if (!measure_in_child(w, &first)) { /* compiles into the disk cache */
      printf("%-20s failed\n", w->name);
      continue;
    }
    bool ok = true;
    for (int r = 0; r < repeats && ok; r++) {
      sample s;
      ok = measure_in_child(w, &s);
      if (!ok) break;
      if (r == 0) { best = s; continue; }
      best.build = min2(best.build, s.build), best.cold = min2(best.cold, s.cold), best.warm = min2(best.warm, s.warm);
      best.load = min2(best.load, s.load), best.kernels_cold = min2(best.kernels_cold, s.kernels_cold);
      best.kernels_warm = min2(best.kernels_warm, s.kernels_warm);
    }
    if (!ok) {
      printf("%-20s failed\n", w->name);
      continue;
    }
    double per = 1e6 / best.uops;
    double schedule = best.warm - best.kernels_warm;
    double lower = best.cold - best.load - best.kernels_cold - schedule;
    printf("%-20s %6.0f %7.0f %9.2f %9.2f %9.2f %9.2f %11.2f %11.2f\n", w->name, best.uops, best.kernels,
           best.build * per, schedule * per, lower * per, (best.build + schedule + lower) * per, best.cold * 1e3,
           best.warm * 1e3);
    fflush(stdout);
  }
  printf("\nbuild: API calls; schedule: warm realize minus kernel time; lower: lowering + rendering of\n"
         "the kernels not yet in the in-memory program cache (cold realize minus loading the cached\n"
         ".so, kernel time and scheduling). cold/warm ms: wall time of the first/second realize.\n");
  if (!filter || strstr("demo train step", filter)) train_step_table(64);
  if (!filter || strstr("scalar loop", filter)) scalar_loop_table(repeats);
  return 0;
}
