/* gguf.c — GGUF model files, versions 2 and 3 (llama.cpp's format; include/tg_llm.h,
 * docs/llm.md). Little-endian throughout:
 *
 *   "GGUF" u32 version, u64 tensor_count, u64 kv_count
 *   kv_count x  { string key, u32 value_type, value }   string = u64 length + bytes
 *   tensor_count x { string name, u32 n_dims, u64 dims[n_dims] (innermost first), u32 ggml_type,
 *                    u64 offset (in the data section) }
 *   padding to general.alignment (default 32), then the data section
 *
 * The file is mapped; opening validates all of it as ggml's reader does (known types, counts
 * the file can hold, distinct keys and names, 1-4 dims, rows of whole blocks, each tensor at
 * the aligned offset right after the previous one, data inside the file) and copies the
 * strings out NUL-terminated. Numbers are read from the map when asked for.
 *
 * Quantized tensors become a uint8 tensor of their raw blocks, (blocks, block bytes), and
 * float32 dequantization written as tensor ops on it (slices, shifts, masks, casts,
 * multiplies), so the scheduler fuses it into whatever consumes the weight (one kernel for a
 * matrix-vector product; see the dequantization section for how). The arithmetic is
 * gguf.quants.dequantize's, in its order; where it adds a product (Q4_1, Q4_K) the product is
 * exact in float32 (an 11-bit float16 mantissa times a 4- or 6-bit integer), so a fused
 * multiply-add rounds the same. */
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "io/io.h"
#include "runtime/helpers.h"
#include "tensor/tensor.h"
#include "tg_llm.h"

#define GGUF_MAGIC 0x46554747u /* "GGUF" little-endian */
#define GGUF_MAX_DIMS 4
#define GGUF_DEFAULT_ALIGNMENT 32

/* ---------------------------------------------------------------- types */

struct tg_gguf;
typedef tg_tensor *(*dequant_fn)(tg_tensor *raw, int64_t nblocks);

/* GGML's tensor types: block of `block` elements in `size` bytes; `dtype` for types that load
 * directly, `dequant` for the quantized ones tg reads (the others open but do not load). */
typedef struct ggml_type_info {
  int id;
  const char *name;
  int block, size;
  tg_dtype dtype;
  dequant_fn dequant;
} ggml_type_info;

static tg_tensor *dq_q8_0(tg_tensor *raw, int64_t nb);
static tg_tensor *dq_q4_0(tg_tensor *raw, int64_t nb);
static tg_tensor *dq_q4_1(tg_tensor *raw, int64_t nb);
static tg_tensor *dq_q4_k(tg_tensor *raw, int64_t nb);
static tg_tensor *dq_q6_k(tg_tensor *raw, int64_t nb);

#define NO TG_DTYPE_COUNT
static const ggml_type_info ggml_types[] = {
    {0, "F32", 1, 4, TG_FLOAT32, NULL},     {1, "F16", 1, 2, TG_FLOAT16, NULL},     {2, "Q4_0", 32, 18, NO, dq_q4_0},
    {3, "Q4_1", 32, 20, NO, dq_q4_1},       {6, "Q5_0", 32, 22, NO, NULL},          {7, "Q5_1", 32, 24, NO, NULL},
    {8, "Q8_0", 32, 34, NO, dq_q8_0},       {9, "Q8_1", 32, 40, NO, NULL},          {10, "Q2_K", 256, 84, NO, NULL},
    {11, "Q3_K", 256, 110, NO, NULL},       {12, "Q4_K", 256, 144, NO, dq_q4_k},    {13, "Q5_K", 256, 176, NO, NULL},
    {14, "Q6_K", 256, 210, NO, dq_q6_k},    {15, "Q8_K", 256, 292, NO, NULL},       {16, "IQ2_XXS", 256, 66, NO, NULL},
    {17, "IQ2_XS", 256, 74, NO, NULL},      {18, "IQ3_XXS", 256, 98, NO, NULL},     {19, "IQ1_S", 256, 50, NO, NULL},
    {20, "IQ4_NL", 32, 18, NO, NULL},       {21, "IQ3_S", 256, 110, NO, NULL},      {22, "IQ2_S", 256, 82, NO, NULL},
    {23, "IQ4_XS", 256, 136, NO, NULL},     {24, "I8", 1, 1, TG_INT8, NULL},        {25, "I16", 1, 2, TG_INT16, NULL},
    {26, "I32", 1, 4, TG_INT32, NULL},      {27, "I64", 1, 8, TG_INT64, NULL},      {28, "F64", 1, 8, TG_FLOAT64, NULL},
    {29, "IQ1_M", 256, 56, NO, NULL},       {30, "BF16", 1, 2, TG_BFLOAT16, NULL},  {34, "TQ1_0", 256, 54, NO, NULL},
    {35, "TQ2_0", 256, 66, NO, NULL},       {39, "MXFP4", 32, 17, NO, NULL},
};
#undef NO

static const ggml_type_info *ggml_type(uint32_t id) {
  for (size_t i = 0; i < sizeof ggml_types / sizeof ggml_types[0]; i++)
    if ((uint32_t)ggml_types[i].id == id) return &ggml_types[i];
  return NULL;
}

