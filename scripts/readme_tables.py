"""Put the sweeps' summary tables into the manual's results page, docs/results.md (`make tables` runs the sweeps,
then this; the name is from when the tables lived in the README).

    python scripts/readme_tables.py [NAME ...]           # splice runs/readme/NAME/summary.md's table
    python scripts/readme_tables.py --check [NAME ...]   # only compare: print the cells that differ

Each results table made by a sweep follows a marker line `<!-- sweep: NAME -->` (NAME = the spec
sweeps/NAME.yaml, run into runs/readme/NAME). The table under the marker is replaced by the table
of the sweep folder's summary.md; nothing else in the page changes.

`<!-- sweep: NAME pivot=MEASURE -->` (MEASURE: final_accuracy or final_ari) puts instead a pivot of the
sweep's results.csv: a row per algorithm, a column per partition, mean ± std over the seeds.
`columns=FIELD` pivots by another swept field than the partition (e.g. dropout_rate, dp_noise; the header then
says FIELD=value). MEASURE may also be a headline of the runs' summary.json that results.csv does not hold
(SUMMARY_MEASURES: dp_epsilon, the privacy spent): read from each finished run's folder, the cell its mean over
the seeds, "-" where no run has it (no noise: no privacy guarantee).
`with=NAME2,NAME3` adds the rows of other sweeps to the pivot (one table over several specs, e.g. a column
per structure). A pivot reads a sweep folder as it is now (the spec its sweep.json holds and its run folders), so
a sweep still running or stopped part way gives its finished runs, the others not finished; one not started yet
is read from sweeps/NAME.yaml. A cell over fewer runs than the spec asks says so ("[1 of 3 runs]").
`reference=FILE` (a CSV under the repository: partition, algorithm, the measure, where) adds a
"paper" column after each partition with the reference's figure, "—" where it has none; a partition for which
the reference has no figure at all gets no such column (a column of dashes says nothing the text cannot). Every
reference row must say where its figure comes from (`where`) and give the measure as a number (accuracy as a
fraction in [0, 1]); a row that does not is refused with its line number. With --check nothing is
written: every cell of the page's table is compared with the sweep's, row by row, and the
script exits 1 when any differs (or a sweep has runs not finished).
"""
from __future__ import annotations

import argparse
import csv
import json
import math
import re
import statistics
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from cfl_core.files import TABLE_LIMIT, read_text  # noqa: E402
from cfl_core.sweep.status import read_results_file  # noqa: E402
from cfl_core.sweep.tables import MISSING_FIGURE, PIVOT_MEASURES, pivot_table  # noqa: E402

RESULTS_PAGE = ROOT / "docs" / "results.md"
MARKER = re.compile(r"^<!-- sweep: ([A-Za-z0-9_.\-]+)((?: [a-z]+=[A-Za-z0-9_.,/\-]+)*) -->$")
PARAMETERS = ("pivot", "reference", "columns", "with")
SPECS = ROOT / "sweeps"
SWEEP_NAME = re.compile(r"^[A-Za-z0-9_\-][A-Za-z0-9_.\-]*$")


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
    text, problem = read_text(runs / name / "summary.md", TABLE_LIMIT)
    if text is None:
        raise SystemExit(f"sweep {name}: {problem or 'summary.md is missing'} (in {runs / name})")
    text = text.splitlines()
    first, end = table_lines(text, 0)
    notes = [line for line in text[end:] if line.startswith("- ")]
    return text[first:end], notes


def marker_parameters(text: str) -> dict[str, str]:
    """{'pivot': ..., 'reference': ...} of a marker's ` key=value` tail (unknown keys refused)."""
    out = dict(part.split("=", 1) for part in text.split())
    unknown = set(out) - set(PARAMETERS)
    if unknown:
        raise SystemExit(f"sweep marker: unknown {', '.join(sorted(unknown))} (allowed: {', '.join(PARAMETERS)})")
    return out


