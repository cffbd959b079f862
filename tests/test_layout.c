/* test_layout.c — BEAM over layouts (src/schedule/layout_search.c): under BEAM a layout rule's
 * choices (panel widths, chunks of images) are timed, the fastest shapes the schedule, and the
 * answer is kept in memory and on disk. A fake timer (layout_set_timer) makes "fastest" known
 * in advance; one test times real kernels. Values are checked against naive C loops. */
#include <dirent.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "device/device.h"
#include "schedule/layout.h"

#define NEED_HOST()                                                                             \
  do {                                                                                          \
    if (device_default() && device_is_gpu(device_default()))                                    \
      SKIP("layout choices are for host devices (BEAM times on host memory): not on %s", device_default()->name); \
  } while (0)

static void fill(float *d, int n, int seed) {
  for (int i = 0; i < n; i++) d[i] = (float)((i * 5 + seed * 7) % 13 - 6) * 0.25f;
}

static tg_tensor *input(const float *d, const int64_t *shape, int ndim) {
  tg_tensor *t = tg_from_data(d, TG_FLOAT32, shape, ndim);
  CHECK(t != NULL && tg_realize(t) == 0);
  return t;
}

static int kernels_of(tg_tensor *t) { return tg_schedule_kernels(&t, 1); }

/* ---- a fresh cache directory and BEAM=1 for one test */

typedef struct env {
  char dir[32];
  char *saved_cache;
} env;

static void env_begin(env *e) {
  snprintf(e->dir, sizeof e->dir, "/tmp/tg-layout-XXXXXX");
  CHECK(mkdtemp(e->dir) != NULL);
  const char *old = getenv("TG_CACHE_DIR");
  e->saved_cache = old ? strdup(old) : NULL;
  setenv("TG_CACHE_DIR", e->dir, 1);
  setenv("BEAM", "1", 1);
}

static void env_end(env *e) {
  layout_set_timer(NULL, NULL);
  unsetenv("BEAM");
  if (e->saved_cache) setenv("TG_CACHE_DIR", e->saved_cache, 1);
  else unsetenv("TG_CACHE_DIR");
  free(e->saved_cache);
  char cmd[64];
  snprintf(cmd, sizeof cmd, "rm -rf %s", e->dir);
  CHECK(system(cmd) == 0);
}

/* Overwrites every layout entry in dir with text (NULL: leaves them); returns how many there are. */
static int spoil_entries(const char *dir, const char *text) {
  DIR *d = opendir(dir);
  int n = 0;
  for (struct dirent *f; d && (f = readdir(d));) {
    if (strncmp(f->d_name, "layout-", 7)) continue;
    char path[512];
    snprintf(path, sizeof path, "%s/%s", dir, f->d_name);
    FILE *out = text ? fopen(path, "w") : NULL;
    if (out) fputs(text, out), fclose(out);
    n++;
  }
  if (d) closedir(d);
  return n;
}

/* The fake timer: every kernel takes *ctx ms (1: fewer kernels win; -1: more kernels win). */
static int timed;
static double per_kernel(const device *d, uop *ast, void *ctx) {
  (void)d, (void)ast;
  timed++;
  return *(const double *)ctx;
}

/* Host matrices a (n, k) and w (k, m), filled, and realized tensors of them. */
typedef struct mm_inputs {
  float *ad, *wd;
  tg_tensor *a, *w;
} mm_inputs;

static mm_inputs mm_inputs_new(int n, int k, int m, int seed) {
  mm_inputs x = {malloc(sizeof(float) * (size_t)(n * k)), malloc(sizeof(float) * (size_t)(k * m)), NULL, NULL};
  fill(x.ad, n * k, seed), fill(x.wd, k * m, seed + 1);
  x.a = input(x.ad, (int64_t[]){n, k}, 2), x.w = input(x.wd, (int64_t[]){k, m}, 2);
  return x;
}

static int far_from_matmul(tg_tensor *y, const float *a, const float *w, int n, int k, int m) {
  float *out = malloc(sizeof(float) * (size_t)(n * m));
  int bad = out && tg_to_host(y, out, sizeof(float) * (size_t)(n * m)) == 0 ? 0 : 1;
  for (int i = 0; i < n && out; i++)
    for (int j = 0; j < m; j++) {
      double want = 0;
      for (int p = 0; p < k; p++) want += (double)a[i * k + p] * w[p * m + j];
      bad += !harness_close(out[i * m + j], want, 1e-4, 1e-4);
    }
  free(out);
  return bad;
}

/* (128, 512) @ (512, 256): the heuristic packs w into panels (2 kernels). With every kernel
 * timed at 1 ms, reading w in place (1 kernel) is fastest and the schedule follows; the answer
 * is remembered (no second search), then read from disk once memory is cleared; an entry that
 * does not parse is removed and searched again. OPTS and NOOPT turn the search off. */
