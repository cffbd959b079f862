/* test_winograd.c — the conv algorithms besides the direct form: 3x3 stride-1 convolutions by
 * Winograd F(2x2,3x3) and F(4x4,3x3) (src/nn/winograd.c) and strided convs as a matmul over
 * stored windows (conv.c, strided_matmul_conv). Values against naive C loops in double (odd
 * sizes, channel counts that are not multiples of the vector width, padding 0-2, batch > 1, a
 * bias), gradients of x, w and the bias against naive loops, float32 rounding at ResNet-18's
 * widest layer, and the rules that pick the algorithm. WINO=2 / WINO=4 force a tile size,
 * WINO=0 the direct form; IM2COL=1 / IM2COL=0 the same for strided convs. */
#include <stdint.h>
#include <stdlib.h>

#include "harness.h"
#include "nn/winograd.h"

/* Fills v with values in [-1, 1) from a seeded LCG. */
static void fill(float *v, int64_t n, uint32_t seed) {
  for (int64_t i = 0; i < n; i++) v[i] = (float)((seed = seed * 1664525u + 1013904223u) >> 9) / 8388608.0f - 1.0f;
}

typedef struct shape { int n, c, h, w, k, pad; } shape;

/* y = conv2d(x, w, b) with 3x3 kernels, stride 1, padding p: naive loops in double. */
static void naive_conv(const shape *s, const float *x, const float *w, const float *b, double *y) {
  int oh = s->h + 2 * s->pad - 2, ow = s->w + 2 * s->pad - 2;
  for (int n = 0; n < s->n; n++)
    for (int k = 0; k < s->k; k++)
      for (int i = 0; i < oh; i++)
        for (int j = 0; j < ow; j++) {
          double acc = b ? b[k] : 0;
          for (int c = 0; c < s->c; c++)
            for (int u = 0; u < 3; u++)
              for (int v = 0; v < 3; v++) {
                int ih = i + u - s->pad, iw = j + v - s->pad;
                if (ih >= 0 && ih < s->h && iw >= 0 && iw < s->w)
                  acc += (double)x[((n * s->c + c) * s->h + ih) * s->w + iw] * w[((k * s->c + c) * 3 + u) * 3 + v];
              }
          y[((n * s->k + k) * oh + i) * ow + j] = acc;
        }
}

/* The largest |got - want| relative to the largest |want|. */
static double rel_err(const float *got, const double *want, int64_t n) {
  double e = 0, m = 0;
  for (int64_t i = 0; i < n; i++) {
    double d = fabs(got[i] - want[i]);
    e = d > e || d != d ? d : e, m = fabs(want[i]) > m ? fabs(want[i]) : m;
  }
  return e / (m > 0 ? m : 1);
}

/* conv2d of seeded data under WINO=mode against the naive loops; the relative error. */
static double forward_error(const shape *s, const char *mode, bool bias) {
  int oh = s->h + 2 * s->pad - 2, ow = s->w + 2 * s->pad - 2;
  int64_t nx = (int64_t)s->n * s->c * s->h * s->w, nw = (int64_t)s->k * s->c * 9, ny = (int64_t)s->n * s->k * oh * ow;
  float *x = malloc(sizeof(float) * nx), *w = malloc(sizeof(float) * nw), *b = malloc(sizeof(float) * s->k);
  float *got = malloc(sizeof(float) * ny);
  double *want = malloc(sizeof(double) * ny), err = 1e30;
  fill(x, nx, 1), fill(w, nw, 2), fill(b, s->k, 3);
  naive_conv(s, x, w, bias ? b : NULL, want);
  setenv("WINO", mode, 1);
  tg_scope *sc = tg_scope_begin();
  tg_tensor *tx = tg_from_data(x, TG_FLOAT32, (int64_t[]){s->n, s->c, s->h, s->w}, 4);
  tg_tensor *tw = tg_from_data(w, TG_FLOAT32, (int64_t[]){s->k, s->c, 3, 3}, 4);
  tg_tensor *tb = bias ? tg_from_data(b, TG_FLOAT32, (int64_t[]){s->k}, 1) : NULL;
  tg_tensor *y = tg_conv2d(tx, tw, tb, NULL, (const int[]){s->pad, s->pad}, NULL, 1);
  if (y && tg_to_host(y, got, sizeof(float) * ny) == 0) err = rel_err(got, want, ny);
  tg_scope_end(sc);
  unsetenv("WINO");
  free(x), free(w), free(b), free(got), free(want);
  return err;
}

