/* harness.h — a tiny test harness: TEST(name) { CHECK(...); } registers itself;
 * tests/main.c runs all (or those whose name contains argv[1]) and prints
 * "N passed, N failed". */
#ifndef TG_HARNESS_H
#define TG_HARNESS_H
#include <math.h>
#include <stdio.h>
#include <string.h>
#include "tg.h"

typedef void (*test_fn)(void);
void harness_register(const char *name, test_fn fn);
extern int harness_failed_checks; /* checks failed in the running test */

#define TEST(name)                                                          \
  static void test_##name(void);                                            \
  __attribute__((constructor)) static void register_##name(void) {          \
    harness_register(#name, test_##name);                                   \
  }                                                                         \
  static void test_##name(void)

#define CHECK(cond)                                                         \
  do {                                                                      \
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

#define CHECK_CLOSE(a, b, tol)                                              \
  do {                                                                      \
    double a_ = (double)(a), b_ = (double)(b);                              \
    if (!harness_close(a_, b_, (tol), (tol))) {                             \
      harness_failed_checks++;                                              \
      printf("  %s:%d: %s = %.9g, expected %.9g\n", __FILE__, __LINE__, #a, \
             a_, b_);                                                       \
    }                                                                       \
  } while (0)

#endif
