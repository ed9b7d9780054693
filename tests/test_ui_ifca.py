"""The IFCA-initialisation page as a sweep, through Streamlit's AppTest: its grid runs as an ordinary sweep folder
(the same points as the page's configs, listed by the Sweeps page), reopening the settings shows it and resumes
only what is unfinished, the executor comes from CFL_SWEEP_EXECUTOR / CFL_RAY_ADDRESS (a bad value: one
message), every run is a plain link (one click) with its own time, a seed opened in the Playground shows that
run's time, and a link's seeds beyond the limit are refused by name."""
from __future__ import annotations

import json
import re
import shutil
import time

import pytest

from cfl_core.sweep.spec import point_key
from cfl_core.sweep.status import list_sweeps
from tests.helpers import shown
from tests.test_ui_pages import app, errors, ok, runs, wait_sweeps  # noqa: F401  (runs: the fixture)

TINY = {"rounds": 2, "clients_per_cluster": 3, "samples_per_client": 40}


@pytest.fixture
def executor(monkeypatch):
    monkeypatch.delenv("CFL_SWEEP_EXECUTOR", raising=False)
    monkeypatch.delenv("CFL_RAY_ADDRESS", raising=False)
    return monkeypatch


def tiny_page(seeds: int = 2, modes=("same",), query: dict | None = None):
    at = ok(app("pages/ifca_init.py", query=query))
    at.number_input(key="ifc.seeds").set_value(seeds)
    at.multiselect(key="ifc.modes").set_value(list(modes))
    for name, value in TINY.items():
        at.number_input(key=f"ifc.{name}").set_value(value)
    return ok(at.run())


def run_and_wait(at):
    at.button(key="ifc.run_btn").click()
    ok(at.run())
    wait_sweeps()
    return ok(at.run())


def table_rows(at) -> list[list[str]]:
    [table] = [m.value for m in at.markdown if m.value.startswith("| seed |")]
    return [[c.strip() for c in line.strip("|").split("|")] for line in table.splitlines()[2:]]


def sweep_folder(at, runs):
    [caption] = [c.value for c in at.caption if "Sweep folder:" in c.value]
    return runs / re.search(r"Sweep folder: `([^`]+)`", caption).group(1)


def test_the_grid_runs_as_a_sweep_folder_with_one_click_links_and_each_runs_own_time(runs, executor):
    at = tiny_page()
    [info] = [i.value for i in at.info if "Press **Run**" in i.value]
    assert "4 runs as a sweep on a pool of" in info and "Estimate: **about" in info
    assert any(c.value.startswith("CPU time measured here just now: ifca · same") for c in at.caption)
    at = run_and_wait(at)
    metrics = {m.label: m.value for m in at.metric}
    assert metrics["IFCA · same"] == "0/2" and metrics["CLoVE · same"] == "2/2"
    folder = sweep_folder(at, runs)
    [listed] = list_sweeps(runs)  # an ordinary sweep folder: the Sweeps page lists it
    assert listed.folder == folder and listed.finished == 4 and listed.state == "finished"
    sweep = json.loads((folder / "sweep.json").read_text())
    # the same runs the page ran before it was a sweep: its configs, point for point
    from cfl_ui.form import job_specs as J
    from cfl_core.config import ExperimentConfig

    base = ExperimentConfig.from_dict(json.loads((folder / sweep["points"][0]["folder"] / "config.json").read_text()))
    configs = J.init_configs(base.replace(seed=0).to_dict(), ["ifca", "clove"], ["same"], 2)
    assert [p["key"] for p in sweep["points"]] == [point_key(c) for c in configs]
    rows = table_rows(at)
    assert not at.dataframe  # a plain table: its links open with one click (a data grid's first click selects)
    assert [r[:3] for r in rows] == [["0", "same", "IFCA"], ["0", "same", "CLoVE"], ["1", "same", "IFCA"],
                                     ["1", "same", "CLoVE"]]
    for row, point in zip(rows, sweep["points"]):
        marker = json.loads((folder / point["folder"] / "sweep_point.json").read_text())
        assert marker["executor"] == "local" and marker["status"] == "finished"
        assert row[6] == f"{marker['wall_seconds']:.1f} s"  # the run's own time
        ref = f"{folder.relative_to(runs)}/{point['folder']}".replace("/", "%2F")
        assert row[8] == f"[in Playground ↗](/?run={ref})"
    # the same settings opened again (another session, by the page's link) show the finished sweep
    again = ok(app("pages/ifca_init.py", query=dict(at.query_params)))
    assert any("4 of 4 runs done" in m.value for m in again.markdown)
    assert again.button(key="ifc.run_btn").disabled and len(table_rows(again)) == 4


