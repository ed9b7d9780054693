"""An experiment: a config turned into data, a federation, an engine and an algorithm, stepped round by round.

    exp = Experiment(config, out_dir="runs/my-run")
    for record in exp:          # or exp.step() one round at a time (pause / step / stop)
        print(record.round, record.accuracy, record.ari)
    exp.close()                 # writes summary.json (status finished / stopped)

The folder is written as the run goes; `load_run(folder)` reads it back. After
every round a checkpoint of the run's state (`checkpoint.pt`, see
cfl_core.checkpoint) replaces the previous one, and `Experiment.resume(folder)`
continues a stopped or interrupted run from its last finished round with
records identical to those of a run that never stopped.

Training that blows up (non-finite losses or parameters) ends the run with
status `diverged` and a message naming the likely cause; the finished rounds
stay in the folder.
"""
from __future__ import annotations

import math
import os
import platform
import random
import time
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterator

import numpy as np
import torch

from . import __version__
from . import checkpoint as ckpt
from .algorithms import ALGORITHMS, RunContext
from .config import ExperimentConfig
from .data import load_dataset
from .errors import ConfigError, Diverged, ResumeError
from .files import kind_of
from .folder_lock import FolderBusy, FolderLock
from .conditions import build as build_conditions
from .conditions.attacks import flip_labels
from .conditions.privacy import PrivacyLedger
from .conditions.unseen import assign_and_evaluate, due as unseen_due
from .dynamics import NEVER, SHIFTS, join_rounds
from .engine.core import Engine, finite
from .engine.federation import Federation, resolve_device
from .engine.models import build_model, default_model
from .engine.seeding import numpy_rng
from .engine.paths import expected_path, observed_path
from .engine.training import TRAINING_PATHS, TrainConfig
from .jsonio import read_json
from .partition import build_partition
from .records import (CHECKPOINT_FILE, DIVERGED, FAILED, FINISHED, ROUNDS_FILE, STOPPED, SUMMARY_FILE, RoundRecord,
                      RunFolderError, RunWriter, clear_run_files, holds_run, summarize)
from .run_reader import load_run, read_rounds
from .scores import adjusted_rand, normalized_mutual_info


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


# A run has diverged when its mean training or test loss exceeds this many times the test loss of the initial
# model (about 2.3 for 10 classes): far beyond any bad-but-learning run (lr=10 on digits stays under 30x),
# and what a learning rate of 100 or more reaches within a round or two (1e4x to 1e20x).
DIVERGENCE_FACTOR = 1000.0


def _metric(fn, truth: np.ndarray, labels: np.ndarray) -> float | None:
    return float(fn(truth, labels)) if len(truth) >= 2 else None


