/* load.c — tg_onnx_load, tg_onnx_run and the model's accessors. Loading parses the file with
 * protobuf-c, numbers every value (a name defined twice, or used and never defined, is an
 * error naming it), orders the nodes so each runs after its inputs (a cycle is an error) and
 * turns the initializers into tensors. Running walks that order, calling each op's handler
 * from the tables in ops_*.c inside a scope of its own. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "onnx/onnx_int.h"
#include "runtime/helpers.h"
#include "tensor/tensor.h"

#define OX_MAX_FILE ((size_t)1 << 34)   /* 16 GiB: the largest model file read */
#define OX_MAX_OUT_BYTES ((int64_t)1 << 32) /* 4 GiB: the largest value a node may produce by default */

/* The largest value a node may produce: TG_ONNX_MAX_BYTES, else 4 GiB (docs/onnx.md). */
static int64_t max_out_bytes(void) {
  const char *e = getenv("TG_ONNX_MAX_BYTES");
  long long v = e ? strtoll(e, NULL, 10) : 0;
  return v > 0 ? (int64_t)v : OX_MAX_OUT_BYTES;
}

/* ---------------------------------------------------------------- value names */

static uint64_t str_hash(const char *s) { return hash_bytes(s, strlen(s), 0x6f6e6e78); }

static int map_get(const ox_names *m, const char *key) {
  for (size_t i = str_hash(key) & (m->cap - 1);; i = (i + 1) & (m->cap - 1)) {
    if (!m->keys[i]) return -1;
    if (!strcmp(m->keys[i], key)) return m->vals[i];
  }
}

static void map_put(ox_names *m, const char *key, int val) {
  size_t i = str_hash(key) & (m->cap - 1);
  while (m->keys[i]) i = (i + 1) & (m->cap - 1);
  m->keys[i] = key, m->vals[i] = val;
}

/* ---------------------------------------------------------------- graph */

typedef struct builder {
  ox_graph *g;
  ox_names map;
  int *defined;        /* per value: 1 initializer, 2 graph input, 3 node output, 4 captured */
  const ox_env *outer; /* a subgraph's enclosing graphs, or NULL */
  size_t cap_values;   /* room in the value arrays */
} builder;

/* The value `name` has in the enclosing graphs: a tensor, or a sequence / none in *other;
 * false if none has it. */
static bool outer_value(const ox_env *e, const char *name, tg_tensor **t, const tg_onnx_value **other) {
  for (; e; e = e->parent) {
    int v = map_get(&e->g->map, name);
    if (v >= 0 && (e->vals[v] || e->others[v])) {
      *t = e->vals[v], *other = e->others[v];
      return true;
    }
  }
  return false;
}

/* Number a defined value; a name defined twice is an error (initializer + input is allowed). */
static int define(builder *b, const char *name, int how) {
  int v = map_get(&b->map, name);
  if (v >= 0) {
    bool init_input = (b->defined[v] == 1 && how == 2) || (b->defined[v] == 2 && how == 1);
    if (!init_input) return tg_set_error(TG_ERR_IO, "ONNX: value '%.200s' is defined twice", name), -1;
    if (how == 1) b->defined[v] = 1;
    return v;
  }
  v = b->g->nvals++;
  b->g->names[v] = name;
  b->defined[v] = how;
  map_put(&b->map, name, v);
  return v;
}

static int graph_alloc(builder *b, const Onnx__GraphProto *gp) {
  ox_graph *g = b->g;
  size_t names = gp->n_initializer + gp->n_input + gp->n_output;
  for (size_t i = 0; i < gp->n_node; i++) names += gp->node[i]->n_output + gp->node[i]->n_input;
  size_t cap = 16;
  while (cap < 2 * names + 2) cap *= 2;
  b->map.cap = cap;
  b->map.keys = calloc(cap, sizeof *b->map.keys);
  b->map.vals = calloc(cap, sizeof *b->map.vals);
  b->defined = calloc(names + 1, sizeof *b->defined);
  g->names = calloc(names + 1, sizeof *g->names);
  g->init = calloc(names + 1, sizeof *g->init);
  g->init_other = calloc(names + 1, sizeof *g->init_other);
  g->input_kinds = calloc(gp->n_input + 1, sizeof *g->input_kinds);
  g->output_kinds = calloc(gp->n_output + 1, sizeof *g->output_kinds);
  g->inputs = calloc(gp->n_input + 1, sizeof *g->inputs);
  g->input_names = calloc(gp->n_input + 1, sizeof *g->input_names);
  g->input_types = calloc(gp->n_input + 1, sizeof *g->input_types);
  g->outputs = calloc(gp->n_output + 1, sizeof *g->outputs);
  g->output_names = calloc(gp->n_output + 1, sizeof *g->output_names);
  g->nodes = calloc(gp->n_node + 1, sizeof *g->nodes);
  g->node_in = calloc(gp->n_node + 1, sizeof *g->node_in);
  g->node_out = calloc(gp->n_node + 1, sizeof *g->node_out);
  if (!b->map.keys || !b->map.vals || !b->defined || !g->names || !g->init || !g->init_other || !g->input_kinds ||
      !g->output_kinds || !g->inputs || !g->input_names || !g->input_types || !g->outputs || !g->output_names || !g->nodes || !g->node_in || !g->node_out)
    return tg_set_error(TG_ERR_NOMEM, "ONNX: out of memory for a graph of %zu values", names);
  return 0;
}

