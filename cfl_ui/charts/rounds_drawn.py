"""Which rounds a chart draws of a long run: every round up to a cap, then a selection that says so in the caption.

A chart with one column or one animation frame per round grows without bound with the run (a 2000-round run's
heatmap was 0.5 MB of JSON, its embedding replay 11 MB, sent to every session that drew them). The charts'
builders (cfl_ui.charts.figures) draw what these choose; the exports always hold every round.
"""
from __future__ import annotations

import numpy as np

from .embedding import Embedding

MAX_ROUND_COLUMNS = 400  # columns (rounds) a clients-by-rounds chart draws at most


def decimate(records, cap: int = MAX_ROUND_COLUMNS) -> list:
    """At most `cap` of the records, evenly spread over the run, the first and the last always among them.

    A chart with one column per round grows without bound: a 2000-round run's heatmap was 0.5 MB of JSON,
    sent to every watching session at every redraw and wider than any screen has pixels."""
    return _spread(list(records), max(2, cap))


def decimated_note(count: int, cap: int = MAX_ROUND_COLUMNS) -> str:
    """The caption's note for a chart drawn from `decimate` (empty when every round is drawn)."""
    if count <= cap:
        return ""
    return (f" A long run: {cap} of its {count} rounds are drawn, evenly spread (the first and the last among "
            "them); the exports hold every round.")


MAX_REPLAY_FRAMES = 120  # rounds a replay steps through at most (at 0.65 s a frame: 78 s to play)
MAX_REPLAY_POINTS = 20_000  # client points in all of a replay's frames at most (~2 MB of JSON with their hovers)


def replay_cap(emb: Embedding) -> int:
    """How many frames `embedding_figure`'s replay keeps: fewer the more clients a frame draws."""
    per_frame = max((len(f.clients) for f in emb.frames), default=1)
    return int(min(MAX_REPLAY_FRAMES, max(10, MAX_REPLAY_POINTS // max(1, per_frame))))


def _spread(items: list, count: int) -> list:
    if count <= 0 or not items:
        return []
    if len(items) <= count:
        return list(items)
    return [items[i] for i in np.unique(np.linspace(0, len(items) - 1, count).round().astype(int))]


def _moved(before, after) -> bool:
    """Whether any client changed model (or the drawn clients changed) from one frame to the next."""
    return (len(before.clients) != len(after.clients) or not np.array_equal(before.clients, after.clients)
            or not np.array_equal(before.models, after.models))


def replay_indices(emb: Embedding, active: int, cap: int | None = None) -> list[int]:
    """The frames a replay keeps: all of them up to `cap`; past it the first, the last, the active one, the rounds
    in which an assignment changed (up to half the cap, evenly spread), then the rest evenly spread.

    A frame per round made a 2000-round run's embedding 11 MB of JSON, sent to every session that opened it,
    with a slider of 2000 steps; the rounds in which clients move are the ones a replay is for."""
    n = len(emb.frames)
    cap = replay_cap(emb) if cap is None else cap
    if n <= cap:
        return list(range(n))
    keep = {0, n - 1, active}
    moves = [i for i in range(1, n) if _moved(emb.frames[i - 1], emb.frames[i]) and i not in keep]
    keep.update(_spread(moves, cap // 2 - len(keep)))
    keep.update(_spread([i for i in range(n) if i not in keep], cap - len(keep)))
    return sorted(keep)


def replay_note(emb: Embedding | None) -> str:
    """The caption's note for an embedding whose replay keeps only some rounds (empty when it keeps them all)."""
    if emb is None or len(emb.frames) <= replay_cap(emb):
        return ""
    return (f" A long run: the replay steps through {replay_cap(emb)} of its {len(emb.frames)} rounds (those in "
            "which clients changed model first, the rest evenly spread); the exports hold every round.")