def test_reopened_settings_resume_only_the_unfinished_runs(runs, executor):
    executor.setenv("CFL_SWEEP_EXECUTOR", "serial")  # no worker processes: the driver runs them itself
    at = run_and_wait(tiny_page(seeds=1, modes=("same", "different")))
    folder = sweep_folder(at, runs)
    shutil.rmtree(folder / "s0-different-clove")
    other = ok(app("pages/ifca_init.py", query=dict(at.query_params)))  # another browser, by the page's link
    assert any("3 of 4 runs done" in m.value for m in other.markdown)
    resume = other.button(key="ifc.run_btn")
    assert resume.label == "Resume (1 left)" and resume.disabled and "another browser" in resume.help
    again = ok(at.run())  # the browser that started it
    assert again.button(key="ifc.run_btn").label == "Resume (1 left)"
    assert any("3 of 4 runs done" in m.value for m in again.markdown)
    again = run_and_wait(again)
    assert any("4 of 4 runs done" in m.value for m in again.markdown)
    events = [json.loads(line) for line in (folder / "events.jsonl").read_text().splitlines()]
    last = max(i for i, e in enumerate(events) if e["event"] == "start")
    assert [e["folder"] for e in events[last:] if e["event"] == "started"] == ["s0-different-clove"]


@pytest.mark.parametrize("env, named", [({"CFL_SWEEP_EXECUTOR": "dask"}, "CFL_SWEEP_EXECUTOR='dask'"),
                                        ({"CFL_RAY_ADDRESS": "ray://head:10001"}, "CFL_RAY_ADDRESS")])
def test_a_bad_executor_setting_is_one_clear_message(runs, executor, env, named):
    for name, value in env.items():
        executor.setenv(name, value)
    at = tiny_page()
    [message] = [e for e in errors(at) if named in e]
    assert "local, ray, serial" in message or "only with CFL_SWEEP_EXECUTOR=ray" in message
    assert at.button(key="ifc.run_btn").disabled


def test_a_seed_opened_in_the_playground_shows_that_runs_own_time(runs, executor):
    from cfl_core.config import ExperimentConfig
    from cfl_core.sweep import SweepSpec, run_sweep
    from cfl_ui.jobs.manager import JobManager
    from cfl_ui.jobs.snapshots import SEQUENTIAL, UnitSpec

    small = {"clusters": 2, "clients_per_cluster": 2, "samples_per_client": 30, "rounds": 3, "models": 2}
    spec = SweepSpec.from_dict({"name": "t", "base": small, "grid": {"seed": [0, 1]}, "folder": "s{seed}"})
    run_sweep(spec, runs / "sweeps" / "t", executor="serial")
    own = json.loads((runs / "sweeps" / "t" / "s1" / "summary.json").read_text())["total_seconds"]
    at = ok(app(query={"run": "sweeps/t/s1"}))
    [line] = [m.value for m in at.markdown if "of 3 rounds" in m.value]
    assert line.endswith(f" · {own:.1f} s")
    # a unit of a dashboard batch (the page's older form): its own time, not the batch's
    manager = JobManager(runs, switch_interval=None)
    job = manager.submit([UnitSpec(f"s{s}", ExperimentConfig(**small, seed=s)) for s in (0, 1)],
                         schedule=SEQUENTIAL)
    assert job.join(120)
    unit = json.loads((runs / job.id / "s0" / "summary.json").read_text())["total_seconds"]
    at = ok(app(query={"run": f"{job.id}/s0"}))
    [line] = [m.value for m in at.markdown if "of 3 rounds" in m.value]
    assert line.endswith(f" · {unit:.1f} s")


@pytest.mark.parametrize("seeds", ["1e20", "51"])
def test_a_links_seeds_beyond_the_limit_are_refused_by_name(runs, executor, seeds):
    at = ok(app("pages/ifca_init.py", query={"seeds": seeds, "dataset": "digits"}))
    [note] = [shown(w.value) for w in at.warning if "seeds" in w.value]  # shown literally: escaped markdown
    assert f"seeds={seeds!r}" in note and "from 1 to 50" in note and "refused" in note
    assert at.number_input(key="ifc.seeds").value == 10  # the page keeps its own


def test_stop_keeps_the_finished_runs_and_resume_offers_the_rest(runs, executor):
    executor.setenv("CFL_SWEEP_EXECUTOR", "serial")  # one run at a time: Stop lands between two of them
    at = tiny_page(seeds=10, modes=("same", "different", "restarts"))
    at.button(key="ifc.run_btn").click()
    ok(at.run())
    folder = sweep_folder(at, runs)
    deadline = time.time() + 120
    while not list(folder.glob("*/sweep_point.json")) and time.time() < deadline:
        time.sleep(0.05)  # the first run written back
    # while it runs: no download in the refreshing fragment (its next redraw cancels it), one made on request
    ok(at.run())
    assert "Results (CSV)" not in {b.label for b in at.get("download_button")}
    assert at.button(key="ifc.export_now").label == "Make the files of the runs so far"
    at.button(key="ifc.export_now").click()
    ok(at.run())
    assert "Results (CSV)" in {b.label for b in at.get("download_button")}
    assert any(re.match(r"\d+ runs, as of \d\d:\d\d:\d\d", c.value) for c in at.caption)
    at.button(key="ifc.stop_btn").click()  # Stop waits for the sweep to end (after the run in progress)
    ok(at.run())
    finished = len(list(folder.glob("*/sweep_point.json")))
    assert 0 < finished < 60  # the runs done before Stop stay; the rest never started
    label = at.button(key="ifc.run_btn").label
    assert label == f"Resume ({60 - finished} left)" and not at.button(key="ifc.run_btn").disabled
    assert any(f"{finished} of 60 runs done" in m.value and "stopped" in m.value for m in at.markdown)
