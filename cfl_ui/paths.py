"""Where runs live, how jobs are named, and how a run is referred to in a URL.

A run reference is `JOB` (a single run, or a whole batch) or `JOB/UNIT` (one run
of a batch). Job ids end in 64 random bits so nobody can guess another
session's run from the URL of their own.
"""
from __future__ import annotations

import os
import re
import secrets
import time
from pathlib import Path

RUNS_ENV = "CFL_RUNS_DIR"
_PART = r"[A-Za-z0-9][A-Za-z0-9_.\-]{0,120}"
REF_RE = re.compile(rf"^({_PART})(?:/({_PART}))?$")


def runs_dir() -> Path:
    """The folder every run is written to: $CFL_RUNS_DIR, else ./runs."""
    return Path(os.environ.get(RUNS_ENV) or "runs").resolve()


def slug(text: str) -> str:
    out = re.sub(r"[^A-Za-z0-9_.\-]+", "-", str(text)).strip("-.")
    return out[:40] or "run"


def new_job_id(label: str) -> str:
    """e.g. 20261129-162610-clove-3f9c0a1b2d4e6f70 (sortable, readable, unguessable)."""
    return f"{time.strftime('%Y%m%d-%H%M%S')}-{slug(label)}-{secrets.token_hex(8)}"


def parse_ref(ref: str | None) -> tuple[str, str | None] | None:
    """(job id, unit name or None) for a well-formed reference, else None (never a path escape)."""
    if not ref or not isinstance(ref, str):
        return None
    m = REF_RE.match(ref.strip())
    if not m or ".." in ref:
        return None
    return m.group(1), m.group(2)


def ref_folder(root: Path, ref: str) -> Path | None:
    parsed = parse_ref(ref)
    if parsed is None:
        return None
    job, unit = parsed
    folder = (root / job / unit) if unit else (root / job)
    try:
        folder.resolve().relative_to(root.resolve())
    except ValueError:
        return None
    return folder
