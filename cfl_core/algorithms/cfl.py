"""Sattler et al.'s Clustered Federated Learning (CFL, arXiv 1910.01991).

Starts with one cluster holding every client. Every round each participant
trains from its cluster's model and sends its weight update
`dw_i = trained_i - start`; the server averages the updates per cluster
(weighted by sample counts) and adds the mean to the cluster model.

A cluster c is split when, in that round,
- it has at least `min_split_size` participants (the paper: more than 2),
- the round is at least `warmup_rounds`,
- the norm of its weighted mean update is below `eps1` (the cluster as a whole
  is near a stationary point of its joint objective) and
- the largest client update norm is above `eps2` (some clients still pull hard
  away from it: they are incongruent).

The split is the optimal bipartition: of all the ways to cut the cluster in
two, the one with the smallest largest cosine similarity between an update of
one part and an update of the other (`alpha_cross_max`). The paper's
Algorithm 1 finds it by merging clients in order of decreasing similarity until
two groups remain (single linkage on the similarity: the maximum spanning tree
without its weakest edge, which is provably optimal). The authors' code runs
scikit-learn's complete linkage instead; that usually agrees on well-separated
clusters but is not guaranteed to minimise `alpha_cross_max`, so it is kept only
as the option `bipartition=complete`. The bipartition works on the similarity
sub-matrix of the cluster's own participants, and its positions are mapped back
to global client ids for every split (the authors' code returns positions in the
sub-matrix, which is only right for the very first split).

A split is accepted only if the paper's check holds:
`gamma_max < sqrt((1 - alpha_cross_max) / 2)`, where `gamma_max` is the assumed
bound on how far an empirical risk's gradient may deviate from its cluster's
(an option). Clusters keep splitting recursively while the criterion holds.

The parameter tree: every accepted split keeps the pre-split model and the
updates of both children's clients at that round. A newcomer computes its
update from the root's cached model, takes the child whose cached updates hold
the largest cosine similarity to it, and repeats from that child's cached
model until it reaches a leaf (a current cluster). Members of a splitting
cluster that did not take part in the round are placed the same way from the
split node.

Defaults. eps1 and eps2 depend on the model's scale, so unless the options
set them they come from DEFAULT_EPS by model family, each measured on the
bundled data with the default training (2 local epochs, batch 20, SGD lr 0.1,
momentum 0.9; 4 clusters x 5 clients of 60 samples). To measure, run CFL so
that it never splits and read `cluster_norms` in the records:
`python -m cfl_core run --algorithm cfl --partition concept-shift --rounds 40
--option eps1=1e-9 --option eps2=1e9 --out DIR` (and `--partition iid`).

- mlp (digits' default): in one cluster of all clients the mean update norm
  rises to about 0.53 by round 4 and then falls (below 0.4 from round 7-9,
  0.1-0.15 by round 30) under both iid and concept-shift data. What tells them
  apart is the largest client update norm once the mean is below 0.4: at most
  0.64 for iid clients (5 seeds, 40 rounds), 0.9-1.2 for the concept-shift
  federation, 0.72-0.80 for a cluster still mixing two concepts, at most 0.6
  for a pure cluster: eps1 = 0.4, eps2 = 0.7 (concept shift: all 4 clusters by
  round 11-12 for seeds 0-4; iid: no split in 40 rounds, seeds 0-4).
- logreg (digits): concept shift keeps a max norm near 0.76 (0.46-0.64 in a
  two-concept cluster) while iid clients stay at or below 0.49 once the mean is
  below 0.4: eps1 = 0.4, eps2 = 0.55 (seeds 0-2: 4 clusters by round 8; iid
  never splits).
- cnn (on digits): noisier; iid clients reach 1.35, a two-concept cluster
  1.07-1.37, pure clusters up to 0.87: no pair separates them all. eps1 = 0.4,
  eps2 = 1.4 never splits iid (seeds 0-1, 30 rounds) and finds the 4
  concept-shift clusters by round 26 for seed 1 (3 of 4 by round 30 for seed
  0).
- cnn on fashion-mnist (its default model): much larger norms; the mean never
  falls below 0.5 in 40 rounds of concept shift (max 1.9-3.5) and iid clients
  reach 1.1-1.8 with a mean of 0.2: eps1 = 0.9, eps2 = 1.9 (seed 0: ARI >= 0.9
  at round 16, then over-splits to 6 clusters, ARI 0.83 at round 40; iid never
  splits). Measured on one seed only (a run takes two minutes here).
- autoencoder (unsupervised digits, Adam lr 0.01): feature skew keeps max norms
  of 2.1-2.6 (mean 0.6-1.1), iid 1.45-1.6: eps1 = 1.0, eps2 = 2.0 (seeds 1 and 2
  find the 4 rotations by rounds 15 and 25, seed 0 three clusters in 30
  rounds; iid never splits).
- linreg (synthetic-linear): the linear mixture keeps max norms of 1.5-1.7
  once the mean is below 0.3, iid at most 0.12: eps1 = 0.3, eps2 = 0.6 (all 4
  clusters by round 8-9; iid never splits).

The paper's rule of thumb (eps1 about a tenth of the largest mean norm seen,
recorded as `largest_mean_norm`) would wait far too long for models this
small: the mean rarely falls that far within a run. The gamma check guards
against noise: the accepted concept-shift splits had alpha_cross_max between
-0.86 and 0.27, while with the MLP, iid rounds with a large update norm had 0.3
or more, so `gamma_max = 0.6` (accept only when alpha_cross_max < 0.28)
refuses them.
`warmup_rounds = 5` skips the first rounds, where the mean norm is small only
because training has barely started.

`models` (K-hat), when given, caps the number of clusters (as `max_clusters`);
CFL needs no K. Gradient aggregation is refused: CFL works on weight updates.
"""
from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field

