#!/usr/bin/python3
"""Reference for bench/train_step: ms per training step (forward, backward, Adam) in PyTorch.
usage: train_step_torch.py {conv|mlp} BATCH STEPS  → prints the median ms per step.
TORCH_DEVICE=cuda runs it on the GPU (bench_train_step sets it under DEV=CUDA)."""
import os, sys, time
import torch
import torch.nn as nn

torch.set_num_threads(2)
torch.manual_seed(0)
kind, batch, steps = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
if kind == "conv":
    model = nn.Sequential(
        nn.Conv2d(1, 32, 5), nn.ReLU(), nn.Conv2d(32, 32, 5), nn.ReLU(), nn.BatchNorm2d(32), nn.MaxPool2d(2),
        nn.Conv2d(32, 64, 3), nn.ReLU(), nn.Conv2d(64, 64, 3), nn.ReLU(), nn.BatchNorm2d(64), nn.MaxPool2d(2),
        nn.Flatten(), nn.Linear(576, 10))
    x = torch.rand(batch, 1, 28, 28)
else:
    model = nn.Sequential(nn.Flatten(), nn.Linear(784, 512), nn.ReLU(), nn.Linear(512, 512), nn.ReLU(), nn.Linear(512, 10))
    x = torch.rand(batch, 784)
y = torch.randint(0, 10, (batch,))
dev = os.environ.get("TORCH_DEVICE", "cpu")
model, x, y = model.to(dev), x.to(dev), y.to(dev)
opt = torch.optim.Adam(model.parameters(), lr=1e-3)
times = []
for i in range(steps + 2):
    t0 = time.perf_counter()
    opt.zero_grad()
    loss = nn.functional.cross_entropy(model(x), y)
    loss.backward()
    opt.step()
    loss.item()
    if i >= 2:
        times.append(time.perf_counter() - t0)
times.sort()
print("%.3f" % (times[len(times) // 2] * 1e3))
