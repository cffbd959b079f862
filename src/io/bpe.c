/* bpe.c — GPT-2's byte-level BPE tokenizer (include/tg_llm.h, docs/llm.md).
 *
 * Files: a vocabulary (JSON object token -> id) and a merges list ("left right" per line,
 * rank = line order). Encoding, as Hugging Face's `tokenizers` does it:
 *   1. split the text with GPT-2's regex
 *        's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
 *      written out by hand below (piece_end) over the Unicode classes of bpe_unicode.h;
 *   2. map each piece's UTF-8 bytes to GPT-2's byte-level symbols (a printable code point per
 *      byte), whose ids start the word;
 *   3. merge adjacent pairs lowest rank first (leftmost among equals) with a heap over a linked
 *      list of symbols (tokenizers' Word::merge_all, stale entries skipped the same way).
 * Decoding maps every code point of the tokens back to its byte. */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "io/bpe_unicode.h"
#include "io/io.h"
#include "runtime/helpers.h"
#include "tg_llm.h"

#define BPE_MAX_FILE (256u << 20) /* bytes of a vocabulary or merges file */

struct tg_bpe {
  int64_t n;             /* tokens: ids 0..n-1 */
  char **tokens;         /* id -> string, inside vocab_text */
  char *vocab_text;      /* the vocabulary file, strings decoded in place */
  uint32_t *tok_slots;   /* string hash: id + 1, 0 empty */
  size_t tok_cap;        /* power of two */
  uint64_t *pair_keys;   /* pair hash: left << 32 | right */
  uint32_t *pair_rank;   /* rank + 1, 0 empty */
  uint32_t *pair_new;    /* the merged token's id */
  size_t pair_cap;       /* power of two */
  int32_t byte_id[256];  /* id of each byte's symbol, -1 if the vocabulary lacks it */
};

/* ---------------------------------------------------------------- byte-level symbols */

/* GPT-2's bytes_to_unicode: printable Latin-1 bytes stand for themselves, the others
 * (controls, space, 0x7f-0xa0, 0xad) get 256, 257, ... in byte order. */
static uint32_t sym_of_byte[256];
static int16_t byte_of_sym[256 + 68]; /* the inverse; -1 for code points that stand for no byte */
static pthread_once_t sym_once = PTHREAD_ONCE_INIT;

static void make_symbols(void) {
  uint32_t next = 256;
  memset(byte_of_sym, 0xff, sizeof byte_of_sym);
  for (int b = 0; b < 256; b++) {
    bool printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
    sym_of_byte[b] = printable ? (uint32_t)b : next++;
    byte_of_sym[sym_of_byte[b]] = (int16_t)b;
  }
}

static uint32_t byte_symbol(int b) {
  pthread_once(&sym_once, make_symbols);
  return sym_of_byte[b];
}

/* The byte a code point stands for, or -1. */
static int symbol_byte(uint32_t cp) {
  pthread_once(&sym_once, make_symbols);
  return cp < 256 + 68 ? byte_of_sym[cp] : -1;
}

static size_t utf8_put(char *out, uint32_t cp) {
  if (cp < 0x80) return out[0] = (char)cp, 1;
  if (cp < 0x800) return out[0] = (char)(0xC0 | cp >> 6), out[1] = (char)(0x80 | (cp & 0x3F)), 2;
  if (cp < 0x10000)
    return out[0] = (char)(0xE0 | cp >> 12), out[1] = (char)(0x80 | (cp >> 6 & 0x3F)), out[2] = (char)(0x80 | (cp & 0x3F)), 3;
  out[0] = (char)(0xF0 | cp >> 18), out[1] = (char)(0x80 | (cp >> 12 & 0x3F));
  out[2] = (char)(0x80 | (cp >> 6 & 0x3F)), out[3] = (char)(0x80 | (cp & 0x3F));
  return 4;
}

/* The code point at s[i] (valid UTF-8); *next is the byte after it. */
static uint32_t utf8_get(const unsigned char *s, size_t i, size_t *next) {
  unsigned c = s[i];
  int len = c < 0x80 ? 1 : c < 0xE0 ? 2 : c < 0xF0 ? 3 : 4;
  uint32_t cp = len == 1 ? c : c & (0x7Fu >> len);
  for (int k = 1; k < len; k++) cp = cp << 6 | (s[i + k] & 0x3F);
  *next = i + (size_t)len;
  return cp;
}

