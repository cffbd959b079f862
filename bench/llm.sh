#!/bin/sh
# llm.sh — the GPT-2 speed bench (docs/llm.md, docs/performance.md): makes its own venv (Debian's
# python3-torch seen through --system-site-packages; numpy<2, transformers, safetensors and gguf
# from PyPI; transformers 4.45 is the last to run on Debian's torch 1.13), builds bench_llm, writes
# a random-weight GPT-2 124M (Hugging Face directory, GGUF F32 and Q8_0) to $BUILD/llm-bench once,
# and prints tg's and PyTorch's tokens/s next to the memory-bandwidth limit. Not part of the
# README test command.   BUILD=build VENV=$BUILD/llm-venv sh bench/llm.sh [--prompt P] [--decode N] [--reps R]
set -e
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
VENV=${VENV:-$BUILD/llm-venv}
if [ ! -x "$VENV/bin/python" ]; then
  /usr/bin/python3 -m venv --system-site-packages "$VENV"
  "$VENV/bin/pip" install -q "numpy<2" "transformers==4.45.2" safetensors gguf
fi
make -s BUILD="$BUILD" "$BUILD/bench_llm"
"$VENV/bin/python" bench/llm.py --build "$BUILD" "$@"
