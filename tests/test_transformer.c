/* test_transformer.c — the transformer blocks of src/nn/transformer.c against PyTorch
 * (fixtures/transformer.h from tests/gen_fixtures_transformer.py): embedding lookup, GELU's
 * erf form, rotary embeddings in both styles, attention over a key/value cache (forward of
 * every call, gradients of the last), and the sampling distribution; then sampling itself:
 * greedy, seeded reproducibility, and draw counts against the distribution. Gradients are of
 * sum(out * g) for the fixture's g, through tg_gradient. */
#include <stdlib.h>

#include "harness.h"
#include "fixtures/transformer.h"
#include "tg_nn.h"

#define N_OF(a) (int64_t)(sizeof(a) / sizeof *(a))

static tg_tensor *f32(const float *v, const int64_t *shape, int nd) { return tg_from_data(v, TG_FLOAT32, shape, nd); }

/* t equals want[0..n) within tol (absolute + relative); reports the first miss. */
static void check_close(const char *what, tg_tensor *t, const float *want, int64_t n, double tol) {
  float *got = malloc(sizeof(float) * (size_t)n);
  CHECK(t != NULL);
  CHECK(t && tg_to_host(t, got, sizeof(float) * (size_t)n) == 0);
  int bad = 0;
  for (int64_t i = 0; t && i < n; i++)
    if (!(fabs((double)got[i] - want[i]) <= tol * (1 + fabs((double)want[i]))) && bad++ == 0)
      printf("  %s[%lld] = %.9g, want %.9g\n", what, (long long)i, (double)got[i], (double)want[i]);
  CHECK(bad == 0);
  free(got);
}

/* d(sum(y * g))/d(xs[i]) into grads. */
static void grads_of(tg_tensor *y, const float *g, tg_tensor **xs, int n, tg_tensor **grads) {
  int64_t shape[8];
  int nd = tg_shape(y, shape, 8);
  tg_tensor *loss = tg_sum(tg_mul(y, f32(g, shape, nd)), NULL, 0, false);
  CHECK(tg_gradient(loss, xs, n, grads) == 0);
}

TEST(transformer_embedding_lookup) {
  tg_scope *s = tg_scope_begin();
  tg_tensor *w = f32(emb_w, (const int64_t[]){10, 4}, 2);
  tg_tensor *idx = tg_from_data(emb_idx, TG_INT32, (const int64_t[]){2, 3}, 2);
  tg_tensor *y = tg_embedding_lookup(w, idx), *dw;
  CHECK(tg_ndim(y) == 3 && tg_dim(y, 2) == 4);
  check_close("embedding", y, emb_out, N_OF(emb_out), 1e-6);
  grads_of(y, emb_g, &w, 1, &dw); /* rows 1 and 7 are used twice: their gradients add */
  check_close("embedding dw", dw, emb_dw, N_OF(emb_dw), 1e-6);
  CHECK(tg_embedding_lookup(w, w) == NULL && strstr(tg_last_error(), "integers"));
  CHECK(tg_embedding_lookup(NULL, idx) == NULL);
  tg_scope_end(s);
}

TEST(transformer_gelu_erf) {
  tg_scope *s = tg_scope_begin();
  tg_tensor *x = f32(gelu_x, (const int64_t[]){64}, 1), *dx;
  tg_tensor *y = tg_gelu_erf(x);
  check_close("gelu_erf", y, gelu_out, 64, 1e-6);
  grads_of(y, gelu_g, &x, 1, &dx);
  check_close("gelu_erf dx", dx, gelu_dx, 64, 1e-5);
  CHECK(tg_gelu_erf(tg_from_data(emb_idx, TG_INT32, (const int64_t[]){6}, 1)) == NULL);
  tg_scope_end(s);
}

