"""Issue 14's walk-through fixes, each checked where it can be without a browser."""
from __future__ import annotations

import csv
import io
import time

import pytest

from cfl_core.config import ExperimentConfig
from cfl_ui.jobs import manager as M
from cfl_ui.jobs import snapshots as S

SMALL = dict(dataset="digits", partition="feature-skew", clusters=2, clients_per_cluster=2, samples_per_client=30,
             models=2, rounds=3, local_epochs=1)


@pytest.fixture
def manager(tmp_path):
    m = M.JobManager(tmp_path / "runs", max_running=2)
    yield m
    m.shutdown(10)


def compare_job(manager, algorithms):
    units = [S.UnitSpec(a, ExperimentConfig(**SMALL, algorithm=a), a) for a in algorithms]
    job = manager.submit(units, kind="compare", owner="me", schedule=S.LOCKSTEP)
    assert job.join(120)
    return manager.snapshot(job.id)


def test_compare_rounds_csv_holds_every_algorithms_rows(manager):
    from cfl_ui.charts.tables import rounds_csv

    snap = compare_job(manager, ["clove", "ifca", "fedavg"])
    text = rounds_csv(snap.units)
    assert "\r" not in text
    rows = list(csv.DictReader(io.StringIO(text)))
    per_algo = {a: [r for r in rows if r["algorithm"] == a] for a in ("clove", "ifca", "fedavg")}
    assert {a: len(v) for a, v in per_algo.items()} == {"clove": 3, "ifca": 3, "fedavg": 3}
    assert [r["round"] for r in per_algo["clove"]] == ["0", "1", "2"]  # the first algorithm's rows are there
    # every value of a row comes from its own run's record
    clove = snap.units[0].records
    assert float(per_algo["clove"][-1]["accuracy"]) == pytest.approx(clove[-1].accuracy)


def test_side_by_side_status_counts_each_runs_rounds_not_their_sum(manager):
    from cfl_ui.views.live_view import rounds_text

    snap = compare_job(manager, ["ifca", "clove"])
    assert rounds_text(snap.units) == "3 of 3 rounds each"
    assert rounds_text(snap.units[:1]) == "3 of 3 rounds"


def test_elapsed_time_leaves_out_paused_time(manager):
    job = manager.submit([S.UnitSpec("", ExperimentConfig(**SMALL, algorithm="clove"))], owner="me", start="step")
    deadline = time.time() + 60
    while time.time() < deadline and not (job.status == "paused" and job.snapshot().rounds_done == 1):
        time.sleep(0.02)
    assert job.status == "paused"
    time.sleep(1.5)
    paused = job.snapshot()
    assert paused.paused >= 1.4 and paused.elapsed < (time.time() - paused.started) - 1.4
    job.run()
    assert job.join(120)
    done = manager.snapshot(job.id)
    assert done.paused >= 1.4
    assert done.elapsed == pytest.approx(done.ended - done.started - done.paused)
    # reopened from disk, the pause is still left out
    manager.forget(job.id)
    from cfl_ui.jobs.store import load_job

    again = load_job(manager.root, job.id)
    assert again.paused == pytest.approx(done.paused, abs=1e-6)


# -- pages (AppTest) ------------------------------------------------------------------------------
from streamlit.testing.v1 import AppTest  # noqa: E402

from tests.test_ui_pages import APP, ok, runs  # noqa: E402,F401  (runs: the pages' runs-folder fixture)
from tests.helpers import html_texts  # noqa: E402


def run_preset(preset: str, values: dict, page: str | None = None, prefix: str = "pg"):
    from cfl_ui.form.session import manager

    at = AppTest.from_file(APP, default_timeout=90)
    ok(at.run())
    if page:
        ok(at.switch_page(page).run())
    at.selectbox(key=f"{prefix}.preset").set_value(preset)
    ok(at.run())
    for name, value in values.items():
        at.number_input(key=f"{prefix}.{name}").set_value(value)
    ok(at.run())
    at.button(key=f"{prefix}.run_btn").click()
    ok(at.run())
    job = manager().get(at.session_state[f"{prefix}.run"].split("/")[0])
    assert job.join(120)
    return ok(at.run())


def test_iid_control_says_one_cluster_found_instead_of_an_ari_score(runs):
    at = run_preset("No clusters (IID control)", {"rounds": 3, "clients_per_cluster": 2, "samples_per_client": 30})
    metrics = [(m.label, m.value) for m in at.metric]
    found = [v for label, v in metrics if label == "Clusters found"]
    assert found and (found[0] == "1 (correct)" or found[0].endswith("(truth: 1)")), metrics
    assert "ARI" not in [label for label, _ in metrics]
    assert not any(v == "never" for label, v in metrics if label.startswith("ARI"))


