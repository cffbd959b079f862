/* gguf_matvec.c — a decode step's core, y = W x with W read from a GGUF file: float32 against
 * each quantized type tg loads (docs/llm.md). Writes a GGUF file of one ROWS x COLS tensor per
 * type (random blocks with float16 scales near 0.01: timing does not depend on the values),
 * then times tg_matmul(W, x) with a fresh x each time, best of REPS, and prints ms, the
 * weight bytes read per second, the time relative to float32's (which reads 4-7x the bytes)
 * and the kernels a product runs.
 *
 *   ./build/bench_gguf_matvec [ROWS COLS REPS]      (default 4096 4096 30)
 *   TYPES=q8_0,q4_k: only those quantized rows (float32, the reference, always runs) */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <tg.h>
#include <tg_llm.h>

#include "runtime/helpers.h" /* tg_now */

typedef struct qtype { const char *name; int ggml, block, size, scales[2]; } qtype;

static const qtype types[] = {
    {"f32", 0, 1, 4, {-1, -1}},     {"q8_0", 8, 32, 34, {0, -1}},    {"q4_0", 2, 32, 18, {0, -1}},
    {"q4_1", 3, 32, 20, {0, 2}},    {"q4_k", 12, 256, 144, {0, 2}},  {"q6_k", 14, 256, 210, {208, -1}},
};
#define NTYPES (int)(sizeof types / sizeof types[0])

static void put(FILE *f, uint64_t v, int n) {
  for (int i = 0; i < n; i++) fputc((int)(v >> (8 * i) & 255), f);
}

/* The data of one tensor: random bits; float32 in [-1, 1); quantized blocks with their
 * float16 scales set to halves between 0.0078 and 0.0156. */
static unsigned char *tensor_data(const qtype *t, int64_t numel, int64_t *nbytes) {
  *nbytes = numel / t->block * t->size;
  unsigned char *d = malloc((size_t)*nbytes);
  if (!d) return NULL;
  for (int64_t i = 0; i < *nbytes; i++) d[i] = (unsigned char)(rand() >> 7);
  if (t->ggml == 0)
    for (int64_t i = 0; i < numel; i++) {
      float v = (float)rand() / (float)RAND_MAX * 2 - 1;
      memcpy(d + 4 * i, &v, 4);
    }
  for (int64_t b = 0; t->ggml && b < *nbytes / t->size; b++)
    for (int s = 0; s < 2 && t->scales[s] >= 0; s++) {
      unsigned h = 0x2000 + (unsigned)(rand() % 0x400);
      d[b * t->size + t->scales[s]] = (unsigned char)h, d[b * t->size + t->scales[s] + 1] = (unsigned char)(h >> 8);
    }
  return d;
}

/* GGUF v3, no metadata, one tensor per type, 32-byte aligned. */
static int write_file(const char *path, int64_t rows, int64_t cols) {
  FILE *f = fopen(path, "wb");
  if (!f) return -1;
  fwrite("GGUF", 1, 4, f), put(f, 3, 4), put(f, NTYPES, 8), put(f, 0, 8);
  int64_t offset = 0, nbytes[NTYPES];
  for (int i = 0; i < NTYPES; i++) {
    nbytes[i] = rows * cols / types[i].block * types[i].size;
    put(f, strlen(types[i].name), 8), fwrite(types[i].name, 1, strlen(types[i].name), f);
    put(f, 2, 4), put(f, (uint64_t)cols, 8), put(f, (uint64_t)rows, 8), put(f, (uint64_t)types[i].ggml, 4), put(f, (uint64_t)offset, 8);
    offset += (nbytes[i] + 31) / 32 * 32;
  }
  while (ftell(f) % 32) fputc(0, f);
  for (int i = 0; i < NTYPES; i++) {
    int64_t n;
    unsigned char *d = tensor_data(&types[i], rows * cols, &n);
    if (!d) return fclose(f), -1;
    fwrite(d, 1, (size_t)n, f);
    free(d);
    for (int64_t k = n; k % 32; k++) fputc(0, f);
  }
  return fclose(f);
}

int main(int argc, char **argv) {
  int64_t rows = argc > 2 ? atoll(argv[1]) : 4096, cols = argc > 2 ? atoll(argv[2]) : 4096;
  int reps = argc > 3 ? atoi(argv[3]) : 30;
  char path[64];
  snprintf(path, sizeof path, "/tmp/tg_bench_gguf_%d.gguf", (int)getpid());
  if (rows < 1 || cols < 256 || cols % 256 || write_file(path, rows, cols) < 0) {
    fprintf(stderr, "usage: %s [ROWS COLS REPS] (COLS a multiple of 256); or cannot write %s\n", argv[0], path);
    return 1;
  }
  tg_gguf *g = tg_gguf_open(path);
  unlink(path);
  if (!g) return fprintf(stderr, "%s\n", tg_last_error()), 1;
  printf("y = W x, W (%lld, %lld), best of %d\n", (long long)rows, (long long)cols, reps);
  printf("%-6s %10s %12s %8s %8s\n", "type", "ms", "weight GB/s", "x f32", "kernels");
  double f32_ms = 0;
  const char *only = getenv("TYPES"); /* e.g. TYPES=q8_0: the other rows left out (float32 always runs) */
  for (int i = 0; i < NTYPES; i++) {
    if (i > 0 && only && !strstr(only, types[i].name)) continue;
    tg_gguf_tensor_info info;
    tg_gguf_tensor_info_at(g, i, &info);
    tg_tensor *w = tg_gguf_tensor(g, types[i].name);
    if (i == 0) tg_realize(w); /* float32: its buffer; quantized: the raw words are one already */
    double best = 1e30;
    uint64_t kernels = 0;
    for (int r = 0; r < reps + 1; r++) {
      tg_scope *s = tg_scope_begin();
      tg_tensor *x = tg_rand(&cols, 1, TG_FLOAT32);
      tg_realize(x);
      tg_reset_stats();
      double t0 = tg_now();
      if (tg_realize(tg_matmul(w, x)) != 0) return fprintf(stderr, "%s\n", tg_last_error()), 1;
      double t = tg_now() - t0;
      if (r > 0 && t < best) best = t; /* the first run compiles */
      kernels = tg_get_stats().kernels_run;
      tg_scope_end(s);
    }
    if (i == 0) f32_ms = best * 1e3;
    printf("%-6s %10.3f %12.2f %8.2f %8llu\n", types[i].name, best * 1e3, (double)info.nbytes / best / 1e9, best * 1e3 / f32_ms,
           (unsigned long long)kernels);
    tg_free(w);
  }
  tg_gguf_close(g);
  return 0;
}