static void rope_case(tg_rope_style style, const float *out, const float *g, const float *dx_want) {
  tg_scope *s = tg_scope_begin();
  tg_tensor *x = f32(rope_x, (const int64_t[]){2, 3, 5, 8}, 4), *dx;
  tg_tensor *y = tg_rotary_embedding(x, 3, 10000.0, style);
  check_close(style == TG_ROPE_HALF ? "rope half" : "rope interleaved", y, out, N_OF(rope_x), 1e-5);
  grads_of(y, g, &x, 1, &dx);
  check_close("rope dx", dx, dx_want, N_OF(rope_x), 1e-5);
  tg_scope_end(s);
}

TEST(transformer_rotary_half) { rope_case(TG_ROPE_HALF, rope_half_out, rope_half_g, rope_half_dx); }
TEST(transformer_rotary_interleaved) { rope_case(TG_ROPE_INTERLEAVED, rope_inter_out, rope_inter_g, rope_inter_dx); }

TEST(transformer_rotary_errors) {
  tg_scope *s = tg_scope_begin();
  tg_tensor *odd = tg_zeros((const int64_t[]){2, 3}, 2, TG_FLOAT32), *x = f32(rope_x, (const int64_t[]){240}, 1);
  CHECK(tg_rotary_embedding(odd, 0, 10000, TG_ROPE_HALF) == NULL && strstr(tg_last_error(), "even"));
  CHECK(tg_rotary_embedding(x, 0, 10000, TG_ROPE_HALF) == NULL && strstr(tg_last_error(), "rank"));
  CHECK(tg_rotary_embedding(odd, -1, 10000, TG_ROPE_HALF) == NULL);
  CHECK(tg_rotary_embedding(tg_zeros((const int64_t[]){2, 4}, 2, TG_FLOAT32), 0, 10000, (tg_rope_style)7) == NULL);
  /* position 0 is the identity */
  tg_tensor *y = tg_rotary_embedding(f32(rope_x, (const int64_t[]){1, 8}, 2), 0, 10000, TG_ROPE_INTERLEAVED);
  check_close("rope at 0", y, rope_x, 8, 0);
  tg_scope_end(s);
}

/* Prefill 3 positions, decode 1, then 2 more through one cache; each call's output against
 * PyTorch (causal over everything so far), and the last call's gradients. */
TEST(transformer_attention_kv_cache) {
  const float *q[3] = {att_q0, att_q1, att_q2}, *k[3] = {att_k0, att_k1, att_k2}, *v[3] = {att_v0, att_v1, att_v2};
  const float *out[3] = {att_out0, att_out1, att_out2};
  const int64_t steps[3] = {3, 1, 2};
  tg_kv_cache c;
  CHECK(tg_kv_cache_init(&c, 1, 2, 8, 4, TG_FLOAT32) == 0);
  tg_scope *s = tg_scope_begin();
  for (int i = 0; i < 3; i++) {
    int64_t shape[4] = {1, 2, steps[i], 4};
    tg_tensor *xs[3] = {f32(q[i], shape, 4), f32(k[i], shape, 4), f32(v[i], shape, 4)}, *g[3];
    int64_t before = c.len;
    tg_tensor *y = tg_attention(xs[0], xs[1], xs[2], &c, true);
    CHECK(c.len == before + steps[i]);
    check_close("attention", y, out[i], 8 * steps[i], 1e-5);
    if (i < 2) continue;
    grads_of(y, att_g, xs, 3, g);
    check_close("attention dq", g[0], att_dq, 16, 1e-5);
    check_close("attention dk", g[1], att_dk, 16, 1e-5);
    check_close("attention dv", g[2], att_dv, 16, 1e-5);
  }
  /* the cache holds every key so far, zeros after */
  float kc[64], want[64] = {0};
  CHECK(tg_to_host(c.k, kc, sizeof kc) == 0);
  for (int h = 0; h < 2; h++)
    for (int i = 0, p = 0; i < 3; p += (int)steps[i++])
      for (int t = 0; t < steps[i]; t++) memcpy(want + (h * 8 + p + t) * 4, k[i] + (h * steps[i] + t) * 4, 16);
  CHECK(memcmp(kc, want, sizeof kc) == 0);
  /* 3 more positions do not fit the 8: an error, nothing written */
  tg_tensor *big = tg_zeros((const int64_t[]){1, 2, 3, 4}, 4, TG_FLOAT32);
  CHECK(tg_attention(big, big, big, &c, true) == NULL && strstr(tg_last_error(), "do not fit"));
  CHECK(tg_kv_cache_append(&c, big, big) < 0 && c.len == 6);
  CHECK(tg_kv_cache_append(&c, tg_zeros((const int64_t[]){1, 3, 1, 4}, 4, TG_FLOAT32), big) < 0);
  tg_scope_end(s);
  tg_kv_cache_free(&c);
  CHECK(tg_kv_cache_init(&c, 0, 1, 1, 1, TG_FLOAT32) < 0);
  CHECK(tg_kv_cache_init(&c, 1, 1, 1, 1, TG_INT32) < 0);
}

