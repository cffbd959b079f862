/* gpu.c — tg on a GPU against PyTorch on the same GPU, in the same run (issue 14): fp32, fp16
 * and bf16 matmul (n x n, TFLOPS; PyTorch's torch.matmul is cuBLAS), an elementwise add of 2^26
 * floats against the device's copy bandwidth (PyTorch's copy_), each best of a few runs. tg
 * runs on the default device (DEV=CUDA on a GPU machine; any device works, e.g. DEV=CL); its
 * times are whole realizes: graph, schedule, launch and the wait for the kernel. PyTorch
 * comes from bench/gpu_torch.py run by $PYTHON (default python3).
 *   DEV=CUDA build/bench_gpu [N ...]   (default 4096 8192) */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <tg.h>

#include "runtime/helpers.h" /* tg_now */

typedef struct { tg_tensor *a, *b; int op; } job; /* op 0: a @ b, 1: a + b, 2: a * 1 (a copy kernel) */

static double run_best(job *j, int reps) {
  double best = 1e30;
  for (int r = 0; r <= reps; r++) { /* the first run compiles */
    tg_scope *s = tg_scope_begin();
    double t0 = tg_now();
    tg_tensor *c = j->op == 0 ? tg_matmul(j->a, j->b) : j->op == 1 ? tg_add(j->a, j->b) : tg_mul_s(j->a, 1.0);
    int rc = tg_realize(c);
    double ms = (tg_now() - t0) * 1e3;
    tg_scope_end(s);
    if (rc < 0) return fprintf(stderr, "realize failed: %s\n", tg_last_error()), -1;
    if (r && ms < best) best = ms;
  }
  return best;
}

/* PyTorch's number for a line "KEY A B MS" of gpu_torch.py's output, or -1. */
static double torch_ms(const char *out, const char *key, const char *a, long long b) {
  char want[128], line[256];
  snprintf(want, sizeof want, "%s %s%s%lld ", key, a, *a ? " " : "", b);
  for (const char *p = out; p && *p; p = strchr(p, '\n') ? strchr(p, '\n') + 1 : NULL) {
    size_t n = strcspn(p, "\n");
    snprintf(line, sizeof line, "%.*s", (int)(n < sizeof line ? n : sizeof line - 1), p);
    if (!strncmp(line, want, strlen(want))) return atof(line + strlen(want));
  }
  return -1;
}

static char *run_torch(int argc, char **argv) {
  char cmd[1024];
  const char *py = getenv("PYTHON");
  int len = snprintf(cmd, sizeof cmd, "%s bench/gpu_torch.py", py && *py ? py : "python3");
  for (int i = 1; i < argc; i++) len += snprintf(cmd + len, sizeof cmd - (size_t)len, " %s", argv[i]);
  if (argc < 2) snprintf(cmd + len, sizeof cmd - (size_t)len, " 4096 8192");
  FILE *p = popen(cmd, "r");
  static char out[8192];
  size_t got = p ? fread(out, 1, sizeof out - 1, p) : 0;
  out[got] = 0;
  if (p) pclose(p);
  return out;
}

int main(int argc, char **argv) {
  long long sizes[8] = {4096, 8192};
  int nsizes = argc > 1 ? argc - 1 : 2;
  for (int i = 1; i < argc && i < 9; i++) sizes[i - 1] = atoll(argv[i]);
  if (nsizes > 8) nsizes = 8;
  char *torch = run_torch(argc, argv);
  tg_manual_seed(0);
  tg_tensor *probe = tg_scalar(0, TG_FLOAT32);
  printf("tg on %s vs PyTorch (same GPU); best of 3-10 runs, ms\n", tg_device_of(probe));
  tg_free(probe);
  printf("%-22s %10s %10s %10s %10s %9s\n", "op", "tg ms", "tg TFLOPS", "torch ms", "torch TF", "tg/torch");
  const struct { const char *name; tg_dtype dt; } dts[] = {{"float32", TG_FLOAT32}, {"float16", TG_FLOAT16}, {"bfloat16", TG_BFLOAT16}};
  for (int s = 0; s < nsizes; s++)
    for (int d = 0; d < 3; d++) {
      int64_t shape[2] = {sizes[s], sizes[s]};
      tg_scope *sc = tg_scope_begin();
      job j = {tg_rand(shape, 2, dts[d].dt), tg_rand(shape, 2, dts[d].dt), 0};
      double ms = tg_realize(j.a) < 0 || tg_realize(j.b) < 0 ? -1 : run_best(&j, 3);
      tg_scope_end(sc);
      double tflop = 2.0 * (double)sizes[s] * (double)sizes[s] * (double)sizes[s] * 1e-12, t = torch_ms(torch, "matmul", dts[d].name, sizes[s]);
      char name[64];
      snprintf(name, sizeof name, "matmul %s %lld", dts[d].name, sizes[s]);
      printf("%-22s %10.3f %10.2f %10.3f %10.2f %9.3f\n", name, ms, ms > 0 ? tflop / ms * 1e3 : 0, t, t > 0 ? tflop / t * 1e3 : 0,
             ms > 0 && t > 0 ? t / ms : 0);
    }
  int64_t n = 1 << 26;
  tg_scope *sc = tg_scope_begin();
  job add = {tg_rand(&n, 1, TG_FLOAT32), tg_rand(&n, 1, TG_FLOAT32), 1}, copy = {add.a, NULL, 2};
  double add_ms = tg_realize(add.a) < 0 || tg_realize(add.b) < 0 ? -1 : run_best(&add, 10), copy_ms = run_best(&copy, 10);
  tg_scope_end(sc);
  double tc = torch_ms(torch, "copy", "", 8LL * n), ta = torch_ms(torch, "add", "", 12LL * n);
  printf("\n%-22s %10s %10s %10s %10s\n", "memory (2^26 floats)", "tg ms", "tg GB/s", "torch ms", "torch GB/s");
  printf("%-22s %10.3f %10.1f %10.3f %10.1f\n", "copy (tg: x * 1)", copy_ms, copy_ms > 0 ? 8.0 * (double)n / copy_ms * 1e-6 : 0, tc,
         tc > 0 ? 8.0 * (double)n / tc * 1e-6 : 0);
  printf("%-22s %10.3f %10.1f %10.3f %10.1f\n", "add x + y", add_ms, add_ms > 0 ? 12.0 * (double)n / add_ms * 1e-6 : 0, ta,
         ta > 0 ? 12.0 * (double)n / ta * 1e-6 : 0);
  if (tc > 0 && add_ms > 0) printf("tg's add moves %.0f%% of the bytes per second PyTorch's copy moves\n", 100.0 * (12.0 * (double)n / add_ms) / (8.0 * (double)n / tc));
  if (strstr(torch, "error")) printf("PyTorch: %s", torch);
  return 0;
}
