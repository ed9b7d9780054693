"""Saved runs on disk: reading jobs back, listing them per owner, deleting, exporting.

A job folder written by the dashboard holds `ui.json` (owner, kind, units,
errors) beside the core's files; a single run's core files are in the job
folder itself, a batch's in one sub-folder per unit. Folders without
`ui.json` are runs started elsewhere (the CLI): they belong to nobody and
everyone sees them. The CLI writes them at any depth under the runs folder:
a run folder holds `config.json` (`python -m cfl_core run --out runs/X`); a
CLI batch is a folder with neither file whose child folders include run
folders (`compare --out runs/X` -> X/<algorithm>/, a README table's sweep ->
<out>/<partition>/seed<N>/<algorithm>/); any other folder only groups others.
Reading never unpickles and never changes a folder.

Nothing on disk takes a page down: a folder whose files are damaged is listed
with status `damaged` and the reason, and opens with what could be read. No
symbolic link under the runs folder is followed (reading, listing, deleting):
a reference whose path passes through one names nothing.

Whether a run without a summary still runs elsewhere or was interrupted is
told by its heartbeat (the writing process, cfl_core.liveness) where it can
be, and only otherwise by how recently its files changed.
"""
from __future__ import annotations

import os
import shutil
import threading
import time
from dataclasses import dataclass
from pathlib import Path

import re

from cfl_core import jsonio
from cfl_core.liveness import is_alive
from cfl_core.records import CONFIG_FILE, HEARTBEAT_FILE
from cfl_core.run_reader import clean_config, read_json_object, walk_run_folders

from .run_refs import UI_FILE, parse_ref, valid_part
from .sweep_owner import sweep_owner
from .snapshots import (DAMAGED, DIVERGED, ELSEWHERE, FAILED, FINISHED, INTERRUPTED, LIVE, PENDING, STOPPED,
                        JobSnapshot, UnitSnapshot)

# an unfinished run whose files changed this recently is still running, when its heartbeat cannot say
STILL_WRITING_SECONDS = 45.0
_UNSAFE_LABEL = re.compile(r"[^\w\s·().,+=/-]")


def clean_label(text, default: str = "?") -> str:
    """A label or title read from disk as plain words: no markup characters at all (they are the dashboard's own
    words, e.g. "CLoVE · same · seed 3"; a hostile ui.json cannot put a link or an image on a page)."""
    if not isinstance(text, str):
        return default
    return _UNSAFE_LABEL.sub("", text).strip()[:160] or default


def safe_folder(root: Path, rel: str) -> Path | None:
    """root/rel when no part of it under root is a symbolic link (and it is a well-formed reference), else None."""
    if parse_ref(rel) is None:
        return None
    folder = Path(root)
    for part in rel.strip().split("/"):
        folder = folder / part
        if folder.is_symlink():
            return None
    return folder
MAX_DEPTH = 6  # how deep under the runs folder the listing looks for run folders


def write_json_atomic(path: Path, data) -> None:
    """The core's atomic writer for the dashboard's files: the job folder is made when missing (ui.json
    can come before any run file), and what JSON cannot hold is written as its str()."""
    path.parent.mkdir(parents=True, exist_ok=True)
    jsonio.write_json_atomic(path, data, default=str)


def _listable(name: str) -> bool:
    """A folder name the listing may show: not hidden, and one a run reference can carry."""
    return not name.startswith(".") and valid_part(name)


def _stamp(folder: Path) -> tuple:
    out = []
    for name in ("rounds.jsonl", "summary.json", "config.json", UI_FILE, "meta.json", HEARTBEAT_FILE):
        try:
            st = (folder / name).stat()
            out.append((st.st_mtime_ns, st.st_size))
        except OSError:
            out.append(None)
    return tuple(out)


_cache_lock = threading.Lock()
_run_cache: dict = {}  # folder -> (stamp, SavedRun)


