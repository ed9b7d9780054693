"""FedProto (Tan, Long, Liu, Zhou, Lu, Jiang, Zhang, "FedProto: Federated prototype learning across
heterogeneous clients", AAAI 2022): clients exchange class prototypes, never models.

A prototype of class k is the mean of the penultimate layer's output f(x) over
a client's training samples of class k. Each round:
1. the server sends the global prototypes C_k to the participants (none in the
   first round);
2. each participant trains its OWN model on
       cross-entropy + lambda * MSE(f(x), C_y),
   where samples of a class without a global prototype add no regulariser
   (the engine's feature term; MSE as torch's MSELoss, the mean over feature
   dimensions and over the samples);
3. it sends its local prototypes of the classes it holds (and its class
   counts) computed with the trained model;
4. the server's C_k is the average of the participants' prototypes of class k,
   weighted by their sample counts of k. A class no participant holds this
   round keeps its previous prototype (the paper's server only has this
   round's clients; keeping the last value lets every client still be tested
   by prototype under partial participation).
Models are never averaged or sent: the bytes are prototype floats only.

Prediction (`predict`): `prototype` (the paper's inference: the class whose
global prototype is nearest in squared distance to f(x)) or `head` (the
client's own classifier layer). A client is tested on its own model once it has
trained one (until then it has no model: -1, like CLoVE's unplaced clients).
No clusters: `--models` is ignored and ARI is recorded as not applicable.

Defaults lambda = 1 (the authors' setting) and predict = head, measured with `python scripts/option_sweep.py --algorithm fedproto --grid lam=0.1,1,4 --grid predict=head,prototype --partitions feature-skew,concept-shift,label-skew-3 --seeds 0,1,2 --rounds 30` (digits, 4 clusters x 5 clients, 60 samples, MLP; final accuracy %, mean over the seeds):

    lambda / predict  0.1 head  0.1 proto  1 head  1 proto  4 head  4 proto
    feature-skew      87.11     84.89      87.39   87.00    87.39   87.78
    concept-shift     87.06     77.50      87.50   80.00    87.61   85.67
    label-skew-3      90.00     91.78      90.28   92.11    90.33   92.50

The head is better on the clustered structures, where one global prototype per
class must serve clusters that disagree about a label (concept shift) or see it
rotated; the prototypes are better when clusters only miss classes.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch

from ..engine.objective import Objective
from ..settings import Choice, Interval, setting
from .base import Algorithm, AlgorithmOptions, RoundOutcome

PREDICTIONS = ("head", "prototype")


@dataclass(frozen=True)
class FedProtoOptions(AlgorithmOptions):
    lam: float = setting(1.0, Interval(0), label="Prototype regulariser (lambda)", step=0.1,
                         help="weight of MSE(f(x), global prototype of y) in the local loss")
    predict: str = setting("head", Choice(PREDICTIONS), label="Prediction",
                           help="head: the client's own classifier; prototype: the nearest global prototype")


def aggregate_prototypes(means: torch.Tensor, counts: torch.Tensor, previous: torch.Tensor,
                         known: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(global prototypes [classes, F], which classes have one) from local means [P, classes, F] and counts
    [P, classes]: each class the count-weighted mean; classes nobody holds keep `previous`."""
    totals = counts.sum(0)
    weighted = (means * counts[..., None]).sum(0) / totals.clamp(min=1)[:, None]
    held = totals > 0
    return torch.where(held[:, None], weighted, previous), known | held


class FedProto(Algorithm):
    name = "fedproto"
    label = "FedProto"
    summary = "Clients keep their own models and exchange class prototypes (mean features) instead."
    has_clusters = False
    one_model_per_client = True
    model_aggregation_because = "its clients train their own models; nothing is averaged"
    needs_labels = True
    Options = FedProtoOptions

    def setup(self, clients):
        fed = self.ctx.fed
        self.models = self.base_model().expand(fed.num_clients, -1).clone()
        self.trained = torch.zeros(fed.num_clients, dtype=torch.bool)
        dim = self.ctx.spec.feature_dim
        self.prototypes = torch.zeros(fed.num_classes, dim)
        self.known = torch.zeros(fed.num_classes, dtype=torch.bool)
        self.assign = torch.full((fed.num_clients,), -1, dtype=torch.int64)
        return {}

    def place_newcomers(self, clients, round_index):
        pass  # a newcomer has its own (initial) model; it counts once it has trained

    def run_round(self, round_index, participants):
        objective = None
        if self.known.any():
            count = len(participants)
            objective = Objective(feature_weight=self.opts.lam,
                                  feature_targets=self.prototypes.expand(count, -1, -1),
                                  feature_mask=self.known.expand(count, -1))
        device = self.ctx.fed.device
        own = self.models.to(device)[participants.to(device)]
        trained, train_loss = self.engine.client_update(own, participants, round_index, objective=objective)
        self.models[participants] = trained.to(self.models.device)
        stats = self.engine.upload_feature_statistics(trained, participants)
        self.prototypes, self.known = aggregate_prototypes(stats.mean, stats.count, self.prototypes, self.known)
        self.trained[participants] = True
        self.assign = torch.where(self.trained, torch.arange(len(self.trained)), -1)
        extras = {"prototype_classes": int(self.known.sum())}
        return RoundOutcome("training", None, train_loss, extras)

    def evaluate(self, clients):
        if self.opts.predict == "prototype":
            return self.engine.evaluate(self.models, clients, clients, prototypes=self.prototypes,
                                        prototype_mask=self.known)
        return self.engine.evaluate(self.models, clients, clients)
