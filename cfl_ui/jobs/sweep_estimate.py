"""How long a sweep the server drives will take, from runs measured on this machine, with the basis shown.

The FLOP model (cfl_ui.jobs.estimate) counts the work of one run; what a user waits for is that work on this
machine now, spread over the executor's parallel runs, plus what the executor costs to start. So:

- per run: one short run of each (algorithm, init mode) of the sweep, trained here for a few rounds with
  one torch thread (as a sweep worker runs), gives the CPU seconds (this thread's own, so other work on
  the machine does not count) to build the models and per round; a run of R rounds costs build + R x round.
  Its data set-up is timed once and counted once per seed and worker. Measured once per setting (cached),
  in about a second on the bundled data; when the FLOP model says that would take long, the FLOP model is
  used instead and said so.
- start-up: nothing when the server's pool is warm; otherwise each worker's start (the interpreter, torch
  and the engine: CPU seconds measured when the server's workers last started, else an assumed figure said
  as such).
- the machine: that CPU work spread over the executor's parallel runs, which share the cores with the other
  work running now. The 1-minute load average alone over-counts that competition: it counts every runnable task
  as a whole competitor, but the team's jobs run niced (a nice-10 task weighs 110 against a nice-0 worker's
  1024 in the kernel's scheduler), tasks waiting on the disk count too, and the workers warming up for this
  very sweep are in it (their start is counted already). At load 14-25 on 2 cores it said 0.16-0.25 cores for
  2 workers, and the runs got 0.29-0.35 (estimates of 3 min against 129 s and 90 s, benchmarks/IFCA_PAGE.md;
  215 s against 120 s at load 21-25 later). So the competition is measured: a thread of this process (with the
  workers' niceness: they are its children) kept busy for a moment gets a share s of a core; N = cores/s - 1
  equal competitors leave it that, and `slots` workers beside N get cores x slots / (slots + N) cores (the
  kernel's fair share), at most `slots`.
  N (less this sweep's warming workers, which the probe met) is at most the load average.
  That misjudges a competition that comes and goes (the probe meets the page being drawn; the load average lags a
  minute and counts this sweep's own workers): on a quiet machine at load 2 it gave two workers 1.1 cores where
  they got 1.7 (a 60-run sweep estimated at 26 s took 12.6 s). So where the cores the other processes kept busy
  over the last half minute are known (cpu_sampler), N is that: a process busy half the time, half a rival.
- a pool still warming: what is left of its start-up, not all of it (the page starts the pool when it opens,
  seconds before Run is pressed).
"""
from __future__ import annotations

import json
import os
import threading
import time
from dataclasses import dataclass

from cfl_core.sweep.executors import cpu_count

# Rounds the probe runs: a CLoVE run on digits costs 7, 34, 12, 12, 12, then 4-5 ms a round (its clustering
# settles), so three rounds put a 10-round run at twice its cost (IFCA_PAGE.md, 2026-12-05)
MEASURE_ROUNDS = 10
MEASURE_BUDGET_S = 4.0  # measure only when the FLOP model puts the probe runs under this
# CPU s of a fresh worker importing torch and the engine until the server's first start measures it: 3.7 s on a
# quiet machine (`time python -c "import torch, cfl_core.experiment"`, 2026-12-05), 6.1-6.6 s at load 12 and more
# (a shared core's caches); the quiet figure, since a loaded machine's share is counted by the fair share
ASSUMED_WORKER_START_CPU = 4.0
ASSUMED_RAY_START_S = 10.0
DRIVER_PER_RUN_S = 0.02  # the driver writing a run folder back
# From Run to the first run starting and from the last one's end to the page saying so: on a quiet machine a
# 12-run and a 60-run sweep on a warm pool fit 2.6 s + their CPU work over 1.9 cores (IFCA_PAGE.md, 2026-12-05)
SWEEP_OVERHEAD_S = 2.0

_cache: dict = {}
_lock = threading.Lock()


@dataclass(frozen=True)
class RunCost:
    setup_s: float  # the data set-up (once per seed and worker)
    build_s: float  # the experiment and its initial models
    round_s: float  # a round after the measured ones (the later half of them, averaged)
    measured: bool
    first_s: tuple = ()  # each measured round: a run's first rounds cost more (CLoVE's clustering settles)

    def rounds_seconds(self, rounds: int) -> float:
        """CPU seconds of `rounds` rounds: the measured rounds as measured, the rest at `round_s` each."""
        done = self.first_s[:rounds]
        return sum(done) + max(0, rounds - len(done)) * self.round_s


