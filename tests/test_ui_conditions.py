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
