#!/usr/bin/env python3
"""gen_fixtures_gguf.py — GGUF test files written by llama.cpp's own `gguf` package (PyPI).

  tests/fixtures/gguf/meta.gguf     metadata of every value type, arrays of numbers, bools and
                                    strings, general.alignment = 64, and three small tensors
  tests/fixtures/gguf/tensors.gguf  one tensor per supported type: F32, F16, BF16, Q8_0, Q4_0,
                                    Q4_1 (quantized by gguf.quants from random floats), Q4_K and
                                    Q6_K (gguf cannot quantize them: random blocks written by the
                                    GGUF spec, with finite float16 scales), each followed by
                                    "<name>.ref", the F32 tensor gguf.quants.dequantize gives
                                    for it; "q8_0.special", Q8_0 blocks whose scales are
                                    +-0, subnormal, the largest half, inf and NaN;
                                    "fuse.q8_0", a (96, 256) Q8_0 weight, and
                                    "q5_0", a type tg lists but does not load
  tests/fixtures/gguf/tokenizer.gguf  models/tokenizer as GGUF metadata (tokenizer.ggml.model
                                    "gpt2", .tokens in id order, .merges), as llama.cpp's
                                    converter writes a GPT-2 tokenizer
  tests/fuzz/corpus/gguf/*          small files (under 4 KiB) seeding the fuzz target

Run from the repository root with the gguf package and numpy: pip install gguf numpy.
"""
import os

import numpy as np
import gguf
from gguf import GGMLQuantizationType as T
from gguf.quants import dequantize, quantize

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FIX = os.path.join(ROOT, "tests/fixtures/gguf")
CORPUS = os.path.join(ROOT, "tests/fuzz/corpus/gguf")


def write(path, kvs, tensors, alignment=None, tokenizer=None):
    w = gguf.GGUFWriter(path, arch="tgtest")
    if alignment:
        w.add_custom_alignment(alignment)
    for fn, key, value in kvs:
        getattr(w, fn)(*([key, value] if key else [value]))
    if tokenizer:
        w.add_token_list(tokenizer[0])
        w.add_token_merges(tokenizer[1])
    for name, data, raw_dtype in tensors:
        w.add_tensor(name, data, raw_dtype=raw_dtype)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def k_blocks(rng, n_blocks, type_size, scale_at):
    """Random K-quant blocks: random bits everywhere, then finite float16 scales where they lie."""
    b = rng.integers(0, 256, size=(n_blocks, type_size), dtype=np.uint8)
    for at in scale_at:
        d = rng.uniform(-0.05, 0.05, size=n_blocks).astype(np.float16)
        b[:, at:at + 2] = d.view(np.uint8).reshape(n_blocks, 2)
    return b


