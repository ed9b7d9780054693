"""A sweep's tables: results.csv (a row per run) and summary.md (mean ± std over seeds per cell).

A cell is a combination of the swept fields other than `seed`; the summary has today's seed-table
columns: final accuracy (%), final test loss, final ARI, how many seeds end with ARI = 1, and the
median first round with ARI >= 0.9 over the seeds that reach it ("n/a" in all three where no run
has an ARI: an algorithm without clusters, or clients without true ones). Only finished runs enter the
means; a cell with failed or missing runs says so under the table.
"""
from __future__ import annotations

import csv
import io
import math
import re
import statistics
from typing import Any, Iterable

from .spec import value_text

SEED = "seed"
MEASURES = ["final_accuracy", "best_accuracy", "reported_accuracy", "final_loss", "final_ari", "first_round_ari_0_9",
            "mb_sent", "seconds"]
REPORTED_HEADER = "reported accuracy (%)"
SUMMARY_HEADER = ["final accuracy (%)", "final test loss", "final ARI", "ARI = 1",
                  "first round with ARI>=0.9 (median, rounds count from 0)"]


def protocol_note(protocols: list[str]) -> str:
    """Which reporting protocol(s) the table's accuracy follows (cfl_core.protocols)."""
    from ..protocols import PROTOCOL_TEXT

    return ("Accuracy protocol: " + "; ".join(f"`{p}`, {PROTOCOL_TEXT.get(p, p)}" for p in protocols)
            + ("" if protocols == ["clove"] else " (the reported accuracy column)"))


def mean_std(values: Iterable[float | None], scale: float = 1.0, digits: int = 2, missing: str = "-") -> str:
    """'m ± s' over the values given (None left out); one value alone; `missing` for none."""
    values = [v * scale for v in values if v is not None]
    if not values:
        return missing
    if len(values) == 1:
        return f"{values[0]:.{digits}f}"
    return f"{statistics.mean(values):.{digits}f} ± {statistics.stdev(values):.{digits}f}"


def perfect(summary: dict) -> bool:
    """Final ARI = 1: the clustering ends exactly right."""
    ari = summary.get("final_ari")
    return ari is not None and ari > 1 - 1e-9


NOT_APPLICABLE = "n/a"


def ari_applies(summaries: list[dict]) -> bool:
    """False when no run has an ARI: an algorithm that forms no clusters, or clients with no true clusters."""
    return any(s.get("final_ari") is not None for s in summaries)


def first_round_text(summaries: list[dict]) -> str:
    firsts = [s["first_round_ari_0_9"] for s in summaries if s.get("first_round_ari_0_9") is not None]
    if not firsts:
        return "never"
    return f"{statistics.median(firsts):g} ({len(firsts)}/{len(summaries)} reach it)"


def row_of(point, marker: dict | None, summary: dict | None) -> dict[str, Any]:
    s = summary or {}
    total = s.get("total_bytes")
    return {
        "key": point.key, "folder": point.folder, "status": (marker or {}).get("status", "missing"),
        **{name: value_text(v) if isinstance(v, (dict, bool)) or v is None else v for name, v in point.values.items()},
        "final_accuracy": s.get("final_accuracy"), "best_accuracy": s.get("best_accuracy"),
        "reported_accuracy": s.get("reported_accuracy"), "protocol": s.get("protocol"),
        "final_loss": s.get("final_loss"), "final_ari": s.get("final_ari"),
        "first_round_ari_0_9": s.get("first_round_ari_0_9"),
        "mb_sent": round(total / 1e6, 4) if total is not None else None,
        "seconds": round(s["total_seconds"], 3) if s.get("total_seconds") is not None else None,
        # which training path and how many threads: their records differ in the last digits (engine/paths.py)
        "training_path": s.get("training_path"), "threads": s.get("threads"),
        "error": (marker or {}).get("error"),
    }


