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
 *  tg_status (the outputs are then NULL). A sequence input or output needs tg_onnx_run_values. */
int tg_onnx_run(tg_onnx_model *m, tg_tensor *const *inputs, int n_inputs, tg_tensor **outputs, int n_outputs);
/** ONNX values that are not a single tensor (docs/onnx.md, "Sequences and optionals"). A value
 *  is a tensor (n = 1, items[0]), a sequence of n >= 0 tensors, or an empty optional (none; an
 *  optional that holds something is that tensor or sequence). items is malloc'd and freed by
 *  tg_onnx_value_clear; the tensors are ordinary handles of the scope that made them. */
typedef enum { TG_ONNX_TENSOR = 1, TG_ONNX_SEQUENCE = 2, TG_ONNX_NONE = 3 } tg_onnx_kind;
/** Flag of a declared kind (tg_onnx_input_kind): the value may be none. */
#define TG_ONNX_OPTIONAL 16
typedef struct tg_onnx_value {
  tg_onnx_kind kind;
  int n;
  tg_tensor **items;
} tg_onnx_value;
/** The declared kind of input or output i: TG_ONNX_TENSOR or TG_ONNX_SEQUENCE, plus
 *  TG_ONNX_OPTIONAL for an optional type; TG_ONNX_TENSOR where the model declares no type;
 *  -1 if i is out of range or the type is one tg does not have (a map). */
int tg_onnx_input_kind(const tg_onnx_model *m, int i);
int tg_onnx_output_kind(const tg_onnx_model *m, int i);
/** tg_onnx_run for values of any kind; outputs[i] filled (tensors in the caller's scope, items
 *  to release with tg_onnx_value_clear). An input of kind TG_ONNX_NONE is an empty optional, or
 *  an omitted input where the model declares no optional (as a NULL tensor in tg_onnx_run). */
int tg_onnx_run_values(tg_onnx_model *m, const tg_onnx_value *inputs, int n_inputs, tg_onnx_value *outputs,
                       int n_outputs);
/** Read a serialized value of the given declared kind (as tg_onnx_input_kind gives it): a
 *  TensorProto, a SequenceProto of tensors or, with TG_ONNX_OPTIONAL, an OptionalProto.
 *  0 or a negative tg_status. */
int tg_onnx_load_value(const char *path, int kind, tg_onnx_value *out);
/** Free a value's items array (not its tensors) and make it none. NULL is a no-op. */
void tg_onnx_value_clear(tg_onnx_value *v);
/** Read a serialized TensorProto (.pb) into a new tensor (NULL + tg_last_error on failure). */
tg_tensor *tg_onnx_load_tensor(const char *path);
/** Free a model (NULL is a no-op). */
void tg_onnx_free(tg_onnx_model *m);

#ifdef __cplusplus
}
#endif
#endif /* TG_ONNX_H */
