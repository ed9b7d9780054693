"""Client dynamics applied between rounds: newcomers joining late, and data shift.

Newcomers: a share of clients (spread over all clusters) is held back until
`newcomer_round`; each algorithm places them by its own rule when they join.
Distribution shifts (FlexCFL's simulations) are listed in shifts.SHIFTS: a class
built as `Shift(config, federation, true_clusters)` whose `apply(round)` moves
data between clients in place (and updates `true_clusters` so that ARI follows
the data) and returns a JSON-able dict for the round's record extras; and a
classmethod `validate(config)` raising ConfigError.
"""
from __future__ import annotations

import torch

from .engine.seeding import numpy_rng
from .errors import ConfigError
from .selection import spread_over_clusters
from .shifts import SHIFTS  # the experiment and the dashboard import the registry from here too


def validate_dynamics(cfg) -> None:
    if not (isinstance(cfg.newcomer_share, (int, float)) and 0 <= cfg.newcomer_share < 1):
        raise ConfigError("newcomer_share", cfg.newcomer_share, "a fraction in [0, 1)")
    if cfg.newcomer_share > 0:
        if not isinstance(cfg.newcomer_round, int) or not 1 <= cfg.newcomer_round < cfg.rounds:
            raise ConfigError("newcomer_round", cfg.newcomer_round,
                              f"a round in [1, {cfg.rounds - 1}] when newcomer_share > 0")
        if newcomer_count(cfg) == 0:
            raise ConfigError("newcomer_share", cfg.newcomer_share,
                              f"a share that holds back at least one of the {cfg.num_clients} clients")
        if newcomer_count(cfg) >= cfg.num_clients:
            raise ConfigError("newcomer_share", cfg.newcomer_share, "a share that leaves at least one client at round 0")
    if cfg.shift not in SHIFTS:
        raise ConfigError("shift", cfg.shift, f"one of {sorted(SHIFTS)}")
    if cfg.shift != "none":
        SHIFTS[cfg.shift].validate(cfg)


NEVER = 2**62  # the join round of a client that never trains (an unseen client, cfl_core/conditions)


def newcomer_count(cfg) -> int:
    return int(round(cfg.newcomer_share * cfg.num_clients))


def join_rounds(cfg, clusters: torch.Tensor, exclude=()) -> torch.Tensor:
    """Round at which each client joins: 0, or newcomer_round for the held-back share (never one of `exclude`)."""
    joins = torch.zeros(len(clusters), dtype=torch.int64)
    count = newcomer_count(cfg)
    if count == 0:
        return joins
    chosen = spread_over_clusters(numpy_rng(cfg.seed, "newcomers"), clusters, count, skip=exclude)
    joins[torch.tensor(chosen)] = cfg.newcomer_round
    return joins
