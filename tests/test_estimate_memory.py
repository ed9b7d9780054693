"""The memory estimate counts every tensor a run holds: for runs where different tensors dominate (CFL's
similarity matrix and tree, Local's model per client, CLoVE's many models and loss vectors), the estimate is at
least the memory the run's process actually took (its peak resident size, measured in a fresh process)."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from cfl_core.config import ExperimentConfig
from cfl_ui.jobs.estimate import estimate, unit_memory

ROOT = Path(__file__).resolve().parents[1]
BLOBS = dict(dataset="synthetic-blobs", partition="label-skew-1", clusters=5, clients_per_cluster=400,
             samples_per_client=5, rounds=3, device="cpu")
MEASURE = """
import json, sys
import torch
torch.set_num_threads(1)
from cfl_core.config import ExperimentConfig
from cfl_core.data import load_dataset
from cfl_core.experiment import Experiment
cfg = ExperimentConfig.from_dict(json.loads(sys.argv[1]))
load_dataset(cfg.dataset, seed=cfg.seed)  # the data set's own cache, loaded once per process, is not the run's
Experiment(cfg.replace(clusters=2, clients_per_cluster=2, rounds=1, algorithm="fedavg", models=None)).run()
def status(field):
    with open("/proc/self/status") as fh:
        return next(int(line.split()[1]) * 1024 for line in fh if line.startswith(field + ":"))
# the peak from here on: reset the high-water mark to the resident size now (an earlier peak, or library pages the
# kernel took back under memory pressure, would otherwise hide the run's own peak)
with open("/proc/self/clear_refs", "w") as fh:
    fh.write("5")
base = status("VmRSS")
exp = Experiment(cfg)
for _ in range(cfg.rounds):
    exp.step()
print(status("VmHWM") - base)
"""


@pytest.mark.parametrize("changes", [
    dict(algorithm="cfl"),  # 2000 participants: a 2000 x 2000 similarity matrix and the updates in float64
    dict(algorithm="local"),  # a model per client
    dict(algorithm="clove", models=200),  # many models, and loss vectors 200 long for KMeans
])
def test_the_estimate_is_at_least_what_the_run_takes(changes):
    config = ExperimentConfig(**{**BLOBS, **changes})
    proc = subprocess.run([sys.executable, "-c", MEASURE, json.dumps(config.to_dict())], cwd=ROOT,
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr
    measured = int(proc.stdout.strip().splitlines()[-1])
    assert measured > 0
    assert estimate([config]).memory_bytes >= measured, (unit_memory(config), measured)


def test_lockstep_units_count_every_units_state_and_more_models_cost_more():
    one = ExperimentConfig(**BLOBS, algorithm="clove", models=20)
    both = estimate([one, one.replace(algorithm="ifca")], parallel=True).memory_bytes
    assert both > estimate([one], parallel=True).memory_bytes
    assert unit_memory(one.replace(models=400))["kept"] == 20 * unit_memory(one)["kept"]
    assert unit_memory(one.replace(shift="swap-all"))["data"] > 2 * unit_memory(one)["data"]  # the run's own copy
