/* winograd.c — 3x3 stride-1 2-D convolutions by Winograd's minimal filtering F(m x m, 3x3)
 * (Lavin & Gray 2015), as tensor ops like tinygrad's WINO=1: no kernel of its own.
 *
 *   the input cut into overlapping (m+2)^2 tiles, stride m     d: (N, C, TH, TW, a, a)
 *   V = B^T d B  per tile and channel                           (a*a, C, N*TH*TW)
 *   U = G g G^T  per output and input channel                   (a*a, K, C)
 *   M = U @ V    one batched matmul over the a*a tile positions (a*a, K, N*TH*TW)
 *   Y = A^T M A  per tile: m x m outputs, cropped to the image
 *
 * The matmul does K*C*a^2 multiply-adds per tile of m^2 outputs instead of K*C*9*m^2: 2.25x
 * fewer for m = 2, 4x fewer for m = 4. The transforms are products with the small constant
 * matrices (a tensor of 36 floats), one axis at a time, each a short reduction kernel. (Rows of
 * scaled slices joined by tg_cat, tinygrad's way, were 10-30x slower here: the kernel selects
 * the row by position per element and evaluates every row's loads.) The derivative stays the
 * direct convolution's (conv.c's GRADFN wraps this graph): Winograd only changes how the
 * forward values are computed. */
#include "nn/winograd.h"
#include "runtime/helpers.h"

/* One tile size: the three matrices, row-major. a = m + 2 (3x3 kernels only). */
typedef struct wino_mats {
  int m, a;
  const double *bt; /* a x a: input tile transform */
  const double *g;  /* a x 3: weight transform */
  const double *at; /* m x a: output transform */
} wino_mats;

static const double bt2[] = {1, 0, -1, 0, 0, 1, 1, 0, 0, -1, 1, 0, 0, 1, 0, -1};
static const double g2[] = {1, 0, 0, 0.5, 0.5, 0.5, 0.5, -0.5, 0.5, 0, 0, 1};
static const double at2[] = {1, 1, 1, 0, 0, 1, -1, -1};

static const double bt4[] = {4, 0, -5, 0,  1, 0, 0, -4, -4, 1,  1, 0, 0, 4, -4, -1, 1, 0,
                             0, -2, -1, 2, 1, 0, 0, 2,  -1, -2, 1, 0, 0, 4, 0,  -5, 0, 1};
static const double g4[] = {1.0 / 4,  0,        0,       -1.0 / 6, -1.0 / 6, -1.0 / 6, -1.0 / 6, 1.0 / 6, -1.0 / 6,
                            1.0 / 24, 1.0 / 12, 1.0 / 6, 1.0 / 24, -1.0 / 12, 1.0 / 6, 0,        0,       1};
static const double at4[] = {1, 1, 1, 1, 1, 0, 0, 1, -1, 2, -2, 0, 0, 1, 1, 4, 4, 0, 0, 1, -1, 8, -8, 1};

static const wino_mats mats[] = {{2, 4, bt2, g2, at2}, {4, 6, bt4, g4, at4}};

/* A constant matrix (rows x cols, from a table of doubles) as a float32 tensor. */
static tg_tensor *const_matrix(const double *mat, int rows, int cols) {
  float v[64];
  for (int i = 0; i < rows * cols; i++) v[i] = (float)mat[i];
  int64_t sh[2] = {rows, cols};
  return tg_from_data(v, TG_FLOAT32, sh, 2);
}

/* out[.., r, ..] = sum_c mat[r][c] * t[.., c, ..] on `axis` of t (cols there, rows after): a
 * broadcast product with the constant summed over c. The other axes keep their order, so a
 * kernel reads and writes along the innermost one (the tiles), whatever axis it contracts. */
static tg_tensor *contract(tg_tensor *t, int axis, const double *mat, int rows, int cols) {
  int nd = tg_ndim(t);
  int64_t ts[TG_MAX_DIMS + 1], es[TG_MAX_DIMS + 1], ms[TG_MAX_DIMS + 1];
  for (int i = 0, j = 0; i <= nd; i++) {
    bool at = i == axis, after = i == axis + 1;
    ts[i] = at ? 1 : tg_dim(t, j), es[i] = at ? rows : tg_dim(t, j), ms[i] = at ? rows : after ? cols : 1;
    if (!at) j++;
  }
  tg_tensor *e = tg_expand(tg_reshape(t, ts, nd + 1), es, nd + 1);
  int red = axis + 1;
  return tg_sum(tg_mul(e, tg_reshape(const_matrix(mat, rows, cols), ms, nd + 1)), &red, 1, false);
}

