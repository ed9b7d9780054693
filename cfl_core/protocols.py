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
  rounds, as FlexCFL's result files report it. (Their code also tests each client on
  the group model it last received; CFL Lab tests every client on its group's current
  model, so under partial participation the two can differ.)
- `ifca`: IFCA's test machines: every client's test split is one test machine that
  takes, among the algorithm's models, the one with the lowest loss on its test data
  (not the model its training picked); accuracy = correct / test samples, final round.
  The test splits are disjoint stratified draws from the whole test pool. (IFCA's code,
  scaled down to a few test machines, scores every cluster on the first rows of the
  test file; see docs/faithfulness.md for what that does to its figure.) Needs
  `protocol=ifca` when the run is made: the records then carry
  `extras["test_machine_accuracy"]`.
"""
from __future__ import annotations

PROTOCOLS = ("clove", "flexcfl", "ifca")
PROTOCOL_TEXT = {
    "clove": "final round, unweighted mean over clients (CLoVE's measure)",
    "flexcfl": "best test-size-weighted accuracy over the rounds after every client took part once (FlexCFL's)",
    "ifca": "final round, test machines: each test split takes its lowest-test-loss model, correct / samples (IFCA's)",
}
TEST_MACHINE_KEY = "test_machine_accuracy"


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
            if r.weighted_accuracy is None or len(seen) < len(r.assignments):
                continue  # a partial round: some client has not taken part yet
            if best is None or r.weighted_accuracy > best:
                best, best_round = r.weighted_accuracy, r.round
        return best, best_round
    raise ValueError(f"protocol {protocol!r}: one of {', '.join(PROTOCOLS)}")


def test_machine_accuracy(engine, models, clients) -> float | None:
    """IFCA's protocol on these clients' test splits: each takes the model with its lowest mean test loss."""
    import torch

    if len(clients) == 0:
        return None
    losses, accs = [], []
    for k in range(models.shape[0]):
        ev = engine.evaluate(models, torch.full((len(clients),), k, dtype=torch.int64), clients)
        if ev.accuracy is None:
            return None
        losses.append(ev.loss)
        accs.append(ev.accuracy)
    pick = torch.argmin(torch.stack(losses, 1), dim=1)  # ties: the lowest model index
    acc = torch.stack(accs, 1).gather(1, pick[:, None]).squeeze(1)
    n_test = engine.fed.n_test.cpu()[clients.cpu()].float()
    return float((acc * n_test).sum() / n_test.sum().clamp(min=1))
