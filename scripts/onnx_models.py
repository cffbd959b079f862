"""onnx_models.py — real models for tg's ONNX import (docs/onnx.md, "Real models").

Exports, with fixed seeds and random weights, ResNet-18, MobileNetV2, SqueezeNet 1.1 and
DenseNet-121 (torchvision), a small Transformer encoder (torch.nn.TransformerEncoder) and a
2-layer LSTM to ONNX (batch axis dynamic), runs each on one seeded input in PyTorch, in
onnxruntime (CPU execution provider) and in tg (build/example_onnx_run --out), and prints the
largest difference of tg's output from each, relative to the largest |value| of that output.
Writes OUT/NAME/model.onnx and OUT/NAME/test_data_set_0/{input_0,output_0}.pb (PyTorch's output).

  python3 scripts/onnx_models.py [--build build] [--out build/onnx_models] [--only NAME] [--tol 1e-4]

Needs torch, torchvision, onnx, onnxruntime and numpy (bench/onnx.sh makes a venv with them:
Debian's python3-torch and python3-torchvision, onnx and onnxruntime from PyPI). Exit status 1
if a model differs by more than --tol.
"""
import argparse
import os
import subprocess
import sys

import numpy as np
import onnx
import onnxruntime as ort
import torch
import torchvision
from onnx import numpy_helper


class Encoder(torch.nn.Module):
    """A small Transformer encoder: 2 layers, d_model 64, 4 heads, on (batch, 16, 64)."""

    def __init__(self):
        super().__init__()
        layer = torch.nn.TransformerEncoderLayer(64, 4, dim_feedforward=128, dropout=0.0, batch_first=True)
        self.enc = torch.nn.TransformerEncoder(layer, 2, enable_nested_tensor=False)

    def forward(self, x):
        return self.enc(x)


class Lstm(torch.nn.Module):
    """A 2-layer LSTM, input 32, hidden 64, on (batch, 10, 32); returns the output sequence."""

    def __init__(self):
        super().__init__()
        self.lstm = torch.nn.LSTM(32, 64, num_layers=2, batch_first=True)

    def forward(self, x):
        return self.lstm(x)[0]


def models():
    """name -> (constructor, input shape at batch 2)."""
    tv = torchvision.models
    return {
        "resnet18": (lambda: tv.resnet18(), (2, 3, 224, 224)),
        "mobilenet_v2": (lambda: tv.mobilenet_v2(), (2, 3, 224, 224)),
        "squeezenet": (lambda: tv.squeezenet1_1(), (2, 3, 224, 224)),
        "densenet121": (lambda: tv.densenet121(), (2, 3, 224, 224)),
        "transformer": (Encoder, (2, 16, 64)),
        "lstm": (Lstm, (2, 10, 32)),
    }


def export(name, ctor, shape, out):
    torch.manual_seed(0)
    model = ctor().eval()
    x = torch.randn(*shape, generator=torch.Generator().manual_seed(1))
    d = os.path.join(out, name)
    os.makedirs(os.path.join(d, "test_data_set_0"), exist_ok=True)
    path = os.path.join(d, "model.onnx")
    with torch.enable_grad():  # (not no_grad: the encoder's fused eval path cannot be exported)
        ref = model(x).detach().numpy()
        torch.onnx.export(model, (x,), path, input_names=["input"], output_names=["output"], opset_version=14,
                          dynamic_axes={"input": {0: "batch"}, "output": {0: "batch"}})
    xin = x.numpy()
    for fname, arr in (("input_0.pb", xin), ("output_0.pb", ref)):
        with open(os.path.join(d, "test_data_set_0", fname), "wb") as f:
            f.write(numpy_helper.from_array(arr).SerializeToString())
    return d, path, xin, ref


def run_ort(path, x, threads):
    so = ort.SessionOptions()
    so.intra_op_num_threads = threads
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    s = ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])
    return s.run(None, {"input": x})[0]


def run_tg(build, d, path, shape):
    outdir = os.path.join(d, "tg_out")
    os.makedirs(outdir, exist_ok=True)
    exe = os.path.join(build, "example_onnx_run")
    r = subprocess.run([exe, path, os.path.join(d, "test_data_set_0", "input_0.pb"), "--out", outdir],
                       capture_output=True, text=True)
    if r.returncode:
        raise RuntimeError(r.stderr.strip() or r.stdout.strip())
    return np.fromfile(os.path.join(outdir, "output_0.bin"), dtype=np.float32).reshape(shape)


def rel(a, b):
    return float(np.max(np.abs(a - b)) / max(np.max(np.abs(b)), 1e-30))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default="build")
    ap.add_argument("--out", default=None)
    ap.add_argument("--only", default=None)
    ap.add_argument("--tol", type=float, default=1e-4)
    args = ap.parse_args()
    out = args.out or os.path.join(args.build, "onnx_models")
    torch.set_num_threads(os.cpu_count())
    bad = 0
    print(f"{'model':<14} {'tg vs PyTorch':>14} {'tg vs ORT':>12} {'ORT vs PyTorch':>15}  (max |diff| / max |value|)")
    for name, (ctor, shape) in models().items():
        if args.only and name != args.only:
            continue
        d, path, x, ref = export(name, ctor, shape, out)
        o = run_ort(path, x, os.cpu_count())
        try:
            t = run_tg(args.build, d, path, ref.shape)
            a, b = rel(t, ref), rel(t, o)
            ok = a <= args.tol and b <= args.tol
            print(f"{name:<14} {a:>14.2e} {b:>12.2e} {rel(o, ref):>15.2e}  {'ok' if ok else 'DIFFERS'}")
        except RuntimeError as e:
            ok = False
            print(f"{name:<14} tg failed: {e}")
        bad += not ok
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
