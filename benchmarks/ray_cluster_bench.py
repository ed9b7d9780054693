"""The same sweep on the local pool and on a two-node Ray cluster on this machine's loopback: points per second.

    python benchmarks/ray_cluster_bench.py [--points-per-algorithm 4] [--rounds 10]

Both are CFL Lab's own CLI (`python -m cfl_core sweep`) timed from start to exit, each into an empty folder:
`local` with 2 workers, and `ray` sent by HOST:PORT to a cluster of two `ray start` nodes of 1 CPU each
(tests/ray_loopback.py: token authentication, 127.0.0.1 only; the cluster's start-up is not timed, it is
stopped after). Every run uses one torch thread, so both give identical records (checked). The machine's
load (/proc/loadavg, 1-minute) is printed before and after each: other work on a shared machine slows both.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.ray_loopback import LoopbackCluster  # noqa: E402
from tests.test_sweep_ray import _run_files  # noqa: E402


def load() -> str:
    return Path("/proc/loadavg").read_text().split()[0]


def timed(proc: subprocess.Popen) -> float:
    started = time.perf_counter()
    out, err = proc.communicate(timeout=3600)
    if proc.returncode != 0:
        raise SystemExit(f"sweep failed ({proc.returncode}):\n{err[-3000:]}")
    return time.perf_counter() - started


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--points-per-algorithm", type=int, default=4, help="seeds per algorithm (clove, ifca)")
    parser.add_argument("--rounds", type=int, default=10)
    args = parser.parse_args()
    spec = {"name": "bench", "base": {"dataset": "digits", "clusters": 2, "clients_per_cluster": 3,
                                      "samples_per_client": 40, "rounds": args.rounds},
            "grid": {"algorithm": ["clove", "ifca"], "seed": list(range(args.points_per_algorithm))}}
    points = 2 * args.points_per_algorithm
    with tempfile.TemporaryDirectory(prefix="cfl-ray-bench-") as tmp:
        tmp = Path(tmp)
        (tmp / "bench.json").write_text(json.dumps(spec))
        env = {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1"}
        before = load()
        local = timed(subprocess.Popen([sys.executable, "-m", "cfl_core", "sweep", str(tmp / "bench.json"), "--out",
                                        str(tmp / "local"), "--executor", "local", "--workers", "2"], env=env,
                                       cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True))
        rows = [("local pool, 2 workers", local, before, load())]
        cluster = LoopbackCluster(tmp / "cluster").start(workers=1)
        try:
            before = load()
            on_ray = timed(cluster.cfl("sweep", str(tmp / "bench.json"), "--out", str(tmp / "ray"), "--executor",
                                       "ray", "--address", cluster.address))
            rows.append(("2-node Ray cluster (1 CPU each), by HOST:PORT", on_ray, before, load()))
        finally:
            cluster.stop()
        folders = [p.parent.name for p in (tmp / "local").glob("*/sweep_point.json")]
        same = all(_run_files(tmp / "local" / f) == _run_files(tmp / "ray" / f) for f in folders)
        stamp = time.strftime("%Y-%m-%d %H:%M")
        print(f"Measured {stamp} on {os.cpu_count()} cores: {points} points (digits, {args.rounds} rounds, clove and "
              f"ifca), wall time of `python -m cfl_core sweep` from start to exit; records identical: "
              f"{'yes' if same else 'NO'}.")
        print("| executor | wall (s) | points/s | load (1 min) before / after |")
        print("|---|---|---|---|")
        for name, wall, a, b in rows:
            print(f"| {name} | {wall:.1f} | {points / wall:.3f} | {a} / {b} |")
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
