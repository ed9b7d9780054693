"""The sweep specs of issue 36's tables: ARI against the drop-out rate and against epsilon (sweeps/digits-dropout.yaml,
sweeps/digits-dp.yaml) and the four newer methods on Fashion-MNIST (sweeps/fashion-mnist-newer-methods.yaml).

Each spec parses and expands to the settings its table claims (the condition-free column is the all-algorithm
sweep's configs), and runs at a tiny size; the drop-out and privacy runs record their condition, and the results
page's pivots (scripts/readme_tables.py, columns=FIELD, pivot=dp_epsilon) are drawn from the tiny sweeps.
"""
from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

from cfl_core.data import mnist as mnist_source
from cfl_core.sweep import SweepSpec, plan, run_sweep
from cfl_core.sweep.spec_file import read_spec_data

ROOT = Path(__file__).resolve().parents[1]
SWEEPS = ROOT / "sweeps"
FOUR = {"clove", "ifca", "flexcfl", "cfl"}
NEWER = {"fedrc", "srfca", "cflgp", "fedsoft"}


def configs(spec_path: Path, tmp_path: Path, keep=lambda c: True) -> dict[str, dict]:
    """{the config as a canonical JSON text: the config's fields} of the spec's valid points."""
    expansion, _ = plan(SweepSpec.from_file(spec_path), tmp_path / spec_path.stem)
    assert expansion.points and not expansion.invalid
    return {json.dumps(p.config.to_dict(), sort_keys=True): p.config.to_dict()
            for p in expansion.points if keep(p.config)}


def test_the_fashion_mnist_spec_is_the_all_algorithm_specs_configs_for_the_four_newer_methods(tmp_path):
    ours = configs(SWEEPS / "fashion-mnist-newer-methods.yaml", tmp_path)
    theirs = configs(SWEEPS / "algorithms-fashion-mnist.yaml", tmp_path, keep=lambda c: c.algorithm in NEWER)
    assert len(ours) == 4 * 2 * 3 and ours.keys() == theirs.keys()


@pytest.mark.parametrize("name, field, levels", [
    ("digits-dropout", "dropout_rate", [0.0, 0.2, 0.4, 0.6, 0.8]),
    ("digits-dp", "dp_noise", [0.0, 0.03, 0.1, 0.3, 1.0, 2.0]),
])
def test_the_condition_specs_sweep_their_condition_for_the_four_algorithms_on_feature_skew(name, field, levels,
                                                                                           tmp_path):
    points = configs(SWEEPS / f"{name}.yaml", tmp_path).values()
    assert len(points) == len(FOUR) * len(levels) * 5
    assert {c["algorithm"] for c in points} == FOUR and {c["seed"] for c in points} == set(range(5))
    assert sorted({c[field] for c in points}) == levels
    assert {(c["dataset"], c["partition"], c["clusters"], c["samples_per_client"], c["rounds"]) for c in points} == \
        {("digits", "feature-skew", 4, 60, 30)}
    if field == "dp_noise":  # both channels, the same multiplier
        assert all(c["dp_loss_noise"] == c["dp_noise"] for c in points)
    # without the condition: the all-algorithm digits sweep's configs (hence its records)
    plain = [c for c in points if c[field] == 0]
    digits = configs(SWEEPS / "algorithms-digits.yaml", tmp_path,
                     keep=lambda c: c.algorithm in FOUR and c.partition == "feature-skew")
    assert {json.dumps(c, sort_keys=True) for c in plain} == set(digits)


def tiny(name: str, **base) -> SweepSpec:
    """The spec at a tiny size (2 rounds, seed 0), its grid of algorithms and condition levels kept."""
    data = read_spec_data(SWEEPS / f"{name}.yaml")
    data["name"] = name
    data["base"] = {**data["base"], "rounds": 2, **base}
    data["grid"] = {**data["grid"], "seed": [0]}
    return SweepSpec.from_dict(data)


