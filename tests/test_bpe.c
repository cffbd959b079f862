/* test_bpe.c — the byte-level BPE tokenizer (src/io/bpe.c).
 *
 * The main check is differential: tests/fixtures/bpe/cases.txt holds ~2500 texts (license and
 * copyright prose, Python source, Unicode from many scripts, odd white space) with the ids
 * Hugging Face's `tokenizers` gives them with models/tokenizer (transformers' GPT2TokenizerFast
 * agrees on all of them: tests/gen_fixtures_bpe.py asserts it). A tiny hand-written vocabulary
 * checks the pre-tokenization rules against hand-computed ids, and broken files and arguments
 * give errors with messages. Tests run from the repository root. */
#include <stdint.h>
#include <stdlib.h>
#include <unistd.h>

#include "harness.h"
#include "tg_llm.h"

#define MODEL_DIR "models/tokenizer"
#define CASES "tests/fixtures/bpe/cases.txt"
#define TOKENIZER_GGUF "tests/fixtures/gguf/tokenizer.gguf"

static char *slurp(const char *path, size_t *len) {
  FILE *f = fopen(path, "rb");
  if (!f) return NULL;
  fseek(f, 0, SEEK_END);
  long n = ftell(f);
  fseek(f, 0, SEEK_SET);
  char *buf = malloc((size_t)n + 1);
  if (buf && fread(buf, 1, (size_t)n, f) != (size_t)n) free(buf), buf = NULL;
  fclose(f);
  if (buf) buf[n] = 0, *len = (size_t)n;
  return buf;
}

static int write_text(const char *path, const char *text) {
  FILE *f = fopen(path, "wb");
  if (!f) return -1;
  size_t n = strlen(text);
  int ok = fwrite(text, 1, n, f) == n;
  return fclose(f) == 0 && ok ? 0 : -1;
}

/* A fresh temporary directory (removed by remove_dir). */
static char *make_dir(char *buf) {
  strcpy(buf, "/tmp/tg_bpe_XXXXXX");
  return mkdtemp(buf);
}

static void remove_dir(const char *dir, const char *const *names, int n) {
  char p[256];
  for (int i = 0; i < n; i++) snprintf(p, sizeof p, "%s/%s", dir, names[i]), unlink(p);
  rmdir(dir);
}

/* ---------------------------------------------------------------- against tokenizers */

typedef struct bpe_stats { int cases, id_mismatch, roundtrip_fail; long ids; } bpe_stats;

/* Encode and decode one case; expected ids are the text after `ids` (space-separated). */
static void check_case(const tg_bpe *tok, const char *text, size_t len, const char *ids_text, bpe_stats *st) {
  int32_t want[4096], got[4096];
  int nwant = 0;
  for (char *p = (char *)ids_text; *p && *p != '\n' && nwant < 4096;) want[nwant++] = (int32_t)strtol(p, &p, 10);
  int64_t n = tg_bpe_encode(tok, text, len, got, 4096);
  bool same = n == nwant && !memcmp(got, want, sizeof *got * (size_t)nwant);
  if (!same && st->id_mismatch++ < 5) {
    printf("  case %d (%zu bytes \"%.60s\"): %lld ids, expected %d:", st->cases, len, text, (long long)n, nwant);
    for (int i = 0; i < nwant && i < 12; i++) printf(" %d/%d", i < n ? got[i] : -1, want[i]);
    printf("\n");
  }
  char back[8192];
  int64_t blen = n >= 0 ? tg_bpe_decode(tok, got, n, back, sizeof back) : -1;
  if ((blen != (int64_t)len || memcmp(back, text, len)) && st->roundtrip_fail++ < 5)
    printf("  case %d does not round-trip (%lld bytes, expected %zu)\n", st->cases, (long long)blen, len);
  st->cases++, st->ids += nwant;
}

/* Every fixture case through tok: ids equal tokenizers', decoding round-trips. */
static void check_fixture(const tg_bpe *tok) {
  size_t size = 0;
  char *data = slurp(CASES, &size);
  CHECK(tok != NULL && data != NULL);
  if (!tok || !data) return free(data);
  bpe_stats st = {0};
  for (char *p = data; p < data + size && *p == '#';) {
    size_t len = strtoul(p + 1, &p, 10);
    char *text = p + 1, *ids = text + len + 1, *end = strchr(ids, '\n');
    if (!end || text + len > data + size) break;
    check_case(tok, text, len, ids, &st);
    p = end + 1;
  }
  printf("  %d cases, %ld ids\n", st.cases, st.ids);
  CHECK(st.cases >= 2400);
  CHECK(st.ids >= 50000);
  CHECK(st.id_mismatch == 0);
  CHECK(st.roundtrip_fail == 0);
  free(data);
}

