"""Client-level distribution shifts (the three simulations of the FlexCFL paper), applied before each round.

- `swap-all`: with probability `probability` (per pair slot, `pairs` slots a
  round) two random clients exchange all their data, training and test.
- `swap-part`: likewise, but the two clients exchange the samples of one label
  each (a label the client holds, drawn at random; the other client's label is
  a different one when it can be), training and test samples of that label.
- `incremental`: each client's training data is released in stages: at round
  `stage_rounds[s]` the first `stages[s]` share of it (in a random order fixed
  per client) is visible, ending with all of it. The data GROWS over the run;
  the FlexCFL authors' code shrinks it instead (it keeps cutting the client's
  current data), which is not what the paper describes. Test data stay whole.

The global data stay the same: swaps only move samples between clients (and
incremental only reveals them). Every sample remembers the true cluster of the
client it came from; a client's true cluster is the cluster most of its
training samples come from (ties keep its current cluster), so ARI follows the
data. Swaps never happen before `start_round` (default 1: the clients the
algorithms grouped at setup are the clients of round 0).

A client that receives more samples than the padded tensors hold makes the
federation re-pad (x_train [M, n_max, ...] grows); every engine call reads the
federation's current tensors. The experiment gives a shifted run its own copy
of the federation, so runs sharing a setup are never touched.

Options are validated up front with ConfigError naming `shift_options.<name>`.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from .engine.seeding import numpy_rng
from .errors import ConfigError
from .settings import Interval, parse, setting


def _parse(options_cls, raw: dict | None, *, text: bool = False):
    """shift_options dict -> the Options dataclass through its declared settings (errors name `shift_options.<key>`)."""
    return parse(options_cls, raw, text=text, prefix="shift_options.", what="an option of this shift",
                 owner="this shift")


def _number_list(name: str, text: str, kind=float) -> list:
    try:
        return [kind(part) for part in str(text).split(",") if part.strip()]
    except ValueError:
        raise ConfigError(f"shift_options.{name}", text, f"comma-separated {kind.__name__}s") from None


class _Shift:
    """Shared machinery: per-sample provenance, moving rows between clients, re-padding."""

    name = "shift"
    Options = None

    def __init__(self, config, federation, true_clusters: torch.Tensor):
        self.cfg = config
        self.fed = federation
        self.truth = true_clusters  # updated in place: the experiment reads it for ARI and the oracle
        self.opts = self.parse(config.shift_options)
        fed = federation
        # origin[split][c, i]: true cluster of the client sample i of client c came from
        self.origin = {
            split: true_clusters.to(fed.device)[:, None].expand(-1, getattr(fed, f"x_{split}").shape[1]).clone()
            for split in ("train", "test")
        }

    @classmethod
    def parse(cls, raw, *, text: bool = False):
        return _parse(cls.Options, raw, text=text)

    @classmethod
    def validate(cls, cfg) -> None:
        cls.parse(cfg.shift_options).check(cfg)

    # -- rows of a client ----------------------------------------------------------------
    def _rows(self, split: str, c: int) -> dict[str, torch.Tensor]:
        fed = self.fed
        n = int(getattr(fed, f"n_{split}")[c])
        return {"x": getattr(fed, f"x_{split}")[c, :n].clone(), "y": getattr(fed, f"y_{split}")[c, :n].clone(),
                "origin": self.origin[split][c, :n].clone()}

    def _grow(self, split: str, n_needed: int) -> None:
        fed = self.fed
        x = getattr(fed, f"x_{split}")
        if n_needed <= x.shape[1]:
            return
        extra = n_needed - x.shape[1]
        for attr, tensor in ((f"x_{split}", x), (f"y_{split}", getattr(fed, f"y_{split}"))):
            pad = torch.zeros((tensor.shape[0], extra, *tensor.shape[2:]), dtype=tensor.dtype, device=tensor.device)
            setattr(fed, attr, torch.cat([tensor, pad], dim=1))
        origin = self.origin[split]
        self.origin[split] = torch.cat([origin, origin.new_full((origin.shape[0], extra), -1)], dim=1)

    def _write(self, split: str, c: int, rows: dict[str, torch.Tensor]) -> None:
        fed = self.fed
        n = len(rows["y"])
        self._grow(split, n)
        x, y = getattr(fed, f"x_{split}"), getattr(fed, f"y_{split}")
        x[c].zero_()
        y[c].zero_()
        self.origin[split][c].fill_(-1)
        x[c, :n] = rows["x"]
        y[c, :n] = rows["y"]
        self.origin[split][c, :n] = rows["origin"]
        getattr(fed, f"n_{split}")[c] = n

    def _refresh_truth(self, clients) -> None:
        """A client's true cluster: where most of its training samples come from (ties keep the current one)."""
        for c in clients:
            n = int(self.fed.n_train[c])
            origin = self.origin["train"][c, :n]
            origin = origin[origin >= 0].cpu()
            if not len(origin):
                continue
            counts = torch.bincount(origin)
            best = counts.max()
            current = int(self.truth[c])
            if current < len(counts) and counts[current] == best:
                continue
            self.truth[c] = int(torch.nonzero(counts == best)[0])

    def _pairs(self, rng: np.random.Generator) -> list[tuple[int, int]]:
        """The pairs of clients that swap this round."""
        o = self.opts
        m = self.fed.num_clients
        pairs = []
        for _ in range(o.pairs):
            if rng.random() >= o.probability:
                continue
            a = int(rng.integers(m))
            if o.across_clusters:
                others = np.flatnonzero(self.truth.numpy() != int(self.truth[a]))
            else:
                others = np.delete(np.arange(m), a)
            if len(others):
                pairs.append((a, int(rng.choice(others))))
        return pairs

    def apply(self, round_index: int) -> dict:
        raise NotImplementedError


