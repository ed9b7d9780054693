"""A running job's Export section (cfl_ui.views.export_view) in Streamlit's AppTest: nothing is serialized until its
files are asked for; then ordinary (not deferred) download buttons hold the rounds done by then, made again at the
next press. The browser side (chromium downloading while the job trains) is tests/test_e2e_dark_download.py."""
from __future__ import annotations

from streamlit.testing.v1 import AppTest


def _app():
    from types import SimpleNamespace

    import streamlit as st

    from cfl_ui.views import export_view as X
    from cfl_ui.views import run_charts as R
    from cfl_ui.form import session as S
    from cfl_ui.jobs.snapshots import RUNNING, UnitSnapshot
    from tests.test_ui_server_load import record

    calls = st.session_state.setdefault("calls", [])
    n = st.session_state["rounds"] = st.session_state.get("rounds", 2) + 1  # the job trains between reruns
    unit = UnitSnapshot(ref="job-x", name="", label="x", tags={}, config={"algorithm": "clove"}, status=RUNNING,
                        records=tuple(record(r) for r in range(n)), total_rounds=99, summary=None, meta={},
                        error=None, traceback=None, folder=None)
    real = (R.metrics_csv, R.rounds_jsonl, S.snapshot)
    R.metrics_csv = lambda records: calls.append(("csv", len(records))) or real[0](records)
    R.rounds_jsonl = lambda records: calls.append(("jsonl", len(records))) or real[1](records)
    S.snapshot = lambda ref: SimpleNamespace(live=True, id=ref, units=[unit])
    try:
        X.running_exports("job-x", lambda s: list(s.units), "pg")
    finally:
        R.metrics_csv, R.rounds_jsonl, S.snapshot = real


def _pressed(app, made: str, button: str) -> tuple:
    """The app run once (nothing made, no download), then its Export button pressed: (the test, the labels)."""
    at = AppTest.from_function(app, default_timeout=60).run()
    assert not at.exception, [e.value for e in at.exception]
    assert not at.get("download_button") and at.session_state[made] == []  # nothing made at a poll
    at.button(key=button).click().run()
    assert not at.exception, [e.value for e in at.exception]
    return at, {b.label for b in at.get("download_button")}


def test_a_running_jobs_files_are_made_when_asked_for_and_again_at_the_next_press():
    at, labels = _pressed(_app, "calls", "pg.export_now")
    assert {"Per-round metrics (CSV)", "Config (JSON)", "Rounds (JSON lines)"} <= labels
    assert at.session_state["calls"] == [("csv", 4), ("jsonl", 4)]  # made now, eagerly, of the 4 rounds so far
    assert any("Rounds 0–3, as of" in c.value for c in at.caption)
    at.button(key="pg.export_now").click().run()
    assert at.session_state["calls"][-2:] == [("csv", 5), ("jsonl", 5)]  # again, with the round since
    assert at.button(key="pg.export_now").label == "Make them again (rounds since)"


def _compare_exports_app():
    import streamlit as st

    from cfl_ui.views import compare_view as CV
    from cfl_ui.views import export_view as X
    from cfl_ui.views import live_view as LV
    from cfl_ui.form import session as S
    from cfl_ui.jobs.snapshots import RUNNING as RUN, UnitSnapshot as U
    from tests.test_ui_server_load import _job, record

    units = [U(ref=f"job-cmp/{a}", name=a, label=a, tags={}, config={"algorithm": a}, status=RUN,
               records=tuple(record(r) for r in range(3)), total_rounds=9, summary=None, meta={}, error=None,
               traceback=None, folder=None) for a in ("clove", "ifca")]
    snap = _job("job-cmp", RUN, tuple(units))
    made = st.session_state.setdefault("made", [])
    real = (S.snapshot, CV.rounds_csv)
    S.snapshot = lambda ref: snap
    CV.rounds_csv = lambda us: made.append(tuple(u.name for u in us)) or real[1](us)
    try:
        LV.live_fragment("job-cmp", CV.render, initial_status=RUN)
        X.running_exports("job-cmp", lambda s: list(s.units), "cmp.export", draw=CV.downloads)
    finally:
        S.snapshot, CV.rounds_csv = real


def test_a_running_comparisons_files_are_made_on_demand_and_hold_every_algorithm():
    at, labels = _pressed(_compare_exports_app, "made", "cmp.export.export_now")
    assert {"Results table (CSV)", "Per-round metrics (CSV)"} <= labels
    assert at.session_state["made"] == [("clove", "ifca")]  # one file of every algorithm's rounds, made now


def _ended_exports_app():
    import streamlit as st

    from cfl_ui.views import run_charts as R
    from cfl_ui.jobs.snapshots import FINISHED, UnitSnapshot
    from tests.test_ui_server_load import record

    calls = st.session_state.setdefault("calls", [])
    unit = UnitSnapshot(ref=f"ended-{st.session_state.get('job', 'a')}", name="", label="x", tags={},
                        config={"algorithm": "clove"}, status=FINISHED, records=tuple(record(r) for r in range(6)),
                        total_rounds=6, summary={"status": "finished"}, meta={"started_at": "t0"}, error=None,
                        traceback=None, folder=None)
    real = (R.metrics_csv, R.rounds_jsonl)
    R.metrics_csv = lambda records: calls.append("csv") or real[0](records)
    R.rounds_jsonl = lambda records: calls.append("jsonl") or real[1](records)
    try:
        R.exports_block([unit], "pg")
    finally:
        R.metrics_csv, R.rounds_jsonl = real


def test_an_ended_jobs_files_are_made_once_for_every_session_that_shows_them():
    """When a job ends, every session watching it draws its Export section at once: the files are serialized by
    the first, the others get the same text."""
    import uuid

    job = uuid.uuid4().hex  # a job no other test's session has drawn
    sessions = []
    for _ in range(3):
        at = AppTest.from_function(_ended_exports_app, default_timeout=60)
        at.session_state["job"] = job
        sessions.append(at.run())
        assert not at.exception, [e.value for e in at.exception]
    assert [at.session_state["calls"] for at in sessions] == [["csv", "jsonl"], [], []]
    files = [[b.proto.url for b in at.get("download_button")] for at in sessions]
    assert all(len(f) == 4 for f in files)  # CSV, config, JSON lines, summary in every session
