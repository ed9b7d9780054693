"""How the dashboard's server answers while browsers watch running jobs (the figures in SERVER_LOAD.md).

    python benchmarks/server_load.py [--sessions 5] [--jobs 2] [--seconds 60] [--workers process|thread]
                                     [--watchers normal|idle|remote] [--repo PATH] [--profile FILE] [--json FILE]

Starts the dashboard headless (as `make run` does) on a fresh runs folder, opens
`--jobs` browser sessions (Debian's chromium through Playwright, one browser
context each, so each is its own browser with its own cookie) that each press
Run on a long Playground job, and more sessions that open those jobs by their
link, until `--sessions` sessions watch the running jobs. While they watch it
measures, for `--seconds`:

- the health check: GET /_stcore/health every 0.5 s from a process of its own (latency of each answer);
- the server's page: every 6 s a fresh session asks for the Playground over
  Streamlit's own protocol (GET /, open /_stcore/stream, ask for a run) and the
  time until the server has sent all of it ("script finished") is recorded: the
  server's part of a page load, without a browser's;
- a page load: every 8 s a fresh browser session (a chromium of its own, at the
  benchmark's priority) opens the Playground and the time until its Run button is
  drawn is recorded, with the phases (document loaded, websocket open, first
  message) and what it received;
- what the watching sessions received (messages and kB a second on their
  websockets, the largest message, the rounds their status line shows at the end);
- the machine: the 1-minute load average, and the CPU cores taken by this
  benchmark's processes (server, training workers, browsers) and by every other
  process on the machine, from /proc.

`--watchers remote` puts the watching sessions' browsers elsewhere, as a class's
laptops would be: each session speaks Streamlit's protocol from one process here,
as its frontend does (the page's run, then every fragment's rerun at the interval
the server asks for) and draws nothing, so the server's work is a browser's and
the drawing's CPU is not on this machine (the jobs' owners start them in chromium
and leave). `--watchers idle` runs the watching sessions' chromium under SCHED_IDLE (it gets
a core only when nothing else wants one): on this 2-core machine the watching
browsers would otherwise take as much CPU as the server, which the target is not
about (a class watches on its own laptops). `--workers thread` trains in the
server's threads (as before worker processes); `--repo` starts the server from
another checkout (e.g. the main branch) to compare. `--profile FILE` samples the
server's threads every 5 ms and times each script run (benchmarks/server_sampler.py).
Prints one JSON object with every figure (and writes it to --json).
"""
from __future__ import annotations

import argparse
import json
import os
import re
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

from tools import browser as B  # noqa: E402  (the same chromium and helpers as the browser test)

# A long Playground job: the default preset's data, many rounds (it keeps training while we measure).
JOB_QUERY = "?dataset=digits&partition=feature-skew&clusters=4&clients_per_cluster=5&algorithm=clove&models=4&rounds={rounds}"
JOB_ROUNDS = 2000  # enough for a 60-s window beside chromium watchers; remote ones leave the jobs more CPU (--rounds)


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
        try:
            idle = os.sched_getscheduler(pid) == os.SCHED_IDLE
        except OSError:
            idle = False
        return "browser (idle)" if idle else "browser"
    if "--remote-watchers" in cmd:
        return "remote watchers"
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


def health_probe(url: str) -> None:
    """`--health-probe URL`: GET /_stcore/health every 0.5 s until terminated, printing "sent-at latency" lines."""
    import signal

    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    while True:
        sent = time.time()
        print(f"{sent:.3f} {health(url):.4f}", flush=True)
        time.sleep(0.5)


