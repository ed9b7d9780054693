"""Run folders that are damaged, deleted or shared: reading survives every kind of damage (keeping what is good
and naming what is not), writing stops when the folder goes away, and two runs never mix in one folder."""
from __future__ import annotations

import json
import os
import shutil

import pytest

from cfl_core.config import ExperimentConfig
from cfl_core.errors import ConfigError
from cfl_core.experiment import Experiment
from cfl_core.records import RunFolderError
from cfl_core.run_reader import load_run, read_rounds, walk_run_folders

SMALL = dict(partition="feature-skew", clusters=2, clients_per_cluster=2, samples_per_client=30, local_epochs=1,
             models=2, device="cpu")


@pytest.fixture(scope="module")
def finished(tmp_path_factory):
    """One finished 4-round run, copied by each test that damages it."""
    folder = tmp_path_factory.mktemp("good") / "run"
    Experiment(ExperimentConfig(algorithm="clove", rounds=4, **SMALL), out_dir=folder).run()
    return folder


@pytest.fixture
def run(finished, tmp_path):
    folder = tmp_path / "run"
    shutil.copytree(finished, folder)
    return folder


def test_an_intact_run_has_no_problems(run):
    saved = load_run(run)
    assert saved.problems == [] and not saved.damaged and saved.status == "finished" and len(saved.records) == 4


@pytest.mark.parametrize("name", ["summary.json", "meta.json", "partition.json"])
@pytest.mark.parametrize("content, why", [
    (b"{not json", "is not valid JSON"),
    (b"[1, 2]", "holds a list, not a JSON object"),
    (b'"x"', "holds a string, not a JSON object"),
    (b"\xff\xfe\x00{", "is not UTF-8 text"),
])
def test_a_damaged_side_file_is_named_and_the_rest_loads(run, name, content, why):
    (run / name).write_bytes(content)
    saved = load_run(run)
    assert any(p.startswith(name) and why in p for p in saved.problems), saved.problems
    assert len(saved.records) == 4 and saved.config["algorithm"] == "clove"
    if name == "summary.json":
        assert saved.status == "unfinished" and saved.summary["rounds_completed"] == 4  # recomputed from the rounds


@pytest.mark.parametrize("name", ["config.json", "summary.json", "meta.json", "rounds.jsonl", "ui.json"])
def test_a_file_replaced_by_a_directory(run, name):
    path = run / name
    if path.exists():
        path.unlink()
    path.mkdir()
    saved = load_run(run)  # never raises
    if name != "ui.json":  # ui.json is the dashboard's: the core does not read it
        assert any(f"{name} is a directory" in p for p in saved.problems), saved.problems


def test_config_json_damaged_or_wrongly_typed(run):
    (run / "config.json").write_text("[1]")
    saved = load_run(run)
    assert saved.config == {} and any("config.json holds a list" in p for p in saved.problems)
    assert len(saved.records) == 4
    (run / "config.json").write_text(json.dumps({"algorithm": "clove", "rounds": "many", "models": 2,
                                                 "unsupervised": "false"}))
    saved = load_run(run)
    assert saved.config == {"algorithm": "clove", "models": 2}  # the wrongly typed fields are left out ...
    assert any("rounds='many' is not allowed" in p for p in saved.problems)  # ... and named
    assert any("unsupervised='false' is not allowed" in p for p in saved.problems)


def test_garbage_in_the_middle_of_rounds_keeps_every_good_round_and_numbers_the_bad_lines(run):
    lines = (run / "rounds.jsonl").read_text().splitlines()
    bad = [lines[0], "garbage", lines[1], "[1, 2]", '{"round": "x"}', json.dumps({**json.loads(lines[2]),
                                                                                 "assignments": "all"}),
           lines[2], lines[3]]
    (run / "rounds.jsonl").write_text("\n".join(bad) + "\n")
    rounds = read_rounds(run)
    assert [r.round for r in rounds.records] == [0, 1, 2, 3]  # nothing after the garbage is lost
    assert [n for n, _ in rounds.bad_lines] == [2, 4, 5, 6]
    assert "not valid JSON" in rounds.bad_lines[0][1] and "a list" in rounds.bad_lines[1][1]
    assert "'round' is not int" in rounds.bad_lines[2][1] and "'assignments'" in rounds.bad_lines[3][1]
    saved = load_run(run)
    assert any("lines 2, 4, 5, 6" in p and "the other 4 rounds are kept" in p for p in saved.problems)


def test_a_torn_last_line_is_a_crash_not_damage(run):
    with open(run / "rounds.jsonl", "a") as fh:
        fh.write('{"round": 4, "pha')
    saved = load_run(run)
    assert len(saved.records) == 4 and saved.problems == []


