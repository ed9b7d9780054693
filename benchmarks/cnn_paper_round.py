"""The paper-size CLoVE round of the CNN (issue 38, section 1): where its time goes, and variants side by side.

    python benchmarks/cnn_paper_round.py profile [--threads 2] [--samples 1000] [--variant before]
    python benchmarks/cnn_paper_round.py variants [--threads 2] [--repeats 7] [--variants base,slice1024,...]
    python benchmarks/cnn_paper_round.py conv [--threads 2]   # the plain single-model nn.Conv2d yardstick
    python benchmarks/cnn_paper_round.py gemm [--threads 2] [--repeats 5]   # the round's convolutions as bare GEMMs

The round is the bench row `clove round cnn (paper size)`: one CLoVE round of the CLoVE paper's Fashion-MNIST
concept-shift setting on synthetic 28x28 images (20 clients x 1,000 samples, 400 test each, K = 4, the LeNet
CNN, Adam lr 0.01, one epoch of batch 100), then the test evaluation.

`profile` runs one round under torch.profiler and splits the operators' own CPU time by phase (loss matrix,
training+aggregation, evaluation) and kind (conv forward, pool, backward, layout copies, ...).
`variants` times whole rounds of each variant in one process, the order rotating every repetition, with a
70-GFLOP torch.mm (3272^3) timed between rounds as the yardstick: each variant's figure is the median of its
rounds and of its rounds over the matmul timed just before (the ratio the issue's target is set in).
`conv` times the loss matrix's arithmetic as a plain single-model nn.Sequential (conv, relu, pool, conv, relu,
pool, linear) over the same 80,000 samples in batches, the reference for the 40% target.
`gemm` times the round's convolution and linear arithmetic as the bare matrix products it reduces to (im2col
shapes, the im2col itself, pooling, activations, the optimiser and every copy left out), each product timed at
its own shape and multiplied by how often a round needs it, against the same 70-GFLOP torch.mm: what the round
would cost if nothing but its products took time, with this machine's BLAS.
A benchmark script, never a test; the machine's load is printed first and last.
"""
from __future__ import annotations

import argparse
import contextlib
import os
import statistics
import sys
import time
from collections import defaultdict

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))  # the repository's cfl_core

from cfl_core.algorithms import RunContext  # noqa: E402
from cfl_core.algorithms.clove import Clove  # noqa: E402
from cfl_core.bench import runner  # noqa: E402
from cfl_core.bench.flops import forward_flops, train_flops  # noqa: E402
from cfl_core.bench.measure import load_average  # noqa: E402
from cfl_core.bench.workloads import image_federation  # noqa: E402
from cfl_core.config import ExperimentConfig  # noqa: E402
from cfl_core.engine import cnn  # noqa: E402
from cfl_core.engine.cnn import CNN  # noqa: E402
from cfl_core.engine.core import Engine  # noqa: E402
from cfl_core.engine.models import build_model  # noqa: E402

MM_N = 3272  # 2 * 3272^3 = 70.06 GFLOP, the yardstick
CLOCK = time.perf_counter  # --clock cpu: the process's CPU time (1 thread on a busy machine)
PHASES = ("loss matrix", "train+aggregate", "evaluation")


