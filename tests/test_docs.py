"""The manual: the MkDocs site builds with --strict (a broken link or anchor fails), and the notebook in docs/ runs
top to bottom on the bundled data, drawing the dashboard's figures."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def build(config: Path, site: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--config-file", str(config),
                           "--site-dir", str(site)], cwd=ROOT, capture_output=True, text=True, timeout=300,
                          env={**os.environ, "NO_MKDOCS_2_WARNING": "1"})


def test_the_manual_builds_strictly(tmp_path):
    done = build(ROOT / "mkdocs.yml", tmp_path / "site")
    assert done.returncode == 0, done.stderr[-3000:]
    for page in ("index", "getting-started", "cli", "python-api", "trackers", "algorithms", "results",
                 "performance", "contributing", "faithfulness", "data", "dashboard"):
        assert (tmp_path / "site" / page / "index.html").is_file() or page == "index", page
    contributing = (tmp_path / "site" / "contributing" / "index.html").read_text()
    assert "Switching margin" in contributing  # the plugin example is included from its file, not copied


def test_a_broken_link_fails_the_strict_build(tmp_path):
    """--strict is what makes the build a link check: the same config with one dead link fails."""
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "index.md").write_text("# Home\n\nSee [the missing page](missing.md).\n")
    config = tmp_path / "mkdocs.yml"
    config.write_text("site_name: t\ndocs_dir: docs\ntheme: {name: material}\n")
    done = build(config, tmp_path / "site")
    assert done.returncode != 0 and "missing.md" in done.stderr


def test_every_algorithm_has_its_section_in_the_manual():
    from cfl_core.algorithms import ALGORITHMS

    text = (ROOT / "docs" / "algorithms.md").read_text()
    for name, cls in ALGORITHMS.items():
        assert f"## {cls.label} (`{name}`)" in text, name


def test_the_notebook_runs_and_draws_the_dashboards_figures():
    import nbformat
    from nbclient import NotebookClient

    notebook = nbformat.read(ROOT / "docs" / "tour.ipynb", as_version=4)
    NotebookClient(notebook, timeout=600, kernel_name="python3",
                   resources={"metadata": {"path": str(ROOT)}}).execute()
    outputs = [o for cell in notebook.cells if cell.cell_type == "code" for o in cell.get("outputs", [])]
    assert not [o for o in outputs if o.output_type == "error"]
    text = "".join(o.get("text", "") for o in outputs if o.output_type == "stream")
    assert "clusters=0 is not allowed" in text
    assert "ifca   final accuracy" in text and "clove  final accuracy" in text
    figures = [o for o in outputs if "application/vnd.plotly.v1+json" in o.get("data", {})]
    assert len(figures) == 3  # metric curves, clients per model, assignment heatmap


def test_every_public_name_resolves_and_is_documented():
    """`cfl_core.__all__` is the promise: each name loads from the top of the package and the API page names it."""
    import cfl_core

    page = (ROOT / "docs" / "python-api.md").read_text()
    names = [n for n in cfl_core.__all__ if n != "__version__"]
    assert {"Experiment", "ExperimentConfig", "load_run", "run_sweep"} <= set(names)
    for name in names:
        assert getattr(cfl_core, name) is not None, name
        assert f"`{name}" in page or f", `{name}`" in page, f"{name} is not in docs/python-api.md"
    assert set(dir(cfl_core)) >= set(names)
