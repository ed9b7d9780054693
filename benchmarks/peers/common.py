"""What every peer script shares: the workload file, the bench's MLP in plain torch, timing and load.

The peer scripts run with the peers' interpreter (`.venv-peers`), never inside CFL Lab's
process, and they import nothing of CFL Lab but `cfl_core/bench/measure.py`, loaded by path
(standard library and torch only) so that the machine's other load is measured the bench's way.

The workload file (`.npz`, written by `cfl_core.bench.peers.write_workload`) holds, for M clients:
x_train [M, n, 64] float32, y_train [M, n] int64, x_test [M, t, 64], y_test [M, t],
init [K, D] float32 (the initial models, flat in CFL Lab's layout: fc1.weight [128, 64],
fc1.bias, fc2.weight [10, 128], fc2.bias, the same order and shapes as torch.nn.Linear),
clusters [M] (true clusters) and a JSON string `workload` (lr, momentum, batch size, epochs, seed).
"""
from __future__ import annotations

import argparse
import importlib.util
import json
import os
import platform
import statistics
import sys
import time
from pathlib import Path

import numpy as np
import torch
from torch import nn

ROOT = Path(__file__).resolve().parents[2]


def _measure_module():
    spec = importlib.util.spec_from_file_location("_cfl_bench_measure", ROOT / "cfl_core" / "bench" / "measure.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


measure = _measure_module()


def parser(description: str) -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=description)
    p.add_argument("--data", required=True, help="the workload .npz")
    p.add_argument("--out", required=True, help="where the result JSON goes")
    p.add_argument("--algorithm", default="fedavg", choices=["fedavg", "clove"])
    p.add_argument("--rounds", type=int, default=4, help="rounds in all, warm-up included")
    p.add_argument("--warmup", type=int, default=1, help="rounds excluded from the steady state")
    p.add_argument("--threads", type=int, default=2,
                   help="torch threads in all, split over the workers (pfl under torchrun: each of N processes "
                        "takes THREADS / N)")
    p.add_argument("--time-limit", type=float, default=0,
                   help="stop after the round that passes this many seconds (once --min-rounds are done)")
    p.add_argument("--min-rounds", type=int, default=0, help="rounds to run before --time-limit may stop the run")
    return p


class Workload:
    def __init__(self, path: str):
        with np.load(path) as f:
            self.x_train = torch.from_numpy(np.ascontiguousarray(f["x_train"]))
            self.y_train = torch.from_numpy(np.ascontiguousarray(f["y_train"]))
            self.x_test = torch.from_numpy(np.ascontiguousarray(f["x_test"]))
            self.y_test = torch.from_numpy(np.ascontiguousarray(f["y_test"]))
            self.init = torch.from_numpy(np.ascontiguousarray(f["init"]))
            self.clusters = np.asarray(f["clusters"])
            self.spec = json.loads(str(f["workload"]))
        self.clients = int(self.x_train.shape[0])
        self.features = int(self.x_train.shape[2])
        self.classes = int(self.spec["classes"])
        self.hidden = int(self.spec["hidden"])
        self.lr = float(self.spec["lr"])
        self.momentum = float(self.spec["momentum"])
        self.batch_size = int(self.spec["batch_size"])
        self.epochs = int(self.spec["local_epochs"])
        self.seed = int(self.spec["seed"])

    def model(self, k: int = 0) -> nn.Module:
        """The bench's MLP (features-hidden-classes, ReLU) holding initial model k."""
        net = mlp(self.features, self.hidden, self.classes)
        load_flat(net, self.init[k])
        return net


def mlp(features: int, hidden: int, classes: int) -> nn.Sequential:
    return nn.Sequential(nn.Linear(features, hidden), nn.ReLU(), nn.Linear(hidden, classes))


