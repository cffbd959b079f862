/* cold.h — a cold start of the demo network, shared by the benches: a fresh process with an
 * empty kernel cache (TG_CACHE_DIR) initializes the net and runs its first training step; a
 * second fresh process on the cache the first one filled shows the warm-cache start. The
 * bench's main() hands `--cold DEV BATCH` to cold_child. Include after nets.h. */
#ifndef TG_BENCH_COLD_H
#define TG_BENCH_COLD_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>
#include <tg.h>

#include "runtime/helpers.h" /* tg_now */

static inline double cold_cpu_seconds(void) {
  struct rusage s, c;
  getrusage(RUSAGE_SELF, &s), getrusage(RUSAGE_CHILDREN, &c);
  return (double)(s.ru_utime.tv_sec + s.ru_stime.tv_sec + c.ru_utime.tv_sec + c.ru_stime.tv_sec) +
         (double)(s.ru_utime.tv_usec + s.ru_stime.tv_usec + c.ru_utime.tv_usec + c.ru_stime.tv_usec) * 1e-6;
}

/* The child: the net's initialization and first training step on dev; prints one line. */
static inline int cold_child(const char *dev, int64_t batch) {
  double t0 = tg_now();
  net_run r;
  if (tg_set_default_device(dev) < 0 || net_run_init(&r, true, batch) < 0) { printf("COLD error %s\n", tg_last_error()); return 1; }
  double t1 = tg_now(), c1 = cold_cpu_seconds();
  tg_stats a = tg_get_stats();
  tg_scope *s = tg_scope_begin();
  tg_tensor *loss = net_run_loss(&r);
  int rc = !loss || tg_backward(loss) < 0 || tg_optimizer_step(r.opt, &loss, 1) < 0;
  tg_scope_end(s);
  tg_stats b = tg_get_stats();
  printf("COLD %d %.1f %.1f %.1f %llu %.1f %.1f\n", rc, (t1 - t0) * 1e3, (tg_now() - t1) * 1e3, (cold_cpu_seconds() - c1) * 1e3,
         (unsigned long long)(b.kernels_compiled - b.disk_cache_hits - a.kernels_compiled + a.disk_cache_hits),
         (b.compile_seconds - a.compile_seconds) * 1e3, (b.kernel_seconds - a.kernel_seconds) * 1e3);
  net_run_free(&r);
  return rc;
}

static inline void cold_header(void) {
  printf("%-6s %-11s %9s %12s %12s %9s %11s %11s\n", "device", "kernel cache", "init ms", "1st step ms", "step cpu ms",
         "compiled", "compile ms", "kernels ms");
}

/* Run cold_child twice in fresh processes, on an empty cache directory and then on what the
 * first filled; a line each. */
static inline void cold_start(const char *self, const char *dev, int64_t batch) {
  char dir[64] = "/tmp/tg-bench-cold-XXXXXX", cmd[1024], line[512];
  if (!mkdtemp(dir)) return;
  for (int run = 0; run < 2; run++) {
    snprintf(cmd, sizeof cmd, "TG_CACHE_DIR=%s '%s' --cold %s %lld 2>&1", dir, self, dev, (long long)batch);
    FILE *p = popen(cmd, "r");
    int rc = 1, n = 0;
    double init = 0, step = 0, cpu = 0, comp = 0, kern = 0;
    unsigned long long k = 0;
    while (p && fgets(line, sizeof line, p))
      if (sscanf(line, "COLD %d %lf %lf %lf %llu %lf %lf", &rc, &init, &step, &cpu, &k, &comp, &kern) == 7) n = 1;
      else fputs(line, stderr);
    if (p) pclose(p);
    const char *cache = run ? "on disk" : "empty";
    if (n && !rc) printf("%-6s %-12s %9.0f %12.0f %12.0f %9llu %11.0f %11.0f\n", dev, cache, init, step, cpu, k, comp, kern);
    else printf("%-6s %-12s failed\n", dev, cache);
  }
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
  if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", dir);
}
#endif
