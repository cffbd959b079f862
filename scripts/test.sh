#!/bin/sh
# test.sh — the README's test command. Installs what the tests and benchmarks need, builds
# everything warning-free, checks the build (the README's pkg-config command makes a program
# that runs; a changed test fixture rebuilds its test), then runs the suite on each device
# (the default, LLVM where libLLVM-14 loads, and CPU), under AddressSanitizer +
# UndefinedBehaviorSanitizer (CPU), the thread tests under ThreadSanitizer, and the fuzzers.
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
  dataset-fashion-mnist libllvm14 clang libclang-rt-14-dev ocl-icd-opencl-dev opencl-headers pocl-opencl-icd
stage "build (make all bench)" make -s -j"$JOBS" all bench
stage "README example" readme_example
stage "build checks" build_checks
stage "tests (default device: LLVM where libLLVM-14 loads)" make -s test
stage "tests on DEV=CPU (C compiled by cc)" env DEV=CPU make -s test
stage "tests under ASan+UBSan (DEV=CPU)" env DEV=CPU make -s -j"$JOBS" test-sanitize
# DEV=CPU: libLLVM is not built with ThreadSanitizer, whose reports inside it are about locks it cannot see
stage "thread tests under ThreadSanitizer (DEV=CPU)" env DEV=CPU make -s -j"$JOBS" test-tsan
stage "fuzzers (API + file loaders) under ASan+UBSan" make -s -j"$JOBS" fuzz-check
echo "test.sh: all passed in $(($(date +%s) - T0)) s"