/* Metadata value types: bytes of one value (0: a string or an array) and the name. */
static const struct { int size; const char *name; } value_types[] = {
    [TG_GGUF_UINT8] = {1, "uint8"},   [TG_GGUF_INT8] = {1, "int8"},       [TG_GGUF_UINT16] = {2, "uint16"},
    [TG_GGUF_INT16] = {2, "int16"},   [TG_GGUF_UINT32] = {4, "uint32"},   [TG_GGUF_INT32] = {4, "int32"},
    [TG_GGUF_FLOAT32] = {4, "float32"}, [TG_GGUF_BOOL] = {1, "bool"},     [TG_GGUF_STRING] = {0, "string"},
    [TG_GGUF_ARRAY] = {0, "array"},   [TG_GGUF_UINT64] = {8, "uint64"},   [TG_GGUF_INT64] = {8, "int64"},
    [TG_GGUF_FLOAT64] = {8, "float64"},
};
#define NVALUE_TYPES ((uint32_t)(sizeof value_types / sizeof value_types[0]))

/* ---------------------------------------------------------------- an open file */

typedef struct gguf_kv {
  size_t key;       /* string index */
  uint32_t type;    /* tg_gguf_type */
  uint32_t elem;    /* an array's element type */
  int64_t count;    /* an array's length (1 otherwise) */
  size_t pos;       /* file offset of the (first) number */
  size_t str;       /* index of the (first) string */
} gguf_kv;

typedef struct gguf_tensor {
  size_t name;      /* string index */
  const ggml_type_info *type;
  int ndim;
  int64_t shape[GGUF_MAX_DIMS]; /* tg order */
  int64_t numel, offset, nbytes; /* offset: in the data section */
} gguf_tensor;

struct tg_gguf {
  char *path;
  int version;
  const unsigned char *map;
  size_t size;
  int64_t data_start;
  VEC(gguf_kv) kvs;
  VEC(gguf_tensor) tensors;
  VEC(char) arena;      /* strings, each NUL-terminated */
  VEC(size_t) str_off;  /* string index -> offset in arena */
  VEC(uint64_t) str_len;
};

static const char *gstr(const tg_gguf *g, size_t i) { return g->arena.v + g->str_off.v[i]; }

/* ---------------------------------------------------------------- reading the map */

typedef struct cursor {
  tg_gguf *g;
  size_t pos;
  const char *what; /* what is being read, for messages */
} cursor;

