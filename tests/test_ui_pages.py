"""Every dashboard page through Streamlit's AppTest: loads, presets fill the controls, a bad config shows its
message by the control with Run disabled, and a small run (awaited) produces the charts."""
from __future__ import annotations

import json
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from cfl_core.config import ExperimentConfig
from cfl_core.experiment import Experiment
from cfl_ui.form.panel import section_key
from tests.helpers import html_texts, open_sections, runs, shown  # noqa: F401  (runs: the runs-folder fixture)

APP = str(Path(__file__).resolve().parent.parent / "app.py")
SMALL = {"clusters": 2, "clients_per_cluster": 2, "samples_per_client": 30, "rounds": 3, "local_epochs": 1}


def manager():
    from cfl_ui.form.session import manager as m

    return m()


def app(page: str | None = None, query: dict | None = None) -> AppTest:
    at = AppTest.from_file(APP, default_timeout=90)
    if page is None:
        at.query_params.update(query or {})
        at.run()
        return at
    at.run()
    at.query_params.clear()  # a real browser's navigation starts the next page without the last one's URL
    at.query_params.update(query or {})
    return at.switch_page(page).run()


def ok(at: AppTest) -> AppTest:
    assert not at.exception, [e.value for e in at.exception]
    return at


def charts(at: AppTest) -> int:
    return len(at.get("plotly_chart"))


def set_values(at: AppTest, prefix: str, values: dict) -> AppTest:
    for name, value in values.items():
        at.number_input(key=f"{prefix}.{name}").set_value(value)
    return ok(at.run())


def open_link_box(at: AppTest) -> AppTest:
    """Open the sidebar's "Link to this page" (its content is drawn only while open)."""
    from cfl_ui.form.url_sync import LINK_OPEN

    at.session_state[LINK_OPEN] = True
    return ok(at.run())


def wait_job(at: AppTest, key: str, timeout: float = 120) -> None:
    ref = at.session_state[key]
    job = manager().get(ref.split("/")[0])
    assert job is not None and job.join(timeout)
    ok(at.run())


def wait_sweeps(timeout: float = 180) -> None:
    for job in manager().sweeps.jobs():
        assert job.join(timeout), job.folder
        assert job.error is None, job.error


def errors(at: AppTest) -> list[str]:
    return [shown(e.value) for e in at.error]


# -- Playground ---------------------------------------------------------------------------------
def test_playground_loads_with_the_default_preset(runs):
    at = ok(app())
    assert at.selectbox(key="pg.preset").value == "Rotated digits"
    assert at.selectbox(key="pg.dataset").value == "digits"
    assert at.selectbox(key="pg.algorithm").value == "clove"
    assert not at.button(key="pg.run_btn").disabled
    assert at.button(key="pg.pause_btn").disabled and at.button(key="pg.stop_btn").disabled
    assert charts(at) == 0  # no plotly chart before a run: the clients' sample images are HTML
    assert any("cfl-preview" in h and "<img " in h for h in html_texts(at))
    assert any("Estimate:" in c.value for c in at.caption)
    assert at.query_params["dataset"] == "digits" and at.query_params["algorithm"] == "clove"


def test_playground_presets_fill_every_control(runs):
    at = ok(app())
    at.selectbox(key="pg.preset").set_value("IFCA collapses, CLoVE recovers")
    ok(at.run())
    assert at.selectbox(key="pg.algorithm").value == "ifca"
    assert at.selectbox(key="pg.vs").value == "clove"
    assert at.selectbox(key="pg.init").value == "same"
    assert at.selectbox(key="pg.partition").value == "feature-skew"
    at.selectbox(key="pg.preset").set_value("Label swaps (concept shift)")
    ok(at.run())
    assert at.selectbox(key="pg.partition").value == "concept-shift"
    assert at.selectbox(key="pg.vs").value == "fedavg" and at.selectbox(key="pg.init").value == "different"
    at.selectbox(key="pg.preset").set_value("Label skew")
    ok(at.run())
    assert at.number_input(key="pg.samples_per_client").value == 50


