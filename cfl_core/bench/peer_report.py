"""The peer benchmark's report: ratios, the learning check, the tables and benchmarks/PEERS.md.

Kept apart from peers.py (which runs the workloads) so a saved JSON can be re-rendered
(`bench --peers-from`) without touching the runners.

What may be quoted: a ratio is the median of the repetitions' own ratios (each peer repetition over the
CFL Lab repetition taken beside it), from rows measured on a quiet machine and never under a profiler.
A report of a run with `--allow-busy` says at its top that nothing in it is quoted, and is never written
over a file whose table is quoted (`PeerTableProtected`).
"""
from __future__ import annotations

import json
import statistics
import time
from dataclasses import asdict
from pathlib import Path

from .peer_workload import CLASSES, FEATURES, HIDDEN, PeerReport, PeerRow, options_from_json

# -- the report --------------------------------------------------------------------------------------------
NOTES_MARKER = "<!-- notes: everything below this line is kept when the benchmark rewrites this file -->"
NOT_QUOTED = "<!-- peer-table: not quoted (a busy machine, --allow-busy, or a run from before the quiet-machine gate) -->"
QUOTED = "<!-- peer-table: quoted (every repetition measured on a quiet machine, none under a profiler) -->"


class PeerTableProtected(RuntimeError):
    """A busy-machine report would replace a file's quoted table."""


def _num(v) -> str:
    return "-" if v is None else f"{v:.2f}"


def _s(v) -> str:
    if v is None:
        return "-"
    return f"{v:.3f}" if v >= 0.1 else f"{v:.4f}"


def _x(v) -> str:
    return "-" if v is None else f"{v:.1f}x"


def reference(rows: list[PeerRow], algorithm: str, clients: int, variant: str) -> PeerRow | None:
    return next((r for r in rows if r.framework == "CFL Lab" and r.algorithm == algorithm and not r.profiled
                 and r.clients == clients and r.variant == variant), None)


def quotable(row: PeerRow) -> bool:
    return row.framework != "CFL Lab" and row.seconds is not None and row.status == "ok" and not row.profiled


def rep_ratios(rows: list[PeerRow], row: PeerRow) -> list[float | None]:
    """Each repetition's peer round over CFL Lab's `Experiment.step()` round of the same repetition."""
    step = reference(rows, row.algorithm, row.clients, "Experiment.step()")
    if not quotable(row) or step is None or not row.repetitions or not step.repetitions:
        return []
    return [p / s if p and s else None for p, s in zip(row.repetitions, step.repetitions)]


def ratios(rows: list[PeerRow], row: PeerRow) -> tuple[float | None, float | None]:
    """(this peer round / CFL Lab's Experiment.step() round, this peer's training part / CFL Lab's engine):
    the first the median of the repetitions' own ratios where there are repetitions."""
    if not quotable(row):
        return None, None
    step = reference(rows, row.algorithm, row.clients, "Experiment.step()")
    engine = next((r for r in rows if r.framework == "CFL Lab" and r.algorithm == row.algorithm and not r.profiled
                   and r.clients == row.clients and r.variant.startswith("engine")), None)
    paired = [v for v in rep_ratios(rows, row) if v is not None]
    by_step = statistics.median(paired) if paired else (
        row.seconds / step.seconds if step and step.seconds else None)
    part = row.train_seconds if row.algorithm == "fedavg" else (
        row.seconds - (row.eval_seconds or 0.0) if row.eval_seconds is not None else None)
    by_engine = part / engine.seconds if part and engine and engine.seconds else None
    return by_step, by_engine


def _loads(r: PeerRow) -> str:
    values = [v for v in r.rep_other_cpus if v is not None]
    if len(values) > 1 and f"{min(values):.2f}" != f"{max(values):.2f}":
        return f"{min(values):.2f}-{max(values):.2f}"
    return _num(r.other_cpus)


COLUMNS = ("algorithm", "clients M", "framework", "setup", "s / round", "training part s", "evaluation s",
           "peer / CFL Lab step()", "each repetition", "peer training / CFL Lab engine", "accuracy (after rounds)",
           "rounds", "start-up s", "other load", "status / notes")