static int gerr(const tg_gguf *g, int status, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int gerr(const tg_gguf *g, int status, const char *fmt, ...) {
  char msg[600];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  return tg_set_error(status, "gguf_open: %s: %s", g->path, msg);
}

static uint64_t le(const unsigned char *p, int n) {
  uint64_t v = 0;
  for (int i = n - 1; i >= 0; i--) v = v << 8 | p[i];
  return v;
}

static size_t left(const cursor *c) { return c->g->size - c->pos; }

static int need(cursor *c, uint64_t n) {
  if (n <= left(c)) return 0;
  return gerr(c->g, TG_ERR_IO, "truncated: %s at byte %zu needs %llu bytes, the file has %zu left", c->what, c->pos,
              (unsigned long long)n, left(c));
}

static int read_u32(cursor *c, uint32_t *v) {
  int rc = need(c, 4);
  if (rc == 0) *v = (uint32_t)le(c->g->map + c->pos, 4), c->pos += 4;
  return rc;
}

static int read_u64(cursor *c, uint64_t *v) {
  int rc = need(c, 8);
  if (rc == 0) *v = le(c->g->map + c->pos, 8), c->pos += 8;
  return rc;
}

/* A string copied to the arena; *index is its string index. */
static int read_string(cursor *c, size_t *index) {
  uint64_t n;
  int rc = read_u64(c, &n);
  if (rc == 0) rc = need(c, n);
  if (rc < 0) return rc;
  size_t at = c->g->arena.n;
  if (vec_grow((void **)&c->g->arena.v, &c->g->arena.cap, at + (size_t)n + 1, 1) < 0 || VEC_PUSH(c->g->str_off, at) < 0 ||
      VEC_PUSH(c->g->str_len, n) < 0)
    return gerr(c->g, TG_ERR_NOMEM, "out of memory");
  memcpy(c->g->arena.v + at, c->g->map + c->pos, (size_t)n);
  c->g->arena.v[at + n] = 0;
  c->g->arena.n = at + (size_t)n + 1;
  c->pos += (size_t)n;
  *index = c->g->str_off.n - 1;
  return 0;
}

/* ---------------------------------------------------------------- metadata */

/* count values of a type at the cursor: numbers are skipped (read later), strings copied. */
static int read_values(cursor *c, gguf_kv *kv, uint32_t type, uint64_t count) {
  const char *key = gstr(c->g, kv->key);
  if (type >= NVALUE_TYPES) return gerr(c->g, TG_ERR_IO, "key \"%.100s\": unknown value type %u", key, type);
  if (type == TG_GGUF_ARRAY) return gerr(c->g, TG_ERR_IO, "key \"%.100s\": arrays of arrays are not supported", key);
  int size = value_types[type].size;
  uint64_t min = size ? (uint64_t)size : 8; /* a string is at least its length */
  if (count > left(c) / min)
    return gerr(c->g, TG_ERR_IO, "key \"%.100s\": %llu values of type %s are more than the %zu bytes left can hold", key,
                (unsigned long long)count, value_types[type].name, left(c));
  kv->pos = c->pos, kv->str = c->g->str_off.n;
  if (size) return c->pos += (size_t)(count * min), 0;
  for (uint64_t i = 0; i < count; i++) {
    size_t s;
    int rc = read_string(c, &s);
    if (rc < 0) return rc;
  }
  return 0;
}

static int read_kv(cursor *c) {
  gguf_kv kv = {.count = 1};
  uint32_t type = 0, elem = 0;
  uint64_t count = 1;
  c->what = "a metadata key";
  int rc = read_string(c, &kv.key);
  c->what = "a metadata value";
  if (rc == 0) rc = read_u32(c, &type);
  if (rc == 0 && type == TG_GGUF_ARRAY && (rc = read_u32(c, &elem)) == 0 && (rc = read_u64(c, &count)) == 0)
    kv.elem = elem, kv.count = (int64_t)(count & INT64_MAX);
  kv.type = type;
  if (rc == 0) rc = read_values(c, &kv, type == TG_GGUF_ARRAY ? elem : type, count);
  if (rc == 0 && VEC_PUSH(c->g->kvs, kv) < 0) rc = gerr(c->g, TG_ERR_NOMEM, "out of memory");
  return rc;
}

static int64_t find_key(const tg_gguf *g, const char *key, size_t upto) {
  for (size_t i = 0; i < upto; i++)
    if (!strcmp(gstr(g, g->kvs.v[i].key), key)) return (int64_t)i;
  return -1;
}

/* Distinct keys (a sort of indices by key), and general.alignment a uint32 power of two. */
static int compare_keys(const void *a, const void *b, void *g) {
  const tg_gguf *gg = g;
  return strcmp(gstr(gg, gg->kvs.v[*(const size_t *)a].key), gstr(gg, gg->kvs.v[*(const size_t *)b].key));
}

/* Whether two of n entries compare equal (a sort of their indices by cmp): 1 with one of them
 * in *dup, 0 when none does, or a negative status. */
static int find_duplicate(tg_gguf *g, size_t n, int (*cmp)(const void *, const void *, void *), size_t *dup) {
  size_t *order = malloc(sizeof *order * (n ? n : 1));
  if (!order) return gerr(g, TG_ERR_NOMEM, "out of memory");
  for (size_t i = 0; i < n; i++) order[i] = i;
  qsort_r(order, n, sizeof *order, cmp, g);
  int found = 0;
  for (size_t i = 1; i < n && !found; i++)
    if (!cmp(&order[i - 1], &order[i], g)) found = 1, *dup = order[i];
  free(order);
  return found;
}

static int check_keys(tg_gguf *g, uint32_t *alignment) {
  size_t n = g->kvs.n, dup = 0;
  int rc = find_duplicate(g, n, compare_keys, &dup);
  if (rc > 0) rc = gerr(g, TG_ERR_IO, "duplicate key \"%.100s\"", gstr(g, g->kvs.v[dup].key));
  int64_t a = find_key(g, "general.alignment", n);
  *alignment = GGUF_DEFAULT_ALIGNMENT;
  if (rc == 0 && a >= 0) {
    const gguf_kv *kv = &g->kvs.v[a];
    uint32_t v = kv->type == TG_GGUF_UINT32 ? (uint32_t)le(g->map + kv->pos, 4) : 0;
    if (!v || (v & (v - 1))) return gerr(g, TG_ERR_IO, "general.alignment must be a uint32 power of two");
    *alignment = v;
  }
  return rc;
}

/* ---------------------------------------------------------------- tensor table */

static int read_tensor_info(cursor *c) {
  tg_gguf *g = c->g;
  gguf_tensor t = {0};
  uint32_t ndim, type;
  uint64_t dims[GGUF_MAX_DIMS], offset;
  c->what = "a tensor name";
  int rc = read_string(c, &t.name);
  c->what = "a tensor's dims";
  if (rc == 0) rc = read_u32(c, &ndim);
  if (rc < 0) return rc;
  const char *name = gstr(g, t.name);
  if (ndim < 1 || ndim > GGUF_MAX_DIMS) return gerr(g, TG_ERR_IO, "tensor \"%.100s\": %u dims (1 to %d are allowed)", name, ndim, GGUF_MAX_DIMS);
  for (uint32_t i = 0; i < ndim && rc == 0; i++) rc = read_u64(c, &dims[i]);
  c->what = "a tensor's type and offset";
  if (rc == 0) rc = read_u32(c, &type);
  if (rc == 0) rc = read_u64(c, &offset);
  if (rc < 0) return rc;
  if (!(t.type = ggml_type(type))) return gerr(g, TG_ERR_IO, "tensor \"%.100s\": unknown type %u", name, type);
  t.ndim = (int)ndim, t.numel = 1;
  for (uint32_t i = 0; i < ndim; i++) {
    if (dims[i] > INT64_MAX || !ck_mul(t.numel, (int64_t)dims[i], &t.numel))
      return gerr(g, TG_ERR_IO, "tensor \"%.100s\": dims with more than 2^63 elements", name);
    t.shape[ndim - 1 - i] = (int64_t)dims[i];
  }
  if (dims[0] % (uint64_t)t.type->block)
    return gerr(g, TG_ERR_IO, "tensor \"%.100s\": %s rows of %llu elements are not whole blocks of %d", name, t.type->name,
                (unsigned long long)dims[0], t.type->block);
  if (!ck_mul(t.numel / t.type->block, t.type->size, &t.nbytes) || offset > INT64_MAX)
    return gerr(g, TG_ERR_IO, "tensor \"%.100s\": too large", name);
  t.offset = (int64_t)offset;
  if (VEC_PUSH(g->tensors, t) < 0) return gerr(g, TG_ERR_NOMEM, "out of memory");
  return 0;
}

static int compare_tensor_names(const void *a, const void *b, void *g) {
  const tg_gguf *gg = g;
  return strcmp(gstr(gg, gg->tensors.v[*(const size_t *)a].name), gstr(gg, gg->tensors.v[*(const size_t *)b].name));
}

/* Names distinct (a sort of indices by name). */
static int check_tensor_names(tg_gguf *g) {
  size_t dup = 0;
  int rc = find_duplicate(g, g->tensors.n, compare_tensor_names, &dup);
  if (rc > 0) rc = gerr(g, TG_ERR_IO, "duplicate tensor name \"%.100s\"", gstr(g, g->tensors.v[dup].name));
  return rc;
}

/* Each tensor at the aligned offset right after the previous one, inside the file. */
static int check_tensors(tg_gguf *g, uint32_t alignment) {
  int64_t expect = 0;
  int rc = check_tensor_names(g);
  for (size_t i = 0; i < g->tensors.n && rc == 0; i++) {
    const gguf_tensor *t = &g->tensors.v[i];
    const char *name = gstr(g, t->name);
    if (t->offset != expect)
      return gerr(g, TG_ERR_IO, "tensor \"%.100s\": offset %lld, expected %lld (tensors follow each other, aligned to %u)", name,
                  (long long)t->offset, (long long)expect, alignment);
    int64_t end;
    if (!ck_add(g->data_start, t->offset, &end) || !ck_add(end, t->nbytes, &end) || end > (int64_t)g->size)
      return gerr(g, TG_ERR_IO, "tensor \"%.100s\": data of %lld bytes at offset %lld is past the end of the %zu-byte file", name,
                  (long long)t->nbytes, (long long)t->offset, g->size);
    expect = (t->offset + t->nbytes + alignment - 1) / alignment * alignment;
  }
  return rc;
}

/* ---------------------------------------------------------------- opening */

static int map_file(tg_gguf *g) {
  int fd = open(g->path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return gerr(g, TG_ERR_IO, "cannot open: %s", strerror(errno));
  struct stat st;
  int rc = 0;
  if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) rc = gerr(g, TG_ERR_IO, "not a regular file");
  else if (st.st_size < 24) rc = gerr(g, TG_ERR_IO, "file of %lld bytes is too short for a GGUF header (24 bytes)", (long long)st.st_size);
  else if ((g->map = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0)) == MAP_FAILED)
    g->map = NULL, rc = gerr(g, TG_ERR_IO, "cannot map: %s", strerror(errno));
  else g->size = (size_t)st.st_size;
  close(fd);
  return rc;
}

