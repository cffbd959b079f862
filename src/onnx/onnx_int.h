/* onnx_int.h — internals of the ONNX importer (docs/onnx.md): the checked graph a model
 * becomes, the node context handlers see, attribute and host-value helpers, and the op
 * tables (one per ops_*.c file: {name, min_opset, handler, attributes}). */
#ifndef TG_ONNX_INT_H
#define TG_ONNX_INT_H

#include <stdbool.h>
#include <stdint.h>

#include "onnx/onnx.pb-c.h"
#include "tg.h"
#include "tg_onnx.h"

#define OX_MAX_DIMS 64 /* the most dims a tensor may have here (tg's limit) */
#define OX_MAX_IO 64   /* the most inputs or outputs of one node a handler sees */

/* Open-addressing table from value name to value number. */
typedef struct ox_names {
  const char **keys;
  int *vals;
  size_t cap;
} ox_names;

/* A graph after loading: values numbered, nodes in an order where every input comes first.
 * init[v] holds a reference to an initializer, or, in a subgraph, to a value it captures from
 * the graphs around it. */
typedef struct ox_graph {
  const Onnx__GraphProto *gp;
  ox_names map;
  int nvals;
  const char **names;   /* value names (borrowed from the proto) */
  tg_tensor **init;     /* per value: the initializer (model-owned), else NULL */
  int ninputs, noutputs;
  int *inputs, *outputs; /* value numbers of the graph's free inputs and its outputs */
  const char **input_names, **output_names;
  const Onnx__TypeProto__Tensor **input_types; /* declared type and shape of each free input, or NULL */
  int *input_kinds, *output_kinds;             /* declared kinds (tg_onnx_input_kind), -1: a map */
  const tg_onnx_value **init_other;            /* per value: a captured sequence or none, else NULL */
  int nnodes;
  const Onnx__NodeProto **nodes; /* in run order */
  int **node_in, **node_out;     /* per node: value numbers, -1 for an omitted optional one */
} ox_graph;

struct tg_onnx_model {
  Onnx__ModelProto *proto;
  char *dir;   /* the model's directory: external data is relative to it */
  int opset;   /* of the default domain */
  ox_graph g;
  struct ox_replays *replays; /* tg_onnx_run's recorded kernels per input signature (replay.c) */
};

/* The sequences and nones one run makes, freed when it ends. */
typedef struct ox_arena {
  tg_onnx_value **v;
  int n, cap;
} ox_arena;

/* A graph being run: its values, and the graph around it (subgraphs see its values). A value is
 * a tensor (vals[v]) or something else (others[v]: a sequence or an empty optional). */
typedef struct ox_env {
  const struct tg_onnx_model *m;
  const ox_graph *g;
  tg_tensor **vals;
  const tg_onnx_value **others;
  ox_arena *arena;
  const struct ox_env *parent;
  int depth;
  /* A run watched for replay (replay.c; NULL in subgraphs and other runs): per value, 1 if it is
   * computed from an input's data, not only its shape; *reads_data set when a node reads such a
   * value on the host (its work then depends on the values). */
  uint8_t *derived;
  bool *reads_data;
} ox_env;

/* One value passed into or out of a subgraph: a tensor t, or a sequence / none v. */
typedef struct ox_val {
  tg_tensor *t;
  const tg_onnx_value *v;
} ox_val;

/* What a handler sees: its node, inputs (NULL: omitted) and outputs to fill. Only the handlers of
 * ox_ops_seq see non-tensor inputs (vin) and may set vout; for the others a sequence input is an
 * error before they run. */
typedef struct ox_node {
  const Onnx__NodeProto *np;
  const ox_env *env;
  int opset;
  int nin, nout;
  tg_tensor *in[OX_MAX_IO];
  tg_tensor *out[OX_MAX_IO];
  const tg_onnx_value *vin[OX_MAX_IO];
  const tg_onnx_value *vout[OX_MAX_IO];
  char sbuf[4][128]; /* string attributes, copied NUL-terminated */
  int snext;
} ox_node;

typedef int (*ox_handler)(ox_node *n);
typedef struct ox_op {
  const char *name;
  int min_opset;    /* the first opset whose semantics the handler implements */
  ox_handler fn;
  const char *attrs; /* the attributes it reads, comma-separated: any other is an error */
} ox_op;