TEST(layout_search_fastest_choice_shapes_schedule) {
  NEED_HOST();
  enum { N = 128, K = 512, M = 256 };
  tg_scope *s = tg_scope_begin();
  mm_inputs x = mm_inputs_new(N, K, M, 1);
  float *ad = x.ad, *wd = x.wd;
  tg_tensor *a = x.a, *w = x.w;
  CHECK(kernels_of(tg_matmul(a, w)) == 2); /* the heuristic: panels */
  env e;
  env_begin(&e);
  double one = 1, minus_one = -1;
  uint64_t searches = tg_layout_searches, hits = tg_layout_cache_hits;
  setenv("OPTS", "UPCAST(0,4)", 1);
  CHECK(kernels_of(tg_matmul(a, w)) == 2 && tg_layout_searches == searches);
  unsetenv("OPTS");
  setenv("NOOPT", "1", 1);
  CHECK(kernels_of(tg_matmul(a, w)) == 2 && tg_layout_searches == searches);
  unsetenv("NOOPT");
  layout_set_timer(per_kernel, &one);
  timed = 0;
  tg_tensor *y = tg_matmul(a, w);
  CHECK(kernels_of(y) == 1 && tg_layout_searches == searches + 1);
  CHECK(timed >= 4); /* the choices: panels of 1, 2, 4 vectors (2 kernels each) and in place */
  CHECK(far_from_matmul(y, ad, wd, N, K, M) == 0);
  /* y is realized now: the same product of new inputs has the same probe */
  a = input(ad, (int64_t[]){N, K}, 2);
  int before = timed;
  CHECK(kernels_of(tg_matmul(a, w)) == 1 && tg_layout_searches == searches + 1 && timed == before); /* in memory */
  layout_set_timer(per_kernel, &minus_one); /* memory cleared: the disk answers */
  CHECK(kernels_of(tg_matmul(a, w)) == 1 && tg_layout_cache_hits == hits + 1 && timed == before);
  CHECK(spoil_entries(e.dir, "16 en") == 1); /* truncated */
  layout_set_timer(per_kernel, &minus_one);
  CHECK(kernels_of(tg_matmul(a, w)) == 2 && tg_layout_searches == searches + 2); /* more kernels now win */
  env_end(&e);
  free(ad), free(wd);
  tg_scope_end(s);
}

/* A conv weight gradient whose images exceed half the L2: the heuristic sums per chunk of
 * images (2 kernels); with fewer kernels faster, one kernel sums the whole batch, and the
 * values still match a naive loop. */
TEST(layout_search_chunks_conv_weight_grad) {
  NEED_HOST();
  const device *d = device_default();
  int64_t l2 = d ? d->caps.l2_bytes : 1 << 20;
  int hw = 8, n = 4;
  while ((int64_t)hw * hw * 8 <= l2 / 2) hw *= 2;
  if (hw > 2048) SKIP("an L2 of %lld bytes needs images too large for a unit test", (long long)l2);
  int o = hw - 2;
  tg_scope *s = tg_scope_begin();
  float *xd = malloc(sizeof(float) * (size_t)(n * hw * hw)), *cd = malloc(sizeof(float) * (size_t)(n * o * o)), wd[9], gw[9];
  fill(xd, n * hw * hw, 3), fill(cd, n * o * o, 4), fill(wd, 9, 5);
  tg_tensor *x = input(xd, (int64_t[]){n, 1, hw, hw}, 4), *w = input(wd, (int64_t[]){1, 1, 3, 3}, 4);
  tg_tensor *c = input(cd, (int64_t[]){n, 1, o, o}, 4), *g;
  tg_tensor *y = tg_conv2d(x, w, NULL, (const int[]){1, 1}, (const int[]){0, 0}, (const int[]){1, 1}, 1);
  CHECK(tg_gradient(tg_sum(tg_mul(y, c), NULL, 0, false), &w, 1, &g) == 0);
  CHECK(kernels_of(g) == 2);
  env e;
  env_begin(&e);
  double one = 1;
  layout_set_timer(per_kernel, &one);
  uint64_t searches = tg_layout_searches;
  CHECK(kernels_of(g) == 1 && tg_layout_searches == searches + 1);
  CHECK(tg_to_host(g, gw, sizeof gw) == 0);
  for (int i = 0; i < 3; i++)
    for (int j = 0; j < 3; j++) CHECK(harness_close(gw[i * 3 + j], harness_conv3x3_weight_grad(xd, cd, n, hw, i, j), 1e-3, 1e-3));
  env_end(&e);
  free(xd), free(cd);
  tg_scope_end(s);
}

/* Real timing: (128, 64) @ (64, 128), just large enough to be searched. Each choice's kernels
 * are built and run; whichever wins, the values are right and the answer is on disk. */
TEST(layout_search_times_real_kernels) {
  NEED_HOST();
  enum { N = 128, K = 64, M = 128 };
  tg_scope *s = tg_scope_begin();
  mm_inputs x = mm_inputs_new(N, K, M, 6);
  env e;
  env_begin(&e);
  setenv("BEAM_CANDIDATES", "2", 1);
  uint64_t searches = tg_layout_searches;
  tg_tensor *y = tg_matmul(x.a, x.w);
  CHECK(far_from_matmul(y, x.ad, x.wd, N, K, M) == 0);
  CHECK(tg_layout_searches == searches + 1);
  CHECK(spoil_entries(e.dir, NULL) == 1);
  unsetenv("BEAM_CANDIDATES");
  env_end(&e);
  free(x.ad), free(x.wd);
  tg_scope_end(s);
}
