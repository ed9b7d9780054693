"""FlexCFL (Duan et al., arXiv 2108.09749) and its static form FedGroup (Duan et al., arXiv 2010.06870).

Group cold start (once, at setup), with m = `models` groups:
1. a random subset of `alpha x m` clients (every present client if fewer)
   pre-trains from the initial model for `pretrain_epochs` local epochs (the
   engine trains in epochs; 5 epochs of 50-60 samples in batches of 20 are 15
   minibatch steps, the authors' code uses 50 steps on larger clients);
2. the matrix of their updates is decomposed by truncated SVD into m
   directions in parameter space;
3. each client's EDC features are the cosine similarities of its update to the
   m directions (its "embedding", recorded as `edc`);
4. KMeans++ on the EDC features gives the m groups (or, with `measure=madc`,
   complete-linkage agglomerative clustering on the MADC dissimilarity:
   MADC(i, j) = mean over the other clients k of |cos(i, k) - cos(j, k)|);
5. a group's model is the mean of its members' pre-trained models, and its
   stored optimisation direction is the mean of their updates.

Client cold start: a client not in a group yet (present at setup but not in
the subset, or a newcomer) pre-trains from the initial model the same way and
joins the group whose stored direction is closest in cosine dissimilarity
(1 - cos) / 2. The stored directions are those of the cold start (FlexCFL's
code; FedGroup's code compared with each group's latest update instead).
By default (`client_cold_start=setup`) every present client is cold-started
at set-up and a newcomer when it joins, so every client has a group and is
evaluated from round 0; the authors' code cold-starts a client in the round
it is first selected (`client_cold_start=first-selected`: until then it has
no group and is not evaluated). Under full participation both give the same
records.

Every round the groups train by FedAvg inside each group (the engine's
train_and_aggregate). Inter-group aggregation with rate `eta_g` (0: purely
pluralistic groups): with `inter_group=updates` (the papers' form) each group
that trained this round adds eta_g times the sum of the other trained groups'
normalised updates, theta_g += eta_g * sum_{h != g} dtheta_h / ||dtheta_h||;
with `inter_group=models` (the authors' code) a group's model becomes the
weighted mean of the trained groups' models, its own with weight 1 and each
other h with weight eta_g / ||theta_h||.

Migration (FlexCFL only; FedGroup keeps its assignment for ever): before each
round, a participant whose training label distribution has moved by more than
`shift_threshold` since it was grouped is cold-started again (and may land in
another group). The move is measured by the earth mover's (Wasserstein-1)
distance between the two label distributions over label positions:
`scipy.stats.wasserstein_distance(labels, labels, u_weights=old_counts,
v_weights=new_counts)`. Distinct labels are at least 1 apart, so this distance
is never below the share of the data whose label would have to change: with the
default threshold 0.2 (the paper's 20% of the data) any change of more than 20%
of a client's label mix is detected (and, as distances grow with label positions, a
smaller move between distant labels can pass it too: 10% of the data moving from
label 0 to label 9 measures 0.9). The authors' code instead passes the two
count vectors as if they were samples, which compares sorted counts: a client
that swaps all its 3s for 7s keeps the same sorted counts and is never
migrated. Unsupervised runs use no labels, so there is no migration there.
"""
from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass

import numpy as np
import torch
from scipy.stats import wasserstein_distance

from ..engine.aggregate import uniform_mean, weighted_mean
from ..engine.seeding import derive_seed
from ..errors import ConfigError
from ..dynamics import newcomer_count
from ..settings import Choice, Interval, setting
from .base import Algorithm, RoundOutcome, WeightingOptions

MEASURES = ("edc", "madc")
INTER_GROUP = ("updates", "models")
COLD_STARTS = ("setup", "first-selected")
SELECTIONS = ("random", "round-robin")


