"""The benchmark suite: batched engine vs sequential per-client loop, on identical work.

Every comparison gives both paths the same data, the same initial models and
the same minibatch schedule, times them in the same process (interleaved
repetitions, so a change in machine load hits both alike), and checks that
their results agree before any ratio is reported; a disagreement raises
`BenchMismatch` instead. See `python -m cfl_core bench --help`.
"""
from __future__ import annotations

import statistics
import time
from dataclasses import asdict, dataclass, field
from typing import Callable

import torch

from ..algorithms import RunContext
from ..algorithms.clove import Clove
from ..config import ExperimentConfig
from ..engine.core import Engine
from ..engine.federation import resolve_device
from ..engine.models import build_model
from ..engine.reference import reference_loss_matrix, train_sequential
from ..engine.training import TrainConfig, batch_schedule
from .flops import forward_flops, train_flops
from .measure import MemoryProbe, OtherLoad, load_average, machine_facts, matmul_peak, timed
from .reference import SequentialEngine
from .workloads import digits_federation, image_federation

ROUND = 1  # the round index whose minibatch stream every training measurement uses
# The CLoVE paper's Fashion-MNIST concept-shift setting (its exp111; sweeps/clove-paper-fashion-mnist-concept-shift
# .yaml): 4 clusters x 5 clients x 1,000 samples, 400 test samples each, K = 4, the LeNet CNN, Adam lr 0.01, one
# epoch of batch 100, every client in every round (no freezing)
PAPER_CLUSTERS, PAPER_CLIENTS_PER_CLUSTER, PAPER_SAMPLES, PAPER_TEST = 4, 5, 1000, 400
PAPER_TRAIN = TrainConfig(local_epochs=1, batch_size=100, lr=0.01, optimizer="adam")


class BenchMismatch(AssertionError):
    """The batched engine and the sequential reference disagree: no ratio may be reported."""


@dataclass
class BenchOptions:
    quick: bool = False
    device: str = "auto"
    sizes: tuple[int, ...] | None = None  # clients for local training; default 10, 100, 1000 (+ 10000 unless quick)
    ks: tuple[int, ...] = (2, 4, 8)  # models in the loss-matrix rows
    loss_clients: int = 1000
    round_clients: int = 1000  # the full CLoVE round
    big_round_clients: int | None = None  # the large full round; default 10000 unless quick; 0 skips it
    # the CLoVE paper's Fashion-MNIST concept-shift round (issue 38): samples per client; default 1000 unless
    # quick; 0 skips it
    paper_round_samples: int | None = None
    families: tuple[str, ...] = ("mlp", "cnn")
    strategy_clients: int | None = 100  # CNN conv strategies compared at this many clients; 0 skips
    repeats: int | None = None  # timed repetitions of the batched path (default 5, quick 3)
    sequential_repeats: int | None = None  # of the loop (default 3, quick 1; always 1 above 1000 clients)
    sequential_limit: dict[str, int] = field(default_factory=dict)  # family -> most clients the loop is timed on
    samples: int = 60
    test_samples: int = 10
    clusters: int = 4
    local_epochs: int = 2
    batch_size: int = 20
    lr: float = 0.1
    momentum: float = 0.9
    seed: int = 0
    matmul_n: int | None = None  # default 2048 on CPU, 8192 on CUDA

    def resolved(self) -> "BenchOptions":
        out = BenchOptions(**asdict(self))
        if out.sizes is None:
            out.sizes = (10, 100, 1000) if self.quick else (10, 100, 1000, 10000)
        if out.big_round_clients is None:
            out.big_round_clients = 0 if self.quick else 10000
        if out.paper_round_samples is None:
            out.paper_round_samples = 0 if self.quick else PAPER_SAMPLES
        if out.repeats is None:
            out.repeats = 3 if self.quick else 5
        if out.sequential_repeats is None:
            out.sequential_repeats = 1 if self.quick else 3
        return out

    def train_config(self) -> TrainConfig:
        return TrainConfig(local_epochs=self.local_epochs, batch_size=self.batch_size, lr=self.lr,
                           optimizer="sgd", momentum=self.momentum)


