"""Lessons: guided walk-throughs, each a few steps of text over a prepared run that plays itself.

A lesson is a small experiment (one or more algorithms on the identical clients)
and a list of steps. A step names the round that matters (`when`, computed from
the run's records) and the annotation shown there (`note`, computed from the same
records: no number in a lesson is written by hand), and which chart carries it.
Pure functions of records: cfl_ui.views.lessons_view draws them.
"""
from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Callable

import numpy as np

# chart kinds a step can show
CURVES, EMBEDDING, HEATMAP = "curves", "embedding", "heatmap"


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


def lowest_loss_ari(rec) -> float | None:
    """ARI of the lowest-loss rule (each client to its argmin model) against the truth, at this round."""
    from cfl_core.scores import adjusted_rand

    mat = loss_matrix(rec)
    if mat is None or not rec.true_clusters:
        return None
    truth = [rec.true_clusters[c] for c in rec.participants]
    return adjusted_rand(truth, mat.argmin(axis=1))


# -- lesson 1: one model is not enough -------------------------------------------------------------------
def _gap(units, rnd):
    a, b = (at(u, rnd) for u in units)
    return None if a is None or b is None or a.accuracy is None or b.accuracy is None else b.accuracy - a.accuracy


def widest_gap(units):
    end = last_round(units)
    if end is None:
        return None
    return max(range(end + 1), key=lambda r: (_gap(units, r) or -1, -r))


def one_model_start(units, rnd):
    fed, ora = (at(u, rnd) for u in units)
    return (f"round {rnd}, after one round of training from the same initial model: FedAvg "
            f"{_pct(fed.accuracy)}, oracle {_pct(ora.accuracy)}")


def one_model_gap(units, rnd):
    fed, ora = (at(u, rnd) for u in units)
    return (f"round {rnd}: the oracle's per-cluster models reach {_pct(ora.accuracy)}, FedAvg's single model "
            f"{_pct(fed.accuracy)} — {100 * (_gap(units, rnd) or 0):.0f} points apart")


def one_model_end(units, rnd):
    fed, ora = (at(u, rnd) for u in units)
    return (f"after round {rnd}: FedAvg {_pct(fed.accuracy)} on {fed.models_in_use} model, the oracle "
            f"{_pct(ora.accuracy)} on {ora.models_in_use} models")


# -- lesson 2: IFCA's collapse, CLoVE's recovery -------------------------------------------------------
def ifca_tie(units, rnd):
    rec = at(units[0], rnd)
    mat = loss_matrix(rec)
    spread = float((mat.max(axis=1) - mat.min(axis=1)).max()) if mat is not None else float("nan")
    model, count = Counter(rec.assignments).most_common(1)[0]
    return (f"round {rnd}: every client's loss is equal on all {mat.shape[1] if mat is not None else '?'} models "
            f"(largest difference {spread:.1g}) — IFCA sends {count} of {len(rec.assignments)} clients to model "
            f"{model}")


def first_measured(units, which: int = 0):
    """The first round in which run `which` measured loss vectors."""
    return next((r.round for r in units[which].records if r.loss_matrix is not None), None)


def clove_first_measured(units):
    return first_measured(units, 1)


def clove_groups(units, rnd):
    rec = at(units[1], rnd)
    groups = len(set(rec.assignments))
    return (f"round {rnd}: CLoVE's loss vectors already form {groups} groups — its assignment has ARI "
            f"{_ari(rec.ari)} against the true clusters")


def collapse_end(units, rnd):
    ifca, clove = (at(u, rnd) for u in units)
    return (f"after round {rnd}: IFCA trains {ifca.models_in_use} model (ARI {_ari(ifca.ari)}, accuracy "
            f"{_pct(ifca.accuracy)}); CLoVE {clove.models_in_use} models (ARI {_ari(clove.ari)}, accuracy "
            f"{_pct(clove.accuracy)})")


# -- lesson 3: loss vectors vs the lowest loss -----------------------------------------------------------
def lowest_loss_fails(units):
    """The measured round where the lowest-loss rule does worst against CLoVE's grouping."""
    u = units[0]
    if u.live or not u.records:
        return None
    scored = [(lowest_loss_ari(r), r.round) for r in u.records if r.loss_matrix is not None]
    scored = [(a, r) for a, r in scored if a is not None]
    if not scored:
        return None
    return min(scored, key=lambda ar: (ar[0] - (at(u, ar[1]).ari or 0), ar[1]))[1]


