/* random.c — counter-based random numbers (threefry-2x32, 20 rounds, Random123 constants)
 * evaluated on the device as a lazy graph of 32-bit add/xor/shift ops, plus the
 * distributions and initializers built on it.
 *
 * Stream: the seed is the 64-bit key; every draw of n numbers takes the next n values of a
 * 64-bit counter kept on the host. Element i of a draw is threefry(key, counter + i), so the
 * same seed gives the same numbers on every run and on every device. The key and the
 * counter enter the graph as a tiny uint32 buffer (data, not constants): repeated draws of
 * one shape reuse one compiled kernel. */
#include <math.h>
#include <pthread.h>
#include <string.h>

#include "tensor/shape.h"
#include "tensor/tensor.h"

/* ---------------------------------------------------------------- threefry-2x32 */

enum { THREEFRY_ROUNDS = 20 };
static const int THREEFRY_ROT[8] = {13, 15, 26, 6, 17, 29, 16, 24};
static const uint32_t THREEFRY_PARITY = 0x1BD11BDAu; /* Skein key-schedule parity */

/* One stream for the process (every thread draws from it, like PyTorch's default generator):
 * a draw reserves its counters under the lock. */
static struct {
  pthread_mutex_t lock;
  uint32_t key[2];
  uint64_t counter;
} rng = {.lock = PTHREAD_MUTEX_INITIALIZER};

void tg_manual_seed(uint64_t seed) {
  pthread_mutex_lock(&rng.lock);
  rng.key[0] = (uint32_t)seed, rng.key[1] = (uint32_t)(seed >> 32);
  rng.counter = 0;
  pthread_mutex_unlock(&rng.lock);
}

/* The key and the first of n counters reserved for the caller. */
static uint64_t reserve(uint64_t n, uint32_t key[2]) {
  pthread_mutex_lock(&rng.lock);
  uint64_t first = rng.counter;
  key[0] = rng.key[0], key[1] = rng.key[1];
  rng.counter += n;
  pthread_mutex_unlock(&rng.lock);
  return first;
}

static uint32_t rotl32(uint32_t x, int r) { return (x << r) | (x >> (32 - r)); }

/* Host version (plain C) of the device graph below. */
static void threefry_host(const uint32_t key[2], uint64_t ctr, uint32_t out[2]) {
  uint32_t ks[3] = {key[0], key[1], THREEFRY_PARITY ^ key[0] ^ key[1]};
  uint32_t x0 = (uint32_t)ctr + ks[0], x1 = (uint32_t)(ctr >> 32) + ks[1];
  for (int i = 0; i < THREEFRY_ROUNDS; i++) {
    x0 += x1, x1 = rotl32(x1, THREEFRY_ROT[i % 8]), x1 ^= x0;
    if (i % 4 == 3) { /* key injection every 4 rounds */
      uint32_t s = (uint32_t)(i + 1) / 4;
      x0 += ks[s % 3], x1 += ks[(s + 1) % 3] + s;
    }
  }
  out[0] = x0, out[1] = x1;
}

void tg_random_u32(uint32_t *out, size_t n) {
  if (!out && n) { tg_set_error(TG_ERR_ARG, "random_u32: out is NULL"); return; }
  uint32_t key[2];
  uint64_t first = reserve(n, key);
  for (size_t i = 0; i < n; i++) {
    uint32_t r[2];
    threefry_host(key, first + i, r);
    out[i] = r[0];
  }
}

/* ---- device graph */

static uop *u32(uop *like, uint32_t v) { return uconst_like(like, v, TG_UINT32); }
/* a uint64 constant of like's shape (all 64 bits kept, unlike a double) */
static uop *const_u64(uop *like, uint64_t v) {
  int64_t ones[TG_MAX_DIMS];
  for (int i = 0; i < uop_ndim(like); i++) ones[i] = 1;
  uop *c = ushape_reshape(uop_const_int(TG_UINT64, (int64_t)v), ones, uop_ndim(like));
  return ushape_expand(c, uop_shape(like), uop_ndim(like));
}
static uop *add(uop *a, uop *b) { return uop_alu(OP_ADD, a, b); }
static uop *xor_(uop *a, uop *b) { return uop_alu(OP_XOR, a, b); }
static uop *rotl(uop *x, int r) {
  return uop_alu(OP_OR, uop_alu(OP_SHL, x, u32(x, (uint32_t)r)), uop_alu(OP_SHR, x, u32(x, (uint32_t)(32 - r))));
}

