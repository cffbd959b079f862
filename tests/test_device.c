/* test_device.c — the CPU device's compile caches, compiler failures, and linking an outside
 * program against the library with pkg-config.
 *
 * Caches and environment knobs (TG_CACHE_DIR, CACHELEVEL, CC) live in process state, so the
 * scenarios that need a cold process run the test binary again (/proc/self/exe) with the
 * knobs set and TG_DEVICE_CHILD naming the scenario: a fresh process with empty in-memory
 * caches, no inherited threads, and environment read anew. The child entry point
 * dev_child_scenario (`test_tg --child dev_child_scenario`, not a test) runs it and prints one
 * "RESULT …" line that the parent parses. */
#include <dirent.h>
#include <errno.h>
#include <libgen.h>
#include <limits.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>
#include "harness.h"
#include "codegen/codegen.h"
#include "device/device.h"
#include "tensor/tensor.h"

/* ------------------------------------------------------------ helpers */

/* The test graph: (x * k + 1) summed over its last axis, for x = 0..5 as (2, 3). Its kernel is
 * new to any cache whenever k is. Returns the two sums (NAN on error) and the status. */
static int run_graph(double k, float out[2]) {
  tg_scope *s = tg_scope_begin();
  tg_tensor *x = tg_reshape(tg_arange(0, 6, 1, TG_FLOAT32), (int64_t[]){2, 3}, 2);
  const int ax[] = {1};
  tg_tensor *y = tg_sum(tg_add_s(tg_mul_s(x, k), 1.0), ax, 1, false);
  out[0] = out[1] = NAN;
  int rc = y ? tg_to_host(y, out, 2 * sizeof(float)) : TG_ERR_ARG;
  tg_scope_end(s);
  return rc;
}

static bool graph_values_ok(double k, const float out[2]) {
  float want0 = (float)(k * (0 + 1 + 2) + 3), want1 = (float)(k * (3 + 4 + 5) + 3);
  return harness_close(out[0], want0, 1e-5, 1e-5) && harness_close(out[1], want1, 1e-5, 1e-5);
}

static char self_path[PATH_MAX];

static const char *self_exe(void) {
  if (!self_path[0]) {
    ssize_t n = readlink("/proc/self/exe", self_path, sizeof self_path - 1);
    self_path[n > 0 ? n : 0] = 0;
  }
  return self_path;
}

/* A fresh empty directory under /tmp (path in buf). */
static bool make_temp_dir(char *buf, size_t n) {
  snprintf(buf, n, "/tmp/tg-devtest-XXXXXX");
  return mkdtemp(buf) != NULL;
}

/* Entries in dir (not . and ..) whose name ends with suffix ("" for all); -1 if unreadable. */
static int count_files(const char *dir, const char *suffix) {
  DIR *d = opendir(dir);
  if (!d) return -1;
  int n = 0;
  size_t ls = strlen(suffix);
  for (struct dirent *e; (e = readdir(d));) {
    size_t le = strlen(e->d_name);
    if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
    n += le >= ls && !strcmp(e->d_name + le - ls, suffix);
  }
  closedir(d);
  return n;
}

/* Delete dir and the files in it (one level: the cache is flat). */
static void remove_dir(const char *dir) {
  DIR *d = opendir(dir);
  if (!d) return;
  char path[PATH_MAX + 300];
  for (struct dirent *e; (e = readdir(d));) {
    if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
    snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
    unlink(path);
  }
  closedir(d);
  rmdir(dir);
}

/* What a child scenario reports. */
typedef struct child_result {
  bool ran;     /* a RESULT line was printed */
  int rc;       /* status of the realize */
  unsigned long long compiled, hits;
  int values_ok;
  char err[512];
} child_result;

