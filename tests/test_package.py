"""The installable package: a wheel built from the sources, installed into a fresh virtual environment, runs
`cfl-lab --help`, `cfl-lab run` and `cfl-lab serve` (its health check answers) from a folder outside the repository.

Nothing downloads: the wheel is built without build isolation from the installed setuptools, installed with
--no-deps, and the new environment reaches this one's installed libraries (torch, Streamlit, ...) through a
.pth file, so only CFL Lab's own files come from the wheel."""
from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import sysconfig
import time
import urllib.request
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
# what a build reads: the packaging files and the packages (the wheel's app files included)
SOURCES = ("pyproject.toml", "setup.py", "MANIFEST.in", "README.md", "requirements.txt", "requirements-test.txt",
           "app.py", ".streamlit", "pages", "cfl_core", "cfl_ui", "cfl_lab")


def run(args, cwd, timeout=300, env=None) -> subprocess.CompletedProcess:
    return subprocess.run([str(a) for a in args], cwd=cwd, capture_output=True, text=True, timeout=timeout,
                          env=env)


@pytest.fixture(scope="module")
def installed(tmp_path_factory) -> Path:
    """A fresh venv with the wheel installed; returns its bin folder."""
    work = tmp_path_factory.mktemp("package")
    source = work / "source"
    source.mkdir()
    for name in SOURCES:
        copy = shutil.copytree if (ROOT / name).is_dir() else shutil.copy2
        copy(ROOT / name, source / name, **({"ignore": shutil.ignore_patterns("__pycache__")}
                                            if (ROOT / name).is_dir() else {}))
    built = run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "--no-index", "--quiet",
                 "-w", work / "dist", source], work)
    assert built.returncode == 0, built.stderr[-3000:]
    wheel = next((work / "dist").glob("cfl_lab-*.whl"))
    venv = work / "venv"
    made = run([sys.executable, "-m", "venv", "--without-pip", venv], work)
    assert made.returncode == 0, made.stderr
    python = venv / "bin" / "python"
    purelib = Path(run([python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"], work)
                   .stdout.strip())
    # this environment's libraries, after the new environment's own site-packages (so the wheel comes first)
    (purelib / "shared_libraries.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    done = run([sys.executable, "-m", "pip", "--python", python, "install", "--no-deps", "--no-index", "--quiet",
                wheel], work)
    assert done.returncode == 0, done.stderr[-3000:]
    return venv / "bin"


def outside(tmp_path) -> dict:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "CFL_RUNS_DIR")}
    return {"cwd": tmp_path, "env": env}


def test_the_wheel_carries_the_packages_and_the_dashboard(installed, tmp_path):
    where = run([installed / "python", "-c", "import cfl_core, cfl_ui, cfl_lab; from cfl_ui import serve; "
                                             "print(cfl_core.__file__); print(serve.APP)"], **outside(tmp_path))
    assert where.returncode == 0, where.stderr[-2000:]
    core, app = (Path(line) for line in where.stdout.split())
    venv = installed.parent
    assert venv in core.parents and ROOT not in core.parents  # the installed copy, not the sources
    assert app == next(venv.glob("lib/python*/site-packages/cfl_lab/app/app.py"))
    for shipped in ("pages/playground.py", "pages/compare.py", ".streamlit/config.toml"):
        assert (app.parent / shipped).is_file(), shipped
    assert next(venv.glob("lib/python*/site-packages/cfl_core/engine/native/dense_sgd.c")).is_file()


def test_cfl_lab_runs_an_experiment_from_any_folder(installed, tmp_path):
    helped = run([installed / "cfl-lab", "--help"], **outside(tmp_path))
    assert helped.returncode == 0 and "serve" in helped.stdout and "run" in helped.stdout
    done = run([installed / "cfl-lab", "run", "--algorithm", "fedavg", "--rounds", "2", "--clusters", "2",
                "--clients-per-cluster", "2", "--samples-per-client", "30", "--out", "first"], **outside(tmp_path))
    assert done.returncode == 0, done.stderr[-2000:]
    assert "fedavg: finished after 2 rounds" in done.stdout
    assert len((tmp_path / "first" / "rounds.jsonl").read_text().splitlines()) == 2
    assert json.loads((tmp_path / "first" / "summary.json").read_text())["status"] == "finished"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_cfl_lab_serve_answers_from_any_folder(installed, tmp_path):
    port = free_port()
    server = subprocess.Popen([installed / "cfl-lab", "serve", "--server.port", str(port), "--server.headless", "true",
                               "--server.address", "127.0.0.1"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                              text=True, **outside(tmp_path))
    try:
        deadline, health = time.monotonic() + 180, None
        while time.monotonic() < deadline and server.poll() is None:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/_stcore/health", timeout=5) as answer:
                    health = answer.read().decode()
                break
            except OSError:
                time.sleep(0.5)
        assert health == "ok", server.stdout.read() if server.poll() is not None else "no answer in 180 s"
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/", timeout=10) as page:
            assert page.status == 200 and "<html" in page.read().decode().lower()
    finally:
        server.terminate()
        try:
            server.wait(30)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()
    # the served app draws its landing page from the wheel's copy (pages and config included)
    drawn = run([installed / "python", "-c",
                 "from streamlit.testing.v1 import AppTest; from cfl_ui import serve\n"
                 "at = AppTest.from_file(str(serve.APP), default_timeout=120); at.run()\n"
                 "assert not at.exception, [e.value for e in at.exception]\n"
                 "print('DRAWN', at.selectbox(key='pg.algorithm').value)"], **outside(tmp_path))
    assert "DRAWN clove" in drawn.stdout, drawn.stderr[-3000:]