@dataclass(frozen=True)
class SwapOptions:
    probability: float = setting(0.1, Interval(0, 1), label="Swap probability", step=0.05,
                                 allowed_text="a probability in [0, 1]",
                                 help="chance per pair slot and round that a pair swaps")
    pairs: int = setting(1, Interval(1), label="Pair slots per round", help="pair slots per round")
    start_round: int = setting(1, Interval(0), label="First swap round", help="no swap before this round")
    across_clusters: bool = setting(False, label="Across clusters",
                                    help="true: the two clients are drawn from different true clusters")

    def check(self, cfg) -> None:
        if self.pairs < 1 or self.pairs > cfg.num_clients // 2:
            raise ConfigError("shift_options.pairs", self.pairs,
                              f"a whole number in [1, {cfg.num_clients // 2}] (clients / 2)")
        if not 0 <= self.start_round < cfg.rounds:
            raise ConfigError("shift_options.start_round", self.start_round, f"a round in [0, {cfg.rounds - 1}]")
        if self.across_clusters and cfg.clusters < 2:
            raise ConfigError("shift_options.across_clusters", self.across_clusters,
                              "false with a single cluster (no other cluster to swap with)")


class SwapAll(_Shift):
    """Two random clients exchange all their data (training and test)."""

    name = "swap-all"
    Options = SwapOptions

    def apply(self, round_index):
        if round_index < self.opts.start_round:
            return {}
        rng = numpy_rng(self.cfg.seed, "shift", self.name, round_index)
        events = []
        for a, b in self._pairs(rng):
            for split in ("train", "test"):
                rows_a, rows_b = self._rows(split, a), self._rows(split, b)
                self._write(split, a, rows_b)
                self._write(split, b, rows_a)
            self._refresh_truth([a, b])
            events.append({"kind": self.name, "clients": [a, b]})
        return {"shift_events": events} if events else {}


class SwapPart(_Shift):
    """Two random clients exchange the samples of one label each (training and test)."""

    name = "swap-part"
    Options = SwapOptions

    @classmethod
    def validate(cls, cfg) -> None:
        from .data import dataset_info

        if dataset_info(cfg.dataset).task != "classification":
            raise ConfigError("shift", cfg.shift, "swap-all or incremental: swap-part moves the samples of a label, "
                                                  f"and {cfg.dataset} has no classes")
        super().validate(cfg)

    def apply(self, round_index):
        if round_index < self.opts.start_round:
            return {}
        rng = numpy_rng(self.cfg.seed, "shift", self.name, round_index)
        events = []
        for a, b in self._pairs(rng):
            labels_a = torch.unique(self._rows("train", a)["y"]).tolist()
            labels_b = torch.unique(self._rows("train", b)["y"]).tolist()
            if not labels_a or not labels_b:
                continue
            la = int(rng.choice(labels_a))
            choices_b = [v for v in labels_b if v != la] or labels_b
            lb = int(rng.choice(choices_b))
            moved = {}
            for split in ("train", "test"):
                rows_a, rows_b = self._rows(split, a), self._rows(split, b)
                give_a, give_b = rows_a["y"] == la, rows_b["y"] == lb
                new_a = {k: torch.cat([rows_a[k][~give_a], rows_b[k][give_b]]) for k in rows_a}
                new_b = {k: torch.cat([rows_b[k][~give_b], rows_a[k][give_a]]) for k in rows_b}
                self._write(split, a, new_a)
                self._write(split, b, new_b)
                moved[split] = [int(give_a.sum()), int(give_b.sum())]
            self._refresh_truth([a, b])
            events.append({"kind": self.name, "clients": [a, b], "labels": [la, lb], "moved_train": moved["train"],
                           "moved_test": moved["test"]})
        return {"shift_events": events} if events else {}