/* The tile size: WINO=2 or WINO=4 forces it (WINO=0: never Winograd, see wino_applies). */
static const wino_mats *pick_mats(void) {
  int e = tg_getenv_int("WINO", -1);
  return e == 2 ? &mats[0] : &mats[1];
}

/* The rule, measured with bench_onnx_conv (one thread, process CPU time; docs/nn.md): F(4x4)
 * wins where the channels are wide, the batched matmul has enough columns (output tiles) and
 * the tiles do not overhang the image much. ResNet-18 at batch 32: 64 channels at 56x56 121 ->
 * 98 ms, 128 at 28x28 120 -> 56, 256 at 14x14 102-178 -> 59, 512 at 7x7 121 -> 52 (14 and 7
 * rows in 16 and 8: 1.31x the outputs computed). At batch 1: 196 tiles 3.5 -> 2.4 ms, 49 tiles
 * 3.6 -> 1.8-2.1, 16 tiles even, 4 tiles (512 at 7x7) 3.4-7.5 -> 10-22 (the 36x512x512 weight
 * transform outweighs a matmul of 4 columns). The demo's convs at batch 512 lose: 32 -> 64 at
 * 10x10 (exact tiles) 16-18 -> 24-26 ms, 64 -> 64 with a 6x6 output (1.78x overhang) 25-30 ->
 * 41-49, the 10x10 output of an input gradient (1.44x) 39-44 -> 53-57. */
#define WINO_MIN_CHANNELS 64
#define WINO_MIN_TILES 32
#define WINO_MAX_OVERHANG 1.35

bool wino_applies(tg_tensor *x, tg_tensor *w, const int64_t *pad_before, const int64_t *pad_after, int nsp,
                  int64_t groups, const int64_t *stride, const int64_t *dilation) {
  int e = tg_getenv_int("WINO", -1);
  if (e == 0 || nsp != 2 || groups != 1) return false;
  for (int j = 0; j < 2; j++)
    if (stride[j] != 1 || dilation[j] != 1 || tg_dim(w, 2 + j) != 3 || pad_before[j] < 0 || pad_after[j] < 0)
      return false;
  if (tg_get_dtype(x) != TG_FLOAT32 || tg_get_dtype(w) != TG_FLOAT32) return false;
  if (e > 0) return true;
  int64_t tiles = tg_dim(x, 0);
  double computed = 1, outputs = 1;
  for (int j = 0; j < 2; j++) {
    int64_t out = tg_dim(x, 2 + j) + pad_before[j] + pad_after[j] - 2, t = (out + 3) / 4;
    tiles *= t, computed *= (double)(4 * t), outputs *= (double)out;
  }
  return tg_dim(w, 0) >= WINO_MIN_CHANNELS && tg_dim(w, 1) >= WINO_MIN_CHANNELS && tiles >= WINO_MIN_TILES &&
         computed <= WINO_MAX_OVERHANG * outputs;
}

/* U^T = (G g G^T)^T as (a*a, C, K): the matmul's right operand (weights only: folded once by
 * a replay, docs/jit.md). */
static tg_tensor *weight_tiles(tg_tensor *w, const wino_mats *mt) {
  int64_t flat[3] = {(int64_t)mt->a * mt->a, tg_dim(w, 1), tg_dim(w, 0)};
  int perm[4] = {2, 3, 1, 0};
  tg_tensor *u = tg_permute(w, perm, 4); /* (3, 3, C, K) */
  u = contract(contract(u, 0, mt->g, mt->a, 3), 1, mt->g, mt->a, 3);
  return tg_reshape(tg_contiguous(u), flat, 3);
}

/* Every pass keeps the channels innermost (tiles of an NHWC image), so that each kernel loads
 * and stores whole vectors along them: the taps of a tile lie m apart along a row, which in
 * NCHW made the tile passes read every m-th element (masked gathers: ResNet-18's 64@56 layer
 * at batch 32 took 24 ms for the first input pass, 9.4 ms for the first output pass; in NHWC
 * 1.7 and 3.7: docs/performance.md, "AVX-512 VM again"). */