/* ---------------------------------------------------------------- hashing */

static uint64_t bpe_hash_str(const char *s) {
  uint64_t h = 1469598103934665603ull;
  for (; *s; s++) h = (h ^ (unsigned char)*s) * 1099511628211ull;
  return h;
}

static uint64_t hash_pair(uint64_t k) {
  k ^= k >> 33, k *= 0xff51afd7ed558ccdull, k ^= k >> 33;
  return k;
}

static size_t pow2_at_least(size_t n) {
  size_t c = 16;
  while (c < n) c <<= 1;
  return c;
}

/* The slot holding token s, or the empty slot where it would go. */
static size_t tok_slot(const tg_bpe *t, const char *s) {
  size_t i = bpe_hash_str(s) & (t->tok_cap - 1);
  while (t->tok_slots[i] && strcmp(t->tokens[t->tok_slots[i] - 1], s)) i = (i + 1) & (t->tok_cap - 1);
  return i;
}

static size_t pair_slot(const tg_bpe *t, uint64_t key) {
  size_t i = hash_pair(key) & (t->pair_cap - 1);
  while (t->pair_rank[i] && t->pair_keys[i] != key) i = (i + 1) & (t->pair_cap - 1);
  return i;
}

/* The merge of (a, b): its rank, or -1 if there is none. */
static int64_t pair_lookup(const tg_bpe *t, int32_t a, int32_t b, int32_t *merged) {
  size_t i = pair_slot(t, (uint64_t)(uint32_t)a << 32 | (uint32_t)b);
  if (!t->pair_rank[i]) return -1;
  *merged = (int32_t)t->pair_new[i];
  return (int64_t)t->pair_rank[i] - 1;
}

/* ---------------------------------------------------------------- loading */

/* The whole file, NUL-terminated, in a malloc'd buffer; NULL with an error. */
static char *read_file(const char *op, const char *path, size_t *len) {
  FILE *f = fopen(path, "rb");
  if (!f) return tg_set_error(TG_ERR_IO, "%s: %s: cannot open: %s", op, path, strerror(errno)), NULL;
  struct stat st;
  char *buf = NULL;
  if (fstat(fileno(f), &st) < 0 || !S_ISREG(st.st_mode)) tg_set_error(TG_ERR_IO, "%s: %s: not a regular file", op, path);
  else if ((uint64_t)st.st_size > BPE_MAX_FILE)
    tg_set_error(TG_ERR_IO, "%s: %s: %lld bytes is above the %u-byte limit", op, path, (long long)st.st_size, BPE_MAX_FILE);
  else if (!(buf = malloc((size_t)st.st_size + 1))) tg_set_error(TG_ERR_NOMEM, "%s: %s: out of memory", op, path);
  else if (fread(buf, 1, (size_t)st.st_size, f) != (size_t)st.st_size) {
    tg_set_error(TG_ERR_IO, "%s: %s: read failed", op, path);
    free(buf), buf = NULL;
  }
  fclose(f);
  if (buf) buf[st.st_size] = 0, *len = (size_t)st.st_size;
  return buf;
}

/* Room for n tokens (ids 0..n-1) and their hash. */
static int alloc_tokens(tg_bpe *t, const char *op, const char *src, size_t n) {
  if (n == 0) return tg_set_error(TG_ERR_IO, "%s: %s: the vocabulary is empty", op, src);
  if (n > INT32_MAX) return tg_set_error(TG_ERR_IO, "%s: %s: %zu tokens are more than ids can number", op, src, n);
  t->n = (int64_t)n;
  t->tok_cap = pow2_at_least(2 * n);
  if (!(t->tokens = calloc(n, sizeof *t->tokens)) || !(t->tok_slots = calloc(t->tok_cap, sizeof *t->tok_slots)))
    return tg_set_error(TG_ERR_NOMEM, "%s: out of memory", op);
  return 0;
}

