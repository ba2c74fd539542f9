#!/usr/bin/env bash
# Speed suite on a GPU machine: pairs/s at batch 1e6..1e8, float32 and float64, against the
# host CPU in the same process. Uses the JAX (with CUDA) already installed; installs nothing.
# Fits in 8 minutes on one H200 (each speed process is capped by `timeout`).
#
#   bash benchmarks/gpu.sh [OUT_DIR]      # default: benchmarks/results/gpu-<UTC date>
set -euo pipefail
cd "$(dirname "$0")/.."
# The lent GPU image's JAX lives in its `python3` (there may be no plain `python`).
PY="${PYTHON:-$(command -v python3 || command -v python)}"
OUT="${1:-benchmarks/results/gpu-$(date -u +%Y%m%d-%H%M)}"
mkdir -p "$OUT"

if ! command -v nvidia-smi >/dev/null 2>&1; then
  echo "gpu.sh: nvidia-smi not found: no NVIDIA GPU/driver on this machine" >&2
  exit 2
fi
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv | tee "$OUT/nvidia-smi.txt"

"$PY" - <<'PYEOF'
import sys
import jax
backend = jax.default_backend()
print(f"jax {jax.__version__}: backend {backend}, devices {jax.devices()}")
if backend != "gpu":
    sys.exit("gpu.sh: JAX does not see a GPU (install jax[cuda12] first; this script does not)")
PYEOF

# Let XLA take what it needs per process instead of preallocating 75% (two processes in turn).
export XLA_PYTHON_CLIENT_PREALLOCATE=false
# run.py starts the float64 and the float32 (x64 off) speed processes one after the other.
timeout 470 "$PY" benchmarks/run.py --speed-only --gpu --step-timeout 230 --out "$OUT"
echo "gpu.sh: results in $OUT (summary.md, speed-gpu-float64.json/.md, speed-gpu-float32.json/.md)"
