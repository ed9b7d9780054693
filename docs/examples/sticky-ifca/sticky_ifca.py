"""IFCA with sticky assignments: a client leaves its model only for one whose loss is lower by a margin.

A CFL Lab plugin in one file: the package's pyproject.toml registers `StickyIFCA` under the entry-point
group `cfl_lab.algorithms`, and after `pip install .` the algorithm `ifca-sticky` appears in the
command line, the dashboard, sweeps and Compare. docs/contributing.md walks through it.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch

from cfl_core import Algorithm, InitOptions, Interval, RoundOutcome, setting


@dataclass(frozen=True)
class StickyOptions(InitOptions):  # IFCA's options (initial models, averaging weights) and one more
    margin: float = setting(0.05, Interval(0, 1, high_open=True), label="Switching margin",
                            help="a client moves to another model only when that model's loss is lower than its "
                                 "current model's by this fraction")


class StickyIFCA(Algorithm):
    name = "ifca-sticky"
    label = "IFCA (sticky)"
    summary = "IFCA whose clients change model only for a loss lower by a margin (fewer flips between rounds)."
    needs_models = True
    uses_init_mode = True
    has_loss_vectors = True
    Options = StickyOptions

    def setup(self, clients):
        self.models, extras = self.initial_models(self.num_models, clients)
        return extras

    def run_round(self, round_index, participants):
        # every client measures the K models on its own data (as in IFCA, no losses go up)
        losses = self.engine.loss_matrix(self.models, participants, uploads=False)
        on_cpu = losses.detach().cpu()
        best = torch.argmin(on_cpu, dim=1)
        current = self.assign[participants]
        placed = current >= 0
        current_loss = on_cpu.gather(1, current.clamp(min=0)[:, None]).squeeze(1)
        best_loss = on_cpu.gather(1, best[:, None]).squeeze(1)
        stay = placed & (best_loss > current_loss * (1 - self.opts.margin))
        self.assign[participants] = torch.where(stay, current, best)
        self.models, train_loss = self.engine.train_and_aggregate(
            self.models, participants, self.assign[participants], round_index, weighting=self.opts.weighting)
        return RoundOutcome("clustering", losses, train_loss, extras={"stayed": int(stay.sum())})
