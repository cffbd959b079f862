/* bpe_encode.c — the byte-level BPE tokenizer's speed (docs/llm.md): load models/tokenizer,
 * encode a text file as one string and decode the ids, best of REPS. bench/bpe_tokenizers.py
 * times Hugging Face's `tokenizers` on the same files and text.
 *
 *   ./build/bench_bpe_encode [TEXT [TOKENIZER_DIR [REPS]]]
 *   (default /usr/share/common-licenses/GPL-3, models/tokenizer, 20; run from the repository root) */
#include <stdio.h>
#include <stdlib.h>
#include <tg.h>
#include <tg_llm.h>

#include "runtime/helpers.h" /* tg_now */

int main(int argc, char **argv) {
  const char *path = argc > 1 ? argv[1] : "/usr/share/common-licenses/GPL-3", *dir = argc > 2 ? argv[2] : "models/tokenizer";
  int reps = argc > 3 ? atoi(argv[3]) : 20;
  double t0 = tg_now();
  tg_bpe *tok = tg_bpe_load_dir(dir);
  double load = tg_now() - t0;
  FILE *f = fopen(path, "rb");
  if (!tok || !f) return fprintf(stderr, "%s\n", tok ? "cannot open the text" : tg_last_error()), 1;
  fseek(f, 0, SEEK_END);
  size_t n = (size_t)ftell(f);
  fseek(f, 0, SEEK_SET);
  char *text = malloc(n + 1), *back = malloc(n + 1);
  int32_t *ids = malloc(sizeof *ids * (n + 1));
  if (!text || !back || !ids || fread(text, 1, n, f) != n) return fprintf(stderr, "cannot read %s\n", path), 1;
  fclose(f);
  double enc = 1e30, dec = 1e30;
  int64_t count = 0;
  for (int r = 0; r < reps; r++) {
    t0 = tg_now();
    count = tg_bpe_encode(tok, text, n, ids, (int64_t)n + 1);
    double t1 = tg_now();
    int64_t len = tg_bpe_decode(tok, ids, count, back, n + 1);
    double t2 = tg_now();
    if (count < 0 || len != (int64_t)n) return fprintf(stderr, "%s\n", tg_last_error()), 1;
    if (t1 - t0 < enc) enc = t1 - t0;
    if (t2 - t1 < dec) dec = t2 - t1;
  }
  printf("load %.2f ms; %s: %zu bytes -> %lld ids; encode %.2f ms (%.1f MB/s), decode %.3f ms (best of %d)\n",
         load * 1e3, path, n, (long long)count, enc * 1e3, (double)n / enc / 1e6, dec * 1e3, reps);
  tg_bpe_free(tok);
  free(text), free(back), free(ids);
  return 0;
}
