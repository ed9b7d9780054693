"""Algorithm registry: name -> strategy class (each in its own short file), then the installed plugins' ones
(entry-point group `cfl_lab.algorithms`, see cfl_core/registry.py)."""
from __future__ import annotations

from .base import Algorithm, RoundOutcome, RunContext
from .cfl import CFL
from .cflgp import CFLGP
from .clove import Clove
from .fedala import FedALA
from .fedavg import FedAvg
from .fedpac import FedPAC
from .fedproto import FedProto
from .fedprox import FedProx
from .fedrc import FedRC
from .fedsoft import FedSoft
from .fesem import FeSEM
from .flexcfl import FedGroup, FlexCFL
from .ifca import IFCA
from .kfed import KFed
from .local import LocalOnly
from .oracle import Oracle
from .pacfl import PACFL
from .perfedavg import PerFedAvg
from .srfca import SRFCA
from .plugin_check import admit_algorithm
from ..registry import Registry

ALGORITHMS: Registry = Registry("cfl_lab.algorithms", {
    cls.name: cls for cls in (Clove, IFCA, FedAvg, LocalOnly, Oracle, CFL, FlexCFL, FedGroup, FeSEM,
                              KFed, PACFL, FedProx, PerFedAvg, FedProto, FedALA, FedPAC, FedSoft, FedRC, SRFCA, CFLGP)
}, admit_algorithm)

__all__ = ["ALGORITHMS", "Algorithm", "RoundOutcome", "RunContext"]
