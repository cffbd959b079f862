/* helpers.c — errors, env knobs, stats, ptrmap, vectors, string builder. */
#include "runtime/helpers.h"
#include "uop/uop.h"

#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static _Thread_local char last_error[1024];
static _Thread_local int last_status;
_Thread_local tg_stats tg_thread_stats;
extern _Atomic uint64_t tg_buffers_alive, tg_bytes_alive, tg_bytes_peak; /* device/buffer.c */

int tg_set_error(int status, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(last_error, sizeof last_error, fmt, ap);
  va_end(ap);
  last_status = status;
  if (tg_debug() >= 1) fprintf(stderr, "tg error: %s\n", last_error);
  return status;
}

const char *tg_last_error(void) { return last_error; }
void tg_clear_error(void) { last_error[0] = 0, last_status = TG_OK; }
int tg_error_status(void) { return last_error[0] ? last_status : TG_OK; }

const char *tg_fmt_shape(char *buf, size_t cap, const int64_t *shape, int ndim) {
  size_t n = (size_t)snprintf(buf, cap, "(");
  for (int i = 0; i < ndim && n < cap; i++)
    n += (size_t)snprintf(buf + n, cap - n, i ? ", %lld" : "%lld", (long long)shape[i]);
  if (n < cap) snprintf(buf + n, cap - n, ndim == 1 ? ",)" : ")");
  return buf;
}

int tg_getenv_int(const char *name, int dflt) {
  const char *v = getenv(name);
  return v && *v ? atoi(v) : dflt;
}

int tg_getenv_cached(_Atomic int *slot, const char *name, int dflt) {
  int v = atomic_load_explicit(slot, memory_order_relaxed);
  if (v == TG_ENV_UNREAD) atomic_store_explicit(slot, v = tg_getenv_int(name, dflt), memory_order_relaxed);
  return v;
}

int tg_debug(void) {
  static _Atomic int level = TG_ENV_UNREAD;
  return tg_getenv_cached(&level, "DEBUG", 0);
}

bool tg_spec_checks(void) {
  static _Atomic int on = TG_ENV_UNREAD;
  return tg_getenv_cached(&on, "SPEC", 0) != 0;
}

double tg_now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

tg_stats tg_get_stats(void) {
  tg_stats s = tg_thread_stats;
  s.uops_alive = uop_alive_count();
  s.buffers_alive = atomic_load(&tg_buffers_alive);
  s.bytes_alive = atomic_load(&tg_bytes_alive);
  s.bytes_peak = atomic_load(&tg_bytes_peak);
  return s;
}

void tg_reset_stats(void) {
  memset(&tg_thread_stats, 0, sizeof tg_thread_stats);
  atomic_store(&tg_bytes_peak, atomic_load(&tg_bytes_alive));
}

/* ---- ptrmap: linear probing, power-of-two capacity, keys never removed. */
static size_t ptr_slot(const void *key, size_t cap) {
  uint64_t h = (uint64_t)(uintptr_t)key * 0x9e3779b97f4a7c15ull;
  return (size_t)(h >> 17) & (cap - 1);
}

void *ptrmap_get(const ptrmap *m, const void *key) {
  if (!m->cap) return NULL;
  for (size_t i = ptr_slot(key, m->cap);; i = (i + 1) & (m->cap - 1)) {
    if (m->keys[i] == key) return m->vals[i];
    if (!m->keys[i]) return NULL;
  }
}

bool ptrmap_has(const ptrmap *m, const void *key) {
  if (!m->cap) return false;
  for (size_t i = ptr_slot(key, m->cap);; i = (i + 1) & (m->cap - 1)) {
    if (m->keys[i] == key) return true;
    if (!m->keys[i]) return false;
  }
}

int ptrmap_put(ptrmap *m, const void *key, void *val) {
  if ((m->count + 1) * 2 > m->cap) {
    size_t ncap = m->cap ? m->cap * 2 : 64;
    const void **nk = calloc(ncap, sizeof *nk);
    void **nv = calloc(ncap, sizeof *nv);
    if (!nk || !nv) return free(nk), free(nv), -1;
    for (size_t i = 0; i < m->cap; i++) {
      if (!m->keys[i]) continue;
      size_t j = ptr_slot(m->keys[i], ncap);
      while (nk[j]) j = (j + 1) & (ncap - 1);
      nk[j] = m->keys[i], nv[j] = m->vals[i];
    }
    free(m->keys), free(m->vals);
    m->keys = nk, m->vals = nv, m->cap = ncap;
  }
  size_t i = ptr_slot(key, m->cap);
  while (m->keys[i] && m->keys[i] != key) i = (i + 1) & (m->cap - 1);
  if (!m->keys[i]) m->count++;
  m->keys[i] = key, m->vals[i] = val;
  return 0;
}

void ptrmap_free(ptrmap *m) {
  free(m->keys), free(m->vals);
  memset(m, 0, sizeof *m);
}

uint64_t hash_bytes(const void *data, size_t n, uint64_t seed) {
  const unsigned char *p = data;
  uint64_t h = 0xcbf29ce484222325ull ^ seed;
  for (size_t i = 0; i < n; i++) h = (h ^ p[i]) * 0x100000001b3ull;
  return hash_mix(h, n);
}

int vec_grow(void **v, size_t *cap, size_t need, size_t elem) {
  size_t ncap = *cap ? *cap : 8, bytes;
  while (ncap < need && ncap <= SIZE_MAX / 2) ncap *= 2;
  if (ncap < need || __builtin_mul_overflow(ncap, elem, &bytes)) return -1; /* no wrapped size */
  void *nv = realloc(*v, bytes);
  if (!nv) return -1;
  *v = nv, *cap = ncap;
  return 0;
}

void sb_printf(strbuf *b, const char *fmt, ...) {
  va_list ap;
  for (;;) {
    size_t room = b->cap - b->n;
    va_start(ap, fmt);
    int k = vsnprintf(b->s ? b->s + b->n : NULL, b->s ? room : 0, fmt, ap);
    va_end(ap);
    if (k < 0) return;
    if (b->s && (size_t)k < room) { b->n += (size_t)k; return; }
    size_t ncap = b->cap ? b->cap : 256;
    while (ncap < b->n + (size_t)k + 1) ncap *= 2;
    char *ns = realloc(b->s, ncap);
    if (!ns) return;
    b->s = ns, b->cap = ncap;
  }
}

void sb_free(strbuf *b) {
  free(b->s);
  memset(b, 0, sizeof *b);
}
