/* gpt2.c — generate text with a GPT-2 model (docs/llm.md).
 *
 *   example_gpt2 --model DIR | --gguf FILE  [--prompt TEXT | --ids 15496,11,...]
 *                [--max-new N] [--temperature T] [--top-k K] [--top-p P] [--seed S]
 *                [--tokenizer DIR] [--print-ids] [--jit]
 *
 * DIR is a Hugging Face directory (config.json, model.safetensors, and for --prompt the
 * tokenizer files vocab.json + merges.txt); a GGUF file brings its tokenizer in its metadata
 * (or give --tokenizer DIR). The prompt runs through the model at once (prefill), then one
 * token at a time through the key/value cache (decode; --jit: replayed by tg_jit after the first
 * steps); temperature 0 is greedy. The text is
 * printed as it is made, or with --print-ids the generated ids on one line; tokens/s for both
 * phases go to stderr at the end. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "tg.h"
#include "tg_llm.h"
#include "tg_nn.h"

typedef struct opts {
  const char *model, *gguf, *prompt, *ids, *tokenizer;
  int max_new, top_k;
  double temperature, top_p;
  unsigned long long seed;
  int print_ids, jit;
} opts;

static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static int usage(const char *why) {
  fprintf(stderr, "example_gpt2: %s\nusage: example_gpt2 --model DIR | --gguf FILE [--prompt TEXT | --ids 1,2,3] [--max-new N]\n"
                  "       [--temperature T] [--top-k K] [--top-p P] [--seed S] [--tokenizer DIR] [--print-ids] [--jit]\n", why);
  return 2;
}

/* Options as a table: name, where the value goes, and its kind. */
static int parse(int argc, char **argv, opts *o) {
  enum kind { STR, INT, DBL, ULL, FLAG };
  const struct { const char *name; void *at; enum kind kind; } table[] = {
    {"--model", &o->model, STR},   {"--gguf", &o->gguf, STR},         {"--prompt", &o->prompt, STR},
    {"--ids", &o->ids, STR},       {"--tokenizer", &o->tokenizer, STR}, {"--max-new", &o->max_new, INT},
    {"--top-k", &o->top_k, INT},   {"--temperature", &o->temperature, DBL}, {"--top-p", &o->top_p, DBL},
    {"--seed", &o->seed, ULL},     {"--print-ids", &o->print_ids, FLAG}, {"--jit", &o->jit, FLAG},
  };
  for (int i = 1; i < argc; i++) {
    size_t k = 0, n = sizeof table / sizeof table[0];
    while (k < n && strcmp(argv[i], table[k].name)) k++;
    if (k == n) return usage(argv[i]);
    if (table[k].kind == FLAG) { *(int *)table[k].at = 1; continue; }
    if (++i == argc) return usage("an option needs a value");
    char *end = argv[i];
    switch (table[k].kind) {
    case STR: *(const char **)table[k].at = argv[i]; break;
    case INT: *(int *)table[k].at = (int)strtol(argv[i], &end, 10); break;
    case DBL: *(double *)table[k].at = strtod(argv[i], &end); break;
    case ULL: *(unsigned long long *)table[k].at = strtoull(argv[i], &end, 10); break;
    case FLAG: break;
    }
    if (table[k].kind != STR && (end == argv[i] || *end)) return usage("a number is malformed");
  }
  if (!o->model == !o->gguf) return usage("give one of --model and --gguf");
  if (o->max_new < 0) return usage("--max-new must be >= 0");
  return 0;
}

/* "15496,11,..." → ids; the count, or -1. */
static int64_t parse_ids(const char *s, int32_t *ids, int64_t cap) {
  int64_t n = 0;
  while (*s && n < cap) {
    char *end;
    long v = strtol(s, &end, 10);
    if (end == s || v < 0 || v > 2147483647) return -1;
    ids[n++] = (int32_t)v;
    s = *end == ',' ? end + 1 : end;
    if (*end && *end != ',') return -1;
  }
  return *s ? -1 : n;
}

/* The tokenizer for --prompt and for printing text: --tokenizer, the model directory, or the
 * GGUF file's metadata. NULL (quietly) when there is none. */
static tg_bpe *load_tokenizer(const opts *o) {
  if (o->tokenizer || o->model) return tg_bpe_load_dir(o->tokenizer ? o->tokenizer : o->model);
  tg_gguf *g = tg_gguf_open(o->gguf);
  tg_bpe *t = g && tg_gguf_find_key(g, "tokenizer.ggml.tokens") >= 0 ? tg_bpe_from_gguf(g) : NULL;
  tg_gguf_close(g);
  return t;
}

/* Print the bytes of ids[0..n) past the first *done (text is printed whole UTF-8 sequences
 * at a time only in that the tokens' bytes are concatenated; a terminal copes). */
