"""cfl_ui.serve: `make run`'s launcher loads the libraries, then hands over to `streamlit run app.py`."""
import gc
import sys
import tomllib
from pathlib import Path

from cfl_ui import serve


def test_launcher_preloads_the_core_and_runs_the_app_with_the_given_flags(monkeypatch):
    seen = {}

    def fake_streamlit_main():
        seen["argv"] = list(sys.argv)
        seen["loaded"] = {"torch", "sklearn", "cfl_core.experiment", "plotly"} <= set(sys.modules)
        seen["frozen"] = gc.get_freeze_count()
        return 0

    from streamlit.web import cli

    monkeypatch.setattr(cli, "main", fake_streamlit_main)
    monkeypatch.setattr(sys, "argv", ["serve"])
    try:
        assert serve.main(["--server.port", "8600"]) == 0
    finally:
        gc.unfreeze()  # this test process goes on collecting as before
    assert seen["argv"] == ["streamlit", "run", str(serve.APP), "--server.port", "8600"]
    assert serve.APP.name == "app.py" and serve.APP.is_file()
    assert seen["loaded"]
    # the libraries' objects are out of the collector's sight before the server starts (hundreds of thousands)
    assert seen["frozen"] > 100_000


def test_the_server_runs_no_full_collection_after_every_script_run():
    """Streamlit's runner.postScriptGC (on by default) held the interpreter lock 135+ ms per page or fragment run
    here; the project's config turns it off for `make run` and `streamlit run app.py` alike."""
    config = tomllib.loads((Path(serve.APP).parent / ".streamlit" / "config.toml").read_text())
    assert config["runner"]["postScriptGC"] is False
