#!/bin/sh
# test.sh — install what the tests need, build everything, and run the whole suite twice:
# a normal build and one under AddressSanitizer + UndefinedBehaviorSanitizer.
set -e
cd "$(dirname "$0")/.."
sh scripts/deps.sh gcc make libc6-dev zlib1g-dev pkg-config libopenblas-dev
make -j"$(nproc)" all   # everything compiles warning-free (benches link OpenBLAS)
make -j"$(nproc)" test
make -j"$(nproc)" test-sanitize