/* Every token (all set) into the hash; tokens must be distinct. */
static int index_tokens(tg_bpe *t, const char *op, const char *src) {
  for (int64_t i = 0; i < t->n; i++) {
    size_t s = tok_slot(t, t->tokens[i]);
    if (t->tok_slots[s]) return tg_set_error(TG_ERR_IO, "%s: %s: token \"%.80s\" appears twice", op, src, t->tokens[i]);
    t->tok_slots[s] = (uint32_t)i + 1;
  }
  return 0;
}

/* vocab: {"token": id, ...} with ids 0..n-1 each once and tokens distinct. */
static int parse_vocab(tg_bpe *t, const char *op, const char *path, size_t len) {
  json_reader r;
  json_init(&r, t->vocab_text, len);
  VEC(char *) names = {0};
  VEC(int64_t) ids = {0};
  int64_t n = 0, id = 0;
  json_expect(&r, '{');
  while (json_item(&r, '}', &n)) {
    char *s = (char *)json_string(&r);
    if (!s || !json_expect(&r, ':') || !json_int(&r, &id)) break;
    if (VEC_PUSH(names, s) < 0 || VEC_PUSH(ids, id) < 0) json_fail(&r, "out of memory");
  }
  json_finish(&r);
  int rc = json_failed(&r) ? tg_set_error(TG_ERR_IO, "%s: %s: %s", op, path, r.err) : 0;
  if (rc == 0) rc = alloc_tokens(t, op, path, names.n);
  for (size_t i = 0; rc == 0 && i < names.n; i++) {
    if (ids.v[i] >= t->n || t->tokens[ids.v[i]])
      rc = tg_set_error(TG_ERR_IO, "%s: %s: token \"%.80s\" has id %lld: ids must be 0..%lld, each once", op, path, names.v[i],
                        (long long)ids.v[i], (long long)t->n - 1);
    else t->tokens[ids.v[i]] = names.v[i];
  }
  if (rc == 0) rc = index_tokens(t, op, path);
  VEC_FREE(names);
  VEC_FREE(ids);
  return rc;
}

/* One merges line "left right" (ends at its NUL) of the given rank. */
static int add_merge(tg_bpe *t, const char *op, const char *path, char *line, int64_t lineno, uint32_t rank) {
  char *sp = strchr(line, ' ');
  if (!sp || sp == line || !sp[1] || strchr(sp + 1, ' '))
    return tg_set_error(TG_ERR_IO, "%s: %s: line %lld: expected \"left right\", found \"%.80s\"", op, path, (long long)lineno, line);
  *sp = 0;
  int64_t a = tg_bpe_token_id(t, line), b = tg_bpe_token_id(t, sp + 1);
  if (a < 0 || b < 0)
    return tg_set_error(TG_ERR_IO, "%s: %s: line %lld: \"%.60s\" is not in the vocabulary", op, path, (long long)lineno,
                        a < 0 ? line : sp + 1);
  size_t la = strlen(line), lb = strlen(sp + 1);
  char *joined = malloc(la + lb + 1);
  if (!joined) return tg_set_error(TG_ERR_NOMEM, "%s: out of memory", op);
  memcpy(joined, line, la), memcpy(joined + la, sp + 1, lb + 1);
  int64_t m = tg_bpe_token_id(t, joined);
  if (m < 0)
    tg_set_error(TG_ERR_IO, "%s: %s: line %lld: the merged token \"%.60s\" is not in the vocabulary", op, path, (long long)lineno, joined);
  free(joined);
  if (m < 0) return TG_ERR_IO;
  size_t s = pair_slot(t, (uint64_t)a << 32 | (uint64_t)b);
  if (t->pair_rank[s]) return 0; /* a repeated pair keeps its first rank */
  t->pair_keys[s] = (uint64_t)a << 32 | (uint64_t)b;
  t->pair_rank[s] = rank + 1;
  t->pair_new[s] = (uint32_t)m;
  return 0;
}

/* Room for n merges. */
static int alloc_pairs(tg_bpe *t, const char *op, size_t n) {
  t->pair_cap = pow2_at_least(2 * n);
  t->pair_keys = calloc(t->pair_cap, sizeof *t->pair_keys);
  t->pair_rank = calloc(t->pair_cap, sizeof *t->pair_rank);
  t->pair_new = calloc(t->pair_cap, sizeof *t->pair_new);
  return t->pair_keys && t->pair_rank && t->pair_new ? 0 : tg_set_error(TG_ERR_NOMEM, "%s: out of memory", op);
}