def test_playground_bad_config_shows_its_message_by_the_control_and_disables_run(runs):
    at = ok(app())
    set_values(at, "pg", {"samples_per_client": 100000})
    assert any("samples_per_client=100000 is not allowed" in e for e in errors(at))
    assert at.button(key="pg.run_btn").disabled and at.button(key="pg.step_btn").disabled
    set_values(at, "pg", {"samples_per_client": 60, "clusters": 0})
    assert any(e.startswith("clusters=0 is not allowed") for e in errors(at))
    set_values(at, "pg", {"clusters": 4})
    at.number_input(key="pg.participation").set_value(1.5)
    ok(at.run())
    assert any("participation=1.5" in e for e in errors(at)) and at.button(key="pg.run_btn").disabled
    at.number_input(key="pg.participation").set_value(1.0)
    ok(at.run())
    assert not errors(at) and not at.button(key="pg.run_btn").disabled


def test_closed_sidebar_sections_draw_no_widgets_and_keep_their_values(runs):
    """"More settings" and the algorithm's options are drawn only while open; closing them loses nothing."""
    from cfl_ui.form.controls import values

    at = ok(app())
    keys = {w.key for w in [*at.number_input, *at.selectbox, *at.checkbox, *at.text_input]}
    assert "pg.batch_size" not in keys and "pg.opt.clove.stable_rounds" not in keys  # closed at first
    open_sections(at, "pg", "more", "options.clove")
    at.number_input(key="pg.batch_size").set_value(20)
    at.number_input(key="pg.opt.clove.stable_rounds").set_value(7)
    ok(at.run())
    for section in ("more", "options.clove"):
        at.session_state[section_key("pg", section)] = False
    ok(at.run())
    assert "pg.batch_size" not in {w.key for w in at.number_input}  # closed again
    ok(at.run())  # a later rerun (another widget, a fragment) must not drop them either
    assert at.session_state["pg.batch_size"] == 20 and at.session_state["pg.opt.clove.stable_rounds"] == 7
    assert at.query_params["batch_size"] == "20"  # and the link still carries it
    open_sections(at, "pg", "more", "options.clove")
    assert at.number_input(key="pg.batch_size").value == 20
    assert at.number_input(key="pg.opt.clove.stable_rounds").value == 7


def test_a_message_about_a_setting_in_a_closed_section_shows_under_it(runs):
    at = ok(app())
    at.session_state["pg.momentum"] = 5.0  # e.g. from an old session; More settings is closed
    ok(at.run())
    sidebar = list(at.sidebar.children.values())
    where = next(i for i, e in enumerate(sidebar) if getattr(e, "label", "") == "More settings")
    assert shown(sidebar[where + 1].value).startswith("momentum=5"), errors(at)  # right under the expander
    assert at.button(key="pg.run_btn").disabled
    assert "pg.momentum" not in {w.key for w in at.number_input}


def test_playground_refuses_requests_too_large_with_the_estimate(runs):
    at = ok(app())
    set_values(at, "pg", {"rounds": 100000, "local_epochs": 500})
    assert any("Too large for this machine" in e and "the limit here is" in e for e in errors(at))
    assert at.button(key="pg.run_btn").disabled


def test_a_run_above_the_servers_memory_budget_is_refused_with_a_message_not_a_traceback(runs):
    """The form's estimate passes, the server's budget for all jobs (CFL_UI_MEMORY_MB) does not: one message."""
    from cfl_ui.form.session import manager

    at = ok(app())
    budget = manager().scheduler.memory_limit
    manager().scheduler.memory_limit = 1  # a byte: any job is above it
    try:
        at.button(key="pg.run_btn").click()
        ok(at.run())
    finally:
        manager().scheduler.memory_limit = budget
    assert any("Too large for this machine" in e and "the limit for all jobs here" in e for e in errors(at)), errors(at)
    assert not at.exception


