#!/usr/bin/env bash
# The CUDA path, proved on a machine with a GPU (issue 16). One run, under 8 minutes on an H100-class GPU:
#   1. the CUDA-marked tests (engine = sequential reference on cuda; CLoVE on cuda clusters as on CPU;
#      a dashboard job runs on cuda and says so), with CFL_REQUIRE_CUDA=1 so that none can pass by skipping;
#   2. `python -m cfl_core bench --device cuda --quick`;
#   3. the M = 1,000 / 10,000 / 100,000 rows and the CLoVE paper-size CNN round (issue 38: 20 clients x 1,000
#      28x28 samples, K = 4, Adam, one epoch of batch 100) into benchmarks/RESULTS-gpu.md (+ results-gpu.json).
# Without a visible GPU it stops at once with exit code 3 and says so: it never passes on a CPU.
#
#   bash benchmarks/gpu_check.sh            # PYTHON=... to choose the interpreter (default .venv/bin/python)
#   GPU_CHECK_OUT=DIR bash ...              # where the table and logs go (default benchmarks/)
set -uo pipefail
cd "$(dirname "$0")/.."

PY="${PYTHON:-}"
if [ -z "$PY" ]; then
  if [ -x .venv/bin/python ]; then PY=.venv/bin/python; else PY=python3; fi
fi
OUT="${GPU_CHECK_OUT:-benchmarks}"
mkdir -p "$OUT"

say() { echo "gpu_check: $*" >&2; }

if ! "$PY" -c "import torch" 2>/dev/null; then
  say "PyTorch does not import with $PY; run 'make install' first (or set PYTHON=...)"
  exit 3
fi
if ! "$PY" - <<'PYEOF'
import sys, torch
if not torch.cuda.is_available():
    built = torch.version.cuda or "none (a CPU-only build)"
    print(f"gpu_check: no CUDA GPU is visible to PyTorch {torch.__version__} (its CUDA: {built}); "
          "nothing was measured", file=sys.stderr)
    sys.exit(3)
print(f"gpu_check: {torch.cuda.get_device_name(0)}, torch {torch.__version__}, CUDA {torch.version.cuda}",
      file=sys.stderr)
PYEOF
then
  exit 3
fi

status=0
step() {  # step NAME SECONDS CMD...: run with a time limit, log to $OUT/gpu_check-NAME.log
  local name=$1 limit=$2; shift 2
  say "$name: $*"
  local start=$SECONDS
  timeout "$limit" "$@" 2>&1 | tee "$OUT/gpu_check-$name.log"
  local rc=${PIPESTATUS[0]}
  say "$name: exit $rc after $((SECONDS - start)) s"
  [ "$rc" -eq 0 ] || status=1
}

step tests 180 env CFL_REQUIRE_CUDA=1 "$PY" -m pytest -q -m cuda tests/test_cuda.py
step quick 150 "$PY" -m cfl_core bench --device cuda --quick
step rows 240 "$PY" -m cfl_core bench --device cuda --sizes 1000,10000,100000 --families mlp,cnn \
  --sequential-limit mlp=1000,cnn=1000 --big-round-clients 10000 --strategy-clients 0 --paper-round-samples 1000 \
  --out "$OUT/RESULTS-gpu.md" --json "$OUT/results-gpu.json"

if [ "$status" -ne 0 ]; then say "FAILED: see $OUT/gpu_check-*.log"; else say "passed: table in $OUT/RESULTS-gpu.md"; fi
exit "$status"