def run_tiny(spec: SweepSpec, out: Path):
    outcome = run_sweep(spec, out, executor="serial")
    assert outcome.failed == 0, outcome.table
    assert set(outcome.statuses.values()) == {"finished"}
    return outcome


def _script():
    spec = importlib.util.spec_from_file_location("readme_tables", ROOT / "scripts" / "readme_tables.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_condition_specs_run_tiny_record_their_condition_and_make_the_pages_pivots(tmp_path):
    runs = tmp_path / "runs"
    for name in ("digits-dropout", "digits-dp"):
        outcome = run_tiny(tiny(name, clients_per_cluster=2, samples_per_client=20), runs / name)
        for point in outcome.expansion.points:
            c = point.config
            records = [json.loads(line) for line in (runs / name / point.folder / "rounds.jsonl").read_text()
                       .splitlines()]
            summary = json.loads((runs / name / point.folder / "summary.json").read_text())
            assert len(records) == 2
            if name == "digits-dropout":
                assert ("dropped" in records[-1]["extras"]) == (c.dropout_rate > 0)
            else:  # a noised run spends privacy, a run without noise has no epsilon at all
                assert (summary.get("dp_epsilon") is not None) == (c.dp_noise > 0)
                if c.dp_noise > 0:
                    assert summary["dp_epsilon"] > 0
    page = tmp_path / "results.md"
    page.write_text("<!-- sweep: digits-dp pivot=dp_epsilon columns=dp_noise -->\n| x |\n\n"
                    "<!-- sweep: digits-dropout pivot=final_ari columns=dropout_rate -->\n| x |\n")
    assert _script().main(["--page", str(page), "--runs", str(runs)]) == 0
    lines = page.read_text().splitlines()
    assert lines[1] == "| algorithm | " + " | ".join(f"dp_noise={v}" for v in (0.0, 0.03, 0.1, 0.3, 1.0, 2.0)) + " |"
    eps = {row[0]: row[1:] for row in ([c.strip() for c in line.strip("|").split("|")] for line in lines[3:7])}
    assert set(eps) == FOUR
    for values in eps.values():  # no noise, no epsilon; more noise, less epsilon spent
        assert values[0] == "-"
        spent = [float(v.replace(",", "")) for v in values[1:]]
        assert spent == sorted(spent, reverse=True) and spent[-1] > 0
    assert "| algorithm | dropout_rate=0.0 | dropout_rate=0.2 |" in page.read_text()


def test_the_fashion_mnist_newer_methods_spec_runs_two_rounds_at_a_reduced_size(tmp_path, monkeypatch):
    """On Debian's copy where it is installed; elsewhere on generated files of the same format (never skipped)."""
    from tests.test_clove_paper_specs import write_idx_files

    if Path(mnist_source.DEBIAN_FASHION_MNIST_DIR).is_dir():
        monkeypatch.setenv("CFL_DATA_DIR", str(tmp_path / "nothing-here"))
    else:
        write_idx_files(tmp_path / "env" / "fashion-mnist", 2000, 300)
        monkeypatch.setenv("CFL_DATA_DIR", str(tmp_path / "env"))
        monkeypatch.setattr(mnist_source, "DEBIAN_FASHION_MNIST_DIR", str(tmp_path / "no-debian-copy"))
    monkeypatch.chdir(tmp_path)
    data = read_spec_data(SWEEPS / "fashion-mnist-newer-methods.yaml")
    data["name"] = "fashion-mnist-newer-methods"
    data["base"] = {**data["base"], "rounds": 2, "clients_per_cluster": 2, "samples_per_client": 50,
                    "test_samples_per_client": 20}
    data["grid"] = {**data["grid"], "seed": [0]}
    outcome = run_tiny(SweepSpec.from_dict(data), tmp_path / "out")
    assert {p.config.algorithm for p in outcome.expansion.points} == NEWER
    assert {p.config.partition for p in outcome.expansion.points} == {"feature-skew", "concept-shift"}
