"""How the dashboard's server answers while browsers watch running jobs (the figures in SERVER_LOAD.md).

    python benchmarks/server_load.py [--sessions 5] [--jobs 2] [--seconds 60] [--workers process|thread]
                                     [--repo PATH] [--profile FILE] [--json FILE]

Starts the dashboard headless (as `make run` does) on a fresh runs folder, opens
`--jobs` browser sessions (Debian's chromium through Playwright, one browser
context each, so each is its own browser with its own cookie) that each press
Run on a long Playground job, and more sessions that open those jobs by their
link, until `--sessions` sessions watch the running jobs. While they watch it
measures, for `--seconds`:

- the health check: GET /_stcore/health every 0.5 s (latency of each answer);
- a page load: every 8 s a new browser session opens the Playground and the time
  until its Run button is drawn is recorded (navigation to an interactive page);
- the machine: the 1-minute load average, and the CPU taken by processes that
  are not this benchmark's (other work on the machine), from /proc.

`--workers thread` trains in the server's threads (as before worker processes);
`--repo` starts the server from another checkout (e.g. the main branch) to
compare. `--profile FILE` samples the server's threads every 5 ms
(benchmarks/server_sampler.py) and writes where each thread spent its time.
Prints one JSON object with every figure (and writes it to --json).
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
sys.path.insert(0, str(REPO))

from cfl_ui import browser as B  # noqa: E402  (the same chromium and helpers as the browser test)

# A long Playground job: the default preset's data, many rounds (it keeps training while we measure).
JOB_QUERY = "?dataset=digits&partition=feature-skew&clusters=4&clients_per_cluster=5&algorithm=clove&models=4&rounds=2000"


def cpu_ticks() -> dict[int, int]:
    """utime + stime (clock ticks) of every process now."""
    out = {}
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as fh:
                fields = fh.read().rsplit(")", 1)[1].split()
            out[int(pid)] = int(fields[11]) + int(fields[12])
        except (OSError, IndexError, ValueError):
            continue
    return out


def kind_of(pid: int, server: int) -> str:
    """What one of this benchmark's processes is: the server, a training worker, the browser, the rest."""
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as fh:
            cmd = fh.read().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return "gone"
    if pid == server:
        return "server"
    if "chrom" in cmd:
        return "browser"
    if "forkserver" in cmd or "multiprocessing" in cmd:
        return "training workers"
    return "benchmark and Playwright"


def descendants(root: int) -> set[int]:
    """root and every process under it (the server, its workers, chromium, Playwright's driver)."""
    children: dict[int, list[int]] = {}
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as fh:
                ppid = int(fh.read().rsplit(")", 1)[1].split()[1])
            children.setdefault(ppid, []).append(int(pid))
        except (OSError, IndexError, ValueError):
            continue
    seen, todo = set(), [root]
    while todo:
        pid = todo.pop()
        if pid not in seen:
            seen.add(pid)
            todo += children.get(pid, [])
    return seen


def health(url: str) -> float:
    started = time.perf_counter()
    try:
        with urllib.request.urlopen(url + "/_stcore/health", timeout=60) as r:
            r.read()
    except OSError:
        return float("inf")
    return time.perf_counter() - started


def page_load(browser, url: str, timeout: float = 90.0) -> float:
    """Seconds from navigation until a fresh session's Playground has drawn its Run button."""
    context = browser.new_context(viewport={"width": 1400, "height": 1000})
    try:
        page = context.new_page()
        started = time.perf_counter()
        page.goto(url + "/", timeout=timeout * 1000)
        page.get_by_role("button", name="Run", exact=True).first.wait_for(timeout=timeout * 1000)
        return time.perf_counter() - started
    except Exception:
        return float("inf")
    finally:
        context.close()


def summary(values: list[float]) -> dict:
    finite = [v for v in values if v != float("inf")]
    return {"n": len(values), "timed_out": len(values) - len(finite),
            "median": round(statistics.median(finite), 3) if finite else None,
            "p90": round(sorted(finite)[int(0.9 * (len(finite) - 1))], 3) if finite else None,
            "max": round(max(finite), 3) if finite else None}


