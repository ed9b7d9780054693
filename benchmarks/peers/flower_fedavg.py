"""The peer workload in Flower's Simulation Runtime (`flwr[simulation]`, Ray backend, Message API).

    .venv-peers/bin/python benchmarks/peers/flower_fedavg.py --data W.npz --out R.json \
        [--algorithm fedavg|clove] [--rounds 4] [--warmup 1] [--threads 2] [--num-cpus 1]

FedAvg: Flower's own `FedAvg` strategy (`flwr.serverapp.strategy`), every node trains and then
every node evaluates the new global model on its test set (federated evaluation,
fraction_train = fraction_evaluate = 1). The ClientApp trains with plain torch (SGD over
shuffled minibatches) and replies with its model and metrics. A subclass of FedAvg only reads
the clock at configure/aggregate.

CLoVE: a custom strategy in Flower's style (the loop of `Strategy.start`): each round a QUERY
message carries all K models to every node, which replies with its training loss on each;
the server clusters the loss vectors (KMeans) and matches clusters to models, sends every node
its model to train (TRAIN), averages per model, and every node evaluates its model (EVALUATE).

Threads: `--num-cpus` is Flower's client resource (CPUs per ClientApp actor); the actors'
torch threads are num_cpus each, so with 2 threads in all: 2 actors x 1 thread or 1 x 2.
`--time-limit` (after `--min-rounds`) stops the CLoVE loop; Flower's FedAvg `Strategy.start` runs all
`--rounds` (it has no way to stop early), so pass fewer rounds for large M.
"""
from __future__ import annotations

import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import numpy as np  # noqa: E402
import torch  # noqa: E402

import common  # noqa: E402

ENV_DATA, ENV_THREADS = "CFL_PEER_DATA", "CFL_PEER_THREADS"
_workload: common.Workload | None = None


def workload() -> common.Workload:
    """The workload, loaded once per process (each Ray actor has its own copy)."""
    global _workload
    if _workload is None:
        torch.set_num_threads(int(os.environ.get(ENV_THREADS, "1")))
        _workload = common.Workload(os.environ[ENV_DATA])
    return _workload


# -- the ClientApp ---------------------------------------------------------------------------------
def make_client_app():
    from flwr.app import ArrayRecord, Message, MetricRecord, RecordDict
    from flwr.clientapp import ClientApp

    app = ClientApp()

    def model_from(record) -> torch.nn.Module:
        w = workload()
        net = common.mlp(w.features, w.hidden, w.classes)
        net.load_state_dict(record.to_torch_state_dict())
        return net

    @app.train()
    def train(msg: Message, context) -> Message:
        w = workload()
        i = int(context.node_config["partition-id"])
        net = model_from(msg.content["arrays"])
        rnd = int(msg.content["config"]["server-round"])
        gen = torch.Generator().manual_seed(w.seed * 1_000_003 + rnd * 7919 + i)
        loss = common.local_sgd(net, w.x_train[i], w.y_train[i], w.lr, w.momentum, w.batch_size, w.epochs, gen)
        metrics = MetricRecord({"train_loss": loss, "num-examples": int(len(w.y_train[i])), "partition": i})
        return Message(content=RecordDict({"arrays": ArrayRecord(net.state_dict()), "metrics": metrics}),
                       reply_to=msg)

    @app.evaluate()
    def evaluate(msg: Message, context) -> Message:
        w = workload()
        i = int(context.node_config["partition-id"])
        correct, n = common.accuracy(model_from(msg.content["arrays"]), w.x_test[i], w.y_test[i])
        metrics = MetricRecord({"eval_acc": correct / n, "num-examples": n, "partition": i})
        return Message(content=RecordDict({"metrics": metrics}), reply_to=msg)

    @app.query()
    def query(msg: Message, context) -> Message:
        """CLoVE: this node's mean training loss on every model it was sent."""
        w = workload()
        i = int(context.node_config["partition-id"])
        keys = sorted((k for k in msg.content.array_records if k.startswith("model-")), key=lambda k: int(k[6:]))
        losses = [common.mean_loss(model_from(msg.content[k]), w.x_train[i], w.y_train[i]) for k in keys]
        return Message(content=RecordDict({"metrics": MetricRecord({"losses": losses, "partition": i})}),
                       reply_to=msg)

    return app


