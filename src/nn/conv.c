/* conv.c — convolution, transposed convolution and pooling, the tinygrad way: sliding
 * windows are a view of the input made only of movement ops (pad, shrink, reshape, expand,
 * permute; see pool_windows), and a convolution is a broadcast multiply of those windows
 * with the weight followed by a sum. No im2col copy is made: the scheduler turns the whole
 * thing (plus a bias add or any elementwise op after it) into one reduction kernel.
 *
 * A convolution carries its own derivative (a GRADFN node, see grad/gradient.h): the input
 * gradient is a transposed convolution (again one reduction kernel) and the weight gradient
 * a reduction of the same windows. The generic rules would differentiate the window view
 * instead, which yields a col2im: a huge per-window intermediate and a second kernel. */
#include <math.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

#include "codegen/codegen.h" /* cpu_vector_lanes, short_pad_lanes: rows padded for lanes */
#include "grad/gradient.h"
#include "nn/functional.h"
#include "tensor/shape.h"

#define NSP 2 /* spatial axes handled by the public functions (the helpers take any count) */

static int64_t ceildiv(int64_t a, int64_t b) { return (a + b - 1) / b; }

/* Finish a function body: move r out of scope s (r may be NULL) and close s. */
static tg_tensor *finish(tg_scope *s, tg_tensor *r) {
  r = tg_keep(r);
  tg_scope_end(s);
  return r;
}

/* Pad (positive) or crop (negative) the last nsp axes by before[i] / after[i]. */
static tg_tensor *pad_or_crop(tg_tensor *x, const int64_t *before, const int64_t *after, int nsp, double value) {
  if (!x) return NULL;
  int nd = tg_ndim(x), lead = nd - nsp;
  int64_t pb[TG_MAX_DIMS] = {0}, pa[TG_MAX_DIMS] = {0}, st[TG_MAX_DIMS] = {0}, en[TG_MAX_DIMS];
  for (int i = 0; i < nsp; i++) {
    pb[lead + i] = before[i] > 0 ? before[i] : 0;
    pa[lead + i] = after[i] > 0 ? after[i] : 0;
  }
  if (!(x = tg_pad(x, pb, pa, value))) return NULL;
  for (int i = 0; i < nd; i++) en[i] = uop_shape(x->u)[i];
  for (int i = 0; i < nsp; i++) {
    st[lead + i] = before[i] < 0 ? -before[i] : 0;
    en[lead + i] -= after[i] < 0 ? -after[i] : 0;
  }
  return tg_shrink(x, st, en);
}

/* The sizes of the windows of one axis: o = ceil((i - d(k-1)) / s), and for the skew trick the
 * rows of i*f + d and their total k*(i*f + d). False where one does not fit in int64 (the
 * public functions check their geometry first; this guards the backward's convolutions). */
typedef struct window_axis { int64_t o, f, row, total; } window_axis;

static bool window_axis_sizes(int64_t i, int64_t k, int64_t s, int64_t d, window_axis *w) {
  int64_t span, room, fi;
  if (i < 1 || !ck_mul(d, k - 1, &span) || !ck_sub(i, span, &room) || room < 1 || !ck_add(room, s - 1, &w->o)) return false;
  w->o /= s;
  w->f = 1 + (w->o * s > room); /* o*s <= room + s - 1: fits */
  return ck_mul(i, w->f, &fi) && ck_add(fi, d, &w->row) && ck_mul(k, w->row, &w->total) && ck_add(w->total, i, &fi);
}

/* Sliding windows over the last nsp axes (tinygrad's Tensor._pool):
 *   (..., i_0, .., i_n) → (..., o_0, .., o_n, k_0, .., k_n)
 * where window o starts at o*s and its taps are d apart; o = ceil((i - d(k-1)) / s).
 * Views only. When windows overlap (k > s) or are dilated, the axis is repeated and re-cut
 * with a row length of i*f + d, so that consecutive rows shift by d (the skew trick);
 * otherwise a plain reshape into (o, s) blocks suffices. */