static const char *nz(const char *s) { return s ? s : ""; }

/* Initializers, graph inputs and node outputs get numbers. */
static int define_all(builder *b, const Onnx__GraphProto *gp) {
  for (size_t i = 0; i < gp->n_initializer; i++)
    if (!gp->initializer[i]->name || define(b, gp->initializer[i]->name, 1) < 0)
      return gp->initializer[i]->name ? -1 : tg_set_error(TG_ERR_IO, "ONNX: an initializer has no name");
  for (size_t i = 0; i < gp->n_input; i++)
    if (!gp->input[i]->name || define(b, gp->input[i]->name, 2) < 0)
      return gp->input[i]->name ? -1 : tg_set_error(TG_ERR_IO, "ONNX: a graph input has no name");
  for (size_t i = 0; i < gp->n_node; i++) {
    const Onnx__NodeProto *np = gp->node[i];
    if (!np->op_type) return tg_set_error(TG_ERR_IO, "ONNX: node %zu has no op_type", i);
    if (np->n_input > OX_MAX_IO || np->n_output > OX_MAX_IO)
      return tg_set_error(TG_ERR_IO, "ONNX %s node '%.100s': more than %d inputs or outputs", np->op_type,
                          nz(np->name), OX_MAX_IO);
    for (size_t j = 0; j < np->n_output; j++)
      if (np->output[j][0] && define(b, np->output[j], 3) < 0) return -1;
  }
  return 0;
}

/* A value used by a node or as a graph output must be defined (in a subgraph: here or in an
 * enclosing graph, whose value is captured). */
static int use(builder *b, const char *name, const char *who) {
  int v = map_get(&b->map, name);
  tg_tensor *t = NULL;
  const tg_onnx_value *other = NULL;
  if (v < 0 && b->outer && outer_value(b->outer, name, &t, &other)) { /* other: the run's, outlives g */
    v = b->g->nvals++;
    b->g->names[v] = name, b->defined[v] = 4, b->g->init[v] = tg_retain(t), b->g->init_other[v] = other;
    map_put(&b->map, name, v);
  }
  if (v < 0)
    return tg_set_error(TG_ERR_IO, "ONNX: %s uses value '%.200s', which nothing defines (a missing initializer?)", who,
                        name), -1;
  return v;
}

/* Resolve node inputs/outputs to numbers. */
static int resolve_nodes(builder *b, const Onnx__GraphProto *gp) {
  ox_graph *g = b->g;
  for (size_t i = 0; i < gp->n_node; i++) {
    const Onnx__NodeProto *np = gp->node[i];
    char who[200];
    snprintf(who, sizeof who, "%s node '%.100s'", np->op_type, nz(np->name));
    int *io = malloc((np->n_input + np->n_output + 1) * sizeof *io);
    if (!io) return tg_set_error(TG_ERR_NOMEM, "ONNX: out of memory");
    g->node_in[i] = io, g->node_out[i] = io + np->n_input;
    for (size_t j = 0; j < np->n_input; j++) {
      io[j] = -1; /* "": an omitted optional input */
      if (np->input[j][0] && (io[j] = use(b, np->input[j], who)) < 0) return -1;
    }
    for (size_t j = 0; j < np->n_output; j++) io[np->n_input + j] = np->output[j][0] ? map_get(&b->map, np->output[j]) : -1;
  }
  return 0;
}

/* Kahn's algorithm over the nodes: producer[v] is the node defining v. Nodes left over lie on
 * a cycle. The proto order is kept where it is already valid. */
