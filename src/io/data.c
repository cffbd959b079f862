/* data.c — datasets: IDX files (MNIST's format), MNIST-style datasets and a batch loader.
 *
 * IDX: magic 00 00 TT DD (TT the element type, DD the rank), DD big-endian u32 sizes, then
 * the elements, big-endian, row-major. Files may be gzipped (zlib's gzread reads both).
 * The loader keeps the whole dataset on the host and copies each batch's rows into new
 * tensors, shuffling the row order each epoch with a Fisher–Yates driven by tg_random_u32.
 * See docs/io.md. */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zlib.h>

#include "io/io.h"
#include "tensor/shape.h"
#include "tensor/tensor.h"

/* ---------------------------------------------------------------- IDX */

static const struct {
  unsigned char code;
  tg_dtype dtype;
} idx_types[] = {
    {0x08, TG_UINT8}, {0x09, TG_INT8}, {0x0B, TG_INT16}, {0x0C, TG_INT32}, {0x0D, TG_FLOAT32}, {0x0E, TG_FLOAT64},
};

typedef struct idx_data {
  tg_dtype dtype;
  int ndim;
  int64_t shape[TG_MAX_DIMS];
  int64_t numel;
  void *data; /* host byte order */
} idx_data;

static int idx_error(const char *op, const char *path, int status, const char *fmt, ...) __attribute__((format(printf, 4, 5)));
static int idx_error(const char *op, const char *path, int status, const char *fmt, ...) {
  char msg[600];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  return tg_set_error(status, "%s: %s: %s", op, path, msg);
}

/* Read up to n bytes; returns the count read or -1 on a zlib error. */
static int64_t gz_read_all(gzFile f, void *dst, int64_t n) {
  int64_t got = 0;
  while (got < n) {
    unsigned chunk = (unsigned)(n - got < (1 << 30) ? n - got : (1 << 30));
    int k = gzread(f, (char *)dst + got, chunk);
    if (k < 0) return -1;
    if (k == 0) break;
    got += k;
  }
  return got;
}

static const char *gz_message(gzFile f) {
  int code;
  const char *m = gzerror(f, &code);
  return code == Z_ERRNO ? strerror(errno) : m;
}

/* Magic, element type and sizes; fills d->dtype, ndim, shape, numel. */
static int idx_read_header(gzFile f, const char *op, const char *path, idx_data *d) {
  unsigned char magic[4], dim[4];
  int64_t got = gz_read_all(f, magic, 4);
  if (got < 0) return idx_error(op, path, TG_ERR_IO, "read failed: %s", gz_message(f));
  if (got < 4) return idx_error(op, path, TG_ERR_IO, "truncated: %lld of the 4 magic bytes", (long long)got);
  if (magic[0] || magic[1]) return idx_error(op, path, TG_ERR_IO, "bad magic %02x %02x (IDX files start with 00 00)", magic[0], magic[1]);
  size_t t = 0, nt = sizeof idx_types / sizeof idx_types[0];
  while (t < nt && idx_types[t].code != magic[2]) t++;
  if (t == nt) return idx_error(op, path, TG_ERR_IO, "unknown element type 0x%02x", magic[2]);
  if (magic[3] == 0 || magic[3] > TG_MAX_DIMS) return idx_error(op, path, TG_ERR_IO, "rank %d (1..%d supported)", magic[3], TG_MAX_DIMS);
  d->dtype = idx_types[t].dtype, d->ndim = magic[3];
  for (int i = 0; i < d->ndim; i++) {
    got = gz_read_all(f, dim, 4);
    if (got < 0) return idx_error(op, path, TG_ERR_IO, "read failed: %s", gz_message(f));
    if (got < 4) return idx_error(op, path, TG_ERR_IO, "truncated in the size of axis %d", i);
    d->shape[i] = io_read_be32(dim);
  }
  int64_t extent = shape_extent(d->shape, d->ndim), bytes; /* a shape a tensor can have (tensor/shape.h) */
  char buf[256];
  if (extent < 0 || !ck_mul(extent, (int64_t)tg_dtype_size(d->dtype), &bytes))
    return idx_error(op, path, TG_ERR_IO, "shape %s of %s is too large", tg_fmt_shape(buf, sizeof buf, d->shape, d->ndim),
                     tg_dtype_name(d->dtype));
  d->numel = shape_numel(d->shape, d->ndim);
  return 0;
}

/* The elements, read in growing chunks so a lying header cannot make us allocate more
 * than the file holds; then no byte may follow. */
