"""`python -m cfl_core bench`: the batched engine against the sequential per-client loop."""
from __future__ import annotations

import argparse
import shlex
import sys

import torch


def _ints(text: str) -> tuple[int, ...]:
    try:
        values = tuple(int(v) for v in text.split(",") if v.strip())
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected whole numbers separated by commas, got {text!r}") from None
    if not values or min(values) < 1:
        raise argparse.ArgumentTypeError(f"expected whole numbers >= 1 separated by commas, got {text!r}")
    return values


def _names(text: str) -> tuple[str, ...]:
    values = tuple(v.strip() for v in text.split(",") if v.strip())
    if not values:
        raise argparse.ArgumentTypeError(f"expected names separated by commas, got {text!r}")
    return values


def _floats(text: str) -> tuple[float, ...]:
    try:
        values = tuple(float(v) for v in text.split(",") if v.strip())
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected numbers separated by commas, got {text!r}") from None
    if not values or min(values) <= 0:
        raise argparse.ArgumentTypeError(f"expected numbers > 0 separated by commas, got {text!r}")
    return values


def _limits(text: str) -> dict[str, int]:
    """`mlp=1000,cnn=500` or one number for every family."""
    out = {}
    try:
        for part in text.split(","):
            if "=" in part:
                family, value = part.split("=", 1)
                out[family.strip()] = int(value)
            else:
                out.update({"mlp": int(part), "cnn": int(part)})
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected e.g. 1000 or mlp=1000,cnn=500, got {text!r}") from None
    return out


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "bench", help="benchmark the batched engine against the sequential per-client loop",
        description="Times the batched engine and the sequential per-client loop on identical work "
                    "(same data, initial models and minibatches), checks their results agree, and "
                    "reports time, ratio, GFLOP/s, share of the machine's matmul peak and peak memory.")
    p.add_argument("--quick", action="store_true", help="M up to 1000 only, fewer repetitions")
    p.add_argument("--device", default="auto", choices=["auto", "cpu", "cuda"],
                   help="auto = CUDA when present (default), cpu or cuda")
    p.add_argument("--out", metavar="FILE.md", help="write the table as Markdown (notes below the marker are kept)")
    p.add_argument("--json", metavar="FILE", help="write one JSON object per measurement")
    p.add_argument("--threads", type=int, help="torch threads (default: PyTorch's choice)")
    small = p.add_argument_group("sizes (defaults follow --quick; smaller values for tests or slow machines)")
    small.add_argument("--sizes", type=_ints, help="clients for the training rows, e.g. 10,100,1000,10000")
    small.add_argument("--ks", type=_ints, help="models for the loss-matrix rows (default 2,4,8)")
    small.add_argument("--loss-clients", type=int, help="clients for the loss-matrix rows (default 1000)")
    small.add_argument("--round-clients", type=int, help="clients in the full CLoVE round (default 1000)")
    small.add_argument("--big-round-clients", type=int,
                       help="clients in the large full round (default 10000, 0 with --quick)")
    small.add_argument("--paper-round-samples", type=int,
                       help="samples per client in the CLoVE paper's Fashion-MNIST concept-shift round (20 clients, "
                            "K = 4, the CNN, Adam; default 1000, 0 with --quick; 0 skips it)")
    small.add_argument("--strategy-clients", type=int, help="clients for the CNN strategy rows (default 100; 0 skips)")
    small.add_argument("--families", help="model families for the training rows (default mlp,cnn; none skips them)")
    small.add_argument("--repeats", type=int, help="timed repetitions of the batched path (default 5, quick 3)")
    small.add_argument("--sequential-repeats", type=int, help="timed repetitions of the loop (default 3, quick 1)")
    small.add_argument("--sequential-limit", type=_limits, default={},
                       help="time the loop on at most this many clients and scale up (said in the table), "
                            "e.g. cnn=1000")
    small.add_argument("--samples", type=int, help="training samples per client (default 60)")
    small.add_argument("--matmul-n", type=int, help="size of the peak matmul (default 2048 CPU, 8192 CUDA)")
    peers = p.add_argument_group(
        "peers (python -m cfl_core bench --peers flower,pfl): the same FedAvg workload in CFL Lab, Flower and "
        "pfl-research, each peer run as a subprocess with its own interpreter (see benchmarks/PEERS.md)")
    peers.add_argument("--peers", type=_names, help="compare with these peers instead of the engine benchmark: "
                                                    "flower, pfl or flower,pfl (--sizes sets M; default 100,1000)")
    peers.add_argument("--rounds", type=int, help="a peer's rounds per repetition, one warm-up included (default 26; "
                                                  "fewer once --round-budget has passed)")
    peers.add_argument("--cfl-rounds", type=int, help="CFL Lab's rounds per row and repetition, one warm-up included "
                                                      "(default 101; fewer once --round-budget has passed)")
    peers.add_argument("--repetitions", type=int, help="fresh-process repetitions of every framework and setup, "
                                                       "alternating; each repetition's ratio and the median are "
                                                       "reported (default 5)")
    peers.add_argument("--round-budget", type=float, help="seconds of rounds per repetition before it stops after "
                                                          "at least 3 timed rounds (default 45)")
    peers.add_argument("--busy-above", type=float, help="other processes keeping more CPUs than this busy make the "
                                                        "machine busy: the run waits, then refuses to write rows "
                                                        "(default 0.2)")
    peers.add_argument("--quiet-wait", type=float, help="seconds to wait for a busy machine to become quiet "
                                                        "before refusing (default 300)")
    peers.add_argument("--allow-busy", action="store_true",
                       help="measure on a busy machine anyway: the report says it is not quoted, marks the busy "
                            "rows, and is never written over a quoted table")
    peers.add_argument("--peer-python", metavar="PATH", help="the peers' interpreter (default .venv-peers/bin/python)")
    peers.add_argument("--time-limit", type=float, help="seconds per repetition before it is stopped (default 900)")
    peers.add_argument("--clove-clients", type=int, help="clients in the CLoVE row (default 1000; 0 skips it)")
    peers.add_argument("--flower-cpus", type=_floats, help="Flower client resources (CPUs per client) to try "
                                                           "(default 1,2; the fastest is kept)")
    peers.add_argument("--pfl-setups", type=_names, help="pfl setups to try as PROCESSESxTHREADS (default 2x1,1x2: "
                                                         "torchrun with 2 processes of 1 thread, one of 2 threads)")
    peers.add_argument("--peer-profile", action="store_true",
                       help="after the timed rows, a separate py-spy pass over each peer's fastest setup (where its "
                            "time goes; never timed or quoted)")
    peers.add_argument("--peer-workdir", metavar="DIR", help="keep the workload files, logs and peer JSON here")
    peers.add_argument("--peers-from", metavar="FILE.json",
                       help="render --out again from a saved peer run (its --json), without measuring")
    p.set_defaults(func=run)
    _PARSER_ACTIONS[:] = [a for a in p._actions if a.option_strings and a.dest != "help"]


