"""Results as tables: one row per run (live or finished), percentages for table columns, and the CSV downloads."""
from __future__ import annotations

import csv
import io

from ..jobs.snapshots import ELSEWHERE, LIVE, PENDING

PERCENT = "%.1f%%"  # table format for `pct` values: Streamlit's own "percent" drops trailing zeros (91% beside 90.17%)


def pct(v):
    """A 0-1 share as a percentage, for a table column formatted with PERCENT."""
    return None if v is None else 100.0 * v


def round_text(value, status) -> str:
    """A "first round with ARI >= 0.9" cell: the round, "not yet" while the run goes on, else "never"."""
    if value is not None:
        return str(value)
    return "never" if status not in LIVE and status not in (PENDING, ELSEWHERE) else "not yet"


def summary_rows(units) -> list[dict]:
    """One row per run: the comparison table's columns (cfl_core.compare's), live or finished."""
    from cfl_core.records import summarize

    rows = []
    for u in units:
        status = u.status
        s = u.summary or summarize(u.algorithm, list(u.records), status, _protocol(u))
        rows.append({
            "algorithm": u.label, "final accuracy": s.get("final_accuracy"), "best accuracy": s.get("best_accuracy"),
            "reported accuracy": s.get("reported_accuracy"), "protocol": s.get("protocol"),
            "final ARI": s.get("final_ari"),
            "rounds to ARI≥0.9": round_text(s.get("first_round_ari_0_9"), u.status),
            "MB sent": round((s.get("total_bytes") or 0) / 1e6, 2), "time (s)": round(s.get("total_seconds") or 0, 2),
            "rounds": f"{u.rounds_done}/{u.total_rounds}", "status": status,
        })
    return rows


def _protocol(unit) -> str:
    config = getattr(unit, "config", None)
    return (config.get("protocol") if isinstance(config, dict) else getattr(config, "protocol", None)) or "clove"


def table_csv(units) -> str:
    """The comparison table of these runs as CSV (cfl_core.compare's columns)."""
    from cfl_core.compare import compare_table
    from cfl_core.records import summarize

    results = {u.name or u.algorithm: (u.summary or summarize(u.algorithm, list(u.records), u.status, _protocol(u)))
               for u in units}
    return compare_table(results)[1]


def rounds_csv(units) -> str:
    """Every round of several runs in one CSV, with an algorithm column (one header line: the first run's, with
    every run's rows under it; runs whose extra columns differ get the union of the columns)."""
    tables = [list(csv.reader(io.StringIO(metrics_csv(u.records, {"algorithm": u.algorithm})))) for u in units]
    header: list = []
    for t in tables:
        header += [c for c in t[0] if c not in header]
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(header)
    for t in tables:
        index = {c: i for i, c in enumerate(t[0])}
        for row in t[1:]:
            w.writerow([row[index[c]] if c in index else "" for c in header])
    return buf.getvalue()


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