class PaperRound:
    """The bench row's round, built once; `run()` plays one round from the same start every time."""

    def __init__(self, samples: int, seed: int = 0):
        self.clients = runner.PAPER_CLUSTERS * runner.PAPER_CLIENTS_PER_CLUSTER
        self.k = runner.PAPER_CLUSTERS
        test = max(1, samples * runner.PAPER_TEST // runner.PAPER_SAMPLES)
        self.fed = image_federation(self.clients, samples, test, runner.PAPER_CLUSTERS, seed, torch.device("cpu"))
        self.spec = build_model("cnn", (1, 28, 28), 10, "classification")
        self.seed = seed
        self.config = ExperimentConfig(
            dataset="fashion-mnist", partition="concept-shift", clusters=runner.PAPER_CLUSTERS,
            clients_per_cluster=runner.PAPER_CLIENTS_PER_CLUSTER, samples_per_client=samples,
            test_samples_per_client=test, algorithm="clove", models=self.k, init="different", rounds=2,
            local_epochs=1, batch_size=100, lr=0.01, optimizer="adam", seed=seed, device="cpu")
        self.options = Clove.parse_options({"first_assignment": "evaluation", "freeze": False})
        n_train, n_test = float(self.fed.n_train.sum()), float(self.fed.n_test.sum())
        f = forward_flops(self.spec)
        self.flops = (f * self.k + train_flops(self.spec)) * n_train + f * n_test

    def run(self, wrap=None):
        """One round and its evaluation; `wrap(engine)` may instrument the engine first. Returns (assignment,
        models, evaluation) for comparing variants."""
        engine = Engine(self.spec, self.fed, runner.PAPER_TRAIN, self.seed)
        if wrap:
            wrap(engine)
        ids = torch.arange(self.clients)
        algo = Clove(RunContext(self.config, engine, self.options, lambda: self.fed.clusters))
        algo.setup(ids)
        algo.run_round(runner.ROUND, ids)
        models, model_of = algo.eval_models()
        ev = algo.engine.evaluate(models, model_of)
        return model_of.clone(), models.clone(), ev


def _labelled(engine: Engine) -> None:
    for method, label in (("loss_matrix", "loss matrix"), ("train_and_aggregate", "train+aggregate"),
                          ("evaluate", "evaluation")):
        inner = getattr(engine, method)

        def wrapped(*args, _inner=inner, _label=label, **kwargs):
            with torch.profiler.record_function(f"phase:{_label}"):
                return _inner(*args, **kwargs)

        setattr(engine, method, wrapped)


def _timed_phases(store: dict):
    """An engine wrapper that adds each phase's wall time to store[phase]."""
    def wrap(engine: Engine) -> None:
        for method, label in (("loss_matrix", "loss matrix"), ("train_and_aggregate", "train+aggregate"),
                              ("evaluate", "evaluation")):
            inner = getattr(engine, method)

            def wrapped(*args, _inner=inner, _label=label, **kwargs):
                t = CLOCK()
                out = _inner(*args, **kwargs)
                store[_label] = store.get(_label, 0.0) + CLOCK() - t
                return out

            setattr(engine, method, wrapped)
    return wrap


def kind_of(name: str, backward: bool) -> str:
    n = name.lower()
    if "convolution_backward" in n:
        return "conv backward"
    if "max_pool2d_with_indices_backward" in n:
        return "pool backward"
    if backward:
        return "other backward"
    if "convolution" in n or "conv2d" in n:
        return "conv forward"
    if "max_pool" in n:
        return "pool forward"
    if n in ("aten::copy_", "aten::clone", "aten::contiguous", "aten::cat", "aten::stack", "aten::index",
             "aten::to", "aten::_to_copy"):
        return "layout copies / gathers"
    if n in ("aten::mm", "aten::addmm", "aten::bmm", "aten::baddbmm", "aten::matmul"):
        return "matmul (linear)"
    if "relu" in n or "threshold" in n:
        return "relu"
    if "softmax" in n or "nll" in n or "cross_entropy" in n:
        return "loss"
    return "other (optimiser, masks, ...)"


def profile(args) -> None:
    work = PaperRound(args.samples)
    with VARIANTS[args.variant or "stacked"]():
        work.run()  # warm-up
        with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as prof:
            t = CLOCK()
            work.run(_labelled)
            wall = CLOCK() - t
    events = list(prof.events())
    spans = [(e.time_range.start, e.time_range.end, e.name[len("phase:"):]) for e in events
             if e.name.startswith("phase:")]
    table = defaultdict(float)
    for e in events:
        if e.name.startswith("phase:"):
            continue
        phase = next((p for s, end, p in spans if s <= e.time_range.start < end), "rest (clustering, setup)")
        backward, parent = False, e.cpu_parent
        while parent is not None:
            if "backward" in parent.name.lower() and not parent.name.startswith("aten::"):
                backward = True
                break
            parent = parent.cpu_parent
        backward = backward or "Backward" in e.name
        table[(phase, kind_of(e.name, backward))] += e.self_cpu_time_total / 1e6
    total = sum(table.values())
    print(f"{args.variant or 'stacked'}: one round under the profiler: {wall:.3f} s wall (its overhead included), operators' own CPU time "
          f"{total:.3f} s, {torch.get_num_threads()} threads; load {load_average()}")
    for phase in (*PHASES, "rest (clustering, setup)"):
        rows = sorted(((v, k) for (p, k), v in table.items() if p == phase), reverse=True)
        sub = sum(v for v, _ in rows)
        print(f"  {phase}: {sub:.3f} s ({100 * sub / total:.0f}%)")
        for v, k in rows:
            if v >= 0.002:
                print(f"      {k:32s} {v:7.3f} s  {100 * v / total:5.1f}%")
    if args.top:
        print(prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=args.top))


