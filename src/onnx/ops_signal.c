/* ops_signal.c — ONNX DFT and STFT as matrix products: the transform along an axis is the
 * signal (real and imaginary parts) times cos and sin tables of k n / N built on the host, so
 * it is two or four tg_matmul calls, not a kernel of its own. STFT frames the signal with
 * tg_unfold and windows it first. MelWeightMatrix is such a table too. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "onnx/onnx_int.h"
#include "runtime/helpers.h"

#define IN(i) (n->nin > (i) ? n->in[i] : NULL)
#define MAX_N 8192 /* transform length: the tables are N x K doubles */

/* cos (which 0) or sin (which 1) of 2 pi k n / N as an (N, K) matrix of dtype dt. */
static tg_tensor *table(int64_t N, int64_t K, int which, tg_dtype dt) {
  double *v = malloc((size_t)(N * K) * sizeof *v);
  if (!v) return tg_set_error(TG_ERR_NOMEM, "DFT: out of memory"), NULL;
  for (int64_t i = 0; i < N; i++)
    for (int64_t k = 0; k < K; k++) {
      double a = 2 * M_PI * (double)((i * k) % N) / (double)N;
      v[i * K + k] = which ? sin(a) : cos(a);
    }
  tg_tensor *t = tg_cast(tg_from_data(v, TG_FLOAT64, (int64_t[]){N, K}, 2), dt);
  free(v);
  return t;
}

/* The transform of re + i im (im may be NULL) along the last axis (length N) into K bins:
 * (..., K, 2). Forward: e^{-i a}; inverse: e^{+i a} / N. */
static tg_tensor *dft_last(tg_tensor *re, tg_tensor *im, int64_t N, int64_t K, bool inverse) {
  if (N < 1 || N > MAX_N || K < 1) return tg_set_error(TG_ERR_ARG, "DFT: length %lld (1 to %d)", (long long)N, MAX_N), NULL;
  tg_dtype dt = tg_get_dtype(re);
  tg_tensor *c = table(N, K, 0, dt), *s = table(N, K, 1, dt);
  double sg = inverse ? 1.0 : -1.0; /* the sign of the sine term */
  tg_tensor *r = tg_matmul(re, c), *i = tg_mul_s(tg_matmul(re, s), sg);
  if (im) r = tg_sub(r, tg_mul_s(tg_matmul(im, s), sg)), i = tg_add(i, tg_matmul(im, c));
  if (inverse) r = tg_div_s(r, (double)N), i = tg_div_s(i, (double)N);
  tg_tensor *parts[2] = {r, i};
  return tg_stack(parts, 2, -1);
}

/* The real and imaginary parts of a (..., 1 or 2) tensor. */
static int split_complex(ox_node *n, tg_tensor *x, tg_tensor **re, tg_tensor **im) {
  int64_t c = tg_dim(x, -1);
  if (c != 1 && c != 2) return ox_fail(n, TG_ERR_ARG, "the last axis must be 1 (real) or 2 (complex), not %lld", (long long)c);
  *re = tg_squeeze(tg_slice(x, -1, 0, 1, 1), -1);
  *im = c == 2 ? tg_squeeze(tg_slice(x, -1, 1, 2, 1), -1) : NULL;
  return 0;
}

static int op_dft(ox_node *n) {
  tg_tensor *x = IN(0), *re, *im;
  int nd = tg_ndim(x);
  if (!x || nd < 2) return ox_fail(n, TG_ERR_ARG, "needs a signal of rank >= 2");
  int64_t a = ox_attr_i(n, "axis", 1); /* opset 20: an input */
  if (IN(2) && ox_host_ints(IN(2), &a, 1) != 1) return ox_fail(n, TG_ERR_ARG, "axis must be one value");
  int axis = ox_axis(n, a, nd - 1);
  bool inverse = ox_attr_i(n, "inverse", 0) != 0, onesided = ox_attr_i(n, "onesided", 0) != 0;
  if (axis < 0 || split_complex(n, x, &re, &im)) return -1;
  int64_t N = tg_dim(re, axis), len = N;
  if (IN(1) && ox_host_ints(IN(1), &len, 1) != 1) return ox_fail(n, TG_ERR_ARG, "dft_length must be one value");
  if (len < 1 || len > MAX_N) return ox_fail(n, TG_ERR_ARG, "dft_length %lld", (long long)len);
  re = tg_transpose(re, axis, nd - 2), im = im ? tg_transpose(im, axis, nd - 2) : NULL;
  if (len != N) { /* pad with zeros or cut to dft_length */
    int64_t before[OX_MAX_DIMS] = {0}, after[OX_MAX_DIMS] = {0};
    after[nd - 2] = len - N;
    re = tg_pad_mode(re, before, after, TG_PAD_CONSTANT, 0.0);
    im = im ? tg_pad_mode(im, before, after, TG_PAD_CONSTANT, 0.0) : NULL;
  }
  tg_tensor *y = dft_last(re, im, len, onesided ? len / 2 + 1 : len, inverse);
  return ox_set(n, 0, y ? tg_transpose(y, axis, nd - 2) : NULL);
}

