"""The peer workload in Apple's pfl-research (`pfl`, PyTorch backend, SimulatedBackend).

    .venv-peers/bin/python benchmarks/peers/pfl_fedavg.py --data W.npz --out R.json \
        [--algorithm fedavg|clove] [--rounds 4] [--warmup 1] [--threads 2]
    # pfl's multi-process simulation on one machine (each process simulates part of the cohort):
    .venv-peers/bin/torchrun --standalone --nproc_per_node 2 benchmarks/peers/pfl_fedavg.py ... --threads 2

`--threads` is the torch threads in all: under torchrun each of the N processes takes THREADS / N (at
least 1), so the line above is 2 processes x 1 thread, pfl's fastest setup on 2 cores. pfl hands every
process its share of each cohort (user i to process i mod N); each process writes which users it
simulated in every central iteration to OUT.users.rankR.json, which the benchmark checks (every user
trained once per round, half of them by each of 2 processes). `--time-limit` stops after the round
that passes it (once `--min-rounds` are done), every process at the same round.

FedAvg: pfl's own `FederatedAveraging` with `NNAlgorithmParams` (every user in the train cohort,
every user in the val cohort each iteration: federated evaluation of the global model on each
user's test set), `PyTorchModel` with a local `torch.optim.SGD` and a central SGD of learning
rate 1 (the averaged model difference is applied as is). The only change to pfl's FedAvg: the
train users do not also evaluate before and after training (pfl does that when an iteration
evaluates), so every framework evaluates each client once per round on its test set.

CLoVE: a custom `FederatedNNAlgorithm` written the way pfl's algorithms are (contexts per central
iteration, statistics summed by the backend): one CLoVE round is two central iterations, a query
(every user's loss on the K models, returned as its row of the loss matrix) followed by KMeans
and matching on the server, then training (each user its cluster's model; statistics are the
model differences of all K models and a one-hot count, so the backend's sum gives per-model means).
The val cohort evaluates each user's assigned model with the query.
"""
from __future__ import annotations

import dataclasses
import functools
import json
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import numpy as np  # noqa: E402
import torch  # noqa: E402
from torch import nn  # noqa: E402

import common  # noqa: E402

INCLUDES = {
    "fedavg": "one pfl central iteration: the SimulatedBackend's train cohort of every user (per user: "
              "Dataset, local SGD via PyTorchModel, model difference, sum) and the val cohort of every user "
              "(per-user evaluation on its test set), averaging and the central update; process start-up and "
              "the first iteration excluded",
    "clove": "two pfl central iterations: query (every user's loss on K models, summed into the loss "
             "matrix) with the val cohort evaluating each user's model, KMeans + matching, then training "
             "(each user its cluster's model) and per-model averaging; start-up and the first round excluded",
}


class Net(nn.Module):
    """K copies of the bench's MLP; `active` selects the one a user trains or is evaluated on.
    pfl's PyTorchModel needs `loss` and `metrics` on the module."""

    def __init__(self, w: common.Workload):
        super().__init__()
        self.nets = nn.ModuleList(w.model(k) for k in range(w.init.shape[0]))
        self.active = 0

    def forward(self, x):
        return self.nets[self.active](x)

    def loss(self, x, y, eval=False):  # noqa: A002 (pfl's keyword)
        self.train(not eval)
        return nn.functional.cross_entropy(self(x), y)

    def metrics(self, x, y, eval=False):  # noqa: A002
        from pfl.metrics import Weighted

        with torch.no_grad():
            out = self(x)
            correct = float((out.argmax(-1) == y).sum())
            loss = float(nn.functional.cross_entropy(out, y, reduction="sum"))
        return {"accuracy": Weighted(correct, len(y)), "loss": Weighted(loss, len(y))}