/* Odd sizes (tiles cut by the image edge), channels 1, 3, 9, 17, padding 0, 1 and 2, batch 1-3. */
static const shape odd_shapes[] = {
    {2, 3, 9, 11, 5, 1}, {1, 17, 7, 6, 9, 1}, {3, 9, 5, 13, 17, 0}, {2, 1, 4, 4, 1, 2}, {1, 5, 3, 3, 2, 0},
};

TEST(wino_f2_matches_naive) {
  for (size_t i = 0; i < sizeof odd_shapes / sizeof *odd_shapes; i++) {
    double e = forward_error(&odd_shapes[i], "2", i % 2 == 0);
    if (e > 1e-5) printf("  shape %zu: relative error %.3g\n", i, e);
    CHECK(e <= 1e-5);
  }
}

TEST(wino_f4_matches_naive) {
  for (size_t i = 0; i < sizeof odd_shapes / sizeof *odd_shapes; i++) {
    double e = forward_error(&odd_shapes[i], "4", i % 2 == 1);
    if (e > 1e-5) printf("  shape %zu: relative error %.3g\n", i, e);
    CHECK(e <= 1e-5);
  }
}

/* ResNet-18's last 3x3 layer (512 -> 512 at 7x7, one image): F(4x4) rounds more than the
 * direct sum (its transform entries reach 8 and 1/24) but stays well inside the 1e-4 of the
 * ONNX model tests; measured 1-2e-6 of the largest output. */
TEST(wino_f4_float32_rounding_at_512_channels) {
  shape s = {1, 512, 7, 7, 512, 1};
  double e4 = forward_error(&s, "4", true), e0 = forward_error(&s, "0", true);
  printf("  relative error: F(4x4) %.3g, direct %.3g\n", e4, e0);
  CHECK(e4 <= 1e-5);
  CHECK(e0 <= 1e-5);
}

/* Gradients of sum(conv2d(x, w, b) * gy) for x, w and b under WINO=mode, against naive loops:
 * dx[c, ih, iw] = sum gy[k, i, j] w[k, c, ih-i+p, iw-j+p], dw = sum gy x, db = sum gy. */