static int parse(tg_gguf *g) {
  cursor c = {g, 8, "the header"};
  uint32_t magic = (uint32_t)le(g->map, 4), alignment = GGUF_DEFAULT_ALIGNMENT;
  uint64_t ntensors, nkv;
  if (magic != GGUF_MAGIC) return gerr(g, TG_ERR_IO, "bad magic 0x%08x: not a GGUF file", magic);
  g->version = (int)le(g->map + 4, 4);
  if (g->version != 2 && g->version != 3)
    return gerr(g, TG_ERR_IO, "GGUF version %u is not supported (2 and 3 are)", (uint32_t)le(g->map + 4, 4));
  int rc = read_u64(&c, &ntensors);
  if (rc == 0) rc = read_u64(&c, &nkv);
  if (rc < 0) return rc;
  if (nkv > left(&c) / 13) /* key length 8 + type 4 + a 1-byte value */
    return gerr(g, TG_ERR_IO, "%llu metadata pairs are more than the %zu bytes left can hold", (unsigned long long)nkv, left(&c));
  for (uint64_t i = 0; i < nkv && rc == 0; i++) rc = read_kv(&c);
  if (rc == 0) rc = check_keys(g, &alignment);
  if (rc == 0 && ntensors > left(&c) / 32) /* name length 8 + dims count 4 + one dim 8 + type 4 + offset 8 */
    return gerr(g, TG_ERR_IO, "%llu tensors are more than the %zu bytes left can hold", (unsigned long long)ntensors, left(&c));
  for (uint64_t i = 0; i < ntensors && rc == 0; i++) rc = read_tensor_info(&c);
  if (rc < 0) return rc;
  g->data_start = (int64_t)((c.pos + alignment - 1) / alignment * alignment);
  return check_tensors(g, alignment);
}

