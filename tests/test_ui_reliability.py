"""The dashboard against bad links, damaged or hostile run folders, folders deleted mid-run, crashed servers and
memory limits: every page loads, shows what it can, and says what it ignored, as literal text."""
from __future__ import annotations

import json
import os
import re
import shutil
import time
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from cfl_core.config import ExperimentConfig
from cfl_core.experiment import Experiment
from cfl_ui.jobs import manager as M
from cfl_ui.jobs import snapshots as S
from cfl_ui.jobs.store import delete_job, list_rows, load_job
from tests.helpers import open_sections, shown
from tests.test_ui_pages import runs  # noqa: F401  (the fixture: a fresh runs folder for the dashboard)

APP = str(Path(__file__).resolve().parent.parent / "app.py")
SMALL = {"clusters": 2, "clients_per_cluster": 2, "samples_per_client": 30, "rounds": 3, "local_epochs": 1}
TINY = ExperimentConfig(algorithm="fedavg", device="cpu", **SMALL)
EVIL = "[Click here to log in again](http://localhost:1/evil) ![i](http://localhost:1/evil.png)"


def app(page: str | None = None, query: dict | None = None) -> AppTest:
    at = AppTest.from_file(APP, default_timeout=90)
    if page is None:
        at.query_params.update(query or {})
        at.run()
    else:
        at.run()
        at.query_params.clear()
        at.query_params.update(query or {})
        at = at.switch_page(page).run()
    assert not at.exception, [e.value for e in at.exception]
    return at


def texts(at: AppTest) -> list[str]:
    """The markdown source of every text element the page drew."""
    out = []
    for kind in ("markdown", "warning", "error", "info", "caption", "success"):
        out += [e.value for e in at.get(kind)]
    return out


def live_markup(text: str) -> bool:
    """Whether markdown source holds an unescaped link or image (a `[`, `](` or `![` not preceded by a backslash)."""
    return bool(re.search(r"(?<!\\)\]\(|(?<!\\)!\[|(?<!\\)<(?:img|a)\b", text))


# -- links -------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("options, name", [
    ({"stable_rounds": "abc"}, "stable_rounds"),
    ({"stable_share": "x"}, "stable_share"),
    ({"sqrt_losses": "yes"}, "sqrt_losses"),
    ({"k": [1]}, "k"),
])
def test_wrongly_typed_options_in_a_link_are_ignored_with_the_reason(runs, options, name):
    at = app(query={"algorithm": "clove", "options": json.dumps(options)})
    notes = [shown(w.value) for w in at.warning]
    assert any(f"options.{name} in the link was ignored" in n for n in notes), notes
    assert at.selectbox(key="pg.algorithm").value == "clove"


def test_compare_with_a_repeated_algorithm_and_bad_options(runs):
    at = app("pages/compare.py", {"algos": "clove,clove,nope", "algo_options": json.dumps(
        {"clove": {"stable_rounds": "abc"}, "fedavg": "x"})})
    assert at.multiselect(key="cmp.algos").value == ["clove"]
    notes = " ".join(shown(w.value) for w in at.warning)
    assert "'nope'" in notes and "repeated names" in notes
    assert "algo_options clove.stable_rounds in the link was ignored" in notes
    assert "algo_options for 'fedavg' in the link were ignored" in notes


def test_ifca_page_says_a_bad_seed_count_was_ignored(runs):
    at = app("pages/ifca_init.py", {"seeds": "1e20"})
    assert any("seeds='1e20' in the link was refused" in shown(w.value) and "from 1 to 50" in shown(w.value)
               for w in at.warning)
    assert at.number_input(key="ifc.seeds").value == 10


@pytest.mark.parametrize("page, key", [(None, "rounds"), (None, "run"), ("pages/compare.py", "run"),
                                       ("pages/ifca_init.py", "run"), ("pages/runs.py", "run")])
def test_markdown_in_a_link_is_shown_as_literal_text(runs, page, key):
    if page == "pages/runs.py":
        Experiment(TINY, out_dir=runs / "cli-run").run()  # the page needs a run to list
    at = app(page, {key: EVIL})
    said = [t for t in texts(at) if "Click here to log in again" in t]
    assert said, "the ignored value is shown"
    assert not any(live_markup(t) for t in said), said
    assert any("[Click here to log in again](http://localhost:1/evil)" in shown(t) for t in said)


def test_strings_are_never_booleans_in_a_link(runs):
    at = app(query={"unsupervised": "yes"})
    assert any("unsupervised='yes' in the link was ignored" in shown(w.value) for w in at.warning)
    assert open_sections(at, "pg", "more").checkbox(key="pg.unsupervised").value is False