def load_saved(folder: Path):
    """cfl_core.run_reader.load_run, cached until the folder's files change."""
    from cfl_core.run_reader import load_run

    folder = Path(folder)
    stamp = _stamp(folder)
    with _cache_lock:
        hit = _run_cache.get(str(folder))
        if hit and hit[0] == stamp:
            return hit[1]
    run = load_run(folder)
    with _cache_lock:
        if len(_run_cache) > 256:
            _run_cache.clear()
        _run_cache[str(folder)] = (stamp, run)
    return run


def _unfinished_status(folder: Path, heartbeat: dict | None = None) -> str:
    """A run without a summary: still being written by another process, or its process died.

    The heartbeat's process tells at once where it can (same host); otherwise a run whose files
    changed in the last STILL_WRITING_SECONDS is taken to be running."""
    if heartbeat is None:
        heartbeat, _ = read_json_object(folder / HEARTBEAT_FILE)
    alive = is_alive(heartbeat)
    if alive is not None:
        return ELSEWHERE if alive else INTERRUPTED
    for name in ("rounds.jsonl", "config.json"):
        try:
            age = time.time() - (folder / name).stat().st_mtime
        except OSError:
            continue
        return ELSEWHERE if age < STILL_WRITING_SECONDS else INTERRUPTED
    return INTERRUPTED


def _disk_status(saved, folder: Path) -> str:
    return saved.status if saved.status != "unfinished" else _unfinished_status(folder, saved.heartbeat)


def _label_of(config: dict, *fallbacks) -> str:
    """The algorithm's label from the registry (a config's algorithm is a declared choice), else the first
    fallback that is a text (cleaned)."""
    from cfl_core.algorithms import ALGORITHMS

    algo = ALGORITHMS.get(config.get("algorithm")) if isinstance(config.get("algorithm"), str) else None
    for text in fallbacks:
        if isinstance(text, str) and text:
            return clean_label(text)
    return algo.label if algo is not None else "?"


def _int(value, default: int = 0) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else default


def load_unit(folder: Path, ref: str, name: str = "", label: str = "", tags: dict | None = None,
              ui_unit: dict | None = None) -> UnitSnapshot:
    ui_unit = ui_unit if isinstance(ui_unit, dict) else {}
    raw = ui_unit.get("config") if isinstance(ui_unit.get("config"), dict) else {}
    config, _ = clean_config(raw)
    tags = {clean_label(k): v for k, v in tags.items() if isinstance(v, (str, int, float))} \
        if isinstance(tags, dict) else {}
    error = ui_unit.get("error") if isinstance(ui_unit.get("error"), str) else None
    tb = ui_unit.get("traceback") if isinstance(ui_unit.get("traceback"), str) else None
    if os.path.lexists(folder / CONFIG_FILE):
        saved = load_saved(folder)
        status = _disk_status(saved, folder)
        if ui_unit.get("status") in (FAILED, DIVERGED):
            status = ui_unit["status"]
        if saved.problems and status not in (FAILED, DIVERGED):
            status = DAMAGED
        config = dict(saved.config) or config
        if error is None and status == DIVERGED:
            error = saved.summary.get("error") if isinstance(saved.summary.get("error"), str) else None
        meta = saved.meta if isinstance(saved.meta, dict) else {}
        return UnitSnapshot(
            ref=ref, name=name, label=_label_of(config, label) if label else _label_of(config),
            tags=tags, config=config, status=status, records=tuple(saved.records),
            total_rounds=_int(config.get("rounds"), len(saved.records)),
            summary=saved.summary if saved.summary.get("status") != "unfinished" else None,
            meta=dict(meta), error=error, traceback=tb, folder=str(folder), problems=tuple(saved.problems),
        )
    # Never started (stopped before its turn) or failed before writing anything.
    status = ui_unit.get("status") if isinstance(ui_unit.get("status"), str) else INTERRUPTED
    if status in LIVE or status == PENDING:
        status = INTERRUPTED
    return UnitSnapshot(ref=ref, name=name, label=_label_of(config, label), tags=tags, config=config,
                        status=status, records=(), total_rounds=_int(config.get("rounds")), summary=None, meta={},
                        error=error, traceback=tb, folder=None)


