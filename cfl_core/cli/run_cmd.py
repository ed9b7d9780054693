"""`python -m cfl_core run`: one experiment, a progress bar, a one-line summary."""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from ..config import ExperimentConfig, load_config_file
from ..errors import ConfigError
from ..memory import add_memory_flag
from ..profiles import PROFILES, apply_profile
from ..settings import settings_of
from .flags import add_setting_flags, key_values, out_folder

def add_experiment_flags(parser: argparse.ArgumentParser, skip: tuple[str, ...] = ()) -> None:
    add_setting_flags(parser, settings_of(ExperimentConfig), skip)
    parser.add_argument("--option", action="append", default=[], metavar="KEY=VALUE",
                        help="an algorithm option, e.g. --option stable_rounds=3 (repeatable)")
    parser.add_argument("--shift-option", action="append", default=[], metavar="KEY=VALUE",
                        help="a distribution-shift option, e.g. --shift-option probability=0.1 (repeatable)")
    parser.add_argument("--config", help="a JSON file of config fields; flags given override it")
    parser.add_argument("--profile", choices=PROFILES,
                        help="the paper's or the authors' code's training settings and rules for the algorithm "
                             "(docs/faithfulness.md); flags and --option given override it")


def profile_request(args: argparse.Namespace) -> tuple[str, set[str], set[str]] | None:
    """(profile, config fields given as flags, option keys given) when --profile was asked for, else None."""
    name = getattr(args, "profile", None)
    if not name:
        return None
    given = {n for n, s in settings_of(ExperimentConfig).items() if s.flag and getattr(args, n, None) is not None}
    options = set(key_values(getattr(args, "option", []), "--option"))
    return name, given, options


def config_from_args(args: argparse.Namespace, validate: bool = True, profile: bool = True,
                     **overrides) -> ExperimentConfig:
    """The config file (if any), then the flags given, then `overrides`; option texts typed by their settings.

    With `profile` (and --profile given) the profile's settings for the algorithm come in under the flags."""
    from ..algorithms import ALGORITHMS
    from ..dynamics import SHIFTS

    base = load_config_file(args.config) if getattr(args, "config", None) else ExperimentConfig()
    flags = {name: getattr(args, name) for name, s in settings_of(ExperimentConfig).items()
             if s.flag and getattr(args, name, None) is not None}
    config = base.replace(**ExperimentConfig.coerce_values(flags, text=True), **overrides)
    options = key_values(getattr(args, "option", []), "--option")
    if options:
        algo = ALGORITHMS.get(config.algorithm)
        if algo is not None:  # an unknown algorithm is refused by validate() with the list of names
            typed = algo.parse_options(options, text=True)
            options = {k: getattr(typed, k) for k in options}
    shift_options = key_values(getattr(args, "shift_option", []), "--shift-option")
    if shift_options:
        if config.shift == "none":
            raise ConfigError("--shift-option", ",".join(getattr(args, "shift_option", [])),
                              "only with a distribution shift (--shift swap-all, swap-part or incremental)")
        shift = SHIFTS.get(config.shift)
        if shift is not None:
            typed = shift.parse(shift_options, text=True)
            shift_options = {k: getattr(typed, k) for k in shift_options}
    config = config.replace(options={**config.options, **options},
                            shift_options={**config.shift_options, **shift_options})
    request = profile_request(args) if profile else None
    if request is not None:
        name, given, given_options = request
        config, note = apply_profile(config, name, keep=given | set(overrides), keep_options=given_options)
        print(note, file=sys.stderr)
    if validate:
        config.validate()
    return config