static tg_tensor *pool_windows(tg_tensor *x, const int64_t *k, const int64_t *s, const int64_t *d, int nsp) {
  if (!x) return NULL;
  int nd = tg_ndim(x), lead = nd - nsp;
  int64_t i_[TG_MAX_DIMS], o_[TG_MAX_DIMS], sh[TG_MAX_DIMS], st[TG_MAX_DIMS] = {0}, en[TG_MAX_DIMS];
  int perm[TG_MAX_DIMS];
  window_axis wa[NSP];
  bool simple = true;
  char b[256];
  for (int j = 0; j < nsp; j++) {
    i_[j] = uop_shape(x->u)[lead + j];
    if (!window_axis_sizes(i_[j], k[j], s[j], d[j], &wa[j]))
      return shape_error("windows: a kernel of %lld (stride %lld, dilation %lld) over %s: sizes overflow int64 or "
                         "no window fits", (long long)k[j], (long long)s[j], (long long)d[j], NN_SHAPE(x, b));
    o_[j] = wa[j].o;
    simple &= k[j] <= s[j] && d[j] == 1;
  }
  for (int a = 0; a < lead; a++) sh[a] = en[a] = uop_shape(x->u)[a], perm[a] = a;
  if (simple) { /* (o*s) → (o, s) → keep the first k of each block */
    int64_t pb[TG_MAX_DIMS] = {0}, pa[TG_MAX_DIMS] = {0};
    for (int j = 0; j < nsp; j++) pa[j] = o_[j] * s[j] > i_[j] ? o_[j] * s[j] - i_[j] : 0;
    x = pad_or_crop(x, pb, pa, nsp, 0);
    for (int j = 0; j < nsp; j++) en[lead + j] = o_[j] * s[j];
    x = tg_shrink(x, st, en);
    for (int j = 0; j < nsp; j++) sh[lead + 2 * j] = o_[j], sh[lead + 2 * j + 1] = s[j];
    x = tg_reshape(x, sh, lead + 2 * nsp);
    for (int j = 0; j < nsp; j++) en[lead + 2 * j] = o_[j], en[lead + 2 * j + 1] = k[j];
    x = tg_shrink(x, st, en);
    for (int j = 0; j < nsp; j++) perm[lead + j] = lead + 2 * j, perm[lead + nsp + j] = lead + 2 * j + 1;
    return tg_permute(x, perm, lead + 2 * nsp);
  }
  int64_t rep[TG_MAX_DIMS];
  for (int a = 0; a < lead; a++) rep[a] = 1;
  for (int j = 0; j < nsp; j++) rep[lead + j] = ceildiv(wa[j].total, i_[j]); /* total + i fits (window_axis_sizes) */
  x = tg_repeat(x, rep, nd);
  for (int j = 0; j < nsp; j++) en[lead + j] = wa[j].total;
  x = tg_shrink(x, st, en);
  for (int j = 0; j < nsp; j++) sh[lead + 2 * j] = k[j], sh[lead + 2 * j + 1] = wa[j].row;
  x = tg_reshape(x, sh, lead + 2 * nsp); /* (k, i*f + d): row r starts at input r*d */
  for (int j = 0; j < nsp; j++) en[lead + 2 * j] = k[j], en[lead + 2 * j + 1] = o_[j] * s[j];
  x = tg_shrink(x, st, en);
  for (int j = 0; j < nsp; j++)
    sh[lead + 3 * j] = k[j], sh[lead + 3 * j + 1] = o_[j], sh[lead + 3 * j + 2] = s[j];
  x = tg_reshape(x, sh, lead + 3 * nsp); /* (k, o, s): keep s = 0 */
  for (int j = 0; j < nsp; j++) en[lead + 3 * j] = k[j], en[lead + 3 * j + 1] = o_[j], en[lead + 3 * j + 2] = 1;
  x = tg_shrink(x, st, en);
  for (int j = 0; j < nsp; j++) sh[lead + 2 * j] = k[j], sh[lead + 2 * j + 1] = o_[j];
  x = tg_reshape(x, sh, lead + 2 * nsp);
  for (int j = 0; j < nsp; j++) perm[lead + j] = lead + 2 * j + 1, perm[lead + nsp + j] = lead + 2 * j;
  return tg_permute(x, perm, lead + 2 * nsp);
}

/* Insert s-1 zeros between neighbours on the last nsp axes: (.., n) → (.., (n-1)*s + 1). */
static tg_tensor *dilate_input(tg_tensor *x, const int64_t *s, int nsp) {
  if (!x) return NULL;
  int nd = tg_ndim(x), lead = nd - nsp;
  int64_t sh[TG_MAX_DIMS], pb[TG_MAX_DIMS] = {0}, pa[TG_MAX_DIMS] = {0}, st[TG_MAX_DIMS] = {0}, en[TG_MAX_DIMS];
  for (int a = 0; a < lead; a++) sh[a] = en[a] = tg_dim(x, a);
  for (int j = 0; j < nsp; j++) { /* (n) → (n, 1) → pad → (n, s) → (n*s) → crop the trailing s-1 */
    sh[lead + 2 * j] = tg_dim(x, lead + j), sh[lead + 2 * j + 1] = 1;
    pa[lead + 2 * j + 1] = s[j] - 1;
  }
  if (!(x = tg_pad(tg_reshape(x, sh, lead + 2 * nsp), pb, pa, 0))) return NULL;
  for (int j = 0; j < nsp; j++) /* n*s: two sizes of the valid padded view */
    sh[lead + j] = tg_dim(x, lead + 2 * j) * s[j], en[lead + j] = sh[lead + j] - (s[j] - 1);
  return tg_shrink(tg_reshape(x, sh, nd), st, en);
}