def _child_runs(folder: Path) -> list[Path]:
    """The run folders (with config.json) directly inside folder, sorted by name."""
    return sorted((run for _, run, _ in walk_run_folders(folder, accept=_listable)), key=lambda p: p.name)


def folder_kind(folder: Path) -> str | None:
    """"job" (dashboard, ui.json), "run" (CLI run, config.json), "batch" (CLI batch), else None.

    A symbolic link is none of them, nor are linked marker files."""
    folder = Path(folder)
    if folder.is_symlink() or not folder.is_dir():
        return None
    if _plain_file(folder / UI_FILE):
        return "job"
    if _plain_file(folder / CONFIG_FILE):
        return "run"
    return "batch" if _child_runs(folder) else None


def _plain_file(path: Path) -> bool:
    return path.is_file() and not path.is_symlink()


def combined_status(statuses: list[str]) -> str:
    """One status for a batch read from disk, from its units' statuses."""
    if not statuses:
        return INTERRUPTED
    if ELSEWHERE in statuses:
        return ELSEWHERE
    if all(s == FINISHED for s in statuses):
        return FINISHED
    for ended in (FAILED, DIVERGED):
        if all(s == ended for s in statuses):
            return ended
    for s in (DAMAGED, INTERRUPTED, STOPPED, FAILED, DIVERGED):
        if s in statuses:
            return s
    return next(s for s in statuses if s != FINISHED)


def _created(folder: Path) -> float:
    try:
        return (folder / CONFIG_FILE).stat().st_mtime
    except OSError:
        return 0.0


def _number(value) -> float | None:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def _text(value, default: str = "") -> str:
    return value if isinstance(value, str) else default


def read_ui(folder: Path) -> tuple[dict | None, str | None]:
    """(ui.json as an object with its fields of the right kinds, None) or (None, what is wrong with it)."""
    ui, problem = read_json_object(folder / UI_FILE)
    if ui is None:
        return None, problem
    units = ui.get("units")
    if not isinstance(units, list) or not all(isinstance(u, dict) for u in units):
        return None, f"{UI_FILE}: 'units' is not a list of objects"
    for u in units:
        if not valid_part(_text(u.get("name"), "x") or "x") and not (ui.get("single") is True and u.get("name") == ""):
            return None, f"{UI_FILE}: a unit's name is not a folder name"
    return ui, None


def load_job(root: Path, job_id: str) -> JobSnapshot | None:
    """A job read from disk (dashboard job, CLI run folder or CLI batch), or None when there is none.

    Never raises for what a folder holds: a damaged one comes back with status `damaged` and its
    problems; a path through a symbolic link names nothing (None)."""
    folder = safe_folder(root, job_id)
    if folder is None or not folder.is_dir():
        return None
    if not os.path.lexists(folder / UI_FILE):
        if os.path.lexists(folder / CONFIG_FILE):
            unit = load_unit(folder, job_id)
            created = _created(folder)
            return JobSnapshot(job_id, "cli", unit.label, unit.status, "lockstep", (unit,), None, unit.error,
                               unit.traceback, created, created, None, 0, True, "")
        children = _child_runs(folder)
        if not children:
            return None
        units = tuple(load_unit(child, f"{job_id}/{child.name}", child.name) for child in children)
        created = min(_created(child) for child in children)
        failed = [u for u in units if u.error]
        return JobSnapshot(job_id, "cli", job_id, combined_status([u.status for u in units]), "lockstep", units,
                           None, failed[0].error if failed else None, failed[0].traceback if failed else None,
                           created, created, None, 0, True, "")
    ui, problem = read_ui(folder)
    if ui is None:
        unit = UnitSnapshot(ref=job_id, name="", label="?", tags={}, config={}, status=DAMAGED, records=(),
                            total_rounds=0, summary=None, meta={}, error=None, traceback=None, folder=str(folder),
                            problems=(problem,))
        created = _created(folder)
        return JobSnapshot(job_id, "?", job_id, DAMAGED, "lockstep", (unit,), None, None, None, created, None, None,
                           0, True, "")
    single = ui.get("single") is True
    units = []
    for u in ui["units"]:
        name = _text(u.get("name"))
        unit_folder = folder if single else folder / name
        ref = job_id if single else f"{job_id}/{name}"
        units.append(load_unit(unit_folder, ref, name, _text(u.get("label")), u.get("tags"), u))
    statuses = [u.status for u in units]
    status = ui.get("status") if isinstance(ui.get("status"), str) else None
    if status in LIVE or status is None:  # the process that ran it is gone (or runs elsewhere)
        server = is_alive(ui.get("server"))
        status = ELSEWHERE if ELSEWHERE in statuses or server else INTERRUPTED
    if DAMAGED in statuses and status not in (ELSEWHERE,):
        status = DAMAGED
    failed = [u for u in units if u.error]
    error = ui.get("error") if isinstance(ui.get("error"), str) else None
    if error is None and failed:
        error = failed[0].error if len(units) == 1 else f"{len(failed)} of {len(units)} runs failed; first: {failed[0].error}"
    owner = ui.get("owner") if isinstance(ui.get("owner"), str) else ""
    return JobSnapshot(job_id, clean_label(ui.get("kind")), clean_label(ui.get("title"), job_id), status,
                       _text(ui.get("schedule"), "lockstep"), tuple(units), None, error,
                       failed[0].traceback if failed else None, _number(ui.get("created")) or _created(folder),
                       _number(ui.get("started")), _number(ui.get("ended")), 0, True, owner,
                       paused=_number(ui.get("paused")) or 0.0)


