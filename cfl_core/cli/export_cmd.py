"""`python -m cfl_core export --mlflow DIR | --tensorboard DIR RUN_OR_SWEEP`: a run or a whole sweep into a tracker."""
from __future__ import annotations

import sys

from ..errors import ConfigError


def export(args) -> int:
    if not args.mlflow and not args.tensorboard:
        raise ConfigError("export", args.source, "with --mlflow DIR and/or --tensorboard DIR (where to write)")
    from ..trackers import export_mlflow, export_tensorboard
    from ..trackers.mlflow_store import store_uri
    from ..trackers.series import runs_under

    count = len(runs_under(args.source))  # refuses a folder without runs before any tracker starts
    if args.mlflow:
        ids = export_mlflow(args.source, args.mlflow, experiment=args.experiment)
        print(f"MLflow: {count} run(s) in {store_uri(args.mlflow)} (mlflow ui --backend-store-uri "
              f"{store_uri(args.mlflow)})", file=sys.stderr)
        print("\n".join(ids))
    if args.tensorboard:
        folders = export_tensorboard(args.source, args.tensorboard)
        print(f"TensorBoard: {len(folders)} run(s) in {args.tensorboard} (tensorboard --logdir {args.tensorboard})",
              file=sys.stderr)
    return 0


def register(sub) -> None:
    parser = sub.add_parser("export", help="export a run or a sweep to MLflow or TensorBoard",
                            description="Export a run folder, or every run of a sweep folder, to MLflow (an SQLite "
                                        "store in DIR) and/or TensorBoard (event files in DIR): per-round accuracy, "
                                        "ARI, NMI, losses, traffic and clients per model, the config as parameters, "
                                        "and (MLflow) the run folder as an artifact. Needs the extra "
                                        "`pip install 'cfl-lab[trackers]'`.")
    parser.add_argument("source", metavar="RUN_OR_SWEEP", help="a run folder or a sweep folder")
    parser.add_argument("--mlflow", metavar="DIR", help="the MLflow store's folder (made when missing)")
    parser.add_argument("--tensorboard", metavar="DIR", help="TensorBoard's log folder (made when missing)")
    parser.add_argument("--experiment", help="the MLflow experiment's name (default: the source folder's name)")
    parser.set_defaults(func=export)
