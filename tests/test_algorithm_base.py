"""The strategy base: what an algorithm must implement, and the class attributes others read."""
from __future__ import annotations

import pytest

from cfl_core.algorithms import ALGORITHMS, Algorithm
from cfl_core.config import ExperimentConfig
from cfl_ui.jobs.estimate import unit_cost


def test_an_algorithm_without_setup_or_run_round_cannot_be_made():
    class Half(Algorithm):
        name = "half"

        def setup(self, clients):
            return {}

    with pytest.raises(TypeError, match="run_round"):
        Half(None)
    assert Algorithm.__abstractmethods__ == {"setup", "run_round"}


def test_local_only_and_the_personalised_models_keep_a_model_per_client():
    # FedProto, FedALA, FedPAC and FedSoft hold a personal model per client; FedProx and Per-FedAvg one global model
    assert {name for name, cls in ALGORITHMS.items() if cls.one_model_per_client} == {
        "local", "fedproto", "fedala", "fedpac", "fedsoft"}


def test_the_estimate_sizes_model_memory_by_the_class_attribute(monkeypatch):
    base = dict(dataset="digits", clusters=4, clients_per_cluster=25, samples_per_client=40, device="cpu")
    fedavg = ExperimentConfig(**base, algorithm="fedavg")
    local = ExperimentConfig(**base, algorithm="local")
    _, shared, _ = unit_cost(fedavg)
    _, own, _ = unit_cost(local)
    assert own > shared  # 100 models instead of 1
    monkeypatch.setattr(ALGORITHMS["fedavg"], "one_model_per_client", True)
    assert unit_cost(fedavg)[1] == own