static void check_grads(const shape *s, const char *mode) {
  int oh = s->h + 2 * s->pad - 2, ow = s->w + 2 * s->pad - 2;
  int64_t nx = (int64_t)s->n * s->c * s->h * s->w, nw = (int64_t)s->k * s->c * 9, ny = (int64_t)s->n * s->k * oh * ow;
  float *x = malloc(sizeof(float) * nx), *w = malloc(sizeof(float) * nw), *b = malloc(sizeof(float) * s->k);
  float *gy = malloc(sizeof(float) * ny), *gx = malloc(sizeof(float) * nx), *gw = malloc(sizeof(float) * nw);
  float *gb = malloc(sizeof(float) * s->k);
  double *wx = calloc((size_t)nx, sizeof(double)), *ww = calloc((size_t)nw, sizeof(double)), *wb = calloc((size_t)s->k, sizeof(double));
  fill(x, nx, 4), fill(w, nw, 5), fill(b, s->k, 6), fill(gy, ny, 7);
  for (int n = 0; n < s->n; n++)
    for (int k = 0; k < s->k; k++)
      for (int i = 0; i < oh; i++)
        for (int j = 0; j < ow; j++) {
          double g = gy[((n * s->k + k) * oh + i) * ow + j];
          wb[k] += g;
          for (int c = 0; c < s->c; c++)
            for (int u = 0; u < 3; u++)
              for (int v = 0; v < 3; v++) {
                int ih = i + u - s->pad, iw = j + v - s->pad;
                if (ih < 0 || ih >= s->h || iw < 0 || iw >= s->w) continue;
                int64_t xi = ((n * s->c + c) * s->h + ih) * s->w + iw, wi = ((k * s->c + c) * 3 + u) * 3 + v;
                wx[xi] += g * w[wi], ww[wi] += g * x[xi];
              }
        }
  setenv("WINO", mode, 1);
  tg_scope *sc = tg_scope_begin();
  tg_tensor *tx = tg_from_data(x, TG_FLOAT32, (int64_t[]){s->n, s->c, s->h, s->w}, 4);
  tg_tensor *tw = tg_from_data(w, TG_FLOAT32, (int64_t[]){s->k, s->c, 3, 3}, 4);
  tg_tensor *tb = tg_from_data(b, TG_FLOAT32, (int64_t[]){s->k}, 1);
  tg_tensor *tgy = tg_from_data(gy, TG_FLOAT32, (int64_t[]){s->n, s->k, oh, ow}, 4);
  tg_tensor *y = tg_conv2d(tx, tw, tb, NULL, (const int[]){s->pad, s->pad}, NULL, 1);
  tg_tensor *wrt[3] = {tx, tw, tb}, *d[3] = {0};
  CHECK(tg_gradient(tg_sum(tg_mul(y, tgy), NULL, 0, false), wrt, 3, d) == 0);
  CHECK(d[0] && tg_to_host(d[0], gx, sizeof(float) * nx) == 0);
  CHECK(d[1] && tg_to_host(d[1], gw, sizeof(float) * nw) == 0);
  CHECK(d[2] && tg_to_host(d[2], gb, sizeof(float) * s->k) == 0);
  tg_scope_end(sc);
  unsetenv("WINO");
  double ex = rel_err(gx, wx, nx), ew = rel_err(gw, ww, nw), eb = rel_err(gb, wb, s->k);
  if (ex > 1e-5 || ew > 1e-5 || eb > 1e-5) printf("  WINO=%s: dx %.3g, dw %.3g, db %.3g\n", mode, ex, ew, eb);
  CHECK(ex <= 1e-5 && ew <= 1e-5 && eb <= 1e-5);
  free(x), free(w), free(b), free(gy), free(gx), free(gw), free(gb), free(wx), free(ww), free(wb);
}

TEST(wino_gradients_match_naive) {
  shape a = {2, 5, 7, 9, 6, 1}, b = {3, 3, 6, 5, 4, 2};
  check_grads(&a, "4"), check_grads(&b, "4"), check_grads(&a, "2");
}

/* A computed input, relu(x + r) as in ResNet's blocks (winograd.c stores it before the tiles
 * are cut): the output and the gradient of r (through the relu: zero where x + r <= 0) against
 * naive loops on the host's relu(x + r). */
