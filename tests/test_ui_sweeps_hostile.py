"""The Sweeps and Runs pages (Streamlit's AppTest) over hostile sweep and run folders: a malformed file lists that
sweep as damaged with the reason and the page works for everyone; a named pipe in place of any file never hangs a
page; a sweep's name, description and values are shown as literal text (no live link, no fetched image)."""
from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from cfl_core.sweep import SweepSpec, run_sweep
from tests.helpers import shown
from tests.test_sweep_hostile import DAMAGE, damage
from tests.test_ui_reliability import EVIL, live_markup, texts

APP = str(Path(__file__).resolve().parent.parent / "app.py")
TINY = {"clusters": 2, "clients_per_cluster": 2, "samples_per_client": 20, "rounds": 2}


@pytest.fixture(scope="module")
def finished_sweep(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("sweeps") / "tiny"
    spec = SweepSpec.from_dict({"name": "tiny", "base": TINY, "grid": {"algorithm": ["oracle", "fedavg"],
                                                                       "seed": [0, 1]}})
    run_sweep(spec, out, executor="serial", command="python -m cfl_core sweep tiny.json")
    return out


@pytest.fixture
def runs(tmp_path, monkeypatch, finished_sweep) -> Path:
    root = tmp_path / "runs"
    monkeypatch.setenv("CFL_RUNS_DIR", str(root))
    monkeypatch.setenv("CFL_UI_WARMUP", "0")
    monkeypatch.delenv("CFL_SWEEP_EXECUTOR", raising=False)
    monkeypatch.delenv("CFL_RAY_ADDRESS", raising=False)
    (root / "sweeps").mkdir(parents=True)
    shutil.copytree(finished_sweep, root / "sweeps" / "good")
    return root


def bad_copy(runs: Path) -> Path:
    bad = runs / "sweeps" / "bad"
    shutil.copytree(runs / "sweeps" / "good", bad)
    return bad


def page(name: str = "pages/sweeps.py", selected: str | None = None, query: dict | None = None) -> AppTest:
    at = AppTest.from_file(APP, default_timeout=60)
    at.run()
    if selected is not None:
        at.session_state["sweeps.selected"] = selected
    at.query_params.update(query or {})
    at = at.switch_page(name).run()
    assert not at.exception, [e.value for e in at.exception]
    return at


def listing(at: AppTest):
    return at.dataframe(key="sweeps.table").value.set_index("sweep")


@pytest.mark.parametrize("kind", ["points-not-points", "progress-list", "progress-not-utf8", "results-abc",
                                  "sweep-truncated", "sweep-missing", "results-missing"])
def test_a_malformed_sweep_file_lists_it_as_damaged_with_the_reason_and_the_page_works(runs, kind):
    file, content, reason = DAMAGE[kind]
    damage(bad_copy(runs), file, content)
    at = page()
    table = listing(at)
    assert table.loc["sweeps/good", "state"] == "finished" and table.loc["sweeps/good", "problem"] == ""
    assert table.loc["sweeps/bad", "state"] == "damaged" and reason in table.loc["sweeps/bad", "problem"]
    at = page(selected="sweeps/bad")  # opening the damaged one: the reason, and what could be read
    assert any(reason in shown(w.value) for w in at.warning), [w.value for w in at.warning]
    at = page(selected="sweeps/good")  # and the good one is whole
    assert at.get("plotly_chart") and not at.warning


@pytest.mark.parametrize("file", ["sweep.json", "progress.json", ".lock", "results.csv"])
def test_a_named_pipe_in_a_sweep_folder_never_hangs_the_page(runs, file):
    bad = bad_copy(runs)
    (bad / file).unlink(missing_ok=True)
    os.mkfifo(bad / file)
    at = page(selected="sweeps/bad")  # AppTest's timeout fails the test if the page blocks
    assert listing(at).loc["sweeps/bad", "state"] == "damaged"
    assert any(f"{file} is a named pipe (FIFO)" in shown(w.value) for w in at.warning)


@pytest.mark.parametrize("file", ["rounds.jsonl", "summary.json", "meta.json"])
def test_a_named_pipe_in_a_run_folder_never_hangs_the_runs_page(runs, file):
    run = next(p.parent for p in (runs / "sweeps" / "good").glob("*/config.json"))
    (run / file).unlink()
    os.mkfifo(run / file)
    ref = str(run.relative_to(runs))
    at = page("pages/runs.py")
    assert "sweeps/good" in set(at.dataframe[0].value["id"])  # the sweep is one row: its runs are listed under it
    at = page("pages/runs.py", query={"run": ref})
    assert ref in set(at.dataframe[1].value["id"])  # the sweep's runs, read with the pipe in one of them
    assert any(f"{file} is a named pipe (FIFO)" in shown(w.value) for w in at.warning), [w.value for w in at.warning]


def test_a_sweeps_name_description_and_values_are_shown_as_literal_text(runs):
    bad = bad_copy(runs)
    sweep = json.loads((bad / "sweep.json").read_text())
    (bad / "sweep.json").write_text(json.dumps({**sweep, "name": EVIL, "description": EVIL,
                                                "swept": ["algorithm", EVIL]}))
    # the algorithm column's value only (the run folder's name holds it too, and a folder name with markup is
    # refused as a row)
    results = (bad / "results.csv").read_text().replace(",oracle,", ",<a href='http://localhost:1/x'>oracle</a>,")
    (bad / "results.csv").write_text(results)
    at = page(selected="sweeps/bad")
    said = [t for t in texts(at) if "Click here to log in again" in t]
    assert said and not any(live_markup(t) for t in said), said
    assert any("[Click here to log in again](http://localhost:1/evil)" in shown(t) for t in said)
    heat = json.loads(at.get("plotly_chart")[0].proto.spec)["data"][0]
    labels = json.dumps([heat["x"], heat["y"]])
    assert "&lt;a href=" in labels and "<a href" not in labels  # plotly would draw the tag as a live link
