"""Algorithm registry: name -> strategy class (each in its own short file)."""
from __future__ import annotations

from .base import Algorithm, RoundOutcome, RunContext
from .cfl import CFL
from .clove import Clove
from .fedavg import FedAvg
from .fesem import FeSEM
from .flexcfl import FedGroup, FlexCFL
from .ifca import IFCA
from .local import LocalOnly
from .oracle import Oracle

ALGORITHMS: dict[str, type[Algorithm]] = {
    cls.name: cls for cls in (Clove, IFCA, FedAvg, LocalOnly, Oracle, CFL, FlexCFL, FedGroup, FeSEM)
}

__all__ = ["ALGORITHMS", "Algorithm", "RoundOutcome", "RunContext"]
