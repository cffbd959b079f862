/* ops_seq.c — ONNX sequences and optionals (docs/onnx.md, "Sequences and optionals"): a
 * sequence is a list of tensors, an optional is a value or none. Both live only in the
 * importer: the ops here build new lists (the run's arena owns them) of ordinary lazy tensors,
 * so nothing of the tensor graph changes. Also Identity (it passes any value through), If and
 * Loop's table entries (ops_control.c: branches and bodies may carry any value), the
 * declared kinds of graph inputs and outputs, and reading SequenceProto / OptionalProto files
 * (onnx-data.proto, generated at build time like onnx.proto). */
#include <stdlib.h>
#include <string.h>

#include "onnx/onnx-data.pb-c.h"
#include "onnx/onnx_int.h"
#include "runtime/helpers.h"
#include "tensor/tensor.h"

#define IN(i) (n->nin > (i) ? n->in[i] : NULL)
#define VIN(i) (n->nin > (i) ? n->vin[i] : NULL)
#define MAX_ITEMS (1 << 20) /* the longest sequence an op makes */

/* A tensor as a sequence item: a handle of the run's scope (an input may be a subgraph's
 * initializer, which dies with the subgraph). */
static tg_tensor *item(tg_tensor *t) { return t ? tensor_wrap(t->u) : NULL; }

/* Input i, which must be a sequence. */
static const tg_onnx_value *seq_in(ox_node *n, int i) {
  const tg_onnx_value *v = VIN(i);
  if (v && v->kind == TG_ONNX_SEQUENCE) return v;
  return ox_fail(n, TG_ERR_ARG, "input %d must be a sequence", i), NULL;
}

/* A position input (host-read, one integer) in [-len, len + extra): 0-based, or -1 + error. */
static int64_t position(ox_node *n, int i, int64_t len, int64_t extra, int64_t dflt) {
  int64_t p = dflt;
  if (IN(i) && ox_host_ints(IN(i), &p, 1) != 1) return ox_fail(n, TG_ERR_ARG, "position must be one integer"), -1;
  if (p < -len || p >= len + extra)
    return ox_fail(n, TG_ERR_ARG, "position %lld is outside a sequence of %lld", (long long)p, (long long)len), -1;
  return p < 0 ? p + len : p;
}

static int set_seq(ox_node *n, int i, tg_onnx_value *v) {
  n->vout[i] = v;
  return v ? 0 : -1;
}

static int op_identity(ox_node *n) {
  n->vout[0] = VIN(0);
  return VIN(0) ? 0 : ox_set(n, 0, IN(0));
}

static int op_sequence_empty(ox_node *n) { return set_seq(n, 0, ox_new_value(n, TG_ONNX_SEQUENCE, 0)); }

static int op_sequence_construct(ox_node *n) {
  tg_onnx_value *v = ox_new_value(n, TG_ONNX_SEQUENCE, n->nin);
  for (int i = 0; v && i < n->nin; i++)
    if (!(v->items[i] = item(IN(i)))) return ox_fail(n, TG_ERR_ARG, "input %d must be a tensor", i);
  return set_seq(n, 0, v);
}

static int op_sequence_at(ox_node *n) {
  if (!IN(1)) return ox_fail(n, TG_ERR_ARG, "position is required");
  const tg_onnx_value *s = seq_in(n, 0);
  int64_t p = s ? position(n, 1, s->n, 0, 0) : -1;
  return p < 0 ? -1 : ox_set(n, 0, s->items[p]);
}

static int op_sequence_length(ox_node *n) {
  const tg_onnx_value *s = seq_in(n, 0);
  int64_t len = s ? s->n : 0;
  return s ? ox_set(n, 0, tg_from_data(&len, TG_INT64, NULL, 0)) : -1;
}

/* SequenceInsert(seq, tensor, position = the end). */
static int op_sequence_insert(ox_node *n) {
  const tg_onnx_value *s = seq_in(n, 0);
  int64_t p = s ? position(n, 2, s->n, 1, s->n) : -1;
  if (p < 0) return -1;
  if (!IN(1)) return ox_fail(n, TG_ERR_ARG, "the inserted value must be a tensor");
  if (s->n >= MAX_ITEMS) return ox_fail(n, TG_ERR_ARG, "a sequence longer than %d", MAX_ITEMS);
  tg_onnx_value *v = ox_new_value(n, TG_ONNX_SEQUENCE, s->n + 1);
  if (!v) return -1;
  for (int i = 0, j = 0; i <= s->n; i++) v->items[i] = i == p ? item(IN(1)) : s->items[j++];
  return set_seq(n, 0, v);
}

