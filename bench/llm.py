#!/usr/bin/env python3
"""llm.py — GPT-2 124M, batch 1: tg against transformers on PyTorch and against the
memory-bandwidth limit (run through bench/llm.sh, which makes the venv and builds bench_llm).

The model is GPT2Config()'s defaults (12 layers, 12 heads, 768 dims, vocab 50257, 1024
positions) with random weights (seed 0), written once to BUILD/llm-bench/: the Hugging Face
directory (save_pretrained), and GGUF files in F32 and Q8_0 as llama.cpp's converter writes
GPT-2 (tests/gen_fixtures_gpt2.py's writer). PyTorch runs the same weights: prefill of P
tokens, then N greedy decode steps of one token through its KV cache (past_key_values), best
of R runs after a warm-up, as bench_llm does for tg; each row at 1 thread and at every core
(--threads): on a shared machine PyTorch's OpenMP threads can be far slower at 2 than at 1. The bandwidth limit is the weight bytes
one decode step must read (every weight once: f32 4 bytes, Q8_0 34 bytes per 32; the tied
token embedding is read by the output projection) divided by the measured copy bandwidth
(bytes copied per second by one memcpy of 512 MiB: half of the traffic bench_llm --bandwidth
reports, reads and writes).
"""
import argparse
import os
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tests"))


def make_files(out):
    import torch
    from transformers import GPT2Config, GPT2LMHeadModel
    import gen_fixtures_gpt2 as gen
    torch.manual_seed(0)
    model = GPT2LMHeadModel(GPT2Config()).eval()
    if not os.path.exists(os.path.join(out, "model.safetensors")):
        os.makedirs(out, exist_ok=True)
        model.save_pretrained(out, safe_serialization=True)
        gen.write_gguf(os.path.join(out, "f32.gguf"), model, False)
        gen.write_gguf(os.path.join(out, "q8_0.gguf"), model, True)
    return model


def weight_bytes(model, q8):
    """Bytes a decode step reads: every parameter once but the position table (one row)."""
    total = 0
    for name, p in model.named_parameters():
        if "wpe" in name:
            continue
        n = p.numel()
        total += n * 34 // 32 if q8 and p.dim() == 2 else 4 * n
    return total


def torch_speed(model, p, n, reps):
    import torch
    torch.set_grad_enabled(False)
    ids = torch.tensor([[(i * 7919 + 13) % model.config.vocab_size for i in range(p)]])
    best_p = best_d = 1e30
    for r in range(reps + 1):
        t0 = time.perf_counter()
        out = model(ids, use_cache=True)
        tok = out.logits[:, -1:].argmax(-1)
        t1 = time.perf_counter()
        past = out.past_key_values
        for _ in range(n):
            out = model(tok, past_key_values=past, use_cache=True)
            past, tok = out.past_key_values, out.logits[:, -1:].argmax(-1)
        t2 = time.perf_counter()
        if r:  # the first run warms up
            best_p, best_d = min(best_p, t1 - t0), min(best_d, t2 - t1)
    return p / best_p, n / best_d


def tg_speed(build, args, p, n, reps, threads):
    cmd = [os.path.join(build, "bench_llm")] + args + ["--prompt", str(p), "--decode", str(n), "--reps", str(reps)]
    env = dict(os.environ, THREADS=str(threads))  # tg's thread pool size
    out = subprocess.run(cmd, check=True, capture_output=True, text=True, env=env)
    sys.stderr.write(out.stderr)
    f = out.stdout.split()
    return float(f[1]), float(f[3])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default="build")
    ap.add_argument("--prompt", type=int, default=64)
    ap.add_argument("--decode", type=int, default=32)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--skip", default="", help="comma-separated rows to leave out: hf,jit,f32,q8_0,q8jit,torch")
    ap.add_argument("--threads", default=f"1,{os.cpu_count()}", help="thread counts to run each row with")
    a = ap.parse_args()
    import torch
    import transformers
    out = os.path.join(a.build, "llm-bench")
    model = make_files(out)
    bw = subprocess.run([os.path.join(a.build, "bench_llm"), "--bandwidth"], check=True, capture_output=True, text=True)
    copy = float(bw.stdout.split()[1])
    read = copy / 2
    skip = set(a.skip.split(","))
    print(f"GPT-2 124M (random weights), batch 1, prompt {a.prompt} tokens, {a.decode} decode steps, best of {a.reps}")
    threads = [int(t) for t in a.threads.split(",")]
    print(f"memcpy: {read:.1f} GB/s copied ({copy:.1f} GB/s read + written); torch {torch.__version__}, "
          f"transformers {transformers.__version__}")
    print(f"{'':34} {'threads':>7} {'prefill tok/s':>14} {'decode tok/s':>13} {'limit tok/s':>12} {'of limit':>9}")
    rows = [("hf", "tg f32 (HF directory)", ["--model", out], False),
            ("jit", "tg f32 (HF directory), tg_jit", ["--model", out, "--jit"], False),
            ("f32", "tg f32 (GGUF)", ["--gguf", os.path.join(out, "f32.gguf")], False),
            ("q8_0", "tg Q8_0 (GGUF)", ["--gguf", os.path.join(out, "q8_0.gguf")], True),
            ("q8jit", "tg Q8_0 (GGUF), tg_jit", ["--gguf", os.path.join(out, "q8_0.gguf"), "--jit"], True)]
    for key, label, args, q8 in rows:
        if key in skip:
            continue
        limit = read * 1e9 / weight_bytes(model, q8)
        for t in threads:
            pf, dc = tg_speed(a.build, args, a.prompt, a.decode, a.reps, t)
            print(f"{label:34} {t:7} {pf:14.1f} {dc:13.2f} {limit:12.1f} {100 * dc / limit:8.0f}%", flush=True)
    if "torch" not in skip:
        limit = read * 1e9 / weight_bytes(model, False)
        for t in threads:
            torch.set_num_threads(t)
            pf, dc = torch_speed(model, a.prompt, a.decode, a.reps)
            print(f"{'PyTorch f32 (transformers, KV cache)':34} {t:7} {pf:14.1f} {dc:13.2f} {limit:12.1f} {100 * dc / limit:8.0f}%",
                  flush=True)


if __name__ == "__main__":
    main()
