"""How much memory an experiment holds, and how much this machine allows: the one estimate the dashboard's
job service and the CLI's `run`, `compare` and `sweep` both refuse requests by.

Memory is counted tensor by tensor (`unit_memory`): the padded federation (twice under a distribution
shift, which copies it), what the algorithm keeps between rounds (its K-hat models, or one per client;
CFL's parameter tree, FlexCFL's directions) and what a round holds at its peak (the engine's bounded
training or evaluation chunk, every participant's trained parameters and update, the loss matrix and
KMeans' copies of it, CFL's similarity matrix, the new models and the aggregation sums, the minibatch
schedule, and the checkpoint being written). The limit (`memory_limit`) is half of the memory available
now (CPU) or 80% of the GPU's memory.
"""
from __future__ import annotations

import math

ENGINE_BUDGET = 768 * 2**20  # the engine's chunk budget (cfl_core.engine.core.Engine)


def _bytes(n: float) -> str:
    for unit, size in (("GB", 2**30), ("MB", 2**20)):
        if n >= size:
            return f"{n / size:.1f} {unit}"
    return f"{max(n, 0) / 2**10:.0f} KB"


def _spec(config):
    from .data import dataset_info
    from .engine.models import build_model, default_model

    info = dataset_info(config.dataset)
    family = config.model or default_model(info.task, info.input_shape, config.unsupervised)
    outputs = 1 if info.task == "regression" else info.num_classes
    return info, build_model(family, info.input_shape, outputs, info.task)


def memory_limit(device: str) -> int:
    if device == "cuda":
        try:
            import torch

            return int(torch.cuda.get_device_properties(0).total_memory * 0.8)
        except Exception:
            pass
    try:
        with open("/proc/meminfo", encoding="ascii") as fh:
            for line in fh:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024 // 2
    except OSError:
        pass
    return 4 * 2**30


def unit_memory(config) -> dict[str, int]:
    """Bytes of each kind of tensor one experiment holds: "data", then "kept" (between rounds) and "round" (at a
    round's peak, freed after it); see the module docstring for what each counts."""
    from .algorithms import ALGORITHMS

    info, spec = _spec(config)
    pcfg = config.partition_config()
    clients = config.num_clients
    n_train = config.samples_per_client * (1 + 2 * float(config.quantity_skew))  # padding to the largest client
    n_test = pcfg.test_size
    inputs = math.prod(info.input_shape)
    samples = clients * (n_train + n_test)
    data = samples * (inputs * 4 + 8 + 1)  # float32 inputs, int64 labels, the validity mask
    if config.shift != "none":
        data = data * 2 + samples * 8  # the run's own copy of the federation, and each sample's origin
    P = max(1, round(config.participation * clients))
    D = spec.dim
    algo = ALGORITHMS.get(config.algorithm)
    name = algo.name if algo is not None else config.algorithm
    k = config.models or 1
    models = clients if algo is not None and algo.one_model_per_client else k
    kept = models * D * 4
    if name == "cfl":
        kept += 2 * clients * D * 4  # the parameter tree: pre-split models and the children's cached updates
    if name in ("flexcfl", "fedgroup"):
        kept += 2 * k * D * 8  # SVD directions and group directions (float64)
    batch = min(config.batch_size, max(1, int(n_train)))
    chunk = min(P * 4 * (6 * D + batch * spec.activation_floats()), ENGINE_BUDGET)
    steps = config.local_epochs * max(1, math.ceil(n_train / batch))
    loss_models = k if algo is not None and algo.has_loss_vectors else 0
    per_round = {
        "engine chunk": chunk,  # training or evaluation: the engine bounds either by its budget
        "trained parameters": 2 * P * D * 4,  # every participant's result and its update (or start)
        "new models and sums": 3 * models * D * 4,
        "loss matrix and KMeans": P * loss_models * (4 + 4 * 8),
        "schedule": steps * P * batch * 9,
        "checkpoint": 2 * kept,  # the state's copy and its bytes, while they are written
    }
    if name == "cfl":
        per_round["similarity"] = 2 * P * D * 8 + 2 * P * P * 8  # float64 unit updates and the cosine matrix
    if name in ("flexcfl", "fedgroup"):
        cold = min(clients, max(k, math.ceil(20 * k)))
        per_round["cold start"] = cold * D * (4 + 8 + 8)  # pre-trained models, their float64 updates, the SVD
    return {"data": int(data), "kept": int(kept), "round": int(sum(per_round.values()))}


def run_memory(configs) -> int:
    """Bytes one process holds running these configs one after another (the dashboard's sequential estimate:
    one config's data and the next one's as it is built, one algorithm's state, one round's peak)."""
    units = [unit_memory(c) for c in configs]
    return max(u["data"] for u in units) * 2 + max(u["kept"] for u in units) + max(u["round"] for u in units)


MEMORY_FLAG = "--memory-mb"


def add_memory_flag(parser) -> None:
    parser.add_argument(MEMORY_FLAG, type=int, dest="memory_mb", metavar="MB",
                        help="the memory these runs may take, in MB (default: half of the memory available now, or "
                             "80%% of the GPU's); a request whose estimate is larger is refused before it starts")


def check_memory(per_process: list[int], device: str, limit_mb: int | None, what: str = "this run") -> int:
    """The estimate of the processes that run at once (their bytes each), or ConfigError naming the memory when it
    is over the limit: the estimate, the limit and how to raise it knowingly. Returns the estimate."""
    from .errors import ConfigError

    if limit_mb is not None and limit_mb < 1:
        raise ConfigError(MEMORY_FLAG, limit_mb, "a whole number of megabytes >= 1")
    need = int(sum(per_process))
    limit = limit_mb * 2**20 if limit_mb is not None else memory_limit(device)
    if need > limit:
        source = f"{MEMORY_FLAG} {limit_mb}" if limit_mb is not None else (
            "80% of the GPU's memory" if device == "cuda" else "half of the memory available now")
        raise ConfigError("memory", f"about {_bytes(need)} (estimated)",
                          f"at most {_bytes(limit)} ({source}) for {what}; use fewer clients, samples per client or "
                          f"models, fewer runs at once (--workers), or raise the limit knowingly with "
                          f"{MEMORY_FLAG} {math.ceil(need * 1.2 / 2**20)}")
    return need
