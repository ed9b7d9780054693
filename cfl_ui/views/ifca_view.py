"""The IFCA-initialisation page's sweep and results: the sweep spec of its form, its folder under the runs folder,
success per algorithm and init mode, the spread over seeds, every run's row (one click to the Playground).

The page's seeds x init modes x algorithms are one sweep (cfl_core.sweep): the form gives the spec
(`sweep_spec`), whose folder name is a hash of it (`sweep_folder`), so the same settings, from the same
browser or from a link, find the same folder again: its finished runs are shown and Run resumes the rest.
Rows are read from the sweep folder (`sweep_rows`); a dashboard job of the page's older form (a link
to `run=JOB`) still draws through `render`.
"""
from __future__ import annotations

import hashlib
import json
from pathlib import Path

import streamlit as st

from cfl_core.files import TABLE_LIMIT, read_text
from cfl_core.sweep.status import sweep_points
from cfl_core.jsonio import read_json
from cfl_core.sweep.folder import EVENTS_FILE, POINT_FILE, SWEEP_FILE

from ..charts import ifca_figures as F
from ..charts.draw import chart
from ..form.controls import algorithm_label
from ..jobs.estimate import _duration
from .live_view import status_bar, unit_seconds
from ..charts.palette import algorithm_color
from ..jobs.snapshots import FAILED, FINISHED, PENDING, RUNNING, TERMINAL
from ..charts.tables import pct, round_text
from ..form.url_sync import app_url

SUCCESS = 0.9999  # final ARI = 1
SWEEPS_FOLDER = "sweeps"  # under the runs folder, beside the CLI's and the Sweeps page's sweeps
RUN_FOLDER = "s{seed}-{init}-{algorithm}"
SWEPT = ("seed", "init", "algorithm")


def sweep_spec(configs: list, algorithms: list, modes: list, seeds: int) -> dict:
    """The sweep of the form's validated configs (cfl_ui.form.job_specs.init_configs): their shared fields as the
    base, seeds x init modes x algorithms as the grid (the same points, in the same order)."""
    first = configs[0].to_dict()
    base = {k: v for k, v in first.items() if k not in (*SWEPT, "options")}
    return {"name": "ifca-init", "description": "IFCA initialisation: seeds x init modes x algorithms "
                                                "(the IFCA-initialisation page)",
            "base": base, "grid": {"seed": list(range(first["seed"], first["seed"] + seeds)), "init": list(modes),
                                   "algorithm": list(algorithms)},
            "folder": RUN_FOLDER}


def sweep_folder(spec: dict) -> str:
    """The sweep's folder relative to the runs folder: the same spec, the same folder (and so a resume)."""
    text = json.dumps(spec, sort_keys=True, separators=(",", ":"), default=str)
    return f"{SWEEPS_FOLDER}/ifca-init-{hashlib.sha256(text.encode('utf-8')).hexdigest()[:12]}"


def in_flight(folder: Path) -> set:
    """The keys the folder's driver started and has not written back yet (from its events since it started)."""
    started: set = set()
    text, _ = read_text(folder / EVENTS_FILE, TABLE_LIMIT)  # a regular file only, bounded (a pipe never waited on)
    if text is None:
        return started
    lines = text.splitlines()
    for line in lines:
        try:
            event = json.loads(line)
        except json.JSONDecodeError:
            continue  # a line being appended
        kind = event.get("event")
        if kind == "start":
            started = set()
        elif kind == "started":
            started.add(event.get("key"))
        elif kind in ("finished", "failed"):
            started.discard(event.get("key"))
    return started


_rows_cache: dict = {}  # folder -> (stamp, rows)


def _stamp(folder: Path) -> tuple | None:
    """Changes whenever the driver starts or writes back a run (it appends to events.jsonl for both, and renames
    the run folder into place) or a run folder is removed."""
    out = []
    for name in (EVENTS_FILE, SWEEP_FILE, "."):
        try:
            st_ = (folder / name).stat()
        except OSError:
            return None
        out.append((st_.st_mtime_ns, st_.st_size))
    return tuple(out)


def sweep_rows(root: Path, rel: str, live: bool = False) -> list:
    """One row per point of the sweep in root/rel: its seed, init mode, algorithm, and once it ended its final
    numbers and its own time; while `live`, the points in flight are marked running. Read again only when the
    folder's events changed (the page polls it every second while it runs)."""
    folder = Path(root) / rel
    stamp = _stamp(folder)
    hit = _rows_cache.get((str(folder), live))
    if stamp is not None and hit is not None and hit[0] == stamp:
        return [dict(r) for r in hit[1]]
    rows = _read_rows(folder, rel, live)
    if stamp is not None:
        if len(_rows_cache) > 32:
            _rows_cache.clear()
        _rows_cache[(str(folder), live)] = (stamp, rows)
    return [dict(r) for r in rows]