def table_rows(rows: list[PeerRow], after: int | None = None) -> list[list[str]]:
    """The detailed table's cells; accuracy after `after` rounds where a row kept its accuracy per round."""
    out = []
    for r in rows:
        if r.profiled:
            continue  # the profile pass has its own section
        by_step, by_engine = ratios(rows, r)
        each = ", ".join(_x(v) for v in rep_ratios(rows, r))
        framework = r.framework + ("" if r.best or r.framework == "CFL Lab" else " (tried)")
        notes = [r.status] if r.status != "ok" else []
        if r.phases:
            notes.append(", ".join(f"{k.replace('_seconds', '').replace('_', ' ')} {_s(v)} s"
                                   for k, v in r.phases.items()))
        if r.ari is not None:
            notes.append(f"ARI {r.ari:.2f}")
        split = (r.setup or {}).get("worker_split")
        if split:
            notes.append(split["text"])
        if r.busy:
            notes.append("BUSY machine: not quoted")
        if r.note:
            notes.append(r.note)
        accuracy, done = r.accuracy_at(after) if after else (r.accuracy, r.accuracy_after)
        acc = "-" if accuracy is None else f"{accuracy:.3f} ({done})"
        out.append([r.algorithm, str(r.clients), framework, r.variant, _s(r.seconds), _s(r.train_seconds),
                    _s(r.eval_seconds), _x(by_step), each or "-", _x(by_engine), acc, r.rounds or "-",
                    "-" if r.startup_seconds is None else f"{r.startup_seconds:.1f}", _loads(r), "; ".join(notes)])
    return out


def text_table(rows: list[PeerRow], after: int | None = None) -> str:
    body = [list(COLUMNS[:-1])] + [cells[:-1] for cells in table_rows(rows, after)]
    widths = [max(len(row[i]) for row in body) for i in range(len(body[0]))]
    return "\n".join("  ".join(c.rjust(w) for c, w in zip(row, widths)) for row in body)


def summary_table(rows: list[PeerRow]) -> list[str]:
    """The table to quote: per algorithm and M, CFL Lab's step() and engine, every peer setup, and the
    fastest peer over step() as the median of the repetitions' ratios with each repetition's."""
    timed = [r for r in rows if not r.profiled and r.seconds is not None]
    peers = list(dict.fromkeys((r.framework, r.variant) for r in timed if r.framework != "CFL Lab"))
    head = ["algorithm", "M", "CFL Lab `step()`", "engine only"] + [f"{f}, {v}" for f, v in peers] + [
        "fastest peer / `step()`: median (each repetition)", "other load (most in a repetition)"]
    lines = ["| " + " | ".join(head) + " |", "|" + "|".join("---" for _ in head) + "|"]
    for algorithm, clients in dict.fromkeys((r.algorithm, r.clients) for r in timed):
        at = [r for r in timed if (r.algorithm, r.clients) == (algorithm, clients)]
        step = reference(at, algorithm, clients, "Experiment.step()")
        engine = next((r for r in at if r.framework == "CFL Lab" and r.variant.startswith("engine")), None)
        cells = [algorithm, f"{clients:,}", _s(step.seconds) + " s" if step else "-",
                 _s(engine.seconds) + " s" if engine else "-"]
        for framework, variant in peers:
            r = next((r for r in at if (r.framework, r.variant) == (framework, variant)), None)
            cells.append("-" if r is None else _s(r.seconds) + " s" + ("" if r.status == "ok" else " (" + r.status + ")"))
        best = min((r for r in at if quotable(r)), key=lambda r: r.seconds, default=None)
        if best is None:
            cells.append("-")
        else:
            by_step, _ = ratios(rows, best)
            each = ", ".join(_x(v) for v in rep_ratios(rows, best))
            cells.append(f"**{_x(by_step)}** {best.framework} {best.variant}" + (f" ({each})" if each else "")
                         + (" BUSY: not quoted" if best.busy or (step and step.busy) else ""))
        loads = [v for r in at for v in (r.rep_other_cpus or [r.other_cpus]) if v is not None]
        cells.append(_num(max(loads)) if loads else "-")
        lines.append("| " + " | ".join(cells) + " |")
    return lines