def _mm():
    gen = torch.Generator().manual_seed(0)
    a, b = torch.randn(MM_N, MM_N, generator=gen), torch.randn(MM_N, MM_N, generator=gen)
    out = torch.empty(MM_N, MM_N)

    def run():
        t = CLOCK()
        torch.mm(a, b, out=out)
        return CLOCK() - t

    run()
    return run


@contextlib.contextmanager
def patched(obj, name, value):
    old = getattr(obj, name)
    setattr(obj, name, value)
    try:
        yield
    finally:
        setattr(obj, name, old)


def _before():
    """The code before issue 38's change: the loss matrix one model at a time (SLICE samples a call)."""
    return patched(CNN, "models_shared", 1)


def _slice(n, shared=1):
    @contextlib.contextmanager
    def cm():
        with patched(cnn, "SLICE", n), patched(CNN, "models_shared", shared):
            yield
    return cm


@contextlib.contextmanager
def _bf16_loss_matrix():
    """The loss matrix under bfloat16 autocast (the stacked path)."""
    inner = Engine._loss_values

    def lowered(self, *a, **k):
        with torch.autocast("cpu", dtype=torch.bfloat16):
            return inner(self, *a, **k).float()

    with patched(Engine, "_loss_values", lowered):
        yield


_COMPILED = {}


def _compiled(name, target):
    """torch.compile of one CNN method (CLI/bench only; compiled once per process, on first use)."""
    @contextlib.contextmanager
    def cm():
        if name not in _COMPILED:
            _COMPILED[name] = torch.compile(getattr(CNN, target), dynamic=False)
        with patched(CNN, target, _COMPILED[name]):
            yield
    return cm


VARIANTS = {
    "before": _before,
    "stacked": contextlib.nullcontext,
    "before-slice1024": _slice(1024),
    "before-slice4096": _slice(4096),
    "stacked-256": lambda: patched(cnn, "STACKED_SAMPLES", 256),
    "stacked-1024": lambda: patched(cnn, "STACKED_SAMPLES", 1024),
    "stacked-bf16": _bf16_loss_matrix,
    "stacked+compiled-lm": _compiled("lm", "_stacked_features"),
    "compiled-train": _compiled("train", "_features_grouped"),
}


def variants(args) -> None:
    """Each variant is a context manager that sets the engine's knobs for the rounds inside it."""
    table = VARIANTS
    names = args.variants.split(",") if args.variants else list(table)
    work = PaperRound(args.samples)
    mm = _mm()
    results, base_out = {}, None
    rounds, ratios, phases = defaultdict(list), defaultdict(list), defaultdict(list)
    lm_flops = forward_flops(work.spec) * work.k * float(work.fed.n_train.sum())
    print(f"{args.clock} clock, {torch.get_num_threads()} threads, load {load_average()}; {work.flops / 1e9:.1f} GFLOP a round")
    for name in names:
        with table[name]():
            t = CLOCK()
            results[name] = work.run()
            print(f"  {name}: first round {CLOCK() - t:.2f} s (warm-up, compile if any)")
    base_out = results[names[0]]
    for name in names[1:]:
        a, m, ev = results[name]
        same = bool(torch.equal(a, base_out[0]))
        print(f"  {name} vs {names[0]}: assignment {'same' if same else 'DIFFERS'}, models max |diff| "
              f"{(m - base_out[1]).abs().max():.2e}, test loss max |diff| {(ev.loss - base_out[2].loss).abs().max():.2e}")
    mm_times = []
    for r in range(args.repeats):
        order = names[r % len(names):] + names[: r % len(names)]
        for name in order:
            m = mm()
            mm_times.append(m)
            spent = {}
            with table[name]():
                t = CLOCK()
                work.run(_timed_phases(spent))
                dt = CLOCK() - t
            rounds[name].append(dt)
            ratios[name].append(dt / m)
            for phase, v in spent.items():
                phases[name, phase].append(v)
    med_mm = statistics.median(mm_times)
    print(f"matmul {MM_N}^3: median {med_mm:.3f} s ({2 * MM_N**3 / med_mm / 1e9:.0f} GFLOP/s); load {load_average()}")
    base = statistics.median(rounds[names[0]])
    for name in names:
        med = statistics.median(rounds[name])
        rel = statistics.median(x / y for x, y in zip(rounds[name], rounds[names[0]]))
        print(f"  {name:22s} round median {med:.3f} s (best {min(rounds[name]):.3f})  round/matmul {statistics.median(ratios[name]):.2f}  "
              f"vs {names[0]} {rel:.2f} (paired)  {work.flops / med / 1e9:.1f} GFLOP/s")
        split = {phase: statistics.median(phases[name, phase]) for phase in PHASES}
        print("      " + ", ".join(f"{phase} {v:.3f} s" for phase, v in split.items())
              + f"; loss matrix {lm_flops / split['loss matrix'] / 1e9:.1f} GFLOP/s")
    del base


