"""The experiment configuration: one flat, JSON-able object validated up front.

Every field has a default that runs in seconds on bundled data. `validate()`
checks everything that can be checked without loading data or training, and
raises ConfigError naming the field, the value and what is allowed. The CLI,
the dashboard's controls and `--config FILE.json` all go through it.
"""
from __future__ import annotations

import dataclasses
import json
import math
from dataclasses import dataclass, field
from typing import Any

from .errors import ConfigError

INIT_MODES = ("different", "same", "restarts")
DEVICES = ("auto", "cpu", "cuda")


@dataclass(frozen=True)
class ExperimentConfig:
    # data and cluster structure
    dataset: str = "digits"
    partition: str = "feature-skew"
    clusters: int = 4
    clients_per_cluster: int = 5
    samples_per_client: int = 60
    test_samples_per_client: int | None = None
    within: str = "iid"
    alpha: float = 0.5
    num_classes_per_partition: int = 2
    quantity_skew: float = 0.0
    # algorithm
    algorithm: str = "clove"
    models: int | None = None  # K-hat: how many models the algorithm keeps (None: not given)
    init: str = "different"
    options: dict[str, Any] = field(default_factory=dict)  # algorithm-specific, validated by the algorithm
    unsupervised: bool = False  # train an autoencoder on the inputs only; labels are never used
    # training
    rounds: int = 20
    participation: float = 1.0
    local_epochs: int = 2
    batch_size: int = 20
    lr: float = 0.1
    optimizer: str = "sgd"
    momentum: float = 0.9
    aggregation: str = "model"
    model: str | None = None  # None: the data set's default family
    # client dynamics (see cfl_core/dynamics.py)
    shift: str = "none"
    shift_options: dict[str, Any] = field(default_factory=dict)
    newcomer_share: float = 0.0
    newcomer_round: int = 0
    # run
    seed: int = 0
    device: str = "auto"

    # -- conversion ----------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), sort_keys=True, indent=1)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "ExperimentConfig":
        known = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(data) - known)
        if unknown:
            raise ConfigError(unknown[0], data[unknown[0]], f"a field of the experiment config: {sorted(known)}")
        return cls(**data)

    def replace(self, **changes) -> "ExperimentConfig":
        return dataclasses.replace(self, **changes)

    @property
    def num_clients(self) -> int:
        return self.clusters * self.clients_per_cluster

    def partition_config(self):
        from .partition import PartitionConfig

        return PartitionConfig(
            dataset=self.dataset, partition=self.partition, clusters=self.clusters,
            clients_per_cluster=self.clients_per_cluster, samples_per_client=self.samples_per_client,
            test_samples_per_client=self.test_samples_per_client, within=self.within, alpha=self.alpha,
            num_classes_per_partition=self.num_classes_per_partition, quantity_skew=self.quantity_skew,
            seed=self.seed,
        )

    # -- validation ---------------------------------------------------------
    def validate(self) -> None:
        """Raise ConfigError for the first field that cannot work; cheap (loads no data)."""
        from .algorithms import ALGORITHMS
        from .data import data_source, dataset_info
        from .engine.models import MODEL_FAMILIES
        from .engine.training import OPTIMIZERS
        from .engine.core import AGGREGATIONS
        from .dynamics import validate_dynamics

        _positive_int("rounds", self.rounds)
        _positive_int("local_epochs", self.local_epochs)
        _positive_int("batch_size", self.batch_size)
        _non_negative_int("seed", self.seed)
        if not (isinstance(self.participation, (int, float)) and 0 < self.participation <= 1):
            raise ConfigError("participation", self.participation, "a fraction in (0, 1]")
        if not (_is_number(self.lr) and self.lr > 0 and math.isfinite(self.lr)):
            raise ConfigError("lr", self.lr, "a positive, finite learning rate")
        if not (_is_number(self.momentum) and 0 <= self.momentum < 1):
            raise ConfigError("momentum", self.momentum, "a number in [0, 1)")
        if self.optimizer not in OPTIMIZERS:
            raise ConfigError("optimizer", self.optimizer, f"one of {list(OPTIMIZERS)}")
        if self.aggregation not in AGGREGATIONS:
            raise ConfigError("aggregation", self.aggregation,
                              "'model' (average trained models, Option I) or 'gradient' (average gradients, Option II)")
        if self.init not in INIT_MODES:
            raise ConfigError("init", self.init, f"one of {list(INIT_MODES)}")
        if self.device not in DEVICES:
            raise ConfigError("device", self.device, f"one of {list(DEVICES)}")
        from .engine.federation import resolve_device

        resolve_device(self.device)  # `cuda` without a GPU fails here, before any data is built
        if self.model is not None and self.model not in MODEL_FAMILIES:
            raise ConfigError("model", self.model, f"one of {sorted(MODEL_FAMILIES)} (or empty for the default)")
        if self.algorithm not in ALGORITHMS:
            raise ConfigError("algorithm", self.algorithm, f"one of {sorted(ALGORITHMS)}")
        if self.models is not None:
            if not isinstance(self.models, int) or isinstance(self.models, bool) or self.models < 1:
                raise ConfigError("models", self.models, "a whole number of models >= 1")
        info = dataset_info(self.dataset)
        self.partition_config().validate(info)
        if self.unsupervised and not data_source(self.dataset).supports_unsupervised:
            raise ConfigError("unsupervised", self.unsupervised, "true only for image data sets (the autoencoder)")
        # the autoencoder is the unsupervised model and only that: a classifier would read the labels
        if self.unsupervised and self.model not in (None, "autoencoder"):
            raise ConfigError("model", self.model, "autoencoder (or empty) when unsupervised is true: "
                                                   "other models train on the labels")
        if not self.unsupervised and self.model == "autoencoder":
            raise ConfigError("model", self.model, "a supervised model when unsupervised is false "
                                                   "(set unsupervised to true for the autoencoder)")
        validate_dynamics(self)
        ALGORITHMS[self.algorithm].validate_config(self)


def _is_number(v) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def _positive_int(name: str, value) -> None:
    if not isinstance(value, int) or isinstance(value, bool) or value < 1:
        raise ConfigError(name, value, "a whole number >= 1")


def _non_negative_int(name: str, value) -> None:
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        raise ConfigError(name, value, "a whole number >= 0")


def load_config_file(path: str) -> ExperimentConfig:
    try:
        with open(path, encoding="utf-8") as fh:
            data = json.load(fh)
    except FileNotFoundError:
        raise ConfigError("config", path, "the path of an existing JSON file") from None
    except json.JSONDecodeError as exc:
        raise ConfigError("config", path, f"valid JSON ({exc.msg} at line {exc.lineno})") from None
    if not isinstance(data, dict):
        raise ConfigError("config", path, "a JSON object of config fields")
    return ExperimentConfig.from_dict(data)
