"""What keeps the server answering while browsers watch long running jobs (issue 15, item 6; the figures are in
benchmarks/SERVER_LOAD.md, measured by benchmarks/server_load.py, never timed here): long histories drawn capped,
a slow figure build spacing out the next frame, exports made on demand while a job runs, the Playground's preview
built once for every session, and training workers at a lower CPU priority than the server."""
from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest
from streamlit.testing.v1 import AppTest

from cfl_ui.charts import figures as F
from cfl_ui.views import live_view as L
from cfl_ui.jobs.snapshots import RUNNING, UnitSnapshot
from tests.helpers import html_texts

ROOT = Path(__file__).resolve().parent.parent


class Rec(int):
    round = property(int)


def unit(n, ref="job-load-test"):
    return UnitSnapshot(ref=ref, name="", label="x", tags={}, config={}, status=RUNNING,
                        records=tuple(map(Rec, range(n))), total_rounds=5000, summary=None, meta={}, error=None,
                        traceback=None, folder="/f")


# -- long histories ------------------------------------------------------------------------------------------
@pytest.mark.parametrize("n", [F.MAX_ROUND_COLUMNS + 1, 1001, 2000, 4999])
def test_a_long_history_is_decimated_to_the_cap_keeping_the_first_and_the_last_round(n):
    kept = F.decimate(list(range(n)))
    assert len(kept) <= F.MAX_ROUND_COLUMNS and len(kept) >= F.MAX_ROUND_COLUMNS - 1
    assert kept[0] == 0 and kept[-1] == n - 1
    assert kept == sorted(set(kept))  # in order, no round twice
    gaps = {b - a for a, b in zip(kept, kept[1:])}
    assert max(gaps) - min(gaps) <= 1  # evenly spread over the whole run, not only its end
    assert "the exports hold every round" in F.decimated_note(n) and str(n) in F.decimated_note(n)


def test_a_short_history_is_drawn_whole_and_says_nothing():
    rounds = list(range(F.MAX_ROUND_COLUMNS))
    assert F.decimate(rounds) == rounds and F.decimate([]) == []
    assert F.decimated_note(len(rounds)) == ""


def record(r, clients=(0, 1, 2, 3, 4, 5), accuracy=0.5):
    from cfl_core.records import RoundRecord

    clients = list(clients)
    return RoundRecord(round=r, phase="train", participants=clients, assignments=[(c + r) % 3 for c in clients],
                       loss_matrix=None, client_accuracy=[accuracy] * len(clients), client_loss=[1.0] * len(clients),
                       accuracy=accuracy, weighted_accuracy=accuracy, ari=0.1, nmi=0.1, models_in_use=3,
                       bytes_down=10, bytes_up=10, seconds=0.01, true_clusters=[c % 2 for c in clients])


def _records(n):
    return [record(r) for r in range(n)]


def test_the_long_runs_heatmap_and_area_chart_draw_at_most_the_cap_of_rounds_first_and_last_among_them():
    records = _records(3 * F.MAX_ROUND_COLUMNS)
    heat = F.assignment_heatmap(records)
    xs = list(heat.data[1].x)
    assert len(xs) <= F.MAX_ROUND_COLUMNS and xs[0] == 0 and xs[-1] == len(records) - 1
    assert len(heat.data[1].z[0]) == len(xs)
    area = F.clients_per_model(records)
    assert all(len(t.x) <= F.MAX_ROUND_COLUMNS and t.x[-1] == len(records) - 1 for t in area.data)
    short = _records(20)
    assert list(F.assignment_heatmap(short).data[1].x) == list(range(20))  # a short run: every round


# -- frames ---------------------------------------------------------------------------------------------------
def test_a_slow_build_spaces_out_the_units_next_frame_up_to_a_limit():
    u = unit(5, ref="job-load-slow")
    drawn, started = L.frame(u, now=500.0)
    assert started and drawn.rounds_done == 5
    assert L.frame(unit(6, ref="job-load-slow"), now=500.1) == (drawn, False)  # another session: same frame
    L.built(u, 2.0)  # the figures took 2 s to build: the next frame waits 2 / BUILD_SHARE
    assert L.frame_seconds(u) == pytest.approx(2.0 / L.BUILD_SHARE)
    assert L.frame(unit(9, ref="job-load-slow"), now=500.0 + 1.5 * L.POLL_SECONDS)[0].rounds_done == 5
    later, started = L.frame(unit(9, ref="job-load-slow"), now=500.0 + 2.0 / L.BUILD_SHARE)
    assert started and later.rounds_done == 9
    L.built(u, 1000.0)
    assert L.frame_seconds(u) == L.MAX_FRAME_SECONDS  # never longer than the limit
    L.built(u, 0.001)
    assert L.frame_seconds(u) == L.POLL_SECONDS  # a quick build: one frame a poll interval again
    assert L.steady(unit(12, ref="job-load-slow"), now=500.0 + 2.0 / L.BUILD_SHARE + L.POLL_SECONDS).rounds_done == 12


# -- exports --------------------------------------------------------------------------------------------------
def _job(ref, status, units):
    import time

    from cfl_ui.jobs.snapshots import JobSnapshot

    return JobSnapshot(id=ref, kind="playground", title="x", status=status, schedule="lockstep", units=units,
                       queue_position=None, error=None, traceback=None, created=time.time(), started=time.time(),
                       ended=None, version=1)


