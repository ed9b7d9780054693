"""`make test` on a fresh machine: its `chromium` step installs Debian's chromium when it is missing (as root with
apt-get), or says in one line the exact command to run; present, it does nothing. apt-get and id are stand-ins
on PATH here (nothing is installed, nothing downloads), so what is tested is which command the step runs."""
from __future__ import annotations

import os
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def make_chromium(tmp_path, chromium: Path, uid: int, apt_works: bool = True) -> tuple[str, list[str]]:
    """Run `make chromium` with a fake `id -u` and a fake apt-get that logs its arguments; (output, apt calls)."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    log = tmp_path / "apt.log"
    (bin_dir / "id").write_text(f"#!/bin/sh\necho {uid}\n")
    (bin_dir / "apt-get").write_text(f'#!/bin/sh\necho "$*" >> {log}\nexit {0 if apt_works else 100}\n')
    for f in ("id", "apt-get"):
        (bin_dir / f).chmod(0o755)
    env = {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}", "CFL_CHROMIUM": str(chromium)}
    out = subprocess.run(["make", "--no-print-directory", "chromium"], cwd=ROOT, env=env, capture_output=True,
                         text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    calls = log.read_text().splitlines() if log.exists() else []
    return (out.stdout + out.stderr).strip(), calls


def test_make_test_runs_the_chromium_step():
    dry = subprocess.run(["make", "-n", "test"], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert "scripts/need_chromium.sh" in dry.stdout and "pytest" in dry.stdout


def test_present_chromium_needs_nothing(tmp_path):
    browser = tmp_path / "chromium"
    browser.write_text("#!/bin/sh\n")
    browser.chmod(0o755)
    assert make_chromium(tmp_path, browser, uid=0) == ("", [])


def test_missing_chromium_is_installed_with_apt_get_as_root(tmp_path):
    text, calls = make_chromium(tmp_path, tmp_path / "absent", uid=0)
    assert calls == ["install -y -qq chromium"]
    assert "installing it (apt-get install -y chromium)" in text


def test_a_failed_install_updates_the_lists_then_says_the_command(tmp_path):
    text, calls = make_chromium(tmp_path, tmp_path / "absent", uid=0, apt_works=False)
    assert calls == ["install -y -qq chromium", "update -qq"]
    assert text.splitlines()[-1] == ("could not install chromium: run 'apt-get update && apt-get install -y "
                                     "chromium' (the browser tests fail without it)")


def test_not_root_gets_one_line_with_the_exact_command(tmp_path):
    text, calls = make_chromium(tmp_path, tmp_path / "absent", uid=1000)
    assert calls == []
    assert text == (f"chromium is missing at {tmp_path / 'absent'}: run 'sudo apt-get install -y chromium' "
                    "(the browser tests fail without it)")
