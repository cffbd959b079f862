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

/* A scan's loop: body(states..., one slice of each scan input...) -> (states..., scan output
 * slices...) over T steps along axes[j] of xs[j] (reversed where dirs[j]); final states into
 * out[0..ns), scan outputs stacked along oa[i] (reversed where od[i]) into out[ns..). */
typedef struct scan_spec {
  int ns, m, no;
  const int64_t *dirs, *oa, *od;
  const int *axes;
} scan_spec;

static int scan_loop(ox_node *n, const scan_spec *sp, tg_tensor **states, tg_tensor **xs, tg_tensor **out) {
  int ns = sp->ns, m = sp->m, no = sp->no;
  int64_t T = tg_dim(xs[0], sp->axes[0]);
  if (T < 1 || T > MAX_ITERS) return ox_fail(n, TG_ERR_ARG, "sequence length %lld", (long long)T);
  ox_val state[OX_MAX_IO], in[OX_MAX_IO], res[OX_MAX_IO];
  tg_tensor **scans = calloc((size_t)(no ? no : 1) * (size_t)T, sizeof *scans);
  if (!scans) return tg_set_error(TG_ERR_NOMEM, "out of memory");
  for (int i = 0; i < ns; i++) state[i] = (ox_val){states[i], NULL};
  int rc = 0;
  for (int64_t t = 0; !rc && t < T; t++) {
    for (int i = 0; i < ns; i++) in[i] = state[i];
    for (int j = 0; j < m; j++) {
      int64_t k = sp->dirs[j] ? T - 1 - t : t;
      in[ns + j] = (ox_val){tg_squeeze(tg_slice(xs[j], sp->axes[j], k, k + 1, 1), sp->axes[j]), NULL};
    }
    rc = ox_run_subgraph(n, graph_attr(n, "body"), in, ns + m, res, ns + no);
    for (int i = 0; !rc && i < ns + no; i++)
      if (!res[i].t) rc = ox_fail(n, TG_ERR_ARG, "the body's output %d is not a tensor", i);
    for (int i = 0; !rc && i < ns; i++) state[i] = res[i];
    for (int i = 0; !rc && i < no; i++) scans[i * T + t] = res[ns + i].t;
  }
  for (int i = 0; !rc && i < ns; i++) out[i] = state[i].t;
  for (int i = 0; !rc && i < no; i++) {
    if (sp->od[i]) /* reverse: the last step's slice comes first */
      for (int64_t a = 0, b = T - 1; a < b; a++, b--) {
        tg_tensor *tmp = scans[i * T + a];
        scans[i * T + a] = scans[i * T + b], scans[i * T + b] = tmp;
      }
    int ax = ox_axis(n, sp->oa[i], tg_ndim(scans[i * T]) + 1);
    if (ax < 0 || !(out[ns + i] = tg_stack(scans + i * T, (int)T, ax))) rc = -1;
  }
  free(scans);
  return rc;
}

/* Scan: opset 9+ scans its inputs along scan_input_axes; opset 8 has a batch axis 0 on every
 * state and scan input (the sequence along axis 1), an optional first input sequence_lens
 * (only full lengths here) and `directions`: each batch entry is its own scan, the results
 * stacked along axis 0. */
static int op_scan(ox_node *n) {
  bool v8 = n->opset < 9;
  int first = v8 ? 1 : 0, m = (int)ox_attr_i(n, "num_scan_inputs", 0), ns = n->nin - first - m, no = n->nout - ns;
  int64_t ia[OX_MAX_IO] = {0}, id[OX_MAX_IO] = {0}, oa[OX_MAX_IO] = {0}, od[OX_MAX_IO] = {0};
  if (m < 1 || ns < 0 || no < 0) return ox_fail(n, TG_ERR_ARG, "num_scan_inputs does not match the inputs");
  if (ox_attr_ints(n, v8 ? "directions" : "scan_input_directions", id, OX_MAX_IO) < -1 ||
      (!v8 && (ox_attr_ints(n, "scan_input_axes", ia, OX_MAX_IO) < -1 || ox_attr_ints(n, "scan_output_axes", oa, OX_MAX_IO) < -1 ||
               ox_attr_ints(n, "scan_output_directions", od, OX_MAX_IO) < -1)))
    return -1;
  tg_tensor **states = n->in + first, **xs = n->in + first + ns;
  int axes[OX_MAX_IO];
  for (int j = 0; j < m; j++)
    if (!xs[j] || (axes[j] = ox_axis(n, ia[j], tg_ndim(xs[j]) - v8)) < 0) return ox_fail(n, TG_ERR_ARG, "scan input %d", j);
  scan_spec sp = {ns, m, no, id, oa, od, axes};
  if (!v8) return scan_loop(n, &sp, states, xs, n->out);
  int64_t B = tg_dim(xs[0], 0), T = tg_ndim(xs[0]) > 1 ? tg_dim(xs[0], 1) : 0, lens[OX_MAX_IO * 4];
  if (B < 1 || B > OX_MAX_IO * 4) return ox_fail(n, TG_ERR_ARG, "batch %lld (1 to %d)", (long long)B, OX_MAX_IO * 4);
  int nl = IN(0) ? ox_host_ints(IN(0), lens, OX_MAX_IO * 4) : 0;
  for (int b = 0; b < nl; b++)
    if (nl != B || lens[b] != T) return ox_fail(n, TG_ERR_ARG, "sequence_lens other than the full length %lld", (long long)T);
  tg_tensor **per = calloc((size_t)(n->nout * B + 1), sizeof *per), *st[OX_MAX_IO], *x[OX_MAX_IO], *res[OX_MAX_IO];
  int rc = per ? 0 : tg_set_error(TG_ERR_NOMEM, "out of memory");
  for (int64_t b = 0; !rc && b < B; b++) { /* per[i * B + b]: output i of batch entry b */
    for (int i = 0; i < ns; i++) st[i] = tg_squeeze(tg_slice(states[i], 0, b, b + 1, 1), 0);
    for (int j = 0; j < m; j++) x[j] = tg_squeeze(tg_slice(xs[j], 0, b, b + 1, 1), 0);
    rc = scan_loop(n, &sp, st, x, res);
    for (int i = 0; !rc && i < n->nout; i++) per[i * B + b] = res[i];
  }
  for (int i = 0; !rc && i < n->nout; i++)
    if (!(n->out[i] = tg_stack(per + i * B, (int)B, 0))) rc = -1;
  free(per);
  return rc;
}

const ox_op ox_ops_control[] = {
    {"Scan", 8, op_scan, "body,directions,num_scan_inputs,scan_input_axes,scan_input_directions,scan_output_axes,scan_output_directions"},
    {NULL, 0, NULL, NULL},
};