TEST(wino_computed_input_matches_naive) {
  shape s = {2, 6, 9, 7, 5, 1};
  int oh = s.h + 2 * s.pad - 2, ow = s.w + 2 * s.pad - 2;
  int64_t nx = (int64_t)s.n * s.c * s.h * s.w, nw = (int64_t)s.k * s.c * 9, ny = (int64_t)s.n * s.k * oh * ow;
  float *x = malloc(sizeof(float) * nx), *r = malloc(sizeof(float) * nx), *in = malloc(sizeof(float) * nx);
  float *w = malloc(sizeof(float) * nw), *gy = malloc(sizeof(float) * ny), *got = malloc(sizeof(float) * ny);
  float *gr = malloc(sizeof(float) * nx);
  double *want = malloc(sizeof(double) * ny), *wr = calloc((size_t)nx, sizeof(double));
  fill(x, nx, 11), fill(r, nx, 12), fill(w, nw, 13), fill(gy, ny, 14);
  for (int64_t i = 0; i < nx; i++) in[i] = x[i] + r[i] > 0 ? x[i] + r[i] : 0;
  naive_conv(&s, in, w, NULL, want);
  for (int n = 0; n < s.n; n++) /* dr = [x + r > 0] * sum gy w (the transposed conv) */
    for (int k = 0; k < s.k; k++)
      for (int i = 0; i < oh; i++)
        for (int j = 0; j < ow; j++)
          for (int c = 0; c < s.c; c++)
            for (int u = 0; u < 3; u++)
              for (int v = 0; v < 3; v++) {
                int ih = i + u - s.pad, iw = j + v - s.pad;
                if (ih < 0 || ih >= s.h || iw < 0 || iw >= s.w) continue;
                int64_t xi = ((n * s.c + c) * s.h + ih) * s.w + iw;
                if (in[xi] > 0) wr[xi] += (double)gy[((n * s.k + k) * oh + i) * ow + j] * w[((k * s.c + c) * 3 + u) * 3 + v];
              }
  setenv("WINO", "4", 1);
  tg_scope *sc = tg_scope_begin();
  int64_t xs[4] = {s.n, s.c, s.h, s.w};
  tg_tensor *tx = tg_from_data(x, TG_FLOAT32, xs, 4), *tr = tg_from_data(r, TG_FLOAT32, xs, 4);
  tg_tensor *tw = tg_from_data(w, TG_FLOAT32, (int64_t[]){s.k, s.c, 3, 3}, 4);
  tg_tensor *tgy = tg_from_data(gy, TG_FLOAT32, (int64_t[]){s.n, s.k, oh, ow}, 4);
  tg_tensor *y = tg_conv2d(tg_relu(tg_add(tx, tr)), tw, NULL, NULL, (const int[]){s.pad, s.pad}, NULL, 1), *d[1] = {0};
  CHECK(y && tg_to_host(y, got, sizeof(float) * ny) == 0);
  CHECK(tg_gradient(tg_sum(tg_mul(y, tgy), NULL, 0, false), &tr, 1, d) == 0);
  CHECK(d[0] && tg_to_host(d[0], gr, sizeof(float) * nx) == 0);
  tg_scope_end(sc);
  unsetenv("WINO");
  double ey = rel_err(got, want, ny), er = rel_err(gr, wr, nx);
  if (ey > 1e-5 || er > 1e-5) printf("  relative error: y %.3g, dr %.3g\n", ey, er);
  CHECK(ey <= 1e-5 && er <= 1e-5);
  free(x), free(r), free(in), free(w), free(gy), free(got), free(gr), free(want), free(wr);
}

/* The rule: 3x3, stride 1, no dilation, one group, float32, no crop; 64 channels or more in
 * and out, 32 output tiles of 4x4 or more (the batched matmul's columns), and tiles that cover
 * at most 1.35x the output (14x14 in 16x16: 1.31x). */
TEST(wino_rule) {
  tg_scope *sc = tg_scope_begin();
  int64_t ones[2] = {1, 1}, two[2] = {2, 2}, zero[2] = {0, 0}, crop[2] = {-1, -1};
  tg_tensor *x = tg_full((int64_t[]){32, 256, 14, 14}, 4, 1, TG_FLOAT32);
  tg_tensor *w = tg_full((int64_t[]){256, 256, 3, 3}, 4, 1, TG_FLOAT32);
  tg_tensor *w5 = tg_full((int64_t[]){256, 256, 5, 5}, 4, 1, TG_FLOAT32);
  tg_tensor *x1 = tg_full((int64_t[]){1, 3, 14, 14}, 4, 1, TG_FLOAT32), *wn = tg_full((int64_t[]){8, 3, 3, 3}, 4, 1, TG_FLOAT32);
  CHECK(wino_applies(x, w, ones, ones, 2, 1, ones, ones));
  CHECK(!wino_applies(x, w, ones, ones, 2, 1, two, ones));  /* strided */
  CHECK(!wino_applies(x, w, ones, ones, 2, 1, ones, two));  /* dilated */
  CHECK(!wino_applies(x, w, ones, ones, 2, 2, ones, ones));  /* grouped */
  CHECK(!wino_applies(x, w, crop, crop, 2, 1, ones, ones));  /* a crop (transposed convs) */
  CHECK(!wino_applies(x, w5, ones, ones, 2, 1, ones, ones)); /* 5x5 */
  CHECK(!wino_applies(x1, wn, ones, ones, 2, 1, ones, ones)); /* 3 -> 8 channels */
  tg_tensor *x7 = tg_full((int64_t[]){1, 512, 7, 7}, 4, 1, TG_FLOAT32), *w7 = tg_full((int64_t[]){512, 512, 3, 3}, 4, 1, TG_FLOAT32);
  CHECK(!wino_applies(x7, w7, ones, ones, 2, 1, ones, ones)); /* 4 tiles: the matmul has 4 columns */
  tg_tensor *x8 = tg_full((int64_t[]){8, 512, 7, 7}, 4, 1, TG_FLOAT32);
  CHECK(wino_applies(x8, w7, ones, ones, 2, 1, ones, ones)); /* 8 images: 32 tiles */
  /* the demo's c3 (32 -> 64 channels) and c4 (a 6x6 output in 8x8 of tiles: 1.78x) */
  tg_tensor *xc3 = tg_full((int64_t[]){512, 32, 10, 10}, 4, 1, TG_FLOAT32), *wc3 = tg_full((int64_t[]){64, 32, 3, 3}, 4, 1, TG_FLOAT32);
  tg_tensor *xc4 = tg_full((int64_t[]){512, 64, 8, 8}, 4, 1, TG_FLOAT32), *wc4 = tg_full((int64_t[]){64, 64, 3, 3}, 4, 1, TG_FLOAT32);
  CHECK(!wino_applies(xc3, wc3, zero, zero, 2, 1, ones, ones));
  CHECK(!wino_applies(xc4, wc4, zero, zero, 2, 1, ones, ones));
  CHECK(wino_applies(xc4, wc4, ones, ones, 2, 1, ones, ones)); /* padded: 8x8 outputs, exact tiles */
  setenv("WINO", "0", 1);
  CHECK(!wino_applies(x, w, ones, ones, 2, 1, ones, ones));
  setenv("WINO", "4", 1);
  CHECK(wino_applies(x1, wn, ones, ones, 2, 1, ones, ones));
  CHECK(!wino_applies(x1, wn, crop, crop, 2, 1, ones, ones));
  unsetenv("WINO");
  tg_scope_end(sc);
}

