/* ops_control.c — ONNX control flow: If, Loop and Scan run their subgraphs (attributes of type
 * GRAPH) through ox_run_subgraph, which lets a subgraph use the values of the graphs around
 * it. Conditions and trip counts are read on the host; Loop and Scan unroll. */
#include <stdlib.h>
#include <string.h>

#include "onnx/onnx_int.h"
#include "runtime/helpers.h"

#define IN(i) (n->nin > (i) ? n->in[i] : NULL)
#define MAX_ITERS 4096

static const Onnx__GraphProto *graph_attr(const ox_node *n, const char *name) {
  const Onnx__AttributeProto *a = ox_attr(n, name);
  return a ? a->g : NULL;
}

/* A node's input i as a subgraph value (a tensor, a sequence or none). */
static ox_val in_val(const ox_node *n, int i) { return (ox_val){n->in[i], n->vin[i]}; }

/* A subgraph's value as the node's output i. */
static void set_out(ox_node *n, int i, ox_val v) { n->out[i] = v.t, n->vout[i] = v.v; }

/* If: the branch the (host-read) condition picks; its outputs may be sequences or nones. */
int ox_op_if(ox_node *n) {
  int64_t c;
  if (ox_host_ints(IN(0), &c, 1) != 1) return ox_fail(n, TG_ERR_ARG, "cond must be one value");
  ox_val out[OX_MAX_IO];
  int rc = ox_run_subgraph(n, graph_attr(n, c ? "then_branch" : "else_branch"), NULL, 0, out, n->nout);
  for (int i = 0; !rc && i < n->nout; i++) set_out(n, i, out[i]);
  return rc;
}

/* Loop: body(iteration, cond, carried...) -> (cond, carried..., scan outputs...), while the
 * trip count M (optional) and cond (optional) allow; scan outputs are stacked on a new axis 0.
 * Carried values may be sequences or nones; scan outputs are tensors. */
int ox_op_loop(ox_node *n) {
  int64_t M = MAX_ITERS, c = 1;
  if (IN(0) && ox_host_ints(IN(0), &M, 1) != 1) return ox_fail(n, TG_ERR_ARG, "M must be one value");
  if (IN(1) && ox_host_ints(IN(1), &c, 1) != 1) return ox_fail(n, TG_ERR_ARG, "cond must be one value");
  if (!IN(0) && !IN(1)) return ox_fail(n, TG_ERR_ARG, "a Loop without M or cond never ends");
  if (M > MAX_ITERS) return ox_fail(n, TG_ERR_ARG, "trip count %lld (at most %d unrolled)", (long long)M, MAX_ITERS);
  int nc = n->nin - 2, ns = n->nout - nc; /* carried values, scan outputs */
  if (nc < 0 || ns < 0) return ox_fail(n, TG_ERR_ARG, "inputs and outputs do not match");
  ox_val state[OX_MAX_IO], in[OX_MAX_IO], out[OX_MAX_IO];
  tg_tensor **scans = calloc((size_t)(ns ? ns : 1) * MAX_ITERS, sizeof *scans);
  if (!scans) return tg_set_error(TG_ERR_NOMEM, "out of memory");
  for (int i = 0; i < nc; i++) state[i] = in_val(n, 2 + i);
  int64_t it = 0;
  int rc = 0;
  for (; !rc && it < M && c; it++) {
    int64_t iv = it;
    uint8_t cv = 1;
    in[0] = (ox_val){tg_from_data(&iv, TG_INT64, NULL, 0), NULL}, in[1] = (ox_val){tg_from_data(&cv, TG_BOOL, NULL, 0), NULL};
    for (int i = 0; i < nc; i++) in[2 + i] = state[i];
    rc = ox_run_subgraph(n, graph_attr(n, "body"), in, 2 + nc, out, 1 + nc + ns);
    if (!rc && ox_host_ints(out[0].t, &c, 1) != 1) rc = ox_fail(n, TG_ERR_ARG, "the body's cond must be one value");
    for (int i = 0; !rc && i < nc; i++) state[i] = out[1 + i];
    for (int i = 0; !rc && i < ns; i++)
      if (!(scans[i * MAX_ITERS + it] = out[1 + nc + i].t)) rc = ox_fail(n, TG_ERR_ARG, "scan output %d is not a tensor", i);
  }
  for (int i = 0; !rc && i < nc; i++) set_out(n, i, state[i]);
  for (int i = 0; !rc && i < ns; i++)
    if (!it || !(n->out[nc + i] = tg_stack(scans + i * MAX_ITERS, (int)it, 0)))
      rc = it ? -1 : ox_fail(n, TG_ERR_ARG, "a scan output of a loop that ran no iteration has no shape");
  free(scans);
  return rc;
}

