"""The conditions (drop-outs, privacy noise, attackers, unseen clients) in the dashboard: their own subsection of
"More settings", a link that carries them, and the views that show what they did."""
from __future__ import annotations

from pathlib import Path

from streamlit.testing.v1 import AppTest

from cfl_ui.form import controls
from tests.helpers import open_sections, runs, shown  # noqa: F401  (runs: the runs-folder fixture)

APP = str(Path(__file__).resolve().parent.parent / "app.py")


def _page(query: dict) -> AppTest:
    at = AppTest.from_file(APP, default_timeout=90)
    at.query_params.update(query)
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    return at


def test_every_condition_setting_has_a_control_under_its_own_heading():
    assert set(controls.ADVANCED_CONDITIONS) >= {"dropout_rate", "straggler_rate", "dp_noise", "dp_loss_noise",
                                                 "dp_delta", "malicious_share", "attack", "unseen_share",
                                                 "unseen_every"}
    assert not set(controls.ADVANCED_CONDITIONS) & set(controls.ADVANCED_TRAIN + controls.ADVANCED_DYNAMICS)


def test_a_link_with_conditions_fills_their_controls_and_survives_the_round_trip(runs):
    query = {"dataset": "digits", "algorithm": "clove", "dropout_rate": "0.2", "dp_noise": "1.5",
             "dp_loss_noise": "0.5", "attack": "sign-flip", "malicious_share": "0.1"}
    at = _page(query)
    for name, text in query.items():
        assert at.query_params[name] == text, f"{name}: the link lost it"
    assert at.session_state["pg.dropout_rate"] == 0.2 and at.session_state["pg.dp_noise"] == 1.5
    open_sections(at, "pg", "more")
    heads = [m.value for m in at.sidebar.markdown]
    assert any(h.startswith("**Conditions") for h in heads), heads
    assert at.number_input(key="pg.dropout_rate").value == 0.2
    assert at.number_input(key="pg.dp_noise").value == 1.5
    assert at.selectbox(key="pg.attack").value == "sign-flip"
    at.number_input(key="pg.straggler_rate").set_value(0.25)
    at.run()
    assert not at.exception
    assert at.query_params["straggler_rate"] == "0.25" and at.query_params["dropout_rate"] == "0.2"
    # the link written now opens the same settings in a fresh session
    again = _page({k: at.query_params[k] for k in at.query_params})
    for name in ("dropout_rate", "dp_noise", "dp_loss_noise", "straggler_rate", "malicious_share", "attack"):
        assert again.session_state[f"pg.{name}"] == at.session_state[f"pg.{name}"], name


def test_a_bad_condition_in_a_link_is_one_note_not_a_traceback(runs):
    at = _page({"dataset": "digits", "algorithm": "clove", "dropout_rate": "1.5"})
    assert at.session_state["pg.dropout_rate"] == 0.0  # the control's default
    notes = [shown(str(e.value)) for e in [*at.warning, *at.info, *at.error, *at.caption]]
    assert sum("dropout_rate='1.5'" in n for n in notes) == 1, notes


# -- the views ---------------------------------------------------------------------------------------------------
RUN: list = []


def conditioned_records():
    """A small CLoVE run under every condition: drop-outs, stragglers, DP noise, attackers, unseen clients."""
    if not RUN:
        from cfl_core.config import ExperimentConfig
        from cfl_core.experiment import Experiment

        cfg = ExperimentConfig.from_dict(dict(
            dataset="digits", clusters=2, clients_per_cluster=4, samples_per_client=30, rounds=3, local_epochs=1,
            algorithm="clove", models=2, dropout_rate=0.3, straggler_rate=0.3, dp_noise=1.0, dp_loss_noise=1.0,
            malicious_share=0.2, attack="sign-flip", unseen_share=0.25, unseen_every=1, seed=0))
        RUN.extend(Experiment(cfg))
    return RUN


def test_headline_numbers_name_the_privacy_spent_and_the_unseen_clients_scores():
    from cfl_ui.charts import conditions_text as CT

    recs = conditioned_records()
    label, value, help_ = CT.privacy_headline(recs)
    eps = recs[-1].extras["dp_epsilon"]
    assert label == "Privacy ε at δ=1e-05" and value == f"{eps:.3g}" and "RDP" in help_
    assert eps > recs[0].extras["dp_epsilon"]  # the spend grows round by round
    (acc_label, acc, _), (ari_label, ari, ari_help) = CT.unseen_headline(recs)
    unseen = recs[-1].extras["unseen"]
    assert acc_label == "Unseen accuracy" and acc == f"{unseen['accuracy']:.1%}"
    assert ari == f"{unseen['ari']:.2f}" and f"the {len(unseen['clients'])} unseen" in ari_help
    assert CT.privacy_headline([]) is None and CT.unseen_headline([]) == []


def test_not_covering_lists_what_was_sent_in_the_clear():
    from types import SimpleNamespace

    from cfl_ui.charts import conditions_text as CT

    rec = SimpleNamespace(round=3, extras={"dp_epsilon": 2.0, "dp_delta": 1e-5,
                                           "dp_unprotected": ["each client's choice of model"]})
    assert CT.unprotected_note([rec]) == "ε not covering: each client's choice of model"
    assert "Not covering: each client's choice of model" in CT.privacy_headline([rec])[2]
    assert CT.unprotected_note([SimpleNamespace(round=1, extras={"dp_epsilon": 2.0})]) is None


def test_the_caption_names_who_dropped_out_and_who_straggled():
    from cfl_ui.charts import conditions_text as CT

    for rec in conditioned_records():
        text = CT.absent_caption(rec) or ""
        dropped, strag = rec.extras.get("dropped") or [], rec.extras.get("stragglers") or {}
        assert text.startswith(f"Round {rec.round}:") == bool(dropped or strag)
        for c in dropped:
            assert str(c) in text.split("dropped out")[0]
        if strag:
            assert "straggled" in text and all(c in text for c in strag)


def test_the_embedding_and_the_heatmap_mark_the_attackers():
    from cfl_ui.charts import figures as F
    from cfl_ui.charts.embedding import PCA, loss_embedding

    recs = conditioned_records()
    bad = F.attackers_of(recs)
    assert bad == frozenset(recs[-1].extras["malicious"]) and bad
    emb = loss_embedding(recs, PCA)
    fig = F.embedding_figure(emb, recs[-1].round, attackers=bad).to_dict()
    assert [t["name"] for t in fig["data"]].count(F.ATTACKER_NAME) == 1
    ringed = set()
    for t in fig["data"]:
        if t.get("customdata") and isinstance(t["marker"]["line"].get("width"), (list, tuple)):
            ringed |= {c for c, w in zip(t["customdata"], t["marker"]["line"]["width"]) if w == 3}
    shown = {int(c) for f in emb.frames if f.round == recs[-1].round for c in f.clients}
    assert ringed == bad & shown and ringed
    plain = F.embedding_figure(emb, recs[-1].round).to_dict()  # a run without attackers: no ring, no entry
    assert F.ATTACKER_NAME not in [t.get("name") for t in plain["data"]]
    heat = F.assignment_heatmap(recs, attackers=bad).to_dict()
    marks = [t for t in heat["data"] if t.get("name") == F.ATTACKER_NAME]
    assert len(marks) == 1 and sorted(marks[0]["customdata"]) == sorted(bad)
    from tests.lesson_claims import values

    rows = values(heat["data"][0]["customdata"])[:, 0].astype(int).tolist()  # client id per heatmap row
    assert sorted(rows[int(y)] for y in marks[0]["y"]) == sorted(bad)