/* ---- strided convs as a matmul over stored windows (conv.c) */

typedef struct sshape { int n, c, h, w, k, kh, kw, stride, pad; } sshape;

/* conv2d of seeded data, stride s, under IM2COL=mode (NULL: the rule), against naive loops;
 * with grads, also dx and dw of sum(y * gy). Returns the largest relative error. */
static double strided_error(const sshape *s, const char *mode, bool grads) {
  int oh = (s->h + 2 * s->pad - s->kh) / s->stride + 1, ow = (s->w + 2 * s->pad - s->kw) / s->stride + 1;
  int64_t nx = (int64_t)s->n * s->c * s->h * s->w, nw = (int64_t)s->k * s->c * s->kh * s->kw;
  int64_t ny = (int64_t)s->n * s->k * oh * ow;
  float *x = malloc(sizeof(float) * nx), *w = malloc(sizeof(float) * nw), *gy = malloc(sizeof(float) * ny);
  float *y = malloc(sizeof(float) * ny), *gx = malloc(sizeof(float) * nx), *gw = malloc(sizeof(float) * nw);
  double *wy = calloc((size_t)ny, sizeof(double)), *wx = calloc((size_t)nx, sizeof(double));
  double *ww = calloc((size_t)nw, sizeof(double)), err = 1e30;
  fill(x, nx, 8), fill(w, nw, 9), fill(gy, ny, 10);
  for (int n = 0; n < s->n; n++)
    for (int k = 0; k < s->k; k++)
      for (int i = 0; i < oh; i++)
        for (int j = 0; j < ow; j++) {
          int64_t yi = ((int64_t)(n * s->k + k) * oh + i) * ow + j;
          for (int c = 0; c < s->c; c++)
            for (int u = 0; u < s->kh; u++)
              for (int v = 0; v < s->kw; v++) {
                int ih = i * s->stride + u - s->pad, iw = j * s->stride + v - s->pad;
                if (ih < 0 || ih >= s->h || iw < 0 || iw >= s->w) continue;
                int64_t xi = ((int64_t)(n * s->c + c) * s->h + ih) * s->w + iw, wi = ((k * s->c + c) * s->kh + u) * s->kw + v;
                wy[yi] += (double)x[xi] * w[wi], wx[xi] += (double)gy[yi] * w[wi], ww[wi] += (double)gy[yi] * x[xi];
              }
        }
  if (mode) setenv("IM2COL", mode, 1);
  tg_scope *sc = tg_scope_begin();
  tg_tensor *tx = tg_from_data(x, TG_FLOAT32, (int64_t[]){s->n, s->c, s->h, s->w}, 4);
  tg_tensor *tw = tg_from_data(w, TG_FLOAT32, (int64_t[]){s->k, s->c, s->kh, s->kw}, 4);
  tg_tensor *out = tg_conv2d(tx, tw, NULL, (const int[]){s->stride, s->stride}, (const int[]){s->pad, s->pad}, NULL, 1);
  if (out && tg_to_host(out, y, sizeof(float) * ny) == 0) err = rel_err(y, wy, ny);
  if (grads) {
    tg_tensor *wrt[2] = {tx, tw}, *d[2] = {0};
    tg_tensor *tgy = tg_from_data(gy, TG_FLOAT32, (int64_t[]){s->n, s->k, oh, ow}, 4);
    bool ok = tg_gradient(tg_sum(tg_mul(out, tgy), NULL, 0, false), wrt, 2, d) == 0 && d[0] && d[1] &&
              tg_to_host(d[0], gx, sizeof(float) * nx) == 0 && tg_to_host(d[1], gw, sizeof(float) * nw) == 0;
    double ex = ok ? rel_err(gx, wx, nx) : 1e30, ew = ok ? rel_err(gw, ww, nw) : 1e30;
    err = ex > err ? ex : ew > err ? ew : err;
  }
  tg_scope_end(sc);
  unsetenv("IM2COL");
  free(x), free(w), free(gy), free(y), free(gx), free(gw), free(wy), free(wx), free(ww);
  return err;
}

