"""Refuse to start an install that cannot fit: one line naming the folder, the space needed and the space free.

Why: the pinned torch build for x86_64 brings its CUDA libraries (about 5.6 GB in .venv with everything else);
pip, out of space half way, prints a long traceback ending in "[Errno 28] No space left on device" and leaves
a half-filled environment. Usage: python3 scripts/need_disk.py VENV GIGABYTES"""
from __future__ import annotations

import os
import shutil
import sys


def _size(folder: str) -> int:
    total = 0
    for root, _, files in os.walk(folder):
        for name in files:
            try:
                total += os.lstat(os.path.join(root, name)).st_size
            except OSError:
                pass
    return total


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print("usage: need_disk.py VENV GIGABYTES", file=sys.stderr)
        return 2
    venv, wanted = argv[0], float(argv[1]) * 2**30
    probe = os.path.abspath(venv)
    while not os.path.exists(probe):
        probe = os.path.dirname(probe)
    need = max(0.0, wanted - (_size(venv) if os.path.isdir(venv) else 0))  # a partial install counts
    free = shutil.disk_usage(probe).free
    if free < need:
        print(f"make: installing into {venv} needs about {need / 2**30:.1f} GB free on the disk holding {probe}; "
              f"{free / 2**30:.1f} GB is free. Free some space (or pick another folder with VENV=...) and run it "
              "again.", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