def _read_rows(folder: Path, rel: str, live: bool) -> list:
    flying = in_flight(folder) if live else set()
    sweep = read_json(folder / SWEEP_FILE)
    if not isinstance(sweep, dict):
        return []
    rows = []
    points, _ = sweep_points(sweep)  # checked: a damaged sweep.json gives no rows, never a crashed page
    for p in points:
        values = p["values"]
        marker = read_json(folder / p["folder"] / POINT_FILE)
        done = isinstance(marker, dict) and marker.get("key") == p["key"]
        summary = read_json(folder / p["folder"] / "summary.json") if done else None
        summary = summary if isinstance(summary, dict) else {}
        status = (FINISHED if marker.get("status") == FINISHED else FAILED) if done else (
            RUNNING if p["key"] in flying else PENDING)
        rows.append({
            "seed": values.get("seed"), "init": values.get("init"), "algorithm": values.get("algorithm"),
            "final_ari": summary.get("final_ari") if done else None,
            "final_accuracy": summary.get("final_accuracy") if done else None,
            "first_ari_0_9": summary.get("first_round_ari_0_9") if done else None,
            "seconds": (marker.get("wall_seconds") if marker.get("wall_seconds") is not None
                        else summary.get("total_seconds")) if done else None,
            "error": marker.get("error") if done else None,
            "status": status, "ref": f"{rel}/{p['folder']}" if done else None,
        })
    return rows


def rows_of(snap) -> list:
    """One row per run: its seed, init mode and algorithm, and (once it ended) its final numbers."""
    rows = []
    for u in snap.units:
        s = u.summary or {}
        last = u.records[-1] if u.records else None
        done = u.status in TERMINAL
        rows.append({
            "seed": u.tags.get("seed"), "init": u.tags.get("init"), "algorithm": u.tags.get("algorithm", u.algorithm),
            "final_ari": (s.get("final_ari") if s else (last.ari if last else None)) if done else None,
            "final_accuracy": (s.get("final_accuracy") if s else (last.accuracy if last else None)) if done else None,
            "first_ari_0_9": s.get("first_round_ari_0_9") if s else None,
            "seconds": unit_seconds(u) if done else None, "status": u.status, "ref": u.ref,
        })
    return rows


def results_csv(rows) -> str:
    def cell(v):
        return "" if v is None else v

    return "seed,init,algorithm,final_ari,final_accuracy,first_round_ari_0_9,seconds,status,run\n" + "".join(
        f"{r['seed']},{r['init']},{r['algorithm']},{cell(r['final_ari'])},{cell(r['final_accuracy'])},"
        f"{cell(r['first_ari_0_9'])},{cell(r.get('seconds'))},{r['status']},{cell(r['ref'])}\n" for r in rows)


def _sorted(rows, algos, modes) -> list:
    return sorted(rows, key=lambda r: (r["seed"], modes.index(r["init"]) if r["init"] in modes else 9,
                                       algos.index(r["algorithm"]) if r["algorithm"] in algos else 9))


def _cell(text) -> str:
    return str(text).replace("|", "\\|")


def runs_table_markdown(rows, algos, modes, labels) -> str:
    """Every run as a markdown table whose last column is a plain link: one click opens the run in the
    Playground (a data grid's link cell takes two, the first only selects the cell). Its time is the run's own."""
    lines = ["| seed | init | algorithm | final ARI | final accuracy | ARI≥0.9 at round | time | status | open |",
             "|---:|---|---|---:|---:|---:|---:|---|---|"]
    for r in _sorted(rows, algos, modes):
        ended = r["final_ari"] is not None
        ari = f"{r['final_ari']:.3f}" if ended else ""
        acc = f"{pct(r['final_accuracy']):.1f}%" if r["final_accuracy"] is not None else ""
        first = round_text(r["first_ari_0_9"], r["status"]) if ended else ""
        secs = f"{r['seconds']:.1f} s" if r.get("seconds") is not None else ""
        link = f"[in Playground ↗]({app_url({'run': r['ref']})})" if r["ref"] and r["status"] != PENDING else ""
        lines.append("| " + " | ".join(_cell(c) for c in (r["seed"], r["init"], labels.get(r["algorithm"], r["algorithm"]),
                                                           ari, acc, first, secs, r["status"], link)) + " |")
    return "\n".join(lines)


def runs_table(rows, algos, modes, labels) -> None:
    with st.container(height=min(440, 38 * (len(rows) + 2)), border=False):
        st.markdown(runs_table_markdown(rows, algos, modes, labels))