static int idx_read_elements(gzFile f, const char *op, const char *path, idx_data *d) {
  size_t size = tg_dtype_size(d->dtype);
  int64_t need = d->numel * (int64_t)size, have = 0, cap = 0;
  char *buf = NULL;
  while (have < need) {
    int64_t ncap = cap ? (cap < need / 2 ? cap * 2 : need) : (need < (1 << 20) ? need : (1 << 20));
    char *nb = realloc(buf, (size_t)ncap);
    if (!nb) return free(buf), idx_error(op, path, TG_ERR_NOMEM, "out of memory for %lld bytes", (long long)ncap);
    buf = nb, cap = ncap;
    int64_t got = gz_read_all(f, buf + have, cap - have);
    if (got < 0) return free(buf), idx_error(op, path, TG_ERR_IO, "read failed: %s", gz_message(f));
    have += got;
    if (have < cap) break;
  }
  unsigned char extra;
  if (have < need)
    return free(buf), idx_error(op, path, TG_ERR_IO, "truncated: %lld of %lld data bytes", (long long)have, (long long)need);
  if (gz_read_all(f, &extra, 1) != 0) return free(buf), idx_error(op, path, TG_ERR_IO, "data continues past the %lld bytes the sizes give", (long long)need);
  if (io_host_is_little_endian()) io_swap_bytes(buf, (size_t)d->numel, size);
  d->data = buf;
  return 0;
}

static int idx_read(const char *op, const char *path, idx_data *d) {
  memset(d, 0, sizeof *d);
  if (!path) return tg_set_error(TG_ERR_ARG, "%s: NULL path", op);
  errno = 0;
  gzFile f = gzopen(path, "rb");
  if (!f) return idx_error(op, path, TG_ERR_IO, "cannot open: %s", errno ? strerror(errno) : "out of memory");
  int rc = idx_read_header(f, op, path, d);
  if (rc == 0) rc = idx_read_elements(f, op, path, d);
  gzclose(f);
  return rc;
}

tg_tensor *tg_load_idx(const char *path) {
  idx_data d;
  if (idx_read("load_idx", path, &d) < 0) return NULL;
  tg_tensor *t = tg_from_data(d.data, d.dtype, d.shape, d.ndim);
  free(d.data);
  return t;
}

/* ---------------------------------------------------------------- MNIST */

/* dir/name, or dir/name.gz when only that exists. */
static char *dataset_file(const char *dir, const char *name) {
  size_t len = strlen(dir) + strlen(name) + 5;
  char *p = malloc(len);
  if (!p) return NULL;
  snprintf(p, len, "%s/%s", dir, name);
  if (access(p, F_OK) != 0) {
    snprintf(p, len, "%s/%s.gz", dir, name);
    if (access(p, F_OK) != 0) snprintf(p, len, "%s/%s", dir, name); /* report the plain name */
  }
  return p;
}

static int read_dataset_file(const char *dir, const char *name, idx_data *d) {
  char *path = dataset_file(dir, name);
  if (!path) return tg_set_error(TG_ERR_NOMEM, "mnist_load: out of memory");
  int rc = idx_read("mnist_load", path, d);
  free(path);
  return rc;
}

/* Images (N, rows, cols) u8 and labels (N) u8 of the same N. */
static int check_mnist(const char *dir, const idx_data *img, const idx_data *lab) {
  char a[64], b[64];
  if (img->dtype != TG_UINT8 || img->ndim != 3)
    return tg_set_error(TG_ERR_IO, "mnist_load: %s: images are %s %s, expected uint8 (N, rows, cols)", dir,
                        tg_dtype_name(img->dtype), tg_fmt_shape(a, sizeof a, img->shape, img->ndim));
  if (lab->dtype != TG_UINT8 || lab->ndim != 1 || lab->shape[0] != img->shape[0])
    return tg_set_error(TG_ERR_IO, "mnist_load: %s: labels are %s %s, expected uint8 (%lld,)", dir,
                        tg_dtype_name(lab->dtype), tg_fmt_shape(b, sizeof b, lab->shape, lab->ndim), (long long)img->shape[0]);
  return 0;
}

int tg_mnist_load(const char *dir, bool train, tg_dataset *out) {
  if (!out) return tg_set_error(TG_ERR_ARG, "mnist_load: NULL dataset");
  memset(out, 0, sizeof *out);
  if (!dir) dir = getenv("TG_MNIST_DIR");
  if (!dir || !*dir) dir = "/usr/share/datasets/fashion-mnist";
  const char *split = train ? "train" : "t10k";
  char images_name[64], labels_name[64];
  snprintf(images_name, sizeof images_name, "%s-images-idx3-ubyte", split);
  snprintf(labels_name, sizeof labels_name, "%s-labels-idx1-ubyte", split);
  idx_data img = {0}, lab = {0};
  int rc = read_dataset_file(dir, images_name, &img);
  if (rc == 0) rc = read_dataset_file(dir, labels_name, &lab);
  if (rc == 0) rc = check_mnist(dir, &img, &lab);
  if (rc == 0) {
    tg_scope *s = tg_scope_begin();
    int64_t shape[4] = {img.shape[0], 1, img.shape[1], img.shape[2]};
    tg_tensor *images = tg_from_data(img.data, TG_UINT8, shape, 4);
    tg_tensor *labels = tg_from_data(lab.data, TG_UINT8, lab.shape, 1);
    if (images && labels) /* an extra reference owned by the dataset outlives the scope */
      *out = (tg_dataset){tg_retain(images), tg_retain(labels), img.shape[0]};
    else
      rc = tg_error_status_or(TG_ERR_NOMEM);
    tg_scope_end(s);
  }
  free(img.data), free(lab.data);
  return rc;
}

