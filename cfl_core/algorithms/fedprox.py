"""FedProx (Li, Sahu, Zaheer, Sanjabi, Talwalkar, Smith, "Federated optimization in heterogeneous networks",
MLSys 2020): FedAvg whose clients keep their local solution near the model they received.

Each round the server sends the global model w_t to the participants. Client k
approximately minimises its own loss plus a proximal term,
    h_k(w) = F_k(w) + mu/2 * ||w - w_t||^2,
by the run's local training (the paper allows an inexact solution; the engine
runs the configured epochs), and the server averages the results weighted by
the clients' sample counts, as FedAvg does. mu = 0 is FedAvg exactly. The
paper's own search space for mu is {0.001, 0.01, 0.1, 1}; it also lets slow
clients do less work, which CFL Lab does not simulate (every participant runs
the configured epochs).

One global model, no clusters: `--models` is ignored, and ARI is recorded as
not applicable. Every client is tested on the global model.

Default mu = 0.01, measured with `python scripts/option_sweep.py --algorithm fedprox --grid mu=0,0.001,0.01,0.1,1 --partitions feature-skew,concept-shift,label-skew-3 --seeds 0,1,2 --rounds 30` (digits, 4 clusters x 5 clients, 60 samples, MLP; final accuracy %, mean over the seeds):

    mu             0      0.001  0.01   0.1    1
    feature-skew   80.56  80.56  80.56  80.17  76.94
    concept-shift  64.67  64.67  64.67  64.67  64.50
    label-skew-3   95.33  95.33  95.33  95.28  94.22

Up to mu = 0.01 it is FedAvg to two decimals; more pulls the clients back and
costs accuracy. With two local epochs the clients do not drift far enough for
the proximal term to help on this data (the paper's gains come with many local
steps and with stragglers, which CFL Lab does not simulate); 0.01 is the
paper's usual setting and the largest value that costs nothing here.
"""
from __future__ import annotations

from dataclasses import dataclass

from ..engine.objective import Objective
from ..settings import Interval, setting
from .base import WeightingOptions
from .fedavg import FedAvg


@dataclass(frozen=True)
class FedProxOptions(WeightingOptions):
    mu: float = setting(0.01, Interval(0), label="Proximal weight (mu)", step=0.01,
                        help="local loss + mu/2 ||w - w_global||^2; 0 is FedAvg")


class FedProx(FedAvg):
    name = "fedprox"
    label = "FedProx"
    summary = "FedAvg whose local training adds mu/2 ||w - w_global||^2 (one global model)."
    has_clusters = False
    model_aggregation_because = "its clients train a proximal objective and send the model back"
    Options = FedProxOptions

    def objective(self):
        # the anchor is the model each client received: the start of its local training
        return Objective(prox_mu=self.opts.mu)
