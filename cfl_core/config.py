"""The experiment configuration: one flat, JSON-able object validated up front.

Every field has a default that runs in seconds on bundled data. `validate()`
checks everything that can be checked without loading data or training, and
raises ConfigError naming the field, the value and what is allowed. The CLI,
the dashboard's controls and `--config FILE.json` all go through it.
"""
from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass
from typing import Any

from .errors import ConfigError
from .partition.config import PartitionConfig
from .settings import Choice, Interval, check_values, declared_copy, setting, settings_of

INIT_MODES = ("different", "same", "restarts")
DEVICES = ("auto", "cpu", "cuda")
# Caps: far above any run this lab is for, low enough that a typo cannot run for days or fill the memory.
MAX_ROUNDS = 100_000
MAX_MODELS = 10_000
MAX_LOCAL_EPOCHS = 1_000
MAX_BATCH_SIZE = 100_000
MAX_TEST_MACHINES = 10_000  # per cluster: IFCA's MNIST setting has 100
MAX_TEST_MACHINE_SAMPLES = 1_000_000  # over all test machines: about 3 GB of 28x28 images


def _algorithm_names():
    from .algorithms import ALGORITHMS

    return tuple(ALGORITHMS)


def _model_names():
    from .engine.models import MODEL_FAMILIES

    return tuple(sorted(MODEL_FAMILIES))


def _shift_names():
    from .dynamics import SHIFTS

    return tuple(SHIFTS)


def _optimizer_names():
    from .engine.training import OPTIMIZERS

    return OPTIMIZERS


def _protocol_names():
    from .protocols import PROTOCOLS

    return PROTOCOLS


def _aggregation_names():
    from .engine.core import AGGREGATIONS

    return AGGREGATIONS


def _data(name: str):
    return declared_copy(PartitionConfig, name)