def _exports_app(live: bool, ref: str = "job-exports"):
    """The Playground's live view of one job (running, or ended) with the file builders counted."""
    import streamlit as st

    from cfl_ui.views import live_view as LV
    from cfl_ui.views import run_charts as R
    from cfl_ui.form import session as S
    from cfl_ui.jobs.snapshots import RUNNING as RUN, FINISHED, UnitSnapshot as U

    calls = st.session_state.setdefault("calls", [])
    real = (R.metrics_csv, R.rounds_jsonl, S.snapshot)
    R.metrics_csv = lambda records: calls.append("csv") or real[0](records)
    R.rounds_jsonl = lambda records: calls.append("jsonl") or real[1](records)
    try:
        from tests.test_ui_server_load import _job, record

        recs = tuple(record(r) for r in range(3))
        status = RUN if live else FINISHED
        u = U(ref=ref, name="", label="x", tags={}, config={"algorithm": "clove"},
              status=status, records=recs, total_rounds=9, summary=None, meta={}, error=None,
              traceback=None, folder=None)
        snap = _job(ref, status, (u,))
        S.snapshot = lambda ref: snap
        LV.live_view(ref, None, "ex", initial_status=status)
    finally:
        R.metrics_csv, R.rounds_jsonl, S.snapshot = real


@pytest.mark.parametrize("live", [True, False])
def test_exports_of_a_running_job_are_made_on_demand_not_at_every_poll(live):
    import uuid

    ref = f"job-exports-{uuid.uuid4().hex}"  # files no other test's session has made (they are shared per run)
    at = AppTest.from_function(_exports_app, args=(live, ref), default_timeout=60).run()
    assert not at.exception, [e.value for e in at.exception]
    labels = {b.label for b in at.get("download_button")}
    at.run()
    if live:  # nothing serialized by a poll: a button makes the files (tests/test_ui_export_view.py)
        assert not labels and at.session_state["calls"] == []
        assert at.button(key="ex.export_now").label == "Make the files of the rounds so far"
    else:  # an ended run's files are made with the page, once: the page's next run (or session) reuses them
        assert {"Per-round metrics (CSV)", "Config (JSON)", "Rounds (JSON lines)"} <= labels
        assert at.session_state["calls"] == ["csv", "jsonl"]
        assert {b.label for b in at.get("download_button")} == labels


def test_the_export_files_hold_exactly_the_records_drawn():
    from cfl_ui.views import run_charts as R
    from cfl_ui.charts.tables import metrics_csv

    recs = tuple(record(r, accuracy=r / 10) for r in range(4))
    assert R.rounds_jsonl(recs).splitlines() == [r.to_json() for r in recs]
    assert R.rounds_jsonl(()) == ""
    assert metrics_csv(recs).count("\n") >= 5  # header + one line a round


# -- the Playground's start --------------------------------------------------------------------------------------
def test_the_playgrounds_preview_is_built_once_for_every_session(tmp_path, monkeypatch):
    from cfl_ui.views import partition_charts as PC

    monkeypatch.setenv("CFL_RUNS_DIR", str(tmp_path / "runs"))
    monkeypatch.setenv("CFL_UI_WARMUP", "0")
    built = []
    real = PC.image_grid_html
    monkeypatch.setattr(PC, "image_grid_html", lambda *a, **k: built.append(1) or real(*a, **k))
    query = {"dataset": "synthetic-images", "clusters": "2", "clients_per_cluster": "2", "partition": "label-skew"}
    for _ in range(2):  # two browsers opening the same setting
        at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=90)
        at.query_params.update(query)
        at.run()
        assert not at.exception, [e.value for e in at.exception]
        images = [h for h in html_texts(at) if "cfl-preview" in h]
        # one block of images, each with its caption, a row per cluster
        assert len(images) == 1 and images[0].count("<img ") == images[0].count("<figcaption") >= 4
        assert "cluster 0" in images[0] and "cluster 1" in images[0]
        assert not at.get("plotly_chart")  # no plotly chart (nor plotly.js) on a fresh Playground
    assert built == [1]


def test_the_preview_shows_every_image_with_its_caption_and_row_title():
    from cfl_ui.views import partition_charts as PC

    rows = [("cluster 0", np.zeros((3, 1, 8, 8)), ["1", "2", "5→3"]),
            ("cluster 1", np.ones((2, 3, 4, 4)), ["a<b", "c"])]
    text = PC.image_grid_html(rows)
    assert text.count("<img ") == 5 and text.count("data:image/png;base64,") == 5
    assert "cluster 0" in text and "cluster 1" in text and "5→3" in text
    assert "a&lt;b" in text and "a<b" not in text  # captions are text, never markup
    assert PC.cluster_color(1) in text
    # the cluster's colour marks a bar, never the title's text (orange on white reads 2.6:1, blue on the dark page 4.0:1)
    assert f"border-left:4px solid {PC.cluster_color(1)}" in text and "color:" not in text


# -- training workers ---------------------------------------------------------------------------------------------
def test_a_training_worker_runs_at_a_lower_cpu_priority_than_the_server(monkeypatch):
    from cfl_ui.jobs.worker import NICE_ENV, Worker

    monkeypatch.delenv(NICE_ENV, raising=False)
    worker = Worker()
    try:
        assert worker.call("keep", []) == ()  # it has started (the priority is set first thing)
        mine = os.getpriority(os.PRIO_PROCESS, 0)
        assert os.getpriority(os.PRIO_PROCESS, worker.pid) == min(19, mine + 10)
    finally:
        worker.close()
