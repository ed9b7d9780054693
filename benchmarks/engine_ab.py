"""This checkout's engine beside an older revision's, in one process, their calls interleaved.

    python benchmarks/engine_ab.py --base REV [--what step|evaluate|loss-matrix] [--clients 100]
                                   [--algorithm fedavg|clove] [--repeats 40] [--threads 2]

Why one process: on the project's shared 2-core machine the speed drifts by 20-30% within seconds (a
100-client FedAvg round read 30-39 ms in consecutive 2-second windows of one process), so two processes
measured one after the other differ more from each other than most changes do. Here `REV`'s `cfl_core` is
extracted (`git archive`) and imported under another name (`cfl_base`: the package imports itself only
relatively), both build the peer benchmark's workload (`cfl_core.bench.peers.workload_config`: digits, 80
samples of 64 features per client, the bench's MLP, 1 epoch of batch 10), and each repetition times one call
of each, alternating which goes first. It prints both medians and the median of the paired ratios
(this / base) with its quartiles: a change is shown when the quartiles are on one side of 1.

--what: `step` = `Experiment.step()` (the round, evaluation and record); `evaluate` = the test evaluation of
every client on its model; `loss-matrix` = every client's loss on every model (CLoVE's first phase).
"""
from __future__ import annotations

import argparse
import ast
import importlib
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))


def extract_base(rev: str, into: Path) -> None:
    """`rev`'s cfl_core, as the package `cfl_base` under `into`."""
    # resolved to a commit id first: a name starting with "-" would otherwise reach git as an option
    found = subprocess.run(["git", "-C", str(REPO), "rev-parse", "--verify", "--quiet", "--end-of-options",
                            f"{rev}^{{commit}}"], capture_output=True, text=True)
    if rev.startswith("-") or found.returncode:
        raise SystemExit(f"engine_ab: cannot read revision {rev!r}: not a commit of {REPO}")
    archive = into / "base.tar"
    with open(archive, "wb") as out:
        done = subprocess.run(["git", "-C", str(REPO), "archive", found.stdout.strip(), "cfl_core"], stdout=out,
                              stderr=subprocess.PIPE)
    if done.returncode:
        raise SystemExit(f"engine_ab: cannot read revision {rev!r}: {done.stderr.decode().strip()}")
    with tarfile.open(archive) as tar:
        tar.extractall(into, filter="data")
    (into / "cfl_core").rename(into / "cfl_base")
    for path in (into / "cfl_base").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            names = ([a.name for a in node.names] if isinstance(node, ast.Import) else
                     [node.module or ""] if isinstance(node, ast.ImportFrom) and not node.level else [])
            if any(n == "cfl_core" or n.startswith("cfl_core.") for n in names):
                raise SystemExit(f"engine_ab: {rev}'s {path.relative_to(into)} imports cfl_core by name, so it "
                                 "cannot be loaded beside this checkout's")


def build(package: str, clients: int, algorithm: str, rounds: int):
    peers = importlib.import_module(f"{package}.bench.peers")
    exp = peers.build_experiment(peers.workload_config(clients, algorithm, peers.PeerOptions(rounds=rounds)))
    exp.step()  # warm-up (and the models the other measurements use)
    return exp


def one_call(exp, what: str, clients: int):
    if what == "step":
        return exp.step
    alg = exp.algorithm
    if what == "evaluate":
        return lambda: alg.engine.evaluate(alg.models, alg.assign)
    import torch

    everyone = torch.arange(clients)
    return lambda: alg.engine._loss_values(alg.models, everyone)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--base", required=True, help="the revision to compare with (e.g. HEAD~3, a commit id)")
    ap.add_argument("--what", choices=["step", "evaluate", "loss-matrix"], default="step")
    ap.add_argument("--clients", type=int, default=100)
    ap.add_argument("--algorithm", choices=["fedavg", "clove"], default="fedavg")
    ap.add_argument("--repeats", type=int, default=40)
    ap.add_argument("--threads", type=int, default=2)
    args = ap.parse_args(argv)
    if args.repeats < 2 or args.clients < 4 or args.threads < 1:
        ap.error("--repeats needs at least 2, --clients at least 4, --threads at least 1")
    import torch

    torch.set_num_threads(args.threads)
    with tempfile.TemporaryDirectory(prefix="cfl-engine-ab-") as folder:
        extract_base(args.base, Path(folder))
        sys.path.insert(0, folder)
        rounds = args.repeats + 8 if args.what == "step" else 3
        calls = {name: one_call(build(name, args.clients, args.algorithm, rounds), args.what, args.clients)
                 for name in ("cfl_base", "cfl_core")}
        times: dict[str, list[float]] = {name: [] for name in calls}
        for r in range(args.repeats + 2):
            for name in (list(calls) if r % 2 == 0 else list(calls)[::-1]):
                started = time.perf_counter()
                calls[name]()
                if r >= 2:  # two more warm-up repetitions each
                    times[name].append(time.perf_counter() - started)
    base, this = times["cfl_base"], times["cfl_core"]
    ratios = sorted(t / b for t, b in zip(this, base))
    quarter = len(ratios) // 4
    print(f"{args.what}, {args.algorithm}, M = {args.clients}, {args.repeats} repetitions, {args.threads} threads")
    print(f"  base {args.base}: median {statistics.median(base) * 1000:.2f} ms")
    print(f"  this checkout:   median {statistics.median(this) * 1000:.2f} ms")
    print(f"  this / base, paired: median {statistics.median(ratios):.3f} (quartiles {ratios[quarter]:.3f}-"
          f"{ratios[-1 - quarter]:.3f})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