/* Without a cache tg_attention is tg_scaled_dot_product_attention (the first call's values). */
TEST(transformer_attention_no_cache) {
  tg_scope *s = tg_scope_begin();
  int64_t shape[4] = {1, 2, 3, 4};
  tg_tensor *y = tg_attention(f32(att_q0, shape, 4), f32(att_k0, shape, 4), f32(att_v0, shape, 4), NULL, true);
  check_close("attention", y, att_out0, 24, 1e-5);
  tg_scope_end(s);
}

TEST(transformer_sample_probs) {
  const float *want[5] = {samp_probs0, samp_probs1, samp_probs2, samp_probs3, samp_probs4};
  tg_scope *s = tg_scope_begin();
  tg_tensor *logits = f32(samp_logits, (const int64_t[]){3, 10}, 2);
  for (int i = 0; i < 5; i++) {
    tg_tensor *p = tg_sample_probs(logits, samp_settings[i].temperature, samp_settings[i].top_k, samp_settings[i].top_p);
    check_close("sample probs", p, want[i], 30, 1e-6);
  }
  CHECK(tg_sample_probs(logits, 1, -1, 1) == NULL && strstr(tg_last_error(), "top_k"));
  CHECK(tg_sample_probs(logits, 1, 0, 0) == NULL);
  CHECK(tg_sample_probs(tg_zeros((const int64_t[]){4}, 1, TG_FLOAT32), 1, 0, 1) == NULL);
  tg_scope_end(s);
}

TEST(transformer_sample_greedy_and_seeded) {
  tg_scope *s = tg_scope_begin();
  tg_tensor *logits = f32(samp_logits, (const int64_t[]){3, 10}, 2);
  int64_t a[3], b[3], want[3];
  for (int r = 0; r < 3; r++) { /* the first maximum of each row */
    want[r] = 0;
    for (int i = 1; i < 10; i++)
      if (samp_logits[r * 10 + i] > samp_logits[r * 10 + want[r]]) want[r] = i;
  }
  CHECK(want[2] == 3); /* the fixture's tie at 3 and 5 */
  CHECK(tg_sample(logits, 0, 0, 1, a) == 0);
  CHECK(a[0] == want[0] && a[1] == want[1] && a[2] == want[2]);
  bool differ = false;
  for (int round = 0; round < 8; round++) {
    tg_manual_seed(1234 + (uint64_t)round);
    CHECK(tg_sample(logits, 1.0, 0, 1, a) == 0);
    tg_manual_seed(1234 + (uint64_t)round);
    CHECK(tg_sample(logits, 1.0, 0, 1, b) == 0);
    CHECK(a[0] == b[0] && a[1] == b[1] && a[2] == b[2]);
    differ |= round > 0 && a[0] != want[0];
  }
  CHECK(differ); /* temperature 1 is not greedy */
  CHECK(tg_sample(logits, 1, 0, 1, NULL) < 0);
  tg_scope_end(s);
}