/* Run scenario in a fresh copy of this binary with extra environment (NAME=value …). */
static child_result run_child(const char *scenario, const char *env) {
  child_result r = {0};
  char cmd[PATH_MAX + 1024];
  snprintf(cmd, sizeof cmd, "env DEV=CPU TG_CUDA_CHECK=0 %s TG_DEVICE_CHILD=%s '%s' --child dev_child_scenario 2>&1", env, scenario,
           self_exe()); /* cc; its cache entries only (no offline CUDA check's) */
  FILE *p = popen(cmd, "r");
  if (!p) return r;
  char line[2048];
  while (fgets(line, sizeof line, p)) {
    if (strncmp(line, "RESULT ", 7)) continue;
    int off = 0;
    if (sscanf(line, "RESULT rc=%d compiled=%llu hits=%llu values_ok=%d err=%n", &r.rc, &r.compiled, &r.hits,
               &r.values_ok, &off) == 4) {
      r.ran = true;
      snprintf(r.err, sizeof r.err, "%s", line + off);
      r.err[strcspn(r.err, "\n")] = 0;
    }
  }
  int status = pclose(p);
  if (status != 0 && r.ran) printf("  child %s exited with status %d\n", scenario, status);
  return r;
}

/* ------------------------------------------------------------ the child side */

/* The child side of run_child: TG_DEVICE_CHILD names the scenario. */
TEST_CHILD(dev_child_scenario) {
  const char *scenario = getenv("TG_DEVICE_CHILD");
  CHECK(scenario != NULL);
  if (!scenario) return;
  double k = atof(getenv("TG_DEVICE_K") ? getenv("TG_DEVICE_K") : "1.5");
  float out[2];
  tg_reset_stats();
  tg_clear_error();
  int rc = run_graph(k, out);
  if (!strcmp(scenario, "twice")) { /* a second realize in the same process (also after a failure) */
    int again = run_graph(k, out);
    if (rc == 0) rc = again;
  }
  tg_stats st = tg_get_stats();
  printf("RESULT rc=%d compiled=%llu hits=%llu values_ok=%d err=%s\n", rc, (unsigned long long)st.kernels_compiled,
         (unsigned long long)st.disk_cache_hits, graph_values_ok(k, out), tg_last_error());
  fflush(stdout);
}

/* ------------------------------------------------------------ memory cache */

/* A second realize of the same graph (built anew) compiles nothing and runs the kernel again. */
TEST(dev_memory_cache_second_realize_compiles_nothing) {
  const double k = 0.718281828; /* a constant no other test uses: a new kernel */
  float out[2];
  tg_reset_stats();
  CHECK(run_graph(k, out) == 0);
  CHECK(graph_values_ok(k, out));
  tg_stats first = tg_get_stats();
  CHECK(first.kernels_compiled >= 1 && first.kernels_run >= 1);
  tg_reset_stats();
  CHECK(run_graph(k, out) == 0);
  CHECK(graph_values_ok(k, out));
  tg_stats second = tg_get_stats();
  CHECK(second.kernels_compiled == 0);
  CHECK(second.kernels_run == first.kernels_run);
  /* the same computation on other data shares the program too */
  tg_reset_stats();
  tg_scope *s = tg_scope_begin();
  static const float d[6] = {6, 5, 4, 3, 2, 1};
  tg_tensor *x = tg_from_data(d, TG_FLOAT32, (int64_t[]){2, 3}, 2);
  const int ax[] = {1};
  float o[2];
  CHECK(tg_to_host(tg_sum(tg_add_s(tg_mul_s(x, k), 1.0), ax, 1, false), o, sizeof o) == 0);
  CHECK(harness_close(o[0], k * 15 + 3, 1e-5, 1e-5) && harness_close(o[1], k * 6 + 3, 1e-5, 1e-5));
  tg_scope_end(s);
}

/* ------------------------------------------------------------ disk cache */