/* weight (G*Cin, Cout, *k) → (G*Cout, Cin, *k) with the kernel flipped: the conv2d weight
 * whose correlation with the dilated input is the transposed convolution. */
static tg_tensor *transpose_weight(tg_tensor *w, int64_t groups, int nsp) {
  int nd = tg_ndim(w);
  int64_t sh[TG_MAX_DIMS], flat[TG_MAX_DIMS];
  int flip[TG_MAX_DIMS];
  sh[0] = groups, sh[1] = tg_dim(w, 0) / groups, sh[2] = tg_dim(w, 1);
  flat[0] = groups * tg_dim(w, 1), flat[1] = tg_dim(w, 0) / groups;
  for (int j = 0; j < nsp; j++) sh[3 + j] = flat[2 + j] = tg_dim(w, 2 + j), flip[j] = 3 + j;
  tg_tensor *g = tg_transpose(tg_reshape(w, sh, nd + 1), 1, 2);
  return tg_reshape(tg_flip(g, flip, nsp), flat, nd);
}

/* The geometry of a convolution: stride, padding per side (negative: a crop, used by
 * conv_transpose2d), dilation, groups, over nsp spatial axes. Stored in the GRADFN node. */
typedef struct conv_geom {
  int nsp;
  int64_t groups, stride[NSP], pad_before[NSP], pad_after[NSP], dilation[NSP];
} conv_geom;

/* The windows of x for g, broadcast against the weight: (N, G, Cout/G, *o, Cin, *k). */
static tg_tensor *conv_windows(tg_tensor *x, const int64_t *k, int64_t cout, const conv_geom *g) {
  int nsp = g->nsp, n = 4 + 2 * nsp, perm[TG_MAX_DIMS];
  x = pool_windows(x ? pad_or_crop(x, g->pad_before, g->pad_after, nsp, 0) : NULL, k, g->stride, g->dilation, nsp);
  if (!x) return NULL;
  int64_t xs[TG_MAX_DIMS], es[TG_MAX_DIMS];
  xs[0] = es[0] = tg_dim(x, 0), xs[1] = es[1] = g->groups, xs[2] = es[2] = tg_dim(x, 1) / g->groups;
  xs[3] = 1, es[3] = cout / g->groups;
  for (int j = 0; j < nsp; j++) {
    xs[4 + j] = es[4 + j] = tg_dim(x, 2 + j);
    xs[4 + nsp + j] = es[4 + nsp + j] = k[j];
  }
  /* (N, G, Cin, 1, *o, *k) → expand Cout/G → permute to (N, G, Cout/G, *o, Cin, *k) */
  x = tg_expand(tg_reshape(x, xs, n), es, n);
  perm[0] = 0, perm[1] = 1, perm[2] = 3, perm[3 + nsp] = 2;
  for (int j = 0; j < nsp; j++) perm[3 + j] = 4 + j, perm[4 + nsp + j] = 4 + nsp + j;
  return tg_permute(x, perm, n);
}

/* w (G*Cout, Cin, *k) as (1, G, Cout/G, *1, Cin, *k), to multiply with conv_windows. */
static tg_tensor *conv_weight_view(tg_tensor *w, const conv_geom *g) {
  int nsp = g->nsp;
  int64_t ws[TG_MAX_DIMS];
  ws[0] = 1, ws[1] = g->groups, ws[2] = tg_dim(w, 0) / g->groups, ws[3 + nsp] = tg_dim(w, 1);
  for (int j = 0; j < nsp; j++) ws[3 + j] = 1, ws[4 + nsp + j] = tg_dim(w, 2 + j);
  return tg_reshape(w, ws, 4 + 2 * nsp);
}

static tg_tensor *conv_graph(tg_tensor *x, tg_tensor *w, const conv_geom *g);

/* d conv / d x: the transposed convolution of gy (correlation of gy, dilated by the stride,
 * with the flipped, transposed weight), padded so that it lands on x's positions. */
