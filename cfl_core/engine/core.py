"""Engine: what every algorithm calls to train, aggregate, and measure losses.

Algorithms decide who uses which model; the engine does the work, in chunks of
clients so memory stays bounded however many clients there are. Every federated
operation counts its own traffic in `engine.traffic` (see `traffic.py`).
"""
from __future__ import annotations

from dataclasses import dataclass

import torch

from ..errors import Diverged
from . import aggregate
from .federation import Federation
from .models import ModelSpec, per_sample_correct, per_sample_loss
from .traffic import TrafficLedger
from .training import BatchSchedule, TrainConfig, batch_schedule, full_gradients, masked_mean, train_batched

AGGREGATIONS = ("model", "gradient")  # CLoVE's Option I (model averaging) and Option II


def finite(values: torch.Tensor, what: str) -> torch.Tensor:
    """`values` unchanged, or Diverged when any is inf or NaN (training blew up: nothing after it is meaningful)."""
    if values.numel() and not bool(torch.isfinite(values).all()):
        raise Diverged(f"{what} are not finite numbers (inf or NaN)")
    return values


@dataclass
class Evaluation:
    loss: torch.Tensor  # [P] mean test loss per client
    accuracy: torch.Tensor | None  # [P] test accuracy per client; None for regression / reconstruction


