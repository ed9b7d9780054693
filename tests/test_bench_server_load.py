"""The load benchmark's remote watcher (benchmarks/server_load.py --watchers remote) against a real Streamlit server.

A remote watcher stands for a browser on another machine: it must load the server as a frontend does (the page's
run, then each fragment's rerun at the interval the server asks for, with the hashes of the messages it holds), or
the benchmark's rows would measure a lighter server than a class's. Nothing here is timed.
"""
from __future__ import annotations

import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from tools import browser as B

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from benchmarks import server_load  # noqa: E402

# A fragment rerun every 0.5 s that draws one element too large to resend (over Streamlit's 10 kB cacheable size,
# the same at every run) and one that changes; the page reads its query string as the dashboard's pages do.
APP = '''
import time
import streamlit as st

st.write("query", st.query_params.get("run", "none"))

@st.fragment(run_every=0.5)
def live():
    st.code("x" * 20000)
    st.write(time.time())

live()
'''


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    folder = tmp_path_factory.mktemp("remote-watcher")
    (folder / "app.py").write_text(APP)
    port = B.free_port()
    proc = subprocess.Popen([sys.executable, "-m", "streamlit", "run", str(folder / "app.py"), "--server.headless",
                             "true", "--server.port", str(port), "--server.address", "127.0.0.1",
                             "--browser.gatherUsageStats", "false"], cwd=folder,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}"
    deadline = time.time() + 120
    while time.time() < deadline and server_load.health(url) == float("inf"):
        assert proc.poll() is None, "the test app's server exited"
        time.sleep(0.3)
    yield url
    proc.terminate()
    proc.wait(20)


def _watch(url: str, query: str, seconds: float) -> dict:
    stop, stats = threading.Event(), {"messages": 0, "bytes": 0, "largest": 0, "fragment_reruns": 0}
    watcher = threading.Thread(target=server_load._remote_session, args=(url, query, stop, stats))
    watcher.start()
    time.sleep(seconds)
    stop.set()
    watcher.join(30)
    return stats


def test_a_remote_watcher_reruns_the_fragment_at_the_servers_interval_and_gets_references_for_what_it_holds(server):
    stats = _watch(server, "run=abc", 4.0)
    assert "error" not in stats, stats.get("error")
    # 0.5 s asked for, over ~4 s after the first run: about 7 reruns (a frontend's setInterval, not a busy loop)
    assert 4 <= stats["fragment_reruns"] <= 9, stats
    # the unchanged 20 kB block came once in full, then as a reference at (nearly) every rerun
    assert stats["references"] >= stats["fragment_reruns"] - 2, stats
    assert 20_000 <= stats["largest"] < 40_000, stats
    assert stats["bytes"] < 20_000 * 3, stats  # not resent in full at every rerun



@pytest.mark.parametrize("args, named", [
    (["--rounds", "0"], "--rounds 0"),
    (["--rounds", "100001"], "--rounds 100001"),
    (["--sessions", "3", "--jobs", "0"], "--sessions 3 with --jobs 0"),
    (["--seconds", "0"], "--seconds"),
])
def test_settings_that_cannot_describe_a_watched_job_are_refused_with_one_line_naming_them(args, named):
    out = subprocess.run([sys.executable, str(REPO / "benchmarks" / "server_load.py"), *args],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 2 and named in out.stderr and "Traceback" not in out.stderr
    assert out.stderr.strip().splitlines()[-1].startswith("server_load.py: error:")
