/* safetensors.c — model files in the safetensors format (huggingface/safetensors):
 *
 *   [N: u64 little-endian][N bytes: JSON header][data section: raw little-endian tensors]
 *
 * The header maps each tensor name to {"dtype": "F32", "shape": [2, 3], "data_offsets":
 * [begin, end]} (byte offsets into the data section) and may hold "__metadata__", an object
 * of strings (read and ignored). Reading is strict, like the reference implementation: the
 * header is at most 100 MB of JSON (io.h's reader); sorted by offset, the tensors' byte
 * ranges must tile the data section exactly (no gap, no overlap, nothing after the last),
 * each exactly numel × dtype size. Writing gives the reference's bytes: tensors ordered by
 * dtype alignment (largest first) then name, compact JSON with the keys in that order,
 * padded with spaces to a multiple of 8 so every tensor starts aligned.
 * See docs/io.md. */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "io/io.h"
#include "tensor/shape.h"
#include "tensor/tensor.h"

#define ST_MAX_HEADER 100000000 /* bytes, as the reference */

/* ---------------------------------------------------------------- dtypes */

/* File dtype names; `rank` is the reference's dtype order (alignment), used on write. */
typedef struct st_dtype {
  const char *name;
  tg_dtype dtype;
  int rank;
} st_dtype;

static const st_dtype st_dtypes[] = {
    {"BOOL", TG_BOOL, 0},     {"U8", TG_UINT8, 1},    {"I8", TG_INT8, 2},     {"I16", TG_INT16, 5},
    {"U16", TG_UINT16, 6},    {"F16", TG_FLOAT16, 7}, {"BF16", TG_BFLOAT16, 8}, {"I32", TG_INT32, 9},
    {"U32", TG_UINT32, 10},   {"F32", TG_FLOAT32, 11}, {"F64", TG_FLOAT64, 12}, {"I64", TG_INT64, 13},
    {"U64", TG_UINT64, 14},
};
#define ST_NDTYPES (sizeof st_dtypes / sizeof st_dtypes[0])

static const st_dtype *dtype_by_name(const char *name) {
  for (size_t i = 0; i < ST_NDTYPES; i++)
    if (!strcmp(st_dtypes[i].name, name)) return &st_dtypes[i];
  return NULL;
}

static const st_dtype *dtype_by_tg(tg_dtype dt) {
  for (size_t i = 0; i < ST_NDTYPES; i++)
    if (st_dtypes[i].dtype == dt) return &st_dtypes[i];
  return NULL;
}

/* ---------------------------------------------------------------- an open file */

typedef struct st_entry {
  const char *name;   /* decoded, inside st_file.header */
  tg_dtype dtype;
  int ndim;
  size_t dims;        /* index of the first axis in st_file.dims */
  int64_t begin, end; /* byte range in the data section */
  bool used;          /* matched by tg_safetensors_load */
} st_entry;

typedef struct st_file {
  const char *op, *path;
  FILE *f;
  char *header;
  int64_t data_start, data_size;
  VEC(st_entry) entries;   /* in data order once validated */
  VEC(int64_t) dims;
  const st_entry **by_name; /* sorted by name, for lookups */
} st_file;

