"""Where data files are looked for, in order.

The order is part of the contract: an explicit `data_dir`, then $CFL_DATA_DIR,
then ./data (relative to the current directory, resolved when asked).
"""
from __future__ import annotations

import os

DATA_DIR_ENV = "CFL_DATA_DIR"


def base_dirs(data_dir: str | None = None) -> list[str]:
    """The folders to search, most specific first, as absolute paths without duplicates."""
    candidates = []
    if data_dir:
        candidates.append(data_dir)
    env = os.environ.get(DATA_DIR_ENV)
    if env:
        candidates.append(env)
    candidates.append(os.path.join(os.getcwd(), "data"))
    seen, ordered = set(), []
    for path in candidates:
        path = os.path.abspath(os.path.expanduser(path))
        if path not in seen:
            seen.add(path)
            ordered.append(path)
    return ordered


def download_dir(data_dir: str | None = None) -> str:
    """Where a download goes: the first of data_dir, $CFL_DATA_DIR, ./data."""
    return base_dirs(data_dir)[0]