def render(snap) -> None:
    """A dashboard job of the page's older form (a link to run=JOB): its status line and results."""
    status_bar(snap, list(snap.units), count_runs=True)
    render_rows(rows_of(snap), snap.id, files=not snap.live)


def render_rows(rows, key: str, files: bool = True) -> None:
    """Everything the page shows of a seeds x init modes x algorithms grid's rows (redrawn live as runs finish).
    files=False: no download (a refreshing fragment's would be cancelled by its next redraw;
    cfl_ui.views.export_view)."""
    if not rows:
        st.info("Preparing the sweep: its runs appear in a moment…", icon=":material/hourglass_top:")
        return
    algos = list(dict.fromkeys(r["algorithm"] for r in rows))  # in the order they were chosen
    modes = list(dict.fromkeys(r["init"] for r in rows))
    labels = {a: algorithm_label(a) for a in algos}
    colors = {a: algorithm_color(a, i) for i, a in enumerate(algos)}
    # headline: success per algorithm and mode
    cols = st.columns(len(algos) * len(modes))
    i = 0
    for a in algos:
        for m in modes:
            sel = [r for r in rows if r["algorithm"] == a and r["init"] == m and r["final_ari"] is not None]
            wins = sum(1 for r in sel if r["final_ari"] >= SUCCESS)
            cols[i].metric(f"{labels[a]} · {m}", f"{wins}/{len(sel)}" if sel else "—",
                           help="Seeds whose final ARI is 1 (clusters recovered exactly) out of those finished.")
            i += 1
    finished = [r for r in rows if r["final_ari"] is not None]
    if not finished:
        st.info("The first results appear as soon as the first runs finish…", icon=":material/hourglass_top:")
        return
    key = (key, len(finished))
    c1, c2 = st.columns(2, gap="medium")
    with c1:
        chart(lambda: F.success_figure(finished, algos, modes, labels, colors), "ifc.success", cache=("ifc-succ", key),
              title="**Success rate: final ARI = 1**",
              caption="Share of seeds where the algorithm ends with exactly the true clusters, per init mode; "
                      "the labels count seeds. IFCA's bar at 'same' is the collapse.")
    with c2:
        chart(lambda: F.spread_figure(finished, algos, modes, labels, colors), "ifc.spread",
              cache=("ifc-spread", key), title="**Spread of the final ARI over seeds**",
              caption="Each dot is one seed's final ARI (box = quartiles): a tight cluster at 1 is reliable recovery, "
                      "dots at 0 are runs where one model took every client.")
    failed = [r for r in rows if r["status"] == FAILED and r.get("error")]
    if failed:
        st.error(f"{len(failed)} of {len(rows)} runs failed; the first: {failed[0]['error']}", icon=":material/error:")
    st.markdown("**Every run** · open any one in the Playground with one click; its time is that run's own")
    runs_table(rows, algos, modes, labels)
    if files:
        results_download(rows)


def results_download(rows) -> str:
    """The sweep's results table as a CSV download (made now); says what it holds."""
    st.download_button("Results (CSV)", results_csv(rows), "ifca-init.csv", "text/csv", key="ifc.dl_csv",
                       icon=":material/download:", on_click="ignore")
    return f"{len(rows)} runs"


def sweep_progress(rows, *, state: str, progress: dict | None, elapsed: float | None, where: str) -> None:
    """The sweep's status line: done / running / failed of all, the ETA while it runs, the time so far."""
    done = sum(1 for r in rows if r["status"] == FINISHED)
    failed = sum(1 for r in rows if r["status"] == FAILED)
    running = sum(1 for r in rows if r["status"] == RUNNING)
    badge = {"running": ":blue-badge[:material/autorenew: running]",
             "finished": ":green-badge[:material/check_circle: finished]",
             "stopped": ":gray-badge[:material/stop_circle: stopped]",
             "interrupted": ":orange-badge[:material/warning: interrupted]",
             "failed": ":red-badge[:material/error: failed]"}.get(state, state)
    line = f"{badge} **{done} of {len(rows)} runs done** · {running} running · {failed} failed"
    if state == "running" and progress is not None and progress.get("eta_seconds") is not None:
        line += f" · about {_duration(progress['eta_seconds'])} left"
    if elapsed is not None:
        line += f" · {elapsed:.0f} s {'so far' if state == 'running' else 'in all'}"
    st.markdown(line + f" · {where}")
    if state == "running":
        st.progress((done + failed) / max(1, len(rows)), text=f"{done + failed}/{len(rows)} runs")
    elif state in ("stopped", "interrupted") and done + failed < len(rows):
        st.info(f"{len(rows) - done} runs are not finished: **Resume** runs only those; the finished ones stay.",
                icon=":material/replay:")