def test_non_utf8_rounds_and_symlinked_files_are_survived(run, tmp_path):
    (run / "rounds.jsonl").write_bytes(b"\xff" * 10)
    saved = load_run(run)
    assert saved.records == [] and any("rounds.jsonl is not UTF-8" in p for p in saved.problems)
    outside = tmp_path / "secret.json"
    outside.write_text(json.dumps({"status": "finished", "leak": "outside the folder"}))
    (run / "summary.json").unlink()
    os.symlink(outside, run / "summary.json")
    saved = load_run(run)
    assert "leak" not in saved.summary and any("symbolic link (not followed)" in p for p in saved.problems)


def test_a_symlinked_run_folder_is_not_walked_into(tmp_path, finished):
    root = tmp_path / "runs"
    root.mkdir()
    elsewhere = tmp_path / "elsewhere"
    shutil.copytree(finished, elsewhere / "x")
    os.symlink(elsewhere, root / "grp")
    os.symlink(elsewhere / "x", root / "direct")
    assert list(walk_run_folders(root, max_depth=3)) == []


# -- writing --------------------------------------------------------------------------------------------
def test_a_folder_holding_a_run_is_refused_unless_overwritten(tmp_path):
    folder = tmp_path / "x"
    Experiment(ExperimentConfig(algorithm="clove", rounds=3, **SMALL), out_dir=folder).run()
    ifca = ExperimentConfig(algorithm="ifca", rounds=2, **SMALL)
    with pytest.raises(ConfigError, match="holds one"):
        Experiment(ifca, out_dir=folder)
    assert [r.round for r in load_run(folder).records] == [0, 1, 2]  # untouched
    Experiment(ifca, out_dir=folder, overwrite=True).run()
    saved = load_run(folder)
    assert [r.round for r in saved.records] == [0, 1] and saved.config["algorithm"] == "ifca"
    assert saved.summary["algorithm"] == "ifca" and saved.problems == []


def test_a_folder_deleted_mid_run_stops_the_run_at_the_next_round(tmp_path):
    folder = tmp_path / "x"
    exp = Experiment(ExperimentConfig(algorithm="clove", rounds=6, **SMALL), out_dir=folder)
    exp.step()
    shutil.rmtree(folder)
    with pytest.raises(RunFolderError, match="was deleted while the run was going"):
        exp.run()
    assert not folder.exists()  # nothing writes it back (no summary, no checkpoint, no lone file)
    assert exp.status == "failed"


@pytest.mark.parametrize("write", ["checkpoint", "rounds"])
def test_a_folder_deleted_between_the_check_and_the_write_is_named_as_deleted(tmp_path, monkeypatch, write):
    """The race CI once hit: the check passes, the folder goes, then a write fails; the error is still the
    folder's deletion, not the system's "No such file or directory"."""
    from cfl_core import checkpoint as ckpt
    from cfl_core import records

    folder = tmp_path / "x"
    exp = Experiment(ExperimentConfig(algorithm="fedavg", rounds=6, **SMALL), out_dir=folder)
    exp.step()

    def gone(*args, **kwargs):
        shutil.rmtree(folder)
        raise FileNotFoundError(2, "No such file or directory")

    if write == "checkpoint":
        monkeypatch.setattr(ckpt, "save", gone)
    else:
        monkeypatch.setattr(records.RoundRecord, "to_json", lambda self: gone())
    with pytest.raises(RunFolderError, match="was deleted while the run was going"):
        exp.run()
    assert not folder.exists() and exp.status == "failed"


def test_a_folder_replaced_or_its_rounds_file_removed_stops_the_run(tmp_path):
    folder = tmp_path / "x"
    exp = Experiment(ExperimentConfig(algorithm="fedavg", rounds=6, **{**SMALL, "models": None}), out_dir=folder)
    exp.step()
    folder.rename(tmp_path / "moved")
    folder.mkdir()
    with pytest.raises(RunFolderError, match="replaced"):
        exp.step()
    other = tmp_path / "y"
    exp = Experiment(ExperimentConfig(algorithm="fedavg", rounds=6, **{**SMALL, "models": None}), out_dir=other)
    exp.step()
    (other / "rounds.jsonl").unlink()
    with pytest.raises(RunFolderError, match="rounds.jsonl was deleted or replaced"):
        exp.step()


def test_a_folder_that_becomes_unwritable_stops_the_run(tmp_path, monkeypatch):
    folder = tmp_path / "x"
    exp = Experiment(ExperimentConfig(algorithm="ifca", rounds=6, **SMALL), out_dir=folder)
    exp.step()
    real = os.access
    # (the tests run as root, for whom chmod changes nothing: the permission check is what is tested)
    monkeypatch.setattr(os, "access", lambda path, mode, **kw: False if str(path) == str(folder) else real(path, mode))
    with pytest.raises(RunFolderError, match="no longer writable"):
        exp.step()
    assert len(load_run(folder).records) == 1