static tg_tensor *conv_input_grad(tg_tensor *gy, tg_tensor *w, const int64_t *xshape, const conv_geom *g) {
  conv_geom t = {g->nsp, g->groups, {0}, {0}, {0}, {0}};
  for (int j = 0; j < g->nsp; j++) {
    int64_t span = g->dilation[j] * (tg_dim(w, 2 + j) - 1);
    int64_t padded = xshape[2 + j] + g->pad_before[j] + g->pad_after[j];
    int64_t rest = padded - ((tg_dim(gy, 2 + j) - 1) * g->stride[j] + span + 1); /* rows the forward skipped */
    t.stride[j] = 1, t.dilation[j] = g->dilation[j];
    t.pad_before[j] = span - g->pad_before[j];
    t.pad_after[j] = span + rest - g->pad_after[j];
  }
  return conv_graph(dilate_input(gy, g->stride, g->nsp), transpose_weight(w, g->groups, g->nsp), &t);
}

/* The weight gradient reduces over output rows of o positions, in vectors of the widest power
 * of two dividing o (6: 2 lanes). Rows that would get 2 lanes or none are padded with zeros to
 * whole vectors (short_pad_lanes: 6 → 8) and run the same products in wider vectors; the
 * padded row length, else o. (Padding rows that already get 4 or 8 lanes, 20 → 32 and
 * 24 → 32, made conv2 and conv1 slower.) */
static int64_t lane_padded_row(int64_t o, tg_dtype dt) {
  int lanes = short_pad_lanes(o, cpu_vector_lanes(tg_dtype_size(dt)));
  return lanes ? ceildiv(o, lanes) * lanes : o;
}

/* Images per partial sum of a weight gradient. Summed over the whole batch at once, the kernel
 * walks all of gy and x (conv2 of the demo: 80 MB) once per register tile of weights; summed
 * per chunk of images whose gy and x fit in half an L2 (512 KiB), each chunk is read from
 * memory once and the partial sums (N/chunk copies of the weights) are added by a second
 * kernel: the demo's conv3 weight gradient 17 → 12 ms, conv2 121–137 → 104 (performance.md).
 * The largest such divisor of N. */
static int64_t batch_chunk(tg_tensor *gy, tg_tensor *x) {
  enum { CHUNK_BYTES = 512 << 10 };
  int64_t batch = tg_dim(x, 0);
  double image = (double)(tg_numel(gy) + tg_numel(x)) / (double)batch * (double)tg_dtype_size(tg_get_dtype(x));
  int64_t fit = image > 0 ? (int64_t)(CHUNK_BYTES / image) : batch, chunk = 1;
  for (int64_t c = fit < batch ? fit : batch; c >= 1 && chunk == 1; c--)
    if (batch % c == 0) chunk = c;
  return chunk;
}

/* d conv / d w: for each weight tap, the sum over batch and output positions of gy times
 * the input it met (the forward's windows, reduced over the other axes). Rows are padded for
 * lanes (gy with zeros, x far enough for the extra windows; both stored, so no load needs a
 * mask): the demo's conv4 (rows of 6 → 8, 2 lanes → 8) 38 → 20 ms, performance.md. */
static tg_tensor *conv_weight_grad(tg_tensor *gy, tg_tensor *x, tg_tensor *w, const conv_geom *g) {
  int nsp = g->nsp, n = 4 + 2 * nsp, axes[TG_MAX_DIMS], last = nsp - 1;
  int64_t k[TG_MAX_DIMS] = {0}, gs[TG_MAX_DIMS], cout = tg_dim(w, 0);
  for (int j = 0; j < nsp; j++) k[j] = tg_dim(w, 2 + j);
  int64_t o = tg_dim(gy, -1), row = lane_padded_row(o, tg_get_dtype(gy));
  conv_geom stored = *g;
  if (row != o) { /* x stored with the geometry's padding (or crop) and the extra columns */
    int64_t zero[NSP] = {0}, gpad[NSP] = {0}, after[NSP];
    gpad[last] = row - o;
    memcpy(after, g->pad_after, sizeof after);
    after[last] = (row - 1) * g->stride[last] + g->dilation[last] * (k[last] - 1) + 1 - tg_dim(x, -1) - g->pad_before[last];
    gy = tg_contiguous(pad_or_crop(gy, zero, gpad, nsp, 0));
    x = tg_contiguous(pad_or_crop(x, g->pad_before, after, nsp, 0));
    memset(stored.pad_before, 0, sizeof stored.pad_before), memset(stored.pad_after, 0, sizeof stored.pad_after);
    g = &stored;
  }
  gs[0] = tg_dim(gy, 0), gs[1] = g->groups, gs[2] = cout / g->groups, gs[3 + nsp] = 1;
  for (int j = 0; j < nsp; j++) gs[3 + j] = tg_dim(gy, 2 + j), gs[4 + nsp + j] = 1;
  tg_tensor *prod = tg_mul(conv_windows(x, k, cout, g), tg_reshape(gy, gs, n)); /* (N, G, Cout/G, *o, Cin, *k) */
  if (!prod) return NULL;
  int64_t batch = tg_dim(x, 0), chunk = batch_chunk(gy, x), ps[TG_MAX_DIMS];
  ps[0] = batch / chunk, ps[1] = chunk; /* (N/chunk, chunk, G, Cout/G, *o, Cin, *k) */
  memcpy(ps + 2, uop_shape(prod->u) + 1, sizeof(int64_t) * (size_t)(n - 1));
  axes[0] = 1;
  for (int j = 0; j < nsp; j++) axes[1 + j] = 4 + j;
  tg_tensor *part = tg_sum(tg_reshape(prod, ps, n + 1), axes, nsp + 1, false); /* (N/chunk, G, Cout/G, Cin, *k) */
  /* the partials flat, (N/chunk, weights): their sum runs in whole vectors, not rows of kw */
  tg_tensor *sum = ps[0] > 1 ? tg_sum(tg_reshape(part, (int64_t[]){ps[0], tg_numel(w)}, 2), (const int[]){0}, 1, false) : part;
  return tg_reshape(sum, uop_shape(w->u), tg_ndim(w));
}

