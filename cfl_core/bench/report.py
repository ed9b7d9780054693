"""The benchmark's table (Markdown) and JSON."""
from __future__ import annotations

import json
import time
from pathlib import Path

from .runner import BenchReport, Measurement

NOTES_MARKER = "<!-- notes: everything below this line is kept when the benchmark rewrites this file -->"

COLUMNS = ("measurement", "clients M", "models K", "batched s", "loop s", "ratio", "GFLOP/s",
           "% of peak", "loop GFLOP/s", "peak mem MB", "reps b/l", "other load", "notes")


def _num(value, fmt: str) -> str:
    return "-" if value is None else format(value, fmt)


def _seconds(value) -> str:
    if value is None:
        return "-"
    return f"{value:.3f}" if value >= 0.1 else f"{value:.4f}"


def table_rows(rows: list[Measurement]) -> list[list[str]]:
    out = []
    for r in rows:
        out.append([
            r.name, str(r.clients) if r.clients else "-", str(r.models) if r.models else "-",
            _seconds(r.batched_s), _seconds(r.sequential_s),
            "-" if r.ratio is None else f"{r.ratio:.1f}x",
            _num(r.gflops, ".1f"), "-" if r.peak_share is None else f"{100 * r.peak_share:.1f}%",
            _num(r.sequential_gflops, ".2f"), _num(r.peak_mem_mb, ".0f"), r.repeats,
            _num(r.other_cpus, ".2f"), r.note,
        ])
    return out


def markdown_table(rows: list[Measurement]) -> str:
    body = table_rows(rows)
    lines = ["| " + " | ".join(COLUMNS) + " |", "|" + "|".join("---" for _ in COLUMNS) + "|"]
    lines += ["| " + " | ".join(cells) + " |" for cells in body]
    return "\n".join(lines)


def text_table(rows: list[Measurement]) -> str:
    body = [list(COLUMNS[:-1])] + [cells[:-1] for cells in table_rows(rows)]
    widths = [max(len(row[i]) for row in body) for i in range(len(body[0]))]
    return "\n".join("  ".join(c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(row, widths)))
                     for row in body)


def markdown(report: BenchReport, command: str) -> str:
    f, o = report.facts, report.options
    machine = (f"{f['cpu']} ({f['cpu_count']} logical CPUs"
               + (f", {f['memory_gib']} GiB RAM" if "memory_gib" in f else "") + ")"
               + (f", GPU {f['gpu']}" if "gpu" in f else "")
               + f"; torch {f['torch']} with {f['threads']} thread{'s' if f['threads'] != 1 else ''}; Python {f['python']}; device {f['device']}")
    return "\n".join([
        "# Benchmark: the batched engine against the sequential per-client loop",
        "",
        f"Command: `{command}`  ",
        f"Machine: {machine}  ",
        *([f"Dense models (MLP, logistic regression) train on the CPU with: {f['dense_training']}  "]
          if f.get("dense_training") else []),
        f"Run: {time.strftime('%Y-%m-%d %H:%M %Z')}, {report.seconds:.0f} s in all; load average (1/5/15 min) "
        f"before {f['load_before']}, after {f['load_after']}"
        + ("" if f.get("other_cpus") is None else
           f"; CPUs kept busy by other processes during the run: {f['other_cpus']:.2f} on average"),
        "",
        *_busy_warning(f),
        f"Work per client and round: {o.local_epochs} local epochs over {o.samples} training samples in "
        f"minibatches of {o.batch_size}, SGD lr {o.lr} momentum {o.momentum}. MLP 64-128-10 on digits "
        f"(8x8, resampled, {o.clusters} rotation clusters); CNN (LeNet-style) on synthetic 28x28 images.",
        "",
        "How it is measured: both paths get the same data, initial models and minibatch schedule, in one "
        "process; repetitions alternate batched, loop, batched, ...; each figure is the median of the timed "
        "repetitions (reps b/l: batched/loop) after one warm-up run of each path, which is excluded. "
        "Nothing is cached between repetitions (every run trains from the start models; the batched time "
        "includes drawing the minibatch schedule, which the loop gets precomputed). Before a ratio is "
        "reported the results are checked equal; a mismatch stops the benchmark. Trained models: the "
        "difference between the two paths relative to how far training moved the model (L2, per model) "
        "must be under 1e-4 for the median model, over 1e-3 for at most 5% of the models (a rounding-level "
        "ReLU or max-pool switch; counted in the notes column) and under 0.2 for every model "
        "(max_rel_difference in the JSON is the worst). Per-client training losses within 1e-5 + 1e-3 x |value|; loss matrices within "
        "1e-5 + 1e-4 x |value|. "
        "GFLOP/s counts only matmul/convolution FLOPs (forward 2 x MACs; backward 2 x MACs for weight "
        "gradients plus 2 x MACs for input gradients of every layer but the first; valid samples only; "
        "cfl_core/bench/flops.py), divided by the median time; % of peak divides by the dense float32 "
        f"matmul rate measured with the same threads (first and last; the higher). Peak memory: {report.memory_method}, of one "
        "extra untimed batched run, above the memory in use before it. Other load: CPUs that other "
        "processes kept busy while the row was measured (machine busy time minus this process's, from "
        "/proc/stat); near 0 means the figures are the machine's own.",
        "",
        markdown_table(report.rows),
        "",
    ])


def _busy_warning(facts: dict) -> list[str]:
    """A warning when other processes kept the CPUs busy during the run (timings are then inflated)."""
    others, cpus = facts.get("other_cpus"), facts.get("cpu_count") or 1
    if others is None or facts.get("device", "cpu").startswith("cuda") or others < 0.25:
        return []
    return [f"**Warning: the machine was busy**: other processes kept {others:.2f} of its {cpus} CPUs busy on "
            "average during this run, so timings are inflated and noisy, most of all with more than one "
            "thread (a thread that loses its CPU stalls the others at every parallel step).", ""]


def write_markdown(report: BenchReport, command: str, path: str | Path) -> None:
    """Write the report; hand-written notes below NOTES_MARKER in an existing file are kept."""
    path = Path(path)
    notes = NOTES_MARKER + "\n"
    if path.exists():
        old = path.read_text()
        if NOTES_MARKER in old:
            notes = NOTES_MARKER + old.split(NOTES_MARKER, 1)[1]
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(markdown(report, command) + "\n" + notes)


def json_rows(report: BenchReport) -> list[dict]:
    rows = []
    for r in report.rows:
        row = r.to_json()
        row["device"] = report.facts["device"]
        row["threads"] = report.facts["threads"]
        rows.append(row)
    return rows


def write_json(report: BenchReport, path: str | Path) -> None:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(json_rows(report), indent=1) + "\n")
