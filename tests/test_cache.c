/* test_cache.c — the disk cache heals: a broken entry (garbage, truncated, unloadable) is
 * removed and rebuilt, an unusable cache directory falls back to a private temp directory with
 * one warning, and two processes filling (or healing) one cache at once both succeed.
 *
 * The in-memory program cache means a process never reloads a kernel it has, so most scenarios
 * run in a fresh process: the child entry point cache_child_scenario (`test_tg --child
 * cache_child_scenario`, with TG_CACHE_CHILD naming the scenario and a TG_CACHE_DIR of its own,
 * a fresh mkdtemp directory removed after) realizes and prints one "RESULT …" line that the
 * parent parses; the parent also counts the child's warnings and healing messages on stderr.
 * The module's own calls (entry names, stores, lookups, the ELF check) are tested in this
 * process. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include "harness.h"
#include "codegen/codegen.h"
#include "device/disk_cache.h"

/* ------------------------------------------------------------ helpers */

/* The test graph: (x * k + 1) summed over its last axis, for x = 0 .. 2n-1 as (2, n). Its
 * kernel depends on n (k is a kernel argument). Returns the status; out gets the two sums. */
static int run_graph(double k, int n, float out[2]) {
  tg_scope *s = tg_scope_begin();
  tg_tensor *x = tg_reshape(tg_arange(0, 2 * n, 1, TG_FLOAT32), (int64_t[]){2, n}, 2);
  const int ax[] = {1};
  tg_tensor *y = tg_sum(tg_add_s(tg_mul_s(x, k), 1.0), ax, 1, false);
  out[0] = out[1] = NAN;
  int rc = y ? tg_to_host(y, out, 2 * sizeof(float)) : TG_ERR_ARG;
  tg_scope_end(s);
  return rc;
}

/* The sums by hand: k * (0 + .. + n-1) + n and k * (n + .. + 2n-1) + n. */
static bool graph_values_ok(double k, int n, const float out[2]) {
  double first = n * (n - 1) / 2.0, second = first + (double)n * n;
  return harness_close(out[0], k * first + n, 1e-5, 1e-5) && harness_close(out[1], k * second + n, 1e-5, 1e-5);
}

static const char *self_exe(void) {
  static char path[PATH_MAX];
  if (!path[0]) {
    ssize_t n = readlink("/proc/self/exe", path, sizeof path - 1);
    path[n > 0 ? n : 0] = 0;
  }
  return path;
}

static bool make_temp_dir(char *buf, size_t n) {
  snprintf(buf, n, "/tmp/tg-cachetest-XXXXXX");
  return mkdtemp(buf) != NULL;
}

static void remove_tree(const char *dir) {
  char cmd[PATH_MAX + 32];
  snprintf(cmd, sizeof cmd, "chmod -R u+rwx '%s' 2>/dev/null; rm -rf '%s'", dir, dir);
  if (system(cmd) != 0) printf("  could not remove %s\n", dir);
}

static bool ends_with(const char *s, const char *suffix) {
  size_t a = strlen(s), b = strlen(suffix);
  return a >= b && !strcmp(s + a - b, suffix);
}

/* Entries in dir whose name ends with suffix ("" for all); -1 if unreadable. */
static int count_files(const char *dir, const char *suffix) {
  DIR *d = opendir(dir);
  if (!d) return -1;
  int n = 0;
  for (struct dirent *e; (e = readdir(d));)
    n += strcmp(e->d_name, ".") && strcmp(e->d_name, "..") && ends_with(e->d_name, suffix);
  closedir(d);
  return n;
}