/* GRADFN rule: u = GRADFN(y, x, w), arg = [id, nsp, groups, stride, pad_before, pad_after, dilation]. */
static void conv_grad_rule(uop *u, uop *gy, uop **d) {
  conv_geom g = {(int)u->arg[1], u->arg[2], {0}, {0}, {0}, {0}};
  for (int j = 0; j < g.nsp; j++) {
    g.stride[j] = u->arg[3 + j], g.pad_before[j] = u->arg[3 + g.nsp + j];
    g.pad_after[j] = u->arg[3 + 2 * g.nsp + j], g.dilation[j] = u->arg[3 + 3 * g.nsp + j];
  }
  tg_scope *s = tg_scope_begin();
  tg_tensor *x = tensor_wrap(u->src[1]), *w = tensor_wrap(u->src[2]), *g_ = tensor_wrap(gy);
  tg_tensor *dx = conv_input_grad(g_, w, uop_shape(x->u), &g), *dw = conv_weight_grad(g_, x, w, &g);
  d[1] = dx ? uop_pool_add(dx->u) : NULL; /* outlive the scope: the gradient walk's pool owns them */
  d[2] = dw ? uop_pool_add(dw->u) : NULL;
  tg_scope_end(s);
}

/* The convolution without bias, wrapped so that autograd uses conv_grad_rule. */
static tg_tensor *conv_graph(tg_tensor *x, tg_tensor *w, const conv_geom *g) {
  static _Atomic int registered = -1; /* any thread may register it first: the same id */
  int rule_id = atomic_load(&registered);
  if (rule_id < 0) atomic_store(&registered, rule_id = grad_register_custom(conv_grad_rule));
  int nsp = g->nsp, n = 4 + 2 * nsp, axes[TG_MAX_DIMS];
  bool pads = false;
  for (int j = 0; j < nsp; j++) pads |= g->pad_before[j] > 0 || g->pad_after[j] > 0;
  conv_geom unpadded = *g;
  /* The input is read once per tap and output channel tile. Padded, it is copied once into a
   * buffer so that no tap needs a bounds mask; computed (relu of the layer before), it is
   * stored once instead of being recomputed by every read: in the demo's training step the
   * conv2 forward went 236 -> 100 ms and its weight gradient 375 -> 198 ms (batch 512). */
  if (pads) {
    x = tg_contiguous(pad_or_crop(x, g->pad_before, g->pad_after, nsp, 0));
    for (int j = 0; j < nsp; j++) unpadded.pad_before[j] = unpadded.pad_after[j] = 0;
    g = &unpadded;
  } else if (x->u->op != OP_BUFFER) { /* the same for a computed input (relu of the layer before) */
    x = tg_contiguous(x);
  }
  int64_t k[TG_MAX_DIMS] = {0}, out[TG_MAX_DIMS], arg[3 + 4 * NSP];
  for (int j = 0; j < nsp; j++) k[j] = tg_dim(w, 2 + j);
  tg_tensor *win = conv_windows(x, k, tg_dim(w, 0), g);
  if (!win) return NULL;
  tg_tensor *prod = tg_mul(win, conv_weight_view(w, g));
  for (int j = 0; j <= nsp; j++) axes[j] = n - 1 - j;
  out[0] = tg_dim(x, 0), out[1] = tg_dim(w, 0);
  for (int j = 0; j < nsp; j++) out[2 + j] = tg_dim(win, 3 + j);
  tg_tensor *y = tg_reshape(tg_sum(prod, axes, nsp + 1, false), out, 2 + nsp);
  if (!y || rule_id < 0) return y;
  arg[0] = rule_id, arg[1] = nsp, arg[2] = g->groups;
  for (int j = 0; j < nsp; j++) {
    arg[3 + j] = g->stride[j], arg[3 + nsp + j] = g->pad_before[j];
    arg[3 + 2 * nsp + j] = g->pad_after[j], arg[3 + 3 * nsp + j] = g->dilation[j];
  }
  size_t mark = uop_pool_mark();
  uop *src[3] = {y->u, x->u, w->u};
  tg_tensor *r = tensor_wrap(uop_new(OP_GRADFN, y->u->dtype, src, 3, arg, 3 + 4 * nsp));
  uop_pool_release(mark);
  return r;
}

