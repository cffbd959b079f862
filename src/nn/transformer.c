/* transformer.c — the blocks a transformer needs beyond the norms and attention of
 * functional.c: embedding as a function, GELU's erf form, rotary position embeddings, a
 * fixed-size key/value cache with attention over it, and top-k / top-p / temperature sampling.
 *
 * Like the rest of src/nn/ everything differentiable is built from the public tensor API, so
 * autograd differentiates it through the primitive ops. Sampling is a host computation on the
 * realized logits (it picks integers; nothing flows back through it). See docs/nn.md. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "nn/functional.h"
#include "runtime/helpers.h"
#include "tg_nn.h"

static tg_tensor *finish(tg_scope *s, tg_tensor *r) {
  if (r) r = tg_keep(r);
  tg_scope_end(s);
  return r;
}

/* An argument error as a NULL tensor. */
#define ARG_ERROR(...) (tg_set_error(TG_ERR_ARG, __VA_ARGS__), (tg_tensor *)NULL)

/* ---------------------------------------------------------------- embedding, GELU */

tg_tensor *tg_embedding_lookup(tg_tensor *weight, tg_tensor *indices) {
  if (!weight || !indices) return null_arg("embedding_lookup");
  if (tg_ndim(weight) != 2) return ARG_ERROR("embedding_lookup: weight must be (num, dim), got rank %d", tg_ndim(weight));
  tg_dtype dt = tg_get_dtype(indices);
  if (tg_dtype_is_float(dt) || dt == TG_BOOL)
    return ARG_ERROR("embedding_lookup: indices must be integers, got %s", tg_dtype_name(dt));
  return tg_index_select(weight, 0, indices);
}

tg_tensor *tg_gelu_erf(tg_tensor *x) {
  if (!x) return null_arg("gelu_erf");
  if (!nn_need_float("gelu_erf", "x", x)) return NULL;
  tg_scope *s = tg_scope_begin();
  tg_tensor *phi = tg_add_s(tg_erf(tg_mul_s(x, M_SQRT1_2)), 1); /* 2 Phi(x) */
  return finish(s, tg_mul(tg_mul_s(x, 0.5), phi));
}

/* ---------------------------------------------------------------- rotary embeddings */

/* cos and sin of (start + t) * theta^(-2i/d) for t < n, i < d/2: (n, d/2) of dtype dt, computed
 * in float64 on the host. */
static int rope_tables(int64_t start, int64_t n, int64_t d, double theta, tg_dtype dt, tg_tensor **c, tg_tensor **s) {
  int64_t half = d / 2, shape[2] = {n, half};
  double *cv = malloc(sizeof(double) * (size_t)(n * half + 1)), *sv = malloc(sizeof(double) * (size_t)(n * half + 1));
  if (!cv || !sv) return free(cv), free(sv), tg_set_error(TG_ERR_NOMEM, "rotary_embedding: out of memory");
  for (int64_t t = 0; t < n; t++)
    for (int64_t i = 0; i < half; i++) {
      double a = (double)(start + t) * pow(theta, -2.0 * (double)i / (double)d);
      cv[t * half + i] = cos(a), sv[t * half + i] = sin(a);
    }
  *c = tg_cast(tg_from_data(cv, TG_FLOAT64, shape, 2), dt);
  *s = tg_cast(tg_from_data(sv, TG_FLOAT64, shape, 2), dt);
  free(cv), free(sv);
  return *c && *s ? 0 : tg_error_status_or(TG_ERR_NOMEM);
}

/* (a, b) rotated: (a cos - b sin, b cos + a sin). */
static void rotate(tg_tensor *a, tg_tensor *b, tg_tensor *c, tg_tensor *s, tg_tensor **out) {
  out[0] = tg_sub(tg_mul(a, c), tg_mul(b, s));
  out[1] = tg_add(tg_mul(b, c), tg_mul(a, s));
}

