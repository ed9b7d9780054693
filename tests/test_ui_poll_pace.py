"""The live views' poll interval, shared by every session of the server (cfl_ui.jobs.poll_pace): a second while few
watch, longer when the sum of their polls' cost would take more than its share of a core (issue 15, item 6: with
thirty sessions polling every second a newcomer's page took 25 s; the figures are in benchmarks/SERVER_LOAD.md,
measured by benchmarks/server_load.py, never timed here)."""
from __future__ import annotations

import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from tools import browser as B
from cfl_ui.jobs import poll_pace as P

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from benchmarks import server_load  # noqa: E402


class Clock:
    def __init__(self):
        self.now = 1000.0

    def __call__(self):
        return self.now


def pace(share=0.25):
    clock = Clock()
    return P.PollPace(share, clock=clock), clock


def test_a_few_cheap_watchers_keep_the_one_second_poll():
    p, _ = pace()
    assert p.every() == P.POLL_SECONDS  # nobody yet
    for s in range(5):
        p.record(f"s{s}", 0.02)  # five sessions at 20 ms a poll: 0.1 s of polls a second, under a quarter core
    assert p.every() == 1.0 and p.watching() == 5


@pytest.mark.parametrize("sessions, cost, expected", [
    (15, 0.02, 1.5),    # 0.30 s a second at one poll each -> 1.2 s -> the 1.5-s step
    (30, 0.02, 3.0),    # 0.60 -> 2.4 s -> 3 s
    (30, 0.005, 1.0),   # cheaper polls: thirty fit in a second
    (60, 0.02, 6.0),    # 1.2 -> 4.8 s -> 6 s
    (500, 0.02, 10.0),  # never slower than the last step
])
def test_the_interval_is_the_smallest_step_whose_polls_fit_the_share(sessions, cost, expected):
    p, _ = pace()
    for s in range(sessions):
        p.record(f"s{s}", cost)
    assert p.every() == expected
    assert sessions * cost / p.every() <= p.share + 1e-9 or p.every() == P.STEPS[-1]


def test_sessions_that_stopped_polling_are_forgotten_and_the_pace_comes_back():
    p, clock = pace()
    for s in range(40):
        p.record(f"s{s}", 0.02)
    assert p.every() > 1.0
    clock.now += P.FORGET - 1
    p.record("s0", 0.02)  # one session still watching
    assert p.watching() == 40 and p.every() > 1.0
    clock.now += 2  # the other 39 closed their tabs FORGET seconds ago
    assert p.watching() == 1 and p.every() == 1.0
    p.forget("s0")  # its job ended: it stopped polling at once
    assert p.watching() == 0


def test_one_expensive_poll_moves_a_sessions_cost_only_part_of_the_way():
    p, _ = pace()
    p.record("a", 0.02)
    p.record("a", 0.06)  # a poll slowed by a busy moment
    assert p._current()[0] == pytest.approx(0.02 + P.SMOOTHING * 0.04)
    p.record("c", 2.5)  # a session's first poll on a cold server counts as MAX_POLL_COST at most
    assert max(p._current()) == P.MAX_POLL_COST
    assert p.every() == 1.0  # one session alone never slows anyone
    p.record("b", -5)  # a clock that went backwards counts as nothing, not as a credit
    assert min(p._current()) == 0.0


@pytest.mark.parametrize("text, expected", [
    ("0.5", 0.5), ("4", 4.0), ("", P.SHARE), ("abc", P.SHARE), ("0", P.SHARE), ("-1", P.SHARE), ("5", P.SHARE),
    ("nan", P.SHARE), ("inf", P.SHARE), ("1e-3", 0.001),
])
def test_the_share_from_the_environment_is_a_number_in_range_or_ignored(text, expected):
    assert P.share_from_env({P.SHARE_ENV: text}) == expected


# -- the browser is told -----------------------------------------------------------------------------------------
def _watch(runs: Path, share: str, seconds: float) -> dict:
    """A remote watcher (the benchmark's, which follows `auto_rerun` as the frontend does) on a CLI run that is
    training in the server's runs folder, with the server's poll share set to `share`."""
    with B.streamlit_server(runs, env={P.SHARE_ENV: share}) as url:
        stop = threading.Event()
        stats = {"messages": 0, "bytes": 0, "largest": 0, "fragment_reruns": 0}
        watcher = threading.Thread(target=server_load._remote_session, args=(url, "run=live", stop, stats))
        watcher.start()
        time.sleep(seconds)
        stop.set()
        watcher.join(30)
    return stats


