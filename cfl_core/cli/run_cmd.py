"""`python -m cfl_core run`: one experiment, a progress bar, a one-line summary."""
from __future__ import annotations

import argparse
import dataclasses
import sys
import time

from ..config import ExperimentConfig, load_config_file
from ..errors import ConfigError

# Fields settable from the command line, with their flag help. Types come from the dataclass.
EXPERIMENT_FLAGS = {
    "dataset": "data source (see `python -m cfl_core datasets`)",
    "partition": "cluster structure: label-skew-1..4, feature-skew, concept-shift, iid, linear-mixture",
    "clusters": "number of true clusters K",
    "clients_per_cluster": "clients in each true cluster",
    "samples_per_client": "training samples per client",
    "test_samples_per_client": "test samples per client (default: half the training samples, at least 10)",
    "within": "split inside a cluster: iid, dirichlet or pathological",
    "alpha": "Dirichlet concentration for --within dirichlet",
    "num_classes_per_partition": "labels per client for --within pathological",
    "quantity_skew": "power-law exponent of client sizes (0 = equal sizes)",
    "algorithm": "clove, ifca, fedavg, local, oracle, ...",
    "models": "K-hat: number of models the algorithm keeps",
    "init": "initial models: different, same, or restarts",
    "rounds": "communication rounds",
    "participation": "fraction of clients taking part each round, in (0, 1]",
    "local_epochs": "local epochs per round",
    "batch_size": "local minibatch size",
    "lr": "learning rate",
    "optimizer": "sgd (with momentum) or adam; state is reset every round",
    "momentum": "SGD momentum",
    "aggregation": "model (average models, Option I) or gradient (average gradients, Option II)",
    "model": "model family: mlp, cnn, logreg, linreg, autoencoder (default: per data set)",
    "unsupervised": "train an autoencoder without labels (true/false)",
    "shift": "client distribution shift between rounds: none, swap-all, swap-part, incremental",
    "newcomer_share": "share of clients held back until --newcomer-round",
    "newcomer_round": "round at which held-back clients join",
    "seed": "random seed (same seed, same records)",
    "device": "auto (CUDA when present), cpu or cuda",
}


def _parse_bool(text: str) -> bool:
    lowered = text.lower()
    if lowered in ("1", "true", "yes", "on"):
        return True
    if lowered in ("0", "false", "no", "off"):
        return False
    raise argparse.ArgumentTypeError(f"expected true or false, got {text!r}")


def _typed(kind):
    def parse(text: str):
        if text.lower() in ("none", "null", ""):
            return None
        try:
            return kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected a {kind.__name__}, got {text!r}") from None

    return parse


def add_experiment_flags(parser: argparse.ArgumentParser, skip: tuple[str, ...] = ()) -> None:
    defaults = ExperimentConfig()
    for field in dataclasses.fields(ExperimentConfig):
        if field.name not in EXPERIMENT_FLAGS or field.name in skip:
            continue
        default = getattr(defaults, field.name)
        hint = str(field.type)
        kind = _parse_bool if "bool" in hint else _typed(int) if "int" in hint else _typed(float) if "float" in hint else str
        parser.add_argument(f"--{field.name.replace('_', '-')}", dest=field.name, type=kind, default=None,
                            help=f"{EXPERIMENT_FLAGS[field.name]} (default: {default})")
    parser.add_argument("--option", action="append", default=[], metavar="KEY=VALUE",
                        help="an algorithm option, e.g. --option stable_rounds=3 (repeatable)")
    parser.add_argument("--shift-option", action="append", default=[], metavar="KEY=VALUE",
                        help="a distribution-shift option, e.g. --shift-option probability=0.1 (repeatable)")
    parser.add_argument("--config", help="a JSON file of config fields; flags given override it")


def _key_values(items: list[str], flag: str) -> dict:
    out = {}
    for item in items:
        if "=" not in item:
            raise ConfigError(flag, item, "KEY=VALUE")
        key, value = item.split("=", 1)
        out[key.strip()] = value.strip()
    return out


def config_from_args(args: argparse.Namespace, validate: bool = True, **overrides) -> ExperimentConfig:
    base = load_config_file(args.config) if getattr(args, "config", None) else ExperimentConfig()
    changes = {name: getattr(args, name) for name in EXPERIMENT_FLAGS
               if getattr(args, name, None) is not None}
    options = dict(base.options)
    options.update(_key_values(args.option, "--option"))
    shift_options = dict(base.shift_options)
    shift_options.update(_key_values(args.shift_option, "--shift-option"))
    config = base.replace(**{**changes, "options": options, "shift_options": shift_options, **overrides})
    if validate:
        config.validate()
    return config


class ProgressBar:
    """A one-line terminal bar; plain lines when the output is not a terminal."""

    def __init__(self, total: int, label: str, stream=None):
        self.total, self.label = total, label
        self.stream = stream or sys.stderr
        self.tty = self.stream.isatty()
        self.started = time.perf_counter()

    def update(self, record) -> None:
        done = record.round + 1
        acc = f"acc {record.accuracy:.3f}" if record.accuracy is not None else f"loss {record.loss:.4f}"
        ari = f"ARI {record.ari:.2f}" if record.ari is not None else "ARI -"
        width = 24
        filled = int(width * done / self.total)
        line = f"{self.label} [{'#' * filled}{'.' * (width - filled)}] {done}/{self.total} {acc} {ari} {record.phase}"
        if self.tty:
            self.stream.write("\r" + line.ljust(100))
            if done == self.total:
                self.stream.write("\n")
        else:
            self.stream.write(line + "\n")
        self.stream.flush()


def summary_line(summary: dict, folder) -> str:
    acc = summary.get("final_accuracy")
    first = summary.get("first_round_ari_0_9")
    parts = [
        f"{summary['algorithm']}: {summary['status']} after {summary['rounds_completed']} rounds",
        f"final accuracy {acc:.4f}" if acc is not None else f"final loss {summary.get('final_loss')}",
        f"final ARI {summary['final_ari']:.3f}" if summary.get("final_ari") is not None else "final ARI -",
        f"ARI>=0.9 at round {first}" if first is not None else "ARI never >= 0.9",
        f"{summary['total_bytes'] / 1e6:.2f} MB sent",
        f"{summary['total_seconds']:.1f} s",
    ]
    return ", ".join(parts) + (f" -> {folder}" if folder else "")


def run(args) -> int:
    from ..experiment import Experiment

    config = config_from_args(args)
    exp = Experiment(config, out_dir=args.out)
    bar = ProgressBar(config.rounds, config.algorithm)
    try:
        summary = exp.run(on_round=bar.update)
    except KeyboardInterrupt:
        summary = exp.close("stopped")
        print(summary_line(summary, args.out))
        return 130
    print(summary_line(summary, args.out))
    return 0


def register(sub) -> None:
    parser = sub.add_parser("run", help="run one experiment and write its run folder",
                            description="Run one clustered-FL experiment; writes config.json, rounds.jsonl "
                                        "(one line per round, as it goes) and summary.json to --out.")
    add_experiment_flags(parser)
    parser.add_argument("--out", required=True, help="run folder to write")
    parser.set_defaults(func=run)
