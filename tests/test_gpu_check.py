"""benchmarks/gpu_check.sh must fail, clearly and before measuring anything, where no GPU is visible."""
import os
import subprocess
import sys
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[1] / "benchmarks" / "gpu_check.sh"


def test_the_gpu_check_fails_clearly_without_a_gpu(tmp_path):
    env = {**os.environ, "CUDA_VISIBLE_DEVICES": "", "PYTHON": sys.executable, "GPU_CHECK_OUT": str(tmp_path)}
    done = subprocess.run(["bash", str(SCRIPT)], env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 3, done.stderr
    assert "no CUDA GPU is visible to PyTorch" in done.stderr and "nothing was measured" in done.stderr
    assert not (tmp_path / "RESULTS-gpu.md").exists() and not list(tmp_path.glob("gpu_check-*.log"))


def test_the_gpu_check_names_a_python_without_torch(tmp_path):
    env = {**os.environ, "PYTHON": "/bin/false", "GPU_CHECK_OUT": str(tmp_path)}
    done = subprocess.run(["bash", str(SCRIPT)], env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 3 and "PyTorch does not import with /bin/false" in done.stderr