def quantized(rng, qtype, shape):
    rows, cols = shape
    if qtype == T.Q4_K:
        raw = k_blocks(rng, rows * cols // 256, 144, [0, 2])
    elif qtype == T.Q6_K:
        raw = k_blocks(rng, rows * cols // 256, 210, [208])
    else:
        raw = quantize(rng.standard_normal(shape).astype(np.float32), qtype)
    raw = raw.reshape(rows, -1)
    ref = dequantize(raw, qtype).reshape(shape).astype(np.float32)
    return raw, ref


META = [
    ("add_uint8", "t.u8", 200), ("add_int8", "t.i8", -100), ("add_uint16", "t.u16", 60000),
    ("add_int16", "t.i16", -30000), ("add_uint32", "t.u32", 4000000000), ("add_int32", "t.i32", -2000000000),
    ("add_float32", "t.f32", 0.25), ("add_bool", "t.bool", True), ("add_string", "t.str", "héllo wörld"),
    ("add_uint64", "t.u64", 2**63 + 5), ("add_int64", "t.i64", -(2**62)), ("add_float64", "t.f64", -1.5e300),
    ("add_array", "t.arr_i32", [1, -2, 3]), ("add_array", "t.arr_f32", [0.5, -1.0]),
    ("add_array", "t.arr_str", ["a", "", "ünï"]), ("add_array", "t.arr_bool", [True, False]),
]


def small_tokenizer():
    """GPT-2's 256 byte symbols and a few merges (a fuzz seed under 4 KiB)."""
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(0xA1, 0xAD)) + list(range(0xAE, 0x100))
    cs, n = bs[:], 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    symbols = [chr(c) for _, c in sorted(zip(bs, cs))]
    merges = ["H e", "l l", "He ll", "\u0120 t", "o k"]
    return symbols + ["He", "ll", "Hell", "\u0120t", "ok"], merges


def write_tokenizer(path):
    import json
    model = os.path.join(ROOT, "models/tokenizer")
    vocab = json.load(open(os.path.join(model, "vocab.json"), encoding="utf-8"))
    tokens = sorted(vocab, key=vocab.get)
    assert [vocab[t] for t in tokens] == list(range(len(tokens)))
    merges = [l.rstrip("\n") for l in open(os.path.join(model, "merges.txt"), encoding="utf-8") if not l.startswith("#version")]
    w = gguf.GGUFWriter(path, arch="gpt2")
    w.add_tokenizer_model("gpt2")
    w.add_token_list(tokens)
    w.add_token_merges([m for m in merges if m])
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def main():
    rng = np.random.default_rng(21)
    os.makedirs(FIX, exist_ok=True)
    os.makedirs(CORPUS, exist_ok=True)
    small = [("a", np.arange(6, dtype=np.float32).reshape(2, 3), None),
             ("b", np.array([1.5, -2.0], dtype=np.float16), None),
             ("c", np.array([[7]], dtype=np.float32), None)]
    write(os.path.join(FIX, "meta.gguf"), META, small, alignment=64)

    tensors = [("f32", rng.standard_normal((3, 5)).astype(np.float32), None),
               ("f16", rng.standard_normal((4, 8)).astype(np.float16), None)]
    bf = rng.standard_normal((2, 16)).astype(np.float32)
    tensors.append(("bf16", quantize(bf, T.BF16), T.BF16))
    tensors.append(("bf16.ref", dequantize(quantize(bf, T.BF16), T.BF16).astype(np.float32), None))
    for name, qtype, shape in [("q8_0", T.Q8_0, (8, 64)), ("q4_0", T.Q4_0, (8, 64)), ("q4_1", T.Q4_1, (8, 64)),
                               ("q4_k", T.Q4_K, (3, 512)), ("q6_k", T.Q6_K, (3, 512))]:
        raw, ref = quantized(rng, qtype, shape)
        tensors += [(name, raw, qtype), (name + ".ref", ref, None)]
    special = rng.integers(-127, 128, size=(8, 34)).astype(np.int8).view(np.uint8)
    halves = np.array([0x0000, 0x8000, 0x0001, 0x03FF, 0x0400, 0x7BFF, 0x7C00, 0xFE00], dtype=np.uint16)
    special[:, 0:2] = halves.view(np.uint8).reshape(8, 2)  # zeros, subnormals, the largest, inf, NaN
    with np.errstate(invalid="ignore"):
        tensors += [("q8_0.special", special, T.Q8_0), ("q8_0.special.ref", dequantize(special, T.Q8_0), None)]
    raw, _ = quantized(rng, T.Q8_0, (96, 256))
    tensors.append(("fuse.q8_0", raw, T.Q8_0))
    raw, _ = quantized(rng, T.Q5_0, (2, 64))
    tensors.append(("q5_0", raw, T.Q5_0))  # a type tg does not load
    write(os.path.join(FIX, "tensors.gguf"), [("add_uint32", "t.count", len(tensors))], tensors)

    write_tokenizer(os.path.join(FIX, "tokenizer.gguf"))

    seeds = {
        "empty": ([], []),
        "meta": (META, []),
        "f32": ([], [("x", np.arange(4, dtype=np.float32), None)]),
        "f16_bf16": ([], [("h", np.ones((2, 2), np.float16), None), ("b", quantize(np.ones(4, np.float32), T.BF16), T.BF16)]),
    }
    for qtype in [T.Q8_0, T.Q4_0, T.Q4_1, T.Q4_K, T.Q6_K]:
        raw, _ = quantized(rng, qtype, (1, 256))
        seeds[qtype.name.lower()] = ([], [("w", raw, qtype)])
    for name, (kvs, ts) in seeds.items():
        write(os.path.join(CORPUS, name), kvs, ts)
    write(os.path.join(CORPUS, "tokenizer"), [("add_tokenizer_model", "", "gpt2")], [], tokenizer=small_tokenizer())
    print("wrote", FIX, "and", len(seeds), "seeds:", {n: os.path.getsize(os.path.join(CORPUS, n)) for n in seeds})


if __name__ == "__main__":
    main()
