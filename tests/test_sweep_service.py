"""The one sweep service (cfl_ui.jobs.sweep_service) without a page: the owner rule of runs, the Playground's
estimate and the memory budget per point, and the job manager's queue shared with runs."""
from __future__ import annotations

import time

import pytest

from cfl_core.config import ExperimentConfig
from cfl_core.sweep import SweepSpec, run_sweep
from cfl_ui.jobs import snapshots as S
from cfl_ui.jobs.estimate import estimate
from cfl_ui.jobs.manager import JobManager
from cfl_ui.jobs.sweep_owner import SWEEP_FROM_CLI, SWEEP_NOT_YOURS, sweep_owner
from cfl_ui.jobs.sweep_service import SweepRefused

TINY = {"clusters": 2, "clients_per_cluster": 2, "samples_per_client": 20, "rounds": 2}


def spec(name: str, seeds: int = 2, **base) -> dict:
    return {"name": name, "base": {**TINY, **base}, "grid": {"algorithm": ["oracle", "fedavg"],
                                                              "seed": list(range(seeds))}}


@pytest.fixture
def manager(tmp_path, monkeypatch):
    monkeypatch.setenv("CFL_SWEEP_EXECUTOR", "serial")  # runs in the driver's thread: no worker processes
    monkeypatch.delenv("CFL_RAY_ADDRESS", raising=False)
    made = []

    def make(**kwargs) -> JobManager:
        m = JobManager(tmp_path / "runs", switch_interval=None, **kwargs)
        made.append(m)
        return m

    yield make
    for m in made:
        m.shutdown(30)


def test_a_point_the_playground_refuses_is_refused_with_the_estimate_and_the_limit(manager):
    service = manager().sweeps
    big = ExperimentConfig(**{**TINY, "rounds": 100000}, algorithm="fedavg")
    assert not estimate([big]).ok  # the Playground refuses this run
    with pytest.raises(SweepRefused) as refused:
        service.plan({"name": "big", "base": TINY, "grid": {"rounds": [2, 100000], "algorithm": ["fedavg"]}})
    message = str(refused.value)
    assert message.startswith("Too large for this machine: this request needs about ")
    assert "the limit here is" in message and "per job" in message and "rounds=100000" in message
    assert not (service.root / "sweeps" / "big").exists()  # nothing written


def test_a_point_above_the_memory_budget_is_refused_and_fewer_runs_fly_when_it_is_tight(manager):
    need = estimate([ExperimentConfig(**TINY)]).memory_bytes
    with pytest.raises(SweepRefused, match=r"the run algorithm=oracle, seed=0 of this sweep needs about .* of "
                                           r"memory; the limit for all jobs here is"):
        manager(memory_limit=need // 2).sweeps.plan(spec("t"))
    tight = manager(memory_limit=int(need * 1.5)).sweeps.plan(spec("t"))
    assert tight.slots == 1 and tight.memory_bytes == tight.point_bytes  # one run in flight at a time fits


def test_only_the_owner_stops_resumes_or_deletes_a_sweep_and_the_command_lines_are_read_only(manager):
    service = manager().sweeps
    job = service.start(spec("mine", seeds=6), "sweeps/mine", owner="browser-a", kind="sweeps")
    assert sweep_owner(service.root / "sweeps" / "mine") == "browser-a"
    assert service.stop("sweeps/mine", "browser-b") == SWEEP_NOT_YOURS and job.active
    with pytest.raises(SweepRefused, match="another browser"):
        service.start(spec("mine", seeds=6), "sweeps/mine", owner="browser-b", kind="sweeps")
    assert service.stop("sweeps/mine", "browser-a", wait=60) is None
    assert job.state == "stopped" and not job.active
    with pytest.raises(SweepRefused, match="another browser"):
        service.resume("sweeps/mine", "browser-b")
    assert service.delete("sweeps/mine", "browser-b") == SWEEP_NOT_YOURS
    again = service.resume("sweeps/mine", "browser-a")
    assert again.join(120) and again.state == "finished", again.error
    assert service.delete("sweeps/mine", "browser-a") is None and not (service.root / "sweeps" / "mine").exists()
    # a sweep of the command line: nobody's here, every browser reads it and none controls it
    run_sweep(SweepSpec.from_dict(spec("cli")), service.root / "sweeps" / "cli", executor="serial")
    assert service.why_not("sweeps/cli", "browser-a") == SWEEP_FROM_CLI
    with pytest.raises(SweepRefused, match="command line"):
        service.resume("sweeps/cli", "browser-a")
    assert service.delete("sweeps/cli", "browser-a") == SWEEP_FROM_CLI and (service.root / "sweeps" / "cli").exists()


def test_sweeps_and_runs_wait_in_one_queue(manager):
    """A visitor starting 4 sweeps at once gets one place (CFL_UI_MAX_JOBS=1): the others wait in line, and a run
    submitted meanwhile waits behind them."""
    m = manager(max_running=1, workers="thread")
    service = m.sweeps
    # the first one long enough (a few seconds) to hold its place while the others come
    jobs = [service.start(spec(f"s{i}", seeds=3, rounds=300 if i == 0 else 2), f"sweeps/s{i}", owner="visitor",
                          kind="sweeps") for i in range(4)]
    time.sleep(0.5)
    run = m.submit([S.UnitSpec("", ExperimentConfig(**TINY, algorithm="fedavg"))], owner="visitor")
    time.sleep(0.5)
    assert sum(j.state == "running" for j in jobs) == 1
    line = sorted((j for j in jobs if j.state == "queued"), key=lambda j: j.position)
    assert [j.position for j in line] == [1, 2, 3]
    assert m.snapshot(run.id).status == S.QUEUED and m.snapshot(run.id).queue_position == 4
    most = 0
    deadline = time.time() + 300
    while any(j.active for j in jobs) and time.time() < deadline:
        most = max(most, sum(j.state == "running" for j in jobs) + (run.status == S.RUNNING))
        time.sleep(0.02)
    assert most == 1  # never two at once
    assert run.join(120) and all(j.state == "finished" for j in jobs), [j.error for j in jobs]
    assert [j.started for j in line] == sorted(j.started for j in line)  # first come, first served
    assert run.snapshot().started > max(j.started for j in line)