_PARSER_ACTIONS: list = []


def _command(args) -> str:
    """The command line that reproduces this run (the flags given, in a fixed order)."""
    parts = ["python -m cfl_core bench"]
    for action in _PARSER_ACTIONS:
        value = getattr(args, action.dest, None)
        if value is None or value is False or value == {} or action.dest in ("func", "command"):
            continue
        if action.dest == "device" and value == "auto":
            continue
        flag = action.option_strings[-1]
        if value is True:
            parts.append(flag)
        elif isinstance(value, tuple):
            parts.append(f"{flag} {','.join(str(v) for v in value)}")
        elif isinstance(value, dict):
            parts.append(f"{flag} {','.join(f'{k}={v}' for k, v in value.items())}")
        else:
            parts.append(f"{flag} {shlex.quote(str(value))}")
    return " ".join(parts)


# least value of each numeric flag (one readable line for anything smaller, before any work)
_LEAST = {"repeats": 1, "sequential_repeats": 1, "matmul_n": 1, "loss_clients": 1, "round_clients": 1,
          "samples": 1, "threads": 1, "big_round_clients": 0, "paper_round_samples": 0, "strategy_clients": 0, "repetitions": 1,
          "cfl_rounds": 2}
# least value of each number-valued flag (seconds, CPUs)
_LEAST_NUMBER = {"round_budget": 0.0, "busy_above": 0.0, "quiet_wait": 0.0, "time_limit": 1.0}


def check_numbers(args) -> None:
    from ..errors import ConfigError

    for name, least in _LEAST.items():
        value = getattr(args, name, None)
        if value is not None and value < least:
            raise ConfigError("--" + name.replace("_", "-"), value, f"a whole number >= {least}")
    for name, least in _LEAST_NUMBER.items():
        value = getattr(args, name, None)
        if value is not None and not value >= least:  # also refuses nan
            raise ConfigError("--" + name.replace("_", "-"), value, f"a number >= {least:g}")


def run(args) -> int:
    check_numbers(args)
    threads_before = torch.get_num_threads()
    if args.threads:
        torch.set_num_threads(args.threads)
    try:
        return _run(args)
    finally:
        torch.set_num_threads(threads_before)


