"""The job controller on its own: the button states as a plain function, and run / pause / step / stop / resume
driven through a minimal Streamlit script (AppTest) holding nothing but a form's state, one controller and its
buttons, with a second browser session beside the first."""
from __future__ import annotations

import threading
import time

import pytest
from streamlit.testing.v1 import AppTest

from cfl_core.experiment import Experiment
from cfl_ui.jobs import snapshots as S
from cfl_ui.form.controller import RESUME, button_states

SMALL = {"clusters": 2, "clients_per_cluster": 2, "samples_per_client": 30, "rounds": 4, "local_epochs": 1}


# -- the button states ------------------------------------------------------------------------
@pytest.mark.parametrize("status, blocked, same, restart, expected", [
    # status, form blocked, form = paused job, restart on change -> (label, run, pause, step, stop)
    (None, False, False, True, ("Run", True, False, True, False)),
    (None, True, False, True, ("Run", False, False, False, False)),
    (S.QUEUED, False, False, True, ("Run", False, True, False, True)),
    (S.RUNNING, False, False, False, ("Run", False, True, False, True)),
    (S.PAUSED, False, True, True, (RESUME, True, False, True, True)),
    (S.PAUSED, False, False, True, ("Run", True, False, True, True)),  # changed settings: a new job
    (S.PAUSED, True, False, True, ("Run", False, False, True, True)),  # ... that cannot run as it is
    (S.PAUSED, True, False, False, (RESUME, True, False, True, True)),  # batch pages resume the job as it was
    (S.FINISHED, False, False, True, ("Run", True, False, True, False)),
    (S.STOPPED, True, False, False, ("Run", False, False, False, False)),
])
def test_button_states(status, blocked, same, restart, expected):
    b = button_states(status, blocked=blocked, same_settings=same, restart_on_change=restart)
    assert (b.label, b.run, b.pause, b.step, b.stop) == expected
    assert b.resumes == (b.label == RESUME)


def test_the_run_label_is_the_pages_own_unless_it_resumes():
    assert button_states(None, blocked=False, same_settings=False, restart_on_change=False,
                         run_label="Run all").label == "Run all"
    assert button_states(S.PAUSED, blocked=False, same_settings=False, restart_on_change=False,
                         run_label="Run all").label == RESUME


# -- the controller in a session ------------------------------------------------------------------
def controller_script():
    """A page with one controller and nothing else: the form's state, the buttons, the flash message."""
    import streamlit as st

    from cfl_core.config import ExperimentConfig
    from cfl_ui.form import url_sync as urls
    from cfl_ui.form.controller import JobController
    from cfl_ui.form.panel import Panel
    from cfl_ui.jobs.snapshots import LOCKSTEP, UnitSpec

    def build(values):
        cfg = ExperimentConfig.from_dict(values)
        cfg.validate()
        return [cfg]

    ctl = JobController("t", "playground", build, lambda configs: ([UnitSpec("", configs[0], "CLoVE")], "CLoVE"),
                        schedule=LOCKSTEP, parallel=True, with_step=True, restart_on_change=True)
    ctl.attach(urls.sync_from_url("t"))
    call = st.session_state.pop("t.call", None)
    if call:  # a press that reaches the server whatever this page shows (a stale or forged page)
        getattr(ctl, call)()
    panel = Panel("t")
    panel.general_slot(st.sidebar)
    verdict = ctl.validate(panel)
    ctl.buttons(verdict)
    ctl.flash()
    st.markdown(f"shown: {ctl.ref} controllable: {ctl.job() is not None}")


@pytest.fixture
def runs(tmp_path, monkeypatch):
    monkeypatch.setenv("CFL_RUNS_DIR", str(tmp_path / "runs"))
    monkeypatch.setenv("CFL_UI_WARMUP", "0")
    return tmp_path / "runs"


def manager():
    from cfl_ui.form.session import manager as m

    return m()


def session(query: dict | None = None, **values) -> AppTest:
    """A fresh browser session on the controller's page, its form set to `values` (SMALL by default)."""
    at = AppTest.from_function(controller_script, default_timeout=60)
    at.query_params.update(query or {})
    at.run()
    for name, value in {**SMALL, **values}.items():
        at.session_state[f"t.{name}"] = value
    return ok(at.run())


def ok(at: AppTest) -> AppTest:
    assert not at.exception, [e.value for e in at.exception]
    return at


def press(at: AppTest, name: str) -> AppTest:
    at.button(key=f"t.{name}_btn").click()
    return ok(at.run())


def enabled(at: AppTest) -> set[str]:
    return {name for name in ("run", "pause", "step", "stop") if not at.button(key=f"t.{name}_btn").disabled}


def wait_for(predicate, timeout=60.0):
    deadline = time.time() + timeout
    while time.time() < deadline:
        if predicate():
            return True
        time.sleep(0.02)
    return False


def job_of(at: AppTest):
    return manager().get(at.session_state["t.run"])


