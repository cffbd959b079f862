/* onnx_run.c — run an ONNX model with tg (docs/onnx.md).
 *
 *   example_onnx_run MODEL.onnx [INPUT.pb ...] [--seed S] [--bench N] [--jit] [--batch B] [--out DIR]
 *
 * Inputs come from the .pb files given (TensorProto, graph-input order) or, for those not
 * given, are random normal (seeded) of the declared shape, a symbolic dim taking --batch
 * (default 1). Prints each output's shape and first values; --bench N runs N more times
 * (after the first run, which compiles, a second and a third: tg_onnx_run replays the recorded
 * kernels from its third call, docs/onnx.md "Replays", and the first replay first-touches its
 * memory) and prints the latency, failing if the last run's outputs are not the first run's
 * bits; --jit runs them through a tg_jit of its own (two recording calls, then replays);
 * --out DIR writes each output's raw bytes to DIR/output_K.bin (for comparing with another
 * runtime). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "tg.h"
#include "tg_onnx.h"

#define MAX_IO 64

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* A random input of the declared type and shape (symbolic dims: batch). */
static tg_tensor *random_input(tg_onnx_model *m, int i, int64_t batch) {
  tg_dtype dt = TG_FLOAT32;
  int64_t shape[64];
  int nd = tg_onnx_input_info(m, i, &dt, shape, 64);
  if (nd < 0 || nd > 64) return fprintf(stderr, "input %s: no declared shape; give a .pb\n", tg_onnx_input_name(m, i)), NULL;
  for (int d = 0; d < nd; d++)
    if (shape[d] < 0) shape[d] = batch;
  if (tg_dtype_is_float(dt)) return tg_cast(tg_randn(shape, nd, TG_FLOAT32), dt);
  return tg_randint(shape, nd, 0, 2, dt == TG_DTYPE_COUNT ? TG_INT64 : dt);
}

/* tg_jit's function: one run of the model. */
static int run_model(void *model, tg_tensor *const *in, int nin, tg_tensor **out, int nout) {
  return tg_onnx_run(model, in, nin, out, nout);
}

static void print_output(const char *name, tg_tensor *t) {
  int64_t shape[64];
  int nd = tg_shape(t, shape, 64);
  printf("%s: %s (", name, tg_dtype_name(tg_get_dtype(t)));
  for (int d = 0; d < nd; d++) printf("%s%lld", d ? ", " : "", (long long)shape[d]);
  printf(")");
  int64_t n = tg_numel(t), k = n < 8 ? n : 8;
  double *v = malloc((size_t)(n ? n : 1) * sizeof *v);
  if (v && tg_to_host(tg_cast(t, TG_FLOAT64), v, (size_t)n * sizeof *v) == 0) {
    double sum = 0;
    for (int64_t j = 0; j < n; j++) sum += v[j];
    printf(" sum %.6g:", sum);
    for (int64_t j = 0; j < k; j++) printf(" %.6g", v[j]);
    if (n > k) printf(" ...");
  }
  printf("\n");
  free(v);
}

/* t's bytes in a new host block (NULL on failure); *bytes: its size. */
static void *host_copy(tg_tensor *t, size_t *bytes) {
  *bytes = (size_t)tg_numel(t) * tg_dtype_size(tg_get_dtype(t));
  void *buf = malloc(*bytes ? *bytes : 1);
  if (buf && tg_to_host(t, buf, *bytes) != 0) free(buf), buf = NULL;
  return buf;
}

static int write_output(const char *dir, int i, tg_tensor *t) {
  char path[4096];
  snprintf(path, sizeof path, "%s/output_%d.bin", dir, i);
  size_t bytes;
  void *buf = host_copy(t, &bytes);
  FILE *f = fopen(path, "wb");
  int rc = buf && f && fwrite(buf, 1, bytes, f) == bytes ? 0 : -1;
  if (f) fclose(f);
  free(buf);
  return rc;
}

/* Whether the outputs hold the bits of first[] (the first run's): a replay, chunked or not,
 * computes every value as the first run did. */
static bool same_bits(tg_tensor **out, void **first, int no) {
  bool same = true;
  for (int i = 0; i < no && same; i++) {
    size_t bytes;
    void *now = host_copy(out[i], &bytes);
    same = now && first[i] && !memcmp(now, first[i], bytes);
    free(now);
  }
  return same;
}

