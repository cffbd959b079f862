/* main.c — the test runner.
 *
 *   test_tg [FILTER]        every test (or those whose name contains FILTER)
 *   test_tg --child NAME    the TEST_CHILD entry point NAME, alone (see harness_run_child)
 *
 * Tests are grouped by area, their source file (test_opt.c → "opt"), and run in forked worker
 * processes, as many at once as there are cores (TG_TEST_JOBS or JOBS overrides; 1 runs
 * everything in this process, in order, with live output: for a debugger). Processes, not
 * threads: tests share the library's global state. A worker takes an area; when no area is
 * left to start, an idle worker shares the area with the most tests not yet begun (each test
 * is claimed once, in memory the processes share), so one slow area does not leave cores
 * idle. Tests must not depend on each other's state. Workers' stdout and stderr go to a file
 * per area, printed when the area ends — in full when anything in it failed (VERBOSE=1:
 * always) — with one line per area: tests passed, failed, skipped, seconds. A worker killed
 * inside a test fails that test, and another worker runs the rest of the area; a worker that
 * exits with a status its tests do not explain (LeakSanitizer's report after its last test)
 * fails its area.
 * Then the 10 slowest tests, and last "N passed, N failed"; the exit status is 1 iff N failed
 * is not 0. A test that makes no CHECK fails (it could not have failed); a skipped test (SKIP)
 * counts as neither passed nor failed and is listed under its area. */
#include <errno.h>
#include <limits.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include "harness.h"

#define MAX_TESTS 4096
#define MAX_CHILDREN 64
#define MAX_AREAS 256
#define MAX_JOBS 256
#define SLOWEST 10
#define WORKER_FAILED 3 /* a worker's exit status when a test failed; LeakSanitizer's is 1 */

typedef struct test_case {
  const char *name, *file;
  test_fn fn;
} test_case;

enum { T_NOT_RUN, T_RUNNING, T_PASSED, T_FAILED, T_SKIPPED };

/* What a test left: in memory shared with the workers, so it survives a worker's crash. */
typedef struct test_result {
  pid_t owner; /* the process that claimed it, 0 before: each test runs once */
  int state;
  double secs;
  char skip[160];
} test_result;

typedef struct area {
  char name[64];
  int first, end;  /* its tests: tests[first..end) */
  int workers;     /* its workers now running */
  bool given_up;   /* a worker died before running anything: start no more */
  FILE *out;       /* its workers' stdout and stderr */
  double t0, t1;   /* its first worker's start, its last worker's end */
  int bad_exits;   /* workers that exited with a status their tests do not explain */
} area;

static test_case tests[MAX_TESTS], children[MAX_CHILDREN];
static int ntests, nchildren;
static test_result *results;
static bool verbose;
static char skip_reason[160];
static bool skipped;
int harness_failed_checks, harness_checks;

void harness_register(const char *name, const char *file, test_fn fn) {
  if (ntests < MAX_TESTS) tests[ntests++] = (test_case){name, file, fn};
}

void harness_register_child(const char *name, test_fn fn) {
  if (nchildren < MAX_CHILDREN) children[nchildren++] = (test_case){name, NULL, fn};
}

void harness_skip(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(skip_reason, sizeof skip_reason, fmt, ap);
  va_end(ap);
  skipped = true;
}

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* ------------------------------------------------------------ child processes */

/* Whether the variable NAME=… in `var` is set by one of vars[]. */
static bool overridden(const char *var, char *const *vars, int nv) {
  size_t len = strcspn(var, "=");
  for (int i = 0; i < nv; i++)
    if (strncmp(var, vars[i], len) == 0 && vars[i][len] == '=') return true;
  return false;
}

/* Reads fd to its end into out (cap bytes, the rest is dropped). */
static void read_all(int fd, char *out, size_t cap) {
  size_t got = 0;
  char sink[4096];
  for (;;) {
    bool room = got + 1 < cap;
    ssize_t n = room ? read(fd, out + got, cap - 1 - got) : read(fd, sink, sizeof sink);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    if (room) got += (size_t)n;
  }
  if (cap) out[got] = 0;
}