REFERENCE_COLUMNS = ("partition", "algorithm", "where")
MEASURE_RANGES = {"final_accuracy": (0.0, 1.0), "final_ari": (-1.0, 1.0)}


def read_reference(path: Path, measure: str) -> dict[tuple[str, str], float]:
    """{(partition, algorithm): figure} of a reference CSV's rows that give the measure (rows without it are
    figures of another measure). A missing file or column, a figure that is not a number in the measure's
    range, a row without its source or a (partition, algorithm) given twice stops with one line saying so."""
    if not path.is_file():
        raise SystemExit(f"reference {path}: no such file")
    low, high = MEASURE_RANGES.get(measure, (float("-inf"), float("inf")))
    with path.open(encoding="utf-8", newline="") as f:
        reader = csv.DictReader(f)
        missing = [c for c in (*REFERENCE_COLUMNS, measure) if c not in (reader.fieldnames or [])]
        if missing:
            raise SystemExit(f"reference {path}: no column {', '.join(missing)} "
                             f"(header: {', '.join(reader.fieldnames or []) or 'empty'})")
        out: dict[tuple[str, str], float] = {}
        for line, row in enumerate(reader, start=2):
            text = (row.get(measure) or "").strip()
            if not text:
                continue
            try:
                figure = float(text)
            except ValueError:
                figure = float("nan")
            if not low <= figure <= high:  # also refuses nan
                raise SystemExit(f"reference {path} line {line}: {measure} {text!r} is not a number in "
                                 f"[{low:g}, {high:g}]" + (" (accuracy as a fraction)" if measure == "final_accuracy"
                                                           else ""))
            if not (row.get("where") or "").strip():
                raise SystemExit(f"reference {path} line {line}: no 'where' (the figure's source)")
            key = ((row.get("partition") or "").strip(), (row.get("algorithm") or "").strip())
            if key in out:
                raise SystemExit(f"reference {path} line {line}: {key[0]}, {key[1]} given twice")
            out[key] = figure
    return out


def drop_empty_reference_columns(lines: list[str]) -> list[str]:
    """The pivot's lines without the "paper" columns in which no row has a figure."""
    rows = [cells(line) for line in lines]
    header, body = rows[0], rows[2:]
    keep = [i for i, name in enumerate(header)
            if name != "paper" or any(r[i] != MISSING_FIGURE for r in body)]
    if len(keep) == len(header):
        return lines
    out = ["| " + " | ".join(header[i] for i in keep) + " |", "|" + "---|" * len(keep)]
    return out + ["| " + " | ".join(r[i] for i in keep) + " |" for r in body]


# headlines of a run's summary.json that results.csv has no column for: a pivot of one reads each run's folder
SUMMARY_MEASURES = ("dp_epsilon",)


def summary_measure(runs: Path, name: str, rows: list[dict], measure: str) -> None:
    """In place: each finished row's `measure` from its run folder's summary.json (None where it has none). A
    summary that cannot be read, or whose figure is not a finite number, stops with one line naming it."""
    for row in rows:
        row[measure] = None
        if row.get("status") != "finished":
            continue
        path = runs / row.get("_sweep", name) / row["folder"] / "summary.json"
        text, problem = read_text(path)
        try:
            summary = json.loads(text) if text is not None else None
        except ValueError as exc:
            problem = f"not JSON ({exc})"
            summary = None
        if not isinstance(summary, dict):
            raise SystemExit(f"sweep {name}: {path}: {problem or 'missing'}")
        value = summary.get(measure)
        if value is None:
            continue
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
            raise SystemExit(f"sweep {name}: {path}: {measure} {str(value)[:40]!r} is not a finite number")
        row[measure] = float(value)


def figure_text(value: float) -> str:
    """A headline such as epsilon: three significant digits, thousands separated (6.16, 343, 33,344)."""
    return f"{value:,.0f}" if abs(value) >= 100 else f"{value:.3g}"


