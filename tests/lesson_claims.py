"""Checks a lesson's notes against the figures its steps draw (used by test_lesson_claims and the Lessons page test).

Rules (cfl_ui.views.lessons.VISIBLE_GAP): groups a note counts must stand apart on the plotted axes — no point of one
within 5% of the axis ranges of a point of another; a distance a note quotes is the one between the drawn points and
spans at least that fraction of the axes; each step is about a later round than the step before it (every lesson's
text moves on); heatmaps keep the rows in the order the lesson's first heatmap used; every percentage or ARI in a
note is a value drawn at the step's round.
"""
from __future__ import annotations

import base64
import re

import numpy as np

from cfl_core.scores import adjusted_rand
from cfl_ui.views.lessons import CURVES, EMBEDDING, PRIVACY, UNSEEN, VISIBLE_GAP, visible_groups
from cfl_ui.views.lessons_view import step_figures
from cfl_ui.charts.palette import model_symbol


def values(v) -> np.ndarray:
    """A trace's array as floats (its shape kept), whether plotly wrote lists or a typed array ({dtype, bdata})."""
    if isinstance(v, dict) and "bdata" in v:
        a = np.frombuffer(base64.b64decode(v["bdata"]), dtype=np.dtype(v["dtype"]).newbyteorder("<")).astype(float)
        shape = v.get("shape")
        return a.reshape([int(n) for n in str(shape).split(",")]) if shape else a
    a = np.asarray(v, dtype=object)
    return np.vectorize(lambda x: np.nan if x is None else float(x), otypes=[float])(a) if a.size else a


def drawn_points(fig: dict):
    """(points [P, 2], true cluster per point, assigned model per point) of an embedding figure's data traces."""
    symbol_model = {model_symbol(m, 2): m for m in reversed(range(16))}
    pts, colours, models = [], [], []
    for t in fig["data"]:
        if t.get("type") != "scatter" or not t.get("customdata") or not str(t.get("name", "")).startswith("cluster"):
            continue
        x, y = values(t["x"]), values(t["y"])
        pts.append(np.column_stack([x, y]))
        colours += [int(t["name"].split()[1])] * len(x)
        models += [symbol_model[s] for s in t["marker"]["symbol"]]
    return np.concatenate(pts), np.asarray(colours), np.asarray(models)


def _numbers(pattern: str, note: str) -> list[float]:
    return [float(x) for x in re.findall(pattern, note)]


def check_embedding(fig: dict, note: str, rnd: int) -> None:
    lay = fig["layout"]
    ranges = [lay["xaxis"]["range"], lay["yaxis"]["range"]]
    pts, colours, models = drawn_points(fig)
    assert any(a.get("text", "").startswith(f"round {rnd}") for a in lay["annotations"]), "the chart is another round"
    for d, (lo, hi) in enumerate(ranges):  # every point inside the plot: nothing the note counts is cut off
        assert lo <= pts[:, d].min() and pts[:, d].max() <= hi
    span = np.asarray([hi - lo for lo, hi in ranges])
    for n in _numbers(r"form (\d+) groups", note):
        assert visible_groups(pts, models, ranges) == n, f"the note counts {n:.0f} groups: {note}"
    seen = re.search(r"(\d+) of them stand apart", note)
    if seen:
        assert visible_groups(pts, models, ranges) == int(seen.group(1))
    loss_axes = [a["title"]["text"] for a in (lay["xaxis"], lay["yaxis"])] == ["loss on model 0", "loss on model 1"]
    means = [pts[colours == c].mean(axis=0) for c in sorted(set(colours))]
    for apart in _numbers(r"mean loss vectors are (?:now )?(\d+\.\d+) apart", note):
        assert loss_axes, "a loss distance quoted on axes that are not losses"
        assert f"{np.linalg.norm(means[0] - means[-1]):.3f}" == f"{apart:.3f}"
        # the quoted distance is visible: it spans more than the gap rule's fraction of the axes
        assert np.linalg.norm((means[0] - means[-1]) / span) >= VISIBLE_GAP, f"{apart} is a few pixels here: {note}"
        assert visible_groups(pts, colours, ranges) == len(means), f"the clusters overlap on the chart: {note}"
    for within in _numbers(r"each client within (\d+\.\d+)", note):
        worst = max(np.linalg.norm(pts[colours == c] - m, axis=1).max() for c, m in zip(sorted(set(colours)), means))
        assert f"{worst:.3f}" == f"{within:.3f}"
    for ari in _numbers(r"lowest loss alone[^;]*?ARI (-?\d\.\d\d)", note):
        assert loss_axes
        assert f"{adjusted_rand(colours, pts.argmin(axis=1)):.2f}" == f"{ari:.2f}", "the drawn sides disagree"


def check_heatmaps(figs: list[dict], note: str, orders: dict) -> None:
    """Rows keep the order of the lesson's first heatmap; counts of models and moves are the drawn ones."""
    trained, moves = [], []
    for i, fig in enumerate(figs):
        strip, cells = fig["data"][0], fig["data"][1]
        order = values(strip["customdata"])[:, 0].astype(int).tolist()
        assert orders.setdefault(i, order) == order, "rows reordered since the lesson's earlier heatmap"
        z = values(cells["z"])
        last = z[:, -1]
        trained.append(len(set(last[~np.isnan(last)].tolist())))
        moves.append(int(sum(((a != b) & ~np.isnan(a) & ~np.isnan(b)).sum() for a, b in zip(z.T, z.T[1:]))))
    counts = _numbers(r"(\d+) models?\b", note)
    if "trains" in note:
        assert counts == trained, f"models in use {trained}, the note says {counts}"
    times = _numbers(r"(\d+) times", note)
    if times:
        assert times == moves, f"moves drawn {moves}, the note says {times}"


