"""Traffic is counted by the engine: the ledger on its own, each engine operation, and every algorithm's
round bytes against figures derived by hand from the round's participants, models and events."""
from __future__ import annotations

import ast
import dataclasses
from pathlib import Path

import pytest
import torch

from cfl_core.algorithms import ALGORITHMS, RoundOutcome
from cfl_core.config import ExperimentConfig
from cfl_core.engine.core import Engine
from cfl_core.engine.models import build_model
from cfl_core.engine.traffic import TrafficLedger
from cfl_core.engine.training import TrainConfig
from cfl_core.experiment import Experiment
from tests.helpers import random_federation

ALGORITHMS_DIR = Path(__file__).resolve().parent.parent / "cfl_core" / "algorithms"
SMALL = dict(dataset="digits", clusters=2, clients_per_cluster=4, samples_per_client=20, device="cpu", rounds=3)


# -- the ledger ------------------------------------------------------------------------------------

def test_a_broadcast_is_counted_once_per_client_and_window():
    ledger = TrafficLedger(model_bytes=100, num_clients=5)
    models = torch.zeros(3, 25)
    assert ledger.send(models, torch.tensor([0, 2])) == 2 * 3 * 100
    assert ledger.send(models, torch.tensor([2, 4])) == 1 * 3 * 100  # client 2 holds them already
    assert ledger.send(models, torch.tensor([0, 2, 4]), torch.tensor([1, 0, 2])) == 0  # rows they hold
    assert ledger.totals == (3 * 3 * 100, 0)
    ledger.open()
    assert ledger.totals == (0, 0)
    assert ledger.send(models, torch.tensor([0])) == 300  # a new window: nobody holds anything


def test_rows_are_tracked_per_client_and_per_models_object():
    ledger = TrafficLedger(model_bytes=10, num_clients=3)
    models = torch.zeros(2, 4)
    assert ledger.send(models, torch.tensor([0, 1]), torch.tensor([0, 0])) == 20
    assert ledger.send(models, torch.tensor([0, 1]), torch.tensor([1, 0])) == 10  # only client 0's row 1 is new
    assert ledger.send(models, torch.tensor([0, 1])) == 10  # the full broadcast: client 1 still lacks row 1
    assert ledger.send(models.clone(), torch.tensor([0])) == 20  # equal values, another object: sent
    ledger.receive_models(3)
    ledger.receive_floats(2, 5)
    assert ledger.up == 3 * 10 + 2 * 5 * 4


# -- the engine's operations ------------------------------------------------------------------------

def _engine(clients=6):
    fed = random_federation(clients, (1, 8, 8), 10)
    spec = build_model("mlp", (1, 8, 8), 10, "classification")
    return Engine(spec, fed, TrainConfig(local_epochs=1, batch_size=16), seed=0), spec


def test_loss_matrix_sends_every_model_and_uploads_losses_only_when_asked():
    engine, spec = _engine()
    mb = spec.bytes_per_model
    models = torch.stack([spec.init(0, j) for j in range(3)])
    ids = torch.arange(4)
    engine.loss_matrix(models, ids, uploads=False)
    assert engine.traffic.totals == (4 * 3 * mb, 0)
    engine.traffic.open()
    engine.loss_matrix(models, ids, uploads=True)
    assert engine.traffic.totals == (4 * 3 * mb, 4 * 3 * 4)


def test_training_after_the_broadcast_sends_nothing_more_and_cannot_double_count():
    engine, spec = _engine()
    mb = spec.bytes_per_model
    models = torch.stack([spec.init(0, j) for j in range(3)])
    ids = torch.arange(6)
    owners = torch.tensor([0, 1, 2, 0, 1, 2])
    engine.loss_matrix(models, ids[:4], uploads=False)
    engine.train_and_aggregate(models, ids, owners, 0)
    # clients 0-3 hold all three models; 4 and 5 are sent theirs; all six send a trained model back
    assert engine.traffic.totals == ((4 * 3 + 2) * mb, 6 * mb)
    engine.loss_matrix(models, ids, uploads=False)  # the same models again: only 4 and 5 lack two rows each
    engine.federated_train(models, ids, owners, 0)
    assert engine.traffic.totals == ((4 * 3 + 2 + 2 * 2) * mb, 12 * mb)


