"""Put the sweeps' summary tables into README.md (`make tables` runs the sweeps, then this).

    python scripts/readme_tables.py [NAME ...]           # splice runs/readme/NAME/summary.md's table
    python scripts/readme_tables.py --check [NAME ...]   # only compare: print the cells that differ

Each README table made by a sweep follows a marker line `<!-- sweep: NAME -->` (NAME = the spec
sweeps/NAME.yaml, run into runs/readme/NAME). The table under the marker is replaced by the table
of the sweep folder's summary.md; nothing else in the README changes. With --check nothing is
written: every cell of the README's table is compared with the sweep's, row by row, and the
script exits 1 when any differs (or a sweep has runs not finished).
"""
from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
MARKER = re.compile(r"^<!-- sweep: ([A-Za-z0-9_.\-]+) -->$")


def table_lines(lines: list[str], start: int) -> tuple[int, int]:
    """(first, end) of the markdown table at or after line `start`."""
    first = start
    while first < len(lines) and not lines[first].startswith("|"):
        first += 1
    end = first
    while end < len(lines) and lines[end].startswith("|"):
        end += 1
    return first, end


def sweep_table(runs: Path, name: str) -> tuple[list[str], list[str]]:
    """(the table's lines, the lines under it that say a cell is not complete) of runs/NAME/summary.md."""
    text = (runs / name / "summary.md").read_text(encoding="utf-8").splitlines()
    first, end = table_lines(text, 0)
    notes = [line for line in text[end:] if line.startswith("- ")]
    return text[first:end], notes


def cells(line: str) -> list[str]:
    return [c.strip() for c in line.strip().strip("|").split("|")]


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("names", nargs="*", help="sweeps to splice (default: every marker in the README)")
    parser.add_argument("--check", action="store_true", help="compare only; write nothing")
    parser.add_argument("--readme", default=str(ROOT / "README.md"))
    parser.add_argument("--runs", default=str(ROOT / "runs" / "readme"), help="where the sweep folders are")
    args = parser.parse_args(argv)
    readme = Path(args.readme)
    lines = readme.read_text(encoding="utf-8").splitlines()
    markers = [(i, m.group(1)) for i, line in enumerate(lines) if (m := MARKER.match(line))]
    wanted = set(args.names) or {name for _, name in markers}
    missing = wanted - {name for _, name in markers}
    if missing:
        print(f"no '<!-- sweep: NAME -->' marker in {readme} for: {', '.join(sorted(missing))}", file=sys.stderr)
        return 2
    differs = False
    for i, name in reversed(markers):  # from the bottom, so earlier line numbers stay right
        if name not in wanted:
            continue
        new, notes = sweep_table(Path(args.runs), name)
        first, end = table_lines(lines, i + 1)
        old = lines[first:end]
        bad = bool(notes)
        if notes:
            print(f"{name}: runs not finished:\n  " + "\n  ".join(notes))
        if args.check:
            if len(old) != len(new):
                bad = True
                print(f"{name}: {len(old) - 2} rows in the README, {len(new) - 2} in the sweep")
            for row, (a, b) in enumerate(zip(old[2:], new[2:]), 1):
                for col, (x, y) in enumerate(zip(cells(a), cells(b))):
                    if x != y:
                        bad = True
                        print(f"{name} row {row} ({' | '.join(cells(b)[:2])}), column {cells(new[0])[col]!r}: "
                              f"README {x!r}, sweep {y!r}")
            if not bad:
                print(f"{name}: the README's table is the sweep's")
        else:
            lines[first:end] = new
            print(f"{name}: {len(new) - 2} rows")
        differs = differs or bad
    if not args.check:
        readme.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return 1 if differs else 0


if __name__ == "__main__":
    sys.exit(main())
