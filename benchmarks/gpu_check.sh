#!/usr/bin/env bash
# The device check for #7 on a GPU machine (the device tool's H200): build
# ember in place with its CUDA extension using the machine's python3 (no
# package registry there; the build stays in the working tree, which the
# device tool keeps between calls), run the CUDA tests on the real GPU, then
# the GPU benchmark next to the machine's PyTorch. Logs go to $OUT.
#
#   bash benchmarks/gpu_check.sh [build|test|bench|all]   (default: all)
#
# One device call may run at most 10 minutes: run `build test` in one call
# and `bench` in the next if the first comes close.
set -uo pipefail
OUT=${OUT:-/tmp/ember-gpu-out}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1
REPO=$(cd "$(dirname "$0")/.." && pwd)
export PYTHONPATH="$REPO/python${PYTHONPATH:+:$PYTHONPATH}"
phases=${*:-all}
[ "$phases" = all ] && phases="build test bench"
for phase in $phases; do
  case $phase in
  build)
    {
      nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv
      python3 -c "import sys, torch, numpy; print(sys.version.split()[0], 'torch', torch.__version__, 'numpy', numpy.__version__)"
      t0=$(date +%s)
      (cd "$REPO" && EMBER_CUDA=1 EMBER_CUDA_ARCH="${EMBER_CUDA_ARCH:-90}" python3 setup.py build_ext --inplace) \
        > "$OUT/build_full.log" 2>&1 || { tail -40 "$OUT/build_full.log"; echo "BUILD FAILED"; exit 1; }
      grep -E " error|warning:" "$OUT/build_full.log" | head -20
      echo "build: $(( $(date +%s) - t0 )) s"
      cd /tmp && python3 -c "import ember, ember.cuda as c; print('backend', ember._C._cuda_backend_name(), 'gpus', c.device_count(), c.get_device_name())"
    } 2>&1 | tee "$OUT/build.log"
    [ "${PIPESTATUS[0]}" = 0 ] || exit 1 ;;
  test)
    (cd "$REPO" && timeout "${GPU_TEST_TIMEOUT:-300}" python3 -m pytest -q -x -p no:cacheprovider tests/test_cuda_*.py) \
      2>&1 | tee "$OUT/tests.log" | tail -40 ;;
  bench)
    (cd "$REPO" && timeout "${GPU_BENCH_TIMEOUT:-240}" python3 -m benchmarks.gpu ${GPU_BENCH_ARGS:-}) 2>&1 | tee "$OUT/bench.log" ;;
  *) echo "unknown phase '$phase' (build, test, bench or all)"; exit 2 ;;
  esac
done