def results_csv(swept: list[str], rows: list[dict]) -> str:
    columns = ["key", "folder", "status", *swept, *MEASURES, "protocol", "training_path", "threads", "error"]
    buf = io.StringIO()
    writer = csv.DictWriter(buf, fieldnames=columns, extrasaction="ignore", lineterminator="\n")
    writer.writeheader()
    for row in rows:
        writer.writerow({k: ("" if row.get(k) is None else row.get(k)) for k in columns})
    return buf.getvalue()


def algorithm_label(config) -> str:
    """The algorithm and the options it was given, e.g. 'clove, sqrt_losses=true'."""
    given = ", ".join(f"{k}={value_text(v)}" for k, v in sorted(config.options.items()))
    return config.algorithm + (f", {given}" if given else "")


def cell_columns(swept: list[str]) -> list[str]:
    """partition first (as the seed tables), the other swept fields, the algorithm (with its options) last."""
    others = [n for n in swept if n not in (SEED, "partition", "algorithm", "options") and not n.startswith("options.")]
    return ["partition", *others, "algorithm"]


def _cell_value(point, column: str) -> str:
    if column == "algorithm":
        return algorithm_label(point.config)
    if column in point.values:
        return value_text(point.values[column])
    return value_text(getattr(point.config, column))


def summary_table(swept: list[str], points: list, summaries: dict[str, dict | None],
                  statuses: dict[str, str]) -> tuple[str, list[str]]:
    """(the markdown table, notes on cells with runs not finished), cells in the points' order."""
    columns = cell_columns(swept)
    cells: dict[tuple, list] = {}
    for p in points:
        cells.setdefault(tuple(_cell_value(p, c) for c in columns), []).append(p)
    # a reported-accuracy column only where a run reports another paper's protocol than `clove` (whose measure
    # is the final accuracy column itself)
    protocols = {(summaries.get(p.key) or {}).get("protocol") or "clove" for p in points}
    header = SUMMARY_HEADER + ([REPORTED_HEADER] if protocols - {"clove"} else [])
    lines = ["| " + " | ".join(columns + header) + " |", "|" + "---|" * (len(columns) + len(header))]
    notes = []
    for cell, members in cells.items():
        done = [summaries[p.key] for p in members if statuses.get(p.key) == "finished" and summaries.get(p.key)]
        missing = len(members) - len(done)
        if missing:
            notes.append(f"{', '.join(cell)}: {missing} of {len(members)} runs not finished "
                         f"({', '.join(sorted({statuses.get(p.key, 'missing') for p in members} - {'finished'}))})")
        clustering = [mean_std([s.get("final_ari") for s in done], 1), f"{sum(perfect(s) for s in done)}/{len(done)}",
                      first_round_text(done)]
        if done and not ari_applies(done):
            clustering = [NOT_APPLICABLE] * 3  # no clusters (personalised FL) or no true ones: not a score of 0
        lines.append("| " + " | ".join([
            *cell,
            mean_std([s.get("final_accuracy") for s in done], 100),
            mean_std([s.get("final_loss") for s in done], 1, digits=4),
            *clustering,
            *([mean_std([s.get("reported_accuracy") for s in done], 100)] if len(header) > len(SUMMARY_HEADER) else []),
        ]) + " |")
    return "\n".join(lines) + "\n", notes


def protocols_of(points: list, summaries: dict[str, dict | None]) -> list[str]:
    """The reporting protocols of these runs' summaries (`clove` where a summary does not say)."""
    return sorted({(summaries.get(p.key) or {}).get("protocol") or "clove" for p in points})


def summary_markdown(name: str, description: str, command: str, table: str, notes: list[str],
                     counts: dict[str, int], protocols: list[str] | None = None) -> str:
    """The sweep's summary.md; the line above the table names its accuracy protocol (scripts/readme_tables.py
    takes the table's "|" lines only)."""
    head = [f"# Sweep {name}", ""]
    if description:
        head += [description, ""]
    head += ["    " + command, "",
             f"{counts.get('points', 0)} points: {counts.get('finished', 0)} finished, {counts.get('failed', 0)} failed, "
             f"{counts.get('missing', 0)} not run yet. Mean ± std over seeds; only finished runs count.", "",
             protocol_note(protocols or ["clove"]), ""]
    tail = ["", *[f"- {n}" for n in notes]] if notes else []
    return "\n".join(head) + table + ("\n".join(tail) + "\n" if tail else "")