@dataclass
class Measurement:
    name: str
    clients: int
    models: int
    batched_s: float | None
    sequential_s: float | None
    ratio: float | None
    gflops: float | None  # achieved by the batched path (counted FLOPs / median time)
    peak_share: float | None  # gflops / the machine's dense matmul rate
    peak_mem_mb: float | None  # batched path, above the memory in use before the call
    sequential_gflops: float | None = None
    process_peak_mb: float | None = None
    repeats: str = ""
    max_rel_difference: float | None = None  # the equality check's worst case (see notes)
    note: str = ""
    other_cpus: float | None = None  # CPUs other processes kept busy while this row was measured

    def to_json(self) -> dict:
        return asdict(self)


@dataclass
class BenchReport:
    facts: dict
    options: BenchOptions
    memory_method: str
    peak_gflops: float
    rows: list[Measurement]
    seconds: float = 0.0


def _median(values: list[float]) -> float:
    return statistics.median(values)


def _rate(flops: float | None, seconds: float | None) -> float | None:
    return flops / seconds / 1e9 if flops and seconds else None


# The equality check on trained models. Per model row, the relative difference is
# ||batched - reference|| / ||reference - start|| (L2): how far apart the two results are
# compared with how far training moved the model. Rounding differs between any two float
# implementations; in a network with ReLUs and max-pooling it can also flip a unit that sits
# within rounding of zero (or a pooling window within rounding of a tie), which sends one
# sample's gradient another way and moves that client's model by ~1e-3..5e-2 (the CNN shows this
# for about 1 client in 200; the MLP stays below 1e-6). So three rules: the median model must
# agree to BULK_RTOL (a systematic error, such as other minibatches, another learning rate or
# perturbed start models, moves every model far beyond it); at most SWITCH_SHARE of the models
# may differ by more than 1e-3 (an error in some clients' data or masking shows as a crowd of
# them); and no model by more than ALL_RTOL. The worst value and the count beyond 1e-3 are reported.
BULK_RTOL = 1e-4
SWITCH_RTOL = 1e-3
SWITCH_SHARE = 0.05
ALL_RTOL = 0.2


def check_models(name: str, batched: torch.Tensor, reference: torch.Tensor, start: torch.Tensor
                 ) -> tuple[float, int]:
    """(worst relative difference, models beyond 1e-3); raises BenchMismatch when a rule above fails."""
    batched, reference, start = batched.detach().cpu(), reference.detach().cpu(), start.detach().cpu()
    if batched.shape != reference.shape:
        raise BenchMismatch(f"{name}: shapes differ, {tuple(batched.shape)} vs {tuple(reference.shape)}")
    if len(batched) == 0:
        return 0.0, 0
    moved = (reference - start).norm(dim=1).clamp(min=1e-12)
    rel = (batched - reference).norm(dim=1) / moved
    rel = torch.where(torch.isnan(rel), torch.full_like(rel, float("inf")), rel)
    median, worst = float(rel.median()), float(rel.max())
    switched = int((rel > SWITCH_RTOL).sum())
    if median > BULK_RTOL or worst > ALL_RTOL or switched > SWITCH_SHARE * len(rel):
        i = int(rel.argmax())
        raise BenchMismatch(
            f"{name}: the batched engine and the sequential reference disagree (difference relative to "
            f"the training step: median {median:.3g} (allowed {BULK_RTOL:g}); {switched} of {len(rel)} "
            f"models beyond {SWITCH_RTOL:g} (allowed {SWITCH_SHARE:.0%}); worst {worst:.3g} on row {i} "
            f"(allowed {ALL_RTOL:g})); no ratio is reported")
    return worst, switched


def check_close(name: str, batched: torch.Tensor, reference: torch.Tensor, rtol: float = 1e-4,
                atol: float = 1e-5) -> float:
    batched, reference = batched.detach().cpu().float(), reference.detach().cpu().float()
    if batched.shape != reference.shape or not torch.allclose(batched, reference, rtol=rtol, atol=atol):
        worst = float((batched - reference).abs().max()) if batched.shape == reference.shape else float("nan")
        raise BenchMismatch(f"{name}: the batched engine and the sequential reference disagree "
                            f"(max |difference| {worst:.3g}; allowed {atol:g} + {rtol:g} x |value|); "
                            "no ratio is reported")
    return float(((batched - reference).abs() / reference.abs().clamp(min=1e-12)).max()) if batched.numel() else 0.0