tg_tensor *tg_rotary_embedding(tg_tensor *x, int64_t start_pos, double theta, tg_rope_style style) {
  if (!x) return null_arg("rotary_embedding");
  if (!nn_need_float("rotary_embedding", "x", x)) return NULL;
  int nd = tg_ndim(x);
  if (nd < 2) return ARG_ERROR("rotary_embedding: x must be (..., T, D), got rank %d", nd);
  int64_t n = tg_dim(x, -2), d = tg_dim(x, -1), shape[TG_MAX_DIMS + 1];
  if (d % 2) return ARG_ERROR("rotary_embedding: the last axis must be even, got %lld", (long long)d);
  if (start_pos < 0 || !(theta > 0))
    return ARG_ERROR("rotary_embedding: start_pos must be >= 0 and theta > 0, got %lld and %g", (long long)start_pos, theta);
  if (style != TG_ROPE_HALF && style != TG_ROPE_INTERLEAVED) return ARG_ERROR("rotary_embedding: unknown style %d", (int)style);
  tg_scope *sc = tg_scope_begin();
  tg_tensor *c = NULL, *s = NULL, *o[2];
  if (rope_tables(start_pos, n, d, theta, tg_get_dtype(x), &c, &s) < 0) return finish(sc, NULL);
  tg_shape(x, shape, TG_MAX_DIMS);
  if (style == TG_ROPE_HALF) { /* x[i] with x[i + d/2] (rotate_half) */
    rotate(tg_slice(x, nd - 1, 0, d / 2, 1), tg_slice(x, nd - 1, d / 2, d, 1), c, s, o);
    return finish(sc, tg_cat(o, 2, nd - 1));
  }
  shape[nd - 1] = d / 2, shape[nd] = 2; /* x[2i] with x[2i + 1] */
  tg_tensor *xr = tg_reshape(x, shape, nd + 1);
  int64_t cs[3] = {n, d / 2, 1};
  rotate(tg_slice(xr, nd, 0, 1, 1), tg_slice(xr, nd, 1, 2, 1), tg_reshape(c, cs, 3), tg_reshape(s, cs, 3), o);
  shape[nd - 1] = d;
  return finish(sc, tg_reshape(tg_cat(o, 2, nd), shape, nd));
}

/* ---------------------------------------------------------------- key/value cache */

int tg_kv_cache_init(tg_kv_cache *c, int64_t batch, int64_t heads, int64_t max_len, int64_t head_dim, tg_dtype dtype) {
  if (!c) return tg_set_error(TG_ERR_ARG, "kv_cache_init: NULL cache");
  memset(c, 0, sizeof *c);
  if (batch < 1 || heads < 1 || max_len < 1 || head_dim < 1)
    return tg_set_error(TG_ERR_ARG, "kv_cache_init: sizes must be positive (%lld, %lld, %lld, %lld)", (long long)batch,
                        (long long)heads, (long long)max_len, (long long)head_dim);
  if (!tg_dtype_is_float(dtype)) return tg_set_error(TG_ERR_ARG, "kv_cache_init: dtype must be a float, got %s", tg_dtype_name(dtype));
  int64_t shape[4] = {batch, heads, max_len, head_dim};
  tg_scope *s = tg_scope_begin(); /* the cache holds its own references: it outlives the caller's scope */
  tg_tensor *k = tg_zeros(shape, 4, dtype), *v = tg_zeros(shape, 4, dtype);
  bool ok = k && v && tg_realize(k) == 0 && tg_realize(v) == 0;
  if (ok) c->k = tg_retain(k), c->v = tg_retain(v), c->max_len = max_len;
  tg_scope_end(s);
  return ok ? 0 : tg_error_status_or(TG_ERR_NOMEM);
}

void tg_kv_cache_free(tg_kv_cache *c) {
  if (!c) return;
  tg_free(c->k), tg_free(c->v);
  c->k = c->v = NULL, c->len = 0;
}

