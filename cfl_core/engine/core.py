"""Engine: what every algorithm calls to train, aggregate, and measure losses.

Algorithms decide who uses which model; the engine does the work, in chunks of
clients so memory stays bounded however many clients there are. Every federated
operation counts its own traffic in `engine.traffic` (see `traffic.py`).
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from ..errors import Diverged
from . import aggregate, native, summaries
from .allocator import advise_huge_pages, keep_freed_memory
from .federation import Federation
from .models import ModelSpec, per_sample_correct, per_sample_loss
from .objective import Objective
from .traffic import TrafficLedger
from ..conditions import NO_CONDITIONS
from .training import (BatchSchedule, OptimizerMemory, TrainConfig, batch_schedule, full_gradients, learn_mixing, masked_mean,
                       train_batched)

AGGREGATIONS = ("model", "gradient")  # CLoVE's Option I (model averaging) and Option II


def finite(values: torch.Tensor, what: str) -> torch.Tensor:
    """`values` unchanged, or Diverged when any is inf or NaN (training blew up: nothing after it is meaningful)."""
    # The sum is finite only when every value is (an inf or NaN carries into it): one pass instead of the
    # four of isfinite().all(), which cost ~15% of a FedAvg round at M = 1000. A finite tensor whose sum
    # overflows is told apart by the exact check.
    if values.numel() and not math.isfinite(float(values.sum())) and not bool(torch.isfinite(values).all()):
        raise Diverged(f"{what} are not finite numbers (inf or NaN)")
    return values


@dataclass
class Evaluation:
    loss: torch.Tensor  # [P] mean test loss per client
    accuracy: torch.Tensor | None  # [P] test accuracy per client; None for regression / reconstruction


@dataclass
class FeatureStats:
    """Per client and class, over its training samples, of the penultimate layer's output f(x)."""

    mean: torch.Tensor  # [P, classes, F] mean feature (a class prototype); 0 where the client has none
    count: torch.Tensor  # [P, classes] samples
    sq_norm: torch.Tensor  # [P, classes] mean of ||f(x)||^2