static int order_nodes(builder *b, const Onnx__GraphProto *gp) {
  ox_graph *g = b->g;
  size_t nn = gp->n_node;
  int *producer = malloc((g->nvals + 1) * sizeof *producer), *done = calloc(g->nvals + 1, sizeof *done);
  int *placed = calloc(nn + 1, sizeof *placed), *rin = malloc((nn + 1) * sizeof *rin);
  int rc = 0;
  if (!producer || !done || !placed || !rin) rc = tg_set_error(TG_ERR_NOMEM, "ONNX: out of memory");
  for (int v = 0; !rc && v < g->nvals; v++) producer[v] = -1, done[v] = b->defined[v] != 3;
  for (size_t i = 0; !rc && i < nn; i++)
    for (size_t j = 0; j < gp->node[i]->n_output; j++)
      if (g->node_out[i][j] >= 0) producer[g->node_out[i][j]] = (int)i;
  size_t count = 0;
  for (bool progress = true; !rc && progress && count < nn;) { /* repeated sweeps: linear for sorted graphs */
    progress = false;
    for (size_t i = 0; i < nn; i++) {
      if (placed[i]) continue;
      bool ready = true;
      for (size_t j = 0; ready && j < gp->node[i]->n_input; j++) ready = g->node_in[i][j] < 0 || done[g->node_in[i][j]];
      if (!ready) continue;
      placed[i] = 1, progress = true;
      rin[count] = (int)i, g->nodes[count++] = gp->node[i];
      for (size_t j = 0; j < gp->node[i]->n_output; j++)
        if (g->node_out[i][j] >= 0) done[g->node_out[i][j]] = 1;
    }
  }
  if (!rc && count < nn) {
    size_t i = 0;
    while (placed[i]) i++;
    rc = tg_set_error(TG_ERR_IO, "ONNX: the graph has a cycle (node %s '%.100s' can never run)", gp->node[i]->op_type,
                      nz(gp->node[i]->name));
  }
  if (!rc) { /* node_in/node_out follow the run order */
    int **in = malloc((nn + 1) * sizeof *in);
    if (!in) rc = tg_set_error(TG_ERR_NOMEM, "ONNX: out of memory");
    for (size_t k = 0; !rc && k < nn; k++) in[k] = g->node_in[rin[k]];
    for (size_t k = 0; !rc && k < nn; k++) g->node_in[k] = in[k], g->node_out[k] = in[k] + g->nodes[k]->n_input;
    free(in);
  }
  free(producer), free(done), free(placed), free(rin);
  return rc;
}

/* Initializer tensors (user-owned references, outside any scope) and the free inputs. */
static int bind_values(builder *b, const Onnx__GraphProto *gp, const char *dir) {
  ox_graph *g = b->g;
  tg_scope *s = tg_scope_begin();
  int rc = 0;
  for (size_t i = 0; !rc && i < gp->n_initializer; i++) {
    tg_tensor *t = ox_tensor_from_proto(gp->initializer[i], dir);
    if (!t) rc = tg_error_status_or(TG_ERR_IO);
    else g->init[map_get(&b->map, gp->initializer[i]->name)] = tg_retain(t);
  }
  tg_scope_end(s);
  for (size_t i = 0; !rc && i < gp->n_input; i++) {
    int v = map_get(&b->map, gp->input[i]->name);
    if (b->defined[v] != 2) continue;
    const Onnx__TypeProto *tp = gp->input[i]->type;
    g->input_types[g->ninputs] = tp && tp->value_case == ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE ? tp->tensor_type : NULL;
    g->input_kinds[g->ninputs] = ox_type_kind(tp);
    g->input_names[g->ninputs] = gp->input[i]->name, g->inputs[g->ninputs++] = v;
  }
  for (size_t i = 0; !rc && i < gp->n_output; i++) {
    const char *name = gp->output[i]->name;
    int v = name ? use(b, name, "a graph output") : -1;
    if (v < 0) rc = name ? -1 : tg_set_error(TG_ERR_IO, "ONNX: a graph output has no name");
    else {
      g->output_kinds[g->noutputs] = ox_type_kind(gp->output[i]->type);
      g->output_names[g->noutputs] = name, g->outputs[g->noutputs++] = v;
    }
  }
  return rc < 0 ? tg_error_status_or(TG_ERR_IO) : 0;
}

static int graph_build(ox_graph *g, const Onnx__GraphProto *gp, const char *dir, const ox_env *outer) {
  builder b = {.g = g, .outer = outer};
  g->gp = gp;
  int rc = graph_alloc(&b, gp);
  if (!rc) rc = define_all(&b, gp);
  if (!rc) rc = resolve_nodes(&b, gp);
  if (!rc) rc = order_nodes(&b, gp);
  if (!rc) rc = bind_values(&b, gp, dir);
  g->nnodes = (int)gp->n_node;
  g->map = b.map; /* kept: subgraphs look names up in it */
  free(b.defined);
  return rc < 0 ? tg_error_status_or(TG_ERR_IO) : 0;
}