def paused_after(job, rounds: int) -> bool:
    return wait_for(lambda: job.status == S.PAUSED and job.snapshot().rounds_done == rounds)


def test_step_then_resume_with_the_same_settings_finishes_the_same_job(runs):
    at = session()
    assert enabled(at) == {"run", "step"} and at.button(key="t.run_btn").label == "Run"
    job = job_of(press(at, "step"))
    assert paused_after(job, 1)
    ok(at.run())
    assert at.button(key="t.run_btn").label == RESUME and enabled(at) == {"run", "step", "stop"}
    press(at, "step")
    assert job_of(at) is job and paused_after(job, 2)  # Step while paused: one more round of the same job
    ok(at.run())
    press(at, "run")
    assert job_of(at) is job and job.join(60)
    snap = job.snapshot()
    assert snap.status == S.FINISHED and snap.rounds_done == 4
    ok(at.run())
    assert at.button(key="t.run_btn").label == "Run" and enabled(at) == {"run", "step"}


class GatedExperiment(Experiment):
    """Each round waits until the test opens the gate (to catch a job while it is running)."""

    gate = threading.Event()

    def step(self):
        assert self.gate.wait(30)
        return super().step()


def test_pause_a_running_job_then_stop_it(runs):
    at = session()
    m = manager()
    real = m.experiment_factory
    GatedExperiment.gate.clear()
    m.experiment_factory = GatedExperiment
    try:
        job = job_of(press(at, "run"))
        assert wait_for(lambda: job.status == S.RUNNING)
        ok(at.run())
        assert enabled(at) == {"pause", "stop"}
        press(at, "pause")
        GatedExperiment.gate.set()
        assert wait_for(lambda: job.status == S.PAUSED)
        done = job.snapshot().rounds_done
        assert 1 <= done < 4
        ok(at.run())
        assert at.button(key="t.run_btn").label == RESUME
        press(at, "stop")
        assert job.join(30)
    finally:
        GatedExperiment.gate.set()
        m.experiment_factory = real
    snap = job.snapshot()
    assert snap.status == S.STOPPED and snap.rounds_done == done
    assert snap.units[0].summary["status"] == "stopped"


def test_changed_settings_start_a_new_job_in_place_of_the_paused_one(runs):
    at = session()
    first = job_of(press(at, "step"))
    assert paused_after(first, 1)
    at.session_state["t.rounds"] = 3
    ok(at.run())
    assert at.button(key="t.run_btn").label == "Run"  # the form no longer describes the paused job
    second = job_of(press(at, "run"))
    assert second is not first and second.join(60) and first.join(30)
    assert first.snapshot().status == S.STOPPED and first.snapshot().rounds_done == 1
    assert second.snapshot().status == S.FINISHED and second.snapshot().units[0].config["rounds"] == 3


def test_a_refused_submit_is_flashed_and_submits_nothing(runs):
    at = session(rounds=100000, local_epochs=500)  # far beyond the time limit: the estimate refuses it
    assert at.button(key="t.run_btn").disabled and "Too large" in at.sidebar.error[0].value
    at = session()
    assert not at.button(key="t.run_btn").disabled
    at.session_state["t.rounds"] = 100000  # changed in the same rerun as the press: the press checks again
    at.session_state["t.local_epochs"] = 500
    press(at, "run")
    assert "t.run" not in at.session_state
    assert any("Too large for this machine" in e.value for e in at.main.error)
    assert manager().jobs() == []
    ok(at.run())
    assert not any("Too large for this machine" in e.value for e in at.main.error)  # said once


def test_a_second_browser_cannot_control_the_first_browsers_job(runs):
    first = session()
    job = job_of(press(first, "step"))
    assert paused_after(job, 1)
    other = session()
    other.session_state["t.run"] = job.id  # it knows the id, but never opened the job's link
    ok(other.run())
    assert any(f"shown: {job.id} controllable: False" in m.value for m in other.markdown)
    assert enabled(other) == {"run", "step"} and other.button(key="t.run_btn").label == "Run"
    other.session_state["t.call"] = "stop"  # a forged press: the controller checks again
    ok(other.run())
    time.sleep(0.3)
    assert job.status == S.PAUSED and job.snapshot().rounds_done == 1
    ok(first.run())
    assert "stop" in enabled(first)  # the owner still controls it
    linked = session(query={"run": job.id})  # a shared link is read access: the job is shown, not controlled
    assert any(f"shown: {job.id} controllable: False" in m.value for m in linked.markdown)
    assert enabled(linked) == {"run", "step"} and linked.button(key="t.run_btn").label == "Run"
    assert any("Read-only" in c.value and "another browser" in c.value for c in linked.sidebar.caption)
    linked.session_state["t.call"] = "stop"  # the link holder's forged Stop
    ok(linked.run())
    time.sleep(0.3)
    assert job.status == S.PAUSED
    press(first, "stop")
    assert job.join(30) and job.snapshot().status == S.STOPPED
