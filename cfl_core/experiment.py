"""An experiment: a config turned into data, a federation, an engine and an algorithm, stepped round by round.

    exp = Experiment(config, out_dir="runs/my-run")
    for record in exp:          # or exp.step() one round at a time (pause / step / stop)
        print(record.round, record.accuracy, record.ari)
    exp.close()                 # writes summary.json (status finished / stopped)

The folder is written as the run goes; `load_run(folder)` reads it back.
"""
from __future__ import annotations

import platform
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterator

import numpy as np
import torch
from sklearn.metrics import adjusted_rand_score, normalized_mutual_info_score

from . import __version__
from .algorithms import ALGORITHMS, RunContext
from .config import ExperimentConfig
from .data import load_dataset
from .dynamics import SHIFTS, join_rounds
from .engine.core import Engine
from .engine.federation import Federation, resolve_device
from .engine.models import build_model, default_model
from .engine.seeding import numpy_rng
from .engine.training import TrainConfig
from .partition import build_partition
from .records import FAILED, FINISHED, STOPPED, RoundRecord, RunWriter, summarize


@dataclass
class Setup:
    """Data, partition and federation: built once and shared by runs that must see identical clients."""

    config: ExperimentConfig
    dataset: object
    partition: object
    federation: Federation

    @classmethod
    def build(cls, config: ExperimentConfig) -> "Setup":
        config.validate()
        dataset = load_dataset(config.dataset, seed=config.seed)
        partition = build_partition(dataset, config.partition_config())
        clients = partition.materialize(dataset)
        info = dataset.info
        fed = Federation.from_clients(clients, info.task, info.num_classes, resolve_device(config.device))
        return cls(config, dataset, partition, fed)

    def same_clients(self, other: ExperimentConfig) -> bool:
        """The same clients, held on the same device (only then may a run reuse this set-up)."""
        return self.config.data_key() == other.data_key() and self.config.device == other.device


def _metric(fn, truth: np.ndarray, labels: np.ndarray) -> float | None:
    return float(fn(truth, labels)) if len(truth) >= 2 else None