def test_missing_data_set_is_disabled_with_its_how_to(runs, monkeypatch):
    import cfl_core.data as data
    from cfl_ui.form import controls

    real = data.source_status

    def fake(data_dir=None):
        return [s if s.name != "fashion-mnist" else
                type(s)(s.name, False, s.description, "put the IDX files in ./data/fashion-mnist", None)
                for s in real(data_dir)]

    monkeypatch.setattr(data, "source_status", fake)
    controls.source_status.clear()
    try:
        at = ok(app())
        at.selectbox(key="pg.dataset").set_value("fashion-mnist")
        ok(at.run())
        assert any("not installed here" in w.value and "./data/fashion-mnist" in w.value for w in at.warning)
        assert at.button(key="pg.run_btn").disabled
    finally:
        controls.source_status.clear()


def test_playground_small_run_produces_the_charts_and_the_link(runs):
    at = ok(app())
    set_values(at, "pg", SMALL)
    at.button(key="pg.run_btn").click()
    ok(at.run())
    ref = at.session_state["pg.run"]
    assert ref and at.query_params["run"] == ref
    wait_job(at, "pg.run")
    assert charts(at) >= 5  # embedding, assignments, clients per model, accuracy, ARI (+ CLoVE's extras)
    metrics = {m.label: m.value for m in at.metric}
    assert metrics["ARI"] not in ("", "—") and metrics["Device"] in ("cpu", "cuda")
    assert any("finished" in m.value and "3 of 3 rounds" in m.value for m in at.markdown)
    assert (runs / ref / "summary.json").exists()
    assert at.button(key="pg.stop_btn").disabled and not at.button(key="pg.run_btn").disabled
    assert not at.code  # the link is drawn only once its expander is opened
    link = next(c.value for c in open_link_box(at).code if "run=" in c.value)
    assert f"run={ref}" in link and "dataset=digits" in link


def test_side_by_side_signature_preset_runs_both_on_identical_clients(runs):
    at = ok(app())
    at.selectbox(key="pg.preset").set_value("IFCA collapses, CLoVE recovers")
    ok(at.run())
    set_values(at, "pg", {"rounds": 3, "clients_per_cluster": 3, "samples_per_client": 40})
    at.button(key="pg.run_btn").click()
    ok(at.run())
    wait_job(at, "pg.run")
    snap = manager().snapshot(at.session_state["pg.run"])
    ifca, clove = snap.units
    assert ifca.algorithm == "ifca" and clove.algorithm == "clove"
    assert ifca.records[-1].models_in_use == 1 and clove.records[-1].ari == pytest.approx(1.0)
    aris = [m.value for m in at.metric if m.label == "ARI"]
    assert aris == ["0.00", "1.00"]
    assert charts(at) >= 8


def test_step_pause_and_stop(runs):
    at = ok(app())
    set_values(at, "pg", {**SMALL, "rounds": 5})
    at.button(key="pg.step_btn").click()
    ok(at.run())
    job = manager().get(at.session_state["pg.run"])
    import time

    deadline = time.time() + 60
    while time.time() < deadline and not (job.status == "paused" and job.snapshot().rounds_done == 1):
        time.sleep(0.05)
    assert job.status == "paused" and job.snapshot().rounds_done == 1
    ok(at.run())
    assert not at.button(key="pg.stop_btn").disabled and at.button(key="pg.pause_btn").disabled
    assert at.button(key="pg.run_btn").label == "Resume"
    at.button(key="pg.stop_btn").click()
    ok(at.run())
    assert job.join(30) and job.snapshot().status == "stopped"
    ok(at.run())
    assert any("stopped" in m.value for m in at.markdown)


def test_worker_error_is_shown_with_details(runs):
    at = ok(app())
    set_values(at, "pg", SMALL)

    class Broken(Experiment):
        def step(self):
            raise ValueError("the data went missing")

    m = manager()
    real = m.experiment_factory
    m.experiment_factory = Broken
    try:
        at.button(key="pg.run_btn").click()
        ok(at.run())
        wait_job(at, "pg.run")
    finally:
        m.experiment_factory = real
    assert any("The run failed" in e and "ValueError: the data went missing" in e for e in errors(at))
    assert any(e.label.startswith("Details") for e in at.expander)


