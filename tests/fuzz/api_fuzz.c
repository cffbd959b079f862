/* api_fuzz.c — a random-call fuzzer of tg's public API (issue 19, item 4).
 *
 *   api_fuzz [--seed S] [--seeds K] [--calls N] [--seconds T] [--verbose]
 *
 * For each of K seeds (S, S+1, ...) it opens a scope, makes N calls drawn from two tables —
 * hostile calls (api_hostile.c: 0-size, negative and huge sizes, overflowing products, ranks
 * past the maximum, far and repeated axes, NULL tensors and arrays, invalid dtypes, wrong byte
 * counts) and reference calls (api_ref.c: valid arguments on small tensors whose values are
 * known) — and checks the contract after every call (fuzz.h): a tensor or NULL with a message
 * and a negative status; a status of 0 or a negative code with a message; every returned shape
 * sane; reference results equal to the host computation. Closing the scope must leave no
 * UOp or buffer behind. Exit status 1 on any violation. Run it under ASan+UBSan with leak
 * detection (make fuzz-check); a sanitizer report prints the seed and the last calls too. */
#include <limits.h>
#include <math.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "fuzz.h"
#include "runtime/helpers.h" /* tg_error_status: the status of a call that returned NULL */

/* ---------------------------------------------------------------- generator */

static uint64_t rng;

