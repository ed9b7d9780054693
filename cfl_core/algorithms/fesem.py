"""FeSEM (Xie et al., "Multi-center federated learning", arXiv 2005.01026): stochastic expectation maximisation.

K centre models. Every round each participant trains locally from the model it
is currently assigned to (E-step input), is then assigned to the centre
closest in L2 distance to its locally trained model (E-step), and every centre
becomes the sample-weighted mean of the trained models assigned to it (M-step:
FedAvg within the assignments; a centre nobody chose keeps its parameters).

At round 0 no client has a model yet: with `first_assignment=random` each is
given a random centre (the default; the first E-step then sorts them out), with
`first_assignment=distance` each trains from the run's initial model and takes
the nearest centre. The centres come from the shared initialisation modes
(`different`, `same`, `restarts`). A newcomer trains from the mean of the
current centres and joins the nearest one.

Its failures are part of the lesson: a client's trained model is pulled toward
the centre it started from, so an early majority centre tends to absorb
everyone, and with `--init same` every distance ties and all clients collapse
onto centre 0 (ties go to the lowest index).
"""
from __future__ import annotations

from dataclasses import dataclass

import torch

from ..engine.aggregate import grouped_weighted_mean, uniform_mean
from ..errors import ConfigError
from ..settings import Choice, Interval, setting
from .base import Algorithm, InitOptions, RoundOutcome

FIRST_ASSIGNMENTS = ("random", "distance")


@dataclass(frozen=True)
class FeSEMOptions(InitOptions):
    first_assignment: str = setting("random", Choice(FIRST_ASSIGNMENTS), label="First assignment",
                                    help="round 0: random centres, or train from the initial model and take the "
                                         "nearest")
    record_distances_max: int = setting(200, Interval(0), label="Record distances up to",
                                        help="record the [participants, K] distance matrix up to this many "
                                             "participants")


def nearest_centre(trained: torch.Tensor, centres: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(index of the closest centre in L2 per row [P], distances [P, K]); ties go to the lowest index."""
    distances = torch.cdist(trained.double(), centres.to(trained.device).double())
    return torch.argmin(distances, dim=1).cpu(), distances.cpu()


class FeSEM(Algorithm):
    name = "fesem"
    label = "FeSEM"
    summary = "K centres; each client joins the centre closest (L2) to its locally trained model; FedAvg per centre."
    needs_models = True
    uses_init_mode = True
    Options = FeSEMOptions

    @classmethod
    def validate_config(cls, cfg) -> None:
        super().validate_config(cfg)
        if cfg.aggregation != "model":
            raise ConfigError("aggregation", cfg.aggregation,
                              "model for fesem: it compares and averages the clients' locally trained models")

    def setup(self, clients):
        self.models, extras = self.initial_models(self.num_models, clients)
        if self.opts.first_assignment == "random":
            k = self.models.shape[0]
            self.assign[clients] = torch.as_tensor(self.rng("first").integers(0, k, len(clients)), dtype=torch.int64)
        return extras

    def run_round(self, round_index, participants):
        device = self.ctx.fed.device
        self.models = self.models.to(device)
        unplaced = participants[self.assign[participants] < 0]
        if len(unplaced):  # first_assignment=distance at round 0
            self._join_nearest(self.base_model()[None], unplaced, round_index, self.stream("first"))
        before = self.assign[participants].clone()
        trained, train_loss = self.engine.federated_train(self.models, participants, before, round_index)
        new, distances = nearest_centre(trained, self.models)
        self.assign[participants] = new
        k = self.models.shape[0]
        self.models = grouped_weighted_mean(trained, new.to(device), self.engine.weights(participants, self.opts.weighting),
                                            self.models)
        extras = {"moved": int((new != before).sum()), "centre_sizes": torch.bincount(new, minlength=k).tolist()}
        if len(participants) <= self.opts.record_distances_max:
            extras["l2_distances"] = [[round(float(v), 4) for v in row] for row in distances]
        return RoundOutcome("clustering", None, train_loss, extras)

    def place_newcomers(self, clients, round_index):
        """Train from the mean of the centres, then join the nearest centre."""
        self._join_nearest(uniform_mean(self.models)[None], clients, round_index,
                           self.stream("newcomer", round_index))

    def _join_nearest(self, probe: torch.Tensor, clients: torch.Tensor, round_index: int, stream: int) -> None:
        """Each client trains the one model `probe` [1, D] and joins the centre nearest to the result."""
        owners = torch.zeros(len(clients), dtype=torch.int64)
        trained, _ = self.engine.federated_train(probe, clients, owners, round_index, stream=stream)
        self.assign[clients] = nearest_centre(trained, self.models)[0]