def test_link_reattaches_in_another_session_and_old_runs_reopen_from_disk(runs):
    from cfl_ui.jobs.manager import JobManager
    from cfl_ui.jobs.snapshots import UnitSpec

    other = JobManager(runs, switch_interval=None)  # a run made by another server process
    job = other.submit([UnitSpec("", ExperimentConfig(**SMALL, models=2))], owner="someone-else")
    assert job.join(120)
    at = ok(app(query={"run": job.id}))
    assert at.session_state["pg.run"] == job.id
    assert at.number_input(key="pg.clusters").value == 2  # the run's settings fill the controls
    assert charts(at) >= 5
    assert any("Opened from disk" in c.value for c in at.caption)
    gone = ok(app(query={"run": "20990101-000000-clove-ffffffffffffffff", "clusters": "3"}))
    assert any("was not found" in w.value for w in gone.warning)
    assert gone.number_input(key="pg.clusters").value == 3


# -- Compare --------------------------------------------------------------------------------------
def test_compare_page(runs):
    at = ok(app("pages/compare.py"))
    assert at.multiselect(key="cmp.algos").value == ["clove", "ifca", "fedavg", "oracle"]
    at.selectbox(key="cmp.preset").set_value("Label swaps (concept shift)")
    ok(at.run())
    assert at.selectbox(key="cmp.partition").value == "concept-shift"
    at.multiselect(key="cmp.algos").set_value(["clove"])
    ok(at.run())
    assert any("at least two algorithms" in e for e in errors(at)) and at.button(key="cmp.run_btn").disabled
    at.multiselect(key="cmp.algos").set_value(["clove", "fedavg"])
    set_values(at, "cmp", SMALL)
    assert not at.button(key="cmp.run_btn").disabled
    at.button(key="cmp.run_btn").click()
    ok(at.run())
    wait_job(at, "cmp.run")
    table = at.dataframe[0].value
    assert list(table["algorithm"]) == ["CLoVE", "FedAvg"]
    assert charts(at) >= 6  # accuracy, ARI, traffic, loss, one heatmap per algorithm
    assert {b.label for b in at.get("download_button")} >= {"Results table (CSV)", "Per-round metrics (CSV)"}
    assert at.query_params["algos"] == "clove,fedavg"


# -- IFCA initialisation ----------------------------------------------------------------------------
def test_ifca_initialisation_page(runs):
    at = ok(app("pages/ifca_init.py"))
    assert at.number_input(key="ifc.seeds").value == 10 and at.number_input(key="ifc.rounds").value == 10
    assert at.multiselect(key="ifc.algos").value == ["ifca", "clove"]
    at.selectbox(key="ifc.preset").set_value("Label skew")
    ok(at.run())
    assert at.selectbox(key="ifc.partition").value == "label-skew-1"
    at.number_input(key="ifc.seeds").set_value(0)
    ok(at.run())
    assert any("seeds=0 is not allowed" in e for e in errors(at)) and at.button(key="ifc.run_btn").disabled
    at.selectbox(key="ifc.preset").set_value("IFCA collapses, CLoVE recovers")
    ok(at.run())
    at.number_input(key="ifc.seeds").set_value(2)
    at.multiselect(key="ifc.modes").set_value(["same"])
    set_values(at, "ifc", {"rounds": 2, "clients_per_cluster": 3, "samples_per_client": 40})
    at.button(key="ifc.run_btn").click()
    ok(at.run())
    wait_sweeps()  # the page's runs are a sweep, driven by the server in the background
    ok(at.run())
    metrics = {m.label: m.value for m in at.metric}
    assert metrics["IFCA · same"] == "0/2" and metrics["CLoVE · same"] == "2/2"
    assert charts(at) == 2
    [table] = [m.value for m in at.markdown if m.value.startswith("| seed |")]
    links = [line.rsplit("|", 2)[-2] for line in table.splitlines()[2:]]
    assert len(links) == 4 and all("run=" in link for link in links)


