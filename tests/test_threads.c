/* test_threads.c — the thread contract (docs/threads.md): independent tensors used from several
 * threads at once give the values one thread would, each thread with its own scopes, pending
 * assigns, errors and stats. A realized tensor may be read by every thread (a shared weight):
 * the threads then build equal expressions on it, which the intern table shares, and race to
 * realize the same nodes. Run under ThreadSanitizer by `make test-tsan` (zero reports). */
#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"

enum { THREADS = 4, ITERS = 25, N = 6 };

typedef struct worker {
  int id;
  tg_tensor *shared; /* (N, N) float64, realized before the threads start */
  double w[N * N];
  int bad;           /* wrong values or failed calls */
  char first_error[256];
} worker;

static void fail(worker *k, const char *what) {
  if (!k->bad++) snprintf(k->first_error, sizeof k->first_error, "thread %d: %s (%s)", k->id, what, tg_last_error());
}

static void expect(worker *k, bool ok, const char *what) {
  if (!ok) fail(k, what);
}

/* One iteration: y = relu(x @ W + c), loss = sum(y * y); checks y and dloss/dx against the
 * host; a parameter p with tg_backward; W^T made contiguous (a node every thread shares). */
static void iteration(worker *k, int it) {
  tg_scope *s = tg_scope_begin();
  double xs[N], c = 0.25 * it - 1, y_ref[N], gx_ref[N] = {0};
  for (int j = 0; j < N; j++) xs[j] = 0.1 * (k->id + 1) * (j - 2) + 0.01 * it;
  for (int j = 0; j < N; j++) {
    double acc = c;
    for (int i = 0; i < N; i++) acc += xs[i] * k->w[i * N + j];
    y_ref[j] = acc > 0 ? acc : 0;
  }
  for (int i = 0; i < N; i++)
    for (int j = 0; j < N; j++) gx_ref[i] += 2 * y_ref[j] * (y_ref[j] > 0) * k->w[i * N + j];
  tg_tensor *x = tg_from_data(xs, TG_FLOAT64, (int64_t[]){1, N}, 2);
  tg_tensor *y = tg_relu(tg_add(tg_matmul(x, k->shared), tg_full((int64_t[]){1, N}, 2, c, TG_FLOAT64)));
  tg_tensor *loss = tg_sum(tg_mul(y, y), NULL, 0, false), *gx = NULL;
  expect(k, tg_gradient(loss, &x, 1, &gx) == 0, "gradient");
  double out[N], g[N];
  expect(k, tg_to_host(y, out, sizeof out) == 0 && tg_to_host(gx, g, sizeof g) == 0, "to_host");
  for (int j = 0; j < N; j++) expect(k, fabs(out[j] - y_ref[j]) < 1e-9 && fabs(g[j] - gx_ref[j]) < 1e-9, "value");
  /* a parameter of this thread: the registry is shared by every thread */
  tg_tensor *p = tg_full((int64_t[]){N}, 1, 0.5 * k->id, TG_FLOAT64);
  expect(k, tg_realize(p) == 0 && tg_requires_grad(p, true) == p, "param");
  expect(k, tg_backward(tg_sum(tg_mul(p, p), NULL, 0, false)) == 0, "backward");
  expect(k, tg_item(tg_sum(tg_grad(p), NULL, 0, false)) == N * 1.0 * k->id, "grad of p");
  /* shared nodes: every thread builds and realizes the same contiguous W^T */
  tg_tensor *wt = tg_contiguous(tg_transpose(k->shared, 0, 1));
  expect(k, tg_to_host(wt, (double[N * N]){0}, sizeof(double) * N * N) == 0, "shared node");
  expect(k, tg_item(tg_sum(tg_mul(wt, wt), NULL, 0, false)) > 0, "shared value");
  /* an assign of this thread, realized by its next realize */
  tg_tensor *acc = tg_zeros((int64_t[]){2}, 1, TG_FLOAT64);
  expect(k, tg_realize(acc) == 0 && tg_assign(acc, tg_add_s(acc, it)) == 0, "assign");
  expect(k, tg_item(tg_sum(x, NULL, 0, false)) == tg_item(tg_sum(x, NULL, 0, false)), "realize");
  expect(k, tg_is_realized(acc), "pending assign realized by this thread's realize");
  /* errors are per thread */
  tg_clear_error();
  expect(k, tg_reshape(x, (int64_t[]){N + k->id + 1}, 1) == NULL, "bad reshape fails");
  char want[32];
  snprintf(want, sizeof want, "(%d,)", N + k->id + 1);
  expect(k, strstr(tg_last_error(), want) != NULL, "own error message");
  tg_clear_error();
  tg_scope_end(s);
}

static void *run(void *arg) {
  worker *k = arg;
  for (int it = 0; it < ITERS && !k->bad; it++) iteration(k, it);
  return NULL;
}