# -- the grid view (the dashboard's Sweeps page): results.csv rows grouped by chosen fields ---------------------------
GRID_MEASURES = {
    "final_ari": "mean final ARI",
    "success": "success rate (share of seeds with final ARI = 1)",
    "final_accuracy": "mean final accuracy",
    "reported_accuracy": "mean reported accuracy (each run's protocol)",
    "first_round_ari_0_9": "rounds to ARI >= 0.9 (mean over the seeds that reach it)",
}
_NUMBERS = ("final_accuracy", "best_accuracy", "reported_accuracy", "final_loss", "final_ari", "first_round_ari_0_9", "mb_sent", "seconds")


RESULT_TEXT_COLUMNS = ("key", "folder", "status")  # what every row of results.csv names
_RUN_FOLDER = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.\-]{0,99}(?:/[A-Za-z0-9_][A-Za-z0-9_.\-]{0,99}){0,15}")


def safe_run_folder(text) -> bool:
    """Whether a point's run folder, as sweep.json or results.csv names it, is one a sweep writes: a relative
    path of plain names inside the sweep folder (never absolute, never '..', never hidden)."""
    return isinstance(text, str) and _RUN_FOLDER.fullmatch(text) is not None


def parse_results(text: str) -> tuple[list[dict[str, Any]], list[str]]:
    """(results.csv's rows with its measures as numbers, what is wrong with it, one line each).

    Never raises: a measure that is not a number is None (and named), a row without its key, run
    folder or status is left out (and named), a table that CSV cannot read keeps the rows before it."""
    rows, problems = [], []
    reader = csv.DictReader(io.StringIO(text))
    try:
        header = reader.fieldnames or []
        missing = [c for c in RESULT_TEXT_COLUMNS if c not in header]
        if missing:
            return [], [f"results.csv: no column {', '.join(missing)} (header: {', '.join(header)[:200] or 'empty'})"]
        for row in reader:
            line = reader.line_num
            if not all(isinstance(row.get(c), str) and row.get(c) for c in RESULT_TEXT_COLUMNS) or \
                    not safe_run_folder(row["folder"]):
                problems.append(f"results.csv line {line}: not a run's row (no key, run folder or status); left out")
                continue
            for name in _NUMBERS:
                value = row.get(name)
                try:
                    number = float(value) if value not in (None, "") else None
                except (TypeError, ValueError):
                    problems.append(f"results.csv line {line}: {name} {str(value)[:40]!r} is not a number; left out")
                    number = None
                row[name] = number if number is None or math.isfinite(number) else None
            row.pop(None, None)  # cells past the header's columns
            rows.append(row)
    except csv.Error as exc:
        problems.append(f"results.csv line {reader.line_num}: {exc}; the rows after it are left out")
    return rows, problems


def read_results(text: str) -> list[dict[str, Any]]:
    """results.csv's rows with its measures as numbers (None where empty or not a number; see parse_results)."""
    return parse_results(text)[0]


def protocols_in(rows: list[dict[str, Any]]) -> list[str]:
    """The reporting protocols of results.csv's rows (`clove` where a row names none)."""
    return sorted({row.get("protocol") or "clove" for row in rows})


def _mean_sd(values: list[float]) -> tuple[float | None, float | None]:
    if not values:
        return None, None
    return statistics.mean(values), (statistics.stdev(values) if len(values) > 1 else 0.0)


