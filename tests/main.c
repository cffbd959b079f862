/* main.c — runs every registered test; argv[1] filters by substring. */
#include <stdlib.h>
#include "harness.h"

#define MAX_TESTS 4096
typedef struct test_case {
  const char *name;
  test_fn fn;
} test_case;
static test_case tests[MAX_TESTS];
static int ntests;
int harness_failed_checks;

void harness_register(const char *name, test_fn fn) {
  if (ntests < MAX_TESTS) tests[ntests++] = (test_case){name, fn};
}

static int by_name(const void *a, const void *b) {
  return strcmp(((const test_case *)a)->name, ((const test_case *)b)->name);
}

int main(int argc, char **argv) {
  const char *filter = argc > 1 ? argv[1] : NULL;
  int passed = 0, failed = 0;
  qsort(tests, (size_t)ntests, sizeof tests[0], by_name);
  for (int i = 0; i < ntests; i++) {
    if (filter && !strstr(tests[i].name, filter)) continue;
    harness_failed_checks = 0;
    tg_clear_error();
    tests[i].fn();
    if (harness_failed_checks) {
      printf("FAIL %s\n", tests[i].name);
      failed++;
    } else {
      if (getenv("VERBOSE")) printf("ok   %s\n", tests[i].name);
      passed++;
    }
    fflush(stdout);
  }
  printf("%d passed, %d failed\n", passed, failed);
  return failed ? 1 : 0;
}