int harness_run_child(const char *name, const char *env, char *out, size_t cap) {
  char self[PATH_MAX], extra[1024];
  ssize_t len = readlink("/proc/self/exe", self, sizeof self - 1);
  if (len <= 0) return snprintf(out, cap, "cannot find the test binary"), -1;
  self[len] = 0;
  /* the environment is built before fork: between fork and exec only async-signal-safe calls */
  extern char **environ;
  char *vars[64], *save = NULL;
  int nv = 0;
  snprintf(extra, sizeof extra, "%s", env ? env : "");
  for (char *t = strtok_r(extra, " ", &save); t && nv < 64; t = strtok_r(NULL, " ", &save)) vars[nv++] = t;
  size_t ne = 0, k = 0;
  while (environ[ne]) ne++;
  char **envp = malloc((ne + (size_t)nv + 1) * sizeof *envp);
  int fds[2];
  if (!envp || pipe(fds) < 0) return free(envp), snprintf(out, cap, "out of memory or pipes"), -1;
  for (int i = 0; i < nv; i++) envp[k++] = vars[i];
  for (size_t i = 0; i < ne; i++)
    if (!overridden(environ[i], vars, nv)) envp[k++] = environ[i];
  envp[k] = NULL;
  char *argv[] = {self, "--child", (char *)name, NULL};
  fflush(stdout);
  pid_t pid = fork();
  if (pid == 0) {
    dup2(fds[1], 1), dup2(fds[1], 2), close(fds[0]), close(fds[1]);
    execve(self, argv, envp);
    _exit(127);
  }
  free(envp);
  close(fds[1]);
  if (pid < 0) return close(fds[0]), snprintf(out, cap, "fork: %s", strerror(errno)), -1;
  read_all(fds[0], out, cap);
  close(fds[0]);
  int status;
  while (waitpid(pid, &status, 0) < 0)
    if (errno != EINTR) return -1;
  return WIFEXITED(status) ? WEXITSTATUS(status) : WIFSIGNALED(status) ? 128 + WTERMSIG(status) : -1;
}

/* `test_tg --child NAME`: exit status 0 iff the entry point's checks passed. */
static int run_child_entry(const char *name) {
  for (int i = 0; i < nchildren; i++) {
    if (strcmp(children[i].name, name)) continue;
    children[i].fn();
    if (harness_failed_checks) printf("FAIL %s (child)\n", name);
    fflush(stdout);
    return harness_failed_checks ? 1 : 0;
  }
  fprintf(stderr, "test_tg: no child entry point named %s\n", name);
  return 2;
}

/* ------------------------------------------------------------ running tests */

static void run_test(int i) {
  test_result *r = &results[i];
  harness_failed_checks = harness_checks = 0;
  skipped = false;
  tg_clear_error();
  r->state = T_RUNNING;
  double t0 = now();
  tests[i].fn();
  r->secs = now() - t0;
  if (skipped) snprintf(r->skip, sizeof r->skip, "%s", skip_reason);
  if (!harness_checks && !skipped) { /* returned before checking anything: it could not fail */
    harness_failed_checks++;
    printf("  %s made no CHECK\n", tests[i].name);
  }
  if (harness_failed_checks) {
    r->state = T_FAILED;
    printf("FAIL %s\n", tests[i].name);
  } else {
    r->state = skipped ? T_SKIPPED : T_PASSED;
    if (verbose) printf("%s %s\n", skipped ? "skip" : "ok  ", tests[i].name);
  }
  fflush(stdout);
}

static bool claim(int i) {
  pid_t none = 0;
  return __atomic_compare_exchange_n(&results[i].owner, &none, getpid(), false, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST);
}

/* Runs the tests of a that no process has claimed, from `from` to the area's end and then
 * from its start. Returns whether all it ran passed (or were skipped). */