TEST(threads_independent_tensors_stress) {
  worker ws[THREADS];
  double w[N * N];
  for (int i = 0; i < N * N; i++) w[i] = sin(0.37 * i) * 0.5;
  tg_tensor *shared = tg_from_data(w, TG_FLOAT64, (int64_t[]){N, N}, 2);
  CHECK(tg_realize(shared) == 0);
  pthread_t th[THREADS];
  for (int t = 0; t < THREADS; t++) {
    ws[t] = (worker){.id = t, .shared = shared};
    memcpy(ws[t].w, w, sizeof w);
    CHECK(pthread_create(&th[t], NULL, run, &ws[t]) == 0);
  }
  for (int t = 0; t < THREADS; t++) {
    pthread_join(th[t], NULL);
    if (ws[t].bad) printf("  %s\n", ws[t].first_error);
    CHECK(ws[t].bad == 0);
  }
  tg_free(shared);
}

/* Scopes belong to their thread: ending one thread's scope never frees another thread's
 * tensors (the scope stack used to be one global). */
typedef struct scope_job {
  pthread_barrier_t *start;
  double value, got;
} scope_job;

static void *scoped(void *arg) {
  scope_job *j = arg;
  tg_scope *s = tg_scope_begin();
  tg_tensor *t = tg_full((int64_t[]){3}, 1, j->value, TG_FLOAT32);
  pthread_barrier_wait(j->start); /* both scopes open */
  pthread_barrier_wait(j->start); /* thread 0 ends its scope now */
  if (j->value == 1) tg_scope_end(s);
  pthread_barrier_wait(j->start);
  if (j->value != 1) {
    j->got = tg_item(tg_sum(t, NULL, 0, false));
    tg_scope_end(s);
  }
  return NULL;
}

TEST(threads_scopes_are_per_thread) {
  pthread_barrier_t start;
  pthread_barrier_init(&start, NULL, 2);
  scope_job jobs[2] = {{&start, 1, 0}, {&start, 2, 0}};
  pthread_t th[2];
  for (int i = 0; i < 2; i++) CHECK(pthread_create(&th[i], NULL, scoped, &jobs[i]) == 0);
  for (int i = 0; i < 2; i++) pthread_join(th[i], NULL);
  CHECK(jobs[1].got == 6);
  pthread_barrier_destroy(&start);
}

/* A tensor with a pending assign freed by another thread than the one that assigned it: the
 * assigning thread's next realize must not touch it. */
static void *free_it(void *arg) {
  tg_free(arg);
  return NULL;
}

TEST(threads_pending_assign_freed_elsewhere) {
  tg_tensor *t = tg_zeros((int64_t[]){4}, 1, TG_FLOAT32); /* no scope: ours to free */
  CHECK(tg_realize(t) == 0);
  tg_scope *value = tg_scope_begin();
  CHECK(tg_assign(t, tg_ones((int64_t[]){4}, 1, TG_FLOAT32)) == 0);
  tg_scope_end(value);
  pthread_t th;
  CHECK(pthread_create(&th, NULL, free_it, t) == 0);
  pthread_join(th, NULL);
  tg_scope *s = tg_scope_begin();
  CHECK(tg_item(tg_sum(tg_ones((int64_t[]){2}, 1, TG_FLOAT32), NULL, 0, false)) == 2); /* ASan: no use */
  tg_scope_end(s);
}

/* A schedule whose kernels are all new is compiled on several threads before it runs
 * (src/engine/run.c): the values are right and every compile is counted, in a fresh process
 * with an empty disk cache. */
TEST_CHILD(threads_child_parallel_build) {
  enum { K = 8 };
  tg_scope *s = tg_scope_begin();
  double xs[12];
  for (int i = 0; i < 12; i++) xs[i] = 0.5 * i - 2;
  tg_tensor *x = tg_from_data(xs, TG_FLOAT64, (int64_t[]){3, 4}, 2), *ys[K];
  CHECK(tg_realize(x) == 0);
  for (int k = 0; k < K; k++) /* K different kernels: sums of x^k over rows */
    ys[k] = tg_sum(tg_pow_s(x, k), (int[]){1}, 1, false);
  tg_reset_stats();
  CHECK(tg_realize_many(ys, K) == 0);
  tg_stats st = tg_get_stats();
  printf("compiled=%llu run=%llu\n", (unsigned long long)st.kernels_compiled, (unsigned long long)st.kernels_run);
  CHECK(st.kernels_compiled == K && st.kernels_run == K);
  for (int k = 0; k < K; k++) {
    double out[3], want[3] = {0, 0, 0};
    for (int r = 0; r < 3; r++)
      for (int c = 0; c < 4; c++) want[r] += pow(xs[r * 4 + c], k);
    CHECK(tg_to_host(ys[k], out, sizeof out) == 0);
    for (int r = 0; r < 3; r++) CHECK(fabs(out[r] - want[r]) < 1e-9 * (1 + fabs(want[r])));
  }
  tg_scope_end(s);
}

TEST(threads_parallel_build_of_a_schedule) {
  char out[4096], env[512], dir[] = "/tmp/tg-parallel-XXXXXX";
  CHECK(mkdtemp(dir) != NULL);
  snprintf(env, sizeof env, "TG_CACHE_DIR=%s THREADS=4", dir);
  int rc = harness_run_child("threads_child_parallel_build", env, out, sizeof out);
  if (rc) printf("%s\n", out);
  CHECK(rc == 0 && strstr(out, "compiled=8 run=8"));
  snprintf(env, sizeof env, "rm -rf '%s'", dir);
  CHECK(system(env) == 0);
}
