"""The peer benchmark's report: ratios, the learning check, the table and benchmarks/PEERS.md.

Kept apart from peers.py (which runs the workloads) so a saved JSON can be re-rendered
(`bench --peers-from`) without touching the runners.
"""
from __future__ import annotations

import json
import time
from dataclasses import asdict
from pathlib import Path

from .peers import CLASSES, FEATURES, HIDDEN, PeerOptions, PeerReport, PeerRow


# -- the report --------------------------------------------------------------------------------------------
NOTES_MARKER = "<!-- notes: everything below this line is kept when the benchmark rewrites this file -->"
BUSY = 0.3  # other CPUs above this during a row: the row is marked as taken on a loaded machine


def _num(v) -> str:
    return "-" if v is None else f"{v:.2f}"


def _s(v) -> str:
    if v is None:
        return "-"
    return f"{v:.3f}" if v >= 0.1 else f"{v:.4f}"


def reference(rows: list[PeerRow], algorithm: str, clients: int, variant: str) -> PeerRow | None:
    return next((r for r in rows if r.framework == "CFL Lab" and r.algorithm == algorithm
                 and r.clients == clients and r.variant == variant), None)


def ratios(rows: list[PeerRow], row: PeerRow) -> tuple[float | None, float | None]:
    """(this peer round / CFL Lab's Experiment.step() round, this peer's training part / CFL Lab's engine)."""
    if row.framework == "CFL Lab" or row.seconds is None:
        return None, None
    step = reference(rows, row.algorithm, row.clients, "Experiment.step()")
    engine = next((r for r in rows if r.framework == "CFL Lab" and r.algorithm == row.algorithm
                   and r.clients == row.clients and r.variant.startswith("engine")), None)
    by_step = row.seconds / step.seconds if step and step.seconds else None
    part = row.train_seconds if row.algorithm == "fedavg" else (
        row.seconds - (row.eval_seconds or 0.0) if row.eval_seconds is not None else None)
    by_engine = part / engine.seconds if part and engine and engine.seconds else None
    return by_step, by_engine


COLUMNS = ("algorithm", "clients M", "framework", "setup", "s / round", "training part s", "evaluation s",
           "peer / CFL Lab step()", "peer training / CFL Lab engine", "accuracy (after rounds)", "rounds",
           "start-up s", "other load", "status / notes")


def table_rows(rows: list[PeerRow]) -> list[list[str]]:
    out = []
    for r in rows:
        by_step, by_engine = ratios(rows, r)
        framework = r.framework + ("" if r.best else " (tried)")
        notes = [r.status] if r.status != "ok" else []
        if r.phases:
            notes.append(", ".join(f"{k.replace('_seconds', '').replace('_', ' ')} {_s(v)} s"
                                   for k, v in r.phases.items()))
        if r.ari is not None:
            notes.append(f"ARI {r.ari:.2f}")
        if r.other_cpus is not None and r.other_cpus > BUSY:
            notes.append("LOADED machine")
        if r.note:
            notes.append(r.note)
        acc = "-" if r.accuracy is None else f"{r.accuracy:.3f} ({r.accuracy_after})"
        out.append([r.algorithm, str(r.clients), framework, r.variant, _s(r.seconds), _s(r.train_seconds),
                    _s(r.eval_seconds), "-" if by_step is None else f"{by_step:.1f}x",
                    "-" if by_engine is None else f"{by_engine:.1f}x", acc, r.rounds or "-",
                    "-" if r.startup_seconds is None else f"{r.startup_seconds:.1f}",
                    "-" if r.other_cpus is None else f"{r.other_cpus:.2f}", "; ".join(notes)])
    return out


def text_table(rows: list[PeerRow]) -> str:
    body = [list(COLUMNS[:-1])] + [cells[:-1] for cells in table_rows(rows)]
    widths = [max(len(row[i]) for row in body) for i in range(len(body[0]))]
    return "\n".join("  ".join(c.rjust(w) for c, w in zip(row, widths)) for row in body)