static int parse_merges(tg_bpe *t, const char *op, const char *path, char *text) {
  size_t lines = 1;
  for (char *p = text; *p; p++) lines += *p == '\n';
  if (alloc_pairs(t, op, lines) < 0) return TG_ERR_NOMEM;
  uint32_t rank = 0;
  int64_t lineno = 0;
  for (char *line = text, *next; line; line = next) {
    next = strchr(line, '\n');
    if (next) *next++ = 0;
    size_t len = strlen(line);
    if (len && line[len - 1] == '\r') line[--len] = 0;
    lineno++;
    if (!len || (lineno == 1 && !strncmp(line, "#version", 8))) continue;
    int rc = add_merge(t, op, path, line, lineno, rank++);
    if (rc < 0) return rc;
  }
  return 0;
}

/* The id of each byte's symbol; t, or NULL (freed) when rc says loading failed. */
static tg_bpe *finish_load(tg_bpe *t, int rc) {
  for (int b = 0; rc == 0 && b < 256; b++) {
    char sym[5] = {0};
    utf8_put(sym, byte_symbol(b));
    t->byte_id[b] = (int32_t)tg_bpe_token_id(t, sym);
  }
  if (rc < 0) tg_bpe_free(t), t = NULL;
  return t;
}

tg_bpe *tg_bpe_load(const char *vocab_path, const char *merges_path) {
  static const char op[] = "bpe_load";
  if (!vocab_path || !merges_path) return tg_set_error(TG_ERR_ARG, "%s: NULL path", op), NULL;
  tg_bpe *t = calloc(1, sizeof *t);
  if (!t) return tg_set_error(TG_ERR_NOMEM, "%s: out of memory", op), NULL;
  size_t vlen = 0, mlen = 0;
  char *merges = NULL;
  int rc = (t->vocab_text = read_file(op, vocab_path, &vlen)) ? parse_vocab(t, op, vocab_path, vlen) : -1;
  if (rc == 0) rc = (merges = read_file(op, merges_path, &mlen)) ? 0 : -1;
  if (rc == 0 && strlen(merges) != mlen) rc = tg_set_error(TG_ERR_IO, "%s: %s: a NUL byte in the file", op, merges_path);
  if (rc == 0) rc = parse_merges(t, op, merges_path, merges);
  free(merges);
  return finish_load(t, rc);
}

tg_bpe *tg_bpe_load_dir(const char *dir) {
  static const char *const names[][2] = {{"vocab.json", "merges.txt"}, {"encoder.json", "vocab.bpe"}};
  if (!dir) return tg_set_error(TG_ERR_ARG, "bpe_load: NULL directory"), NULL;
  char v[4096], m[4096];
  for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
    snprintf(v, sizeof v, "%s/%s", dir, names[i][0]);
    snprintf(m, sizeof m, "%s/%s", dir, names[i][1]);
    struct stat st;
    if (stat(v, &st) == 0 || i + 1 == sizeof names / sizeof names[0]) {
      if (stat(v, &st) != 0)
        return tg_set_error(TG_ERR_IO, "bpe_load: %s: neither vocab.json + merges.txt nor encoder.json + vocab.bpe", dir), NULL;
      return tg_bpe_load(v, m);
    }
  }
  return NULL;
}

/* An array of strings called key, its length in *n; an error naming the key otherwise. */
static int gguf_strings(const tg_gguf *g, const char *op, const char *key, int64_t *n) {
  tg_gguf_type et;
  if (tg_gguf_find_key(g, key) < 0) return tg_set_error(TG_ERR_IO, "%s: the file has no \"%s\"", op, key);
  if (tg_gguf_kv_type(g, key, &et, n) != TG_GGUF_ARRAY || et != TG_GGUF_STRING)
    return tg_set_error(TG_ERR_IO, "%s: \"%s\" is not an array of strings", op, key);
  return 0;
}