def lowest_loss_note(units, rnd):
    rec = at(units[0], rnd)
    mat = loss_matrix(rec)
    truth = np.asarray([rec.true_clusters[c] for c in rec.participants])
    means = [mat[truth == c].mean(axis=0) for c in sorted(set(truth))]
    apart = float(np.linalg.norm(means[0] - means[-1]))
    within = float(max(np.linalg.norm(mat[truth == c] - m, axis=1).max() for c, m in zip(sorted(set(truth)), means)))
    return (f"round {rnd}: by the lowest loss alone the clients would split with ARI {_ari(lowest_loss_ari(rec))}; "
            f"yet the clusters' mean loss vectors are {apart:.3f} apart, each client within {within:.3f} of its "
            f"own: clustering the vectors gives ARI {_ari(rec.ari)}")


def two_model_end(units, rnd):
    rec = at(units[0], rnd)
    measured = next((r for r in reversed(units[0].records) if r.round <= rnd and r.loss_matrix is not None), None)
    mat = loss_matrix(measured)
    agree = None
    if mat is not None:
        given = np.asarray([measured.assignments[c] for c in measured.participants])
        agree = float((mat.argmin(axis=1) == given).mean())
    return (f"after round {rnd}: ARI {_ari(rec.ari)}, accuracy {_pct(rec.accuracy)}; {_pct(agree)} of the clients "
            f"now have their lowest loss on the model they were given (round {measured.round if measured else '—'})"
            " — there, either rule gives the same groups")


# -- lesson 4: data distance vs loss vectors -------------------------------------------------------------
def aris_end(units, rnd):
    parts = [f"{u.label} ARI {_ari(at(u, rnd).ari)}" for u in units]
    return f"after round {rnd}: " + ", ".join(parts)


def grouped_note(units, rnd):
    parts = [f"{u.label} {_ari(at(u, rnd).ari)}" for u in units]
    return f"round {rnd}: grouped from the clients' first updates — ARI " + ", ".join(parts)


def aris_start(units, rnd):
    parts = [f"{u.label} {_ari(at(u, rnd).ari)}" for u in units]
    return f"round {rnd}: ARI " + ", ".join(parts) + " — the data-based methods have already decided their groups"


# -- lesson 5: when clients change -----------------------------------------------------------------------
def first_change(units):
    u = units[0]
    for prev, rec in zip(u.records, u.records[1:]):
        if rec.true_clusters != prev.true_clusters:
            return rec.round
    return None if u.live else (u.records[-1].round if u.records else None)


def moved(unit, upto) -> int:
    """How many assignment changes a run made up to round `upto` (a client moving to another model)."""
    recs = [r for r in unit.records if r.round <= upto]
    return sum(sum(1 for a, b in zip(p.assignments, r.assignments) if a != b) for p, r in zip(recs, recs[1:]))


def change_note(units, rnd):
    u = units[0]
    rec = at(u, rnd)
    prev = at(u, rnd - 1)
    if prev is None:
        return f"round {rnd}: no client changed its data in this run"
    n = sum(1 for a, b in zip(prev.true_clusters, rec.true_clusters) if a != b)
    return (f"round {rnd}: {n} client(s) swapped part of their data and now belong to another true cluster — "
            f"ARI now {_ari(rec.ari)} for FlexCFL and {_ari(at(units[1], rnd).ari)} for FedGroup")


def migration_end(units, rnd):
    flex, group = units
    return (f"after round {rnd}: FlexCFL moved clients {moved(flex, rnd)} times (ARI {_ari(at(flex, rnd).ari)}); "
            f"FedGroup {moved(group, rnd)} times (ARI {_ari(at(group, rnd).ari)})")


_SMALL = dict(dataset="digits", clusters=4, clients_per_cluster=3, samples_per_client=50, local_epochs=2, lr=0.1,
              participation=1.0, seed=0, device="auto")

