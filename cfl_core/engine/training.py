"""Local training: the batched path every algorithm uses, and the sequential reference.

Both paths train each client from its own start parameters over the same
minibatch schedule with the same optimiser maths, so for the same seed they
give the same models to float tolerance. The batched path runs every client
of a chunk as one computation: per-client losses are summed, so one backward
pass yields each client's own gradient (copies share no parameters).
"""
from __future__ import annotations

from dataclasses import dataclass

import torch

from .federation import Federation
from .models import CROSS_ENTROPY, RECONSTRUCTION, SQUARED_ERROR, ModelSpec, per_sample_loss
from .seeding import sample_keys

OPTIMIZERS = ("sgd", "adam")
_ADAM_BETAS = (0.9, 0.999)
_ADAM_EPS = 1e-8


@dataclass(frozen=True)
class TrainConfig:
    local_epochs: int = 2
    batch_size: int = 20
    lr: float = 0.1
    optimizer: str = "sgd"  # optimiser state is fresh every round (as the CLoVE reference setup)
    momentum: float = 0.9
    weight_decay: float = 0.0


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
    idx = torch.zeros(total_steps, clients, batch, dtype=torch.int64)
    valid = torch.zeros(total_steps, clients, batch, dtype=torch.bool)
    rows = torch.arange(clients)
    offsets = torch.arange(batch)
    for s in range(total_steps):
        epoch = torch.clamp(s // steps_per_epoch, max=cfg.local_epochs - 1)
        start = (s % steps_per_epoch) * batch
        pos = start[:, None] + offsets[None, :]
        active = (s < cfg.local_epochs * steps_per_epoch) & (n > 0)
        valid[s] = active[:, None] & (pos < n[:, None])
        idx[s] = perms[epoch[:, None], rows[:, None], pos.clamp(max=n_max - 1)]
    return BatchSchedule(idx, valid)


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

    def __init__(self, cfg: TrainConfig, params: torch.Tensor, spec: ModelSpec):
        self.cfg = cfg
        self.spec = spec
        rows = params.shape[0]
        self.bufs = [torch.zeros(rows, *s.shape, device=params.device) for s in spec.slots]
        self.sqs = ([torch.zeros_like(b) for b in self.bufs] if cfg.optimizer == "adam" else None)
        self.t = torch.zeros(rows, device=params.device)

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
            # 2-D [P, size] views: the flat parameter rows, and this slot's state and gradient
            p = params[:, slot.offset : slot.offset + slot.size]
            buf = self.bufs[i].view(rows, -1)
            if folded:
                p.add_(buf, alpha=-cfg.lr)
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
                p.add_(g, alpha=-cfg.lr)
            else:
                self._adam(p, g, buf, self.sqs[i].view(rows, -1), mask, everyone)

    def _adam(self, p, g, m, v, mask, everyone):
        beta1, beta2 = _ADAM_BETAS
        if everyone:
            m.mul_(beta1).add_(g, alpha=1 - beta1)
            v.mul_(beta2).addcmul_(g, g, value=1 - beta2)
        else:
            m.copy_(torch.where(mask, beta1 * m + (1 - beta1) * g, m))
            v.copy_(torch.where(mask, beta2 * v + (1 - beta2) * g * g, v))
        t = self.t.clamp(min=1)[:, None]
        bias1 = 1 - beta1 ** t
        bias2_sqrt = torch.sqrt(1 - beta2 ** t)
        update = (self.cfg.lr / bias1) * m / (v.sqrt() / bias2_sqrt + _ADAM_EPS)
        p.sub_(update if everyone else update * mask.to(p.dtype))


def _loss_and_grads(spec: ModelSpec, params: torch.Tensor, xb: torch.Tensor, yb: torch.Tensor,
                    valid: torch.Tensor, opt: _BatchedOptimizer, active: torch.Tensor
                    ) -> tuple[torch.Tensor, list[torch.Tensor], bool]:
    """Per-copy mean minibatch loss, its gradients, and whether they were folded into the momentum.

    The model's own backward where it has one (folding the momentum in when the optimiser
    allows), autograd otherwise."""
    fold = opt.fold_momentum(active)
    with torch.no_grad():
        by_hand = spec.loss_and_grads(spec.views(params), xb, yb, valid,
                                      accumulate=opt.bufs if fold else None, beta=opt.cfg.momentum)
    if by_hand is not None:
        return by_hand[0], by_hand[1], fold
    # Leaves are views into the flat rows: gradients come per parameter, no flat scatter.
    leaves = {name: v.detach().requires_grad_(True) for name, v in spec.views(params).items()}
    client_loss = masked_mean(per_sample_loss(spec.loss_kind, spec.apply(leaves, xb), xb, yb), valid)
    return client_loss, list(torch.autograd.grad(client_loss.sum(), list(leaves.values()))), False


def train_batched(spec: ModelSpec, start: torch.Tensor, fed: Federation, clients: torch.Tensor,
                  schedule: BatchSchedule, cfg: TrainConfig, out: torch.Tensor | None = None
                  ) -> tuple[torch.Tensor, torch.Tensor]:
    """Train `start[i]` on client `clients[i]` for every i at once.

    Returns (trained params [P, D], mean minibatch training loss per client [P]). With `out`
    (contiguous rows [P, D] on the device) the training happens in it and it is returned.
    """
    device = fed.device
    if out is None:
        params = start.to(device).clone()
    else:
        params = out.copy_(start)
    clients = clients.to(device)
    opt = _BatchedOptimizer(cfg, params, spec)
    idx = schedule.idx.to(device)
    valid = schedule.valid.to(device)
    active = valid.any(-1)
    loss_sum = torch.zeros(len(clients), device=device)
    # Gather minibatches from the flattened [M * n_max, ...] tensors: index_select on one
    # flat index is cheaper than two-tensor advanced indexing.
    n_max = int(fed.x_train.shape[1])
    x_flat = fed.x_train.flatten(0, 1)
    y_flat = fed.y_train.flatten(0, 1)
    first_row = clients[:, None] * n_max
    for s in range(schedule.steps):
        rows = (first_row + idx[s]).view(-1)
        xb = x_flat.index_select(0, rows).view(len(clients), -1, *fed.input_shape)
        yb = y_flat.index_select(0, rows).view(len(clients), -1)
        client_loss, grads, folded = _loss_and_grads(spec, params, xb, yb, valid[s], opt, active[s])
        with torch.no_grad():
            opt.step(params, grads, active[s], folded)
            loss_sum += client_loss.detach()
    steps_taken = active.sum(0).clamp(min=1)
    return params, loss_sum / steps_taken


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


# -- the sequential reference: one client after another, plain torch.nn + torch.optim --------

def _reference_loss(kind: str, out: torch.Tensor, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    if kind == CROSS_ENTROPY:
        return torch.nn.functional.cross_entropy(out, y)
    if kind == SQUARED_ERROR:
        return torch.nn.functional.mse_loss(out.squeeze(-1), y)
    if kind == RECONSTRUCTION:
        return torch.nn.functional.mse_loss(out, x.flatten(1))
    raise ValueError(kind)


def _reference_optimizer(cfg: TrainConfig, params):
    if cfg.optimizer == "sgd":
        return torch.optim.SGD(params, lr=cfg.lr, momentum=cfg.momentum, weight_decay=cfg.weight_decay)
    return torch.optim.Adam(params, lr=cfg.lr, betas=_ADAM_BETAS, eps=_ADAM_EPS, weight_decay=cfg.weight_decay)


def train_sequential(spec: ModelSpec, start: torch.Tensor, fed: Federation, clients: torch.Tensor,
                     schedule: BatchSchedule, cfg: TrainConfig) -> tuple[torch.Tensor, torch.Tensor]:
    """The loop every peer tool runs: per client, an nn.Module and an optimiser, step by step."""
    out_params, out_loss = [], []
    for i, client in enumerate(clients.tolist()):
        module = spec.reference_module().to(fed.device)
        spec.load_into(module, start[i].to(fed.device))
        opt = _reference_optimizer(cfg, module.parameters())
        losses = []
        for s in range(schedule.steps):
            rows = schedule.idx[s, i][schedule.valid[s, i]].to(fed.device)
            if len(rows) == 0:
                continue  # this client has finished its epochs
            xb, yb = fed.x_train[client, rows], fed.y_train[client, rows]
            loss = _reference_loss(spec.loss_kind, module(xb), xb, yb)
            opt.zero_grad()
            loss.backward()
            opt.step()
            losses.append(loss.item())
        out_params.append(spec.flatten_module(module))
        out_loss.append(sum(losses) / max(1, len(losses)))
    return torch.stack(out_params), torch.tensor(out_loss)


def reference_loss_matrix(spec: ModelSpec, models: torch.Tensor, fed: Federation, clients: torch.Tensor) -> torch.Tensor:
    """Per-client, per-model loop for the loss matrix (the check and the benchmark's baseline)."""
    out = torch.zeros(len(clients), models.shape[0])
    with torch.no_grad():
        for i, client in enumerate(clients.tolist()):
            n = int(fed.n_train[client])
            x, y = fed.x_train[client, :n], fed.y_train[client, :n]
            for k in range(models.shape[0]):
                module = spec.reference_module().to(fed.device)
                spec.load_into(module, models[k].to(fed.device))
                out[i, k] = _reference_loss(spec.loss_kind, module(x), x, y).item()
    return out

