"""The same 40-run sweep (digits, 20 rounds) serially in one process, on the local pool and on a local Ray.

    python benchmarks/sweep_bench.py [--out benchmarks/SWEEPS.md] [--json benchmarks/sweeps.json] [--workers 2]

Every mode starts from an empty sweep folder, so every point runs. Each figure is the wall time of
`run_sweep` (start-up of the pool or of Ray's workers included; `ray.init` is timed on its own),
with the load that other processes put on the machine measured (/proc/stat) over 5 s just before
and just after the mode, while nothing of this benchmark runs. Ray's overhead per run is measured
two ways: a task that does nothing but return a real run's result (what a run costs Ray besides the
run), and the sweep's wall time against the pool's. A benchmark, not a test: it asserts only that
every mode gave the same records.
"""
from __future__ import annotations

import argparse
import json
import platform
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from cfl_core.bench.measure import OtherLoad, load_average  # noqa: E402
from cfl_core.sweep import SweepSpec, run_sweep  # noqa: E402
from cfl_core.sweep.executors import cpu_count  # noqa: E402

SPEC = {"name": "bench-40", "description": "4 algorithms x 10 seeds, digits, 20 rounds",
        "base": {"dataset": "digits", "rounds": 20},
        "grid": {"algorithm": ["clove", "ifca", "fedavg", "oracle"], "seed": list(range(10))}}
QUIET_SECONDS = 5.0
LOADED = 0.25  # other processes' CPUs above which a figure is marked preliminary


def other_load(seconds: float = QUIET_SECONDS) -> float | None:
    probe = OtherLoad()
    time.sleep(seconds)
    return probe.cpus()


def records_of(folder: Path, points) -> dict:
    out = {}
    for p in points:
        lines = (folder / p.folder / "rounds.jsonl").read_text().splitlines()
        out[p.key] = [{k: v for k, v in json.loads(line).items() if k != "seconds"} for line in lines]
    return out


def run_mode(name: str, spec: SweepSpec, work: Path, **kwargs) -> dict:
    before = other_load()
    started = time.perf_counter()
    outcome = run_sweep(spec, work / name, command=f"sweep_bench {name}", **kwargs)
    wall = time.perf_counter() - started
    after = other_load()
    assert not outcome.failed, f"{name}: {outcome.failed} runs failed"
    markers = [json.loads((work / name / p.folder / "sweep_point.json").read_text()) for p in outcome.expansion.points]
    per_run = [m["wall_seconds"] for m in markers]
    loads = [v for v in (before, after) if v is not None]
    return {"mode": name, "wall_s": wall, "runs": len(per_run), "slots": outcome.progress.slots,
            "run_mean_s": statistics.mean(per_run), "run_sum_s": sum(per_run),
            "other_load_before": before, "other_load_after": after,
            "other_load": max(loads) if loads else None, "loadavg_after": load_average(),
            "outcome": outcome}


def ray_overheads(payload: dict, n: int, cpus: int) -> dict:
    """Per task: an empty task, and a task returning a real run's result (one at a time, and n at once)."""
    import ray

    @ray.remote(num_cpus=1)
    def nothing():
        return None

    @ray.remote(num_cpus=1)
    def give_back(result):
        return result

    ray.get([nothing.remote() for _ in range(cpus)])  # workers up
    ref = ray.put(payload)
    ray.get([give_back.remote(ref) for _ in range(cpus)])
    timings = {}
    for label, call in (("empty", lambda: nothing.remote()), ("result", lambda: give_back.remote(payload))):
        started = time.perf_counter()
        for _ in range(n):
            ray.get(call())
        timings[f"{label}_one_at_a_time_ms"] = (time.perf_counter() - started) / n * 1e3
        started = time.perf_counter()
        ray.get([call() for _ in range(n)])
        timings[f"{label}_all_at_once_ms"] = (time.perf_counter() - started) / n * 1e3
    return timings


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", default=str(ROOT / "benchmarks" / "SWEEPS.md"))
    parser.add_argument("--json", default=str(ROOT / "benchmarks" / "sweeps.json"))
    parser.add_argument("--workers", type=int, default=cpu_count(), help="pool workers and Ray CPUs (default: cores)")
    args = parser.parse_args(argv)
    import ray

    spec = SweepSpec.from_dict(SPEC)
    work = Path(tempfile.mkdtemp(prefix="sweep-bench-"))
    try:
        serial = run_mode("serial", spec, work, executor="serial")
        local = run_mode("local", spec, work, executor="local", workers=args.workers)
        before_init = other_load()
        started = time.perf_counter()
        ray.init(num_cpus=args.workers, include_dashboard=False, logging_level="WARNING")
        init_s = time.perf_counter() - started
        on_ray = run_mode("ray", spec, work, executor="ray")
        on_ray["ray_init_s"], on_ray["other_load_before"] = init_s, before_init
        on_ray["other_load"] = max(v for v in (before_init, on_ray["other_load_after"]) if v is not None)
        points = serial["outcome"].expansion.points
        same = records_of(work / "serial", points) == records_of(work / "local", points) == records_of(work / "ray", points)
        assert same, "the modes gave different records"
        result_bytes = [sum((work / "serial" / p.folder / f).stat().st_size
                            for f in ("rounds.jsonl", "partition.json", "meta.json", "summary.json", "config.json"))
                        for p in points]
        task_bytes = [len(json.dumps({"key": p.key, "config": p.config.to_dict(), "threads": 1})) for p in points]
        from cfl_core.sweep.task import run_point

        payload = run_point({"key": points[0].key, "config": points[0].config.to_dict(), "threads": 1})
        overheads = ray_overheads(payload, n=40, cpus=args.workers)
        ray.shutdown()
    finally:
        shutil.rmtree(work, ignore_errors=True)

    modes = [serial, local, on_ray]
    for m in modes:
        m.pop("outcome")
    facts = {"machine": f"{platform.processor() or platform.machine()}, {cpu_count()} cores", "python": platform.python_version(),
             "workers": args.workers, "date": time.strftime("%Y-%m-%d %H:%M"), "identical_records": same,
             "task_bytes_mean": statistics.mean(task_bytes), "result_bytes_mean": statistics.mean(result_bytes),
             "ray_overheads": overheads}
    Path(args.json).write_text(json.dumps({"facts": facts, "modes": modes}, indent=1), encoding="utf-8")
    table = report(facts, modes)
    print(table)
    if args.out:
        write_report(Path(args.out), table)
    return 0