static void graph_free(ox_graph *g) {
  for (int v = 0; g->init && v < g->nvals; v++) tg_free(g->init[v]);
  for (int i = 0; g->node_in && i < g->nnodes; i++) free(g->node_in[i]);
  free(g->names), free(g->init), free(g->init_other), free(g->input_kinds), free(g->output_kinds), free(g->inputs), free(g->input_names), free(g->input_types), free(g->outputs), free(g->output_names);
  free(g->nodes), free(g->node_in), free(g->node_out), free(g->map.keys), free(g->map.vals);
}

/* ---------------------------------------------------------------- model */

/* The default domain's opset (ai.onnx); other domains' nodes fail when they run. */
static int model_opset(const Onnx__ModelProto *mp) {
  for (size_t i = 0; i < mp->n_opset_import; i++) {
    const char *d = mp->opset_import[i]->domain;
    if (!d || !d[0] || !strcmp(d, "ai.onnx")) return (int)mp->opset_import[i]->version;
  }
  return 1;
}

static char *dir_of(const char *path) {
  const char *slash = strrchr(path, '/');
  size_t n = slash ? (size_t)(slash - path) : 1;
  char *d = malloc(n + 1);
  if (!d) return NULL;
  memcpy(d, slash ? path : ".", n);
  d[n] = 0;
  return d;
}

tg_onnx_model *tg_onnx_load(const char *path) {
  if (!path) return tg_set_error(TG_ERR_ARG, "tg_onnx_load: NULL path"), NULL;
  size_t len;
  uint8_t *bytes = ox_read_file(path, OX_MAX_FILE, &len);
  if (!bytes) return NULL;
  tg_onnx_model *m = calloc(1, sizeof *m);
  if (m) m->proto = onnx__model_proto__unpack(NULL, len, bytes);
  free(bytes);
  if (!m) return tg_set_error(TG_ERR_NOMEM, "tg_onnx_load: out of memory"), NULL;
  int rc = 0;
  if (!m->proto) rc = tg_set_error(TG_ERR_IO, "ONNX: %s is not an ONNX model (protobuf parse failed)", path);
  else if (!m->proto->graph) rc = tg_set_error(TG_ERR_IO, "ONNX: %s has no graph", path);
  else if (!(m->dir = dir_of(path)) || !(m->replays = ox_replays_new())) rc = tg_set_error(TG_ERR_NOMEM, "tg_onnx_load: out of memory");
  if (!rc) {
    m->opset = model_opset(m->proto);
    rc = graph_build(&m->g, m->proto->graph, m->dir, NULL);
  }
  if (rc) {
    tg_onnx_free(m);
    return NULL;
  }
  return m;
}

void tg_onnx_free(tg_onnx_model *m) {
  if (!m) return;
  ox_replays_free(m->replays); /* its recordings hold initializers' buffers */
  graph_free(&m->g);
  if (m->proto) onnx__model_proto__free_unpacked(m->proto, NULL);
  free(m->dir);
  free(m);
}

int tg_onnx_num_inputs(const tg_onnx_model *m) { return m ? m->g.ninputs : -1; }
int tg_onnx_num_outputs(const tg_onnx_model *m) { return m ? m->g.noutputs : -1; }

int tg_onnx_input_info(const tg_onnx_model *m, int i, tg_dtype *dtype, int64_t *shape, int cap) {
  if (!m || i < 0 || i >= m->g.ninputs || !m->g.input_types[i]) return -1;
  const Onnx__TypeProto__Tensor *tt = m->g.input_types[i];
  int dt = tt->has_elem_type ? ox_dtype_quiet(tt->elem_type) : -1;
  if (dtype) *dtype = dt >= 0 ? (tg_dtype)dt : TG_DTYPE_COUNT;
  if (!tt->shape) return -1;
  for (size_t d = 0; d < tt->shape->n_dim && shape && (int)d < cap; d++) {
    const Onnx__TensorShapeProto__Dimension *dim = tt->shape->dim[d];
    shape[d] = dim->value_case == ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE ? dim->dim_value : -1;
  }
  return (int)tt->shape->n_dim;
}
const char *tg_onnx_input_name(const tg_onnx_model *m, int i) {
  return m && i >= 0 && i < m->g.ninputs ? m->g.input_names[i] : NULL;
}
const char *tg_onnx_output_name(const tg_onnx_model *m, int i) {
  return m && i >= 0 && i < m->g.noutputs ? m->g.output_names[i] : NULL;
}