# -- the ServerApp ---------------------------------------------------------------------------------
def make_server_app(args, clock: common.RoundClock, state: dict):
    from flwr.app import ArrayRecord, ConfigRecord, Message, MessageType, RecordDict
    from flwr.serverapp import ServerApp
    from flwr.serverapp.strategy import FedAvg

    w = workload()
    app = ServerApp()

    def save():
        common.write_result(args.out, "flower", args, w, clock, state["setup"], INCLUDES[args.algorithm],
                            state["extra"], packages=("flwr", "ray"))

    class TimedFedAvg(FedAvg):
        """Flower's FedAvg; only reads the clock."""

        def configure_train(self, server_round, arrays, config, grid):
            clock.start_round()
            clock.phase("train_seconds", True)
            return super().configure_train(server_round, arrays, config, grid)

        def aggregate_train(self, server_round, replies):
            out = super().aggregate_train(server_round, replies)
            clock.phase("train_seconds", False)
            return out

        def configure_evaluate(self, server_round, arrays, config, grid):
            clock.phase("eval_seconds", True)
            return super().configure_evaluate(server_round, arrays, config, grid)

        def aggregate_evaluate(self, server_round, replies):
            replies = list(replies)
            out = super().aggregate_evaluate(server_round, replies)
            clock.phase("eval_seconds", False)
            accs = [r.content["metrics"]["eval_acc"] for r in replies if r.has_content()]
            clock.end_round(accuracy=float(np.mean(accs)) if accs else None, evaluated=len(accs))
            save()
            return out

    class Clove:
        """CLoVE in Flower's Message API: query losses on K models, cluster, train, evaluate."""

        def __init__(self, grid):
            self.grid = grid
            self.k = int(w.init.shape[0])

        def _send(self, messages):
            messages = list(messages)
            replies = list(self.grid.send_and_receive(messages))
            failed = [r for r in replies if r.has_error()]
            if failed or len(replies) != len(messages):
                reason = failed[0].error.reason if failed else "replies missing"
                raise RuntimeError(f"{len(failed)} of {len(messages)} nodes failed ({len(replies)} replies): {reason}")
            return replies

        def start(self, models: list, num_rounds: int):
            nodes = list(self.grid.get_node_ids())
            while len(nodes) < w.clients:  # as Flower's sample_nodes does: wait until every node is there
                time.sleep(0.1)
                nodes = list(self.grid.get_node_ids())
            for rnd in range(1, num_rounds + 1):
                clock.start_round()
                clock.phase("loss_matrix_seconds", True)
                query = RecordDict({f"model-{k}": ArrayRecord(m) for k, m in enumerate(models)})
                replies = self._send(Message(query, dst_node_id=n, message_type=MessageType.QUERY) for n in nodes)
                node_of = {int(r.content["metrics"]["partition"]): r.metadata.src_node_id for r in replies}
                order = sorted(node_of)
                losses = {int(r.content["metrics"]["partition"]): list(r.content["metrics"]["losses"]) for r in replies}
                clock.phase("loss_matrix_seconds", False)
                clock.phase("clustering_seconds", True)
                model_of = common.cluster_and_match(np.array([losses[i] for i in order]), self.k, w.seed + rnd)
                clock.phase("clustering_seconds", False)
                clock.phase("train_seconds", True)
                config = ConfigRecord({"server-round": rnd})
                train = [Message(RecordDict({"arrays": ArrayRecord(models[int(k)]), "config": config}),
                                 dst_node_id=node_of[i], message_type=MessageType.TRAIN)
                         for i, k in zip(order, model_of)]
                sums = [None] * self.k
                counts = np.zeros(self.k)
                assigned = dict(zip(order, model_of.tolist()))
                for r in self._send(train):
                    k = assigned[int(r.content["metrics"]["partition"])]
                    n = float(r.content["metrics"]["num-examples"])
                    sd = r.content["arrays"].to_torch_state_dict()
                    sums[k] = {p: v * n for p, v in sd.items()} if sums[k] is None else \
                        {p: sums[k][p] + v * n for p, v in sd.items()}
                    counts[k] += n
                models = [{p: v / counts[k] for p, v in sums[k].items()} if counts[k] else models[k]
                          for k in range(self.k)]
                clock.phase("train_seconds", False)
                clock.phase("eval_seconds", True)
                evaluate = [Message(RecordDict({"arrays": ArrayRecord(models[assigned[i]])}),
                                    dst_node_id=node_of[i], message_type=MessageType.EVALUATE) for i in order]
                accs = [r.content["metrics"]["eval_acc"] for r in self._send(evaluate)]
                clock.phase("eval_seconds", False)
                clock.end_round(accuracy=float(np.mean(accs)) if accs else None, evaluated=len(accs),
                                ari=common.ari(w.clusters[order], model_of))
                save()
                if clock.time_is_up(args):
                    break

    @app.main()
    def main(grid, context) -> None:
        if args.algorithm == "fedavg":
            strategy = TimedFedAvg(fraction_train=1.0, fraction_evaluate=1.0, min_train_nodes=w.clients,
                                   min_evaluate_nodes=w.clients, min_available_nodes=w.clients)
            strategy.start(grid=grid, initial_arrays=ArrayRecord(w.model(0).state_dict()),
                           num_rounds=args.rounds)
        else:
            Clove(grid).start([w.model(k).state_dict() for k in range(w.init.shape[0])], args.rounds)

    return app


