"""What a lesson is made of (its steps, its runs) and how its notes read the runs' records: shared by the lessons
of cfl_ui.views.lessons and cfl_ui.views.lessons_conditions."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

import numpy as np

# chart kinds a step can show
CURVES, EMBEDDING, HEATMAP = "curves", "embedding", "heatmap"
PRIVACY, UNSEEN = "privacy", "unseen"  # ARI and accuracy against epsilon; the unseen clients' models


@dataclass(frozen=True)
class Step:
    title: str
    text: str  # markdown, what to look at
    when: Callable  # units -> the round that matters (None: the run has not reached it yet)
    note: Callable  # (units, round) -> the annotation at that round
    chart: str = CURVES
    unit: int = 0  # the run an embedding step shows
    metric: str = "accuracy"  # what a curves step plots


@dataclass(frozen=True)
class Lesson:
    id: str
    title: str
    summary: str
    algorithms: tuple
    config: dict
    steps: tuple
    needs: tuple = field(default_factory=tuple)  # algorithms that must be installed (else a note)
    # runs of the same algorithms under other settings (label, overrides): e.g. privacy noise levels
    variants: tuple = field(default_factory=tuple)


# -- reading records -------------------------------------------------------------------------------
def at(unit, rnd):
    """The record of round `rnd` (None when the run has not reached it)."""
    return next((r for r in unit.records if r.round == rnd), None)


def last_round(units):
    """The last round every run has finished (None while one has none), once every run has ended."""
    if not units or any(u.live for u in units) or any(not u.records for u in units):
        return None
    return min(u.records[-1].round for u in units)


def first_round(units):
    return 0 if units and all(u.records for u in units) else None


def _pct(v) -> str:
    return "—" if v is None else f"{v:.0%}"


def _ari(v) -> str:
    return "—" if v is None else f"{v:.2f}"


def loss_matrix(rec):
    return None if rec is None or rec.loss_matrix is None else np.asarray(rec.loss_matrix, dtype=float)


def upto(unit, rnd) -> list:
    """The run's records up to round `rnd`: what a step shown at that round draws."""
    return [r for r in unit.records if r.round <= rnd]
