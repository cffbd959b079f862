/* llm.c — GPT-2 speed in tg, batch 1 (run by bench/llm.sh, which compares it with transformers
 * on PyTorch and with the memory-bandwidth limit; docs/performance.md).
 *
 *   bench_llm --model DIR | --gguf FILE [--prompt P] [--decode N] [--reps R] [--jit]
 *   bench_llm --bandwidth
 *
 * A model run is: reset the cache, prefill P tokens (one tg_gpt2_step), then N decode steps
 * of one token (greedy). The first run compiles the kernels and is not timed; of R more runs
 * the best prefill and the best decode rate are printed as `prefill_tok_s X decode_tok_s Y`.
 * --jit replays the decode steps through tg_jit (tg_gpt2_use_jit).
 * --bandwidth prints `copy_gb_s X`: the best of 10 memcpy's of 512 MiB, counting the bytes
 * read and the bytes written (what a kernel streaming weights through the caches can hope for
 * is the read half of that traffic per second). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "tg.h"
#include "tg_llm.h"
#include "tg_nn.h"

static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static int bandwidth(void) {
  size_t n = (size_t)512 << 20;
  char *a = malloc(n), *b = malloc(n);
  if (!a || !b) return fprintf(stderr, "bench_llm: out of memory\n"), 1;
  memset(a, 1, n), memset(b, 2, n);
  double best = 1e30;
  for (int r = 0; r < 10; r++) {
    double t0 = now();
    memcpy(b, a, n);
    double dt = now() - t0;
    if (dt < best) best = dt;
    a[r] = b[n - 1 - (size_t)r]; /* keep the copies observable */
  }
  printf("copy_gb_s %.2f\n", 2.0 * (double)n / best / 1e9);
  free(a), free(b);
  return 0;
}

/* One run: prefill p tokens, decode n; the seconds of each phase. */
static int run(tg_gpt2 *m, int p, int n, double *tp, double *td) {
  int32_t *ids = malloc(sizeof(int32_t) * (size_t)(p + n));
  int64_t v = tg_gpt2_get_config(m)->vocab_size;
  for (int i = 0; i < p; i++) ids[i] = (int32_t)((i * 7919 + 13) % v);
  int rc = tg_gpt2_reset(m, p + n);
  double t0 = now(), t1 = t0;
  for (int s = 0; rc == 0 && s <= n; s++) {
    tg_scope *sc = tg_scope_begin();
    int64_t rows = s == 0 ? p : 1, next = 0;
    tg_tensor *l = s == 0 ? tg_gpt2_step(m, ids, p) : tg_gpt2_step(m, &ids[p + s - 1], 1);
    if (!l || tg_sample(tg_slice(l, 0, rows - 1, rows, 1), 0, 0, 1.0, &next) < 0) rc = -1;
    if (s < n) ids[p + s] = (int32_t)next;
    tg_scope_end(sc);
    if (s == 0) t1 = now();
  }
  *tp = t1 - t0, *td = now() - t1;
  free(ids);
  return rc;
}

int main(int argc, char **argv) {
  const char *dir = NULL, *gguf = NULL;
  int p = 64, n = 32, reps = 3, jit = 0;
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--bandwidth")) return bandwidth();
    if (!strcmp(argv[i], "--jit")) {
      jit = 1;
      continue;
    }
    if (i + 1 == argc) return fprintf(stderr, "bench_llm: %s needs a value\n", argv[i]), 2;
    if (!strcmp(argv[i], "--model")) dir = argv[++i];
    else if (!strcmp(argv[i], "--gguf")) gguf = argv[++i];
    else if (!strcmp(argv[i], "--prompt")) p = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--decode")) n = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--reps")) reps = atoi(argv[++i]);
    else return fprintf(stderr, "bench_llm: unknown option %s\n", argv[i]), 2;
  }
  if (!dir == !gguf || p < 1 || n < 1 || reps < 1) return fprintf(stderr, "bench_llm: see the file's header for usage\n"), 2;
  tg_gpt2 *m = dir ? tg_gpt2_load(dir) : tg_gpt2_load_gguf(gguf);
  if (!m || tg_gpt2_use_jit(m, jit) < 0) return fprintf(stderr, "bench_llm: %s\n", tg_last_error()), 1;
  double tp, td, bp = 1e30, bd = 1e30, t0 = now();
  int rc = run(m, p, n, &tp, &td);
  fprintf(stderr, "bench_llm: first run (compiling) %.1f s\n", now() - t0);
  for (int r = 0; rc == 0 && r < reps; r++) {
    rc = run(m, p, n, &tp, &td);
    if (tp < bp) bp = tp;
    if (td < bd) bd = td;
    fprintf(stderr, "bench_llm: run %d: prefill %.1f tok/s, decode %.2f tok/s\n", r + 1, p / tp, n / td);
  }
  if (rc < 0) return fprintf(stderr, "bench_llm: %s\n", tg_last_error()), 1;
  printf("prefill_tok_s %.2f decode_tok_s %.3f\n", p / bp, n / bd);
  tg_gpt2_free(m);
  return 0;
}
