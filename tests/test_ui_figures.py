"""Figure builders, embeddings, the per-algorithm view registry, URL parameters and presets."""
from __future__ import annotations

import numpy as np
import plotly.graph_objects as go
import pytest

from cfl_core.config import ExperimentConfig
from cfl_core.records import RoundRecord
from cfl_ui.views import algorithm_views as AV
from cfl_ui.charts import embedding as E
from cfl_ui.charts import figures as F
from cfl_ui.charts import ifca_figures as IF
from cfl_ui.charts import partition_figures as PF
from cfl_ui.form import url_codec as Q
from cfl_ui.charts.palette import cluster_color, model_color, model_symbol
from cfl_ui.form.presets import DEFAULT_PRESET, PRESETS, SIGNATURE_PRESET, preset_config


def records(k_models=2, clusters=2, per=3, rounds=4, frozen_from=None, participants=None, extras=None):
    """Synthetic records: cluster c has a low loss on model c, shrinking over rounds."""
    n = clusters * per
    truth = [i // per for i in range(n)]
    out = []
    for r in range(rounds):
        parts = list(range(n)) if participants is None else participants(r)
        matrix = None
        if frozen_from is None or r < frozen_from:
            matrix = [[(0.2 if truth[c] % k_models == j else 2.0) / (r + 1) + 0.01 * c for j in range(k_models)]
                      for c in parts]
        assign = [truth[c] % k_models for c in range(n)]
        out.append(RoundRecord(
            round=r, phase="clustering", participants=parts, assignments=assign, loss_matrix=matrix,
            client_accuracy=[0.5] * n, client_loss=[1.0] * n, accuracy=0.5 + 0.1 * r, weighted_accuracy=0.5,
            ari=min(1.0, 0.4 * r), nmi=min(1.0, 0.3 * r), models_in_use=k_models, bytes_down=1000, bytes_up=500,
            seconds=0.01, true_clusters=truth, loss=1.0 / (r + 1), train_loss=1.0,
            extras=dict(extras(r, parts) if extras else {"stable_share": r / rounds})))
    return out


def test_raw_two_model_embedding_has_fixed_equal_axes_and_one_frame_per_round():
    recs = records(k_models=2)
    emb = E.loss_embedding(recs)
    assert emb.method == E.RAW and emb.dims == 2 and len(emb.frames) == 4
    assert emb.axis_titles == ["loss on model 0", "loss on model 1"]
    assert emb.ranges[0] == emb.ranges[1]  # the diagonal means "equal losses"
    allx = np.concatenate([f.points[:, 0] for f in emb.frames])
    assert emb.ranges[0][0] <= allx.min() and allx.max() <= emb.ranges[0][1]
    fig = F.embedding_figure(emb)
    assert isinstance(fig, go.Figure) and len(fig.to_dict()["frames"]) == 4
    assert fig.layout.sliders[0].active == 3  # the latest round shown first
    names = [t.name for t in fig.data]
    assert "cluster 0" in names and "model 1" in names and "equal losses" in names
    first = fig.data[0]
    assert first.marker.color == cluster_color(0)
    assert set(first.marker.symbol) <= {model_symbol(0), model_symbol(1)}
    assert "client 0" in first.text[0] and "losses" in first.text[0]
    assert "frames" not in F.embedding_figure(emb, animate=False).to_dict()  # live: no frames to build


def test_the_replay_and_its_json_are_what_plotly_validates_unchanged():
    from tests.test_ui_algorithm_views_json import check_figure

    spec = check_figure(F.embedding_figure(E.loss_embedding(records(k_models=4, clusters=4, rounds=6), E.PCA)))
    assert [f["name"] for f in spec["frames"]] == [str(r) for r in range(6)]
    assert [s["label"] for s in spec["layout"]["sliders"][0]["steps"]] == [str(r) for r in range(6)]


def long_run(rounds: int, per: int = 3, moves=(3, 4, 250, 251)):
    """A long run in which clients change model only in the rounds `moves` (the rest repeat the assignment)."""
    recs = records(k_models=2, clusters=2, per=per, rounds=rounds)
    n = 2 * per
    for r, rec in enumerate(recs):
        flips = sum(1 for m in moves if m <= r)
        rec.assignments = [(c + flips) % 2 if c == 0 else rec.assignments[c] for c in range(n)]
    return recs


def test_a_long_runs_replay_keeps_every_round_a_client_moved_and_spreads_the_rest_within_the_cap():
    recs = long_run(2000)
    emb = E.loss_embedding(recs)
    assert len(emb.frames) == 2000 and F.replay_cap(emb) == F.MAX_REPLAY_FRAMES
    spec = F.embedding_figure(emb).to_dict()
    rounds = [int(f["name"]) for f in spec["frames"]]
    assert len(rounds) == F.MAX_REPLAY_FRAMES and rounds == sorted(rounds)
    assert {0, 3, 4, 250, 251, 1999} <= set(rounds)  # the first, the moves, the last
    gaps = np.diff(rounds)
    assert gaps.max() <= 2 * 2000 / F.MAX_REPLAY_FRAMES  # the rest evenly spread: no long stretch left out
    steps = spec["layout"]["sliders"][0]["steps"]
    assert [s["label"] for s in steps] == [str(r) for r in rounds]
    assert spec["layout"]["sliders"][0]["active"] == len(rounds) - 1  # the latest round shown first
    # a round picked on the page is among the frames, and the slider starts on it
    picked = F.embedding_figure(emb, active_round=1234).to_dict()
    names = [f["name"] for f in picked["frames"]]
    assert "1234" in names and picked["layout"]["sliders"][0]["active"] == names.index("1234")
    assert "120 of its 2000 rounds" in F.replay_note(emb) and F.replay_note(E.loss_embedding(recs[:100])) == ""


def test_the_replay_keeps_fewer_frames_the_more_clients_each_draws():
    small = E.loss_embedding(long_run(300, per=3))
    big = E.loss_embedding(long_run(300, per=500))  # 1000 clients a frame
    assert F.replay_cap(small) == F.MAX_REPLAY_FRAMES
    assert F.replay_cap(big) == F.MAX_REPLAY_POINTS // 1000
    frames = F.embedding_figure(big).to_dict()["frames"]
    assert len(frames) == F.replay_cap(big)
    assert sum(len(t["customdata"]) for f in frames for t in f["data"]) <= F.MAX_REPLAY_POINTS  # a client each


def test_when_clients_move_in_more_rounds_than_half_the_cap_the_moves_are_spread_too():
    emb = E.loss_embedding(long_run(1000, moves=tuple(range(1, 1000, 2))))  # a move every other round
    kept = F.replay_indices(emb, len(emb.frames) - 1)
    assert len(kept) == F.MAX_REPLAY_FRAMES and kept[0] == 0 and kept[-1] == 999
    assert np.diff(kept).max() <= 3 * 1000 / F.MAX_REPLAY_FRAMES


def test_three_models_give_a_3d_scatter_and_more_give_pca_with_stable_axes():
    emb3 = E.loss_embedding(records(k_models=3, clusters=3))
    assert emb3.dims == 3 and isinstance(F.embedding_figure(emb3).data[0], go.Scatter3d)
    recs = records(k_models=5, clusters=5, per=2, rounds=5)
    emb = E.loss_embedding(recs, E.PCA)
    assert emb.method == E.PCA and emb.dims == 2 and emb.axis_titles[0].startswith("PC1")
    # one projection for every round: the same client's loss vector maps to the same point in every frame
    again = E.loss_embedding(recs, E.PCA)
    assert np.allclose(again.frames[2].points, emb.frames[2].points)
    pts = np.concatenate([f.points for f in emb.frames])
    for d in range(2):
        assert emb.ranges[d][0] <= pts[:, d].min() and pts[:, d].max() <= emb.ranges[d][1]


def test_embedding_cache_per_run_and_round():
    E.cache_clear()
    recs = records(k_models=4, clusters=4, per=2)
    a = E.loss_embedding(recs, E.PCA, cache_key="run-x")
    assert E.loss_embedding(recs, E.PCA, cache_key="run-x") is a  # a refresh recomputes nothing
    b = E.loss_embedding(recs + records(k_models=4, clusters=4, per=2, rounds=5)[4:], E.PCA, cache_key="run-x")
    assert b is not a and len(b.frames) == 5


def test_frozen_rounds_repeat_the_last_loss_vectors_with_a_note():
    emb = E.loss_embedding(records(rounds=6, frozen_from=3))
    assert [f.round for f in emb.frames] == [0, 1, 2, 3, 4, 5]
    assert [f.source_round for f in emb.frames] == [0, 1, 2, 2, 2, 2]
    assert emb.frames[4].note and "round 2" in emb.frames[4].note
    assert not emb.frames[1].note


def test_partial_participation_frames_follow_the_participants():
    recs = records(clusters=2, per=4, participants=lambda r: [0, 1, 4, 5] if r % 2 else [2, 3, 6, 7])
    emb = E.loss_embedding(recs)
    assert emb.frames[0].clients.tolist() == [2, 3, 6, 7] and emb.frames[1].clients.tolist() == [0, 1, 4, 5]


@pytest.mark.slow  # UMAP's first use compiles with numba (~20 s on 2 cores)
def test_umap_embedding_is_chained_and_cached():
    pytest.importorskip("umap")
    E.cache_clear()
    recs = records(k_models=4, clusters=4, per=3, rounds=3)
    emb = E.loss_embedding(recs, E.UMAP, cache_key="u")
    assert emb.method == E.UMAP and len(emb.frames) == 3
    assert all(np.isfinite(f.points).all() for f in emb.frames)


def test_no_loss_vectors_no_embedding():
    recs = records()
    for r in recs:
        r.loss_matrix = None
    assert E.loss_embedding(recs) is None


def test_assignment_heatmap_groups_clients_by_true_cluster():
    recs = records(k_models=2, clusters=2, per=3)
    recs[-1].assignments[0] = -1  # not placed yet
    fig = F.assignment_heatmap(recs)
    strip, main = fig.data
    z = np.array(main.z, dtype=float)
    assert z.shape == (6, 4)
    assert np.isnan(z[0, -1])  # unplaced cells are blank
    assert list(np.array(strip.z).ravel()) == [0, 0, 0, 1, 1, 1]
    assert main.colorscale[0][1] == model_color(0)


def test_clients_per_model_and_curves():
    recs = records()
    area = F.clients_per_model(recs)
    assert [t.name for t in area.data] == ["model 0", "model 1"] and list(area.data[0].y) == [3, 3, 3, 3]
    series = [F.Series("CLoVE", tuple(recs), "#000"), F.Series("IFCA", tuple(recs), "#f00")]
    acc = F.metric_figure(series, ["accuracy"])
    assert len(acc.data) == 2 and list(acc.data[0].y) == pytest.approx([0.5, 0.6, 0.7, 0.8])
    ari = F.metric_figure(series, ["ari", "nmi"], target=0.9)
    assert len(ari.data) == 4 and ari.layout.shapes  # the 0.9 line
    mb = F.metric_figure(series, ["mb"])
    assert list(mb.data[0].y) == pytest.approx([0.0015, 0.003, 0.0045, 0.006])
    assert F.has_metric(series, "accuracy") and not F.has_metric(series, "nonexistent")


def test_ifca_explorer_figures():
    rows = [{"algorithm": a, "init": m, "seed": s, "final_ari": (1.0 if a == "clove" or m != "same" else 0.0),
             "ref": f"j/{s}"} for a in ("ifca", "clove") for m in ("same", "different") for s in range(3)]
    labels, colors = {"ifca": "IFCA", "clove": "CLoVE"}, {"ifca": "#d00", "clove": "#00d"}
    succ = IF.success_figure(rows, ["ifca", "clove"], ["same", "different"], labels, colors)
    ifca = next(t for t in succ.data if t.name == "IFCA")
    assert list(ifca.y) == [0.0, 1.0] and list(ifca.text) == ["0/3", "3/3"]
    spread = IF.spread_figure(rows, ["ifca", "clove"], ["same", "different"], labels, colors)
    assert len(spread.data) == 2 and len(spread.data[0].y) == 6


def test_partition_figures_and_images():
    clients = [{"id": i, "cluster": i // 2, "n_train": 10 + i, "n_test": 5, "label_counts": [i, 10 - i, 0]}
               for i in range(4)]
    cc = PF.cluster_class_heatmap(clients, 3)
    assert np.array(cc.data[0].z).tolist() == [[1, 19, 0], [5, 15, 0]]
    assert len(PF.client_labels_figure(clients, 3).data) == 2  # class 2 is empty
    sizes = PF.client_sizes_figure(clients)
    assert list(sizes.data[0].y) == [10, 11, 12, 13]
    grid = PF.image_grid_figure([("cluster 0", np.zeros((3, 1, 8, 8)), ["a", "b", "c"]),
                                ("cluster 1", np.ones((3, 3, 8, 8)), ["d", "e", "f"])])
    assert len(grid.data) == 6 and isinstance(grid.data[3], go.Image)


def test_view_registry_custom_and_generic_views():
    calls = []

    @AV.register("toy-algo", embedding=True)
    def toy(recs, rnd):
        calls.append(rnd)
        return [AV.View("Toy", F.empty_figure("toy"), "A toy view.")]

    @AV.register("toy-algo")
    def broken(recs, rnd):
        raise ValueError("nope")

    recs = records()
    views = AV.embedding_views("toy-algo", recs, 2)
    assert [v.title for v in views] == ["Toy"] and calls == [2]
    extra = AV.extra_views("toy-algo", recs, None)
    assert extra[0].title == "broken failed" and "nope" in extra[0].caption  # a broken view never breaks a page
    assert any(v.title == "Recorded: share of clients that kept their model" for v in extra)

    # generic: a per-client feature matrix and a client x client matrix in the extras
    feats = records(extras=lambda r, parts: {"edc": [[float(c % 2), float(r)] for c in parts],
                                             "similarity": [[1.0 if a // 3 == b // 3 else -1.0 for b in parts]
                                                            for a in parts]})
    for r in feats:
        r.loss_matrix = None
    generic = AV.embedding_views("unregistered", feats, None)
    titles = [v.title for v in generic]
    assert "Clients by their 'edc'" in titles and any("similarity" in t for t in titles)
    assert any(v.per_round for v in generic)
    assert AV.embedding_views("unregistered", records(extras=lambda r, p: {}), None) == []


def test_clove_views_show_stability_and_consume_their_keys():
    recs = records()
    recs[2].extras["frozen_after"] = 2
    views = AV.extra_views("clove", recs, None)
    assert views[0].title == "CLoVE: stability"
    assert not any(v.title == "Recorded: share of clients that kept their model" for v in views)


def test_query_params_round_trip_every_field():
    cfg = ExperimentConfig.from_dict(preset_config("No clusters (IID control)")).to_dict()
    encoded = Q.encode(cfg, {"vs": "fedavg", "run": None, "algos": ["a", "b"]})
    assert all(isinstance(v, str) for v in encoded.values())
    assert encoded["options"] == '{"unknown_k":true}' and encoded["algos"] == "a,b" and "run" not in encoded
    decoded, extra, problems = Q.decode(encoded)
    assert decoded == cfg and extra == {"vs": "fedavg", "algos": "a,b"} and problems == []
    bad, _, problems = Q.decode({"clusters": "x", "models": "none", "options": "[1]", "utm_source": "mail"})
    assert bad == {"models": None} and len(problems) == 2 and "clusters" in problems[0]
    assert Q.link("http://h:1/compare?x=1", {"a": "1"}) == "http://h:1/compare?a=1"


def test_one_link_builder_for_this_page_and_the_others(monkeypatch):
    from cfl_ui.form import url_sync as U

    monkeypatch.setattr(U, "_current_url", lambda: "http://h:1/base/ifca-init?seeds=3#top")
    assert U.app_url({"run": "a/b", "step": 2}) == "http://h:1/base/?run=a%2Fb&step=2"  # the Playground
    assert U.app_url({"lesson": "x"}, page="lessons") == "http://h:1/base/lessons?lesson=x"
    assert U.app_url({"seeds": 4}, page=None) == "http://h:1/base/ifca-init?seeds=4"  # this page (the link box)
    monkeypatch.setattr(U, "_current_url", lambda: "")  # no browser: relative, or this page on localhost
    assert U.app_url({"run": "j"}) == "/?run=j" and U.app_url({"a": 1}, page=None) == "http://localhost:8501/?a=1"


def test_presets_are_valid_configs():
    assert DEFAULT_PRESET in PRESETS and SIGNATURE_PRESET in PRESETS
    for name in ("IFCA collapses, CLoVE recovers", "Rotated digits", "Label swaps (concept shift)", "Label skew",
                 "No clusters (IID control)"):
        assert name in PRESETS
    for name, preset in PRESETS.items():
        cfg = ExperimentConfig.from_dict(preset_config(name))
        cfg.validate()  # static checks only: data sets need not be installed
        assert preset.blurb
    sig = PRESETS[SIGNATURE_PRESET]
    assert sig.config["init"] == "same" and sig.config["algorithm"] == "ifca" and sig.vs == "clove"
    assert sig.config["dataset"] == "digits" and sig.config["partition"] == "feature-skew"