static const int to_nhwc[4] = {0, 2, 3, 1}, to_nchw[4] = {0, 3, 1, 2};

/* V = B^T d B as (a*a, N*TH*TW, C), from x padded so that TH x TW tiles of m cover it: the
 * image stored NHWC (one transpose; none where x is the NCHW view of a Winograd output, as
 * in ResNet's blocks: the view cancels), then along the image rows, whole rows kept
 * (N, TH, a, Wp, C), then along the columns, written in the matmul's layout (a, a, N, TH, TW, C). */
static tg_tensor *input_tiles(tg_tensor *x, const wino_mats *mt, const int64_t *before, const int64_t *after) {
  int64_t a = mt->a, k[1] = {a}, s[1] = {mt->m}, d[1] = {1};
  int64_t pb[4] = {0, before[0], before[1], 0}, pa[4] = {0, after[0], after[1], 0};
  tg_tensor *xp = tg_pad(tg_contiguous(tg_permute(x, to_nhwc, 4)), pb, pa, 0); /* (N, Hp, Wp, C) */
  int p0[4] = {0, 2, 3, 1}, p1[5] = {0, 3, 4, 1, 2}, p2[5] = {0, 1, 2, 4, 3}, p3[6] = {2, 5, 0, 1, 4, 3};
  tg_tensor *rows = pool_windows(tg_permute(xp, p0, 4), k, s, d, 1);          /* (N, Wp, C, TH, a) */
  if (!rows) return NULL;
  tg_tensor *t = tg_contiguous(contract(tg_permute(rows, p1, 5), 2, mt->bt, a, a)); /* (N, TH, a, Wp, C) */
  tg_tensor *cols = pool_windows(tg_permute(t, p2, 5), k, s, d, 1);           /* (N, TH, a, C, TW, a) */
  if (!cols) return NULL;
  tg_tensor *v = tg_contiguous(contract(tg_permute(cols, p3, 6), 1, mt->bt, a, a)); /* (a, a, N, TH, TW, C) */
  int64_t flat[3] = {a * a, tg_dim(cols, 0) * tg_dim(cols, 1) * tg_dim(cols, 4), tg_dim(x, 1)};
  return tg_reshape(v, flat, 3);
}

tg_tensor *wino_conv2d(tg_tensor *x, tg_tensor *w, const int64_t *pad_before, const int64_t *pad_after) {
  const wino_mats *mt = pick_mats();
  int64_t n = tg_dim(x, 0), kout = tg_dim(w, 0), out[2], tiles[2], after[2];
  for (int j = 0; j < 2; j++) {
    out[j] = tg_dim(x, 2 + j) + pad_before[j] + pad_after[j] - 2;
    tiles[j] = (out[j] + mt->m - 1) / mt->m;
    after[j] = pad_after[j] + tiles[j] * mt->m - out[j]; /* round the output up to whole tiles */
  }
  tg_tensor *v = input_tiles(x, mt, pad_before, after);
  tg_tensor *u = weight_tiles(w, mt);
  tg_tensor *prod = tg_matmul(v, u); /* (a*a, N*TH*TW, K) */
  /* Y = A^T M A: along the tile rows, then along the columns, written as an NHWC image
   * (N, TH, m, TW, m, K) that the result views as NCHW. */
  int64_t ms[6] = {mt->a, mt->a, n, tiles[0], tiles[1], kout};
  int p1[6] = {2, 3, 0, 4, 1, 5};
  tg_tensor *y = contract(tg_permute(tg_reshape(prod, ms, 6), p1, 6), 2, mt->at, mt->m, mt->a); /* (N, TH, m, TW, a, K) */
  y = tg_contiguous(contract(tg_contiguous(y), 4, mt->at, mt->m, mt->a));                   /* (N, TH, m, TW, m, K) */
  int64_t img[4] = {n, tiles[0] * mt->m, tiles[1] * mt->m, kout}, lo[4] = {0}, hi[4] = {n, out[0], out[1], kout};
  return tg_permute(tg_shrink(tg_reshape(y, img, 4), lo, hi), to_nchw, 4);
}
