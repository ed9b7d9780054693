"""cfl_ui.serve: `make run`'s launcher loads the libraries, then hands over to `streamlit run app.py`."""
import sys

from cfl_ui import serve


def test_launcher_preloads_the_core_and_runs_the_app_with_the_given_flags(monkeypatch):
    seen = {}

    def fake_streamlit_main():
        seen["argv"] = list(sys.argv)
        seen["loaded"] = {"torch", "sklearn", "cfl_core.experiment", "plotly"} <= set(sys.modules)
        return 0

    from streamlit.web import cli

    monkeypatch.setattr(cli, "main", fake_streamlit_main)
    monkeypatch.setattr(sys, "argv", ["serve"])
    assert serve.main(["--server.port", "8600"]) == 0
    assert seen["argv"] == ["streamlit", "run", str(serve.APP), "--server.port", "8600"]
    assert serve.APP.name == "app.py" and serve.APP.is_file()
    assert seen["loaded"]