static bool run_claims(const area *a, int from) {
  bool ok = true;
  int n = a->end - a->first;
  for (int k = 0; k < n; k++) {
    int i = a->first + (from - a->first + k) % n;
    if (!claim(i)) continue;
    run_test(i);
    ok &= results[i].state != T_FAILED;
  }
  return ok;
}

/* Tests of a not claimed yet; *mid: the middle one of them, where a second worker starts. */
static int unclaimed(const area *a, int *mid) {
  int n = 0, seen = 0;
  for (int i = a->first; i < a->end; i++) n += __atomic_load_n(&results[i].owner, __ATOMIC_SEQ_CST) == 0;
  for (int i = a->first; i < a->end; i++)
    if (__atomic_load_n(&results[i].owner, __ATOMIC_SEQ_CST) == 0 && seen++ == n / 2) *mid = i;
  return n;
}

static int count_state(const area *a, int state) {
  int n = 0;
  for (int i = a->first; i < a->end; i++) n += results[i].state == state;
  return n;
}

/* The area's line, its skips, and its output when something failed (or VERBOSE). */
static void report_area(const area *a) {
  int failed = count_state(a, T_FAILED) + a->bad_exits, nskip = count_state(a, T_SKIPPED);
  int notrun = count_state(a, T_NOT_RUN);
  if (a->out && (failed || verbose)) {
    fflush(a->out);
    rewind(a->out);
    char buf[4096];
    for (size_t n; (n = fread(buf, 1, sizeof buf, a->out)) > 0;) fwrite(buf, 1, n, stdout);
  }
  printf("%-14s %4d passed %3d failed", a->name, count_state(a, T_PASSED), failed);
  if (nskip) printf(" %3d skipped", nskip);
  if (notrun) printf(" %3d not run", notrun);
  printf(" %7.1f s\n", a->t1 - a->t0);
  for (int i = a->first; i < a->end; i++)
    if (results[i].state == T_SKIPPED) printf("  skip %s: %s\n", tests[i].name, results[i].skip);
  fflush(stdout);
}

/* What the runner saw (a crash, an exit status) goes into the area's output where it happened:
 * at its end, before what later workers write. */