def test_linear_preset_reports_traffic_in_kilobytes(runs):
    at = run_preset("Mixture of linear regressions", {"rounds": 2, "clients_per_cluster": 2,
                                                      "samples_per_client": 30})
    metrics = {m.label: m.value for m in at.metric}
    assert "kB sent" in metrics and float(metrics["kB sent"]) > 0, metrics
    assert "MB sent" not in metrics


def test_identical_curves_stay_visible():
    from cfl_core.records import RoundRecord
    from cfl_ui.charts import figures as F

    def rec(r, acc):
        return RoundRecord(r, "train", [0, 1], [0, 0], None, [acc, acc], [0.1, 0.1], acc, acc, 0.0, 0.0, 1, 10, 10, 0.1)

    a = [rec(r, 0.5 + r / 10) for r in range(3)]
    b = [rec(r, 0.5 + r / 10) for r in range(3)]
    c = [rec(r, 0.4) for r in range(3)]
    fig = F.metric_figure([F.Series("FedAvg", tuple(a), "#111"), F.Series("IFCA", tuple(b), "#222"),
                           F.Series("CLoVE", tuple(c), "#333")], ["accuracy"])
    names = [t.name for t in fig.data]
    assert names == ["FedAvg", "IFCA (= FedAvg)", "CLoVE"]
    assert fig.data[1].line.dash == "dash" and fig.data[1].line.width > fig.data[0].line.width
    assert fig.data[2].line.dash in (None, "solid")


def test_embedding_range_of_identical_losses_is_readable():
    import numpy as np

    from cfl_ui.charts.embedding import Frame, _ranges

    pts = np.array([[0.5, 0.5], [0.5 + 1e-16, 0.5 - 1e-16]])
    frame = Frame(0, 0, np.arange(2), pts, pts, np.zeros(2, int), np.zeros(2, int))
    (lo, hi), _ = _ranges([frame], 2)
    assert hi - lo > 0.01


def test_runs_page_keeps_a_side_by_side_run_whole_and_delete_clears_the_selection(runs):
    from cfl_ui.jobs.manager import JobManager
    from cfl_ui.form.job_specs import playground_configs, playground_units

    at = AppTest.from_file(APP, default_timeout=90)
    ok(at.run())
    ok(at.switch_page("pages/runs.py").run())
    me = at.session_state["cfl.owner"]  # this browser's runs: only their owner may delete them
    other = JobManager(runs, switch_interval=None)
    base = ExperimentConfig(**{**SMALL, "algorithm": "ifca", "init": "same"}).to_dict()
    units, _ = playground_units(playground_configs(base, "clove"))
    pair = other.submit(units, kind="playground", owner=me)
    single = other.submit([S.UnitSpec("", ExperimentConfig(**SMALL, algorithm="clove"))], kind="playground",
                          owner=me)
    assert pair.join(120) and single.join(120)
    at.query_params.update({"run": pair.id})
    ok(at.switch_page("pages/runs.py").run())
    table = at.dataframe[0].value
    assert list(table["id"]).count(pair.id) == 1 and not any(i.startswith(pair.id + "/") for i in table["id"])
    assert table[table["id"] == pair.id]["algorithm"].iloc[0] == "ifca vs clove"
    assert len([m for m in at.metric if m.label == "ARI"]) == 2  # both algorithms, side by side
    header = next(h for h in html_texts(at) if "Every run saved in" in h)
    assert f"<code>{runs}</code>" in header and "`" not in header  # the folder as code, not literal backticks
    at.button(key="runs.delete").click()
    ok(at.run())
    at.button(key="runs.yes").click()
    ok(at.run())
    assert not (runs / pair.id).exists() and (runs / single.id).exists()
    assert at.session_state["runs.generation"] == 1  # a fresh table: no selection slides onto the other run
    assert any("Select a run" in i.value for i in at.info)


