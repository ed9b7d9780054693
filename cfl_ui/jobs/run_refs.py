"""Where runs live, how jobs are named, and how a run is referred to in a URL.

A run reference is `JOB` (a single run, or a whole batch) or `JOB/UNIT` (one run
of a batch), where JOB may itself hold "/" for runs saved deeper under the runs
folder by the CLI (`compare --out runs/X` -> `X/fedavg`; a README table's sweep
-> `readme/digits-core/iid/seed0/clove`): at most MAX_PARTS parts in all, the
last one being the unit. Dashboard job ids end in 64 random bits so nobody can
guess another session's run from the URL of their own.
"""
from __future__ import annotations

import os
import re
import secrets
import time
from pathlib import Path

RUNS_ENV = "CFL_RUNS_DIR"
UI_FILE = "ui.json"  # what the dashboard writes beside the core's files in a job folder (jobs writes, store reads)
_PART = r"[A-Za-z0-9][A-Za-z0-9_.\-]{0,120}"
MAX_PARTS = 8
PART_RE = re.compile(rf"^{_PART}$")
REF_RE = re.compile(rf"^{_PART}(?:/{_PART}){{0,{MAX_PARTS - 1}}}$")


def runs_dir() -> Path:
    """The folder every run is written to: $CFL_RUNS_DIR, else ./runs."""
    return Path(os.environ.get(RUNS_ENV) or "runs").resolve()


def slug(text: str) -> str:
    out = re.sub(r"[^A-Za-z0-9_.\-]+", "-", str(text)).strip("-.")
    return out[:40] or "run"


def new_job_id(label: str) -> str:
    """e.g. 20261129-162610-clove-3f9c0a1b2d4e6f70 (sortable, readable, unguessable)."""
    return f"{time.strftime('%Y%m%d-%H%M%S')}-{slug(label)}-{secrets.token_hex(8)}"


def valid_part(name: str) -> bool:
    """One folder name a reference may carry (no "..", no separators, no leading dot)."""
    return bool(PART_RE.match(name)) and ".." not in name


def parse_ref(ref: str | None) -> tuple[str, str | None] | None:
    """(job id, unit name or None) for a well-formed reference, else None (never a path escape).

    Purely syntactic: "JOB" -> (JOB, None); "A/B/.../UNIT" -> ("A/B/...", UNIT)."""
    if not ref or not isinstance(ref, str):
        return None
    ref = ref.strip()
    if not REF_RE.match(ref) or ".." in ref:
        return None
    job, _, unit = ref.rpartition("/")
    return (job, unit) if job else (unit, None)


def ref_folder(root: Path, ref: str) -> Path | None:
    """The folder a reference names, strictly inside root (None for a bad reference or an escape)."""
    parsed = parse_ref(ref)
    if parsed is None:
        return None
    folder = Path(root) / ref.strip()
    try:
        inside = folder.resolve().relative_to(Path(root).resolve())
    except (ValueError, OSError):
        return None
    return folder if inside.parts else None
