/* compile.c — compile time per kernel on the demo's training step (the conv net of
 * examples/mnist.c, forward + backward + Adam), CPU device (C, the system compiler) against
 * the LLVM device (LLVM IR compiled in process), each from an empty disk cache.
 *
 * The step runs once with the codegen test hook set, which records every kernel's AST and its
 * optimizations (the CPU's heuristics: both devices get the same kernels). Then each
 * measurement runs in a forked child with a fresh TG_CACHE_DIR and empty in-memory caches:
 * program_build (lower, render, compile, load) of every kernel, one after another, then on
 * THREADS threads at once (what a parallel build of a schedule can reach). Prints a table of
 * ms per kernel (wall, and CPU: the building thread's plus its compiler processes', which a
 * busy machine inflates less) and the totals. Last, the cold start of each device: a fresh
 * process with an empty cache initializes the net and runs its first training step.
 *   build/bench_compile [BATCH]   (default 512, the demo's) */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <tg.h>

#include "codegen/codegen.h"
#include "device/device.h"
#include "nets.h"
#include "cold.h"
#include "runtime/helpers.h"
#include "runtime/threadpool.h"

#define MAX_KERNELS 512

/* The recorded kernels: AST (a reference kept) and shape state. */
static struct {
  uop *ast[MAX_KERNELS];
  kshape ks[MAX_KERNELS];
  int n;
} K;

static int record(uop *ast, kshape *ks, void *ctx) {
  const device *cpu = ctx;
  kshape_optimize(ks, ast, &cpu->caps);
  for (int i = 0; i < K.n; i++)
    if (K.ast[i] == ast && !memcmp(&K.ks[i], ks, sizeof *ks)) return 0; /* built twice in the step */
  if (K.n == MAX_KERNELS) return 0;
  uop_incref(ast);
  K.ast[K.n] = ast, K.ks[K.n++] = *ks;
  return 0;
}

/* One training step of the demo net with the hook recording its kernels. */
static int collect(int64_t batch) {
  const device *cpu = device_get("CPU");
  net_run r;
  if (!cpu || net_run_init(&r, true, batch) < 0) return -1;
  program_set_opt_hook(record, (void *)cpu);
  tg_scope *s = tg_scope_begin();
  tg_tensor *loss = net_run_loss(&r);
  int rc = !loss || tg_backward(loss) < 0 || tg_optimizer_step(r.opt, &loss, 1) < 0 ? -1 : 0;
  tg_scope_end(s);
  program_set_opt_hook(NULL, NULL); /* frees what the hook built: nothing stays cached */
  net_run_free(&r);
  return rc;
}

/* ---------------------------------------------------------------- a measurement (child) */

typedef struct result {
  double open_ms, wall_ms;       /* opening the device; all kernels */
  double ms[MAX_KERNELS];        /* per kernel (one thread only) */
  double cpu_ms[MAX_KERNELS];    /* its CPU time: this thread's and the compiler processes' */
  char names[MAX_KERNELS][96];
  int failed;
} result;

static struct {
  const device *dev;
  _Atomic int next;
  result *res;
} job;

/* CPU seconds of this thread plus those of waited-for child processes (cc). */
static double cpu_seconds(void) {
  struct timespec t;
  struct rusage c;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  getrusage(RUSAGE_CHILDREN, &c);
  return (double)t.tv_sec + (double)t.tv_nsec * 1e-9 + (double)(c.ru_utime.tv_sec + c.ru_stime.tv_sec) +
         (double)(c.ru_utime.tv_usec + c.ru_stime.tv_usec) * 1e-6;
}

static void *build_some(void *arg) {
  (void)arg;
  for (int i; (i = atomic_fetch_add(&job.next, 1)) < K.n;) {
    double t0 = tg_now(), c0 = cpu_seconds();
    program *p = program_build(job.dev, K.ast[i], &K.ks[i]);
    job.res->ms[i] = (tg_now() - t0) * 1e3, job.res->cpu_ms[i] = (cpu_seconds() - c0) * 1e3;
    if (!p) { job.res->failed++; fprintf(stderr, "%s: %s\n", job.dev->name, tg_last_error()); continue; }
    snprintf(job.res->names[i], sizeof job.res->names[i], "%s", p->info.name);
  }
  return NULL;
}

static void measure(const char *dev_name, int threads, result *res) {
  char dir[64] = "/tmp/tg-bench-compile-XXXXXX";
  if (!mkdtemp(dir)) { res->failed = -1; return; }
  setenv("TG_CACHE_DIR", dir, 1);
  double t0 = tg_now();
  job.dev = device_get(dev_name);
  res->open_ms = (tg_now() - t0) * 1e3;
  if (!job.dev) { fprintf(stderr, "%s\n", tg_last_error()), res->failed = -2; return; } /* not available here */
  job.res = res;
  pthread_t th[16];
  t0 = tg_now();
  for (int t = 1; t < threads; t++) pthread_create(&th[t], NULL, build_some, NULL);
  build_some(NULL);
  for (int t = 1; t < threads; t++) pthread_join(th[t], NULL);
  res->wall_ms = (tg_now() - t0) * 1e3;
  char cmd[128];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
  if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", dir);
}