def learning_check(rows: list[PeerRow], points: float = 3.0) -> list[str]:
    """Per (algorithm, M): the spread of test accuracy across frameworks after the same number of rounds."""
    lines = []
    keys = sorted({(r.algorithm, r.clients) for r in rows}, key=lambda k: (k[0] != "fedavg", k[1]))
    for algorithm, clients in keys:
        group = [r for r in rows if r.algorithm == algorithm and r.clients == clients and r.accuracy is not None
                 and r.best and r.variant != "step() + run folder"]
        after = max((r.accuracy_after or 0) for r in group)
        short = [r for r in group if (r.accuracy_after or 0) != after]
        group = [r for r in group if (r.accuracy_after or 0) == after]
        aside = "".join(f"; {r.framework} finished only {r.accuracy_after} round(s) ({r.accuracy:.3f}), not compared"
                        for r in short)
        if len(group) < 2:
            if aside:
                lines.append(f"{algorithm} M={clients}: no two frameworks finished {after} rounds{aside}")
            continue
        accs = {r.framework: r.accuracy for r in group}
        spread = 100 * (max(accs.values()) - min(accs.values()))
        verdict = "within" if spread <= points else "NOT within"
        lines.append(f"{algorithm} M={clients}, after {after} rounds: "
                     + ", ".join(f"{k} {v:.3f}" for k, v in accs.items())
                     + f" -> spread {spread:.1f} points, {verdict} {points:g}{aside}")
    return lines