def summary_sentence(report: PeerReport) -> str:
    """The run's figures in one sentence, for the README: per algorithm and M, the fastest peer over
    `Experiment.step()` (median of the repetitions' ratios, their range, the seconds), and the most other load."""
    parts = []
    timed = [r for r in report.rows if not r.profiled and r.seconds is not None]
    for algorithm, clients in dict.fromkeys((r.algorithm, r.clients) for r in timed):
        at = [r for r in timed if (r.algorithm, r.clients) == (algorithm, clients)]
        step = reference(at, algorithm, clients, "Experiment.step()")
        best = min((r for r in at if quotable(r)), key=lambda r: r.seconds, default=None)
        if best is None or step is None:
            continue
        by_step, _ = ratios(report.rows, best)
        each = [v for v in rep_ratios(report.rows, best) if v is not None]
        spread = f"{min(each):.1f}-{max(each):.1f}x over {len(each)} repetitions; " if len(each) > 1 else ""
        what = "FedAvg" if algorithm == "fedavg" else "a CLoVE round"
        parts.append(f"{what} at M = {clients:,}: **{_x(by_step)}** {best.framework} {best.variant} "
                     f"({spread}{_s(step.seconds)} against {_s(best.seconds)} s)")
    if not parts:
        return "No peer row was measured."
    loads = _timed_loads(report)
    standing = ("" if is_quoted_report(report) else " NOT QUOTED (busy machine, --allow-busy, or a run from "
                                                      "before the quiet-machine gate).")
    return ("The fastest peer's full round over CFL Lab's `Experiment.step()` (evaluation and record included): "
            + "; ".join(parts) + f". Other processes kept at most {max(loads, default=0):.2f} CPUs busy in any "
            "repetition." + standing)


def learning_check(rows: list[PeerRow], points: float = 3.0, after: int | None = None) -> list[str]:
    """Per (algorithm, M): the spread of test accuracy across frameworks after the same number of rounds
    (`after` rounds where the rows kept their accuracy per round, else each row's last)."""
    lines = []
    keys = sorted({(r.algorithm, r.clients) for r in rows if not r.profiled}, key=lambda k: (k[0] != "fedavg", k[1]))
    for algorithm, clients in keys:
        group = []
        for r in rows:
            if r.algorithm == algorithm and r.clients == clients and r.best and not r.profiled \
                    and r.variant not in ("step() + run folder", "-"):
                acc, k = r.accuracy_at(after) if after else (r.accuracy, r.accuracy_after)
                if acc is not None:
                    group.append((r.framework, acc, k or 0))
        if not group:
            continue
        most = max(k for _, _, k in group)
        short = [g for g in group if g[2] != most]
        group = [g for g in group if g[2] == most]
        aside = "".join(f"; {f} finished only {k} round(s) ({a:.3f}), not compared" for f, a, k in short)
        if len(group) < 2:
            if aside:
                lines.append(f"{algorithm} M={clients}: no two frameworks finished {most} rounds{aside}")
            continue
        accs = {f: a for f, a, _ in group}
        spread = 100 * (max(accs.values()) - min(accs.values()))
        verdict = "within" if spread <= points else "NOT within"
        lines.append(f"{algorithm} M={clients}, after {most} rounds: "
                     + ", ".join(f"{k} {v:.3f}" for k, v in accs.items())
                     + f" -> spread {spread:.1f} points, {verdict} {points:g}{aside}")
    return lines


def _timed_loads(report: PeerReport) -> list[float]:
    return [v for r in report.rows if not r.profiled for v in (r.rep_other_cpus or [r.other_cpus]) if v is not None]


def is_quoted_report(report: PeerReport) -> bool:
    """A run through the quiet-machine gate (its facts carry `busy_above`), without --allow-busy, with no
    repetition above the mark. A saved run from before the gate (issue 37) is never quoted."""
    f = report.facts
    if f.get("allow_busy") or "busy_above" not in f or any(r.busy for r in report.rows):
        return False
    return max(_timed_loads(report), default=0.0) <= f["busy_above"]


def _standing(report: PeerReport) -> list[str]:
    f, o = report.facts, report.options
    loads = _timed_loads(report)
    out = [QUOTED if is_quoted_report(report) else NOT_QUOTED, ""]
    if f.get("partial"):
        out += ["**Partial:** written after each size; the run had not finished all its rows when this was written.",
                ""]
    if f.get("refused"):
        out += [f"**Refused part way:** {f['refused']}. Rerun when the machine is quiet.", ""]
    if "busy_above" not in f:
        out.append("**Taken before the quiet-machine gate and the alternating repetitions (issue 37): not quoted.** "
                   f"Other processes kept up to {max(loads, default=0):.2f} CPUs busy in a row, and the peers' rows "
                   "may have run under the profiler of `--peer-profile`.")
    elif not is_quoted_report(report):
        out.append(f"**Measured on a busy machine (`--allow-busy`): not quoted.** Rows marked BUSY had other "
                   f"processes keep more than {o.busy_above:g} CPUs busy in a repetition (up to "
                   f"{max(loads, default=0):.2f}); no ratio here may be quoted.")
    else:
        out.append(f"Every row measured on a quiet machine: other processes kept at most {max(loads, default=0):.2f} "
                   f"CPUs busy in any repetition (a repetition above {o.busy_above:g} is taken again, then the run "
                   "refuses to go on).")
    return out + [""]