TEST(dev_disk_cache_written_then_loaded) {
  char dir[64], env[256];
  CHECK(make_temp_dir(dir, sizeof dir));
  snprintf(env, sizeof env, "TG_CACHE_DIR=%s CACHELEVEL=1 TG_DEVICE_K=2.25", dir);
  child_result a = run_child("once", env);
  CHECK(a.ran && a.rc == 0 && a.values_ok);
  CHECK(a.compiled >= 1 && a.hits == 0); /* compiled with cc */
  int written = count_files(dir, ".so");
  CHECK(written >= 1 && (unsigned long long)written == a.compiled);
  CHECK(count_files(dir, "") == written); /* no temporary .c or .tmp files left */
  child_result b = run_child("once", env); /* a new process: loads what a wrote */
  CHECK(b.ran && b.rc == 0 && b.values_ok);
  CHECK(b.compiled == a.compiled && b.hits == b.compiled);
  CHECK(count_files(dir, ".so") == written);
  /* within one process the second realize does not even touch the disk */
  child_result c = run_child("twice", env);
  CHECK(c.ran && c.rc == 0 && c.values_ok && c.compiled == a.compiled && c.hits == c.compiled);
  if (!a.ran || !b.ran || !c.ran) printf("  children: %s | %s | %s\n", a.err, b.err, c.err);
  remove_dir(dir);
}

TEST(dev_cachelevel0_writes_nothing) {
  char dir[64], env[256];
  CHECK(make_temp_dir(dir, sizeof dir));
  snprintf(env, sizeof env, "TG_CACHE_DIR=%s CACHELEVEL=0 TG_DEVICE_K=3.125", dir);
  child_result a = run_child("once", env);
  CHECK(a.ran && a.rc == 0 && a.values_ok && a.compiled >= 1 && a.hits == 0);
  CHECK(count_files(dir, "") == 0);
  child_result b = run_child("once", env); /* nothing to load: compiled again */
  CHECK(b.ran && b.rc == 0 && b.values_ok && b.compiled == a.compiled && b.hits == 0);
  CHECK(count_files(dir, "") == 0);
  remove_dir(dir);
}

/* ------------------------------------------------------------ compiler failures */

/* A compiler that fails or does not exist: the realize returns TG_ERR_COMPILE with a message,
 * and the process goes on. */
TEST(dev_broken_compiler_is_an_error) {
  static const char *compilers[] = {"false", "/nonexistent/cc"};
  for (size_t i = 0; i < sizeof compilers / sizeof compilers[0]; i++) {
    char dir[64], env[300];
    CHECK(make_temp_dir(dir, sizeof dir));
    snprintf(env, sizeof env, "TG_CACHE_DIR=%s CC=%s TG_DEVICE_K=4.0625", dir, compilers[i]);
    child_result r = run_child("twice", env);
    CHECK(r.ran);
    CHECK(r.rc == TG_ERR_COMPILE);
    CHECK(strstr(r.err, "compile") != NULL);
    CHECK(r.compiled == 0 && count_files(dir, ".so") == 0);
    if (!r.ran || r.rc != TG_ERR_COMPILE) printf("  CC=%s: rc %d, \"%s\"\n", compilers[i], r.rc, r.err);
    remove_dir(dir);
  }
}

/* ------------------------------------------------------------ pkg-config */

static bool have_tool(const char *name) {
  char cmd[256];
  snprintf(cmd, sizeof cmd, "command -v %s >/dev/null 2>&1", name);
  return system(cmd) == 0;
}

/* An outside program compiled with `pkg-config --cflags --libs --static tg` against the build
 * directory of this test binary, run as the README says (no LD_LIBRARY_PATH: the in-tree
 * tg.pc must make a program that starts), and its output checked. */