def check_curves(fig: dict, note: str, rnd: int, metric: str) -> None:
    lay = fig["layout"]
    assert any(s.get("x0") == rnd for s in lay.get("shapes", ())), "no line at the step's round"
    at_round = []
    for t in fig["data"]:
        if t.get("type") == "scatter" and t.get("x") is not None:
            x, y = values(t["x"]), values(t["y"])
            at_round += [float(v) for v in y[x == rnd] if np.isfinite(v)]
    assert at_round, "nothing drawn at the step's round"
    if metric == "accuracy":
        drawn = {f"{v:.0%}" for v in at_round}
        for pct in re.findall(r"\d+%", note):
            assert pct in drawn, f"{pct} is not drawn at round {rnd}: {sorted(drawn)}"
    else:
        drawn = {f"{v:.2f}" for v in at_round}
        for value in re.findall(r"-?\d\.\d\d", note):
            assert value in drawn, f"ARI {value} is not drawn at round {rnd}: {sorted(drawn)}"


def check_privacy(figs: list[dict], note: str) -> None:
    """Every epsilon, ARI and percentage the note quotes is a point drawn (on an ARI line, an accuracy line); a
    sigma quoted is a noise level drawn."""
    traces = figs[0]["data"]
    eps = {str(e) for t in traces for e in (t.get("customdata") or ())}
    sigmas = {str(s).split()[-1] for t in traces for s in (t.get("text") or ())}
    if any(str(t.get("name", "")).endswith("no noise") for t in traces):
        sigmas.add("0")  # the noise-free runs: the dashed lines

    def ys(what):
        return [float(v) for t in traces if what in t["name"] for v in values(t["y"]) if np.isfinite(v)]

    aris, accs = {f"{v:.2f}" for v in ys("ARI")}, {f"{v:.0%}" for v in ys("accuracy")}
    for e in re.findall(r"ε (\d{1,3}(?:,\d{3})*(?:\.\d)?)", note):
        assert e in eps, f"ε {e} is not drawn: {sorted(eps)}"
    for s in re.findall(r"σ ([\d.]+(?:, [\d.]+)*)", note):
        for one in s.split(", "):
            assert one in sigmas, f"σ {one} is not drawn: {sorted(sigmas)}"
    for v in re.findall(r"(?<![\d.])-?\d\.\d\d(?!\d)", note):  # every ARI quoted (ε has one decimal or none)
        assert v in aris, f"ARI {v} is not drawn: {sorted(aris)}"
    for pct in re.findall(r"\d+%", note):
        assert pct in accs, f"{pct} is not drawn: {sorted(accs)}"


def check_unseen(figs: list[dict], note: str, rnd: int) -> None:
    """The note's ARIs and percentages, per algorithm in the order drawn, are each chart's headline numbers, and
    every cell with an accuracy is a model given to an unseen client."""
    heads = [fig["layout"]["meta"][0] for fig in figs]
    tail = note.split(" — ", 1)[1]
    parts = tail.split(": ", 1)[-1].split("; ")  # one part per algorithm, after the note's lead
    assert len(parts) == len(figs), f"{len(parts)} algorithms in the note, {len(figs)} charts"
    for part, head in zip(parts, heads):  # the same numbers in the same order: unseen's, then the training's
        for pattern in (r"ARI (-?\d\.\d\d)", r"(\d+%)"):
            quoted = re.findall(pattern, part)
            assert quoted == re.findall(pattern, head)[:len(quoted)], f"{part!r} against the chart's {head!r}"
    for fig in figs:
        cells = fig["data"][1]
        z = values(cells["z"])
        filled = [[bool(str(t)) for t in row] for row in cells["text"]]
        assert (np.isfinite(z) == np.asarray(filled)).all(), "an accuracy on a model no newcomer was given"
        assert (np.isfinite(z).sum(axis=1) == 1).all(), "a newcomer without exactly one model"


def check_lesson(lesson, units) -> list[str]:
    """Every step's note against its figures; the notes, in order."""
    notes, previous, orders = [], None, {}
    for step in lesson.steps:
        rnd = step.when(units)
        assert rnd is not None, f"{step.title}: the run never reaches the step's round"
        assert previous is None or rnd > previous, f"{step.title} stays at round {rnd}: its text moves on"
        note = step.note(units, rnd)
        drawn = step_figures(lesson, step, units, rnd, note)
        assert not isinstance(drawn, str), drawn
        figs = [build().to_dict() for _, _, build in drawn]
        if step.chart == EMBEDDING:
            check_embedding(figs[0], note, rnd)
        elif step.chart == CURVES:
            check_curves(figs[0], note, rnd, step.metric)
        elif step.chart == PRIVACY:
            check_privacy(figs, note)
        elif step.chart == UNSEEN:
            check_unseen(figs, note, rnd)
        else:
            check_heatmaps(figs, note, orders)
        notes.append(note)
        previous = rnd
    return notes
