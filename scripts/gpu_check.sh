#!/bin/sh
# gpu_check.sh — what a machine with an NVIDIA GPU checks (issue 14, item 4): build tg, run the
# CUDA device's own tests, the tensor-core tests (tests/test_tc.c: float16/bfloat16 matmuls and a
# conv on mma.sync against naive loops, CUDA C then PTX), the whole suite under DEV=CUDA (NVRTC's
# cubins, then CUDA_PTX=1: the PTX renderer's kernels through the driver's JIT), and bench/gpu
# (tg against PyTorch's
# cuBLAS on the same GPU, when a Python with CUDA PyTorch is found); then one table line per
# step and the failed tests. Logs: $LOG (default /tmp/tg-gpu-check). BUILD: the build directory
# (default build-gpu); JOBS: make's and the runner's parallelism (default: the cores); PYTHON:
# the interpreter with torch (default: the first of python3, /opt/torch/.venv/bin/python3 that
# imports it); GPU_SIZES: bench/gpu's matrix sizes (default 4096 8192).
#   sh scripts/gpu_check.sh            exit status 0 when every step passed
set -u
cd "$(dirname "$0")/.." || exit 1
JOBS=${JOBS:-$(nproc)}
BUILD=${BUILD:-build-gpu}
LOG=${LOG:-/tmp/tg-gpu-check}
GPU_SIZES=${GPU_SIZES:-4096 8192}
export TG_TEST_JOBS="$JOBS"
mkdir -p "$LOG"
: > "$LOG/table.txt"
failed=0

# step NAME COMMAND...: run it with its output in $LOG/NAME.txt; a table line with its status,
# seconds and the runner's last line ("N passed, N failed") when it printed one.
step() {
  name=$1
  shift
  s=$(date +%s)
  "$@" > "$LOG/$name.txt" 2>&1
  rc=$?
  summary=$(grep -E '^[0-9]+ passed, [0-9]+ failed' "$LOG/$name.txt" | tail -1)
  status=ok
  if [ $rc -ne 0 ]; then status=FAILED; failed=1; fi
  printf '%-22s %-7s %5d s  %s\n' "$name" "$status" "$(($(date +%s) - s))" "$summary" | tee -a "$LOG/table.txt"
}

find_python() {
  for p in ${PYTHON:-} python3 /opt/torch/.venv/bin/python3; do
    if "$p" -c 'import torch; assert torch.cuda.is_available()' > /dev/null 2>&1; then echo "$p"; return; fi
  done
}

echo "GPU: $(nvidia-smi --query-gpu=name,driver_version,compute_cap --format=csv,noheader 2>&1 | head -1)"
step build make -s -j"$JOBS" BUILD="$BUILD" "$BUILD/test_tg" "$BUILD/libtg.so" "$BUILD/tg.pc" "$BUILD/bench_gpu"
step cuda-tests env DEV=CUDA SPEC=1 VERBOSE=1 "./$BUILD/test_tg" cuda
step tc-tests env DEV=CUDA SPEC=1 VERBOSE=1 "./$BUILD/test_tg" tc_
step tc-tests-ptx env DEV=CUDA CUDA_PTX=1 SPEC=1 VERBOSE=1 "./$BUILD/test_tg" tc_
step suite-cuda env DEV=CUDA make -s BUILD="$BUILD" test
step suite-cuda-ptx env DEV=CUDA CUDA_PTX=1 make -s BUILD="$BUILD" test
PY=$(find_python)
if [ -n "$PY" ]; then
  # shellcheck disable=SC2086 # GPU_SIZES is a list of sizes
  step bench-gpu env DEV=CUDA PYTHON="$PY" "./$BUILD/bench_gpu" $GPU_SIZES
  # the GEMM kernels' optimizations (float16/bfloat16 should show TC(...)), from one size
  step bench-gpu-opts env DEV=CUDA DEBUG=2 PYTHON="$PY" "./$BUILD/bench_gpu" 1024
else
  echo "bench-gpu              skipped: no Python with CUDA PyTorch (set PYTHON)" | tee -a "$LOG/table.txt"
fi

echo "---- failed tests (DEV=CUDA)"
grep -H '^FAIL ' "$LOG/cuda-tests.txt" "$LOG/tc-tests.txt" "$LOG/tc-tests-ptx.txt" "$LOG/suite-cuda.txt" "$LOG/suite-cuda-ptx.txt" 2>/dev/null || echo "none"
[ -f "$LOG/bench-gpu.txt" ] && { echo "---- bench/gpu"; cat "$LOG/bench-gpu.txt"; }
[ -f "$LOG/bench-gpu-opts.txt" ] && { echo "---- bench/gpu GEMM optimizations"; grep '^opt r_' "$LOG/bench-gpu-opts.txt"; }
echo "logs in $LOG"
exit $failed