typedef struct bits { uop *x0, *x1; } bits;

static bits threefry_uops(uop *k0, uop *k1, uop *c0, uop *c1) {
  uop *ks[3] = {k0, k1, xor_(xor_(k0, k1), u32(k0, THREEFRY_PARITY))};
  uop *x0 = add(c0, ks[0]), *x1 = add(c1, ks[1]);
  for (int i = 0; i < THREEFRY_ROUNDS; i++) {
    x0 = add(x0, x1), x1 = xor_(rotl(x1, THREEFRY_ROT[i % 8]), x0);
    if (i % 4 == 3) {
      uint32_t s = (uint32_t)(i + 1) / 4;
      x0 = add(x0, ks[s % 3]), x1 = add(x1, add(ks[(s + 1) % 3], u32(x1, s)));
    }
  }
  return (bits){x0, x1};
}

/* Element j of a rank-1 buffer, broadcast to (n,). */
static uop *broadcast_elem(uop *buf, int64_t j, int64_t n) {
  int64_t range[2] = {j, j + 1};
  return ushape_expand(uop_new(OP_SHRINK, buf->dtype, &buf, 1, range, 2), &n, 1);
}

/* Random bits for the next n counters of the stream, as two (n,) uint32 graphs. */
static bits draw_bits(int64_t n) {
  int64_t four = 4;
  uop *state = buffer_new(TG_UINT32, &four, 1);
  if (!state) return (bits){NULL, NULL};
  uint32_t d[4];
  uint64_t first = reserve((uint64_t)n, d);
  d[2] = (uint32_t)first, d[3] = (uint32_t)(first >> 32);
  if (buffer_copy_in(state, d, sizeof d) < 0) return (bits){NULL, NULL};
  uop *i = ucast(uop_new(OP_IOTA, TG_INT64, NULL, 0, &n, 1), TG_UINT32);
  uop *lo = broadcast_elem(state, 2, n), *hi = broadcast_elem(state, 3, n);
  uop *c0 = add(i, lo); /* 64-bit counter + i: carry into the high word */
  uop *c1 = add(hi, ucast(uop_alu(OP_CMPLT, c0, lo), TG_UINT32));
  return threefry_uops(broadcast_elem(state, 0, n), broadcast_elem(state, 1, n), c0, c1);
}

/* ---------------------------------------------------------------- distributions */

#define POOL_BEGIN size_t pool_mark_ = uop_pool_mark()
#define POOL_END(u) do { tg_tensor *r_ = tensor_wrap(u); uop_pool_release(pool_mark_); return r_; } while (0)

/* A valid shape (tensor/shape.h) of at most 2^32 elements: one draw of the 64-bit counter
 * stream per element. */
static bool valid_shape(const char *op, const int64_t *shape, int nd, int64_t *numel) {
  if (!shape_check(op, shape, nd, TG_UINT64)) return false; /* 8 bytes: the widest draw */
  *numel = shape_numel(shape, nd);
  if (*numel <= ((int64_t)1 << 32)) return true;
  char buf[256];
  shape_error("%s: shape %s has more than 2^32 elements", op, tg_fmt_shape(buf, sizeof buf, shape, nd));
  return false;
}

static bool float_dtype(const char *op, tg_dtype dt) {
  if (dtype_valid((int)dt) && dtype_is_float(dt)) return true;
  tensor_error("%s: dtype must be a float type, got %s", op, tg_dtype_name(dt));
  return false;
}

static bool float_request(const char *op, const int64_t *shape, int nd, tg_dtype dt, int64_t *numel) {
  return valid_shape(op, shape, nd, numel) && float_dtype(op, dt);
}

static uop *shaped(uop *flat, const int64_t *shape, int nd) { return flat ? ushape_reshape(flat, shape, nd) : NULL; }

/* Uniform [0, 1) of dtype dt from the top mantissa bits (52 for float64 from both words). */
static uop *unit_float(bits b, tg_dtype dt) {
  if (!b.x0) return NULL;
  if (dt == TG_FLOAT64) {
    uop *hi = ucast(uop_alu(OP_SHR, b.x1, u32(b.x1, 12)), TG_FLOAT64), *lo = ucast(b.x0, TG_FLOAT64);
    return add(uop_mul(hi, uconst_like(hi, 0x1p-20, TG_FLOAT64)), uop_mul(lo, uconst_like(lo, 0x1p-52, TG_FLOAT64)));
  }
  int m = dt == TG_FLOAT32 ? 23 : dt == TG_FLOAT16 ? 10 : 7; /* exact in float32 and in dt */
  uop *top = ucast(uop_alu(OP_SHR, b.x0, u32(b.x0, (uint32_t)(32 - m))), TG_FLOAT32);
  return ucast(uop_mul(top, uconst_like(top, ldexp(1, -m), TG_FLOAT32)), dt);
}