def load_flat(net: nn.Module, flat: torch.Tensor) -> None:
    """CFL Lab's flat layout is torch.nn.Linear's parameters, in order, concatenated."""
    offset = 0
    with torch.no_grad():
        for p in net.parameters():
            p.copy_(flat[offset:offset + p.numel()].view_as(p))
            offset += p.numel()
    assert offset == flat.numel(), "the workload's models do not fit this MLP"


class TreeLoad(measure.OtherLoad):
    """The bench's OtherLoad, with "own" CPU time = every process of this run's process tree
    (Ray's actors and raylet are children of the driver; torchrun's ranks of its agent), from /proc."""

    @staticmethod
    def _sample():
        sample = measure.OtherLoad._sample()
        if sample is None:
            return None
        busy, _, now = sample
        # under torchrun every rank is a child of torchrun's agent: count the whole launch
        root = os.getppid() if "TORCHELASTIC_RUN_ID" in os.environ else os.getpid()
        return busy, tree_cpu_seconds(measured_root(root)), now


PROFILER = "py-spy"


def measured_root(pid: int) -> int:
    """The process whose tree is this run's own: `pid`, or its parent when that is the profiler that
    `bench --peer-profile` starts the peer under. py-spy sampling every process of a Ray run took 0.2-0.3 CPUs,
    which, counted as other load, marked every profiled Flower row "machine loaded" (0.00 unprofiled)."""
    try:
        with open(f"/proc/{pid}/stat") as fh:
            text = fh.read()
        parent = int(text[text.rindex(")") + 2:].split()[1])
        with open(f"/proc/{parent}/comm") as fh:
            return parent if fh.read().strip() == PROFILER else pid
    except (OSError, ValueError, IndexError):
        return pid


def tree_cpu_seconds(root: int) -> float:
    """user + system CPU seconds of `root` and all its live descendants (Linux /proc)."""
    parents, cpu = {}, {}
    ticks = os.sysconf("SC_CLK_TCK")
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as fh:
                text = fh.read()
        except OSError:
            continue
        fields = text[text.rindex(")") + 2:].split()
        pid = int(entry)
        parents[pid] = int(fields[1])
        cpu[pid] = (int(fields[11]) + int(fields[12])) / ticks
    total = 0.0
    for pid in cpu:
        p = pid
        while p and p != root and p in parents:
            p = parents[p]
        if p == root:
            total += cpu[pid]
    return total


class RoundClock:
    """Per-round wall times (phases too), and the machine's other load over the steady-state rounds."""

    def __init__(self, warmup: int):
        self.warmup = warmup
        self.began = time.perf_counter()
        self.rounds: list[dict] = []
        self.load = None
        self.other_cpus = None
        self.startup_seconds = None
        self.out_of_time = False  # stopped by --time-limit after --min-rounds: a finished run, with fewer rounds
        self._current: dict | None = None
        self._phase_start: dict[str, float] = {}

    def start_round(self) -> None:
        if len(self.rounds) == self.warmup and self.load is None:
            self.load = TreeLoad()
            # start-up: from the workload loaded to the first timed round (the framework's start,
            # its workers or actors, and the warm-up rounds)
            self.startup_seconds = time.perf_counter() - self.began
        self._current = {"start": time.perf_counter()}

    def time_is_up(self, args) -> bool:
        """Whether the run should stop after this round: --time-limit passed and --min-rounds done."""
        up = bool(args.time_limit) and time.perf_counter() - self.began > args.time_limit \
            and len(self.rounds) >= getattr(args, "min_rounds", 0)
        self.out_of_time = self.out_of_time or up
        return up

    def finished(self, args) -> bool:
        return len(self.rounds) >= args.rounds or self.out_of_time

    def phase(self, name: str, start: bool) -> None:
        now = time.perf_counter()
        if start:
            self._phase_start[name] = now
        elif name in self._phase_start and self._current is not None:
            self._current[name] = self._current.get(name, 0.0) + now - self._phase_start.pop(name)

    def end_round(self, **facts) -> None:
        current = self._current or {"start": time.perf_counter()}
        current["seconds"] = time.perf_counter() - current.pop("start")
        current.update(facts)
        self.rounds.append(current)
        self._current = None
        if self.load is not None:
            self.other_cpus = self.load.cpus()


