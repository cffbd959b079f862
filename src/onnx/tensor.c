/* tensor.c — ONNX TensorProto → tg tensor: the dtype table, typed or raw data, external data
 * (a file beside the model), and every size checked against the bytes actually present
 * before anything is allocated (a hostile header cannot ask for gigabytes). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "onnx/onnx_int.h"
#include "runtime/helpers.h"

/* ONNX TensorProto.DataType → tg dtype (0: unsupported, with its name for the message). */
typedef struct ox_dt {
  int onnx;
  int tg; /* tg_dtype, or -1 */
  const char *name;
} ox_dt;

static const ox_dt ox_dts[] = {
    {1, TG_FLOAT32, "FLOAT"},     {2, TG_UINT8, "UINT8"},     {3, TG_INT8, "INT8"},
    {4, TG_UINT16, "UINT16"},     {5, TG_INT16, "INT16"},     {6, TG_INT32, "INT32"},
    {7, TG_INT64, "INT64"},       {8, -1, "STRING"},          {9, TG_BOOL, "BOOL"},
    {10, TG_FLOAT16, "FLOAT16"},  {11, TG_FLOAT64, "DOUBLE"}, {12, TG_UINT32, "UINT32"},
    {13, TG_UINT64, "UINT64"},    {14, -1, "COMPLEX64"},      {15, -1, "COMPLEX128"},
    {16, TG_BFLOAT16, "BFLOAT16"},
};
#define N_DTS ((int)(sizeof ox_dts / sizeof ox_dts[0]))

int ox_dtype(int onnx_type, const char *what) {
  for (int i = 0; i < N_DTS; i++)
    if (ox_dts[i].onnx == onnx_type && ox_dts[i].tg >= 0) return ox_dts[i].tg;
  for (int i = 0; i < N_DTS; i++)
    if (ox_dts[i].onnx == onnx_type)
      return tg_set_error(TG_ERR_IO, "ONNX %s: data type %s is not supported", what, ox_dts[i].name), -1;
  return tg_set_error(TG_ERR_IO, "ONNX %s: unknown data type %d", what, onnx_type), -1;
}

int ox_dtype_quiet(int onnx_type) {
  for (int i = 0; i < N_DTS; i++)
    if (ox_dts[i].onnx == onnx_type) return ox_dts[i].tg;
  return -1;
}

int ox_onnx_type(tg_dtype dt) {
  for (int i = 0; i < N_DTS; i++)
    if (ox_dts[i].tg == (int)dt) return ox_dts[i].onnx;
  return 0;
}

uint8_t *ox_read_file(const char *path, size_t max, size_t *len) {
  FILE *f = fopen(path, "rb");
  if (!f) return tg_set_error(TG_ERR_IO, "ONNX: cannot open %s: %s", path, strerror(errno)), NULL;
  size_t cap = 1 << 16, n = 0;
  uint8_t *buf = malloc(cap);
  while (buf) {
    if (n == cap) { /* grow with what is actually read, never with a size the file claims */
      uint8_t *nb = cap < max ? realloc(buf, cap * 2) : NULL;
      if (!nb) break;
      buf = nb, cap *= 2;
    }
    size_t r = fread(buf + n, 1, cap - n, f);
    n += r;
    if (r == 0) {
      bool err = ferror(f);
      fclose(f);
      if (err) return free(buf), tg_set_error(TG_ERR_IO, "ONNX: reading %s failed", path), NULL;
      *len = n;
      return buf;
    }
  }
  fclose(f);
  free(buf);
  tg_set_error(TG_ERR_IO, "ONNX: %s is larger than %zu bytes or memory ran out", path, max);
  return NULL;
}

/* ---------------------------------------------------------------- sizes */

/* numel of the dims (0 ok); false with an error if a dim is negative or it overflows. */
static bool tp_numel(const Onnx__TensorProto *tp, int64_t *numel) {
  if (tp->n_dims > OX_MAX_DIMS)
    return tg_set_error(TG_ERR_SHAPE, "ONNX tensor '%s': %zu dims (at most %d)", tp->name ? tp->name : "",
                        tp->n_dims, OX_MAX_DIMS), false;
  int64_t n = 1;
  for (size_t i = 0; i < tp->n_dims; i++)
    if (tp->dims[i] < 0 || !ck_mul(n, tp->dims[i], &n))
      return tg_set_error(TG_ERR_SHAPE, "ONNX tensor '%s': %s (dim %zu is %lld)", tp->name ? tp->name : "",
                          tp->dims[i] < 0 ? "a negative dim" : "dims overflow int64", i, (long long)tp->dims[i]), false;
  *numel = n;
  return true;
}

/* ---------------------------------------------------------------- typed fields */