def test_the_umap_toggle_stays_once_the_assignment_froze():
    def script():
        from types import SimpleNamespace

        import streamlit as st

        from cfl_core.records import RoundRecord
        from cfl_ui.views.run_charts import method_picker

        def rec(r, measured):  # 4 models; after round 1 the assignment froze and nothing more was measured
            lm = [[0.1, 0.2, 0.3, 0.4]] * 2 if measured else None
            return RoundRecord(r, "train", [0, 1], [0, 1], lm, [1, 1], [0.1, 0.1], 1, 1, 1, 1, 2, 1, 1, 0.1)

        unit = SimpleNamespace(records=[rec(0, True), rec(1, True)] + [rec(r, False) for r in range(2, 8)])
        st.write(method_picker([unit], "m"))

    at = AppTest.from_function(script).run()
    assert not at.exception and [r.options for r in at.radio] == [["PCA", "UMAP"]]


def test_drilldown_gives_each_rounds_model_and_the_rules_reason_in_words(manager):
    from cfl_ui.views.drilldown import loss_figure, reasons

    snap = compare_job(manager, ["ifca", "clove"])
    ifca, clove = snap.units
    rows = reasons(ifca, 0)
    assert [r["round"] for r in rows] == [0, 1, 2]
    rec = ifca.records[1]
    row = rec.loss_matrix[rec.participants.index(0)]
    best = min(range(len(row)), key=lambda m: row[m])
    assert rows[1]["model"] == rec.assignments[0]
    assert (f"lowest loss was model {best} ({row[best]:.3g}" in rows[1]["why"] or "tied" in rows[1]["why"])
    assert rows[1]["own accuracy"] == pytest.approx(100 * rec.client_accuracy[0])
    crow = reasons(clove, 0)
    assert "random" in crow[0]["why"]  # CLoVE's round 0
    assert any("nearest centre was the group matched to model" in r["why"] for r in crow[1:])
    fig = loss_figure(clove, 0)
    assert [t.name for t in fig.data][-1] == "model it took" and len(fig.data) == 3  # 2 models + the rings


def test_drilldown_reasons_come_from_a_registration_per_algorithm(manager, monkeypatch):
    from cfl_ui.views import drilldown as D

    snap = compare_job(manager, ["ifca", "clove"])
    ifca = snap.units[0]
    assert {"ifca", "clove", "cfl", "fedavg", "oracle"} <= set(D.REASONS)
    monkeypatch.setitem(D.REASONS, "ifca", lambda unit, rec, client, model: f"mine r{rec.round} m{model}")
    rows = D.reasons(ifca, 0)
    assert [r["why"] for r in rows] == [f"mine r{r['round']} m{r['model']}" for r in rows]  # the registered one
    monkeypatch.delitem(D.REASONS, "ifca")
    assert all("records no per-client reason" in r["why"] for r in D.reasons(ifca, 0))  # none registered


def test_drilldown_panel_opens_for_a_picked_client(runs):
    at = run_preset("Rotated digits", {"rounds": 3, "clients_per_cluster": 2, "samples_per_client": 30})
    box = next(s for s in at.selectbox if s.label == "Client")
    box.set_value(3)
    ok(at.run())
    assert any("client 3" in m.value and "moved" in m.value for m in at.markdown)
    table = next(d.value for d in at.dataframe if "why" in d.value.columns)
    assert list(table["round"]) == [0, 1, 2] and table["why"].str.len().min() > 10


def _hides_the_sidebar(css: str) -> bool:
    """A rule whose selector list names the sidebar itself (not something inside it) with display: none."""
    for rule in css.split("}"):
        selectors, _, body = rule.replace("<style>", "").partition("{")
        if "display: none" in body and any(sel.strip() == '[data-testid="stSidebar"]'
                                           for sel in selectors.split("{")[-1].split(",")):
            return True
    return False


def test_presenter_mode_hides_the_sidebar_and_enlarges(runs):
    at = AppTest.from_file(APP, default_timeout=90)
    ok(at.run())
    toggle = at.toggle(key="cfl.present")
    assert toggle.value is False and not any(_hides_the_sidebar(h) for h in html_texts(at))
    toggle.set_value(True)
    ok(at.run())
    css = [h for h in html_texts(at) if _hides_the_sidebar(h)]
    # larger text by its font sizes, never a zoom of the page (plotly drew past its charts' boxes under one): the
    # charts are drawn larger by sizing their figures (tests/test_ui_present.py)
    assert css and "font-size" in css[0] and "zoom" not in css[0]
    ok(at.switch_page("pages/lessons.py").run())
    assert at.toggle(key="cfl.present").value is True  # it stays on from page to page
    linked = AppTest.from_file(APP, default_timeout=90)
    linked.query_params["present"] = "1"
    ok(linked.run())
    assert linked.toggle(key="cfl.present").value is True
