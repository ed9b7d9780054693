"""scripts/need_disk.py: the install's disk check (one line naming the folder and both sizes, or silence)."""
import subprocess
import sys
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[1] / "scripts" / "need_disk.py"


def _run(*args):
    return subprocess.run([sys.executable, str(SCRIPT), *args], capture_output=True, text=True)


def test_enough_space_is_silent(tmp_path):
    done = _run(str(tmp_path / "venv"), "0.001")
    assert done.returncode == 0 and done.stderr == ""


def test_too_little_space_names_folder_and_sizes(tmp_path):
    done = _run(str(tmp_path / "missing" / "venv"), "1000000")
    assert done.returncode == 1
    line = done.stderr.strip()
    assert "\n" not in line and str(tmp_path) in line and "GB is free" in line and "1000000.0 GB" in line


def test_a_partial_install_counts(tmp_path):
    """What the folder already holds comes off the need: 1 GiB there (a sparse file), asking for half a GiB more
    than is free passes; the same ask for an empty folder fails."""
    import shutil
    venv = tmp_path / "venv"
    venv.mkdir()
    with open(venv / "blob", "wb") as f:
        f.truncate(2**30)
    wanted = (shutil.disk_usage(tmp_path).free + 2**29) / 2**30
    assert _run(str(venv), f"{wanted:.6f}").returncode == 0
    assert _run(str(tmp_path / "empty"), f"{wanted:.6f}").returncode == 1