static void note(area *a, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void note(area *a, const char *fmt, ...) {
  FILE *f = a->out ? a->out : stdout;
  va_list ap;
  va_start(ap, fmt);
  fseek(f, 0, SEEK_END);
  vfprintf(f, fmt, ap);
  fflush(f);
  va_end(ap);
}

/* LeakSanitizer's check (present only in a sanitizer build). A worker runs it after its last
 * test, while every thread is idle, rather than at exit: there it raced with PoCL's threads
 * shutting down and LeakSanitizer's tracer crashed (once in six ASan runs of the suite). Its
 * report and exit status are the same, and the check at exit then does nothing. */
extern void __lsan_do_leak_check(void) __attribute__((weak));

/* Forks a worker for a's unclaimed tests from `from`; returns its pid, or 0 when fork failed
 * and they ran in this process instead (no isolation, but no lost tests). */
static pid_t start_worker(area *a, int from) {
  fflush(stdout), fflush(stderr);
  if (!a->workers && !a->t0) a->t0 = now();
  pid_t pid = fork();
  if (pid == 0) {
    dup2(fileno(a->out), 1), dup2(fileno(a->out), 2);
    bool ok = run_claims(a, from);
    if (__lsan_do_leak_check) __lsan_do_leak_check();
    exit(ok ? 0 : WORKER_FAILED);
  }
  if (pid < 0) {
    note(a, "  fork failed (%s): tests ran in the runner\n", strerror(errno));
    run_claims(a, from);
    a->t1 = now();
    return 0;
  }
  a->workers++;
  return pid;
}

static void describe_status(char *buf, size_t n, int status) {
  if (WIFSIGNALED(status)) snprintf(buf, n, "was killed by signal %d (%s)", WTERMSIG(status), strsignal(WTERMSIG(status)));
  else snprintf(buf, n, "exited with status %d", WEXITSTATUS(status));
}

/* Worker pid of area a ended with status: a test it claimed but did not finish failed
 * (it crashed there); else its status must be what its tests say. */
static void worker_ended(area *a, pid_t pid, int status) {
  char what[128];
  describe_status(what, sizeof what, status);
  a->workers--;
  a->t1 = now();
  bool ok = true, crashed = false;
  int ran = 0;
  for (int i = a->first; i < a->end; i++) {
    test_result *r = &results[i];
    if (r->owner != pid) continue;
    ran++;
    if (r->state == T_PASSED || r->state == T_SKIPPED) continue;
    ok = false;
    if (r->state == T_FAILED) continue;
    r->state = T_FAILED;
    crashed = true;
    note(a, "FAIL %s: its worker %s during the test\n", tests[i].name, what);
  }
  if (crashed || (WIFEXITED(status) && WEXITSTATUS(status) == (ok ? 0 : WORKER_FAILED))) return;
  note(a, "FAIL %s: a worker %s after its last test (a report it made then, such as a leak, is above)\n", a->name, what);
  a->bad_exits++;
  a->given_up |= ran == 0;
}

/* The running area with the most unclaimed tests (at least 2), for an idle worker. */
static area *area_to_share(area *areas, int nstarted, int *from) {
  area *best = NULL;
  int most = 1;
  for (int k = 0; k < nstarted; k++) {
    int mid = 0, n = areas[k].workers ? unclaimed(&areas[k], &mid) : 0;
    if (n > most) most = n, best = &areas[k], *from = mid;
  }
  return best;
}

/* Prints the area's report and closes its output file. */
static void finish_area(area *a) {
  if (a->out == stdout) a->out = NULL; /* its output went straight out already */
  report_area(a);
  if (a->out) fclose(a->out);
  a->out = NULL;
}

typedef struct worker {
  pid_t pid;
  area *a;
} worker;

static void run_parallel(area *areas, int nareas, int jobs) {
  static worker ws[MAX_JOBS];
  int nw = 0, started = 0;
  for (;;) {
    while (nw < jobs) { /* a new area, else a share of a running one */
      area *a = NULL;
      int from = 0;
      if (started < nareas) {
        a = &areas[started++], from = a->first;
        a->out = tmpfile();
        if (!a->out) a->out = stdout, note(a, "  no temporary file (%s): output goes straight out\n", strerror(errno));
      } else if (!(a = area_to_share(areas, started, &from))) {
        break;
      }
      pid_t pid = start_worker(a, from);
      if (pid) ws[nw++] = (worker){pid, a};
      else if (!a->workers) finish_area(a);
    }
    if (nw == 0) break;
    int status, from = 0;
    pid_t pid = waitpid(-1, &status, 0);
    if (pid < 0 && errno == EINTR) continue;
    if (pid < 0) break;
    int k = 0;
    while (k < nw && ws[k].pid != pid) k++;
    if (k == nw) continue;
    area *a = ws[k].a;
    ws[k] = ws[--nw];
    worker_ended(a, pid, status);
    if (a->workers) continue;
    if (!a->given_up && unclaimed(a, &from) > 0) { /* after a crash: the rest of the area */
      pid_t again = start_worker(a, from);
      if (again) {
        ws[nw++] = (worker){again, a};
        continue;
      }
    }
    finish_area(a);
  }
}

static void run_serial(area *areas, int nareas) {
  for (int i = 0; i < nareas; i++) {
    areas[i].t0 = now();
    run_claims(&areas[i], areas[i].first);
    areas[i].t1 = now();
    report_area(&areas[i]);
  }
}

/* ------------------------------------------------------------ areas and summary */

/* "tests/test_opt.c" → "opt". */
static void area_name(const char *file, char *buf, size_t n) {
  const char *base = strrchr(file, '/');
  base = base ? base + 1 : file;
  if (!strncmp(base, "test_", 5)) base += 5;
  snprintf(buf, n, "%.*s", (int)strcspn(base, "."), base);
}

static int by_area_then_name(const void *pa, const void *pb) {
  const test_case *a = pa, *b = pb;
  int c = strcmp(a->file, b->file);
  return c ? c : strcmp(a->name, b->name);
}

/* Keeps the tests matching filter, sorted, and cuts them into areas; returns the count. */
static int make_areas(const char *filter, area *areas) {
  int kept = 0, nareas = 0;
  for (int i = 0; i < ntests; i++)
    if (!filter || strstr(tests[i].name, filter)) tests[kept++] = tests[i];
  ntests = kept;
  qsort(tests, (size_t)ntests, sizeof tests[0], by_area_then_name);
  for (int i = 0; i < ntests; i++) {
    if (i > 0 && !strcmp(tests[i].file, tests[i - 1].file)) continue;
    if (nareas == MAX_AREAS) break;
    area *a = &areas[nareas++];
    memset(a, 0, sizeof *a);
    area_name(tests[i].file, a->name, sizeof a->name);
    a->first = i;
  }
  for (int k = 0; k < nareas; k++) areas[k].end = k + 1 < nareas ? areas[k + 1].first : ntests;
  return nareas;
}

static int by_time_desc(const void *pa, const void *pb) {
  double a = results[*(const int *)pa].secs, b = results[*(const int *)pb].secs;
  return (a < b) - (a > b);
}

static void print_slowest(void) {
  static int order[MAX_TESTS];
  int n = 0;
  for (int i = 0; i < ntests; i++)
    if (results[i].state != T_NOT_RUN) order[n++] = i;
  if (n < 2) return;
  qsort(order, (size_t)n, sizeof order[0], by_time_desc);
  printf("slowest tests:\n");
  for (int k = 0; k < n && k < SLOWEST; k++) {
    char an[64];
    area_name(tests[order[k]].file, an, sizeof an);
    printf("  %7.2f s  %s (%s)\n", results[order[k]].secs, tests[order[k]].name, an);
  }
}

/* Workers at once: TG_TEST_JOBS, JOBS, or the online cores. 0 means no workers at all (the
 * serial in-process run), only when asked for with 1. */
static int jobs_wanted(void) {
  const char *v = getenv("TG_TEST_JOBS");
  if (!v || !*v) v = getenv("JOBS");
  if (v && *v) return atoi(v) <= 1 ? 0 : atoi(v);
  long online = sysconf(_SC_NPROCESSORS_ONLN);
  return online > 1 ? (int)online : 1;
}

int main(int argc, char **argv) {
  setvbuf(stdout, NULL, _IOLBF, 0); /* workers inherit it: their lines interleave with stderr in order */
  if (argc > 2 && !strcmp(argv[1], "--child")) return run_child_entry(argv[2]);
  verbose = getenv("VERBOSE") && *getenv("VERBOSE");
  static area areas[MAX_AREAS];
  int nareas = make_areas(argc > 1 ? argv[1] : NULL, areas), jobs = jobs_wanted();
  if (ntests == 0) return fprintf(stderr, "test_tg: no test name contains \"%s\"\n", argc > 1 ? argv[1] : ""), 2;
  results = mmap(NULL, sizeof *results * MAX_TESTS, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (results == MAP_FAILED) return perror("test_tg: mmap"), 2;
  if (jobs > MAX_JOBS) jobs = MAX_JOBS;
  if (jobs) printf("test_tg: %d tests in %d areas, %d worker%s at a time\n", ntests, nareas, jobs, jobs > 1 ? "s" : "");
  else printf("test_tg: %d tests in %d areas, in this process\n", ntests, nareas);
  double t0 = now();
  if (jobs) run_parallel(areas, nareas, jobs);
  else run_serial(areas, nareas);
  print_slowest();
  int passed = 0, failed = 0;
  for (int i = 0; i < ntests; i++) passed += results[i].state == T_PASSED, failed += results[i].state == T_FAILED;
  for (int k = 0; k < nareas; k++) failed += areas[k].bad_exits;
  printf("test_tg: %.1f s\n%d passed, %d failed\n", now() - t0, passed, failed);
  return failed ? 1 : 0;
}
