"""The peer benchmark's data: its options, its rows and the one workload every framework gets.

The data is built once per size through CFL Lab's public API (`Experiment` on digits with
`sample_with_replacement`), and the very same arrays (and initial models) are written to a `.npz`
that each peer script reads (`benchmarks/peers/*.py`). Nothing here imports a peer framework.
"""
from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[2]
PEER_SCRIPTS = {"flower": "benchmarks/peers/flower_fedavg.py", "pfl": "benchmarks/peers/pfl_fedavg.py"}
DEFAULT_PEER_PYTHON = REPO / ".venv-peers" / "bin" / "python"
FEATURES, CLASSES, HIDDEN = 64, 10, 128  # digits 8x8 and the bench's MLP (cfl_core/engine/models.py: MLP)
MIN_STEADY_ROUNDS = 3  # a repetition stops at its time budget only after this many timed rounds


@dataclass
class PeerOptions:
    peers: tuple[str, ...] = ("flower", "pfl")
    sizes: tuple[int, ...] = (100, 1000)
    rounds: int = 26  # a peer's rounds per repetition, warm-up included (fewer when round_budget runs out)
    cfl_rounds: int = 101  # CFL Lab's rounds per row and repetition, warm-up included (its rounds are short)
    warmup: int = 1
    repetitions: int = 5  # fresh processes per framework and setup, alternating (CFL Lab, peer, CFL Lab, peer ...)
    round_budget: float = 45.0  # seconds: a repetition stops after the round that passes this (CFL Lab: per process)
    samples: int = 80
    test_samples: int = 40
    lr: float = 0.05
    momentum: float = 0.9  # the bench's MLP workload uses SGD momentum 0.9 (BenchOptions): every framework alike
    batch_size: int = 10
    local_epochs: int = 1
    threads: int = 2
    seed: int = 0
    time_limit: float = 900.0  # seconds per repetition of a peer (start-up included); past it the peer is stopped
    clove_clients: int = 1000  # the CLoVE row (0 skips it)
    clove_models: int = 4
    flower_cpus: tuple[float, ...] = (1.0, 2.0)  # Flower client resources tried; the fastest is kept
    pfl_setups: tuple[str, ...] = ("2x1", "1x2")  # processes x threads: torchrun with two, or one process
    check_rounds: int = 6  # the learning check compares test accuracy after this many rounds (fewer if not run)
    busy_above: float = 0.2  # other CPUs above this: the machine is busy and no row is written
    quiet_wait: float = 300.0  # seconds to wait for a busy machine to become quiet before refusing
    quiet_sample: float = 2.0  # seconds over which the other load is read before each repetition
    allow_busy: bool = False  # measure on a busy machine anyway: every row marked, never quoted
    peer_python: str | None = None
    profile: bool = False  # a separate py-spy pass after the timed rows (where the time goes; never timed)
    workdir: str | None = None

    def python(self) -> Path:
        return Path(self.peer_python) if self.peer_python else DEFAULT_PEER_PYTHON


@dataclass
class PeerRow:
    framework: str  # "CFL Lab", "flower", "pfl"
    variant: str  # what exactly ran (engine / Experiment.step() / num_cpus=1 / 2 processes x 1 thread ...)
    algorithm: str
    clients: int
    models: int
    seconds: float | None  # steady-state seconds per round (median; over repetitions: the median of theirs)
    train_seconds: float | None = None  # the training + averaging part, where it can be told apart
    eval_seconds: float | None = None
    phases: dict = field(default_factory=dict)  # other parts of a round (loss matrix, clustering, ...)
    rounds: str = ""  # "3 of 4" steady rounds taken
    accuracy: float | None = None  # mean client test accuracy after `accuracy_after` rounds
    accuracy_after: int | None = None
    ari: float | None = None
    startup_seconds: float | None = None
    other_cpus: float | None = None  # the most of any repetition
    status: str = "ok"
    best: bool = True  # the fastest setup of this framework for this row (others are kept as tried)
    includes: str = ""
    versions: dict = field(default_factory=dict)
    setup: dict = field(default_factory=dict)
    profile: dict = field(default_factory=dict)
    note: str = ""
    repetitions: list = field(default_factory=list)  # each repetition's seconds per round, in run order
    rep_other_cpus: list = field(default_factory=list)  # each repetition's other load
    accuracy_curve: list = field(default_factory=list)  # [rounds done, mean test accuracy] pairs
    busy: bool = False  # measured on a busy machine (--allow-busy): never quoted
    profiled: bool = False  # the separate py-spy pass: explains where time goes, never timed or quoted

    def to_json(self) -> dict:
        return asdict(self)

    def accuracy_at(self, rounds: int) -> tuple[float | None, int | None]:
        """(accuracy, rounds) after `rounds` rounds, or after the most rounds done below that."""
        done = [(int(k), v) for k, v in self.accuracy_curve if v is not None and int(k) <= rounds]
        if not done:
            return self.accuracy, self.accuracy_after
        k, v = max(done)
        return v, k