tg_gguf *tg_gguf_open(const char *path) {
  if (!path) return tg_set_error(TG_ERR_ARG, "gguf_open: NULL path"), NULL;
  tg_gguf *g = calloc(1, sizeof *g);
  if (!g || !(g->path = strdup(path))) {
    free(g);
    return tg_set_error(TG_ERR_NOMEM, "gguf_open: out of memory"), NULL;
  }
  int rc = map_file(g);
  if (rc == 0) rc = parse(g);
  if (rc < 0) tg_gguf_close(g), g = NULL;
  return g;
}

void tg_gguf_close(tg_gguf *g) {
  if (!g) return;
  if (g->map) munmap((void *)g->map, g->size);
  VEC_FREE(g->kvs), VEC_FREE(g->tensors), VEC_FREE(g->arena), VEC_FREE(g->str_off), VEC_FREE(g->str_len);
  free(g->path);
  free(g);
}

int tg_gguf_version(const tg_gguf *g) { return g ? g->version : -1; }
int64_t tg_gguf_kv_count(const tg_gguf *g) { return g ? (int64_t)g->kvs.n : -1; }
int64_t tg_gguf_tensor_count(const tg_gguf *g) { return g ? (int64_t)g->tensors.n : -1; }

const char *tg_gguf_kv_key(const tg_gguf *g, int64_t i) {
  return g && i >= 0 && (size_t)i < g->kvs.n ? gstr(g, g->kvs.v[i].key) : NULL;
}

int64_t tg_gguf_find_key(const tg_gguf *g, const char *key) { return g && key ? find_key(g, key, g->kvs.n) : -1; }

/* ---------------------------------------------------------------- metadata values */

/* The pair called key, or NULL with an error. */
static const gguf_kv *get_kv(const tg_gguf *g, const char *op, const char *key) {
  if (!g || !key) return tg_set_error(TG_ERR_ARG, "%s: NULL argument", op), NULL;
  int64_t i = find_key(g, key, g->kvs.n);
  if (i < 0) return tg_set_error(TG_ERR_ARG, "%s: %s: no key \"%.100s\"", op, g->path, key), NULL;
  return &g->kvs.v[i];
}

int tg_gguf_kv_type(const tg_gguf *g, const char *key, tg_gguf_type *elem_type, int64_t *count) {
  const gguf_kv *kv = get_kv(g, "gguf_kv_type", key);
  if (!kv) return tg_error_status_or(TG_ERR_ARG);
  if (elem_type) *elem_type = (tg_gguf_type)(kv->type == TG_GGUF_ARRAY ? kv->elem : kv->type);
  if (count) *count = kv->count;
  return (int)kv->type;
}

/* Element i (0 for a scalar) of the number kv as int64 or double. */
static int get_number(const tg_gguf *g, const char *op, const char *key, int64_t i, bool want_array, int64_t *iv, double *fv) {
  const gguf_kv *kv = get_kv(g, op, key);
  if (!kv) return tg_error_status_or(TG_ERR_ARG);
  uint32_t t = kv->type == TG_GGUF_ARRAY ? kv->elem : kv->type;
  if ((kv->type == TG_GGUF_ARRAY) != want_array || i < 0 || i >= kv->count)
    return tg_set_error(TG_ERR_ARG, "%s: \"%.100s\" is %s%s, not %s (index %lld)", op, key, kv->type == TG_GGUF_ARRAY ? "an array of " : "",
                        value_types[t].name, want_array ? "an array" : "a single value", (long long)i);
  bool is_float = t == TG_GGUF_FLOAT32 || t == TG_GGUF_FLOAT64;
  if (t == TG_GGUF_STRING || (is_float && !fv))
    return tg_set_error(TG_ERR_ARG, "%s: \"%.100s\" holds %s values", op, key, value_types[t].name);
  int size = value_types[t].size;
  uint64_t bits = le(g->map + kv->pos + (size_t)i * (size_t)size, size);
  static const uint32_t is_signed = 1u << TG_GGUF_INT8 | 1u << TG_GGUF_INT16 | 1u << TG_GGUF_INT32 | 1u << TG_GGUF_INT64;
  if (t == TG_GGUF_FLOAT32) { float f; uint32_t b = (uint32_t)bits; memcpy(&f, &b, 4); *fv = f; return 0; }
  if (t == TG_GGUF_FLOAT64) { memcpy(fv, &bits, 8); return 0; }
  if (t == TG_GGUF_UINT64 && bits > INT64_MAX && iv) return tg_set_error(TG_ERR_ARG, "%s: \"%.100s\" = %llu does not fit in int64", op, key, (unsigned long long)bits);
  int64_t v = (int64_t)bits;
  if ((is_signed >> t & 1) && size < 8 && (bits >> (8 * size - 1) & 1)) v -= (int64_t)1 << (8 * size); /* sign-extend */
  if (iv) *iv = v;
  else *fv = t == TG_GGUF_UINT64 ? (double)bits : (double)v;
  return 0;
}

