/* conv.c — convolution and transposed convolution over 1 to 3 spatial axes, the tinygrad way:
 * sliding windows are a view of the input made only of movement ops (windows.c), and a
 * convolution is a broadcast multiply of those windows with the weight followed by a sum. No
 * im2col copy is made: the scheduler turns the whole thing (plus a bias add or any elementwise
 * op after it) into one reduction kernel. Two measured rules pick other algorithms: wide 3x3
 * stride-1 convs run as Winograd F(4x4,3x3) (winograd.c), and wide strided convs as a matmul
 * over their windows stored once (strided_matmul_conv), which a matmul's panels make faster.
 *
 * A convolution carries its own derivative (a GRADFN node, see grad/gradient.h): the input
 * gradient is a transposed convolution (again one reduction kernel) and the weight gradient
 * a reduction of the same windows. The generic rules would differentiate the window view
 * instead, which yields a col2im: a huge per-window intermediate and a second kernel. */
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

#include "grad/gradient.h"
#include "nn/windows.h"
#include "nn/winograd.h"
#include "runtime/helpers.h"
#include "tensor/shape.h"

/* weight (G*Cin, Cout, *k) → (G*Cout, Cin, *k) with the kernel flipped: the convolution weight
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

/* The geometry of a convolution: stride, padding per side (negative: a crop, used by the
 * transposed convolutions), dilation, groups, over nsp spatial axes. Stored in the GRADFN node. */
