"""What an algorithm is: a small strategy over the shared engine.

An algorithm decides which model each client trains and which models are
aggregated; the engine does the training, aggregation and loss measurement
for all of them alike. Subclasses set the class attributes, an `Options`
dataclass for their own settings, and implement `setup` and `run_round`.
Traffic is never counted here: the engine's operations count it themselves.

Checkpoints come for free: `state_dict()` is every attribute of the instance
except the wiring rebuilt from the config (`ctx`, `cfg`, `engine`, `opts`), and
`cfl_core.checkpoint` saves tensors, numpy arrays, plain values and the
dataclasses an algorithm lists in `state_classes`. An algorithm overrides
`state_dict`/`load_state_dict` only for state that format cannot hold.
"""
from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import Any

import torch

from ..engine.seeding import derive_seed, numpy_rng
from ..errors import ConfigError
from ..settings import Choice, Interval, parse, setting


@dataclass(frozen=True)
class AlgorithmOptions:
    """Base of every algorithm's Options: fields declared with `setting(...)`; `check` holds cross-field rules."""

    def check(self, cfg) -> None:
        pass


NoOptions = AlgorithmOptions  # an algorithm without options of its own

WEIGHTINGS = ("samples", "uniform")


@dataclass(frozen=True)
class WeightingOptions(AlgorithmOptions):
    """The averaging weights of an algorithm that averages its clients' models or updates."""

    weighting: str = setting("samples", Choice(WEIGHTINGS), label="Averaging weights",
                             help="samples: a client counts by its training sample count (FedAvg's form); "
                                  "uniform: every client counts the same (IFCA's and Sattler's code)")


RESTART_RULES = ("half-share", "authors")
# IFCA's CIFAR code (find_good_initializer): the least share of the clients every model must win, by K;
# it defines no other K (its MNIST code has no restarts at all)
AUTHORS_RESTART_SHARE = {1: 0.0, 2: 0.35, 4: 0.10}


def restart_threshold(rule: str, models: int) -> tuple[float, str | None]:
    """(least share of the round-0 clients every model must win, a note when the rule has no value for K)."""
    if rule == "authors":
        if models in AUTHORS_RESTART_SHARE:
            return AUTHORS_RESTART_SHARE[models], None
        return 1 / (2 * models), (f"IFCA's code defines restart thresholds only for K = 1, 2, 4; "
                                  f"K = {models} uses 1/(2K)")
    return 1 / (2 * models), None


@dataclass(frozen=True)
class InitOptions(WeightingOptions):
    """Options of the initialisation modes shared by IFCA, CLoVE and FeSEM."""

    restart_rule: str = setting(
        "half-share", Choice(RESTART_RULES), label="Restart: threshold rule",
        help="init=restarts: half-share: every model wins >= 1/(2K) of the clients; authors: IFCA's code, "
             ">= 0.10 for K = 4, >= 0.35 for K = 2 (1/(2K) for other K)")
    restart_min_share: float | None = setting(
        None, Interval(0, 1, low_open=True), label="Restart: least share per model", none_means="the rule's",
        help="init=restarts: redraw the models until each wins at least this share of the clients at round 0 "
             "(overrides the threshold rule)")
    restart_attempts: int = setting(50, Interval(1, 1000), label="Restart: most draws",
                                    help="init=restarts: give up after this many draws and keep the best")

    def check(self, cfg) -> None:
        if self.restart_min_share is not None and not 0 < self.restart_min_share <= 1 / max(1, cfg.models or 1):
            raise ConfigError("options.restart_min_share", self.restart_min_share,
                              f"a share in (0, 1/models] = (0, {1 / max(1, cfg.models or 1):.3g}]")


@dataclass
class RoundOutcome:
    phase: str
    loss_matrix: torch.Tensor | None  # [P, K] rows follow the participants; None when not computed
    train_loss: torch.Tensor | None = None  # [P]
    extras: dict[str, Any] = field(default_factory=dict)