/* The convolution proper, arguments already checked. x (N, G*Cin, *in), w (G*Cout, Cin, *k). */
static tg_tensor *conv_core(tg_tensor *x, tg_tensor *w, tg_tensor *bias, const int64_t *stride,
                            const int64_t *pad_before, const int64_t *pad_after, const int64_t *dilation,
                            int64_t groups, int nsp) {
  conv_geom g = {nsp, groups, {0}, {0}, {0}, {0}};
  for (int j = 0; j < nsp; j++)
    g.stride[j] = stride[j], g.pad_before[j] = pad_before[j], g.pad_after[j] = pad_after[j], g.dilation[j] = dilation[j];
  tg_tensor *y = conv_graph(x, w, &g);
  return bias ? tg_add(y, nn_channel_view(bias, 2 + nsp)) : y;
}

/* ---------------------------------------------------------------- argument checks */

/* Copy a per-axis int parameter (NULL → dflt) and check it is >= lo. */
static bool get_param(const char *op, const char *what, const int *p, int dflt, int lo, int64_t *out) {
  for (int j = 0; j < NSP; j++) {
    out[j] = p ? p[j] : dflt;
    if (out[j] < lo) {
      tensor_error("%s: %s must be >= %d, got (%d, %d)", op, what, lo, p[0], p[1]);
      return false;
    }
  }
  return true;
}

static bool check_rank4(const char *op, const char *what, tg_tensor *t) {
  char b[256];
  if (tg_ndim(t) == 4) return nn_need_float(op, what, t);
  tensor_error("%s: %s must have 4 axes, got %s", op, what, NN_SHAPE(t, b));
  return false;
}

static bool check_groups(const char *op, int groups, int64_t a, const char *an, int64_t b, const char *bn) {
  if (groups >= 1 && a % groups == 0 && b % groups == 0) return true;
  tensor_error("%s: groups = %d must be >= 1 and divide %s = %lld and %s = %lld", op, groups, an, (long long)a, bn,
               (long long)b);
  return false;
}

/* The windows of a kernel k (stride s, dilation d) over a padded input of size `in` can be
 * built: every size on the way fits in int64. */
static bool check_windows(const char *op, tg_tensor *x, int64_t in, int64_t k, int64_t s, int64_t d, int axis) {
  window_axis wa;
  char b[256];
  if (window_axis_sizes(in, k, s, d, &wa)) return true;
  shape_error("%s: a kernel of %lld (stride %lld, dilation %lld) over %lld positions on axis %d of x %s: the window "
              "sizes overflow int64", op, (long long)k, (long long)s, (long long)d, (long long)in, axis, NN_SHAPE(x, b));
  return false;
}

/* The dilated kernel must fit in the padded input: out = (in + 2p - d(k-1) - 1) / s + 1 >= 1. */
static bool check_fits(const char *op, tg_tensor *x, tg_tensor *w, const int64_t *pad, const int64_t *st,
                       const int64_t *dil) {
  char a[256], b[256];
  for (int j = 0; j < NSP; j++) {
    int64_t k = tg_dim(w, 2 + j), in, span; /* pad <= INT_MAX: 2 * pad fits */
    if (k < 1 || !ck_add(tg_dim(x, 2 + j), 2 * pad[j], &in) || !ck_mul(dil[j], k - 1, &span) || !ck_add(span, 1, &span))
      return tensor_error("%s: kernel %s with dilation %lld does not fit the padded input %s (axis %d)", op,
                          NN_SHAPE(w, a), (long long)dil[j], NN_SHAPE(x, b), 2 + j), false;
    if (span > in) {
      tensor_error("%s: kernel %s (dilated extent %lld) does not fit the padded input %s (%lld on axis %d)", op,
                   NN_SHAPE(w, a), (long long)span, NN_SHAPE(x, b), (long long)in, 2 + j);
      return false;
    }
    if (!check_windows(op, x, in, k, st[j], dil[j], 2 + j)) return false;
  }
  return true;
}

/* ---------------------------------------------------------------- convolutions */

