#!/bin/sh
# test.sh — the README's test command. Installs what the tests and benchmarks need, builds
# everything warning-free, checks the build (the README's pkg-config command makes a program
# that runs; a changed test fixture rebuilds its test), then runs the suite twice: plain and
# under AddressSanitizer + UndefinedBehaviorSanitizer, and the thread tests under
# ThreadSanitizer. One line per stage with its seconds; the
# runner prints one line per test area. JOBS (default: the cores) sets make's and the runner's
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
  dataset-fashion-mnist
stage "build (make all bench)" make -s -j"$JOBS" all bench
stage "README example" readme_example
stage "build checks" build_checks
stage "tests" make -s test
stage "tests under ASan+UBSan" make -s -j"$JOBS" test-sanitize
stage "thread tests under ThreadSanitizer" make -s -j"$JOBS" test-tsan
echo "test.sh: all passed in $(($(date +%s) - T0)) s"