def markdown(report: PeerReport, command: str) -> str:
    f, o = report.facts, report.options
    peers = {}
    for r in report.rows:
        if r.framework not in ("CFL Lab", "-") and r.versions:
            peers.setdefault(r.framework, r.versions)
    versions = "; ".join([f"CFL Lab {next((r.versions.get('cfl_core') for r in report.rows if r.framework == 'CFL Lab' and r.versions), '?')}"]
                         + [f"{k}: " + ", ".join(f"{n} {v}" for n, v in sorted(vs.items()) if v) for k, vs in peers.items()])
    includes, seen = [], set()
    for r in report.rows:
        key = (r.framework, r.variant.split(" ")[0] if r.framework == "CFL Lab" else "", r.algorithm)
        if r.includes and key not in seen and not r.profiled:
            seen.add(key)
            includes.append(f"- {r.framework} {r.variant if r.framework == 'CFL Lab' else ''} ({r.algorithm}): {r.includes}")
    lines = [
        "# Peer benchmark: CFL Lab against Flower and pfl-research on identical work",
        "",
        *_standing(report),
        f"Command: `{command}`  ",
        f"Commit: {f.get('commit', 'not recorded')}  ",
        f"Machine: {f['cpu']} ({f['cpu_count']} logical CPUs"
        + (f", {f['memory_gib']} GiB RAM" if "memory_gib" in f else "") + f"); Python {f['python']}  ",
        f"Versions: {versions}  ",
        *([f"CFL Lab's MLP trains with: {f['dense_training']}  "] if f.get("dense_training") else []),
        f"Run: {f.get('written_at') or time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, {report.seconds:.0f} s "
        f"in all; load average "
        f"(1/5/15 min) before {f['load_before']}, after {f['load_after']}; CPUs kept busy by other processes "
        f"during the run: {_num(f['other_cpus'])} on average",
        "",
        *summary_table(report.rows),
        "",
        "In one line (for the README): " + summary_sentence(report),
        "",
        f"Workload (every framework alike): FedAvg, every client every round; {o.samples} training and "
        f"{o.test_samples} test samples of {FEATURES} features (digits 8x8, drawn with replacement through "
        f"`sample_with_replacement`) and {CLASSES} classes per client; MLP {FEATURES}-{HIDDEN}-{CLASSES} (ReLU); "
        f"{o.local_epochs} local epoch, batch {o.batch_size}, SGD lr {o.lr:g} momentum {o.momentum:g} (the bench's "
        f"MLP workload's momentum; a fresh optimiser per client and round); float32; {o.threads} threads in all; "
        f"the same arrays and the same initial model for every framework; after every round each client "
        f"evaluates the new model on its test set (federated evaluation on, alike; pfl's extra evaluation of "
        f"the training users off). How it is timed: {getattr(o, 'repetitions', 1)} repetitions, each a fresh "
        f"process per framework and setup with {o.warmup} warm-up round, the frameworks alternating (CFL Lab, "
        f"then each peer setup, then CFL Lab again ...); a repetition's seconds per round is the median of its "
        f"timed rounds (CFL Lab up to {o.cfl_rounds - o.warmup} per row, a peer up to {o.rounds - o.warmup}, "
        f"fewer once {o.round_budget:g} s of rounds have passed, never under {min(3, o.rounds - o.warmup)}), a "
        f"row's the median of its repetitions'; a ratio is the median of the repetitions' own ratios (each peer "
        f"repetition over the CFL Lab repetition beside it). No timed row runs under a profiler. "
        f"{o.time_limit:.0f} s limit per repetition. "
        + (f"CLoVE row: M = {o.clove_clients}, K = {o.clove_models} models, 4 rotation clusters; a round is the "
           f"loss matrix (every client on every model), KMeans (n_init 10) + matching, training of each client's "
           f"model, per-model averaging and evaluation, written in each peer's own API; each peer in the setup "
           f"fastest in FedAvg." if o.clove_clients else ""),
        "",
        "Columns: *peer / CFL Lab step()* = the peer's full round over CFL Lab's `Experiment.step()` (evaluation "
        "and record included), the median of *each repetition*'s; *peer training / CFL Lab engine* = the peer's "
        "training phase (FedAvg: configure/train/aggregate; CLoVE: everything but evaluation) over CFL Lab's bare "
        "engine. *other load*: CPUs other processes kept busy during a repetition's timed rounds (machine busy "
        "time minus the repetition's own process tree, /proc/stat), over the repetitions.",
        "",
        "| " + " | ".join(COLUMNS) + " |",
        "|" + "|".join("---" for _ in COLUMNS) + "|",
    ]
    check_after = getattr(o, "check_rounds", None)
    lines += ["| " + " | ".join(cells) + " |" for cells in table_rows(report.rows, check_after)]
    lines += ["", "Learning check (test accuracy after the same rounds, same data and initial model):", ""]
    lines += [f"- {line}" for line in learning_check(report.rows, after=check_after)] or [
        "- (no two frameworks finished a row)"]
    lines += ["", "What each time includes:", ""] + includes
    profiled = [r for r in report.rows if r.profiled and r.profile]
    if profiled:
        lines += ["", "Where the peers' time goes: a separate pass under py-spy after every timed repetition (50 "
                  "samples/s, a few rounds, inclusive share of each process's samples). Its times are slowed by "
                  "the profiler and are in no table above:", ""]
        for r in profiled:
            lines.append(f"- {r.framework} {r.variant}, {r.algorithm} M={r.clients} ({r.status}):")
            for proc, entry in r.profile.items():
                top = "; ".join(f"{fn} {100 * share:.0f}%" for fn, share in entry["top"][:6])
                lines.append(f"  - {proc} ({entry['samples']} samples): {top}")
    return "\n".join(lines) + "\n"