/* k or v (B, H, T, D) fits the cache at its start position. */
static bool kv_fits(const char *op, const tg_kv_cache *c, tg_tensor *t) {
  if (!c->k) return tg_set_error(TG_ERR_ARG, "%s: the cache is not initialized", op), false;
  bool ok = tg_ndim(t) == 4;
  for (int i = 0; ok && i < 4; i++) ok = i == 2 || tg_dim(t, i) == tg_dim(c->k, i);
  if (!ok) return tg_set_error(TG_ERR_ARG, "%s: k and v must be (B, H, T, D) like the cache's (%lld, %lld, T, %lld)", op,
                               (long long)tg_dim(c->k, 0), (long long)tg_dim(c->k, 1), (long long)tg_dim(c->k, 3)), false;
  if (c->len + tg_dim(t, 2) > c->max_len)
    return tg_set_error(TG_ERR_ARG, "%s: %lld new positions after %lld do not fit the cache's %lld", op,
                        (long long)tg_dim(t, 2), (long long)c->len, (long long)c->max_len), false;
  return true;
}

/* The start position enters every graph as a scalar argument (tg_scalar: a kernel argument,
 * not a constant), and nothing's shape depends on it, so one compiled kernel serves every
 * position: the cache's whole length is always used, masked past the filled part. */

/* The cache with t (B, H, T, D) written at positions [p, p + T) of axis 2: t's rows gathered
 * by position (an index_select over T, whose gradient reaches t), the cache elsewhere. */
static tg_tensor *placed(tg_tensor *cache, tg_tensor *t, int64_t p) {
  int64_t m = tg_dim(cache, 2), col[2] = {m, 1};
  tg_tensor *rel = tg_sub(tg_arange(0, (double)m, 1, TG_INT32), tg_scalar((double)p, TG_INT32));
  tg_tensor *in = tg_logical_and(tg_ge(rel, tg_zeros_like(rel)), tg_lt(rel, tg_scalar((double)tg_dim(t, 2), TG_INT32)));
  tg_tensor *rows = tg_index_select(tg_cast(t, tg_get_dtype(cache)), 2, tg_where(in, rel, tg_zeros_like(rel)));
  return tg_where(tg_reshape(in, col, 2), rows, cache);
}

/* keep[t, j] for queries at positions p .. p+T-1 over the cache's m positions: j <= p + t
 * (causal) or j < p + T. */
static tg_tensor *cache_keep(int64_t p, int64_t n, int64_t m, bool causal) {
  int64_t col[2] = {n, 1}, row[2] = {1, m};
  tg_tensor *j = tg_reshape(tg_arange(0, (double)m, 1, TG_INT32), row, 2);
  tg_tensor *last = causal ? tg_reshape(tg_add(tg_arange(0, (double)n, 1, TG_INT32), tg_scalar((double)p, TG_INT32)), col, 2)
                           : tg_scalar((double)(p + n - 1), TG_INT32);
  return tg_le(j, last);
}

/* The cache's buffers become kn, vn (in place), realized now. */
static int store(tg_kv_cache *c, tg_tensor *kn, tg_tensor *vn, int64_t n) {
  int rc = tg_assign(c->k, kn);
  if (rc >= 0) rc = tg_assign(c->v, vn);
  if (rc >= 0) rc = tg_realize(c->k);
  if (rc >= 0) rc = tg_realize(c->v);
  if (rc >= 0) c->len += n;
  return rc;
}

int tg_kv_cache_append(tg_kv_cache *c, tg_tensor *k, tg_tensor *v) {
  if (!c || !k || !v) return tg_set_error(TG_ERR_ARG, "kv_cache_append: NULL argument");
  if (!kv_fits("kv_cache_append", c, k) || !kv_fits("kv_cache_append", c, v)) return TG_ERR_ARG;
  if (tg_dim(k, 2) != tg_dim(v, 2)) return tg_set_error(TG_ERR_ARG, "kv_cache_append: k and v differ in length");
  tg_scope *s = tg_scope_begin();
  int rc = store(c, placed(c->k, tg_detach(k), c->len), placed(c->v, tg_detach(v), c->len), tg_dim(k, 2));
  tg_scope_end(s);
  return rc;
}

