/* test_gpt2.c — the GPT-2 model (src/nn/gpt2.c) against transformers.
 *
 * tests/fixtures/gpt2/ holds a random-weight GPT-2 made by transformers' GPT2LMHeadModel
 * (save_pretrained: config.json + model.safetensors), the same weights as GGUF in float32 and
 * Q8_0, and ref.h: transformers' logits for a prompt and its 64 greedy tokens, for the model
 * and for the model rebuilt from the Q8_0 file's dequantized weights (tests/gen_fixtures_gpt2.py).
 * tg must give the logits within 1e-4 and the same greedy tokens both through its key/value
 * cache (plain and replayed by tg_jit) and by recomputing the whole sequence every step. */
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

/* Greedy tokens through the cache: the prompt, then one token per step (through tg_jit when
 * jit; *replayed counts the steps that ran no schedule). */
static int greedy_cached(tg_gpt2 *m, bool jit, int32_t *out, int *replayed) {
  float *h = malloc(sizeof(float) * GPT2_T * GPT2_V);
  int rc = h && tg_gpt2_reset(m, GPT2_T + GPT2_STEPS) == 0 && tg_gpt2_use_jit(m, jit) == 0 ? 0 : -1;
  *replayed = 0;
  int32_t tok = 0;
  for (int s = 0; rc == 0 && s < GPT2_STEPS; s++) {
    tg_scope *sc = tg_scope_begin();
    uint64_t schedules = tg_get_stats().schedules;
    tg_tensor *l = s == 0 ? tg_gpt2_step(m, gpt2_prompt, GPT2_T) : tg_gpt2_step(m, &tok, 1);
    *replayed += tg_get_stats().schedules == schedules;
    int64_t rows = s == 0 ? GPT2_T : 1;
    if (!l || tg_to_host(l, h, sizeof(float) * (size_t)(rows * GPT2_V)) < 0) rc = -1;
    else out[s] = tok = argmax_row(h, rows - 1);
    tg_scope_end(sc);
  }
  free(h);
  tg_gpt2_use_jit(m, false);
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

/* argmax of one row of v logits. */
static int32_t argmax_row_v(const float *h, int v) {
  int32_t best = 0;
  for (int32_t i = 1; i < v; i++)
    if (h[i] > h[best]) best = i;
  return best;
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
  int32_t cached[GPT2_STEPS] = {0}, jitted[GPT2_STEPS] = {0}, recomputed[GPT2_STEPS] = {0};
  int replayed = 0, plain_replayed = 0;
  CHECK(greedy_cached(m, false, cached, &plain_replayed) == 0);
  CHECK(greedy_cached(m, true, jitted, &replayed) == 0);
  CHECK(greedy_full(m, recomputed) == 0);
  int kc = count_equal(cached, ref_greedy, GPT2_STEPS), kj = count_equal(jitted, ref_greedy, GPT2_STEPS);
  int kf = count_equal(recomputed, ref_greedy, GPT2_STEPS);
  CHECK(kc == GPT2_STEPS);
  CHECK(kj == GPT2_STEPS);
  CHECK(kf == GPT2_STEPS);
  CHECK(plain_replayed == 0);
  CHECK(replayed >= GPT2_STEPS - 4); /* the JIT records two or three steps, then replays */
  if (d > 1e-4 || d2 > 1e-4 || kc < GPT2_STEPS || kj < GPT2_STEPS || kf < GPT2_STEPS || replayed < GPT2_STEPS - 4)
    printf("  logits off by %g (forward) %g (cached); greedy equal for %d (cached) %d (jit, %d replayed) %d (recomputed) of %d\n",
           d, d2, kc, kj, replayed, kf, GPT2_STEPS);
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

/* ---------------------------------------------------------------- layouts and errors */

/* A temporary directory holding config.json = cfg and model.safetensors = sd. */
static int write_dir(char *dir, const char *cfg, const tg_state_dict *sd) {
  strcpy(dir, "/tmp/tg_gpt2_XXXXXX");
  if (!mkdtemp(dir)) return -1;
  char path[256];
  snprintf(path, sizeof path, "%s/config.json", dir);
  FILE *f = fopen(path, "w");
  if (!f) return -1;
  fputs(cfg, f);
  fclose(f);
  snprintf(path, sizeof path, "%s/model.safetensors", dir);
  return sd ? tg_safetensors_save(path, sd) : 0;
}

static void remove_dir(const char *dir) {
  char path[256];
  snprintf(path, sizeof path, "%s/config.json", dir), unlink(path);
  snprintf(path, sizeof path, "%s/model.safetensors", dir), unlink(path);
  rmdir(dir);
}

static char *fixture_config(void) {
  static char buf[4096];
  FILE *f = fopen(DIR "/config.json", "r");
  size_t n = f ? fread(buf, 1, sizeof buf - 1, f) : 0;
  if (f) fclose(f);
  buf[n] = 0;
  return buf;
}

/* The fixture's tensors renamed by dropping "transformer." (GPT2Model's names), minus the
 * tensor called drop, with the tensor called narrow cut to its first half on axis 0. */
static int variant(tg_state_dict *out, const char *drop, const char *narrow) {
  tg_state_dict sd = {0};
  int rc = tg_safetensors_read(DIR "/model.safetensors", &sd);
  for (int i = 0; rc == 0 && i < sd.n; i++) {
    const char *name = sd.names[i] + (strncmp(sd.names[i], "transformer.", 12) ? 0 : 12);
    if (drop && !strcmp(name, drop)) continue;
    tg_tensor *t = sd.tensors[i];
    if (narrow && !strcmp(name, narrow)) t = tg_slice(t, 0, 0, tg_dim(t, 0) / 2, 1);
    rc = tg_state_dict_add(out, name, t);
  }
  tg_state_dict_free(&sd);
  return rc;
}

/* Load dir made from cfg and the variant; NULL expected with a message containing want
 * (want NULL: the load must succeed and match the fixture's prompt logits). */
static void expect_load(const char *cfg, const char *drop, const char *narrow, const char *want) {
  char dir[64];
  tg_scope *s = tg_scope_begin();
  tg_state_dict sd = {0};
  CHECK(variant(&sd, drop, narrow) == 0);
  CHECK(write_dir(dir, cfg, &sd) == 0);
  tg_clear_error();
  tg_gpt2 *m = tg_gpt2_load(dir);
  if (want) {
    CHECK(m == NULL);
    CHECK(strstr(tg_last_error(), want) != NULL);
    if (!strstr(tg_last_error(), want)) printf("  wanted \"%s\" in: %s\n", want, tg_last_error());
  } else {
    int64_t shape[2] = {1, GPT2_T};
    tg_tensor *l = m ? tg_gpt2_forward(m, tg_from_data(gpt2_prompt, TG_INT32, shape, 2)) : NULL;
    CHECK(l && max_diff(l, gpt2_logits, GPT2_T * GPT2_V) <= 1e-4);
  }
  tg_gpt2_free(m);
  tg_state_dict_free(&sd);
  tg_scope_end(s);
  remove_dir(dir);
}

TEST(gpt2_loads_names_without_the_transformer_prefix) { expect_load(fixture_config(), NULL, NULL, NULL); }

TEST(gpt2_missing_tensor_and_wrong_shape_are_errors) {
  expect_load(fixture_config(), "h.1.mlp.c_fc.bias", NULL, "tensor \"h.1.mlp.c_fc.bias\" is missing");
  expect_load(fixture_config(), "wpe.weight", NULL, "tensor \"wpe.weight\" is missing");
  expect_load(fixture_config(), NULL, "h.0.attn.c_attn.weight", "tensor \"h.0.attn.c_attn.weight\" has shape (32, 192), expected (64, 192)");
  expect_load(fixture_config(), NULL, "wte.weight", "tensor \"wte.weight\" has shape (128, 64), expected (256, 64)");
}

/* The fixture's config with the first `key` member's value replaced by value. */
static const char *config_with(const char *key, const char *value) {
  static char out[4096];
  const char *c = fixture_config(), *at = strstr(c, key);
  if (!at) return c;
  const char *v = strchr(at, ':') + 1, *end = strpbrk(v, ",\n}");
  snprintf(out, sizeof out, "%.*s %s%s", (int)(v - c), c, value, end);
  return out;
}

TEST(gpt2_bad_configs_are_errors) {
  static const struct { const char *key, *value, *want; } cases[] = {
    {"\"n_embd\"", "63", "n_embd 63 is not a multiple of n_head 4"},
    {"\"n_head\"", "0", "n_head must be in 1..1024, got 0"},
    {"\"n_layer\"", "\"two\"", "n_layer must be a number, got \"two\""},
    {"\"vocab_size\"", "-5", "vocab_size must be in 1..16777216, got -5"},
    {"\"n_layer\"", "3", "tensor \"h.2.ln_1.weight\" is missing"},
    {"\"n_positions\"", "100", "tensor \"wpe.weight\" has shape (80, 64), expected (100, 64)"},
    {"\"activation_function\"", "\"relu\"", "activation_function \"relu\" is not supported"},
    {"\"scale_attn_by_inverse_layer_idx\"", "true", "scale_attn_by_inverse_layer_idx true is not supported"},
    {"\"layer_norm_epsilon\"", "-1e-5", "layer_norm_epsilon must be in (0, 1)"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) expect_load(config_with(cases[i].key, cases[i].value), NULL, NULL, cases[i].want);
  expect_load("{\"n_layer\": 2, \"n_head\": 4}", NULL, NULL, "\"n_embd\" is missing");
  expect_load("[1, 2]", NULL, NULL, "not a JSON object");
  expect_load("{\"n_layer\": 2, \"n_head\": {\"a\": [1, \"}\"]", NULL, NULL, "bad JSON");
  expect_load("", NULL, NULL, "not a JSON object");
  tg_clear_error();
  CHECK(tg_gpt2_load("/nonexistent/dir") == NULL && strstr(tg_last_error(), "cannot open /nonexistent/dir/config.json"));
  CHECK(tg_gpt2_load(NULL) == NULL);
}

TEST(gpt2_gguf_errors) {
  tg_clear_error();
  CHECK(tg_gpt2_load_gguf("tests/fixtures/gguf/meta.gguf") == NULL);
  CHECK(strstr(tg_last_error(), "general.architecture is \"tgtest\", not \"gpt2\"") != NULL);
  CHECK(tg_gpt2_load_gguf("/nonexistent.gguf") == NULL && tg_last_error()[0]);
  CHECK(tg_gpt2_load_gguf(NULL) == NULL);
}

TEST(gpt2_step_errors_and_positions) {
  tg_gpt2 *m = tg_gpt2_load(DIR);
  CHECK(m != NULL);
  if (!m) return;
  tg_scope *s = tg_scope_begin();
  int32_t bad = GPT2_V, ok[4] = {1, 2, 3, 4};
  CHECK(tg_gpt2_position(m) == -1);
  CHECK(tg_gpt2_step(m, &bad, 1) == NULL && strstr(tg_last_error(), "outside the vocabulary of 256"));
  CHECK(tg_gpt2_reset(m, 81) < 0 && strstr(tg_last_error(), "above n_positions 80"));
  CHECK(tg_gpt2_reset(m, 6) == 0 && tg_gpt2_position(m) == 0);
  CHECK(tg_gpt2_step(m, ok, 4) != NULL && tg_gpt2_position(m) == 4);
  CHECK(tg_gpt2_step(m, ok, 3) == NULL && strstr(tg_last_error(), "3 tokens after position 4 do not fit the cache of 6"));
  CHECK(tg_gpt2_step(m, ok, 2) != NULL && tg_gpt2_position(m) == 6);
  int64_t shape[2] = {1, 81}, flat[1] = {4};
  CHECK(tg_gpt2_forward(m, tg_zeros(shape, 2, TG_INT32)) == NULL && strstr(tg_last_error(), "must be in 1..n_positions (80)"));
  CHECK(tg_gpt2_forward(m, tg_zeros(flat, 1, TG_INT32)) == NULL);
  CHECK(tg_gpt2_forward(m, tg_zeros(shape, 2, TG_FLOAT32)) == NULL);
  tg_scope_end(s);
  tg_gpt2_free(m);
}

/* ---------------------------------------------------------------- new, save, train */

static const tg_gpt2_config tiny = {.n_layer = 1, .n_head = 2, .n_embd = 16, .vocab_size = 11, .n_positions = 8, .eps = 1e-5};

TEST(gpt2_new_save_load_round_trip) {
  tg_manual_seed(5);
  tg_gpt2 *m = tg_gpt2_new(&tiny);
  CHECK(m && tg_gpt2_get_config(m)->n_inner == 64);
  if (!m) return;
  int n = 0;
  tg_tensor **ps = tg_gpt2_parameters(m, &n);
  CHECK(ps && n == 4 + 12);
  double w0 = 0, sq = 0, ln = 0; /* wte ~ N(0, 0.02); ln_1.weight ones */
  float wte[11 * 16], ln1[16];
  CHECK(tg_to_host(ps[0], wte, sizeof wte) == 0 && tg_to_host(ps[4], ln1, sizeof ln1) == 0);
  for (int i = 0; i < 11 * 16; i++) w0 += wte[i], sq += (double)wte[i] * wte[i];
  for (int i = 0; i < 16; i++) ln += ln1[i];
  CHECK(fabs(w0 / 176) < 0.01 && fabs(sqrt(sq / 176) - 0.02) < 0.005 && ln == 16);
  CHECK(tg_get_requires_grad(ps[0]) && tg_get_requires_grad(ps[15]));
  free(ps);
  char dir[] = "/tmp/tg_gpt2_XXXXXX";
  CHECK(mkdtemp(dir) != NULL);
  CHECK(tg_gpt2_save(m, dir) == 0);
  tg_gpt2 *back = tg_gpt2_load(dir);
  CHECK(back != NULL);
  tg_scope *s = tg_scope_begin();
  int32_t ids[6] = {1, 5, 10, 0, 3, 3};
  int64_t shape[2] = {2, 3};
  float a[2 * 3 * 11], b[2 * 3 * 11];
  CHECK(tg_to_host(tg_gpt2_forward(m, tg_from_data(ids, TG_INT32, shape, 2)), a, sizeof a) == 0);
  CHECK(back && tg_to_host(tg_gpt2_forward(back, tg_from_data(ids, TG_INT32, shape, 2)), b, sizeof b) == 0);
  CHECK(!memcmp(a, b, sizeof a));
  tg_scope_end(s);
  char path[64];
  FILE *f = (snprintf(path, sizeof path, "%s/model.safetensors", dir), fopen(path, "rb"));
  char head[64] = {0};
  CHECK(f && fread(head, 1, 40, f) == 40 && strstr(head + 8, "{\"__metadata__\":{\"format\":\"pt\"}") == head + 8);
  if (f) fclose(f);
  remove_dir(dir);
  tg_gpt2_free(back);
  tg_gpt2_free(m);
}

/* A few AdamW steps on one repeated sequence: the loss must fall well below its start
 * (log 11 = 2.4 for a uniform guess), and the trained model must continue it greedily. */
TEST(gpt2_trains_with_adamw) {
  tg_manual_seed(7);
  tg_gpt2 *m = tg_gpt2_new(&tiny);
  int n = 0;
  tg_tensor **ps = m ? tg_gpt2_parameters(m, &n) : NULL;
  tg_optimizer *opt = ps ? tg_adamw(ps, n, 1e-2, 0.9, 0.99, 1e-8, 0.0) : NULL;
  CHECK(opt != NULL);
  static const int32_t seq[9] = {3, 1, 4, 1, 5, 9, 2, 6, 5};
  int64_t shape[2] = {1, 8}, lab[1] = {8}, flat[2] = {8, 11};
  double first = 0, last = 0;
  for (int step = 0; opt && step < 60; step++) {
    tg_scope *s = tg_scope_begin();
    tg_tensor *logits = tg_reshape(tg_gpt2_forward(m, tg_from_data(seq, TG_INT32, shape, 2)), flat, 2);
    tg_tensor *loss = tg_sparse_cross_entropy(logits, tg_from_data(seq + 1, TG_INT32, lab, 1), 0.0, -1);
    CHECK(loss && tg_backward(loss) == 0 && tg_optimizer_step(opt, &loss, 1) == 0);
    last = loss ? tg_item(loss) : 1e9;
    if (step == 0) first = last;
    tg_scope_end(s);
  }
  CHECK(first > 2.0 && last < 0.2);
  if (!(last < 0.2)) printf("  loss %g -> %g\n", first, last);
  int32_t got[8] = {0};
  CHECK(m && tg_gpt2_reset(m, 8) == 0);
  int32_t tok = seq[0];
  for (int i = 0; m && i < 7; i++) {
    tg_scope *s = tg_scope_begin();
    tg_tensor *l = tg_gpt2_step(m, &tok, 1);
    int64_t next = -1;
    CHECK(l && tg_sample(l, 0, 0, 1.0, &next) == 0);
    got[i] = tok = (int32_t)next;
    tg_scope_end(s);
  }
  CHECK(!memcmp(got, seq + 1, 7 * sizeof(int32_t)));
  tg_optimizer_free(opt);
  free(ps);
  tg_gpt2_free(m);
}

/* Issue 21's decode test: 100 one-token steps through the JIT, whose attention reads
 * cache[:, :, :start_pos + 1] (a variable size, docs/symbolic.md), compile no kernel after
 * the first two steps, and every step's logits match the plain cached path (tg_attention:
 * the whole cache under a mask) within 1e-4. */
TEST(gpt2_decode_100_steps_compile_nothing_after_two) {
  enum { STEPS = 100, V = 64 };
  tg_gpt2_config c = {.n_layer = 2, .n_head = 2, .n_embd = 32, .vocab_size = V, .n_positions = STEPS + 8, .eps = 1e-5};
  tg_gpt2 *jit = tg_gpt2_new(&c), *plain = tg_gpt2_new(&c);
  CHECK(jit && plain);
  if (!jit || !plain) { tg_gpt2_free(jit), tg_gpt2_free(plain); return; }
  int np = 0;
  tg_tensor **pj = tg_gpt2_parameters(jit, &np), **pp = tg_gpt2_parameters(plain, &np);
  for (int i = 0; pj && pp && i < np; i++) CHECK(tg_assign(pp[i], pj[i]) == 0); /* the same weights */
  CHECK(tg_realize_many(pp, np) == 0);
  free(pj), free(pp);
  CHECK(tg_gpt2_reset(jit, STEPS + 4) == 0 && tg_gpt2_reset(plain, STEPS + 4) == 0 && tg_gpt2_use_jit(jit, true) == 0);
  int32_t prompt[3] = {5, 17, 42}, tok = 0;
  uint64_t compiled_at[STEPS + 1] = {0};
  double worst = 0;
  int bad = 0;
  for (int s = 0; s <= STEPS && !bad; s++) {
    tg_scope *sc = tg_scope_begin();
    float a[3 * V], b[3 * V];
    int64_t rows = s == 0 ? 3 : 1;
    tg_tensor *lj = s == 0 ? tg_gpt2_step(jit, prompt, 3) : tg_gpt2_step(jit, &tok, 1);
    compiled_at[s] = tg_get_stats().kernels_compiled;
    tg_tensor *lp = s == 0 ? tg_gpt2_step(plain, prompt, 3) : tg_gpt2_step(plain, &tok, 1);
    bad = !lj || !lp || tg_to_host(lj, a, sizeof(float) * (size_t)(rows * V)) < 0 || tg_to_host(lp, b, sizeof(float) * (size_t)(rows * V)) < 0;
    for (int i = 0; !bad && i < rows * V; i++) worst = fmax(worst, fabs((double)a[i] - b[i]));
    if (!bad) tok = argmax_row_v(a + (rows - 1) * V, V);
    tg_scope_end(sc);
  }
  CHECK(!bad);
  CHECK(worst <= 1e-4);
  CHECK(tg_gpt2_position(jit) == 3 + STEPS);
  /* steps 1 and 2 (the JIT's recording calls) may compile; steps 3..100 compile nothing
   * (the plain path's kernels run in between and are counted too: none is new either) */
  CHECK(compiled_at[STEPS] == compiled_at[2]);
  if (worst > 1e-4 || compiled_at[STEPS] != compiled_at[2])
    printf("  logits off by %g; kernels compiled after step 2: %llu\n", worst, (unsigned long long)(compiled_at[STEPS] - compiled_at[2]));
  tg_gpt2_free(jit), tg_gpt2_free(plain);
}

/* The JIT's steps keep the caches as cache[:, :, :start_pos + 1] (a variable size: a step
 * reads and writes only the rows so far); a multi-token step after them (tg_attention's path)
 * gets the whole caches back, zeros after the rows written, and a recording made after the
 * JIT was turned off and on starts from the caches again: every step's logits within 1e-4 of
 * a model that never used the JIT. */
TEST(gpt2_jit_and_plain_steps_interleave) {
  enum { V = 64 };
  tg_gpt2_config c = {.n_layer = 2, .n_head = 2, .n_embd = 32, .vocab_size = V, .n_positions = 40, .eps = 1e-5};
  tg_gpt2 *jit = tg_gpt2_new(&c), *plain = tg_gpt2_new(&c);
  CHECK(jit && plain);
  if (!jit || !plain) { tg_gpt2_free(jit), tg_gpt2_free(plain); return; }
  int np = 0;
  tg_tensor **pj = tg_gpt2_parameters(jit, &np), **pp = tg_gpt2_parameters(plain, &np);
  for (int i = 0; pj && pp && i < np; i++) CHECK(tg_assign(pp[i], pj[i]) == 0);
  CHECK(tg_realize_many(pp, np) == 0);
  free(pj), free(pp);
  CHECK(tg_gpt2_reset(jit, 32) == 0 && tg_gpt2_reset(plain, 32) == 0 && tg_gpt2_use_jit(jit, true) == 0);
  /* tokens per step: a prompt, the JIT's two recording steps, two tokens (plain path), JIT
   * steps (replays), two tokens, replays, the JIT off and on (a new recording), JIT steps */
  static const int n_of[] = {3, 1, 1, 2, 1, 1, 1, 2, 1, -1, 1, 1, 1, 1};
  int32_t ids[3] = {5, 17, 42};
  double worst = 0;
  int bad = 0;
  for (size_t s = 0; s < sizeof n_of / sizeof *n_of && !bad; s++) {
    int n = n_of[s];
    if (n < 0) { CHECK(tg_gpt2_use_jit(jit, false) == 0 && tg_gpt2_use_jit(jit, true) == 0); continue; }
    tg_scope *sc = tg_scope_begin();
    float a[3 * V], b[3 * V];
    tg_tensor *lj = tg_gpt2_step(jit, ids, n), *lp = tg_gpt2_step(plain, ids, n);
    bad = !lj || !lp || tg_to_host(lj, a, sizeof(float) * (size_t)(n * V)) < 0 || tg_to_host(lp, b, sizeof(float) * (size_t)(n * V)) < 0;
    if (bad) printf("  step %zu: %s\n", s, tg_last_error());
    for (int i = 0; !bad && i < n * V; i++) worst = fmax(worst, fabs((double)a[i] - b[i]));
    if (!bad) ids[0] = argmax_row_v(a + (n - 1) * V, V), ids[1] = (ids[0] + 7) % V;
    tg_scope_end(sc);
  }
  CHECK(!bad);
  CHECK(worst <= 1e-4);
  if (worst > 1e-4) printf("  logits off by %g\n", worst);
  CHECK(tg_gpt2_position(jit) == 3 + 2 + 2 + 3 + 2 + 1 + 4 && tg_gpt2_position(plain) == tg_gpt2_position(jit));
  tg_gpt2_free(jit), tg_gpt2_free(plain);
}

/* A Q8_0 model's decode step reads the weights as blocks (34 bytes per 32 weights), the tied
 * output projection too: the host copy of wte made at the first step (gpt2.c host_tables) must
 * not leave the dequantized float32 table as wte's value. Counted by tg_get_stats().bytes_moved
 * of one plain decode step against the f32 file's: the other buffers (cache, activations) are
 * the same, so the difference is the weights' V E + 12 L E^2 values (114,688 here) times
 * 4 - 34/32 bytes (336,896; 288,768 with a float32 wte). */
TEST(gpt2_q8_0_decode_step_reads_blocks) {
  uint64_t bytes[2] = {0, 0};
  double weights = 0;
  const char *files[2] = {DIR "/f32.gguf", DIR "/q8_0.gguf"};
  for (int f = 0; f < 2; f++) {
    tg_gpt2 *m = tg_gpt2_load_gguf(files[f]);
    CHECK(m != NULL && tg_gpt2_reset(m, 0) == 0);
    if (!m) continue;
    const tg_gpt2_config *c = tg_gpt2_get_config(m);
    weights = (double)(c->vocab_size * c->n_embd + 12 * c->n_layer * c->n_embd * c->n_embd);
    tg_scope *s = tg_scope_begin();
    int32_t tok = 5;
    CHECK(tg_gpt2_step(m, gpt2_prompt, GPT2_T) != NULL);
    tg_reset_stats();
    CHECK(tg_gpt2_step(m, &tok, 1) != NULL);
    bytes[f] = tg_get_stats().bytes_moved;
    tg_scope_end(s);
    tg_gpt2_free(m);
  }
  double saved = (double)bytes[0] - (double)bytes[1], want = weights * (4 - 34.0 / 32);
  CHECK(saved >= 0.98 * want && saved <= 1.02 * want);
  if (saved < 0.98 * want || saved > 1.02 * want)
    printf("  decode step bytes: f32 %llu, q8_0 %llu (%.0f fewer, want %.0f)\n", (unsigned long long)bytes[0],
           (unsigned long long)bytes[1], saved, want);
}