/* tokenizer.ggml.tokens (id = index) copied into one block, NUL-terminated. */
static int gguf_tokens(tg_bpe *t, const tg_gguf *g, const char *op, int64_t n) {
  static const char key[] = "tokenizer.ggml.tokens";
  size_t total = 0, len;
  for (int64_t i = 0; i < n; i++) tg_gguf_get_array_string(g, key, i, &len), total += len + 1;
  int rc = alloc_tokens(t, op, key, (size_t)n);
  if (rc == 0 && !(t->vocab_text = malloc(total ? total : 1))) rc = tg_set_error(TG_ERR_NOMEM, "%s: out of memory", op);
  for (int64_t i = 0, at = 0; rc == 0 && i < n; i++) {
    const char *s = tg_gguf_get_array_string(g, key, i, &len);
    if (strlen(s) != len || !io_utf8_valid(s, len)) return tg_set_error(TG_ERR_IO, "%s: token %lld is not NUL-free UTF-8", op, (long long)i);
    memcpy(t->vocab_text + at, s, len + 1);
    t->tokens[i] = t->vocab_text + at;
    at += (int64_t)len + 1;
  }
  return rc == 0 ? index_tokens(t, op, key) : rc;
}

tg_bpe *tg_bpe_from_gguf(const tg_gguf *g) {
  static const char op[] = "bpe_from_gguf", merges_key[] = "tokenizer.ggml.merges";
  if (!g) return tg_set_error(TG_ERR_ARG, "%s: NULL file", op), NULL;
  const char *model = tg_gguf_find_key(g, "tokenizer.ggml.model") >= 0 ? tg_gguf_get_string(g, "tokenizer.ggml.model", NULL) : "gpt2";
  if (!model || strcmp(model, "gpt2"))
    return tg_set_error(TG_ERR_IO, "%s: tokenizer.ggml.model is \"%.40s\": only \"gpt2\" (byte-level BPE) is read", op, model ? model : "?"), NULL;
  int64_t n = 0, nm = 0;
  if (gguf_strings(g, op, "tokenizer.ggml.tokens", &n) < 0 || gguf_strings(g, op, merges_key, &nm) < 0) return NULL;
  tg_bpe *t = calloc(1, sizeof *t);
  if (!t) return tg_set_error(TG_ERR_NOMEM, "%s: out of memory", op), NULL;
  int rc = gguf_tokens(t, g, op, n);
  if (rc == 0) rc = alloc_pairs(t, op, (size_t)nm);
  for (int64_t i = 0; rc == 0 && i < nm; i++) {
    size_t len;
    const char *m = tg_gguf_get_array_string(g, merges_key, i, &len);
    char *line = malloc(len + 1);
    if (!line) rc = tg_set_error(TG_ERR_NOMEM, "%s: out of memory", op);
    else memcpy(line, m, len + 1), rc = add_merge(t, op, merges_key, line, i + 1, (uint32_t)i); /* "line" i + 1 */
    free(line);
  }
  return finish_load(t, rc);
}

void tg_bpe_free(tg_bpe *t) {
  if (!t) return;
  free(t->tokens), free(t->vocab_text), free(t->tok_slots);
  free(t->pair_keys), free(t->pair_rank), free(t->pair_new);
  free(t);
}

int64_t tg_bpe_vocab_size(const tg_bpe *t) { return t ? t->n : -1; }

int64_t tg_bpe_token_id(const tg_bpe *t, const char *token) {
  if (!t || !token) return -1;
  uint32_t slot = t->tok_slots[tok_slot(t, token)];
  return slot ? (int64_t)slot - 1 : -1;
}

const char *tg_bpe_token(const tg_bpe *t, int64_t id) { return t && id >= 0 && id < t->n ? t->tokens[id] : NULL; }

/* ---------------------------------------------------------------- pre-tokenization */

static int char_class(uint32_t cp) {
  size_t lo = 0, hi = sizeof bpe_ranges / sizeof bpe_ranges[0];
  while (lo < hi) { /* the first range ending at or after cp */
    size_t mid = (lo + hi) / 2;
    if (bpe_ranges[mid].hi < cp) lo = mid + 1;
    else hi = mid;
  }
  return lo < sizeof bpe_ranges / sizeof bpe_ranges[0] && bpe_ranges[lo].lo <= cp ? bpe_ranges[lo].cls : BPE_OTHER;
}