tg_tensor *tg_attention(tg_tensor *q, tg_tensor *k, tg_tensor *v, tg_kv_cache *cache, bool causal) {
  if (!q || !k || !v) return null_arg("attention");
  if (!cache) return tg_scaled_dot_product_attention(q, k, v, NULL, causal);
  if (!kv_fits("attention", cache, k) || !kv_fits("attention", cache, v)) return NULL;
  if (tg_ndim(q) != 4 || tg_dim(q, 2) != tg_dim(k, 2) || tg_dim(k, 2) != tg_dim(v, 2))
    return ARG_ERROR("attention: q, k and v must be (B, H, T, D) with one T (q has rank %d)", tg_ndim(q));
  int64_t p = cache->len, n = tg_dim(q, 2);
  tg_scope *s = tg_scope_begin();
  tg_tensor *kn = placed(cache->k, k, p), *vn = placed(cache->v, v, p);
  tg_tensor *out = tg_scaled_dot_product_attention(q, kn, vn, cache_keep(p, n, cache->max_len, causal), false);
  /* out first: it reads the old buffers, which store() then overwrites with kn and vn */
  if (out && (tg_realize(out) < 0 || store(cache, tg_detach(kn), tg_detach(vn), n) < 0)) out = NULL;
  return finish(s, out);
}

/* ---------------------------------------------------------------- sampling */

typedef struct { double p; int64_t i; } ranked;

static int by_prob_desc(const void *a, const void *b) {
  const ranked *x = a, *y = b;
  if (x->p != y->p) return x->p < y->p ? 1 : -1;
  return x->i < y->i ? -1 : x->i > y->i;
}

/* One row: logits → the distribution sampling draws from (probs, v entries, sum 1). */
static void row_probs(const double *logits, int64_t v, double temperature, int top_k, double top_p, double *probs,
                      ranked *tmp) {
  int64_t best = 0;
  for (int64_t i = 1; i < v; i++)
    if (logits[i] > logits[best] || (isnan(logits[i]) && !isnan(logits[best]))) best = i;
  if (!(temperature > 0) || !isfinite(logits[best])) { /* greedy (and rows with inf/NaN) */
    for (int64_t i = 0; i < v; i++) probs[i] = i == best;
    return;
  }
  double total = 0;
  for (int64_t i = 0; i < v; i++) total += probs[i] = exp((logits[i] - logits[best]) / temperature);
  for (int64_t i = 0; i < v; i++) tmp[i] = (ranked){probs[i] /= total, i};
  qsort(tmp, (size_t)v, sizeof *tmp, by_prob_desc);
  int64_t keep = top_k > 0 && top_k < v ? top_k : v;
  while (keep < v && tmp[keep].p == tmp[keep - 1].p) keep++; /* ties with the k-th stay (Hugging Face's >= kth) */
  double kept = 0, cum = 0;
  for (int64_t i = 0; i < keep; i++) kept += tmp[i].p;
  int64_t nucleus = 0; /* tokens while the mass before them is below top_p (at least one) */
  while (nucleus < keep && (nucleus == 0 || cum < top_p)) cum += tmp[nucleus++].p / kept;
  memset(probs, 0, sizeof(double) * (size_t)v);
  for (int64_t i = 0; i < nucleus; i++) probs[tmp[i].i] = tmp[i].p / (cum * kept);
}