/* Scan (opset 9+): body(states..., one slice of each scan input...) -> (states..., scan output
 * slices...), along each input's axis and direction; outputs stacked along theirs. */
static int op_scan(ox_node *n) {
  int m = (int)ox_attr_i(n, "num_scan_inputs", 0), ns = n->nin - m, no = n->nout - ns;
  int64_t ia[OX_MAX_IO] = {0}, id[OX_MAX_IO] = {0}, oa[OX_MAX_IO] = {0}, od[OX_MAX_IO] = {0};
  if (m < 1 || ns < 0 || no < 0) return ox_fail(n, TG_ERR_ARG, "num_scan_inputs does not match the inputs");
  if (ox_attr_ints(n, "scan_input_axes", ia, OX_MAX_IO) < -1 || ox_attr_ints(n, "scan_input_directions", id, OX_MAX_IO) < -1 ||
      ox_attr_ints(n, "scan_output_axes", oa, OX_MAX_IO) < -1 || ox_attr_ints(n, "scan_output_directions", od, OX_MAX_IO) < -1)
    return -1;
  int axes[OX_MAX_IO];
  for (int j = 0; j < m; j++)
    if ((axes[j] = ox_axis(n, ia[j], tg_ndim(n->in[ns + j]))) < 0) return -1;
  int64_t T = tg_dim(n->in[ns], axes[0]);
  if (T < 1 || T > MAX_ITERS) return ox_fail(n, TG_ERR_ARG, "sequence length %lld", (long long)T);
  ox_val state[OX_MAX_IO], in[OX_MAX_IO], out[OX_MAX_IO];
  tg_tensor **scans = calloc((size_t)(no ? no : 1) * (size_t)T, sizeof *scans);
  if (!scans) return tg_set_error(TG_ERR_NOMEM, "out of memory");
  for (int i = 0; i < ns; i++) state[i] = (ox_val){n->in[i], NULL};
  int rc = 0;
  for (int64_t t = 0; !rc && t < T; t++) {
    for (int i = 0; i < ns; i++) in[i] = state[i];
    for (int j = 0; j < m; j++) {
      int64_t k = id[j] ? T - 1 - t : t;
      in[ns + j] = (ox_val){tg_squeeze(tg_slice(n->in[ns + j], axes[j], k, k + 1, 1), axes[j]), NULL};
    }
    rc = ox_run_subgraph(n, graph_attr(n, "body"), in, ns + m, out, ns + no);
    for (int i = 0; !rc && i < ns + no; i++)
      if (!out[i].t) rc = ox_fail(n, TG_ERR_ARG, "the body's output %d is not a tensor", i);
    for (int i = 0; !rc && i < ns; i++) state[i] = out[i];
    for (int i = 0; !rc && i < no; i++) scans[i * T + t] = out[ns + i].t;
  }
  for (int i = 0; !rc && i < ns; i++) n->out[i] = state[i].t;
  for (int i = 0; !rc && i < no; i++) {
    if (od[i]) /* reverse: the last step's slice comes first */
      for (int64_t a = 0, b = T - 1; a < b; a++, b--) {
        tg_tensor *tmp = scans[i * T + a];
        scans[i * T + a] = scans[i * T + b], scans[i * T + b] = tmp;
      }
    int ax = ox_axis(n, oa[i], tg_ndim(scans[i * T]) + 1);
    if (ax < 0 || !(n->out[ns + i] = tg_stack(scans + i * T, (int)T, ax))) rc = -1;
  }
  free(scans);
  return rc;
}

const ox_op ox_ops_control[] = {
    {"Scan", 9, op_scan, "body,num_scan_inputs,scan_input_axes,scan_input_directions,scan_output_axes,scan_output_directions"},
    {NULL, 0, NULL, NULL},
};