def test_a_server_whose_polls_exceed_their_share_tells_the_watching_browser_to_poll_less_often(tmp_path):
    runs = tmp_path / "runs"
    runs.mkdir()
    job = subprocess.Popen([sys.executable, "-m", "cfl_core", "run", "--clusters", "2", "--clients-per-cluster", "2",
                            "--models", "2", "--rounds", "100000", "--out", str(runs / "live")], cwd=REPO,
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.time() + 120
        while not (runs / "live" / "rounds.jsonl").exists():
            assert job.poll() is None and time.time() < deadline, "the CLI run did not start"
            time.sleep(0.2)
        # a share no poll fits in: the first poll's cost alone asks for the slowest step
        squeezed = _watch(runs, "0.000001", 6.0)
        # the default share with one watcher: once a second, nothing else sent
        usual = _watch(runs, str(P.SHARE), 6.0)
    finally:
        job.kill()
        job.wait(20)
    assert "error" not in squeezed and "error" not in usual, (squeezed, usual)
    assert squeezed["intervals"] == [P.POLL_SECONDS, P.STEPS[-1]], squeezed
    assert squeezed["fragment_reruns"] == 0, squeezed  # the 10-s timer replaced the 1-s one before it fired
    assert usual["intervals"] == [P.POLL_SECONDS], usual
    assert usual["fragment_reruns"] >= 3, usual


# -- the page says so ----------------------------------------------------------------------------------------------
def _crowded_app(others: int):
    """The Playground's live view of a running job while `others` other sessions watch (20 ms a poll each)."""
    from cfl_ui.views import live_view as LV
    from cfl_ui.form import session as S
    from cfl_ui.jobs.poll_pace import PACE
    from cfl_ui.jobs.snapshots import RUNNING, UnitSnapshot
    from tests.test_ui_server_load import _job, record

    real = S.snapshot, LV.frame_seconds
    LV.frame_seconds = lambda unit: LV.POLL_SECONDS  # figures built quickly (a cold first build can be slow)
    for s in range(others):
        PACE.record(f"crowd-{s}", 0.02)
    try:
        u = UnitSnapshot(ref="job-crowded", name="", label="x", tags={}, config={"algorithm": "clove"},
                         status=RUNNING, records=tuple(record(r) for r in range(3)), total_rounds=9, summary=None,
                         meta={}, error=None, traceback=None, folder=None)
        snap = _job("job-crowded", RUNNING, (u,))
        S.snapshot = lambda ref: snap
        LV.live_view("job-crowded", None, "crowd", initial_status=RUNNING)
    finally:
        S.snapshot, LV.frame_seconds = real
        for s in range(others):
            PACE.forget(f"crowd-{s}")


@pytest.fixture
def empty_server():
    """The server-wide pace with no session in it, before and after (AppTest runs pages in this process)."""
    from cfl_ui.jobs.poll_pace import PACE

    PACE._sessions.clear()
    yield PACE
    PACE._sessions.clear()


@pytest.mark.parametrize("others, says", [(0, None), (40, "about every 4 s: 40 pages are watching")])
def test_a_crowded_servers_live_view_says_how_often_its_charts_are_redrawn_and_why(empty_server, others, says):
    from streamlit.testing.v1 import AppTest

    at = AppTest.from_function(_crowded_app, args=(others,), default_timeout=60).run()
    assert not at.exception, [e.value for e in at.exception]
    captions = " ".join(c.value for c in at.caption)
    if says:
        assert says in captions, captions
    else:
        assert "pages are watching" not in captions and "redrawn about every" not in captions, captions
    assert empty_server.watching() == 1  # the page's own poll was counted


def test_only_the_figures_a_thread_builds_count_as_shared_work_and_a_build_inside_a_build_counts_once():
    import uuid

    from cfl_ui.charts import draw as charts

    def spin(seconds):
        end = time.thread_time() + seconds
        while time.thread_time() < end:
            pass
        return seconds

    tag = uuid.uuid4().hex
    before = charts.built_seconds()
    charts.cached(("pace-test", tag, "outer"), lambda: spin(0.05) + charts.cached(("pace-test", tag, "inner"),
                                                                                  lambda: spin(0.05)))
    counted = charts.built_seconds() - before
    assert 0.1 <= counted < 0.2  # both builds, the inner one not twice
    spin(0.05)  # drawing, not building
    charts.cached(("pace-test", tag, "outer"), lambda: spin(1.0))  # cached: nothing built
    assert charts.built_seconds() - before == counted
    other = []
    threading.Thread(target=lambda: other.append(charts.built_seconds())).start()
    time.sleep(0.2)
    assert other == [0.0]  # another thread (session) has built nothing