@dataclass(frozen=True)
class FedGroupOptions(WeightingOptions):
    alpha: float = setting(20.0, Interval(0, low_open=True), label="Cold-start clients (alpha x models)", step=1.0,
                           allowed_text="a positive number (alpha x models clients pre-train)",
                           help="group cold start pre-trains alpha x m clients (every present client if fewer)")
    pretrain_epochs: int = setting(5, Interval(1, 1000), label="Pre-training epochs",
                                   allowed_text="a whole number of epochs in [1, 1000]",
                                   help="local epochs of a cold-start pre-training from the initial model")
    measure: str = setting("edc", Choice(MEASURES), label="Measure",
                           help="edc: KMeans++ on EDC features; madc: complete linkage on MADC")
    eta_g: float = setting(0.0, Interval(0), label="Inter-group rate (eta_g)", step=0.05,
                           allowed_text="a rate >= 0 (0: no inter-group aggregation)",
                           help="inter-group aggregation rate; 0 = pluralistic groups (no mixing)")
    inter_group: str = setting("updates", Choice(INTER_GROUP), label="Inter-group form",
                               help="updates: the papers' form; models: the authors' code")
    client_cold_start: str = setting("setup", Choice(COLD_STARTS), label="Client cold start",
                                     help="setup: every present client at set-up, a newcomer when it joins (every "
                                          "client has a group and is evaluated); first-selected: a client outside "
                                          "the group cold start (or a newcomer) is cold-started in the first round "
                                          "it takes part (the authors' code)")
    selection: str = setting("random", Choice(SELECTIONS), label="Client selection",
                             help="random: the run's random draw each round (every algorithm's way); round-robin: "
                                  "the authors' code, which takes the clients in order (client ids, wrapping round) "
                                  "while the round is below N / clients per round, then draws at random")
    kmeans_max_iter: int = setting(300, Interval(1, 10_000), label="KMeans iterations",
                                   help="most Lloyd iterations of the EDC KMeans (scikit-learn's default 300; the "
                                        "authors' code: 20)")


@dataclass(frozen=True)
class FlexCFLOptions(FedGroupOptions):
    migration: bool = setting(True, label="Migration",
                              help="cold-start again the clients whose label distribution moved")
    shift_threshold: float = setting(0.2, Interval(0, low_open=True), label="Shift threshold", step=0.05,
                                     allowed_text="a positive earth mover's distance (0.2 = 20% of the data moved)",
                                     help="earth mover's distance that counts as moved (0.2 = 20% of the data)")


# -- measures (pure functions, tested on their own) ------------------------------------------------

def label_shift(old_counts, new_counts) -> float:
    """Earth mover's distance between two label histograms, over label positions 0..C-1."""
    old = np.asarray(old_counts, dtype=np.float64)
    new = np.asarray(new_counts, dtype=np.float64)
    if old.sum() <= 0 or new.sum() <= 0:
        return 0.0
    labels = np.arange(len(old), dtype=np.float64)
    return float(wasserstein_distance(labels, labels, u_weights=old, v_weights=new))


def _unit_rows(x: np.ndarray) -> np.ndarray:
    return x / np.maximum(np.linalg.norm(x, axis=1, keepdims=True), 1e-12)


def svd_directions(updates: np.ndarray, m: int, seed: int) -> np.ndarray:
    """m directions [m, D] in parameter space: truncated SVD of the update matrix (as FedGroup's code)."""
    from sklearn.decomposition import TruncatedSVD

    if len(updates) < 2:  # one pre-trained client (m = 1): its update is the one direction (the SVD needs two)
        return updates[:m].copy()
    svd = TruncatedSVD(n_components=m, algorithm="randomized", random_state=seed % 2**31)
    return svd.fit_transform(updates.T).T  # [D, n] -> [D, m] -> [m, D]


def edc_features(updates: np.ndarray, directions: np.ndarray) -> np.ndarray:
    """EDC: cosine similarity of each update [n, D] to each direction [m, D] -> [n, m]."""
    return _unit_rows(updates) @ _unit_rows(directions).T


