"""Local training: the batched path every algorithm uses (its sequential reference is reference.py).

Both paths train each client from its own start parameters over the same
minibatch schedule with the same optimiser maths, so for the same seed they
give the same models to float tolerance. The batched path runs every client
of a chunk as one computation: per-client losses are summed, so one backward
pass yields each client's own gradient (copies share no parameters).
"""
from __future__ import annotations

from contextvars import ContextVar
from dataclasses import dataclass

import torch

from . import native
from .federation import Federation
from .models import ModelSpec, per_sample_loss
from .objective import Objective, feature_penalty
from .seeding import sample_keys

OPTIMIZERS = ("sgd", "adam")
ADAM_BETAS = (0.9, 0.999)
ADAM_EPS = 1e-8


@dataclass(frozen=True)
class TrainConfig:
    local_epochs: int = 2
    batch_size: int = 20
    lr: float = 0.1
    optimizer: str = "sgd"  # optimiser state is fresh every round (as the CLoVE reference setup)
    momentum: float = 0.9
    weight_decay: float = 0.0


@dataclass
class OptimizerMemory:
    """Optimiser state kept per client from one local training to the next (CFL's `optimizer_state=persistent`).

    Rows are in the flat parameter layout [rows, D]: SGD's momentum buffer (Adam's first moment), Adam's
    second moment and step count. `zeros(N, ...)` makes one row per client of the federation; `rows(ids)`
    copies some clients' rows out and `store(ids, part)` writes them back.
    """

    first: torch.Tensor  # [rows, D]
    second: torch.Tensor | None  # [rows, D] (Adam only)
    steps: torch.Tensor  # [rows] Adam's step count t

    @classmethod
    def zeros(cls, rows: int, dim: int, optimizer: str, device) -> "OptimizerMemory":
        adam = optimizer == "adam"
        return cls(torch.zeros(rows, dim, device=device),
                   torch.zeros(rows, dim, device=device) if adam else None, torch.zeros(rows, device=device))

    def rows(self, ids: torch.Tensor) -> "OptimizerMemory":
        ids = ids.to(self.first.device)
        return OptimizerMemory(self.first[ids].clone(), None if self.second is None else self.second[ids].clone(),
                               self.steps[ids].clone())

    def store(self, ids: torch.Tensor, part: "OptimizerMemory") -> None:
        ids = ids.to(self.first.device)
        self.first[ids] = part.first.to(self.first.device)
        if self.second is not None:
            self.second[ids] = part.second.to(self.first.device)
        self.steps[ids] = part.steps.to(self.first.device)


@dataclass
class BatchSchedule:
    """idx[s, i, b]: row of client i's data used at step s; valid marks real samples."""

    idx: torch.Tensor
    valid: torch.Tensor

    @property
    def steps(self) -> int:
        return int(self.idx.shape[0])

    def active(self) -> torch.Tensor:
        return self.valid.any(-1)  # [S, P]: does client i take step s?

    def rows(self, lo: int, hi: int) -> "BatchSchedule":
        """The schedule of clients lo..hi-1 alone: the same batches, without the steps they all skip.

        A client's batches depend only on the seed, the stream and its own id, so this equals
        `batch_schedule` called for those clients (up to all-padding columns when their largest
        client is smaller than the batch), without drawing it again per chunk.
        """
        valid = self.valid[:, lo:hi]
        taken = torch.nonzero(valid.flatten(1).any(1))
        steps = int(taken.max()) + 1 if len(taken) else 0
        return BatchSchedule(self.idx[:steps, lo:hi], valid[:steps])

    def first(self, steps: int) -> "BatchSchedule":
        """Only the first `steps` minibatches of every client (e.g. one adaptation step)."""
        return BatchSchedule(self.idx[:steps], self.valid[:steps])

    def share(self, fraction: float, n: torch.Tensor) -> "BatchSchedule":
        """Only each client's first ceil(fraction * n_i) samples of this schedule's order (a random subset of
        that size when the schedule is one epoch), in the steps that hold them."""
        keep = torch.ceil(n.to("cpu", torch.float64) * fraction).to(torch.int64).clamp(min=1)
        batch = self.idx.shape[2] if self.idx.dim() == 3 else 1
        positions = torch.arange(self.steps)[:, None, None] * batch + torch.arange(batch)[None, None, :]
        valid = self.valid & (positions < keep[None, :, None])
        taken = torch.nonzero(valid.flatten(1).any(1))
        steps = int(taken.max()) + 1 if len(taken) else 0
        return BatchSchedule(self.idx[:steps], valid[:steps])