extern const ox_op ox_ops_math[], ox_ops_shape[], ox_ops_nn[], ox_ops_resize[], ox_ops_extra[], ox_ops_rnn[], ox_ops_grid[], ox_ops_control[], ox_ops_signal[], ox_ops_nms[], ox_ops_unique[], ox_ops_tfidf[];
/* The ops whose values may be sequences and optionals (ops_seq.c; If and Loop among them). */
extern const ox_op ox_ops_seq[];
/* The entry for op_type (NULL: not supported); *values: it is one of ox_ops_seq. */
const ox_op *ox_find_op(const char *op_type, bool *values);
/* If and Loop (ops_control.c), whose branches and bodies may carry sequences and optionals. */
int ox_op_if(ox_node *n);
int ox_op_loop(ox_node *n);

/* ---- tensors (tensor.c) */
/* The tg dtype of an ONNX TensorProto.DataType; -1 with an error naming it if unsupported. */
int ox_dtype(int onnx_type, const char *what);
/* The same without an error: -1 if unsupported. */
int ox_dtype_quiet(int onnx_type);
/* The ONNX data type of a tg dtype. */
int ox_onnx_type(tg_dtype dt);
/* A TensorProto as a new tensor in the current scope; dir: where external data lives (NULL:
 * external data refused). Sizes are checked against the bytes present before any allocation. */
tg_tensor *ox_tensor_from_proto(const Onnx__TensorProto *tp, const char *dir);
/* Read a whole file (at most max bytes) into a new buffer; NULL + error. */
uint8_t *ox_read_file(const char *path, size_t max, size_t *len);

/* ---- attributes (attr.c) */
const Onnx__AttributeProto *ox_attr(const ox_node *n, const char *name);
int64_t ox_attr_i(const ox_node *n, const char *name, int64_t dflt);
double ox_attr_f(const ox_node *n, const char *name, double dflt);
/* A string attribute, NUL-terminated in the node's buffers (dflt if absent). */
const char *ox_attr_s(ox_node *n, const char *name, const char *dflt);
/* An ints attribute into out[cap]: its count, -1 if absent, or -2 with an error if longer. */
int ox_attr_ints(const ox_node *n, const char *name, int64_t *out, int cap);
int ox_attr_floats(const ox_node *n, const char *name, double *out, int cap);
/* Error "Op 'name': message" for this node; returns TG_ERR_ARG (or status). */
int ox_fail(const ox_node *n, int status, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/* ---- host values of small tensors (attr.c): realize and read as int64/double. count or <0. */
int ox_host_ints(tg_tensor *t, int64_t *out, int cap);
/* The tensors read on the host while a watched node runs (ox_watch_reads; more: past the list). */
#define OX_MAX_READS 16
typedef struct ox_reads {
  tg_tensor *t[OX_MAX_READS];
  int n;
  bool more;
} ox_reads;
/* While r is set on this thread, ox_host_ints/doubles note each tensor they read into it. */
void ox_watch_reads(ox_reads *r);
int ox_host_doubles(tg_tensor *t, double *out, int cap);
/* Normalize axis into [0, ndim) or fail (-1 with an error). */
int ox_axis(const ox_node *n, int64_t axis, int ndim);
/* Quantize float xf: round half to even of xf / scale, + zero point, saturated to dt (ops_extra.c). */
tg_tensor *ox_quantize(tg_tensor *xf, tg_tensor *scale, tg_tensor *zp, tg_dtype dt);
/* Run subgraph gp (an If branch, a Loop or Scan body) inside the node's graph: in[nin] bind its
 * inputs in order, out[nout] receive its outputs (tensors in the current scope). 0 or < 0. */
int ox_run_subgraph(ox_node *n, const Onnx__GraphProto *gp, const ox_val *in, int nin, ox_val *out, int nout);
/* tg_onnx_run without replays (load.c); reads_data (NULL: not watched) is set when the run read
 * a value computed from an input's data on the host. */
int ox_run_tensors(tg_onnx_model *m, tg_tensor *const *inputs, int n_inputs, tg_tensor **outputs, int n_outputs,
                   bool *reads_data);
/* The replay table of a model (replay.c): NULL on out of memory; freed with its recordings. */
struct ox_replays *ox_replays_new(void);
void ox_replays_free(struct ox_replays *r);
/* A new sequence of n items (or none: kind TG_ONNX_NONE) owned by the run; NULL + error. */
tg_onnx_value *ox_new_value(const ox_node *n, tg_onnx_kind kind, int count);
/* The declared kind of a TypeProto (tg_onnx_input_kind's code). */
int ox_type_kind(const Onnx__TypeProto *tp);
/* Set output i (the handler's result); NULL makes the node fail. */
static inline int ox_set(ox_node *n, int i, tg_tensor *t) {
  n->out[i] = t;
  return t ? 0 : -1;
}
#endif
