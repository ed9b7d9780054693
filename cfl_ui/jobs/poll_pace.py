"""How often the live views poll, for every session of the server: once a second, slower when many watch.

Each watching session reruns its live fragment at the interval the server gives it (Streamlit's `auto_rerun`
message; the frontend replaces its timer when a new interval comes). A poll costs the server about 20 ms of
its interpreter (drawing every chart element of the view, about 45 messages), so one poll a second from 30
sessions took 0.65 of a core in the page threads alone, the server's interpreter lock was never free, and a
newcomer's page took 25 s or timed out (benchmarks/SERVER_LOAD.md, "A class watching"). The pace keeps what all
sessions' polls cost together under SHARE of a core: the interval is the smallest of STEPS at least the sum of
every watching session's cost per poll divided by SHARE, never under POLL_SECONDS. Five sessions keep their
second; thirty poll about every two or three seconds, and the page says so.

Costs are each session's CPU time per poll (the page thread's own, so that time spent waiting for the
interpreter lock does not count twice), smoothed and capped, less the time it spent building figures for every session (a
job's new frame is built once, whatever the number of sessions, and a slow build already spaces the frames out:
cfl_ui.charts.draw.built_seconds, cfl_ui.views.live_view.built); a session that has not polled for FORGET seconds is
no longer counted (its tab was
closed).
"""
from __future__ import annotations

import os
import threading
import time

POLL_SECONDS = 1.0  # a live view's interval when few sessions watch
STEPS = (1.0, 1.5, 2.0, 3.0, 4.0, 6.0, 8.0, 10.0)  # the intervals handed out (a new one is a message to the browser)
SHARE = 0.25  # of one core: what all sessions' polls may cost together
SHARE_ENV = "CFL_UI_POLL_SHARE"  # an operator's (or a test's) share instead, a number in (0, 4]
SMOOTHING = 0.3  # weight of the newest poll in a session's cost
# a poll counts at most this much: a session's first poll (cold caches) or one slowed by a busy machine is not what
# its next polls will cost, and one such poll must not hold every session at a slow pace for the next minute
MAX_POLL_COST = 0.1
FORGET = 3 * STEPS[-1]  # seconds without a poll after which a session is not counted


def share_from_env(environ=os.environ) -> float:
    """SHARE, or the environment's CFL_UI_POLL_SHARE when it is a number in (0, 4] (anything else is ignored)."""
    text = environ.get(SHARE_ENV, "")
    try:
        value = float(text)
    except ValueError:
        return SHARE
    return value if 0 < value <= 4 else SHARE


class PollPace:
    """The server-wide poll interval, from what each watching session's polls cost."""

    def __init__(self, share: float = SHARE, *, base: float = POLL_SECONDS, steps=STEPS, forget: float = FORGET,
                 clock=time.monotonic):
        self.share, self.base, self.steps, self.forget_after, self._clock = share, base, tuple(steps), forget, clock
        self._sessions: dict[str, tuple[float, float]] = {}  # session -> (smoothed CPU seconds a poll, last poll)
        self._lock = threading.Lock()

    def record(self, session: str, seconds: float) -> None:
        """A poll of `session` cost `seconds` of CPU."""
        seconds = min(MAX_POLL_COST, max(0.0, float(seconds)))
        now = self._clock()
        with self._lock:
            old = self._sessions.get(session)
            cost = seconds if old is None else old[0] + SMOOTHING * (seconds - old[0])
            self._sessions[session] = (cost, now)

    def forget(self, session: str) -> None:
        with self._lock:
            self._sessions.pop(session, None)

    def _current(self) -> list[float]:
        now = self._clock()
        with self._lock:
            for s in [s for s, (_, last) in self._sessions.items() if now - last > self.forget_after]:
                del self._sessions[s]
            return [cost for cost, _ in self._sessions.values()]

    def watching(self) -> int:
        """Sessions that polled within the last FORGET seconds."""
        return len(self._current())

    def every(self) -> float:
        """The interval every live view polls at now: the smallest step whose polls fit the share."""
        need = max(self.base, sum(self._current()) / self.share)
        return next((s for s in self.steps if s >= need - 1e-9), self.steps[-1])


PACE = PollPace(share_from_env())