class ProgressBar:
    """A one-line terminal bar; plain lines when the output is not a terminal: the first and last round, every
    change of phase, and about PLAIN_LINES lines in between (a log of a 2000-round run held 2000 of them)."""

    PLAIN_LINES = 20

    def __init__(self, total: int, label: str, stream=None):
        self.total, self.label = total, label
        self.stream = stream or sys.stderr
        self.tty = self.stream.isatty()
        self.started = time.perf_counter()
        self.every = max(1, total // self.PLAIN_LINES)
        self.phase = None  # the last record's phase (None before the first)

    def update(self, record) -> None:
        done = record.round + 1
        acc = (f"acc {record.accuracy:.3f}" if record.accuracy is not None else
               f"loss {record.loss:.4f}" if record.loss is not None else "no honest client placed yet")
        ari = (f"ARI {record.ari:.2f}" if record.ari is not None else
               "ARI n/a" if record.extras.get("ari_applicable") is False else "ARI -")
        width = 24
        filled = int(width * done / self.total)
        line = f"{self.label} [{'#' * filled}{'.' * (width - filled)}] {done}/{self.total} {acc} {ari} {record.phase}"
        changed, self.phase = record.phase != self.phase, record.phase  # the first record changes it from None
        if self.tty:
            self.stream.write("\r" + line.ljust(100))
            if done == self.total:
                self.stream.write("\n")
        elif changed or done == self.total or done % self.every == 0:
            self.stream.write(line + "\n")
        else:
            return
        self.stream.flush()


def summary_line(summary: dict, folder) -> str:
    acc = summary.get("final_accuracy")
    first = summary.get("first_round_ari_0_9")
    parts = [
        f"{summary['algorithm']}: {summary['status']} after {summary['rounds_completed']} rounds",
        f"final accuracy {acc:.4f}" if acc is not None else f"final loss {summary.get('final_loss')}",
        f"final ARI {summary['final_ari']:.3f}" if summary.get("final_ari") is not None else
        "ARI not applicable" if summary.get("ari_applicable") is False else "final ARI -",
        *([] if summary.get("ari_applicable") is False else
          [f"ARI>=0.9 at round {first}" if first is not None else "ARI never >= 0.9"]),
        f"{summary['total_bytes'] / 1e6:.2f} MB sent",
        f"{summary['total_seconds']:.1f} s",
    ]
    # the conditions' headlines (cfl_core/conditions), where the run had them
    if summary.get("dp_epsilon") is not None:
        parts.insert(-2, f"privacy spent epsilon {summary['dp_epsilon']:.3g} at delta {summary.get('dp_delta'):g}")
    if summary.get("unseen_clients"):
        unseen = summary.get("unseen_accuracy")
        parts.insert(-2, f"{summary['unseen_clients']} unseen clients' accuracy "
                         + (f"{unseen:.4f}" if unseen is not None else "-"))
    if summary.get("malicious_clients"):
        parts.insert(-2, f"{summary['malicious_clients']} attackers (scores are the honest clients')")
    return ", ".join(parts) + (f" -> {folder}" if folder else "")


def bound_memory(configs, at_once: int, limit_mb: int | None, what: str | None = None) -> int:
    """The memory estimate of running `configs` (`at_once` processes at the same time, each holding the largest
    of them), or one ConfigError with the estimate and the limit (cfl_core.memory)."""
    from ..engine.federation import resolve_device
    from ..memory import check_memory, run_memory

    each = sorted((run_memory([c]) for c in configs), reverse=True)[:max(1, at_once)]
    device = resolve_device(configs[0].device).type
    return check_memory(each, device, limit_mb, what or ("this run" if len(configs) == 1 else
                                                         f"{len(each)} of these {len(configs)} runs at once"))


def given_settings(args) -> list[str]:
    """The flags of settings given on the command line (for --resume, which takes none)."""
    flags = [s.flag_name for name, s in settings_of(ExperimentConfig).items()
             if s.flag and getattr(args, name, None) is not None]
    for name, flag in (("option", "--option"), ("shift_option", "--shift-option"), ("config", "--config")):
        if getattr(args, name, None):
            flags.append(flag)
    return flags


def live_trackers(args, out, config):
    """MLflow and/or TensorBoard fed round by round (--mlflow / --tensorboard), the rounds so far of a resumed
    run first; None when neither was asked for."""
    if not (getattr(args, "mlflow", None) or getattr(args, "tensorboard", None)):
        return None
    from ..trackers.live import LiveTrackers
    from ..run_reader import read_records

    trackers = LiveTrackers(out, config.to_dict(), mlflow=args.mlflow, tensorboard=args.tensorboard)
    for record in read_records(out):
        trackers.log(record)
    return trackers


def run(args) -> int:
    from ..experiment import Experiment

    if args.resume is not None:
        given = given_settings(args) + (["--out"] if args.out is not None else []) + \
            (["--overwrite"] if args.overwrite else [])
        if given:
            raise ConfigError(given[0], getattr(args, given[0].lstrip("-").replace("-", "_"), None),
                              "nothing beside --resume DIR: a resumed run keeps the settings in DIR/config.json")
        try:  # the saved config's memory, before anything is built (a damaged folder: resume says why)
            saved = load_config_file(str(Path(args.resume) / "config.json"))
            saved.validate()
        except ConfigError:
            saved = None
        if saved is not None:
            bound_memory([saved], 1, args.memory_mb)
        exp = Experiment.resume(args.resume)
        out, config = args.resume, exp.config
        print(f"resuming {out} after round {exp.round - 1}" if exp.round else f"restarting {out} from round 0",
              file=sys.stderr)
    else:
        config = config_from_args(args)
        if args.out is None:
            raise ConfigError("--out", None, "the run folder to write (or --resume DIR to continue a run)")
        bound_memory([config], 1, args.memory_mb)  # refused before the folder is made or any data is built
        out = out_folder(args.out, overwrite=args.overwrite)
        exp = Experiment(config, out_dir=out, overwrite=args.overwrite)
    bar = ProgressBar(config.rounds, config.algorithm)
    if exp.round:
        bar.started -= sum(r.seconds for r in exp.records)
    trackers = live_trackers(args, out, config)

    def on_round(record):
        bar.update(record)
        if trackers is not None:
            trackers.log(record)

    try:
        summary = exp.run(on_round=on_round)
    except KeyboardInterrupt:
        summary = exp.close("stopped")
        if trackers is not None:
            trackers.close("stopped")
        print(summary_line(summary, out))
        return 130
    if trackers is not None:
        trackers.close(summary.get("status", "finished"))
    print(summary_line(summary, out))
    if summary.get("status") == "diverged":
        print(f"error: {summary.get('error')}", file=sys.stderr)
        return 1
    return 0


def register(sub) -> None:
    parser = sub.add_parser("run", help="run one experiment and write its run folder",
                            description="Run one clustered-FL experiment; writes config.json, rounds.jsonl "
                                        "(one line per round, as it goes), a checkpoint of the latest round and "
                                        "summary.json to --out. --resume DIR continues a stopped or "
                                        "interrupted run from its last finished round.")
    add_experiment_flags(parser)
    parser.add_argument("--out", help="run folder to write (a new or empty folder)")
    parser.add_argument("--overwrite", action="store_true", help="replace the run already in --out")
    parser.add_argument("--resume", metavar="DIR", help="continue the run in DIR from its last finished round")
    parser.add_argument("--mlflow", metavar="DIR", help="also log every round to the MLflow store in DIR as it "
                                                        "finishes (needs pip install 'cfl-lab[trackers]')")
    parser.add_argument("--tensorboard", metavar="DIR", help="also write every round to TensorBoard event files in "
                                                             "DIR/<run folder's name> as it finishes")
    add_memory_flag(parser)
    parser.set_defaults(func=run)
