"""CFL Lab's rows of the peer benchmark: the bare engine, `Experiment.step()` and the step with its run folder.

Each repetition runs in a fresh process, as every peer's does (`run_cfl_process`, which starts
`python -m cfl_core.bench.peer_cfl SPEC.json OUT.json`), so neither side keeps a warm process the other lacks.
"""
from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict
from pathlib import Path
from typing import Callable

import torch

from .measure import OtherLoad
from .peer_workload import (MIN_STEADY_ROUNDS, REPO, PeerOptions, PeerRow, build_experiment, options_from_json,
                            workload_config, write_workload)


def _median(values):
    return statistics.median(values) if values else None


class RoundLoop:
    """The rounds of one CFL Lab row: `rounds` in all (warm-up included), or fewer once the timed rounds
    pass `budget` seconds (after at least MIN_STEADY_ROUNDS of them); the other load over the timed rounds."""

    def __init__(self, rounds: int, warmup: int, budget: float):
        self.rounds, self.warmup, self.budget = rounds, warmup, budget
        self.times: list[float] = []
        self.probe: OtherLoad | None = None

    def __iter__(self):
        for r in range(self.rounds):
            if r == self.warmup:
                self.probe = OtherLoad()
            yield r
            steady = self.times[self.warmup:]
            if len(steady) >= MIN_STEADY_ROUNDS and sum(steady) > self.budget:
                return

    def other(self) -> float | None:
        return self.probe.cpus() if self.probe else None

    def steady(self) -> list[float]:
        return self.times[self.warmup:]

    def label(self) -> str:
        return f"{len(self.steady())} of {len(self.times)}"


def cfl_rows(clients: int, opts: PeerOptions, algorithm: str = "fedavg", log: Callable = print,
             workload_path: Path | None = None) -> list[PeerRow]:
    """(a) the bare engine (training + averaging), (b) `Experiment.step()` (the round, per-client
    evaluation and the record), (c) the same with the run folder written; all on the same clients."""
    config = workload_config(clients, algorithm, opts)
    t = time.perf_counter()
    first = build_experiment(config)
    setup_s = time.perf_counter() - t
    if workload_path is not None:
        write_workload(workload_path, first, opts)
    budget = opts.round_budget / 3  # the process's budget, shared by its three rows
    rows = []
    models = int(first.models_snapshot().shape[0])
    from .. import __version__

    versions = {"cfl_core": __version__, "torch": torch.__version__}

    def stepped(variant: str, out_dir, includes: str, exp=None):
        t0 = time.perf_counter()
        exp = exp or build_experiment(config, out_dir, first.setup_data)
        built = setup_s if exp is first else time.perf_counter() - t0
        loop = RoundLoop(opts.cfl_rounds, opts.warmup, budget)
        record, phases, curve = None, [], []
        for r in loop:
            t0 = time.perf_counter()
            record = exp.step()
            loop.times.append(time.perf_counter() - t0)
            phases.append(dict(exp.phase_seconds))
            curve.append([r + 1, record.accuracy])
        other = loop.other()
        exp.close()
        split = step_phases(phases[opts.warmup:])
        row = PeerRow("CFL Lab", variant, algorithm, clients, models, _median(loop.steady()),
                      rounds=loop.label(), accuracy=record.accuracy, accuracy_after=len(loop.times),
                      ari=record.ari if algorithm == "clove" else None,
                      startup_seconds=built + sum(loop.times[:opts.warmup]),
                      other_cpus=other, includes=includes, versions=versions,
                      setup={"threads": torch.get_num_threads(), "device": "cpu"},
                      train_seconds=split.pop("round", None), eval_seconds=split.pop("evaluation", None),
                      phases=split, accuracy_curve=curve)
        log(f"  CFL Lab {variant:<28} {algorithm} M={clients:<6} {row.seconds:.4f} s/round  "
            f"acc {record.accuracy:.3f}  other load {other if other is None else round(other, 2)}")
        return row

    rows.append(stepped("Experiment.step()", None,
                        "Experiment.step(): the algorithm's round (training + averaging; CLoVE: loss matrix, "
                        "KMeans, matching too), every client's test evaluation, ARI/NMI and the RoundRecord "
                        "(training part = the round, evaluation = the test evaluation, record = the rest)",
                        exp=first))
    with tempfile.TemporaryDirectory(prefix="cfl-peers-run-") as folder:
        rows.append(stepped("step() + run folder", Path(folder) / "run",
                            "as Experiment.step(), and the round's line appended to rounds.jsonl with fsync, "
                            "and the round's checkpoint"))
    rows.insert(0, engine_row(first, config, opts, algorithm, log, versions, budget))
    return rows