# -- Partitions ------------------------------------------------------------------------------------
def test_partitions_page(runs):
    at = ok(app("pages/partitions.py"))
    assert charts(at) == 4  # classes per cluster, sizes, labels per client, sample images
    assert any(e.label == "Link to this page" for e in at.sidebar.expander)
    link = next(c.value for c in open_link_box(at).code if c.value.startswith("http"))
    assert "partition=" in link and "dataset=" in link  # the link carries the page's settings
    at.selectbox(key="part.preset").set_value("Label swaps (concept shift)")
    ok(at.run())
    assert at.selectbox(key="part.partition").value == "concept-shift"
    assert any("label map" in c.value for c in at.caption)
    at.number_input(key="part.clusters").set_value(40)
    ok(at.run())
    assert any("samples_per_client=60 is not allowed" in e for e in errors(at))
    at.selectbox(key="part.dataset").set_value("synthetic-linear")
    at.selectbox(key="part.partition").set_value("linear-mixture")
    at.number_input(key="part.clusters").set_value(3)
    ok(at.run())
    assert charts(at) == 1 and len(at.dataframe) == 1  # sizes and the true parameters


# -- Runs --------------------------------------------------------------------------------------------
def test_runs_page_lists_reopens_exports_and_deletes_only_its_own(runs):
    at = ok(app("pages/runs.py"))
    assert any("No saved runs yet" in i.value for i in at.info)
    Experiment(ExperimentConfig(**SMALL, models=2), out_dir=runs / "cli-run").run()  # a CLI run: the disk user's
    from cfl_ui.jobs.manager import JobManager
    from cfl_ui.jobs.snapshots import UnitSpec

    other = JobManager(runs, switch_interval=None)
    hidden = other.submit([UnitSpec("", ExperimentConfig(**SMALL, models=2))], owner="another-browser")
    assert hidden.join(120)
    at = ok(app("pages/runs.py", query={"run": "cli-run"}))
    table = at.dataframe[0].value
    assert list(table["id"]) == ["cli-run"]  # another browser's run is not listed
    assert any("from other browsers are hidden" in c.value for c in at.caption)
    assert charts(at) >= 5
    labels = {b.label for b in at.get("download_button")}
    assert {"Per-round metrics (CSV)", "Config (JSON)", "Summary (JSON)"} <= labels
    delete = at.button(key="runs.delete")
    assert delete.disabled and "command line" in delete.help  # read-only: the terminal's user deletes it
    # a run of this browser: started in the Playground, deleted from the Runs page after confirming
    at.switch_page("app.py").run()
    set_values(at, "pg", SMALL)
    at.button(key="pg.run_btn").click()
    ok(at.run())
    wait_job(at, "pg.run")
    mine = at.session_state["pg.run"]
    at.query_params.clear()
    at.query_params["run"] = mine
    ok(at.switch_page("pages/runs.py").run())
    assert not at.button(key="runs.delete").disabled
    at.button(key="runs.delete").click()
    ok(at.run())
    assert any("cannot be undone" in w.value for w in at.warning)
    at.button(key="runs.yes").click()
    ok(at.run())
    assert not (runs / mine).exists() and (runs / hidden.id).exists() and (runs / "cli-run").exists()
    summary = json.loads((runs / hidden.id / "summary.json").read_text())
    assert summary["status"] == "finished"


