#!/usr/bin/env python3
"""bpe_tokenizers.py — Hugging Face `tokenizers` on the text and files bench_bpe_encode uses
(docs/llm.md): ByteLevelBPETokenizer from models/tokenizer, one encode of the whole text and
one decode, best of REPS. Needs `pip install tokenizers` (a venv: docs/llm.md).

  python3 bench/bpe_tokenizers.py [TEXT [TOKENIZER_DIR [REPS]]]
"""
import sys
import time

from tokenizers import ByteLevelBPETokenizer

path = sys.argv[1] if len(sys.argv) > 1 else "/usr/share/common-licenses/GPL-3"
model = sys.argv[2] if len(sys.argv) > 2 else "models/tokenizer"
reps = int(sys.argv[3]) if len(sys.argv) > 3 else 20
tok = ByteLevelBPETokenizer(f"{model}/vocab.json", f"{model}/merges.txt")
text = open(path, encoding="utf-8").read()
enc = dec = 1e30
for _ in range(reps):
    t0 = time.perf_counter()
    ids = tok.encode(text).ids
    t1 = time.perf_counter()
    back = tok.decode(ids)
    t2 = time.perf_counter()
    enc, dec = min(enc, t1 - t0), min(dec, t2 - t1)
assert back == text
print(f"tokenizers: {path}: {len(text.encode())} bytes -> {len(ids)} ids; encode {enc * 1e3:.2f} ms, decode {dec * 1e3:.3f} ms (best of {reps})")