/* STFT: frames of frame_length every frame_step (tg_unfold), times the window, transformed. */
static int op_stft(ox_node *n) {
  tg_tensor *x = IN(0), *re, *im;
  int64_t step, flen = -1;
  if (!x || tg_ndim(x) != 3) return ox_fail(n, TG_ERR_ARG, "needs a signal (batch, length, 1 or 2)");
  if (ox_host_ints(IN(1), &step, 1) != 1 || step < 1) return ox_fail(n, TG_ERR_ARG, "frame_step must be one value >= 1");
  if (IN(3) && ox_host_ints(IN(3), &flen, 1) != 1) return ox_fail(n, TG_ERR_ARG, "frame_length must be one value");
  if (flen < 0) flen = IN(2) ? tg_dim(IN(2), 0) : -1;
  if (flen < 1 || flen > tg_dim(x, 1)) return ox_fail(n, TG_ERR_ARG, "frame_length %lld", (long long)flen);
  if (split_complex(n, x, &re, &im)) return -1;
  re = tg_unfold(re, 1, flen, step), im = im ? tg_unfold(im, 1, flen, step) : NULL; /* (B, frames, L) */
  if (IN(2)) re = tg_mul(re, IN(2)), im = im ? tg_mul(im, IN(2)) : NULL;
  bool onesided = ox_attr_i(n, "onesided", 1) != 0;
  return ox_set(n, 0, dft_last(re, im, flen, onesided ? flen / 2 + 1 : flen, false));
}

/* MelWeightMatrix(num_mel_bins, dft_length, sample_rate, lower_edge_hertz, upper_edge_hertz):
 * (dft_length / 2 + 1, num_mel_bins) triangular filters between mel-spaced spectrogram bins,
 * computed on the host from its scalar inputs as the ONNX reference does (bins floored,
 * num_mel_bins + 2 edges over the mel range divided in num_mel_bins + 2 steps). */
static int op_mel_weight_matrix(ox_node *n) {
  int64_t mels, dft;
  double rate, lo, hi;
  if (ox_host_ints(IN(0), &mels, 1) != 1 || ox_host_ints(IN(1), &dft, 1) != 1 || ox_host_doubles(IN(2), &rate, 1) != 1 ||
      ox_host_doubles(IN(3), &lo, 1) != 1 || ox_host_doubles(IN(4), &hi, 1) != 1)
    return ox_fail(n, TG_ERR_ARG, "needs five scalar inputs");
  if (mels < 1 || mels > MAX_N || dft < 1 || dft > MAX_N || !(rate > 0) || !(lo >= 0) || !(hi >= lo))
    return ox_fail(n, TG_ERR_ARG, "num_mel_bins %lld, dft_length %lld (1 to %d), sample_rate %g, edges %g to %g",
                   (long long)mels, (long long)dft, MAX_N, rate, lo, hi);
  int dt = ox_dtype((int)ox_attr_i(n, "output_datatype", 1), "MelWeightMatrix output_datatype");
  if (dt < 0) return -1;
  int64_t bins = dft / 2 + 1, *edge = malloc((size_t)(mels + 2) * sizeof *edge);
  double *w = calloc((size_t)(bins * mels), sizeof *w);
  int rc = edge && w ? 0 : tg_set_error(TG_ERR_NOMEM, "MelWeightMatrix: out of memory");
  double mlo = 2595 * log10(1 + lo / 700), step = (2595 * log10(1 + hi / 700) - mlo) / (double)(mels + 2);
  for (int64_t k = 0; !rc && k < mels + 2; k++) {
    double hz = 700 * (pow(10, ((double)k * step + mlo) / 2595) - 1);
    edge[k] = (int64_t)floor((double)(dft + 1) * hz / rate);
    if (edge[k] < 0 || edge[k] >= bins)
      rc = ox_fail(n, TG_ERR_ARG, "edge %lld falls on bin %lld of %lld", (long long)k, (long long)edge[k], (long long)bins);
  }
  for (int64_t i = 0; !rc && i < mels; i++) {
    int64_t l = edge[i], c = edge[i + 1], h = edge[i + 2];
    if (c == l) w[c * mels + i] = 1;
    for (int64_t j = l; c > l && j <= c; j++) w[j * mels + i] = (double)(j - l) / (double)(c - l);
    for (int64_t j = c; h > c && j < h; j++) w[j * mels + i] = (double)(h - j) / (double)(h - c);
  }
  tg_tensor *t = rc ? NULL : tg_cast(tg_from_data(w, TG_FLOAT64, (int64_t[]){bins, mels}, 2), (tg_dtype)dt);
  free(edge), free(w);
  return rc ? rc : ox_set(n, 0, t);
}

const ox_op ox_ops_signal[] = {
    {"MelWeightMatrix", 17, op_mel_weight_matrix, "output_datatype"},
    {"DFT", 17, op_dft, "axis,inverse,onesided"},
    {"STFT", 17, op_stft, "onesided"},
    {NULL, 0, NULL, NULL},
};