def start_server(repo: Path, runs: Path, workers: str, profile: str | None, log) -> tuple[subprocess.Popen, str]:
    port = B.free_port()
    env = {**os.environ, "CFL_RUNS_DIR": str(runs), "CFL_UI_WORKERS": workers,
           "PYTHONPATH": os.pathsep.join(filter(None, [str(repo), os.environ.get("PYTHONPATH")]))}
    launcher = ["-m", "cfl_ui.serve"]
    if profile:
        env["CFL_SAMPLER_OUT"] = profile
        launcher = [str(HERE / "server_sampler.py")]
    proc = subprocess.Popen([sys.executable, *launcher, "--server.headless", "true", "--server.port", str(port),
                             "--server.address", "127.0.0.1", "--browser.gatherUsageStats", "false"],
                            cwd=str(repo), env=env, stdout=log, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    deadline = time.time() + 180
    while time.time() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"the server exited ({proc.returncode})")
        if health(url) != float("inf"):
            return proc, url
        time.sleep(0.5)
    raise TimeoutError("the server did not start")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sessions", type=int, default=5, help="browser sessions watching the running jobs")
    ap.add_argument("--jobs", type=int, default=2, help="running jobs (each started by one of the sessions)")
    ap.add_argument("--seconds", type=float, default=60.0, help="how long to measure while they watch")
    ap.add_argument("--workers", choices=["process", "thread"], default="process")
    ap.add_argument("--repo", type=Path, default=REPO, help="the checkout whose dashboard is measured")
    ap.add_argument("--profile", help="write the server's thread samples here (JSON)")
    ap.add_argument("--json", help="write the results here too")
    args = ap.parse_args()
    from playwright.sync_api import sync_playwright

    runs = Path(tempfile.mkdtemp(prefix="cfl-load-")) / "runs"
    log = open(runs.parent / "server.log", "w")
    load_before = os.getloadavg()
    proc, url = start_server(args.repo.resolve(), runs, args.workers, args.profile, log)
    result: dict = {"command": " ".join(sys.argv), "repo": str(args.repo), "workers": args.workers,
                    "sessions": args.sessions, "jobs": args.jobs, "cores": os.cpu_count(),
                    "load_before": [round(v, 2) for v in load_before]}
    try:
        with sync_playwright() as p:
            browser = B.launch(p)
            watchers, job_ids = [], []
            for _ in range(args.jobs):
                context = browser.new_context(viewport={"width": 1400, "height": 1000})
                page = context.new_page()
                page.goto(url + "/" + JOB_QUERY, timeout=120000)
                page.get_by_role("button", name="Run", exact=True).first.wait_for(timeout=120000)
                B.settle(page, 60)
                B.click_button(page, "Run")
                page.wait_for_function("() => new URL(location.href).searchParams.get('run')", timeout=120000)
                job_ids.append(page.evaluate("() => new URL(location.href).searchParams.get('run')"))
                watchers.append(context)
            for i in range(args.sessions - args.jobs):
                context = browser.new_context(viewport={"width": 1400, "height": 1000})
                page = context.new_page()
                page.goto(url + "/?run=" + job_ids[i % len(job_ids)], timeout=120000)
                watchers.append(context)
            time.sleep(5)  # every session is polling its job
            ours = descendants(os.getpid())
            ticks0, t0 = cpu_ticks(), time.time()
            healths: list[float] = []
            loads: list[float] = []
            stop = threading.Event()

            def poll_health():
                while not stop.is_set():
                    healths.append(health(url))
                    stop.wait(0.5)

            poller = threading.Thread(target=poll_health, daemon=True)
            poller.start()
            deadline = time.time() + args.seconds
            while time.time() < deadline:
                loads.append(page_load(browser, url))
                time.sleep(max(0.0, min(8.0, deadline - time.time())))
            stop.set()
            poller.join(70)
            ticks1, t1 = cpu_ticks(), time.time()
            ours |= descendants(os.getpid())
            hz = os.sysconf("SC_CLK_TCK")
            used = {pid: ticks1.get(pid, 0) - ticks0.get(pid, 0) for pid in ticks1}
            other = sum(v for pid, v in used.items() if pid not in ours and v > 0) / hz / (t1 - t0)
            mine = sum(v for pid, v in used.items() if pid in ours and v > 0) / hz / (t1 - t0)
            by_kind: dict[str, float] = {}
            for pid, v in used.items():
                if pid in ours and v > 0:
                    kind = kind_of(pid, proc.pid)
                    by_kind[kind] = by_kind.get(kind, 0.0) + v / hz / (t1 - t0)
            for context in watchers:
                context.close()
            browser.close()
        result.update({
            "health_s": summary(healths), "page_load_s": summary(loads),
            "load_during": [round(v, 2) for v in os.getloadavg()],
            "cpu_cores_used_by_others": round(other, 2), "cpu_cores_used_by_this_benchmark": round(mine, 2),
            "cpu_cores_by_kind": {k: round(v, 2) for k, v in sorted(by_kind.items())},
            "rounds_done": {j: _rounds(runs / j) for j in job_ids},
        })
    finally:
        proc.terminate()
        try:
            proc.wait(20)
        except subprocess.TimeoutExpired:
            proc.kill()
        log.close()
    text = json.dumps(result, indent=1)
    print(text)
    if args.json:
        Path(args.json).write_text(text + "\n")
    return 0


def _rounds(folder: Path) -> int:
    try:
        return (folder / "rounds.jsonl").read_text().count("\n")
    except OSError:
        return 0


if __name__ == "__main__":
    sys.exit(main())
