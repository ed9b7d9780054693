"""A sweep stopped while a run is in flight loses at most the last PARTIAL_SAVE_EVERY_S seconds of it: the run
checkpoints into `.cfl-sweep-partial/<key>/` (local and serial executors) and the next driver resumes it, with the
records of a run that never stopped. Hostile or damaged partial folders are never followed and never stop a run."""
import json
import os
from pathlib import Path

import pytest

from cfl_core.errors import ConfigError
from cfl_core.experiment import Experiment
from cfl_core.sweep import SweepSpec, run_sweep
from cfl_core.sweep import runner
from cfl_core.sweep.folder import PARTIAL_DIR
from cfl_core.trackers.series import runs_under

TINY = {"clusters": 2, "clients_per_cluster": 2, "samples_per_client": 20, "rounds": 8, "algorithm": "clove",
        "models": 2}
SPEC = {"name": "partial", "base": TINY, "grid": {"seed": [0]}, "folder": "seed{seed}"}


def _records(run: Path) -> list[dict]:
    """The run's rounds without their timings (wall seconds differ from run to run)."""
    lines = (run / "rounds.jsonl").read_text().splitlines()
    return [{k: v for k, v in json.loads(line).items() if "seconds" not in k} for line in lines]


@pytest.fixture(scope="module")
def reference(tmp_path_factory) -> list[dict]:
    out = tmp_path_factory.mktemp("ref") / "sweep"
    run_sweep(SweepSpec.from_dict(SPEC), out, executor="serial")
    return _records(out / "seed0")


def _key() -> str:
    return SweepSpec.from_dict(SPEC).expand().points[0].key


def _stop_after(monkeypatch, rounds: int) -> None:
    """The next run stops (as a Ctrl-C would) when `rounds` rounds are done; checkpoints after every round."""
    monkeypatch.setattr(runner, "PARTIAL_SAVE_EVERY_S", 0.0)
    step = Experiment.step

    def stopping(self):
        if self.round == rounds:
            raise KeyboardInterrupt
        return step(self)

    monkeypatch.setattr(Experiment, "step", stopping)


def test_a_run_stopped_in_flight_resumes_from_its_checkpoint_in_another_process_with_the_same_records(
        tmp_path, monkeypatch, reference):
    out = tmp_path / "sweep"
    _stop_after(monkeypatch, 5)
    with pytest.raises(KeyboardInterrupt):
        run_sweep(SweepSpec.from_dict(SPEC), out, executor="serial")
    partial = out / PARTIAL_DIR / _key()
    assert len((partial / "rounds.jsonl").read_text().splitlines()) == 5 and (partial / "checkpoint.pt").is_file()
    assert not (out / "seed0").exists()  # not finished: no run folder yet
    with pytest.raises(ConfigError, match="none was found"):  # an export never takes the run in flight for a run
        runs_under(out)
    monkeypatch.undo()
    # the next driver, with a pool of worker processes: the worker finds the checkpoint and goes on from round 5
    outcome = run_sweep(SweepSpec.from_dict(SPEC), out, executor="local", workers=1)
    assert outcome.progress.done == 1
    assert _records(out / "seed0") == reference
    assert json.loads((out / "seed0" / "meta.json").read_text())["resumed"] == [{"round": 5}]
    assert not (out / PARTIAL_DIR).exists()  # the run folder holds it now


def test_a_partial_run_of_another_config_or_a_damaged_one_starts_again(tmp_path, monkeypatch, reference):
    out = tmp_path / "sweep"
    _stop_after(monkeypatch, 3)
    with pytest.raises(KeyboardInterrupt):
        run_sweep(SweepSpec.from_dict(SPEC), out, executor="serial")
    monkeypatch.undo()
    partial = out / PARTIAL_DIR / _key()
    (partial / "checkpoint.pt").write_bytes(b"not a checkpoint")
    run_sweep(SweepSpec.from_dict(SPEC), out, executor="serial")
    assert _records(out / "seed0") == reference
    assert "resumed" not in json.loads((out / "seed0" / "meta.json").read_text())  # started again from round 0


@pytest.mark.parametrize("kind", ["link-to-run", "fifo", "file"])
def test_a_hostile_entry_in_place_of_a_partial_run_is_removed_never_followed(tmp_path, reference, kind):
    out = tmp_path / "sweep"
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "config.json").write_text("{}")
    (outside / "keep.txt").write_text("mine")
    (out / PARTIAL_DIR).mkdir(parents=True)
    entry = out / PARTIAL_DIR / _key()
    if kind == "link-to-run":
        entry.symlink_to(outside, target_is_directory=True)
    elif kind == "fifo":
        os.mkfifo(entry)
    else:
        entry.write_text("junk")
    run_sweep(SweepSpec.from_dict(SPEC), out, executor="serial")
    assert _records(out / "seed0") == reference
    assert sorted(p.name for p in outside.iterdir()) == ["config.json", "keep.txt"]  # untouched
    assert (outside / "keep.txt").read_text() == "mine"


def test_a_link_in_place_of_the_partial_folder_is_never_written_through(tmp_path, reference):
    out = tmp_path / "sweep"
    outside = tmp_path / "outside"
    outside.mkdir()
    out.mkdir()
    (out / PARTIAL_DIR).symlink_to(outside, target_is_directory=True)
    run_sweep(SweepSpec.from_dict(SPEC), out, executor="serial")
    assert _records(out / "seed0") == reference  # the run goes on, without checkpoints
    assert list(outside.iterdir()) == []
    assert (out / PARTIAL_DIR).is_symlink()  # not ours: left alone


def test_a_partial_run_another_process_still_holds_is_left_alone(tmp_path, reference):
    """A cancelled worker not ended yet still writes its partial folder: the new run goes without one."""
    import multiprocessing

    from cfl_core.folder_lock import FolderLock

    out = tmp_path / "sweep"
    held = out / PARTIAL_DIR / _key()
    held.mkdir(parents=True)
    (held / "config.json").write_text("{}")
    ready, done = multiprocessing.get_context("spawn").Event(), multiprocessing.get_context("spawn").Event()
    holder = multiprocessing.get_context("spawn").Process(target=_hold, args=(str(held), ready, done))
    holder.start()
    try:
        assert ready.wait(60)
        run_sweep(SweepSpec.from_dict(SPEC), out, executor="serial")
    finally:
        done.set()
        holder.join(30)
    assert _records(out / "seed0") == reference
    assert (held / "config.json").read_text() == "{}"  # not discarded under the other process
    FolderLock(held).release()  # and free again


def _hold(folder, ready, done):
    from cfl_core.folder_lock import FolderLock

    lock = FolderLock(folder)
    ready.set()
    done.wait(60)
    lock.release()