int tg_gguf_get_int(const tg_gguf *g, const char *key, int64_t *out) {
  if (!out) return tg_set_error(TG_ERR_ARG, "gguf_get_int: NULL out");
  return get_number(g, "gguf_get_int", key, 0, false, out, NULL);
}

int tg_gguf_get_float(const tg_gguf *g, const char *key, double *out) {
  if (!out) return tg_set_error(TG_ERR_ARG, "gguf_get_float: NULL out");
  return get_number(g, "gguf_get_float", key, 0, false, NULL, out);
}

int tg_gguf_get_array_int(const tg_gguf *g, const char *key, int64_t i, int64_t *out) {
  if (!out) return tg_set_error(TG_ERR_ARG, "gguf_get_array_int: NULL out");
  return get_number(g, "gguf_get_array_int", key, i, true, out, NULL);
}

int tg_gguf_get_array_float(const tg_gguf *g, const char *key, int64_t i, double *out) {
  if (!out) return tg_set_error(TG_ERR_ARG, "gguf_get_array_float: NULL out");
  return get_number(g, "gguf_get_array_float", key, i, true, NULL, out);
}

static const char *get_string(const tg_gguf *g, const char *op, const char *key, int64_t i, bool want_array, size_t *len) {
  const gguf_kv *kv = get_kv(g, op, key);
  if (!kv) return NULL;
  uint32_t t = kv->type == TG_GGUF_ARRAY ? kv->elem : kv->type;
  if (t != TG_GGUF_STRING || (kv->type == TG_GGUF_ARRAY) != want_array || i < 0 || i >= kv->count)
    return tg_set_error(TG_ERR_ARG, "%s: \"%.100s\" is %s%s, not %s (index %lld)", op, key, kv->type == TG_GGUF_ARRAY ? "an array of " : "",
                        value_types[t].name, want_array ? "an array of strings" : "a string", (long long)i), NULL;
  if (len) *len = (size_t)g->str_len.v[kv->str + (size_t)i];
  return gstr(g, kv->str + (size_t)i);
}

const char *tg_gguf_get_string(const tg_gguf *g, const char *key, size_t *len) {
  return get_string(g, "gguf_get_string", key, 0, false, len);
}

const char *tg_gguf_get_array_string(const tg_gguf *g, const char *key, int64_t i, size_t *len) {
  return get_string(g, "gguf_get_array_string", key, i, true, len);
}

/* ---------------------------------------------------------------- tensor table queries */

int64_t tg_gguf_find_tensor(const tg_gguf *g, const char *name) {
  for (size_t i = 0; g && name && i < g->tensors.n; i++)
    if (!strcmp(gstr(g, g->tensors.v[i].name), name)) return (int64_t)i;
  return -1;
}

int tg_gguf_tensor_info_at(const tg_gguf *g, int64_t i, tg_gguf_tensor_info *info) {
  if (!g || !info) return tg_set_error(TG_ERR_ARG, "gguf_tensor_info: NULL argument");
  if (i < 0 || (size_t)i >= g->tensors.n)
    return tg_set_error(TG_ERR_ARG, "gguf_tensor_info: index %lld is out of range (the file has %zu tensors)", (long long)i, g->tensors.n);
  const gguf_tensor *t = &g->tensors.v[i];
  *info = (tg_gguf_tensor_info){gstr(g, t->name), t->type->id, t->type->name, t->ndim, {0}, g->data_start + t->offset, t->nbytes};
  memcpy(info->shape, t->shape, sizeof t->shape);
  return 0;
}

/* ---------------------------------------------------------------- dequantization as tensor ops
 * The blocks are read as bytes, w (nb, block bytes) uint8: a run of 8-bit values is a plain
 * slice (contiguous loads along the value axis, no shifts), a float16 scale two bytes.
 * Words that a whole block (or sub-block) uses are broadcast to every value *before* any op:
 * a per-block value computed once and then broadcast is an expanded node, which the scheduler
 * stores as a small array in a kernel of its own when it has six or more ops
 * (docs/architecture.md, fusion rule 3). Each function returns (nb, block elements) float32;
 * all run inside tg_gguf_tensor's scope. The consumer's reduction over a row is split back
 * into (blocks, values) by the scheduler (src/schedule/split_reduce.c). */

/* x op c for a literal constant c of x's dtype (folded into the kernel; shifts by an in-range
 * constant need none of tg_shl's guards). */
static tg_tensor *alu_k(uop_op op, tg_tensor *x, double c) {
  if (!x) return NULL;
  size_t mark = uop_pool_mark();
  tg_tensor *r = tensor_wrap(uop_alu(op, x->u, uconst_like(x->u, c, x->u->dtype)));
  uop_pool_release(mark);
  return r;
}

static tg_tensor *to_f32(tg_tensor *x) { return tg_cast(x, TG_FLOAT32); }
static tg_tensor *reshape2(tg_tensor *x, int64_t a, int64_t b) { return tg_reshape(x, (int64_t[]){a, b}, 2); }
static tg_tensor *reshape3(tg_tensor *x, int64_t a, int64_t b, int64_t c) { return tg_reshape(x, (int64_t[]){a, b, c}, 3); }

