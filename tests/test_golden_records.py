"""Golden runs: the records of a fixed set of runs, written before a refactor, must not change.

Each case is a small run on bundled data (CPU, seeded). Its records are compared
as the run folder writes them (`RoundRecord.to_json`: floats at 6 significant
digits), every field but the round's wall time: everything exactly but floats, which must agree to 1e-4
relative (1e-7 absolute near 0). The same machine gives the same bytes; another CPU's kernels (AMD EPYC
against Intel Xeon here) change the last of the 6 digits of some floats (at most 1.2e-5 relative, measured on 7 of
the 16 cases, no assignment, count or cluster differing). Regenerate only when a change of behaviour is intended
and explained in its commit:

    CFL_REGEN_GOLDEN=1 python -m pytest tests/test_golden_records.py
"""
from __future__ import annotations

import json
import math
import os
from pathlib import Path

import pytest

from cfl_core.config import ExperimentConfig
from cfl_core.experiment import Experiment

GOLDEN_DIR = Path(__file__).parent / "golden"
BASE = dict(dataset="digits", clusters=4, clients_per_cluster=5, samples_per_client=40, device="cpu")
TIMING = ("seconds",)

CASES = {
    "clove-same-init": dict(partition="feature-skew", algorithm="clove", models=4, init="same", rounds=7),
    "clove-unknown-k": dict(partition="concept-shift", algorithm="clove", models=4, rounds=5,
                            options={"unknown_k": True}),
    "clove-gradient": dict(partition="feature-skew", algorithm="clove", models=4, rounds=4, aggregation="gradient"),
    "clove-partial-newcomers": dict(partition="feature-skew", algorithm="clove", models=4, rounds=8,
                                    participation=0.6, newcomer_share=0.2, newcomer_round=5,
                                    options={"stable_rounds": 1}),
    "clove-unsupervised": dict(partition="feature-skew", algorithm="clove", models=4, init="same", rounds=5,
                               unsupervised=True, optimizer="adam", lr=0.01, options={"sqrt_losses": True}),
    "ifca-different": dict(partition="feature-skew", algorithm="ifca", models=4, rounds=5),
    "ifca-restarts-newcomers": dict(partition="concept-shift", algorithm="ifca", models=4, init="restarts",
                                    rounds=5, newcomer_share=0.2, newcomer_round=3),
    "cfl-splits-newcomers": dict(partition="concept-shift", algorithm="cfl", rounds=8, newcomer_share=0.2, participation=0.7,
                                 newcomer_round=6, options={"warmup_rounds": 2, "eps1": 5.0, "eps2": 0.1, "gamma_max": 0.05}),
    "flexcfl-shift-newcomers": dict(partition="label-skew-1", clusters=5, algorithm="flexcfl", models=5,
                                    rounds=6, within="dirichlet", alpha=0.3, shift="swap-part",
                                    shift_options={"probability": 1.0, "across_clusters": True},
                                    newcomer_share=0.2, newcomer_round=3, options={"eta_g": 0.1}),
    "fedgroup": dict(partition="label-skew-1", clusters=5, algorithm="fedgroup", models=5, rounds=4,
                     options={"measure": "madc"}),
    "fesem-newcomers": dict(partition="feature-skew", algorithm="fesem", models=4, rounds=5,
                            newcomer_share=0.2, newcomer_round=3),
    "fesem-distance": dict(partition="feature-skew", algorithm="fesem", models=4, rounds=3,
                           options={"first_assignment": "distance"}),
    "fedavg-swap-all": dict(partition="concept-shift", algorithm="fedavg", rounds=4, shift="swap-all",
                            shift_options={"probability": 1.0}),
    "local-incremental": dict(partition="feature-skew", algorithm="local", rounds=4, shift="incremental"),
    "oracle-newcomers": dict(partition="feature-skew", algorithm="oracle", rounds=4, newcomer_share=0.2,
                             newcomer_round=2),
    "ifca-linear": dict(dataset="synthetic-linear", partition="linear-mixture", algorithm="ifca", models=4,
                        rounds=4),
}


def _config(case: str) -> ExperimentConfig:
    return ExperimentConfig(**{**BASE, **CASES[case]})


def _records(case: str) -> list[dict]:
    exp = Experiment(_config(case))
    out = []
    for record in exp:
        data = json.loads(record.to_json())
        for name in TIMING:
            data.pop(name, None)
        out.append(data)
    exp.close()
    return out


@pytest.mark.parametrize("case", sorted(CASES))
def test_records_match_golden(case):
    path = GOLDEN_DIR / f"{case}.json"
    records = _records(case)
    if os.environ.get("CFL_REGEN_GOLDEN") == "1":
        path.write_text(json.dumps({"config": _config(case).to_dict(), "records": records}, sort_keys=True,
                                   separators=(",", ":")) + "\n", encoding="utf-8")
        pytest.skip("golden regenerated")
    golden = json.loads(path.read_text(encoding="utf-8"))
    assert len(records) == len(golden["records"])
    for got, want in zip(records, golden["records"]):
        for name in sorted(set(want) | set(got)):
            assert same(got.get(name), want.get(name)), f"{case}: round {want['round']}, field {name!r} differs"


REL, ABS = 1e-4, 1e-7


def same(got, want) -> bool:
    """Equal, floats within REL (ABS near 0): the same structure, the same ints, strings and booleans."""
    if isinstance(want, float) or isinstance(got, float):
        if not all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in (got, want)):
            return False
        return got == want or math.isclose(got, want, rel_tol=REL, abs_tol=ABS)
    if isinstance(want, dict):
        return isinstance(got, dict) and got.keys() == want.keys() and all(same(got[k], want[k]) for k in want)
    if isinstance(want, list):
        return isinstance(got, list) and len(got) == len(want) and all(same(g, w) for g, w in zip(got, want))
    return type(got) is type(want) and got == want


def test_the_comparison_tolerates_only_the_last_digits_of_floats():
    assert same({"a": [1.80291, 2]}, {"a": [1.80292, 2]})
    assert not same({"a": [1.8029, 2]}, {"a": [1.8039, 2]})  # a real change of a loss
    assert not same([1, 2], [1, 3]) and not same([1.0, 2], [1.0]) and not same({"a": 1}, {"b": 1})
    assert not same(True, 1) and not same(None, 0.0) and not same("1.0", 1.0)
    assert same(float("nan"), float("nan")) is False  # a NaN where a number was is a change
