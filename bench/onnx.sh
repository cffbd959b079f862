#!/bin/sh
# onnx.sh — the ONNX speed bench (docs/onnx.md): makes its own venv (Debian's python3-torch and
# python3-torchvision seen through --system-site-packages; numpy<2, onnx and onnxruntime from
# PyPI), builds example_onnx_run, exports the models and runs bench/onnx_bench.py. Not part of
# the README test command.   BUILD=build VENV=$BUILD/onnx-venv sh bench/onnx.sh [ARGS...]
# On a shared tree pass your own BUILD: the build and the exported models go there.
set -e
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
VENV=${VENV:-$BUILD/onnx-venv}
if [ ! -x "$VENV/bin/python" ]; then
  /usr/bin/python3 -m venv --system-site-packages "$VENV"
  "$VENV/bin/pip" install -q "numpy<2" "onnx==1.16.2" "onnxruntime==1.19.2"
fi
make -s BUILD="$BUILD" "$BUILD/example_onnx_run"
"$VENV/bin/python" bench/onnx_bench.py --build "$BUILD" "$@"