/* The class of the code point at s[i] (-1 at the end); *next is the byte after it. */
static int class_at(const unsigned char *s, size_t len, size_t i, size_t *next) {
  if (i >= len) return *next = len, -1;
  return char_class(utf8_get(s, i, next));
}

/* The end of the run of class c that continues at byte i. */
static size_t run_end(const unsigned char *s, size_t len, size_t i, int c) {
  size_t next;
  while (class_at(s, len, i, &next) == c) i = next;
  return i;
}

/* 's 't 're 've 'm 'll 'd: their length at s (which holds '), else 0. */
static size_t contraction(const unsigned char *s, size_t n) {
  if (n >= 2 && strchr("stmd", s[1]) && s[1]) return 2;
  if (n >= 3 && (!memcmp(s + 1, "re", 2) || !memcmp(s + 1, "ve", 2) || !memcmp(s + 1, "ll", 2))) return 3;
  return 0;
}

/* Where the regex's match starting at byte i ends: the alternatives in their order. */
static size_t piece_end(const unsigned char *s, size_t len, size_t i) {
  size_t next, after;
  int c = class_at(s, len, i, &next);
  if (s[i] == '\'' && contraction(s + i, len - i)) return i + contraction(s + i, len - i);
  if (s[i] == ' ') { /* " ?\p{L}+", " ?\p{N}+", " ?[^\s\p{L}\p{N}]+" with the space */
    int c2 = class_at(s, len, next, &after);
    if (c2 >= 0 && c2 != BPE_SPACE) return run_end(s, len, after, c2);
  }
  if (c != BPE_SPACE) return run_end(s, len, next, c);
  size_t last = i, end = next; /* \s+(?!\S): the run, less its last character unless at the end */
  while (class_at(s, len, end, &after) == BPE_SPACE) last = end, end = after;
  if (end == len) return len;
  return last > i ? last : next; /* else \s+ of one character */
}

/* ---------------------------------------------------------------- merging */

typedef struct bpe_sym { int32_t id, prev, next, alive; } bpe_sym;
typedef struct bpe_merge { int64_t rank; int32_t pos, new_id; } bpe_merge;

typedef struct bpe_work {
  bpe_sym *sym;
  bpe_merge *heap;
  size_t nheap;
} bpe_work;

static bool merge_less(const bpe_merge *a, const bpe_merge *b) { return a->rank != b->rank ? a->rank < b->rank : a->pos < b->pos; }

static void heap_push(bpe_work *w, bpe_merge m) {
  size_t i = w->nheap++;
  for (; i && merge_less(&m, &w->heap[(i - 1) / 2]); i = (i - 1) / 2) w->heap[i] = w->heap[(i - 1) / 2];
  w->heap[i] = m;
}

static bpe_merge heap_pop(bpe_work *w) {
  bpe_merge top = w->heap[0], last = w->heap[--w->nheap];
  size_t i = 0;
  for (;;) {
    size_t c = 2 * i + 1;
    if (c >= w->nheap) break;
    if (c + 1 < w->nheap && merge_less(&w->heap[c + 1], &w->heap[c])) c++;
    if (!merge_less(&w->heap[c], &last)) break;
    w->heap[i] = w->heap[c], i = c;
  }
  if (w->nheap) w->heap[i] = last;
  return top;
}

static void push_pair(const tg_bpe *t, bpe_work *w, int32_t left) {
  int32_t right = w->sym[left].next, merged;
  if (right < 0) return;
  int64_t rank = pair_lookup(t, w->sym[left].id, w->sym[right].id, &merged);
  if (rank >= 0) heap_push(w, (bpe_merge){rank, left, merged});
}

/* Merge the m symbols of w->sym (ids set) to a fixed point. */
static void merge_word(const tg_bpe *t, bpe_work *w, int32_t m) {
  w->nheap = 0;
  for (int32_t i = 0; i < m; i++) w->sym[i].prev = i - 1, w->sym[i].next = i + 1 < m ? i + 1 : -1, w->sym[i].alive = 1;
  for (int32_t i = 0; i + 1 < m; i++) push_pair(t, w, i);
  while (w->nheap) {
    bpe_merge top = heap_pop(w);
    bpe_sym *a = &w->sym[top.pos];
    int32_t merged;
    if (!a->alive || a->next < 0) continue;
    if (pair_lookup(t, a->id, w->sym[a->next].id, &merged) < 0 || merged != top.new_id) continue; /* stale */
    bpe_sym *b = &w->sym[a->next];
    a->id = top.new_id, a->next = b->next, b->alive = 0;
    if (a->next >= 0) w->sym[a->next].prev = top.pos;
    if (a->prev >= 0) push_pair(t, w, a->prev);
    push_pair(t, w, top.pos);
  }
}