LESSONS: tuple = (
    Lesson("one-model", "Why one model is not enough",
           "FedAvg against the oracle on label swaps: the same images carry different labels in each cluster.",
           ("fedavg", "oracle"), dict(_SMALL, partition="concept-shift", models=4, init="different", rounds=10), (
               Step("Two ways to train", "Four clusters of clients see the same digit images, but each cluster "
                    "swaps two pairs of labels. **FedAvg** trains one model for everyone; the **oracle** is told "
                    "the true clusters and trains one model per cluster — the best any clustering can do.",
                    first_round, one_model_start),
               Step("The gap opens", "Watch the curves part: a single model cannot give one image two different "
                    "labels, so FedAvg is stuck with whatever the clusters agree on.", widest_gap, one_model_gap),
               Step("The cost of one model", "At the end the gap is what clustered FL is for: find the clusters "
                    "without being told them, and get close to the oracle.", last_round, one_model_end),
           )),
    Lesson("collapse", "IFCA's collapse and CLoVE's recovery",
           "Both start from the same model copied K times; only CLoVE separates the rotated clusters.",
           ("ifca", "clove"), dict(_SMALL, partition="feature-skew", models=4, init="same", rounds=8), (
               Step("A tie on every model", "Every model starts as the same copy. IFCA gives each client the model "
                    "with the lowest loss — but all losses are equal, so the tie goes to the first model.",
                    first_round, ifca_tie, EMBEDDING, 0),
               Step("CLoVE looks at the whole vector", "CLoVE's first round assigns at random, so the copies drift "
                    "apart; from then on it clusters the clients' loss vectors (their loss on every model) — and "
                    "those already differ by rotation.", clove_first_measured, clove_groups, EMBEDDING, 1),
               Step("One band against four blocks", "IFCA never leaves model 0: one model trains, the others stay "
                    "copies. CLoVE keeps one model per rotation.", last_round, collapse_end, HEATMAP),
           )),
    Lesson("loss-vectors", "Loss vectors see what the lowest loss cannot",
           "The 2-model picture: each client at its loss on model 0 and model 1.",
           ("clove",), dict(_SMALL, partition="feature-skew", clusters=2, clients_per_cluster=5, models=2,
                            init="different", rounds=6), (
               Step("The 2-model picture", "With two models every client is a point: x = its loss on model 0, "
                    "y = on model 1. On the dotted diagonal both models look the same to it. The lowest-loss rule "
                    "(IFCA's) only asks which side of the diagonal a point lies on.", first_measured,
                    lambda units, rnd: f"round {rnd}: the first loss vectors CLoVE measured — "
                    f"{len(at(units[0], rnd).participants)} clients, two true clusters (the colours)", EMBEDDING),
               Step("Where the lowest loss fails", "Look for the round where the two colours sit on the same side "
                    "of the diagonal, or straddle it, while still forming two separate groups: the lowest loss "
                    "mixes them, the loss vectors do not.", lowest_loss_fails, lowest_loss_note, EMBEDDING),
               Step("Both models specialise", "Once each model has trained on its own cluster, the groups move to "
                    "opposite sides of the diagonal and any rule works.", last_round, two_model_end, EMBEDDING),
           )),
    Lesson("data-distance", "Data distance vs loss vectors",
           "k-FED and PACFL group clients by their data; under concept shift the inputs are identical.",
           ("kfed", "pacfl", "clove"), dict(_SMALL, partition="concept-shift", models=4, init="different",
                                            rounds=8), (
               Step("Same images, different labels", "Under concept shift every cluster sees the same kind of "
                    "images; only the labels differ. **k-FED** clusters the clients' data and **PACFL** compares "
                    "the subspaces of their data, both once, before training: they see no difference to find.",
                    first_round, aris_start, CURVES, 0, "ari"),
               Step("Losses see the labels", "CLoVE compares the clients' losses on every model, and a loss "
                    "depends on the labels: the swaps show up.", last_round, aris_end, CURVES, 0, "ari"),
           ), needs=("kfed", "pacfl")),
    Lesson("clients-change", "When clients change",
           "FlexCFL migrates clients whose data moved; FedGroup keeps its first grouping.",
           ("flexcfl", "fedgroup"), dict(_SMALL, partition="label-skew-1", within="dirichlet", alpha=0.3,
                                         clients_per_cluster=4, models=4, init="different", rounds=10,
                                         shift="swap-part",
                                         shift_options={"probability": 1.0, "across_clusters": True}), (
               Step("Grouped once", "Both algorithms group the clients by their first updates and start with "
                    "the right clusters (label skew: each cluster owns its digits).", first_round, grouped_note,
                    HEATMAP),
               Step("Data moves", "Every round, two clients swap one label's samples across clusters: their true "
                    "cluster changes under them.", first_change, change_note, CURVES, 0, "ari"),
               Step("Migrate or not", "FlexCFL checks whether a client's updates still fit its group and moves it; "
                    "FedGroup never does.", last_round, migration_end, HEATMAP),
           )),
)
BY_ID = {lesson.id: lesson for lesson in LESSONS}


def missing(lesson: Lesson) -> list:
    """The algorithms a lesson needs that this installation lacks."""
    from cfl_core.algorithms import ALGORITHMS

    return [a for a in dict.fromkeys((*lesson.needs, *lesson.algorithms)) if a not in ALGORITHMS]


def configs(lesson: Lesson) -> list:
    """The lesson's runs: its algorithms on the identical clients from identical initial models."""
    from cfl_core.compare import comparison_configs
    from cfl_core.config import ExperimentConfig

    base = ExperimentConfig.from_dict({**lesson.config, "algorithm": lesson.algorithms[0]})
    return comparison_configs(base, list(lesson.algorithms)) if len(lesson.algorithms) > 1 else [base]
