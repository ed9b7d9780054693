"""Runs saved by the CLI below the top of the runs folder (`compare --out runs/X`, a sweep whose folder template is
`{partition}/seed{seed}/{algorithm}`):
listed with the right references, reopened as batches, deleted only when they are runs, on the Runs page
and in the Playground."""
from __future__ import annotations

import json
import os
import shutil
import time
from pathlib import Path

import pytest

from cfl_core.compare import compare_table, run_comparison
from cfl_core.config import ExperimentConfig
from cfl_core.experiment import Experiment
from cfl_ui.jobs import snapshots as S
from cfl_ui.jobs.manager import JobManager
from cfl_ui.jobs.run_refs import parse_ref, ref_folder
from cfl_ui.jobs.store import delete_job, job_owner, list_rows, load_job

TINY = ExperimentConfig(algorithm="fedavg", rounds=2, clusters=2, clients_per_cluster=2, samples_per_client=20)
ALGOS = ["fedavg", "oracle"]
NESTED = {"cmp/fedavg", "cmp/oracle", "grp/sub/seed0/fedavg", "grp/sub/seed0/oracle", "single"}


@pytest.fixture(scope="module")
def template(tmp_path_factory):
    """A runs folder as the CLI leaves it: a compare folder, a sweep-style tree and a single run."""
    root = tmp_path_factory.mktemp("template") / "runs"
    results = run_comparison(TINY, ALGOS, root / "cmp")  # what `python -m cfl_core compare --out runs/cmp` does
    markdown, csv_text = compare_table(results)
    (root / "cmp" / "compare.md").write_text(markdown)
    (root / "cmp" / "compare.csv").write_text(csv_text)
    run_comparison(TINY, ALGOS, root / "grp" / "sub" / "seed0")  # a README sweep: <out>/<partition>/seed<N>/<algo>
    (root / "grp" / "table.md").write_text("| a |\n")
    Experiment(TINY, out_dir=root / "single").run()  # `python -m cfl_core run --out runs/single`
    return root


@pytest.fixture
def root(template, tmp_path):
    out = tmp_path / "runs"
    shutil.copytree(template, out)
    return out


def test_nested_cli_runs_are_listed_with_their_references(root):
    (root / "empty-group" / "nothing").mkdir(parents=True)  # grouping folders without runs: no rows
    shutil.copytree(root / "single", root / ".trash" / "old")  # hidden: skipped
    deep = root.joinpath(*"abcdef", "run")  # a run 7 levels down: past the depth limit
    shutil.copytree(root / "single", deep)
    rows, hidden = list_rows(root, "alice")  # everyone sees the CLI's runs
    assert hidden == 0
    by_ref = {r.ref: r for r in rows}
    assert set(by_ref) == NESTED
    assert by_ref["cmp/oracle"].job == "cmp" and by_ref["single"].job == "single"
    assert by_ref["grp/sub/seed0/fedavg"].job == "grp/sub/seed0"
    for r in rows:
        assert r.kind == "cli" and r.owner == "" and r.status == S.FINISHED and r.rounds == "2/2"
        assert r.algorithm == r.ref.rsplit("/", 1)[-1] or r.ref == "single"
        assert r.final_accuracy is not None
        parsed = parse_ref(r.ref)
        assert parsed is not None and parsed[0] == r.job or (parsed[1] is None and r.job == r.ref)
        assert ref_folder(root, r.ref) == root / r.ref
    assert list_rows(root / "missing", None) == ([], 0)


def test_a_cli_batch_loads_with_every_unit_and_its_records(root):
    for job in ("cmp", "grp/sub/seed0"):
        snap = load_job(root, job)
        assert snap is not None and snap.id == job and snap.kind == "cli" and snap.owner == ""
        assert snap.from_disk and snap.status == S.FINISHED and not snap.live
        assert [u.name for u in snap.units] == ALGOS
        assert [u.ref for u in snap.units] == [f"{job}/{a}" for a in ALGOS]
        for u in snap.units:
            meta = json.loads((root / u.ref / "meta.json").read_text())
            assert u.label == meta["algorithm_label"] and len(u.records) == 2 and u.summary is not None
        assert job_owner(root, job) == ""
    # what the pages do with a ?run= reference
    snap = JobManager(root).snapshot("grp/sub/seed0/oracle")
    assert snap is not None and snap.unit("oracle").algorithm == "oracle" and snap.unit("oracle").rounds_done == 2
    assert load_job(root, "single").units[0].rounds_done == 2
    for none in ("grp", "grp/sub", "empty", "cmp/fedavg/x", "../runs/cmp"):
        assert load_job(root, none) is None
    assert job_owner(root, "grp/sub") is None