def test_federated_train_counts_a_model_each_way_and_training_without_exchange_counts_nothing():
    engine, spec = _engine()
    mb = spec.bytes_per_model
    probe = spec.init(0, 0)[None]
    ids = torch.tensor([1, 3, 5])
    trained, _ = engine.federated_train(probe, ids, torch.zeros(3, dtype=torch.int64), 0)
    assert engine.traffic.totals == (3 * mb, 3 * mb)
    alone, _ = engine.train_without_exchange(probe.expand(3, -1), ids, 0)
    assert engine.traffic.totals == (3 * mb, 3 * mb)
    assert torch.equal(trained, alone)  # the same training: only the counting differs


# -- nobody but the engine counts -------------------------------------------------------------------

def test_round_outcomes_carry_no_bytes():
    names = {f.name for f in dataclasses.fields(RoundOutcome)}
    assert not any("bytes" in n for n in names)


@pytest.mark.parametrize("path", sorted(ALGORITHMS_DIR.glob("*.py")), ids=lambda p: p.name)
def test_no_algorithm_counts_bytes_or_trains_off_the_books(path):
    tree = ast.parse(path.read_text(encoding="utf-8"))
    names = {n.attr for n in ast.walk(tree) if isinstance(n, ast.Attribute)}
    names |= {n.id for n in ast.walk(tree) if isinstance(n, ast.Name)}
    assert not {n for n in names if "bytes" in n}, "traffic is the engine's to count"
    assert "traffic" not in names
    if path.name != "local.py":  # the one algorithm whose models never leave the clients
        assert "train_without_exchange" not in names


# -- every algorithm, by hand ----------------------------------------------------------------------

def _run(**changes):
    exp = Experiment(ExperimentConfig(**{**SMALL, **changes}))
    records = list(exp)
    return exp, records, exp.spec.bytes_per_model


def test_ifca_round_sends_k_models_down_and_one_model_up():
    exp, records, mb = _run(algorithm="ifca", models=3)
    for r in records:
        p = len(r.participants)
        assert (r.bytes_down, r.bytes_up) == (p * 3 * mb, p * mb)


def test_ifca_restarts_are_paid_at_round_0_and_newcomers_are_sent_the_models_once():
    exp, records, mb = _run(algorithm="ifca", models=2, init="restarts", newcomer_share=0.25, newcomer_round=2,
                            options={"restart_min_share": 0.5})
    attempts = records[0].extras["init_attempts"]
    present = len(records[0].participants)
    assert attempts > 1  # half of the clients for each model: the first draw does not do it
    assert records[0].bytes_down == attempts * present * 2 * mb + present * 2 * mb
    assert records[0].bytes_up == attempts * present * 2 * 4 + present * mb
    newcomers = records[2].extras["newcomers"]
    assert newcomers and set(newcomers) <= set(records[2].participants)
    # placed by their lowest loss (chosen on the client: nothing up), then they train what they hold
    assert records[2].bytes_down == len(records[2].participants) * 2 * mb
    assert records[2].bytes_up == len(records[2].participants) * mb


def test_clove_phases_and_newcomers():
    exp, records, mb = _run(algorithm="clove", models=2, rounds=5, newcomer_share=0.25, newcomer_round=4,
                            options={"stable_rounds": 1})
    k = 2
    for r in records:
        p = len(r.participants)
        fresh = len(r.extras.get("newcomers", []))
        if r.phase == "clustering":
            want = (p * k * mb, p * (mb + k * 4))
        else:  # init (random) and stable: only the trained model goes down and back
            want = (p * mb, p * mb)
        if fresh:  # a newcomer's loss vector: K models down, K losses up; it then trains a model it holds
            assert r.phase == "stable"
            want = (want[0] + fresh * k * mb - fresh * mb, want[1] + fresh * k * 4)
        assert (r.bytes_down, r.bytes_up) == want, r.round
    assert [r.phase for r in records][:2] == ["init", "clustering"] and records[-1].phase == "stable"


def test_clove_client_placed_after_the_freeze_receives_the_models_once():
    exp = Experiment(ExperimentConfig(**{**SMALL, "algorithm": "clove", "models": 2, "participation": 0.5,
                                         "rounds": 4}))
    exp.step()  # round 0: random models for the first half
    exp.algorithm.frozen = True  # freeze before every client has taken part
    mb = exp.spec.bytes_per_model
    for _ in range(3):
        r = exp.step()
        late = len(r.extras.get("placed_after_freeze", []))
        p = len(r.participants)
        assert (r.bytes_down, r.bytes_up) == (late * 2 * mb + (p - late) * mb, p * mb + late * 2 * 4)
    assert any(r.extras.get("placed_after_freeze") for r in exp.records[1:])