TEST(bpe_ids_equal_tokenizers_on_fixture_texts) {
  tg_bpe *tok = tg_bpe_load_dir(MODEL_DIR);
  CHECK(tg_bpe_vocab_size(tok) == 4096);
  check_fixture(tok);
  tg_bpe_free(tok);
}

/* The same vocabulary as GGUF metadata (written by the gguf package) tokenizes the same. */
TEST(bpe_from_gguf_equals_the_files) {
  tg_gguf *g = tg_gguf_open(TOKENIZER_GGUF);
  tg_bpe *tok = tg_bpe_from_gguf(g);
  tg_gguf_close(g); /* the tokenizer keeps its own copies */
  CHECK(tg_bpe_vocab_size(tok) == 4096);
  check_fixture(tok);
  tg_bpe_free(tok);
}

TEST(bpe_from_gguf_errors) {
  tg_gguf *g = tg_gguf_open("tests/fixtures/gguf/meta.gguf");
  CHECK(tg_bpe_from_gguf(g) == NULL);
  CHECK(strstr(tg_last_error(), "bpe_from_gguf: the file has no \"tokenizer.ggml.tokens\"") != NULL);
  tg_gguf_close(g);
  CHECK(tg_bpe_from_gguf(NULL) == NULL);
  size_t n;
  char *d = slurp(TOKENIZER_GGUF, &n), path[64];
  char *at = d ? memmem(d, n, "gpt2", 4) : NULL; /* general.architecture's value, then the model's */
  at = at ? memmem(at + 4, n - (size_t)(at + 4 - d), "gpt2", 4) : NULL;
  CHECK(at != NULL);
  if (!at) return free(d);
  memcpy(at, "llam", 4);
  snprintf(path, sizeof path, "/tmp/tg_bpe_%d.gguf", (int)getpid());
  FILE *f = fopen(path, "wb");
  CHECK(f && fwrite(d, 1, n, f) == n && fclose(f) == 0);
  g = tg_gguf_open(path);
  CHECK(g != NULL && tg_bpe_from_gguf(g) == NULL);
  CHECK(strstr(tg_last_error(), "tokenizer.ggml.model is \"llam\": only \"gpt2\"") != NULL);
  tg_gguf_close(g);
  unlink(path);
  free(d);
}

/* A few ids checked by hand against the trained vocabulary's strings. */
TEST(bpe_trained_vocabulary_spot_checks) {
  tg_bpe *tok = tg_bpe_load_dir(MODEL_DIR);
  CHECK(tok != NULL);
  CHECK(tg_bpe_token_id(tok, "<|endoftext|>") == 0);
  int64_t the = tg_bpe_token_id(tok, "\xc4\xa0the"); /* "Ġthe": " the" */
  CHECK(the > 0);
  int32_t ids[8];
  CHECK(tg_bpe_encode(tok, " the", 4, ids, 8) == 1);
  CHECK(ids[0] == the);
  CHECK(!strcmp(tg_bpe_token(tok, the), "\xc4\xa0the"));
  CHECK(tg_bpe_token(tok, 4096) == NULL);
  CHECK(tg_bpe_token_id(tok, "no such token") == -1);
  char out[16];
  CHECK(tg_bpe_decode(tok, ids, 1, out, sizeof out) == 4);
  CHECK(!strcmp(out, " the"));
  tg_bpe_free(tok);
}

/* One piece of 200,000 letters (merging is a heap, not a quadratic scan): ids decode back. */
TEST(bpe_long_piece_round_trips) {
  tg_bpe *tok = tg_bpe_load_dir(MODEL_DIR);
  enum { N = 200000 };
  char *text = malloc(N), *back = malloc(N + 1);
  int32_t *ids = malloc(sizeof *ids * N);
  for (int i = 0; i < N; i++) text[i] = "licensor"[i % 8];
  int64_t n = tok && text && ids ? tg_bpe_encode(tok, text, N, ids, N) : -1;
  CHECK(n > 0 && n < N / 2); /* merged */
  CHECK(n > 0 && tg_bpe_decode(tok, ids, n, back, N + 1) == N && !memcmp(back, text, N));
  free(text), free(back), free(ids);
  tg_bpe_free(tok);
}

