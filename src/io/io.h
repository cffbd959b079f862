/* io.h — helpers shared by the file formats in src/io: byte order and a strict JSON reader. */
#ifndef TG_IO_H
#define TG_IO_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* ---------------------------------------------------------------- byte order */

static inline bool io_host_is_little_endian(void) {
  const uint16_t probe = 1;
  return *(const unsigned char *)&probe == 1;
}

/* Reverse the bytes of each of n elements of `size` bytes (size 1: nothing to do). */
static inline void io_swap_bytes(void *data, size_t n, size_t size) {
  unsigned char *p = data;
  if (size < 2) return;
  for (size_t i = 0; i < n; i++, p += size)
    for (size_t a = 0, b = size - 1; a < b; a++, b--) {
      unsigned char t = p[a];
      p[a] = p[b], p[b] = t;
    }
}

static inline uint64_t io_read_le64(const unsigned char b[8]) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; i--) v = v << 8 | b[i];
  return v;
}

static inline void io_write_le64(unsigned char b[8], uint64_t v) {
  for (int i = 0; i < 8; i++) b[i] = (unsigned char)(v >> (8 * i));
}

static inline uint32_t io_read_be32(const unsigned char b[4]) {
  return (uint32_t)b[0] << 24 | (uint32_t)b[1] << 16 | (uint32_t)b[2] << 8 | b[3];
}

/* ---------------------------------------------------------------- JSON reader
 * A pull reader over a mutable buffer for the small JSON subset file headers need:
 * objects, arrays, strings (all escapes, UTF-8 checked) and non-negative integers.
 * true/false/null, negative numbers, fractions and exponents are rejected. Strings are
 * decoded in place (a decoded string is never longer than its quoted form), so the
 * returned pointers live as long as the buffer. The first error is kept in err.
 * There is no recursion: the caller reads the structure it expects, so nesting is bounded
 * by the schema (a safetensors header is three levels deep). */
typedef struct json_reader {
  char *start, *p, *end;
  char err[200]; /* "" while no error */
} json_reader;

void json_init(json_reader *r, char *text, size_t len);
bool json_failed(const json_reader *r);
/* Skip whitespace; true (and consume) if the next character is c. */
bool json_accept(json_reader *r, char c);
/* Like json_accept but an error when c is not next ("expected ..."). */
bool json_expect(json_reader *r, char c);
/* Iterate the members or elements of an object/array after its opening bracket:
 *   json_expect(r, '{'); int64_t n = 0; while (json_item(r, '}', &n)) { ...one member... }
 * True when another item follows (the separating ',' is consumed); false at the closing
 * bracket `close` (consumed) or on error. Counts the items in *count. */
bool json_item(json_reader *r, char close, int64_t *count);
/* A string; NULL on error. Strings with an escaped NUL are rejected. */
const char *json_string(json_reader *r);
/* The next non-space character without consuming it (0 at the end). */
char json_peek(json_reader *r);
/* A non-negative integer below 2^63; false on error. */
bool json_int(json_reader *r, int64_t *out);
/* Only whitespace is left. */
bool json_finish(json_reader *r);
/* Record an error at the current position (printf-style); returns false. */
bool json_fail(json_reader *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* True if s[0..n) is valid UTF-8 (no overlongs, surrogates or code points past U+10FFFF). */
bool io_utf8_valid(const char *s, size_t n);
#endif
