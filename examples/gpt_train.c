/* gpt_train.c — train a small GPT-2 on a local text corpus with tg, save it in the Hugging
 * Face layout (docs/llm.md).
 *
 *   example_gpt_train [--corpus DIR] [--tokenizer DIR] [--out DIR] [--steps N] [--seconds S]
 *                     [--layers L] [--embd E] [--heads H] [--ctx T] [--batch B] [--lr LR] [--seed S]
 *
 * The corpus is every regular file in DIR (default /usr/share/common-licenses, the texts the
 * tokenizer in models/tokenizer was trained on), joined with <|endoftext|> between files and
 * tokenized with the repository's byte-level BPE. The last 5% of the tokens are held out.
 * Each step takes B random windows of T + 1 tokens, computes the next-token cross entropy
 * of tg_gpt2_forward, backpropagates and takes an AdamW step (lr warmed up, then cosine
 * decayed); training stops at N steps or S seconds, whichever comes first. The model is
 * written to DIR (config.json, model.safetensors, vocab.json, merges.txt), ready for
 *   example_gpt2 --model DIR --prompt "This program is free software"   */
#include <dirent.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "tg.h"
#include "tg_llm.h"
#include "tg_nn.h"

typedef struct opts {
  const char *corpus, *tokenizer, *out;
  int steps, layers, embd, heads, ctx, batch;
  double seconds, lr;
  unsigned long long seed;
} opts;

static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static int fail(const char *what) {
  fprintf(stderr, "example_gpt_train: %s: %s\n", what, tg_last_error());
  return 1;
}

static int parse(int argc, char **argv, opts *o) {
  enum kind { STR, INT, DBL, ULL };
  const struct { const char *name; void *at; enum kind kind; } table[] = {
    {"--corpus", &o->corpus, STR}, {"--tokenizer", &o->tokenizer, STR}, {"--out", &o->out, STR},
    {"--steps", &o->steps, INT},   {"--layers", &o->layers, INT},       {"--embd", &o->embd, INT},
    {"--heads", &o->heads, INT},   {"--ctx", &o->ctx, INT},             {"--batch", &o->batch, INT},
    {"--seconds", &o->seconds, DBL}, {"--lr", &o->lr, DBL},             {"--seed", &o->seed, ULL},
  };
  for (int i = 1; i < argc; i++) {
    size_t k = 0, n = sizeof table / sizeof table[0];
    while (k < n && strcmp(argv[i], table[k].name)) k++;
    if (k == n || i + 1 == argc) return fprintf(stderr, "example_gpt_train: bad option %s (see the file's header)\n", argv[i]), 2;
    char *v = argv[++i], *end = v;
    switch (table[k].kind) {
    case STR: *(const char **)table[k].at = v; break;
    case INT: *(int *)table[k].at = (int)strtol(v, &end, 10); break;
    case DBL: *(double *)table[k].at = strtod(v, &end); break;
    case ULL: *(unsigned long long *)table[k].at = strtoull(v, &end, 10); break;
    }
    if (table[k].kind != STR && (end == v || *end)) return fprintf(stderr, "example_gpt_train: %s: bad number %s\n", argv[i - 1], v), 2;
  }
  if (o->steps < 1 || o->batch < 1 || o->ctx < 2) return fprintf(stderr, "example_gpt_train: steps, batch >= 1 and ctx >= 2\n"), 2;
  return 0;
}

/* ---------------------------------------------------------------- the corpus */

