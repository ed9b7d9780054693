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
"""
from __future__ import annotations

import csv
import io
import shutil
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from cfl_core import jsonio
from cfl_core.jsonio import read_json
from cfl_core.records import CONFIG_FILE, walk_run_folders

from .paths import UI_FILE, parse_ref, valid_part
from .snapshots import (ELSEWHERE, FAILED, FINISHED, INTERRUPTED, LIVE, PENDING, STOPPED, JobSnapshot,
                        UnitSnapshot)

STILL_WRITING_SECONDS = 45.0  # an unfinished run whose rounds.jsonl changed this recently is still running
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
    for name in ("rounds.jsonl", "summary.json", "config.json", UI_FILE):
        try:
            st = (folder / name).stat()
            out.append((st.st_mtime_ns, st.st_size))
        except OSError:
            out.append(None)
    return tuple(out)


_cache_lock = threading.Lock()
_run_cache: dict = {}  # folder -> (stamp, SavedRun)


def load_saved(folder: Path):
    """cfl_core.records.load_run, cached until the folder's files change."""
    from cfl_core.records import load_run

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


def _unfinished_status(folder: Path) -> str:
    """A run without a summary: still being written by another process, or its process died."""
    for name in ("rounds.jsonl", "config.json"):
        try:
            age = time.time() - (folder / name).stat().st_mtime
        except OSError:
            continue
        return ELSEWHERE if age < STILL_WRITING_SECONDS else INTERRUPTED
    return INTERRUPTED


def _disk_status(saved, folder: Path) -> str:
    return saved.status if saved.status != "unfinished" else _unfinished_status(folder)


def load_unit(folder: Path, ref: str, name: str = "", label: str = "", tags: dict | None = None,
              ui_unit: dict | None = None) -> UnitSnapshot:
    ui_unit = ui_unit or {}
    config = ui_unit.get("config") or {}
    if (folder / "config.json").exists():
        saved = load_saved(folder)
        status = _disk_status(saved, folder)
        if ui_unit.get("status") == FAILED:
            status = FAILED
        return UnitSnapshot(
            ref=ref, name=name, label=label or saved.meta.get("algorithm_label") or saved.config.get("algorithm", "?"),
            tags=dict(tags or {}), config=dict(saved.config), status=status, records=tuple(saved.records),
            total_rounds=int(saved.config.get("rounds") or len(saved.records)),
            summary=saved.summary if saved.summary.get("status") != "unfinished" else None,
            meta=dict(saved.meta), error=ui_unit.get("error"), traceback=ui_unit.get("traceback"),
            folder=str(folder),
        )
    # Never started (stopped before its turn) or failed before writing anything.
    status = ui_unit.get("status") or INTERRUPTED
    if status in LIVE or status == PENDING:
        status = INTERRUPTED
    return UnitSnapshot(ref=ref, name=name, label=label or config.get("algorithm", "?"), tags=dict(tags or {}),
                        config=config, status=status, records=(), total_rounds=int(config.get("rounds") or 0),
                        summary=None, meta={}, error=ui_unit.get("error"), traceback=ui_unit.get("traceback"),
                        folder=None)


def _child_runs(folder: Path) -> list[Path]:
    """The run folders (with config.json) directly inside folder, sorted by name."""
    return sorted((run for _, run, _ in walk_run_folders(folder, accept=_listable)), key=lambda p: p.name)


def folder_kind(folder: Path) -> str | None:
    """"job" (dashboard, ui.json), "run" (CLI run, config.json), "batch" (CLI batch), else None."""
    folder = Path(folder)
    if not folder.is_dir():
        return None
    if (folder / UI_FILE).is_file():
        return "job"
    if (folder / CONFIG_FILE).is_file():
        return "run"
    return "batch" if _child_runs(folder) else None


def combined_status(statuses: list[str]) -> str:
    """One status for a batch read from disk, from its units' statuses."""
    if not statuses:
        return INTERRUPTED
    if ELSEWHERE in statuses:
        return ELSEWHERE
    if all(s == FINISHED for s in statuses):
        return FINISHED
    if all(s == FAILED for s in statuses):
        return FAILED
    for s in (INTERRUPTED, STOPPED, FAILED):
        if s in statuses:
            return s
    return next(s for s in statuses if s != FINISHED)


