#!/usr/bin/python3
"""Reference for bench/kernels: ms of the demo's conv layers (examples/mnist.c, batch 512) in
PyTorch with 2 threads: forward, weight gradient, input gradient, each timed alone (best of 5).
Prints "convN_{fwd,gradw,gradx} MS" lines; prints nothing if torch is missing."""
import time
try:
    import torch
    import torch.nn.functional as F
except ImportError:
    raise SystemExit(0)

torch.set_num_threads(2)
torch.manual_seed(0)
LAYERS = [("conv1", (512, 1, 28, 28), (32, 1, 5, 5)), ("conv2", (512, 32, 24, 24), (32, 32, 5, 5)),
          ("conv3", (512, 32, 10, 10), (64, 32, 3, 3)), ("conv4", (512, 64, 8, 8), (64, 64, 3, 3))]


def best(fn, reps=5):
    fn()
    times = []
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return min(times) * 1e3


for name, xs, ws in LAYERS:
    x, w = torch.randn(xs), torch.randn(ws)
    gy = torch.randn(F.conv2d(x, w).shape)
    print("%s_fwd %.3f" % (name, best(lambda: F.conv2d(x, w))))
    print("%s_gradw %.3f" % (name, best(lambda: torch.nn.grad.conv2d_weight(x, ws, gy))))
    print("%s_gradx %.3f" % (name, best(lambda: torch.nn.grad.conv2d_input(xs, w, gy))), flush=True)