/* Box–Muller in float64: u1 = (x0 + 1) / 2^32 in (0, 1], u2 = x1 / 2^32 in [0, 1). */
static uop *standard_normal(bits b, tg_dtype dt) {
  if (!b.x0) return NULL;
  uop *x0 = ucast(b.x0, TG_FLOAT64), *x1 = ucast(b.x1, TG_FLOAT64);
#define K(v) uconst_like(x0, (v), TG_FLOAT64)
  uop *u1 = uop_mul(add(x0, K(1)), K(0x1p-32)), *u2 = uop_mul(x1, K(0x1p-32));
  uop *ln_u1 = uop_mul(uop_new1(OP_LOG2, TG_FLOAT64, u1), K(M_LN2));
  uop *radius = uop_new1(OP_SQRT, TG_FLOAT64, uop_mul(ln_u1, K(-2)));
  uop *angle = add(uop_mul(u2, K(2 * M_PI)), K(M_PI / 2)); /* cos(t) = sin(t + pi/2) */
  return ucast(uop_mul(radius, uop_new1(OP_SIN, TG_FLOAT64, angle)), dt);
#undef K
}

tg_tensor *tg_rand(const int64_t *shape, int ndim, tg_dtype dtype) {
  int64_t n;
  if (!float_request("rand", shape, ndim, dtype, &n)) return NULL;
  POOL_BEGIN;
  POOL_END(shaped(unit_float(draw_bits(n), dtype), shape, ndim));
}

tg_tensor *tg_randn(const int64_t *shape, int ndim, tg_dtype dtype) {
  int64_t n;
  if (!float_request("randn", shape, ndim, dtype, &n)) return NULL;
  POOL_BEGIN;
  POOL_END(shaped(standard_normal(draw_bits(n), dtype), shape, ndim));
}

/* low + (64 random bits mod (high - low)): the bias is below (high - low) / 2^64. */
tg_tensor *tg_randint(const int64_t *shape, int ndim, int64_t low, int64_t high, tg_dtype dtype) {
  int64_t n;
  if (!valid_shape("randint", shape, ndim, &n)) return NULL;
  if (!dtype_valid((int)dtype)) return tensor_error("randint: invalid dtype %d", (int)dtype);
  if (high <= low) return tensor_error("randint: empty range [%lld, %lld)", (long long)low, (long long)high);
  if ((double)low < dtype_table[dtype].min || (double)(high - 1) > dtype_table[dtype].max)
    return tensor_error("randint: range [%lld, %lld) does not fit %s", (long long)low, (long long)high, tg_dtype_name(dtype));
  POOL_BEGIN;
  bits b = draw_bits(n);
  if (!b.x0) POOL_END(NULL);
  uop *hi = ucast(b.x1, TG_UINT64), *lo = ucast(b.x0, TG_UINT64);
  uop *r64 = uop_alu(OP_OR, uop_alu(OP_SHL, hi, uconst_like(hi, 32, TG_UINT64)), lo);
  uint64_t span = (uint64_t)high - (uint64_t)low; /* wrap-around arithmetic in uint64 */
  uop *v = add(uop_alu(OP_MOD, r64, const_u64(r64, span)), const_u64(r64, (uint64_t)low));
  POOL_END(shaped(ucast(ucast(v, TG_INT64), dtype), shape, ndim));
}

/* low + (high - low) * u, computed in dtype (like torch.Tensor.uniform_) */
static uop *affine(uop *x, double scale, double shift) {
  if (!x) return NULL;
  return add(uop_mul(x, uconst_like(x, scale, x->dtype)), uconst_like(x, shift, x->dtype));
}

tg_tensor *tg_uniform(const int64_t *shape, int ndim, double low, double high, tg_dtype dtype) {
  int64_t n;
  if (!float_request("uniform", shape, ndim, dtype, &n)) return NULL;
  if (!(low <= high) || !isfinite(high - low))
    return tensor_error("uniform: invalid range [%g, %g)", low, high);
  POOL_BEGIN;
  POOL_END(shaped(affine(unit_float(draw_bits(n), dtype), high - low, low), shape, ndim));
}