/* 20000 draws of one row: counts within 5 sigma of n p, nothing outside the kept set. */
TEST(transformer_sample_counts) {
  enum { N = 20000 };
  float *rows = malloc(sizeof(float) * N * 10);
  for (int r = 0; r < N; r++) memcpy(rows + r * 10, samp_logits, 40);
  int64_t *pick = malloc(sizeof(int64_t) * N), count[10] = {0};
  tg_scope *s = tg_scope_begin();
  tg_manual_seed(7);
  CHECK(tg_sample(f32(rows, (const int64_t[]){N, 10}, 2), 1.3, 0, 0.6, pick) == 0); /* setting 2 */
  for (int r = 0; r < N; r++) count[pick[r] >= 0 && pick[r] < 10 ? pick[r] : 0]++;
  for (int i = 0; i < 10; i++) {
    double p = samp_probs2[i], mean = N * p, sd = sqrt(N * p * (1 - p));
    if (p == 0) CHECK(count[i] == 0);
    else CHECK(fabs((double)count[i] - mean) <= 5 * sd + 1);
  }
  tg_scope_end(s);
  free(rows), free(pick);
}

/* Decoding one position at a time: the start position is a kernel argument, so after the
 * first two steps no kernel is compiled, the graph does not grow, and each step's output is
 * attention over everything so far (checked against a naive loop on the host). */
TEST(transformer_kv_cache_decode_compiles_once) {
  enum { STEPS = 24, D = 4 };
  static float keys[STEPS][D], vals[STEPS][D];
  tg_kv_cache c;
  CHECK(tg_kv_cache_init(&c, 1, 1, STEPS, D, TG_FLOAT32) == 0);
  uint64_t compiled_after_two = 0, uops_after_two = 0;
  int bad = 0;
  for (int step = 0; step < STEPS; step++) {
    float q[D];
    for (int d = 0; d < D; d++) /* distinct values per step and lane */
      q[d] = sinf(0.7f * (float)(step * D + d)), keys[step][d] = cosf(0.3f * (float)(step + d)), vals[step][d] = (float)(step - d);
    tg_scope *s = tg_scope_begin();
    const int64_t shape[4] = {1, 1, 1, D};
    float out[D];
    tg_tensor *y = tg_attention(f32(q, shape, 4), f32(keys[step], shape, 4), f32(vals[step], shape, 4), &c, true);
    CHECK(y && tg_to_host(y, out, sizeof out) == 0);
    tg_scope_end(s);
    double w[STEPS], total = 0, mx = -INFINITY; /* softmax over keys 0..step */
    for (int j = 0; j <= step; j++) {
      w[j] = 0;
      for (int d = 0; d < D; d++) w[j] += (double)q[d] * keys[j][d] / 2.0; /* sqrt(D) = 2 */
      if (w[j] > mx) mx = w[j];
    }
    for (int j = 0; j <= step; j++) total += w[j] = exp(w[j] - mx);
    for (int d = 0; d < D; d++) {
      double want = 0;
      for (int j = 0; j <= step; j++) want += w[j] / total * vals[j][d];
      if (fabs(out[d] - want) > 1e-5 * (1 + fabs(want)) && bad++ == 0) printf("  step %d lane %d: %g, want %g\n", step, d, out[d], want);
    }
    tg_stats st = tg_get_stats();
    if (step == 1) compiled_after_two = st.kernels_compiled, uops_after_two = st.uops_alive;
  }
  tg_stats st = tg_get_stats();
  CHECK(bad == 0);
  CHECK(c.len == STEPS);
  CHECK(st.kernels_compiled == compiled_after_two);
  CHECK(st.uops_alive <= uops_after_two);
  tg_kv_cache_free(&c);
}
