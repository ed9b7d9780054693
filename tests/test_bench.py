"""The benchmark runs end to end in a tiny mode, writes its table and JSON, and its equality checks can fail.

Timings are never asserted: they depend on the machine and its load.
"""
import json

import pytest
import torch

from cfl_core.bench import BenchMismatch, BenchOptions, run_benchmark
from cfl_core.bench import reference as bench_reference
from cfl_core.bench import runner
from cfl_core.bench.flops import forward_flops, layer_macs, train_flops
from cfl_core.bench.measure import MemoryProbe
from cfl_core.bench.report import NOTES_MARKER
from cfl_core.cli import main
from cfl_core.engine.models import build_model
from cfl_core.engine.reference import train_sequential
from cfl_core.engine.training import batch_schedule

REQUIRED_KEYS = {"name", "clients", "models", "batched_s", "sequential_s", "ratio", "gflops", "peak_share",
                 "peak_mem_mb"}
TINY_FLAGS = ["--quick", "--sizes", "3", "--ks", "2", "--loss-clients", "4", "--round-clients", "8",
              "--strategy-clients", "2", "--repeats", "1", "--matmul-n", "64", "--samples", "30",
              "--threads", "1"]  # one thread: fast and steady even when other processes load the CPU


def tiny(**changes) -> BenchOptions:
    opts = dict(quick=True, device="cpu", sizes=(3,), ks=(2,), loss_clients=4, round_clients=8,
                strategy_clients=2, repeats=1, matmul_n=64, samples=30)
    opts.update(changes)
    return BenchOptions(**opts)


def quiet(_line):
    pass


