/* test_profile.c — PROFILE=1 writes a Chrome trace-event file (docs/debug.md): a child process
 * realizes kernels (compiling them: empty cache), runs autograd, and exits; the file it leaves
 * is parsed here and its events checked against the child's tg_get_stats counts. */
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "io/io.h"

TEST_CHILD(profile_child_work) {
  tg_scope *s = tg_scope_begin();
  double xs[6] = {1, 2, 3, 4, 5, 6};
  tg_tensor *x = tg_from_data(xs, TG_FLOAT64, (int64_t[]){2, 3}, 2), *g = NULL;
  tg_reset_stats();
  tg_tensor *y = tg_sum(tg_exp(tg_mul_s(x, 0.5)), NULL, 0, false);
  CHECK(tg_gradient(y, &x, 1, &g) == 0);
  tg_tensor *both[2] = {y, g};
  CHECK(tg_realize_many(both, 2) == 0);
  CHECK(tg_item(tg_sum(tg_mul(g, x), NULL, 0, false)) > 0);
  tg_stats st = tg_get_stats();
  printf("kernels_run=%llu kernels_compiled=%llu schedules=%llu\n", (unsigned long long)st.kernels_run,
         (unsigned long long)st.kernels_compiled, (unsigned long long)st.schedules);
  tg_scope_end(s);
}

typedef struct counts {
  int64_t kernel, compile, lower, schedule, autograd, tracks, kernel_args;
} counts;

/* Skip one value: a string, a non-negative integer, or an object/array of those. */
static bool skip_value(json_reader *r) {
  char c = json_peek(r);
  if (c == '"') return json_string(r) != NULL;
  if (c != '{' && c != '[') {
    int64_t v;
    return json_int(r, &v);
  }
  char close = c == '{' ? '}' : ']';
  json_expect(r, c);
  int64_t n = 0;
  while (json_item(r, close, &n))
    if ((c == '{' && !json_string(r)) || (c == '{' && !json_expect(r, ':')) || !skip_value(r)) return false;
  return !json_failed(r);
}

/* One event object: count it by phase and category. */
static bool read_event(json_reader *r, counts *c) {
  json_expect(r, '{');
  const char *ph = "", *cat = "";
  int64_t n = 0;
  bool args = false;
  while (json_item(r, '}', &n)) {
    const char *key = json_string(r);
    if (!key || !json_expect(r, ':')) return false;
    if (!strcmp(key, "ph")) ph = json_string(r);
    else if (!strcmp(key, "cat")) cat = json_string(r);
    else if (!strcmp(key, "args")) args = true, skip_value(r);
    else skip_value(r);
    if (json_failed(r) || !ph || !cat) return false;
  }
  if (!strcmp(ph, "M")) c->tracks++;
  int64_t *slot = !strcmp(cat, "kernel") ? &c->kernel : !strcmp(cat, "compile") ? &c->compile
                  : !strcmp(cat, "lower") ? &c->lower : !strcmp(cat, "schedule") ? &c->schedule
                  : !strcmp(cat, "autograd") ? &c->autograd : NULL;
  if (slot) ++*slot;
  c->kernel_args += !strcmp(cat, "kernel") && args;
  return !json_failed(r);
}

TEST(profile_trace_matches_stats) {
  char dir[] = "/tmp/tg-profile-XXXXXX", env[1024], out[2048], path[256];
  CHECK(mkdtemp(dir) != NULL);
  snprintf(path, sizeof path, "%s/trace.json", dir);
  snprintf(env, sizeof env, "PROFILE=1 PROFILE_FILE=%s TG_CACHE_DIR=%s/cache", path, dir);
  CHECK(harness_run_child("profile_child_work", env, out, sizeof out) == 0);
  unsigned long long run = 0, compiled = 0, schedules = 0;
  CHECK(sscanf(strstr(out, "kernels_run=") ? strstr(out, "kernels_run=") : "", "kernels_run=%llu kernels_compiled=%llu schedules=%llu",
               &run, &compiled, &schedules) == 3);
  FILE *f = fopen(path, "rb");
  CHECK(f != NULL);
  static char text[1 << 20];
  size_t len = f ? fread(text, 1, sizeof text - 1, f) : 0;
  if (f) fclose(f);
  json_reader r;
  json_init(&r, text, len);
  counts c = {0};
  int64_t n = 0, m = 0;
  json_expect(&r, '{');
  while (json_item(&r, '}', &n)) {
    const char *key = json_string(&r);
    if (!key || !json_expect(&r, ':')) break;
    if (strcmp(key, "traceEvents")) { skip_value(&r); continue; }
    json_expect(&r, '[');
    while (json_item(&r, ']', &m))
      if (!read_event(&r, &c)) break;
  }
  CHECK(!json_failed(&r) && json_finish(&r));
  if (json_failed(&r)) printf("  %s\n", r.err);
  CHECK(run > 0 && compiled > 0 && schedules >= 2);
  CHECK(c.kernel == (int64_t)run && c.kernel_args == c.kernel); /* every kernel, with flops, bytes, launch size */
  CHECK(c.compile == (int64_t)compiled);
  CHECK(c.lower >= c.compile && c.schedule == (int64_t)schedules);
  CHECK(c.autograd >= 1 && c.tracks >= 2); /* a device track and a host track */
  snprintf(env, sizeof env, "rm -rf '%s'", dir);
  CHECK(system(env) == 0);
}