/* Columns [lo, hi) of x (nb, n). */
static tg_tensor *cols(tg_tensor *x, int64_t lo, int64_t hi) {
  int64_t s[2] = {0, lo}, e[2] = {tg_dim(x, 0), hi};
  return tg_shrink(x, s, e);
}

/* The float16 at byte `at` of every block (two bytes, low first), as float32, repeated rep
 * times: (nb, rep). The 16 bits reinterpreted as float16 and cast: the renderers convert with
 * the hardware's instruction where the device has one (device_caps.f16c: one vcvtph2ps per
 * block and row, hoisted out of the block's value loop by linearize.c), else in software, to
 * numpy's bits either way. The integer decode this replaced (the magnitude moved into a
 * float32 and scaled by 2^112, 11 ops and a select) took 0.18-0.21 ms against 0.15 for a
 * (2304, 768) Q8_0 matrix-vector product in cache (docs/performance.md). */
static tg_tensor *half_rep(tg_tensor *w, int64_t at, int64_t rep) {
  int64_t nb = tg_dim(w, 0);
  tg_tensor *lo = tg_cast(tg_expand(cols(w, at, at + 1), (int64_t[]){nb, rep}, 2), TG_UINT16);
  tg_tensor *hi = tg_cast(tg_expand(cols(w, at + 1, at + 2), (int64_t[]){nb, rep}, 2), TG_UINT16);
  return to_f32(tg_bitcast(tg_bitwise_or(lo, alu_k(OP_SHL, hi, 8)), TG_FLOAT16));
}

/* x >> s elementwise, s broadcast to x's shape (counts known to be in range: no guards). */
static tg_tensor *shr_by(tg_tensor *x, tg_tensor *s) {
  int64_t shape[8];
  int nd = tg_shape(x, shape, 8);
  tg_tensor *se = tg_expand(s, shape, nd);
  if (!x || !se) return NULL;
  size_t mark = uop_pool_mark();
  tg_tensor *r = tensor_wrap(uop_alu(OP_SHR, x->u, se->u));
  uop_pool_release(mark);
  return r;
}

/* The shift of each of n fields of `bits` bits, 0, bits, 2 bits, ..., as a (1, 1, n, 1) index
 * expression of dtype dt (an arange: no buffer, folded to constants once the axis is unrolled). */
static tg_tensor *field_shifts(int n, int bits, tg_dtype dt) {
  return tg_reshape(tg_arange(0, n * bits, bits, dt), (int64_t[]){1, 1, n, 1}, 4);
}

/* Bit fields of bytes x (nb, groups * len), `bits` wide, lowest first, each field a run of
 * len values: (nb, groups * (8 / bits) * len) uint8 (gguf.quants' `>> [0, 4]`, `>> [0, 2, 4, 6]`). */
static tg_tensor *fields(tg_tensor *x, int64_t groups, int64_t len, int bits) {
  int64_t nb = tg_dim(x, 0), n = 8 / bits;
  tg_tensor *g = tg_expand(tg_reshape(x, (int64_t[]){nb, groups, 1, len}, 4), (int64_t[]){nb, groups, n, len}, 4);
  return reshape2(alu_k(OP_AND, shr_by(g, field_shifts((int)n, bits, TG_UINT8)), (1 << bits) - 1), nb, groups * n * len);
}

/* Bytes [lo, hi) of every block, each repeated rep times: (nb, hi - lo, rep) uint8. The
 * bytes are broadcast before any op, so every op on a per-block scale runs per value inside
 * the consuming kernel: an expanded node of six or more ops would be stored as a small array
 * first (fusion rule 3), a second kernel and more bytes to read. */
static tg_tensor *bytes_rep(tg_tensor *w, int64_t lo, int64_t hi, int64_t rep) {
  int64_t nb = tg_dim(w, 0);
  return tg_expand(reshape3(cols(w, lo, hi), nb, hi - lo, 1), (int64_t[]){nb, hi - lo, rep}, 3);
}

static tg_tensor *bytes(tg_tensor *w, int64_t lo, int64_t hi) { return cols(w, lo, hi); }

/* Q8_0: d f16, q[32] int8; x = q * d. */
static tg_tensor *dq_q8_0(tg_tensor *w, int64_t nb) {
  (void)nb;
  return tg_mul(to_f32(tg_bitcast(bytes(w, 2, 34), TG_INT8)), half_rep(w, 0, 32));
}

/* Q4_0: d f16, qs[16] (low nibbles: values 0-15, high: 16-31); x = d * (q - 8). */
static tg_tensor *dq_q4_0(tg_tensor *w, int64_t nb) {
  (void)nb;
  return tg_mul(half_rep(w, 0, 32), alu_k(OP_SUB, to_f32(fields(bytes(w, 2, 18), 1, 16, 4)), 8));
}

/* Q4_1: d f16, m f16, qs[16]; x = d * q + m. */
static tg_tensor *dq_q4_1(tg_tensor *w, int64_t nb) {
  (void)nb;
  return tg_add(tg_mul(half_rep(w, 0, 32), to_f32(fields(bytes(w, 4, 20), 1, 16, 4))), half_rep(w, 2, 32));
}

