"""onnx_bench.py — ResNet-18 and MobileNetV2 inference at batch 1 and 32 in tg, onnxruntime and
PyTorch, in one run, on the same seeded input and the same thread count (docs/onnx.md, "Speed").

  python3 bench/onnx_bench.py [--build build] [--threads N] [--runs R]

tg runs build/example_onnx_run --bench (after a warm-up run that compiles; its thread pool uses
THREADS or the cores): tg_onnx_run replays the kernels it recorded from its third call on
(docs/onnx.md, "Replays": no graph built or scheduled per run), and again with TG_ONNX_JIT=0
(every run builds, schedules and looks up its kernels); onnxruntime uses the CPU execution
provider with every graph optimization and intra_op_num_threads = N; PyTorch runs the same model
in eval mode under torch.no_grad with torch.set_num_threads(N). Prints the mean and best latency of R runs each.
Models come from scripts/onnx_models.py (exported once into BUILD/onnx_models).
"""
import argparse
import json
import os
import re
import subprocess
import sys
import time

import numpy as np
import onnxruntime as ort
import torch
import torchvision
from onnx import numpy_helper

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "scripts"))
import onnx_models  # noqa: E402


def timeit(fn, runs):
    fn()  # warm-up
    ts = []
    for _ in range(runs):
        t = time.perf_counter()
        fn()
        ts.append(time.perf_counter() - t)
    return 1e3 * float(np.mean(ts)), 1e3 * float(np.min(ts))


def bench_tg(build, path, pb, runs, replays=True):
    env = dict(os.environ, TG_ONNX_JIT="1" if replays else "0")
    r = subprocess.run([os.path.join(build, "example_onnx_run"), path, pb, "--bench", str(runs)],
                       capture_output=True, text=True, check=True, env=env)
    m = re.search(r"mean ([0-9.]+) ms, best ([0-9.]+) ms", r.stdout)
    return float(m.group(1)), float(m.group(2))


def tg_kernels(build, path, pb):
    """ms per kernel name in tg's last replay (DEBUG=1; a chained kernel: its share of the chain's time)."""
    env = dict(os.environ, DEBUG="1")
    r = subprocess.run([os.path.join(build, "example_onnx_run"), path, pb, "--bench", "2"],
                       capture_output=True, text=True, check=True, env=env)
    lines = [l.split() for l in r.stderr.splitlines() if l.startswith("kernel ")]
    last = lines[-1][1]  # the model's last kernel ends each run
    ends = [i for i, l in enumerate(lines) if l[1] == last]
    per = {}
    for l in lines[ends[-2] + 1:ends[-1] + 1]:
        per[l[1]] = per.get(l[1], 0.0) + float(l[2])
    return per


def ort_nodes(path, x, threads):
    """ms per node in onnxruntime's last run (its own profiler)."""
    so = ort.SessionOptions()
    so.intra_op_num_threads = threads
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    so.enable_profiling = True
    so.profile_file_prefix = os.path.join(os.path.dirname(path), "ort_profile")
    sess = ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])
    for _ in range(4):
        sess.run(None, {"input": x})
    f = sess.end_profiling()
    with open(f) as fh:
        events = json.load(fh)
    os.remove(f)
    last = {}
    for e in events:
        if e.get("cat") == "Node" and e["name"].endswith("_kernel_time"):
            shape = e.get("args", {}).get("output_type_shape", [{}])
            last[e["name"][:-len("_kernel_time")]] = (e["dur"] / 1000, str(shape[0].get("float", "")) if shape else "")
    return last


