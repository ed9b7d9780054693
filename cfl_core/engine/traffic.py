"""The traffic ledger: the bytes the engine sends to clients and receives from them, one window at a time.

Only the engine's federated operations write to it, so an algorithm can neither
forget a transfer nor count one twice. A window is a round (or the set-up
before round 0); `Experiment` opens one per round and records its totals.

Within a window a client that already holds a model is not sent it again: what
a client holds is tracked per models tensor, by object identity (the ledger
keeps a reference, so an identity is never reused within a window), and per
row. Server models are therefore never changed in place within a round; every
engine operation returns new tensors.
"""
from __future__ import annotations

import torch

FLOAT_BYTES = 4  # a loss value, a model parameter (float32)


class TrafficLedger:
    def __init__(self, model_bytes: int, num_clients: int):
        self.model_bytes = int(model_bytes)
        self.num_clients = int(num_clients)
        self.open()

    def open(self) -> None:
        """Start a new window: counts back to zero, no client holds any model."""
        self.down = 0
        self.up = 0
        self._held: dict[int, tuple[torch.Tensor, torch.Tensor]] = {}  # id -> (models, held [clients, K])

    @property
    def totals(self) -> tuple[int, int]:
        """(bytes down, bytes up) of the window so far."""
        return self.down, self.up

    def send(self, models: torch.Tensor, clients: torch.Tensor, rows: torch.Tensor | None = None) -> int:
        """Send model rows to clients: every row of `models` [K, D] to each client, or `rows[i]` to `clients[i]`.

        Counts (and returns) only the rows a client does not hold yet in this window.
        `clients` holds no client twice.
        """
        key = id(models)
        if key not in self._held:
            self._held[key] = (models, torch.zeros(self.num_clients, models.shape[0], dtype=torch.bool))
        held = self._held[key][1]
        clients = clients.cpu()
        if rows is None:
            count = int((~held[clients]).sum())
            held[clients] = True
        else:
            rows = rows.cpu()
            count = int((~held[clients, rows]).sum())
            held[clients, rows] = True
        sent = count * self.model_bytes
        self.down += sent
        return sent

    def hold(self, models: torch.Tensor, clients: torch.Tensor, rows: torch.Tensor) -> None:
        """`clients[i]` now holds row `rows[i]` of `models` without a transfer: it computed that row itself
        (a model trained or mixed on the client and kept there), so sending it later costs nothing."""
        key = id(models)
        if key not in self._held:
            self._held[key] = (models, torch.zeros(self.num_clients, models.shape[0], dtype=torch.bool))
        self._held[key][1][clients.cpu(), rows.cpu()] = True

    def send_floats(self, clients: int, each) -> None:
        """Send float32 values to clients: `each` per client (a number, or one count per client, e.g. the
        prototypes of the classes it holds)."""
        total = int(torch.as_tensor(each).sum()) if not isinstance(each, int) else int(clients) * each
        self.down += total * FLOAT_BYTES

    def receive_models(self, clients: int) -> None:
        """Each of `clients` clients uploads one model-sized vector (a trained model, an update or a gradient)."""
        self.up += int(clients) * self.model_bytes

    def receive_floats(self, clients: int, each) -> None:
        """Each of `clients` clients uploads `each` float32 values (e.g. its loss on each of K models); `each`
        may be one count per client."""
        total = int(torch.as_tensor(each).sum()) if not isinstance(each, int) else int(clients) * each
        self.up += total * FLOAT_BYTES
