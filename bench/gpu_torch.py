#!/usr/bin/env python3
"""Reference for bench/gpu: PyTorch on the same GPU (cuBLAS for matmul).
usage: gpu_torch.py SIZE... → lines "matmul DTYPE N MS", "copy BYTES MS", "add BYTES MS"."""
import sys, time
import torch

def timed(fn, reps):
    fn(); torch.cuda.synchronize()
    best = float("inf")
    for _ in range(reps):
        t0 = time.perf_counter(); fn(); torch.cuda.synchronize()
        best = min(best, time.perf_counter() - t0)
    return best * 1e3

if not torch.cuda.is_available():
    print("error no CUDA device for torch"); sys.exit(0)
dev = "cuda"
for n in [int(a) for a in sys.argv[1:]]:
    for name, dt in (("float32", torch.float32), ("float16", torch.float16), ("bfloat16", torch.bfloat16)):
        a = torch.rand(n, n, device=dev, dtype=dt); b = torch.rand(n, n, device=dev, dtype=dt)
        print("matmul %s %d %.4f" % (name, n, timed(lambda: torch.matmul(a, b), 5)), flush=True)
        del a, b
elems = 1 << 26
x = torch.rand(elems, device=dev); y = torch.rand(elems, device=dev); z = torch.empty_like(x)
print("copy %d %.4f" % (8 * elems, timed(lambda: z.copy_(x), 10)))
print("add %d %.4f" % (12 * elems, timed(lambda: torch.add(x, y, out=z), 10)))