def _created(folder: Path) -> float:
    try:
        return (folder / CONFIG_FILE).stat().st_mtime
    except OSError:
        return 0.0


def load_job(root: Path, job_id: str) -> JobSnapshot | None:
    """A job read from disk (dashboard job, CLI run folder or CLI batch), or None when there is none."""
    if parse_ref(job_id) is None:
        return None
    folder = Path(root) / job_id
    ui = read_json(folder / UI_FILE)
    if ui is None:
        if (folder / CONFIG_FILE).exists():
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
    units = []
    for u in ui.get("units", []):
        name = u.get("name", "")
        unit_folder = folder if ui.get("single") else folder / name
        ref = job_id if ui.get("single") else f"{job_id}/{name}"
        units.append(load_unit(unit_folder, ref, name, u.get("label", ""), u.get("tags"), u))
    statuses = [u.status for u in units]
    status = ui.get("status")
    if status in LIVE or status is None:  # the process that ran it is gone (or runs elsewhere)
        status = ELSEWHERE if ELSEWHERE in statuses else INTERRUPTED
    failed = [u for u in units if u.error]
    error = ui.get("error")
    if error is None and failed:
        error = failed[0].error if len(units) == 1 else f"{len(failed)} of {len(units)} runs failed; first: {failed[0].error}"
    return JobSnapshot(job_id, ui.get("kind", "?"), ui.get("title", job_id), status, ui.get("schedule", "lockstep"),
                       tuple(units), None, error, failed[0].traceback if failed else None,
                       ui.get("created") or 0.0, ui.get("started"), ui.get("ended"), 0, True, ui.get("owner", ""))


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


def _summary_row(folder: Path) -> tuple[dict, dict]:
    config = read_json(folder / "config.json") or {}
    summary = read_json(folder / "summary.json") or {}
    return config, summary


def _walk(root: Path):
    """(relative parts, folder, "job" | "run") for every dashboard job and CLI run folder under root.

    The core's walk (cfl_core.records.walk_run_folders): at most MAX_DEPTH levels down, skipping
    hidden folders and names a reference cannot carry, never descending into a job or run folder
    (nor through a symlink). A folder with ui.json is a job even when it also holds config.json."""
    kinds = {UI_FILE: "job", CONFIG_FILE: "run"}
    for rel, folder, marker in walk_run_folders(root, markers=tuple(kinds), max_depth=MAX_DEPTH, accept=_listable):
        yield rel, folder, kinds[marker]


def _row(ref: str, job: str, kind: str, title: str, unit_folder: Path, config: dict, summary: dict, status: str,
         created: float, owner: str) -> RunRow:
    done = summary.get("rounds_completed")
    if done is None:
        done = _count_lines(unit_folder / "rounds.jsonl")
    return RunRow(
        ref=ref, job=job, kind=kind, title=title, algorithm=config.get("algorithm", "?"),
        dataset=config.get("dataset", "?"), partition=config.get("partition", "?"), status=status,
        rounds=f"{done}/{config.get('rounds', '?')}", final_accuracy=summary.get("final_accuracy"),
        final_ari=summary.get("final_ari"), created=created, owner=owner,
    )


def _cli_row(rel: tuple, folder: Path) -> RunRow:
    ref = "/".join(rel)
    config, summary = _summary_row(folder)
    status = summary.get("status") or _unfinished_status(folder)
    try:
        created = folder.stat().st_mtime
    except OSError:
        created = 0.0
    return _row(ref, "/".join(rel[:-1]) or ref, "cli", ref, folder, config, summary, status, created, "")


