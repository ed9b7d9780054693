"""One row per algorithm and reporting protocol (cfl_core.protocols) over a sweep's run folders.

    python scripts/protocol_table.py runs/sweeps/NAME [--out FILE.md]

Every run folder under the sweep (config.json + rounds.jsonl) is read back; each protocol's accuracy is
computed from its records (`ifca` only where the runs were made with `protocol: ifca`, which records the
test machines), and the table gives mean ± std over the runs of each algorithm (cell = the other swept
fields are not split: use it on a sweep whose only other axis is the seed). Below it, for the runs made with
`protocol: ifca`, IFCA's cluster accuracy (models matched to clusters, and the code's index match).
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from cfl_core.protocols import PROTOCOL_TEXT, PROTOCOLS, reported_accuracy, reported_extras  # noqa: E402
from cfl_core.run_reader import load_run, walk_run_folders  # noqa: E402
from cfl_core.sweep.tables import mean_std  # noqa: E402


def protocol_rows(root: Path) -> list[str]:
    values: dict[tuple[str, str], list] = {}
    for _, folder, _ in sorted(walk_run_folders(root, max_depth=6), key=lambda t: t[0]):
        run = load_run(folder)
        for protocol in PROTOCOLS:
            values.setdefault((run.config["algorithm"], protocol), []).append(reported_accuracy(protocol,
                                                                                              run.records)[0])
    lines = ["| algorithm | protocol | what it reports | accuracy (%) | runs |", "|---|---|---|---|---|"]
    for (algorithm, protocol), got in values.items():
        known = [v for v in got if v is not None]
        if known:
            lines.append(f"| {algorithm} | `{protocol}` | {PROTOCOL_TEXT[protocol]} | {mean_std(known, 100)} | "
                         f"{len(known)} |")
    return lines


def cluster_accuracy_rows(root: Path) -> list[str]:
    """IFCA's cluster accuracy of the runs made with `protocol: ifca` (Hungarian-matched and IFCA's index match)."""
    values: dict[str, tuple[list, list]] = {}
    for _, folder, _ in sorted(walk_run_folders(root, max_depth=6), key=lambda t: t[0]):
        run = load_run(folder)
        extras = reported_extras("ifca", run.records)
        if extras:
            matched, index = values.setdefault(run.config["algorithm"], ([], []))
            matched.append(extras["reported_cluster_accuracy"])
            index.append(extras["reported_cluster_accuracy_index"])
    if not values:
        return []
    lines = ["| algorithm | IFCA cluster accuracy (%), models matched to clusters | by model index (IFCA's code) | runs |",
             "|---|---|---|---|"]
    for algorithm, (matched, index) in values.items():
        lines.append(f"| {algorithm} | {mean_std(matched, 100)} | {mean_std(index, 100)} | {len(matched)} |")
    return lines


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("sweep")
    parser.add_argument("--out")
    args = parser.parse_args(argv)
    text = "\n".join(protocol_rows(Path(args.sweep))) + "\n"
    clusters = cluster_accuracy_rows(Path(args.sweep))
    if clusters:
        text += "\n" + "\n".join(clusters) + "\n"
    if args.out:
        Path(args.out).write_text(text, encoding="utf-8")
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
