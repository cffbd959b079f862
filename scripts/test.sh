#!/bin/sh
# test.sh — the README's test command. Installs what the tests and benchmarks need, builds
# everything warning-free, checks the build (the README's pkg-config command makes a program
# that runs; a changed test fixture rebuilds its test), then runs the suite on each device
# (the default, LLVM where libLLVM-14 loads, CPU, and CL through PoCL), under AddressSanitizer +
# UndefinedBehaviorSanitizer (CPU), the thread tests under ThreadSanitizer, the fuzzers, the offline
# CUDA check (NVRTC and ptxas on every kernel, no GPU) and the ONNX
# conformance tests (docs/onnx.md); then
# the Python package (python/): the README's venv install, and its pytest suite against PyTorch.
# One line per stage with its seconds; the runner prints one line per test area. JOBS (default: the cores) sets make's and the runner's
# parallelism; BUILD and SANBUILD the build directories (build, build-san).
set -e
cd "$(dirname "$0")/.."
JOBS=${JOBS:-$(nproc)}
BUILD=${BUILD:-build}
export JOBS BUILD
T0=$(date +%s)

stage() { # stage NAME COMMAND...: run it, then say how long it took
  s=$(date +%s)
  echo "== $1"
  shift
  "$@"
  echo "== done in $(($(date +%s) - s)) s"
}

# The README's build command, run as the README says, from the repository root (the output
# goes to a temporary file instead of ./a.out). No LD_LIBRARY_PATH: the program must start.
readme_example() {
  tmp=$(mktemp -d)
  cc examples/hello.c -o "$tmp/hello" $(PKG_CONFIG_PATH=$BUILD pkg-config --cflags --libs --static tg)
  out=$(env -u LD_LIBRARY_PATH TG_CACHE_DIR="$tmp/cache" "$tmp/hello")
  rm -rf "$tmp"
  [ "$out" = "3 4 5 6 7.5 8.5 9.5 10.5 " ] || { echo "examples/hello.c printed '$out'"; return 1; }
  echo "examples/hello.c built with pkg-config runs: $out"
}

# A regenerated fixture rebuilds the test that includes it (make -W: as if it had changed); a
# second make has nothing to do; plain make needs no OpenBLAS (only `make bench` links it).
build_checks() {
  make -n -W tests/fixtures/nn.h "$BUILD/test_tg" | grep -q 'tests/test_nn\.c' ||
    { echo "changing tests/fixtures/nn.h does not rebuild tests/test_nn.c"; return 1; }
  make -q all || { echo "a second make still has work to do"; return 1; }
  ! make -n -B all | grep -q openblas || { echo "make (all) links OpenBLAS"; return 1; }
  echo "fixtures rebuild their tests; a second make has nothing to do; make needs no OpenBLAS"
}

stage "install packages" sh scripts/deps.sh gcc make libc6-dev zlib1g-dev pkg-config libopenblas-dev \
  dataset-fashion-mnist libllvm14 clang libclang-rt-14-dev ocl-icd-opencl-dev opencl-headers pocl-opencl-icd \
  python3-cffi python3-numpy python3-torch python3-pytest python3-venv python3-pip \
  libprotobuf-c-dev protobuf-c-compiler libonnx-dev libonnx-testdata
# The README's Python install (docs/python.md): a venv that sees Debian's numpy, cffi and torch,
# pip installs python/ with this build's libtg.so copied in; run from elsewhere, it uses that copy.
python_install() {
  tmp=$(mktemp -d)
  /usr/bin/python3 -m venv --system-site-packages "$tmp/venv"
  TG_BUILD=$BUILD "$tmp/venv/bin/pip" install -q --no-build-isolation ./python
  rm -rf python/build python/*.egg-info
  out=$(cd "$tmp" && env -u TG_LIB TG_CACHE_DIR="$tmp/cache" "$tmp/venv/bin/python" -c \
    'import tg; from tg import Tensor; print(tg.LIB_PATH.startswith("'"$tmp"'"), (Tensor([1.0, 2.0]) * 2 + 1).tolist())')
  rm -rf "$tmp"
  [ "$out" = "True [3.0, 5.0]" ] || { echo "the installed package printed '$out'"; return 1; }
  echo "pip-installed package uses its own libtg.so: $out"
}

stage "build (make all bench)" make -s -j"$JOBS" all bench
stage "README example" readme_example
stage "build checks" build_checks
stage "tests (default device: LLVM where libLLVM-14 loads)" make -s test
stage "tests on DEV=CPU (C compiled by cc)" env DEV=CPU make -s test
# Issue 13: the whole suite on OpenCL (PoCL here: OpenCL on the CPU). TG_CL_LEAN=2: every kernel
# must build with the builtins cl.c declares (docs/devices.md), no second build with opencl-c.h
cl_suite() {
  if ! ls /etc/OpenCL/vendors/*.icd >/dev/null 2>&1; then echo "skipped: no OpenCL ICD here (pocl-opencl-icd)"; return 0; fi
  env DEV=CL TG_CL_LEAN=2 make -s test
}
stage "tests on DEV=CL (OpenCL C through PoCL)" cl_suite
stage "tests under ASan+UBSan (DEV=CPU)" env DEV=CPU make -s -j"$JOBS" test-sanitize
# DEV=CPU: libLLVM is not built with ThreadSanitizer, whose reports inside it are about locks it cannot see
stage "thread tests under ThreadSanitizer (DEV=CPU)" env DEV=CPU make -s -j"$JOBS" test-tsan
stage "fuzzers (API + file loaders) under ASan+UBSan" make -s -j"$JOBS" fuzz-check
# Issue 14's offline check (docs/devices.md): each kernel the suite makes is also built as the CUDA
# device would build it, compiled by NVRTC and its PTX assembled by ptxas, for sm_90; no GPU needed
cuda_offline_check() {
  if [ ! -x "${CUDA_PATH:-/usr/local/cuda}/bin/ptxas" ]; then echo "skipped: no CUDA toolkit (NVRTC, ptxas) here"; return 0; fi
  env DEV=CPU TG_CUDA_CHECK=1 CUDA_PTX=1 make -s test
}
stage "offline CUDA check: NVRTC and ptxas accept every kernel (DEV=CPU TG_CUDA_CHECK=1 CUDA_PTX=1)" cuda_offline_check
# Every libonnx-testdata test (docs/onnx.md); fails if a test outside tests/onnx/known_failures.txt fails
stage "ONNX conformance (libonnx-testdata)" make -s onnx-conformance ONNX_ARGS="-q -j$JOBS -x tests/onnx/known_failures.txt"
stage "Python package: pip install into a venv (README)" python_install
stage "Python package tests (pytest against PyTorch)" env TG_LIB="$PWD/$BUILD/libtg.so" \
  /usr/bin/python3 -m pytest -q -p no:cacheprovider python/tests
echo "test.sh: all passed in $(($(date +%s) - T0)) s"