def grid_cells(rows: list[dict[str, Any]], by: list[str]) -> list[dict[str, Any]]:
    """One entry per combination of the `by` fields (in first-seen order): every grid measure's mean and std
    over the cell's finished runs, the runs in it and how many finished."""
    cells: dict[tuple, list[dict]] = {}
    for row in rows:
        cells.setdefault(tuple(row.get(b, "") for b in by), []).append(row)
    out = []
    for values, members in cells.items():
        done = [r for r in members if r.get("status") == "finished"]
        entry: dict[str, Any] = dict(zip(by, values))
        entry.update(runs=len(members), finished=len(done), folders=[r["folder"] for r in members])
        for measure in GRID_MEASURES:
            if measure == "success":
                series = ([1.0 if (r["final_ari"] is not None and r["final_ari"] > 1 - 1e-9) else 0.0 for r in done]
                          if ari_applies(done) else [])  # no ARI in any run: no rate, not a rate of 0
            else:
                series = [r[measure] for r in done if r.get(measure) is not None]
            entry[measure], entry[f"{measure}_std"] = _mean_sd(series)
        out.append(entry)
    return out


# -- a pivot of results.csv (the README's all-algorithm tables): a row per algorithm, a column per partition ---------
PIVOT_MEASURES = ("final_accuracy", "final_ari", "seconds")  # seconds: a run's wall time (what a table cost)
MISSING_FIGURE = "—"


def pivot_cell(values: list[float | None], measure: str) -> str:
    """Mean ± std over the seeds: accuracy in % (1 decimal); ARI with how many seeds end at ARI = 1, or n/a; a run's
    seconds (whole)."""
    if measure not in PIVOT_MEASURES:
        raise ValueError(f"measure {measure!r}: one of {', '.join(PIVOT_MEASURES)}")
    present = [v for v in values if v is not None]
    if not present:
        return NOT_APPLICABLE if measure == "final_ari" and values else "-"
    if measure == "final_accuracy":
        return mean_std(present, 100, digits=1)
    if measure == "seconds":
        return mean_std(present, digits=0)
    return f"{mean_std(present)} ({sum(1 for v in present if v > 1 - 1e-9)}/{len(present)})"


def pivot_table(rows: list[dict[str, Any]], measure: str, row_field: str = "algorithm", column_field: str = "partition",
                reference: dict[tuple[str, str], float] | None = None) -> tuple[str, list[str]]:
    """(markdown, notes) from results.csv's rows (read_results): one row per `row_field` value, one column per
    `column_field` value, both in first-seen order; a cell is the measure over the finished runs (seeds).

    With `reference` ({(column value, row value): figure}, accuracy as a fraction) each column is followed by
    the reference's figure for it ("—" where it has none). Notes name the cells with runs not finished; a cell
    with some finished says over how many ("[1 of 3 runs]"), one with none is "-"."""
    row_values = list(dict.fromkeys(r[row_field] for r in rows))
    column_values = list(dict.fromkeys(r[column_field] for r in rows))
    members: dict[tuple[str, str], list[dict]] = {}
    for r in rows:
        members.setdefault((r[column_field], r[row_field]), []).append(r)
    header = [row_field]
    for c in column_values:
        header += [c, "paper"] if reference is not None else [c]
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    notes = []
    for a in row_values:
        cells = [a]
        for c in column_values:
            cell = members.get((c, a), [])
            done = [r for r in cell if r.get("status") == "finished"]
            if len(done) < len(cell):
                notes.append(f"{c}, {a}: {len(cell) - len(done)} of {len(cell)} runs not finished")
            text = pivot_cell([r.get(measure) for r in done], measure) if cell else "-"
            if 0 < len(done) < len(cell):  # a mean over fewer seeds than the sweep asks says so in its cell
                text += f" [{len(done)} of {len(cell)} runs]"
            cells.append(text)
            if reference is not None:
                figure = reference.get((c, a))
                cells.append(MISSING_FIGURE if figure is None else
                             f"{figure * 100:.1f}" if measure == "final_accuracy" else f"{figure:.2f}")
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n", notes