def _load(v):
    return "n/a" if v is None else f"{v:.2f}"


def report(facts: dict, modes: list[dict]) -> str:
    serial = modes[0]
    loaded = any((m["other_load"] or 0) > LOADED for m in modes)
    lines = [f"Measured {facts['date']} on {facts['machine']} (Python {facts['python']}), 40 runs, "
             f"{facts['workers']} workers / Ray CPUs, one torch thread per run. Records identical in all three "
             f"modes: {'yes' if facts['identical_records'] else 'NO'}."
             + (" **Preliminary: other processes loaded the machine** (load column)." if loaded else ""), "",
             "| mode | wall (s) | runs at once | mean run (s) | speed-up vs serial | other load (CPUs, before / after) |",
             "|---|---|---|---|---|---|"]
    for m in modes:
        wall = f"{m['wall_s']:.1f}" + (f" (+ ray.init {m['ray_init_s']:.1f})" if "ray_init_s" in m else "")
        lines.append(f"| {m['mode']} | {wall} | {m['slots']} | {m['run_mean_s']:.2f} | "
                     f"{serial['wall_s'] / m['wall_s']:.2f}x | {_load(m['other_load_before'])} / "
                     f"{_load(m['other_load_after'])} |")
    o = facts["ray_overheads"]
    local, on_ray = modes[1], modes[2]
    lines += ["", f"Ray's overhead per task: an empty task {o['empty_one_at_a_time_ms']:.1f} ms one at a time "
                  f"({o['empty_all_at_once_ms']:.1f} ms each with 40 in flight); a task returning a real run's "
                  f"result ({facts['result_bytes_mean'] / 1e3:.0f} kB) {o['result_one_at_a_time_ms']:.1f} ms "
                  f"({o['result_all_at_once_ms']:.1f} ms). Against the local pool the whole Ray sweep took "
                  f"{(on_ray['wall_s'] - local['wall_s']) / on_ray['runs']:+.2f} s per run "
                  f"({on_ray['wall_s']:.1f} s vs {local['wall_s']:.1f} s, ray.init not counted).",
              f"A task sends {facts['task_bytes_mean']:.0f} bytes (the point's key and config as JSON) and returns its "
              f"records, partition, meta and summary ({facts['result_bytes_mean'] / 1e3:.0f} kB on average here)."]
    return "\n".join(lines) + "\n"


def write_report(path: Path, table: str) -> None:
    """Replace the measured block of SWEEPS.md (between its markers), keeping the prose around it."""
    begin, end = "<!-- measured: begin -->", "<!-- measured: end -->"
    text = path.read_text(encoding="utf-8") if path.exists() else f"# Sweeps\n\n{begin}\n{end}\n"
    head, rest = text.split(begin, 1)
    _, tail = rest.split(end, 1)
    path.write_text(f"{head}{begin}\n{table}{end}{tail}", encoding="utf-8")


if __name__ == "__main__":
    sys.exit(main())