def profile(args, name, out):
    """tg's kernels and onnxruntime's nodes, each sorted by time (one run of each)."""
    path = os.path.join(out, name, "model.onnx")
    x = np.random.default_rng(args.batch).standard_normal((args.batch, 3, 224, 224), dtype=np.float32)
    pb = os.path.join(out, name, f"bench_input_b{args.batch}.pb")
    with open(pb, "wb") as f:
        f.write(numpy_helper.from_array(x).SerializeToString())
    tg = tg_kernels(args.build, path, pb)
    ortn = ort_nodes(path, x, args.threads)
    print(f"{name}, batch {args.batch}: tg {sum(tg.values()):.1f} ms in its kernels, "
          f"onnxruntime {sum(v[0] for v in ortn.values()):.1f} ms in its nodes")
    print(f"{'tg kernel':<30} {'ms':>7}    {'onnxruntime node (output shape)':<60} {'ms':>7}")
    a = sorted(tg.items(), key=lambda kv: -kv[1])
    b = sorted(ortn.items(), key=lambda kv: -kv[1][0])
    for i in range(max(len(a), len(b))):
        left = f"{a[i][0]:<30} {a[i][1]:>7.2f}" if i < len(a) else " " * 38
        node = b[i][0].replace("/features/", "").replace("/conv/", " ") if i < len(b) else ""
        right = f"{(node[:34] + ' ' + b[i][1][1])[:60]:<60} {b[i][1][0]:>7.2f}" if i < len(b) else ""
        print(f"{left}    {right}")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default="build")
    ap.add_argument("--threads", type=int, default=os.cpu_count())
    ap.add_argument("--runs", type=int, default=10)
    ap.add_argument("--profile", choices=["resnet18", "mobilenet_v2"],
                    help="instead: per-kernel times of tg's replay and per-node times of onnxruntime for one model")
    ap.add_argument("--batch", type=int, default=32, help="the batch of --profile")
    args = ap.parse_args()
    out = os.path.join(args.build, "onnx_models")
    torch.set_num_threads(args.threads)
    os.environ.setdefault("THREADS", str(args.threads))  # tg's thread pool (threadpool.c)
    ctors = {"resnet18": torchvision.models.resnet18, "mobilenet_v2": torchvision.models.mobilenet_v2}
    if args.profile:
        if not os.path.exists(os.path.join(out, args.profile, "model.onnx")):
            onnx_models.export(args.profile, ctors[args.profile], (2, 3, 224, 224), out)
        return profile(args, args.profile, out)
    print(f"threads {args.threads}, {args.runs} runs each; latency mean / best in ms")
    print(f"{'model':<14} {'batch':>5} {'tg':>17} {'tg, no replays':>17} {'onnxruntime':>17} {'PyTorch':>17} "
          f"{'tg / ort':>9} {'no rp / ort':>12}")
    for name, ctor in ctors.items():
        path = os.path.join(out, name, "model.onnx")
        if not os.path.exists(path):
            onnx_models.export(name, ctor, (2, 3, 224, 224), out)
        torch.manual_seed(0)
        model = ctor().eval()
        so = ort.SessionOptions()
        so.intra_op_num_threads = args.threads
        so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        sess = ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])
        for batch in (1, 32):
            x = np.random.default_rng(batch).standard_normal((batch, 3, 224, 224), dtype=np.float32)
            pb = os.path.join(out, name, f"bench_input_b{batch}.pb")
            with open(pb, "wb") as f:
                f.write(numpy_helper.from_array(x).SerializeToString())
            runs = args.runs if batch == 1 else max(3, args.runs // 3)
            tg = bench_tg(args.build, path, pb, runs)
            tj = bench_tg(args.build, path, pb, runs, replays=False)
            o = timeit(lambda: sess.run(None, {"input": x}), runs)
            xt = torch.from_numpy(x)
            with torch.no_grad():
                p = timeit(lambda: model(xt), runs)
            print(f"{name:<14} {batch:>5} {tg[0]:>8.1f} / {tg[1]:>6.1f} {tj[0]:>8.1f} / {tj[1]:>6.1f} "
                  f"{o[0]:>8.1f} / {o[1]:>6.1f} {p[0]:>8.1f} / {p[1]:>6.1f} {tg[0] / o[0]:>8.2f}x {tj[0] / o[0]:>11.2f}x")


if __name__ == "__main__":
    main()
