"""Lessons: guided walk-throughs, each a few steps of text over a prepared run that plays itself.

A lesson is a small experiment (one or more algorithms on the identical clients)
and a list of steps. A step names the round that matters (`when`, computed from
the run's records) and the annotation shown there (`note`, computed from the same
records: no number in a lesson is written by hand), and which chart carries it.
Pure functions of records: cfl_ui.views.lessons_view draws them.

A note never claims what its chart does not show: an embedding step draws the
loss vectors of the rounds up to the one shown (so the axes fit what is drawn,
not the whole run's range), and a note that counts groups counts the groups that
stand apart on those axes (`visible_groups`); tests/test_lesson_claims.py checks
every step's claim against the figure the page draws.
"""
from __future__ import annotations

from collections import Counter

import numpy as np

from .lesson_types import (CURVES, EMBEDDING, HEATMAP, PRIVACY, UNSEEN, Lesson, Step, _ari, _pct,  # noqa: F401
                           at, first_round, last_round, loss_matrix, upto)


def lesson_embedding(unit, rnd, cache_key: str | None = None):
    """The loss-vector embedding a step shows at round `rnd`: fitted on the rounds up to it, axes over them."""
    from ..charts.embedding import PCA, loss_embedding

    return loss_embedding(upto(unit, rnd), PCA, cache_key=cache_key)


# Two groups count as apart on a chart when no point of one lies within this fraction of the axis ranges of a
# point of the other: 5% is about 20 px on the lesson's 470-px chart, more than one 12-px marker.
VISIBLE_GAP = 0.05


def visible_groups(points, labels, ranges, gap: float = VISIBLE_GAP) -> int:
    """How many of the labelled groups a reader sees apart on axes `ranges` ([[lo, hi], ...]): groups closer than
    `gap` (single linkage, in fractions of each axis' range) are seen as one."""
    pts = np.asarray(points, dtype=float)
    labels = np.asarray(labels)
    span = np.asarray([hi - lo for lo, hi in ranges], dtype=float)
    lo = np.asarray([lo for lo, _ in ranges], dtype=float)
    norm = (pts[:, : len(span)] - lo) / np.where(span > 0, span, 1.0)
    names = sorted(set(labels.tolist()))
    parent = {n: n for n in names}

    def root(n):
        while parent[n] != n:
            n = parent[n]
        return n

    for i, a in enumerate(names):
        for b in names[i + 1:]:
            pa, pb = norm[labels == a], norm[labels == b]
            if np.linalg.norm(pa[:, None, :] - pb[None, :, :], axis=2).min() < gap:
                parent[root(a)] = root(b)
    return len({root(n) for n in names})


def groups_seen(unit, rnd) -> tuple[int, int] | None:
    """(groups the run assigned, groups of them apart on the step's chart) at round `rnd`, or None without one."""
    emb = lesson_embedding(unit, rnd)
    frame = None if emb is None else next((f for f in emb.frames if f.round == rnd), None)
    if frame is None:
        return None
    dims = 2 if emb.dims != 3 else 3
    return len(set(frame.models.tolist())), visible_groups(frame.points, frame.models, emb.ranges[:dims])


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


def clove_groups_apart(units):
    """CLoVE's first measured round whose assigned groups all stand apart on the chart (else its last measured
    round, where the note says how many are seen)."""
    u = units[1]
    if u.live or not u.records:
        return None
    measured = [r.round for r in u.records if r.loss_matrix is not None]
    for rnd in measured:
        seen = groups_seen(u, rnd)
        if seen is not None and seen[0] == seen[1]:
            return rnd
    return measured[-1] if measured else None


def clove_groups(units, rnd):
    rec = at(units[1], rnd)
    assigned, apart = groups_seen(units[1], rnd) or (len(set(rec.assignments)), 0)
    seen = (f"CLoVE's loss vectors already form {apart} groups, one per model it assigned" if apart == assigned
            else f"CLoVE assigns {assigned} groups; {apart} of them stand apart on this chart")
    return f"round {rnd}: {seen} — its assignment has ARI {_ari(rec.ari)} against the true clusters"


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
    means = _cluster_means(rec)
    apart = float(np.linalg.norm(means[0] - means[-1]))
    within = float(max(np.linalg.norm(mat[truth == c] - m, axis=1).max() for c, m in zip(sorted(set(truth)), means)))
    return (f"round {rnd}: by the lowest loss alone the clients would split with ARI {_ari(lowest_loss_ari(rec))}; "
            f"yet the clusters' mean loss vectors are {apart:.3f} apart, each client within {within:.3f} of its "
            f"own: clustering the vectors gives ARI {_ari(rec.ari)}")


