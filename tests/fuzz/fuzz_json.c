/* fuzz_json.c — libFuzzer target for the strict JSON reader of file headers (src/io/json.c):
 * any bytes are walked as a JSON value with the pull API. The reader must stay inside the
 * buffer, fail with a message or succeed, and every string it returns must be valid UTF-8
 * inside the buffer. Nesting is bounded here (the reader itself never recurses). */
#include <stdlib.h>
#include <string.h>

#include "io/io.h"

static char *buf;
static size_t len;

static void check_string(const char *s) {
  if (!s) return;
  if (s < buf || s + strlen(s) >= buf + len || !io_utf8_valid(s, strlen(s))) abort(); /* NUL inside too */
}

static void walk(json_reader *r, int depth) {
  char c = json_peek(r);
  int64_t n = 0, v;
  if (depth > 64) {
    json_fail(r, "nested too deep");
  } else if (c == '{') {
    json_expect(r, '{');
    while (json_item(r, '}', &n)) {
      const char *key = json_string(r);
      check_string(key);
      if (!key || !json_expect(r, ':')) return;
      walk(r, depth + 1);
    }
  } else if (c == '[') {
    json_expect(r, '[');
    while (json_item(r, ']', &n)) walk(r, depth + 1);
  } else if (c == '"') {
    check_string(json_string(r));
  } else if (json_int(r, &v) && v < 0) {
    abort();
  }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  buf = malloc(size ? size : 1), len = size;
  if (!buf) return 0;
  memcpy(buf, data, size); /* exactly size bytes: ASan sees any read past them */
  json_reader r;
  json_init(&r, buf, size);
  walk(&r, 0);
  bool ok = json_finish(&r);
  if (ok == json_failed(&r) || (!ok && !r.err[0]) || r.p < r.start || r.p > r.end) abort();
  free(buf);
  return 0;
}
