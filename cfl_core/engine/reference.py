"""The sequential reference for local training: one client after another, plain torch.nn + torch.optim.

It is what the batched path in training.py is tested against (same schedule, same optimiser maths), and
what the benchmark's loop baseline runs; no algorithm trains through it.
"""
from __future__ import annotations

import torch

from .federation import Federation
from .models import CROSS_ENTROPY, RECONSTRUCTION, SQUARED_ERROR, ModelSpec
from .objective import Objective
from .training import ADAM_BETAS, ADAM_EPS, BatchSchedule, OptimizerMemory, TrainConfig


def _reference_loss(kind: str, out: torch.Tensor, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    if kind == CROSS_ENTROPY:
        return torch.nn.functional.cross_entropy(out, y)
    if kind == SQUARED_ERROR:
        return torch.nn.functional.mse_loss(out.squeeze(-1), y)
    if kind == RECONSTRUCTION:
        return torch.nn.functional.mse_loss(out, x.flatten(1))
    raise ValueError(kind)


def _reference_optimizer(cfg: TrainConfig, params, lr: float | None = None):
    lr = cfg.lr if lr is None else lr
    if cfg.optimizer == "sgd":
        return torch.optim.SGD(params, lr=lr, momentum=cfg.momentum, weight_decay=cfg.weight_decay)
    return torch.optim.Adam(params, lr=lr, betas=ADAM_BETAS, eps=ADAM_EPS, weight_decay=cfg.weight_decay)


def _reference_param_groups(spec: ModelSpec, module, cfg: TrainConfig, objective: Objective | None):
    """torch.optim param groups: one per slot with its own lr where an objective scales them."""
    params = dict(module.named_parameters())
    if objective is None or objective.lr_scale is None:
        return list(module.parameters())
    return [{"params": [params[slot.name]], "lr": cfg.lr * float(scale)}
            for slot, scale in zip(spec.slots, objective.lr_scale)]


def _reference_objective_loss(spec: ModelSpec, module, xb, yb, objective: Objective | None, i: int, anchor,
                              rows=None):
    """(data loss, loss to differentiate) of one client's minibatch under the objective, with plain torch.
    `rows`: the minibatch's sample rows (for per-sample weights)."""
    if objective is not None and objective.sample_weights is not None:
        per = torch.stack([_reference_loss(spec.loss_kind, module(xb[j : j + 1]), xb[j : j + 1], yb[j : j + 1])
                           for j in range(len(xb))])
        data = per.mean()
        total = (per * objective.sample_weights[i].to(xb.device)[rows]).sum() / len(xb)
    elif objective is not None and objective.has_feature_term:
        features = module.features(xb)
        data = _reference_loss(spec.loss_kind, module[-1](features), xb, yb)
        targets = objective.feature_targets[i].to(xb.device)[yb]
        per_sample = torch.nn.functional.mse_loss(features, targets, reduction="none").mean(-1)
        if objective.feature_mask is not None:
            per_sample = per_sample * objective.feature_mask[i].to(xb.device)[yb].to(per_sample.dtype)
        total = data + objective.feature_weight * per_sample.mean()
    else:
        data = _reference_loss(spec.loss_kind, module(xb), xb, yb)
        total = data
    if objective is not None and objective.prox_mu:
        flat = torch.cat([p.reshape(-1) for p in (dict(module.named_parameters())[s.name] for s in spec.slots)])
        total = total + objective.prox_mu / 2 * ((flat - anchor) ** 2).sum()
    return data, total


def _reference_grad(spec: ModelSpec, module, flat: torch.Tensor, xb, yb) -> tuple[float, torch.Tensor]:
    """(loss, flat gradient) of the plain loss at parameters `flat`, through `module`."""
    spec.load_into(module, flat)
    module.zero_grad()
    loss = _reference_loss(spec.loss_kind, module(xb), xb, yb)
    loss.backward()
    params = dict(module.named_parameters())
    return loss.item(), torch.cat([params[s.name].grad.reshape(-1) for s in spec.slots]).clone()


def _reference_meta(spec: ModelSpec, start_row: torch.Tensor, fed: Federation, client: int, i: int,
                    schedule: BatchSchedule, cfg: TrainConfig, meta) -> tuple[torch.Tensor, float]:
    """Per-FedAvg's local steps for one client, one meta step after another (see objective.MetaStep)."""
    module = spec.reference_module().to(fed.device)
    probe = spec.reference_module().to(fed.device)
    spec.load_into(module, start_row.to(fed.device))
    opt = _reference_optimizer(cfg, module.parameters())
    group, losses = meta.batches, []
    for s in range(0, schedule.steps - group + 1, group):
        parts = [schedule.idx[s + j, i][schedule.valid[s + j, i]].to(fed.device) for j in range(group)]
        if any(len(r) == 0 for r in parts):
            continue
        batch = [(fed.x_train[client, r], fed.y_train[client, r]) for r in parts]
        w = spec.flatten_module(module).clone()
        _, g1 = _reference_grad(spec, probe, w, *batch[0])
        loss, g2 = _reference_grad(spec, probe, w - meta.alpha * g1, *batch[1])
        if meta.hessian != "none":
            _, gp = _reference_grad(spec, probe, w + meta.delta * g2, *batch[2])
            _, gm = _reference_grad(spec, probe, w - meta.delta * g2, *batch[2])
            g2 = g2 - meta.alpha * (gp - gm) / (2 * meta.delta)
        params = dict(module.named_parameters())
        for slot in spec.slots:
            params[slot.name].grad = g2[slot.offset : slot.offset + slot.size].view(slot.shape).clone()
        opt.step()
        losses.append(loss)
    return spec.flatten_module(module), sum(losses) / max(1, len(losses))


def _reference_load_state(spec: ModelSpec, module, opt, cfg: TrainConfig, memory: OptimizerMemory, i: int) -> None:
    """Put row i of `memory` into torch.optim's own state (momentum_buffer; Adam's exp_avg, exp_avg_sq, step)."""
    params = dict(module.named_parameters())
    for slot in spec.slots:
        p = params[slot.name]
        first = memory.first[i, slot.offset : slot.offset + slot.size].view(slot.shape).clone()
        if cfg.optimizer == "sgd":
            if cfg.momentum:
                opt.state[p]["momentum_buffer"] = first
        elif float(memory.steps[i]) > 0:
            second = memory.second[i, slot.offset : slot.offset + slot.size].view(slot.shape).clone()
            opt.state[p].update(step=memory.steps[i].detach().clone().float().cpu(), exp_avg=first,
                                exp_avg_sq=second)


def _reference_save_state(spec: ModelSpec, module, opt, cfg: TrainConfig, memory: OptimizerMemory, i: int) -> None:
    params = dict(module.named_parameters())
    for slot in spec.slots:
        state = opt.state.get(params[slot.name], {})
        cut = slice(slot.offset, slot.offset + slot.size)
        if cfg.optimizer == "sgd":
            if state.get("momentum_buffer") is not None:
                memory.first[i, cut] = state["momentum_buffer"].reshape(-1)
        elif "exp_avg" in state:
            memory.first[i, cut] = state["exp_avg"].reshape(-1)
            memory.second[i, cut] = state["exp_avg_sq"].reshape(-1)
            memory.steps[i] = float(state["step"])


def train_sequential(spec: ModelSpec, start: torch.Tensor, fed: Federation, clients: torch.Tensor,
                     schedule: BatchSchedule, cfg: TrainConfig, objective: Objective | None = None,
                     memory: OptimizerMemory | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """The loop every peer tool runs: per client, an nn.Module and an optimiser, step by step.

    An objective's terms are written the plain way: the proximal term and the feature term added to
    the loss before `backward()`, learning rates as torch.optim param groups, meta steps by hand.
    `memory` (rows following `clients`) is loaded into and read back from torch.optim's state."""
    out_params, out_loss = [], []
    for i, client in enumerate(clients.tolist()):
        if objective is not None and objective.meta is not None:
            row, loss = _reference_meta(spec, start[i], fed, client, i, schedule, cfg, objective.meta)
            out_params.append(row)
            out_loss.append(loss)
            continue
        module = spec.reference_module().to(fed.device)
        spec.load_into(module, start[i].to(fed.device))
        opt = _reference_optimizer(cfg, _reference_param_groups(spec, module, cfg, objective))
        if memory is not None:
            _reference_load_state(spec, module, opt, cfg, memory, i)
        anchor = None
        if objective is not None and objective.prox_mu:
            anchor = (objective.anchor[i] if objective.anchor is not None else start[i]).to(fed.device).clone()
        losses = []
        for s in range(schedule.steps):
            rows = schedule.idx[s, i][schedule.valid[s, i]].to(fed.device)
            if len(rows) == 0:
                continue  # this client has finished its epochs
            xb, yb = fed.x_train[client, rows], fed.y_train[client, rows]
            if objective is None:
                loss = total = _reference_loss(spec.loss_kind, module(xb), xb, yb)
            else:
                loss, total = _reference_objective_loss(spec, module, xb, yb, objective, i, anchor, rows)
            opt.zero_grad()
            total.backward()
            opt.step()
            losses.append(loss.item())
        if memory is not None:
            _reference_save_state(spec, module, opt, cfg, memory, i)
        out_params.append(spec.flatten_module(module))
        out_loss.append(sum(losses) / max(1, len(losses)))
    return torch.stack(out_params), torch.tensor(out_loss)


def learn_mixing_sequential(spec: ModelSpec, local: torch.Tensor, received: torch.Tensor, weights: torch.Tensor,
                            mixed: torch.Tensor, fed: Federation, clients: torch.Tensor, schedule: BatchSchedule,
                            eta: float, passes: torch.Tensor, threshold: float, window: int
                            ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """`learn_mixing` one client after another, with a torch.nn module and autograd (the check)."""
    thetas, out_weights, taken = [], [], []
    module = spec.reference_module().to(fed.device)
    for i, client in enumerate(clients.tolist()):
        lo, rec, w = local[i].to(fed.device), received[i].to(fed.device), weights[i].to(fed.device).clone()
        delta = rec - lo

        def theta():
            return torch.where(mixed.to(fed.device), lo + delta * w, rec)

        history, done = [], 0
        for _ in range(int(passes[i])):
            pass_losses = []
            for s in range(schedule.steps):
                rows = schedule.idx[s, i][schedule.valid[s, i]].to(fed.device)
                if len(rows) == 0:
                    continue
                loss, grad = _reference_grad(spec, module, theta(), fed.x_train[client, rows], fed.y_train[client, rows])
                w = torch.where(mixed.to(fed.device), torch.clamp(w - eta * grad * delta, 0, 1), w)
                pass_losses.append(loss)
            history.append(sum(pass_losses) / max(1, len(pass_losses)))
            done += 1
            if len(history) > window and torch.tensor(history[-window:]).std(unbiased=False) < threshold:
                break
        thetas.append(theta())
        out_weights.append(w)
        taken.append(done)
    return torch.stack(thetas), torch.stack(out_weights), torch.tensor(taken)


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

