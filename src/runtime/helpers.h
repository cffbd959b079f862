/* helpers.h — errors, environment knobs, stats, a pointer hash map and growable arrays. */
#ifndef TG_HELPERS_H
#define TG_HELPERS_H

#include <limits.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "tg.h"

/* Errors: set the thread's message (printf-style) and return the status. */
int tg_set_error(int status, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* The status of the thread's last error (TG_OK after tg_clear_error): what a function that
 * returned NULL would have returned as an int. */
int tg_error_status(void);
/* The last error's status when one is set, else fallback: for a function that saw a callee
 * fail (it returned NULL) and must return a status. */
static inline int tg_error_status_or(int fallback) { return tg_error_status() < 0 ? tg_error_status() : fallback; }
/* Format a shape as "(2, 3)" into buf. */
const char *tg_fmt_shape(char *buf, size_t cap, const int64_t *shape, int ndim);

/* Checked arithmetic: every size or index computed from user numbers goes through these
 * (docs/errors.md). They store the exact result and return true, or return false when it
 * does not fit in int64 (then *out is unspecified). */
static inline bool ck_add(int64_t a, int64_t b, int64_t *out) { return !__builtin_add_overflow(a, b, out); }
static inline bool ck_sub(int64_t a, int64_t b, int64_t *out) { return !__builtin_sub_overflow(a, b, out); }
static inline bool ck_mul(int64_t a, int64_t b, int64_t *out) { return !__builtin_mul_overflow(a, b, out); }

/* Environment knobs, read once (DEBUG, SPEC, CACHELEVEL, …). */
int tg_getenv_int(const char *name, int dflt);
/* An env knob read once into *slot (`static _Atomic int slot = TG_ENV_UNREAD`): any thread may
 * be first, and two reading it at once is harmless. */
#define TG_ENV_UNREAD INT_MIN
int tg_getenv_cached(_Atomic int *slot, const char *name, int dflt);
int tg_debug(void);
bool tg_spec_checks(void);

/* Stats (see tg_stats in tg.h): each thread counts its own work. */
extern _Thread_local tg_stats tg_thread_stats;
double tg_now(void);

/* Open-addressing hash map from pointer keys to pointer values. */
typedef struct ptrmap {
  const void **keys;
  void **vals;
  size_t cap, count;
} ptrmap;
void *ptrmap_get(const ptrmap *m, const void *key);
bool ptrmap_has(const ptrmap *m, const void *key);
int ptrmap_put(ptrmap *m, const void *key, void *val);
void ptrmap_free(ptrmap *m);

/* Hash helpers. */
static inline uint64_t hash_mix(uint64_t h, uint64_t v) {
  h ^= v + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2);
  h *= 0xff51afd7ed558ccdull;
  return h ^ (h >> 33);
}
uint64_t hash_bytes(const void *data, size_t n, uint64_t seed);

/* Growable array of T: struct { T *v; size_t n, cap; }. VEC_PUSH returns 0 or -1. */
#define VEC(T) struct { T *v; size_t n, cap; }
int vec_grow(void **v, size_t *cap, size_t need, size_t elem);
#define VEC_PUSH(vec, x)                                                        \
  (((vec).n < (vec).cap || vec_grow((void **)&(vec).v, &(vec).cap, (vec).n + 1, \
                                    sizeof(*(vec).v)) == 0)                     \
       ? ((vec).v[(vec).n++] = (x), 0)                                          \
       : -1)
#define VEC_FREE(vec) (free((vec).v), (vec).v = NULL, (vec).n = (vec).cap = 0)

/* String builder. */
typedef struct strbuf {
  char *s;
  size_t n, cap;
} strbuf;
void sb_printf(strbuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void sb_free(strbuf *b);
#endif