/* ---------------------------------------------------------------- run */

/* Every attribute of the node must be one the handler reads. */
static int check_attrs(const ox_node *n, const ox_op *op) {
  for (size_t i = 0; i < n->np->n_attribute; i++) {
    const char *a = n->np->attribute[i]->name ? n->np->attribute[i]->name : "";
    size_t la = strlen(a);
    const char *p = op->attrs;
    bool known = false;
    while (p && *p && !known) {
      const char *e = strchr(p, ',');
      size_t l = e ? (size_t)(e - p) : strlen(p);
      known = l == la && !strncmp(p, a, l);
      p = e ? e + 1 : NULL;
    }
    if (!known) return ox_fail(n, TG_ERR_ARG, "attribute '%s' is not supported", a);
  }
  return 0;
}

/* ---- values that are not tensors: sequences and nones, owned by the run's arena */

static const tg_onnx_value ox_none = {TG_ONNX_NONE, 0, NULL};

tg_onnx_value *ox_new_value(const ox_node *n, tg_onnx_kind kind, int count) {
  if (kind == TG_ONNX_NONE) return (tg_onnx_value *)&ox_none; /* never written: handlers get it const */
  ox_arena *a = n->env->arena;
  if (a->n == a->cap) {
    int cap = a->cap ? 2 * a->cap : 16;
    tg_onnx_value **v = realloc(a->v, (size_t)cap * sizeof *v);
    if (!v) return tg_set_error(TG_ERR_NOMEM, "ONNX: out of memory"), NULL;
    a->v = v, a->cap = cap;
  }
  tg_onnx_value *v = calloc(1, sizeof *v);
  if (v) v->items = calloc((size_t)(count > 0 ? count : 1), sizeof *v->items);
  if (!v || !v->items) return free(v), tg_set_error(TG_ERR_NOMEM, "ONNX: out of memory"), NULL;
  v->kind = kind, v->n = count;
  return a->v[a->n++] = v;
}

static void arena_free(ox_arena *a) {
  for (int i = 0; i < a->n; i++) free(a->v[i]->items), free(a->v[i]);
  free(a->v);
}

static const char *kind_name(int kind) {
  static const char *names[] = {"a type tg does not have (a map, a sparse tensor, nested sequences)", "a tensor",
                                "a sequence", "none"};
  if (kind < 0) return names[0];
  kind &= ~TG_ONNX_OPTIONAL;
  return kind >= 1 && kind <= 3 ? names[kind] : "an unknown kind";
}

/* Run node k of e's graph: look its op up, check attributes, call, check outputs. */
static int bind_inputs(ox_node *n, bool values, int k) {
  const ox_env *e = n->env;
  for (int i = 0; i < n->nin; i++) {
    int v = e->g->node_in[k][i];
    n->in[i] = v >= 0 ? e->vals[v] : NULL, n->vin[i] = v >= 0 ? e->others[v] : NULL;
    if (n->vin[i] && !values)
      return ox_fail(n, TG_ERR_ARG, "input %d is %s; this op takes tensors", i, kind_name(n->vin[i]->kind));
  }
  return 0;
}

/* Output i into value v: a sequence or none as it is, a tensor no larger than the limit. */
static int store_output(ox_node *n, int i, int v) {
  const ox_env *e = n->env;
  e->vals[v] = n->vout[i] ? NULL : n->out[i], e->others[v] = n->vout[i];
  if (n->vout[i]) return 0;
  if (!n->out[i]) return ox_fail(n, TG_ERR_ARG, "output %d was not produced", i);
  int64_t bytes;
  if (!ck_mul(tg_numel(n->out[i]), (int64_t)tg_dtype_size(tg_get_dtype(n->out[i])), &bytes) || bytes > max_out_bytes())
    return ox_fail(n, TG_ERR_SHAPE, "output %d would take more than %lld bytes (TG_ONNX_MAX_BYTES)", i,
                   (long long)max_out_bytes());
  return 0;
}

/* A watched run (replay.c): node k's outputs are computed from an input's data if one of its
 * inputs is (but for Shape and Size, which read only the shape); a host read of such a value
 * (an input that is, or a tensor the handler made from its inputs) marks the run. */