def test_a_link_to_another_browsers_run_shows_it_at_once_read_only(runs):
    """The first load of /runs?run=<id> shows the run; Delete and Resume are disabled, and the page says why."""
    from cfl_ui.jobs.manager import JobManager
    from cfl_ui.jobs.snapshots import UnitSpec

    other = JobManager(runs, switch_interval=None)
    job = other.submit([UnitSpec("", ExperimentConfig(**SMALL, models=2))], owner="browser-a")
    assert job.join(120)
    (runs / job.id / "summary.json").unlink()  # an interrupted run (its server was killed): resumable by its owner
    ui = json.loads((runs / job.id / "ui.json").read_text())
    ui["status"], ui["server"]["pid"] = "running", 2**22 + 7  # a process that does not exist
    (runs / job.id / "ui.json").write_text(json.dumps(ui))
    at = ok(app("pages/runs.py", query={"run": job.id}))
    assert job.id in list(at.dataframe[0].value["id"])
    assert charts(at) >= 5  # shown on the first load
    assert any("started in another browser" in c.value for c in at.caption)
    delete, resume = at.button(key="runs.delete"), at.button(key="runs.resume")
    assert delete.disabled and "another browser" in delete.help
    assert resume.disabled and "only the browser that started" in resume.help.lower()
    # a forged confirmation (a stale page of the link holder) deletes nothing
    at.session_state["runs.confirm"] = job.id
    ok(at.run())
    assert not any(b.key == "runs.yes" for b in at.button)
    assert (runs / job.id).exists()


def test_resume_an_interrupted_run_from_the_runs_page(runs):
    at = ok(app())
    set_values(at, "pg", {**SMALL, "rounds": 5})
    at.button(key="pg.run_btn").click()
    ok(at.run())
    wait_job(at, "pg.run")
    mine = at.session_state["pg.run"]
    reference = [json.loads(line) for line in (runs / mine / "rounds.jsonl").read_text().splitlines()]
    # as if the server was killed after round 2: rounds 3 and 4 and the summary never written, ui.json says running
    folder = runs / mine
    (folder / "rounds.jsonl").write_text("".join(json.dumps(r) + "\n" for r in reference[:3]))
    (folder / "summary.json").unlink()
    ui = json.loads((folder / "ui.json").read_text())
    ui["status"], ui["units"][0]["status"], ui["server"]["pid"] = "running", "running", 2**22 + 7
    (folder / "ui.json").write_text(json.dumps(ui))
    manager().forget(mine)
    import torch

    from cfl_core.config import ExperimentConfig as EC
    from cfl_core.experiment import Experiment as X
    # the checkpoint of round 2, as the killed run left it
    exp = X(EC.from_dict(ui["units"][0]["config"]), out_dir=runs / "scratch")
    for _ in range(3):
        exp.step()
    (folder / "checkpoint.pt").write_bytes((runs / "scratch" / "checkpoint.pt").read_bytes())
    torch.load(folder / "checkpoint.pt", weights_only=True)
    import shutil

    shutil.rmtree(runs / "scratch")
    at.query_params.clear()
    at.query_params["run"] = mine
    ok(at.switch_page("pages/runs.py").run())
    assert at.button(key="runs.resume").disabled is False
    at.button(key="runs.resume").click()
    ok(at.run())
    assert manager().get(mine).join(120)
    again = [json.loads(line) for line in (folder / "rounds.jsonl").read_text().splitlines()]
    for r in again + reference:
        r.pop("seconds")
    assert again == reference
    assert json.loads((folder / "summary.json").read_text())["status"] == "finished"


def test_compare_page_keeps_each_algorithms_own_options(runs):
    import json

    at = ok(app("pages/compare.py"))
    at.multiselect(key="cmp.algos").set_value(["flexcfl", "fedgroup"])
    ok(at.run())
    assert not any(s.key and ".opt." in s.key for s in at.selectbox)  # closed: options drawn only when open
    open_sections(at, "cmp", "options.flexcfl", "options.fedgroup")
    at.selectbox(key="cmp.opt.flexcfl.measure").set_value("madc")
    ok(at.run())
    assert at.selectbox(key="cmp.opt.fedgroup.measure").value == "edc"  # FedGroup keeps its own setting
    assert json.loads(at.query_params["algo_options"]) == {"flexcfl": {"measure": "madc"}}
    # the link brings each algorithm's options back to its own expander
    again = ok(app("pages/compare.py", {"algos": "flexcfl,fedgroup",
                                        "algo_options": json.dumps({"fedgroup": {"measure": "madc"}})}))
    open_sections(again, "cmp", "options.flexcfl", "options.fedgroup")
    assert again.selectbox(key="cmp.opt.fedgroup.measure").value == "madc"
    assert again.selectbox(key="cmp.opt.flexcfl.measure").value == "edc"