static int by_name(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

/* Append the ids of text to *ids (grown as needed). 0 or negative. */
static int append_ids(const tg_bpe *tok, const char *text, size_t len, int32_t **ids, int64_t *n, int64_t *cap) {
  int64_t k = tg_bpe_encode(tok, text, len, NULL, 0);
  if (k < 0) return (int)k;
  if (*n + k + 1 > *cap) {
    *cap = 2 * (*n + k + 1);
    int32_t *p = realloc(*ids, sizeof(int32_t) * (size_t)*cap);
    if (!p) return -1;
    *ids = p;
  }
  tg_bpe_encode(tok, text, len, *ids + *n, k);
  *n += k;
  (*ids)[(*n)++] = (int32_t)tg_bpe_token_id(tok, "<|endoftext|>");
  return 0;
}

/* The corpus's ids: each regular file of dir (sorted by name), then <|endoftext|>. */
static int32_t *load_corpus(const char *dir, const tg_bpe *tok, int64_t *n) {
  DIR *d = opendir(dir);
  if (!d) return fprintf(stderr, "example_gpt_train: cannot open %s\n", dir), NULL;
  char *names[256];
  int nn = 0;
  for (struct dirent *e; (e = readdir(d)) && nn < 256;) {
    char path[4096];
    struct stat st;
    snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
    if (lstat(path, &st) == 0 && S_ISREG(st.st_mode)) names[nn++] = strdup(path); /* links repeat a text */
  }
  closedir(d);
  qsort(names, (size_t)nn, sizeof *names, by_name);
  int32_t *ids = NULL;
  int64_t cap = 0;
  *n = 0;
  int rc = 0;
  for (int i = 0; i < nn; i++) {
    FILE *f = rc == 0 ? fopen(names[i], "rb") : NULL;
    char *text = f ? malloc(1 << 22) : NULL;
    size_t len = text ? fread(text, 1, 1 << 22, f) : 0;
    if (f) fclose(f);
    if (text && append_ids(tok, text, len, &ids, n, &cap) < 0) rc = -1;
    free(text), free(names[i]);
  }
  if (rc < 0 || *n < 1) return fprintf(stderr, "example_gpt_train: %s: no text (%s)\n", dir, tg_last_error()), free(ids), NULL;
  printf("corpus: %d files in %s, %lld tokens\n", nn, dir, (long long)*n);
  return ids;
}

/* ---------------------------------------------------------------- training */

/* splitmix64: the window offsets. */
static uint64_t next_rand(uint64_t *s) {
  uint64_t z = (*s += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

/* B windows from ids[lo, hi): inputs x and next-token labels y, (B, T) each. */
static void batch(const int32_t *ids, int64_t lo, int64_t hi, int b, int t, uint64_t *rng, int32_t *x, int32_t *y) {
  for (int i = 0; i < b; i++) {
    int64_t o = lo + (int64_t)(next_rand(rng) % (uint64_t)(hi - lo - t - 1));
    memcpy(x + (size_t)i * t, ids + o, sizeof(int32_t) * (size_t)t);
    memcpy(y + (size_t)i * t, ids + o + 1, sizeof(int32_t) * (size_t)t);
  }
}

/* Mean next-token cross entropy of the model on x, y (B, T); differentiable, lazy. */
static tg_tensor *loss_of(tg_gpt2 *m, const int32_t *x, const int32_t *y, int b, int t) {
  int64_t shape[2] = {b, t}, flat[2] = {(int64_t)b * t, tg_gpt2_get_config(m)->vocab_size}, lab[1] = {(int64_t)b * t};
  tg_tensor *logits = tg_gpt2_forward(m, tg_from_data(x, TG_INT32, shape, 2));
  return tg_sparse_cross_entropy(tg_reshape(logits, flat, 2), tg_from_data(y, TG_INT32, lab, 1), 0.0, -1);
}

/* The learning rate at step s of n: linear warm-up over the first 5%, then cosine to 10%. */
static double lr_at(const opts *o, int s, int n) {
  int warm = n / 20 + 1;
  if (s < warm) return o->lr * (s + 1) / warm;
  return o->lr * (0.1 + 0.45 * (1 + cos(M_PI * (s - warm) / (double)(n - warm))));
}

static int train(tg_gpt2 *m, const opts *o, const int32_t *ids, int64_t n_train, int64_t n) {
  int np;
  tg_tensor **params = tg_gpt2_parameters(m, &np);
  tg_optimizer *opt = params ? tg_adamw(params, np, o->lr, 0.9, 0.95, 1e-8, 0.01) : NULL;
  int32_t *x = malloc(sizeof(int32_t) * (size_t)o->batch * o->ctx), *y = malloc(sizeof(int32_t) * (size_t)o->batch * o->ctx);
  if (!opt || !x || !y) return free(params), free(x), free(y), tg_optimizer_free(opt), fail("setting up training");
  uint64_t rng = o->seed;
  double t0 = now(), loss = 0;
  int s = 0, rc = 0;
  for (; s < o->steps && now() - t0 < o->seconds && rc == 0; s++) {
    tg_scope *sc = tg_scope_begin();
    batch(ids, 0, n_train, o->batch, o->ctx, &rng, x, y);
    tg_tensor *l = tg_optimizer_set_lr(opt, lr_at(o, s, o->steps)) < 0 ? NULL : loss_of(m, x, y, o->batch, o->ctx);
    if (!l || tg_backward(l) < 0 || tg_optimizer_step(opt, &l, 1) < 0) rc = fail("training step");
    else loss = tg_item(l);
    if (rc == 0 && (s % 25 == 0 || s + 1 == o->steps))
      printf("step %4d  loss %.3f  lr %.2e  %.1f s\n", s, loss, lr_at(o, s, o->steps), now() - t0), fflush(stdout);
    tg_scope_end(sc);
  }
  printf("trained %d steps in %.1f s (%.0f tokens/s); last loss %.3f\n", s, now() - t0,
         (double)s * o->batch * o->ctx / (now() - t0), loss);
  /* held-out loss: 8 batches from the last 5% */
  double held = 0;
  for (int i = 0; i < 8 && rc == 0; i++) {
    tg_scope *sc = tg_scope_begin();
    batch(ids, n_train, n, o->batch, o->ctx, &rng, x, y);
    held += tg_item(tg_detach(loss_of(m, x, y, o->batch, o->ctx))) / 8;
    tg_scope_end(sc);
  }
  if (rc == 0) printf("held-out loss %.3f (uniform over the vocabulary: %.3f)\n", held, log((double)tg_gpt2_get_config(m)->vocab_size));
  free(x), free(y), free(params);
  tg_optimizer_free(opt);
  return rc;
}

/* Copy the tokenizer files next to the model. */
static int copy_file(const char *from_dir, const char *to_dir, const char *name) {
  char a[4096], b[4096];
  snprintf(a, sizeof a, "%s/%s", from_dir, name), snprintf(b, sizeof b, "%s/%s", to_dir, name);
  FILE *in = fopen(a, "rb"), *out = in ? fopen(b, "wb") : NULL;
  char buf[65536];
  for (size_t k; out && (k = fread(buf, 1, sizeof buf, in)) > 0;) fwrite(buf, 1, k, out);
  int rc = out && !ferror(in) && fclose(out) == 0 ? 0 : -1;
  if (in) fclose(in);
  if (rc) fprintf(stderr, "example_gpt_train: cannot copy %s to %s\n", a, b);
  return rc;
}

/* Train a new model on the corpus's ids and save it with the tokenizer files. */
static int run(const opts *o, const tg_bpe *tok, const int32_t *ids, int64_t n) {
  int64_t n_train = n - n / 20;
  if (n / 20 < o->ctx + 2) return fprintf(stderr, "example_gpt_train: the corpus is too small\n"), 1;
  tg_manual_seed(o->seed);
  tg_gpt2_config cfg = {.n_layer = o->layers, .n_head = o->heads, .n_embd = o->embd, .vocab_size = tg_bpe_vocab_size(tok),
                        .n_positions = o->ctx, .eps = 1e-5};
  tg_gpt2 *m = tg_gpt2_new(&cfg);
  if (!m) return fail("making the model");
  printf("model: %d layers, %d heads, %d dims, vocab %lld, context %d\n", o->layers, o->heads, o->embd, (long long)cfg.vocab_size, o->ctx);
  int rc = train(m, o, ids, n_train, n);
  mkdir(o->out, 0755);
  if (rc == 0 && tg_gpt2_save(m, o->out) < 0) rc = fail("saving");
  if (rc == 0) rc = copy_file(o->tokenizer, o->out, "vocab.json") || copy_file(o->tokenizer, o->out, "merges.txt");
  if (rc == 0) printf("saved to %s/ (config.json, model.safetensors, vocab.json, merges.txt)\n", o->out);
  tg_gpt2_free(m);
  return rc;
}

int main(int argc, char **argv) {
  opts o = {.corpus = "/usr/share/common-licenses", .tokenizer = "models/tokenizer", .out = "gpt-licenses", .steps = 600,
            .layers = 2, .embd = 128, .heads = 4, .ctx = 64, .batch = 16, .seconds = 240, .lr = 3e-3, .seed = 1};
  if (parse(argc, argv, &o)) return 2;
  tg_bpe *tok = tg_bpe_load_dir(o.tokenizer);
  if (!tok) return fail("loading the tokenizer");
  int64_t n = 0;
  int32_t *ids = load_corpus(o.corpus, tok, &n);
  int rc = ids ? run(&o, tok, ids, n) : 1;
  free(ids);
  tg_bpe_free(tok);
  return rc;
}