/* Convert count values of a typed field into dt's bytes at dst. */
static void typed_copy(void *dst, tg_dtype dt, const Onnx__TensorProto *tp, size_t count) {
  for (size_t i = 0; i < count; i++) {
    switch (dt) {
    case TG_FLOAT32: ((float *)dst)[i] = tp->float_data[i]; break;
    case TG_FLOAT64: ((double *)dst)[i] = tp->double_data[i]; break;
    case TG_INT64: ((int64_t *)dst)[i] = tp->int64_data[i]; break;
    case TG_UINT64: ((uint64_t *)dst)[i] = tp->uint64_data[i]; break;
    case TG_UINT32: ((uint32_t *)dst)[i] = (uint32_t)tp->uint64_data[i]; break;
    case TG_INT32: ((int32_t *)dst)[i] = tp->int32_data[i]; break;
    case TG_INT16: ((int16_t *)dst)[i] = (int16_t)tp->int32_data[i]; break;
    case TG_UINT16: case TG_FLOAT16: case TG_BFLOAT16: ((uint16_t *)dst)[i] = (uint16_t)tp->int32_data[i]; break;
    case TG_INT8: ((int8_t *)dst)[i] = (int8_t)tp->int32_data[i]; break;
    case TG_UINT8: ((uint8_t *)dst)[i] = (uint8_t)tp->int32_data[i]; break;
    case TG_BOOL: ((uint8_t *)dst)[i] = tp->int32_data[i] != 0; break;
    default: break;
    }
  }
}

/* How many values the typed field of dt holds. */
static size_t typed_count(tg_dtype dt, const Onnx__TensorProto *tp) {
  switch (dt) {
  case TG_FLOAT32: return tp->n_float_data;
  case TG_FLOAT64: return tp->n_double_data;
  case TG_INT64: return tp->n_int64_data;
  case TG_UINT64: case TG_UINT32: return tp->n_uint64_data;
  default: return tp->n_int32_data;
  }
}

/* ---------------------------------------------------------------- external data */

/* The external-data entry `key` (NULL if absent). */
static const char *ext_get(const Onnx__TensorProto *tp, const char *key) {
  for (size_t i = 0; i < tp->n_external_data; i++)
    if (tp->external_data[i]->key && !strcmp(tp->external_data[i]->key, key)) return tp->external_data[i]->value;
  return NULL;
}

/* A non-negative integer of an external-data entry (dflt if absent; -1 if malformed). */
static int64_t ext_int(const Onnx__TensorProto *tp, const char *key, int64_t dflt) {
  const char *s = ext_get(tp, key);
  if (!s) return dflt;
  char *end;
  errno = 0;
  long long v = strtoll(s, &end, 10);
  return (errno || end == s || *end || v < 0) ? -1 : v;
}

/* Open the external data of tp, checked before anything is allocated: the file must lie
 * beside the model (no absolute path or ".."), and hold offset + nbytes bytes. NULL + error. */
static FILE *ext_open(const Onnx__TensorProto *tp, const char *dir, int64_t nbytes) {
  const char *loc = ext_get(tp, "location"), *name = tp->name ? tp->name : "";
  int64_t off = ext_int(tp, "offset", 0), len = ext_int(tp, "length", nbytes);
  if (!dir) return tg_set_error(TG_ERR_IO, "ONNX tensor '%s': external data outside a model file", name), NULL;
  if (!loc || !loc[0] || loc[0] == '/' || strstr(loc, ".."))
    return tg_set_error(TG_ERR_IO, "ONNX tensor '%s': bad external data location '%s'", name, loc ? loc : ""), NULL;
  if (off < 0 || len != nbytes)
    return tg_set_error(TG_ERR_IO, "ONNX tensor '%s': external data offset/length do not match its %lld bytes", name,
                        (long long)nbytes), NULL;
  char path[4096];
  if (snprintf(path, sizeof path, "%s/%s", dir, loc) >= (int)sizeof path)
    return tg_set_error(TG_ERR_IO, "ONNX tensor '%s': external data path too long", name), NULL;
  FILE *f = fopen(path, "rb");
  if (!f) return tg_set_error(TG_ERR_IO, "ONNX tensor '%s': cannot open external data %s: %s", name, path, strerror(errno)), NULL;
  struct stat st;
  int64_t end;
  if (fstat(fileno(f), &st) || !S_ISREG(st.st_mode) || !ck_add(off, nbytes, &end) || end > (int64_t)st.st_size ||
      fseeko(f, (off_t)off, SEEK_SET)) {
    fclose(f);
    return tg_set_error(TG_ERR_IO, "ONNX tensor '%s': external data %s is not a file of offset %lld + %lld bytes", name,
                        path, (long long)off, (long long)nbytes), NULL;
  }
  return f;
}

static int ext_read(FILE *f, const Onnx__TensorProto *tp, void *dst, int64_t nbytes) {
  bool ok = fread(dst, 1, (size_t)nbytes, f) == (size_t)nbytes;
  fclose(f);
  return ok ? 0 : tg_set_error(TG_ERR_IO, "ONNX tensor '%s': reading its external data failed", tp->name ? tp->name : "");
}

