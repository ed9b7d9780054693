"""Unseen clients: a share of the clients never trains; at the end (and every k rounds) each algorithm assigns them
by its own rule for a client that arrives (`Algorithm.place_newcomers`: CLoVE the nearest centroid of loss
vectors, IFCA the lowest loss, FlexCFL/FedGroup the cold start, ...), and their accuracy on the assigned model
is reported apart from the training clients'.

The assignment is a look, not a change: the algorithm's state, the random generators and this round's traffic
window are put back afterwards, so a run with unseen clients trains exactly as the same run without them would
with those clients absent. They are drawn round-robin over the true clusters (every cluster loses some when it
can), from the seed, before the newcomers.
"""
from __future__ import annotations

import copy
import random

import numpy as np
import torch

from ..engine.seeding import numpy_rng
from ..scores import adjusted_rand
from ..selection import spread_over_clusters


def unseen_count(cfg) -> int:
    return int(round(cfg.unseen_share * cfg.num_clients))


def choose_unseen(cfg, clusters: torch.Tensor) -> list[int]:
    count = unseen_count(cfg)
    if count == 0:
        return []
    chosen = spread_over_clusters(numpy_rng(cfg.seed, "conditions", "unseen"), clusters, count)
    return sorted(chosen)


def due(cfg, round_index: int) -> bool:
    """Whether the unseen clients are assigned after this round."""
    if round_index == cfg.rounds - 1:
        return True
    return cfg.unseen_every > 0 and (round_index + 1) % cfg.unseen_every == 0


def assign_and_evaluate(algorithm, clients: list[int], round_index: int, true_clusters: torch.Tensor) -> dict:
    """Each unseen client placed by the algorithm's rule and tested on its model; the algorithm left as it was."""
    ids = torch.as_tensor(clients, dtype=torch.int64)
    state = copy.deepcopy(algorithm.state_dict())
    engine = algorithm.engine
    ledger = (engine.traffic.down, engine.traffic.up, dict(engine.traffic._held))
    rng = (torch.get_rng_state(), np.random.get_state(), random.getstate())
    try:
        algorithm.place_newcomers(ids, round_index)
        _, model_of = algorithm.eval_models()
        assigned = model_of[ids].clone()
        # a rule may give an arriving client no model until it trains (FedALA's: it keeps the initial one and
        # mixes the global model in when it first takes part): those are listed, not tested
        placed = ids[assigned >= 0]
        evaluation = algorithm.evaluate(placed) if len(placed) else None
    finally:
        algorithm.load_state_dict(state)
        engine.traffic.down, engine.traffic.up, engine.traffic._held = ledger
        torch.set_rng_state(rng[0])
        np.random.set_state(rng[1])
        random.setstate(rng[2])
    out = {"clients": clients, "assignments": assigned.tolist(), "true_clusters": true_clusters[ids].tolist()}
    if len(placed) < len(clients):
        out["unplaced"] = [c for c, a in zip(clients, assigned.tolist()) if a < 0]
    accs = evaluation.accuracy.tolist() if evaluation is not None and evaluation.accuracy is not None else None
    losses = evaluation.loss.tolist() if evaluation is not None else []
    by_client = dict(zip(placed.tolist(), range(len(placed))))
    out["client_loss"] = [losses[by_client[c]] if c in by_client else None for c in clients]
    out["loss"] = float(sum(losses) / len(losses)) if losses else None
    if accs is not None:
        out["client_accuracy"] = [accs[by_client[c]] if c in by_client else None for c in clients]
        out["accuracy"] = float(sum(accs) / len(accs)) if accs else None
    if len(placed) >= 2 and algorithm.has_clusters:
        out["ari"] = float(adjusted_rand(true_clusters[placed].numpy(), assigned[assigned >= 0].numpy()))
    return out