def conv(args) -> None:
    """Plain single-model nn.Sequential LeNet forward over the loss matrix's 80,000 samples, batch by batch."""
    spec = build_model("cnn", (1, 28, 28), 10, "classification")
    net = spec.reference_module().eval()
    x = torch.rand(args.samples * 20, 1, 28, 28)
    for batch in (256, 1024, 4000):
        def run():
            with torch.no_grad():
                for _ in range(4):
                    for lo in range(0, len(x), batch):
                        net(x[lo : lo + batch])
        run()
        times = []
        for _ in range(3):
            t = CLOCK()
            run()
            times.append(CLOCK() - t)
        t = statistics.median(times)
        flops = forward_flops(spec) * len(x) * 4
        print(f"  nn.Conv2d LeNet forward, batch {batch}: {t:.3f} s for 4 x {len(x)} samples, "
              f"{flops / t / 1e9:.1f} GFLOP/s")


def round_products(samples: int = 1000, clients: int = 20, k: int = 4, test: int = 400, batch: int = 100):
    """[(phase, what, (m, k), (k, n), calls a round)]: the paper round's convolutions and linear layers as matrix
    products (im2col: a 5x5 convolution of C_in channels over P output positions is [P, 25 C_in] @ [25 C_in, C_out]).
    Training: every client's model, one step per batch (forward, the input gradient of the second convolution and
    the linear layer, the weight gradients); loss matrix: the K models over every training sample, the first
    convolutions of the K models stacked (as the code does) in slices of STACKED_SAMPLES / K; evaluation: each
    client's test samples on its model, slices of SLICE."""
    steps = clients * (samples // batch)
    lm_slice = max(32, cnn.STACKED_SAMPLES // k)
    lm_calls = clients * samples / lm_slice
    ev_calls = clients * test / cnn.SLICE
    return [
        ("train", "conv1 forward", (batch * 576, 25), (25, 6), steps),
        ("train", "conv2 forward", (batch * 64, 150), (150, 16), steps),
        ("train", "linear forward", (batch, 256), (256, 10), steps),
        ("train", "linear input grad", (batch, 10), (10, 256), steps),
        ("train", "linear weight grad", (10, batch), (batch, 256), steps),
        ("train", "conv2 input grad", (batch * 64, 16), (16, 150), steps),
        ("train", "conv2 weight grad", (150, batch * 64), (batch * 64, 16), steps),
        ("train", "conv1 weight grad", (25, batch * 576), (batch * 576, 6), steps),
        ("loss matrix", "conv1 forward, K stacked", (lm_slice * 576, 25), (25, 6 * k), lm_calls),
        ("loss matrix", "conv2 forward", (lm_slice * 64, 150), (150, 16), lm_calls * k),
        ("loss matrix", "linear forward", (lm_slice, 256), (256, 10), lm_calls * k),
        ("evaluation", "conv1 forward", (cnn.SLICE * 576, 25), (25, 6), ev_calls),
        ("evaluation", "conv2 forward", (cnn.SLICE * 64, 150), (150, 16), ev_calls),
        ("evaluation", "linear forward", (cnn.SLICE, 256), (256, 10), ev_calls),
    ]


def gemm(args) -> None:
    """The round's products, each timed at its shape in its faster orientation (median of repeats, the matmul timed
    between), summed."""
    products = round_products(args.samples)
    gen = torch.Generator().manual_seed(0)
    # each product in both orientations, A @ B and its transpose B^T @ A^T (contiguous operands): the faster counts,
    # as a convolution may lay out its output either way (a 6-column product runs far below a 6-row one)
    operands, outs = [], []
    for _, _, a, b, _ in products:
        x, y = torch.randn(*a, generator=gen), torch.randn(*b, generator=gen)
        operands.append(((x, y), (y.t().contiguous(), x.t().contiguous())))
        outs.append((torch.empty(a[0], b[1]), torch.empty(b[1], a[0])))
    mm = _mm()
    totals, mms = [], []
    per_product = defaultdict(list)
    for _ in range(args.repeats):
        mms.append(mm())
        total = 0.0
        for i, ((phase, what, a, b, calls), pairs, out_pair) in enumerate(zip(products, operands, outs)):
            reps = max(3, min(200, int(2e8 / (2 * a[0] * a[1] * b[1]))))  # about 0.2 GFLOP of calls a timing
            each = float("inf")
            for (x, y), out in zip(pairs, out_pair):
                torch.mm(x, y, out=out)
                t = CLOCK()
                for _ in range(reps):
                    torch.mm(x, y, out=out)
                each = min(each, (CLOCK() - t) / reps)
            per_product[i].append(each * calls)
            total += each * calls
        totals.append(total)
        mms.append(mm())
    m = statistics.median(mms)
    print(f"  torch.mm {MM_N}^3 (70.1 GFLOP): {m:.3f} s, {2 * MM_N ** 3 / m / 1e9:.0f} GFLOP/s")
    by_phase = defaultdict(float)
    flops_all = 0.0
    for i, (phase, what, a, b, calls) in enumerate(products):
        t = statistics.median(per_product[i])
        flops = 2 * a[0] * a[1] * b[1] * calls
        flops_all += flops
        by_phase[phase] += t
        print(f"  {phase:12s} {what:26s} [{a[0]}x{a[1]}]@[{b[0]}x{b[1]}] x {calls:7.1f}: {t:.3f} s, "
              f"{flops / 1e9:5.2f} GFLOP, {flops / t / 1e9:6.1f} GFLOP/s")
    total = statistics.median(totals)
    print("  " + ", ".join(f"{p} {t:.3f} s" for p, t in by_phase.items()))
    print(f"  the round's products: {flops_all / 1e9:.1f} GFLOP in {total:.3f} s ({flops_all / total / 1e9:.0f} "
          f"GFLOP/s) = {total / m:.2f}x the matmul (median over {args.repeats} repeats; the target is the whole "
          f"round at 1.5x)")


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("mode", choices=("profile", "variants", "conv", "gemm"))
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--samples", type=int, default=1000)
    ap.add_argument("--repeats", type=int, default=7)
    ap.add_argument("--variants", default="", help=f"variants: comma-separated, of {', '.join(VARIANTS)}")
    ap.add_argument("--variant", default="", help="profile: the variant profiled (default stacked, today's code)")
    ap.add_argument("--top", type=int, default=0, help="profile: also print torch.profiler's top N operators")
    ap.add_argument("--clock", choices=("wall", "cpu"), default="wall",
                    help="wall time, or the process's CPU time (with --threads 1 on a busy machine: what the work "
                         "costs without the time other processes held the core)")
    args = ap.parse_args(argv)
    global CLOCK
    CLOCK = time.process_time if args.clock == "cpu" else time.perf_counter
    torch.set_num_threads(args.threads)
    print(f"load {load_average()}")
    {"profile": profile, "variants": variants, "conv": conv, "gemm": gemm}[args.mode](args)
    print(f"load {load_average()}")


if __name__ == "__main__":
    main()
