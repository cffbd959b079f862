/* harness.h — a tiny test harness. TEST(name) { CHECK(...); } registers a test under its
 * source file (its "area"); tests/main.c runs the areas in parallel worker processes (or
 * those tests whose name contains argv[1]) and ends with "N passed, N failed".
 *
 * TEST_CHILD(name) is a subprocess entry point, not a test: it is never listed or counted,
 * and runs only as `test_tg --child name`, which harness_run_child does for a test that needs
 * a fresh process (environment knobs read once, empty caches). SKIP("why") leaves a test
 * whose prerequisite is missing: listed as skipped, not counted as passed. A test that makes
 * no CHECK at all fails: it could not have failed. */
#ifndef TG_HARNESS_H
#define TG_HARNESS_H
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include "tg.h"

typedef void (*test_fn)(void);
void harness_register(const char *name, const char *file, test_fn fn);
void harness_register_child(const char *name, test_fn fn);
void harness_skip(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* Runs `test_tg --child name` with extra environment ("A=1 B=2", may be NULL or ""); its
 * stdout and stderr go to out (cap bytes, NUL-terminated). Returns the child's exit status
 * (0: its checks passed), 128 + signal if it was killed, -1 if it could not start. */
int harness_run_child(const char *name, const char *env, char *out, size_t cap);
extern int harness_failed_checks; /* checks failed in the running test */
extern int harness_checks;        /* checks made by the running test: none is a failure */

#define TEST(name)                                                          \
  static void test_##name(void);                                            \
  __attribute__((constructor)) static void register_##name(void) {          \
    harness_register(#name, __FILE__, test_##name);                         \
  }                                                                         \
  static void test_##name(void)

#define TEST_CHILD(name)                                                    \
  static void child_##name(void);                                           \
  __attribute__((constructor)) static void register_child_##name(void) {    \
    harness_register_child(#name, child_##name);                            \
  }                                                                         \
  static void child_##name(void)

#define SKIP(...)                                                           \
  do {                                                                      \
    harness_skip(__VA_ARGS__);                                              \
    return;                                                                 \
  } while (0)

#define CHECK(cond)                                                         \
  do {                                                                      \
    harness_checks++;                                                       \
    if (!(cond)) {                                                          \
      harness_failed_checks++;                                              \
      printf("  %s:%d: CHECK(%s) failed (last error: %s)\n", __FILE__,      \
             __LINE__, #cond, tg_last_error());                             \
    }                                                                       \
  } while (0)

/* Near-equality for floats: |a-b| <= atol + rtol*|b|, NaNs equal, infs exact. */
static inline int harness_close(double a, double b, double atol, double rtol) {
  if (isnan(a) || isnan(b)) return isnan(a) && isnan(b);
  if (isinf(a) || isinf(b)) return a == b;
  return fabs(a - b) <= atol + rtol * fabs(b);
}

/* Reference for a 3x3 single-channel conv weight gradient: d sum(conv(x, w) * gy) / dw[i][j]
 * for x (n, 1, hw, hw) and gy (n, 1, hw - 2, hw - 2), a naive loop in double. */
static inline double harness_conv3x3_weight_grad(const float *x, const float *gy, int n, int hw, int i, int j) {
  int o = hw - 2;
  double want = 0;
  for (int b = 0; b < n; b++)
    for (int r = 0; r < o; r++)
      for (int q = 0; q < o; q++) want += (double)gy[(b * o + r) * o + q] * x[(b * hw + r + i) * hw + q + j];
  return want;
}

#define CHECK_CLOSE(a, b, tol)                                              \
  do {                                                                      \
    double a_ = (double)(a), b_ = (double)(b);                              \
    harness_checks++;                                                       \
    if (!harness_close(a_, b_, (tol), (tol))) {                             \
      harness_failed_checks++;                                              \
      printf("  %s:%d: %s = %.9g, expected %.9g\n", __FILE__, __LINE__, #a, \
             a_, b_);                                                       \
    }                                                                       \
  } while (0)

#endif
