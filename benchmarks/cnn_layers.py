"""Per-layer, per-direction rates of the CNN's training step: the per-client loop against the batched path.

    python benchmarks/cnn_layers.py [--chunk 112] [--batch 20] [--threads 2] [--repeats 15]

For each layer of the LeNet-style CNN on 28x28 inputs and each direction (forward, input gradient,
weight gradient), times the kernel the loop runs (one client, a minibatch of --batch, the
reference's NCHW torch.nn layers) and the kernels the batched path can run for --chunk clients
at once (grouped convolution channels-last, which the engine ran before; the alternatives tried),
and prints FLOP/s and the share of the dense float32 matmul peak measured in the same process
(python -m cfl_core bench's peak: 2048^3). Each figure is the median of --repeats calls after a
warm-up; the loop's figure is per client, the batched one per chunk, both turned into GFLOP/s over
the same count of multiply-adds (2 FLOPs each), so the two columns compare like with like.
Last, the engine's whole training call (--train-clients) against the loop (--loop-clients), per
client-step, alternated. A benchmark script, never a test; report the machine's load (printed first
and last) with it.
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))  # the repository's cfl_core

CL = torch.channels_last
conv_bwd = torch.ops.aten.convolution_backward


CLOCK = time.perf_counter


def timed(fn, repeats: int) -> float:
    fn()
    times = []
    for _ in range(repeats):
        t = CLOCK()
        fn()
        times.append(CLOCK() - t)
    return statistics.median(times)


def conv_cases(x, w, groups, padding=0):
    """forward / input-grad / weight-grad (+bias) closures of one convolution."""
    out = F.conv2d(x, w, None, padding=padding, groups=groups)
    g = torch.randn_like(out).contiguous(memory_format=torch.channels_last if x.is_contiguous(memory_format=CL)
                                         and not x.is_contiguous() else torch.contiguous_format)
    bias = [w.shape[0]]
    args = (bias, [1, 1], [padding, padding], [1, 1], False, [0, 0], groups)
    return {
        "forward": lambda: F.conv2d(x, w, None, padding=padding, groups=groups),
        "input-grad": lambda: conv_bwd(g, x, w, *args, [True, False, False]),
        "weight-grad": lambda: conv_bwd(g, x, w, *args, [False, True, True]),
    }


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--chunk", type=int, default=112, help="clients per batched chunk (the engine's CNN chunk)")
    ap.add_argument("--batch", type=int, default=20)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--repeats", type=int, default=15)
    ap.add_argument("--train-clients", type=int, default=112,
                    help="clients for the engine-against-loop training timing at the end (0 skips)")
    ap.add_argument("--profile", action="store_true", help="print torch.profiler's table of one engine call")
    ap.add_argument("--loop-clients", type=int, default=20, help="clients the loop trains in that timing")
    ap.add_argument("--clock", choices=("wall", "cpu"), default=None,
                    help="wall (default with 2+ threads) or the process's CPU time (default with 1 thread: "
                         "on a busy machine the CPU time of one thread is what the work costs, without the "
                         "time other processes held the core)")
    o = ap.parse_args(argv)
    global CLOCK
    clock = o.clock or ("cpu" if o.threads == 1 else "wall")
    CLOCK = time.process_time if clock == "cpu" else time.perf_counter
    torch.set_num_threads(o.threads)
    torch.manual_seed(0)
    print("load before:", os.getloadavg())
    a, b = torch.randn(2048, 2048), torch.randn(2048, 2048)
    peak = 2 * 2048**3 / timed(lambda: torch.mm(a, b), 5) / 1e9
    print(f"matmul peak {peak:.1f} GFLOP/s ({o.threads} threads, {clock} clock)")
    C, B = o.chunk, o.batch
    macs = {"conv1": 6 * 25 * 24 * 24, "conv2": 16 * 150 * 8 * 8, "fc": 256 * 10}  # per sample
    rows = []

    def report(layer, direction, path, seconds, samples):
        gf = 2 * macs[layer] * samples / seconds / 1e9
        rows.append((layer, direction, path, seconds, gf))
        print(f"{layer:6} {direction:12} {path:44} {seconds * 1e3:9.3f} ms  {gf:7.1f} GFLOP/s  "
              f"{100 * gf / peak:5.1f}% of peak", flush=True)

    # the loop: one client's minibatch, NCHW as torch.nn runs it
    x1 = torch.rand(B, 1, 28, 28)
    w1 = torch.randn(6, 1, 5, 5)
    x2 = torch.rand(B, 6, 12, 12)
    w2 = torch.randn(16, 6, 5, 5)
    for layer, x, w in (("conv1", x1, w1), ("conv2", x2, w2)):
        for d, fn in conv_cases(x, w, 1).items():
            if layer == "conv1" and d == "input-grad":
                continue
            report(layer, d, "loop NCHW (per client)", timed(fn, o.repeats * 20), B)
        for d, fn in conv_cases(x.contiguous(memory_format=CL), w.contiguous(memory_format=CL), 1).items():
            if layer == "conv1" and d == "input-grad":
                continue
            report(layer, d, "loop channels-last (per client)", timed(fn, o.repeats * 20), B)

    # batched: grouped convolution over the chunk's clients, channels-last (the engine's former path)
    gx1 = torch.rand(B, C, 28, 28).contiguous(memory_format=CL)
    gw1 = torch.randn(C * 6, 1, 5, 5)
    gx2 = torch.rand(B, C * 6, 12, 12).contiguous(memory_format=CL)
    gw2 = torch.randn(C * 16, 6, 5, 5)
    for layer, x, w in (("conv1", gx1, gw1), ("conv2", gx2, gw2)):
        for d, fn in conv_cases(x, w, C).items():
            if layer == "conv1" and d == "input-grad":
                continue
            report(layer, d, f"grouped channels-last (chunk {C})", timed(fn, o.repeats), B * C)
        for d, fn in conv_cases(x.contiguous(), w, C).items():
            if layer == "conv1" and d == "input-grad":
                continue
            report(layer, d, f"grouped NCHW (chunk {C})", timed(fn, o.repeats), B * C)

    # conv1 as a true depthwise convolution: each client's image repeated for its 6 filters, groups = C * 6
    # (oneDNN pads a group's single input channel to 8 in the grouped kernel; its depthwise kernels do not)
    dx1 = torch.rand(B, C * 6, 28, 28).contiguous(memory_format=CL)
    dw1 = torch.randn(C * 6, 1, 5, 5)
    for d, fn in conv_cases(dx1, dw1, C * 6).items():
        if d != "input-grad":
            report("conv1", d, f"depthwise channels-last, input x6 (chunk {C})", timed(fn, o.repeats), B * C)
    rep = torch.rand(B, C, 1, 28, 28).contiguous()
    report("conv1", "forward", f"  its input repeated x6 (expand + copy)",
           timed(lambda: rep.expand(B, C, 6, 28, 28).reshape(B, C * 6, 28, 28).contiguous(memory_format=CL),
                 o.repeats), B * C)

    # conv1 alternatives: the client's B images as B channels of one image is not a conv; instead the
    # 1-channel conv of all C*B images with every client's 6 filters (C*6 outputs, 1/C of them used)
    # costs C x the FLOPs. What stays: im2col (unfold) + bmm, and batching the clients' images into
    # one ungrouped conv with the clients' filters stacked is wrong work. Try im2col + bmm:
    xc = torch.rand(C, B, 1, 28, 28)
    wc = torch.randn(C, 6, 25)

    def cols_of(x):
        # [C, B, 1, 28, 28] -> [C, 25, B*576]: a strided view over the 5x5 windows, copied once
        s = x.stride()
        v = x.as_strided((C, 5, 5, B, 24, 24), (s[0], s[3], s[4], s[1], s[3], s[4]))
        return v.reshape(C, 25, B * 576)

    cols = cols_of(xc)
    report("conv1", "forward", "im2col copy (as_strided) only", timed(lambda: cols_of(xc), o.repeats), B * C)
    report("conv1", "forward", "bmm on im2col [C,6,25]x[C,25,B*576]", timed(lambda: torch.bmm(wc, cols), o.repeats),
           B * C)
    gout = torch.randn(C, 6, B * 576)
    report("conv1", "weight-grad", "bmm on im2col [C,6,B*576]x[C,B*576,25]",
           timed(lambda: torch.bmm(gout, cols.transpose(1, 2)), o.repeats), B * C)
    # row-Toeplitz: out[(b,y), (o,x)] = X5[(b,y), (dy,x')] @ T[(dy,x'), (o,x)], 140 x 144 per client
    x5 = torch.rand(C, B * 24, 140)
    t5 = torch.randn(C, 140, 144)
    report("conv1", "forward", "row-Toeplitz bmm [C,B*24,140]x[C,140,144]", timed(lambda: torch.bmm(x5, t5), o.repeats),
           B * C)
    # conv2 as im2col + bmm (K = 150)
    cols2 = torch.rand(C, 150, B * 64)
    wc2 = torch.randn(C, 16, 150)
    g2 = torch.randn(C, 16, B * 64)
    report("conv2", "forward", "bmm on im2col [C,16,150]x[C,150,B*64]", timed(lambda: torch.bmm(wc2, cols2), o.repeats),
           B * C)
    report("conv2", "weight-grad", "bmm on im2col [C,16,B*64]x[C,B*64,150]",
           timed(lambda: torch.bmm(g2, cols2.transpose(1, 2)), o.repeats), B * C)
    report("conv2", "input-grad", "bmm on im2col [C,150,16]x[C,16,B*64] (+col2im)",
           timed(lambda: torch.bmm(wc2.transpose(1, 2), g2), o.repeats), B * C)
    # fc as bmm
    f = torch.rand(C, B, 256)
    wf = torch.randn(C, 256, 10)
    report("fc", "forward", "bmm [C,B,256]x[C,256,10]", timed(lambda: torch.bmm(f, wf), o.repeats), B * C)
    if o.train_clients:
        engine_against_loop(o.train_clients, o.loop_clients, o.profile)
    print("load after:", os.getloadavg())


def engine_against_loop(clients: int, loop_clients: int, profile: bool = False) -> None:
    """The engine's whole training call against the loop, per client-step, alternated, 3 repetitions each;
    `profile`: first, torch.profiler's table of one engine call (where its time goes, by operator)."""
    from cfl_core.bench.runner import BenchOptions
    from cfl_core.bench.workloads import image_federation
    from cfl_core.engine.core import Engine
    from cfl_core.engine.models import build_model
    from cfl_core.engine.reference import train_sequential
    from cfl_core.engine.training import batch_schedule

    cfg = BenchOptions().resolved().train_config()
    fed = image_federation(clients, 60, 20, 4, 0, torch.device("cpu"))
    spec = build_model("cnn", (1, 28, 28), 10, "classification")
    engine = Engine(spec, fed, cfg, 0)
    start = torch.stack([spec.init(0, "layers", i) for i in range(clients)])
    ids = torch.arange(clients)
    sched = batch_schedule(fed.n_train[:loop_clients].cpu(), ids[:loop_clients], 0, 0, cfg)
    steps = sched.steps

    def batched():
        engine.train_without_exchange(start, ids, 0)

    def loop():
        train_sequential(spec, start[:loop_clients], fed, ids[:loop_clients], sched, cfg)

    batched(), loop()  # warm-up
    if profile:
        from torch.profiler import ProfilerActivity
        from torch.profiler import profile as profiler

        with profiler(activities=[ProfilerActivity.CPU]) as prof:
            batched()
        print(prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=15))
    tb, tl = [], []
    for _ in range(3):
        tb.append(timed(batched, 1) / clients / steps)
        tl.append(timed(loop, 1) / loop_clients / steps)
    b, l = statistics.median(tb), statistics.median(tl)
    print(f"training (the bench's CNN workload): batched {b * 1e3:.3f} ms per client-step ({clients} clients), "
          f"loop {l * 1e3:.3f} ms ({loop_clients} clients), ratio {l / b:.2f}x", flush=True)


if __name__ == "__main__":
    main()