tg_tensor *tg_conv2d(tg_tensor *x, tg_tensor *weight, tg_tensor *bias, const int stride[2], const int padding[2],
                     const int dilation[2], int groups) {
  const char *op = "conv2d";
  if (!x || !weight) return null_arg(op);
  int64_t st[NSP], pad[NSP], dil[NSP];
  char a[256], b[256];
  if (!check_rank4(op, "x", x) || !check_rank4(op, "weight", weight) ||
      !get_param(op, "stride", stride, 1, 1, st) || !get_param(op, "padding", padding, 0, 0, pad) ||
      !get_param(op, "dilation", dilation, 1, 1, dil) ||
      !check_groups(op, groups, tg_dim(x, 1), "input channels", tg_dim(weight, 0), "output channels"))
    return NULL;
  int64_t cin;
  if (!ck_mul(tg_dim(weight, 1), groups, &cin))
    return tensor_error("%s: weight %s times %d groups: more input channels than fit in int64", op,
                        NN_SHAPE(weight, a), groups);
  if (cin != tg_dim(x, 1))
    return tensor_error("%s: weight %s expects %lld input channels (%d groups), x %s has %lld", op,
                        NN_SHAPE(weight, a), (long long)cin, groups, NN_SHAPE(x, b), (long long)tg_dim(x, 1));
  if (!nn_check_channel_param(op, "bias", bias, tg_dim(weight, 0)) || !check_fits(op, x, weight, pad, st, dil))
    return NULL;
  tg_scope *s = tg_scope_begin();
  return finish(s, conv_core(x, weight, bias, st, pad, pad, dil, groups, NSP));
}

/* The transposed convolution is a convolution (stride 1) of the input dilated by the stride,
 * (n-1)*s + 1, padded by before = d(k-1) - p and after = before + output_padding (negative: a
 * crop); its output is (n-1)*s - 2p + d(k-1) + output_padding + 1. Fills before/after. */
static bool check_transpose_sizes(const char *op, tg_tensor *x, tg_tensor *w, const int64_t *st, const int64_t *pad,
                                  const int64_t *opad, const int64_t *dil, int64_t *before, int64_t *after) {
  char a[256], b[256];
  for (int j = 0; j < NSP; j++) {
    if (opad[j] >= st[j] && opad[j] >= dil[j])
      return tensor_error("%s: output_padding %lld must be smaller than stride %lld or dilation %lld", op,
                          (long long)opad[j], (long long)st[j], (long long)dil[j]), false;
    int64_t k = tg_dim(w, 2 + j), n = tg_dim(x, 2 + j), xd, span, in, out;
    if (k < 1 || n < 1)
      return tensor_error("%s: x %s with weight %s gives an empty output (axis %d)", op, NN_SHAPE(x, a),
                          NN_SHAPE(w, b), 2 + j), false;
    bool sized = ck_mul(n - 1, st[j], &xd) && ck_add(xd, 1, &xd) && ck_mul(dil[j], k - 1, &span) &&
                 ck_sub(span, pad[j], &before[j]) && ck_add(before[j], opad[j], &after[j]) &&
                 ck_add(xd, before[j], &in) && ck_add(in, after[j], &in) && ck_sub(in, span, &out);
    if (!sized)
      return shape_error("%s: x %s with weight %s, stride %lld, dilation %lld: sizes overflow int64", op,
                         NN_SHAPE(x, a), NN_SHAPE(w, b), (long long)st[j], (long long)dil[j]), false;
    if (out < 1)
      return tensor_error("%s: x %s with weight %s gives an empty output (size %lld on axis %d)", op,
                          NN_SHAPE(x, a), NN_SHAPE(w, b), (long long)out, 2 + j), false;
    if (!check_windows(op, x, in, k, 1, dil[j], 2 + j)) return false;
  }
  return true;
}

