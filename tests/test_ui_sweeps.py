"""The Sweeps page through Streamlit's AppTest: a command-line sweep listed with its grid heatmap (values in the
cells), the measures, the CSV; the start form's point count, a refused value, and a sweep started from it."""
from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from cfl_core.sweep import SweepSpec, run_sweep
from cfl_core.sweep.status import sweep_status

APP = str(Path(__file__).resolve().parent.parent / "app.py")
TINY = {"clusters": 2, "clients_per_cluster": 2, "samples_per_client": 20, "rounds": 2}


@pytest.fixture
def runs(tmp_path, monkeypatch):
    root = tmp_path / "runs"
    monkeypatch.setenv("CFL_RUNS_DIR", str(root))
    monkeypatch.setenv("CFL_UI_WARMUP", "0")
    monkeypatch.delenv("CFL_SWEEP_EXECUTOR", raising=False)
    monkeypatch.delenv("CFL_RAY_ADDRESS", raising=False)
    return root


def page() -> AppTest:
    at = AppTest.from_file(APP, default_timeout=120)
    at.run()
    at = at.switch_page("pages/sweeps.py").run()
    assert not at.exception, [e.value for e in at.exception]
    return at


def heatmap(at: AppTest) -> dict:
    [fig] = at.get("plotly_chart")
    return json.loads(fig.proto.spec)["data"][0]


def test_a_command_line_sweep_is_listed_with_its_grid_and_measures(runs):
    spec = SweepSpec.from_dict({"name": "tiny", "base": TINY, "grid": {
        "partition": ["feature-skew", "iid"], "algorithm": ["oracle", "fedavg"], "seed": [0, 1]}})
    run_sweep(spec, runs / "sweeps" / "tiny", executor="serial", command="python -m cfl_core sweep tiny.json")
    at = page()
    assert any("tiny" in m.value and "finished, 8 of 8 finished" in m.value for m in at.markdown)
    assert at.selectbox(key="sweeps.row").options == ["partition", "algorithm"]  # the swept fields but the seed
    data = heatmap(at)
    assert data["y"] == ["feature-skew", "iid"] and data["x"] == ["oracle", "fedavg"]
    assert data["z"][0][0] == 1.0 and data["z"][0][1] == 0.0  # the oracle's ARI is 1, FedAvg's one model 0
    assert data["text"][0][0] == "1.00 ± 0.00<br>(2/2)"  # the value written in the cell
    at.selectbox(key="sweeps.measure").set_value("success").run()
    assert heatmap(at)["text"][0][0] == "100.0% ± 0.0<br>(2/2)"
    at.selectbox(key="sweeps.measure").set_value("final_accuracy").run()
    accuracy = heatmap(at)["z"]
    assert all(0 < v <= 1 for row in accuracy for v in row)
    at.selectbox(key="sweeps.col").set_value("(none)").run()
    assert heatmap(at)["y"] == ["feature-skew", "iid"] and len(heatmap(at)["x"]) == 1
    [csv] = [d for d in at.get("download_button")]
    assert csv.proto.label == "results.csv"
    assert at.dataframe(key="sweeps.cells") is not None


def test_the_start_form_counts_points_refuses_bad_values_and_starts_a_sweep(runs):
    at = page()
    assert any("No sweeps yet" in i.value for i in at.info)
    at.multiselect(key="sweeps.fields").set_value(["seed", "algorithm", "rounds"]).run()
    at.text_input(key="sweeps.values.seed").set_value("0, 1").run()
    at.text_input(key="sweeps.values.rounds").set_value("2").run()
    at.text_input(key="sweeps.values.algorithm").set_value("oracle, klove").run()
    assert any("grid.algorithm='klove' is not allowed" in e.value for e in at.error)
    assert at.button(key="sweeps.start").disabled
    at.text_input(key="sweeps.values.algorithm").set_value("oracle, fedavg").run()
    assert not at.error and any("**4 points**" in m.value for m in at.markdown)
    at.text_input(key="sweeps.name").set_value("from-page").run()
    at.button(key="sweeps.start").click().run()
    folder = runs / "sweeps" / "from-page"
    deadline = time.monotonic() + 300
    while True:
        status = sweep_status(folder)
        if status is not None and status.state == "finished":
            break
        assert time.monotonic() < deadline, (folder / "driver.log").read_text() if (folder / "driver.log").exists() else ""
        time.sleep(0.5)
    assert status.finished == 4 and status.points == 4
    spec = json.loads((folder / "spec.json").read_text())
    assert spec["grid"] == {"seed": [0, 1], "algorithm": ["oracle", "fedavg"], "rounds": [2]}
    at.run()
    assert not at.exception and any("from-page" in m.value and "4 of 4 finished" in m.value for m in at.markdown)
