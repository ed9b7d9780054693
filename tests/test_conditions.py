"""The conditions (cfl_core/conditions): drop-outs and stragglers, privacy noise and its accounting, malicious
clients, unseen clients. Each checked where it acts (the engine's hooks, the records) and against a run without it."""
from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest
import torch

from cfl_core.algorithms import ALGORITHMS
from cfl_core.conditions import NO_CONDITIONS, build, privacy, system
from cfl_core.config import ExperimentConfig
from cfl_core.errors import ConfigError
from cfl_core.experiment import Experiment, Setup
from cfl_core.scores import adjusted_rand

SMALL = dict(dataset="digits", partition="feature-skew", clusters=3, clients_per_cluster=4, samples_per_client=30,
             test_samples_per_client=10, local_epochs=1, device="cpu", rounds=3, seed=2)


def run(**kw):
    cfg = ExperimentConfig(**{**SMALL, **kw})
    exp = Experiment(cfg)
    records = list(exp)
    return exp, records, exp.close()


def lines(folder) -> list[dict]:
    out = [json.loads(x) for x in (Path(folder) / "rounds.jsonl").read_text().splitlines()]
    for r in out:
        r.pop("seconds")
    return out


# -- drop-outs and stragglers ---------------------------------------------------------------------------------
def test_dropped_clients_do_not_report_and_keep_their_cluster():
    exp, records, _ = run(algorithm="clove", models=3, rounds=4, dropout_rate=0.4)
    assert any(r.extras["dropped"] for r in records[1:])
    for before, r in zip(records, records[1:]):
        dropped = r.extras["dropped"]
        assert not set(dropped) & set(r.participants)  # a drop-out is not a participant
        for c in dropped:  # its cluster is the one it had
            assert r.assignments[c] == before.assignments[c]


def test_when_everyone_would_drop_one_client_reports_and_the_draws_are_the_seeds():
    cfg = ExperimentConfig(**{**SMALL, "dropout_rate": 0.999})
    participants = torch.arange(12)
    reporting, dropped, _ = system.round_draw(cfg, 3, participants)
    assert len(reporting) == 1 and len(dropped) == 11
    again = system.round_draw(cfg, 3, participants)
    assert again[0].tolist() == reporting.tolist()
    other = system.round_draw(cfg.replace(condition_seed=7), 3, participants)
    assert other[1] != dropped or other[0].tolist() != reporting.tolist()


def test_a_straggler_takes_its_share_of_the_steps_and_no_more():
    from cfl_core.engine.training import TrainConfig, batch_schedule

    n = torch.tensor([30, 30, 7])
    sched = batch_schedule(n, torch.arange(3), 0, 0, TrainConfig(local_epochs=2, batch_size=5))
    cut = system.cut_schedule(sched, torch.arange(3), {1: 0.5, 2: 0.01})
    steps = sched.active().sum(0).tolist()
    assert steps == [12, 12, 4]
    assert cut.active().sum(0).tolist() == [12, 6, 1]  # ceil(0.5 x 12); at least one step
    assert torch.equal(cut.idx, sched.idx)  # the same batches, fewer of them


def test_straggling_changes_the_stragglers_models_and_full_work_changes_nothing():
    _, base, _ = run(algorithm="fedavg")
    _, full, _ = run(algorithm="fedavg", straggler_rate=1.0, straggler_work=1.0)
    _, half, _ = run(algorithm="fedavg", straggler_rate=1.0, straggler_work=0.3)
    assert [r.client_loss for r in full] == [r.client_loss for r in base]
    assert [r.client_loss for r in half] != [r.client_loss for r in base]
    assert half[0].extras["stragglers"] == {str(c): 0.3 for c in range(12)}


# -- privacy --------------------------------------------------------------------------------------------------
def test_clipping_bounds_every_row_and_noise_has_the_declared_scale():
    rows = torch.randn(200, 50) * 10
    clipped = privacy.clip_rows(rows, 2.0)
    assert float(clipped.norm(dim=1).max()) <= 2.0 + 1e-5
    small = torch.full((1, 4), 0.1)
    assert torch.equal(privacy.clip_rows(small, 2.0), small)  # short rows untouched
    out = privacy.noised(torch.zeros(400, 250), 2.0, 1.5, torch.Generator().manual_seed(0))
    assert float(out.std()) == pytest.approx(3.0, rel=0.02)  # noise x clip