tg_tensor *tg_conv_transpose2d(tg_tensor *x, tg_tensor *weight, tg_tensor *bias, const int stride[2],
                               const int padding[2], const int output_padding[2], const int dilation[2],
                               int groups) {
  const char *op = "conv_transpose2d";
  if (!x || !weight) return null_arg(op);
  int64_t st[NSP], pad[NSP], opad[NSP], dil[NSP];
  char a[256], b[256];
  if (!check_rank4(op, "x", x) || !check_rank4(op, "weight", weight) ||
      !get_param(op, "stride", stride, 1, 1, st) || !get_param(op, "padding", padding, 0, 0, pad) ||
      !get_param(op, "output_padding", output_padding, 0, 0, opad) ||
      !get_param(op, "dilation", dilation, 1, 1, dil))
    return NULL;
  if (tg_dim(weight, 0) != tg_dim(x, 1))
    return tensor_error("%s: weight %s expects %lld input channels, x %s has %lld", op, NN_SHAPE(weight, a),
                        (long long)tg_dim(weight, 0), NN_SHAPE(x, b), (long long)tg_dim(x, 1));
  if (groups < 1 || tg_dim(x, 1) % groups)
    return tensor_error("%s: groups = %d must be >= 1 and divide the %lld input channels", op, groups,
                        (long long)tg_dim(x, 1));
  int64_t cout, before[NSP], after[NSP];
  if (!ck_mul(tg_dim(weight, 1), groups, &cout))
    return shape_error("%s: %lld output channels per group times %d groups overflow int64", op,
                       (long long)tg_dim(weight, 1), groups);
  if (!nn_check_channel_param(op, "bias", bias, cout) ||
      !check_transpose_sizes(op, x, weight, st, pad, opad, dil, before, after))
    return NULL;
  tg_scope *s = tg_scope_begin();
  tg_tensor *xd = dilate_input(x, st, NSP), *w = transpose_weight(weight, groups, NSP);
  int64_t one[NSP] = {1, 1};
  return finish(s, conv_core(xd, w, bias, one, before, after, dil, groups, NSP));
}

/* ---------------------------------------------------------------- pooling */

/* pool_windows builds views of rank ndim + 2*NSP (a (k, o, s) split of each spatial axis). */
enum { POOL_MAX_RANK = TG_MAX_DIMS - 2 * NSP };

static bool check_pool(const char *op, tg_tensor *x, const int *kernel, const int64_t *k, const int64_t *st,
                       const int64_t *pad) {
  char b[256];
  if (tg_ndim(x) < 2) return tensor_error("%s: x %s needs at least 2 axes", op, NN_SHAPE(x, b)), false;
  if (tg_ndim(x) > POOL_MAX_RANK)
    return shape_error("%s: x has rank %d, at most %d can be pooled", op, tg_ndim(x), POOL_MAX_RANK), false;
  if (!nn_need_float(op, "x", x)) return false;
  for (int j = 0; j < NSP; j++) {
    if (pad[j] > k[j] / 2)
      return tensor_error("%s: padding (%lld, %lld) must be at most half the kernel (%d, %d)", op, (long long)pad[0],
                          (long long)pad[1], kernel[0], kernel[1]), false;
    int64_t in; /* pad <= INT_MAX: 2 * pad fits */
    if (!ck_add(tg_dim(x, -2 + j), 2 * pad[j], &in) || k[j] > in)
      return tensor_error("%s: kernel (%d, %d) larger than the padded input %s (+%lld padding)", op, kernel[0],
                          kernel[1], NN_SHAPE(x, b), (long long)pad[j]), false;
    if (!check_windows(op, x, in, k[j], st[j], 1, tg_ndim(x) - 2 + j)) return false;
  }
  return true;
}

/* Windows (..., oh, ow, kh, kw) of x padded with `fill`, or NULL after an argument error. */
static tg_tensor *pool_args(const char *op, tg_tensor *x, const int kernel[2], const int stride[2],
                            const int padding[2], double fill) {
  int64_t k[NSP], st[NSP], pad[NSP], one[NSP] = {1, 1};
  if (!kernel) return tensor_error("%s: kernel is NULL", op);
  if (!get_param(op, "kernel", kernel, 1, 1, k) || !get_param(op, "padding", padding, 0, 0, pad)) return NULL;
  if (stride ? !get_param(op, "stride", stride, 1, 1, st) : !get_param(op, "kernel", kernel, 1, 1, st)) return NULL;
  if (!check_pool(op, x, kernel, k, st, pad)) return NULL;
  return pool_windows(pad_or_crop(x, pad, pad, NSP, fill), k, st, one, NSP);
}

tg_tensor *tg_max_pool2d(tg_tensor *x, const int kernel[2], const int stride[2], const int padding[2]) {
  if (!x) return null_arg("max_pool2d");
  tg_scope *s = tg_scope_begin();
  int axes[2] = {-2, -1};
  tg_tensor *w = pool_args("max_pool2d", x, kernel, stride, padding, -INFINITY);
  return finish(s, w ? tg_max(w, axes, 2, false) : NULL);
}

tg_tensor *tg_avg_pool2d(tg_tensor *x, const int kernel[2], const int stride[2], const int padding[2]) {
  if (!x) return null_arg("avg_pool2d");
  tg_scope *s = tg_scope_begin();
  int axes[2] = {-2, -1};
  tg_tensor *w = pool_args("avg_pool2d", x, kernel, stride, padding, 0);
  return finish(s, w ? tg_mean(w, axes, 2, false) : NULL);
}
