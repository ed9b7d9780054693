"""cfl_core.liveness.exit_with: a helper process ends once the process it serves is gone, and not before."""
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
WATCH = "from cfl_core.liveness import exit_with; import os, time; exit_with({pid}); time.sleep(3); print('here')"


def _run(pid: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", WATCH.format(pid=pid)], cwd=ROOT, capture_output=True, text=True,
                          timeout=60)


def test_a_helper_watching_a_process_that_is_gone_ends_at_once():
    with subprocess.Popen([sys.executable, "-c", "pass"]) as gone:
        gone.wait()  # reaped: its pid names nothing now
    done = _run(str(gone.pid))
    assert done.returncode == 1 and "here" not in done.stdout


def test_a_helper_watching_a_live_process_keeps_working():
    done = _run("os.getppid()")  # this test's process, alive throughout
    assert done.returncode == 0 and done.stdout.strip() == "here"
    done = _run("None")  # its parent, the default
    assert done.returncode == 0 and done.stdout.strip() == "here"
