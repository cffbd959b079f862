/* fuzz_mnist.c — libFuzzer target for the MNIST-style dataset and the batch loader
 * (src/io/data.c). An input is [u32 LE: k][k bytes: the images file][the labels file][1 byte:
 * batch size and flags]; both go to train-*-ubyte in a directory of this process.
 * tg_mnist_load must succeed or fail with a message; a loaded dataset must give batches of
 * the promised shapes until the epoch ends. */
#include <stdlib.h>
#include <string.h>

#include "fuzz_file.h"

static char dir[64];

static void cleanup(void) {
  char p[128];
  snprintf(p, sizeof p, "%s/train-images-idx3-ubyte", dir), unlink(p);
  snprintf(p, sizeof p, "%s/train-labels-idx1-ubyte", dir), unlink(p);
  rmdir(dir);
}

static void put(const char *name, const uint8_t *data, size_t n) {
  char p[128];
  snprintf(p, sizeof p, "%s/%s", dir, name);
  FILE *f = fopen(p, "wb");
  if (!f || (n && fwrite(data, 1, n, f) != n) || fclose(f) != 0) abort();
}

static void run_epoch(tg_dataset *d, uint8_t flags) {
  int64_t batch = 1 + (flags & 7);
  tg_loader *l = tg_loader_new(d, batch, flags & 8, flags & 16);
  if (!l) {
    if (!tg_last_error()[0]) abort();
    return;
  }
  int64_t seen = 0;
  for (int i = 0; i < 64; i++) {
    tg_scope *s = tg_scope_begin();
    tg_tensor *x, *y;
    int rc = tg_loader_next(l, &x, &y);
    if (rc == 1 && (tg_dim(x, 0) != tg_dim(y, 0) || tg_dim(x, 0) > batch || tg_ndim(x) != 4)) abort();
    if (rc == 1) seen += tg_dim(x, 0);
    tg_scope_end(s);
    if (rc != 1) {
      fuzz_check_status("loader_next", rc);
      break;
    }
  }
  if (seen > d->n) abort();
  tg_loader_free(l);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (!dir[0]) {
    strcpy(dir, "/tmp/tg_fuzz_mnist_XXXXXX");
    if (!mkdtemp(dir)) abort();
    atexit(cleanup);
  }
  if (size < 5) return 0;
  size_t k = (size_t)data[0] | (size_t)data[1] << 8 | (size_t)data[2] << 16 | (size_t)data[3] << 24;
  size_t body = size - 5;
  if (k > body) k = body;
  put("train-images-idx3-ubyte", data + 4, k);
  put("train-labels-idx1-ubyte", data + 4 + k, body - k);
  tg_dataset d;
  tg_clear_error();
  int rc = tg_mnist_load(dir, true, &d);
  fuzz_check_status("mnist_load", rc);
  if (rc == 0) run_epoch(&d, data[size - 1]);
  tg_dataset_free(&d);
  return 0;
}
