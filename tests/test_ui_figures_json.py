"""The dashboard's other figures built as plain dicts without plotly's validation (cfl_ui.charts.figures.figure_from):
the client drill-down (redrawn in the live fragment), the IFCA explorer's, the Partitions page's (classes per cluster,
client sizes, client labels, the sample-image grid) and the Sweeps heatmap. As in test_ui_algorithm_views_json, each
figure's JSON is validated by plotly here and must come out of the validation unchanged, so a misspelt property, a
bare-string title or a colorscale by name fails."""
from __future__ import annotations

import dataclasses
from functools import lru_cache
from types import SimpleNamespace

import numpy as np
import pytest
from plotly.subplots import make_subplots

from cfl_core.config import ExperimentConfig
from cfl_core.experiment import Experiment
from cfl_core.sweep.tables import GRID_MEASURES
from cfl_ui.views import drilldown as D
from cfl_ui.charts import figures as F
from cfl_ui.charts import ifca_figures as IF
from cfl_ui.charts import partition_figures as PF
from cfl_ui.charts import sweep_grid as V
from cfl_ui.charts.palette import model_color
from tests.test_ui_algorithm_views_json import SMALL, check_figure


@lru_cache(maxsize=None)
def run(algorithm: str) -> tuple:
    return tuple(Experiment(ExperimentConfig(**{**SMALL, "algorithm": algorithm, "models": 3, "rounds": 4})))


@pytest.mark.parametrize("algorithm", ["clove", "ifca"])
def test_the_drilldown_loss_figure_is_valid_plotly_json(algorithm):
    records = run(algorithm)
    unit = SimpleNamespace(records=records)
    for client in (0, len(records[-1].assignments) - 1):
        spec = check_figure(D.loss_figure(unit, client))
        measured = [r for r in records if r.loss_matrix is not None and client in r.participants]
        assert [t["name"] for t in spec["data"]] == ["model 0", "model 1", "model 2", "model it took"]
        assert spec["data"][0]["line"]["color"] == model_color(0)
        last = measured[-1]
        row = last.loss_matrix[last.participants.index(client)]
        ring = D.loss_figure(unit, client).data[-1]
        assert list(ring.x) == [r.round for r in measured]
        assert ring.y[-1] == pytest.approx(row[last.assignments[client]])  # the ring sits on the model it took
        legend = spec["layout"]["legend"]
        assert legend["entrywidth"] == D.ENTRY_WIDTH and legend["entrywidthmode"] == "pixels"
        assert spec["layout"]["height"] == 300 and spec["layout"]["yaxis"]["title"]["text"] == "its loss on each model"
    bare = SimpleNamespace(records=tuple(dataclasses.replace(r, loss_matrix=None) for r in records))
    spec = check_figure(D.loss_figure(bare, 0))
    assert not spec["data"] and spec["layout"]["annotations"][0]["text"] == "no loss vectors recorded for this client"


def _ifca_rows():
    return [{"algorithm": a, "init": m, "seed": s, "ref": f"j/{a}{m}{s}",
             "final_ari": None if (a, s) == ("clove", 2) else (1.0 if a == "clove" or m != "same" else 0.0),
             "final_accuracy": 0.5 + 0.1 * s}
            for a in ("ifca", "clove") for m in ("same", "different") for s in range(3)]


def test_the_ifca_explorer_figures_are_valid_plotly_json():
    labels, colors = {"ifca": "IFCA", "clove": "CLoVE"}, {"ifca": "#d00", "clove": "#00d"}
    rows, algos, modes = _ifca_rows(), ["ifca", "clove"], ["same", "different"]
    succ = check_figure(IF.success_figure(rows, algos, modes, labels, colors))
    assert succ["data"][0]["y"] == [0.0, 1.0] and succ["data"][1]["text"] == ["2/2", "2/2"]
    assert succ["layout"]["barmode"] == "group" and succ["layout"]["yaxis"]["tickformat"] == ".0%"
    for metric in ("final_ari", "final_accuracy"):
        spread = check_figure(IF.spread_figure(rows, algos, modes, labels, colors, metric=metric))
        assert [len(t["y"]) for t in spread["data"]] == ([6, 4] if metric == "final_ari" else [6, 6])
        assert spread["data"][0]["marker"]["color"] == "#d00" and spread["layout"]["boxmode"] == "group"
        assert ("range" in spread["layout"]["yaxis"]) == (metric == "final_ari")


