"""The engine keeps freed memory for reuse (cfl_core/engine/allocator.py): fewer page faults per round."""
import os
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# Tensors of 4, 5, ..., 23 MB made and freed in turn; the page faults they cost. glibc's default maps each one
# afresh (larger than any block freed before it, so above its moving mmap threshold) and unmaps it when freed:
# every page of every tensor faults in, about 69,000 in all.
PATTERN = """
import resource, sys, torch
if sys.argv[1] == "engine":
    from cfl_core.engine.core import Engine
    from cfl_core.engine.models import build_model
    from cfl_core.engine.training import TrainConfig
    from tests.helpers import random_federation
    Engine(build_model("mlp", (1, 8, 8), 10, "classification"), random_federation(2, (1, 8, 8), 10),
           TrainConfig(), 0)
before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
for mb in range(4, 24):  # each tensor larger than any freed before it
    t = torch.ones(mb * 2**18)
    del t
print(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before)
"""


def _faults(mode: str) -> int:
    out = subprocess.run([sys.executable, "-c", PATTERN, mode], capture_output=True, text=True, cwd=ROOT,
                         timeout=120)
    assert out.returncode == 0, out.stderr
    return int(out.stdout.split()[-1])


@pytest.mark.skipif(not sys.platform.startswith("linux") or not hasattr(os, "confstr")
                    or "glibc" not in (os.confstr("CS_GNU_LIBC_VERSION") or ""), reason="glibc's mallopt only")
def test_an_engine_makes_freed_memory_stay_for_the_next_round():
    from cfl_core.engine.allocator import keep_freed_memory

    assert keep_freed_memory()
    plain, with_engine = _faults("plain"), _faults("engine")
    # kept, the heap only grows by each tensor's extra megabyte: about 6,000 faults (23 MB of pages)
    assert plain > 50_000
    assert with_engine < plain / 4


def _vm_flags(address: int) -> list[str]:
    """The VmFlags of this process's mapping that holds `address` (/proc/self/smaps)."""
    inside, flags = False, []
    with open("/proc/self/smaps") as f:
        for line in f:
            head = line.split()[0]
            if "-" in head and not head.endswith(":"):
                lo, hi = (int(x, 16) for x in head.split("-"))
                inside = lo <= address < hi
            elif inside and line.startswith("VmFlags:"):
                flags = line.split()[1:]
    return flags


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="madvise and /proc/self/smaps are Linux's")
def test_a_large_cpu_tensor_is_advised_to_huge_pages_and_a_small_one_left_alone():
    import torch

    from cfl_core.engine.allocator import HUGE_PAGE, advise_huge_pages, huge_pages_available

    big = torch.empty(40 * 2**20 // 4)  # above the 32 MB mmap threshold: a mapping of its own
    small = torch.empty(2**20 // 4)
    assert advise_huge_pages(small) is False
    advised = advise_huge_pages(big)
    assert advised == huge_pages_available()
    inner = (big.data_ptr() + HUGE_PAGE - 1) // HUGE_PAGE * HUGE_PAGE  # a whole huge page inside the tensor
    assert ("hg" in _vm_flags(inner)) == advised  # MADV_HUGEPAGE shows as "hg" on the mapping


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="madvise and /proc/self/smaps are Linux's")
def test_the_engine_advises_its_large_training_result(monkeypatch):
    import torch

    from cfl_core.engine import core

    seen = []
    monkeypatch.setattr(core, "advise_huge_pages", lambda t: seen.append((t.shape, t.data_ptr())) or False)
    from cfl_core.engine.models import build_model
    from cfl_core.engine.training import TrainConfig
    from tests.helpers import random_federation

    fed = random_federation(3, (1, 8, 8), 10)
    spec = build_model("mlp", (1, 8, 8), 10, "classification")
    engine = core.Engine(spec, fed, TrainConfig(), 0)
    start = torch.stack([spec.init(0, i) for i in range(3)])
    params, _ = engine.train_without_exchange(start, torch.arange(3), 0)
    assert seen == [(params.shape, params.data_ptr())]  # the result tensor itself