def summary_pivot(rows: list[dict], measure: str, column_field: str) -> tuple[str, list[str]]:
    """pivot_table's layout for a summary headline: the cell is its mean over the finished runs that have it."""
    row_values = list(dict.fromkeys(r["algorithm"] for r in rows))
    column_values = list(dict.fromkeys(r[column_field] for r in rows))
    header = ["algorithm", *column_values]
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    notes = []
    for a in row_values:
        out = [a]
        for c in column_values:
            cell = [r for r in rows if r["algorithm"] == a and r[column_field] == c]
            done = [r for r in cell if r.get("status") == "finished"]
            if len(done) < len(cell):
                notes.append(f"{c}, {a}: {len(cell) - len(done)} of {len(cell)} runs not finished")
            present = [r[measure] for r in done if r.get(measure) is not None]
            text = figure_text(statistics.mean(present)) if present else "-"
            out.append(text + (f" [{len(done)} of {len(cell)} runs]" if present and len(done) < len(cell) else ""))
        lines.append("| " + " | ".join(out) + " |")
    return "\n".join(lines) + "\n", notes


def name_columns(lines: list[str], field: str) -> list[str]:
    """The header's value columns as FIELD=value (a column per partition keeps the partition's bare name)."""
    if field == "partition":
        return lines
    header = cells(lines[0])
    named = [header[0]] + [h if h == "paper" else f"{field}={h}" for h in header[1:]]
    return ["| " + " | ".join(named) + " |", *lines[1:]]


def sweep_rows(runs: Path, name: str, column: str) -> list[dict]:
    """results.csv's rows of runs/NAME, as the folder holds them now: from the spec in its sweep.json (what ran)
    and its run folders, read only, so a sweep still running or stopped part way (whose results.csv is missing or
    older than its runs) gives its finished runs and the others not finished; a folder without sweep.json: its
    results.csv, or when it has none the spec sweeps/NAME.yaml with every point not finished (a sweep not started).
    A `column` field the sweep does not sweep is taken from its spec's base (one spec per structure)."""
    from cfl_core.errors import ConfigError
    from cfl_core.run_reader import read_json_object
    from cfl_core.sweep.runner import rows_now
    from cfl_core.sweep.spec import SweepSpec

    folder = runs / name
    ran, problem = read_json_object(folder / "sweep.json")
    if problem:
        raise SystemExit(f"sweep {name}: {problem} (in {folder})")
    rows, problems, spec = None, [], None
    try:
        if ran is not None:
            spec = SweepSpec.from_dict(ran.get("spec"))
            rows, problems = rows_now(spec, folder)
        else:
            rows, problems = read_results_file(folder)  # a regular file only, bounded; a damaged one in one line
            if (SPECS / f"{name}.yaml").is_file() and (rows is None and not problems or rows and column not in rows[0]):
                spec = SweepSpec.from_file(SPECS / f"{name}.yaml")
                if rows is None:
                    rows, problems = rows_now(spec, folder)
    except (ConfigError, TypeError, AttributeError) as exc:  # a sweep.json whose spec is not one
        raise SystemExit(f"sweep {name}: its spec cannot be read ({exc})") from None
    if rows is None or problems:
        more = f" (and {len(problems) - 1} more)" if len(problems) > 1 else ""
        raise SystemExit(f"sweep {name}: {problems[0] if problems else 'results.csv is missing'}{more} "
                         f"(in {folder})")
    fixed = spec.base.get(column) if spec is not None else None
    for row in rows:
        row["_sweep"] = name
        if column not in row and fixed is not None:
            row[column] = str(fixed)
    return rows