/* ---------------------------------------------------------------- conversion */

/* Check the data's size against numel and fill buf (nbytes); 0 or an error. */
static int tp_fill(const Onnx__TensorProto *tp, tg_dtype dt, int64_t numel, void *buf, int64_t nbytes, FILE *ext) {
  const char *name = tp->name ? tp->name : "";
  if (ext) return ext_read(ext, tp, buf, nbytes);
  if (tp->has_raw_data) {
    if ((int64_t)tp->raw_data.len != nbytes)
      return tg_set_error(TG_ERR_IO, "ONNX tensor '%s': %zu bytes of raw data for %lld elements of %s", name,
                          tp->raw_data.len, (long long)numel, tg_dtype_name(dt));
    if (nbytes) memcpy(buf, tp->raw_data.data, (size_t)nbytes);
    return 0;
  }
  size_t count = typed_count(dt, tp);
  if ((int64_t)count != numel)
    return tg_set_error(TG_ERR_IO, "ONNX tensor '%s': %zu values for %lld elements", name, count, (long long)numel);
  typed_copy(buf, dt, tp, count);
  return 0;
}

/* Whether the data present can fill nbytes (raw: exactly; typed values at their widest;
 * external data is checked against its file by ext_open). */
static bool tp_plausible(const Onnx__TensorProto *tp, int64_t nbytes) {
  if (tp->has_data_location && tp->data_location == ONNX__TENSOR_PROTO__DATA_LOCATION__EXTERNAL) return true;
  if (tp->has_raw_data) return (int64_t)tp->raw_data.len == nbytes;
  size_t most = tp->n_float_data + tp->n_int32_data + tp->n_int64_data + tp->n_double_data + tp->n_uint64_data;
  return nbytes <= (int64_t)most * 8;
}

tg_tensor *ox_tensor_from_proto(const Onnx__TensorProto *tp, const char *dir) {
  const char *name = tp->name ? tp->name : "";
  char what[160];
  snprintf(what, sizeof what, "tensor '%.120s'", name);
  if (!tp->has_data_type) return tg_set_error(TG_ERR_IO, "ONNX %s: no data type", what), NULL;
  int dt = ox_dtype(tp->data_type, what);
  int64_t numel, nbytes;
  if (dt < 0 || !tp_numel(tp, &numel)) return NULL;
  bool external = tp->has_data_location && tp->data_location == ONNX__TENSOR_PROTO__DATA_LOCATION__EXTERNAL;
  if (ck_mul(numel, (int64_t)tg_dtype_size((tg_dtype)dt), &nbytes) && !external && tp->has_raw_data &&
      (int64_t)tp->raw_data.len != nbytes)
    return tg_set_error(TG_ERR_IO, "ONNX %s: %zu bytes of raw data for %lld elements of %s", what, tp->raw_data.len,
                        (long long)numel, tg_dtype_name((tg_dtype)dt)), NULL;
  if (!ck_mul(numel, (int64_t)tg_dtype_size((tg_dtype)dt), &nbytes) || !tp_plausible(tp, nbytes))
    return tg_set_error(TG_ERR_IO, "ONNX %s: its dims (%lld elements) do not match the data in the file", what,
                        (long long)numel), NULL;
  FILE *ext = external ? ext_open(tp, dir, nbytes) : NULL;
  if (external && !ext) return NULL;
  void *buf = malloc(nbytes ? (size_t)nbytes : 1);
  if (!buf) {
    if (ext) fclose(ext);
    return tg_set_error(TG_ERR_NOMEM, "ONNX %s: out of memory for %lld bytes", what, (long long)nbytes), NULL;
  }
  tg_tensor *t = NULL;
  if (tp_fill(tp, (tg_dtype)dt, numel, buf, nbytes, ext) == 0) {
    int64_t shape[OX_MAX_DIMS];
    for (size_t i = 0; i < tp->n_dims; i++) shape[i] = tp->dims[i];
    t = tg_from_data(buf, (tg_dtype)dt, shape, (int)tp->n_dims);
  }
  free(buf);
  return t;
}

tg_tensor *tg_onnx_load_tensor(const char *path) {
  if (!path) return tg_set_error(TG_ERR_ARG, "tg_onnx_load_tensor: NULL path"), NULL;
  size_t len;
  uint8_t *bytes = ox_read_file(path, (size_t)1 << 34, &len);
  if (!bytes) return NULL;
  Onnx__TensorProto *tp = onnx__tensor_proto__unpack(NULL, len, bytes);
  free(bytes);
  if (!tp) return tg_set_error(TG_ERR_IO, "ONNX: %s is not a TensorProto (protobuf parse failed)", path), NULL;
  tg_tensor *t = ox_tensor_from_proto(tp, NULL);
  onnx__tensor_proto__free_unpacked(tp, NULL);
  return t;
}