def remote_watchers(url: str, queries: list[str]) -> None:
    """`--remote-watchers URL QUERY...`: one session per query, each speaking Streamlit's protocol as its frontend
    does, until terminated; then prints one JSON line per session (messages, bytes, the largest, fragment reruns
    asked for, the seconds since it opened).

    What a watching browser does to the server, without its drawing: open /_stcore/stream, ask for a run of the
    page with the query string, and for every fragment the server asks to rerun (an `auto_rerun` message: its id
    and interval) send that fragment's rerun at that interval, as the frontend's setInterval does, until a
    `stop_auto_rerun` names it; every rerun lists the hashes of the cacheable messages it holds, as the frontend's
    message cache does (so the server sends a reference for an element that has not changed). No widget states are
    sent (a watcher touches no widget: every widget keeps its default)."""
    import signal

    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    stats = [{"messages": 0, "bytes": 0, "largest": 0, "fragment_reruns": 0} for _ in queries]
    threads = [threading.Thread(target=_remote_session, args=(url, q, stop, st), daemon=True)
               for q, st in zip(queries, stats)]
    opened = time.perf_counter()
    for t in threads:
        t.start()
    while not stop.wait(0.2):
        pass
    ended = time.perf_counter()
    for t, st in zip(threads, stats):
        t.join(10)
        if "seconds" not in st:  # still in a call to the server 10 s after the stop: counted to the stop, said so
            st["seconds"] = round(ended - opened, 2)
            st.setdefault("error", "the session did not end within 10 s of the stop")
    for st in stats:
        print(json.dumps(dict(st)), flush=True)


CACHE_RUNS = 5  # a remote session forgets a cached message that its last 5 reruns did not use


