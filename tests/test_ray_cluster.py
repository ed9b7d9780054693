"""Sweeps on a real Ray cluster: two `ray start` nodes on 127.0.0.1 with token authentication, the sweep sent by
address (`auto` and HOST:PORT) from CFL Lab's own CLI, a worker node killed mid-sweep; and bad or unreachable
addresses refused in one line within seconds.

The cluster (tests/ray_loopback.py) is started and stopped by the test: each node's process group, then any
process left with the cluster's marker, by pid; the test checks none is left. Every TCP connection of the
cluster's processes is checked to be with 127.0.0.1. The records are compared with a local-pool sweep of the
same spec field by field (wall times aside), with one torch thread per run in both.
"""
from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from cfl_core.cli import main
from cfl_core.errors import ConfigError
from cfl_core.sweep import SweepSpec, run_sweep
from cfl_core.sweep.status import sweep_status
from tests.ray_loopback import LoopbackCluster, free_ports, remote_addresses
from tests.test_sweep_ray import _run_files

BASE = {"dataset": "digits", "clusters": 2, "clients_per_cluster": 3, "samples_per_client": 40}
SMALL = {"name": "on-cluster", "base": {**BASE, "rounds": 3}, "grid": {"algorithm": ["clove", "ifca"], "seed": [0]}}
# long enough per point that the worker node is killed while points are still to run
LONG = {"name": "node-lost", "base": {**BASE, "rounds": 40}, "grid": {"algorithm": ["clove", "ifca", "fedavg"],
                                                                       "seed": [0, 1]}}


def write_spec(folder: Path, spec: dict) -> Path:
    path = folder / f"{spec['name']}.json"
    path.write_text(json.dumps(spec))
    return path


def finished_events(out: Path) -> list[str]:
    return [e["key"] for e in map(json.loads, (out / "events.jsonl").read_text().splitlines())
            if e["event"] == "finished"]


def same_records(folder_a: Path, folder_b: Path, points) -> None:
    for p in points:
        assert _run_files(folder_a / p.folder) == _run_files(folder_b / p.folder), p.folder


@pytest.mark.slow
def test_a_sweep_on_a_two_node_loopback_cluster_by_address_survives_a_lost_node(tmp_path):
    cluster = LoopbackCluster(tmp_path / "cluster")
    try:
        cluster.start(workers=1)
        # `auto`: the cluster this machine is a node of (Ray finds it through RAY_ADDRESS, its temp dir being ours)
        small = write_spec(tmp_path, SMALL)
        driver = cluster.cfl("sweep", str(small), "--out", str(tmp_path / "auto"), "--executor", "ray",
                             "--address", "auto", address="auto")
        out, err = driver.communicate(timeout=600)
        assert driver.returncode == 0, err[-3000:]
        progress = json.loads((tmp_path / "auto" / "progress.json").read_text())
        assert progress["executor"]["cluster_cpus"] == 2 and progress["executor"]["address"] == "auto"  # both nodes
        assert remote_addresses(cluster.marked()) <= {"127.0.0.1", "::ffff:127.0.0.1", "0.0.0.0", "::"}

        # HOST:PORT, and the worker node killed once a point has finished
        long = write_spec(tmp_path, LONG)
        target = tmp_path / "hostport"
        driver = cluster.cfl("sweep", str(long), "--out", str(target), "--executor", "ray",
                             "--address", cluster.address)
        deadline = time.monotonic() + 600
        while not ((status := sweep_status(target)) and status.finished >= 1):
            assert driver.poll() is None and time.monotonic() < deadline, driver.communicate()[1][-3000:]
            time.sleep(0.2)
        before = {m.parent.name: json.loads(m.read_text())["run_id"] for m in target.glob("*/sweep_point.json")}
        cluster.kill_node(1)
        out, err = driver.communicate(timeout=900)
        assert driver.returncode == 0, err[-3000:]
        status = sweep_status(target)
        assert (status.finished, status.points, status.failed, status.problems) == (6, 6, 0, [])
        after = {m.parent.name: json.loads(m.read_text())["run_id"] for m in target.glob("*/sweep_point.json")}
        assert all(after[name] == run_id for name, run_id in before.items())  # no finished point lost or redone
        keys = finished_events(target)
        assert len(keys) == 6 and len(set(keys)) == 6  # each result written once
    finally:
        cluster.stop()  # each node's process group, then any process still marked as the cluster's, by pid
    assert not cluster.marked(), "Ray processes left running"

    # the records are a local pool's for the same specs
    for spec, folder in ((SMALL, tmp_path / "auto"), (LONG, target)):
        parsed = SweepSpec.from_dict(spec)
        local = run_sweep(parsed, tmp_path / f"local-{spec['name']}", executor="local", workers=2)
        assert not local.failed
        same_records(folder, tmp_path / f"local-{spec['name']}", local.expansion.points)


@pytest.mark.parametrize("address, says", [
    ("ray://127.0.0.1:10001", "needs ray[client]"),
    ("http://127.0.0.1:8265", "the dashboard's, for `ray job submit`"),
    ("127.0.0.1", "HOST:PORT (the head's GCS port"),
    ("127.0.0.1:0", "HOST:PORT (the head's GCS port"),
    ("head node:6379", "HOST:PORT (the head's GCS port"),
])
def test_a_malformed_address_is_one_line_at_once_and_writes_nothing(tmp_path, capsys, address, says):
    spec = write_spec(tmp_path, SMALL)
    started = time.monotonic()
    assert main(["sweep", str(spec), "--out", str(tmp_path / "out"), "--executor", "ray", "--address", address]) == 2
    err = capsys.readouterr().err
    assert f"address='{address}' is not allowed" in err and says in err and len(err.strip().splitlines()) == 1, err
    assert time.monotonic() - started < 5 and not (tmp_path / "out").exists()


def test_an_unreachable_address_is_one_line_within_seconds(tmp_path, capsys, monkeypatch):
    [closed] = free_ports(1)  # nothing listens there (on 127.0.0.1: nothing else is ever asked)
    spec = write_spec(tmp_path, SMALL)
    started = time.monotonic()
    assert main(["sweep", str(spec), "--out", str(tmp_path / "out"), "--executor", "ray", "--address",
                 f"127.0.0.1:{closed}"]) == 2
    err = capsys.readouterr().err
    assert f"a reachable Ray cluster: 127.0.0.1:{closed} (connection refused)" in err, err
    assert len(err.strip().splitlines()) == 1 and time.monotonic() - started < 10
    assert not (tmp_path / "out").exists()
    monkeypatch.setenv("RAY_ADDRESS", f"127.0.0.1:{closed}")  # `auto` finds what RAY_ADDRESS names
    with pytest.raises(ConfigError, match="address='auto' is not allowed: a reachable Ray cluster"):
        run_sweep(SweepSpec.from_dict(SMALL), tmp_path / "out", executor="ray", address="auto")
