"""Reporting protocols: which accuracy a summary or a table reports, named after the paper that reports it.

Each paper measures "accuracy" its own way, and the numbers are not interchangeable
(docs/faithfulness.md). A run's config names one (`protocol`); its summary reports
`reported_accuracy` under it, and every table says which protocol it shows.

- `clove` (the default): the final round's accuracy, the unweighted mean over the
  clients that have a model of each client's test accuracy on that model, as the
  CLoVE paper reports it (its notebooks average the clients' test accuracies per round).
- `flexcfl`: the test-size-weighted accuracy (correct / test samples over all clients),
  taking only the rounds once every client of the federation has been selected at least
  once (the authors' code blanks the earlier, partial rounds; a newcomer that has not
  joined yet holds the count back too), and the maximum over those
  rounds, as FlexCFL's result files report it. For FlexCFL and FedGroup the accuracy is
  the authors': each client tested on the group model it last *received* (sent when it
  was last selected, before that round's training), recorded per round as
  `extras["last_received_accuracy"]`; even under full participation that is the model
  one round older than the current one. Other algorithms are scored on their current
  models (test-size-weighted).
- `ifca`: IFCA's test machines (cfl_core/held_out_machines.py): `test_machines_per_cluster`
  held-out clients per cluster (unset: as many as the training clients per cluster),
  drawn from the test pool through their cluster's transform and never trained on; each
  takes, among the algorithm's models, the one with the lowest loss on its own test data
  (not the model training picked); accuracy = correct / test samples over the machines,
  final round. Beside it the **cluster accuracy**: the share of machines whose picked
  model is their cluster's model. IFCA's code compares the model index with the cluster
  index as they stand, which presumes model k was initialised for cluster k; with
  independent random initial models no order holds, so `test_machine_cluster_accuracy`
  matches models to clusters one-to-one by the Hungarian method (the matching with the
  most machines on their cluster's model), and `test_machine_cluster_accuracy_index`
  keeps the code's literal index match. `test_machines_per_cluster=0` uses every client's
  own test split as a machine (the former behaviour). Needs `protocol=ifca` when the run
  is made: the records then carry these extras.
"""
from __future__ import annotations

PROTOCOLS = ("clove", "flexcfl", "ifca")
PROTOCOL_TEXT = {
    "clove": "final round, unweighted mean over clients (CLoVE's measure)",
    "flexcfl": "best test-size-weighted accuracy over the rounds after every client took part once, FlexCFL's and "
               "FedGroup's clients on the model they last received (FlexCFL's)",
    "ifca": "final round, held-out test machines per cluster each take their lowest-test-loss model, correct / "
            "samples (IFCA's)",
}
TEST_MACHINE_KEY = "test_machine_accuracy"
CLUSTER_ACCURACY_KEY = "test_machine_cluster_accuracy"  # Hungarian model-to-cluster matching
INDEX_ACCURACY_KEY = "test_machine_cluster_accuracy_index"  # IFCA's code: model index == cluster index
PICKS_KEY = "test_machine_picks"  # machines per model
LAST_RECEIVED_KEY = "last_received_accuracy"  # FlexCFL/FedGroup under protocol flexcfl


def _as_written(value):
    """A float as a run folder holds it (records._clean: 6 significant digits; not finite: None)."""
    import math

    return None if value is None or not math.isfinite(value) else float(f"{value:.6g}")


def reported_accuracy(protocol: str, records) -> tuple[float | None, int | None]:
    """(accuracy under `protocol`, the round it comes from) for a run's records; (None, None) if undefined."""
    if not records:
        return None, None
    if protocol == "clove":
        return records[-1].accuracy, records[-1].round
    if protocol == "ifca":
        value = records[-1].extras.get(TEST_MACHINE_KEY)
        return (value, records[-1].round) if value is not None else (None, None)
    if protocol == "flexcfl":
        seen: set[int] = set()
        best, best_round = None, None
        for r in records:
            seen.update(r.participants)
            # FlexCFL and FedGroup record the accuracy on the models last received; others, on the current ones;
            # compared as the run folder holds them (6 significant digits), so that a run resumed from its folder
            # picks the same best round as one that never stopped (two rounds equal to 6 digits: the first)
            value = _as_written(r.extras.get(LAST_RECEIVED_KEY, r.weighted_accuracy))
            if value is None or len(seen) < len(r.assignments):
                continue  # a partial round: some client has not taken part yet
            if best is None or value > best:
                best, best_round = value, r.round
        return best, best_round
    raise ValueError(f"protocol {protocol!r}: one of {', '.join(PROTOCOLS)}")


