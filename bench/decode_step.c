/* decode_step.c — GPT-2 decode steps through the JIT (tg_gpt2_use_jit) at several cache
 * positions, random weights: the time of one step, which includes each layer's KV-cache
 * write (docs/llm.md). GPT-2 124M's shapes by default, a cache of 1024 positions.
 *
 *   build/bench_decode_step [steps] [n_layer n_embd n_head vocab max_len]
 *     → per position: best and median ms per step over `steps` steps (default 8) */
#include <stdio.h>
#include <stdlib.h>

#include "runtime/helpers.h"
#include "tg.h"
#include "tg_llm.h"

static int cmp(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

/* Reset, prefill pos tokens, two recording steps, then `steps` timed steps: ms[0..steps). */
static int run_at(tg_gpt2 *m, int64_t max_len, int64_t pos, int steps, double *ms) {
  int32_t *ids = calloc((size_t)pos + 1, sizeof *ids), tok = 7;
  int rc = ids && tg_gpt2_reset(m, max_len) == 0 && tg_gpt2_use_jit(m, true) == 0 ? 0 : -1;
  for (int64_t i = 0; i < pos; i++) ids[i] = (int32_t)((i * 31 + 5) % 97);
  tg_scope *s = tg_scope_begin();
  if (rc == 0 && pos > 0 && !tg_gpt2_step(m, ids, pos)) rc = -1;
  for (int i = 0; rc == 0 && i < steps + 2; i++) {
    double t0 = tg_now();
    if (!tg_gpt2_step(m, &tok, 1)) rc = -1;
    if (i >= 2) ms[i - 2] = (tg_now() - t0) * 1e3;
  }
  tg_scope_end(s);
  free(ids);
  return rc;
}

int main(int argc, char **argv) {
  int steps = argc > 1 ? atoi(argv[1]) : 8;
  tg_gpt2_config c = {.n_layer = 12, .n_embd = 768, .n_head = 12, .vocab_size = 50257, .n_positions = 1024, .eps = 1e-5};
  if (argc > 6) c.n_layer = atoll(argv[2]), c.n_embd = atoll(argv[3]), c.n_head = atoll(argv[4]), c.vocab_size = atoll(argv[5]), c.n_positions = atoll(argv[6]);
  if (steps < 1 || steps > 1000) return fprintf(stderr, "bench_decode_step: steps in 1..1000\n"), 1;
  tg_manual_seed(1);
  tg_gpt2 *m = tg_gpt2_new(&c);
  if (!m) return fprintf(stderr, "%s\n", tg_last_error()), 1;
  printf("GPT-2 %lld layers of %lld (%lld heads), vocab %lld, cache %lld: ms per JIT decode step (%d steps)\n",
         (long long)c.n_layer, (long long)c.n_embd, (long long)c.n_head, (long long)c.vocab_size, (long long)c.n_positions, steps);
  printf("%6s %8s %8s\n", "pos", "best", "median");
  const int64_t at[] = {16, 256, 1000};
  double *ms = malloc(sizeof(double) * (size_t)steps);
  for (int i = 0; ms && i < 3; i++) {
    int64_t pos = at[i] * c.n_positions / 1024;
    if (pos + steps + 2 > c.n_positions) pos = c.n_positions - steps - 2;
    if (run_at(m, c.n_positions, pos, steps, ms) < 0) return fprintf(stderr, "%s\n", tg_last_error()), 1;
    qsort(ms, (size_t)steps, sizeof *ms, cmp);
    printf("%6lld %8.2f %8.2f\n", (long long)pos, ms[0], ms[steps / 2]);
  }
  free(ms);
  tg_gpt2_free(m);
  return 0;
}