@pytest.mark.parametrize("algorithm", ["fedavg", "oracle"])
def test_one_model_each_way_per_participant(algorithm):
    exp, records, mb = _run(algorithm=algorithm, newcomer_share=0.25, newcomer_round=1, participation=0.75)
    for r in records:
        assert (r.bytes_down, r.bytes_up) == (len(r.participants) * mb, len(r.participants) * mb)


def test_local_only_sends_nothing():
    exp, records, mb = _run(algorithm="local")
    assert all((r.bytes_down, r.bytes_up) == (0, 0) for r in records)


def test_fesem_first_assignment_and_newcomers_each_train_one_probe():
    exp, records, mb = _run(algorithm="fesem", models=2, options={"first_assignment": "distance"},
                            newcomer_share=0.25, newcomer_round=2)
    p0 = len(records[0].participants)
    assert (records[0].bytes_down, records[0].bytes_up) == (2 * p0 * mb, 2 * p0 * mb)  # the probe, then the round
    assert (records[1].bytes_down, records[1].bytes_up) == (p0 * mb, p0 * mb)
    fresh, p2 = len(records[2].extras["newcomers"]), len(records[2].participants)
    assert fresh and (records[2].bytes_down, records[2].bytes_up) == ((p2 + fresh) * mb, (p2 + fresh) * mb)


@pytest.mark.parametrize("algorithm", ["flexcfl", "fedgroup"])
def test_flexcfl_cold_starts_and_migrations_each_train_one_probe(algorithm):
    exp, records, mb = _run(algorithm=algorithm, models=2, rounds=4, options={"alpha": 1.0},
                            partition="label-skew-1", shift="swap-part",
                            shift_options={"probability": 1.0, "across_clusters": True},
                            newcomer_share=0.25, newcomer_round=2)
    present = len(records[0].participants)  # every present client is cold-started once at set-up
    assert (records[0].bytes_down, records[0].bytes_up) == (2 * present * mb, 2 * present * mb)
    for r in records[1:]:
        probes = len(r.extras.get("newcomers", [])) + len(r.extras.get("migrations", []))
        want = (len(r.participants) + probes) * mb
        assert (r.bytes_down, r.bytes_up) == (want, want), r.round
    migrated = sum(len(r.extras.get("migrations", [])) for r in records)
    assert (migrated > 0) == (algorithm == "flexcfl")


def _depth(nodes, node_id):
    depth = 0
    while nodes[node_id].parent is not None:
        node_id, depth = nodes[node_id].parent, depth + 1
    return depth


def test_cfl_descents_send_the_cached_model_and_receive_the_probe_per_level():
    config = ExperimentConfig(dataset="digits", clusters=4, clients_per_cluster=5, samples_per_client=40,
                              device="cpu", partition="concept-shift", algorithm="cfl", rounds=8,
                              newcomer_share=0.2, participation=0.7, newcomer_round=6,
                              options={"warmup_rounds": 2, "eps1": 5.0, "eps2": 0.1, "gamma_max": 0.05})
    exp = Experiment(config)
    mb = exp.spec.bytes_per_model
    levels_seen = 0
    while not exp.done:
        known = len(exp.algorithm.nodes)  # the tree newcomers descend: as it is before the round
        r = exp.step()
        nodes = exp.algorithm.nodes
        # a newcomer descends from the root to the leaf it joined (the one tree node made before this round
        # that lists it): one probe per split node on the way
        levels = sum(_depth(nodes, next(n.id for n in nodes[:known] if c in n.members))
                     for c in r.extras.get("newcomers", []))
        # a member absent when its cluster splits descends one level, to one of the two new leaves
        levels += sum(len(e.get("absent_members_placed", [])) for e in r.extras.get("split_events", []))
        want = (len(r.participants) + levels) * mb
        assert (r.bytes_down, r.bytes_up) == (want, want), r.round
        levels_seen += levels
    assert levels_seen > len(exp.records[6].extras["newcomers"])  # the tree was deeper than one split
