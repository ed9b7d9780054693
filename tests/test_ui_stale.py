"""No stale picture (issue 34, items 8 and 9): after a run, a changed setting (any that changes what Run would
train) takes its charts away, so the page never shows one run under a sidebar that says another; and "Ready…
press Run" never shows while Run is disabled."""
from __future__ import annotations

import time

from streamlit.testing.v1 import AppTest

from tests.helpers import shown
from tests.test_ui_pages import APP, app, manager, ok, runs  # noqa: F401  (runs: the pages' runs-folder fixture)

SMALL = {"clusters": 2, "clients_per_cluster": 2, "samples_per_client": 30, "rounds": 2, "local_epochs": 1}


def ready_notes(at) -> list[str]:
    return [shown(i.value) for i in at.info if "Ready." in shown(i.value)]


def small_playground() -> AppTest:
    at = AppTest.from_file(APP, default_timeout=120)
    ok(at.run())
    for name, value in SMALL.items():
        at.number_input(key=f"pg.{name}").set_value(value)
    return ok(at.run())


def job_of(at):
    return manager().get(at.session_state["pg.run"].split("/")[0])


def test_an_ended_runs_charts_go_when_the_algorithm_or_any_setting_changes(runs):
    at = small_playground()
    at.button(key="pg.run_btn").click()
    ok(at.run())
    ref = at.session_state["pg.run"]
    assert job_of(at).join(120)
    for _ in range(2):  # redrawn as it is, the finished run stays on screen
        ok(at.run())
        assert at.session_state["pg.run"] == ref and len(at.get("plotly_chart")) >= 5 and not ready_notes(at)
    at.selectbox(key="pg.algorithm").set_value("ifca")
    ok(at.run())
    assert at.session_state["pg.run"] is None and len(at.get("plotly_chart")) == 0
    assert not [m for m in at.markdown if "How CLoVE sees the clients" in m.value]
    assert len(ready_notes(at)) == 1 and "IFCA" in ready_notes(at)[0]  # the page says what Run would train now
    assert (runs / ref).exists()  # the run itself stays saved (Runs)
    # a training setting, not only the data: after a run, a new number of rounds is another run too
    at.button(key="pg.run_btn").click()
    ok(at.run())
    assert job_of(at).join(120)
    ok(at.run())
    assert len(at.get("plotly_chart")) >= 5
    at.number_input(key="pg.rounds").set_value(3)
    ok(at.run())
    assert at.session_state["pg.run"] is None and "3 rounds" in ready_notes(at)[0]


def test_a_setting_changed_while_the_run_was_paused_takes_its_charts_once_it_ended(runs):
    at = small_playground()
    at.button(key="pg.step_btn").click()  # one round, then paused: a live run stays on screen while paused
    ok(at.run())
    job = job_of(at)
    deadline = time.time() + 120
    while job.status != "paused" and time.time() < deadline:
        time.sleep(0.1)
    assert job.status == "paused"
    ok(at.run())
    at.selectbox(key="pg.algorithm").set_value("ifca")
    ok(at.run())
    assert at.session_state["pg.run"] == job.id and len(at.get("plotly_chart")) >= 1  # still its own, paused
    at.button(key="pg.stop_btn").click()
    ok(at.run())
    assert job.join(120)
    ok(at.run())
    assert at.session_state["pg.run"] is None and "IFCA" in ready_notes(at)[0]


def test_ready_never_shows_while_run_is_disabled(runs, monkeypatch):
    import torch

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    at = ok(app(None, {"device": "cuda"}))
    assert at.button(key="pg.run_btn").disabled and at.button(key="pg.main.run_btn").disabled
    assert not ready_notes(at) and not [i for i in at.info if "Press **Run**" in i.value]
    told = [shown(w.value) for w in at.warning if "Not ready" in shown(w.value)]
    assert told and "no CUDA device is visible" in told[0]  # the reason itself, in the main area
    at.selectbox(key="pg.device").set_value("cpu")
    ok(at.run())
    assert not at.button(key="pg.run_btn").disabled and len(ready_notes(at)) == 1
    # Compare: the same, in place of "then press Run all"
    cmp = ok(app("pages/compare.py", {"device": "cuda"}))
    assert cmp.button(key="cmp.run_btn").disabled
    assert not [i for i in cmp.info if "press **Run all**" in i.value]
    assert [w for w in cmp.warning if "Not ready" in shown(w.value)]
