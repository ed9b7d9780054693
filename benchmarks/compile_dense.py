"""A cached torch.compile of the batched dense training step beside the C kernel and the eager torch path.

    python benchmarks/compile_dense.py [--clients 100 1000] [--repeats 15] [--threads 2]

Issue 38 asks whether `torch.compile` could replace the dense-model kernel (cfl_core/engine/native/) for CLI and
bench runs. The workload is the peer benchmark's (cfl_core.bench.peer_workload.workload_config: digits, 80
samples of 64 features per client, the bench's MLP, SGD lr 0.05 momentum 0.9, one epoch of batch 10 = 8 steps):
one local training of M clients from the same start model on the same minibatches, three ways, in one process:

- kernel:   `train_batched` as the engine calls it, the C kernel training (CFL_NATIVE on);
- eager:    `train_batched` with CFL_NATIVE=0: the batched torch path (hand-written backward, the momentum folded
            into the weight-gradient GEMM);
- compiled: the same step (`dense_cross_entropy_grads` and the SGD momentum update of every layer) as one function
            under `torch.compile(dynamic=False)`, looped over the steps with the engine's minibatch gather.
            Its first call (the compile) is timed apart: that is what a CLI or bench process pays once. Inductor
            keeps its generated code in its on-disk cache, so a second process compiles faster ("cached").

Before timing, the three results are compared (largest difference of the trained weights). Each repetition
times every path once, the order rotating (the shared 2-core machine drifts by 20-30% within seconds); the
medians and the median of the paired ratios to the kernel are printed with their quartiles, and the load
average before and after.
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))


def workload(clients: int):
    """(spec, federation, start rows [M, D], clients, schedule, train config) of the peer workload."""
    import torch

    from cfl_core.bench.peer_workload import build_experiment, workload_config

    exp = build_experiment(workload_config(clients, "fedavg"))
    engine = exp.algorithm.engine
    everyone = torch.arange(clients)
    start = exp.models_snapshot()[0].repeat(clients, 1).contiguous()
    return engine.spec, engine.fed, start, everyone, engine.schedule(everyone, 0), engine.train_cfg


def engine_path(native_on: bool, spec, fed, start, clients, schedule, cfg):
    import torch

    from cfl_core.engine.training import train_batched

    out = torch.empty_like(start)

    def call():
        os.environ["CFL_NATIVE"] = "1" if native_on else "0"
        return train_batched(spec, start, fed, clients, schedule, cfg, out=out)[0]
    return call


def compiled_path(spec, fed, start, clients, schedule, cfg):
    """(call, compile seconds): the step under torch.compile, the first call (the compile) timed."""
    import torch

    from cfl_core.engine.dense_grads import dense_cross_entropy_grads
    from cfl_core.engine.training import _Batches

    names = [n for layer in spec.dense_layers for n in (f"{layer}.weight", f"{layer}.bias")]
    lr, momentum = float(cfg.lr), float(cfg.momentum)

    def step(params: list[torch.Tensor], bufs: list[torch.Tensor], xb, yb, valid):
        layers = [(params[i], params[i + 1]) for i in range(0, len(params), 2)]
        _, grads = dense_cross_entropy_grads(layers, xb, yb, valid)
        new_bufs = [momentum * b + g for b, g in zip(bufs, grads)]
        return [p - lr * b for p, b in zip(params, new_bufs)], new_bufs

    compiled = torch.compile(step, dynamic=False, fullgraph=True)
    valid = schedule.valid
    steps = schedule.steps

    def call():
        views = spec.views(start)
        params = [views[n].contiguous() for n in names]
        bufs = [torch.zeros_like(p) for p in params]
        batches = _Batches(fed, clients, schedule)
        for s in range(steps):
            xb, yb = batches(s)
            params, bufs = compiled(params, bufs, xb, yb, valid[s])
        return torch.cat([p.reshape(len(clients), -1) for p in params], 1)

    began = time.perf_counter()
    call()
    return call, time.perf_counter() - began


def flat_in_slot_order(spec, rows):
    """The kernel/eager result [M, D] reordered as the compiled path concatenates it (weight, bias per layer)."""
    import torch

    views = spec.views(rows)
    names = [n for layer in spec.dense_layers for n in (f"{layer}.weight", f"{layer}.bias")]
    return torch.cat([views[n].reshape(len(rows), -1) for n in names], 1)


def quartiles(values: list[float]) -> tuple[float, float, float]:
    v = sorted(values)
    q = len(v) // 4
    return v[q], statistics.median(v), v[-1 - q]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--clients", type=int, nargs="+", default=[100, 1000])
    ap.add_argument("--repeats", type=int, default=15)
    ap.add_argument("--threads", type=int, default=2)
    args = ap.parse_args(argv)
    if args.repeats < 3 or min(args.clients) < 1 or args.threads < 1:
        ap.error("--repeats needs at least 3, --clients and --threads at least 1")
    import torch

    from cfl_core.engine import native

    torch.set_num_threads(args.threads)
    print(f"torch {torch.__version__}, {args.threads} threads; kernel: {native.status()}")
    print(f"load average before: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    for m in args.clients:
        spec, fed, start, clients, schedule, cfg = workload(m)
        calls = {"kernel": engine_path(True, spec, fed, start, clients, schedule, cfg),
                 "eager": engine_path(False, spec, fed, start, clients, schedule, cfg)}
        calls["compiled"], compile_s = compiled_path(spec, fed, start, clients, schedule, cfg)
        results = {name: call().clone() for name, call in calls.items()}
        ref = flat_in_slot_order(spec, results["kernel"])
        diffs = {"eager": (flat_in_slot_order(spec, results["eager"]) - ref).abs().max().item(),
                 "compiled": (results["compiled"] - ref).abs().max().item()}
        times: dict[str, list[float]] = {name: [] for name in calls}
        order = list(calls)
        for r in range(args.repeats + 1):
            for name in order[r % 3:] + order[:r % 3]:
                began = time.perf_counter()
                calls[name]()
                if r:  # the first repetition warms up
                    times[name].append(time.perf_counter() - began)
        print(f"\nM = {m} clients, {schedule.steps} steps of batch {schedule.idx.shape[-1]}, {args.repeats} "
              f"repetitions; compile (first call, in this process): {compile_s:.1f} s; largest difference to the "
              f"kernel's weights: eager {diffs['eager']:.1e}, compiled {diffs['compiled']:.1e}")
        for name in calls:
            lo, mid, hi = quartiles(times[name])
            line = f"  {name:9s} median {mid * 1000:8.2f} ms (quartiles {lo * 1000:.2f}-{hi * 1000:.2f})"
            if name != "kernel":
                r_lo, r_mid, r_hi = quartiles([t / k for t, k in zip(times[name], times["kernel"])])
                line += f"   / kernel, paired: {r_mid:.2f} ({r_lo:.2f}-{r_hi:.2f})"
            print(line)
    os.environ.pop("CFL_NATIVE", None)
    print(f"\nload average after: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