@pytest.fixture(autouse=True)
def one_thread():
    """Some tests here set two threads on purpose; put the suite's one thread back after each."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


def test_quick_mode_prints_the_table_and_writes_markdown_and_json(tmp_path, capsys):
    out, js = tmp_path / "results.md", tmp_path / "results.json"
    torch.set_num_threads(2)
    assert main(["bench", *TINY_FLAGS, "--device", "cpu", "--out", str(out), "--json", str(js)]) == 0
    printed = capsys.readouterr().out
    assert "train mlp" in printed and "loss matrix mlp" in printed and "clove round" in printed
    text = out.read_text()
    assert "| measurement | clients M | models K | batched s | loop s | ratio |" in text
    assert "Command: `python -m cfl_core bench --quick" in text and "--threads 1" in text and NOTES_MARKER in text
    assert torch.get_num_threads() == 2  # --threads applies to the benchmark only
    rows = json.loads(js.read_text())
    names = [r["name"] for r in rows]
    assert {"train mlp", "train cnn", "train cnn [grouped]", "loss matrix mlp", "clove round mlp (digits)"} <= set(names)
    assert any(n.startswith("dense matmul") for n in names)
    for row in rows:
        assert REQUIRED_KEYS <= set(row)
    for row in rows:
        if row["sequential_s"] is not None:  # every compared row was checked equal and has a ratio
            assert row["ratio"] == pytest.approx(row["sequential_s"] / row["batched_s"])
            assert row["batched_s"] > 0 and row["gflops"] > 0 and row["peak_share"] > 0
            assert row["max_rel_difference"] is not None and row["max_rel_difference"] <= runner.ALL_RTOL


def test_hand_written_notes_below_the_marker_are_kept(tmp_path):
    out = tmp_path / "results.md"
    out.write_text(f"# old table\n\n{NOTES_MARKER}\n\n## What limits performance\nkept text\n")
    assert main(["bench", *TINY_FLAGS, "--families", "mlp", "--device", "cpu", "--out", str(out)]) == 0
    text = out.read_text()
    assert "# old table" not in text and text.count(NOTES_MARKER) == 1
    assert text.endswith("## What limits performance\nkept text\n")


def _loop_with_other_seed(spec, start, fed, clients, schedule, cfg, objective=None):
    other = batch_schedule(fed.n_train[clients].cpu(), clients, 12345, 0, cfg)  # a different seed
    return train_sequential(spec, start, fed, clients, other, cfg, objective=objective)


def _loop_with_perturbed_model(spec, start, fed, clients, schedule, cfg, objective=None):
    return train_sequential(spec, start + 1e-3, fed, clients, schedule, cfg, objective=objective)


@pytest.mark.parametrize("sabotage", [_loop_with_other_seed, _loop_with_perturbed_model])
def test_a_loop_that_does_different_work_is_detected(monkeypatch, sabotage):
    monkeypatch.setattr(runner, "train_sequential", sabotage)
    with pytest.raises(BenchMismatch, match="train mlp.*disagree"):
        run_benchmark(tiny(families=("mlp",)), log=quiet)


def test_a_mismatch_ends_the_command_with_an_error_and_no_table(monkeypatch, tmp_path, capsys):
    monkeypatch.setattr(runner, "train_sequential", _loop_with_other_seed)
    out = tmp_path / "results.md"
    assert main(["bench", *TINY_FLAGS, "--families", "mlp", "--device", "cpu", "--out", str(out)]) == 1
    assert "disagree" in capsys.readouterr().err
    assert not out.exists()


def test_a_wrong_loss_matrix_is_detected(monkeypatch):
    real = runner.reference_loss_matrix
    monkeypatch.setattr(runner, "reference_loss_matrix", lambda *a: real(*a) * 1.001)
    with pytest.raises(BenchMismatch, match="loss matrix"):
        run_benchmark(tiny(families=(), round_clients=0), log=quiet)


def test_a_wrong_sequential_round_is_detected(monkeypatch):
    monkeypatch.setattr(bench_reference, "train_sequential", _loop_with_other_seed)
    with pytest.raises(BenchMismatch, match="clove round"):
        run_benchmark(tiny(families=(), loss_clients=0), log=quiet)


def test_check_models_allows_rounding_and_rare_switches_but_not_errors():
    start = torch.zeros(20, 5)
    ref = torch.ones(20, 5)
    assert runner.check_models("ok", ref + 1e-7, ref, start)[1] == 0
    one_switch = ref.clone()
    one_switch[3] += 1e-2  # one model moved by a rounding-level ReLU / max-pool switch
    worst, switched = runner.check_models("switch", one_switch, ref, start)
    assert switched == 1 and worst == pytest.approx(1e-2, rel=1e-3)
    with pytest.raises(BenchMismatch):  # every model off: a systematic error
        runner.check_models("far", ref + 1e-3, ref, start)
    crowd = ref.clone()
    crowd[:4] += 1e-2  # 4 of 20 models off: more than rounding-level switches explain
    with pytest.raises(BenchMismatch, match="4 of 20 models beyond"):
        runner.check_models("crowd", crowd, ref, start)
    far_one = ref.clone()
    far_one[7] += 0.5
    with pytest.raises(BenchMismatch, match="row 7"):
        runner.check_models("one far", far_one, ref, start)
    bad = ref.clone()
    bad[1, 2] = float("nan")
    with pytest.raises(BenchMismatch):
        runner.check_models("nan", bad, ref, start)


def test_flop_counts_follow_the_layer_shapes():
    mlp = build_model("mlp", (1, 8, 8), 10, "classification")
    assert layer_macs(mlp) == [64 * 128, 128 * 10]
    assert forward_flops(mlp) == 2 * (64 * 128 + 128 * 10)
    # forward + weight gradients + input gradients of every layer but the first
    assert train_flops(mlp) == 3 * forward_flops(mlp) - 2 * 64 * 128
    cnn = build_model("cnn", (1, 28, 28), 10, "classification")
    assert layer_macs(cnn) == [6 * 25 * 24 * 24, 16 * 6 * 25 * 8 * 8, 256 * 10]


def test_memory_probe_reports_a_peak_above_the_start():
    probe = MemoryProbe(torch.device("cpu"))
    peak, process_peak, value = probe.measure(lambda: float(torch.ones(4_000_000).sum()))
    assert value == 4_000_000 and peak >= 0 and process_peak > 0


def test_a_busy_machine_is_flagged_in_the_report():
    from cfl_core.bench.measure import OtherLoad
    from cfl_core.bench.report import _busy_warning

    busy = _busy_warning({"other_cpus": 1.2, "cpu_count": 2, "device": "cpu"})
    assert busy and "busy" in busy[0] and "1.20 of its 2 CPUs" in busy[0]
    assert _busy_warning({"other_cpus": 0.05, "cpu_count": 2, "device": "cpu"}) == []
    probe = OtherLoad()
    sum(range(100_000))  # own work does not count as other processes' load
    assert probe.cpus() is None or probe.cpus() >= 0


def test_the_paper_size_cnn_round_is_a_row_with_its_flops_and_share_of_peak():
    """Issue 38's row: the CLoVE paper's concept-shift round (20 clients, K = 4, the CNN, Adam), here at 20 samples
    a client; off in quick mode unless asked, and 0 skips it."""
    assert tiny().resolved().paper_round_samples == 0 and BenchOptions().resolved().paper_round_samples == 1000
    report = run_benchmark(tiny(families=(), loss_clients=0, round_clients=0, paper_round_samples=20), log=quiet)
    row = next(r for r in report.rows if r.name == "clove round cnn (paper size)")
    assert (row.clients, row.models) == (20, 4) and row.sequential_s is None
    from cfl_core.engine.models import build_model

    spec = build_model("cnn", (1, 28, 28), 10, "classification")
    expected = (forward_flops(spec) * 4 + train_flops(spec)) * 20 * 20 + forward_flops(spec) * 20 * 8
    assert row.gflops == pytest.approx(expected / row.batched_s / 1e9, rel=1e-6)
    assert row.peak_share == pytest.approx(row.gflops / report.peak_gflops)
    assert "20 samples x 20 clients, 8 test each" in row.note
