#!/bin/sh
# demo.sh [ARGS] — install what the demo needs (compiler, zlib, the Fashion-MNIST dataset), build,
# and train the demo convolutional network (examples/mnist.c). ARGS go to the demo (--help).
set -e
cd "$(dirname "$0")/.."
sh scripts/deps.sh gcc make libc6-dev zlib1g-dev dataset-fashion-mnist
make -j"$(nproc)" build/example_mnist
exec ./build/example_mnist "$@"
