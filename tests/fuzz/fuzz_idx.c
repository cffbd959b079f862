/* fuzz_idx.c — libFuzzer target: any bytes (gzipped or not) as an IDX file (MNIST's format).
 * tg_load_idx must return a tensor whose bytes the file holds, or NULL with a message. */
#include "fuzz_file.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  const char *path = fuzz_file(data, size);
  tg_clear_error();
  tg_tensor *t = tg_load_idx(path);
  if (!t && !tg_last_error()[0]) abort();
  if (t && (tg_numel(t) < 0 || tg_ndim(t) < 1)) abort();
  tg_free(t);
  return 0;
}