def reported_extras(protocol: str, records) -> dict:
    """What a summary reports beside `reported_accuracy` under `protocol`: IFCA's cluster accuracy (both forms)."""
    if protocol != "ifca" or not records or records[-1].extras.get(TEST_MACHINE_KEY) is None:
        return {}
    last = records[-1].extras
    return {"reported_cluster_accuracy": last.get(CLUSTER_ACCURACY_KEY),
            "reported_cluster_accuracy_index": last.get(INDEX_ACCURACY_KEY)}


def last_received_accuracy(engine, received, has_received) -> dict:
    """FlexCFL's evaluation: every client that has been sent a model, tested on the model it last received
    (`received` [N, D]); correct / test samples over them, as the record's `LAST_RECEIVED_KEY` ({} if none)."""
    import torch

    clients = torch.nonzero(has_received).squeeze(1)
    if len(clients) == 0:
        return {}
    ev = engine.evaluate(received[clients.to(received.device)], torch.arange(len(clients)), clients)
    if ev.accuracy is None:
        return {}
    n_test = engine.fed.n_test.cpu()[clients].float()
    return {LAST_RECEIVED_KEY: float((ev.accuracy * n_test).sum() / n_test.sum().clamp(min=1))}


def matched_share(picks, truth, models: int) -> tuple[float, float]:
    """(share of machines on their cluster's model under the best one-to-one model-to-cluster matching,
    share whose model index equals their cluster index) for picked models and true clusters."""
    import numpy as np
    from scipy.optimize import linear_sum_assignment

    picks, truth = np.asarray(picks, dtype=np.int64), np.asarray(truth, dtype=np.int64)
    if len(picks) == 0:
        return 0.0, 0.0
    confusion = np.zeros((models, int(truth.max()) + 1), dtype=np.int64)
    np.add.at(confusion, (picks, truth), 1)
    rows, cols = linear_sum_assignment(confusion, maximize=True)
    return float(confusion[rows, cols].sum() / len(picks)), float(np.mean(picks == truth))


def test_machine_stats(engine, models, machines, truth) -> dict:
    """IFCA's protocol on these machines' test data (ids into `engine.fed`, true clusters `truth`): each takes the
    model with its lowest mean test loss; the extras a record carries ({} when accuracy is undefined)."""
    import torch

    if len(machines) == 0:
        return {}
    losses, accs = [], []
    for k in range(models.shape[0]):
        ev = engine.evaluate(models, torch.full((len(machines),), k, dtype=torch.int64), machines)
        if ev.accuracy is None:
            return {}  # regression or reconstruction: no accuracy to report
        losses.append(ev.loss)
        accs.append(ev.accuracy)
    pick = torch.argmin(torch.stack(losses, 1), dim=1)  # ties: the lowest model index, as IFCA's np.argmin
    acc = torch.stack(accs, 1).gather(1, pick[:, None]).squeeze(1)
    n_test = engine.fed.n_test.cpu()[machines.cpu()].float()
    matched, index = matched_share(pick.numpy(), truth, models.shape[0])
    return {TEST_MACHINE_KEY: float((acc * n_test).sum() / n_test.sum().clamp(min=1)),
            CLUSTER_ACCURACY_KEY: matched, INDEX_ACCURACY_KEY: index,
            PICKS_KEY: torch.bincount(pick, minlength=models.shape[0]).tolist()}


def test_machine_accuracy(engine, models, clients) -> float | None:
    """IFCA's accuracy alone on these clients' test splits (each takes the model with its lowest mean test loss)."""
    truth = engine.fed.clusters.cpu()[clients.cpu()].numpy()
    return test_machine_stats(engine, models, clients, truth).get(TEST_MACHINE_KEY)
