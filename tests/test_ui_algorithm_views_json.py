"""The per-algorithm views' figures are plain dicts that the dashboard wraps WITHOUT plotly's validation
(cfl_ui.charts.figures.figure_from): plotly.js draws whatever they say, a misspelt property silently ignored. This is
the safety net: every registered view function (the registry iterated, so a new one without a case here fails) and the
generic views are built on the records of real small runs, and each figure's JSON is validated by plotly here and
must come out of the validation unchanged (what plotly.py would have written is what the dicts already say: no
title given as a bare string, no colorscale by name, which plotly.js reads otherwise)."""
from __future__ import annotations

import copy
import json
from functools import lru_cache

import plotly.graph_objects as go
import plotly.io as pio
import pytest

from cfl_core.config import ExperimentConfig
from cfl_core.experiment import Experiment
from cfl_core.records import RoundRecord
from cfl_ui.views import algorithm_views as AV
from cfl_ui.charts import figures as F

SMALL = dict(dataset="digits", clusters=3, clients_per_cluster=3, samples_per_client=30, device="cpu",
             local_epochs=1, seed=0)
# per algorithm with registered views: the run whose records exercise every view it has
CASES = {
    "clove": [dict(algorithm="clove", models=3, rounds=8),  # known K: stability reached, frozen_after recorded
              dict(algorithm="clove", models=3, rounds=3, options={"unknown_k": True, "freeze": False})],
    "ifca": [dict(algorithm="ifca", models=3, rounds=1, init="restarts")],
    # as tests/test_algo_cfl.py's dashboard test: three accepted splits (rounds 8, 10, 12) after the warm-up
    "cfl": [dict(algorithm="cfl", partition="concept-shift", rounds=13, clusters=4, clients_per_cluster=5,
                 samples_per_client=60, local_epochs=2)],
    "flexcfl": [dict(algorithm="flexcfl", partition="label-skew-1", models=3, rounds=3, newcomer_share=0.2,
                     newcomer_round=1, within="dirichlet", alpha=0.3, shift="swap-part",
                     shift_options={"probability": 1.0, "pairs": 1, "across_clusters": True})],
    "fedgroup": [dict(algorithm="fedgroup", partition="label-skew-1", models=3, rounds=2)],
    "kfed": [dict(algorithm="kfed", models=3, partition="feature-skew", rounds=1)],
    "pacfl": [dict(algorithm="pacfl", models=3, partition="feature-skew", rounds=1)],
    "fedpac": [dict(algorithm="fedpac", partition="concept-shift", rounds=2)],
    "fedsoft": [dict(algorithm="fedsoft", models=2, rounds=2, newcomer_share=0.3, newcomer_round=1)],
    "fedrc": [dict(algorithm="fedrc", models=2, rounds=2)],
}
REGISTERED = AV.registered_algorithms()  # at collection: before any test registers a toy algorithm


@lru_cache(maxsize=None)
def runs_of(algorithm: str) -> tuple:
    out = []
    for changes in CASES[algorithm]:
        out.append(list(Experiment(ExperimentConfig(**{**SMALL, **changes}))))
    if algorithm == "clove":  # CLoVE's K rarely changes on digits: a copy of the unknown-K run with K varied
        varied = copy.deepcopy(out[-1])
        for r in varied:
            if "k" in (r.extras or {}):
                r.extras["k"] = 1 + r.round % 3
        out.append(varied)
    return tuple(out)


def check_figure(fig: go.Figure) -> dict:
    """The figure's JSON validated by plotly (a misspelt or misplaced property raises ValueError) and unchanged by
    the validation (AssertionError otherwise); returned."""
    spec = fig.to_plotly_json()
    validated = go.Figure(spec)
    assert json.loads(pio.to_json(validated, validate=False)) == json.loads(pio.to_json(fig, validate=False)), \
        "plotly's validation changes this figure: plotly.js would draw something else than plotly.py meant"
    assert spec["data"] or spec["layout"].get("annotations"), "an empty figure"
    assert spec["layout"]["template"]["layout"], "the house style's template written out"
    return spec


def test_the_check_catches_a_misspelt_property():
    good = F.figure_from([dict(type="bar", x=[1, 2], y=[3, 4], marker=dict(color="#8C564B"))], F.house(200))
    check_figure(good)
    for bad in ([dict(type="bar", x=[1], y=[2], marker=dict(colour="#8C564B"))],  # misspelt
                [dict(type="scatter", x=[1], y=[2], line=dict(shape="steps"))]):  # no such value
        with pytest.raises(ValueError):
            check_figure(F.figure_from(bad, F.house(200)))
    with pytest.raises(ValueError):
        check_figure(F.figure_from([], F.house(200, annotations=[dict(txt="x")])))
    # accepted by plotly.py's validation, but written differently from what plotly.js reads
    for data, lay in (([dict(type="scatter", x=[1], y=[2])], dict(xaxis=dict(title="round"))),  # {"text": ...}
                      ([dict(type="heatmap", z=[[1, 2]], colorscale="RdBu")], {})):  # plotly.js' RdBu differs
        with pytest.raises(AssertionError, match="validation changes"):
            check_figure(F.figure_from(data, F.house(200, **lay)))