import numpy as np
import torch

from ..data import data_source
from ..engine.aggregate import weighted_means_by_group
from ..engine.training import OptimizerMemory
from ..errors import ConfigError
from ..settings import Choice, Interval, setting
from .base import Algorithm, RoundOutcome, WeightingOptions

BIPARTITIONS = ("optimal", "complete")
OPTIMIZER_STATES = ("reset", "persistent")
LR_DECAY_STEPS = ("round", "participation")
# (eps1, eps2) per model family when the options leave them unset: see the module docstring.
DEFAULT_EPS = {
    "mlp": (0.4, 0.7),
    "logreg": (0.4, 0.55),
    "cnn": (0.4, 1.4),
    "autoencoder": (1.0, 2.0),
    "linreg": (0.3, 0.6),
}
# A data set that changes the scale of its model's updates overrides these in its source (DataSource.cfl_eps).


@dataclass(frozen=True)
class CFLOptions(WeightingOptions):
    eps1: float | None = setting(None, Interval(0, low_open=True), label="eps1 (mean update norm)", step=0.05,
                                 allowed_text="a positive update norm, or none for the model's default",
                                 help="split only when the cluster's mean update norm is below this")
    eps2: float | None = setting(None, Interval(0), label="eps2 (largest update norm)", step=0.05,
                                 allowed_text="an update norm >= 0 (the paper: between eps1 and 10 x eps1), "
                                              "or none for the model's default",
                                 help="... and some client's update norm is above this")
    warmup_rounds: int = setting(5, Interval(0), label="Warm-up rounds", allowed_text="a whole number of rounds >= 0",
                                 help="no split before this round")
    min_split_size: int = setting(3, Interval(3), label="Least cluster size to split",
                                  allowed_text="a whole number >= 3 (the paper splits clusters of more than 2 "
                                               "clients)",
                                  help="the paper: a cluster needs more than 2 participants to split")
    gamma_max: float = setting(0.6, Interval(0, 1, low_open=True), label="gamma max", step=0.05,
                               help="accept a split only if gamma_max < sqrt((1 - alpha_cross_max) / 2)")
    gamma_check: bool = setting(True, label="gamma check",
                                help="accept a split only if it passes the paper's gamma_max check (the authors' "
                                     "code never checks)")
    bipartition: str = setting("optimal", Choice(BIPARTITIONS), label="Bipartition",
                               help="optimal: the paper's Algorithm 1; complete: the authors' code (complete "
                                    "linkage)")
    max_clusters: int | None = setting(None, Interval(1), label="Most clusters",
                                       none_means="the run's models, or no cap",
                                       help="stop splitting at this many clusters")
    optimizer_state: str = setting("reset", Choice(OPTIMIZER_STATES), label="Client optimiser state",
                                   help="reset: a fresh optimiser every round (every algorithm's way); persistent: "
                                        "each client keeps its momentum (Adam moments) from round to round and "
                                        "across splits, as the authors' code")
    lr_decay: float = setting(1.0, Interval(0, 1, low_open=True), label="lr decay per round", step=0.01,
                              allowed_text="a factor in (0, 1] (1: constant lr)",
                              help="round t (from 0) trains with lr x lr_decay^(t+1); the authors' code: 0.99")
    lr_decay_per: str = setting("round", Choice(LR_DECAY_STEPS), label="lr decays per",
                                help="round: every client trains round t with lr x lr_decay^(t+1); participation: a "
                                     "client's n-th training (from 1) uses lr x lr_decay^n, as the authors' code "
                                     "(each client decays its own optimiser when it trains); the same under full "
                                     "participation")
    record_similarity_max: int = setting(100, Interval(0), label="Record similarity up to",
                                         help="record the round's similarity matrix up to this many participants")