def holds_quoted_table(path: str | Path) -> bool:
    """Whether the file's top part (above the notes) is a table that may be quoted: any existing table
    but one written by a busy-machine run."""
    path = Path(path)
    if not path.exists():
        return False
    top = path.read_text().split(NOTES_MARKER)[0]
    return bool(top.strip()) and NOT_QUOTED.split(" (")[0] not in top  # the marker's stable part


def write_markdown(report: PeerReport, command: str, path: str | Path) -> None:
    path = Path(path)
    if not is_quoted_report(report) and holds_quoted_table(path):
        raise PeerTableProtected(f"{path} holds a quoted table; a report that may not be quoted (--allow-busy, BUSY "
                                 "rows, or a run from before the quiet-machine gate) is never written over it: "
                                 "pass another --out")
    notes = ""
    if path.exists():
        old = path.read_text()
        if NOTES_MARKER in old:
            notes = old[old.index(NOTES_MARKER) + len(NOTES_MARKER):]
    path.write_text(markdown(report, command) + "\n" + NOTES_MARKER + (notes or "\n"))


def json_holds_quoted(path: str | Path) -> bool:
    """Whether a saved run (`--json`) is one whose table may be quoted (not a --allow-busy run)."""
    try:
        doc = json.loads(Path(path).read_text())
    except (OSError, ValueError):
        return False
    facts = doc.get("facts") if isinstance(doc, dict) else None
    return isinstance(facts, dict) and not facts.get("allow_busy")


def write_json(report: PeerReport, path: str | Path) -> None:
    if not is_quoted_report(report) and json_holds_quoted(path):
        raise PeerTableProtected(f"{path} holds a quoted run; a report that may not be quoted (--allow-busy, BUSY "
                                 "rows, or a run from before the quiet-machine gate) is never written over it: "
                                 "pass another --json")
    doc = {"facts": report.facts, "options": asdict(report.options), "seconds": report.seconds,
           "rows": [r.to_json() for r in report.rows]}
    Path(path).write_text(json.dumps(doc, indent=1))


def report_from_json(path: str | Path) -> PeerReport:
    """A saved run (`--json`) back as a report, to render its table again without measuring."""
    doc = json.loads(Path(path).read_text())
    known = PeerRow.__dataclass_fields__
    rows = [PeerRow(**{k: v for k, v in row.items() if k in known}) for row in doc["rows"]]
    return PeerReport(doc["facts"], options_from_json(doc["options"]), rows, doc.get("seconds", 0.0))