def lowest_loss_agrees(units):
    """The first measured round after the lowest loss failed where it groups the clients as well as CLoVE does."""
    u = units[0]
    failed = lowest_loss_fails(units)
    if failed is None:
        return None
    later = [r for r in u.records if r.round > failed and r.loss_matrix is not None]
    agree = next((r.round for r in later if (lowest_loss_ari(r) or 0) >= (r.ari or 0)), None)
    return agree if agree is not None else (later[-1].round if later else last_round(units))


def _cluster_means(rec):
    mat = loss_matrix(rec)
    truth = np.asarray([rec.true_clusters[c] for c in rec.participants])
    return [mat[truth == c].mean(axis=0) for c in sorted(set(truth))]


def pulled_apart_note(units, rnd):
    rec = at(units[0], rnd)
    if loss_matrix(rec) is None:
        return f"round {rnd}: CLoVE measured no loss vectors this round (ARI {_ari(rec.ari)})"
    means = _cluster_means(rec)
    lowest = lowest_loss_ari(rec)
    same = "as CLoVE's clustering does" if (lowest or 0) >= (rec.ari or 0) else "against CLoVE's clustering's"
    return (f"round {rnd}: the clusters' mean loss vectors are now {float(np.linalg.norm(means[0] - means[-1])):.3f} "
            f"apart, and the lowest loss alone splits the clients with ARI {_ari(lowest)}, {same} "
            f"(ARI {_ari(rec.ari)})")


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

    def told(u):
        return f"ARI {_ari(at(u, 0).ari)} at round 0, {_ari(at(u, rnd).ari)} now"

    return (f"after round {rnd}: FlexCFL moved clients {moved(flex, rnd)} times ({told(flex)}); "
            f"FedGroup {moved(group, rnd)} times ({told(group)}). Rows keep step 1's order; the strip on the "
            "left shows each client's true cluster then and now")


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
                    "those already differ by rotation.", clove_groups_apart, clove_groups, EMBEDDING, 1),
               Step("One band against four blocks", "IFCA never leaves model 0: one model trains, the others stay "
                    "copies. CLoVE keeps one model per rotation.", last_round, collapse_end, HEATMAP),
           )),
    Lesson("loss-vectors", "Loss vectors see what the lowest loss cannot",
           "The 2-model picture: each client at its loss on model 0 and model 1.",
           ("clove",), dict(_SMALL, partition="feature-skew", clusters=2, clients_per_cluster=5, models=2,
                            init="different", rounds=6), (
               Step("The 2-model picture", "With two models every client is a point: x = its loss on model 0, "
                    "y = on model 1. On the dotted diagonal both models look the same to it. The lowest-loss rule "
                    "(IFCA's) only asks which side of the diagonal a point lies on. In this first measured round "
                    "the two colours (the true clusters) each form a tight group, yet the groups straddle the "
                    "diagonal: the lowest loss mixes them, the loss vectors do not.", lowest_loss_fails,
                    lowest_loss_note, EMBEDDING),
               Step("The models pull apart", "Each model has now trained on the group CLoVE gave it, so the "
                    "groups move away from the diagonal, each towards the model that became its own.",
                    lowest_loss_agrees, pulled_apart_note, EMBEDDING),
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
from .lessons_conditions import CONDITION_LESSONS  # noqa: E402  (privacy noise, unseen clients)

LESSONS = LESSONS + CONDITION_LESSONS
BY_ID = {lesson.id: lesson for lesson in LESSONS}


def missing(lesson: Lesson) -> list:
    """The algorithms a lesson needs that this installation lacks."""
    from cfl_core.algorithms import ALGORITHMS

    return [a for a in dict.fromkeys((*lesson.needs, *lesson.algorithms)) if a not in ALGORITHMS]


def configs(lesson: Lesson) -> list:
    """The lesson's runs: its algorithms on the identical clients from identical initial models."""
    from cfl_core.compare import comparison_configs
    from cfl_core.config import ExperimentConfig

    out = []
    for _, overrides in lesson.variants or (("", {}),):
        base = ExperimentConfig.from_dict({**lesson.config, **overrides, "algorithm": lesson.algorithms[0]})
        out += comparison_configs(base, list(lesson.algorithms)) if len(lesson.algorithms) > 1 else [base]
    return out


def unit_specs(lesson) -> list[tuple[str, object, str]]:
    """(folder name, config, label) of each of the lesson's runs: a variant's label after the algorithm's."""
    from ..form.controls import algorithm_label

    names = [v for v, _ in lesson.variants] or [""]
    per = len(lesson.algorithms)
    out = []
    for i, cfg in enumerate(configs(lesson)):
        variant = names[i // per]
        slug = "".join(ch if ch.isalnum() else "-" for ch in variant.replace("σ", "s")).strip("-")
        out.append((cfg.algorithm + (f"-{slug}" if slug else ""), cfg,
                    algorithm_label(cfg.algorithm) + (f" · {variant}" if variant else "")))
    return out