def resumable(snap: JobSnapshot | None, owner: str) -> str | None:
    """None when `owner` may resume this job read from disk, else why not (one line)."""
    if snap is None:
        return "there is no such run"
    if not snap.owner:
        return ("it was started from the command line: resume it there with "
                "`python -m cfl_core run --resume DIR` (the dashboard shows it read-only)")
    if snap.owner != owner:
        return "only the browser that started this run may resume it"
    if snap.status not in (INTERRUPTED, STOPPED):
        return f"it is {status_word(snap.status)}, not interrupted or stopped"
    if not any(u.status in (INTERRUPTED, STOPPED, PENDING) for u in snap.units):
        return "none of its runs is left to continue"
    return None


# -- listing ---------------------------------------------------------------------
@dataclass
class RunRow:
    ref: str
    job: str
    kind: str
    title: str
    algorithm: str
    dataset: str
    partition: str
    status: str
    rounds: str
    final_accuracy: float | None
    final_ari: float | None
    created: float
    owner: str
    problem: str = ""  # why the run is listed as damaged
    sweep: str = ""  # the sweep folder the run belongs to (its row groups them); "" for a run of no sweep


def _summary_row(folder: Path) -> tuple[dict, dict, str]:
    """(config, summary, the first problem of either or "") of a run folder, each an object whatever is on disk."""
    raw, problem = read_json_object(folder / CONFIG_FILE)
    config, config_problems = clean_config(raw or {})
    summary, summary_problem = read_json_object(folder / "summary.json")
    first = problem or (config_problems[0] if config_problems else None) or summary_problem or ""
    return config, summary or {}, first


def _walk(root: Path):
    """(relative parts, folder, "job" | "run" | "sweep") for every dashboard job, CLI run folder and sweep folder
    under root.

    The core's walk (cfl_core.run_reader.walk_run_folders): at most MAX_DEPTH levels down, skipping
    hidden folders and names a reference cannot carry, never descending into a job, run or sweep folder
    (nor following a symlink). A folder with ui.json is a job even when it also holds config.json."""
    from cfl_core.sweep.status import MARKERS

    kinds = {UI_FILE: "job", CONFIG_FILE: "run", **{marker: "sweep" for marker in MARKERS}}
    for rel, folder, marker in walk_run_folders(root, markers=tuple(kinds), max_depth=MAX_DEPTH, accept=_listable):
        yield rel, folder, kinds[marker]


