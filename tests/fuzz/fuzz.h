/* fuzz.h — shared parts of the random-call API fuzzer (api_fuzz.c drives it, api_hostile.c
 * holds the table of hostile calls, api_ref.c the calls checked against host references).
 *
 * Everything is deterministic from the seed: the generator below, the library's own random
 * stream (tg_manual_seed) and the order of calls. The last LOG_N calls are kept as text and
 * printed with the seed on a contract violation or a sanitizer report, so a failure is
 * replayed with `api_fuzz --seed S --calls N`. */
#ifndef TG_FUZZ_H
#define TG_FUZZ_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "tg.h"

/* ---------------------------------------------------------------- generator */

uint64_t fz_next(void);                 /* splitmix64 */
int64_t fz_below(int64_t n);            /* uniform in [0, n), n >= 1 */
bool fz_chance(int percent);            /* true with the given probability */
int64_t fz_pick(const int64_t *v, int n); /* one of v[0..n) */

/* Hostile values: sizes (0, small, -1, 2^31, 2^62, INT64_MAX, INT64_MIN, random 64 bits),
 * ints (axes, ranks, strides), doubles (NaN, inf, 1e308, -0.0), dtypes (valid and not). */
int64_t fz_size(void);
int fz_int(void);
int fz_axis(int nd);         /* near the valid range [-nd-1, nd] most of the time, hostile otherwise */
int fz_rank(void);           /* 0..4 mostly; 63, 64, 65, negative, INT_MAX sometimes */
double fz_double(void);
tg_dtype fz_dtype(void);     /* valid most of the time */

/* ---------------------------------------------------------------- live tensors */

#define FZ_SLOTS 24
#define TG_FUZZ_MAXRANK 64 /* TG_MAX_DIMS: no result may have more axes */
#define FZ_REF_MAX 64 /* a host reference is kept for float32 tensors of up to this many elements */

/* A tensor made by the fuzzer. `cheap`: it and everything it was computed from are small and
 * its graph is shallow, so realizing it is quick (a tensor computed from a huge lazy one is
 * never realized). `ref`: its values (float32, small integers, exact), when known. */
typedef struct fz_slot {
  tg_tensor *t;
  bool cheap, has_ref;
  int depth; /* ops between it and tensors made from data */
  double ref[FZ_REF_MAX];
} fz_slot;

extern fz_slot fz_slots[FZ_SLOTS];

/* A random live tensor (NULL sometimes when allow_null, or when the pool is empty). Every
 * tensor picked during a call counts as an input of that call's results (fz_keep). */
tg_tensor *fz_tensor(bool allow_null);
/* A live tensor with reference values and a shallow graph, or NULL; its slot in *slot. */
tg_tensor *fz_ref_tensor(const fz_slot **slot);
/* Start of a call: no inputs picked yet. */
void fz_call_begin(void);
/* t's value was overwritten (tg_assign, an optimizer step): its reference values are stale. */
void fz_mutated(tg_tensor *t);
/* A random slot index holding a tensor, or -1. */
int fz_slot_any(void);
/* Keep t in a random slot (no reference values). It is cheap when it is small, every tensor
 * the call picked was cheap, its graph is shallow and `cheap_hint` holds. */
void fz_keep(tg_tensor *t, bool cheap_hint);
/* The same with reference values ref[0..numel). */
void fz_keep_ref(tg_tensor *t, const double *ref);
/* May t be realized (a kept cheap tensor)? */
bool fz_tensor_cheap(const tg_tensor *t);

/* ---------------------------------------------------------------- log and contract */

/* Record the call about to be made ("name(args)"); printed on a violation. */
void fz_log(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* A shape as "(2, 3)" in a rotating static buffer (for fz_log). */
const char *fz_shape_str(const int64_t *shape, int nd);
/* Report a contract violation (prints seed and the call log) and count it. */
void fz_violation(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
extern long fz_violations;

/* The contract after a call returning a tensor: non-NULL with a sane shape, or NULL with a
 * message and a negative status. Returns r. */
tg_tensor *fz_check_tensor(const char *op, tg_tensor *r);
/* After a call returning a status: 0, or a negative tg_status with a message. */
int fz_check_status(const char *op, int rc);
/* Realize t (cheap only) and compare with ref[0..numel) exactly. */
void fz_check_values(const char *op, tg_tensor *t, const double *ref);

/* ---------------------------------------------------------------- call tables */

typedef struct fz_call {
  const char *name;
  int weight;         /* relative frequency */
  void (*run)(void);
} fz_call;

extern const fz_call fz_hostile_calls[];
extern const int fz_hostile_ncalls;
extern const fz_call fz_ref_calls[];
extern const int fz_ref_ncalls;
#endif