void tg_dataset_free(tg_dataset *d) {
  if (!d) return;
  tg_free(d->images);
  tg_free(d->labels);
  memset(d, 0, sizeof *d);
}

/* ---------------------------------------------------------------- loader */

struct tg_loader {
  uint8_t *images;   /* n rows of `row` bytes */
  int32_t *labels;   /* n */
  int64_t n, row, batch;
  int64_t item_shape[TG_MAX_DIMS]; /* the shape of one image */
  int item_ndim;
  bool shuffle, drop_last, in_epoch;
  int64_t *order, pos; /* this epoch's row order and the next position in it */
};

/* Values of tg_random_u32 drawn ahead, then one at a time when they run out. */
typedef struct draw_pool {
  const uint32_t *next, *end;
} draw_pool;

static uint32_t draw(draw_pool *p) {
  uint32_t x;
  if (p->next < p->end) return *p->next++;
  tg_random_u32(&x, 1);
  return x;
}

/* A uniform integer in [0, bound): Lemire's multiply-shift with rejection (no modulo bias). */
static uint32_t random_below(uint32_t bound, draw_pool *pool) {
  uint64_t m = (uint64_t)draw(pool) * bound;
  if ((uint32_t)m < bound) {
    uint32_t threshold = (uint32_t)(-bound) % bound;
    while ((uint32_t)m < threshold) m = (uint64_t)draw(pool) * bound;
  }
  return (uint32_t)(m >> 32);
}

/* Fisher–Yates over the identity order, so an epoch depends only on the generator. */
static int shuffle_order(tg_loader *l) {
  for (int64_t i = 0; i < l->n; i++) l->order[i] = i;
  if (!l->shuffle || l->n < 2) return 0;
  size_t ndraws = (size_t)(l->n - 1);
  uint32_t *draws = malloc(sizeof *draws * ndraws);
  if (!draws) return tg_set_error(TG_ERR_NOMEM, "loader_next: out of memory");
  tg_random_u32(draws, ndraws);
  draw_pool pool = {draws, draws + ndraws}; /* one draw per swap, plus rare rejections */
  for (int64_t i = l->n - 1; i > 0; i--) {
    int64_t j = random_below((uint32_t)(i + 1), &pool);
    int64_t t = l->order[i];
    l->order[i] = l->order[j], l->order[j] = t;
  }
  free(draws);
  return 0;
}

static int loader_check(const tg_dataset *d, int64_t batch) {
  char buf[256];
  if (!d) return tg_set_error(TG_ERR_ARG, "loader_new: NULL dataset");
  if (!d->images || !d->labels) return tg_set_error(TG_ERR_ARG, "loader_new: dataset without %s", d->images ? "labels" : "images");
  if (batch < 1) return tg_set_error(TG_ERR_ARG, "loader_new: batch size %lld (must be at least 1)", (long long)batch);
  int64_t shape[TG_MAX_DIMS];
  int nd = tg_shape(d->images, shape, TG_MAX_DIMS);
  if (tg_get_dtype(d->images) != TG_UINT8 || nd < 1 || shape[0] != d->n)
    return tg_set_error(TG_ERR_ARG, "loader_new: images are %s %s, expected uint8 with %lld rows", tg_dtype_name(tg_get_dtype(d->images)),
                        tg_fmt_shape(buf, sizeof buf, shape, nd), (long long)d->n);
  tg_dtype ldt = tg_get_dtype(d->labels);
  nd = tg_shape(d->labels, shape, TG_MAX_DIMS);
  if (tg_dtype_is_float(ldt) || nd != 1 || shape[0] != d->n)
    return tg_set_error(TG_ERR_ARG, "loader_new: labels are %s %s, expected integers of shape (%lld,)", tg_dtype_name(ldt),
                        tg_fmt_shape(buf, sizeof buf, shape, nd), (long long)d->n);
  if (d->n > (int64_t)UINT32_MAX) return tg_set_error(TG_ERR_ARG, "loader_new: %lld rows (at most 2^32 - 1)", (long long)d->n);
  return 0;
}