uint64_t fz_next(void) {
  uint64_t z = (rng += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

int64_t fz_below(int64_t n) { return n <= 1 ? 0 : (int64_t)(fz_next() % (uint64_t)n); }
bool fz_chance(int percent) { return fz_below(100) < percent; }
int64_t fz_pick(const int64_t *v, int n) { return v[fz_below(n)]; }

int64_t fz_size(void) {
  static const int64_t small[] = {0, 1, 1, 2, 2, 3, 4, 5};
  static const int64_t hostile[] = {-1, -2, INT64_MIN, INT64_MAX, INT64_MAX - 1, INT64_MAX / 2, INT64_C(1) << 31,
                                    INT64_C(1) << 32, INT64_C(1) << 40, INT64_C(1) << 62, INT64_C(3) << 61, 65536};
  if (fz_chance(80)) return fz_pick(small, 8);
  if (fz_chance(15)) return (int64_t)fz_next();
  return fz_pick(hostile, (int)(sizeof hostile / sizeof hostile[0]));
}

int fz_int(void) {
  static const int64_t v[] = {0, 1, 2, 3, -1, -2, 64, 65, INT_MAX, INT_MIN, INT_MAX - 1, -1000000, 1 << 30};
  return fz_chance(70) ? (int)fz_below(4) : (int)fz_pick(v, (int)(sizeof v / sizeof v[0]));
}

int fz_axis(int nd) {
  if (fz_chance(80)) return (int)fz_below(2 * (int64_t)nd + 3) - nd - 1; /* -nd-1 .. nd+1 */
  return fz_int();
}

int fz_rank(void) {
  static const int64_t v[] = {63, 64, 65, -1, INT_MAX, INT_MIN, 1000};
  return fz_chance(90) ? (int)fz_below(5) : (int)fz_pick(v, (int)(sizeof v / sizeof v[0]));
}

double fz_double(void) {
  static const double v[] = {0, -0.0, 1, -1, 0.5, 2, 1e308, -1e308, 1e-310, INFINITY, -INFINITY, NAN, 4294967296.0,
                             9.3e18, -9.3e18};
  return fz_chance(60) ? (double)(fz_below(9) - 4) : v[fz_below((int64_t)(sizeof v / sizeof v[0]))];
}

tg_dtype fz_dtype(void) {
  static const int64_t bad[] = {-1, TG_DTYPE_COUNT, TG_DTYPE_COUNT + 1, 255, INT_MAX, INT_MIN};
  if (fz_chance(92)) return (tg_dtype)fz_below(TG_DTYPE_COUNT);
  return (tg_dtype)fz_pick(bad, (int)(sizeof bad / sizeof bad[0]));
}

/* ---------------------------------------------------------------- call log */

enum { LOG_N = 48, LOG_LEN = 400 };
static char call_log[LOG_N][LOG_LEN];
static long ncalls;
static uint64_t cur_seed;
static bool verbose;
long fz_violations;

void fz_log(const char *fmt, ...) {
  char *line = call_log[ncalls % LOG_N];
  int n = snprintf(line, LOG_LEN, "#%ld ", ncalls);
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(line + n, LOG_LEN - (size_t)n, fmt, ap);
  va_end(ap);
  ncalls++;
  if (verbose) fprintf(stderr, "%s\n", line), fflush(stderr);
}

const char *fz_shape_str(const int64_t *shape, int nd) {
  static char bufs[4][300];
  static int k;
  char *b = bufs[k++ % 4];
  if (!shape) return nd ? "NULL" : "()";
  if (nd < 0 || nd > 8) return snprintf(b, 300, "(rank %d)", nd), b;
  return tg_fmt_shape(b, 300, shape, nd);
}

static void dump_log(void) {
  fprintf(stderr, "api_fuzz: seed %llu, call %ld; the last calls:\n", (unsigned long long)cur_seed, ncalls - 1);
  for (long i = ncalls > LOG_N ? ncalls - LOG_N : 0; i < ncalls; i++) fprintf(stderr, "  %s\n", call_log[i % LOG_N]);
  fprintf(stderr, "replay: api_fuzz --seed %llu --seeds 1 --calls %ld --verbose\n", (unsigned long long)cur_seed, ncalls);
}

void fz_violation(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  fprintf(stderr, "api_fuzz: CONTRACT VIOLATION: ");
  vfprintf(stderr, fmt, ap);
  fprintf(stderr, "\n");
  va_end(ap);
  dump_log();
  fz_violations++;
}

/* A sanitizer report or a crash: say where the fuzzer was first. */
void __sanitizer_set_death_callback(void (*cb)(void)) __attribute__((weak));
static void on_crash(int sig) {
  fprintf(stderr, "api_fuzz: signal %d\n", sig);
  dump_log();
  signal(sig, SIG_DFL);
  raise(sig);
}

/* ---------------------------------------------------------------- contract */

static int64_t extent_bytes(const int64_t *s, int nd, size_t elem) {
  __int128 n = (__int128)elem;
  for (int i = 0; i < nd && n <= INT64_MAX; i++) n *= s[i] ? s[i] : 1;
  return n > INT64_MAX ? -1 : (int64_t)n;
}

static void check_sane_shape(const char *op, tg_tensor *t) {
  int64_t s[TG_FUZZ_MAXRANK + 2];
  int nd = tg_shape(t, s, TG_FUZZ_MAXRANK + 2);
  tg_dtype dt = tg_get_dtype(t);
  if (nd < 0 || nd > TG_FUZZ_MAXRANK) return fz_violation("%s: result rank %d", op, nd);
  if ((int)dt < 0 || dt >= TG_DTYPE_COUNT) return fz_violation("%s: result dtype %d", op, (int)dt);
  for (int i = 0; i < nd; i++) {
    if (s[i] < 0) return fz_violation("%s: result shape %s has a negative size", op, fz_shape_str(s, nd));
    if (tg_dim(t, i) != s[i] || tg_dim(t, i - nd) != s[i]) return fz_violation("%s: tg_dim disagrees with tg_shape", op);
  }
  if (extent_bytes(s, nd, tg_dtype_size(dt)) < 0)
    return fz_violation("%s: result shape %s of %s has more bytes than fit in int64", op, fz_shape_str(s, nd),
                        tg_dtype_name(dt));
  __int128 numel = 1; /* <= the extent: no overflow */
  for (int i = 0; i < nd; i++) numel *= s[i];
  if ((__int128)tg_numel(t) != numel) return fz_violation("%s: tg_numel %lld for shape %s", op, (long long)tg_numel(t), fz_shape_str(s, nd));
}

tg_tensor *fz_check_tensor(const char *op, tg_tensor *r) {
  if (r) {
    check_sane_shape(op, r);
    return r;
  }
  int st = tg_error_status();
  if (!tg_last_error()[0]) fz_violation("%s returned NULL without a message", op);
  else if (st >= 0 || st < TG_ERR_SHAPE) fz_violation("%s returned NULL with status %d (\"%s\")", op, st, tg_last_error());
  return NULL;
}

int fz_check_status(const char *op, int rc) {
  if (rc > 0 || rc < TG_ERR_SHAPE) fz_violation("%s returned status %d", op, rc);
  else if (rc < 0 && !tg_last_error()[0]) fz_violation("%s returned %d without a message", op, rc);
  return rc;
}

void fz_check_values(const char *op, tg_tensor *t, const double *ref) {
  int64_t n = t ? tg_numel(t) : 0;
  if (n > FZ_REF_MAX) return;
  float out[FZ_REF_MAX];
  tg_tensor *f = tg_cast(t, TG_FLOAT32);
  int rc = f ? tg_to_host(f, out, sizeof(float) * (size_t)n) : -1;
  if (rc < 0) return fz_violation("%s: realizing a valid small result failed: %s", op, tg_last_error());
  for (int64_t i = 0; i < n; i++)
    if (!(out[i] == (float)ref[i] || (isnan(out[i]) && isnan(ref[i]))))
      return fz_violation("%s: element %lld is %g, the host reference says %g", op, (long long)i, out[i], ref[i]);
}

/* ---------------------------------------------------------------- live tensors */

enum { CHEAP_DEPTH = 12, CHEAP_BYTES = 8 * 4096 };
fz_slot fz_slots[FZ_SLOTS];
static bool call_inputs_cheap; /* every tensor picked by this call was cheap */
static int call_depth;         /* the deepest of them */

void fz_call_begin(void) { call_inputs_cheap = true, call_depth = 0; }

static fz_slot *slot_of(const tg_tensor *t) {
  for (int i = 0; t && i < FZ_SLOTS; i++)
    if (fz_slots[i].t == t) return &fz_slots[i];
  return NULL;
}

static void picked(const fz_slot *s) {
  call_inputs_cheap &= s->cheap;
  if (s->depth > call_depth) call_depth = s->depth;
}

int fz_slot_any(void) {
  int start = (int)fz_below(FZ_SLOTS);
  for (int k = 0; k < FZ_SLOTS; k++)
    if (fz_slots[(start + k) % FZ_SLOTS].t) return (start + k) % FZ_SLOTS;
  return -1;
}

tg_tensor *fz_tensor(bool allow_null) {
  int i = fz_slot_any();
  if (i < 0 || (allow_null && fz_chance(4))) return NULL;
  picked(&fz_slots[i]);
  return fz_slots[i].t;
}

tg_tensor *fz_ref_tensor(const fz_slot **slot) {
  int start = (int)fz_below(FZ_SLOTS);
  for (int k = 0; k < FZ_SLOTS; k++) {
    fz_slot *s = &fz_slots[(start + k) % FZ_SLOTS];
    if (s->t && s->has_ref && s->cheap && s->depth < CHEAP_DEPTH / 2) return picked(s), *slot = s, s->t;
  }
  return NULL;
}

void fz_mutated(tg_tensor *t) {
  for (int i = 0; t && i < FZ_SLOTS; i++)
    if (fz_slots[i].t == t) fz_slots[i].has_ref = false;
}

bool fz_tensor_cheap(const tg_tensor *t) {
  const fz_slot *s = slot_of(t);
  return s && s->cheap;
}

static bool small(tg_tensor *t) {
  int64_t s[TG_FUZZ_MAXRANK + 1];
  int nd = tg_shape(t, s, TG_FUZZ_MAXRANK + 1);
  int64_t bytes = nd < 0 ? -1 : extent_bytes(s, nd, 8);
  return bytes >= 0 && bytes <= CHEAP_BYTES;
}

/* A slot for a new tensor (the one it held stays alive in the scope); NULL if t is kept already. */
static fz_slot *slot_for(tg_tensor *t) {
  if (slot_of(t)) return NULL; /* one slot per handle: freeing it must not leave a copy behind */
  fz_slot *s = &fz_slots[fz_below(FZ_SLOTS)];
  s->depth = call_depth + 1;
  return s;
}

void fz_keep(tg_tensor *t, bool cheap_hint) {
  fz_slot *s = t ? slot_for(t) : NULL;
  if (!s) return;
  s->t = t, s->has_ref = false;
  s->cheap = cheap_hint && call_inputs_cheap && s->depth <= CHEAP_DEPTH && small(t);
}

void fz_keep_ref(tg_tensor *t, const double *ref) {
  fz_slot *s = t ? slot_for(t) : NULL;
  if (!s) return;
  int64_t n = tg_numel(t);
  s->t = t, s->cheap = call_inputs_cheap && s->depth <= CHEAP_DEPTH && small(t);
  s->has_ref = s->cheap && tg_get_dtype(t) == TG_FLOAT32 && n <= FZ_REF_MAX;
  for (int64_t i = 0; s->has_ref && i < n; i++) {
    s->ref[i] = ref[i];
    if (!(fabs(ref[i]) <= 1 << 20)) s->has_ref = false; /* keep values exact in float32 */
  }
}

/* ---------------------------------------------------------------- driver */

static const fz_call *pick_call(void) {
  static int total_h, total_r;
  if (!total_h)
    for (int i = 0; i < fz_hostile_ncalls; i++) total_h += fz_hostile_calls[i].weight;
  if (!total_r)
    for (int i = 0; i < fz_ref_ncalls; i++) total_r += fz_ref_calls[i].weight;
  bool ref = fz_chance(35);
  const fz_call *table = ref ? fz_ref_calls : fz_hostile_calls;
  int64_t r = fz_below(ref ? total_r : total_h);
  for (int i = 0;; i++) {
    if (r < table[i].weight) return &table[i];
    r -= table[i].weight;
  }
}

/* One seed: a scope with `calls` calls; nothing may be left behind when it closes. */
static void run_seed(uint64_t seed, long calls, double deadline) {
  cur_seed = seed, rng = seed, ncalls = 0;
  tg_manual_seed(seed);
  memset(fz_slots, 0, sizeof fz_slots);
  tg_stats before = tg_get_stats();
  tg_scope *s = tg_scope_begin();
  for (long i = 0; i < calls && (i % 64 || tg_now() < deadline); i++) {
    const fz_call *c = pick_call();
    tg_clear_error();
    fz_call_begin();
    c->run();
  }
  tg_scope_end(s);
  memset(fz_slots, 0, sizeof fz_slots);
  tg_realize_many(NULL, 0); /* realizes nothing; an error only */
  tg_stats after = tg_get_stats();
  if (after.uops_alive > before.uops_alive)
    fz_violation("closing the scope left %llu UOps alive (%llu before)", (unsigned long long)after.uops_alive,
                 (unsigned long long)before.uops_alive);
}

static long arg_long(int argc, char **argv, const char *name, long dflt) {
  for (int i = 1; i + 1 < argc; i++)
    if (!strcmp(argv[i], name)) return strtol(argv[i + 1], NULL, 0);
  return dflt;
}

int main(int argc, char **argv) {
  uint64_t seed = (uint64_t)arg_long(argc, argv, "--seed", 1);
  long seeds = arg_long(argc, argv, "--seeds", 20), calls = arg_long(argc, argv, "--calls", 2000);
  double seconds = (double)arg_long(argc, argv, "--seconds", 0), t0 = tg_now();
  for (int i = 1; i < argc; i++) verbose |= !strcmp(argv[i], "--verbose");
  if (__sanitizer_set_death_callback) __sanitizer_set_death_callback(dump_log);
  signal(SIGSEGV, on_crash), signal(SIGFPE, on_crash), signal(SIGBUS, on_crash), signal(SIGABRT, on_crash);
  long done = 0, total = 0;
  for (; done < seeds; done++) {
    if (seconds > 0 && tg_now() - t0 >= seconds) break;
    run_seed(seed + (uint64_t)done, calls, seconds > 0 ? t0 + seconds : INFINITY);
    total += ncalls;
  }
  printf("api_fuzz: %ld seeds from %llu, %ld calls, %.1f s, %ld violations\n", done, (unsigned long long)seed, total,
         tg_now() - t0, fz_violations);
  return fz_violations ? 1 : 0;
}
