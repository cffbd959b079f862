/* ops_nms.c — ONNX NonMaxSuppression from tensor ops: every pair's IoU at once, boxes of each
 * (batch, class) sorted by score (tg_sort), then the greedy pass unrolled over the sorted
 * positions (box i, if still kept, suppresses the later boxes it overlaps), capped at
 * max_output_boxes_per_class with a cumsum. The selected (batch, class, box) triples come from
 * tg_nonzero, whose output size depends on the data (it reads the mask on the host). */
#include <string.h>

#include "onnx/onnx_int.h"
#include "runtime/helpers.h"

#define IN(i) (n->nin > (i) ? n->in[i] : NULL)
#define MAX_BOXES 1024 /* the greedy pass is unrolled over them */

/* Coordinate k (0..3) of boxes (B, N, 4) as (B, N). */
static tg_tensor *coord(tg_tensor *b, int k) { return tg_squeeze(tg_slice(b, 2, k, k + 1, 1), 2); }

/* Corners y1 <= y2, x1 <= x2 of each box (center_point_box: x, y, w, h). */
static void corners(tg_tensor *boxes, bool center, tg_tensor *c[4]) {
  tg_tensor *a = coord(boxes, 0), *b = coord(boxes, 1), *d = coord(boxes, 2), *e = coord(boxes, 3);
  if (center) { /* (xc, yc, w, h) */
    c[0] = tg_sub(b, tg_div_s(e, 2)), c[2] = tg_add(b, tg_div_s(e, 2));
    c[1] = tg_sub(a, tg_div_s(d, 2)), c[3] = tg_add(a, tg_div_s(d, 2));
    return;
  }
  c[0] = tg_minimum(a, d), c[2] = tg_maximum(a, d), c[1] = tg_minimum(b, e), c[3] = tg_maximum(b, e);
}

/* IoU of every pair of boxes: (B, N, N). */
static tg_tensor *iou_all(tg_tensor *c[4]) {
  tg_tensor *ci[4], *cj[4];
  for (int k = 0; k < 4; k++) ci[k] = tg_unsqueeze(c[k], 2), cj[k] = tg_unsqueeze(c[k], 1);
  tg_tensor *h = tg_relu(tg_sub(tg_minimum(ci[2], cj[2]), tg_maximum(ci[0], cj[0])));
  tg_tensor *w = tg_relu(tg_sub(tg_minimum(ci[3], cj[3]), tg_maximum(ci[1], cj[1])));
  tg_tensor *inter = tg_mul(h, w);
  tg_tensor *ai = tg_mul(tg_sub(ci[2], ci[0]), tg_sub(ci[3], ci[1])), *aj = tg_mul(tg_sub(cj[2], cj[0]), tg_sub(cj[3], cj[1]));
  tg_tensor *uni = tg_sub(tg_add(ai, aj), inter);
  return tg_where(tg_gt(uni, tg_zeros_like(uni)), tg_div(inter, uni), tg_zeros_like(uni));
}

static int op_nms(ox_node *n) {
  tg_tensor *boxes = IN(0), *scores = IN(1);
  if (!boxes || !scores || tg_ndim(boxes) != 3 || tg_ndim(scores) != 3 || tg_dim(boxes, 2) != 4)
    return ox_fail(n, TG_ERR_ARG, "needs boxes (B, N, 4) and scores (B, C, N)");
  int64_t B = tg_dim(scores, 0), C = tg_dim(scores, 1), N = tg_dim(scores, 2), maxo = 0;
  double thr = 0, sthr = 0;
  if (N > MAX_BOXES) return ox_fail(n, TG_ERR_ARG, "%lld boxes (at most %d)", (long long)N, MAX_BOXES);
  if (IN(2) && tg_numel(IN(2)) && ox_host_ints(IN(2), &maxo, 1) != 1) return ox_fail(n, TG_ERR_ARG, "bad max_output_boxes_per_class");
  if (IN(3) && tg_numel(IN(3)) && ox_host_doubles(IN(3), &thr, 1) != 1) return ox_fail(n, TG_ERR_ARG, "bad iou_threshold");
  if (IN(4) && tg_numel(IN(4)) && ox_host_doubles(IN(4), &sthr, 1) != 1) return ox_fail(n, TG_ERR_ARG, "bad score_threshold");
  tg_tensor *c[4], *sv = NULL, *si = NULL;
  corners(tg_cast(boxes, TG_FLOAT32), ox_attr_i(n, "center_point_box", 0) != 0, c);
  if (tg_sort(tg_cast(scores, TG_FLOAT32), 2, true, &sv, &si) < 0) return -1;
  /* IoU in sorted order: iou_s[b, c, i, j] = iou[b, si[b, c, i], si[b, c, j]] */
  int64_t s4[4] = {B, C, N, N};
  tg_tensor *iou = tg_expand(tg_unsqueeze(iou_all(c), 1), s4, 4);
  tg_tensor *ri = tg_expand(tg_unsqueeze(si, 3), s4, 4), *cj = tg_expand(tg_unsqueeze(si, 2), s4, 4);
  tg_tensor *iou_s = tg_gather(tg_gather(iou, 2, ri), 3, cj);
  tg_tensor *keep = IN(4) && tg_numel(IN(4)) ? tg_gt(sv, tg_full_like(sv, sthr)) : tg_ones_like(tg_cast(sv, TG_BOOL));
  for (int64_t i = 0; i < N && keep; i++) { /* box i, if kept, suppresses the later ones it overlaps */
    tg_tensor *sel = tg_unsqueeze(tg_squeeze(tg_slice(keep, 2, i, i + 1, 1), 2), 2);
    tg_tensor *row = tg_squeeze(tg_slice(iou_s, 2, i, i + 1, 1), 2);
    tg_tensor *later = tg_gt(tg_arange(0, (double)N, 1, TG_INT64), tg_full((int64_t[]){1}, 1, (double)i, TG_INT64));
    tg_tensor *sup = tg_logical_and(tg_logical_and(tg_gt(row, tg_full_like(row, thr)), later), sel);
    keep = tg_logical_and(keep, tg_logical_not(sup));
  }
  keep = tg_logical_and(keep, tg_le(tg_cumsum(tg_cast(keep, TG_INT64), 2), tg_full((int64_t[]){1}, 1, (double)maxo, TG_INT64)));
  tg_tensor *nz = tg_nonzero(keep); /* (K, 3): batch, class, sorted position */
  if (!nz) return -1;
  int64_t K = tg_dim(nz, 0);
  tg_tensor *bcol = tg_slice(nz, 1, 0, 1, 1), *ccol = tg_slice(nz, 1, 1, 2, 1), *pcol = tg_slice(nz, 1, 2, 3, 1);
  tg_tensor *flat = tg_add(tg_mul_s(tg_add(tg_mul_s(bcol, (double)C), ccol), (double)N), pcol);
  tg_tensor *box = tg_reshape(tg_index_select(tg_reshape(si, (int64_t[]){B * C * N}, 1), 0, tg_reshape(flat, &K, 1)),
                              (int64_t[]){K, 1}, 2);
  tg_tensor *cols[3] = {bcol, ccol, box};
  return ox_set(n, 0, tg_cast(tg_cat(cols, 3, 1), TG_INT64));
}

const ox_op ox_ops_nms[] = {
    {"NonMaxSuppression", 10, op_nms, "center_point_box"},
    {NULL, 0, NULL, NULL},
};
