/* json.c — a strict pull reader for the JSON subset of file headers (see io.h). */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "io/io.h"

void json_init(json_reader *r, char *text, size_t len) {
  r->start = r->p = text;
  r->end = text + len;
  r->err[0] = 0;
}

bool json_failed(const json_reader *r) { return r->err[0] != 0; }

bool json_fail(json_reader *r, const char *fmt, ...) {
  if (json_failed(r)) return false; /* keep the first error */
  char msg[160];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  snprintf(r->err, sizeof r->err, "header byte %zu: %s", (size_t)(r->p - r->start), msg);
  return false;
}

static void skip_space(json_reader *r) {
  while (r->p < r->end && (*r->p == ' ' || *r->p == '\t' || *r->p == '\n' || *r->p == '\r')) r->p++;
}

bool json_accept(json_reader *r, char c) {
  if (json_failed(r)) return false;
  skip_space(r);
  if (r->p < r->end && *r->p == c) return r->p++, true;
  return false;
}

static const char *describe_next(const json_reader *r) {
  static _Thread_local char buf[16];
  if (r->p >= r->end) return "end of header";
  unsigned char c = (unsigned char)*r->p;
  if (c >= 0x20 && c < 0x7f) snprintf(buf, sizeof buf, "'%c'", c);
  else snprintf(buf, sizeof buf, "byte 0x%02x", c);
  return buf;
}

bool json_expect(json_reader *r, char c) {
  if (json_accept(r, c)) return true;
  return json_fail(r, "expected '%c', found %s", c, describe_next(r));
}

bool json_item(json_reader *r, char close, int64_t *count) {
  if (json_failed(r)) return false;
  bool more = *count == 0 ? !json_accept(r, close) : json_accept(r, ',');
  if (!more) {
    if (*count > 0) json_expect(r, close);
    return false;
  }
  ++*count;
  return true;
}

char json_peek(json_reader *r) {
  skip_space(r);
  return r->p < r->end ? *r->p : 0;
}

bool json_finish(json_reader *r) {
  if (json_failed(r)) return false;
  skip_space(r);
  if (r->p != r->end) return json_fail(r, "unexpected %s after the end of the value", describe_next(r));
  return true;
}

/* ---------------------------------------------------------------- strings */

static int hex_digit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

/* Four hex digits after "\u"; -1 if malformed. */
static long read_hex4(json_reader *r) {
  if (r->end - r->p < 4) return -1;
  long v = 0;
  for (int i = 0; i < 4; i++) {
    int d = hex_digit(r->p[i]);
    if (d < 0) return -1;
    v = v << 4 | d;
  }
  r->p += 4;
  return v;
}