typedef struct conv_geom {
  int nsp;
  int64_t groups, stride[NN_MAX_NSP], pad_before[NN_MAX_NSP], pad_after[NN_MAX_NSP], dilation[NN_MAX_NSP];
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

/* w stored with the output channels innermost, (G, Cin*k, Cout/G), and seen again as
 * (G, Cout/G, Cin, *k) for conv_weight_view (a permuted view: the reshape there only adds
 * unit axes). A strided conv's windows do not move contiguously along an output row (x is
 * read every s-th element), so a device cannot vectorize along the row; with the weight
 * contiguous along the output channels it vectorizes along those instead, each loaded x
 * broadcast to a vector of channels. The copy is one transpose of a (Cout/G, Cin*k) matrix
 * per group (a small kernel per run), 2-D so that it reads along rows of Cin*k. */
static tg_tensor *channels_last_weight(tg_tensor *w, const conv_geom *g) {
  int nsp = g->nsp, nd = 3 + nsp, back[TG_MAX_DIMS];
  int64_t flat[3], gs[TG_MAX_DIMS], taps = tg_dim(w, 1);
  gs[0] = g->groups, gs[1] = tg_dim(w, 1);
  for (int j = 0; j < nsp; j++) gs[2 + j] = tg_dim(w, 2 + j), taps *= tg_dim(w, 2 + j);
  gs[nd - 1] = tg_dim(w, 0) / g->groups;
  flat[0] = g->groups, flat[1] = gs[nd - 1], flat[2] = taps;
  tg_tensor *t = tg_contiguous(tg_transpose(tg_reshape(w, flat, 3), 1, 2)); /* (G, Cin*k, Cout/G) */
  back[0] = 0, back[1] = nd - 1;
  for (int j = 2; j < nd; j++) back[j] = j - 1;
  return tg_permute(tg_reshape(t, gs, nd), back, nd);
}

/* Whether a conv reads its input with a stride (windows not contiguous along a row) and has
 * several output channels per group to vectorize along instead. */
static bool strided(tg_tensor *w, const conv_geom *g) {
  bool s = false;
  for (int j = 0; j < g->nsp; j++) s |= g->stride[j] > 1;
  return s && tg_dim(w, 0) / g->groups > 1;
}

/* A pointwise conv over a map of at most this many positions (7x7, 8x8) reads its weight
 * channels-last too: a row of 7 fills under half a vector (8 lanes of AVX-512's 16), so the
 * lanes go along the output channels instead (opt.c choose_lanes), each x broadcast.
 * MobileNetV2's 7x7 layers at batch 32: docs/nn.md, "Convolution". */
#define POINTWISE_CHANNELS_LAST_MAX_POSITIONS 64

static bool small_pointwise(tg_tensor *w, const conv_geom *g, tg_tensor *x) {
  int64_t positions = 1;
  if (!x) return false;
  for (int j = 0; j < g->nsp; j++) {
    if (tg_dim(w, 2 + j) != 1 || g->stride[j] != 1) return false;
    positions *= tg_dim(x, 2 + j) + g->pad_before[j] + g->pad_after[j];
  }
  return tg_dim(w, 0) / g->groups > 1 && positions <= POINTWISE_CHANNELS_LAST_MAX_POSITIONS;
}

/* w (G*Cout, Cin, *k) as (1, G, Cout/G, *1, Cin, *k), to multiply with conv_windows; read
 * from a channels-last copy when the conv is strided or a pointwise one on a small map. */
static tg_tensor *conv_weight_view(tg_tensor *w, const conv_geom *g, tg_tensor *x) {
  int nsp = g->nsp;
  int64_t ws[TG_MAX_DIMS];
  ws[0] = 1, ws[1] = g->groups, ws[2] = tg_dim(w, 0) / g->groups, ws[3 + nsp] = tg_dim(w, 1);
  for (int j = 0; j < nsp; j++) ws[3 + j] = 1, ws[4 + nsp + j] = tg_dim(w, 2 + j);
  bool last = strided(w, g) || small_pointwise(w, g, x);
  return tg_reshape(last ? channels_last_weight(w, g) : w, ws, 4 + 2 * nsp);
}

static tg_tensor *conv_graph(tg_tensor *x, tg_tensor *w, const conv_geom *g);

/* The direct form: windows times weight, summed over (Cin, *k). */
static tg_tensor *direct_conv(tg_tensor *x, tg_tensor *w, const conv_geom *g) {
  int nsp = g->nsp, n = 4 + 2 * nsp, axes[TG_MAX_DIMS];
  int64_t k[TG_MAX_DIMS] = {0}, out[TG_MAX_DIMS];
  for (int j = 0; j < nsp; j++) k[j] = tg_dim(w, 2 + j);
  tg_tensor *win = conv_windows(x, k, tg_dim(w, 0), g);
  if (!win) return NULL;
  tg_tensor *prod = tg_mul(win, conv_weight_view(w, g, x));
  for (int j = 0; j <= nsp; j++) axes[j] = n - 1 - j;
  out[0] = tg_dim(x, 0), out[1] = tg_dim(w, 0);
  for (int j = 0; j < nsp; j++) out[2 + j] = tg_dim(win, 3 + j);
  return tg_reshape(tg_sum(prod, axes, nsp + 1, false), out, 2 + nsp);
}

/* Columns per matmul: images are grouped until a group's outputs fill a few panels (256: 16
 * panels of 16). One image per matmul left ResNet-18's 7x7 outputs (49 columns) without
 * panels, 39 GFLOPS; the whole batch as one matmul of 25088 columns streamed its 57 MB of
 * panels once per row, 12-15 GFLOPS (per image: 84). */
#define STRIDED_MIN_COLUMNS 256

/* A strided conv as matmuls: its windows stored once as columns (N/g, Cin*k, g*o) for groups
 * of g images (an im2col copy), then (Cout, Cin*k) @ (Cin*k, g*o) per group. The direct form
 * cannot vectorize along an output row (x is read every s-th element) and reached 17-40
 * GFLOPS on ResNet-18's 3x3/2 layers; a matmul gets the panels and register tiles of
 * layout.c. x is the padded view. */
static tg_tensor *strided_matmul_conv(tg_tensor *x, tg_tensor *w, const conv_geom *g) {
  int nsp = g->nsp, nd = 3 + 2 * nsp, perm[TG_MAX_DIMS], back[5] = {0, 2, 1, 3, 4};
  int64_t k[TG_MAX_DIMS] = {0}, taps = tg_dim(w, 1), n = tg_dim(x, 0), outs = 1, group = 1, out[TG_MAX_DIMS];
  for (int j = 0; j < nsp; j++) k[j] = tg_dim(w, 2 + j), taps *= k[j];
  tg_tensor *win = pool_windows(x, k, g->stride, g->dilation, nsp); /* (N, Cin, *o, *k) */
  if (!win) return NULL;
  out[0] = n, out[1] = tg_dim(w, 0);
  for (int j = 0; j < nsp; j++) outs *= tg_dim(win, 2 + j), out[2 + j] = tg_dim(win, 2 + j);
  while (group < n && (n % group || group * outs < STRIDED_MIN_COLUMNS)) group++; /* a divisor of N, or N */
  /* (N/g, g, Cin, *o, *k) → (N/g, Cin, *k, g, *o) → (N/g, Cin*k, g*o) */
  int64_t gs[TG_MAX_DIMS], cs[3] = {n / group, taps, group * outs}, ws[2] = {tg_dim(w, 0), taps};
  gs[0] = n / group, gs[1] = group;
  for (int j = 2; j <= 2 + 2 * nsp; j++) gs[j] = tg_dim(win, j - 1);
  perm[0] = 0, perm[1] = 2, perm[2 + nsp] = 1;
  for (int j = 0; j < nsp; j++) perm[2 + j] = 3 + nsp + j, perm[3 + nsp + j] = 3 + j;
  tg_tensor *cols = tg_contiguous(tg_permute(tg_reshape(win, gs, nd), perm, nd));
  tg_tensor *y = tg_contiguous(tg_matmul(tg_reshape(w, ws, 2), tg_reshape(cols, cs, 3))); /* stored: the matmul keeps its panels */
  int64_t ys[5] = {n / group, tg_dim(w, 0), group, outs, 1};
  y = tg_permute(tg_reshape(y, ys, 5), back, 5); /* (N/g, g, Cout, o, 1) */
  return tg_reshape(y, out, 2 + nsp);
}

/* The rule for strided_matmul_conv, one thread, batch 32, CPU ms, direct -> matmul (images
 * grouped): ResNet-18's 3x3/2 64->128 89-90 -> 65-69, 128->256 122 -> 61-78, 256->512 203-205
 * -> 51-56; its 1x1/2 11-24 -> 6-11. Its 7x7/2 stem (3 input channels: 147 taps, 236 MB of
 * columns at batch 32) 152-198 -> 435-444 and MobileNetV2's 3x3/2 stem (3 channels) 36 ->
 * 42-47 stay direct.
 * 64 input channels is the narrowest measured win (narrower ones keep the direct form and its
 * channels-last lanes, test ops_conv_strided_lanes_along_channels). IM2COL=0 in the
 * environment: never; IM2COL=1: every strided dense conv. */
#define IM2COL_MIN_CHANNELS 64

static bool strided_as_matmul(tg_tensor *w, const conv_geom *g) {
  int e = tg_getenv_int("IM2COL", -1);
  if (e == 0 || g->groups != 1 || !strided(w, g)) return false;
  for (int j = 0; j < g->nsp; j++)
    if (g->pad_before[j] < 0 || g->pad_after[j] < 0) return false;
  return e > 0 || tg_dim(w, 1) >= IM2COL_MIN_CHANNELS;
}

/* A pointwise conv (1x1 kernel, stride 1, no padding, one group) is a matmul per image,
 * (Cout, Cin) @ (Cin, positions). Summed over the positions flattened, the register tile
 * takes 16 consecutive positions (two vectors) per row; over (H, W) it took two rows of 8 at a
 * stride of W, 1.5-2.3x slower at 28x28 and 56x56 (MobileNetV2 at batch 1, 2 threads:
 * 24->144 @56 0.29-0.49 -> 0.15-0.25 ms, 32->192 @28 0.14-0.16 -> 0.065-0.08; performance.md).
 * At 14x14 (196 positions) the flat form measured 15-20% slower once (AVX2, 2026-11-25); with
 * the present tiles and replays in chunks, MobileNetV2 at batch 32 ran 5-9% faster flat on
 * AVX-512 (its 14x14 rows fill 14 of 16 lanes, 196 positions 13 whole vectors but one) and
 * the same with 8 lanes (VECTOR_BYTES=32), so 14x14 is flat too (performance.md). Above 4096
 * (112x112) the flat loop order, every output channel's row written a tile at a time, was
 * 1.3-1.7x slower (32->16, 16->96). */
#define POINTWISE_MIN_POSITIONS 196
#define POINTWISE_MAX_POSITIONS 4096

static bool pointwise_as_matmul(tg_tensor *w, const conv_geom *g, const tg_tensor *x) {
  int64_t positions = 1;
  if (g->groups != 1) return false;
  for (int j = 0; j < g->nsp; j++) {
    if (tg_dim(w, 2 + j) != 1 || g->stride[j] != 1 || g->pad_before[j] || g->pad_after[j]) return false;
    positions *= tg_dim(x, 2 + j);
  }
  return positions >= POINTWISE_MIN_POSITIONS && positions <= POINTWISE_MAX_POSITIONS;
}

/* (Cout, Cin) @ (N, Cin, positions) -> (N, Cout, positions), seen as (N, Cout, *spatial). */
static tg_tensor *pointwise_conv(tg_tensor *x, tg_tensor *w, const conv_geom *g) {
  int nsp = g->nsp;
  int64_t positions = 1, out[TG_MAX_DIMS], xs[3], ws[2] = {tg_dim(w, 0), tg_dim(w, 1)};
  out[0] = tg_dim(x, 0), out[1] = ws[0];
  for (int j = 0; j < nsp; j++) positions *= tg_dim(x, 2 + j), out[2 + j] = tg_dim(x, 2 + j);
  xs[0] = tg_dim(x, 0), xs[1] = tg_dim(x, 1), xs[2] = positions;
  return tg_reshape(tg_matmul(tg_reshape(w, ws, 2), tg_reshape(x, xs, 3)), out, 2 + nsp);
}

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

/* d conv / d w: for each weight tap, the sum over batch and output positions of gy times
 * the input it met (the forward's windows, reduced over the other axes). Short rows run in
 * padded vectors (the optimizer's PADTO) and the batch in chunks that fit the cache
 * (src/schedule/layout.c): both are the device's choices, not this graph's. */
static tg_tensor *conv_weight_grad(tg_tensor *gy, tg_tensor *x, tg_tensor *w, const conv_geom *g) {
  int nsp = g->nsp, n = 4 + 2 * nsp, axes[TG_MAX_DIMS];
  int64_t k[TG_MAX_DIMS] = {0}, gs[TG_MAX_DIMS], cout = tg_dim(w, 0);
  for (int j = 0; j < nsp; j++) k[j] = tg_dim(w, 2 + j);
  gs[0] = tg_dim(gy, 0), gs[1] = g->groups, gs[2] = cout / g->groups, gs[3 + nsp] = 1;
  for (int j = 0; j < nsp; j++) gs[3 + j] = tg_dim(gy, 2 + j), gs[4 + nsp + j] = 1;
  tg_tensor *prod = tg_mul(conv_windows(x, k, cout, g), tg_reshape(gy, gs, n)); /* (N, G, Cout/G, *o, Cin, *k) */
  if (!prod) return NULL;
  axes[0] = 0;
  for (int j = 0; j < nsp; j++) axes[1 + j] = 3 + j;
  tg_tensor *sum = tg_sum(prod, axes, nsp + 1, false); /* (G, Cout/G, Cin, *k) */
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
  int nsp = g->nsp;
  bool pads = false;
  for (int j = 0; j < nsp; j++) pads |= g->pad_before[j] > 0 || g->pad_after[j] > 0;
  conv_geom unpadded = *g;
  /* The input is read once per tap and output channel tile. Padded, it is copied once into a
   * buffer so that no tap needs a bounds mask; computed (relu of the layer before), it is
   * stored once instead of being recomputed by every read: in the demo's training step the
   * conv2 forward went 236 -> 100 ms and its weight gradient 375 -> 198 ms (batch 512).
   * A depthwise conv (one input and one output channel per group) reads each input element
   * only k*k times for k*k multiply-adds: there the copy (a read and a write of the whole
   * input) cost more than the conv, 2-3x (MobileNetV2's 96 channels at 112x112: 1.9 ms copy,
   * 0.6 ms conv), and the taps read the padded view with bounds masks instead; a computed
   * input is recomputed per tap (a bias and a clamp), not stored. */
  bool depthwise = tg_dim(w, 0) == g->groups && tg_dim(w, 1) == 1;
  tg_tensor *y = NULL;
  if (wino_applies(x, w, g->pad_before, g->pad_after, nsp, g->groups, g->stride, g->dilation)) {
    y = wino_conv2d(x, w, g->pad_before, g->pad_after); /* the same values, fewer multiplies (winograd.c) */
  } else if (pointwise_as_matmul(w, g, x)) { /* nothing to pad; a computed x stored once, as below */
    if (x->u->op != OP_BUFFER) x = tg_contiguous(x);
    y = pointwise_conv(x, w, g);
  } else if (strided_as_matmul(w, g)) { /* the column copy reads the padded view: no copy before it */
    y = strided_matmul_conv(pad_or_crop(x, g->pad_before, g->pad_after, nsp, 0), w, g);
  } else if (pads && !depthwise) {
    x = tg_contiguous(pad_or_crop(x, g->pad_before, g->pad_after, nsp, 0));
    for (int j = 0; j < nsp; j++) unpadded.pad_before[j] = unpadded.pad_after[j] = 0;
    g = &unpadded;
  } else if (!depthwise && x->u->op != OP_BUFFER) { /* the same for a computed input (relu of the layer before) */
    x = tg_contiguous(x);
  }
  if (!y) y = direct_conv(x, w, g);
  if (!y || rule_id < 0) return y;
  int64_t arg[3 + 4 * NN_MAX_NSP];
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

/* Function names by spatial axes (index 0: an invalid count). */
static const char *const conv_names[] = {"conv", "conv1d", "conv2d", "conv3d"};
static const char *const convt_names[] = {"conv_transpose", "conv_transpose1d", "conv_transpose2d", "conv_transpose3d"};

static int name_index(int nsp) { return nsp >= 1 && nsp <= NN_MAX_NSP ? nsp : 0; }

static bool check_nsp(const char *op, int nsp) {
  if (name_index(nsp)) return true;
  tensor_error("%s: %d spatial axes, expected 1, 2 or 3", op, nsp);
  return false;
}

/* x or weight: (N, C, *spatial) with nsp spatial axes, float. */
static bool check_rank(const char *op, const char *what, tg_tensor *t, int nsp) {
  char b[256];
  if (tg_ndim(t) == nsp + 2) return nn_need_float(op, what, t);
  tensor_error("%s: %s must have %d axes, got %s", op, what, nsp + 2, NN_SHAPE(t, b));
  return false;
}

static bool check_groups(const char *op, int groups, int64_t a, const char *an, int64_t b, const char *bn) {
  if (groups >= 1 && a % groups == 0 && b % groups == 0) return true;
  tensor_error("%s: groups = %d must be >= 1 and divide %s = %lld and %s = %lld", op, groups, an, (long long)a, bn,
               (long long)b);
  return false;
}

/* The dilated kernel must fit in the padded input: out = (in + 2p - d(k-1) - 1) / s + 1 >= 1. */
static bool check_fits(const char *op, tg_tensor *x, tg_tensor *w, int nsp, const int64_t *pad, const int64_t *st,
                       const int64_t *dil) {
  char a[256], b[256];
  for (int j = 0; j < nsp; j++) {
    int64_t k = tg_dim(w, 2 + j), in, span; /* pad <= INT_MAX: 2 * pad fits */
    if (k < 1 || !ck_add(tg_dim(x, 2 + j), 2 * pad[j], &in) || !ck_mul(dil[j], k - 1, &span) || !ck_add(span, 1, &span))
      return tensor_error("%s: kernel %s with dilation %lld does not fit the padded input %s (axis %d)", op,
                          NN_SHAPE(w, a), (long long)dil[j], NN_SHAPE(x, b), 2 + j), false;
    if (span > in) {
      tensor_error("%s: kernel %s (dilated extent %lld) does not fit the padded input %s (%lld on axis %d)", op,
                   NN_SHAPE(w, a), (long long)span, NN_SHAPE(x, b), (long long)in, 2 + j);
      return false;
    }
    if (!nn_check_windows(op, x, in, k, st[j], dil[j], 2 + j)) return false;
  }
  return true;
}

/* ---------------------------------------------------------------- convolutions */

tg_tensor *tg_conv(tg_tensor *x, tg_tensor *weight, tg_tensor *bias, int nsp, const int *stride, const int *padding,
                   const int *dilation, int groups) {
  const char *op = conv_names[name_index(nsp)];
  if (!x || !weight) return null_arg(op);
  int64_t st[NN_MAX_NSP], pad[NN_MAX_NSP], dil[NN_MAX_NSP];
  char a[256], b[256];
  if (!check_nsp(op, nsp) || !check_rank(op, "x", x, nsp) || !check_rank(op, "weight", weight, nsp) ||
      !nn_spatial_param(op, "stride", stride, nsp, 1, 1, st) || !nn_spatial_param(op, "padding", padding, nsp, 0, 0, pad) ||
      !nn_spatial_param(op, "dilation", dilation, nsp, 1, 1, dil) ||
      !check_groups(op, groups, tg_dim(x, 1), "input channels", tg_dim(weight, 0), "output channels"))
    return NULL;
  int64_t cin;
  if (!ck_mul(tg_dim(weight, 1), groups, &cin))
    return tensor_error("%s: weight %s times %d groups: more input channels than fit in int64", op,
                        NN_SHAPE(weight, a), groups);
  if (cin != tg_dim(x, 1))
    return tensor_error("%s: weight %s expects %lld input channels (%d groups), x %s has %lld", op,
                        NN_SHAPE(weight, a), (long long)cin, groups, NN_SHAPE(x, b), (long long)tg_dim(x, 1));
  if (!nn_check_channel_param(op, "bias", bias, tg_dim(weight, 0)) || !check_fits(op, x, weight, nsp, pad, st, dil))
    return NULL;
  tg_scope *s = tg_scope_begin();
  return nn_finish(s, conv_core(x, weight, bias, st, pad, pad, dil, groups, nsp));
}

tg_tensor *tg_conv1d(tg_tensor *x, tg_tensor *weight, tg_tensor *bias, const int stride[1], const int padding[1],
                     const int dilation[1], int groups) {
  return tg_conv(x, weight, bias, 1, stride, padding, dilation, groups);
}

tg_tensor *tg_conv2d(tg_tensor *x, tg_tensor *weight, tg_tensor *bias, const int stride[2], const int padding[2],
                     const int dilation[2], int groups) {
  return tg_conv(x, weight, bias, 2, stride, padding, dilation, groups);
}

tg_tensor *tg_conv3d(tg_tensor *x, tg_tensor *weight, tg_tensor *bias, const int stride[3], const int padding[3],
                     const int dilation[3], int groups) {
  return tg_conv(x, weight, bias, 3, stride, padding, dilation, groups);
}

/* The transposed convolution is a convolution (stride 1) of the input dilated by the stride,
 * (n-1)*s + 1, padded by before = d(k-1) - p and after = before + output_padding (negative: a
 * crop); its output is (n-1)*s - 2p + d(k-1) + output_padding + 1. Fills before/after. */
static bool check_transpose_sizes(const char *op, tg_tensor *x, tg_tensor *w, int nsp, const int64_t *st,
                                  const int64_t *pad, const int64_t *opad, const int64_t *dil, int64_t *before,
                                  int64_t *after) {
  char a[256], b[256];
  for (int j = 0; j < nsp; j++) {
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
    if (!nn_check_windows(op, x, in, k, 1, dil[j], 2 + j)) return false;
  }
  return true;
}

tg_tensor *tg_conv_transpose(tg_tensor *x, tg_tensor *weight, tg_tensor *bias, int nsp, const int *stride,
                             const int *padding, const int *output_padding, const int *dilation, int groups) {
  const char *op = convt_names[name_index(nsp)];
  if (!x || !weight) return null_arg(op);
  int64_t st[NN_MAX_NSP], pad[NN_MAX_NSP], opad[NN_MAX_NSP], dil[NN_MAX_NSP];
  char a[256], b[256];
  if (!check_nsp(op, nsp) || !check_rank(op, "x", x, nsp) || !check_rank(op, "weight", weight, nsp) ||
      !nn_spatial_param(op, "stride", stride, nsp, 1, 1, st) || !nn_spatial_param(op, "padding", padding, nsp, 0, 0, pad) ||
      !nn_spatial_param(op, "output_padding", output_padding, nsp, 0, 0, opad) ||
      !nn_spatial_param(op, "dilation", dilation, nsp, 1, 1, dil))
    return NULL;
  if (tg_dim(weight, 0) != tg_dim(x, 1))
    return tensor_error("%s: weight %s expects %lld input channels, x %s has %lld", op, NN_SHAPE(weight, a),
                        (long long)tg_dim(weight, 0), NN_SHAPE(x, b), (long long)tg_dim(x, 1));
  if (groups < 1 || tg_dim(x, 1) % groups)
    return tensor_error("%s: groups = %d must be >= 1 and divide the %lld input channels", op, groups,
                        (long long)tg_dim(x, 1));
  int64_t cout, before[NN_MAX_NSP], after[NN_MAX_NSP], one[NN_MAX_NSP] = {1, 1, 1};
  if (!ck_mul(tg_dim(weight, 1), groups, &cout))
    return shape_error("%s: %lld output channels per group times %d groups overflow int64", op,
                       (long long)tg_dim(weight, 1), groups);
  if (!nn_check_channel_param(op, "bias", bias, cout) ||
      !check_transpose_sizes(op, x, weight, nsp, st, pad, opad, dil, before, after))
    return NULL;
  tg_scope *s = tg_scope_begin();
  tg_tensor *xd = dilate_input(x, st, nsp), *w = transpose_weight(weight, groups, nsp);
  return nn_finish(s, conv_core(xd, w, bias, one, before, after, dil, groups, nsp));
}

tg_tensor *tg_conv_transpose1d(tg_tensor *x, tg_tensor *weight, tg_tensor *bias, const int stride[1],
                               const int padding[1], const int output_padding[1], const int dilation[1], int groups) {
  return tg_conv_transpose(x, weight, bias, 1, stride, padding, output_padding, dilation, groups);
}

tg_tensor *tg_conv_transpose2d(tg_tensor *x, tg_tensor *weight, tg_tensor *bias, const int stride[2],
                               const int padding[2], const int output_padding[2], const int dilation[2], int groups) {
  return tg_conv_transpose(x, weight, bias, 2, stride, padding, output_padding, dilation, groups);
}

tg_tensor *tg_conv_transpose3d(tg_tensor *x, tg_tensor *weight, tg_tensor *bias, const int stride[3],
                               const int padding[3], const int output_padding[3], const int dilation[3], int groups) {
  return tg_conv_transpose(x, weight, bias, 3, stride, padding, output_padding, dilation, groups);
}