TEST(dev_pkg_config_link) {
  if (!have_tool("pkg-config") || !have_tool("cc")) SKIP("no pkg-config or cc");
  char exe[PATH_MAX], build[PATH_MAX], pc[PATH_MAX + 16];
  snprintf(exe, sizeof exe, "%s", self_exe());
  snprintf(build, sizeof build, "%s", dirname(exe));
  snprintf(pc, sizeof pc, "%s/tg.pc", build);
  if (access(pc, R_OK) != 0) SKIP("%s not built; `make test` builds it", pc);
  char dir[64], path[128], cmd[PATH_MAX * 2 + 512];
  CHECK(make_temp_dir(dir, sizeof dir));
  snprintf(path, sizeof path, "%s/prog.c", dir);
  FILE *f = fopen(path, "w");
  CHECK(f != NULL);
  if (!f) return;
  fputs("#include <stdio.h>\n#include <tg.h>\n"
        "int main(void) {\n"
        "  tg_scope *s = tg_scope_begin();\n" /* frees the tg_mul_s temporary too (LeakSanitizer) */
        "  tg_tensor *a = tg_arange(0, 4, 1, TG_FLOAT32), *b = tg_add_s(tg_mul_s(a, 2), 0.5);\n"
        "  float o[4];\n"
        "  if (tg_to_host(b, o, sizeof o) != 0) { printf(\"error: %s\\n\", tg_last_error()); return 1; }\n"
        "  printf(\"%g %g %g %g\\n\", o[0], o[1], o[2], o[3]);\n"
        "  tg_scope_end(s);\n"
        "  return 0;\n}\n",
        f);
  fclose(f);
#if defined(__SANITIZE_ADDRESS__)
  const char *san = "-fsanitize=address,undefined"; /* the library under test is sanitized */
#else
  const char *san = "";
#endif
  snprintf(cmd, sizeof cmd,
           "cd %s && cc %s prog.c -o prog $(PKG_CONFIG_PATH='%s' pkg-config --cflags --libs --static tg) 2>&1 && "
           "env -u LD_LIBRARY_PATH TG_CACHE_DIR=%s/cache ./prog 2>&1",
           dir, san, build, dir);
  FILE *p = popen(cmd, "r");
  CHECK(p != NULL);
  char out[4096] = {0};
  size_t got = p ? fread(out, 1, sizeof out - 1, p) : 0;
  int status = p ? pclose(p) : -1;
  out[got] = 0;
  CHECK(status == 0);
  CHECK(strstr(out, "0.5 2.5 4.5 6.5\n") != NULL);
  if (status != 0 || !strstr(out, "0.5 2.5 4.5 6.5")) printf("  %s\n  output: %s\n", cmd, out);
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
  CHECK(system(cmd) == 0);
}

/* Freed buffers go to a size-keyed cache and come back for the same size (a training step
 * reuses its memory instead of faulting in fresh pages); the alive counters still count only
 * live buffers, and buffer_cache_clear frees the cache. */
TEST(dev_buffer_cache_reuses_freed_memory) {
  const device *dev = device_default();
  if (dev && device_is_gpu(dev)) SKIP("%s's buffers are in its own memory, not in the host's free-block cache", dev->name);
  buffer_cache_clear();
  tg_stats before = tg_get_stats();
  int64_t n = 1000, m = 3000;
  tg_scope *s = tg_scope_begin();
  tg_tensor *a = tg_empty(&n, 1, TG_FLOAT32);
  void *p = buffer_data(a->u);
  tg_scope_end(s);
  CHECK(tg_get_stats().bytes_alive == before.bytes_alive);
  s = tg_scope_begin();
  tg_tensor *b = tg_empty(&n, 1, TG_FLOAT32), *c = tg_empty(&m, 1, TG_FLOAT32);
  CHECK(buffer_data(b->u) == p && buffer_data(c->u) != p);
  CHECK(((uintptr_t)buffer_data(c->u) & 63) == 0);
  CHECK(tg_get_stats().buffers_alive == before.buffers_alive + 2);
  tg_scope_end(s);
  buffer_cache_clear();
  s = tg_scope_begin();
  float data[4] = {1, 2, 3, 4}, out[4] = {0};
  int64_t four = 4;
  tg_tensor *d = tg_add(tg_from_data(data, TG_FLOAT32, &four, 1), tg_from_data(data, TG_FLOAT32, &four, 1));
  CHECK(tg_to_host(d, out, sizeof out) == 0 && out[3] == 8);
  tg_scope_end(s);
}