@lru_cache(maxsize=None)
def _partition(partition: str) -> dict:
    from cfl_ui.charts.partition_facts import partition_facts

    return partition_facts({"dataset": "digits", "partition": partition, "clusters": 3, "clients_per_cluster": 2,
                            "samples_per_client": 30, "seed": 0})


@pytest.mark.parametrize("partition", ["concept-shift", "label-skew-1"])
def test_the_partition_figures_are_valid_plotly_json(partition):
    facts = _partition(partition)
    clients, classes = facts["partition"]["clients"], facts["num_classes"]
    heat = check_figure(PF.cluster_class_heatmap(clients, classes))["data"][0]
    assert np.asarray(PF.cluster_class_heatmap(clients, classes).data[0].z).sum() == sum(c["n_train"] for c in clients)
    assert heat["colorscale"][0] == [0.0, "rgb(247,251,255)"]  # plotly.py's Blues, written out
    labels = check_figure(PF.client_labels_figure(clients, classes))
    assert labels["layout"]["barmode"] == "stack" and labels["layout"]["legend"]["traceorder"] == "normal"
    assert len(labels["layout"]["shapes"]) == 3  # a band under each true cluster's clients
    sizes = check_figure(PF.client_sizes_figure(clients))
    assert [t["name"] for t in sizes["data"]] == ["train", "test"]


def test_the_image_grid_is_valid_plotly_json_and_laid_out_as_make_subplots_did():
    gray = [("cluster 0", np.random.default_rng(0).random((3, 1, 8, 8)), ["a", "b", "c"])]
    rgb = [("cluster 1", np.random.default_rng(1).random((4, 3, 6, 6)), ["d", "", "f", "g"])]
    real = list(_partition("concept-shift")["rows"])
    for rows in (gray, gray + rgb, real):
        fig = PF.image_grid_figure(rows)
        spec = check_figure(fig)
        n_cols = max(len(r[1]) for r in rows)
        grid = make_subplots(rows=len(rows), cols=n_cols, subplot_titles=[c for _, imgs, caps in rows for c in
                                                                          list(caps) + [""] * (n_cols - len(caps))],
                             horizontal_spacing=0.012,
                             vertical_spacing=min(0.09, 0.5 / (len(rows) - 1)) if len(rows) > 1 else 0.05)
        expected = grid.to_plotly_json()["layout"]
        for name in (k for k in expected if k.startswith(("xaxis", "yaxis"))):
            assert spec["layout"][name]["domain"] == pytest.approx(expected[name]["domain"], abs=1e-12), name
            assert spec["layout"][name]["anchor"] == expected[name]["anchor"]
        titles = [a for a in spec["layout"]["annotations"] if not a["text"].startswith("<b>")]
        assert [a["text"] for a in titles] == [a["text"] for a in expected["annotations"]]
        assert [(a["x"], a["y"]) for a in titles] == [pytest.approx((a["x"], a["y"]), abs=1e-12)
                                                      for a in expected["annotations"]]
        assert len(spec["data"]) == sum(len(r[1]) for r in rows)
    assert [t["type"] for t in PF.image_grid_figure(gray + rgb).to_plotly_json()["data"]] == ["heatmap"] * 3 + \
        ["image"] * 4


def _cells():
    return [{"lr": lr, "algorithm": a, "finished": 2, "runs": 3,
             **{m: None if (lr, a, m) == (0.1, "ifca", "final_ari") else 0.1 * i + lr for i, m in enumerate(GRID_MEASURES)},
             **{f"{m}_std": 0.01 for m in GRID_MEASURES}}
            for lr in (0.01, 0.1) for a in ("ifca", "clove")]


def test_the_sweeps_heatmap_is_valid_plotly_json():
    for measure in GRID_MEASURES:
        for col in ("algorithm", None):
            spec = check_figure(V.heatmap_figure(_cells(), "lr", col, measure))
            heat = spec["data"][0]
            assert ("zmin" in heat) == (measure in ("final_ari", "success"))
            assert spec["layout"]["yaxis"]["title"]["text"] == "lr" and spec["layout"]["height"] == 260
            assert len(heat["x"]) == (2 if col else 1)
    spec = check_figure(V.heatmap_figure(_cells(), "lr", "algorithm", "final_ari"))
    assert spec["data"][0]["z"][1][0] is None and spec["data"][0]["text"][1][0].startswith("-")