/* SequenceErase(seq, position = the last). */
static int op_sequence_erase(ox_node *n) {
  const tg_onnx_value *s = seq_in(n, 0);
  int64_t p = s ? position(n, 1, s->n, 0, -1) : -1;
  if (p < 0) return -1;
  tg_onnx_value *v = ox_new_value(n, TG_ONNX_SEQUENCE, s->n - 1);
  for (int i = 0, j = 0; v && i < s->n; i++)
    if (i != p) v->items[j++] = s->items[i];
  return set_seq(n, 0, v);
}

/* SplitToSequence(x, split?): split a scalar (chunks of that size, the last shorter) or a list
 * of sizes; without it, slices of one (squeezed unless keepdims). At most MAX_PARTS parts. */
enum { MAX_PARTS = 1 << 16 };

static int op_split_to_sequence(ox_node *n) {
  tg_tensor *x = IN(0), *sp = IN(1);
  int axis = x ? ox_axis(n, ox_attr_i(n, "axis", 0), tg_ndim(x)) : -1;
  if (axis < 0) return -1;
  int64_t len = tg_dim(x, axis), c = 1, ns = sp && tg_ndim(sp) ? tg_numel(sp) : len;
  if (sp && tg_ndim(sp) == 0) {
    if (ox_host_ints(sp, &c, 1) != 1 || c < 1) return ox_fail(n, TG_ERR_ARG, "split must be a positive integer");
    ns = (len + c - 1) / c;
  }
  if (ns > MAX_PARTS) return ox_fail(n, TG_ERR_ARG, "%lld parts (at most %d)", (long long)ns, MAX_PARTS);
  int64_t *sizes = malloc((size_t)(ns + 1) * sizeof *sizes);
  tg_onnx_value *v = sizes ? ox_new_value(n, TG_ONNX_SEQUENCE, (int)ns) : NULL;
  int rc = v ? 0 : sizes ? -1 : tg_set_error(TG_ERR_NOMEM, "out of memory");
  if (!rc && sp && tg_ndim(sp)) rc = ox_host_ints(sp, sizes, (int)ns) == ns ? 0 : -1;
  else for (int64_t i = 0; !rc && i < ns; i++) sizes[i] = len - i * c < c ? len - i * c : c;
  if (!rc && ns && tg_split(x, sizes, (int)ns, axis, v->items)) rc = -1; /* an empty axis: an empty sequence */
  for (int i = 0; !rc && !sp && !ox_attr_i(n, "keepdims", 1) && i < ns; i++)
    if (!(v->items[i] = tg_squeeze(v->items[i], axis))) rc = -1;
  free(sizes);
  return rc ? rc : set_seq(n, 0, v);
}

/* ConcatFromSequence(seq): concatenated along axis, or stacked on a new one (new_axis). */
static int op_concat_from_sequence(ox_node *n) {
  const tg_onnx_value *s = seq_in(n, 0);
  if (!s) return -1;
  if (s->n == 0) return ox_fail(n, TG_ERR_ARG, "the sequence is empty");
  bool stack = ox_attr_i(n, "new_axis", 0) != 0;
  int axis = ox_axis(n, ox_attr_i(n, "axis", 0), tg_ndim(s->items[0]) + stack);
  if (axis < 0) return -1;
  return ox_set(n, 0, stack ? tg_stack(s->items, s->n, axis) : tg_cat(s->items, s->n, axis));
}

/* SequenceMap(seq, extra...): the body on each item, with each extra input's item (a sequence)
 * or itself (a tensor); every output is the sequence of the body's outputs. */