def _row(ref: str, job: str, kind: str, title: str, unit_folder: Path, config: dict, summary: dict, status: str,
         created: float, owner: str, problem: str = "") -> RunRow:
    done = summary.get("rounds_completed")
    if not isinstance(done, int) or isinstance(done, bool):
        done = _count_lines(unit_folder / "rounds.jsonl")
    rounds = config.get("rounds")
    return RunRow(
        ref=ref, job=job, kind=kind, title=title, algorithm=_text(config.get("algorithm"), "?"),
        dataset=_text(config.get("dataset"), "?"), partition=_text(config.get("partition"), "?"),
        status=DAMAGED if problem else status, rounds=f"{done}/{rounds if isinstance(rounds, int) else '?'}",
        final_accuracy=_number(summary.get("final_accuracy")), final_ari=_number(summary.get("final_ari")),
        created=created, owner=owner, problem=problem,
    )


def _cli_row(rel: tuple, folder: Path) -> RunRow:
    ref = "/".join(rel)
    config, summary, problem = _summary_row(folder)
    status = summary.get("status") if isinstance(summary.get("status"), str) else _unfinished_status(folder)
    try:
        created = folder.stat().st_mtime
    except OSError:
        created = 0.0
    return _row(ref, "/".join(rel[:-1]) or ref, "cli", ref, folder, config, summary, status, created, "", problem)


def _job_rows(job_id: str, folder: Path, ui: dict, live: dict[str, str]) -> list[RunRow]:
    created = _number(ui.get("created")) or folder.stat().st_mtime
    kind = clean_label(ui.get("kind"), "cli")
    title = clean_label(ui.get("title"), job_id)
    single = ui.get("single") is True
    owner = _text(ui.get("owner"))
    server_alive = is_alive(ui.get("server"))
    rows = []
    for u in ui.get("units") or [{"name": ""}]:
        name = _text(u.get("name"))
        unit_folder = folder if single else folder / name
        config, summary, problem = _summary_row(unit_folder)
        if not config and isinstance(u.get("config"), dict):
            config, _ = clean_config(u["config"])
        status = summary.get("status") if isinstance(summary.get("status"), str) else None
        if status is None:
            status = live.get(job_id) or _text(u.get("status")) or "unfinished"
            if job_id not in live and status in (*LIVE, PENDING, "unfinished"):
                status = ELSEWHERE if server_alive else INTERRUPTED
        if not os.path.lexists(unit_folder / CONFIG_FILE):
            problem = ""  # never started: nothing on disk to be damaged
        rows.append(_row(job_id if single else f"{job_id}/{name}", job_id, kind,
                         title if single else f"{title} · {clean_label(u.get('label'), name)}", unit_folder,
                         config, summary, status, created, owner, problem))
    return rows


def list_rows(root: Path, owner: str | None, live: dict[str, str] | None = None) -> tuple[list[RunRow], int]:
    """Rows of every run this owner may see (its own and the CLI's, at any depth), newest first, and how
    many are hidden.

    owner None shows everything. live: job id -> status for jobs running in this process. A folder
    whose files are damaged is a row with status `damaged` and the reason (`problem`)."""
    root = Path(root)
    live = live or {}
    rows: list[RunRow] = []
    hidden = 0
    if not root.exists():
        return rows, 0
    for rel, folder, kind in _walk(root):
        job_id = "/".join(rel)
        try:
            if kind == "run":
                rows.append(_cli_row(rel, folder))
                continue
            if kind == "sweep":
                sweep_owner_id = sweep_owner(folder)
                if owner is not None and sweep_owner_id and sweep_owner_id != owner:
                    hidden += 1
                    continue
                rows += _sweep_rows(rel, folder, sweep_owner_id)
                continue
            ui, problem = read_ui(folder)
            if ui is None:
                rows.append(RunRow(job_id, job_id, "?", job_id, "?", "?", "?", DAMAGED, "?", None, None,
                                   _mtime(folder), "", problem or "ui.json cannot be read"))
                continue
            job_owner = _text(ui.get("owner"))
            if owner is not None and job_owner and job_owner != owner:
                hidden += 1
                continue
            rows += _job_rows(job_id, folder, ui, live)
        except OSError:
            continue
    rows.sort(key=lambda r: (r.created, r.ref), reverse=True)
    return rows, hidden


