/* processes.h — the spread of a bench's speed over fresh processes (`--processes P`).
 *
 * Some effects are fixed for the life of a process (where its threads land, which pages it
 * got), so a best-of-many inside one process hides them. The parent runs its own binary again
 * P times with `--child`; each child prints one line "RESULT v0 v1 ..." and the parent prints
 * a row per process, the median of each column and every process's deviation from it.
 *
 * Each child also reports what else the machine did while it ran: the CPU time of other
 * processes (/proc/stat minus its own getrusage) as a share of the machine, so a slow process
 * on a busy host can be told from a slow process on an idle one. */
#ifndef TG_BENCH_PROCESSES_H
#define TG_BENCH_PROCESSES_H

#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

enum { PROC_MAX_VALUES = 8, PROC_MAX = 64 };

/* Busy and total CPU seconds of the whole machine, and this process's own CPU seconds. */
typedef struct cpu_sample { double busy, total, self; bool ok; } cpu_sample;

static inline double rusage_seconds(const struct rusage *r) {
  return (double)r->ru_utime.tv_sec + (double)r->ru_utime.tv_usec * 1e-6 + (double)r->ru_stime.tv_sec +
         (double)r->ru_stime.tv_usec * 1e-6;
}

/* This process's CPU seconds so far (all threads). */
static inline double self_cpu_seconds(void) {
  struct rusage r;
  return getrusage(RUSAGE_SELF, &r) == 0 ? rusage_seconds(&r) : 0;
}

static inline cpu_sample cpu_sample_now(void) {
  cpu_sample s = {0, 0, self_cpu_seconds(), false};
  FILE *f = fopen("/proc/stat", "r");
  unsigned long long v[8] = {0};
  if (f) {
    s.ok = fscanf(f, "cpu %llu %llu %llu %llu %llu %llu %llu %llu", &v[0], &v[1], &v[2], &v[3], &v[4], &v[5], &v[6],
                  &v[7]) == 8;
    fclose(f);
  }
  double hz = (double)sysconf(_SC_CLK_TCK);
  /* user nice system idle iowait irq softirq steal: idle and iowait are not busy */
  s.busy = (double)(v[0] + v[1] + v[2] + v[5] + v[6] + v[7]) / hz;
  s.total = s.busy + (double)(v[3] + v[4]) / hz;
  return s;
}

/* Percent of the machine's CPU time used by other processes between a and b (-1: unknown). */
static inline double others_percent(cpu_sample a, cpu_sample b) {
  double total = b.total - a.total, others = (b.busy - a.busy) - (b.self - a.self);
  if (!a.ok || !b.ok || total <= 0) return -1;
  return others < 0 ? 0 : 100 * others / total;
}

/* MiB of this process's memory in transparent huge pages (/proc/self/smaps_rollup), -1 if unknown. */
static inline double huge_page_mib(void) {
  FILE *f = fopen("/proc/self/smaps_rollup", "r");
  char line[256];
  double kb = -1;
  while (f && fgets(line, sizeof line, f))
    if (sscanf(line, "AnonHugePages: %lf kB", &kb) == 1) break;
  if (f) fclose(f);
  return kb < 0 ? -1 : kb / 1024;
}

static inline int cmp_dbl(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

/* Median of v[0..n), n <= 1024 (later values are ignored). */
static inline double median_of(const double *v, int n) {
  double s[1024];
  if (n <= 0) return 0;
  if (n > 1024) n = 1024;
  memcpy(s, v, sizeof *v * (size_t)n);
  qsort(s, (size_t)n, sizeof *s, cmp_dbl);
  return n % 2 ? s[n / 2] : 0.5 * (s[n / 2 - 1] + s[n / 2]);
}

/* Run this binary again with child_argv (argv[0] first) and read its "RESULT ..." line into
 * out; returns the number of values read, -1 if the child failed. */
static inline int run_child(char **child_argv, double *out) {
  int fd[2];
  if (pipe(fd) < 0) return -1;
  fflush(stdout);
  pid_t pid = fork();
  if (pid < 0) return close(fd[0]), close(fd[1]), -1;
  if (pid == 0) {
    dup2(fd[1], STDOUT_FILENO);
    close(fd[0]), close(fd[1]);
    execv("/proc/self/exe", child_argv);
    _exit(127);
  }
  close(fd[1]);
  FILE *f = fdopen(fd[0], "r");
  char line[512];
  int got = -1;
  while (f && fgets(line, sizeof line, f))
    if (!strncmp(line, "RESULT", 6)) {
      char *p = line + 6, *e;
      got = 0;
      for (double x; got < PROC_MAX_VALUES && (x = strtod(p, &e), e != p); p = e) out[got++] = x;
    }
  if (f) fclose(f); else close(fd[0]);
  int status;
  if (waitpid(pid, &status, 0) < 0 || !WIFEXITED(status) || WEXITSTATUS(status) != 0) return -1;
  return got;
}

/* Largest |v - median| / median over n values, in percent. */
static inline double max_deviation(const double *v, int n, double median) {
  double worst = 0;
  for (int i = 0; i < n; i++) worst = fmax(worst, fabs(v[i] - median) / median * 100);
  return worst;
}

/* Print "name: median M, max deviation D% (range lo-hi)" for column values v[0..n); return D. */
static inline double print_spread(const char *name, const char *unit, const double *v, int n) {
  double med = median_of(v, n), lo = v[0], hi = v[0];
  for (int i = 1; i < n; i++) lo = fmin(lo, v[i]), hi = fmax(hi, v[i]);
  double dev = med > 0 ? max_deviation(v, n, med) : 0;
  printf("%-24s median %8.2f%s%s, range %.2f-%.2f, max deviation %5.1f%%\n", name, med, *unit ? " " : "", unit, lo, hi,
         dev);
  return dev;
}
#endif