static void note_data_reads(const ox_node *n, int k, const ox_reads *r) {
  const ox_env *e = n->env;
  const int *in = e->g->node_in[k], *out = e->g->node_out[k];
  bool any = false;
  for (int i = 0; i < n->nin; i++) any |= in[i] >= 0 && e->derived[in[i]];
  for (int j = 0; j < r->n + r->more; j++) {
    bool from_data = any; /* a tensor the handler made, or one past the list */
    for (int i = 0; j < r->n && i < n->nin; i++)
      if (n->in[i] && n->in[i] == r->t[j]) { from_data = e->derived[in[i]]; break; }
    if (from_data) *e->reads_data = true;
  }
  bool shape_only = !strcmp(n->np->op_type, "Shape") || !strcmp(n->np->op_type, "Size");
  for (int i = 0; i < n->nout; i++)
    if (out[i] >= 0) e->derived[out[i]] = any && !shape_only;
}

static int run_node(const ox_env *e, int k) {
  const ox_graph *g = e->g;
  int opset = e->m->opset;
  ox_node n = {.np = g->nodes[k], .env = e, .opset = opset};
  const char *dom = n.np->domain;
  if (dom && dom[0] && strcmp(dom, "ai.onnx"))
    return ox_fail(&n, TG_ERR_ARG, "op domain '%s' is not supported", dom);
  bool values;
  const ox_op *op = ox_find_op(n.np->op_type, &values);
  if (!op) return ox_fail(&n, TG_ERR_ARG, "op %s is not supported", n.np->op_type);
  if (opset < op->min_opset)
    return ox_fail(&n, TG_ERR_ARG, "opset %d is older than the %d this op is implemented for", opset, op->min_opset);
  if (check_attrs(&n, op)) return TG_ERR_ARG;
  n.nin = (int)n.np->n_input, n.nout = (int)n.np->n_output;
  if (bind_inputs(&n, values, k)) return TG_ERR_ARG;
  tg_clear_error();
  ox_reads reads = {0};
  if (e->derived) ox_watch_reads(&reads);
  int rc = op->fn(&n);
  if (e->derived) ox_watch_reads(NULL), note_data_reads(&n, k, &reads);
  for (int i = 0; rc == 0 && i < n.nout; i++)
    if (g->node_out[k][i] >= 0 && store_output(&n, i, g->node_out[k][i])) return tg_error_status_or(TG_ERR_ARG);
  if (rc < 0) {
    const char *msg0 = tg_last_error();
    if (!strstr(msg0, n.np->op_type)) {
      char msg[600];
      snprintf(msg, sizeof msg, "%s", msg0[0] ? msg0 : "failed");
      ox_fail(&n, tg_error_status_or(TG_ERR_ARG), "%s", msg);
    }
    return tg_error_status_or(TG_ERR_ARG);
  }
  return 0;
}

static int run_nodes(const ox_env *e) {
  int rc = 0;
  for (int k = 0; !rc && k < e->g->nnodes; k++) rc = run_node(e, k);
  return rc;
}

/* The value arrays of a run of g: initializers (and captured values) first. */
static int env_values(const ox_graph *g, tg_tensor ***vals, const tg_onnx_value ***others) {
  *vals = calloc((size_t)g->nvals + 1, sizeof **vals);
  *others = calloc((size_t)g->nvals + 1, sizeof **others);
  if (!*vals || !*others) return free(*vals), free(*others), tg_set_error(TG_ERR_NOMEM, "ONNX: out of memory");
  for (int v = 0; v < g->nvals; v++) (*vals)[v] = g->init[v], (*others)[v] = g->init_other[v];
  return 0;
}

#define OX_MAX_DEPTH 16 /* subgraphs inside subgraphs */

int ox_run_subgraph(ox_node *n, const Onnx__GraphProto *gp, const ox_val *in, int nin, ox_val *out, int nout) {
  const ox_env *outer = n->env;
  if (!gp) return ox_fail(n, TG_ERR_ARG, "a graph attribute is missing");
  if (outer->depth >= OX_MAX_DEPTH) return ox_fail(n, TG_ERR_ARG, "subgraphs nested more than %d deep", OX_MAX_DEPTH);
  ox_graph g = {0};
  int rc = graph_build(&g, gp, outer->m->dir, outer);
  if (!rc && (nin != g.ninputs || nout != g.noutputs))
    rc = ox_fail(n, TG_ERR_ARG, "the subgraph has %d inputs and %d outputs, not %d and %d", g.ninputs, g.noutputs, nin,
                 nout);
  tg_tensor **vals = NULL;
  const tg_onnx_value **others = NULL;
  if (!rc) rc = env_values(&g, &vals, &others);
  for (int i = 0; !rc && i < nin; i++) vals[g.inputs[i]] = in[i].t, others[g.inputs[i]] = in[i].v;
  /* not watched: its host reads count for the node that runs it */
  ox_env e = {outer->m, &g, vals, others, outer->arena, outer, outer->depth + 1, NULL, NULL};
  if (!rc) rc = run_nodes(&e);
  for (int i = 0; !rc && i < nout; i++) { /* new handles: an initializer dies with g */
    int v = g.outputs[i];
    out[i] = (ox_val){vals[v] ? tensor_wrap(vals[v]->u) : NULL, others[v]};
    if (!out[i].t && !out[i].v) rc = ox_fail(n, TG_ERR_ARG, "subgraph output '%s' has no value", g.output_names[i]);
  }
  free(vals), free(others);
  graph_free(&g);
  return rc;
}