@dataclass(frozen=True)
class IncrementalOptions:
    stages: str = setting("0.5,0.75,1.0", label="Stages (shares)", list_as_text=True,
                          help="share of each client's training data visible from each stage on, comma-separated")
    stage_rounds: str = setting("", label="Stage rounds", list_as_text=True,
                                help="round each stage starts, comma-separated; empty: evenly spread over the run, "
                                     "the first at 0")

    def fractions(self) -> list[float]:
        return _number_list("stages", self.stages, float)

    def rounds(self, total_rounds: int) -> list[int]:
        if str(self.stage_rounds).strip():
            return _number_list("stage_rounds", self.stage_rounds, int)
        count = len(self.fractions())
        return [s * total_rounds // count for s in range(count)]

    def check(self, cfg) -> None:
        fractions = self.fractions()
        if not fractions or any(not 0 < f <= 1 for f in fractions) or any(
                b <= a for a, b in zip(fractions, fractions[1:])) or fractions[-1] != 1.0:
            raise ConfigError("shift_options.stages", self.stages,
                              "increasing shares in (0, 1] ending with 1.0, e.g. 0.5,0.75,1.0 (the data grow)")
        rounds = self.rounds(cfg.rounds)
        if len(rounds) != len(fractions):
            raise ConfigError("shift_options.stage_rounds", self.stage_rounds,
                              f"{len(fractions)} rounds, one per stage")
        if rounds[0] != 0 or any(b <= a for a, b in zip(rounds, rounds[1:])) or rounds[-1] >= cfg.rounds:
            raise ConfigError("shift_options.stage_rounds", self.stage_rounds,
                              f"increasing rounds starting at 0 and below rounds={cfg.rounds}")


class Incremental(_Shift):
    """Training data released in stages: the visible share grows at the stage rounds."""

    name = "incremental"
    Options = IncrementalOptions

    def __init__(self, config, federation, true_clusters):
        super().__init__(config, federation, true_clusters)
        fed = self.fed
        self.full = fed.n_train.clone()
        # A random order per client, fixed for the run: each stage reveals a random subset.
        for c in range(fed.num_clients):
            n = int(self.full[c])
            order = torch.as_tensor(numpy_rng(config.seed, "shift", self.name, "order", c).permutation(n),
                                    device=fed.device)
            fed.x_train[c, :n] = fed.x_train[c, :n][order]
            fed.y_train[c, :n] = fed.y_train[c, :n][order]
            self.origin["train"][c, :n] = self.origin["train"][c, :n][order]
        self.fractions = self.opts.fractions()
        self.stage_rounds = self.opts.rounds(config.rounds)
        self._release(self.fractions[0])  # before the algorithm's setup sees the data

    def _release(self, fraction: float) -> int:
        visible = torch.clamp(torch.ceil(self.full.double() * fraction).long(), min=1)
        self.fed.n_train.copy_(torch.minimum(visible, self.full).to(self.fed.n_train.dtype))
        return int(self.fed.n_train.sum())

    def apply(self, round_index):
        if round_index == 0 or round_index not in self.stage_rounds:
            return {}
        fraction = self.fractions[self.stage_rounds.index(round_index)]
        total = self._release(fraction)
        return {"shift_events": [{"kind": self.name, "fraction": fraction, "train_samples": total}]}


# The registry: name -> shift class ("none": no shift), built here from the shifts' own names.
SHIFTS: dict[str, type[_Shift] | None] = {"none": None, **{cls.name: cls for cls in (SwapAll, SwapPart, Incremental)}}
