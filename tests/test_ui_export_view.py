"""A running job's Export section (cfl_ui.export_view) in Streamlit's AppTest: nothing is serialized until its
files are asked for; then ordinary (not deferred) download buttons hold the rounds done by then, made again at the
next press. The browser side (chromium downloading while the job trains) is tests/test_e2e_dark_download.py."""
from __future__ import annotations

from streamlit.testing.v1 import AppTest


def _app():
    from types import SimpleNamespace

    import streamlit as st

    from cfl_ui import export_view as X
    from cfl_ui import run_charts as R
    from cfl_ui import session as S
    from cfl_ui.snapshots import RUNNING, UnitSnapshot
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


def test_a_running_jobs_files_are_made_when_asked_for_and_again_at_the_next_press():
    at = AppTest.from_function(_app, default_timeout=60).run()
    assert not at.exception, [e.value for e in at.exception]
    assert not at.get("download_button") and at.session_state["calls"] == []  # nothing made at a poll
    at.button(key="pg.export_now").click().run()
    assert not at.exception, [e.value for e in at.exception]
    labels = {b.label for b in at.get("download_button")}
    assert {"Per-round metrics (CSV)", "Config (JSON)", "Rounds (JSON lines)"} <= labels
    assert at.session_state["calls"] == [("csv", 4), ("jsonl", 4)]  # made now, eagerly, of the 4 rounds so far
    assert any("Rounds 0–3, as of" in c.value for c in at.caption)
    at.button(key="pg.export_now").click().run()
    assert at.session_state["calls"][-2:] == [("csv", 5), ("jsonl", 5)]  # again, with the round since
    assert at.button(key="pg.export_now").label == "Make them again (rounds since)"