def batch_schedule(n_train: torch.Tensor, client_ids: torch.Tensor, seed: int, stream: int,
                   cfg: TrainConfig) -> BatchSchedule:
    """Each client shuffles its own samples every epoch and walks them in batches.

    A client with n samples takes ceil(n / batch) steps per epoch; clients that
    finish early are masked for the remaining steps of the batched loop.
    """
    n = n_train.to("cpu", torch.int64)
    clients = len(n)
    n_max = max(1, int(n.max())) if clients else 1
    batch = max(1, min(cfg.batch_size, n_max))
    steps_per_epoch = torch.clamp((n + batch - 1) // batch, min=1)
    total_steps = cfg.local_epochs * int(steps_per_epoch.max()) if clients else 0
    positions = torch.arange(n_max)
    perms = []
    for epoch in range(cfg.local_epochs):
        keys = sample_keys(seed, stream, client_ids, epoch, n_max)
        keys = torch.where(positions[None, :] < n[:, None], keys, torch.full_like(keys, 1 << 40))
        perms.append(torch.argsort(keys, dim=1, stable=True))
    perms = torch.stack(perms) if perms else torch.zeros(0, clients, n_max, dtype=torch.int64)
    # every step at once ([steps, clients, batch]; a loop over the steps cost ~10% of a 100-client round):
    # step s of a client is batch s mod its steps per epoch of epoch s div it
    step = torch.arange(total_steps)[:, None]
    epoch = torch.clamp(step // steps_per_epoch, max=max(cfg.local_epochs - 1, 0))
    pos = ((step % steps_per_epoch) * batch)[:, :, None] + torch.arange(batch)
    active = (step < cfg.local_epochs * steps_per_epoch) & (n > 0)
    valid = active[:, :, None] & (pos < n[None, :, None])
    idx = perms[epoch[:, :, None], torch.arange(clients)[None, :, None], pos.clamp(max=n_max - 1)]
    return BatchSchedule(idx.contiguous(), valid)


def masked_mean(values: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    weights = mask.to(values.dtype)
    return (values * weights).sum(-1) / weights.sum(-1).clamp(min=1)


class _BatchedOptimizer:
    """SGD (momentum) or Adam over rows of a flat [P, D] tensor, with PyTorch's formulas.

    State lives in one contiguous [P, *shape] tensor per parameter, so a model's
    hand-written backward can fold the momentum update into its gradient matmul
    (buf = m*buf + g as one GEMM with beta = m; `fold_momentum`). Updates work in
    place, so no [P, D]-sized temporaries are made when every client takes the step
    (the common case); rows of clients that have finished their epochs are left
    untouched. Where one kernel can do two of PyTorch's steps it does (buf = m*buf + g
    in one pass; p -= lr*buf without a temporary): the same maths, rounded once
    instead of twice.
    """

    def __init__(self, cfg: TrainConfig, params: torch.Tensor, spec: ModelSpec,
                 lr_scale: tuple[float, ...] | None = None):
        self.cfg = cfg
        self.spec = spec
        # per-slot learning rates (an Objective's lr_scale); a slot at 0 is frozen and skipped
        self.lrs = [cfg.lr * (1.0 if lr_scale is None else float(lr_scale[i])) for i in range(len(spec.slots))]
        rows = params.shape[0]
        self.bufs = [torch.zeros(rows, *s.shape, device=params.device) for s in spec.slots]
        self.sqs = ([torch.zeros_like(b) for b in self.bufs] if cfg.optimizer == "adam" else None)
        self.t = torch.zeros(rows, device=params.device)

    def load(self, memory: OptimizerMemory) -> None:
        """Start from the state a previous training left (`OptimizerMemory` rows of these clients)."""
        rows = self.t.shape[0]
        for i, slot in enumerate(self.spec.slots):
            self.bufs[i].view(rows, -1).copy_(memory.first[:, slot.offset : slot.offset + slot.size])
            if self.sqs is not None:
                self.sqs[i].view(rows, -1).copy_(memory.second[:, slot.offset : slot.offset + slot.size])
        self.t.copy_(memory.steps)

    def save(self, memory: OptimizerMemory) -> None:
        """Write the state after training back into `memory` (same rows as `load`)."""
        rows = self.t.shape[0]
        for i, slot in enumerate(self.spec.slots):
            memory.first[:, slot.offset : slot.offset + slot.size] = self.bufs[i].view(rows, -1)
            if self.sqs is not None:
                memory.second[:, slot.offset : slot.offset + slot.size] = self.sqs[i].view(rows, -1)
        memory.steps.copy_(self.t)

    def fold_momentum(self, active: torch.Tensor) -> bool:
        """May this step's gradients be accumulated straight into the momentum buffers?

        Only for plain SGD with momentum when every client steps (a client that sits a step
        out must keep its buffer as it is)."""
        cfg = self.cfg
        return cfg.optimizer == "sgd" and bool(cfg.momentum) and not cfg.weight_decay and bool(active.all())

    def step(self, params: torch.Tensor, grads: list[torch.Tensor], active: torch.Tensor,
             folded: bool = False) -> None:
        """One update. `folded`: `grads` are the buffers, already holding m*buf + g."""
        cfg = self.cfg
        rows = len(params)
        everyone = bool(active.all())
        mask = active[:, None]
        on = None if everyone else mask.to(params.dtype)
        if cfg.optimizer == "adam":
            self.t += active.to(params.dtype)
        for i, slot in enumerate(self.spec.slots):
            lr = self.lrs[i]
            if lr == 0:
                continue  # a frozen slot: its parameters stay exactly as they are
            # 2-D [P, size] views: the flat parameter rows, and this slot's state and gradient
            p = params[:, slot.offset : slot.offset + slot.size]
            buf = self.bufs[i].view(rows, -1)
            if folded:
                p.add_(buf, alpha=-lr)
                continue
            g = grads[i].reshape(rows, -1)
            if cfg.weight_decay:
                g = torch.add(g, p, alpha=cfg.weight_decay)
            if not everyone:
                g = g * on
            if cfg.optimizer == "sgd":
                if cfg.momentum:
                    # PyTorch's first step sets buf = grad; buf starts at 0, so m*0 + g is the same.
                    if everyone:
                        torch.add(g, buf, alpha=cfg.momentum, out=buf)
                    else:
                        buf.copy_(torch.where(mask, cfg.momentum * buf + g, buf))
                    g = buf if everyone else buf * on
                p.add_(g, alpha=-lr)
            else:
                self._adam(p, g, buf, self.sqs[i].view(rows, -1), mask, everyone, lr)

    def _adam(self, p, g, m, v, mask, everyone, lr):
        beta1, beta2 = ADAM_BETAS
        if everyone:
            m.mul_(beta1).add_(g, alpha=1 - beta1)
            v.mul_(beta2).addcmul_(g, g, value=1 - beta2)
        else:
            m.copy_(torch.where(mask, beta1 * m + (1 - beta1) * g, m))
            v.copy_(torch.where(mask, beta2 * v + (1 - beta2) * g * g, v))
        t = self.t.clamp(min=1)[:, None]
        bias1 = 1 - beta1 ** t
        bias2_sqrt = torch.sqrt(1 - beta2 ** t)
        update = (lr / bias1) * m / (v.sqrt() / bias2_sqrt + ADAM_EPS)
        p.sub_(update if everyone else update * mask.to(p.dtype))


def _loss_and_grads(spec: ModelSpec, params: torch.Tensor, xb: torch.Tensor, yb: torch.Tensor,
                    valid: torch.Tensor, opt: _BatchedOptimizer | None, active: torch.Tensor | None,
                    objective: Objective | None = None, weights: torch.Tensor | None = None
                    ) -> tuple[torch.Tensor, list[torch.Tensor], bool]:
    """Per-copy mean minibatch data loss, the gradients of the objective, and whether they were folded into
    the momentum.

    The model's own backward where it has one (folding the momentum in when the optimiser
    allows), autograd otherwise; a feature term or per-sample `weights` [P, B] always go through
    autograd (the hand-written backward knows only the plain data loss). Without `opt` nothing is
    folded. The proximal term is added by the caller (`_add_prox`): it needs no graph. The loss
    returned is the plain (unweighted) data loss, comparable across algorithms."""
    feature = objective is not None and objective.has_feature_term
    weighted = weights is not None
    fold = opt is not None and opt.fold_momentum(active) and not feature and not weighted
    if weighted:
        leaves = {name: v.detach().requires_grad_(True) for name, v in spec.views(params).items()}
        per = per_sample_loss(spec.loss_kind, spec.apply(leaves, xb), xb, yb)
        count = valid.to(per.dtype).sum(-1).clamp(min=1)
        total = (per * weights.to(per.dtype) * valid.to(per.dtype)).sum(-1) / count
        grads = list(torch.autograd.grad(total.sum(), list(leaves.values())))
        return masked_mean(per.detach(), valid), grads, False
    if not feature:
        with torch.no_grad():
            by_hand = spec.loss_and_grads(spec.views(params), xb, yb, valid,
                                          accumulate=opt.bufs if fold else None,
                                          beta=opt.cfg.momentum if opt is not None else 0.0)
        if by_hand is not None:
            return by_hand[0], by_hand[1], fold
    # Leaves are views into the flat rows: gradients come per parameter, no flat scatter.
    leaves = {name: v.detach().requires_grad_(True) for name, v in spec.views(params).items()}
    if feature:
        features = spec.features(leaves, xb)
        data = masked_mean(per_sample_loss(spec.loss_kind, spec.head(leaves, features), xb, yb), valid)
        total = data + objective.feature_weight * feature_penalty(features, yb, valid, objective.feature_targets,
                                                                  objective.feature_mask)
        return data.detach(), list(torch.autograd.grad(total.sum(), list(leaves.values()))), False
    client_loss = masked_mean(per_sample_loss(spec.loss_kind, spec.apply(leaves, xb), xb, yb), valid)
    return client_loss, list(torch.autograd.grad(client_loss.sum(), list(leaves.values()))), False


def _add_prox(spec: ModelSpec, grads: list[torch.Tensor], params: torch.Tensor, anchor: torch.Tensor, mu: float,
              opt: _BatchedOptimizer, folded: bool) -> list[torch.Tensor]:
    """The gradient of mu/2 ||w - anchor||^2, mu (w - anchor), added to each slot's gradient.

    Folded gradients are the momentum buffers (m*buf + g): the term goes into them in place."""
    rows = params.shape[0]
    out = []
    for i, slot in enumerate(spec.slots):
        pull = params[:, slot.offset : slot.offset + slot.size] - anchor[:, slot.offset : slot.offset + slot.size]
        if folded:
            opt.bufs[i].view(rows, -1).add_(pull, alpha=mu)
            out.append(opt.bufs[i])
        else:
            out.append(grads[i] + mu * pull.view(grads[i].shape))
    return out


def _flat(spec: ModelSpec, grads: list[torch.Tensor], rows: int) -> torch.Tensor:
    """Per-slot gradients as one [P, D] tensor in the parameter layout."""
    return torch.cat([g.reshape(rows, -1) for g in grads], dim=1)


def _slots(spec: ModelSpec, flat: torch.Tensor) -> list[torch.Tensor]:
    """A [P, D] tensor as per-slot [P, *shape] views (the optimiser's gradient form)."""
    return [v for v in spec.views(flat).values()]


class _Batches:
    """Gathers minibatches from the flattened [M * n_max, ...] tensors: index_select on one flat index is
    cheaper than two-tensor advanced indexing."""

    def __init__(self, fed: Federation, clients: torch.Tensor, schedule: BatchSchedule):
        self.fed = fed
        self.clients = clients
        self.idx = schedule.idx.to(fed.device)
        n_max = int(fed.x_train.shape[1])
        self.x_flat = fed.x_train.flatten(0, 1)
        self.y_flat = fed.y_train.flatten(0, 1)
        self.first_row = clients[:, None] * n_max

    def __call__(self, s: int) -> tuple[torch.Tensor, torch.Tensor]:
        rows = (self.first_row + self.idx[s]).view(-1)
        count = len(self.clients)
        xb = self.x_flat.index_select(0, rows).view(count, -1, *self.fed.input_shape)
        yb = self.y_flat.index_select(0, rows).view(count, -1)
        return xb, yb


# Which path trained: counted per training call into the dict an experiment puts here for its round (the two paths'
# records differ in their last digits, so a run says which one trained it: meta.json, summary.json, results.csv).
KERNEL, TORCH = "compiled kernel", "PyTorch"
TRAINING_PATHS: ContextVar[dict | None] = ContextVar("cfl_training_paths", default=None)


def _count_path(path: str) -> None:
    counts = TRAINING_PATHS.get()
    if counts is not None:
        counts[path] = counts.get(path, 0) + 1


def train_batched(spec: ModelSpec, start: torch.Tensor, fed: Federation, clients: torch.Tensor,
                  schedule: BatchSchedule, cfg: TrainConfig, out: torch.Tensor | None = None,
                  objective: Objective | None = None, memory: OptimizerMemory | None = None
                  ) -> tuple[torch.Tensor, torch.Tensor]:
    """Train `start[i]` on client `clients[i]` for every i at once.

    Returns (trained params [P, D], mean minibatch training loss per client [P]). With `out`
    (contiguous rows [P, D] on the device) the training happens in it and it is returned.
    `objective` adds the terms of `objective.py` (None: the plain loss, the fast path unchanged).
    `memory` (rows following `clients`): the optimiser starts from this state and leaves its
    final state in it; None: a fresh optimiser (the default of every algorithm).
    """
    device = fed.device
    clients = clients.to(device)
    if objective is not None and objective.plain:
        objective = None
    # plain SGD of a dense ReLU stack on the CPU: the compiled kernel, where it is built (native/); it reads the
    # starting rows where they are and writes the result (no copy of every client's weights first)
    kernel = objective is None and memory is None and cfg.optimizer == "sgd"
    reads_start = kernel and native.trains(spec, cfg.optimizer, device) and native.reads_from(start, out)
    if reads_start:
        params = out if out is not None else torch.empty(start.shape, dtype=start.dtype, device=device)
    else:
        params = start.to(device).clone() if out is None else out.copy_(start)
    if kernel:
        loss = native.train(spec, params, fed.x_train, fed.y_train, clients, schedule.idx, schedule.valid,
                            cfg.lr, cfg.momentum, cfg.weight_decay, start=start if reads_start else None)
        if loss is not None:
            _count_path(KERNEL)
            return params, loss
        if reads_start:  # the torch path trains: from a copy
            params = start.to(device).clone() if out is None else out.copy_(start)
    _count_path(TORCH)
    if objective is not None:
        objective = objective.to(device)
    opt = _BatchedOptimizer(cfg, params, spec, objective.lr_scale if objective is not None else None)
    if memory is not None:
        if objective is not None and objective.meta is not None:
            raise ValueError("a meta step keeps no optimiser state across rounds")
        opt.load(memory)
    if objective is not None and objective.meta is not None:
        return _train_meta(spec, params, fed, clients, schedule, opt, objective)
    valid = schedule.valid.to(device)
    active = valid.any(-1)
    loss_sum = torch.zeros(len(clients), device=device)
    batches = _Batches(fed, clients, schedule)
    prox = objective is not None and bool(objective.prox_mu)
    if prox:
        anchor = (objective.anchor if objective.anchor is not None else start).to(device).clone()
    sample_weights = objective.sample_weights if objective is not None else None
    for s in range(schedule.steps):
        xb, yb = batches(s)
        weights = torch.gather(sample_weights, 1, batches.idx[s]) if sample_weights is not None else None
        client_loss, grads, folded = _loss_and_grads(spec, params, xb, yb, valid[s], opt, active[s], objective,
                                                     weights)
        with torch.no_grad():
            if prox:
                grads = _add_prox(spec, grads, params, anchor, objective.prox_mu, opt, folded)
            opt.step(params, grads, active[s], folded)
            loss_sum += client_loss.detach()
    if memory is not None:
        opt.save(memory)
    steps_taken = active.sum(0).clamp(min=1)
    return params, loss_sum / steps_taken


def _train_meta(spec: ModelSpec, params: torch.Tensor, fed: Federation, clients: torch.Tensor,
                schedule: BatchSchedule, opt: _BatchedOptimizer, objective: Objective
                ) -> tuple[torch.Tensor, torch.Tensor]:
    """Per-FedAvg's local steps (objective.MetaStep): each update reads `meta.batches` consecutive minibatches
    of the schedule; a client takes it only when it has all of them. The loss reported is f(w'; b2)."""
    meta = objective.meta
    if objective.prox_mu or objective.has_feature_term:
        raise ValueError("a meta step takes no proximal or feature term")
    group = meta.batches
    rows = len(clients)
    valid = schedule.valid.to(params.device)
    active = valid.any(-1)
    batches = _Batches(fed, clients, schedule)
    loss_sum = torch.zeros(rows, device=params.device)
    taken = torch.zeros(rows, device=params.device)
    for s in range(0, schedule.steps - group + 1, group):
        act = active[s : s + group].all(0)
        if not bool(act.any()):
            continue
        xb, yb = batches(s)
        _, g1, _ = _loss_and_grads(spec, params, xb, yb, valid[s], None, None)
        with torch.no_grad():
            inner = params - meta.alpha * _flat(spec, g1, rows)
        xb, yb = batches(s + 1)
        loss, g2, _ = _loss_and_grads(spec, inner, xb, yb, valid[s + 1], None, None)
        direction = _flat(spec, g2, rows)
        if meta.hessian != "none":
            xb, yb = batches(s + 2)
            with torch.no_grad():
                plus, minus = params + meta.delta * direction, params - meta.delta * direction
            _, gp, _ = _loss_and_grads(spec, plus, xb, yb, valid[s + 2], None, None)
            _, gm, _ = _loss_and_grads(spec, minus, xb, yb, valid[s + 2], None, None)
            hv = (_flat(spec, gp, rows) - _flat(spec, gm, rows)) / (2 * meta.delta)
            direction = direction - meta.alpha * hv
        with torch.no_grad():
            opt.step(params, _slots(spec, direction), act)
            loss_sum += loss.detach() * act
            taken += act
    return params, loss_sum / taken.clamp(min=1)


def learn_mixing(spec: ModelSpec, local: torch.Tensor, received: torch.Tensor, weights: torch.Tensor,
                 mixed: torch.Tensor, fed: Federation, clients: torch.Tensor, schedule: BatchSchedule, eta: float,
                 passes: torch.Tensor, threshold: float, window: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """FedALA's adaptive local aggregation, batched: learn element-wise weights W in [0, 1] per client.

    theta = local + (received - local) * W on the parameters `mixed` [D] marks, theta = received on
    the others. Each minibatch of `schedule`: W <- clip(W - eta * dL/dtheta * (received - local), 0, 1)
    (the chain rule through theta), theta recomputed. A client walks its schedule up to `passes[i]`
    times, and stops early once more than `window` passes are done and the standard deviation of its
    last `window` pass losses (mean minibatch loss of a pass) is below `threshold`.
    Returns (theta [P, D], W [P, D], passes taken [P]).
    """
    device = fed.device
    clients = clients.to(device)
    local, received, weights = local.to(device), received.to(device), weights.to(device).clone()
    mask = mixed.to(device)[None, :]
    delta = received - local
    valid = schedule.valid.to(device)
    active = valid.any(-1)
    batches = _Batches(fed, clients, schedule)
    rows = len(clients)
    limit = passes.to(device)
    done = torch.zeros(rows, dtype=torch.long, device=device)
    history: list[torch.Tensor] = []

    def theta() -> torch.Tensor:
        return torch.where(mask, local + delta * weights, received)

    for p in range(int(limit.max()) if rows else 0):
        going = done < limit
        if not bool(going.any()):
            break
        pass_loss = torch.zeros(rows, device=device)
        for s in range(schedule.steps):
            act = active[s] & going
            if not bool(act.any()):
                continue
            xb, yb = batches(s)
            loss, grads, _ = _loss_and_grads(spec, theta(), xb, yb, valid[s], None, None)
            with torch.no_grad():
                step = torch.clamp(weights - eta * _flat(spec, grads, rows) * delta, 0, 1)
                weights = torch.where(mask & act[:, None], step, weights)
                pass_loss += loss.detach() * act
        steps = active.sum(0).clamp(min=1)
        history.append(pass_loss / steps)
        done = done + going.long()
        if len(history) > window:
            recent = torch.stack(history[-window:])
            converged = recent.std(0, unbiased=False) < threshold
            limit = torch.where(converged & going, done, limit)
    return theta(), weights, done


def full_gradients(spec: ModelSpec, start: torch.Tensor, fed: Federation, clients: torch.Tensor) -> torch.Tensor:
    """Gradient of each client's mean training loss at `start[i]` (gradient averaging, Option II)."""
    clients = clients.to(fed.device)
    p = start.to(fed.device).detach().requires_grad_(True)
    x = fed.x_train[clients]
    y = fed.y_train[clients]
    mask = fed.train_mask()[clients]
    loss = masked_mean(per_sample_loss(spec.loss_kind, spec.forward(p, x), x, y), mask)
    (grad,) = torch.autograd.grad(loss.sum(), p)
    return grad.detach()
