"""The peer benchmark's "other load": CPU of the profiler it starts a peer under is the run's own, not the machine's
other load (benchmarks/peers/common.py)."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

# the peer: measures the other load over 2 s while its parent keeps one CPU busy
CHILD = f"""
import sys, time
sys.path.insert(0, {str(ROOT / "benchmarks" / "peers")!r})
import common
load = common.TreeLoad()
time.sleep(2.0)
print(load.cpus())
"""

# the parent: starts the peer, then burns one CPU until it ends
PARENT = f"""
import subprocess, sys
child = subprocess.Popen([{sys.executable!r}, "-c", {CHILD!r}], stdout=subprocess.PIPE, text=True)
while child.poll() is None:
    sum(range(10000))
print(child.stdout.read().strip())
"""


def other_load_under(tmp_path: Path, name: str) -> float:
    parent = tmp_path / name  # the parent's process name (comm) is the name it was started by
    parent.symlink_to(sys.executable)
    out = subprocess.run([str(parent), "-c", PARENT], capture_output=True, text=True, timeout=120,
                         env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert out.returncode == 0, out.stderr
    return float(out.stdout.strip().splitlines()[-1])


def test_the_profilers_cpu_is_the_runs_own_and_any_other_parents_is_other_load(tmp_path):
    # side by side, so that whatever else the machine runs is in both figures: the same busy parent adds its CPU
    # (about 1) to the other load when it is a launcher, and nothing when it is the profiler (the run's own)
    profiled = other_load_under(tmp_path, "py-spy")
    launched = other_load_under(tmp_path, "launcher")
    assert launched - profiled > 0.5, (profiled, launched)