class Experiment:
    def __init__(self, config: ExperimentConfig, out_dir: str | Path | None = None, setup: Setup | None = None):
        config.validate()
        if setup is None or not setup.same_clients(config):
            setup = Setup.build(config)
        self.config = config
        self.setup_data = setup
        fed = setup.federation
        if config.shift != "none":
            fed = _copy_federation(fed)  # shifts move data between clients: never touch a shared setup
        self.federation = fed
        info = setup.dataset.info
        family = config.model or default_model(info.task, info.input_shape, config.unsupervised)
        outputs = 1 if info.task == "regression" else info.num_classes
        self.spec = build_model(family, info.input_shape, outputs, info.task)
        train = TrainConfig(config.local_epochs, config.batch_size, config.lr, config.optimizer,
                            config.momentum)
        self.engine = Engine(self.spec, fed, train, config.seed, config.aggregation)
        self.true_clusters = fed.clusters.clone()
        self.joins = join_rounds(config, self.true_clusters)
        self.shift = SHIFTS[config.shift](config, fed, self.true_clusters) if config.shift != "none" else None
        algo_cls = ALGORITHMS[config.algorithm]
        ctx = RunContext(config, self.engine, algo_cls.parse_options(config.options), lambda: self.true_clusters)
        self.algorithm = algo_cls(ctx)
        self.round = 0
        self.records: list[RoundRecord] = []
        self.status: str | None = None
        self.truth_theta = setup.partition.truth.get("theta") if hasattr(setup.partition, "truth") else None
        self.cluster_truth = getattr(setup.partition, "cluster_truth", True)
        self.writer = RunWriter(out_dir) if out_dir is not None else None
        self.folder = Path(out_dir) if out_dir is not None else None
        if self.writer:
            self.writer.write_json("config.json", config.to_dict())
            self.writer.write_json("partition.json", setup.partition.to_json())
            self.writer.write_json("meta.json", self.meta())
        present = torch.nonzero(self.joins == 0).squeeze(1)
        # The set-up's traffic (restarts, group cold start) is its own window, recorded with round 0.
        self.engine.traffic.open()
        self._setup_extras = self.algorithm.setup(present)
        self._setup_traffic = self.engine.traffic.totals

    # -- facts ---------------------------------------------------------------
    def meta(self) -> dict:
        fed = self.federation
        return {
            "cfl_core_version": __version__,
            "device": str(fed.device),
            "device_name": torch.cuda.get_device_name(fed.device) if fed.device.type == "cuda" else platform.processor() or "cpu",
            "model": self.spec.describe(),
            "model_family": self.spec.name,
            "model_bytes": self.spec.bytes_per_model,
            "clients": fed.num_clients,
            "algorithm_label": ALGORITHMS[self.config.algorithm].label,
            "has_loss_vectors": ALGORITHMS[self.config.algorithm].has_loss_vectors,
            "task": "reconstruction" if self.config.unsupervised else fed.task,
            "started_at": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
            "torch": torch.__version__,
        }

    @property
    def done(self) -> bool:
        return self.status is not None or self.round >= self.config.rounds

    # -- stepping ---------------------------------------------------------------
    def step(self) -> RoundRecord:
        """Run one round and record it (written to disk before this returns)."""
        if self.done:
            raise RuntimeError("the experiment has no rounds left")
        r = self.round
        started = time.perf_counter()
        extras: dict = dict(self._setup_extras) if r == 0 else {}
        self.engine.traffic.open()
        if self.shift is not None:
            extras.update(self.shift.apply(r))
        newcomers = torch.nonzero(self.joins == r).squeeze(1) if r > 0 else torch.zeros(0, dtype=torch.int64)
        if len(newcomers):
            self.algorithm.place_newcomers(newcomers, r)
            extras["newcomers"] = newcomers.tolist()
        participants = self._participants(r)
        outcome = self.algorithm.run_round(r, participants)
        down, up = self.engine.traffic.totals
        if r == 0:
            down, up = down + self._setup_traffic[0], up + self._setup_traffic[1]
        record = self._record(r, participants, outcome, extras, down, up)
        record.seconds = time.perf_counter() - started  # the round and its evaluation
        self.records.append(record)
        if self.writer:
            self.writer.append(record)
        self.round += 1
        return record

    def _participants(self, r: int) -> torch.Tensor:
        joined = torch.nonzero(self.joins <= r).squeeze(1).numpy()
        count = max(1, int(round(self.config.participation * len(joined))))
        if count >= len(joined):
            return torch.as_tensor(joined, dtype=torch.int64)
        chosen = numpy_rng(self.config.seed, "participants", r).choice(joined, size=count, replace=False)
        return torch.as_tensor(np.sort(chosen), dtype=torch.int64)

    def _record(self, r, participants, outcome, extras, bytes_down, bytes_up) -> RoundRecord:
        models, model_of = self.algorithm.eval_models()
        joined = self.joins <= r
        placed = torch.nonzero((model_of >= 0) & joined).squeeze(1)
        evaluation = self.algorithm.evaluate(placed)
        n = self.federation.num_clients
        acc: list = [None] * n
        loss: list = [None] * n
        for i, c in enumerate(placed.tolist()):
            loss[c] = float(evaluation.loss[i])
            if evaluation.accuracy is not None:
                acc[c] = float(evaluation.accuracy[i])
        n_test = self.federation.n_test.cpu()[placed].float()
        accuracy = weighted = None
        if evaluation.accuracy is not None and len(placed):
            accuracy = float(evaluation.accuracy.mean())
            weighted = float((evaluation.accuracy * n_test).sum() / n_test.sum().clamp(min=1))
        truth = self.true_clusters[placed].numpy()
        labels = model_of[placed].numpy()
        all_extras = {**extras, **outcome.extras}
        if self.config.protocol == "ifca" and self.algorithm.has_clusters and not self.algorithm.one_model_per_client:
            from .protocols import TEST_MACHINE_KEY, test_machine_accuracy

            # every joined client's test split is a test machine, with or without a model of its own
            all_extras[TEST_MACHINE_KEY] = test_machine_accuracy(self.engine, models,
                                                                 torch.nonzero(joined).squeeze(1))
        scored = self.algorithm.has_clusters and self.cluster_truth
        if not scored:
            # no clusters to score (a personalised algorithm) or no truth to score them against (natural
            # clients without imposed clusters): null, never 0, and said so
            all_extras["ari_applicable"] = False
            all_extras["ari_note"] = ("no clusters: each client has a personalised model"
                                      if not self.algorithm.has_clusters else "no true clusters to compare with")
        if self.truth_theta is not None:
            theta = torch.as_tensor(np.asarray(self.truth_theta), dtype=torch.float32)
            own = models.cpu()[model_of[placed]]
            all_extras["theta_error"] = float((own - theta[self.true_clusters[placed]]).norm(dim=1).mean())
        return RoundRecord(
            round=r,
            phase=outcome.phase,
            participants=participants.tolist(),
            assignments=torch.where(joined, model_of, -1).tolist(),
            loss_matrix=outcome.loss_matrix.tolist() if outcome.loss_matrix is not None else None,
            client_accuracy=acc,
            client_loss=loss,
            accuracy=accuracy,
            weighted_accuracy=weighted,
            ari=_metric(adjusted_rand_score, truth, labels) if scored else None,
            nmi=_metric(normalized_mutual_info_score, truth, labels) if scored else None,
            models_in_use=int(len(np.unique(labels))),
            bytes_down=int(bytes_down),
            bytes_up=int(bytes_up),
            seconds=0.0,
            true_clusters=self.true_clusters.tolist(),
            loss=float(evaluation.loss.mean()) if len(placed) else None,
            train_loss=float(outcome.train_loss.nanmean()) if outcome.train_loss is not None and len(outcome.train_loss) else None,
            evaluated=int(len(placed)),
            extras=all_extras,
        )

    def __iter__(self) -> Iterator[RoundRecord]:
        while not self.done:
            yield self.step()

    def run(self, on_round: Callable[[RoundRecord], None] | None = None,
            should_stop: Callable[[], bool] | None = None) -> dict:
        """Run to the end (or until should_stop()), then write the summary. Failures are recorded too."""
        try:
            while not self.done:
                if should_stop and should_stop():
                    return self.close(STOPPED)
                record = self.step()
                if on_round:
                    on_round(record)
        except BaseException:
            self.close(FAILED)
            raise
        return self.close(FINISHED)

    def summary(self, status: str) -> dict:
        return summarize(self.config.algorithm, self.records, status, self.config.protocol)

    def close(self, status: str | None = None) -> dict:
        """Write summary.json; the status is finished when every round ran, else stopped."""
        if status is None:
            status = FINISHED if self.round >= self.config.rounds else STOPPED
        self.status = status
        summary = self.summary(status)
        if self.writer:
            self.writer.write_json("summary.json", summary)
            self.writer.close()
        return summary

    def models_snapshot(self) -> torch.Tensor:
        return self.algorithm.eval_models()[0].detach().cpu().clone()


def _copy_federation(fed: Federation) -> Federation:
    import dataclasses

    return dataclasses.replace(fed, **{
        name: getattr(fed, name).clone()
        for name in ("x_train", "y_train", "n_train", "x_test", "y_test", "n_test", "clusters")
    })