@dataclass(frozen=True)
class SweepEstimate:
    seconds: float
    basis: str  # how it was computed, in a sentence or two
    idle_seconds: float | None = None  # the same sweep with nothing else running here

    def describe(self) -> str:
        """The estimate at the load measured now; beside it the idle machine's figure when the two differ, since
        the others' load can swing several-fold while a sweep runs (its status line then updates the time left)."""
        from .estimate import _duration

        text = f"about {_duration(self.seconds)}"
        if self.idle_seconds is not None and self.seconds > 1.25 * self.idle_seconds:
            text += (f" at this machine's load just now ({_duration(self.idle_seconds)} if nothing else ran; "
                     "the time left is updated while it runs)")
        return text


def _key(config) -> str:
    data = config.to_dict()
    data.pop("rounds", None)
    data.pop("seed", None)
    return json.dumps(data, sort_keys=True, default=str)


def _model_cost(config) -> RunCost:
    from .estimate import SETUP_S, unit_cost

    per_run = unit_cost(config.replace(rounds=1))[2]
    return RunCost(SETUP_S, 0.0, per_run, False)


def measure(config) -> RunCost:
    """One probe run of `config` (a few rounds, nothing written), timed; cached per setting."""
    key = _key(config)
    with _lock:
        hit = _cache.get(key)
    if hit is not None:
        return hit
    from .estimate import unit_cost

    rounds = min(config.rounds, MEASURE_ROUNDS)
    probe = config.replace(rounds=rounds)
    if unit_cost(probe)[2] > MEASURE_BUDGET_S:
        cost = _model_cost(config)
    else:
        import torch

        from cfl_core.experiment import Experiment, Setup

        before = torch.get_num_threads()
        torch.set_num_threads(1)
        try:
            clock = time.thread_time  # this thread's CPU time: the other sessions' and users' work is not in it
            t0 = clock()
            setup = Setup.build(probe)
            t1 = clock()
            exp = Experiment(probe, out_dir=None, setup=setup)
            t2 = clock()
            steps = []
            for _ in range(rounds):
                s = clock()
                exp.step()
                steps.append(clock() - s)
            exp.close()
        finally:
            torch.set_num_threads(before)
        later = steps[len(steps) // 2:]
        cost = RunCost(t1 - t0, t2 - t1, sum(later) / len(later), True, tuple(steps))
    with _lock:
        if len(_cache) > 64:
            _cache.clear()
        _cache[key] = cost
    return cost


SHARE_PROBE_S = 0.2  # how long the share probe keeps a thread busy
SHARE_TTL_S = 10.0  # a measured share is reused for this long (the page reruns on every change of the form)
_share: list = []  # [(time measured, share)]


def load_now() -> float:
    try:
        return os.getloadavg()[0]
    except OSError:
        return 0.0


def share_now(seconds: float = SHARE_PROBE_S) -> float:
    """The share of one core a busy thread of this process gets now: its CPU time over the wall time of `seconds`
    of hashing (which runs outside the GIL, so the server's other threads do not hold it up). Cached briefly."""
    import hashlib

    with _lock:
        if _share and time.monotonic() - _share[0][0] < SHARE_TTL_S:
            return _share[0][1]
    block = bytes(1 << 20)
    wall0, cpu0 = time.perf_counter(), time.thread_time()
    while time.perf_counter() - wall0 < seconds:
        hashlib.sha256(block).digest()
    share = (time.thread_time() - cpu0) / max(1e-9, time.perf_counter() - wall0)
    share = min(1.0, max(0.01, share))
    with _lock:
        _share[:] = [(time.monotonic(), share)]
    return share


def competitors(cores: int, load: float, share: float | None, own: int = 0) -> float:
    """How many equal (nice-0) busy tasks the executor's runs compete with: what a measured `share` of a core
    implies (cores/share - 1) less this sweep's `own` workers warming up now (the probe competed with them), at
    most the load average. The load average is not reduced by them: it averages the last minute, so workers
    started seconds ago are hardly in it yet (taking them off it too put a cold sweep at 68 s against 94 s
    measured, benchmarks/IFCA_PAGE.md). Without a share: the load average less `own`."""
    if share is None or share <= 0:
        return max(0.0, load - own)
    return max(0.0, min(max(0.0, load), cores / min(1.0, share) - 1.0 - own))


def cores_for(slots: int, cores: int, load: float) -> float:
    """The cores `slots` busy processes get beside `load` equal competitors on `cores` cores (fair share, at most
    slots)."""
    return max(0.05, min(float(slots), float(cores), cores * slots / (slots + max(0.0, load))))


MEASURE = object()  # `others`: read the sampler


def sweep_estimate(configs: list, *, executor: str, slots: int, start_cpu: float = 0.0, start_wall: float = 0.0,
                   start_known: bool = True, load: float | None = None, share: float | None = None,
                   warming: int = 0, warmed_s: float = 0.0, others=MEASURE,
                   costs: dict | None = None) -> SweepEstimate:
    """The estimate of running `configs` as a sweep on `slots` parallel runs of `executor` (see the module).

    start_cpu: CPU seconds each of the slots needs to start (a cold local pool); start_wall: seconds to start the
    executor that do not depend on this machine (Ray's); load, share: the load average and a thread's share of a
    core (measured now when None); warming: this sweep's workers starting now (in the load, not competitors);
    costs: {(algorithm, init): RunCost} instead of measuring them."""
    costs = dict(costs or {})
    for c in configs:
        k = (c.algorithm, c.init)
        if k not in costs:
            costs[k] = measure(c)
    per_seed: dict = {}
    work = 0.0
    for c in configs:
        cost = costs[(c.algorithm, c.init)]
        work += cost.build_s + cost.rounds_seconds(c.rounds) + DRIVER_PER_RUN_S
        per_seed[c.seed] = per_seed.get(c.seed, 0) + 1
    slots = max(1, min(slots, len(configs)))
    setups = sum(min(slots, n) for n in per_seed.values())
    setup_s = max(cost.setup_s for cost in costs.values())
    work += setups * setup_s
    cores = cpu_count()
    load = load_now() if load is None else load
    remote = executor == "ray" and slots > cores  # a cluster: its CPUs are not this machine's
    if not remote and share is None:
        share = share_now()
    if others is MEASURE:
        from .cpu_sampler import others_busy

        others = None if remote else others_busy()
    rivals = competitors(cores, load, share, own=warming) if others is None else float(others)
    parallel = float(slots) if remote else cores_for(slots, cores, rivals)
    start = max(0.0, start_cpu - warmed_s * parallel / slots) * slots if warming else start_cpu * slots
    seconds = SWEEP_OVERHEAD_S + start_wall + (start + work) / parallel
    idle = SWEEP_OVERHEAD_S + start_wall + (start + work) / (float(slots) if remote else cores_for(slots, cores, 0.0))
    measured = all(c.measured for c in costs.values())
    rounds = max(1, configs[0].rounds)
    per_round = ", ".join(f"{a} · {m} {1000 * c.rounds_seconds(rounds) / rounds:.0f} ms/round + {1000 * c.build_s:.0f} ms to build"
                          for (a, m), c in costs.items())
    basis = (f"{'CPU time measured here just now' if measured else 'From the FLOP model (too long to measure)'}: "
             f"{per_round}; data set-up {1000 * setup_s:.0f} ms (x{setups}, per seed and worker). "
             f"{len(configs)} runs = {work:.1f} CPU s")
    if start_cpu:
        basis += (f" + {start:.0f} CPU s to start {slots} workers"
                  + (f" (of {start_cpu * slots:.0f}: they have been starting for {warmed_s:.0f} s)"
                     if warming and warmed_s else "")
                  + ("" if start_known else " (assumed: not measured on this server yet)"))
    elif executor == "local":
        basis += " (the workers are started already)"
    basis += (f", over {parallel:.1f} cores ({slots} {executor} slots" +
              ("" if remote else f" sharing {cores} cores with {rivals:.1f} busy tasks: " + (
                  f"the cores the other processes kept busy over the last half minute (load average {load:.1f})"
                  if others is not None else
                  f"a thread here got {100 * share:.0f}% of a core just now, load average {load:.1f}")) + ")")
    if start_wall:
        basis += f", plus about {start_wall:.0f} s to start Ray (assumed)"
    return SweepEstimate(seconds, basis + ".", idle_seconds=idle)
