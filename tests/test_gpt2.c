/* test_gpt2.c — the GPT-2 model (src/nn/gpt2.c) against transformers.
 *
 * tests/fixtures/gpt2/ holds a random-weight GPT-2 made by transformers' GPT2LMHeadModel
 * (save_pretrained: config.json + model.safetensors), the same weights as GGUF in float32 and
 * Q8_0, and ref.h: transformers' logits for a prompt and its 64 greedy tokens, for the model
 * and for the model rebuilt from the Q8_0 file's dequantized weights (tests/gen_fixtures_gpt2.py).
 * tg must give the logits within 1e-4 and the same greedy tokens both through its key/value
 * cache and by recomputing the whole sequence every step. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fixtures/gpt2/ref.h"
#include "harness.h"
#include "tg_llm.h"
#include "tg_nn.h"

#define DIR "tests/fixtures/gpt2"

/* The largest |a - b| over n values of t (a host read) against ref. */
static double max_diff(tg_tensor *t, const float *ref, int64_t n) {
  float *h = malloc(sizeof(float) * (size_t)n);
  double d = 1e30;
  if (h && tg_to_host(t, h, sizeof(float) * (size_t)n) == 0) {
    d = 0;
    for (int64_t i = 0; i < n; i++) d = fmax(d, fabs((double)h[i] - (double)ref[i]));
  }
  free(h);
  return d;
}

/* The index of the first maximum of row r of host logits (rows of GPT2_V). */
static int32_t argmax_row(const float *h, int64_t r) {
  int32_t best = 0;
  for (int32_t i = 1; i < GPT2_V; i++)
    if (h[r * GPT2_V + i] > h[r * GPT2_V + best]) best = i;
  return best;
}

/* Greedy tokens through the cache: the prompt, then one token per step. */
static int greedy_cached(tg_gpt2 *m, int32_t *out) {
  float *h = malloc(sizeof(float) * GPT2_T * GPT2_V);
  int rc = h && tg_gpt2_reset(m, GPT2_T + GPT2_STEPS) == 0 ? 0 : -1;
  int32_t tok = 0;
  for (int s = 0; rc == 0 && s < GPT2_STEPS; s++) {
    tg_scope *sc = tg_scope_begin();
    tg_tensor *l = s == 0 ? tg_gpt2_step(m, gpt2_prompt, GPT2_T) : tg_gpt2_step(m, &tok, 1);
    int64_t rows = s == 0 ? GPT2_T : 1;
    if (!l || tg_to_host(l, h, sizeof(float) * (size_t)(rows * GPT2_V)) < 0) rc = -1;
    else out[s] = tok = argmax_row(h, rows - 1);
    tg_scope_end(sc);
  }
  free(h);
  return rc;
}

/* Greedy tokens by full recompute: every step runs the whole sequence, padded to a fixed
 * length L (causal attention: the padding cannot reach the positions before it) so that the
 * kernels compile once, and reads the logits at the last real position. */
static int greedy_full(tg_gpt2 *m, int32_t *out) {
  enum { L = GPT2_T + GPT2_STEPS };
  int32_t seq[L] = {0};
  float *h = malloc(sizeof(float) * L * GPT2_V);
  int rc = h ? 0 : -1;
  memcpy(seq, gpt2_prompt, sizeof gpt2_prompt);
  for (int s = 0; rc == 0 && s < GPT2_STEPS; s++) {
    tg_scope *sc = tg_scope_begin();
    int64_t shape[2] = {1, L};
    tg_tensor *l = tg_gpt2_forward(m, tg_from_data(seq, TG_INT32, shape, 2));
    if (!l || tg_to_host(l, h, sizeof(float) * L * GPT2_V) < 0) rc = -1;
    else out[s] = seq[GPT2_T + s] = argmax_row(h, GPT2_T + s - 1);
    tg_scope_end(sc);
  }
  free(h);
  return rc;
}

static int count_equal(const int32_t *a, const int32_t *b, int n) {
  int k = 0;
  while (k < n && a[k] == b[k]) k++;
  return k;
}

/* Prompt logits (forward and step) and the two greedy runs of m against the references. */
static void check_model(tg_gpt2 *m, const float *ref_logits, const int32_t *ref_greedy) {
  CHECK(m != NULL);
  if (!m) return;
  tg_scope *s = tg_scope_begin();
  int64_t shape[2] = {1, GPT2_T};
  tg_tensor *full = tg_gpt2_forward(m, tg_from_data(gpt2_prompt, TG_INT32, shape, 2));
  CHECK(full && tg_ndim(full) == 3 && tg_dim(full, 2) == GPT2_V);
  double d = max_diff(full, ref_logits, GPT2_T * GPT2_V);
  CHECK(d <= 1e-4);
  CHECK(tg_gpt2_reset(m, 0) == 0);
  tg_tensor *stepped = tg_gpt2_step(m, gpt2_prompt, GPT2_T);
  double d2 = max_diff(stepped, ref_logits, GPT2_T * GPT2_V);
  CHECK(d2 <= 1e-4);
  tg_scope_end(s);
  int32_t cached[GPT2_STEPS] = {0}, recomputed[GPT2_STEPS] = {0};
  CHECK(greedy_cached(m, cached) == 0);
  CHECK(greedy_full(m, recomputed) == 0);
  int kc = count_equal(cached, ref_greedy, GPT2_STEPS), kf = count_equal(recomputed, ref_greedy, GPT2_STEPS);
  CHECK(kc == GPT2_STEPS);
  CHECK(kf == GPT2_STEPS);
  if (d > 1e-4 || d2 > 1e-4 || kc < GPT2_STEPS || kf < GPT2_STEPS)
    printf("  logits off by %g (forward) %g (cached); greedy equal for %d (cached) %d (recomputed) of %d steps\n", d, d2, kc, kf,
           GPT2_STEPS);
}

TEST(gpt2_hf_directory_matches_transformers) {
  tg_gpt2 *m = tg_gpt2_load(DIR);
  if (m) {
    const tg_gpt2_config *c = tg_gpt2_get_config(m);
    CHECK(c->n_layer == 2 && c->n_head == 4 && c->n_embd == 64 && c->n_inner == 256 && c->vocab_size == GPT2_V &&
          c->n_positions == 80 && c->eps == 1e-5 && !c->gelu_erf);
  }
  check_model(m, gpt2_logits, gpt2_greedy);
  tg_gpt2_free(m);
}

TEST(gpt2_gguf_f32_matches_transformers) {
  tg_gpt2 *m = tg_gpt2_load_gguf(DIR "/f32.gguf");
  check_model(m, gpt2_logits, gpt2_greedy);
  tg_gpt2_free(m);
}

TEST(gpt2_gguf_q8_0_matches_transformers_on_dequantized_weights) {
  tg_gpt2 *m = tg_gpt2_load_gguf(DIR "/q8_0.gguf");
  check_model(m, gpt2_q8_logits, gpt2_q8_greedy);
  tg_gpt2_free(m);
}