static int check_run_args(const tg_onnx_model *m, const void *inputs, int n_inputs, const void *outputs, int n_outputs) {
  if (!m || !outputs || (n_inputs && !inputs)) return tg_set_error(TG_ERR_ARG, "tg_onnx_run: NULL argument");
  if (n_inputs != m->g.ninputs)
    return tg_set_error(TG_ERR_ARG, "tg_onnx_run: %d inputs given, the model has %d", n_inputs, m->g.ninputs);
  if (n_outputs != m->g.noutputs)
    return tg_set_error(TG_ERR_ARG, "tg_onnx_run: %d outputs asked for, the model has %d", n_outputs, m->g.noutputs);
  return 0;
}

/* Input i against its declared element type. (Not its shape: ONNX's own test data gives
 * inputs of other shapes than declared.) A bfloat16 input may come as uint16 bits (how onnx
 * 1.12's numpy_helper stores bfloat16). */
static int check_input(const ox_graph *g, int i, tg_tensor **t) {
  const Onnx__TypeProto__Tensor *tt = g->input_types[i];
  if (!*t || !tt) return 0;
  int want = tt->has_elem_type ? ox_dtype_quiet(tt->elem_type) : -1;
  tg_dtype have = tg_get_dtype(*t);
  if (want == TG_BFLOAT16 && have == TG_UINT16) *t = tg_bitcast(*t, TG_BFLOAT16), have = TG_BFLOAT16;
  if (want >= 0 && (int)have != want)
    return tg_set_error(TG_ERR_ARG, "tg_onnx_run: input '%s' is %s, the model declares %s", g->input_names[i],
                        tg_dtype_name(have), tg_dtype_name((tg_dtype)want));
  return 0;
}

/* Input i of tg_onnx_run_values into the run's value slots: its kind against the declared one. */
static int bind_input(const ox_graph *g, int i, const tg_onnx_value *in, tg_tensor **t, const tg_onnx_value **other) {
  int want = g->input_kinds[i];
  const char *name = g->input_names[i];
  *t = NULL, *other = NULL;
  if (in->kind == TG_ONNX_NONE) { /* an empty optional; for another input, omitted (tg_onnx_run's NULL) */
    if (want >= 0 && (want & TG_ONNX_OPTIONAL)) *other = in;
    return 0;
  }
  if (want < 0 || (int)in->kind != (want & ~TG_ONNX_OPTIONAL))
    return tg_set_error(TG_ERR_ARG, "tg_onnx_run: input '%s' is %s, the model declares %s%s", name, kind_name(in->kind),
                        want >= 0 && (want & TG_ONNX_OPTIONAL) ? "an optional of " : "", kind_name(want));
  bool items_ok = in->kind != TG_ONNX_TENSOR || in->n == 1;
  for (int j = 0; items_ok && j < in->n; j++) items_ok = in->items && in->items[j];
  if (!items_ok || in->n < 0)
    return tg_set_error(TG_ERR_ARG, "tg_onnx_run: input '%s': a NULL item or a wrong count", name);
  *t = in->kind == TG_ONNX_TENSOR ? in->items[0] : NULL, *other = in->kind == TG_ONNX_TENSOR ? NULL : in;
  return *t ? check_input(g, i, t) : 0;
}

/* Output value v of a finished run as a tg_onnx_value holding retained tensors. */
static int take_output(const ox_graph *g, int i, tg_tensor *t, const tg_onnx_value *other, tg_onnx_value *out) {
  if (!t && !other)
    return tg_set_error(TG_ERR_ARG, "tg_onnx_run: graph output '%s' has no value (an input left NULL?)",
                        g->output_names[i]);
  out->kind = t ? TG_ONNX_TENSOR : other->kind, out->n = t ? 1 : other->n;
  if (out->kind == TG_ONNX_NONE) return 0;
  if (!(out->items = calloc((size_t)out->n + 1, sizeof *out->items)))
    return tg_set_error(TG_ERR_NOMEM, "tg_onnx_run: out of memory");
  for (int j = 0; j < out->n; j++) out->items[j] = tg_retain(t ? t : other->items[j]);
  return 0;
}

