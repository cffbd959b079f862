/* fuzz_safetensors.c — libFuzzer target: any bytes as a safetensors file. Reading must succeed
 * or fail with a status and a message; what it reads must load back into itself (same names,
 * shapes and dtypes) and copy to the host with its exact byte count. */
#include <string.h>

#include "fuzz_file.h"

static char host[1 << 16];

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  const char *path = fuzz_file(data, size);
  tg_state_dict sd = {0};
  tg_scope *s = tg_scope_begin();
  tg_clear_error();
  int rc = tg_safetensors_read(path, &sd);
  fuzz_check_status("safetensors_read", rc);
  for (int i = 0; rc == 0 && i < sd.n; i++) {
    tg_tensor *t = sd.tensors[i];
    size_t nbytes = (size_t)tg_numel(t) * tg_dtype_size(tg_get_dtype(t));
    if (nbytes > size) abort(); /* every byte of a tensor comes from the file */
    if (nbytes <= sizeof host && tg_to_host(t, host, nbytes) != 0) abort();
  }
  if (rc == 0 && tg_safetensors_load(path, &sd) != 0) abort(); /* a file loads into what it reads to */
  tg_state_dict_free(&sd);
  tg_scope_end(s);
  return 0;
}