static int op_sequence_map(ox_node *n) {
  const tg_onnx_value *s = seq_in(n, 0);
  if (!s) return -1;
  for (int j = 1; j < n->nin; j++)
    if (VIN(j) && (VIN(j)->kind != TG_ONNX_SEQUENCE || VIN(j)->n != s->n))
      return ox_fail(n, TG_ERR_ARG, "input %d must be a tensor or a sequence as long as input 0", j);
  tg_onnx_value *outs[OX_MAX_IO];
  for (int k = 0; k < n->nout; k++)
    if (!(outs[k] = ox_new_value(n, TG_ONNX_SEQUENCE, s->n))) return -1;
  const Onnx__AttributeProto *body = ox_attr(n, "body");
  ox_val in[OX_MAX_IO], out[OX_MAX_IO];
  for (int i = 0; i < s->n; i++) {
    for (int j = 0; j < n->nin; j++) in[j] = (ox_val){j == 0 ? s->items[i] : VIN(j) ? VIN(j)->items[i] : IN(j), NULL};
    if (ox_run_subgraph(n, body ? body->g : NULL, in, n->nin, out, n->nout)) return -1;
    for (int k = 0; k < n->nout; k++)
      if (!(outs[k]->items[i] = out[k].t)) return ox_fail(n, TG_ERR_ARG, "the body's output %d is not a tensor", k);
  }
  for (int k = 0; k < n->nout; k++) n->vout[k] = outs[k];
  return 0;
}

/* Optional(x?): x, or none without it. */
static int op_optional(ox_node *n) {
  if (IN(0) || VIN(0)) return op_identity(n);
  return set_seq(n, 0, ox_new_value(n, TG_ONNX_NONE, 0));
}

static int op_optional_has_element(ox_node *n) {
  uint8_t has = IN(0) || (VIN(0) && VIN(0)->kind != TG_ONNX_NONE);
  return ox_set(n, 0, tg_from_data(&has, TG_BOOL, NULL, 0));
}

static int op_optional_get_element(ox_node *n) {
  if (!IN(0) && (!VIN(0) || VIN(0)->kind == TG_ONNX_NONE)) return ox_fail(n, TG_ERR_ARG, "the optional is empty");
  return op_identity(n);
}

const ox_op ox_ops_seq[] = {
    {"Identity", 1, op_identity, ""},
    {"If", 1, ox_op_if, "else_branch,then_branch"},
    {"Loop", 1, ox_op_loop, "body"},
    {"SequenceEmpty", 11, op_sequence_empty, "dtype"},
    {"SequenceConstruct", 11, op_sequence_construct, ""},
    {"SequenceAt", 11, op_sequence_at, ""},
    {"SequenceLength", 11, op_sequence_length, ""},
    {"SequenceInsert", 11, op_sequence_insert, ""},
    {"SequenceErase", 11, op_sequence_erase, ""},
    {"SplitToSequence", 11, op_split_to_sequence, "axis,keepdims"},
    {"ConcatFromSequence", 11, op_concat_from_sequence, "axis,new_axis"},
    {"SequenceMap", 17, op_sequence_map, "body"},
    {"Optional", 15, op_optional, "type"},
    {"OptionalHasElement", 15, op_optional_has_element, ""},
    {"OptionalGetElement", 15, op_optional_get_element, ""},
    {NULL, 0, NULL, NULL},
};

/* ---------------------------------------------------------------- declared kinds, files */

int ox_type_kind(const Onnx__TypeProto *tp) {
  if (!tp || tp->value_case == ONNX__TYPE_PROTO__VALUE__NOT_SET || tp->value_case == ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE)
    return TG_ONNX_TENSOR;
  int opt = 0;
  if (tp->value_case == ONNX__TYPE_PROTO__VALUE_OPTIONAL_TYPE) {
    if (!tp->optional_type || !(tp = tp->optional_type->elem_type)) return -1;
    if (tp->value_case == ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE) return TG_ONNX_TENSOR | TG_ONNX_OPTIONAL;
    opt = TG_ONNX_OPTIONAL;
  }
  if (tp->value_case != ONNX__TYPE_PROTO__VALUE_SEQUENCE_TYPE || !tp->sequence_type) return -1;
  const Onnx__TypeProto *elem = tp->sequence_type->elem_type;
  return elem && elem->value_case == ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE ? TG_ONNX_SEQUENCE | opt : -1;
}