/* Forced (IM2COL=1) on odd sizes, non-square kernels, strides 2 and 3, padding 0-2, with
 * gradients; then ResNet-18-like shapes the rule itself takes (64 input channels). */
TEST(conv_strided_matmul_matches_naive) {
  static const sshape forced[] = {
      {2, 3, 9, 11, 5, 3, 3, 2, 1}, {1, 7, 10, 7, 9, 1, 1, 2, 0}, {3, 5, 11, 13, 4, 3, 2, 3, 2}, {2, 17, 8, 8, 6, 2, 2, 2, 0},
      {2, 5, 40, 34, 3, 3, 3, 2, 1}, /* 20x17 outputs: one image per matmul (256+ columns) */
  };
  for (size_t i = 0; i < sizeof forced / sizeof *forced; i++) {
    double e = strided_error(&forced[i], "1", true);
    if (e > 1e-5) printf("  forced shape %zu: relative error %.3g\n", i, e);
    CHECK(e <= 1e-5);
  }
  static const sshape rule[] = {{2, 64, 13, 13, 70, 3, 3, 2, 1}, {2, 64, 12, 12, 24, 1, 1, 2, 0}};
  for (size_t i = 0; i < sizeof rule / sizeof *rule; i++) {
    double e = strided_error(&rule[i], NULL, i == 0);
    if (e > 1e-5) printf("  rule shape %zu: relative error %.3g\n", i, e);
    CHECK(e <= 1e-5);
  }
}

/* A dense strided conv with 64 input channels or more (the rule's) on all-ones inputs against
 * hand-computed sums: an interior output of a 3x3/2 conv with padding 1 sums 9 taps of each of
 * the 64 channels (576), the corner 4 (256), the first row's others 6 (384). */
TEST(conv_strided_matmul_hand_values) {
  tg_scope *sc = tg_scope_begin();
  tg_tensor *x = tg_full((int64_t[]){4, 64, 28, 28}, 4, 1, TG_FLOAT32), *w = tg_full((int64_t[]){128, 64, 3, 3}, 4, 1, TG_FLOAT32);
  tg_tensor *y = tg_conv2d(x, w, NULL, (const int[]){2, 2}, (const int[]){1, 1}, NULL, 1);
  float y0[2], y1[2];
  CHECK(y && tg_realize(y) == 0);
  CHECK(tg_to_host(tg_shrink(y, (int64_t[]){3, 127, 1, 1}, (int64_t[]){4, 128, 2, 3}), y0, sizeof y0) == 0);
  CHECK(tg_to_host(tg_shrink(y, (int64_t[]){0, 0, 0, 0}, (int64_t[]){1, 1, 1, 2}), y1, sizeof y1) == 0);
  CHECK(y0[0] == 576 && y0[1] == 576 && y1[0] == 256 && y1[1] == 384);
  tg_scope_end(sc);
}