def versions(*packages: str) -> dict:
    from importlib.metadata import PackageNotFoundError, version

    out = {"python": platform.python_version(), "torch": torch.__version__}
    for name in packages:
        try:
            out[name] = version(name)
        except PackageNotFoundError:
            out[name] = None
    return out


def write_result(path: str, framework: str, args, workload: Workload, clock: RoundClock, setup: dict,
                 includes: str, extra: dict | None = None, packages: tuple[str, ...] = ()) -> dict:
    steady = [r["seconds"] for r in clock.rounds[args.warmup:]]
    result = {
        "framework": framework,
        "algorithm": args.algorithm,
        "clients": workload.clients,
        "models": int(workload.init.shape[0]),
        "setup": setup,
        "versions": versions(*packages),
        "rounds": clock.rounds,
        "warmup_rounds": args.warmup,
        "steady_rounds": len(steady),
        "seconds_per_round": statistics.median(steady) if steady else None,
        "other_cpus": clock.other_cpus,
        "startup_seconds": clock.startup_seconds,
        "wall_seconds": time.perf_counter() - clock.began,
        "includes": includes,
        "machine": {"cpu": measure.cpu_model(), "cpu_count": os.cpu_count(), "load_average": measure.load_average()},
        "argv": sys.argv[1:],
    }
    result.update(extra or {})
    Path(path).write_text(json.dumps(result, indent=1))
    return result


def accuracy(net: nn.Module, x: torch.Tensor, y: torch.Tensor) -> tuple[float, int]:
    """(correct, count) of one client's test set."""
    with torch.no_grad():
        return float((net(x).argmax(-1) == y).sum()), int(len(y))


def local_sgd(net: nn.Module, x: torch.Tensor, y: torch.Tensor, lr: float, momentum: float, batch_size: int,
              epochs: int, generator: torch.Generator) -> float:
    """Plain local training, the way a Flower user writes it: SGD over shuffled minibatches
    (tensor slices; a DataLoader would only add overhead). Returns the mean minibatch loss."""
    opt = torch.optim.SGD(net.parameters(), lr=lr, momentum=momentum)
    loss_fn = nn.CrossEntropyLoss()
    total, steps = 0.0, 0
    n = len(y)
    for _ in range(epochs):
        order = torch.randperm(n, generator=generator)
        for lo in range(0, n, batch_size):
            idx = order[lo:lo + batch_size]
            opt.zero_grad()
            loss = loss_fn(net(x[idx]), y[idx])
            loss.backward()
            opt.step()
            total += float(loss.detach())
            steps += 1
    return total / max(1, steps)


def mean_loss(net: nn.Module, x: torch.Tensor, y: torch.Tensor) -> float:
    with torch.no_grad():
        return float(nn.functional.cross_entropy(net(x), y))


def cluster_and_match(losses: np.ndarray, k: int, seed: int) -> np.ndarray:
    """CLoVE's server step, as a user of either peer would write it with scikit-learn and SciPy:
    KMeans (n_init = 10) on the loss vectors, then clusters matched to models by the
    minimum summed loss (linear_sum_assignment). Returns the model of every client."""
    from scipy.optimize import linear_sum_assignment
    from sklearn.cluster import KMeans

    labels = KMeans(k, n_init=10, random_state=seed).fit_predict(losses)
    clusters = int(labels.max()) + 1
    cost = np.zeros((clusters, losses.shape[1]))
    np.add.at(cost, labels, losses)
    rows, cols = linear_sum_assignment(cost)
    to_model = dict(zip(rows.tolist(), cols.tolist()))
    return np.array([to_model[j] for j in labels], dtype=np.int64)


def ari(truth: np.ndarray, labels: np.ndarray) -> float:
    from sklearn.metrics import adjusted_rand_score

    return float(adjusted_rand_score(truth, labels))
