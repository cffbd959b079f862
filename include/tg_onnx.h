/* tg_onnx.h — running ONNX models with tg's tensor ops (docs/onnx.md).
 *
 * A model file is parsed with protobuf-c (code generated from onnx.proto at build time), its
 * graph checked (every value defined once, no cycle, initializers the size their dims say)
 * and kept; tg_onnx_run turns each node into calls of tg's public tensor functions, so the
 * outputs are ordinary lazy tensors. Same conventions as tg.h: NULL or a negative tg_status
 * on error, with a message in tg_last_error() that names the op or attribute at fault. */
#ifndef TG_ONNX_H
#define TG_ONNX_H

#include "tg.h"

#ifdef __cplusplus
extern "C" {
#endif

/** A loaded model (opaque). */
typedef struct tg_onnx_model tg_onnx_model;

/** Load a model file (.onnx); external-data tensors are read from files beside it.
 *  NULL + tg_last_error on failure. */
tg_onnx_model *tg_onnx_load(const char *path);
/** Graph inputs that are not initializers. */
int tg_onnx_num_inputs(const tg_onnx_model *m);
/** Name of input i (NULL if out of range). */
const char *tg_onnx_input_name(const tg_onnx_model *m, int i);
/** The declared element type and shape of input i: the rank (shape[0..cap) filled; a dim that
 *  is symbolic or unknown is -1), or -1 if the model declares no tensor type for it. */
int tg_onnx_input_info(const tg_onnx_model *m, int i, tg_dtype *dtype, int64_t *shape, int cap);
/** Graph outputs. */
int tg_onnx_num_outputs(const tg_onnx_model *m);
/** Name of output i (NULL if out of range). */
const char *tg_onnx_output_name(const tg_onnx_model *m, int i);
/** Run the graph: inputs in graph-input order (a NULL entry: an omitted optional input);
 *  outputs[n_outputs] receive new lazy tensors owned by the caller's scope. 0 or a negative
 *  tg_status (the outputs are then NULL). */
int tg_onnx_run(tg_onnx_model *m, tg_tensor *const *inputs, int n_inputs, tg_tensor **outputs, int n_outputs);
/** Read a serialized TensorProto (.pb) into a new tensor (NULL + tg_last_error on failure). */
tg_tensor *tg_onnx_load_tensor(const char *path);
/** Free a model (NULL is a no-op). */
void tg_onnx_free(tg_onnx_model *m);

#ifdef __cplusplus
}
#endif
#endif /* TG_ONNX_H */