# -- damaged and hostile folders ------------------------------------------------------------------------------
@pytest.fixture
def damaged(runs):
    """A runs folder with one good CLI run and one of each kind of damage."""
    Experiment(TINY, out_dir=runs / "good").run()
    for name in ("summary-list", "summary-text", "config-list", "config-typed", "rounds-garbage", "meta-dir",
                 "not-utf8"):
        shutil.copytree(runs / "good", runs / name)
    (runs / "summary-list" / "summary.json").write_text("[1, 2]")
    (runs / "summary-text" / "summary.json").write_text('"x"')
    (runs / "config-list" / "config.json").write_text("[1]")
    config = json.loads((runs / "good" / "config.json").read_text())
    (runs / "config-typed" / "config.json").write_text(json.dumps({**config, "rounds": "many"}))
    lines = (runs / "good" / "rounds.jsonl").read_text().splitlines()
    (runs / "rounds-garbage" / "rounds.jsonl").write_text("\n".join([lines[0], "}{", '"x"', *lines[1:]]) + "\n")
    (runs / "meta-dir" / "meta.json").unlink()
    (runs / "meta-dir" / "meta.json").mkdir()
    (runs / "not-utf8" / "summary.json").write_bytes(b"\xff\xfe\xfa")
    job = runs / "job-ui-list-00000000"
    shutil.copytree(runs / "good", job)
    (job / "ui.json").write_text("[1]")
    return runs


def test_damaged_folders_are_listed_as_damaged_with_the_reason_and_the_rest_works(damaged):
    rows, _ = list_rows(damaged, "someone")
    by = {r.ref: r for r in rows}
    assert by["good"].status == "finished" and by["good"].problem == ""
    assert by["summary-list"].status == "damaged" and "summary.json holds a list" in by["summary-list"].problem
    assert "summary.json holds a string" in by["summary-text"].problem
    assert "config.json holds a list" in by["config-list"].problem
    assert "rounds='many'" in by["config-typed"].problem
    assert "not UTF-8" in by["not-utf8"].problem
    assert by["job-ui-list-00000000"].status == "damaged" and "ui.json holds a list" in by["job-ui-list-00000000"].problem
    at = app("pages/runs.py")
    table = at.dataframe[0].value
    assert set(table["id"]) >= {"good", "summary-list", "config-list", "job-ui-list-00000000"}
    assert (table[table["id"] == "summary-list"]["status"] == "damaged").all()


@pytest.mark.parametrize("ref, problem", [("summary-list", "summary.json holds a list"),
                                          ("config-typed", "rounds='many'"),
                                          ("rounds-garbage", "lines 2, 3 are not a round record"),
                                          ("meta-dir", "meta.json is a directory"),
                                          ("job-ui-list-00000000", "ui.json holds a list")])
def test_a_damaged_run_opens_with_what_could_be_read(damaged, ref, problem):
    snap = load_job(damaged, ref)
    assert snap is not None
    at = app("pages/runs.py", {"run": ref})
    assert any("Damaged run folder" in w.value and problem in shown(w.value) for w in at.warning), \
        [w.value for w in at.warning]
    if ref == "rounds-garbage":
        assert snap.units[0].rounds_done == 3  # the rounds after the garbage are kept
    at = app(None, {"run": ref})  # the Playground too
    assert not at.exception


def test_symlinks_in_the_runs_folder_are_never_followed(runs, tmp_path):
    elsewhere = tmp_path / "elsewhere"
    Experiment(TINY, out_dir=elsewhere / "secret").run()
    runs.mkdir(parents=True, exist_ok=True)
    os.symlink(elsewhere, runs / "grp")
    os.symlink(elsewhere / "secret", runs / "direct")
    Experiment(TINY, out_dir=runs / "real").run()
    rows, _ = list_rows(runs, None)
    assert [r.ref for r in rows] == ["real"]
    assert load_job(runs, "grp/secret") is None and load_job(runs, "direct") is None
    assert not delete_job(runs, "grp/secret") and not delete_job(runs, "direct")
    assert (elsewhere / "secret" / "config.json").exists()
    at = app("pages/runs.py", {"run": "grp/secret"})
    assert not any("secret" in str(v) for v in at.dataframe[0].value["id"])
    assert not at.get("plotly_chart")


# -- a folder deleted mid-run; a crashed server -------------------------------------------------------------
def delete_running(folder: Path) -> None:
    """Delete a running job's folder, gone from its place at once (moved out, then removed): shutil.rmtree alone
    races the worker's next write and fails with "Directory not empty" when a file appears between its listing
    and its rmdir."""
    moved = folder.parent.parent / f"deleted-{folder.name}"
    os.rename(folder, moved)
    shutil.rmtree(moved, ignore_errors=True)