@dataclass
class RunContext:
    config: Any  # ExperimentConfig
    engine: Any  # Engine
    options: Any  # the algorithm's parsed Options
    true_clusters: Any  # callable -> current true cluster id per client (changes under shift)

    @property
    def fed(self):
        return self.engine.fed

    @property
    def spec(self):
        return self.engine.spec


def parse_options(options_cls, raw: dict[str, Any] | None, *, text: bool = False):
    """Turn a dict (from JSON, the CLI or the UI) into the Options dataclass through its declared settings."""
    return parse(options_cls, raw, text=text, prefix="options.", what="an option of this algorithm",
                 owner="this algorithm")


class Algorithm(ABC):
    name = "base"
    label = "Base"
    summary = ""
    needs_models = False  # True: the user must give K-hat (--models)
    uses_init_mode = False  # True: --init (same / different / restarts) applies
    has_loss_vectors = False  # True: records carry a loss matrix the dashboard can embed
    one_model_per_client = False  # True: every client keeps a model of its own (the estimate sizes memory by it)
    local_phases: tuple[str, ...] = ()  # phases whose clients train alone and send nothing (SR-FCA's INIT)
    # False: the algorithm forms no clusters (personalised FL): ARI and NMI are recorded as null, with
    # extras["ari_applicable"] = False, never as a score of 0
    has_clusters = True
    # why the algorithm needs --aggregation model (its clients send trained models), or None where any is fine
    model_aggregation_because: str | None = None
    needs_labels = False  # True: class labels are needed (class prototypes): no unsupervised or regression runs
    Options = NoOptions
    state_classes: tuple[type, ...] = ()  # dataclasses its state may hold (the checkpoint's allow-list)
    WIRING = ("ctx", "cfg", "engine", "opts")  # rebuilt from the config on resume, never checkpointed

    def __init__(self, ctx: RunContext):
        self.ctx = ctx
        self.cfg = ctx.config
        self.engine = ctx.engine
        self.opts = ctx.options
        self.models: torch.Tensor | None = None
        self.assign = torch.full((ctx.fed.num_clients,), -1, dtype=torch.int64)

    # -- configuration -----------------------------------------------------
    @classmethod
    def validate_config(cls, cfg) -> None:
        if cls.needs_models and cfg.models is None:
            raise ConfigError("models", None, f"a number of models (K-hat >= 1): {cls.name} needs one")
        if cls.needs_models and cfg.models > cfg.num_clients:
            # K-hat models for at most that many clusters: more models than clients can never be used
            raise ConfigError("models", cfg.models, f"at most the number of clients ({cfg.num_clients}): {cls.name} "
                                                    "keeps one model per cluster of clients")
        cls.parse_options(cfg.options).check(cfg)
        if cls.needs_labels:
            cls.require_labels(cfg)
        if cls.model_aggregation_because:
            cls.require_model_aggregation(cfg, cls.model_aggregation_because)

    @classmethod
    def parse_options(cls, raw, *, text: bool = False):
        return parse_options(cls.Options, raw, text=text)

    @property
    def num_models(self) -> int:
        return self.cfg.models or 1

    # -- lifecycle ----------------------------------------------------------
    @abstractmethod
    def setup(self, clients: torch.Tensor) -> dict[str, Any]:
        """Create the initial models and place the clients present at round 0; returns extras."""

    @abstractmethod
    def run_round(self, round_index: int, participants: torch.Tensor) -> RoundOutcome:
        """One round with these participants: assign, train, aggregate."""

    def select_participants(self, round_index: int, joined, count: int):
        """The round's `count` participants among the `joined` client ids (a sorted numpy array) when the algorithm
        chooses them by a rule of its own (FlexCFL's round-robin); None: the run's random draw, every algorithm's."""
        return None

    def place_newcomers(self, clients: torch.Tensor, round_index: int) -> None:
        """Give clients that join now a model. Default: lowest loss (IFCA's rule, chosen on the client)."""
        losses = self.engine.loss_matrix(self.models, clients, uploads=False)
        self.assign[clients] = torch.argmin(losses, dim=1)

    def eval_models(self) -> tuple[torch.Tensor, torch.Tensor]:
        """(models [K, D], model index per client) used for the test metrics."""
        return self.models, self.assign

    def evaluate(self, clients: torch.Tensor):
        """Test metrics of these clients (all have a model). Default: each on `eval_models()`'s model.
        Algorithms that personalise at test time (an adaptation step, prototypes) override it."""
        models, model_of = self.eval_models()
        return self.engine.evaluate(models, model_of[clients], clients)

    @classmethod
    def require_model_aggregation(cls, cfg, why: str) -> None:
        """ConfigError unless --aggregation is `model` (for algorithms whose clients send trained models)."""
        if cfg.aggregation != "model":
            raise ConfigError("aggregation", cfg.aggregation, f"model for {cls.name}: {why}")

    @classmethod
    def require_labels(cls, cfg) -> None:
        """ConfigError for unsupervised or regression runs (class prototypes need class labels)."""
        from ..data import dataset_info

        if cfg.unsupervised:
            raise ConfigError("unsupervised", cfg.unsupervised, f"false for {cls.name}: it needs class labels")
        if dataset_info(cfg.dataset).task != "classification":
            raise ConfigError("algorithm", cls.name, "a classification data set: its prototypes are per class")

    # -- checkpoints ----------------------------------------------------------
    def state_dict(self) -> dict[str, Any]:
        """Everything that changes as the run goes: every attribute but the wiring (see the module docstring)."""
        return {name: value for name, value in vars(self).items() if name not in self.WIRING}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Put a `state_dict()` back (after construction, in place of `setup`)."""
        for name, value in state.items():
            setattr(self, name, value)

    # -- shared helpers -----------------------------------------------------
    def base_model(self) -> torch.Tensor:
        """Model 0 of the run: identical across algorithms for the same seed (fair comparisons)."""
        return self.ctx.spec.init(self.cfg.seed, "model", 0).to(self.ctx.fed.device)

    def initial_models(self, count: int, clients: torch.Tensor) -> tuple[torch.Tensor, dict[str, Any]]:
        """K models by the configured init mode; `restarts` re-draws until every model wins a share."""
        spec, seed = self.ctx.spec, self.cfg.seed
        device = self.ctx.fed.device
        if self.cfg.init == "same" or not self.uses_init_mode:
            return self.base_model().expand(count, -1).clone(), {}
        first = torch.stack([spec.init(seed, "model", j) for j in range(count)]).to(device)
        if self.cfg.init == "different":
            return first, {}
        min_share, note = restart_threshold(self.opts.restart_rule, count)
        if self.opts.restart_min_share is not None:
            min_share, note = self.opts.restart_min_share, None
        best, best_share = first, -1.0
        for attempt in range(self.opts.restart_attempts):
            models = first if attempt == 0 else torch.stack(
                [spec.init(seed, "restart", attempt, j) for j in range(count)]).to(device)
            # the server picks the draw: every client sends its K losses
            losses = self.engine.loss_matrix(models, clients, uploads=True)
            wins = torch.bincount(torch.argmin(losses, 1), minlength=count)
            share = float(wins.min()) / max(1, len(clients))
            if share > best_share:
                best, best_share = models, share
            if share >= min_share:
                extras = {"init_attempts": attempt + 1, "init_min_share": share}
                if note:
                    extras["init_note"] = note
                return models, extras
        extras = {"init_attempts": self.opts.restart_attempts, "init_min_share": best_share}
        extras["init_note"] = f"no draw gave every model {min_share:.3g} of the clients; kept the best"
        return best, extras

    def rng(self, *parts):
        return numpy_rng(self.cfg.seed, self.name, *parts)

    def stream(self, *parts) -> int:
        """A minibatch stream for training outside the rounds (pre-training, newcomer probes).

        `engine.federated_train(..., stream=...)` draws its batches from it, so such
        extra training never reuses the batches of a round.
        """
        return derive_seed(self.cfg.seed, self.name, "stream", *parts) % 2**31