/* A SequenceProto of tensors into out (tensors in the current scope). */
static int seq_from_proto(const Onnx__SequenceProto *sp, const char *path, tg_onnx_value *out) {
  bool tensors = sp->elem_type == ONNX__SEQUENCE_PROTO__DATA_TYPE__TENSOR ||
                 (sp->elem_type == ONNX__SEQUENCE_PROTO__DATA_TYPE__UNDEFINED && !sp->n_tensor_values);
  if (!tensors || sp->n_sparse_tensor_values || sp->n_sequence_values || sp->n_map_values || sp->n_optional_values)
    return tg_set_error(TG_ERR_ARG, "ONNX: %s: a sequence of element type %d (tg has sequences of tensors only)", path,
                        (int)sp->elem_type);
  if (sp->n_tensor_values > MAX_ITEMS) return tg_set_error(TG_ERR_ARG, "ONNX: %s: more than %d items", path, MAX_ITEMS);
  tg_tensor **items = calloc(sp->n_tensor_values + 1, sizeof *items);
  if (!items) return tg_set_error(TG_ERR_NOMEM, "ONNX: out of memory");
  for (size_t i = 0; i < sp->n_tensor_values; i++)
    if (!(items[i] = ox_tensor_from_proto(sp->tensor_values[i], NULL))) {
      while (i--) tg_free(items[i]);
      free(items);
      return tg_error_status_or(TG_ERR_IO);
    }
  *out = (tg_onnx_value){TG_ONNX_SEQUENCE, (int)sp->n_tensor_values, items};
  return 0;
}

static int tensor_value(tg_tensor *t, tg_onnx_value *out) {
  tg_tensor **items = t ? malloc(sizeof *items) : NULL;
  if (!items) return t ? (tg_free(t), tg_set_error(TG_ERR_NOMEM, "ONNX: out of memory")) : tg_error_status_or(TG_ERR_IO);
  items[0] = t;
  *out = (tg_onnx_value){TG_ONNX_TENSOR, 1, items};
  return 0;
}

/* An OptionalProto: none, a tensor or a sequence of tensors. */
static int optional_from_proto(const Onnx__OptionalProto *op, const char *path, tg_onnx_value *out) {
  if (op->tensor_value) return tensor_value(ox_tensor_from_proto(op->tensor_value, NULL), out);
  if (op->sequence_value) return seq_from_proto(op->sequence_value, path, out);
  if (op->sparse_tensor_value || op->map_value || op->optional_value)
    return tg_set_error(TG_ERR_ARG, "ONNX: %s: an optional of element type %d (tg has tensors and sequences)", path,
                        (int)op->elem_type);
  return 0; /* none */
}

int tg_onnx_load_value(const char *path, int kind, tg_onnx_value *out) {
  if (!path || !out) return tg_set_error(TG_ERR_ARG, "tg_onnx_load_value: NULL argument");
  *out = (tg_onnx_value){TG_ONNX_NONE, 0, NULL};
  if (kind == TG_ONNX_TENSOR) return tensor_value(tg_onnx_load_tensor(path), out);
  if (kind != TG_ONNX_SEQUENCE && kind != (TG_ONNX_SEQUENCE | TG_ONNX_OPTIONAL) && kind != (TG_ONNX_TENSOR | TG_ONNX_OPTIONAL))
    return tg_set_error(TG_ERR_ARG, "tg_onnx_load_value: kind %d is not one tg_onnx_input_kind gives", kind);
  size_t len;
  uint8_t *bytes = ox_read_file(path, (size_t)1 << 34, &len);
  if (!bytes) return tg_error_status_or(TG_ERR_IO);
  int rc;
  if (kind & TG_ONNX_OPTIONAL) {
    Onnx__OptionalProto *op = onnx__optional_proto__unpack(NULL, len, bytes);
    rc = op ? optional_from_proto(op, path, out)
            : tg_set_error(TG_ERR_IO, "ONNX: %s is not an OptionalProto (protobuf parse failed)", path);
    if (op) onnx__optional_proto__free_unpacked(op, NULL);
  } else {
    Onnx__SequenceProto *sp = onnx__sequence_proto__unpack(NULL, len, bytes);
    rc = sp ? seq_from_proto(sp, path, out)
            : tg_set_error(TG_ERR_IO, "ONNX: %s is not a SequenceProto (protobuf parse failed)", path);
    if (sp) onnx__sequence_proto__free_unpacked(sp, NULL);
  }
  free(bytes);
  return rc;
}
