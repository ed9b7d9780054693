"""The one sweep service through the pages (AppTest; two browsers = two AppTest sessions, each its own owner id):
another browser can neither stop nor resume nor delete someone's sweep (IFCA page, Sweeps page, Runs page) and does
not see it listed without its link; the Sweeps form refuses a point the Playground refuses, and a point above the
memory budget, with the estimate and the limit, and shows a measured estimate; sweeps started together from the
page wait in the runs' queue; a dashboard sweep is one row of its owner on the Runs page, not one "CLI" row per
run for every browser."""
from __future__ import annotations

import time

import pytest

from tests.helpers import shown
from tests.test_ui_ifca import sweep_folder, tiny_page
from tests.test_ui_pages import app, errors, manager, ok, runs, wait_sweeps  # noqa: F401  (runs: the fixture)


@pytest.fixture
def serial(runs, monkeypatch):
    """Sweeps run in their driver's thread (no worker processes); whatever still runs at the end is stopped."""
    monkeypatch.setenv("CFL_SWEEP_EXECUTOR", "serial")
    monkeypatch.delenv("CFL_RAY_ADDRESS", raising=False)
    yield runs
    for job in manager().sweeps.jobs():
        job.stop()
    for job in manager().sweeps.jobs():
        job.join(60)


def owner(at) -> str:
    return at.session_state["cfl.owner"]


def sweeps_page(query: dict | None = None):
    at = app("pages/sweeps.py", query=query)
    return ok(at)


def fill_form(at, name: str, seeds: str = "0, 1", rounds: str = "2", **values):
    at.multiselect(key="sweeps.fields").set_value(["seed", "rounds", *values]).run()
    at.text_input(key="sweeps.values.seed").set_value(seeds).run()
    at.text_input(key="sweeps.values.rounds").set_value(rounds).run()
    for field, text in values.items():
        at.text_input(key=f"sweeps.values.{field}").set_value(text).run()
    at.text_input(key="sweeps.name").set_value(name).run()
    return ok(at)


def wait_for(predicate, seconds: float = 120):
    deadline = time.monotonic() + seconds
    while not predicate():
        assert time.monotonic() < deadline
        time.sleep(0.05)


# -- IFCA initialisation --------------------------------------------------------------------------------------------
def test_another_browser_cannot_stop_someones_ifca_sweep(serial):
    a = tiny_page(seeds=10, modes=("same", "different", "restarts"))
    a.number_input(key="ifc.rounds").set_value(20)
    ok(a.run())
    a.button(key="ifc.run_btn").click()
    ok(a.run())
    [job] = manager().sweeps.jobs()
    assert job.owner == owner(a) and job.kind == "ifca-init"
    b = ok(app("pages/ifca_init.py", query=dict(a.query_params)))  # another browser, by the page's link
    assert owner(b) != owner(a) and job.active
    stop, run = b.button(key="ifc.stop_btn"), b.button(key="ifc.run_btn")
    assert stop.disabled and "another browser" in stop.help and run.disabled
    assert any("started in another browser" in shown(c.value) for c in b.sidebar.caption)
    # a stale or forged press is checked again by the service: the sweep goes on
    assert "another browser" in manager().sweeps.stop(job.rel, owner(b))
    time.sleep(0.6)
    assert job.active
    a.button(key="ifc.stop_btn").click()  # its owner's Stop
    ok(a.run())
    assert job.state == "stopped" and not job.active
    b = ok(b.run())
    assert b.button(key="ifc.run_btn").label.startswith("Resume (") and b.button(key="ifc.run_btn").disabled


def test_a_dashboard_sweep_is_one_row_of_its_owner_on_the_runs_page(serial):
    a = tiny_page()
    a.button(key="ifc.run_btn").click()
    ok(a.run())
    wait_sweeps()
    rel = sweep_folder(ok(a.run()), serial).relative_to(serial).as_posix()
    a.query_params.clear()
    a = ok(a.switch_page("pages/runs.py").run())
    table = a.dataframe[0].value
    assert list(table["id"]) == [rel] and list(table["from"]) == ["Sweep"]  # one row, not 4 "CLI" rows
    assert list(table["rounds"]) == ["4/4 runs"] and "IFCA init page" in table["run"][0]
    b = ok(app("pages/runs.py"))  # another browser: hidden
    assert any("1 from other browsers are hidden" in c.value for c in b.sidebar.caption)
    assert not b.dataframe
    # the sweep opened: its runs beneath it, its Delete for its owner only
    a.query_params["run"] = rel
    a = ok(a.switch_page("pages/runs.py").run())
    assert len(a.dataframe[1].value) == 4 and all(r.startswith(rel + "/") for r in a.dataframe[1].value["id"])
    assert not a.button(key="runs.sweep.delete").disabled
    b = ok(app("pages/runs.py", query={"run": rel}))  # by its link: read-only
    assert len(b.dataframe[1].value) == 4
    assert b.button(key="runs.sweep.delete").disabled and "another browser" in b.button(key="runs.sweep.delete").help
    a.button(key="runs.sweep.delete").click()
    ok(a.run())
    a.button(key="runs.sweep.yes").click()
    ok(a.run())
    assert not (serial / rel).exists()