/* ---------------------------------------------------------------- encode / decode */

/* Room for pieces of n bytes: n symbols, and 3n heap entries (n - 1 pairs at the start, at
 * most two new ones per merge). */
static int grow_work(bpe_work *w, size_t *room, size_t n) {
  bpe_sym *sym = realloc(w->sym, sizeof *sym * n);
  if (sym) w->sym = sym;
  bpe_merge *heap = sym ? realloc(w->heap, sizeof *heap * 3 * n) : NULL;
  if (heap) w->heap = heap, *room = n;
  return heap ? 0 : -1;
}

int64_t tg_bpe_encode(const tg_bpe *t, const char *text, size_t len, int32_t *ids, int64_t cap) {
  static const char op[] = "bpe_encode";
  if (!t || (!text && len)) return tg_set_error(TG_ERR_ARG, "%s: NULL %s", op, t ? "text" : "tokenizer");
  if (cap < 0 || (cap > 0 && !ids)) return tg_set_error(TG_ERR_ARG, "%s: %s", op, cap < 0 ? "negative capacity" : "NULL ids");
  if (len > INT32_MAX) return tg_set_error(TG_ERR_ARG, "%s: a text of %zu bytes is above the 2^31 - 1 limit", op, len);
  if (!io_utf8_valid(text, len)) return tg_set_error(TG_ERR_ARG, "%s: the text is not valid UTF-8", op);
  const unsigned char *s = (const unsigned char *)text;
  for (size_t i = 0; i < len; i++)
    if (t->byte_id[s[i]] < 0) return tg_set_error(TG_ERR_ARG, "%s: the vocabulary has no token for byte 0x%02x", op, s[i]);
  bpe_work w = {0};
  size_t room = 0; /* symbols w has room for: grown to the longest piece so far */
  int64_t count = 0;
  for (size_t i = 0, end; i < len; i = end) {
    end = piece_end(s, len, i);
    int32_t m = (int32_t)(end - i);
    if ((size_t)m > room && grow_work(&w, &room, (size_t)m) < 0) {
      free(w.sym), free(w.heap);
      return tg_set_error(TG_ERR_NOMEM, "%s: out of memory for a piece of %d bytes", op, m);
    }
    for (int32_t k = 0; k < m; k++) w.sym[k].id = t->byte_id[s[i + (size_t)k]];
    merge_word(t, &w, m);
    for (int32_t k = 0; k >= 0; k = w.sym[k].next, count++)
      if (count < cap) ids[count] = w.sym[k].id;
  }
  free(w.sym), free(w.heap);
  return count;
}

int64_t tg_bpe_decode(const tg_bpe *t, const int32_t *ids, int64_t n, char *out, size_t cap) {
  static const char op[] = "bpe_decode";
  if (!t || (!ids && n) || n < 0 || (!out && cap)) return tg_set_error(TG_ERR_ARG, "%s: NULL or negative argument", op);
  size_t len = 0;
  for (int64_t i = 0; i < n; i++) {
    if (ids[i] < 0 || ids[i] >= t->n) return tg_set_error(TG_ERR_ARG, "%s: id %d at %lld is not in 0..%lld", op, ids[i], (long long)i, (long long)t->n - 1);
    const unsigned char *s = (const unsigned char *)t->tokens[ids[i]];
    for (size_t k = 0, next; s[k]; k = next) {
      uint32_t cp = utf8_get(s, k, &next);
      int b = symbol_byte(cp);
      char buf[4];
      size_t nb = b >= 0 ? (buf[0] = (char)b, 1) : utf8_put(buf, cp); /* not a byte symbol: as written */
      for (size_t j = 0; j < nb; j++, len++)
        if (len < cap) out[len] = buf[j];
    }
  }
  if (len < cap) out[len] = 0;
  return (int64_t)len;
}