int main(int argc, char **argv) {
  const char *model = NULL, *pbs[MAX_IO], *outdir = NULL;
  int npb = 0, bench = 0, jit = 0;
  int64_t batch = 1;
  uint64_t seed = 0;
  for (int a = 1; a < argc; a++) {
    if (!strcmp(argv[a], "--bench") && a + 1 < argc) bench = atoi(argv[++a]);
    else if (!strcmp(argv[a], "--jit")) jit = 1;
    else if (!strcmp(argv[a], "--batch") && a + 1 < argc) batch = atoll(argv[++a]);
    else if (!strcmp(argv[a], "--seed") && a + 1 < argc) seed = strtoull(argv[++a], NULL, 10);
    else if (!strcmp(argv[a], "--out") && a + 1 < argc) outdir = argv[++a];
    else if (!model) model = argv[a];
    else if (npb < MAX_IO) pbs[npb++] = argv[a];
  }
  if (!model) return fprintf(stderr, "usage: %s MODEL.onnx [INPUT.pb ...] [--seed S] [--bench N] [--jit] [--batch B] [--out DIR]\n", argv[0]), 2;
  tg_onnx_model *m = tg_onnx_load(model);
  if (!m) return fprintf(stderr, "%s\n", tg_last_error()), 1;
  int ni = tg_onnx_num_inputs(m), no = tg_onnx_num_outputs(m);
  if (ni > MAX_IO || no > MAX_IO) return fprintf(stderr, "too many inputs or outputs\n"), 1;
  tg_manual_seed(seed);
  tg_tensor *in[MAX_IO], *out[MAX_IO];
  for (int i = 0; i < ni; i++) {
    in[i] = i < npb ? tg_onnx_load_tensor(pbs[i]) : random_input(m, i, batch);
    if (!in[i] || tg_realize(in[i])) return fprintf(stderr, "input %d: %s\n", i, tg_last_error()), 1;
  }
  double t0 = now();
  if (tg_onnx_run(m, in, ni, out, no) || tg_realize_many(out, no))
    return fprintf(stderr, "%s\n", tg_last_error()), 1;
  printf("first run (builds and compiles): %.1f ms\n", 1e3 * (now() - t0));
  for (int i = 0; i < no; i++) print_output(tg_onnx_output_name(m, i), out[i]);
  for (int i = 0; outdir && i < no; i++)
    if (write_output(outdir, i, out[i])) return fprintf(stderr, "writing output %d failed\n", i), 1;
  if (bench > 0) {
    double best = 1e30, total = 0;
    void *first[MAX_IO];
    size_t bytes;
    for (int i = 0; i < no; i++) first[i] = host_copy(out[i], &bytes), tg_free(out[i]); /* a held output is no run's */
    tg_jit *j = jit ? tg_jit_new(run_model, m) : NULL;
    /* Untimed: the recordings (tg_onnx_run's own: the first run and the next), then the first
     * replay, whose working set is new memory (ResNet-18 at batch 32: ~190 MB, 0.4 s of page
     * faults on the AVX-512 VM) -- the warm-up onnxruntime's bench gets too (docs/onnx.md). */
    for (int r = 0; r < 3 - !j; r++) {
      tg_scope *s = tg_scope_begin();
      tg_tensor *o[MAX_IO];
      if (j ? tg_jit_call(j, in, ni, o, no) : tg_onnx_run(m, in, ni, o, no) || tg_realize_many(o, no))
        return fprintf(stderr, "%s\n", tg_last_error()), 1;
      tg_scope_end(s);
    }
    tg_reset_stats();
    for (int r = 0; r < bench; r++) {
      tg_scope *s = tg_scope_begin();
      tg_tensor *o[MAX_IO];
      double t = now();
      if (j ? tg_jit_call(j, in, ni, o, no) : tg_onnx_run(m, in, ni, o, no) || tg_realize_many(o, no))
        return fprintf(stderr, "%s\n", tg_last_error()), 1;
      t = now() - t;
      total += t, best = t < best ? t : best;
      bool same = r < bench - 1 || same_bits(o, first, no);
      tg_scope_end(s);
      if (!same) return fprintf(stderr, "the last run's outputs differ from the first run's\n"), 1;
    }
    for (int i = 0; i < no; i++) free(first[i]);
    if (j && !tg_jit_replaying(j)) return fprintf(stderr, "the jit did not replay\n"), 1;
    tg_jit_free(j);
    tg_stats st = tg_get_stats();
    printf("latency over %d runs: mean %.3f ms, best %.3f ms (per run: %.3f ms in %llu kernels, %.3f ms scheduling)\n",
           bench, 1e3 * total / bench, 1e3 * best, 1e3 * st.kernel_seconds / bench,
           (unsigned long long)(st.kernels_run / (uint64_t)bench), 1e3 * st.schedule_seconds / bench);
  }
  tg_onnx_free(m);
  return 0;
}
