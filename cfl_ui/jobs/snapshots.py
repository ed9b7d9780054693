"""What a job looks like from outside: statuses, the unit spec and the immutable snapshots.

Pages read only these (never a Job's internals), so a snapshot can be handed to
the rendering code while the worker thread goes on training.
"""
from __future__ import annotations

import collections
import time
from dataclasses import dataclass, field

# job and unit statuses
QUEUED, RUNNING, PAUSED = "queued", "running", "paused"
FINISHED, STOPPED, FAILED = "finished", "stopped", "failed"
DIVERGED = "diverged"  # training blew up (non-finite or exploding losses): ended, its finished rounds kept
DAMAGED = "damaged"  # read from disk: a file of the run folder cannot be read as it should (the reason is shown)
PENDING = "pending"  # a unit that has not started yet
INTERRUPTED = "interrupted"  # read from disk: no summary, and no process is running it any more
ELSEWHERE = "running elsewhere"  # read from disk: no summary yet, and rounds.jsonl is still growing
LIVE = (QUEUED, RUNNING, PAUSED)
TERMINAL = (FINISHED, STOPPED, FAILED, DIVERGED, INTERRUPTED, DAMAGED)
LOCKSTEP, SEQUENTIAL = "lockstep", "sequential"


@dataclass(frozen=True)
class UnitSpec:
    """One experiment of a job. `name` is its folder inside the job ("" for a single run)."""

    name: str
    config: object  # cfl_core.config.ExperimentConfig
    label: str = ""
    tags: dict = field(default_factory=dict)


@dataclass(frozen=True)
class UnitSnapshot:
    ref: str  # JOB or JOB/UNIT: what the URL carries
    name: str
    label: str
    tags: dict
    config: dict
    status: str
    records: tuple
    total_rounds: int
    summary: dict | None
    meta: dict
    error: str | None
    traceback: str | None
    folder: str | None
    problems: tuple = ()  # what in its folder is damaged (read from disk), one line each

    @property
    def rounds_done(self) -> int:
        return len(self.records)

    @property
    def algorithm(self) -> str:
        return self.config.get("algorithm", "?")

    @property
    def live(self) -> bool:
        return self.status in LIVE or self.status in (PENDING, ELSEWHERE)


@dataclass(frozen=True)
class JobSnapshot:
    id: str
    kind: str
    title: str
    status: str
    schedule: str
    units: tuple
    queue_position: int | None
    error: str | None
    traceback: str | None
    created: float
    started: float | None
    ended: float | None
    version: int
    from_disk: bool = False
    owner: str = ""
    waiting: str | None = None  # a queued job held back by the memory limit: why, with the numbers
    paused: float = 0.0  # seconds spent paused after the start (up to the snapshot)

    @property
    def live(self) -> bool:
        return self.status in LIVE or self.status == ELSEWHERE

    @property
    def rounds_done(self) -> int:
        return sum(u.rounds_done for u in self.units)

    @property
    def rounds_total(self) -> int:
        return sum(u.total_rounds for u in self.units)

    @property
    def progress(self) -> float:
        total = self.rounds_total
        return min(1.0, self.rounds_done / total) if total else 0.0

    @property
    def elapsed(self) -> float:
        """Seconds it has trained: until it ended, or until now while it runs here. A run read from disk without an
        end time (the CLI's) counts the time its records took, never the clock."""
        if self.started is None:
            return 0.0
        if self.ended is None and self.from_disk:
            return sum(r.seconds for u in self.units for r in u.records)
        return max(0.0, (self.ended or time.time()) - self.started - self.paused)

    @property
    def device(self) -> str | None:
        for u in self.units:
            if u.meta.get("device"):
                name = u.meta.get("device_name")
                dev = u.meta["device"]
                return f"{dev} ({name})" if name and name not in (dev, "") else dev
        return None

    def unit(self, name: str | None) -> UnitSnapshot | None:
        if name is None:
            return self.units[0] if len(self.units) == 1 else None
        return next((u for u in self.units if u.name == name), None)

    def unit_counts(self) -> collections.Counter:
        return collections.Counter(u.status for u in self.units)