@dataclass(frozen=True)
class ExperimentConfig:
    # data and cluster structure: declared once, in PartitionConfig (these fields define the clients)
    dataset: str = _data("dataset")
    partition: str = _data("partition")
    clusters: int = _data("clusters")
    clients_per_cluster: int = _data("clients_per_cluster")
    samples_per_client: int = _data("samples_per_client")
    test_samples_per_client: int | None = _data("test_samples_per_client")
    within: str = _data("within")
    alpha: float = _data("alpha")
    num_classes_per_partition: int = _data("num_classes_per_partition")
    quantity_skew: float = _data("quantity_skew")
    sample_with_replacement: bool = _data("sample_with_replacement")
    # algorithm
    algorithm: str = setting("clove", Choice(_algorithm_names), label="Algorithm", group="algorithm",
                             help="which clustering strategy runs (see the README's Algorithms table)")
    models: int | None = setting(None, Interval(1, MAX_MODELS), label="Models (K-hat)", group="algorithm",
                                 none_means="not given", allowed_text=f"a whole number of models in [1, {MAX_MODELS}]",
                                 help="K-hat: how many models the algorithm keeps")
    init: str = setting("different", Choice(INIT_MODES), label="Initial models", group="algorithm",
                        help="different: independent random models; same: one random model copied K times; "
                             "restarts: redraw until every model wins some clients")
    options: dict[str, Any] = setting({}, label="Algorithm options", group="algorithm", flag=False,
                                      help="the algorithm's own options, validated by the algorithm")
    unsupervised: bool = setting(False, label="Unsupervised (autoencoder)", group="training", advanced=True,
                                 help="train an autoencoder on the inputs only; labels are never used "
                                      "(ARI still measures the clustering)")
    # training
    rounds: int = setting(20, Interval(1, MAX_ROUNDS), label="Rounds", group="training", help="communication rounds")
    participation: float = setting(1.0, Interval(0, 1, low_open=True), label="Participation", group="training",
                                   step=0.05, allowed_text="a fraction in (0, 1]",
                                   help="fraction of clients taking part each round")
    local_epochs: int = setting(2, Interval(1, MAX_LOCAL_EPOCHS), label="Local epochs", group="training",
                                help="passes over its data each client makes per round")
    batch_size: int = setting(20, Interval(1, MAX_BATCH_SIZE), label="Batch size", group="training", advanced=True,
                              help="local minibatch size")
    lr: float = setting(0.1, Interval(0, low_open=True), label="Learning rate", group="training", step=0.01,
                        allowed_text="a positive, finite learning rate", help="learning rate of local training")
    optimizer: str = setting("sgd", Choice(_optimizer_names), label="Optimiser", group="training", advanced=True,
                             help="sgd (with momentum) or adam; its state is reset every round")
    momentum: float = setting(0.9, Interval(0, 1, high_open=True), label="Momentum", group="training",
                              advanced=True, step=0.05, help="SGD momentum")
    aggregation: str = setting("model", Choice(_aggregation_names), label="Aggregation", group="training",
                               advanced=True,
                               allowed_text="'model' (average trained models, Option I) or 'gradient' "
                                            "(average gradients, Option II)",
                               help="model: average trained models (Option I); gradient: average gradients "
                                    "(Option II)")
    model: str | None = setting(None, Choice(_model_names), label="Model", group="training", advanced=True,
                                none_means="the data set's default",
                                help="model family (default: per data set: MLP for digits, CNN for 28x28 images)")
    # client dynamics (see cfl_core/dynamics.py)
    shift: str = setting("none", Choice(_shift_names), label="Distribution shift", group="dynamics",
                         advanced=True, help="client distribution shift between rounds (FlexCFL's simulations)")
    shift_options: dict[str, Any] = setting({}, label="Shift options (JSON)", group="dynamics", advanced=True,
                                            flag=False, help="the shift's own options")
    newcomer_share: float = setting(0.0, Interval(0, 1, high_open=True), label="Newcomer share",
                                    group="dynamics", advanced=True, step=0.05, allowed_text="a fraction in [0, 1)",
                                    help="share of clients held back until the newcomer round")
    newcomer_round: int = setting(0, Interval(0, MAX_ROUNDS), label="Newcomers join at round", group="dynamics",
                                  advanced=True, help="round at which held-back clients join")
    # conditions of the field (cfl_core/conditions): declared once, every algorithm runs under them
    dropout_rate: float = setting(0.0, Interval(0, 1, high_open=True), label="Drop-out rate", group="conditions",
                                  advanced=True, step=0.05, allowed_text="a fraction in [0, 1)",
                                  help="each round, the chance that a selected client does not report (unreachable: "
                                       "it neither receives nor sends; it keeps its cluster and its model)")
    straggler_rate: float = setting(0.0, Interval(0, 1), label="Straggler rate", group="conditions", advanced=True,
                                    step=0.05, allowed_text="a fraction in [0, 1]",
                                    help="each round, the chance that a reporting client is a straggler: it sends "
                                         "what it has after part of its local steps")
    straggler_work: float = setting(0.5, Interval(0, 1, low_open=True), label="Straggler's share of its steps",
                                    group="conditions", advanced=True, step=0.05,
                                    allowed_text="a fraction in (0, 1]",
                                    help="the share of its local minibatch steps a straggler completes (at least one)")
    condition_seed: int | None = setting(None, Interval(0, 2**31 - 1), label="Seed of drop-outs and stragglers",
                                         group="conditions", advanced=True, none_means="the run's seed",
                                         help="the random draws of who drops out and who straggles, each round")
    dp_noise: float = setting(0.0, Interval(0, 1000), label="DP noise on updates (sigma / clip)",
                              group="conditions", advanced=True, step=0.1,
                              help="client-level Gaussian mechanism on every model or gradient a client sends: its "
                                   "update is clipped to dp_clip and noise of dp_noise x dp_clip added; 0: off")
    dp_clip: float = setting(1.0, Interval(0, 1e6, low_open=True), label="DP clip of updates (L2)",
                             group="conditions", advanced=True, step=0.1,
                             help="the L2 norm an update (trained - received model, or a gradient) is clipped to")
    dp_loss_noise: float = setting(0.0, Interval(0, 1000), label="DP noise on loss vectors (sigma / clip)",
                                   group="conditions", advanced=True, step=0.1,
                                   help="the same mechanism on the loss vectors clients send (CLoVE, the restarts); "
                                        "0: off")
    dp_loss_clip: float = setting(10.0, Interval(0, 1e6, low_open=True), label="DP clip of loss vectors (L2)",
                                  group="conditions", advanced=True, step=0.5,
                                  help="the L2 norm a client's loss vector is clipped to")
    dp_delta: float = setting(1e-5, Interval(0, 0.1, low_open=True), label="DP delta", group="conditions",
                              advanced=True, allowed_text="a probability in (0, 0.1]",
                              help="the delta at which the privacy spent (epsilon) is reported")
    malicious_share: float = setting(0.0, Interval(0, 1, high_open=True), label="Malicious share",
                                     group="conditions", advanced=True, step=0.05, allowed_text="a fraction in [0, 1)",
                                     help="share of clients that attack (never a true cluster: ARI is computed on "
                                          "the honest clients)")
    attack: str = setting("label-flip", Choice(("label-flip", "scale", "sign-flip", "false-losses")),
                          label="Attack", group="conditions", advanced=True,
                          help="label-flip: train on labels C-1-y; scale: send the update times attack_scale; "
                               "sign-flip: send it times -attack_scale; false-losses: report the loss vector "
                               "rotated by one model (and act on it)")
    attack_scale: float = setting(3.0, Interval(0, 1e6, low_open=True), label="Attack scale", group="conditions",
                                  advanced=True, step=0.5, help="the factor of the scale and sign-flip attacks")
    unseen_share: float = setting(0.0, Interval(0, 1, high_open=True), label="Unseen share", group="conditions",
                                  advanced=True, step=0.05, allowed_text="a fraction in [0, 1)",
                                  help="share of clients held out of training; each algorithm assigns them by its "
                                       "own rule and their accuracy is reported apart")
    unseen_every: int = setting(0, Interval(0, MAX_ROUNDS), label="Assign unseen clients every k rounds",
                                group="conditions", advanced=True,
                                help="0: only after the last round; k: also after every k-th round")
    # run
    seed: int = _data("seed")
    protocol: str = setting("clove", Choice(_protocol_names), label="Reported accuracy (protocol)", group="training",
                            advanced=True,
                            help="which paper's measure summaries and tables report: clove (final, mean over "
                                 "clients), flexcfl (best test-size-weighted), ifca (test machines by lowest test "
                                 "loss); see docs/faithfulness.md")
    test_machines_per_cluster: int | None = setting(
        None, Interval(0, MAX_TEST_MACHINES), label="Test machines per cluster (protocol ifca)", group="training",
        advanced=True, none_means="as many as the training clients per cluster",
        allowed_text=f"a whole number of test machines per cluster in [0, {MAX_TEST_MACHINES}] (0: the clients' own "
                     "test splits)",
        help="protocol ifca: held-out test clients per cluster, drawn from the test pool through the cluster's "
             "transform and never trained on; each takes the model with the lowest loss on its test data (IFCA's "
             "test machines); 0 uses every client's own test split instead")
    device: str = setting("auto", Choice(DEVICES), label="Device", group="training",
                          help="auto = the GPU when there is one, else the CPU")

    # -- conversion ----------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), sort_keys=True, indent=1)

    @classmethod
    def from_dict(cls, data: dict[str, Any], *, text: bool = False) -> "ExperimentConfig":
        """A config from typed values (JSON, the API) or, with `text=True`, from CLI/URL text.

        Every value goes through its setting's coercer: a wrong type is a ConfigError naming the field."""
        return cls(**cls.coerce_values(data, text=text))

    @classmethod
    def coerce_values(cls, data: dict[str, Any], *, text: bool = False) -> dict[str, Any]:
        """Each value as its field's type (ConfigError naming the first field that is not); names checked."""
        if not isinstance(data, dict):
            raise ConfigError("config", data, "an object of experiment config fields")
        declared = settings_of(cls)
        unknown = sorted(set(data) - set(declared))
        if unknown:
            raise ConfigError(unknown[0], data[unknown[0]], f"a field of the experiment config: {sorted(declared)}")
        return {name: declared[name].coerce(value, text=text) for name, value in data.items()}

    def replace(self, **changes) -> "ExperimentConfig":
        return dataclasses.replace(self, **changes)

    @property
    def num_clients(self) -> int:
        return self.clusters * self.clients_per_cluster

    def partition_config(self) -> PartitionConfig:
        return PartitionConfig(**{name: getattr(self, name) for name in CLIENT_FIELDS})

    def data_key(self) -> tuple:
        """The one definition of "identical clients": two configs with equal keys build the same clients."""
        return tuple((name, getattr(self, name)) for name in CLIENT_FIELDS)

    # -- validation ---------------------------------------------------------
    def validate(self) -> None:
        """Raise ConfigError for the first field that cannot work; cheap (loads no data)."""
        from .algorithms import ALGORITHMS
        from .data import data_source, dataset_info
        from .dynamics import validate_dynamics
        from .engine.federation import resolve_device

        check_values(self)  # every declared field: type and allowed values
        resolve_device(self.device)  # `cuda` without a GPU fails here, before any data is built
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
        if self.model is not None:
            from .engine.models import check_model

            check_model(self.model, info.input_shape, info.task)
        validate_dynamics(self)
        from .conditions import validate_conditions

        validate_conditions(self)
        if self.protocol == "ifca":
            machines = self.clusters * (self.clients_per_cluster if self.test_machines_per_cluster is None
                                        else self.test_machines_per_cluster)
            if machines * self.partition_config().test_size > MAX_TEST_MACHINE_SAMPLES:
                raise ConfigError("test_machines_per_cluster", self.test_machines_per_cluster,
                                  f"at most {MAX_TEST_MACHINE_SAMPLES:,} test samples over all test machines "
                                  f"(clusters x machines per cluster x test samples per client); this asks "
                                  f"{machines * self.partition_config().test_size:,}")
        ALGORITHMS[self.algorithm].validate_config(self)


# The fields that define which clients exist (and so what a shared set-up may be reused for).
CLIENT_FIELDS: tuple[str, ...] = tuple(settings_of(PartitionConfig))


def load_config_file(path: str) -> ExperimentConfig:
    try:
        with open(path, encoding="utf-8") as fh:
            data = json.load(fh)
    except FileNotFoundError:
        raise ConfigError("config", path, "the path of an existing JSON file") from None
    except IsADirectoryError:
        raise ConfigError("config", path, "a JSON file, not a directory") from None
    except UnicodeDecodeError as exc:
        raise ConfigError("config", path, f"a UTF-8 text file (byte {exc.start} is not UTF-8)") from None
    except OSError as exc:
        raise ConfigError("config", path, f"a file that can be read ({exc.strerror or type(exc).__name__})") from None
    except json.JSONDecodeError as exc:
        raise ConfigError("config", path, f"valid JSON ({exc.msg} at line {exc.lineno})") from None
    except RecursionError:
        raise ConfigError("config", path, "JSON that is not nested hundreds of levels deep") from None
    if not isinstance(data, dict):
        raise ConfigError("config", path, "a JSON object of config fields")
    return ExperimentConfig.from_dict(data)