/* Run a measurement in a fresh child (empty program caches, nothing of LLVM loaded yet). */
static int run_measurement(const char *dev, int threads, result *out) {
  int fd[2];
  if (pipe(fd) < 0) return -1;
  fflush(stdout), fflush(stderr);
  pid_t pid = fork();
  if (pid == 0) {
    close(fd[0]);
    result *r = calloc(1, sizeof *r);
    if (r) measure(dev, threads, r);
    ssize_t w = r ? write(fd[1], r, sizeof *r) : -1;
    _exit(w == (ssize_t)sizeof *r ? 0 : 1);
  }
  close(fd[1]);
  size_t got = 0;
  for (ssize_t k; got < sizeof *out && (k = read(fd[0], (char *)out + got, sizeof *out - got)) > 0;) got += (size_t)k;
  close(fd[0]);
  int status = 0;
  waitpid(pid, &status, 0);
  return got == sizeof *out && status == 0 ? (out->failed ? (out->failed == -2 ? -2 : -1) : 0) : -1;
}

/* ---------------------------------------------------------------- report */

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

static double median(const double *v, int n) {
  double *s = malloc(sizeof *s * (size_t)n);
  if (!s || !n) { free(s); return 0; }
  memcpy(s, v, sizeof *s * (size_t)n);
  qsort(s, (size_t)n, sizeof *s, cmp_double);
  double m = s[n / 2];
  free(s);
  return m;
}

static double sum(const double *v, int n) {
  double t = 0;
  for (int i = 0; i < n; i++) t += v[i];
  return t;
}

int main(int argc, char **argv) {
  if (argc > 3 && !strcmp(argv[1], "--cold")) return cold_child(argv[2], atoll(argv[3]));
  int64_t batch = argc > 1 ? atoll(argv[1]) : 512;
  int threads = threadpool_size() < 16 ? threadpool_size() : 16;
  if (collect(batch) < 0) { fprintf(stderr, "collecting the step's kernels: %s\n", tg_last_error()); return 1; }
  printf("demo training step, batch %lld: %d kernels; program_build each (lower, render, compile, load), empty caches\n",
         (long long)batch, K.n);
  static result serial[2], parallel[2];
  const char *devs[2] = {"CPU", "LLVM"};
  for (int d = 0; d < 2; d++) {
    int rc = run_measurement(devs[d], 1, &serial[d]);
    if (rc == 0 && threads > 1) rc = run_measurement(devs[d], threads, &parallel[d]);
    if (rc == -2) { printf("no %s device here\n", devs[d]); return 0; }
    if (rc < 0) { fprintf(stderr, "DEV=%s: a measurement failed\n", devs[d]); return 1; }
  }
  printf("\n%-32s %9s %9s %8s %9s %9s %8s\n", "kernel", "cc ms", "LLVM ms", "cc/LLVM", "cc cpu", "LLVM cpu", "cc/LLVM");
  const result *c = &serial[0], *l = &serial[1];
  for (int i = 0; i < K.n; i++)
    printf("%-32s %9.1f %9.1f %8.1f %9.1f %9.1f %8.1f\n", c->names[i], c->ms[i], l->ms[i], c->ms[i] / l->ms[i], c->cpu_ms[i],
           l->cpu_ms[i], c->cpu_ms[i] / l->cpu_ms[i]);
  double tc = sum(c->ms, K.n), tl = sum(l->ms, K.n), cc = sum(c->cpu_ms, K.n), cl = sum(l->cpu_ms, K.n);
  printf("%-32s %9.1f %9.1f %8.1f %9.1f %9.1f %8.1f\n", "total, one thread", tc, tl, tc / tl, cc, cl, cc / cl);
  double mc = median(c->ms, K.n), ml = median(l->ms, K.n), mcc = median(c->cpu_ms, K.n), mcl = median(l->cpu_ms, K.n);
  printf("%-32s %9.1f %9.1f %8.1f %9.1f %9.1f %8.1f\n", "median kernel", mc, ml, mc / ml, mcc, mcl, mcc / mcl);
  if (threads > 1)
    printf("%-32s %9.1f %9.1f %8.1f\n", threads == 2 ? "all kernels, 2 threads (wall)" : "all kernels, threads (wall)",
           parallel[0].wall_ms, parallel[1].wall_ms, parallel[0].wall_ms / parallel[1].wall_ms);
  printf("opening the device: CPU %.1f ms, LLVM %.1f ms (dlopen libLLVM-14, target, JIT)\n", serial[0].open_ms, serial[1].open_ms);
  printf("\ncold start: a fresh process, empty cache; the net's initialization, then its first training step\n");
  cold_header();
  for (int d = 0; d < 2; d++) cold_start(argv[0], devs[d], batch);
  for (int i = 0; i < K.n; i++) uop_decref(K.ast[i]);
  return 0;
}
