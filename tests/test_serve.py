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


LANDING_FIRST_RUN = r"""
import os, sys, tempfile
os.environ["CFL_RUNS_DIR"] = tempfile.mkdtemp()
from cfl_ui import serve
serve.preload()
from streamlit.testing.v1 import AppTest
before = set(sys.modules)
at = AppTest.from_file(str(serve.APP), default_timeout=120)
at.run()
assert not at.exception, at.exception
new = sorted(m for m in set(sys.modules) - before if m.split(".")[0] in ("cfl_core", "cfl_ui", "PIL", "sklearn"))
print("NEW", ",".join(new))
"""


def test_the_landing_pages_first_run_finds_every_module_it_needs_already_loaded():
    """What the Playground's first run imported itself (the page modules, PIL for the preview, scikit-learn's data
    sets: about a quarter of a second of the server's interpreter lock) is loaded before the server listens."""
    import subprocess

    done = subprocess.run([sys.executable, "-c", LANDING_FIRST_RUN], capture_output=True, text=True, timeout=300,
                          cwd=Path(serve.APP).parent)
    assert done.returncode == 0, done.stderr[-3000:]
    line = [ln for ln in done.stdout.splitlines() if ln.startswith("NEW ")][-1]
    assert line == "NEW ", f"imported by the first page run, not by serve.preload: {line[4:]}"


def test_preload_loads_the_default_presets_data_set(monkeypatch):
    from cfl_core.data import registry

    loaded = []
    real = registry.load_dataset
    monkeypatch.setattr(registry, "load_dataset", lambda name, **kw: loaded.append(name) or real(name, **kw))
    import cfl_core.data as data

    monkeypatch.setattr(data, "load_dataset", registry.load_dataset)
    serve.preload()
    from cfl_ui.form.controls import default_config

    assert loaded == [default_config()["dataset"]]


def test_a_default_data_set_that_cannot_load_does_not_stop_the_server(monkeypatch, capsys):
    import cfl_core.data as data

    def broken(name, **kw):
        raise OSError(f"{name}: no such file")

    monkeypatch.setattr(data, "load_dataset", broken)
    serve.preload()  # returns: the server goes on to start, the page shows the error as it always has
    from cfl_ui.form.controls import default_config

    name = default_config()["dataset"]
    assert f"the default data set was not preloaded (OSError: {name}: no such file)" in capsys.readouterr().out
