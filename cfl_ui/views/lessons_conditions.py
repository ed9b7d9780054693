"""The conditions' lessons (cfl_core/conditions): how much privacy noise clustering takes, and what a client that
never trained is given. Built like cfl_ui.views.lessons (steps whose round and note are computed from the runs'
records); tests/lesson_claims.py checks every number a note quotes against the figure the step draws.

The privacy lesson runs each algorithm at every noise level of NOISE (dp_noise and dp_loss_noise alike, the same
seed): its units are in the order noise level x algorithm (`unit_index`).
"""
from __future__ import annotations

from .lesson_types import PRIVACY, UNSEEN, Lesson, Step, _ari, _pct, at, last_round

NOISE = (0.0, 0.1, 0.3, 1.0)  # sigma / clip on updates and loss vectors; 0: the noise-free run
PRIVACY_ALGOS = ("clove", "ifca")
UNSEEN_ALGOS = ("clove", "ifca", "flexcfl")


def label(algorithm: str) -> str:
    from cfl_core.algorithms import ALGORITHMS

    cls = ALGORITHMS.get(algorithm)
    return cls.label if cls else algorithm


def unit_index(noise_level: int, algorithm: int) -> int:
    return noise_level * len(PRIVACY_ALGOS) + algorithm


def _eps(rec):
    return None if rec is None else (rec.extras or {}).get("dp_epsilon")


def privacy_points(units, rnd) -> dict:
    """algorithm label -> [(sigma, epsilon at round rnd or None without noise, ARI, accuracy)]."""
    out = {}
    for a, algo in enumerate(PRIVACY_ALGOS):
        rows = []
        for v, sigma in enumerate(NOISE):
            rec = at(units[unit_index(v, a)], rnd)
            if rec is None:
                continue
            rows.append((sigma, _eps(rec) if sigma > 0 else None, rec.ari, rec.accuracy))
        out[label(algo)] = rows
    return out


def early_round(units):
    """Round 2 (the clusters are found by then without noise), once every run has finished."""
    end = last_round(units)
    return None if end is None else min(2, end - 1)


def _eps_text(e) -> str:
    from ..charts.condition_figures import eps_text

    return eps_text(e)


def privacy_early(units, rnd):
    pts = privacy_points(units, rnd)
    parts = []
    for name, rows in pts.items():
        clear = next(r for r in rows if r[1] is None)
        most = max((r for r in rows if r[1] is not None), key=lambda r: r[0])
        parts.append(f"{name} ARI {_ari(clear[2])} without noise, {_ari(most[2])} at σ {most[0]:g} "
                     f"(ε {_eps_text(most[1])})")
    return f"round {rnd}: " + "; ".join(parts) + ". ε grows every round"


def privacy_end(units, rnd):
    pts = privacy_points(units, rnd)
    sigmas = ", ".join(f"{s:g}" for s in NOISE)
    parts, kept_to = [], []
    for name, rows in pts.items():
        most = max(rows, key=lambda r: r[0])
        parts.append(f"{name} {', '.join(_ari(r[2]) for r in rows)} (σ {most[0]:g}: accuracy {_pct(most[3])})")
        kept = [r for r in rows if r[1] is not None and (r[2] or 0) >= 0.9]
        smallest = min(kept, key=lambda r: r[1]) if kept else None
        kept_to.append(f"{name} ε {_eps_text(smallest[1])}" if smallest else f"{name} never")
    tail = ""
    for a, algo in enumerate(PRIVACY_ALGOS):  # what each sends in the clear (cfl_core/conditions/privacy.py)
        rec = at(units[unit_index(len(NOISE) - 1, a)], rnd)
        open_ = ((rec.extras or {}).get("dp_unprotected") or []) if rec is not None else []
        if open_:
            tail += f". {label(algo)}'s ε does not cover {len(open_)} thing(s) sent in the clear"
    return (f"after round {rnd}, ARI at σ {sigmas}: " + "; ".join(parts) + ". Smallest ε with ARI ≥ 0.9: "
            + ", ".join(kept_to) + tail)


# -- a new client arrives ------------------------------------------------------------------------------------
def first_unseen(units):
    """The first round every run assigned its unseen clients."""
    if not units or any(u.live for u in units):
        return None
    rounds = [next((r.round for r in u.records if isinstance((r.extras or {}).get("unseen"), dict)), None)
              for u in units]
    return None if any(r is None for r in rounds) else max(rounds)


def unseen_of(unit, rnd):
    rec = at(unit, rnd)
    return None if rec is None else (rec.extras or {}).get("unseen")


def unseen_start(units, rnd):
    parts = []
    for u in units:
        un = unseen_of(u, rnd)
        parts.append(f"{label(u.algorithm)} ARI {_ari(un.get('ari'))}")
    n = len(unseen_of(units[0], rnd).get("clients") or [])
    return f"round {rnd}: {n} clients never trained — models given vs true clusters: " + "; ".join(parts)


def unseen_end(units, rnd):
    parts = []
    for u in units:
        un, rec = unseen_of(u, rnd), at(u, rnd)
        parts.append(f"{label(u.algorithm)} {_pct(un.get('accuracy'))} (ARI {_ari(un.get('ari'))}), trained "
                     f"{_pct(rec.accuracy)} (ARI {_ari(rec.ari)})")
    return f"after round {rnd}: newcomers — " + "; ".join(parts)


_SMALL = dict(dataset="digits", clusters=4, clients_per_cluster=3, samples_per_client=50, local_epochs=2, lr=0.1,
              participation=1.0, seed=0, device="auto")

CONDITION_LESSONS: tuple = (
    Lesson("privacy", "How much privacy noise can clustering take?",
           "CLoVE and IFCA with client-level differential privacy at four noise levels, same clients and seed.",
           PRIVACY_ALGOS, dict(_SMALL, partition="label-skew-1", models=4, init="different", rounds=8), (
               Step("Noise on what clients send", "Each client clips what it sends and adds noise (σ × the clip). "
                    "More noise, smaller **ε**: more private. Dashed: no noise.", early_round, privacy_early,
                    PRIVACY),
               Step("The price of privacy", "How small can ε get before the clusters (ARI) and the accuracy are "
                    "lost?",
                    last_round, privacy_end, PRIVACY),
           ), variants=tuple((f"σ {s:g}", {"dp_noise": s, "dp_loss_noise": s}) for s in NOISE)),
    Lesson("unseen", "A new client arrives",
           "A quarter of the clients never train; each algorithm gives them a model by its own rule.",
           UNSEEN_ALGOS, dict(_SMALL, partition="label-skew-1", clients_per_cluster=4, models=4, init="different",
                              rounds=8, unseen_share=0.25, unseen_every=1), (
               Step("Who gets which model", "Rows: clients that never trained (strip: true cluster); a cell: "
                    "the model given (CLoVE: nearest loss-vector centroid; IFCA: lowest loss; FlexCFL: cold start).",
                    first_unseen,
                    unseen_start, UNSEEN),
               Step("How well they do", "After training: do newcomers do as well as the clients that trained?",
                    last_round,
                    unseen_end, UNSEEN),
           )),
)
