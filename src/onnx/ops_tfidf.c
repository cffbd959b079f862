/* ops_tfidf.c — ONNX TfIdfVectorizer on integer input, from tensor ops: for each n-gram length
 * and skip distance, the input's windows are stacked (B, P, n), compared with the pool's
 * n-grams (M, n) and the matches summed over positions; a one-hot (n-grams x outputs) matrix
 * maps the counts to ngram_indexes. TF, IDF and TFIDF weight them. String pools are not
 * supported (tg has no strings). */
#include <stdlib.h>
#include <string.h>

#include "onnx/onnx_int.h"
#include "runtime/helpers.h"

#define IN(i) (n->nin > (i) ? n->in[i] : NULL)
#define MAX_POOL 65536

/* Counts (B, M) of the M pool n-grams of length g (pool values at p) in x (B, L), skips 0..maxskip. */
static tg_tensor *count_ngrams(tg_tensor *x, const int64_t *p, int64_t M, int64_t g, int64_t maxskip) {
  int64_t B = tg_dim(x, 0), L = tg_dim(x, 1);
  tg_tensor *pool = tg_from_data(p, TG_INT64, (int64_t[]){1, 1, M, g}, 4), *total = tg_zeros((int64_t[]){B, M}, 2, TG_INT64);
  for (int64_t s = 0; s <= (g == 1 ? 0 : maxskip); s++) { /* unigrams are counted once */
    int64_t d = s + 1, span = (g - 1) * d + 1, P = L - span + 1;
    if (P < 1) break;
    tg_tensor *cols[64];
    for (int64_t t = 0; t < g; t++) cols[t] = tg_slice(x, 1, t * d, t * d + P, 1);
    tg_tensor *w = tg_unsqueeze(tg_stack(cols, (int)g, 2), 2); /* (B, P, 1, g) */
    tg_tensor *match = tg_all(tg_eq(w, pool), (int[]){3}, 1, false); /* (B, P, M) */
    total = tg_add(total, tg_sum(tg_cast(match, TG_INT64), (int[]){1}, 1, false));
  }
  return total;
}

static int op_tfidf(ox_node *n) {
  tg_tensor *x = IN(0);
  const Onnx__AttributeProto *pool = ox_attr(n, "pool_int64s"), *cnt = ox_attr(n, "ngram_counts"),
                             *idx = ox_attr(n, "ngram_indexes"), *wts = ox_attr(n, "weights");
  if (ox_attr(n, "pool_strings")) return ox_fail(n, TG_ERR_ARG, "pool_strings: string dtype is not supported");
  if (!x || !pool || !cnt || !idx || (tg_ndim(x) != 1 && tg_ndim(x) != 2))
    return ox_fail(n, TG_ERR_ARG, "needs a 1-D or 2-D input, pool_int64s, ngram_counts and ngram_indexes");
  int64_t gmin = ox_attr_i(n, "min_gram_length", 1), gmax = ox_attr_i(n, "max_gram_length", 1);
  int64_t skip = ox_attr_i(n, "max_skip_count", 0), np = (int64_t)pool->n_ints, C = 0;
  const char *mode = ox_attr_s(n, "mode", "TF");
  if (gmin < 1 || gmax < gmin || gmax > 64 || (int64_t)cnt->n_ints < gmax || skip < 0 || skip > 1024 || np > MAX_POOL)
    return ox_fail(n, TG_ERR_ARG, "bad gram lengths, skip count or pool");
  for (size_t k = 0; k < idx->n_ints; k++) C = idx->ints[k] + 1 > C ? idx->ints[k] + 1 : C;
  if (C < 1 || C > MAX_POOL) return ox_fail(n, TG_ERR_ARG, "bad ngram_indexes");
  bool one = tg_ndim(x) == 1;
  tg_tensor *x2 = tg_cast(one ? tg_unsqueeze(x, 0) : x, TG_INT64), *out = NULL;
  int64_t k0 = 0; /* global number of the first n-gram of the current length */
  for (int64_t g = 1; g <= gmax && k0 >= 0; g++) {
    int64_t start = cnt->ints[g - 1], end = g < (int64_t)cnt->n_ints ? cnt->ints[g] : np, M = (end - start) / g;
    if (start < 0 || end > np || end < start || (end - start) % g || k0 + M > (int64_t)idx->n_ints)
      return ox_fail(n, TG_ERR_ARG, "ngram_counts do not match the pool");
    if (M > 0 && g >= gmin) { /* counts (B, M) -> output columns through a one-hot (M, C) */
      float *oh = calloc((size_t)(M * C), sizeof *oh);
      if (!oh) return tg_set_error(TG_ERR_NOMEM, "out of memory");
      bool weighted = wts && strcmp(mode, "TF"); /* TF ignores the weights */
      for (int64_t j = 0; j < M; j++)
        if (idx->ints[k0 + j] >= 0)
          oh[j * C + idx->ints[k0 + j]] = weighted && (size_t)(k0 + j) < wts->n_floats ? wts->floats[k0 + j] : 1.0f;
      tg_tensor *c = tg_cast(count_ngrams(x2, pool->ints + start, M, g, skip), TG_FLOAT32);
      if (!strcmp(mode, "IDF")) c = tg_cast(tg_gt(c, tg_zeros_like(c)), TG_FLOAT32);
      else if (strcmp(mode, "TF") && strcmp(mode, "TFIDF")) return free(oh), ox_fail(n, TG_ERR_ARG, "mode '%s'", mode);
      tg_tensor *r = tg_matmul(c, tg_from_data(oh, TG_FLOAT32, (int64_t[]){M, C}, 2));
      free(oh);
      out = out ? tg_add(out, r) : r;
    }
    k0 += M;
  }
  if (!out) out = tg_zeros((int64_t[]){tg_dim(x2, 0), C}, 2, TG_FLOAT32);
  return ox_set(n, 0, one ? tg_squeeze(out, 0) : out);
}

const ox_op ox_ops_tfidf[] = {
    {"TfIdfVectorizer", 9, op_tfidf,
     "max_gram_length,max_skip_count,min_gram_length,mode,ngram_counts,ngram_indexes,pool_int64s,pool_strings,weights"},
    {NULL, 0, NULL, NULL},
};
