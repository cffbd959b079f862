/* ops_unique.c — ONNX Unique from tensor ops: the slices along the axis (or the elements of the
 * flattened input) are ordered lexicographically by stable sorts on each column, last column
 * first (tg_argsort); a slice that differs from the one before starts a group. The group
 * starts come from tg_nonzero (their number depends on the data); first positions, inverse
 * indices and counts are gathers, a scatter and differences. sorted=0 reorders the groups
 * by first occurrence. */
#include <string.h>

#include "onnx/onnx_int.h"
#include "runtime/helpers.h"

#define IN(i) (n->nin > (i) ? n->in[i] : NULL)
#define MAX_COLS 4096 /* stable sorts, one per column of a slice */

/* 1-D int64 tensor of v's elements (any shape) */
static tg_tensor *flat1(tg_tensor *v) { return tg_reshape(v, (int64_t[]){tg_numel(v)}, 1); }

static int op_unique(ox_node *n) {
  tg_tensor *x = IN(0);
  if (!x) return ox_fail(n, TG_ERR_ARG, "missing input");
  const Onnx__AttributeProto *aa = ox_attr(n, "axis");
  int nd = tg_ndim(x), axis = 0;
  if (aa) {
    if ((axis = ox_axis(n, aa->i, nd)) < 0) return -1;
    x = tg_transpose(x, 0, axis); /* the slices along axis become rows */
  } else {
    x = flat1(x);
  }
  int64_t D = tg_dim(x, 0), R = D ? tg_numel(x) / D : 0;
  if (D < 1 || R > MAX_COLS) return ox_fail(n, TG_ERR_ARG, "%lld slices of %lld values (at most %d values)", (long long)D, (long long)R, MAX_COLS);
  tg_tensor *rows = tg_reshape(x, (int64_t[]){D, R}, 2);
  tg_tensor *perm = tg_arange(0, (double)D, 1, TG_INT64);
  for (int64_t c = R - 1; c >= 0 && perm; c--) { /* stable sorts, last column first */
    tg_tensor *key = tg_index_select(tg_squeeze(tg_slice(rows, 1, c, c + 1, 1), 1), 0, perm);
    perm = tg_index_select(perm, 0, tg_argsort(key, 0, false));
  }
  tg_tensor *sorted = tg_index_select(rows, 0, perm);
  /* a row starts a group when it differs from the row before (the first always does) */
  tg_tensor *prev = tg_pad(tg_slice(sorted, 0, 0, D - 1, 1), (int64_t[]){1, 0}, (int64_t[]){0, 0}, 0.0);
  tg_tensor *differs = tg_any(tg_ne(sorted, prev), (int[]){1}, 1, false);
  tg_tensor *first = tg_eq(tg_arange(0, (double)D, 1, TG_INT64), tg_zeros((int64_t[]){1}, 1, TG_INT64));
  tg_tensor *start = tg_logical_or(differs, first);
  tg_tensor *starts = tg_nonzero(start);
  if (!starts) return -1;
  int64_t K = tg_dim(starts, 0);
  starts = flat1(starts);
  tg_tensor *group = tg_sub_s(tg_cumsum(tg_cast(start, TG_INT64), 0), 1.0); /* group of each sorted row */
  tg_tensor *idx = tg_index_select(perm, 0, starts);                        /* first positions */
  tg_tensor *ends = tg_cat((tg_tensor *[]){tg_slice(starts, 0, 1, K, 1), tg_full((int64_t[]){1}, 1, (double)D, TG_INT64)}, 2, 0);
  tg_tensor *counts = tg_sub(ends, starts);
  tg_tensor *inv = tg_scatter(tg_zeros((int64_t[]){D}, 1, TG_INT64), 0, perm, group);
  if (ox_attr_i(n, "sorted", 1) == 0) { /* groups in order of first occurrence */
    tg_tensor *order = tg_argsort(idx, 0, false);
    tg_tensor *rank = tg_scatter(tg_zeros((int64_t[]){K}, 1, TG_INT64), 0, order, tg_arange(0, (double)K, 1, TG_INT64));
    idx = tg_index_select(idx, 0, order);
    counts = tg_index_select(counts, 0, order), inv = tg_index_select(rank, 0, inv);
  }
  tg_tensor *y = tg_index_select(x, 0, idx); /* each group's first slice */
  if (aa) y = tg_transpose(y, 0, axis);
  n->out[1] = idx, n->out[2] = inv, n->out[3] = counts;
  return ox_set(n, 0, y);
}

const ox_op ox_ops_unique[] = {
    {"Unique", 11, op_unique, "axis,sorted"},
    {NULL, 0, NULL, NULL},
};