tg_tensor *tg_normal(const int64_t *shape, int ndim, double mean, double std, tg_dtype dtype) {
  int64_t n;
  if (!float_request("normal", shape, ndim, dtype, &n)) return NULL;
  if (!(std >= 0) || !isfinite(std) || !isfinite(mean))
    return tensor_error("normal: invalid mean %g / std %g (std must be >= 0)", mean, std);
  POOL_BEGIN;
  POOL_END(shaped(affine(standard_normal(draw_bits(n), dtype), std, mean), shape, ndim));
}

/* ---------------------------------------------------------------- initializers */

/* PyTorch's _calculate_fan_in_and_fan_out: fan_in = shape[1] * receptive field. */
static bool fans(const char *op, const int64_t *shape, int nd, tg_dtype dt, double *fan_in, double *fan_out) {
  int64_t n;
  if (!float_request(op, shape, nd, dt, &n)) return false;
  if (nd < 2) return tensor_error("%s: fan in/out need at least 2 dimensions, got rank %d", op, nd), false;
  double field = 1;
  for (int i = 2; i < nd; i++) field *= (double)shape[i];
  *fan_in = (double)shape[1] * field, *fan_out = (double)shape[0] * field;
  return true;
}

tg_tensor *tg_kaiming_uniform(const int64_t *shape, int ndim, double a, tg_dtype dtype) {
  double fin, fout;
  if (!fans("kaiming_uniform", shape, ndim, dtype, &fin, &fout)) return NULL;
  double bound = sqrt(2.0 / (1 + a * a)) * sqrt(3.0 / (fin > 0 ? fin : 1));
  return tg_uniform(shape, ndim, -bound, bound, dtype);
}

tg_tensor *tg_kaiming_normal(const int64_t *shape, int ndim, double a, tg_dtype dtype) {
  double fin, fout;
  if (!fans("kaiming_normal", shape, ndim, dtype, &fin, &fout)) return NULL;
  return tg_normal(shape, ndim, 0, sqrt(2.0 / (1 + a * a)) / sqrt(fin > 0 ? fin : 1), dtype);
}

tg_tensor *tg_glorot_uniform(const int64_t *shape, int ndim, tg_dtype dtype) {
  double fin, fout;
  if (!fans("glorot_uniform", shape, ndim, dtype, &fin, &fout)) return NULL;
  double bound = sqrt(6.0 / (fin + fout > 0 ? fin + fout : 1));
  return tg_uniform(shape, ndim, -bound, bound, dtype);
}

tg_tensor *tg_glorot_normal(const int64_t *shape, int ndim, tg_dtype dtype) {
  double fin, fout;
  if (!fans("glorot_normal", shape, ndim, dtype, &fin, &fout)) return NULL;
  return tg_normal(shape, ndim, 0, sqrt(2.0 / (fin + fout > 0 ? fin + fout : 1)), dtype);
}

/* ---------------------------------------------------------------- dropout */

/* Keep an element when its 32 random bits are >= p * 2^32 (probability 1 - p), scale by 1/(1-p). */
tg_tensor *tg_dropout(tg_tensor *x, double p, bool training) {
  if (!x) return null_arg("dropout");
  if (!(p >= 0 && p < 1)) return tensor_error("dropout: p must be in [0, 1), got %g", p);
  if (!dtype_is_float(x->u->dtype))
    return tensor_error("dropout: x must be a float tensor, got %s", tg_dtype_name(x->u->dtype));
  int64_t n = tg_numel(x);
  if (n > ((int64_t)1 << 32)) return tensor_error("dropout: at most 2^32 elements, got %lld", (long long)n);
  POOL_BEGIN;
  if (!training || p == 0) POOL_END(x->u);
  double t = ceil(p * 0x1p32);
  bits b = draw_bits(n);
  if (!b.x0) POOL_END(NULL);
  uop *keep = uop_new1(OP_NOT, TG_BOOL, uop_alu(OP_CMPLT, b.x0, u32(b.x0, t > 0xffffffffu ? 0xffffffffu : (uint32_t)t)));
  keep = ushape_reshape(keep, uop_shape(x->u), uop_ndim(x->u));
  uop *scaled = uop_mul(x->u, uconst_like(x->u, 1 / (1 - p), x->u->dtype));
  POOL_END(uop_new3(OP_WHERE, x->u->dtype, keep, scaled, uconst_like(x->u, 0, x->u->dtype)));
}