def main() -> int:
    args = common.parser(__doc__.splitlines()[0]).parse_args()
    processes = int(os.environ.get("WORLD_SIZE", "1"))  # torchrun's; pfl's own world size once it starts
    torch.set_num_threads(max(1, args.threads // processes))  # the threads in all, split over the processes
    w = common.Workload(args.data)

    from pfl.aggregate.simulate import SimulatedBackend
    from pfl.algorithm import FederatedAveraging, NNAlgorithmParams
    from pfl.algorithm.base import FederatedNNAlgorithm
    from pfl.callback.base import TrainingProcessCallback
    from pfl.context import CentralContext
    from pfl.data.dataset import Dataset
    from pfl.data.federated_dataset import FederatedDataset
    from pfl.data.sampling import get_user_sampler
    from pfl.hyperparam import NNEvalHyperParams, NNTrainHyperParams
    from pfl.internal.ops.selector import get_default_framework_module as ops
    from pfl.metrics import Metrics
    from pfl.model.pytorch import PyTorchModel
    from pfl.stats import MappedVectorStatistics

    rank = ops().distributed.global_rank
    world = ops().distributed.world_size
    users = list(range(w.clients))
    train_data = FederatedDataset(lambda u: Dataset((w.x_train[u], w.y_train[u]), user_id=u),
                                  get_user_sampler("minimize_reuse", users))
    val_data = FederatedDataset(lambda u: Dataset((w.x_test[u], w.y_test[u]), user_id=u),
                                get_user_sampler("minimize_reuse", users))

    clock = common.RoundClock(args.warmup)
    phases = {}
    simulated: dict[int, dict[str, list[int]]] = {}  # central iteration -> population -> users this process ran

    def note_user(central_context, user_dataset) -> None:
        per = simulated.setdefault(int(central_context.current_central_iteration), {})
        per.setdefault(central_context.population.name, []).append(int(user_dataset.user_id))
    extra = {"world_size": world}
    k_models = int(w.init.shape[0])

    class TimedBackend(SimulatedBackend):
        """pfl's SimulatedBackend; only reads the clock around each cohort."""

        async def async_gather_results(self, model, training_algorithm, *, central_context):
            key = phases.get("name", "train_seconds")
            if central_context.population.name == "VAL":
                key = "eval_seconds"
            clock.phase(key, True)
            out = await super().async_gather_results(model, training_algorithm, central_context=central_context)
            clock.phase(key, False)
            return out

    backend = TimedBackend(training_data=train_data, val_data=val_data)
    net = Net(w)
    model = PyTorchModel(model=net, local_optimizer_create=functools.partial(torch.optim.SGD, momentum=w.momentum),
                         central_optimizer=torch.optim.SGD(net.parameters(), lr=1.0))
    train_params = NNTrainHyperParams(local_num_epochs=w.epochs, local_learning_rate=w.lr,
                                      local_batch_size=w.batch_size)
    eval_params = NNEvalHyperParams(local_batch_size=None)

    def save():
        if rank == 0:
            common.write_result(args.out, "pfl", args, w, clock, setup, INCLUDES[args.algorithm], extra,
                                packages=("pfl",))

    def val_accuracy(metrics) -> float | None:
        for name, value in metrics:
            text = str(name).lower()
            if "val" in text and "accuracy" in text:
                return float(value.overall_value)
        return None

    class FedAvgEvalOnce(FederatedAveraging):
        """pfl's FedAvg, with evaluation only in the val cohort (not also before/after each user's training)."""

        def get_next_central_contexts(self, model, iteration, algorithm_params, model_train_params,
                                      model_eval_params=None):
            contexts, model, metrics = super().get_next_central_contexts(
                model, iteration, algorithm_params, model_train_params, model_eval_params)
            if contexts is not None:
                contexts = tuple(dataclasses.replace(c, do_evaluation=False) if c.population.name == "TRAIN" else c
                                 for c in contexts)
            return contexts, model, metrics

        def simulate_one_user(self, model, user_dataset, central_context):
            note_user(central_context, user_dataset)
            return super().simulate_one_user(model, user_dataset, central_context)

    class Clove(FederatedNNAlgorithm):
        """CLoVE as a pfl algorithm: even iterations query the loss matrix (and evaluate), odd ones train."""

        def __init__(self):
            super().__init__()
            self.assign = np.zeros(w.clients, dtype=np.int64)
            self.assigned = False

        def get_next_central_contexts(self, model, iteration, algorithm_params, model_train_params,
                                      model_eval_params=None):
            if iteration == algorithm_params.central_num_iterations:
                return None, model, Metrics()
            query = iteration % 2 == 0
            phases["name"] = "loss_matrix_seconds" if query else "train_seconds"
            common_args = dict(current_central_iteration=iteration, do_evaluation=False,
                               model_train_params=model_train_params.static_clone(),
                               model_eval_params=model_eval_params.static_clone(),
                               algorithm_params=algorithm_params.static_clone())
            from pfl.context import Population

            contexts = [CentralContext(cohort_size=w.clients, population=Population.TRAIN, seed=self._get_seed(),
                                       **common_args)]
            if query and self.assigned:  # evaluate the models trained in the previous round
                contexts.append(CentralContext(cohort_size=w.clients, population=Population.VAL,
                                               seed=self._get_seed(), **common_args))
            return tuple(contexts), model, Metrics()

        def simulate_one_user(self, model, user_dataset, central_context):
            note_user(central_context, user_dataset)
            u = int(user_dataset.user_id)
            if central_context.population.name == "VAL":
                net.active = int(self.assign[u])
                return None, model.evaluate(user_dataset, lambda n: _val_name(n), central_context.model_eval_params)
            if central_context.current_central_iteration % 2 == 0:  # query: this user's row of the loss matrix
                row = torch.zeros(w.clients, k_models)
                with torch.no_grad():
                    x, y = user_dataset.raw_data
                    for k in range(k_models):
                        row[u, k] = nn.functional.cross_entropy(net.nets[k](x), y)
                return MappedVectorStatistics({"losses": row}), Metrics()
            return super().simulate_one_user(model, user_dataset, central_context)

        def train_one_user(self, initial_model_state, model, user_dataset, central_context):
            from pfl.internal.bridge import FrameworkBridgeFactory as bridges

            k = int(self.assign[int(user_dataset.user_id)])
            net.active = k
            bridges.sgd_bridge().do_sgd(model, user_dataset, central_context.model_train_params)
            diff = model.get_model_difference(initial_model_state, clone=True)
            counts = torch.zeros(k_models)
            counts[k] = len(user_dataset)
            stats = {name: value * len(user_dataset) for name, value in diff.items()}
            stats["counts"] = counts
            return MappedVectorStatistics(stats), Metrics()

        def process_aggregated_statistics(self, central_context, aggregate_metrics, model, statistics):
            if central_context.current_central_iteration % 2 == 0:
                losses = statistics["losses"].numpy().astype(np.float64)
                clock.phase("clustering_seconds", True)
                self.assign = common.cluster_and_match(losses, k_models, w.seed + central_context.current_central_iteration)
                self.assigned = True
                clock.phase("clustering_seconds", False)
                extra.setdefault("ari", []).append(common.ari(w.clusters, self.assign))
                return model, Metrics()
            counts = statistics["counts"]
            update = {}
            for name, value in statistics.items():
                if name == "counts":
                    continue
                k = int(name.split(".")[1])  # nets.{k}.{layer}.{param}
                update[name] = value / counts[k] if counts[k] > 0 else torch.zeros_like(value)
            return model.apply_model_update(MappedVectorStatistics(update))

        def process_aggregated_statistics_from_all_contexts(self, stats_context_pairs, aggregate_metrics, model):
            (context, stats), = [p for p in stats_context_pairs if p[0].population.name == "TRAIN"]
            return self.process_aggregated_statistics(context, aggregate_metrics, model, stats)

    def _val_name(n):
        from pfl.metrics import StringMetricName

        return StringMetricName(f"val {n}")

    per_round = 1 if args.algorithm == "fedavg" else 2

    class Clock(TrainingProcessCallback):
        def on_train_begin(self, *, model):
            clock.start_round()
            return Metrics()

        def after_central_iteration(self, aggregate_metrics, model, *, central_iteration):
            acc = val_accuracy(aggregate_metrics)
            if acc is not None:
                extra["_last_accuracy"] = acc
            if (central_iteration + 1) % per_round:
                return False, Metrics()
            acc = extra.pop("_last_accuracy", None)
            # FedAvg: the val cohort of iteration r evaluates the model after r rounds (before this
            # iteration's update); CLoVE: the query iteration's val cohort evaluates the last round's models
            clock.end_round(accuracy=acc, accuracy_after_rounds=len(clock.rounds))
            save()
            # every process stops at the same round (pfl does not share a callback's stop between them)
            up = torch.tensor([1.0 if clock.time_is_up(args) else 0.0])
            if float(ops().distributed.all_reduce([up])[0]) > 0:
                clock.out_of_time = True
                return True, Metrics()
            clock.start_round()
            return False, Metrics()

    if args.algorithm == "fedavg":
        algorithm = FedAvgEvalOnce()
        params = NNAlgorithmParams(central_num_iterations=args.rounds, evaluation_frequency=1,
                                   train_cohort_size=w.clients, val_cohort_size=w.clients)
    else:
        algorithm = Clove()
        params = NNAlgorithmParams(central_num_iterations=2 * args.rounds, evaluation_frequency=1,
                                   train_cohort_size=w.clients, val_cohort_size=w.clients)
    setup = {"processes": world, "torch_threads_per_process": torch.get_num_threads(), "threads_in_all": args.threads,
             "backend": "SimulatedBackend",
             "federated_evaluation": True,
             "launcher": "torchrun" if "TORCHELASTIC_RUN_ID" in os.environ else "python"}
    algorithm.run(algorithm_params=params, backend=backend, model=model, model_train_params=train_params,
                  model_eval_params=eval_params, callbacks=[Clock()])
    extra["finished"] = clock.finished(args)
    Path(f"{args.out}.users.rank{rank}.json").write_text(json.dumps(
        {"rank": rank, "world": world, "iterations": {str(k): v for k, v in simulated.items()}}))
    # the val cohort of an iteration sees the model before that iteration's update, so the last
    # rounds' models are evaluated once more here (not timed), to compare after equal rounds
    correct = count = 0
    for u in users:
        net.active = int(algorithm.assign[u]) if args.algorithm == "clove" else 0
        c, n = common.accuracy(net, w.x_test[u], w.y_test[u])
        correct, count = correct + c, count + n
    extra["final_accuracy"], extra["final_accuracy_after"] = correct / count, len(clock.rounds)
    save()
    return 0


if __name__ == "__main__":
    sys.exit(main())