def test_a_batch_status_comes_from_its_units(root):
    unit = root / "cmp" / "oracle"
    (unit / "summary.json").unlink()  # the process died after its last round ...
    old = time.time() - 3600
    os.utime(unit / "rounds.jsonl", (old, old))
    assert load_job(root, "cmp").status == S.INTERRUPTED
    assert {r.ref: r.status for r in list_rows(root, None)[0]}["cmp/oracle"] == S.INTERRUPTED
    os.utime(unit / "rounds.jsonl")  # ... or is still writing it
    assert load_job(root, "cmp").status == S.ELSEWHERE
    assert {r.ref: r.status for r in list_rows(root, None)[0]}["cmp/oracle"] == S.ELSEWHERE


def test_delete_removes_a_cli_batch_but_never_a_grouping_folder_or_anything_outside(root, tmp_path):
    outside = tmp_path / "outside"
    shutil.copytree(root / "cmp", outside)
    (root / "link").symlink_to(outside, target_is_directory=True)
    for refused in ("grp", "grp/sub", "", "..", "../outside", "/abs", "link", "missing", "grp/missing"):
        assert not delete_job(root, refused), refused
    assert ref_folder(root, "link/fedavg") is None  # a reference never leads out of root
    assert (outside / "fedavg" / "config.json").exists() and (root / "grp" / "sub" / "seed0").exists()
    assert delete_job(root, "grp/sub/seed0")
    assert not (root / "grp" / "sub" / "seed0").exists() and (root / "grp" / "table.md").exists()
    assert delete_job(root, "cmp") and not (root / "cmp").exists()  # the runs and compare.md/csv
    assert delete_job(root, "single") and not (root / "single").exists()
    (root / "link").unlink()
    assert list_rows(root, None) == ([], 0)


def test_listing_stays_fast_on_hundreds_of_run_folders(root):
    for i in range(60):  # 60 seed folders x 2 algorithms + the fixture's 5
        shutil.copytree(root / "grp" / "sub" / "seed0", root / "many" / "part" / f"seed{i}")
    start = time.perf_counter()
    rows, _ = list_rows(root, None)
    assert len(rows) == 125
    assert time.perf_counter() - start < 2.0


# -- the pages, through Streamlit's AppTest --------------------------------------------------------
@pytest.fixture
def pages_root(root, monkeypatch):
    monkeypatch.setenv("CFL_RUNS_DIR", str(root))
    monkeypatch.setenv("CFL_UI_WARMUP", "0")
    return root


def _app(page: str, query: dict):
    from streamlit.testing.v1 import AppTest

    at = AppTest.from_file(str(Path(__file__).resolve().parent.parent / "app.py"), default_timeout=90)
    at.run()
    at.query_params.clear()
    at.query_params.update(query)
    at = at.switch_page(page).run()
    assert not at.exception, [e.value for e in at.exception]
    return at


def _chart_kinds(at) -> list[str]:
    return sorted(e.key.rsplit(".", 1)[-1] for e in at.get("plotly_chart"))


def test_runs_page_reopens_a_nested_cli_run_read_only(pages_root):
    shutil.copytree(pages_root / "grp" / "sub" / "seed0" / "oracle", pages_root / "top")
    top = _chart_kinds(_app("pages/runs.py", {"run": "top"}))  # the same run saved at the top
    assert len(top) >= 4
    shutil.rmtree(pages_root / "top")
    ref = "grp/sub/seed0/oracle"
    at = _app("pages/runs.py", {"run": ref})
    assert set(at.dataframe[0].value["id"]) == NESTED
    assert _chart_kinds(at) == top  # all the charts a top-level run gets
    assert any(ref in m.value for m in at.markdown)
    # a CLI run is the disk user's: the dashboard shows it read-only and says why
    delete = at.button(key="runs.delete")
    assert delete.disabled and "started from the command line" in delete.help
    assert any("started from the command line" in c.value for c in at.caption)
    assert (pages_root / "grp" / "sub" / "seed0").exists()


def test_playground_opens_a_nested_cli_run(pages_root):
    ref = "cmp/oracle"
    at = _app("pages/playground.py", {"run": ref})
    assert at.session_state["pg.run"] == ref
    assert at.number_input(key="pg.clusters").value == 2  # the run's settings fill the controls
    assert len(at.get("plotly_chart")) >= 4
    assert not any("was not found" in w.value for w in at.warning)
    assert any("Opened from disk" in c.value for c in at.caption)