class Suite:
    def __init__(self, opts: BenchOptions, log: Callable[[str], None] = print):
        self.opts = opts.resolved()
        self.log = log
        self.device = resolve_device(self.opts.device)
        self.probe = MemoryProbe(self.device)
        self.cfg = self.opts.train_config()
        self._feds: dict = {}
        self.peak = None

    # -- inputs ---------------------------------------------------------------------
    def federation(self, family: str, clients: int):
        key = (family, clients)
        if key not in self._feds:
            self._feds.clear()  # one federation at a time keeps memory flat for the large rows
            o = self.opts
            make = digits_federation if family in ("mlp", "logreg") else image_federation
            self._feds[key] = make(clients, o.samples, o.test_samples, o.clusters, o.seed, self.device)
        return self._feds[key]

    def spec(self, family: str, strategy: str | None = None):
        shape = (1, 8, 8) if family in ("mlp", "logreg") else (1, 28, 28)
        spec = build_model(family, shape, 10, "classification")
        if strategy:
            spec.strategy = strategy
        return spec

    def starts(self, spec, count: int, tag: str) -> torch.Tensor:
        return torch.stack([spec.init(self.opts.seed, "bench", tag, i) for i in range(count)]).to(self.device)

    def seq_count(self, family: str, clients: int) -> int:
        limit = self.opts.sequential_limit.get(family)
        return clients if not limit else min(clients, limit)

    def seq_reps(self, clients: int) -> int:
        return 1 if clients > 1000 else self.opts.sequential_repeats

    def reps(self, clients: int) -> int:
        return min(3, self.opts.repeats) if clients > 1000 else self.opts.repeats

    def _interleaved(self, batched: Callable, sequential: Callable | None, seq_reps: int, clients: int):
        tb, ts, out_b, out_s = [], [], None, None
        for r in range(self.reps(clients)):
            t, out_b = timed(batched, self.device)
            tb.append(t)
            if sequential is not None and r < seq_reps:
                t, out_s = timed(sequential, self.device)
                ts.append(t)
        return tb, ts, out_b, out_s

    def _finish(self, name, clients, models, tb, ts, scale, flops, mem, note, max_diff) -> Measurement:
        b = _median(tb)
        s = _median(ts) * scale if ts else None
        gflops = _rate(flops, b)
        reps = f"{len(tb)}/{len(ts)}" if ts else f"{len(tb)}/-"
        row = Measurement(name, clients, models, b, s, s / b if s else None, gflops,
                          gflops / self.peak if gflops and self.peak else None, mem[0],
                          _rate(flops, s), mem[1], reps, max_diff, note)
        ratio = f"{row.ratio:.1f}x" if row.ratio else "-"
        self.log(f"  {name:<34} M={clients:<6} K={models:<2} batched {b:.4f}s  loop "
                 f"{s if s is None else round(s, 4)}s  {ratio}  {gflops or 0:.1f} GFLOP/s  {mem[0]:.0f} MB")
        return row

    # -- measurements -------------------------------------------------------------------
    def matmul(self, previous: Measurement | None = None) -> Measurement:
        """The dense matmul rate; measured first and again last, the higher of the two is the peak
        (a busy machine lowers one of them), and every row's share of peak is set from it."""
        n = self.opts.matmul_n or (8192 if self.device.type == "cuda" else 2048)
        reps = max(3, self.opts.repeats)
        t, rate = matmul_peak(self.device, n, reps)
        self.log(f"  dense float32 matmul {n}^3: {rate:.1f} GFLOP/s")
        if previous is None:
            self.peak = rate
            return Measurement(f"dense matmul {n}x{n}x{n} (peak)", 0, 0, t, None, None, rate, 1.0, None,
                               repeats=f"{reps}/-", note="the reference rate for % of peak")
        first = previous.gflops
        if rate > first:
            previous.batched_s, previous.gflops = t, rate
        self.peak = previous.gflops
        previous.repeats = f"{reps}+{reps}/-"
        previous.note = (f"the reference rate for % of peak: the higher of {first:.1f} (first) and "
                         f"{rate:.1f} GFLOP/s (last)")
        return previous

    def training(self, family: str, clients: int, strategy: str | None = None) -> Measurement:
        fed = self.federation(family, clients)
        spec = self.spec(family, strategy)
        engine = Engine(spec, fed, self.cfg, self.opts.seed)
        start = self.starts(spec, clients, "train")
        ids = torch.arange(clients)
        n_seq = self.seq_count(family, clients)
        seq_ids = ids[:n_seq]
        sched = batch_schedule(fed.n_train[:n_seq].cpu(), seq_ids, self.opts.seed, ROUND, self.cfg)
        # warm-up runs, excluded from the timings
        engine.train_without_exchange(start[: min(clients, 1000)], ids[:1000], ROUND)
        w = min(n_seq, 2)
        train_sequential(spec, start[:w], fed, seq_ids[:w],
                         batch_schedule(fed.n_train[:w].cpu(), seq_ids[:w], self.opts.seed, ROUND, self.cfg), self.cfg)

        def batched():
            return engine.train_without_exchange(start, ids, ROUND)

        def sequential():
            return train_sequential(spec, start[:n_seq], fed, seq_ids, sched, self.cfg)

        tb, ts, (pb, lb), (ps, ls) = self._interleaved(batched, sequential, self.seq_reps(clients), clients)
        label = f"train {family}" + (f" [{strategy}]" if strategy else "")
        worst, switched = check_models(label, pb[:n_seq], ps, start[:n_seq])
        check_close(f"{label} (training losses)", lb[:n_seq], ls, rtol=1e-3, atol=1e-5)
        mem = self.probe.measure(batched)[:2]
        flops = train_flops(spec) * self.cfg.local_epochs * float(fed.n_train.sum())
        note = "" if strategy is None else f"conv strategy {strategy}"
        if family == "cnn" and strategy is None:
            note = f"conv strategy {spec.resolved_strategy(self.device)} (the {self.device.type} table)"
        if switched:
            note = (note + "; " if note else "") + f"{switched} of {n_seq} models differ by > 1e-3 (see notes)"
        if n_seq < clients:
            note = (note + "; " if note else "") + (
                f"loop EXTRAPOLATED: timed on {n_seq} clients, scaled x{clients / n_seq:g}")
        return self._finish(label, clients, 1, tb, ts, clients / n_seq, flops, mem, note, worst)

    def loss_matrix(self, family: str, clients: int, k: int) -> Measurement:
        fed = self.federation(family, clients)
        spec = self.spec(family)
        engine = Engine(spec, fed, self.cfg, self.opts.seed)
        models = self.starts(spec, k, "models")
        ids = torch.arange(clients)
        n_seq = self.seq_count(family, clients)
        engine.loss_matrix(models, ids, uploads=False)  # warm-up
        reference_loss_matrix(spec, models, fed, ids[:2])
        tb, ts, out_b, out_s = self._interleaved(
            lambda: engine.loss_matrix(models, ids, uploads=False),
            lambda: reference_loss_matrix(spec, models, fed, ids[:n_seq]), self.seq_reps(clients), clients)
        worst = check_close(f"loss matrix {family} K={k}", out_b[:n_seq], out_s)
        mem = self.probe.measure(lambda: engine.loss_matrix(models, ids, uploads=False))[:2]
        flops = forward_flops(spec) * k * float(fed.n_train.sum())
        note = f"loop EXTRAPOLATED from {n_seq} clients" if n_seq < clients else ""
        return self._finish(f"loss matrix {family}", clients, k, tb, ts, clients / n_seq, flops, mem, note, worst)

    def clove_round(self, clients: int, k: int = 4, sequential: bool = True) -> Measurement:
        """One CLoVE clustering round through the real strategy: loss matrix, KMeans, matching, training, averaging."""
        family = "mlp"
        fed = self.federation(family, clients)
        spec = self.spec(family)
        o = self.opts
        config = ExperimentConfig(dataset="digits", partition="feature-skew", clusters=o.clusters,
                                  clients_per_cluster=max(1, clients // o.clusters), samples_per_client=o.samples,
                                  algorithm="clove", models=k, init="different", rounds=2,
                                  local_epochs=o.local_epochs, batch_size=o.batch_size, lr=o.lr,
                                  momentum=o.momentum, seed=o.seed, device=str(self.device.type))
        ids = torch.arange(clients)
        parts = {"loss matrix": [], "train+aggregate": [], "total": []}

        def prepared(engine_cls, record: bool):
            engine = engine_cls(spec, fed, self.cfg, o.seed)
            if record:
                _instrument(engine, parts, self.device)
            algo = Clove(RunContext(config, engine, Clove.parse_options({}), lambda: fed.clusters))
            algo.setup(ids)  # initial models: not part of the round
            return algo

        def one_round(engine_cls, record=False):
            algo = prepared(engine_cls, record)
            before = algo.models.clone()
            t, _ = timed(lambda: algo.run_round(ROUND, ids), self.device)
            if record:
                parts["total"].append(t)
            return t, (algo, before)

        one_round(Engine)  # warm-up (KMeans, allocator), excluded
        tb, ts = [], []
        algo_b = algo_s = before = None
        for r in range(self.reps(clients)):
            t, (algo_b, before) = one_round(Engine, record=True)
            tb.append(t)
            if sequential and r < self.seq_reps(clients):
                t, (algo_s, _) = one_round(SequentialEngine)
                ts.append(t)
        worst = None
        if algo_s is not None:
            if not torch.equal(algo_b.assign, algo_s.assign):
                raise BenchMismatch(f"clove round M={clients}: the batched and sequential rounds assigned "
                                    f"{int((algo_b.assign != algo_s.assign).sum())} clients differently")
            worst, _ = check_models(f"clove round M={clients}", algo_b.models, algo_s.models, before)
        algo = prepared(Engine, False)
        mem = self.probe.measure(lambda: algo.run_round(ROUND, ids))[:2]
        # what Experiment.step adds after the round: every client's test metrics on its model
        models, model_of = algo.eval_models()
        t_eval = _median([timed(lambda: algo.engine.evaluate(models, model_of), self.device)[0]
                          for _ in range(self.reps(clients))])
        flops = (forward_flops(spec) * k + train_flops(spec) * o.local_epochs) * float(fed.n_train.sum())
        lm, tr = _median(parts["loss matrix"]), _median(parts["train+aggregate"])
        other = _median(parts["total"]) - lm - tr
        note = (f"medians: loss matrix {lm:.3f}s, clustering+matching {other:.3f}s, training+aggregation "
                f"{tr:.3f}s (test evaluation after the round, not included: {t_eval:.3f}s); process peak "
                f"{mem[1]:.0f} MB; GFLOP/s counts the loss matrix and training")
        if not sequential:
            note += "; loop not run"
        return self._finish("clove round mlp (digits)", clients, k, tb, ts, 1.0, flops, mem, note, worst)

    def paper_round(self, samples: int = PAPER_SAMPLES) -> Measurement:
        """One CLoVE round at the CLoVE paper's Fashion-MNIST concept-shift size (issue 38) on synthetic 28x28
        images (the arithmetic of Fashion-MNIST's): loss matrix, clustering, training, averaging, then the test
        evaluation Experiment.step adds. No loop: what it is read against is the machine's peak (the share)."""
        clients = PAPER_CLUSTERS * PAPER_CLIENTS_PER_CLUSTER
        k = PAPER_CLUSTERS
        test = max(1, samples * PAPER_TEST // PAPER_SAMPLES)
        fed = image_federation(clients, samples, test, PAPER_CLUSTERS, self.opts.seed, self.device)
        spec = self.spec("cnn")
        config = ExperimentConfig(dataset="fashion-mnist", partition="concept-shift", clusters=PAPER_CLUSTERS,
                                  clients_per_cluster=PAPER_CLIENTS_PER_CLUSTER, samples_per_client=samples,
                                  test_samples_per_client=test, algorithm="clove", models=k, init="different",
                                  rounds=2, local_epochs=PAPER_TRAIN.local_epochs, batch_size=PAPER_TRAIN.batch_size,
                                  lr=PAPER_TRAIN.lr, optimizer=PAPER_TRAIN.optimizer, seed=self.opts.seed,
                                  device=str(self.device.type))
        options = Clove.parse_options({"first_assignment": "evaluation", "freeze": False})
        ids = torch.arange(clients)
        parts = {"loss matrix": [], "train+aggregate": []}  # every instrumented call's time
        per_round = {"loss matrix": [], "train+aggregate": [], "rest": []}  # each round's own sums

        def one_round(record: bool) -> float:
            engine = Engine(spec, fed, PAPER_TRAIN, self.opts.seed)
            if record:
                _instrument(engine, parts, self.device)
            seen = {key: len(parts[key]) for key in ("loss matrix", "train+aggregate")}
            algo = Clove(RunContext(config, engine, options, lambda: fed.clusters))
            algo.setup(ids)  # initial models: not part of the round

            def round_and_evaluation():
                algo.run_round(ROUND, ids)
                models, model_of = algo.eval_models()
                algo.engine.evaluate(models, model_of)

            t, _ = timed(round_and_evaluation, self.device)
            if record:
                spent = {key: sum(parts[key][seen[key]:]) for key in seen}
                for key, value in spent.items():
                    per_round[key].append(value)
                per_round["rest"].append(t - sum(spent.values()))
            return t

        one_round(False)  # warm-up, excluded
        tb = [one_round(True) for _ in range(self.reps(clients))]
        mem = self.probe.measure(lambda: one_round(False))[:2]
        n_train, n_test = float(fed.n_train.sum()), float(fed.n_test.sum())
        flops = (forward_flops(spec) * k + train_flops(spec)) * n_train + forward_flops(spec) * n_test
        lm, tr, rest = (_median(per_round[key]) for key in ("loss matrix", "train+aggregate", "rest"))
        note = (f"{samples} samples x {clients} clients, {test} test each; {flops / 1e9:.1f} GFLOP (loss matrix "
                f"{forward_flops(spec) * k * n_train / 1e9:.1f}, training {train_flops(spec) * n_train / 1e9:.1f}, "
                f"the rest forward passes of evaluation); medians over the rounds: loss matrix {lm:.3f}s, "
                f"training+aggregation {tr:.3f}s, the rest (clustering, matching, evaluation) {rest:.3f}s")
        return self._finish("clove round cnn (paper size)", clients, k, tb, [], 1.0, flops, mem, note, None)

def _instrument(engine: Engine, parts: dict, device) -> None:
    """Time the engine calls inside a round (the rest of the round is clustering and matching)."""
    for method, key in (("loss_matrix", "loss matrix"), ("train_and_aggregate", "train+aggregate")):
        inner = getattr(engine, method)

        def wrapped(*args, _inner=inner, _key=key, **kwargs):
            t, out = timed(lambda: _inner(*args, **kwargs), device)
            parts[_key].append(t)
            return out

        setattr(engine, method, wrapped)


def run_benchmark(opts: BenchOptions, log: Callable[[str], None] = print) -> BenchReport:
    began = time.perf_counter()
    suite = Suite(opts, log)
    o = suite.opts
    facts = machine_facts(suite.device)
    facts["load_before"] = load_average()
    others = OtherLoad()
    log(f"benchmark on {facts['device']} ({facts['cpu']}, {facts['threads']} threads, torch {facts['torch']})")
    rows = []

    def measure(fn, *args, **kwargs):
        probe = OtherLoad()
        row = fn(*args, **kwargs)
        row.other_cpus = probe.cpus()
        rows.append(row)

    measure(suite.matmul)
    for family in o.families:
        for clients in o.sizes:
            measure(suite.training, family, clients)
        if family == "cnn" and o.strategy_clients:
            for strategy in ("unfold", "grouped", "loop"):
                measure(suite.training, family, o.strategy_clients, strategy)
    if o.loss_clients:
        for k in o.ks:
            measure(suite.loss_matrix, "mlp", o.loss_clients, k)
    if o.round_clients:
        measure(suite.clove_round, o.round_clients)
    if o.big_round_clients:
        measure(suite.clove_round, o.big_round_clients,
                sequential=suite.seq_count("mlp", o.big_round_clients) >= o.big_round_clients)
    if o.paper_round_samples:
        measure(suite.paper_round, o.paper_round_samples)
    suite.matmul(rows[0])
    for row in rows[1:]:
        row.peak_share = row.gflops / suite.peak if row.gflops and suite.peak else None
    facts["load_after"] = load_average()
    facts["other_cpus"] = others.cpus()
    return BenchReport(facts, o, suite.probe.method, suite.peak, rows, time.perf_counter() - began)
