"""System heterogeneity: clients selected for a round that do not report (drop-outs), and clients that report
after only part of their local work (stragglers).

A drop-out is modelled as unreachable when the round starts: it receives nothing and sends nothing, so for
every algorithm it is a client that was not selected this round. What each paper implies for an absent
client is what its partial-participation rule already does: it keeps its cluster (CLoVE, IFCA, FeSEM, CFL),
its group (FlexCFL, FedGroup), its own model (Local, the personalised methods) and is not averaged in. If every
selected client would drop, the one whose draw came closest to reporting reports (a round with nobody is
not a round of any of these algorithms); the record says so.

A straggler completes the first ceil(straggler_work x its steps) minibatch steps of its local training this
round (at least one) and sends what it has: FedAvg-style averaging takes it as any other update (the papers
do not reweight partial work; FedProx, whose paper is about such clients, adds its proximal term). Algorithms
that compute a full-data gradient (`--aggregation gradient`) have no local steps to cut: a straggler's
gradient is whole there.
"""
from __future__ import annotations

import math

import numpy as np
import torch

from ..engine.seeding import numpy_rng


def round_draw(cfg, round_index: int, participants: torch.Tensor):
    """(reporting clients, dropped client ids, {straggler id: share of its steps}) for this round's selection."""
    seed = cfg.seed if cfg.condition_seed is None else cfg.condition_seed
    rng = numpy_rng(seed, "conditions", "system", round_index)
    n = len(participants)
    # both draws always made, so changing one rate never moves the other's draws
    drop_u = rng.random(n)
    late_u = rng.random(n)
    dropped = drop_u < cfg.dropout_rate
    if n and dropped.all():
        dropped[int(np.argmax(drop_u))] = False  # the closest to reporting reports (see the module)
    late = (late_u < cfg.straggler_rate) & ~dropped
    ids = participants.tolist()
    reporting = participants[torch.as_tensor(~dropped, dtype=torch.bool)] if n else participants
    stragglers = {ids[i]: float(cfg.straggler_work) for i in np.flatnonzero(late)}
    return reporting, [ids[i] for i in np.flatnonzero(dropped)], stragglers


def cut_schedule(schedule, clients: torch.Tensor, stragglers: dict):
    """`schedule` with each straggler among `clients` (rows in order) cut to its share of its active steps."""
    if not stragglers:
        return schedule
    ids = clients.tolist()
    share = [stragglers.get(c) for c in ids]
    if all(s is None for s in share):
        return schedule
    from ..engine.training import BatchSchedule

    active = schedule.active()  # [S, P]
    steps = active.sum(0)
    keep = torch.tensor([steps[i].item() if s is None else max(1, math.ceil(s * steps[i].item()))
                         for i, s in enumerate(share)], dtype=torch.int64)
    valid = schedule.valid & (torch.arange(schedule.steps)[:, None] < keep[None, :])[..., None]
    return BatchSchedule(schedule.idx, valid)