def _remote_session(url: str, query: str, stop: threading.Event, stats: dict) -> None:
    from streamlit.proto.BackMsg_pb2 import BackMsg
    from streamlit.proto.ForwardMsg_pb2 import ForwardMsg
    from websockets.sync.client import connect

    cached: dict[str, int] = {}  # hash of a cacheable message -> the last rerun (count) that used it

    def rerun(page_hash: str = "", fragment: str = "") -> bytes:
        stats["reruns"] = runs = stats.get("reruns", 0) + 1
        for digest in [d for d, used in cached.items() if used < runs - CACHE_RUNS]:
            del cached[digest]
        ask = BackMsg()
        ask.rerun_script.query_string = query
        ask.rerun_script.page_script_hash = page_hash
        ask.rerun_script.cached_message_hashes.extend(cached)
        if fragment:
            ask.rerun_script.fragment_id = fragment
            ask.rerun_script.is_auto_rerun = True
        return ask.SerializeToString()

    started = time.perf_counter()
    try:
        with urllib.request.urlopen(url + "/?" + query, timeout=60) as r:
            r.read()
        with connect(url.replace("http", "ws", 1) + "/_stcore/stream", subprotocols=["streamlit"],
                     open_timeout=60, max_size=None) as ws:
            ws.send(rerun())
            page_hash = ""
            timers: dict[str, list[float]] = {}  # fragment id -> [interval, next due (perf_counter)]
            while not stop.is_set():
                now = time.perf_counter()
                for fragment, timer in timers.items():
                    if now >= timer[1]:
                        ws.send(rerun(page_hash, fragment))
                        stats["fragment_reruns"] += 1
                        timer[1] += timer[0] * max(1, int((now - timer[1]) // timer[0]) + 1)
                wait = min([t[1] for t in timers.values()] + [now + 0.2]) - now
                try:
                    data = ws.recv(timeout=max(0.001, wait))
                except TimeoutError:
                    continue
                stats["messages"] += 1
                stats["bytes"] += len(data)
                stats["largest"] = max(stats["largest"], len(data))
                msg = ForwardMsg()
                msg.ParseFromString(data)
                kind = msg.WhichOneof("type")
                if msg.metadata.cacheable and msg.hash:
                    cached[msg.hash] = stats.get("reruns", 0)
                if kind == "ref_hash":
                    cached[msg.ref_hash] = stats.get("reruns", 0)
                    stats["references"] = stats.get("references", 0) + 1
                elif kind == "new_session":
                    page_hash = msg.new_session.page_script_hash
                elif kind == "auto_rerun":
                    fragment, interval = msg.auto_rerun.fragment_id, msg.auto_rerun.interval
                    if not stats.get("intervals") or stats["intervals"][-1] != round(interval, 3):
                        stats.setdefault("intervals", []).append(round(interval, 3))  # what the server asked for
                    if timers.get(fragment, [None])[0] != interval:  # the frontend keeps a timer it already has
                        timers[fragment] = [interval, time.perf_counter() + interval]
                elif kind == "stop_auto_rerun":
                    for fragment in msg.stop_auto_rerun.fragment_ids:
                        timers.pop(fragment, None)
    except Exception as exc:  # reported, not raised: the other sessions keep watching
        stats["error"] = f"{type(exc).__name__}: {exc}"
    stats["seconds"] = round(time.perf_counter() - started, 2)


def health(url: str) -> float:
    started = time.perf_counter()
    try:
        with urllib.request.urlopen(url + "/_stcore/health", timeout=60) as r:
            r.read()
    except OSError:
        return float("inf")
    return time.perf_counter() - started


class Wire:
    """What one browser session received on its websocket (Streamlit's /_stcore/stream): frames and bytes,
    and when the first one came (seconds after `started`)."""

    def __init__(self, page, started: float | None = None):
        self.frames = self.bytes = 0
        self.largest = 0
        self.started = time.perf_counter() if started is None else started
        self.opened = self.first = None
        page.on("websocket", self._socket)

    def _socket(self, ws):
        if "_stcore/stream" not in ws.url:
            return
        self.opened = time.perf_counter() - self.started
        ws.on("framereceived", self._frame)

    def _frame(self, payload):
        size = len(payload)
        if self.first is None:
            self.first = time.perf_counter() - self.started
        self.frames += 1
        self.bytes += size
        self.largest = max(self.largest, size)


def page_load(browser, url: str, timeout: float = 90.0) -> dict:
    """A fresh session's Playground: seconds until its document loaded, its websocket opened, its first
    message came, and it was interactive (`total`, from the start of the navigation: the first run over and the
    Run button drawn and enabled, as in page_start.py; inf when not within `timeout`)."""
    from benchmarks.page_start import READY_JS

    context = browser.new_context(viewport={"width": 1400, "height": 1000})
    phases: dict = {}
    try:
        page = context.new_page()
        started = time.perf_counter()
        wire = Wire(page, started)
        page.goto(url + "/", timeout=timeout * 1000, wait_until="domcontentloaded")
        phases["document"] = time.perf_counter() - started
        # read by the page's own clock, polled at every animation frame (a locator's wait polls every 0.5 s
        # after its first tries, which added up to half a second to each figure before 2 Dec)
        drawn = page.wait_for_function(READY_JS, polling="raf", timeout=timeout * 1000)
        phases["total"] = float(drawn.json_value()) / 1000
        phases.update(socket_open=wire.opened, first_message=wire.first, messages=wire.frames, bytes=wire.bytes)
    except Exception:
        phases["total"] = float("inf")
    finally:
        context.close()
    return phases


def server_page(url: str, timeout: float = 90.0) -> float:
    """Seconds until the server has sent a fresh session the whole Playground, measured without a browser.

    Speaks Streamlit's own protocol, as its frontend does: GET the page, open /_stcore/stream, ask for a run of
    the default page, and read every message until the run's "script finished". What a browser adds on top (parsing
    the frontend's JavaScript, drawing the widgets) is the browser's own CPU; on this 2-core machine chromium shares
    the cores with the watching sessions and everything else, so `page_load` measures both."""
    from streamlit.proto.BackMsg_pb2 import BackMsg
    from streamlit.proto.ForwardMsg_pb2 import ForwardMsg
    from websockets.sync.client import connect

    started = time.perf_counter()
    try:
        with urllib.request.urlopen(url + "/", timeout=timeout) as r:
            r.read()
        with connect(url.replace("http", "ws", 1) + "/_stcore/stream", subprotocols=["streamlit"],
                     open_timeout=timeout, max_size=None) as ws:
            ask = BackMsg()
            ask.rerun_script.query_string = ""
            ask.rerun_script.page_script_hash = ""
            ws.send(ask.SerializeToString())
            while time.perf_counter() - started < timeout:
                msg = ForwardMsg()
                msg.ParseFromString(ws.recv(timeout=timeout))
                if (msg.WhichOneof("type") == "script_finished"
                        and msg.script_finished == ForwardMsg.FINISHED_SUCCESSFULLY):
                    return time.perf_counter() - started
    except Exception:
        pass
    return float("inf")


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
    ap.add_argument("--rounds", type=int, default=JOB_ROUNDS,
                    help="rounds of each job: fewer to see jobs end while watched, more to keep them running for "
                         f"the whole window (default {JOB_ROUNDS})")
    ap.add_argument("--workers", choices=["process", "thread"], default="process")
    ap.add_argument("--repo", type=Path, default=REPO, help="the checkout whose dashboard is measured")
    ap.add_argument("--profile", help="write the server's thread samples here (JSON)")
    ap.add_argument("--json", help="write the results here too")
    ap.add_argument("--watchers", choices=["normal", "idle", "remote"], default="normal",
                    help="the watching sessions: chromium at the benchmark's priority (normal) or at idle priority "
                         "(Linux's SCHED_IDLE, through `chrt --idle 0`: it runs when nothing else wants a core), or "
                         "remote: sessions whose browsers are elsewhere, speaking Streamlit's protocol from one "
                         "process here as a frontend does, drawing nothing (the jobs' owners start them in chromium "
                         "and leave). The fresh page loads always use a browser of their own at the benchmark's "
                         "priority")
    ap.add_argument("--health-probe", metavar="URL", help=argparse.SUPPRESS)  # the probe's own process
    ap.add_argument("--remote-watchers", nargs="+", metavar="ARG", help=argparse.SUPPRESS)  # URL QUERY...
    args = ap.parse_args()
    if args.health_probe:
        health_probe(args.health_probe)
        return 0
    if args.remote_watchers:
        remote_watchers(args.remote_watchers[0], args.remote_watchers[1:])
        return 0
    if args.jobs < 0 or args.sessions < 0 or args.seconds <= 0:
        ap.error("--jobs and --sessions must be 0 or more, --seconds more than 0")
    if not 1 <= args.rounds <= 100_000:
        ap.error(f"--rounds {args.rounds}: a job's rounds are a whole number in [1, 100000]")
    if args.sessions and not args.jobs or args.sessions < args.jobs and args.watchers != "remote":
        ap.error(f"--sessions {args.sessions} with --jobs {args.jobs}: sessions watch the running jobs (at least one "
                 "job for any session, and each job is started by a session of its own unless --watchers remote)")
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
            browser = launch(p, "normal" if args.watchers == "remote" else args.watchers, runs.parent)
            prober = B.launch(p)  # fresh loads: a browser of their own (a newcomer's own machine)
            watchers, job_ids, wires, pages = [], [], [], []
            for _ in range(args.jobs):
                context = browser.new_context(viewport={"width": 1400, "height": 1000})
                page = context.new_page()
                wires.append(Wire(page))
                pages.append(page)
                page.goto(url + "/" + JOB_QUERY.format(rounds=args.rounds), timeout=120000)
                page.get_by_role("button", name="Run", exact=True).first.wait_for(timeout=120000)
                B.settle(page, 60)
                B.click_button(page, "Run")
                page.wait_for_function("() => new URL(location.href).searchParams.get('run')", timeout=120000)
                job_ids.append(page.evaluate("() => new URL(location.href).searchParams.get('run')"))
                watchers.append(context)
            remote = None
            if args.watchers == "remote":  # the owners leave; every watching session is a remote one
                for context in watchers:
                    context.close()
                watchers, wires, pages = [], [], []
                remote = subprocess.Popen(
                    [sys.executable, str(HERE / "server_load.py"), "--remote-watchers", url,
                     *("run=" + job_ids[i % len(job_ids)] for i in range(args.sessions))],
                    stdout=subprocess.PIPE, text=True)
            for i in range(0 if remote else args.sessions - args.jobs):
                context = browser.new_context(viewport={"width": 1400, "height": 1000})
                page = context.new_page()
                wires.append(Wire(page))
                pages.append(page)
                page.goto(url + "/?run=" + job_ids[i % len(job_ids)], timeout=120000)
                watchers.append(context)
            time.sleep(5)  # every session is polling its job
            ours = descendants(os.getpid())
            ticks0, t0 = cpu_ticks(), time.time()
            wire0 = [(w.frames, w.bytes) for w in wires]
            healths: list[float] = []
            health_times: list[float] = []  # when each probe was sent (time.time())
            loads: list[dict] = []
            stop = threading.Event()

            # the probe runs in a process of its own: in a thread here it waited for this process's interpreter
            # lock, which Playwright's event handling (five watchers' frames) holds in bursts
            prober_proc = subprocess.Popen([sys.executable, str(HERE / "server_load.py"), "--health-probe", url],
                                           stdout=subprocess.PIPE, text=True)

            def poll_health():
                stop.wait()
                prober_proc.terminate()
                out, _ = prober_proc.communicate(30)
                for line in out.splitlines():
                    at_s, latency = line.split()
                    healths.append(float(latency))
                    health_times.append(float(at_s))

            served: list[float] = []

            def poll_pages():  # a fresh session's whole page from the server, without a browser, every 6 s
                while not stop.is_set():
                    served.append(server_page(url))
                    stop.wait(6.0)

            poller = threading.Thread(target=poll_health, daemon=True)
            poller.start()
            pager = threading.Thread(target=poll_pages, daemon=True)
            pager.start()
            deadline = time.time() + args.seconds
            while time.time() < deadline:
                began = time.time() - t0
                loads.append({"began": round(began, 1), **page_load(prober, url)})  # began: seconds into the window
                time.sleep(max(0.0, min(8.0, deadline - time.time())))
            stop.set()
            poller.join(70)
            pager.join(100)
            ticks1, t1 = cpu_ticks(), time.time()
            got = [{"messages_per_s": round((w.frames - f0) / (t1 - t0), 2),
                    "kB_per_s": round((w.bytes - b0) / 1e3 / (t1 - t0), 1),
                    "largest_message_kB": round(w.largest / 1e3, 1)} for w, (f0, b0) in zip(wires, wire0)]
            for info, page in zip(got, pages):
                info["shows"] = shown_rounds(page)
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
            if remote:  # whole sessions (they opened about 5 s before the window)
                remote.terminate()
                out, _ = remote.communicate(60)
                for line in out.splitlines():
                    st = json.loads(line)
                    secs = max(st["seconds"], 1e-9)
                    got.append({"messages_per_s": round(st["messages"] / secs, 2),
                                "kB_per_s": round(st["bytes"] / 1e3 / secs, 1),
                                "largest_message_kB": round(st["largest"] / 1e3, 1),
                                "fragment_reruns_per_s": round(st["fragment_reruns"] / secs, 2),
                                "references_per_s": round(st.get("references", 0) / secs, 2),
                                "poll_intervals": st.get("intervals", []),  # as the server asked, in order
                                **({"error": st["error"]} if "error" in st else {})})
            for context in watchers:
                context.close()
            browser.close()
            prober.close()
        totals = [ld["total"] for ld in loads]
        result.update({
            "watchers": args.watchers,
            "health_s": summary(healths),
            "window_started": round(t0, 3),  # time.time() when the measured window began
            "health_slowest": sorted(((round(lat, 3), round(at - t0, 1)) for lat, at in zip(healths, health_times)),
                                     reverse=True)[:5],  # (seconds, when: seconds into the window)
            "server_page_s": summary(served), "page_load_s": summary(totals),
            "page_loads": [{k: (round(v, 3) if isinstance(v, float) else v) for k, v in ld.items()} for ld in loads],
            "watching_sessions_received": got,
            "load_during": [round(v, 2) for v in os.getloadavg()],
            "cpu_cores_used_by_others": round(other, 2), "cpu_cores_used_by_this_benchmark": round(mine, 2),
            "cpu_cores_by_kind": {k: round(v, 2) for k, v in sorted(by_kind.items())},
            "rounds_done": {j: _rounds(runs / j) for j in job_ids},
            "jobs_ended_in_window": sum(_rounds(runs / j) >= args.rounds for j in job_ids),
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


def launch(playwright, priority: str, scratch: Path):
    """The watching sessions' chromium, at `priority`: "idle" runs it under SCHED_IDLE (`chrt --idle 0`), which its
    every process and thread inherits. (`nice` does not hold: chromium, run as root, sets its renderers' and
    threads' niceness back to 0 and -8 itself.)"""
    if priority == "normal":
        return B.launch(playwright)
    wrapper = scratch / "chromium-idle"
    wrapper.write_text(f'#!/bin/sh\nexec chrt --idle 0 {B.chromium_path()} "$@"\n')
    wrapper.chmod(0o755)
    return playwright.chromium.launch(executable_path=str(wrapper), args=B.CHROMIUM_ARGS)


def shown_rounds(page) -> str | None:
    """The "N of M rounds" a watching session's status line shows at the end (how current its view is)."""
    try:
        text = page.get_by_text(re.compile(r"\d+ of \d+ rounds")).first.inner_text(timeout=5000)
        return re.search(r"\d+ of \d+ rounds", text).group(0)
    except Exception:
        return None


def _rounds(folder: Path) -> int:
    try:
        return (folder / "rounds.jsonl").read_text().count("\n")
    except OSError:
        return 0


if __name__ == "__main__":
    sys.exit(main())