# -- the training-page frame (cfl_ui.form.frame) ------------------------------------------------------------------
TRAINING = [(None, "pg", "Run"), ("pages/compare.py", "cmp", "Run all"), ("pages/ifca_init.py", "ifc", "Run")]


def widget_keys(node) -> list[str]:
    """The keys of every widget under a block, in the order the page shows them (columns included)."""
    keys = []
    for child in getattr(node, "children", {}).values():
        if getattr(child, "children", None) is not None:
            keys += widget_keys(child)
        elif getattr(child, "key", None):
            keys.append(child.key)
    return keys


@pytest.mark.parametrize("page,prefix,label", TRAINING, ids=[p for _, p, _ in TRAINING])
def test_every_training_page_puts_its_run_controls_first_and_a_copy_with_the_presets_under_its_title(
        runs, page, prefix, label):
    at = ok(app(page))
    side, main = widget_keys(at.sidebar), widget_keys(at.main)
    # the sidebar: Run at the very top (IFCA initialisation's too), then the preset picker, then the page's sections
    assert side[0] == f"{prefix}.run_btn" and side.index(f"{prefix}.preset") < min(
        i for i, k in enumerate(side) if k.startswith(f"{prefix}.") and k not in (
            f"{prefix}.run_btn", f"{prefix}.step_btn", f"{prefix}.pause_btn", f"{prefix}.stop_btn", f"{prefix}.preset"))
    # under the title (shown where the sidebar is hidden: cfl_ui.charts.theme): the preset picker and the same buttons
    copy = [k for k in main if k.startswith(f"{prefix}.main.")]
    assert copy[0] == f"{prefix}.main.preset" and copy[1] == f"{prefix}.main.run_btn"
    assert at.button(key=f"{prefix}.main.run_btn").label == label == at.button(key=f"{prefix}.run_btn").label
    assert main.index(f"{prefix}.main.run_btn") < 3  # right under the header (its only widget: the presenter switch)


@pytest.mark.parametrize("page,prefix,label", TRAINING, ids=[p for _, p, _ in TRAINING])
def test_the_preset_picker_under_the_title_fills_the_page_like_the_sidebars(runs, page, prefix, label):
    at = ok(app(page))
    at.selectbox(key=f"{prefix}.main.preset").set_value("Label swaps (concept shift)")
    ok(at.run())
    assert at.selectbox(key=f"{prefix}.partition").value == "concept-shift"
    assert at.selectbox(key=f"{prefix}.preset").value == "Label swaps (concept shift)"  # the sidebar's shows it
    at.selectbox(key=f"{prefix}.preset").set_value("Label skew")
    ok(at.run())
    assert at.selectbox(key=f"{prefix}.main.preset").value == "Label skew"  # and the copy follows the sidebar's
    assert at.selectbox(key=f"{prefix}.partition").value == "label-skew-1"


def test_presenter_mode_shows_the_run_controls_under_the_title_at_every_width():
    from cfl_ui.charts.theme import CSS, PRESENT_CSS, RUNBAR_MAIN

    # hidden by default (the sidebar has them), shown in narrow windows, and always in presenter mode
    assert f".st-key-{RUNBAR_MAIN} {{display: none;}}" in CSS
    assert f".st-key-{RUNBAR_MAIN} {{display: flex !important;}}" in PRESENT_CSS


@pytest.mark.parametrize("page,prefix", [(None, "pg"), ("pages/ifca_init.py", "ifc")], ids=["pg", "ifc"])
def test_cuda_without_a_gpu_is_refused_by_the_cores_one_device_check(runs, monkeypatch, page, prefix):
    import torch

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    at = ok(app(page, {"device": "cuda"}))
    assert at.button(key=f"{prefix}.run_btn").disabled and at.button(key=f"{prefix}.main.run_btn").disabled
    # the core's message (cfl_core.engine.federation.resolve_device), not a second wording of the dashboard's
    assert "device='cuda' is not allowed: auto or cpu: no CUDA device is visible to PyTorch here" in errors(at)