/* Apply fn to every file in dir ending with suffix; how many. */
static int for_each_file(const char *dir, const char *suffix, void (*fn)(const char *path, void *ctx), void *ctx) {
  DIR *d = opendir(dir);
  if (!d) return 0;
  int n = 0;
  char path[PATH_MAX + 300];
  for (struct dirent *e; (e = readdir(d));) {
    if (!ends_with(e->d_name, suffix) || !strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
    snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
    fn(path, ctx), n++;
  }
  closedir(d);
  return n;
}

static long file_size(const char *path) {
  struct stat st;
  return stat(path, &st) == 0 ? (long)st.st_size : -1;
}

static bool write_file(const char *path, const void *data, size_t n) {
  FILE *f = fopen(path, "wb");
  bool ok = f && fwrite(data, 1, n, f) == n;
  return f && fclose(f) == 0 && ok;
}

/* How an entry is broken: as a crash, a full disk or bit rot can leave it. */
typedef enum { BREAK_GARBAGE, BREAK_EMPTY, BREAK_HALF, BREAK_HEADER_ONLY, BREAK_TAIL, BREAK_LAST_DIGIT } break_kind;
static const char *const break_names[] = {"garbage", "empty", "half", "header only", "tail cut", "cut before the last digit"};

/* Bytes kept of a file of n bytes broken as how. */
static size_t kept_bytes(break_kind how, const char *buf, size_t n) {
  size_t last = n;
  while (last > 0 && !(buf[last - 1] >= '0' && buf[last - 1] <= '9')) last--;
  switch (how) {
    case BREAK_EMPTY: return 0;
    case BREAK_HALF: return n / 2;
    case BREAK_TAIL: return n > 5 ? n - 5 : 0;
    case BREAK_LAST_DIGIT: return last ? last - 1 : 0; /* "1 0 16" becomes "1 0 1" */
    default: return n;
  }
}

static void break_entry(const char *path, void *ctx) {
  break_kind how = *(const break_kind *)ctx;
  long size = file_size(path);
  char *buf = calloc(1, (size_t)(size > 0 ? size : 1));
  FILE *f = fopen(path, "rb");
  size_t got = f && buf ? fread(buf, 1, (size_t)size, f) : 0;
  if (f) fclose(f);
  if (how == BREAK_GARBAGE) for (long i = 0; i < size; i++) buf[i] = "not an object file\n"[i % 19];
  if (how == BREAK_HEADER_ONLY) memset(buf + 64, 0, (size_t)size > 64 ? (size_t)size - 64 : 0); /* dlopen refuses it */
  if (!buf || !write_file(path, buf, kept_bytes(how, buf, got))) printf("  could not break %s\n", path);
  free(buf);
}

static void check_elf_entry(const char *path, void *ctx) {
  char why[256] = "";
  if (disk_cache_check_elf(path, why, sizeof why)) return;
  ++*(int *)ctx;
  printf("  %s: %s\n", path, why);
}

/* Every .so in dir is a whole shared object, and nothing else (no temp files) is there. */
static bool cache_is_clean(const char *dir) {
  int bad = 0, n = for_each_file(dir, ".so", check_elf_entry, &bad);
  int all = count_files(dir, "");
  if (all != n) printf("  %s holds %d files, %d of them .so\n", dir, all, n);
  return n >= 1 && bad == 0 && all == n;
}

/* ------------------------------------------------------------ children */

typedef struct child_result {
  bool ran; /* a RESULT line was printed */
  int rc;
  unsigned long long compiled, hits, removed, searches, beam_hits;
  int values_ok;
  int warnings, healed; /* lines on stderr: "tg: warning", "broken entry" */
  char err[512];
} child_result;

/* The child side: TG_CACHE_CHILD "one" realizes the graph for TG_CACHE_K (default 1.5) and
 * TG_CACHE_N (default 3), "two" also for K + 0.5 and N + 1 (a second kernel), "race" first
 * says it is ready and waits for the parent's go. */
TEST_CHILD(cache_child_scenario) {
  const char *scenario = getenv("TG_CACHE_CHILD");
  CHECK(scenario != NULL);
  if (!scenario) return;
  double k = atof(getenv("TG_CACHE_K") ? getenv("TG_CACHE_K") : "1.5");
  int n = atoi(getenv("TG_CACHE_N") ? getenv("TG_CACHE_N") : "3");
  if (!strcmp(scenario, "race")) { /* tell the parent we are ready, then wait for its go */
    char c = 'r';
    if (write(atoi(getenv("TG_CACHE_READY_FD")), &c, 1) != 1 || read(atoi(getenv("TG_CACHE_GO_FD")), &c, 1) != 1)
      printf("  race child: no go\n");
  }
  float out[2], out2[2];
  tg_reset_stats();
  int rc = run_graph(k, n, out), ok = graph_values_ok(k, n, out);
  if (!strcmp(scenario, "two")) {
    int rc2 = run_graph(k + 0.5, n + 1, out2);
    rc = rc ? rc : rc2, ok = ok && graph_values_ok(k + 0.5, n + 1, out2);
  }
  tg_stats st = tg_get_stats();
  printf("RESULT rc=%d compiled=%llu hits=%llu removed=%llu searches=%llu beam_hits=%llu values_ok=%d err=%s\n", rc,
         (unsigned long long)st.kernels_compiled, (unsigned long long)st.disk_cache_hits,
         (unsigned long long)disk_cache_removed, (unsigned long long)tg_beam_searches,
         (unsigned long long)tg_beam_cache_hits, ok, tg_last_error());
  fflush(stdout);
}


static void parse_line(child_result *r, const char *line) {
  r->warnings += strstr(line, "tg: warning") != NULL;
  r->healed += strstr(line, "broken entry") != NULL;
  int off = 0;
  if (sscanf(line, "RESULT rc=%d compiled=%llu hits=%llu removed=%llu searches=%llu beam_hits=%llu values_ok=%d err=%n",
             &r->rc, &r->compiled, &r->hits, &r->removed, &r->searches, &r->beam_hits, &r->values_ok, &off) == 7) {
    r->ran = true;
    snprintf(r->err, sizeof r->err, "%s", line + off);
    r->err[strcspn(r->err, "\n")] = 0;
  }
}

static void report(const child_result *r, int status, const char *env) {
  if (!r->ran || r->rc != 0 || status != 0)
    printf("  child (%s): ran %d rc %d status %d err \"%s\"\n", env, r->ran, r->rc, status, r->err);
}

/* Run scenario in a fresh process with extra environment ("A=1 B=2"). */
static child_result run_child(const char *scenario, const char *env) {
  static char out[1 << 16];
  char full[768];
  /* .so entries only (test_llvm.c: DEV=LLVM's); the offline CUDA check would add its own */
  snprintf(full, sizeof full, "DEV=CPU TG_CUDA_CHECK=0 %s TG_CACHE_CHILD=%s", env, scenario);
  int status = harness_run_child("cache_child_scenario", full, out, sizeof out);
  child_result r = {0};
  for (char *save = NULL, *line = strtok_r(out, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) parse_line(&r, line);
  report(&r, status, full);
  return r;
}

/* Two at once (harness_run_child waits for its child): start one with popen, finish it later. */
static FILE *start_child(const char *scenario, const char *env) {
  char cmd[PATH_MAX + 1024];
  snprintf(cmd, sizeof cmd, "env DEV=CPU TG_CUDA_CHECK=0 %s TG_CACHE_CHILD=%s '%s' --child cache_child_scenario 2>&1", env, scenario, self_exe());
  return popen(cmd, "r");
}

static child_result finish_child(FILE *p, const char *env) {
  child_result r = {0};
  char line[2048];
  while (p && fgets(line, sizeof line, p)) parse_line(&r, line);
  report(&r, p ? pclose(p) : -1, env);
  return r;
}

/* A child that realized correctly. */
static bool good(const child_result *r) { return r->ran && r->rc == 0 && r->values_ok; }

/* ------------------------------------------------------------ broken entries */

/* Each way of breaking the entries: the next process (DEBUG=1) says it removed them, compiles
 * them again and computes the right values; the cache ends whole, and the process after that
 * loads it. */
TEST(cache_broken_entry_is_removed_and_rebuilt) {
  static const break_kind kinds[] = {BREAK_GARBAGE, BREAK_EMPTY, BREAK_HALF, BREAK_HEADER_ONLY, BREAK_TAIL};
  for (size_t i = 0; i < sizeof kinds / sizeof kinds[0]; i++) {
    char dir[64], env[300];
    CHECK(make_temp_dir(dir, sizeof dir));
    snprintf(env, sizeof env, "TG_CACHE_DIR=%s TG_CACHE_K=%g DEBUG=1", dir, 5.25 + (double)i);
    child_result a = run_child("one", env);
    CHECK(good(&a) && a.compiled >= 1 && a.hits == 0);
    int n = for_each_file(dir, ".so", break_entry, (void *)&kinds[i]);
    CHECK(n >= 1 && (unsigned long long)n == a.compiled);
    child_result b = run_child("one", env);
    CHECK(good(&b));
    CHECK(b.hits == 0 && b.compiled == a.compiled);               /* compiled again, none loaded */
    CHECK(b.removed == (unsigned long long)n && b.healed == n);   /* each removed with a message */
    CHECK(cache_is_clean(dir));
    child_result c = run_child("one", env);
    CHECK(good(&c) && c.hits == c.compiled && c.removed == 0 && c.healed == 0); /* healed for good */
    if (!good(&b) || b.removed != (unsigned long long)n) printf("  broken entry: %s\n", break_names[kinds[i]]);
    remove_tree(dir);
  }
}

/* A temp file left by a killed process is removed once it is an hour old; a young one (a
 * compile in progress elsewhere) is left alone. */
TEST(cache_stale_temp_files_are_swept) {
  char dir[64], env[300], old[128], young[128];
  CHECK(make_temp_dir(dir, sizeof dir));
  snprintf(old, sizeof old, "%s/0123.so.tmp-AbCdEf", dir), snprintf(young, sizeof young, "%s/4567.so.tmp-GhIjKl", dir);
  CHECK(write_file(old, "half an object", 14) && write_file(young, "half an object", 14));
  struct timespec times[2] = {{.tv_sec = time(NULL) - 7200}, {.tv_sec = time(NULL) - 7200}};
  CHECK(utimensat(AT_FDCWD, old, times, 0) == 0);
  snprintf(env, sizeof env, "TG_CACHE_DIR=%s TG_CACHE_K=8.5", dir);
  child_result r = run_child("one", env);
  CHECK(good(&r));
  CHECK(file_size(old) == -1 && file_size(young) == 14);
  remove_tree(dir);
}

/* ------------------------------------------------------------ unusable directory */

/* One child with an unusable cache directory dir, realizing two kernels: both right, one
 * warning, the private temp directory (under tmpdir) gone after it exits. */
static void check_fallback(const char *dir, const char *tmpdir, double k) {
  char env[512];
  snprintf(env, sizeof env, "TG_CACHE_DIR=%s TMPDIR=%s TG_CACHE_K=%g", dir, tmpdir, k);
  child_result r = run_child("two", env);
  CHECK(good(&r) && r.compiled >= 2 && r.hits == 0);
  CHECK(r.warnings == 1);
  CHECK(count_files(tmpdir, "") == 0);
  if (r.warnings != 1) printf("  %s: %d warnings\n", dir, r.warnings);
}

/* A regular file, and a path under a regular file, as the cache directory: both fall back,
 * and the file is left as it was. CACHELEVEL=0 never looks at the directory: no warning. */
TEST(cache_unusable_dir_falls_back_with_one_warning) {
  char top[64], file[128], under[160], tmpdir[128], env[512];
  CHECK(make_temp_dir(top, sizeof top));
  snprintf(file, sizeof file, "%s/file", top), snprintf(tmpdir, sizeof tmpdir, "%s/tmp", top);
  snprintf(under, sizeof under, "%s/sub", file);
  CHECK(write_file(file, "keep\n", 5) && mkdir(tmpdir, 0700) == 0);
  check_fallback(file, tmpdir, 9.75);
  check_fallback(under, tmpdir, 10.75);
  CHECK(file_size(file) == 5);
  snprintf(env, sizeof env, "TG_CACHE_DIR=%s TMPDIR=%s CACHELEVEL=0 TG_CACHE_K=12.5", file, tmpdir);
  child_result r = run_child("one", env);
  CHECK(good(&r) && r.warnings == 0 && count_files(tmpdir, "") == 0);
  remove_tree(top);
}

/* Whether a file can be created in dir (root ignores a read-only mode). */
static bool can_create_in(const char *dir) {
  char path[PATH_MAX];
  snprintf(path, sizeof path, "%s/probe", dir);
  int fd = open(path, O_WRONLY | O_CREAT | O_EXCL, 0600);
  if (fd < 0) return false;
  close(fd);
  unlink(path);
  return true;
}

/* A read-only directory (mode 0500) falls back too, and stays empty. Root writes there anyway
 * (the test above makes directories unusable to root too). */
TEST(cache_readonly_dir_falls_back_with_one_warning) {
  char top[64], ro[128], tmpdir[128];
  CHECK(make_temp_dir(top, sizeof top));
  snprintf(ro, sizeof ro, "%s/ro", top), snprintf(tmpdir, sizeof tmpdir, "%s/tmp", top);
  CHECK(mkdir(ro, 0500) == 0 && mkdir(tmpdir, 0700) == 0);
  if (can_create_in(ro)) {
    remove_tree(top);
    SKIP("running as root: a read-only directory is writable");
  }
  check_fallback(ro, tmpdir, 11.75);
  CHECK(count_files(ro, "") == 0);
  remove_tree(top);
}

/* BEAM's choices go to the same cache: with an unusable directory a BEAM=1 run still works
 * (one warning), searching into the private directory. */
TEST(cache_unusable_dir_with_beam) {
  char top[64], file[128], env[512];
  CHECK(make_temp_dir(top, sizeof top));
  snprintf(file, sizeof file, "%s/file", top);
  CHECK(write_file(file, "keep\n", 5));
  snprintf(env, sizeof env, "TG_CACHE_DIR=%s TMPDIR=%s BEAM=1 BEAM_CANDIDATES=3 TG_CACHE_K=13.5", file, top);
  child_result r = run_child("one", env);
  CHECK(good(&r) && r.warnings == 1 && r.searches >= 1);
  CHECK(count_files(top, "") == 1); /* just the file: the private directory is gone */
  remove_tree(top);
}

/* ------------------------------------------------------------ two processes at once */

/* Two children on one cache, released together once both are ready. */
static void race(const char *env, child_result out[2]) {
  int ready[2], go[2];
  out[0] = out[1] = (child_result){0};
  if (pipe(ready) < 0) return;
  if (pipe(go) < 0) { close(ready[0]), close(ready[1]); return; }
  char full[768];
  snprintf(full, sizeof full, "%s TG_CACHE_READY_FD=%d TG_CACHE_GO_FD=%d", env, ready[1], go[0]);
  FILE *p[2] = {start_child("race", full), start_child("race", full)};
  close(ready[1]);
  struct pollfd pfd = {.fd = ready[0], .events = POLLIN};
  char c[2];
  for (int got = 0; got < 2 && poll(&pfd, 1, 60000) > 0 && read(ready[0], c, 1) == 1;) got++;
  if (write(go[1], "gg", 2) != 2) printf("  race: cannot release the children\n");
  for (int i = 0; i < 2; i++) out[i] = finish_child(p[i], "race");
  close(ready[0]), close(go[0]), close(go[1]);
}

/* Both compile the same new kernel into an empty cache at the same moment: both succeed with
 * the right values, and the cache holds one whole entry per kernel and no temp files. A race
 * where one child found the other's entry (it was scheduled late) is run again, up to 3 times. */
TEST(cache_two_processes_fill_one_cache) {
  bool raced = false;
  for (int attempt = 0; attempt < 3 && !raced; attempt++) {
    char dir[64], env[300];
    CHECK(make_temp_dir(dir, sizeof dir));
    snprintf(env, sizeof env, "TG_CACHE_DIR=%s TG_CACHE_K=%g", dir, 14.25 + attempt);
    child_result r[2];
    race(env, r);
    CHECK(good(&r[0]) && good(&r[1]));
    CHECK(r[0].compiled >= 1 && r[0].compiled == r[1].compiled);
    raced = r[0].hits == 0 && r[1].hits == 0; /* both compiled */
    CHECK(count_files(dir, ".so") == (int)r[0].compiled && cache_is_clean(dir));
    remove_tree(dir);
  }
  CHECK(raced);
}

/* CACHELEVEL=0: two processes compiling the same kernel at once must not share a work file
 * (each compiles in its own private directory), whatever the timing: several rounds. */
TEST(cache_two_processes_without_disk_cache) {
  char tmpdir[64], env[300];
  CHECK(make_temp_dir(tmpdir, sizeof tmpdir));
  for (int round = 0; round < 6; round++) {
    snprintf(env, sizeof env, "CACHELEVEL=0 TMPDIR=%s TG_CACHE_K=%g", tmpdir, 18.5 + round);
    child_result r[2];
    race(env, r);
    CHECK(good(&r[0]) && good(&r[1]) && r[0].hits == 0 && r[1].hits == 0);
  }
  CHECK(count_files(tmpdir, "") == 0); /* each private directory was removed at exit */
  remove_tree(tmpdir);
}

/* Both find the same broken entries at once: both heal (removing what the other may already
 * have replaced is harmless), both succeed, and the cache ends whole. */
TEST(cache_two_processes_heal_one_entry) {
  char dir[64], env[300];
  CHECK(make_temp_dir(dir, sizeof dir));
  snprintf(env, sizeof env, "TG_CACHE_DIR=%s TG_CACHE_K=15.125", dir);
  child_result a = run_child("one", env);
  CHECK(good(&a));
  break_kind how = BREAK_GARBAGE;
  CHECK(for_each_file(dir, ".so", break_entry, &how) >= 1);
  child_result r[2];
  race(env, r);
  CHECK(good(&r[0]) && good(&r[1]));
  CHECK(r[0].removed + r[1].removed >= 1);
  CHECK(count_files(dir, ".so") == (int)a.compiled && cache_is_clean(dir));
  remove_tree(dir);
}

/* ------------------------------------------------------------ BEAM entries */

static void check_beam_entry(const char *path, void *ctx) {
  FILE *f = fopen(path, "r");
  char text[4096] = "";
  size_t got = f ? fread(text, 1, sizeof text - 1, f) : 0;
  if (f) fclose(f);
  text[got] = 0;
  if (ends_with(text, "\nend\n")) return;
  ++*(int *)ctx;
  printf("  %s: \"%s\"\n", path, text);
}

/* A BEAM entry broken as garbage, empty, or cut inside its last number is not used: the search
 * runs again, the right values come out, and the entry is written whole again (a later run
 * takes it from the cache). */
TEST(cache_broken_beam_entry_searches_again) {
  static const break_kind kinds[] = {BREAK_GARBAGE, BREAK_EMPTY, BREAK_LAST_DIGIT};
  char dir[64], env[300];
  CHECK(make_temp_dir(dir, sizeof dir));
  snprintf(env, sizeof env, "TG_CACHE_DIR=%s BEAM=1 BEAM_CANDIDATES=3 TG_CACHE_K=16.5", dir);
  child_result a = run_child("one", env);
  CHECK(good(&a) && a.searches >= 1 && a.beam_hits == 0);
  for (size_t i = 0; i < sizeof kinds / sizeof kinds[0]; i++) {
    CHECK(for_each_file(dir, ".txt", break_entry, (void *)&kinds[i]) == (int)a.searches);
    child_result b = run_child("one", env);
    CHECK(good(&b) && b.searches == a.searches && b.beam_hits == 0);
    int bad = 0;
    CHECK(for_each_file(dir, ".txt", check_beam_entry, &bad) == (int)a.searches && bad == 0);
    if (b.searches != a.searches) printf("  broken BEAM entry (%s) was used\n", break_names[kinds[i]]);
  }
  child_result c = run_child("one", env);
  CHECK(good(&c) && c.searches == 0 && c.beam_hits == a.searches);
  remove_tree(dir);
}

/* ------------------------------------------------------------ the module, in this process */

/* Point the cache at dir for the rest of a test (NULL: back to what it was). */
static void use_cache_dir(const char *dir) {
  static char *saved;
  static bool active;
  if (dir && !active) {
    const char *old = getenv("TG_CACHE_DIR");
    saved = old ? strdup(old) : NULL, active = true;
  }
  if (dir) { setenv("TG_CACHE_DIR", dir, 1); return; }
  if (saved) setenv("TG_CACHE_DIR", saved, 1);
  else unsetenv("TG_CACHE_DIR");
  free(saved), saved = NULL, active = false;
}

/* Names: the same parts give the same name, order and boundaries matter, prefix and suffix. */
TEST(cache_module_key) {
  const char *a[] = {"int f(){}", "cc", "-O2"}, *b[] = {"int f(){}", "-O2", "cc"}, *c[] = {"int f(){}c", "c", "-O2"};
  char n1[128], n2[128], n3[128], n4[128];
  disk_cache_key(n1, sizeof n1, "k-", a, 3, ".so"), disk_cache_key(n2, sizeof n2, "k-", a, 3, ".so");
  disk_cache_key(n3, sizeof n3, "k-", b, 3, ".so"), disk_cache_key(n4, sizeof n4, "k-", c, 3, ".so");
  CHECK(!strcmp(n1, n2) && strcmp(n1, n3) && strcmp(n1, n4));
  CHECK(strlen(n1) == 2 + 32 + 3 && !strncmp(n1, "k-", 2) && ends_with(n1, ".so"));
  CHECK(strspn(n1 + 2, "0123456789abcdef") == 32);
}

/* Write, find, and a broken entry found, removed and counted; CACHELEVEL=0 stores nothing. */
TEST(cache_module_write_find_remove) {
  char dir[64], path[PATH_MAX], want[PATH_MAX + 16];
  CHECK(make_temp_dir(dir, sizeof dir));
  use_cache_dir(dir);
  snprintf(want, sizeof want, "%s/entry.txt", dir);
  CHECK(disk_cache_find("entry.txt", disk_cache_check_nonempty, path, sizeof path) == 0); /* none yet */
  disk_cache_write("entry.txt", "hello\n", 6);
  CHECK(file_size(want) == 6 && count_files(dir, "") == 1); /* no temp file left */
  CHECK(disk_cache_find("entry.txt", disk_cache_check_nonempty, path, sizeof path) == 1 && !strcmp(path, want));
  uint64_t removed = disk_cache_removed;
  disk_cache_write("entry.txt", "", 0); /* replaced by an empty (broken) entry */
  CHECK(file_size(want) == 0);
  CHECK(disk_cache_find("entry.txt", disk_cache_check_nonempty, path, sizeof path) == 0);
  CHECK(file_size(want) == -1 && disk_cache_removed == removed + 1);
  setenv("CACHELEVEL", "0", 1);
  disk_cache_write("off.txt", "x", 1);
  CHECK(count_files(dir, "") == 0 && disk_cache_find("off.txt", NULL, path, sizeof path) == 0);
  unsetenv("CACHELEVEL");
  use_cache_dir(NULL);
  remove_tree(dir);
}

/* The directory removed while the process runs: the next store makes it again. */
TEST(cache_module_dir_removed_while_running) {
  char dir[64], path[PATH_MAX];
  CHECK(make_temp_dir(dir, sizeof dir));
  use_cache_dir(dir);
  disk_cache_write("a.txt", "a\n", 2);
  CHECK(disk_cache_find("a.txt", disk_cache_check_nonempty, path, sizeof path) == 1);
  remove_tree(dir);
  disk_cache_write("b.txt", "b\n", 2);
  CHECK(disk_cache_find("b.txt", disk_cache_check_nonempty, path, sizeof path) == 1);
  CHECK(count_files(dir, "") == 1);
  use_cache_dir(NULL);
  remove_tree(dir);
}

/* Whether kernels of this process go to the C device (its cache entries are shared objects). */
static bool default_is_cpu(void) {
  tg_tensor *t = tg_ones((int64_t[]){1}, 1, TG_FLOAT32);
  bool cpu = t && !strcmp(tg_device_of(t), "CPU");
  tg_free(t);
  return cpu;
}

/* The ELF check takes a real kernel object and refuses every broken copy of it. */
TEST(cache_module_check_elf) {
  char dir[64], why[256];
  if (!default_is_cpu()) SKIP("the default device is not CPU: its cache holds objects, not shared objects (test_llvm.c)");
  CHECK(make_temp_dir(dir, sizeof dir));
  use_cache_dir(dir);
  float out[2];
  CHECK(run_graph(17.0625, 53, out) == 0 && graph_values_ok(17.0625, 53, out)); /* a shape no other test uses: compiled into dir */
  use_cache_dir(NULL);
  char so[PATH_MAX + 300] = "";
  DIR *d = opendir(dir);
  for (struct dirent *e; d && (e = readdir(d));)
    if (ends_with(e->d_name, ".so")) snprintf(so, sizeof so, "%s/%s", dir, e->d_name);
  if (d) closedir(d);
  CHECK(so[0] && disk_cache_check_elf(so, why, sizeof why));
  long size = file_size(so);
  char *orig = malloc((size_t)size), copy[PATH_MAX + 320];
  FILE *f = fopen(so, "rb");
  CHECK(orig && f && fread(orig, 1, (size_t)size, f) == (size_t)size);
  if (f) fclose(f);
  snprintf(copy, sizeof copy, "%s.copy", so);
  const long cuts[] = {0, 10, 64, size / 2, size - 1};
  for (size_t i = 0; orig && i < sizeof cuts / sizeof cuts[0]; i++) {
    CHECK(write_file(copy, orig, (size_t)cuts[i]));
    CHECK(!disk_cache_check_elf(copy, why, sizeof why) && why[0]);
  }
  CHECK(write_file(copy, "not an object file, not at all, but long enough for an ELF header..", 68));
  CHECK(!disk_cache_check_elf(copy, why, sizeof why) && strstr(why, "magic"));
  CHECK(!disk_cache_check_elf("/nonexistent/x.so", why, sizeof why));
  free(orig);
  remove_tree(dir);
}