static char *put_utf8(char *w, uint32_t cp) {
  if (cp < 0x80) {
    *w++ = (char)cp;
  } else if (cp < 0x800) {
    *w++ = (char)(0xC0 | cp >> 6);
    *w++ = (char)(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    *w++ = (char)(0xE0 | cp >> 12);
    *w++ = (char)(0x80 | ((cp >> 6) & 0x3F));
    *w++ = (char)(0x80 | (cp & 0x3F));
  } else {
    *w++ = (char)(0xF0 | cp >> 18);
    *w++ = (char)(0x80 | ((cp >> 12) & 0x3F));
    *w++ = (char)(0x80 | ((cp >> 6) & 0x3F));
    *w++ = (char)(0x80 | (cp & 0x3F));
  }
  return w;
}

/* "\uXXXX" (r->p just past the 'u'), joining a surrogate pair; 0 on error. */
static uint32_t read_unicode_escape(json_reader *r) {
  long hi = read_hex4(r);
  if (hi < 0) return json_fail(r, "bad \\u escape"), 0;
  if (hi >= 0xDC00 && hi <= 0xDFFF) return json_fail(r, "unpaired low surrogate \\u%04lx", hi), 0;
  if (hi < 0xD800 || hi > 0xDBFF) {
    if (hi == 0) json_fail(r, "\\u0000 in a string");
    return (uint32_t)hi;
  }
  if (r->end - r->p < 2 || r->p[0] != '\\' || r->p[1] != 'u')
    return json_fail(r, "unpaired high surrogate \\u%04lx", hi), 0;
  r->p += 2;
  long lo = read_hex4(r);
  if (lo < 0xDC00 || lo > 0xDFFF) return json_fail(r, "bad low surrogate after \\u%04lx", hi), 0;
  return 0x10000 + (uint32_t)((hi - 0xD800) << 10) + (uint32_t)(lo - 0xDC00);
}

/* One escape sequence (r->p at the character after '\'); returns the new write pointer. */
static char *read_escape(json_reader *r, char *w) {
  static const char from[] = "\"\\/bfnrt", to[] = "\"\\/\b\f\n\r\t";
  if (r->p >= r->end) return json_fail(r, "unterminated string"), NULL;
  char c = *r->p++;
  const char *k = c ? strchr(from, c) : NULL;
  if (k) return *w++ = to[k - from], w;
  if (c != 'u') return r->p--, json_fail(r, "bad escape '\\%c'", c), NULL;
  uint32_t cp = read_unicode_escape(r);
  return cp ? put_utf8(w, cp) : NULL;
}

/* Length of the UTF-8 sequence starting with lead byte c (0: not a lead byte). */
static int utf8_length(unsigned char c) {
  if (c < 0x80) return 1;
  if ((c & 0xE0) == 0xC0) return 2;
  if ((c & 0xF0) == 0xE0) return 3;
  if ((c & 0xF8) == 0xF0) return 4;
  return 0;
}

bool io_utf8_valid(const char *s, size_t n) {
  static const uint32_t smallest[5] = {0, 0, 0x80, 0x800, 0x10000};
  const unsigned char *p = (const unsigned char *)s, *e = p + n;
  while (p < e) {
    int len = utf8_length(*p);
    if (len == 0 || e - p < len) return false;
    uint32_t cp = len == 1 ? *p : *p & (0x7Fu >> len);
    for (int i = 1; i < len; i++) {
      if ((p[i] & 0xC0) != 0x80) return false;
      cp = cp << 6 | (p[i] & 0x3Fu);
    }
    if (cp < smallest[len] || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return false;
    p += len;
  }
  return true;
}

const char *json_string(json_reader *r) {
  if (!json_expect(r, '"')) return NULL;
  char *out = r->p - 1, *w = out; /* decode over the quoted text: w never passes r->p */
  for (;;) {
    if (r->p >= r->end) return json_fail(r, "unterminated string"), NULL;
    unsigned char c = (unsigned char)*r->p;
    if (c == '"') break;
    if (c < 0x20) return json_fail(r, "control character 0x%02x in a string", c), NULL;
    if (c == '\\') {
      r->p++;
      if (!(w = read_escape(r, w))) return NULL;
      continue;
    }
    int len = utf8_length(c);
    if (!len || r->end - r->p < len || !io_utf8_valid(r->p, (size_t)len))
      return json_fail(r, "invalid UTF-8 in a string"), NULL;
    memmove(w, r->p, (size_t)len);
    w += len, r->p += len;
  }
  r->p++; /* closing quote */
  *w = 0;
  return out;
}

/* ---------------------------------------------------------------- numbers */

bool json_int(json_reader *r, int64_t *out) {
  if (json_failed(r)) return false;
  skip_space(r);
  if (r->p < r->end && *r->p == '-') return json_fail(r, "negative numbers are not allowed here");
  if (r->p >= r->end || *r->p < '0' || *r->p > '9')
    return json_fail(r, "expected an integer, found %s", describe_next(r));
  if (*r->p == '0' && r->end - r->p > 1 && r->p[1] >= '0' && r->p[1] <= '9')
    return json_fail(r, "leading zero in a number");
  uint64_t v = 0;
  while (r->p < r->end && *r->p >= '0' && *r->p <= '9') {
    uint64_t digit = (uint64_t)(*r->p - '0');
    if (v > ((uint64_t)INT64_MAX - digit) / 10) return json_fail(r, "integer too large");
    v = v * 10 + digit, r->p++;
  }
  if (r->p < r->end && (*r->p == '.' || *r->p == 'e' || *r->p == 'E'))
    return json_fail(r, "only integers are allowed here");
  *out = (int64_t)v;
  return true;
}