/* Validate and read logits (B, V) to the host as float64; *b, *v its sizes. */
static double *read_logits(const char *op, tg_tensor *logits, int top_k, double top_p, int64_t *b, int64_t *v) {
  if (!logits) return null_arg(op), NULL;
  if (tg_ndim(logits) != 2 || !tg_dtype_is_float(tg_get_dtype(logits)) || tg_dim(logits, 1) < 1)
    return tg_set_error(TG_ERR_ARG, "%s: logits must be a float (B, V) tensor with V >= 1", op), NULL;
  if (top_k < 0 || !(top_p > 0 && top_p <= 1))
    return tg_set_error(TG_ERR_ARG, "%s: top_k must be >= 0 and top_p in (0, 1], got %d and %g", op, top_k, top_p), NULL;
  *b = tg_dim(logits, 0), *v = tg_dim(logits, 1);
  size_t n = (size_t)(*b * *v);
  double *h = malloc(sizeof(double) * (n ? n : 1));
  if (!h) return tg_set_error(TG_ERR_NOMEM, "%s: out of memory", op), NULL;
  tg_scope *s = tg_scope_begin();
  int rc = tg_to_host(tg_cast(logits, TG_FLOAT64), h, sizeof(double) * n);
  tg_scope_end(s);
  if (rc < 0) return free(h), NULL;
  return h;
}

/* probs (b, v) of every row into out; 0 or a negative status. */
static int all_probs(const double *h, int64_t b, int64_t v, double temperature, int top_k, double top_p, double *out) {
  ranked *tmp = malloc(sizeof(ranked) * (size_t)v);
  if (!tmp) return tg_set_error(TG_ERR_NOMEM, "sample: out of memory");
  for (int64_t r = 0; r < b; r++) row_probs(h + r * v, v, temperature, top_k, top_p, out + r * v, tmp);
  free(tmp);
  return 0;
}

tg_tensor *tg_sample_probs(tg_tensor *logits, double temperature, int top_k, double top_p) {
  int64_t b, v;
  double *h = read_logits("sample_probs", logits, top_k, top_p, &b, &v);
  if (!h) return NULL;
  double *p = malloc(sizeof(double) * (size_t)(b * v + 1));
  tg_tensor *r = NULL;
  if (p && all_probs(h, b, v, temperature, top_k, top_p, p) == 0) {
    int64_t shape[2] = {b, v};
    tg_scope *s = tg_scope_begin();
    r = finish(s, tg_cast(tg_from_data(p, TG_FLOAT64, shape, 2), TG_FLOAT32));
  } else if (!p) tg_set_error(TG_ERR_NOMEM, "sample_probs: out of memory");
  free(h), free(p);
  return r;
}

int tg_sample(tg_tensor *logits, double temperature, int top_k, double top_p, int64_t *out) {
  if (!out) return tg_set_error(TG_ERR_ARG, "sample: NULL output");
  int64_t b, v;
  double *h = read_logits("sample", logits, top_k, top_p, &b, &v);
  if (!h) return tg_error_status_or(TG_ERR_ARG);
  double *p = malloc(sizeof(double) * (size_t)(b * v + 1));
  int rc = p ? all_probs(h, b, v, temperature, top_k, top_p, p) : tg_set_error(TG_ERR_NOMEM, "sample: out of memory");
  for (int64_t r = 0; rc == 0 && r < b; r++) {
    uint32_t w[2];
    tg_random_u32(w, 2); /* the seeded stream: a uniform double in [0, 1) from 53 bits */
    double u = ((double)(w[0] >> 5) * 67108864.0 + (double)(w[1] >> 6)) / 9007199254740992.0, cum = 0;
    int64_t pick = -1, last = 0;
    for (int64_t i = 0; i < v && pick < 0; i++) {
      if (p[r * v + i] <= 0) continue;
      last = i, cum += p[r * v + i];
      if (u < cum) pick = i;
    }
    out[r] = pick < 0 ? last : pick; /* u past the rounded total: the last kept token */
  }
  free(h), free(p);
  return rc;
}
