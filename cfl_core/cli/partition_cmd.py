"""`python -m cfl_core partition`: build a cluster-structured partition, write partition.json."""
from __future__ import annotations

import argparse
import json
import os
from collections import Counter

from ..data import dataset_info, load_dataset
from ..partition import PARTITION_HELP, PartitionConfig, build_partition
from ..settings import settings_of
from .flags import add_setting_flags, out_folder

# Names are checked by PartitionConfig.validate (not argparse choices) so that a bad
# name fails with the same one-line message as every other bad value.


def register(subparsers) -> None:
    parser = subparsers.add_parser(
        "partition",
        help="build a cluster-structured partition and write DIR/partition.json",
        description="Place clusters x clients-per-cluster clients with a known true cluster each and write "
        "DIR/partition.json (config, and per client: id, cluster, n_train, n_test, train label counts, "
        "transform). The same arguments give the same file byte for byte.",
        epilog="partitions:\n" + "\n".join(f"  {name:15} {text}" for name, text in PARTITION_HELP.items()),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_setting_flags(parser, settings_of(PartitionConfig), required=("dataset",))
    add = parser.add_argument
    add("--out", required=True, metavar="DIR", help="folder to write partition.json into (created if missing)")
    add("--data-dir", default=None, help="a folder searched before $CFL_DATA_DIR and ./data")
    add("--download", action="store_true", help="fetch a missing file source with torchvision (needs a network)")
    parser.set_defaults(func=run)


def config_from_args(args) -> PartitionConfig:
    declared = settings_of(PartitionConfig)
    given = {name: getattr(args, name) for name in declared if getattr(args, name, None) is not None}
    return PartitionConfig(**{name: declared[name].coerce(text, text=True) for name, text in given.items()})


def summary_lines(partition) -> list[str]:
    lines = []
    for k in range(partition.config.clusters):
        members = [c for c in partition.clients if c.cluster == k]
        n_train = sum(len(c.train_idx) for c in members)
        n_test = sum(len(c.test_idx) for c in members)
        labels = Counter()
        for c in members:
            labels.update({i: n for i, n in enumerate(c.label_counts) if n})
        held = "labels " + ",".join(str(i) for i in sorted(labels)) if labels else "regression targets"
        transform = ", ".join(f"{key} {value}" for key, value in members[0].transform.items()) or "no transform"
        lines.append(f"cluster {k}: {len(members)} clients, {n_train} train / {n_test} test samples, "
                     f"{held}; {transform}")
    if not partition.test_disjoint:
        lines.append("note: the test pool is too small for disjoint test sets; some test samples are shared "
                     "between clients (never with training data)")
    return lines


def run(args) -> int:
    config = config_from_args(args)
    config.validate(dataset_info(config.dataset))  # refuse before loading anything
    out_folder(args.out, empty=False)  # an existing partition.json is replaced: the same arguments give the same file
    dataset = load_dataset(config.dataset, data_dir=args.data_dir, download=args.download)
    partition = build_partition(dataset, config)
    path = os.path.join(args.out, "partition.json")
    with open(path, "w") as f:
        f.write(json.dumps(partition.to_json(), sort_keys=True, indent=1) + "\n")
    print(f"{config.partition} on {config.dataset}: {config.num_clients} clients in {config.clusters} clusters")
    for line in summary_lines(partition):
        print("  " + line)
    print(f"wrote {path}")
    return 0
