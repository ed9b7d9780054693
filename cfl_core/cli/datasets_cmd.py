"""`python -m cfl_core datasets`: every data source, whether it is here, how to get it."""
from __future__ import annotations

import argparse
import json

from ..data import SOURCES, dataset_info, download_source, source_status

HELP = "list the data sources, whether each is available here, and how to get the missing ones"


def register(subparsers) -> None:
    parser = subparsers.add_parser(
        "datasets",
        help=HELP,
        description=HELP + ". Loads nothing; file sources are searched in --data-dir, $CFL_DATA_DIR, "
        "./data and (Fashion-MNIST) /usr/share/datasets/fashion-mnist.",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    parser.add_argument("--json", action="store_true", help="print a JSON list instead of a table")
    parser.add_argument("--data-dir", default=None, help="a folder searched before $CFL_DATA_DIR and ./data")
    parser.add_argument("--download", metavar="NAME", default=None,
                        help="fetch NAME with torchvision first (needs a network); one of " + ", ".join(SOURCES))
    parser.set_defaults(func=run)


def rows(data_dir: str | None = None) -> list[dict]:
    out = []
    for status in source_status(data_dir):
        info = dataset_info(status.name)
        out.append({
            "name": status.name,
            "available": status.available,
            "task": info.task,
            "shape": list(info.input_shape),
            "classes": info.num_classes,
            "n_train": info.n_train,
            "n_test": info.n_test,
            "location": status.location,
            "how_to_get": status.how_to_get,
            "description": status.description,
        })
    return out


def run(args) -> int:
    if args.download:
        download_source(args.download, args.data_dir)
    table = rows(args.data_dir)
    if args.json:
        print(json.dumps(table, indent=1))
        return 0
    header = ("name", "available", "shape", "classes", "train/test", "where found / how to get it")
    lines = [header]
    for r in table:
        lines.append((
            r["name"],
            "yes" if r["available"] else "no",
            "x".join(str(v) for v in r["shape"]),
            str(r["classes"]) if r["classes"] else "-",
            f"{r['n_train']}/{r['n_test']}",
            r["location"] if r["available"] else r["how_to_get"],
        ))
    widths = [max(len(line[i]) for line in lines) for i in range(len(header) - 1)]
    for line in lines:
        print("  ".join(cell.ljust(w) for cell, w in zip(line, widths)) + "  " + line[-1])
    return 0