/* Q4_K: d f16, dmin f16, 12 bytes a[4] b[4] c[4] of eight 6-bit scales and mins, qs[128]
 * (four runs of 32 bytes: low nibbles are sub-block 2i, high 2i + 1);
 * x = (d * sc) * q - dmin * m, with sc, m = a & 63, b & 63 for sub-blocks 0-3 and
 * (c & 15) | (a >> 6) << 4, c >> 4 | (b >> 6) << 4 for 4-7. */
static tg_tensor *dq_q4_k(tg_tensor *w, int64_t nb) {
  tg_tensor *a = bytes_rep(w, 4, 8, 32), *b = bytes_rep(w, 8, 12, 32), *c = bytes_rep(w, 12, 16, 32); /* (nb, 4, 32) */
  tg_tensor *sc_hi = tg_bitwise_or(alu_k(OP_AND, c, 15), alu_k(OP_SHL, alu_k(OP_SHR, a, 6), 4));
  tg_tensor *mn_hi = tg_bitwise_or(alu_k(OP_SHR, c, 4), alu_k(OP_SHL, alu_k(OP_SHR, b, 6), 4));
  tg_tensor *sc = tg_cat((tg_tensor *[]){alu_k(OP_AND, a, 63), sc_hi}, 2, 1); /* (nb, 8, 32) */
  tg_tensor *mn = tg_cat((tg_tensor *[]){alu_k(OP_AND, b, 63), mn_hi}, 2, 1);
  tg_tensor *scale = tg_mul(reshape3(half_rep(w, 0, 256), nb, 8, 32), to_f32(sc));
  tg_tensor *min = tg_mul(reshape3(half_rep(w, 2, 256), nb, 8, 32), to_f32(mn));
  tg_tensor *q = reshape3(to_f32(fields(bytes(w, 16, 144), 4, 32, 4)), nb, 8, 32);
  return reshape2(tg_sub(tg_mul(scale, q), min), nb, 256);
}

/* Q6_K: ql[128] (low 4 bits), qh[64] (high 2 bits), scales[16] int8, d f16;
 * x = (d * scale) * ((ql | qh << 4) - 32), sixteen values per scale. */
static tg_tensor *dq_q6_k(tg_tensor *w, int64_t nb) {
  tg_tensor *ql = fields(bytes(w, 0, 128), 2, 64, 4), *qh = fields(bytes(w, 128, 192), 2, 32, 2);
  tg_tensor *q = reshape3(alu_k(OP_SUB, to_f32(tg_bitwise_or(ql, alu_k(OP_SHL, qh, 4))), 32), nb, 16, 16);
  tg_tensor *scale = tg_mul(reshape3(half_rep(w, 208, 256), nb, 16, 16), to_f32(tg_bitcast(bytes_rep(w, 192, 208, 16), TG_INT8)));
  return reshape2(tg_mul(scale, q), nb, 256);
}

/* ---------------------------------------------------------------- loading a tensor */

/* A tensor holding nbytes of little-endian data of dtype dt. */
static tg_tensor *host_tensor(const unsigned char *data, tg_dtype dt, const int64_t *shape, int ndim, int64_t nbytes) {
  size_t size = tg_dtype_size(dt);
  if (io_host_is_little_endian() || size == 1) return tg_from_data(data, dt, shape, ndim);
  void *copy = malloc(nbytes ? (size_t)nbytes : 1);
  if (!copy) return tg_set_error(TG_ERR_NOMEM, "gguf_tensor: out of memory"), NULL;
  memcpy(copy, data, (size_t)nbytes);
  io_swap_bytes(copy, (size_t)nbytes / size, size);
  tg_tensor *r = tg_from_data(copy, dt, shape, ndim);
  free(copy);
  return r;
}

tg_tensor *tg_gguf_tensor(tg_gguf *g, const char *name) {
  if (!g || !name) return tg_set_error(TG_ERR_ARG, "gguf_tensor: NULL argument"), NULL;
  int64_t i = tg_gguf_find_tensor(g, name);
  if (i < 0) return tg_set_error(TG_ERR_ARG, "gguf_tensor: %s: no tensor \"%.100s\"", g->path, name), NULL;
  const gguf_tensor *t = &g->tensors.v[i];
  const ggml_type_info *ty = t->type;
  const unsigned char *data = g->map + g->data_start + t->offset;
  if (ty->dtype != TG_DTYPE_COUNT) return host_tensor(data, ty->dtype, t->shape, t->ndim, t->nbytes);
  if (!ty->dequant)
    return tg_set_error(TG_ERR_ARG, "gguf_tensor: %s: tensor \"%.100s\" has type %s, which tg does not load "
                        "(F32, F16, BF16, F64, I8-I64, Q8_0, Q4_0, Q4_1, Q4_K and Q6_K are loaded)", g->path, name, ty->name), NULL;
  int64_t nb = t->numel / ty->block;
  tg_scope *s = tg_scope_begin();
  tg_tensor *raw = host_tensor(data, TG_UINT8, (int64_t[]){nb, ty->size}, 2, t->nbytes);
  tg_tensor *r = tg_keep(tg_reshape(ty->dequant(raw, nb), t->shape, t->ndim));
  tg_scope_end(s);
  return r;
}