def test_epsilon_of_one_gaussian_release_is_the_rdp_bound_computed_here():
    ledger = privacy.PrivacyLedger()
    ledger.add(2.0, 1.0, 1)
    delta = 1e-5
    # a Gaussian mechanism of noise multiplier z has RDP alpha / (2 z^2); epsilon = min over the orders of
    # rdp + log(1/delta) / (alpha - 1), or the accountant's tighter conversion (never above this)
    classic = min(a / (2 * 4.0) + math.log(1 / delta) / (a - 1) for a in privacy.ORDERS)
    eps = ledger.epsilon(delta)
    assert 0.7 * classic <= eps <= classic + 1e-9
    more_rounds = privacy.PrivacyLedger([[2.0, 1.0, 1]] * 10)
    sampled = privacy.PrivacyLedger([[2.0, 0.1, 1]] * 10)
    assert more_rounds.epsilon(delta) > eps  # composition spends more
    assert sampled.epsilon(delta) < more_rounds.epsilon(delta)  # sampling amplifies
    assert privacy.PrivacyLedger().epsilon(delta) is None


def test_dp_runs_record_epsilon_each_round_growing_and_name_what_goes_in_the_clear():
    _, clove, summary = run(algorithm="clove", models=3, dp_noise=1.0, dp_loss_noise=1.0)
    eps = [r.extras["dp_epsilon"] for r in clove]
    assert all(e is not None and e > 0 for e in eps) and eps == sorted(eps) and eps[0] < eps[-1]
    assert summary["dp_epsilon"] == pytest.approx(eps[-1], rel=1e-5)
    assert "dp_unprotected" not in clove[-1].extras  # CLoVE's server assigns from the noised loss vectors
    _, ifca, _ = run(algorithm="ifca", models=3, dp_noise=1.0)
    assert ifca[-1].extras["dp_unprotected"] == ["each client's choice of model (made from its own losses)"]
    _, less, _ = run(algorithm="clove", models=3, dp_noise=4.0, dp_loss_noise=4.0)
    assert less[-1].extras["dp_epsilon"] < eps[-1]  # more noise, less spent


def test_loss_vector_noise_reaches_what_the_server_clusters():
    exp, _, _ = run(algorithm="clove", models=3, rounds=1)
    noisy_exp, _, _ = run(algorithm="clove", models=3, rounds=1, dp_loss_noise=5.0, dp_loss_clip=1.0)
    clients = torch.arange(12)
    models = exp.algorithm.models
    clean = exp.engine.loss_matrix(models, clients, uploads=True)
    noisy_exp.conditions.begin_round(5, clients, 12)
    noisy = noisy_exp.engine.loss_matrix(models, clients, uploads=True)
    private = noisy_exp.engine.loss_matrix(models, clients, uploads=False)  # kept on the client: no noise
    assert float((noisy - privacy.clip_rows(clean, 1.0)).std()) == pytest.approx(5.0, rel=0.35)
    assert torch.allclose(private, clean)


# -- malicious clients ----------------------------------------------------------------------------------------
def test_label_flippers_train_on_flipped_labels_and_the_shared_setup_is_untouched():
    cfg = ExperimentConfig(**{**SMALL, "algorithm": "fedavg", "malicious_share": 0.25})
    setup = Setup.build(cfg)
    before = setup.federation.y_train.clone()
    exp = Experiment(cfg, setup=setup)
    bad = exp.conditions.malicious
    assert len(bad) == 3
    assert torch.equal(setup.federation.y_train, before)
    fed = exp.federation
    for c in range(12):
        n = int(fed.n_train[c])
        expected = 9 - before[c, :n] if c in bad else before[c, :n]
        assert torch.equal(fed.y_train[c, :n], expected)
    assert torch.equal(fed.y_test, setup.federation.y_test)  # the test splits stay true


def test_ari_and_accuracy_are_the_honest_clients_and_attackers_are_listed():
    exp, records, summary = run(algorithm="clove", models=3, malicious_share=0.25, attack="sign-flip")
    bad = exp.conditions.malicious
    r = records[-1]
    assert r.extras["malicious"] == bad and summary["malicious_clients"] == 3
    honest = [c for c in range(12) if c not in bad]
    truth = np.array([r.true_clusters[c] for c in honest])
    labels = np.array([r.assignments[c] for c in honest])
    assert r.ari == pytest.approx(adjusted_rand(truth, labels))
    assert r.accuracy == pytest.approx(np.mean([r.client_accuracy[c] for c in honest]))


