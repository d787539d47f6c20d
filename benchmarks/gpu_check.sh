#!/usr/bin/env bash
# The device check for #7, in one run on a GPU machine (the device tool's
# H200): build ember with its CUDA extension using the machine's python3
# (no package registry there), run the CUDA tests on the real GPU, then the
# GPU benchmark next to the machine's PyTorch. Everything is logged to $OUT.
set -uo pipefail
OUT=${OUT:-/tmp/ember-gpu-out}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1
{
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv
  python3 -c "import torch, numpy; print('torch', torch.__version__, 'numpy', numpy.__version__)"
  t0=$(date +%s)
  EMBER_CUDA=1 EMBER_CUDA_ARCH="${EMBER_CUDA_ARCH:-90}" python3 -m pip install -q --no-build-isolation --no-deps . \
    || { echo "BUILD FAILED"; exit 1; }
  echo "build: $(( $(date +%s) - t0 )) s"
  cd /tmp && python3 -c "import ember, ember.cuda as c; print('backend', ember._C._cuda_backend_name(), 'gpus', c.device_count(), c.get_device_name())"
} 2>&1 | tee "$OUT/build.log"
cd /tmp
REPO=$(cd "$(dirname "$0")/.." && pwd)
timeout 300 python3 -m pytest -q -x -p no:cacheprovider "$REPO"/tests/test_cuda_*.py 2>&1 | tee "$OUT/tests.log" | tail -40
cd "$REPO" && timeout 240 python3 -m benchmarks.gpu ${GPU_BENCH_ARGS:-} 2>&1 | tee "$OUT/bench.log"
