/* fuzz_onnx.c — libFuzzer target: any bytes as an ONNX model file, and as a TensorProto,
 * SequenceProto and OptionalProto (.pb).
 * Loading must succeed or fail with a status and a message, and never allocate more than the
 * bytes it was given justify (ASan's allocator_may_return_null would turn a huge request into
 * a failure, but -rss_limit_mb catches one that succeeds). A model that loads has its graph
 * built once (tg_onnx_run_values with float (2, 3) inputs of each declared kind: a tensor, a
 * sequence of two, an empty optional; lazy, so no kernel is compiled but every handler's
 * argument checks run); it must succeed or fail with a message. */
#include <stdlib.h>
#include <string.h>

#include "fuzz_file.h"
#include "tg_onnx.h"

static void fuzz_model(const char *path) {
  tg_clear_error();
  tg_onnx_model *m = tg_onnx_load(path);
  if (!m) {
    fuzz_check_status("onnx_load", tg_last_error()[0] ? TG_ERR_IO : 0);
    if (!tg_last_error()[0]) abort();
    return;
  }
  int ni = tg_onnx_num_inputs(m), no = tg_onnx_num_outputs(m);
  if (ni < 0 || no < 0) abort();
  for (int i = 0; i < ni; i++)
    if (!tg_onnx_input_name(m, i)) abort();
  for (int i = 0; i < no; i++)
    if (!tg_onnx_output_name(m, i)) abort();
  if (ni <= 8 && no <= 8) {
    tg_scope *s = tg_scope_begin();
    tg_tensor *t[2] = {tg_ones((int64_t[]){2, 3}, 2, TG_FLOAT32), tg_zeros((int64_t[]){2, 3}, 2, TG_FLOAT32)};
    tg_onnx_value in[8], out[8];
    for (int i = 0; i < ni; i++) {
      int kind = tg_onnx_input_kind(m, i);
      in[i] = kind & TG_ONNX_OPTIONAL ? (tg_onnx_value){TG_ONNX_NONE, 0, NULL}
              : kind == TG_ONNX_SEQUENCE ? (tg_onnx_value){TG_ONNX_SEQUENCE, 2, t}
                                         : (tg_onnx_value){TG_ONNX_TENSOR, 1, t};
    }
    tg_clear_error();
    int rc = tg_onnx_run_values(m, in, ni, out, no);
    fuzz_check_status("onnx_run", rc);
    for (int i = 0; rc == 0 && i < no; i++) {
      for (int j = 0; out[i].kind != TG_ONNX_NONE && j < out[i].n; j++)
        if (!out[i].items[j]) abort();
      tg_onnx_value_clear(&out[i]);
    }
    tg_scope_end(s);
  }
  tg_onnx_free(m);
}

/* Values a node makes are capped at 16 MiB here (4 GiB by default): what a graph realizes
 * to read shapes on the host stays small. */
int LLVMFuzzerInitialize(int *argc, char ***argv) {
  (void)argc, (void)argv;
  setenv("TG_ONNX_MAX_BYTES", "16777216", 1);
  return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  const char *path = fuzz_file(data, size);
  fuzz_model(path);
  tg_scope *s = tg_scope_begin();
  tg_clear_error();
  tg_tensor *t = tg_onnx_load_tensor(path);
  if (!t && !tg_last_error()[0]) abort();
  if (t && (size_t)tg_numel(t) * tg_dtype_size(tg_get_dtype(t)) > size) abort(); /* every byte comes from the file */
  for (int k = 0; k < 2; k++) {
    tg_onnx_value v;
    tg_clear_error();
    int rc = tg_onnx_load_value(path, k ? TG_ONNX_SEQUENCE : TG_ONNX_SEQUENCE | TG_ONNX_OPTIONAL, &v);
    fuzz_check_status("onnx_load_value", rc);
    size_t bytes = 0;
    for (int j = 0; !rc && v.kind != TG_ONNX_NONE && j < v.n; j++)
      bytes += (size_t)tg_numel(v.items[j]) * tg_dtype_size(tg_get_dtype(v.items[j]));
    if (bytes > size) abort();
    tg_onnx_value_clear(&v);
  }
  tg_scope_end(s);
  return 0;
}
