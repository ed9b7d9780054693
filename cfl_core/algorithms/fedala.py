"""FedALA (Zhang, Hua, Wang, Shen, Guan, "FedALA: Adaptive local aggregation for personalized federated
learning", AAAI 2023): each client mixes the global model into its own, element by element, with weights
it learns on its data.

Every client keeps a local model theta_i and weights W_i (ones at first). When
a participant receives the global model theta_g:
1. adaptive local aggregation (ALA): the lower layers take theta_g as it is;
   on the top `layers` layers the client's start model is
       theta_hat = theta_i + (theta_g - theta_i) * W_i   (element-wise),
   and W_i is learnt on a random `share` of its training data: for each
   minibatch, W_i <- clip(W_i - eta * dL/dtheta_hat * (theta_g - theta_i), 0, 1);
2. the first time a client runs ALA (its start phase) it repeats passes over
   that share until the standard deviation of its last `window` pass losses
   is below `threshold` (at most `max_passes` passes); afterwards one pass a
   round, starting from the W_i it learnt before;
3. it trains theta_hat locally as usual; the result is its new theta_i, which it
   also uploads; the server averages the uploads weighted by sample counts.
ALA is skipped while theta_i equals theta_g (the first round: there is nothing
to mix yet). The paper's settings: eta = 1, share = 80%, the top layer only,
threshold 0.1 over 10 recorded losses (the authors' code records one loss per
pass, the last minibatch's; CFL Lab records the pass mean). The authors' code
counts parameter tensors (`layer_idx=2` is the last layer's weight and bias);
`layers` here counts layers.

Each client is tested on its own latest local model (none until it has trained
once). No clusters: `--models` is ignored and ARI is recorded as not applicable.
Traffic is FedAvg's: the global model down, the trained local model up.

The paper's defaults, measured with `python scripts/option_sweep.py --algorithm fedala --grid eta=0.1,1 --grid layers=1,2 --partitions feature-skew,concept-shift,label-skew-3 --seeds 0,1,2 --rounds 30` (digits, 4 clusters x 5 clients, 60 samples, MLP; final accuracy %, mean over the seeds):

    eta / layers   0.1 / 1  0.1 / 2  1 / 1  1 / 2
    feature-skew   82.17    82.22    82.44  82.56
    concept-shift  85.11    85.11    86.50  86.33
    label-skew-3   94.61    94.61    94.61  94.61

The MLP has two layers: `layers=2` mixes the whole model. The differences are
within the seeds' spread; eta = 1 and the top layer (the paper's) are kept.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch

from ..engine import aggregate
from ..errors import ConfigError
from ..settings import Interval, setting
from .base import Algorithm, RoundOutcome, WeightingOptions


@dataclass(frozen=True)
class FedALAOptions(WeightingOptions):
    eta: float = setting(1.0, Interval(0, low_open=True), label="Weight learning rate (eta)", step=0.1,
                         help="step size of the element-wise aggregation weights")
    share: float = setting(0.8, Interval(0, 1, low_open=True), label="Share of local data for ALA", step=0.05,
                           allowed_text="a share in (0, 1]", help="the random share of its data a client learns W on")
    layers: int = setting(1, Interval(1), label="Adapted top layers",
                          help="ALA mixes the top this-many layers; lower layers take the global model")
    threshold: float = setting(0.1, Interval(0, low_open=True), label="Start phase: loss std threshold",
                               step=0.01, help="the first ALA stops once the std of the last window losses is below")
    window: int = setting(10, Interval(1), label="Start phase: losses in the window",
                          help="pass losses the start phase's convergence test looks at")
    max_passes: int = setting(30, Interval(1), label="Start phase: most passes",
                              help="cap on the passes of a client's first ALA")

    def check(self, cfg) -> None:
        from ..data import dataset_info
        from ..engine.models import build_model, default_model

        info = dataset_info(cfg.dataset)
        family = cfg.model or default_model(info.task, info.input_shape, cfg.unsupervised)
        spec = build_model(family, info.input_shape, 1 if info.task == "regression" else info.num_classes, info.task)
        if self.layers > len(spec.layer_names()):
            raise ConfigError("options.layers", self.layers,
                              f"at most {len(spec.layer_names())}: the {family} has that many layers")


class FedALA(Algorithm):
    name = "fedala"
    label = "FedALA"
    summary = "Each client mixes the global model into its own with element-wise weights it learns locally."
    has_clusters = False
    one_model_per_client = True
    model_aggregation_because = "its clients mix and train models and send them back"
    Options = FedALAOptions

    def setup(self, clients):
        fed, spec = self.ctx.fed, self.ctx.spec
        self.global_model = self.base_model()[None].clone()
        self.local = self.base_model().expand(fed.num_clients, -1).clone()
        self.weights = torch.ones_like(self.local)
        self.started = torch.zeros(fed.num_clients, dtype=torch.bool)  # start phase done
        self.mixed = spec.layer_mask(spec.layer_names()[-self.opts.layers:])
        self.assign = torch.full((fed.num_clients,), -1, dtype=torch.int64)
        return {}

    def place_newcomers(self, clients, round_index):
        pass  # it holds the initial model; ALA mixes the global one in when it first takes part

    def run_round(self, round_index, participants):
        o = self.opts
        device = self.ctx.fed.device
        ids = participants.to(device)
        local = self.local.to(device)[ids]
        same = (local == self.global_model.to(device)).all(1).cpu()  # nothing to mix yet: ALA is skipped
        passes = torch.where(same, 0, torch.where(self.started[participants], 1, o.max_passes))
        start, weights, taken = self.engine.adaptive_local_aggregation(
            self.global_model, torch.zeros(len(participants), dtype=torch.int64), local,
            self.weights.to(device)[ids], self.mixed, participants, self.stream("ala", round_index), o.share,
            passes, o.eta, o.threshold, o.window)
        self.weights[participants] = weights.to(self.weights.device)
        self.started[participants] |= ~same
        trained, train_loss = self.engine.federated_train(start, participants, torch.arange(len(participants)),
                                                          round_index)
        self.local[participants] = trained.to(self.local.device)
        self.global_model = aggregate.weighted_mean(trained, self.engine.weights(participants, self.opts.weighting))[None]
        self.assign[participants] = participants
        mixed_w = weights[:, self.mixed.to(weights.device)]
        extras = {"ala_passes": taken.tolist(), "mean_weight": float(mixed_w.mean()) if mixed_w.numel() else None}
        return RoundOutcome("training", None, train_loss, extras)

    def eval_models(self):
        return self.local, self.assign