def test_every_built_in_algorithm_with_views_has_a_case():
    assert set(REGISTERED) == set(CASES), "a view was registered for an algorithm this test does not run"


@pytest.mark.parametrize("algorithm", REGISTERED)
def test_every_registered_view_draws_valid_plotly_json(algorithm):
    fns = AV.registered(algorithm)
    for fn in fns["embedding"] + fns["extra"]:
        drawn = 0
        for records in runs_of(algorithm):
            for round_index in (None, records[0].round, records[len(records) // 2].round):
                for view in fn(records, round_index):  # not through _safe: a view that raises fails here
                    drawn += 1
                    assert view.figure is not None or view.markdown, view.title
                    if view.figure is not None:
                        check_figure(view.figure)
        assert drawn, f"{fn.__name__} drew nothing on the {algorithm} case's records: the case misses it"


def test_the_views_draw_their_marks_where_the_records_say():
    """Lines and notes written out as dicts (plotly's add_vline / add_hline / add_vrect): where the records say."""
    clove = [v for records in runs_of("clove") for v in AV.extra_views("clove", records, None)]
    stability = next(v for v in clove if v.title == "CLoVE: stability" and v.figure.layout.shapes)
    frozen = next(r.extras["frozen_after"] for records in runs_of("clove") for r in records
                  if "frozen_after" in (r.extras or {}))
    spec = check_figure(stability.figure)
    assert spec["layout"]["shapes"][0]["x0"] == frozen and spec["layout"]["shapes"][0]["yref"] == "y domain"
    assert spec["layout"]["annotations"][0]["text"] == f"clustering stops after round {frozen}"
    assert spec["layout"]["yaxis"]["title"]["text"] == "stable clients" and spec["layout"]["height"] == 260
    assert not spec["layout"]["showlegend"]
    assert {v.title.split(" (")[0] for v in clove} >= {"CLoVE: stability", "CLoVE: choosing K",
                                                       "CLoVE: number of clusters"}
    norms = AV.cfl_norms(runs_of("cfl")[0], None)[0].figure.to_plotly_json()["layout"]
    texts = [a["text"] for a in norms["annotations"]]
    assert any(t.startswith("eps1") for t in texts) and any(t.startswith("eps2") for t in texts)
    eps = [s for s in norms["shapes"] if s.get("xref") == "x domain"]
    assert len(eps) == 2 and all(s["y0"] == s["y1"] for s in eps)
    splits = [e["round"] for r in runs_of("cfl")[0] for e in (r.extras or {}).get("split_events", [])]
    assert splits and [s["x0"] for s in norms["shapes"] if s["type"] == "line" and s["xref"] == "x"] == splits
    assert [s["type"] for s in norms["shapes"]].count("rect") == 1 and "warm-up" in texts


def _synthetic(rounds=4, n=6):
    truth = [i // 3 for i in range(n)]
    return [RoundRecord(round=r, phase="clustering", participants=list(range(n)), assignments=truth,
                        loss_matrix=None, client_accuracy=[0.5] * n, client_loss=[1.0] * n, accuracy=0.5,
                        weighted_accuracy=0.5, ari=1.0, nmi=1.0, models_in_use=2, bytes_down=1, bytes_up=1,
                        seconds=0.01, true_clusters=truth, loss=1.0, train_loss=1.0,
                        extras={"edc": [[float(c % 2), float(r)] for c in range(n)],
                                "similarity": [[1.0 if a // 3 == b // 3 else -1.0 for b in range(n)] for a in range(n)],
                                "theta_error": 1.0 / (r + 1)})
            for r in range(rounds)]


def test_the_generic_views_draw_valid_plotly_json():
    records = _synthetic()
    views = AV.embedding_views("no-such-algorithm", records, 2) + AV.extra_views("no-such-algorithm", records, None)
    titles = [v.title for v in views]
    assert titles == ["Clients by their 'edc'", "'similarity' in round 2", "Recorded: distance to the true parameters"]
    specs = [check_figure(v.figure) for v in views]
    heat = specs[1]["data"][0]
    assert heat["type"] == "heatmap" and heat["colorscale"][0] == [0.0, "rgb(103,0,31)"]  # plotly.py's RdBu
    assert specs[1]["layout"]["yaxis"] == {"autorange": "reversed", "type": "category"}
    assert specs[2]["data"][0]["y"] == [1.0, 0.5, 1 / 3, 0.25]