def _run(args) -> int:
    if args.peers_from:
        from ..bench.peer_report import PeerTableProtected, report_from_json, write_markdown

        report = report_from_json(args.peers_from)
        if not args.out:
            print("error: --peers-from needs --out FILE.md", file=sys.stderr)
            return 2
        previous = _previous_lines(args.out)
        report.facts.setdefault("written_at", previous.get("Run"))
        try:
            write_markdown(report, report.facts.get("command") or previous.get("Command", "(not recorded)"), args.out)
        except PeerTableProtected as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 2
        print(f"rendered {args.peers_from} into {args.out} (no measurement)", file=sys.stderr)
        return 0
    if args.peers:
        return _run_peers(args)
    from ..bench import BenchMismatch, BenchOptions, run_benchmark
    from ..bench.report import text_table, write_json, write_markdown

    fields = {
        "sizes": args.sizes, "ks": args.ks, "loss_clients": args.loss_clients,
        "round_clients": args.round_clients, "big_round_clients": args.big_round_clients,
        "paper_round_samples": args.paper_round_samples,
        "strategy_clients": args.strategy_clients, "repeats": args.repeats,
        "sequential_repeats": args.sequential_repeats, "samples": args.samples, "matmul_n": args.matmul_n,
        "families": tuple(f for f in args.families.split(",") if f and f != "none") if args.families is not None else None,
    }
    opts = BenchOptions(quick=args.quick, device=args.device, sequential_limit=args.sequential_limit,
                        **{k: v for k, v in fields.items() if v is not None})
    command = _command(args)
    try:
        report = run_benchmark(opts, log=lambda line: print(line, file=sys.stderr, flush=True))
    except BenchMismatch as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    print(text_table(report.rows))
    if args.out:
        write_markdown(report, command, args.out)
        print(f"table written to {args.out}", file=sys.stderr)
    if args.json:
        write_json(report, args.json)
        print(f"JSON written to {args.json}", file=sys.stderr)
    return 0


def _previous_lines(path: str) -> dict:
    """The command and the run's time of a table written earlier (for a saved run that lacks them)."""
    out = {}
    try:
        for line in open(path, encoding="utf-8"):
            if line.startswith("Command: `"):
                out["Command"] = line.split("`")[1]
            elif line.startswith("Run: "):
                out["Run"] = line[5:].split(",")[0]
    except OSError:
        pass
    return out


def _run_peers(args) -> int:
    from ..bench.peer_report import (PeerTableProtected, holds_quoted_table, json_holds_quoted, learning_check,
                                     summary_sentence, text_table, write_json, write_markdown)
    from ..bench.peers import PEER_SCRIPTS, PeerEnvironmentMissing, PeerOptions, run_peer_benchmark

    unknown = [p for p in args.peers if p not in PEER_SCRIPTS]
    if unknown:
        print(f"error: --peers {unknown[0]!r} is not a peer; choose from {', '.join(PEER_SCRIPTS)}", file=sys.stderr)
        return 2
    fields = {"sizes": args.sizes, "rounds": args.rounds, "peer_python": args.peer_python,
              "time_limit": args.time_limit, "clove_clients": args.clove_clients, "flower_cpus": args.flower_cpus,
              "pfl_setups": args.pfl_setups, "workdir": args.peer_workdir, "threads": args.threads,
              "samples": args.samples, "cfl_rounds": args.cfl_rounds, "repetitions": args.repetitions,
              "round_budget": args.round_budget, "busy_above": args.busy_above, "quiet_wait": args.quiet_wait}
    opts = PeerOptions(peers=args.peers, profile=args.peer_profile, allow_busy=args.allow_busy,
                       **{k: v for k, v in fields.items() if v is not None})
    if opts.rounds <= opts.warmup or opts.cfl_rounds <= opts.warmup:
        print(f"error: --rounds and --cfl-rounds must be more than the {opts.warmup} warm-up round", file=sys.stderr)
        return 2
    bad = [s for s in opts.pfl_setups if not _is_setup(s)]
    if bad:
        print(f"error: --pfl-setups {bad[0]!r} is not PROCESSESxTHREADS (e.g. 2x1)", file=sys.stderr)
        return 2
    if opts.allow_busy:  # said before any work: a busy run never replaces a quoted table
        for path, holds in ((args.out, holds_quoted_table), (args.json, json_holds_quoted)):
            if path and holds(path):
                print(f"error: {path} holds a quoted table; --allow-busy never writes over it: pass another "
                      f"--out/--json", file=sys.stderr)
                return 2
    command = _command(args)

    def save(report) -> None:
        if not any(r.seconds is not None for r in report.rows):
            return  # nothing measured (a busy machine from the start): an earlier table stays as it was
        if args.out:
            write_markdown(report, command, args.out)
        if args.json:
            write_json(report, args.json)

    try:
        report = run_peer_benchmark(opts, log=lambda line: print(line, file=sys.stderr, flush=True),
                                    progress=save, command=command)
        print(text_table(report.rows, opts.check_rounds))
        for line in learning_check(report.rows, after=opts.check_rounds):
            print(line)
        print(summary_sentence(report))
        save(report)
    except (PeerEnvironmentMissing, PeerTableProtected) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    measured = any(r.seconds is not None for r in report.rows)
    for path in (args.out, args.json):
        if path:
            print(f"written to {path}" if measured else f"nothing measured: {path} left as it was", file=sys.stderr)
    if report.facts.get("refused"):
        print(f"refused: {report.facts['refused']}", file=sys.stderr)
        return 3
    return 0


def _is_setup(text: str) -> bool:
    parts = text.split("x")
    return len(parts) == 2 and all(p.isdigit() and int(p) >= 1 for p in parts)