def _sweep_rows(rel: tuple, folder: Path, owner: str) -> list[RunRow]:
    """A sweep as one row (its state, finished/all runs, the mean final accuracy and ARI of its finished runs) and
    its runs' rows, each marked with the sweep (the Runs page lists them under it)."""
    from statistics import fmean

    from cfl_core.sweep.status import sweep_status

    from .sweep_owner import SWEEP_KINDS, read_sweep_ui, sweep_kind

    status = sweep_status(folder)
    if status is None:
        return []
    sweep_id = "/".join(rel)
    kind = sweep_kind(folder)
    runs = []
    for sub, run, _ in walk_run_folders(folder, markers=(CONFIG_FILE,), max_depth=MAX_DEPTH, accept=_listable):
        row = _cli_row((*rel, *sub), run)
        row.kind, row.owner, row.sweep, row.title = kind, owner, sweep_id, "/".join(sub)
        runs.append(row)
    done = [r for r in runs if r.status == FINISHED]

    def joined(values) -> str:
        values = sorted(set(values))
        return ", ".join(values[:4]) + (f" (+{len(values) - 4})" if len(values) > 4 else "") if values else "?"

    def mean(values) -> float | None:
        values = [v for v in values if v is not None]
        return fmean(values) if values else None

    created = _number(read_sweep_ui(folder).get("created")) or _mtime(folder)
    sweep = RunRow(ref=sweep_id, job=sweep_id, kind="sweep", title=f"{clean_label(status.name, sweep_id)} "
                   f"({SWEEP_KINDS[kind]})", algorithm=joined(r.algorithm for r in runs),
                   dataset=joined(r.dataset for r in runs), partition=joined(r.partition for r in runs),
                   status=status.listed_state, rounds=f"{status.finished}/{status.points} runs",
                   final_accuracy=mean(r.final_accuracy for r in done), final_ari=mean(r.final_ari for r in done),
                   created=created, owner=owner, problem="; ".join(status.problems)[:300])
    return [sweep, *runs]


def _mtime(folder: Path) -> float:
    try:
        return folder.stat().st_mtime
    except OSError:
        return 0.0


def _count_lines(path: Path) -> int:
    from cfl_core.files import count_lines

    return count_lines(path)  # a regular file only (a named pipe would block the listing), at most its read limit


def job_owner(root: Path, job_id: str) -> str | None:
    """The owner recorded for a job ("" = nobody's: a CLI run or batch), None when there is no such job."""
    folder = safe_folder(root, job_id)
    if folder is None:
        return None
    ui, _ = read_json_object(folder / UI_FILE)
    if ui is not None:
        return _text(ui.get("owner"))
    return "" if folder_kind(folder) in ("run", "batch") else None


def delete_job(root: Path, job_id: str) -> bool:
    """Remove a whole job folder: a dashboard job, a CLI run or a CLI batch, at any depth strictly inside
    root (never root itself, a folder that only groups others, anything reached through a symlink, or
    anything outside root). Whether the person asking may delete it is the caller's to check."""
    folder = safe_folder(root, job_id)
    if folder is None:
        return False
    root = Path(root).resolve()
    folder = folder.resolve()
    try:
        inside = folder.relative_to(root)
    except ValueError:
        return False
    if not inside.parts or folder_kind(folder) is None:
        return False
    shutil.rmtree(folder)
    with _cache_lock:
        for key in [k for k in _run_cache if k.startswith(str(folder))]:
            del _run_cache[key]
    return True


# -- exports ---------------------------------------------------------------------
def status_word(status: str) -> str:
    return {
        FINISHED: "finished", STOPPED: "stopped", FAILED: "failed", INTERRUPTED: "interrupted",
        ELSEWHERE: "running elsewhere", DIVERGED: "diverged", DAMAGED: "damaged",
    }.get(status, status)
