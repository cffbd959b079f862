/* fuzz_gguf.c — libFuzzer target: any bytes as a GGUF file (src/io/gguf.c). Opening must
 * succeed or fail with a status and a message. What opens must answer every query: each key's
 * values read back (strings NUL-terminated at their length), each tensor's data lies inside the
 * file, and each tensor tg loads realizes to the host with its exact byte count. A tokenizer
 * in the metadata (tg_bpe_from_gguf) loads or fails with a message, and what loads encodes
 * a text whose ids decode back to it. */
#include <string.h>

#include "fuzz_file.h"
#include "tg_llm.h"

static char host[1 << 16];

/* Every value of the pair at index i: a number, or a string of the stated length. */
static void read_key(tg_gguf *g, int64_t i) {
  const char *key = tg_gguf_kv_key(g, i);
  tg_gguf_type et;
  int64_t count, v;
  double f;
  size_t len;
  if (!key) abort();
  int type = tg_gguf_kv_type(g, key, &et, &count);
  if (type < 0 || tg_gguf_find_key(g, key) != i) abort(); /* keys are distinct */
  bool array = type == TG_GGUF_ARRAY;
  for (int64_t k = 0; k < count && k < 64; k++) {
    if (et == TG_GGUF_STRING) {
      const char *s = array ? tg_gguf_get_array_string(g, key, k, &len) : tg_gguf_get_string(g, key, &len);
      if (!s || strlen(s) > len || s[len]) abort();
    } else {
      int rc = array ? tg_gguf_get_array_float(g, key, k, &f) : tg_gguf_get_float(g, key, &f);
      if (rc != 0) abort(); /* every number reads as a double */
      rc = array ? tg_gguf_get_array_int(g, key, k, &v) : tg_gguf_get_int(g, key, &v);
      fuzz_check_status("gguf_get_int", rc);
    }
  }
}

static void read_tensor(tg_gguf *g, int64_t i, size_t size) {
  tg_gguf_tensor_info info;
  if (tg_gguf_tensor_info_at(g, i, &info) != 0) abort();
  if (info.offset < 0 || info.nbytes < 0 || (uint64_t)info.offset + (uint64_t)info.nbytes > size) abort();
  if (tg_gguf_find_tensor(g, info.name) != i) abort(); /* names are distinct */
  tg_clear_error();
  tg_tensor *t = tg_gguf_tensor(g, info.name);
  if (!t) {
    if (!tg_last_error()[0]) abort(); /* a failure says why */
    return;
  }
  size_t nbytes = (size_t)tg_numel(t) * tg_dtype_size(tg_get_dtype(t));
  if (nbytes <= sizeof host && tg_to_host(t, host, nbytes) != 0) abort();
}

static void read_tokenizer(tg_gguf *g) {
  static const char text[] = "Hello, w\xc3\xb6rld's 12  tokens\n";
  int32_t ids[64];
  char back[sizeof text];
  tg_clear_error();
  tg_bpe *tok = tg_bpe_from_gguf(g);
  if (!tok) {
    if (!tg_last_error()[0]) abort();
    return;
  }
  int64_t n = tg_bpe_encode(tok, text, sizeof text - 1, ids, 64);
  fuzz_check_status("bpe_encode", n < 0 ? (int)n : 0);
  if (n > 64) abort(); /* at most one id a byte */
  if (n >= 0 && tg_bpe_decode(tok, ids, n, back, sizeof back) != (int64_t)sizeof text - 1) abort();
  if (n >= 0 && memcmp(back, text, sizeof text - 1)) abort();
  tg_bpe_free(tok);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  const char *path = fuzz_file(data, size);
  tg_scope *s = tg_scope_begin();
  tg_clear_error();
  tg_gguf *g = tg_gguf_open(path);
  if (!g && !tg_last_error()[0]) abort();
  for (int64_t i = 0; g && i < tg_gguf_kv_count(g); i++) read_key(g, i);
  for (int64_t i = 0; g && i < tg_gguf_tensor_count(g); i++) read_tensor(g, i, size);
  if (g) read_tokenizer(g);
  tg_gguf_close(g);
  tg_scope_end(s);
  return 0;
}