class Experiment:
    def __init__(self, config: ExperimentConfig, out_dir: str | Path | None = None, setup: Setup | None = None,
                 *, overwrite: bool = False, save_every: float = 0.0, _resume=None, _lock=None):
        """`out_dir`: the run folder (None: nothing is written). A folder that already holds a run is refused
        unless `overwrite` (its run files are replaced); `Experiment.resume` continues one instead.
        `save_every`: seconds between checkpoints (0: after every round, as a run does); each round's line is
        written as it ends, synced to disk with the next checkpoint (a sweep's runs in flight save every 30 s:
        a checkpoint costs milliseconds, which is most of a small run's round)."""
        config.validate()
        self.save_every = float(save_every)
        self._saved_at = time.perf_counter()
        if out_dir is not None and _resume is None and holds_run(out_dir) and not overwrite:
            raise ConfigError("out_dir", str(out_dir), "a folder that holds no run yet (it holds one: overwrite "
                                                       "it, or resume it)")
        # (an overwritten run's files are cleared by the writer, under the folder's lock: never another's live run)
        if setup is None or not setup.same_clients(config):
            setup = Setup.build(config)
        self.config = config
        self.setup_data = setup
        fed = setup.federation
        # drop-outs, stragglers, privacy noise, attackers, unseen clients (cfl_core/conditions)
        self.conditions = build_conditions(config, fed.num_clients, fed.clusters)
        label_flip = bool(self.conditions.active and self.conditions.malicious and config.attack == "label-flip")
        if config.shift != "none" or label_flip:
            # shifts move data between clients, attackers flip their labels: never touch a shared setup
            fed = _copy_federation(fed)
        if label_flip:
            flip_labels(fed.y_train, fed.n_train, self.conditions.malicious, fed.num_classes)
        self.federation = fed
        info = setup.dataset.info
        family = config.model or default_model(info.task, info.input_shape, config.unsupervised)
        outputs = 1 if info.task == "regression" else info.num_classes
        self.spec = build_model(family, info.input_shape, outputs, info.task)
        train = TrainConfig(config.local_epochs, config.batch_size, config.lr, config.optimizer,
                            config.momentum)
        self.engine = Engine(self.spec, fed, train, config.seed, config.aggregation)
        self.engine.conditions = self.conditions
        self.true_clusters = fed.clusters.clone()
        unseen = getattr(self.conditions, "unseen", [])
        self.joins = join_rounds(config, self.true_clusters, exclude=unseen)
        if unseen:
            self.joins[torch.as_tensor(unseen)] = NEVER  # held out: they never train
        self.shift = SHIFTS[config.shift](config, fed, self.true_clusters) if config.shift != "none" else None
        algo_cls = ALGORITHMS[config.algorithm]
        ctx = RunContext(config, self.engine, algo_cls.parse_options(config.options), lambda: self.true_clusters)
        self.algorithm = algo_cls(ctx)
        self.test_machines = self._test_machine_engine(setup) if self._reports_test_machines() else None
        self.round = 0
        # training calls per path (compiled kernel / PyTorch), checkpointed: see engine/paths.py
        self.training_calls: dict[str, int] = {}
        self.expected_path = expected_path(self.spec, config.optimizer, fed.device)
        self.records: list[RoundRecord] = []
        self.status: str | None = None
        self.checkpoint_bytes = 0  # size of the latest checkpoint written
        # where the latest step's time went, in seconds (the benchmark reads it; never part of a record):
        # round (the algorithm's training and averaging), evaluation, record (the rest of building it),
        # and with a run folder rounds_jsonl (the line, flushed and fsynced) and checkpoint
        self.phase_seconds: dict[str, float] = {}
        self.truth_theta = setup.partition.truth.get("theta") if hasattr(setup.partition, "truth") else None
        self.cluster_truth = getattr(setup.partition, "cluster_truth", True)
        self.folder = Path(out_dir) if out_dir is not None else None
        resumed = self._restore(_resume) if _resume is not None else None
        self.writer = RunWriter(out_dir, resume=resumed is not None, replace=overwrite or _resume is not None,
                                lock=_lock) if out_dir is not None else None
        try:
            self._start(config, setup, fed, resumed, _resume)
        except BaseException:
            if self.writer is not None:
                self.writer.close()  # releases the folder's lock at once
            raise

    def _start(self, config: ExperimentConfig, setup: Setup, fed: Federation, resumed: int | None, _resume) -> None:
        """The run's first files, its initial loss and the algorithm's set-up (or, resumed, the meta's note)."""
        if self.writer and resumed is None:
            self.writer.write_json("config.json", config.to_dict())
            self.writer.write_json("partition.json", setup.partition.to_json())
            self.writer.write_json("meta.json", self.meta())
        elif self.writer:
            meta = dict(_resume.meta)
            meta["resumed"] = [*meta.get("resumed", []), {"at": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
                                                          "round": self.round}]
            self.writer.write_json("meta.json", meta)
        # what "blown up" is measured against: the test loss of the run's initial model (the same for every
        # algorithm of this seed), computed, not recorded
        base = self.spec.init(config.seed, "model", 0).to(fed.device)[None]
        everyone = torch.arange(fed.num_clients)
        self.initial_loss = float(self.engine.evaluate(base, torch.zeros_like(everyone), everyone).loss.mean())
        self._setup_extras, self._setup_traffic = {}, (0, 0)
        if resumed is None:
            present = torch.nonzero(self.joins == 0).squeeze(1)
            # The set-up's traffic (restarts, group cold start) is its own window, recorded with round 0.
            self.engine.traffic.open()
            if self.conditions.active:
                self.conditions.begin_setup(len(present), len(present))
            try:
                with self._counting_paths():
                    self._setup_extras = self.algorithm.setup(present)
                if self.conditions.active:
                    self.conditions.end_window()
            except Diverged as exc:
                error = Diverged(exc.what, "during the set-up", config.lr)
                self.close(DIVERGED, error=str(error))
                raise error from None
            self._setup_traffic = self.engine.traffic.totals

    # -- resuming ----------------------------------------------------------------------------------
    @classmethod
    def resume(cls, folder: str | Path, setup: Setup | None = None, *, save_every: float = 0.0) -> "Experiment":
        """The run saved in `folder`, ready to continue from its last finished round (ResumeError if it cannot).

        Its next records are those the run would have written had it never stopped. A run
        without a checkpoint (stopped before its first round ended) starts again from round 0."""
        folder = Path(folder)
        if not os.path.lexists(folder / "config.json") or not folder.is_dir():
            raise ResumeError(f"{folder} is not a run folder (no config.json)")
        try:  # before anything is read: a run another process still writes is never taken over
            lock = FolderLock(folder)
        except FolderBusy as exc:
            raise ResumeError(f"{folder} cannot be resumed while it runs: {exc}") from None
        except OSError as exc:
            raise ResumeError(f"{folder} cannot be opened ({exc.strerror or type(exc).__name__})") from None
        try:
            return cls._resume_locked(folder, setup, lock, save_every)
        except BaseException:
            lock.release()
            raise

    @classmethod
    def _resume_locked(cls, folder: Path, setup: Setup | None, lock, save_every: float = 0.0) -> "Experiment":
        try:
            saved = load_run(folder)
        except FileNotFoundError:
            raise ResumeError(f"{folder} is not a run folder (no config.json)") from None
        if saved.status == FINISHED:
            raise ResumeError(f"{folder} is finished ({len(saved.records)} rounds): there is nothing to resume")
        if saved.status == DIVERGED:
            raise ResumeError(f"{folder} diverged: resuming would diverge again the same way; run it again with a "
                              "smaller learning rate")
        if saved.problems:
            raise ResumeError(f"{folder} is damaged and cannot be resumed: {saved.problems[0]}")
        try:
            config = ExperimentConfig.from_dict(saved.config)
        except ConfigError as exc:
            raise ResumeError(f"{folder}/config.json cannot be resumed: {exc}") from None
        return cls(config, out_dir=folder, setup=setup, save_every=save_every, _resume=saved, _lock=lock)

    def _restore(self, saved) -> int | None:
        """Put the checkpoint of `saved` (a SavedRun of this config) back; None when there is none (a fresh start)."""
        folder = self.folder
        path = folder / CHECKPOINT_FILE
        if not os.path.lexists(path):
            clear_run_files(folder)  # nothing finished is kept without a checkpoint: start from round 0
            return None
        kind = kind_of(os.lstat(path).st_mode)
        if kind is not None:  # a named pipe would block torch.load forever
            raise ResumeError(f"{path} is {kind}, not a checkpoint file")
        try:
            tree, tensors = ckpt.load(path)
            state = ckpt.unpack(tree, tensors, self.algorithm.state_classes, self.federation.device)
        except (ckpt.CheckpointError, KeyError, TypeError, ValueError) as exc:
            raise ResumeError(f"{path} cannot be used: {exc}") from None
        if _filled(state.get("config")) != self.config.to_dict():
            raise ResumeError(f"{path} belongs to another config than {folder}/config.json")
        done = int(state["round"])
        rounds = read_rounds(folder)
        if [r.round for r in rounds.records[:done]] != list(range(done)):
            raise ResumeError(f"{folder}/{ROUNDS_FILE} holds {len(rounds.records)} rounds, but the checkpoint is "
                              f"after round {done - 1}: the rounds before it are missing")
        # rounds written after the checkpoint (a kill between the two writes) are run again, identically
        _keep_lines(folder / ROUNDS_FILE, done)
        summary = folder / SUMMARY_FILE
        if summary.exists():
            summary.unlink()  # the run is going again
        if self.shift is not None:  # shifts are replayed: same seed, same rounds, same data moves
            for r in range(done):
                self.shift.apply(r)
        if not torch.equal(self.true_clusters, state["true_clusters"]) or \
                not torch.equal(self.federation.n_train.cpu(), state["n_train"]):
            raise ResumeError(f"{path}: replaying the distribution shift did not give the saved clients")
        self.algorithm.load_state_dict(state["algorithm"])
        self.training_calls = dict(state.get("training_calls") or {})  # absent in checkpoints of earlier versions
        if self.conditions.active:
            self.conditions.ledger = PrivacyLedger(state.get("privacy_events") or [])
        rng = state["rng"]
        torch.set_rng_state(rng["torch"])
        np.random.set_state(rng["numpy"])
        random.setstate(rng["python"])
        self.round = done
        self.records = list(rounds.records[:done])
        return done

    def _save_checkpoint(self) -> None:
        """The state after the round just finished (replacing the previous checkpoint)."""
        state = {
            "round": self.round, "config": self.config.to_dict(), "algorithm": self.algorithm.state_dict(),
            "true_clusters": self.true_clusters, "n_train": self.federation.n_train.cpu(),
            "training_calls": dict(self.training_calls),
            "privacy_events": list(self.conditions.ledger.events) if self.conditions.active else [],
            "rng": {"torch": torch.get_rng_state(), "numpy": np.random.get_state(), "python": random.getstate()},
        }
        tree, tensors = ckpt.pack(state, self.algorithm.state_classes)
        self.writer.check()
        try:
            self.checkpoint_bytes = ckpt.save(self.folder / CHECKPOINT_FILE, tree, tensors)
        except OSError as exc:
            raise self.writer.write_error(f"write {self.folder / CHECKPOINT_FILE}", exc) from None

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
            **self.training_facts(),
        }

    def training_facts(self) -> dict:
        """Which path trained the run (compiled kernel or PyTorch), why, and the torch thread count: the two paths
        and thread counts differ in the records' last digits (engine/paths.py)."""
        path, reason = observed_path(self.training_calls, self.expected_path)
        return {"training_path": path, "training_path_reason": reason, "threads": torch.get_num_threads()}

    @contextmanager
    def _counting_paths(self):
        token = TRAINING_PATHS.set(self.training_calls)
        try:
            yield
        finally:
            TRAINING_PATHS.reset(token)

    @property
    def done(self) -> bool:
        return self.status is not None or self.round >= self.config.rounds

    # -- stepping ---------------------------------------------------------------
    def step(self) -> RoundRecord:
        """Run one round and record it (written to disk before this returns)."""
        if self.done:
            raise RuntimeError("the experiment has no rounds left")
        r = self.round
        if self.writer:
            self.writer.check()  # a folder deleted or made read-only since the last round stops the run here
        started = time.perf_counter()
        extras: dict = dict(self._setup_extras) if r == 0 else {}
        self.engine.traffic.open()
        if self.conditions.active:
            self.conditions.open_round(r)
        if self.shift is not None:
            extras.update(self.shift.apply(r))
        counting = TRAINING_PATHS.set(self.training_calls)  # every training call of the round counts its path
        try:
            newcomers = torch.nonzero(self.joins == r).squeeze(1) if r > 0 else torch.zeros(0, dtype=torch.int64)
            if len(newcomers):
                self.algorithm.place_newcomers(newcomers, r)
                extras["newcomers"] = newcomers.tolist()
            participants = self._participants(r)
            if self.conditions.active:  # drop-outs and stragglers drawn; the privacy ledger's window opened
                eligible = int((self.joins <= r).sum())
                participants = self.conditions.begin_round(r, participants, eligible)
            self.phase_seconds = {}
            began = time.perf_counter()
            outcome = self.algorithm.run_round(r, participants)
            self.phase_seconds["round"] = time.perf_counter() - began
            if self.conditions.active:
                self.conditions.end_window()
                extras.update(self.conditions.round_extras())
            if outcome.train_loss is not None and bool(torch.isinf(outcome.train_loss).any()):
                raise Diverged("the clients' training losses are not finite numbers (inf)")
            down, up = self.engine.traffic.totals
            if r == 0:
                down, up = down + self._setup_traffic[0], up + self._setup_traffic[1]
            began = time.perf_counter()
            record = self._record(r, participants, outcome, extras, down, up)
            self.phase_seconds["record"] = time.perf_counter() - began - self.phase_seconds.get("evaluation", 0.0)
            unseen = getattr(self.conditions, "unseen", [])
            if unseen and unseen_due(self.config, r):  # after the round's traffic and metrics: a look, no change
                record.extras["unseen"] = assign_and_evaluate(self.algorithm, unseen, r, self.true_clusters)
            self._check_scale(record)
        except Diverged as exc:
            raise Diverged(exc.what, f"in round {r}", self.config.lr) from None
        finally:
            TRAINING_PATHS.reset(counting)
        record.seconds = time.perf_counter() - started  # the round and its evaluation
        self.records.append(record)
        self.round += 1
        if self.writer:
            began = time.perf_counter()
            due = began - self._saved_at >= self.save_every
            self.writer.append(record, sync=due)
            wrote = time.perf_counter()
            if due:
                self._save_checkpoint()
                self._saved_at = time.perf_counter()
            self.phase_seconds.update(rounds_jsonl=wrote - began, checkpoint=time.perf_counter() - wrote)
        return record

    def _check_scale(self, record: RoundRecord) -> None:
        """Diverged when the round's mean training or test loss is DIVERGENCE_FACTOR times the initial model's."""
        limit = DIVERGENCE_FACTOR * max(self.initial_loss, 1e-12)
        for name, value in (("mean training loss", record.train_loss), ("mean test loss", record.loss)):
            if value is not None and math.isfinite(value) and value > limit:
                raise Diverged(f"the clients' {name} reached {value:.3g}, more than {DIVERGENCE_FACTOR:g} times the "
                               f"initial model's test loss ({self.initial_loss:.3g})")

    def _participants(self, r: int) -> torch.Tensor:
        joined = torch.nonzero(self.joins <= r).squeeze(1).numpy()
        count = max(1, int(round(self.config.participation * len(joined))))
        if count >= len(joined):
            return torch.as_tensor(joined, dtype=torch.int64)
        own = self.algorithm.select_participants(r, joined, count)
        if own is not None:
            return torch.as_tensor(np.sort(own), dtype=torch.int64)
        chosen = numpy_rng(self.config.seed, "participants", r).choice(joined, size=count, replace=False)
        return torch.as_tensor(np.sort(chosen), dtype=torch.int64)

    def _record(self, r, participants, outcome, extras, bytes_down, bytes_up) -> RoundRecord:
        models, model_of = self.algorithm.eval_models()
        finite(models, "the model parameters")
        joined = self.joins <= r
        placed = torch.nonzero((model_of >= 0) & joined).squeeze(1)
        malicious = getattr(self.conditions, "malicious", [])
        honest = placed
        if malicious:  # attackers are never a true cluster: the scores are the honest clients'
            honest = placed[~torch.isin(placed, torch.as_tensor(malicious, dtype=placed.dtype))]
        began = time.perf_counter()
        evaluation = self.algorithm.evaluate(placed)
        self.phase_seconds["evaluation"] = time.perf_counter() - began
        finite(evaluation.loss, "the clients' test losses")
        n = self.federation.num_clients
        acc: list = [None] * n
        loss: list = [None] * n
        # one tolist() per tensor: the same floats as float(t[i]), without a tensor index per client
        client_losses = evaluation.loss.tolist()
        client_accs = evaluation.accuracy.tolist() if evaluation.accuracy is not None else None
        for i, c in enumerate(placed.tolist()):
            loss[c] = client_losses[i]
            if client_accs is not None:
                acc[c] = client_accs[i]
        keep = torch.isin(placed, honest) if malicious else torch.ones(len(placed), dtype=torch.bool)
        n_test = self.federation.n_test.cpu()[honest].float()
        accuracy = weighted = None
        if evaluation.accuracy is not None and len(honest):
            honest_acc = evaluation.accuracy.cpu()[keep]
            accuracy = float(honest_acc.mean())
            weighted = float((honest_acc * n_test).sum() / n_test.sum().clamp(min=1))
        truth = self.true_clusters[honest].numpy()
        labels = model_of[honest].numpy()
        all_extras = {**extras, **outcome.extras}
        if self._reports_test_machines():
            all_extras.update(self._test_machine_extras(models, joined))
        scored = self.algorithm.has_clusters and self.cluster_truth
        if not scored:
            # no clusters to score (a personalised algorithm) or no truth to score them against (natural
            # clients without imposed clusters): null, never 0, and said so
            all_extras["ari_applicable"] = False
            all_extras["ari_note"] = ("no clusters: each client has a personalised model"
                                      if not self.algorithm.has_clusters else "no true clusters to compare with")
        theta = torch.as_tensor(np.asarray(self.truth_theta), dtype=torch.float32) \
            if self.truth_theta is not None else None
        # only a linear model's parameters are comparable with the true theta (an MLP regressor's are not)
        if theta is not None and theta.dim() == 2 and models.shape[1] == theta.shape[1]:
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
            ari=_metric(adjusted_rand, truth, labels) if scored else None,
            nmi=_metric(normalized_mutual_info, truth, labels) if scored else None,
            models_in_use=int(len(np.unique(labels))),
            bytes_down=int(bytes_down),
            bytes_up=int(bytes_up),
            seconds=0.0,
            true_clusters=self.true_clusters.tolist(),
            loss=float(evaluation.loss.cpu()[keep].mean()) if len(honest) else None,
            train_loss=float(outcome.train_loss.nanmean()) if outcome.train_loss is not None and len(outcome.train_loss) else None,
            evaluated=int(len(placed)),
            extras=all_extras,
        )

    # -- IFCA's test machines (protocol ifca, cfl_core/held_out_machines.py) -----------------------------
    def _reports_test_machines(self) -> bool:
        return self.config.protocol == "ifca" and self.algorithm.has_clusters and \
            not self.algorithm.one_model_per_client

    def _test_machine_engine(self, setup: Setup) -> Engine | None:
        """An engine over the held-out test machines (never trained on); None: the clients' test splits stand in."""
        from .held_out_machines import build_test_machines

        machines = build_test_machines(self.config, setup.dataset, self.federation.device)
        return None if machines is None else Engine(self.spec, machines, self.engine.train_cfg, self.config.seed)

    def _test_machine_extras(self, models: torch.Tensor, joined: torch.Tensor) -> dict:
        from .protocols import test_machine_stats

        if self.test_machines is not None:
            everyone = torch.arange(self.test_machines.fed.num_clients)
            return test_machine_stats(self.test_machines, models, everyone, self.test_machines.fed.clusters.numpy())
        # test_machines_per_cluster=0: every joined client's test split is a machine, with or without a model
        clients = torch.nonzero(joined).squeeze(1)
        return test_machine_stats(self.engine, models, clients, self.true_clusters[clients].numpy())

    def __iter__(self) -> Iterator[RoundRecord]:
        while not self.done:
            yield self.step()

    def run(self, on_round: Callable[[RoundRecord], None] | None = None,
            should_stop: Callable[[], bool] | None = None) -> dict:
        """Run to the end (or until should_stop()), then write the summary. A divergence ends the run with status
        diverged (returned, not raised); other failures are recorded as failed and raised."""
        try:
            while not self.done:
                if should_stop and should_stop():
                    return self.close(STOPPED)
                record = self.step()
                if on_round:
                    on_round(record)
        except Diverged as exc:
            return self.close(DIVERGED, error=str(exc))
        except KeyboardInterrupt:
            self.close(STOPPED)
            raise
        except BaseException as exc:
            self.close(FAILED, error=str(exc) or type(exc).__name__)
            raise
        return self.close(FINISHED)

    def summary(self, status: str, error: str | None = None) -> dict:
        return {**summarize(self.config.algorithm, self.records, status, self.config.protocol, error),
                **self.training_facts()}

    def close(self, status: str | None = None, error: str | None = None) -> dict:
        """Write summary.json; the status is finished when every round ran, else stopped (or the one given).

        When the run ends because its folder is gone or unwritable, the summary cannot be written:
        the run is closed all the same (its finished rounds are what the folder still holds)."""
        if status is None:
            status = FINISHED if self.round >= self.config.rounds else STOPPED
        self.status = status
        summary = self.summary(status, error)
        if self.writer:
            try:
                meta = read_json(self.folder / "meta.json")
                if isinstance(meta, dict):  # the path as observed over the whole run (meta.json had the expectation)
                    self.writer.write_json("meta.json", {**meta, **self.training_facts()})
                self.writer.write_json(SUMMARY_FILE, summary)
            except RunFolderError:
                if status == FINISHED:
                    raise
            finally:
                self.writer.close()
        return summary

    def models_snapshot(self) -> torch.Tensor:
        return self.algorithm.eval_models()[0].detach().cpu().clone()


def _filled(saved):
    """A checkpoint's config with the fields added since it was written at their defaults (None if unreadable)."""
    try:
        return ExperimentConfig.from_dict(saved).to_dict()
    except (ConfigError, TypeError):
        return None


def _keep_lines(path: Path, count: int) -> None:
    """Keep the first `count` lines of a text file (rewritten atomically when that drops anything)."""
    lines = path.read_text(encoding="utf-8").split("\n") if path.exists() else []
    kept = [line for line in lines if line.strip()][:count]
    text = "".join(line + "\n" for line in kept)
    if path.exists() and path.read_text(encoding="utf-8") == text:
        return
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, path)


def _copy_federation(fed: Federation) -> Federation:
    import dataclasses

    return dataclasses.replace(fed, **{
        name: getattr(fed, name).clone()
        for name in ("x_train", "y_train", "n_train", "x_test", "y_test", "n_test", "clusters")
    })