def _job_rows(job_id: str, folder: Path, ui: dict, live: dict[str, str]) -> list[RunRow]:
    created = ui.get("created") or folder.stat().st_mtime
    kind = ui.get("kind", "cli")
    title = ui.get("title", job_id)
    single = ui.get("single")
    rows = []
    for u in ui.get("units") or [{"name": ""}]:
        unit_folder = folder if single else folder / u.get("name", "")
        config, summary = _summary_row(unit_folder)
        config = config or u.get("config") or {}
        status = summary.get("status")
        if status is None:
            status = live.get(job_id) or u.get("status") or "unfinished"
            if job_id not in live and status in (*LIVE, PENDING, "unfinished"):
                status = INTERRUPTED
        rows.append(_row(job_id if single else f"{job_id}/{u.get('name')}", job_id, kind,
                         title if single else f"{title} · {u.get('label') or u.get('name')}", unit_folder,
                         config, summary, status, created, ui.get("owner", "")))
    return rows


def list_rows(root: Path, owner: str | None, live: dict[str, str] | None = None) -> tuple[list[RunRow], int]:
    """Rows of every run this owner may see (its own and the CLI's, at any depth), newest first, and how
    many are hidden.

    owner None shows everything. live: job id -> status for jobs running in this process.
    """
    root = Path(root)
    live = live or {}
    rows: list[RunRow] = []
    hidden = 0
    if not root.exists():
        return rows, 0
    for rel, folder, kind in _walk(root):
        if kind == "run":
            rows.append(_cli_row(rel, folder))
            continue
        ui = read_json(folder / UI_FILE)
        if not isinstance(ui, dict):
            continue
        job_owner = ui.get("owner", "")
        if owner is not None and job_owner and job_owner != owner:
            hidden += 1
            continue
        try:
            rows += _job_rows("/".join(rel), folder, ui, live)
        except OSError:
            continue
    rows.sort(key=lambda r: (r.created, r.ref), reverse=True)
    return rows, hidden


def _count_lines(path: Path) -> int:
    try:
        with open(path, "rb") as fh:
            return sum(1 for _ in fh)
    except OSError:
        return 0


def job_owner(root: Path, job_id: str) -> str | None:
    """The owner recorded for a job ("" = nobody's: a CLI run or batch), None when there is no such job."""
    if parse_ref(job_id) is None:
        return None
    folder = Path(root) / job_id
    ui = read_json(folder / UI_FILE)
    if ui is not None:
        return ui.get("owner", "")
    return "" if folder_kind(folder) in ("run", "batch") else None


def delete_job(root: Path, job_id: str) -> bool:
    """Remove a whole job folder: a dashboard job, a CLI run or a CLI batch, at any depth strictly inside
    root (never root itself, a folder that only groups others, a symlink, or anything outside root)."""
    if parse_ref(job_id) is None:
        return False
    root = Path(root).resolve()
    path = root / job_id
    if path.is_symlink():
        return False
    folder = path.resolve()
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
METRIC_COLUMNS = ("round", "phase", "accuracy", "weighted_accuracy", "loss", "train_loss", "ari", "nmi",
                  "models_in_use", "participants", "bytes_down", "bytes_up", "seconds")


def _scalar_extras(records) -> list[str]:
    keys: dict[str, None] = {}
    for r in records:
        for k, v in (r.extras or {}).items():
            if isinstance(v, (int, float)) and not isinstance(v, bool):
                keys.setdefault(k, None)
    return list(keys)


def metrics_csv(records, extra_columns: dict | None = None) -> str:
    """Per-round metrics as CSV (one row per round; scalar extras as extra columns)."""
    extras = _scalar_extras(records)
    fixed = dict(extra_columns or {})
    buf = io.StringIO()
    w = csv.writer(buf)
    w.writerow([*fixed, *METRIC_COLUMNS, *extras])
    for r in records:
        row = []
        for c in METRIC_COLUMNS:
            v = len(r.participants) if c == "participants" else getattr(r, c)
            row.append("" if v is None else v)
        row += ["" if r.extras.get(k) is None else r.extras.get(k) for k in extras]
        w.writerow([*fixed.values(), *row])
    return buf.getvalue()


def status_word(status: str) -> str:
    return {
        FINISHED: "finished", STOPPED: "stopped", FAILED: "failed", INTERRUPTED: "interrupted",
        ELSEWHERE: "running elsewhere",
    }.get(status, status)