def madc_matrix(updates: np.ndarray) -> np.ndarray:
    """MADC(i, j) = mean over k not in {i, j} of |cos(i, k) - cos(j, k)| (FedGroup's data-driven measure)."""
    cos = _unit_rows(updates) @ _unit_rows(updates).T
    n = len(cos)
    diff = np.abs(cos[:, None, :] - cos[None, :, :])  # [i, j, k]
    k = np.arange(n)
    mask = np.ones((n, n, n), dtype=bool)
    mask[k, :, k] = False  # k == i
    mask[:, k, k] = False  # k == j
    count = np.maximum(mask.sum(-1), 1)
    out = (diff * mask).sum(-1) / count
    np.fill_diagonal(out, 0.0)
    return out


class FedGroup(Algorithm):
    name = "fedgroup"
    label = "FedGroup"
    summary = "Groups clients once by the directions of their pre-training updates (EDC + KMeans); static groups."
    needs_models = True
    Options = FedGroupOptions

    @classmethod
    def validate_config(cls, cfg) -> None:
        super().validate_config(cfg)
        from ..conditions.unseen import unseen_count

        present = cfg.num_clients - newcomer_count(cfg) - unseen_count(cfg)  # unseen clients never train
        if cfg.models is not None and cfg.models > present:
            raise ConfigError("models", cfg.models,
                              f"at most the {present} clients present at round 0: the group cold start needs "
                              "one pre-trained client per group")

    @property
    def migrates(self) -> bool:
        # migration compares label distributions: none without labels (unsupervised runs, regression data)
        return bool(getattr(self.opts, "migration", False)) and not self.cfg.unsupervised and \
            self.ctx.fed.task == "classification"

    def _pretrain_config(self):
        return dataclasses.replace(self.engine.train_cfg, local_epochs=self.opts.pretrain_epochs)

    def _pretrain(self, clients: torch.Tensor, round_index: int, stream: int) -> tuple[torch.Tensor, np.ndarray]:
        """(trained models [n, D], updates [n, D] float64) of the clients pre-trained from the initial model.

        Each client is sent the initial model and sends its pre-trained model back.
        """
        owners = torch.zeros(len(clients), dtype=torch.int64)
        trained, _ = self.engine.federated_train(self.init_models, clients, owners, round_index,
                                                 train=self._pretrain_config(), stream=stream)
        return trained, (trained - self.init_models).detach().to("cpu", torch.float64).numpy()

    # -- group cold start -----------------------------------------------------------
    def setup(self, clients):
        m = self.num_models
        fed = self.ctx.fed
        self.init_models = self.base_model()[None]  # [1, D]: what every cold start trains from
        count = min(len(clients), max(m, int(math.ceil(self.opts.alpha * m))))
        chosen = np.sort(self.rng("cold-start").choice(clients.numpy(), size=count, replace=False))
        chosen_t = torch.as_tensor(chosen, dtype=torch.int64)
        trained, updates = self._pretrain(chosen_t, 0, self.stream("group-cold-start"))
        labels, edc = self._group(updates)
        self._group_models(labels, trained, updates)
        self.assign[chosen_t] = labels
        n = fed.num_clients
        self.edc: list = [None] * n
        for i, c in enumerate(chosen.tolist()):
            self.edc[c] = [round(float(v), 5) for v in edc[i]]
        self.grouped_counts = torch.zeros(n, max(1, fed.num_classes))
        if fed.task == "classification":
            self.grouped_counts[chosen_t] = fed.label_counts(chosen_t)
        self._edc_changed = False
        extras = {"cold_start": {"clients": chosen.tolist(), "measure": self.opts.measure,
                                 "pretrain_epochs": self.opts.pretrain_epochs,
                                 "group_sizes": torch.bincount(labels, minlength=m).tolist()}}
        rest = torch.as_tensor(np.setdiff1d(clients.numpy(), chosen), dtype=torch.int64)
        self.waiting_newcomers: set[int] = set()
        if len(rest) and self.opts.client_cold_start == "setup":
            self._client_cold_start(rest, 0, "client-cold-start")
        extras["edc"] = list(self.edc)
        self._edc_changed = False
        # protocol flexcfl: the authors test each client on the group model it last received (when last selected)
        self.received = torch.zeros(n, self.models.shape[1], device=fed.device) \
            if self.cfg.protocol == "flexcfl" else None
        self.has_received = torch.zeros(n, dtype=torch.bool)
        if getattr(self.opts, "migration", False) and self.cfg.unsupervised:
            extras["migration_note"] = "no migration in unsupervised runs: it needs the clients' labels"
        return extras

    def _group(self, updates: np.ndarray) -> tuple[torch.Tensor, np.ndarray]:
        """(group per pre-trained client, EDC features): SVD directions, then KMeans++ on EDC or linkage on MADC."""
        m = self.num_models
        seed = derive_seed(self.cfg.seed, self.name, "cluster")
        self.directions = svd_directions(updates, m, seed)
        edc = edc_features(updates, self.directions)
        if len(updates) < 2:  # one pre-trained client (m = 1): its own group (neither clustering takes one sample)
            return torch.zeros(len(updates), dtype=torch.int64), edc
        if self.opts.measure == "edc":
            from sklearn.cluster import KMeans

            labels = KMeans(m, init="k-means++", n_init=10, max_iter=self.opts.kmeans_max_iter,
                            random_state=seed % 2**31).fit_predict(edc)
        else:
            from sklearn.cluster import AgglomerativeClustering

            labels = AgglomerativeClustering(n_clusters=m, metric="precomputed",
                                             linkage="complete").fit_predict(madc_matrix(updates))
        return torch.as_tensor(labels, dtype=torch.int64), edc

    def _group_models(self, labels: torch.Tensor, trained: torch.Tensor, updates: np.ndarray) -> None:
        """A group's model is the mean of its members' pre-trained models; its direction, of their updates."""
        m, device = self.num_models, self.ctx.fed.device
        trained = trained.detach().to(device)
        self.models = self.init_models.expand(m, -1).clone()
        self.group_directions = np.zeros((m, updates.shape[1]))
        for g in range(m):
            members = torch.nonzero(labels == g).squeeze(1)
            if len(members):  # KMeans / agglomerative never leave a group empty; kept safe anyway
                self.models[g] = uniform_mean(trained[members.to(device)])
                self.group_directions[g] = updates[members.numpy()].mean(0)

    def _client_cold_start(self, clients: torch.Tensor, round_index: int, purpose: str) -> torch.Tensor:
        """Pre-train from the initial model and join the group with the closest stored direction."""
        _, updates = self._pretrain(clients, round_index, self.stream(purpose, round_index))
        cos = _unit_rows(updates) @ _unit_rows(self.group_directions).T
        dissimilarity = (1.0 - cos) / 2.0
        groups = torch.as_tensor(dissimilarity.argmin(1), dtype=torch.int64)
        self.assign[clients] = groups
        edc = edc_features(updates, self.directions)
        for i, c in enumerate(clients.tolist()):
            self.edc[c] = [round(float(v), 5) for v in edc[i]]
        if self.ctx.fed.task == "classification":
            self.grouped_counts[clients] = self.ctx.fed.label_counts(clients)
        self._edc_changed = True
        return groups

    def place_newcomers(self, clients, round_index):
        if self.opts.client_cold_start == "first-selected":
            self.waiting_newcomers.update(clients.tolist())  # cold-started when first selected
            return
        self._client_cold_start(clients, round_index, "newcomer")

    def _first_cold_start(self, unplaced: torch.Tensor, round_index: int) -> None:
        """Cold-start the participants that have no group yet (first selection), newcomers on their own stream."""
        new = torch.tensor([c in self.waiting_newcomers for c in unplaced.tolist()], dtype=torch.bool)
        for mask, purpose in ((~new, "client-cold-start"), (new, "newcomer")):
            if bool(mask.any()):
                self._client_cold_start(unplaced[mask], round_index, purpose)
        self.waiting_newcomers.difference_update(unplaced.tolist())

    # -- rounds ------------------------------------------------------------------------
    def _migrate(self, participants: torch.Tensor, round_index: int) -> list[dict]:
        """Cold-start again the participants whose label distribution moved; one event each."""
        fed = self.ctx.fed
        grouped = participants[self.assign[participants] >= 0]
        if not len(grouped):
            return []
        now = fed.label_counts(grouped)
        distances = [label_shift(self.grouped_counts[c].numpy(), now[i].numpy())
                     for i, c in enumerate(grouped.tolist())]
        moved = [i for i, d in enumerate(distances) if d > self.opts.shift_threshold]
        if not moved:
            return []
        clients = grouped[moved]
        before = self.assign[clients].clone()
        after = self._client_cold_start(clients, round_index, "migration")
        events = [{"client": int(c), "from": int(b), "to": int(a), "emd": round(distances[i], 4)}
                  for c, b, a, i in zip(clients.tolist(), before.tolist(), after.tolist(), moved)]
        return events

    def _inter_group(self, old: torch.Tensor, new: torch.Tensor, trained: torch.Tensor) -> torch.Tensor:
        eta = self.opts.eta_g
        ids = torch.nonzero(trained).squeeze(1).tolist()
        if eta <= 0 or len(ids) < 2:
            return new
        out = new.clone()
        if self.opts.inter_group == "updates":
            delta = new - old
            unit = delta / delta.norm(dim=1, keepdim=True).clamp(min=1e-12)
            for g in ids:
                others = [h for h in ids if h != g]
                out[g] = new[g] + eta * unit[others].sum(0)
        else:
            scale = new.norm(dim=1).clamp(min=1e-12)
            for g in ids:
                w = torch.tensor([1.0 if h == g else eta / float(scale[h]) for h in ids], device=new.device)
                out[g] = weighted_mean(new[ids], w)  # own weight 1: the total never needs the clamp
        return out

    def select_participants(self, round_index, joined, count):
        """selection=round-robin (the authors' code): while round_index < N / count, the clients in order from
        round_index x count (wrapping round), so that everyone has taken part after ceil(N / count) rounds."""
        if self.opts.selection != "round-robin" or round_index >= len(joined) / count:
            return None
        return joined[(round_index * count + np.arange(count)) % len(joined)]

    def run_round(self, round_index, participants):
        extras: dict = {}
        if self.migrates:
            extras["migrations"] = self._migrate(participants, round_index) if round_index > 0 else []
        unplaced = participants[self.assign[participants] < 0]
        if len(unplaced):  # client_cold_start=first-selected: their first round
            self._first_cold_start(unplaced, round_index)
        old = self.models
        owners = self.assign[participants]
        if self.received is not None:  # what each participant is sent this round
            self.received[participants.to(old.device)] = old[owners.to(old.device)]
            self.has_received[participants] = True
        self.models, train_loss = self.engine.train_and_aggregate(old, participants, owners, round_index,
                                                                  weighting=self.opts.weighting)
        trained = torch.bincount(owners, minlength=old.shape[0]) > 0
        self.models = self._inter_group(old.to(self.models.device), self.models, trained.to(self.models.device))
        if self.received is not None:
            from ..protocols import last_received_accuracy

            extras.update(last_received_accuracy(self.engine, self.received, self.has_received))
        if self._edc_changed:
            extras["edc"] = list(self.edc)
            self._edc_changed = False
        phase = "migration" if extras.get("migrations") else "training"
        return RoundOutcome(phase, None, train_loss, extras)


class FlexCFL(FedGroup):
    name = "flexcfl"
    label = "FlexCFL"
    summary = ("FedGroup's grouping plus migration: a client whose label mix moved (earth mover's distance) "
               "is cold-started again.")
    Options = FlexCFLOptions