static void print_new(const tg_bpe *tok, const int32_t *ids, int64_t n, int64_t *done) {
  static char buf[1 << 20];
  int64_t len = tg_bpe_decode(tok, ids, n, buf, sizeof buf);
  if (len < 0 || len > (int64_t)sizeof buf - 1) return;
  fwrite(buf + *done, 1, (size_t)(len - *done), stdout);
  fflush(stdout);
  *done = len;
}

/* The prompt's ids (--ids or the tokenized --prompt) into ids[cap]: the count, or -1 after a
 * message. */
static int64_t prompt_ids(const opts *o, const tg_bpe *tok, int32_t *ids, int64_t cap) {
  int64_t n = 0;
  if (o->ids && (n = parse_ids(o->ids, ids, cap)) < 0)
    return fprintf(stderr, "example_gpt2: --ids must be comma-separated ids, at most %lld\n", (long long)cap), -1;
  else if (o->prompt && tok) n = tg_bpe_encode(tok, o->prompt, strlen(o->prompt), ids, cap);
  else if (o->prompt)
    return fprintf(stderr, "example_gpt2: --prompt needs a tokenizer (vocab.json + merges.txt in the model directory, "
                           "--tokenizer DIR, or tokenizer.ggml.* in the GGUF file)\n"), -1;
  if (n < 1 || n > cap || n + o->max_new > cap)
    return fprintf(stderr, "example_gpt2: need 1 to %lld prompt tokens, and prompt + --max-new within n_positions %lld (got %lld + %d)\n",
                   (long long)cap, (long long)cap, (long long)n, o->max_new), -1;
  return n;
}

/* Prefill ids[0..n), then o->max_new tokens one at a time (ids has room); prints as it goes. */
static int generate(tg_gpt2 *m, const tg_bpe *tok, const opts *o, int32_t *ids, int64_t n) {
  int64_t prompt = n, done = 0;
  if (tg_gpt2_reset(m, n + o->max_new) < 0 || tg_gpt2_use_jit(m, o->jit) < 0) return fprintf(stderr, "example_gpt2: %s\n", tg_last_error()), 1;
  if (tok && !o->print_ids) print_new(tok, ids, n, &done);
  double t0 = now(), t1 = t0;
  for (int s = 0; s < o->max_new; s++) {
    tg_scope *sc = tg_scope_begin();
    tg_tensor *logits = s == 0 ? tg_gpt2_step(m, ids, n) : tg_gpt2_step(m, &ids[n - 1], 1);
    int64_t rows = s == 0 ? n : 1, next = 0;
    tg_tensor *last = logits ? tg_slice(logits, 0, rows - 1, rows, 1) : NULL;
    int rc = last ? tg_sample(last, o->temperature, o->top_k, o->top_p, &next) : -1;
    tg_scope_end(sc);
    if (rc < 0) return fprintf(stderr, "example_gpt2: %s\n", tg_last_error()), 1;
    if (s == 0) t1 = now();
    ids[n++] = (int32_t)next;
    if (tok && !o->print_ids) print_new(tok, ids, n, &done);
  }
  double t2 = now();
  if (o->print_ids)
    for (int64_t i = prompt; i < n; i++) printf("%s%d", i > prompt ? " " : "", ids[i]);
  printf("\n");
  fflush(stdout); /* before the timing line on stderr */
  if (o->max_new > 0)
    fprintf(stderr, "prefill: %lld tokens in %.1f ms (%.1f tokens/s); decode: %d tokens in %.1f ms (%.1f tokens/s)\n",
            (long long)prompt, 1e3 * (t1 - t0), (double)prompt / (t1 - t0), o->max_new - 1, 1e3 * (t2 - t1),
            o->max_new > 1 ? (double)(o->max_new - 1) / (t2 - t1) : 0.0);
  return 0;
}

int main(int argc, char **argv) {
  opts o = {.max_new = 32, .top_p = 1.0};
  if (parse(argc, argv, &o)) return 2;
  tg_gpt2 *m = o.model ? tg_gpt2_load(o.model) : tg_gpt2_load_gguf(o.gguf);
  if (!m) return fprintf(stderr, "example_gpt2: %s\n", tg_last_error()), 1;
  tg_bpe *tok = load_tokenizer(&o);
  int64_t cap = tg_gpt2_get_config(m)->n_positions;
  int32_t *ids = calloc((size_t)cap, sizeof *ids);
  int64_t n = ids ? prompt_ids(&o, tok, ids, cap) : -1;
  tg_manual_seed(o.seed);
  int rc = n < 0 ? 1 : generate(m, tok, &o, ids, n);
  free(ids);
  tg_bpe_free(tok);
  tg_gpt2_free(m);
  return rc;
}