def markdown(report: PeerReport, command: str) -> str:
    f, o = report.facts, report.options
    peers = {}
    for r in report.rows:
        if r.framework != "CFL Lab" and r.versions:
            peers.setdefault(r.framework, r.versions)
    versions = "; ".join([f"CFL Lab {next((r.versions.get('cfl_core') for r in report.rows if r.framework == 'CFL Lab'), '?')}"]
                         + [f"{k}: " + ", ".join(f"{n} {v}" for n, v in sorted(vs.items()) if v) for k, vs in peers.items()])
    loads = [r.other_cpus for r in report.rows if r.other_cpus is not None]
    loaded = bool(loads) and max(loads) > BUSY
    includes = []
    seen = set()
    for r in report.rows:
        key = (r.framework, r.variant.split(" ")[0] if r.framework == "CFL Lab" else "", r.algorithm)
        if r.includes and key not in seen:
            seen.add(key)
            includes.append(f"- {r.framework} {r.variant if r.framework == 'CFL Lab' else ''} ({r.algorithm}): {r.includes}")
    lines = [
        "# Peer benchmark: CFL Lab against Flower and pfl-research on identical work",
        "",
        *(["**Partial:** written after each size; the run had not finished all its rows when this was written.",
           ""] if f.get("partial") else []),
        ("**Preliminary (machine loaded):** other processes kept up to "
         f"{max(loads):.2f} of the {f['cpu_count']} CPUs busy during some rows (column *other load*); "
         "no target is claimed from this table." if loaded else
         "Other load stayed low in every row (column *other load*)."),
        "",
        f"Command: `{command}`  ",
        f"Machine: {f['cpu']} ({f['cpu_count']} logical CPUs"
        + (f", {f['memory_gib']} GiB RAM" if "memory_gib" in f else "") + f"); Python {f['python']}  ",
        f"Versions: {versions}  ",
        *([f"CFL Lab's MLP trains with: {f['dense_training']}  "] if f.get("dense_training") else []),
        f"Run: {f.get('written_at') or time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, {report.seconds:.0f} s "
        f"in all; load average "
        f"(1/5/15 min) before {f['load_before']}, after {f['load_after']}; CPUs kept busy by other processes "
        f"during the run: {_num(f['other_cpus'])} on average",
        "",
        f"Workload (every framework alike): FedAvg, every client every round; {o.samples} training and "
        f"{o.test_samples} test samples of {FEATURES} features (digits 8x8, drawn with replacement through "
        f"`sample_with_replacement`) and {CLASSES} classes per client; MLP {FEATURES}-{HIDDEN}-{CLASSES} (ReLU); "
        f"{o.local_epochs} local epoch, batch {o.batch_size}, SGD lr {o.lr:g} momentum {o.momentum:g} (the bench's "
        f"MLP workload's momentum; a fresh optimiser per client and round); float32; {o.threads} threads in all; "
        f"the same arrays and the same initial model for every framework; after every round each client "
        f"evaluates the new model on its test set (federated evaluation on, alike). Seconds per round: the median "
        f"of the {o.rounds - o.warmup} rounds after {o.warmup} warm-up round(s); each peer in every setup tried "
        f"(the fastest kept; the others are marked *tried*); {o.time_limit:.0f} s limit per peer row. "
        + (f"CLoVE row: M = {o.clove_clients}, K = {o.clove_models} models, 4 rotation clusters; a round is the "
           f"loss matrix (every client on every model), KMeans (n_init 10) + matching, training of each client's "
           f"model, per-model averaging and evaluation, written in each peer's own API." if o.clove_clients else ""),
        "",
        "Columns: *peer / CFL Lab step()* = the peer's full round over CFL Lab's `Experiment.step()` (evaluation "
        "and record included); *peer training / CFL Lab engine* = the peer's training phase (FedAvg: "
        "configure/train/aggregate; CLoVE: everything but evaluation) over CFL Lab's bare engine. *other load*: "
        "CPUs other processes kept busy during the row's steady-state rounds (machine busy time minus the row's "
        "own process tree, /proc/stat); above "
        f"{BUSY} the row is marked LOADED.",
        "",
        "| " + " | ".join(COLUMNS) + " |",
        "|" + "|".join("---" for _ in COLUMNS) + "|",
    ]
    lines += ["| " + " | ".join(cells) + " |" for cells in table_rows(report.rows)]
    lines += ["", "Learning check (test accuracy after the same rounds, same data and initial model):", ""]
    lines += [f"- {line}" for line in learning_check(report.rows)] or ["- (no two frameworks finished a row)"]
    lines += ["", "What each time includes:", ""] + includes
    profiled = [r for r in report.rows if r.profile]
    if profiled:
        lines += ["", "Where the peers' time goes (py-spy, 50 samples/s over the whole row, inclusive share of "
                  "each process's samples):", ""]
        for r in profiled:
            lines.append(f"- {r.framework} {r.variant}, {r.algorithm} M={r.clients}:")
            for proc, entry in r.profile.items():
                top = "; ".join(f"{fn} {100 * share:.0f}%" for fn, share in entry["top"][:6])
                lines.append(f"  - {proc} ({entry['samples']} samples): {top}")
    return "\n".join(lines) + "\n"


def write_markdown(report: PeerReport, command: str, path: str | Path) -> None:
    path = Path(path)
    notes = ""
    if path.exists():
        old = path.read_text()
        if NOTES_MARKER in old:
            notes = old[old.index(NOTES_MARKER) + len(NOTES_MARKER):]
    path.write_text(markdown(report, command) + "\n" + NOTES_MARKER + (notes or "\n"))


def write_json(report: PeerReport, path: str | Path) -> None:
    doc = {"facts": report.facts, "options": asdict(report.options), "seconds": report.seconds,
           "rows": [r.to_json() for r in report.rows]}
    Path(path).write_text(json.dumps(doc, indent=1))


def report_from_json(path: str | Path) -> PeerReport:
    """A saved run (`--json`) back as a report, to render its table again without measuring."""
    doc = json.loads(Path(path).read_text())
    options = PeerOptions(**{k: tuple(v) if isinstance(v, list) else v for k, v in doc["options"].items()})
    return PeerReport(doc["facts"], options, [PeerRow(**row) for row in doc["rows"]], doc.get("seconds", 0.0))