# -- the Sweeps page -------------------------------------------------------------------------------------------------
def test_the_sweeps_form_refuses_a_point_the_playground_refuses_with_the_estimate_and_the_limit(serial):
    at = fill_form(sweeps_page(), "too-long", rounds="2, 100000")
    [message] = [e for e in errors(at) if "Too large for this machine" in e]
    assert "this request needs about" in message and "the limit here is" in message and "rounds=100000" in message
    assert at.button(key="sweeps.start").disabled
    at = fill_form(at, "fine", rounds="2")
    assert not at.button(key="sweeps.start").disabled and any("**2 points**" in m.value for m in at.markdown)
    assert any(c.value.startswith("CPU time measured here just now") for c in at.caption)  # a measured estimate


def test_the_sweeps_form_refuses_a_point_above_the_memory_budget(serial, monkeypatch):
    monkeypatch.setenv("CFL_UI_MEMORY_MB", "1")
    at = fill_form(sweeps_page(), "small-budget")
    [message] = [e for e in errors(at) if "Too large for this machine" in e]
    assert "of this sweep needs about" in message and "the limit for all jobs here is 1.0 MB" in message
    assert at.button(key="sweeps.start").disabled


def test_a_sweep_from_the_sweeps_page_is_its_browsers_to_stop_resume_and_delete(serial):
    a = fill_form(sweeps_page(), "mine", seeds=", ".join(map(str, range(12))), rounds="20")
    a.button(key="sweeps.start").click()
    ok(a.run())
    job = manager().sweeps.get("sweeps/mine")
    assert job is not None and job.owner == owner(a) and job.kind == "sweeps"
    wait_for(lambda: list((serial / "sweeps" / "mine").glob("*/sweep_point.json")))
    b = sweeps_page()  # another browser: not listed
    assert any("1 sweeps of other browsers are hidden" in c.value for c in b.caption)
    b = sweeps_page(query={"sweep": "sweeps/mine"})  # by its link: shown, read-only
    assert "sweeps/mine" in set(b.dataframe(key="sweeps.table").value["sweep"])
    for key in ("stop", "resume", "delete"):
        button = b.button(key=f"sweeps.act.{key}")
        assert button.disabled and "another browser" in button.help, key
    a = ok(a.run())
    assert not a.button(key="sweeps.act.stop").disabled
    a.button(key="sweeps.act.stop").click()
    ok(a.run())
    assert job.state == "stopped"
    finished = len(list((serial / "sweeps" / "mine").glob("*/sweep_point.json")))
    assert 0 < finished < 12
    resume = a.button(key="sweeps.act.resume")
    assert resume.label == f"Resume ({12 - finished} left)" and not resume.disabled
    resume.click()
    ok(a.run())
    again = manager().sweeps.get("sweeps/mine")
    assert again is not job and again.join(300) and again.state == "finished", again.error
    a = ok(a.run())
    assert any("12 of 12 finished" in m.value for m in a.markdown)
    a.button(key="sweeps.act.delete").click()
    ok(a.run())
    a.button(key="sweeps.act.yes").click()
    ok(a.run())
    assert not (serial / "sweeps" / "mine").exists()


def test_four_sweeps_started_at_once_from_the_page_wait_in_the_queue(serial, monkeypatch):
    monkeypatch.setenv("CFL_UI_MAX_JOBS", "1")
    at = sweeps_page()
    started = time.monotonic()
    for i in range(4):
        at = fill_form(at, f"burst-{i}", seeds="0, 1, 2", rounds="200" if i == 0 else "2")
        at.button(key="sweeps.start").click()
        ok(at.run())
    assert time.monotonic() - started < 60
    jobs = manager().sweeps.jobs(owner(at))
    assert len(jobs) == 4 and sum(j.state == "running" for j in jobs) == 1
    assert sorted(j.position for j in jobs if j.state == "queued") == [1, 2, 3]
    states = dict(zip(at.dataframe(key="sweeps.table").value["sweep"], at.dataframe(key="sweeps.table").value["state"]))
    assert sorted(states.values()) == ["queued", "queued", "queued", "running"], states