/* GPT-2's own file names (encoder.json + vocab.bpe) load the same tokenizer. */
TEST(bpe_loads_gpt2_file_names) {
  char dir[64], p[128];
  CHECK(make_dir(dir) != NULL);
  size_t n;
  char *v = slurp(MODEL_DIR "/vocab.json", &n), *m = slurp(MODEL_DIR "/merges.txt", &n);
  snprintf(p, sizeof p, "%s/encoder.json", dir);
  CHECK(v && write_text(p, v) == 0);
  snprintf(p, sizeof p, "%s/vocab.bpe", dir);
  CHECK(m && write_text(p, m) == 0);
  tg_bpe *a = tg_bpe_load_dir(dir), *b = tg_bpe_load_dir(MODEL_DIR);
  CHECK(a && b);
  const char *text = "Permission is hereby granted, free of charge, to any person's copy.";
  int32_t ia[64], ib[64];
  int64_t na = tg_bpe_encode(a, text, strlen(text), ia, 64), nb = tg_bpe_encode(b, text, strlen(text), ib, 64);
  CHECK(na > 5 && na == nb && !memcmp(ia, ib, sizeof *ia * (size_t)na));
  tg_bpe_free(a), tg_bpe_free(b), free(v), free(m);
  remove_dir(dir, (const char *const[]){"encoder.json", "vocab.bpe"}, 2);
}

/* ---------------------------------------------------------------- hand-made vocabulary */

/* Symbols a b c ' s Ġ (space) Ċ (newline) and merges a b -> ab, Ġ Ġ -> ĠĠ, ab c -> abc,
 * Ġ a -> Ġa, ' s -> 's. Ids: a0 b1 c2 '3 s4 Ġ5 Ċ6 ab7 ĠĠ8 abc9 Ġa10 's11. */
static const char hand_vocab[] =
    "{\"a\":0,\"b\":1,\"c\":2,\"'\":3,\"s\":4,\"\\u0120\":5,\"\\u010a\":6,\"ab\":7,\"\\u0120\\u0120\":8,"
    "\"abc\":9,\"\\u0120a\":10,\"'s\":11}";
static const char hand_merges[] = "#version: 0.2\na b\n\xc4\xa0 \xc4\xa0\nab c\n\xc4\xa0 a\n' s\n";

static tg_bpe *hand_tokenizer(char *dir) {
  char v[128], m[128];
  if (!make_dir(dir)) return NULL;
  snprintf(v, sizeof v, "%s/vocab.json", dir), snprintf(m, sizeof m, "%s/merges.txt", dir);
  if (write_text(v, hand_vocab) || write_text(m, hand_merges)) return NULL;
  return tg_bpe_load(v, m);
}

static const char *const hand_files[] = {"vocab.json", "merges.txt"};

TEST(bpe_pretokenization_rules_by_hand) {
  char dir[64];
  tg_bpe *tok = hand_tokenizer(dir);
  CHECK(tok != NULL);
  static const struct { const char *text; int n; int32_t ids[12]; } cases[] = {
      {"abc", 1, {9}},                    /* ab, then ab c */
      {"abcab", 2, {9, 7}},               /* one piece: merges run to a fixed point */
      {" abc", 2, {5, 9}},                /* one piece: a b (rank 0) first, so Ġ a never applies */
      {"a  b", 4, {0, 5, 5, 1}},          /* "a", " " (\s+(?!\S)), " b" */
      {"a   ", 3, {0, 8, 5}},             /* "a", "   " at the end: one piece, ĠĠ Ġ */
      {"a \n b", 5, {0, 5, 6, 5, 1}},     /* "a", " \n" (last space left), " b" */
      {"a's", 2, {0, 11}},                /* contraction */
      {"a 's", 4, {0, 5, 3, 4}},          /* " '" is punctuation with its space, then "s" */
      {"\n\na", 3, {6, 6, 0}},            /* "\n", "\n", "a" */
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    int32_t ids[16];
    int64_t n = tg_bpe_encode(tok, cases[i].text, strlen(cases[i].text), ids, 16);
    int want = cases[i].n;
    bool ok = n == want && !memcmp(ids, cases[i].ids, sizeof *ids * (size_t)want);
    CHECK(ok);
    if (!ok) printf("  \"%s\": %lld ids, first %d\n", cases[i].text, (long long)n, n > 0 ? ids[0] : -1);
  }
  tg_bpe_free(tok);
  remove_dir(dir, hand_files, 2);
}