class Engine:
    # Chunk sizes beyond the memory budget, for speed (measured by `python -m cfl_core bench`):
    # a chunk whose tensors fit the CPU caches runs faster than one huge batch.
    eval_samples = 4096  # samples per forward pass in the loss matrix and evaluation
    train_param_bytes = 4 * 2**20  # parameter rows per training chunk ([chunk, D] float32)

    def __init__(self, spec: ModelSpec, fed: Federation, train: TrainConfig, seed: int,
                 aggregation: str = "model", memory_budget_mb: int = 768):
        self.spec = spec
        self.fed = fed
        self.train_cfg = train
        self.seed = seed
        self.aggregation = aggregation
        self.memory_budget = memory_budget_mb * 2**20
        self.traffic = TrafficLedger(spec.bytes_per_model, fed.num_clients)

    # -- sizing -----------------------------------------------------------
    def _train_chunk(self) -> int:
        batch = max(1, min(self.train_cfg.batch_size, int(self.fed.x_train.shape[1])))
        per_client = 4 * (6 * self.spec.dim + batch * self.spec.activation_floats())
        by_memory = self.memory_budget // per_client
        by_cache = self.train_param_bytes // (4 * self.spec.dim)
        return max(1, min(by_memory, by_cache))

    def _eval_chunk(self, samples_per_client: int) -> int:
        per_client = 4 * max(1, samples_per_client) * self.spec.activation_floats()
        by_memory = self.memory_budget // per_client
        by_cache = self.eval_samples // max(1, samples_per_client)
        return max(1, min(by_memory, by_cache))

    def weights(self, clients: torch.Tensor) -> torch.Tensor:
        """Aggregation weight of each client: its training sample count."""
        return self.fed.n_train[clients.to(self.fed.device)].to(torch.float32)

    # -- local training -----------------------------------------------------
    def schedule(self, clients: torch.Tensor, stream: int, train: TrainConfig | None = None) -> BatchSchedule:
        """The minibatches of these clients for a stream (see `training.batch_schedule`)."""
        clients = clients.cpu()
        n = self.fed.n_train[clients.to(self.fed.device)].cpu()
        return batch_schedule(n, clients, self.seed, stream, train or self.train_cfg)

    def train_without_exchange(self, start: torch.Tensor, clients: torch.Tensor, round_index: int,
                               train: TrainConfig | None = None, stream: int | None = None,
                               schedule: BatchSchedule | None = None) -> tuple[torch.Tensor, torch.Tensor]:
        """Train start[i] on client clients[i]; returns (params [P, D], mean train loss [P]).

        Nothing is sent or received: only for models that never leave the client
        (Local-only). Federated training is `federated_train` / `train_and_aggregate`,
        which count their traffic. `train` overrides the run's training settings (e.g. a pre-training phase);
        `stream` names the minibatch random stream (default: the round index), so
        extra training outside the rounds draws batches of its own. `schedule`, when
        given, is `self.schedule(clients, stream, train)` already drawn.
        """
        train = train or self.train_cfg
        stream = round_index if stream is None else stream
        clients = clients.cpu()
        # One schedule for all clients, sliced per chunk (drawing it per chunk cost ~9% of a round).
        schedule = schedule if schedule is not None else self.schedule(clients, stream, train)
        # Chunks train in place in their rows of one result tensor (no concatenation at the end).
        result = torch.empty(len(clients), self.spec.dim, device=self.fed.device)
        losses = []
        chunk = self._train_chunk()
        for lo in range(0, len(clients), chunk):
            hi = min(lo + chunk, len(clients))
            _, loss = train_batched(self.spec, start[lo:hi], self.fed, clients[lo:hi], schedule.rows(lo, hi),
                                    train, out=result[lo:hi])
            losses.append(loss)
        return finite(result, "the trained model parameters"), (torch.cat(losses).cpu() if losses else torch.zeros(0))

    def federated_train(self, models: torch.Tensor, clients: torch.Tensor, model_of: torch.Tensor,
                        round_index: int, train: TrainConfig | None = None, stream: int | None = None
                        ) -> tuple[torch.Tensor, torch.Tensor]:
        """Send `models[model_of[i]]` to client `clients[i]`, train it there and receive the result.

        Returns (trained params [P, D], mean train loss [P]); the caller derives an
        update (trained - start) where it needs one: the same bytes come back.
        `train` and `stream` as in `train_without_exchange`.
        """
        self.traffic.send(models, clients, model_of)
        self.traffic.receive_models(len(clients))
        start = models.to(self.fed.device)[model_of.to(self.fed.device)]
        return self.train_without_exchange(start, clients, round_index, train=train, stream=stream)

    def train_and_aggregate(self, models: torch.Tensor, clients: torch.Tensor, model_of: torch.Tensor,
                            round_index: int) -> tuple[torch.Tensor, torch.Tensor]:
        """One federated round for every model: clients train from their model, the server averages.

        `model_of[i]` is the model client `clients[i]` trains. Models nobody trained stay as they were.
        Returns (new models [K, D], mean train loss per client [P]). Memory is bounded by chunking.
        Traffic: the model each client starts from down (unless it already holds it), its
        trained model (or gradient) up.
        """
        self.traffic.send(models, clients, model_of)
        self.traffic.receive_models(len(clients))
        device = self.fed.device
        models = models.to(device)
        clients, model_of = clients.cpu(), model_of.to(device)
        sums, totals = aggregate.zero_sums(models)
        losses = []
        chunk = self._train_chunk()
        schedule = self.schedule(clients, round_index) if self.aggregation != "gradient" else None
        for lo in range(0, len(clients), chunk):
            ids, owners = clients[lo : lo + chunk], model_of[lo : lo + chunk]
            w = self.weights(ids)
            if self.aggregation == "gradient":
                contribution = full_gradients(self.spec, models[owners], self.fed, ids)
                losses.append(torch.full((len(ids),), float("nan")))
            else:
                contribution, loss = self.train_without_exchange(models[owners], ids, round_index,
                                                                 schedule=schedule.rows(lo, lo + len(ids)))
                losses.append(loss)
            aggregate.add_weighted(sums, totals, contribution, owners, w)
        mean, trained = aggregate.group_means(sums, totals)
        new = finite(models - self.train_cfg.lr * mean if self.aggregation == "gradient" else mean,
                     "the aggregated model parameters")
        return aggregate.keep_untrained(new, models, trained), (torch.cat(losses) if losses else torch.zeros(0))

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
        return finite(self._loss_values(models, clients), "the clients' training losses")

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
            for k in range(models.shape[0]):
                per = per_sample_loss(self.spec.loss_kind, self.spec.forward(models[k : k + 1], x), x, y)
                out[lo : lo + len(ids), k] = masked_mean(per.view(len(ids), n_max), mask).cpu()
        return out

    @torch.no_grad()
    def evaluate(self, models: torch.Tensor, model_of: torch.Tensor, clients: torch.Tensor | None = None
                 ) -> Evaluation:
        """Test loss and accuracy of each client on its own model `models[model_of[i]]`."""
        fed, device = self.fed, self.fed.device
        clients = torch.arange(fed.num_clients) if clients is None else clients.cpu()
        model_of = model_of.cpu()
        n_max = int(fed.x_test.shape[1])
        loss = torch.zeros(len(clients))
        correct = torch.zeros(len(clients))
        mask_all = fed.test_mask()
        chunk = self._eval_chunk(n_max)
        models = models.to(device)
        for lo in range(0, len(clients), chunk):
            ids, owners = clients[lo : lo + chunk].to(device), model_of[lo : lo + chunk].to(device)
            x, y, mask = fed.x_test[ids], fed.y_test[ids], mask_all[ids]
            if models.shape[0] <= 16:
                # few models: one big batch per model, no per-client parameter copies
                out_loss = torch.zeros(len(ids), n_max, device=device)
                out_correct = torch.zeros(len(ids), n_max, device=device)
                for k in torch.unique(owners).tolist():
                    sel = (owners == k).nonzero().squeeze(1)
                    xs = x[sel].reshape(1, -1, *fed.input_shape)
                    ys = y[sel].reshape(1, -1)
                    out = self.spec.forward(models[k : k + 1], xs)
                    out_loss[sel] = per_sample_loss(self.spec.loss_kind, out, xs, ys).view(len(sel), n_max)
                    c = per_sample_correct(self.spec.loss_kind, out, ys)
                    if c is not None:
                        out_correct[sel] = c.view(len(sel), n_max)
            else:
                out = self.spec.forward(models[owners], x)
                out_loss = per_sample_loss(self.spec.loss_kind, out, x, y)
                c = per_sample_correct(self.spec.loss_kind, out, y)
                out_correct = c if c is not None else torch.zeros_like(out_loss)
            loss[lo : lo + len(ids)] = masked_mean(out_loss, mask).cpu()
            correct[lo : lo + len(ids)] = masked_mean(out_correct, mask).cpu()
        has_accuracy = per_sample_correct(self.spec.loss_kind, torch.zeros(1, 1, 2), torch.zeros(1, 1)) is not None
        return Evaluation(loss, correct if has_accuracy else None)