def pivot_lines(runs: Path, name: str, parameters: dict[str, str]) -> tuple[list[str], list[str]]:
    """(the pivot table's lines, notes on cells not complete) of runs/NAME/results.csv, and of the sweeps
    `with=` names after it (comma-separated: one table over several sweeps, e.g. a column per spec)."""
    measure = parameters["pivot"]
    column = parameters.get("columns", "partition")
    if measure not in (*PIVOT_MEASURES, *SUMMARY_MEASURES):
        raise SystemExit(f"sweep {name}: pivot={measure}: one of {', '.join((*PIVOT_MEASURES, *SUMMARY_MEASURES))}")
    names = [name, *parameters.get("with", "").split(",")] if "with" in parameters else [name]
    bad = [n for n in names if not SWEEP_NAME.match(n)]
    if bad:  # a name is a folder under --runs and a spec under sweeps/: never a path that leaves them
        raise SystemExit(f"sweep {name}: with={parameters['with']}: {bad[0]!r} is not a sweep's name "
                         "(letters, digits, '_', '-', '.', not starting with '.'; names separated by commas)")
    rows = [row for n in dict.fromkeys(names) for row in sweep_rows(runs, n, column)]
    if rows and column not in rows[0]:
        raise SystemExit(f"sweep {name}: columns={column}: not a swept field of its results.csv")
    if measure in SUMMARY_MEASURES:
        if "reference" in parameters:
            raise SystemExit(f"sweep {name}: reference= goes with pivot=final_accuracy or final_ari only")
        summary_measure(runs, name, rows, measure)
        table, notes = summary_pivot(rows, measure, column)
        return name_columns(table.splitlines(), column), [f"- {n}" for n in notes]
    reference = read_reference(ROOT / parameters["reference"], measure) if "reference" in parameters else None
    table, notes = pivot_table(rows, measure, column_field=column, reference=reference)
    lines = table.splitlines()
    lines = drop_empty_reference_columns(lines) if reference is not None else lines
    return name_columns(lines, column), [f"- {n}" for n in notes]


def cells(line: str) -> list[str]:
    return [c.strip() for c in line.strip().strip("|").split("|")]


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("names", nargs="*", help="sweeps to splice (default: every marker in the page)")
    parser.add_argument("--check", action="store_true", help="compare only; write nothing")
    parser.add_argument("--page", "--readme", dest="readme", default=str(RESULTS_PAGE),
                        help="the markdown file holding the markers (default: docs/results.md)")
    parser.add_argument("--runs", default=str(ROOT / "runs" / "readme"), help="where the sweep folders are")
    args = parser.parse_args(argv)
    readme = Path(args.readme)
    lines = readme.read_text(encoding="utf-8").splitlines()
    markers = [(i, m.group(1), marker_parameters(m.group(2))) for i, line in enumerate(lines)
               if (m := MARKER.match(line))]
    wanted = set(args.names) or {name for _, name, _ in markers}
    missing = wanted - {name for _, name, _ in markers}
    if missing:
        print(f"no '<!-- sweep: NAME -->' marker in {readme} for: {', '.join(sorted(missing))}", file=sys.stderr)
        return 2
    differs = False
    for i, name, parameters in reversed(markers):  # from the bottom, so earlier line numbers stay right
        if name not in wanted:
            continue
        if "pivot" in parameters:
            new, notes = pivot_lines(Path(args.runs), name, parameters)
        else:
            new, notes = sweep_table(Path(args.runs), name)
        first, end = table_lines(lines, i + 1)
        old = lines[first:end]
        bad = bool(notes)
        if notes:
            print(f"{name}: runs not finished:\n  " + "\n  ".join(notes))
        if args.check:
            if len(old) != len(new):
                bad = True
                print(f"{name}: {len(old) - 2} rows in the page, {len(new) - 2} in the sweep")
            for row, (a, b) in enumerate(zip(old[2:], new[2:]), 1):
                for col, (x, y) in enumerate(zip(cells(a), cells(b))):
                    if x != y:
                        bad = True
                        print(f"{name} row {row} ({' | '.join(cells(b)[:2])}), column {cells(new[0])[col]!r}: "
                              f"page {x!r}, sweep {y!r}")
            if not bad:
                print(f"{name}: the page's table is the sweep's")
        else:
            lines[first:end] = new
            print(f"{name}: {len(new) - 2} rows")
        differs = differs or bad
    if not args.check:
        readme.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return 1 if differs else 0


if __name__ == "__main__":
    sys.exit(main())