def step_phases(steps: list[dict]) -> dict:
    """Medians over the steady rounds of `Experiment.phase_seconds`: round (training + averaging; its
    median is the row's training part), evaluation, record and, with a run folder, rounds_jsonl and
    checkpoint (the others keyed `<phase>_seconds`, as the table's notes show them)."""
    out = {}
    for name in ("round", "evaluation", "record", "rounds_jsonl", "checkpoint"):
        values = [p[name] for p in steps if name in p]
        if values:
            out[name if name in ("round", "evaluation") else f"{name}_seconds"] = _median(values)
    return out


def engine_row(exp, config, opts: PeerOptions, algorithm: str, log: Callable, versions: dict,
               budget: float | None = None) -> PeerRow:
    """The bare engine: training + averaging of every client (CLoVE: with the loss matrix and
    clustering), no evaluation and no record."""
    fresh = build_experiment(config, setup=exp.setup_data)
    engine, algo = fresh.engine, fresh.algorithm
    ids = torch.arange(fresh.federation.num_clients)
    loop = RoundLoop(opts.cfl_rounds, opts.warmup, opts.round_budget / 3 if budget is None else budget)
    for r in loop:
        t0 = time.perf_counter()
        if algorithm == "fedavg":  # what FedAvg.run_round does, without the outcome it builds
            algo.models, _ = engine.train_and_aggregate(algo.models, ids, torch.zeros(len(ids), dtype=torch.int64), r)
        else:
            algo.run_round(r, ids)
        loop.times.append(time.perf_counter() - t0)
    other = loop.other()
    what = ("Engine.train_and_aggregate: every client's local SGD (batched) and the weighted average"
            if algorithm == "fedavg" else
            "the CLoVE strategy's run_round on the engine: loss matrix (clients x K), KMeans + matching, "
            "training + per-model averaging; no evaluation, no record")
    row = PeerRow("CFL Lab", "engine (train + average)" if algorithm == "fedavg" else "engine (CLoVE round)",
                  algorithm, len(ids), int(algo.models.shape[0]), _median(loop.steady()),
                  rounds=loop.label(), other_cpus=other, includes=what,
                  versions=versions, setup={"threads": torch.get_num_threads(), "device": "cpu"})
    log(f"  CFL Lab {row.variant:<28} {algorithm} M={row.clients:<6} {row.seconds:.4f} s/round  "
        f"other load {other if other is None else round(other, 2)}")
    return row


# -- one repetition in a fresh process ------------------------------------------------------------------
def run_cfl_process(opts: PeerOptions, algorithm: str, clients: int, workdir: Path,
                    log: Callable = print) -> list[PeerRow]:
    """CFL Lab's three rows measured in a fresh interpreter (this one's), as one repetition. A failed or
    stopped process gives one row saying so (never a traceback in the report)."""
    spec = workdir / f"cfl-{algorithm}-{clients}.spec.json"
    out = workdir / f"cfl-{algorithm}-{clients}.rows.json"
    out.unlink(missing_ok=True)
    spec.write_text(json.dumps({"options": asdict(opts), "algorithm": algorithm, "clients": clients}))
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))}
    cmd = [sys.executable, "-m", "cfl_core.bench.peer_cfl", str(spec), str(out)]
    try:
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=opts.time_limit, env=env, cwd=str(REPO))
        failure = None if done.returncode == 0 and out.exists() else \
            f"failed (exit {done.returncode}): {' / '.join(done.stderr.strip().splitlines()[-2:])[:300]}"
        for line in done.stdout.splitlines():
            log(line)
    except subprocess.TimeoutExpired:
        failure = f"stopped at the time limit ({opts.time_limit:.0f} s)"
    if failure:
        log(f"  CFL Lab {algorithm} M={clients}: {failure}")
        return [PeerRow("CFL Lab", "Experiment.step()", algorithm, clients, 0, None, status=failure)]
    return [PeerRow(**row) for row in json.loads(out.read_text())]


def main(argv: list[str] | None = None) -> int:
    spec_path, out_path = (argv if argv is not None else sys.argv[1:])[:2]
    spec = json.loads(Path(spec_path).read_text())
    opts = options_from_json(spec["options"])
    torch.set_num_threads(opts.threads)
    rows = cfl_rows(int(spec["clients"]), opts, spec["algorithm"], log=lambda line: print(line, flush=True))
    Path(out_path).write_text(json.dumps([r.to_json() for r in rows]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