TEST(bpe_encode_capacity_and_empty) {
  char dir[64];
  tg_bpe *tok = hand_tokenizer(dir);
  int32_t ids[2] = {-7, -7};
  CHECK(tg_bpe_encode(tok, "a a a", 5, ids, 1) == 3); /* the count, however much fits */
  CHECK(ids[0] == 0 && ids[1] == -7);
  CHECK(tg_bpe_encode(tok, "a a a", 5, NULL, 0) == 3);
  CHECK(tg_bpe_encode(tok, "", 0, NULL, 0) == 0);
  char out[4] = "xyz";
  CHECK(tg_bpe_decode(tok, (const int32_t[]){9, 9}, 2, out, 4) == 6); /* "abcabc": 4 bytes fit, no NUL */
  CHECK(!memcmp(out, "abca", 4));
  tg_bpe_free(tok);
  remove_dir(dir, hand_files, 2);
}

/* ---------------------------------------------------------------- errors */

static void expect_load_error(const char *vocab, const char *merges, const char *message) {
  char dir[64], v[128], m[128];
  CHECK(make_dir(dir) != NULL);
  snprintf(v, sizeof v, "%s/vocab.json", dir), snprintf(m, sizeof m, "%s/merges.txt", dir);
  CHECK(write_text(v, vocab) == 0 && write_text(m, merges) == 0);
  tg_clear_error();
  tg_bpe *tok = tg_bpe_load(v, m);
  CHECK(tok == NULL);
  CHECK(strstr(tg_last_error(), message) != NULL);
  if (!strstr(tg_last_error(), message)) printf("  message \"%s\", expected \"%s\"\n", tg_last_error(), message);
  tg_bpe_free(tok);
  remove_dir(dir, hand_files, 2);
}

TEST(bpe_bad_files_give_errors) {
  expect_load_error("{\"a\":0,\"b\":2}", "", "ids must be 0..1, each once");
  expect_load_error("{\"a\":0,\"b\":0}", "", "ids must be 0..1, each once");
  expect_load_error("{\"a\":0,\"a\":1}", "", "token \"a\" appears twice");
  expect_load_error("{\"a\":0,", "", "expected");
  expect_load_error("{}", "", "the vocabulary is empty");
  expect_load_error("{\"a\":0,\"b\":1}", "a b\n", "line 1: the merged token \"ab\" is not in the vocabulary");
  expect_load_error("{\"a\":0,\"b\":1,\"ab\":2}", "a c\n", "line 1: \"c\" is not in the vocabulary");
  expect_load_error("{\"a\":0,\"b\":1,\"ab\":2}", "#version: 0.2\nab\n", "line 2: expected \"left right\"");
  expect_load_error("{\"a\":0,\"b\":1,\"ab\":2}", "a b c\n", "line 1: expected \"left right\"");
  tg_clear_error();
  CHECK(tg_bpe_load("/nonexistent/vocab.json", "/nonexistent/merges.txt") == NULL);
  CHECK(strstr(tg_last_error(), "cannot open") != NULL);
  CHECK(tg_bpe_load_dir("/nonexistent") == NULL);
  CHECK(strstr(tg_last_error(), "neither vocab.json") != NULL);
  CHECK(tg_bpe_load(NULL, "x") == NULL);
}

TEST(bpe_load_control_case_loads) {
  char dir[64];
  tg_bpe *tok = hand_tokenizer(dir);
  CHECK(tok != NULL && tg_bpe_vocab_size(tok) == 12);
  tg_bpe_free(tok);
  remove_dir(dir, hand_files, 2);
}

TEST(bpe_bad_arguments_give_errors) {
  char dir[64];
  tg_bpe *tok = hand_tokenizer(dir);
  int32_t ids[4];
  CHECK(tg_bpe_encode(tok, "a\xff", 2, ids, 4) == TG_ERR_ARG);
  CHECK(strstr(tg_last_error(), "not valid UTF-8") != NULL);
  CHECK(tg_bpe_encode(tok, "x", 1, ids, 4) == TG_ERR_ARG); /* this vocabulary has no "x" */
  CHECK(strstr(tg_last_error(), "no token for byte 0x78") != NULL);
  CHECK(tg_bpe_encode(NULL, "a", 1, ids, 4) == TG_ERR_ARG);
  CHECK(tg_bpe_encode(tok, "a", 1, NULL, 4) == TG_ERR_ARG);
  char out[8];
  CHECK(tg_bpe_decode(tok, (const int32_t[]){12}, 1, out, sizeof out) == TG_ERR_ARG);
  CHECK(strstr(tg_last_error(), "id 12 at 0 is not in 0..11") != NULL);
  CHECK(tg_bpe_decode(tok, (const int32_t[]){-1}, 1, out, sizeof out) == TG_ERR_ARG);
  CHECK(tg_bpe_vocab_size(NULL) == -1);
  tg_bpe_free(NULL);
  tg_bpe_free(tok);
  remove_dir(dir, hand_files, 2);
}