/* Copy labels of any integer dtype to int32 on the host (values must fit). */
static int copy_labels(const tg_dataset *d, int32_t *out) {
  tg_dtype dt = tg_get_dtype(d->labels);
  size_t size = tg_dtype_size(dt);
  void *raw = malloc(d->n ? (size_t)d->n * size : 1);
  if (!raw) return tg_set_error(TG_ERR_NOMEM, "loader_new: out of memory");
  int rc = tg_to_host(d->labels, raw, (size_t)d->n * size);
  for (int64_t i = 0; i < d->n && rc == 0; i++) {
    double v = dtype_read(raw, dt, (size_t)i);
    if (v < INT32_MIN || v > INT32_MAX)
      rc = tg_set_error(TG_ERR_ARG, "loader_new: label %.0f of row %lld does not fit int32", v, (long long)i);
    out[i] = (int32_t)(rc == 0 ? v : 0);
  }
  free(raw);
  return rc;
}

tg_loader *tg_loader_new(const tg_dataset *d, int64_t batch, bool shuffle, bool drop_last) {
  if (loader_check(d, batch) < 0) return NULL;
  tg_loader *l = calloc(1, sizeof *l);
  if (!l) return tg_set_error(TG_ERR_NOMEM, "loader_new: out of memory"), NULL;
  int64_t shape[TG_MAX_DIMS];
  int nd = tg_shape(d->images, shape, TG_MAX_DIMS);
  l->n = d->n, l->batch = batch, l->shuffle = shuffle, l->drop_last = drop_last;
  l->item_ndim = nd - 1, l->row = 1;
  for (int i = 1; i < nd; i++) l->item_shape[i - 1] = shape[i], l->row *= shape[i];
  size_t n = (size_t)(l->n ? l->n : 1);
  l->images = malloc((size_t)(l->row ? l->row : 1) * n);
  l->labels = malloc(sizeof *l->labels * n);
  l->order = malloc(sizeof *l->order * n);
  int rc = l->images && l->labels && l->order ? 0 : tg_set_error(TG_ERR_NOMEM, "loader_new: out of memory");
  if (rc == 0) rc = tg_to_host(d->images, l->images, (size_t)(l->row * l->n));
  if (rc == 0) rc = copy_labels(d, l->labels);
  if (rc < 0) return tg_loader_free(l), NULL;
  return l;
}

/* The batch of rows order[pos .. pos+b) as new tensors in the current scope. */
static int make_batch(tg_loader *l, int64_t b, tg_tensor **x, tg_tensor **y) {
  float *xs = malloc(sizeof *xs * (size_t)b * (size_t)(l->row ? l->row : 1));
  int32_t *ys = malloc(sizeof *ys * (size_t)b);
  if (!xs || !ys) return free(xs), free(ys), tg_set_error(TG_ERR_NOMEM, "loader_next: out of memory");
  for (int64_t i = 0; i < b; i++) {
    int64_t r = l->order[l->pos + i];
    const uint8_t *src = l->images + r * l->row;
    for (int64_t k = 0; k < l->row; k++) xs[i * l->row + k] = (float)src[k] / 255.0f;
    ys[i] = l->labels[r];
  }
  int64_t shape[TG_MAX_DIMS + 1] = {b};
  memcpy(shape + 1, l->item_shape, sizeof(int64_t) * (size_t)l->item_ndim);
  *x = tg_from_data(xs, TG_FLOAT32, shape, l->item_ndim + 1);
  *y = tg_from_data(ys, TG_INT32, shape, 1);
  free(xs), free(ys);
  if (!*x || !*y) {
    tg_free(*x), tg_free(*y);
    *x = *y = NULL;
    return tg_error_status_or(TG_ERR_NOMEM);
  }
  return 0;
}

int tg_loader_next(tg_loader *l, tg_tensor **x, tg_tensor **y) {
  if (x) *x = NULL;
  if (y) *y = NULL;
  if (!l || !x || !y) return tg_set_error(TG_ERR_ARG, "loader_next: NULL %s", !l ? "loader" : "output pointer");
  if (!l->in_epoch) {
    int rc = shuffle_order(l);
    if (rc < 0) return rc;
    l->in_epoch = true, l->pos = 0;
  }
  int64_t left = l->n - l->pos, b = left < l->batch ? left : l->batch;
  if (b == 0 || (l->drop_last && b < l->batch)) {
    l->in_epoch = false;
    return 0;
  }
  int rc = make_batch(l, b, x, y);
  if (rc < 0) return rc;
  l->pos += b;
  return 1;
}

void tg_loader_free(tg_loader *l) {
  if (!l) return;
  free(l->images), free(l->labels), free(l->order);
  free(l);
}