INCLUDES = {
    "fedavg": "one Strategy round in Flower's Simulation Runtime: configure_train (sampling every node, one "
              "message each), the Ray actors' ClientApp calls (deserialise the model, local SGD, serialise the "
              "reply), aggregate_train (weighted average), then the same for federated evaluation on every "
              "node's test set; message store, dispatch and polling included; Ray start-up and the first "
              "round excluded",
    "clove": "one round: QUERY (K models to every node, K training losses back), KMeans + matching on the "
             "server, TRAIN (each node its cluster's model), per-model weighted average, EVALUATE (each node "
             "its model on its test set); Ray start-up and the first round excluded",
}


def main() -> int:
    p = common.parser(__doc__.splitlines()[0])
    p.add_argument("--num-cpus", type=float, default=1, help="Flower client resource: CPUs per ClientApp actor")
    args = p.parse_args()
    threads_per_actor = max(1, int(args.num_cpus))
    os.environ[ENV_DATA] = str(Path(args.data).resolve())
    os.environ[ENV_THREADS] = str(threads_per_actor)
    w = workload()
    torch.set_num_threads(args.threads)  # the driver's own torch work (aggregation, clustering)
    from flwr.simulation import run_simulation

    clock = common.RoundClock(args.warmup)
    actors = max(1, int(args.threads // args.num_cpus))
    state = {"t0": time.perf_counter(), "extra": {},
             "setup": {"backend": "ray", "num_cpus_per_client": args.num_cpus, "num_gpus": 0.0,
                       "actors": actors, "torch_threads_per_actor": threads_per_actor,
                       "ray_num_cpus": args.threads, "federated_evaluation": True}}
    backend_config = {"client_resources": {"num_cpus": args.num_cpus, "num_gpus": 0.0},
                      "init_args": {"num_cpus": args.threads, "include_dashboard": False}}
    run_simulation(server_app=make_server_app(args, clock, state), client_app=make_client_app(),
                   num_supernodes=w.clients, backend_config=backend_config)
    state["extra"]["finished"] = clock.finished(args)
    common.write_result(args.out, "flower", args, w, clock, state["setup"], INCLUDES[args.algorithm],
                        state["extra"], packages=("flwr", "ray"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