/* "op: path: message" with the given status. */
static int st_error(const st_file *sf, int status, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int st_error(const st_file *sf, int status, const char *fmt, ...) {
  char msg[700];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  return tg_set_error(status, "%s: %s: %s", sf->op, sf->path, msg);
}

static void st_close(st_file *sf) {
  if (sf->f) fclose(sf->f);
  free(sf->header);
  free(sf->by_name);
  VEC_FREE(sf->entries);
  VEC_FREE(sf->dims);
  memset(sf, 0, sizeof *sf);
}

static const int64_t *entry_shape(const st_file *sf, const st_entry *e) { return e->ndim ? sf->dims.v + e->dims : NULL; }

static const char *entry_shape_str(const st_file *sf, const st_entry *e, char *buf, size_t cap) {
  return tg_fmt_shape(buf, cap, entry_shape(sf, e), e->ndim);
}

/* ---------------------------------------------------------------- header parsing */

enum { SEEN_DTYPE = 1, SEEN_SHAPE = 2, SEEN_OFFSETS = 4, SEEN_ALL = 7 };

static bool parse_dtype(st_file *sf, json_reader *r, st_entry *e) {
  (void)sf;
  const char *s = json_string(r);
  if (!s) return false;
  const st_dtype *d = dtype_by_name(s);
  if (!d) return json_fail(r, "tensor \"%.100s\": unknown dtype \"%.20s\"", e->name, s);
  e->dtype = d->dtype;
  return true;
}

static bool parse_shape(st_file *sf, json_reader *r, st_entry *e) {
  int64_t n = 0, dim;
  e->dims = sf->dims.n;
  if (!json_expect(r, '[')) return false;
  while (json_item(r, ']', &n)) {
    if (n > TG_MAX_DIMS) return json_fail(r, "tensor \"%.100s\": rank above %d", e->name, TG_MAX_DIMS);
    if (!json_int(r, &dim)) return false;
    if (VEC_PUSH(sf->dims, dim) < 0) return json_fail(r, "out of memory");
  }
  e->ndim = (int)n;
  return !json_failed(r);
}

static bool parse_offsets(st_file *sf, json_reader *r, st_entry *e) {
  (void)sf;
  int64_t n = 0, v[2] = {0, 0};
  if (!json_expect(r, '[')) return false;
  while (json_item(r, ']', &n))
    if (n > 2 || !json_int(r, &v[n - 1]))
      return json_fail(r, "tensor \"%.100s\": data_offsets must be [begin, end]", e->name);
  if (!json_failed(r) && n != 2) return json_fail(r, "tensor \"%.100s\": data_offsets must be [begin, end]", e->name);
  e->begin = v[0], e->end = v[1];
  return !json_failed(r);
}

/* The keys of a tensor's entry: each must appear exactly once. */
static const struct {
  const char *key;
  unsigned bit;
  bool (*parse)(st_file *, json_reader *, st_entry *);
} tensor_fields[] = {
    {"dtype", SEEN_DTYPE, parse_dtype},
    {"shape", SEEN_SHAPE, parse_shape},
    {"data_offsets", SEEN_OFFSETS, parse_offsets},
};

static bool parse_tensor(st_file *sf, json_reader *r, const char *name) {
  st_entry e = {.name = name, .dtype = TG_DTYPE_COUNT};
  unsigned seen = 0;
  int64_t n = 0;
  if (!json_expect(r, '{')) return false;
  while (json_item(r, '}', &n)) {
    const char *key = json_string(r);
    if (!key || !json_expect(r, ':')) return false;
    size_t f = 0, nf = sizeof tensor_fields / sizeof tensor_fields[0];
    while (f < nf && strcmp(tensor_fields[f].key, key)) f++;
    if (f == nf) return json_fail(r, "tensor \"%.100s\": unknown key \"%.40s\"", name, key);
    if (seen & tensor_fields[f].bit) return json_fail(r, "tensor \"%.100s\": duplicate key \"%s\"", name, key);
    seen |= tensor_fields[f].bit;
    if (!tensor_fields[f].parse(sf, r, &e)) return false;
  }
  if (json_failed(r)) return false;
  for (size_t f = 0; f < sizeof tensor_fields / sizeof tensor_fields[0]; f++)
    if (!(seen & tensor_fields[f].bit))
      return json_fail(r, "tensor \"%.100s\": missing \"%s\"", name, tensor_fields[f].key);
  if (VEC_PUSH(sf->entries, e) < 0) return json_fail(r, "out of memory");
  return true;
}

static int compare_strings(const void *a, const void *b) {
  return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* "__metadata__": an object of string values with distinct keys. */
static bool parse_metadata(json_reader *r) {
  VEC(const char *) keys = {0};
  int64_t n = 0;
  bool ok = json_expect(r, '{');
  while (ok && json_item(r, '}', &n)) {
    const char *key = json_string(r);
    ok = key && json_expect(r, ':') && json_string(r) && VEC_PUSH(keys, key) == 0;
  }
  ok = !json_failed(r) && keys.n == (size_t)n;
  if (!ok && !json_failed(r)) json_fail(r, "out of memory");
  if (ok && keys.n > 1) qsort(keys.v, keys.n, sizeof *keys.v, compare_strings);
  for (size_t i = 1; ok && i < keys.n; i++)
    if (!strcmp(keys.v[i - 1], keys.v[i])) ok = json_fail(r, "__metadata__: duplicate key \"%.100s\"", keys.v[i]);
  VEC_FREE(keys);
  return ok;
}

static int parse_header(st_file *sf, size_t len) {
  json_reader r;
  json_init(&r, sf->header, len);
  bool metadata_seen = false;
  int64_t n = 0;
  json_expect(&r, '{');
  while (json_item(&r, '}', &n)) {
    const char *key = json_string(&r);
    if (!key || !json_expect(&r, ':')) break;
    if (strcmp(key, "__metadata__")) {
      if (!parse_tensor(sf, &r, key)) break;
    } else if (metadata_seen) {
      json_fail(&r, "duplicate key \"__metadata__\"");
    } else {
      metadata_seen = true;
      parse_metadata(&r);
    }
  }
  json_finish(&r);
  return json_failed(&r) ? st_error(sf, TG_ERR_IO, "%s", r.err) : 0;
}

/* ---------------------------------------------------------------- layout checks */

static int compare_entry_names(const void *a, const void *b) {
  return strcmp((*(const st_entry *const *)a)->name, (*(const st_entry *const *)b)->name);
}

static int compare_entry_offsets(const void *a, const void *b) {
  const st_entry *x = a, *y = b;
  if (x->begin != y->begin) return x->begin < y->begin ? -1 : 1;
  return (x->end > y->end) - (x->end < y->end);
}

/* Bytes the entry's shape and dtype need; -1 if no tensor can have that shape (its extent,
 * zeros counted as 1, times the element size must fit in int64: tensor/shape.h). */
static int64_t entry_nbytes(const st_file *sf, const st_entry *e) {
  int64_t size = (int64_t)tg_dtype_size(e->dtype), extent = shape_extent(entry_shape(sf, e), e->ndim), bytes;
  if (extent < 0 || !ck_mul(extent, size, &bytes)) return -1;
  return shape_numel(entry_shape(sf, e), e->ndim) * size; /* <= extent * size */
}

static int check_entry(const st_file *sf, const st_entry *e) {
  char shape[256];
  int64_t need = entry_nbytes(sf, e);
  if (need < 0) return st_error(sf, TG_ERR_IO, "tensor \"%.100s\": shape %s is too large", e->name, entry_shape_str(sf, e, shape, sizeof shape));
  if (e->end < e->begin)
    return st_error(sf, TG_ERR_IO, "tensor \"%.100s\": data_offsets [%lld, %lld] end before they begin", e->name, (long long)e->begin, (long long)e->end);
  if (e->end - e->begin != need)
    return st_error(sf, TG_ERR_IO, "tensor \"%.100s\": data_offsets [%lld, %lld] hold %lld bytes, but shape %s of %s needs %lld",
                    e->name, (long long)e->begin, (long long)e->end, (long long)(e->end - e->begin),
                    entry_shape_str(sf, e, shape, sizeof shape), dtype_by_tg(e->dtype)->name, (long long)need);
  if (e->end > sf->data_size)
    return st_error(sf, TG_ERR_IO, "tensor \"%.100s\": data_offsets [%lld, %lld] are past the end of the %lld-byte data section",
                    e->name, (long long)e->begin, (long long)e->end, (long long)sf->data_size);
  return 0;
}

/* Distinct names (JSON keys), each range consistent, the ranges tiling the data section. */
static int check_layout(st_file *sf) {
  size_t n = sf->entries.n;
  sf->by_name = malloc(sizeof *sf->by_name * (n ? n : 1));
  if (!sf->by_name) return st_error(sf, TG_ERR_NOMEM, "out of memory");
  if (n) qsort(sf->entries.v, n, sizeof *sf->entries.v, compare_entry_offsets);
  for (size_t i = 0; i < n; i++) sf->by_name[i] = &sf->entries.v[i];
  if (n) qsort(sf->by_name, n, sizeof *sf->by_name, compare_entry_names);
  for (size_t i = 1; i < n; i++)
    if (!strcmp(sf->by_name[i - 1]->name, sf->by_name[i]->name))
      return st_error(sf, TG_ERR_IO, "duplicate tensor name \"%.100s\"", sf->by_name[i]->name);
  int64_t covered = 0;
  for (size_t i = 0; i < n; i++) {
    const st_entry *e = &sf->entries.v[i];
    int rc = check_entry(sf, e);
    if (rc < 0) return rc;
    if (e->begin != covered)
      return st_error(sf, TG_ERR_IO, "tensor \"%.100s\": data_offsets [%lld, %lld] %s the previous tensor's end at %lld",
                      e->name, (long long)e->begin, (long long)e->end, e->begin < covered ? "overlap" : "leave a gap after",
                      (long long)covered);
    covered = e->end;
  }
  if (covered != sf->data_size)
    return st_error(sf, TG_ERR_IO, "the tensors cover %lld bytes but the data section has %lld", (long long)covered,
                    (long long)sf->data_size);
  return 0;
}

/* ---------------------------------------------------------------- opening */

static int read_exact(st_file *sf, void *dst, size_t n, const char *what) {
  if (n && fread(dst, 1, n, sf->f) != n)
    return st_error(sf, TG_ERR_IO, "cannot read the %s: %s", what, ferror(sf->f) ? strerror(errno) : "unexpected end of file");
  return 0;
}

/* Open path and validate everything about it: header, names, dtypes, shapes, offsets. */
static int st_open(st_file *sf, const char *op, const char *path) {
  memset(sf, 0, sizeof *sf);
  sf->op = op, sf->path = path;
  if (!path) return tg_set_error(TG_ERR_ARG, "%s: NULL path", op);
  struct stat st;
  if (!(sf->f = fopen(path, "rb"))) return st_error(sf, TG_ERR_IO, "cannot open: %s", strerror(errno));
  if (fstat(fileno(sf->f), &st) < 0 || !S_ISREG(st.st_mode)) return st_error(sf, TG_ERR_IO, "not a regular file");
  int64_t size = (int64_t)st.st_size;
  unsigned char len8[8];
  if (size < 8) return st_error(sf, TG_ERR_IO, "file of %lld bytes is too short for the 8-byte header length", (long long)size);
  int rc = read_exact(sf, len8, 8, "header length");
  if (rc < 0) return rc;
  uint64_t n = io_read_le64(len8);
  if (n > ST_MAX_HEADER) return st_error(sf, TG_ERR_IO, "header length %llu is above the %d-byte limit", (unsigned long long)n, ST_MAX_HEADER);
  if (n > (uint64_t)size - 8)
    return st_error(sf, TG_ERR_IO, "header length %llu is past the end of the %lld-byte file", (unsigned long long)n, (long long)size);
  if (!(sf->header = malloc(n + 1))) return st_error(sf, TG_ERR_NOMEM, "out of memory for a %llu-byte header", (unsigned long long)n);
  if ((rc = read_exact(sf, sf->header, n, "header")) < 0) return rc;
  sf->data_start = 8 + (int64_t)n;
  sf->data_size = size - sf->data_start;
  if ((rc = parse_header(sf, n)) < 0) return rc;
  return check_layout(sf);
}

static const st_entry *find_entry(const st_file *sf, const char *name) {
  st_entry key = {.name = name};
  const st_entry *k = &key, **hit = sf->entries.n ? bsearch(&k, sf->by_name, sf->entries.n, sizeof *sf->by_name, compare_entry_names) : NULL;
  return hit ? *hit : NULL;
}

/* A new host tensor (current scope) with the entry's data in *out. */
static int read_tensor(st_file *sf, const st_entry *e, tg_tensor **out) {
  size_t nbytes = (size_t)(e->end - e->begin), size = tg_dtype_size(e->dtype);
  void *buf = malloc(nbytes ? nbytes : 1);
  if (!buf) return st_error(sf, TG_ERR_NOMEM, "out of memory for tensor \"%.100s\"", e->name);
  int rc = 0;
  if (fseeko(sf->f, (off_t)(sf->data_start + e->begin), SEEK_SET) < 0)
    rc = st_error(sf, TG_ERR_IO, "cannot seek: %s", strerror(errno));
  if (rc == 0) rc = read_exact(sf, buf, nbytes, "tensor data");
  if (rc == 0 && !io_host_is_little_endian()) io_swap_bytes(buf, nbytes / size, size);
  if (rc == 0 && !(*out = tg_from_data(buf, e->dtype, entry_shape(sf, e), e->ndim))) rc = tg_error_status_or(TG_ERR_NOMEM);
  free(buf);
  return rc;
}

/* Drop the entries added to sd after the first n (they were added by us). */
static void state_dict_truncate(tg_state_dict *sd, int n) {
  while (sd->n > n) {
    sd->n--;
    free(sd->names[sd->n]);
    tg_free(sd->tensors[sd->n]);
  }
}

static int find_name(const tg_state_dict *sd, const char *name) {
  for (int i = 0; i < sd->n; i++)
    if (sd->names[i] && !strcmp(sd->names[i], name)) return i;
  return -1;
}

/* ---------------------------------------------------------------- reading */

/* Entries with names and tensors (a struct built by hand may lack them). */
static int check_state_dict(const char *op, const tg_state_dict *sd) {
  if (!sd) return tg_set_error(TG_ERR_ARG, "%s: NULL state dict", op);
  if (sd->n < 0 || (sd->n > 0 && (!sd->names || !sd->tensors))) return tg_set_error(TG_ERR_ARG, "%s: corrupt state dict", op);
  for (int i = 0; i < sd->n; i++) {
    if (!sd->names[i]) return tg_set_error(TG_ERR_ARG, "%s: entry %d has a NULL name", op, i);
    if (!sd->tensors[i]) return tg_set_error(TG_ERR_ARG, "%s: tensor \"%.100s\" is NULL", op, sd->names[i]);
  }
  return 0;
}

/* Every name is new to `out` and one a state dict can hold. */
static int check_new_names(const st_file *sf, const tg_state_dict *out) {
  for (size_t i = 0; i < sf->entries.n; i++) {
    const char *name = sf->entries.v[i].name;
    if (!name[0]) return st_error(sf, TG_ERR_IO, "empty tensor name");
    if (find_name(out, name) >= 0) return st_error(sf, TG_ERR_ARG, "the state dict already has a tensor \"%.100s\"", name);
  }
  return 0;
}

int tg_safetensors_read(const char *path, tg_state_dict *out) {
  static const char op[] = "safetensors_read";
  int rc = check_state_dict(op, out);
  if (rc < 0) return rc;
  st_file sf;
  rc = st_open(&sf, op, path);
  if (rc == 0) rc = check_new_names(&sf, out);
  tg_scope *scope = tg_scope_begin();
  size_t n = rc == 0 ? sf.entries.n : 0;
  tg_tensor **ts = calloc(n ? n : 1, sizeof *ts);
  if (!ts && rc == 0) rc = st_error(&sf, TG_ERR_NOMEM, "out of memory");
  for (size_t i = 0; i < n && rc == 0; i++) rc = read_tensor(&sf, &sf.entries.v[i], &ts[i]);
  int before = out->n;
  for (size_t i = 0; i < n && rc == 0; i++) /* only out of memory can fail here: undo it */
    if ((rc = tg_state_dict_add(out, sf.entries.v[i].name, ts[i])) < 0) state_dict_truncate(out, before);
  free(ts);
  tg_scope_end(scope); /* the state dict holds its own references */
  st_close(&sf);
  return rc;
}

/* ---------------------------------------------------------------- loading */

/* Every tensor of sd is in the file with its shape and dtype, and nothing else is. */
static int match_state_dict(st_file *sf, const tg_state_dict *sd, const st_entry **match) {
  char a[256], b[256];
  for (int i = 0; i < sd->n; i++) {
    const char *name = sd->names[i];
    tg_tensor *t = sd->tensors[i];
    const st_entry *e = find_entry(sf, name);
    if (!e) return st_error(sf, TG_ERR_IO, "tensor \"%.100s\" of the state dict is not in the file", name);
    if (e->dtype != tg_get_dtype(t))
      return st_error(sf, TG_ERR_IO, "tensor \"%.100s\" is %s in the file but %s in the state dict", name,
                      tg_dtype_name(e->dtype), tg_dtype_name(tg_get_dtype(t)));
    int64_t shape[TG_MAX_DIMS];
    int nd = tg_shape(t, shape, TG_MAX_DIMS);
    if (nd != e->ndim || (nd && memcmp(shape, entry_shape(sf, e), sizeof(int64_t) * (size_t)nd)))
      return st_error(sf, TG_ERR_IO, "tensor \"%.100s\" has shape %s in the file but %s in the state dict", name,
                      entry_shape_str(sf, e, a, sizeof a), tg_fmt_shape(b, sizeof b, shape, nd));
    ((st_entry *)e)->used = true;
    match[i] = e;
  }
  for (size_t i = 0; i < sf->entries.n; i++)
    if (!sf->entries.v[i].used)
      return st_error(sf, TG_ERR_IO, "the file has a tensor \"%.100s\" that is not in the state dict", sf->entries.v[i].name);
  return 0;
}

int tg_safetensors_load(const char *path, tg_state_dict *sd) {
  static const char op[] = "safetensors_load";
  int rc = check_state_dict(op, sd);
  if (rc < 0) return rc;
  st_file sf;
  rc = st_open(&sf, op, path);
  size_t n = (size_t)sd->n;
  const st_entry **match = calloc(n ? n : 1, sizeof *match);
  tg_tensor **fresh = calloc(n ? n : 1, sizeof *fresh);
  if (rc == 0 && (!match || !fresh)) rc = st_error(&sf, TG_ERR_NOMEM, "out of memory");
  if (rc == 0) rc = match_state_dict(&sf, sd, match);
  tg_scope *scope = tg_scope_begin();
  for (size_t i = 0; i < n && rc == 0; i++) /* everything is read before anything changes */
    rc = read_tensor(&sf, match[i], &fresh[i]);
  for (size_t i = 0; i < n && rc == 0; i++) /* same shape and dtype: cannot fail */
    rc = tg_assign(sd->tensors[i], fresh[i]);
  tg_scope_end(scope);
  free(match), free(fresh);
  st_close(&sf);
  return rc;
}

/* ---------------------------------------------------------------- writing */

/* A growable byte string that remembers running out of memory. */
typedef struct bytes {
  char *p;
  size_t n, cap;
  bool oom;
} bytes;

static void put(bytes *b, const void *data, size_t n) {
  if (b->oom) return;
  if (b->n + n > b->cap && vec_grow((void **)&b->p, &b->cap, b->n + n, 1) < 0) {
    b->oom = true;
    return;
  }
  memcpy(b->p + b->n, data, n);
  b->n += n;
}

static void put_str(bytes *b, const char *s) { put(b, s, strlen(s)); }

static void put_int(bytes *b, long long v) {
  char num[24];
  put(b, num, (size_t)snprintf(num, sizeof num, "%lld", v));
}

/* A JSON string as serde_json and Python's json (ensure_ascii=False) write it. */
static void put_json_string(bytes *b, const char *s) {
  put(b, "\"", 1);
  for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
    static const char simple[] = "\"\\\b\f\n\r\t", letter[] = "\"\\bfnrt";
    const char *k = strchr(simple, *p);
    char esc[8];
    if (k) esc[0] = '\\', esc[1] = letter[k - simple], put(b, esc, 2);
    else if (*p < 0x20) put(b, esc, (size_t)snprintf(esc, sizeof esc, "\\u%04x", *p));
    else put(b, p, 1);
  }
  put(b, "\"", 1);
}

typedef struct save_item {
  const char *name;
  tg_tensor *t;
  const st_dtype *dt;
  int64_t nbytes;
} save_item;

/* The reference's order: larger dtype alignment first, then by name. */
static int compare_save_items(const void *a, const void *b) {
  const save_item *x = a, *y = b;
  if (x->dt->rank != y->dt->rank) return y->dt->rank - x->dt->rank;
  return strcmp(x->name, y->name);
}

static int compare_item_names(const void *a, const void *b) {
  return strcmp(((const save_item *)a)->name, ((const save_item *)b)->name);
}

/* Names usable as JSON keys and distinct; fills items (sorted for writing). */
static int prepare_items(const char *op, const tg_state_dict *sd, save_item *items) {
  for (int i = 0; i < sd->n; i++) {
    const char *name = sd->names[i];
    if (!io_utf8_valid(name, strlen(name))) return tg_set_error(TG_ERR_ARG, "%s: tensor name \"%.100s\" is not valid UTF-8", op, name);
    if (!strcmp(name, "__metadata__")) return tg_set_error(TG_ERR_ARG, "%s: \"__metadata__\" is reserved, not a tensor name", op);
    items[i] = (save_item){name, sd->tensors[i], dtype_by_tg(tg_get_dtype(sd->tensors[i])), 0};
    items[i].nbytes = tg_numel(sd->tensors[i]) * (int64_t)tg_dtype_size(tg_get_dtype(sd->tensors[i]));
  }
  size_t n = (size_t)sd->n;
  if (n) qsort(items, n, sizeof *items, compare_item_names);
  for (size_t i = 1; i < n; i++)
    if (!strcmp(items[i - 1].name, items[i].name)) return tg_set_error(TG_ERR_ARG, "%s: duplicate tensor name \"%.100s\"", op, items[i].name);
  if (n) qsort(items, n, sizeof *items, compare_save_items);
  return 0;
}

/* 8-byte length + compact JSON padded with spaces to a multiple of 8. */
static void build_header(bytes *b, const save_item *items, int n) {
  put(b, "01234567", 8); /* length, filled in below */
  put_str(b, "{");
  int64_t offset = 0;
  for (int i = 0; i < n; i++) {
    int64_t shape[TG_MAX_DIMS];
    int nd = tg_shape(items[i].t, shape, TG_MAX_DIMS);
    if (i) put_str(b, ",");
    put_json_string(b, items[i].name);
    put_str(b, ":{\"dtype\":\"");
    put_str(b, items[i].dt->name);
    put_str(b, "\",\"shape\":[");
    for (int d = 0; d < nd; d++) {
      if (d) put_str(b, ",");
      put_int(b, shape[d]);
    }
    put_str(b, "],\"data_offsets\":[");
    put_int(b, offset);
    put_str(b, ",");
    put_int(b, offset += items[i].nbytes);
    put_str(b, "]}");
  }
  put_str(b, "}");
  while (!b->oom && b->n % 8) put_str(b, " ");
  if (!b->oom) io_write_le64((unsigned char *)b->p, b->n - 8);
}

static int write_tensor(FILE *f, const save_item *it, const char *op) {
  void *buf = malloc(it->nbytes ? (size_t)it->nbytes : 1);
  if (!buf) return tg_set_error(TG_ERR_NOMEM, "%s: out of memory for tensor \"%.100s\"", op, it->name);
  int rc = tg_to_host(it->t, buf, (size_t)it->nbytes);
  if (rc == 0 && !io_host_is_little_endian()) io_swap_bytes(buf, (size_t)tg_numel(it->t), tg_dtype_size(tg_get_dtype(it->t)));
  if (rc == 0 && it->nbytes && fwrite(buf, 1, (size_t)it->nbytes, f) != (size_t)it->nbytes)
    rc = tg_set_error(TG_ERR_IO, "%s: write failed: %s", op, strerror(errno));
  free(buf);
  return rc;
}

/* Everything goes to path.tmp first, renamed over path only when complete. */
static int write_file(const char *op, const char *path, const bytes *header, const save_item *items, int n) {
  size_t len = strlen(path);
  char *tmp = malloc(len + 5);
  if (!tmp) return tg_set_error(TG_ERR_NOMEM, "%s: out of memory", op);
  memcpy(tmp, path, len), memcpy(tmp + len, ".tmp", 5);
  FILE *f = fopen(tmp, "wb");
  int rc = f ? 0 : tg_set_error(TG_ERR_IO, "%s: %s: cannot create: %s", op, tmp, strerror(errno));
  if (rc == 0 && fwrite(header->p, 1, header->n, f) != header->n)
    rc = tg_set_error(TG_ERR_IO, "%s: %s: write failed: %s", op, tmp, strerror(errno));
  for (int i = 0; i < n && rc == 0; i++) rc = write_tensor(f, &items[i], op);
  if (f && fclose(f) != 0 && rc == 0) rc = tg_set_error(TG_ERR_IO, "%s: %s: write failed: %s", op, tmp, strerror(errno));
  if (rc == 0 && rename(tmp, path) != 0) rc = tg_set_error(TG_ERR_IO, "%s: cannot rename %s to %s: %s", op, tmp, path, strerror(errno));
  if (rc < 0 && f) remove(tmp);
  free(tmp);
  return rc;
}

int tg_safetensors_save(const char *path, const tg_state_dict *sd) {
  static const char op[] = "safetensors_save";
  if (!path) return tg_set_error(TG_ERR_ARG, "%s: NULL path", op);
  int rc = check_state_dict(op, sd);
  if (rc < 0) return rc;
  save_item *items = malloc(sizeof *items * (size_t)(sd->n ? sd->n : 1));
  if (!items) return tg_set_error(TG_ERR_NOMEM, "%s: out of memory", op);
  bytes header = {0};
  rc = prepare_items(op, sd, items);
  if (rc == 0) build_header(&header, items, sd->n);
  if (rc == 0 && header.oom) rc = tg_set_error(TG_ERR_NOMEM, "%s: out of memory for the header", op);
  if (rc == 0) rc = write_file(op, path, &header, items, sd->n);
  free(header.p);
  free(items);
  return rc;
}