# -- the split maths (pure functions: unit-tested on their own) ---------------------------------

def cosine_similarity_matrix(updates: torch.Tensor) -> np.ndarray:
    """Pairwise cosine similarity of the rows of `updates` [P, D] (float64 on the CPU)."""
    u = updates.detach().to("cpu", torch.float64)
    unit = u / u.norm(dim=1, keepdim=True).clamp(min=1e-12)
    sim = (unit @ unit.T).numpy()
    return np.clip(sim, -1.0, 1.0)


def optimal_bipartition(sim: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The paper's Algorithm 1: merge in order of decreasing similarity until two groups remain.

    Returns two sorted arrays of positions (rows of `sim`); the first holds position 0.
    This minimises the largest similarity across the two parts.
    """
    n = len(sim)
    if n < 2:
        raise ValueError("a bipartition needs at least 2 elements")
    parent = list(range(n))

    def find(i: int) -> int:
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    rows, cols = np.triu_indices(n, k=1)
    order = np.argsort(-sim[rows, cols], kind="stable")  # ties: the lower pair first
    groups = n
    for e in order:
        a, b = find(int(rows[e])), find(int(cols[e]))
        if a == b:
            continue
        if groups == 2:
            break  # this edge would join the last two groups
        parent[max(a, b)] = min(a, b)
        groups -= 1
    labels = np.array([find(i) for i in range(n)])
    first = labels == labels[0]
    return np.flatnonzero(first), np.flatnonzero(~first)


def complete_linkage_bipartition(sim: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The authors' code: scikit-learn's complete-linkage agglomerative clustering on -similarity."""
    from sklearn.cluster import AgglomerativeClustering

    labels = AgglomerativeClustering(n_clusters=2, metric="precomputed", linkage="complete").fit(1.0 - sim).labels_
    first = labels == labels[0]
    return np.flatnonzero(first), np.flatnonzero(~first)


def cross_similarity_max(sim: np.ndarray, part1: np.ndarray, part2: np.ndarray) -> float:
    """alpha_cross_max: the largest similarity between a member of part1 and a member of part2."""
    return float(sim[np.ix_(part1, part2)].max())


def gamma_bound(alpha_cross_max: float) -> float:
    """sqrt((1 - alpha_cross_max) / 2): the split is correct when gamma_max is below this."""
    return math.sqrt(max(0.0, 1.0 - alpha_cross_max) / 2.0)


def gamma_check(gamma_max: float, alpha_cross_max: float) -> bool:
    return gamma_max < gamma_bound(alpha_cross_max)


def split_clients(client_ids, sim: np.ndarray, method: str = "optimal") -> tuple[list[int], list[int], float]:
    """Bipartition the clients `client_ids` whose update similarities are `sim` (same order).

    Returns the two parts as GLOBAL client ids and alpha_cross_max. (The authors'
    code returned positions in the sub-matrix, wrong for every split after the first.)
    """
    ids = np.asarray(client_ids)
    part = optimal_bipartition if method == "optimal" else complete_linkage_bipartition
    p1, p2 = part(sim)
    return ids[p1].tolist(), ids[p2].tolist(), cross_similarity_max(sim, p1, p2)


@dataclass
class TreeNode:
    """A node of the parameter tree: a cluster, and if it was split, what the split cached."""

    id: int
    parent: int | None
    members: list[int]  # client ids when the node was made
    model_index: int  # the model row this cluster trains (while it is a leaf)
    split_round: int | None = None
    model: torch.Tensor | None = None  # the pre-split model [1, D]
    children: list[int] = field(default_factory=list)
    child_updates: list[torch.Tensor] = field(default_factory=list)  # [n_c, D] updates of each child at the split

    @property
    def is_leaf(self) -> bool:
        return not self.children


class CFL(Algorithm):
    name = "cfl"
    label = "CFL (Sattler)"
    summary = "One cluster at first; a cluster splits in two when its clients' updates disagree (cosine similarity)."
    Options = CFLOptions
    # the parameter tree is checkpointed with the models, and with optimizer_state=persistent every client's
    # optimiser state (a run of the authors'-code profile died after round 0 when it was not in this list)
    state_classes = (TreeNode, OptimizerMemory)

    def __init__(self, ctx):
        super().__init__(ctx)
        # trainings per client so far (lr_decay_per=participation); made here, not in setup, so that a checkpoint
        # written before it existed resumes too
        self.trainings = torch.zeros(ctx.fed.num_clients, dtype=torch.int64)

    @classmethod
    def validate_config(cls, cfg) -> None:
        super().validate_config(cfg)
        if cfg.aggregation != "model":
            raise ConfigError("aggregation", cfg.aggregation,
                              "model for cfl: it clusters the clients' weight updates after local training")

    @property
    def cap(self) -> int | None:
        return self.opts.max_clusters if self.opts.max_clusters is not None else self.cfg.models

    def setup(self, clients):
        self.models = self.base_model()[None].clone()
        self.assign[clients] = 0
        self.nodes: list[TreeNode] = [TreeNode(0, None, clients.tolist(), 0)]
        self.leaf_of_model: list[int] = [0]  # model row -> tree node
        self.largest_mean_norm = 0.0
        o = self.opts
        family = self.ctx.spec.name
        default1, default2 = (data_source(self.cfg.dataset).cfl_eps.get(family)
                              or DEFAULT_EPS.get(family, DEFAULT_EPS["mlp"]))
        self.eps1 = o.eps1 if o.eps1 is not None else default1
        self.eps2 = o.eps2 if o.eps2 is not None else default2
        self.memory = None
        if o.optimizer_state == "persistent":  # one optimiser state per client, kept for the whole run
            self.memory = OptimizerMemory.zeros(self.ctx.fed.num_clients, self.ctx.spec.dim,
                                                self.engine.train_cfg.optimizer, self.ctx.fed.device)
        return {"cfl_params": {"eps1": self.eps1, "eps2": self.eps2, "gamma_max": o.gamma_max,
                               "warmup_rounds": o.warmup_rounds, "min_split_size": o.min_split_size,
                               "bipartition": o.bipartition, "max_clusters": self.cap}}

    # -- one round -------------------------------------------------------------
    def run_round(self, round_index, participants):
        owners = self.assign[participants].clone()
        updates, train_loss = self._train(round_index, participants, owners)
        weights = self.engine.weights(participants, self.opts.weighting)
        norms = updates.norm(dim=1).cpu()
        sim = cosine_similarity_matrix(updates)
        extras: dict = {"update_norms": [round(float(v), 5) for v in norms]}
        if len(participants) <= self.opts.record_similarity_max:
            extras["similarity"] = np.round(sim, 4).tolist()
        cluster_norms, events = self._split_checks(round_index, participants, owners, updates, weights, norms, sim)
        self._aggregate(participants, updates, weights)
        extras["cluster_norms"] = cluster_norms
        extras["largest_mean_norm"] = round(self.largest_mean_norm, 5)  # the paper's rule: eps1 ~ a tenth of it
        extras["clusters"] = int(self.models.shape[0])
        if events:
            extras["split_events"] = events
        if any(e["accepted"] for e in events):
            phase = "split"
        else:
            phase = "warmup" if round_index < self.opts.warmup_rounds else "clustering"
        return RoundOutcome(phase, None, train_loss, extras)

    def _train(self, round_index: int, participants: torch.Tensor, owners: torch.Tensor
               ) -> tuple[torch.Tensor, torch.Tensor]:
        """(weight updates [P, D], train loss [P]): each participant trains from its cluster's model."""
        device = self.ctx.fed.device
        self.models = self.models.to(device)
        base, decay = self.engine.train_cfg, self.opts.lr_decay
        # the step of the decay each participant trains with: the round, or its own count of trainings
        steps = (self.trainings[participants] + 1 if self.opts.lr_decay_per == "participation"
                 else torch.full((len(participants),), round_index + 1, dtype=torch.int64))
        self.trainings[participants] += 1
        if decay == 1.0 or len(set(steps.tolist())) <= 1:
            # the authors' code decays before each training, the first too
            train = dataclasses.replace(base, lr=base.lr * decay ** int(steps[0])) if decay != 1.0 and len(steps) \
                else None
            trained, train_loss = self.engine.federated_train(self.models, participants, owners, round_index,
                                                              train=train, memory=self.memory)
            return trained - self.models[owners.to(device)], train_loss
        # participants at different steps of their decay: one training call per learning rate (a client's batches
        # and result do not depend on who trains beside it)
        trained = torch.empty(len(participants), self.ctx.spec.dim, device=device)
        train_loss = torch.empty(len(participants))
        for step in sorted(set(steps.tolist())):
            rows = torch.nonzero(steps == step).squeeze(1)
            train = dataclasses.replace(base, lr=base.lr * decay ** step)
            part, loss = self.engine.federated_train(self.models, participants[rows], owners[rows], round_index,
                                                     train=train, memory=self.memory)
            trained[rows.to(device)] = part
            train_loss[rows] = loss
        return trained - self.models[owners.to(device)], train_loss

    def _split_checks(self, round_index: int, participants: torch.Tensor, owners: torch.Tensor,
                      updates: torch.Tensor, weights: torch.Tensor, norms: torch.Tensor, sim: np.ndarray
                      ) -> tuple[list[dict], list[dict]]:
        """Test every cluster of the round against the criterion and split those that pass the gamma check.

        Returns (norms per cluster, split events)."""
        cluster_norms, events = [], []
        for k, mean in weighted_means_by_group(updates, owners, weights).items():
            pos = torch.nonzero(owners == k).squeeze(1)
            mean_norm, max_norm = float(mean.norm()), float(norms[pos].max())
            self.largest_mean_norm = max(self.largest_mean_norm, mean_norm)
            cluster_norms.append({"cluster": k, "mean_norm": round(mean_norm, 5), "max_norm": round(max_norm, 5),
                                  "size": len(pos)})
            if not self._criterion(round_index, len(pos), mean_norm, max_norm):
                continue
            ids = participants[pos].tolist()
            sub = sim[np.ix_(pos.numpy(), pos.numpy())]
            part1, part2, alpha = split_clients(ids, sub, self.opts.bipartition)
            accepted = gamma_check(self.opts.gamma_max, alpha) or not self.opts.gamma_check
            event = {"round": round_index, "cluster": k, "children": [part1, part2],
                     "alpha_cross_max": round(alpha, 5), "gamma_bound": round(gamma_bound(alpha), 5),
                     "gamma_max": self.opts.gamma_max, "mean_norm": round(mean_norm, 5),
                     "max_norm": round(max_norm, 5), "accepted": accepted}
            if accepted:
                new_k, placed = self._split(k, round_index, participants, updates, part1, part2)
                event["models"] = [k, new_k]
                if placed:
                    event["absent_members_placed"] = placed
            events.append(event)
        return cluster_norms, events

    def _aggregate(self, participants: torch.Tensor, updates: torch.Tensor, weights: torch.Tensor) -> None:
        """Cluster-wise aggregation (after any split: each child averages only its own clients' updates)."""
        new_models = self.models.clone()
        for k, mean in weighted_means_by_group(updates, self.assign[participants], weights).items():
            new_models[k] = self.models[k] + mean
        self.models = new_models

    def _criterion(self, round_index: int, size: int, mean_norm: float, max_norm: float) -> bool:
        o = self.opts
        if round_index < o.warmup_rounds or size < o.min_split_size:
            return False
        if self.cap is not None and self.models.shape[0] >= self.cap:
            return False
        return mean_norm < self.eps1 and max_norm > self.eps2

    def _split(self, k: int, round_index: int, participants: torch.Tensor, updates: torch.Tensor,
               part1: list[int], part2: list[int]) -> tuple[int, list]:
        """Split cluster k: part1 keeps model row k, part2 gets a new row; the tree caches the split."""
        node = self.nodes[self.leaf_of_model[k]]
        position = {c: i for i, c in enumerate(participants.tolist())}
        new_k = int(self.models.shape[0])
        self.models = torch.cat([self.models, self.models[k : k + 1].clone()])
        node.split_round = round_index
        node.model = self.models[k : k + 1].detach().clone()
        for part, model_index in ((part1, k), (part2, new_k)):
            child = TreeNode(len(self.nodes), node.id, list(part), model_index)
            self.nodes.append(child)
            node.children.append(child.id)
            node.child_updates.append(updates[[position[c] for c in part]].detach().clone())
            if model_index < len(self.leaf_of_model):
                self.leaf_of_model[model_index] = child.id
            else:
                self.leaf_of_model.append(child.id)
            self.assign[torch.tensor(part, dtype=torch.int64)] = model_index
        # Members that did not take part this round descend the tree from this node.
        taking_part = set(part1) | set(part2)
        absent = [c for c in torch.nonzero(self.assign == k).squeeze(1).tolist() if c not in taking_part]
        if not absent:
            return new_k, []
        clients = torch.tensor(absent, dtype=torch.int64)
        leaves = self._descend(clients, node.id, round_index)
        self._place(clients, leaves)
        return new_k, [[c, self.nodes[n].model_index] for c, n in zip(absent, leaves)]

    def _place(self, clients: torch.Tensor, leaves: list[int]) -> None:
        self.assign[clients] = torch.tensor([self.nodes[n].model_index for n in leaves], dtype=torch.int64)
        for c, n in zip(clients.tolist(), leaves):
            self.nodes[n].members.append(c)

    # -- the parameter tree -------------------------------------------------------
    def _descend(self, clients: torch.Tensor, node_id: int, round_index: int) -> list[int]:
        """Leaf reached by each client from `node_id`: at every split node the client trains from the
        cached pre-split model (sent to it) and follows the child with the most similar cached update."""
        where = [node_id] * len(clients)
        level = 0
        while True:
            todo = [i for i, n in enumerate(where) if not self.nodes[n].is_leaf]
            if not todo:
                return where
            for n in sorted({where[i] for i in todo}):
                node = self.nodes[n]
                idx = [i for i in todo if where[i] == n]
                ids = clients[idx]
                owners = torch.zeros(len(idx), dtype=torch.int64)
                trained, _ = self.engine.federated_train(node.model, ids, owners, round_index,
                                                         stream=self.stream("descend", round_index, n, level))
                upd = (trained - node.model.to(trained.device)).detach().to("cpu", torch.float64)
                upd = upd / upd.norm(dim=1, keepdim=True).clamp(min=1e-12)
                best = []
                for cached in node.child_updates:
                    c = cached.to("cpu", torch.float64)
                    c = c / c.norm(dim=1, keepdim=True).clamp(min=1e-12)
                    best.append((upd @ c.T).max(dim=1).values)
                choice = torch.stack(best, dim=1).argmax(dim=1)
                for j, i in enumerate(idx):
                    where[i] = node.children[int(choice[j])]
            level += 1

    def place_newcomers(self, clients, round_index):
        """Descend the parameter tree from the root by maximum cosine similarity (the paper's rule)."""
        self._place(clients, self._descend(clients, 0, round_index))

    def tree(self) -> list[dict]:
        """The parameter tree as JSON-able rows (no tensors)."""
        return [{"id": n.id, "parent": n.parent, "members": sorted(n.members), "model": n.model_index,
                 "split_round": n.split_round, "children": list(n.children)} for n in self.nodes]