def test_a_folder_deleted_mid_run_fails_the_job_at_the_next_round_without_bringing_it_back(runs):
    manager = M.JobManager(runs, max_running=1)
    try:
        job = manager.submit([S.UnitSpec("", TINY.replace(rounds=400))], owner="me")
        deadline = time.time() + 120
        while manager.snapshot(job.id).rounds_done < 2 and time.time() < deadline:
            time.sleep(0.01)
        delete_running(runs / job.id)
        gone_at = manager.snapshot(job.id).rounds_done
        assert job.join(60)
        snap = manager.snapshot(job.id)
        # rmtree removes the files before the folder: the round that notices may find the folder or only its
        # rounds.jsonl gone, and says which
        assert snap.status == S.FAILED and re.search(r"(run folder \S+|rounds\.jsonl) was deleted (or replaced )?"
                                                     r"while the run was going", snap.error), snap.error
        assert snap.units[0].rounds_done <= gone_at + 1  # noticed at the next round
        assert not (runs / job.id).exists()  # nothing brings it back (not even a lone ui.json)
    finally:
        manager.shutdown(10)


def test_the_page_shows_a_lost_folder_as_the_runs_error(runs):
    at = app()
    for name, value in {**SMALL, "rounds": 400}.items():
        at.number_input(key=f"pg.{name}").set_value(value)
    at.run()
    at.button(key="pg.run_btn").click()
    at.run()
    ref = at.session_state["pg.run"]
    from cfl_ui.form.session import manager

    job = manager().get(ref)
    deadline = time.time() + 120
    while job.snapshot().rounds_done < 1 and time.time() < deadline:
        time.sleep(0.01)
    delete_running(runs / ref)
    assert job.join(60)
    at.run()
    assert any("The run failed" in e.value and "was deleted while the run was going" in shown(e.value)
               for e in at.error)


def test_a_crashed_servers_run_is_interrupted_at_once_not_after_a_timeout(runs):
    manager = M.JobManager(runs)
    try:
        job = manager.submit([S.UnitSpec("", TINY)], owner="me")
        assert job.join(120)
    finally:
        manager.shutdown(10)
    folder = runs / job.id
    (folder / "summary.json").unlink()  # as if the server died mid-run: no summary, ui.json says running
    ui = json.loads((folder / "ui.json").read_text())
    ui["status"] = ui["units"][0]["status"] = "running"
    (folder / "ui.json").write_text(json.dumps(ui))
    # its files were written a moment ago (the old rule said "running elsewhere" for 45 s), but the worker
    # process that wrote them is gone: interrupted at once
    snap = load_job(runs, job.id)
    assert snap.status == S.INTERRUPTED and snap.units[0].status == S.INTERRUPTED
    heartbeat = json.loads((folder / "heartbeat.json").read_text())
    assert heartbeat["pid"] != os.getpid()  # written by the job's worker process


def test_a_cli_runs_elapsed_time_is_its_records_not_the_clock(runs):
    Experiment(TINY, out_dir=runs / "cli").run()
    snap = load_job(runs, "cli")
    first = snap.elapsed
    time.sleep(0.3)
    again = load_job(runs, "cli")
    assert again.elapsed == first == pytest.approx(sum(r.seconds for r in again.units[0].records))


# -- memory -------------------------------------------------------------------------------------------------
def test_running_jobs_together_stay_under_the_memory_limit(runs):
    from cfl_ui.jobs.estimate import estimate

    config = TINY.replace(rounds=100)
    need = estimate([config], parallel=True).memory_bytes
    manager = M.JobManager(runs, max_running=2, memory_limit=int(need * 1.5))  # room for one job at a time
    try:
        first = manager.submit([S.UnitSpec("", config)], owner="me", start="pause")  # holds memory once started
        first.step()
        deadline = time.time() + 60
        while not (first.status == S.PAUSED and first.snapshot().rounds_done == 1) and time.time() < deadline:
            time.sleep(0.01)
        second = manager.submit([S.UnitSpec("", config)], owner="me")
        time.sleep(0.5)
        snap = manager.snapshot(second.id)
        assert snap.status == S.QUEUED and snap.rounds_done == 0  # a place is free, the memory is not
        assert "waiting for memory" in snap.waiting and "the jobs holding memory here already use" in snap.waiting
        first.stop()  # its memory is freed: the second starts
        assert first.join(60) and second.join(120)
        assert manager.snapshot(second.id).status == S.FINISHED
        with pytest.raises(M.MemoryRefused, match="Too large for this machine"):
            M.JobManager(runs, memory_limit=need // 2).submit([S.UnitSpec("", TINY)])
    finally:
        manager.shutdown(10)