/* Retained handles -> handles of the caller's scope (or nothing, after an error). */
static void into_callers_scope(tg_onnx_value *outputs, int n_outputs, int rc) {
  for (int i = 0; i < n_outputs; i++) {
    for (int j = 0; outputs[i].items && j < outputs[i].n; j++) {
      tg_tensor *t = outputs[i].items[j];
      outputs[i].items[j] = rc ? NULL : tensor_wrap(t->u);
      tg_free(t);
    }
    if (rc) tg_onnx_value_clear(&outputs[i]);
  }
}

/* Run m on tensor inputs tin (NULL: omitted) or value inputs vin; outputs as values in the
 * caller's scope. reads_data: watch the run (ox_env.derived). */
static int run_model(tg_onnx_model *m, tg_tensor *const *tin, const tg_onnx_value *vin, int n_inputs,
                     tg_onnx_value *outputs, int n_outputs, bool *reads_data) {
  for (int i = 0; i < n_outputs; i++) outputs[i] = ox_none;
  const ox_graph *g = &m->g;
  tg_tensor **vals;
  const tg_onnx_value **others;
  int rc = env_values(g, &vals, &others);
  if (rc) return rc;
  uint8_t *derived = reads_data ? calloc((size_t)g->nvals + 1, 1) : NULL;
  if (reads_data && !derived) return free(vals), free(others), tg_set_error(TG_ERR_NOMEM, "ONNX: out of memory");
  for (int i = 0; derived && i < n_inputs; i++) derived[g->inputs[i]] = 1;
  ox_arena arena = {0};
  tg_scope *s = tg_scope_begin();
  for (int i = 0; !rc && i < n_inputs; i++) {
    int v = g->inputs[i];
    if (vin) rc = bind_input(g, i, &vin[i], &vals[v], &others[v]);
    else vals[v] = tin[i], rc = check_input(g, i, &vals[v]);
  }
  ox_env e = {m, g, vals, others, &arena, NULL, 0, derived, reads_data};
  if (!rc) rc = run_nodes(&e);
  for (int i = 0; !rc && i < n_outputs; i++) rc = take_output(g, i, vals[g->outputs[i]], others[g->outputs[i]], &outputs[i]);
  tg_scope_end(s);
  into_callers_scope(outputs, n_outputs, rc);
  arena_free(&arena);
  free(vals), free(others), free(derived);
  return rc;
}

int tg_onnx_run_values(tg_onnx_model *m, const tg_onnx_value *inputs, int n_inputs, tg_onnx_value *outputs,
                       int n_outputs) {
  int rc = check_run_args(m, inputs, n_inputs, outputs, n_outputs);
  return rc ? rc : run_model(m, NULL, inputs, n_inputs, outputs, n_outputs, NULL);
}

int ox_run_tensors(tg_onnx_model *m, tg_tensor *const *inputs, int n_inputs, tg_tensor **outputs, int n_outputs,
                   bool *reads_data) {
  int rc = check_run_args(m, inputs, n_inputs, outputs, n_outputs);
  if (rc) return rc;
  for (int i = 0; i < n_outputs; i++) outputs[i] = NULL;
  tg_onnx_value *out = calloc((size_t)n_outputs + 1, sizeof *out);
  if (!out) return tg_set_error(TG_ERR_NOMEM, "tg_onnx_run: out of memory");
  rc = run_model(m, inputs, NULL, n_inputs, out, n_outputs, reads_data);
  for (int i = 0; !rc && i < n_outputs; i++)
    if (out[i].kind != TG_ONNX_TENSOR)
      rc = tg_set_error(TG_ERR_ARG, "tg_onnx_run: output '%s' is %s: use tg_onnx_run_values", m->g.output_names[i],
                        kind_name(out[i].kind));
  for (int i = 0; i < n_outputs; i++) {
    if (out[i].kind == TG_ONNX_TENSOR) {
      if (rc) tg_free(out[i].items[0]);
      else outputs[i] = out[i].items[0];
    }
    tg_onnx_value_clear(&out[i]);
  }
  free(out);
  return rc;
}

void tg_onnx_value_clear(tg_onnx_value *v) {
  if (!v) return;
  free(v->items);
  *v = ox_none;
}

int tg_onnx_input_kind(const tg_onnx_model *m, int i) {
  return m && i >= 0 && i < m->g.ninputs ? m->g.input_kinds[i] : -1;
}
int tg_onnx_output_kind(const tg_onnx_model *m, int i) {
  return m && i >= 0 && i < m->g.noutputs ? m->g.output_kinds[i] : -1;
}
