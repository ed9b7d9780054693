"""benchmarks/engine_ab.py: an older revision's engine loaded beside this checkout's, in one process."""
from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
SCRIPT = REPO / "benchmarks" / "engine_ab.py"


def run(*args):
    return subprocess.run([sys.executable, str(SCRIPT), *args], cwd=REPO, capture_output=True, text=True, timeout=300)


def test_both_engines_run_interleaved_and_the_paired_ratio_is_printed():
    done = run("--base", "HEAD", "--what", "loss-matrix", "--algorithm", "clove", "--clients", "8", "--repeats", "4")
    assert done.returncode == 0, done.stderr
    base = re.search(r"base HEAD: median ([\d.]+) ms", done.stdout)
    this = re.search(r"this checkout: +median ([\d.]+) ms", done.stdout)
    ratio = re.search(r"paired: median ([\d.]+) \(quartiles ([\d.]+)-([\d.]+)\)", done.stdout)
    assert base and this and ratio, done.stdout
    assert float(base.group(1)) > 0 and float(this.group(1)) > 0
    assert float(ratio.group(2)) <= float(ratio.group(1)) <= float(ratio.group(3))


def test_an_unknown_revision_or_bad_counts_get_one_line():
    done = run("--base", "no-such-revision", "--repeats", "2")
    assert done.returncode != 0 and "cannot read revision 'no-such-revision'" in done.stderr
    assert "Traceback" not in done.stderr
    done = run("--base=--output=/tmp/engine-ab-must-not-exist", "--repeats", "2")  # never an option for git
    assert done.returncode != 0 and "cannot read revision" in done.stderr
    assert not Path("/tmp/engine-ab-must-not-exist").exists()
    done = run("--base", "HEAD", "--repeats", "1")
    assert done.returncode == 2 and "--repeats needs at least 2" in done.stderr
