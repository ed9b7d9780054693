"""What a client's local training may add to the plain loss, declared as data for the one training path.

Plain training (FedAvg, CLoVE, IFCA, ...) passes no Objective and runs exactly
as before. The personalised-FL baselines each need one general addition, and
both the batched path and the sequential reference in `training.py` read them
from here:

- a proximal anchor (FedProx): + mu/2 ||w - anchor||^2, the anchor being the
  model the client started the round from unless given;
- a feature term on the penultimate layer (FedProto's prototype regulariser,
  FedPAC's feature alignment): + lambda * mean over samples of
  mask[y] * mean_j (f_j(x) - target[y]_j)^2, i.e. torch's MSELoss between
  each sample's features and its class target, where only classes with a
  target count (the others add 0 but still count in the mean, as both
  papers' code does);
- per-slot learning-rate multipliers (0 freezes a slot): FedPAC trains its
  head and its feature extractor in separate phases;
- a meta step (Per-FedAvg, MAML-style): each update uses two minibatches (a
  third for the Hessian-vector product), see MetaStep;
- a weight per training sample (FedRC's soft assignment of each sample to a
  model, FedEM-style): the data term becomes the batch mean of w_j * loss_j
  (the weights multiply, the count of real samples divides, as the authors'
  `(loss_vec @ weights) / batch` does).

The reported training loss is always the data term alone (cross-entropy,
squared or reconstruction error), so it is comparable across algorithms.
"""
from __future__ import annotations

from dataclasses import dataclass, replace

import torch

HESSIAN = ("none", "finite-difference")
PER_CLIENT = ("anchor", "feature_targets", "feature_mask", "sample_weights")  # tensors with one row per client


@dataclass(frozen=True)
class MetaStep:
    """One Per-FedAvg update from consecutive minibatches b1, b2 (and b3).

    w' = w - alpha * grad f(w; b1); the update direction is grad f(w'; b2)
    (first order, `hessian="none"`), or with `hessian="finite-difference"`
    (I - alpha * H(w; b3)) grad f(w'; b2), the Hessian-vector product taken as
    [grad f(w + delta v; b3) - grad f(w - delta v; b3)] / (2 delta) with
    v = grad f(w'; b2) (the paper's Hessian-free variant). The direction goes
    to the run's optimiser (its lr is the paper's beta).
    """

    alpha: float
    hessian: str = "none"
    delta: float = 1e-3

    @property
    def batches(self) -> int:
        """Minibatches one meta step consumes."""
        return 3 if self.hessian != "none" else 2


@dataclass(frozen=True, eq=False)
class Objective:
    prox_mu: float = 0.0
    anchor: torch.Tensor | None = None  # [P, D]; None: each client's start parameters
    feature_weight: float = 0.0
    feature_targets: torch.Tensor | None = None  # [P, classes, F]
    feature_mask: torch.Tensor | None = None  # [P, classes] bool: which classes have a target
    lr_scale: tuple[float, ...] | None = None  # one multiplier per parameter slot; 0 freezes it
    meta: MetaStep | None = None
    sample_weights: torch.Tensor | None = None  # [P, n_max]: each training sample's weight (rows = its data rows)

    @property
    def has_feature_term(self) -> bool:
        return self.feature_weight != 0 and self.feature_targets is not None

    @property
    def plain(self) -> bool:
        """Nothing beyond the data loss and the optimiser's own step."""
        return (not self.prox_mu and not self.has_feature_term and self.meta is None
                and self.sample_weights is None and (self.lr_scale is None or all(s == 1 for s in self.lr_scale)))

    def rows(self, lo: int, hi: int) -> "Objective":
        """The objective of clients lo..hi-1 (per-client tensors sliced; scalars kept)."""
        cut = {name: getattr(self, name)[lo:hi] for name in PER_CLIENT
               if getattr(self, name) is not None}
        return replace(self, **cut)

    def to(self, device) -> "Objective":
        moved = {name: getattr(self, name).to(device) for name in PER_CLIENT
                 if getattr(self, name) is not None}
        return replace(self, **moved)

    def target_floats(self) -> torch.Tensor:
        """Floats of feature targets each client receives (its masked classes x features) [P]."""
        if not self.has_feature_term:
            return torch.zeros(0, dtype=torch.int64)
        features = int(self.feature_targets.shape[-1])
        mask = self.feature_mask if self.feature_mask is not None else torch.ones(
            self.feature_targets.shape[:2], dtype=torch.bool)
        return mask.sum(1).cpu().to(torch.int64) * features


def lr_scales(spec, trained: set[str] | None = None, scales: dict[str, float] | None = None) -> tuple[float, ...]:
    """Per-slot multipliers: 1 for slots whose layer is in `trained` (all when None), else 0; `scales` overrides
    by layer name (the part of a slot name before its first dot)."""
    out = []
    for slot in spec.slots:
        layer = slot.name.split(".")[0]
        value = 1.0 if trained is None or layer in trained else 0.0
        if scales and layer in scales:
            value = float(scales[layer]) if (trained is None or layer in trained) else 0.0
        out.append(value)
    return tuple(out)


def feature_penalty(features: torch.Tensor, y: torch.Tensor, valid: torch.Tensor, targets: torch.Tensor,
                    mask: torch.Tensor | None) -> torch.Tensor:
    """Per copy: mean over valid samples of mask[y] * mean_j (features - targets[y])^2.

    features [C, B, F], y [C, B] class ids, valid [C, B], targets [C, classes, F], mask [C, classes].
    """
    picked = torch.gather(targets, 1, y.clamp(min=0)[..., None].expand(-1, -1, targets.shape[-1]))
    per_sample = ((features - picked) ** 2).mean(-1)
    if mask is not None:
        per_sample = per_sample * torch.gather(mask.to(features.dtype), 1, y.clamp(min=0))
    weights = valid.to(features.dtype)
    return (per_sample * weights).sum(-1) / weights.sum(-1).clamp(min=1)