class Engine:
    # Chunk sizes beyond the memory budget, for speed (measured by `python -m cfl_core bench`):
    # a chunk whose tensors fit the CPU caches runs faster than one huge batch.
    eval_samples = 4096  # samples per forward pass in the loss matrix and evaluation
    train_param_bytes = 4 * 2**20  # parameter rows per training chunk ([chunk, D] float32)
    # The compiled kernel keeps one client (or group of eight) at a time in cache whatever the chunk, so its chunks
    # are larger (fewer passes of the per-chunk bookkeeping: a 1,000-client FedAvg step 0.94 of the 4 MB chunks' time,
    # side by side) and stay under the allocator's 32 MB mmap threshold (allocator.py), so they are reused.
    kernel_param_bytes = 16 * 2**20

    def __init__(self, spec: ModelSpec, fed: Federation, train: TrainConfig, seed: int,
                 aggregation: str = "model", memory_budget_mb: int = 768):
        self.spec = spec
        self.fed = fed
        self.train_cfg = train
        self.seed = seed
        self.aggregation = aggregation
        self.memory_budget = memory_budget_mb * 2**20
        self.traffic = TrafficLedger(spec.bytes_per_model, fed.num_clients)
        # drop-outs, stragglers, privacy noise, attackers (cfl_core/conditions): asked wherever a client's data
        # leaves it and wherever its local steps are drawn; the experiment sets a run's own
        self.conditions = NO_CONDITIONS
        keep_freed_memory()  # rounds reuse freed memory instead of faulting fresh pages in (allocator.py)

    # -- sizing -----------------------------------------------------------
    def _train_chunk(self, train: TrainConfig | None = None, kernel_may_train: bool = True) -> int:
        train = train or self.train_cfg
        batch = max(1, min(train.batch_size, int(self.fed.x_train.shape[1])))
        per_client = 4 * (6 * self.spec.dim + batch * self.spec.activation_floats())
        by_memory = self.memory_budget // per_client
        kernel = kernel_may_train and native.trains(self.spec, train.optimizer, self.fed.device)
        by_cache = (self.kernel_param_bytes if kernel else self.train_param_bytes) // (4 * self.spec.dim)
        return max(1, min(by_memory, by_cache))

    def _eval_chunk(self, samples_per_client: int) -> int:
        per_client = 4 * max(1, samples_per_client) * self.spec.activation_floats()
        by_memory = self.memory_budget // per_client
        by_cache = self.eval_samples // max(1, samples_per_client)
        return max(1, min(by_memory, by_cache))

    def weights(self, clients: torch.Tensor, weighting: str = "samples") -> torch.Tensor:
        """Aggregation weight of each client: its training sample count (`samples`), or 1 (`uniform`)."""
        counts = self.fed.n_train[clients.to(self.fed.device)].to(torch.float32)
        if weighting == "uniform":
            return torch.ones_like(counts)
        if weighting != "samples":
            raise ValueError(f"weighting {weighting!r}: samples or uniform")
        return counts

    # -- local training -----------------------------------------------------
    def schedule(self, clients: torch.Tensor, stream: int, train: TrainConfig | None = None) -> BatchSchedule:
        """The minibatches of these clients for a stream (see `training.batch_schedule`)."""
        clients = clients.cpu()
        n = self.fed.n_train[clients.to(self.fed.device)].cpu()
        return self.conditions.cut_schedule(batch_schedule(n, clients, self.seed, stream, train or self.train_cfg),
                                            clients)

    def train_without_exchange(self, start: torch.Tensor, clients: torch.Tensor, round_index: int,
                               train: TrainConfig | None = None, stream: int | None = None,
                               schedule: BatchSchedule | None = None, objective: Objective | None = None,
                               memory: OptimizerMemory | None = None) -> tuple[torch.Tensor, torch.Tensor]:
        """Train start[i] on client clients[i]; returns (params [P, D], mean train loss [P]).

        Nothing is sent or received: only for models that never leave the client
        (Local-only). Federated training is `federated_train` / `train_and_aggregate`,
        which count their traffic. `train` overrides the run's training settings (e.g. a pre-training phase);
        `stream` names the minibatch random stream (default: the round index), so
        extra training outside the rounds draws batches of its own. `schedule`, when
        given, is `self.schedule(clients, stream, train)` already drawn. `objective`
        adds the terms of `objective.py` (rows follow `clients`). `memory` (one row per client of the
        federation, `OptimizerMemory.zeros`): each client's optimiser continues from its row and leaves
        its state there (persistent optimiser state); None: a fresh optimiser per call.
        """
        train = train or self.train_cfg
        stream = round_index if stream is None else stream
        clients = clients.cpu()
        # One schedule for all clients, sliced per chunk (drawing it per chunk cost ~9% of a round).
        schedule = schedule if schedule is not None else self.schedule(clients, stream, train)
        # Chunks train in place in their rows of one result tensor (no concatenation at the end).
        result = torch.empty(len(clients), self.spec.dim, device=self.fed.device)
        advise_huge_pages(result)  # a large one is a fresh mapping each call: 2 MB pages fault in 512x fewer times
        losses = []
        chunk = self._train_chunk(train, kernel_may_train=objective is None and memory is None)
        for lo in range(0, len(clients), chunk):
            hi = min(lo + chunk, len(clients))
            part = memory.rows(clients[lo:hi]) if memory is not None else None
            _, loss = train_batched(self.spec, start[lo:hi], self.fed, clients[lo:hi], schedule.rows(lo, hi),
                                    train, out=result[lo:hi],
                                    objective=objective.rows(lo, hi) if objective is not None else None,
                                    memory=part)
            if part is not None:
                memory.store(clients[lo:hi], part)
            losses.append(loss)
        return finite(result, "the trained model parameters"), (torch.cat(losses).cpu() if losses else torch.zeros(0))

    def federated_train(self, models: torch.Tensor, clients: torch.Tensor, model_of: torch.Tensor,
                        round_index: int, train: TrainConfig | None = None, stream: int | None = None,
                        objective: Objective | None = None, memory: OptimizerMemory | None = None
                        ) -> tuple[torch.Tensor, torch.Tensor]:
        """Send `models[model_of[i]]` to client `clients[i]`, train it there and receive the result.

        Returns (trained params [P, D], mean train loss [P]); the caller derives an
        update (trained - start) where it needs one: the same bytes come back.
        `train` and `stream` as in `train_without_exchange`. An objective's feature
        targets (prototypes) are sent too; a proximal anchor is the start model itself.
        """
        self.traffic.send(models, clients, model_of)
        self._send_objective(objective, clients)
        self.traffic.receive_models(len(clients))
        start = models.to(self.fed.device)[model_of.to(self.fed.device)]
        trained, loss = self.train_without_exchange(start, clients, round_index, train=train, stream=stream,
                                                    objective=objective, memory=memory)
        return self.conditions.sent_models(start, trained, clients), loss

    def local_train(self, models: torch.Tensor, clients: torch.Tensor, model_of: torch.Tensor, round_index: int,
                    train: TrainConfig | None = None, stream: int | None = None,
                    objective: Objective | None = None) -> tuple[torch.Tensor, torch.Tensor]:
        """Like `federated_train`, but the trained models stay on the clients: nothing comes back.

        The result is recorded as held by its clients (row i by clients[i]), so a later
        `federated_train` of it sends nothing down (FedPAC's head phase before its body phase).
        """
        self.traffic.send(models, clients, model_of)
        self._send_objective(objective, clients)
        start = models.to(self.fed.device)[model_of.to(self.fed.device)]
        trained, loss = self.train_without_exchange(start, clients, round_index, train=train, stream=stream,
                                                    objective=objective)
        self.traffic.hold(trained, clients, torch.arange(len(clients)))
        return trained, loss

    def client_update(self, own: torch.Tensor, clients: torch.Tensor, round_index: int,
                      train: TrainConfig | None = None, stream: int | None = None,
                      objective: Objective | None = None) -> tuple[torch.Tensor, torch.Tensor]:
        """Each client trains its own model `own[i]`, which never leaves it (FedProto): only what the
        objective needs (prototypes) is sent, nothing comes back. Returns (trained [P, D], loss [P])."""
        self._send_objective(objective, clients)
        return self.train_without_exchange(own, clients, round_index, train=train, stream=stream,
                                           objective=objective)

    def train_personal(self, own: torch.Tensor, clients: torch.Tensor, round_index: int, models: torch.Tensor,
                       objective: Objective | None = None, memory: OptimizerMemory | None = None
                       ) -> tuple[torch.Tensor, torch.Tensor]:
        """Each client receives every row of `models` (unless it holds them), trains its own model `own[i]`
        (kept on the client from round to round) under `objective`, which may refer to them, and sends the
        trained model back (FedSoft: a proximal pull towards the cluster models). Returns (trained [P, D],
        loss [P])."""
        self.traffic.send(models, clients)
        self._send_objective(objective, clients)
        self.traffic.receive_models(len(clients))
        trained, loss = self.train_without_exchange(own, clients, round_index, objective=objective, memory=memory)
        return self.conditions.sent_models(own, trained, clients), loss

    def upload(self, values: torch.Tensor) -> torch.Tensor:
        """Row i of `values` [P, F] is what participant i computed and sends to the server (F float32 each: mixture
        weights, per-cluster label counts); returns it as the server receives it."""
        self.traffic.receive_floats(int(values.shape[0]), int(values[0].numel()) if len(values) else 0)
        self.conditions.sent_in_clear("statistics (mixture weights, label counts)")
        return values

    def upload_models(self, start: torch.Tensor, trained: torch.Tensor, clients: torch.Tensor) -> torch.Tensor:
        """Row i of `trained` [P, D] is a model client clients[i] trained from `start[i]` outside a federated call
        (SR-FCA's local models) and now sends; counted as `upload` counts floats, and, like every model a client
        sends, what the conditions make of it (noise, attacks)."""
        self.traffic.receive_floats(int(trained.shape[0]), int(trained[0].numel()) if len(trained) else 0)
        return self.conditions.sent_models(start, trained, clients)

    def _send_objective(self, objective: Objective | None, clients: torch.Tensor) -> None:
        if objective is not None and objective.has_feature_term:
            self.traffic.send_floats(len(clients), objective.target_floats())

    def adaptive_local_aggregation(self, received: torch.Tensor, model_of: torch.Tensor, local: torch.Tensor,
                                   weights: torch.Tensor, mixed: torch.Tensor, clients: torch.Tensor,
                                   stream: int, share: float, passes: torch.Tensor, eta: float,
                                   threshold: float, window: int
                                   ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """FedALA's local initialisation: send `received[model_of[i]]` to clients[i], which mixes it with
        its own `local[i]` by learnt element-wise weights (`training.learn_mixing`) on a random `share` of
        its training data (one shuffled epoch of stream `stream`, cut to that share).

        Returns (mixed models [P, D], weights [P, D], passes taken [P]); the mixed models stay on the
        clients (held: training them next sends nothing down).
        """
        self.traffic.send(received, clients, model_of)
        device = self.fed.device
        clients = clients.cpu()
        rows = received.to(device)[model_of.to(device)]
        one_epoch = TrainConfig(local_epochs=1, batch_size=self.train_cfg.batch_size)
        schedule = self.schedule(clients, stream, one_epoch).share(share, self.fed.n_train[clients.to(device)].cpu())
        out = torch.empty(len(clients), self.spec.dim, device=device)
        new_weights = torch.empty_like(out)
        taken = torch.zeros(len(clients), dtype=torch.long)
        chunk = self._train_chunk(kernel_may_train=False)  # learnt mixing weights: autograd, the torch path
        for lo in range(0, len(clients), chunk):
            hi = min(lo + chunk, len(clients))
            theta, w, done = self._learn_mixing(local[lo:hi], rows[lo:hi], weights[lo:hi], mixed, clients[lo:hi],
                                                schedule.rows(lo, hi), eta, passes[lo:hi], threshold, window)
            out[lo:hi], new_weights[lo:hi], taken[lo:hi] = theta, w, done.cpu()
        self.traffic.hold(out, clients, torch.arange(len(clients)))
        return out, new_weights, taken

    def _learn_mixing(self, local, received, weights, mixed, clients, schedule, eta, passes, threshold, window):
        return learn_mixing(self.spec, local, received, weights, mixed, self.fed, clients, schedule, eta, passes,
                            threshold, window)

    def train_and_aggregate(self, models: torch.Tensor, clients: torch.Tensor, model_of: torch.Tensor,
                            round_index: int, objective: Objective | None = None, weighting: str = "samples"
                            ) -> tuple[torch.Tensor, torch.Tensor]:
        """One federated round for every model: clients train from their model, the server averages.

        `weighting` as in `weights`: by sample count (FedAvg) or every client alike (IFCA's code).

        `model_of[i]` is the model client `clients[i]` trains. Models nobody trained stay as they were.
        Returns (new models [K, D], mean train loss per client [P]). Memory is bounded by chunking.
        Traffic: the model each client starts from down (unless it already holds it), its
        trained model (or gradient) up. `objective` (model aggregation only) as in `federated_train`.
        """
        if objective is not None and self.aggregation == "gradient":
            raise ValueError("a local objective needs model aggregation")
        self.traffic.send(models, clients, model_of)
        self._send_objective(objective, clients)
        self.traffic.receive_models(len(clients))
        device = self.fed.device
        models = models.to(device)
        clients, model_of = clients.cpu(), model_of.to(device)
        sums, totals = aggregate.zero_sums(models)
        losses = []
        chunk = self._train_chunk(kernel_may_train=objective is None and self.aggregation != "gradient")
        schedule = self.schedule(clients, round_index) if self.aggregation != "gradient" else None
        for lo in range(0, len(clients), chunk):
            ids, owners = clients[lo : lo + chunk], model_of[lo : lo + chunk]
            w = self.weights(ids, weighting)
            if self.aggregation == "gradient":
                contribution = self.conditions.sent_gradients(full_gradients(self.spec, models[owners], self.fed, ids),
                                                              ids)
                losses.append(torch.full((len(ids),), float("nan")))
            else:
                # one model (FedAvg): every client starts from a view of it, no gathered [chunk, D] copy
                start = models.expand(len(ids), -1) if models.shape[0] == 1 else models[owners]
                contribution, loss = self.train_without_exchange(
                    start, ids, round_index, schedule=schedule.rows(lo, lo + len(ids)),
                    objective=objective.rows(lo, lo + len(ids)) if objective is not None else None)
                contribution = self.conditions.sent_models(start, contribution, ids)
                losses.append(loss)
            aggregate.add_weighted(sums, totals, contribution, owners, w)
        mean, trained = aggregate.group_means(sums, totals)
        new = finite(models - self.train_cfg.lr * mean if self.aggregation == "gradient" else mean,
                     "the aggregated model parameters")
        return aggregate.keep_untrained(new, models, trained), (torch.cat(losses) if losses else torch.zeros(0))

    # -- what clients compute from their data and send -----------------------------------------
    @torch.no_grad()
    def feature_statistics(self, params: torch.Tensor, clients: torch.Tensor) -> FeatureStats:
        """Per-class statistics of each client's features under its own model `params[i]` (no traffic)."""
        fed, device = self.fed, self.fed.device
        clients = clients.cpu()
        classes, n_max = fed.num_classes, int(fed.x_train.shape[1])
        dim = self.spec.feature_dim
        mean = torch.zeros(len(clients), classes, dim)
        count = torch.zeros(len(clients), classes)
        sq = torch.zeros(len(clients), classes)
        mask_all = fed.train_mask()
        chunk = self._eval_chunk(n_max)
        params = params.to(device)
        for lo in range(0, len(clients), chunk):
            ids = clients[lo : lo + chunk].to(device)
            f = self.spec.features(self.spec.views(params[lo : lo + chunk]), fed.x_train[ids])  # [c, n, F]
            onehot = torch.nn.functional.one_hot(fed.y_train[ids].clamp(min=0), classes).to(f.dtype)
            onehot = onehot * mask_all[ids][..., None].to(f.dtype)  # padding counts for no class
            n = onehot.sum(1)  # [c, classes]
            sums = torch.bmm(onehot.transpose(1, 2), f)
            sq_sums = torch.bmm(onehot.transpose(1, 2), (f * f).sum(-1, keepdim=True)).squeeze(-1)
            held = n.clamp(min=1)
            mean[lo : lo + len(ids)] = (sums / held[..., None]).cpu()
            count[lo : lo + len(ids)] = n.cpu()
            sq[lo : lo + len(ids)] = (sq_sums / held).cpu()
        return FeatureStats(mean, count, sq)

    def upload_feature_statistics(self, params: torch.Tensor, clients: torch.Tensor, *,
                                  second_moments: bool = False) -> FeatureStats:
        """Each client sends its class prototypes (the classes it holds x F floats) and its class counts
        (`classes` floats); with `second_moments` also the mean squared feature norm of each held class
        (FedPAC's variance term)."""
        stats = self.feature_statistics(params, clients)
        held = (stats.count > 0).sum(1)
        each = held * self.spec.feature_dim + self.fed.num_classes + (held if second_moments else 0)
        self.traffic.receive_floats(len(clients), each)
        self.conditions.sent_in_clear("class prototypes and counts")
        return stats

    def upload_local_centres(self, clients: torch.Tensor, k: int, seed: int) -> list[tuple]:
        """k-FED: each client runs k-means on its own inputs and sends (centres [k', d], sizes [k'])."""
        out = [summaries.local_centres(self.fed, int(c), k, seed) for c in clients.tolist()]
        self.traffic.receive_floats(len(out), summaries.floats_of([c for c, _ in out]) + torch.tensor(
            [len(sizes) for _, sizes in out]))
        self.conditions.sent_in_clear("local k-means centres")
        return out

    def upload_subspaces(self, clients: torch.Tensor, p: int, per_class: bool) -> list:
        """PACFL: each client sends the top-p left singular vectors of its data matrix (per class if asked)."""
        out = [summaries.top_subspace(self.fed, int(c), p, per_class) for c in clients.tolist()]
        self.traffic.receive_floats(len(out), summaries.floats_of(out))
        self.conditions.sent_in_clear("data subspaces")
        return out

    # -- measuring ------------------------------------------------------------
    def loss_matrix(self, models: torch.Tensor, clients: torch.Tensor, *, uploads: bool) -> torch.Tensor:
        """Mean training loss of every client on every model, `[P, K]` on the CPU.

        Every client receives every model (unless it already holds it). `uploads`: the
        clients send their K losses (float32) to the server (CLoVE's loss vectors, the
        restarts' shares); False when the client acts on them itself (IFCA's lowest loss).
        """
        self.traffic.send(models, clients)
        if uploads:
            self.traffic.receive_floats(len(clients), models.shape[0])
        elif models.shape[0] > 1:
            self.conditions.sent_in_clear("each client's choice of model (made from its own losses)")
        losses = finite(self._loss_values(models, clients), "the clients' training losses")
        return self.conditions.sent_losses(losses, clients, uploads=uploads)

    def sample_losses(self, models: torch.Tensor, clients: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """The loss of every training sample of each client on every model, computed on the clients:
        (losses [P, n_max, K] on the device, valid [P, n_max]). Every client receives every model (unless it
        holds it); nothing goes up (what a client derives from them and sends is counted by `upload`)."""
        self.traffic.send(models, clients)
        return self._sample_loss_values(models, clients), self.fed.train_mask()[clients.to(self.fed.device)]

    @torch.no_grad()
    def _sample_loss_values(self, models: torch.Tensor, clients: torch.Tensor) -> torch.Tensor:
        device = self.fed.device
        models, clients = models.to(device), clients.to(device)
        n_max = int(self.fed.x_train.shape[1])
        out = torch.zeros(len(clients), n_max, models.shape[0], device=device)
        chunk = self._eval_chunk(n_max)
        for lo in range(0, len(clients), chunk):
            ids = clients[lo : lo + chunk]
            x = self.fed.x_train[ids].reshape(1, len(ids) * n_max, *self.fed.input_shape)
            y = self.fed.y_train[ids].reshape(1, -1)
            for k, per in self._shared_losses(models, x, y):
                out[lo : lo + len(ids), :, k] = per.view(len(ids), n_max)
        return finite(out.masked_fill(~self.fed.train_mask()[clients][..., None], 0.0), "the clients' sample losses")

    @torch.no_grad()
    def _loss_values(self, models: torch.Tensor, clients: torch.Tensor) -> torch.Tensor:
        """The loss matrix itself (no traffic). Each model sees a whole chunk of clients' samples as one batch: a model
        shared by many clients needs no per-client copies.
        """
        device = self.fed.device
        models = models.to(device)
        clients = clients.to(device)
        n_max = int(self.fed.x_train.shape[1])
        out = torch.zeros(len(clients), models.shape[0])
        mask_all = self.fed.train_mask()
        chunk = self._eval_chunk(n_max)
        for lo in range(0, len(clients), chunk):
            ids = clients[lo : lo + chunk]
            x = self.fed.x_train[ids].reshape(1, len(ids) * n_max, *self.fed.input_shape)
            y = self.fed.y_train[ids].reshape(1, -1)
            mask = mask_all[ids]
            for k, per in self._shared_losses(models, x, y):
                out[lo : lo + len(ids), k] = masked_mean(per.view(len(ids), n_max), mask).cpu()
        return out

    def _shared_losses(self, models: torch.Tensor, x: torch.Tensor, y: torch.Tensor):
        """(k, per-sample losses [B] of model k) for every model over the same samples x [1, B, ...], the models
        passed `spec.models_shared` at a time (the CNN stacks their convolutions: ~2.5x faster at K = 4)."""
        step = max(1, self.spec.models_shared)
        for lo in range(0, models.shape[0], step):
            out = self.spec.forward_shared(models[lo : lo + step], x)
            per = per_sample_loss(self.spec.loss_kind, out, x, y.expand(out.shape[0], -1))
            for j in range(out.shape[0]):
                yield lo + j, per[j]

    def personalised_evaluation(self, models: torch.Tensor, model_of: torch.Tensor, clients: torch.Tensor,
                                train: TrainConfig, steps: int, stream: int) -> Evaluation:
        """Each client adapts `models[model_of[i]]` by `steps` minibatch steps of `train` on its own
        training data, then is tested on the result (Per-FedAvg's personalised evaluation).

        Evaluation is never traffic in CFL Lab (clients test the models they hold), so nothing is counted.
        """
        clients = clients.cpu()
        start = models.to(self.fed.device)[model_of.to(self.fed.device)]
        schedule = self.schedule(clients, stream, train).first(steps)
        adapted, _ = self.train_without_exchange(start, clients, 0, train=train, schedule=schedule)
        return self.evaluate(adapted, torch.arange(len(clients)), clients)

    @torch.no_grad()
    def evaluate(self, models: torch.Tensor, model_of: torch.Tensor, clients: torch.Tensor | None = None,
                 prototypes: torch.Tensor | None = None, prototype_mask: torch.Tensor | None = None
                 ) -> Evaluation:
        """Test loss and accuracy of each client on its own model `models[model_of[i]]`.

        With `prototypes` [classes, F] a sample is classified by the nearest prototype of its features
        (logits = minus the squared distances; classes without one, `prototype_mask` False, are never
        predicted, and a sample of such a class counts as wrong with the loss of a uniform guess)."""
        fed, device = self.fed, self.fed.device
        clients = torch.arange(fed.num_clients) if clients is None else clients.cpu()
        model_of = model_of.cpu()
        n_max = int(fed.x_test.shape[1])
        loss = torch.zeros(len(clients))
        correct = torch.zeros(len(clients))
        mask_all = fed.test_mask()
        chunk = self._eval_chunk(n_max)
        models = models.to(device)
        # every client in order (each round's evaluation): a chunk's test data is a slice of the federation's,
        # read where it is instead of gathered (a copy of every test sample a round)
        in_order = len(clients) == fed.num_clients and bool(torch.equal(clients, torch.arange(len(clients))))
        for lo in range(0, len(clients), chunk):
            ids, owners = clients[lo : lo + chunk].to(device), model_of[lo : lo + chunk].to(device)
            part = slice(lo, lo + len(ids)) if in_order else ids
            x, y, mask = fed.x_test[part], fed.y_test[part], mask_all[part]
            if models.shape[0] <= 16:
                # few models: one big batch per model, no per-client parameter copies
                out_loss = torch.zeros(len(ids), n_max, device=device)
                out_correct = torch.zeros(len(ids), n_max, device=device)
                held = torch.unique(owners).tolist()
                for k in held:
                    sel = (owners == k).nonzero().squeeze(1)
                    # one model for the whole chunk (FedAvg): the chunk as it is, no gathered copy of it
                    xs = (x if len(held) == 1 else x[sel]).reshape(1, -1, *fed.input_shape)
                    ys = (y if len(held) == 1 else y[sel]).reshape(1, -1)
                    out = self._outputs(models[k : k + 1], xs, prototypes, prototype_mask)
                    out_loss[sel] = self._loss(out, xs, ys, prototypes).view(len(sel), n_max)
                    c = per_sample_correct(self.spec.loss_kind, out, ys)
                    if c is not None:
                        out_correct[sel] = c.view(len(sel), n_max)
            else:
                out = self._outputs(models[owners], x, prototypes, prototype_mask)
                out_loss = self._loss(out, x, y, prototypes)
                c = per_sample_correct(self.spec.loss_kind, out, y)
                out_correct = c if c is not None else torch.zeros_like(out_loss)
            loss[lo : lo + len(ids)] = masked_mean(out_loss, mask).cpu()
            correct[lo : lo + len(ids)] = masked_mean(out_correct, mask).cpu()
        has_accuracy = per_sample_correct(self.spec.loss_kind, torch.zeros(1, 1, 2), torch.zeros(1, 1)) is not None
        return Evaluation(loss, correct if has_accuracy else None)

    def _outputs(self, models, x, prototypes, prototype_mask):
        if prototypes is None:
            return self.spec.forward(models, x)
        f = self.spec.features(self.spec.views(models), x)  # [C, B, F]
        protos = prototypes.to(f.device)
        logits = -((f[:, :, None, :] - protos[None, None]) ** 2).sum(-1)
        if prototype_mask is not None:
            logits = logits.masked_fill(~prototype_mask.to(f.device)[None, None], float("-inf"))
        return logits

    def _loss(self, out, x, y, prototypes):
        loss = per_sample_loss(self.spec.loss_kind, out, x, y)
        if prototypes is None:
            return loss
        # a sample of a class without a prototype (its logit is -inf)
        return torch.where(torch.isfinite(loss), loss, torch.full_like(loss, math.log(max(2, out.shape[-1]))))