def test_update_attacks_scale_or_flip_the_attackers_updates_only():
    cfg = ExperimentConfig(**{**SMALL, "malicious_share": 0.25, "attack": "sign-flip", "attack_scale": 2.0})
    cond = build(cfg, 12, torch.arange(12) // 4)
    cond.begin_round(0, torch.arange(12), 12)
    start, trained = torch.zeros(12, 5), torch.ones(12, 5)
    sent = cond.sent_models(start, trained, torch.arange(12))
    for c in range(12):
        assert torch.equal(sent[c], torch.full((5,), -2.0 if c in cond.malicious else 1.0))
    lying = build(cfg.replace(attack="false-losses"), 12, torch.arange(12) // 4)
    matrix = torch.tensor([[1.0, 2.0, 3.0]]).repeat(12, 1)
    told = lying.sent_losses(matrix, torch.arange(12), uploads=True)
    for c in range(12):
        assert told[c].tolist() == ([3.0, 1.0, 2.0] if c in lying.malicious else [1.0, 2.0, 3.0])


# -- unseen clients -------------------------------------------------------------------------------------------
def test_unseen_clients_never_train_and_are_assigned_by_the_algorithms_rule():
    exp, records, summary = run(algorithm="clove", models=3, rounds=4, unseen_share=0.25, unseen_every=2)
    unseen = exp.conditions.unseen
    assert len(unseen) == 3 and len({SMALL_cluster(c) for c in unseen}) == 3  # one from each cluster
    for r in records:
        assert not set(unseen) & set(r.participants)
        assert all(r.assignments[c] == -1 for c in unseen)
    looked = [r.round for r in records if "unseen" in r.extras]
    assert looked == [1, 3]
    last = records[-1].extras["unseen"]
    assert last["clients"] == unseen and len(last["assignments"]) == 3 and all(a >= 0 for a in last["assignments"])
    assert summary["unseen_accuracy"] == pytest.approx(last["accuracy"], rel=1e-5)


def SMALL_cluster(c: int) -> int:
    return c // SMALL["clients_per_cluster"]


def test_looking_at_the_unseen_clients_changes_nothing_in_training():
    _, every, _ = run(algorithm="ifca", models=3, rounds=4, unseen_share=0.25, unseen_every=1)
    _, once, _ = run(algorithm="ifca", models=3, rounds=4, unseen_share=0.25, unseen_every=0)
    for a, b in zip(every, once):
        assert (a.assignments, a.client_loss, a.bytes_up, a.bytes_down) == \
               (b.assignments, b.client_loss, b.bytes_up, b.bytes_down)
    assert every[-1].extras["unseen"] == once[-1].extras["unseen"]


# -- every algorithm, every condition, and resuming -----------------------------------------------------------
ALL_ON = dict(dropout_rate=0.3, straggler_rate=0.5, straggler_work=0.5, dp_noise=0.3, dp_loss_noise=0.3,
              malicious_share=0.2, attack="scale", unseen_share=0.2, unseen_every=1)


@pytest.mark.parametrize("algorithm", sorted(ALGORITHMS))
def test_every_algorithm_runs_under_every_condition_and_resumes_identically(algorithm, tmp_path):
    cls = ALGORITHMS[algorithm]
    base = dict(SMALL, algorithm=algorithm, rounds=3, **ALL_ON)
    if cls.needs_models:
        base["models"] = 3
    cfg = ExperimentConfig(**base)
    try:
        cfg.validate()
    except ConfigError as exc:  # an algorithm's own rule (e.g. model aggregation) is kept as it is
        pytest.fail(f"{algorithm} refuses the conditions: {exc}")
    reference = tmp_path / "reference"
    Experiment(cfg, out_dir=reference).run()
    folder = tmp_path / "stopped"
    exp = Experiment(cfg, out_dir=folder)
    exp.step()
    exp.close()
    Experiment.resume(folder).run()
    assert lines(folder) == lines(reference)
    rounds = lines(reference)
    last = rounds[-1]
    assert last["extras"]["malicious"] and "unseen" in last["extras"]
    eps = last["extras"]["dp_epsilon"]
    # privacy spent wherever something noised left a client; nothing spent where nothing did (Local, SR-FCA's
    # local phase) or only what goes in the clear, which the record names (FedProto's prototypes)
    assert (eps is not None and eps > 0) or sum(r["bytes_up"] for r in rounds) == 0 or last["extras"]["dp_unprotected"]


def test_bad_combinations_are_refused_naming_the_setting():
    bad = [
        (dict(unseen_share=0.01), "unseen_share"),
        (dict(unseen_share=0.5, newcomer_share=0.5, newcomer_round=1), "unseen_share"),
        (dict(malicious_share=0.99), "malicious_share"),
        (dict(malicious_share=0.2, attack="label-flip", shift="swap-all"), "attack"),
        (dict(malicious_share=0.2, attack="label-flip", unsupervised=True, model="autoencoder"), "attack"),
        (dict(unseen_share=0.2, unseen_every=9), "unseen_every"),
        (dict(dropout_rate=1.0), "dropout_rate"),
        (dict(dp_noise=-1.0), "dp_noise"),
        (dict(dp_delta=0.5), "dp_delta"),
        (dict(dp_noise=1e-300), "dp_noise"),  # found by the contract: the accountant divided by zero
        (dict(dp_loss_noise=0.001), "dp_loss_noise"),
    ]
    for changes, field in bad:
        with pytest.raises(ConfigError) as err:
            ExperimentConfig(**{**SMALL, **changes}).validate()
        assert err.value.parameter == field, (changes, str(err.value))


def test_without_conditions_the_engine_has_no_hooks_at_work():
    exp, _, _ = run(algorithm="fedavg", rounds=1)
    assert exp.engine.conditions is NO_CONDITIONS


def test_the_command_lines_last_line_gives_the_conditions_headlines(tmp_path, capsys):
    from cfl_core.cli import main

    code = main(["run", "--algorithm", "clove", "--models", "3", "--rounds", "2", "--clusters", "3",
                 "--clients-per-cluster", "4", "--dp-noise", "1", "--dp-loss-noise", "1", "--unseen-share", "0.25",
                 "--malicious-share", "0.2", "--attack", "sign-flip", "--out", str(tmp_path / "run")])
    assert code == 0
    out = capsys.readouterr().out
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert f"privacy spent epsilon {summary['dp_epsilon']:.3g} at delta 1e-05" in out
    assert f"3 unseen clients' accuracy {summary['unseen_accuracy']:.4f}" in out
    assert "2 attackers (scores are the honest clients')" in out


def test_newcomers_placed_under_privacy_noise_resume_identically(tmp_path):
    # found by the contract: FedGroup's cold start of round-1 newcomers drew its noise before the round's numbering
    # was reset, so a resumed run drew other noise than the uninterrupted one
    cfg = ExperimentConfig(**{**SMALL, "algorithm": "fedgroup", "models": 2, "rounds": 3, "newcomer_share": 0.25,
                              "newcomer_round": 1, "dp_noise": 1.0})
    Experiment(cfg, out_dir=tmp_path / "reference").run()
    exp = Experiment(cfg, out_dir=tmp_path / "stopped")
    exp.step()
    exp.close()
    Experiment.resume(tmp_path / "stopped").run()
    assert lines(tmp_path / "stopped") == lines(tmp_path / "reference")


def test_group_cold_start_counts_the_unseen_clients_out_of_round_0():
    # found by the contract: 6 clients, 3 newcomers, 1 unseen left 2 for FlexCFL's 3 groups (a TruncatedSVD error)
    cfg = ExperimentConfig(**{**SMALL, "algorithm": "flexcfl", "clusters": 2, "clients_per_cluster": 3, "models": 3,
                              "newcomer_share": 0.5, "newcomer_round": 1, "unseen_share": 0.125})
    with pytest.raises(ConfigError) as err:
        cfg.validate()
    assert err.value.parameter == "models" and "at most the 2 clients present at round 0" in str(err.value)


def test_sr_fcas_local_models_are_noised_when_they_are_sent():
    # SR-FCA's INIT uploads each client's local model once: it goes through the same mechanism as every model
    cfg = dict(algorithm="srfca", rounds=4, options={"init_rounds": 2})
    _, clean, _ = run(**cfg)
    _, noised, _ = run(**cfg, dp_noise=0.5)
    clustered = [r for r in noised if "threshold" in r.extras]
    assert clustered and clustered[0].extras.get("dp_epsilon") is not None
    assert "statistics (mixture weights, label counts)" not in clustered[0].extras.get("dp_unprotected", [])
    first = next(r for r in clean if "threshold" in r.extras)
    assert first.extras["init_distances"] != clustered[0].extras["init_distances"]


def test_a_channel_left_without_noise_is_named_beside_epsilon():
    # found by the dashboard's helper: dp_noise alone left CLoVE's loss vectors in the clear, unlisted
    _, updates_only, _ = run(algorithm="clove", models=3, dp_noise=1.0)
    assert "loss vectors (dp_loss_noise is 0)" in updates_only[-1].extras["dp_unprotected"]
    _, losses_only, _ = run(algorithm="clove", models=3, dp_loss_noise=1.0)
    assert "model updates (dp_noise is 0)" in losses_only[-1].extras["dp_unprotected"]
    _, both, _ = run(algorithm="clove", models=3, dp_noise=1.0, dp_loss_noise=1.0)
    assert "dp_unprotected" not in both[-1].extras