@dataclass
class PeerReport:
    facts: dict
    options: PeerOptions
    rows: list[PeerRow]
    seconds: float = 0.0


def options_from_json(doc: dict) -> PeerOptions:
    known = PeerOptions.__dataclass_fields__
    return PeerOptions(**{k: tuple(v) if isinstance(v, list) else v for k, v in doc.items() if k in known})


# -- the workload, built through the public API ------------------------------------------------------
def workload_config(clients: int, algorithm: str = "fedavg", opts: PeerOptions | None = None):
    """The ExperimentConfig of a row: digits (64 features, 10 classes), 80 samples per client drawn
    with replacement, the bench's MLP. FedAvg: one IID cluster; CLoVE: 4 rotation clusters."""
    from ..config import ExperimentConfig

    o = opts or PeerOptions()
    clove = algorithm == "clove"
    clusters = 4 if clove else 1
    if clients % clusters:
        raise ValueError(f"{algorithm} needs a multiple of {clusters} clients, got {clients}")
    return ExperimentConfig(
        dataset="digits", partition="feature-skew" if clove else "iid", clusters=clusters,
        clients_per_cluster=clients // clusters, samples_per_client=o.samples,
        test_samples_per_client=o.test_samples, sample_with_replacement=True, algorithm=algorithm,
        models=o.clove_models if clove else None, model="mlp", rounds=max(o.rounds, o.cfl_rounds, 1),
        local_epochs=o.local_epochs, batch_size=o.batch_size, lr=o.lr, optimizer="sgd", momentum=o.momentum,
        seed=o.seed, device="cpu",
        # every round clusters (never freezes), and round 0 clusters the initial models' losses as the peers do
        options={"stable_rounds": 1_000_000, "first_assignment": "evaluation"} if clove else {})


def build_experiment(config, out_dir=None, setup=None):
    from ..experiment import Experiment

    return Experiment(config, out_dir=out_dir, setup=setup)


def workload_arrays(experiment) -> dict[str, np.ndarray]:
    """The arrays every framework gets: the experiment's clients and its initial models."""
    fed = experiment.federation
    if int(fed.n_train.min()) != int(fed.n_train.max()) or int(fed.n_test.min()) != int(fed.n_test.max()):
        raise ValueError("the peer workload needs equal client sizes")
    m = fed.num_clients
    return {
        "x_train": fed.x_train.reshape(m, fed.x_train.shape[1], -1).numpy().astype(np.float32),
        "y_train": fed.y_train.numpy().astype(np.int64),
        "x_test": fed.x_test.reshape(m, fed.x_test.shape[1], -1).numpy().astype(np.float32),
        "y_test": fed.y_test.numpy().astype(np.int64),
        "init": experiment.models_snapshot().numpy().astype(np.float32),
        "clusters": experiment.true_clusters.numpy().astype(np.int64),
    }


def write_workload(path: str | Path, experiment, opts: PeerOptions) -> Path:
    arrays = workload_arrays(experiment)
    spec = {"lr": opts.lr, "momentum": opts.momentum, "batch_size": opts.batch_size,
            "local_epochs": opts.local_epochs, "seed": opts.seed, "classes": CLASSES, "hidden": HIDDEN,
            "algorithm": experiment.config.algorithm, "config": experiment.config.to_dict()}
    path = Path(path)
    np.savez(path, workload=np.array(json.dumps(spec)), **arrays)
    return path
