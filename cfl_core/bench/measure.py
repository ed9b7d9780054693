"""Timing and memory probes for the benchmark.

Time: `time.perf_counter` around the call, with `torch.cuda.synchronize()`
before and after on a GPU (kernels are asynchronous).

Peak memory (the high-water mark of one call, above what was in use before it):
- CPU: Linux's resident-set high-water mark (VmHWM in /proc/self/status), reset
  before the call by writing 5 to /proc/self/clear_refs, minus the resident set
  before the call (after `malloc_trim`, so memory the allocator kept from earlier
  calls does not hide this call's peak). Where that reset is not allowed, the process-wide
  `resource.getrusage().ru_maxrss` rise is used, which only sees peaks above
  every earlier peak (the report names the method used).
- CUDA: `torch.cuda.max_memory_allocated` after `reset_peak_memory_stats`,
  minus the memory allocated before the call.
"""
from __future__ import annotations

import ctypes
import gc
import os
import platform
import resource
import time
from typing import Callable

import torch

_MB = 2**20


def sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def timed(fn: Callable, device: torch.device):
    """(seconds, result) of one call."""
    sync(device)
    start = time.perf_counter()
    result = fn()
    sync(device)
    return time.perf_counter() - start, result


def _status_kb(field: str) -> int | None:
    try:
        with open("/proc/self/status") as fh:
            for line in fh:
                if line.startswith(field + ":"):
                    return int(line.split()[1])
    except OSError:
        return None
    return None


def _release_free_memory() -> None:
    """Hand memory the allocator holds but no tensor uses back to the OS (glibc), so the
    resident set before a measurement is what is really in use and the peak above it is the call's."""
    gc.collect()
    try:
        ctypes.CDLL("libc.so.6").malloc_trim(0)
    except (OSError, AttributeError):
        pass


def _reset_hwm() -> bool:
    try:
        with open("/proc/self/clear_refs", "w") as fh:
            fh.write("5")
        return True
    except OSError:
        return False


class MemoryProbe:
    """Peak memory of one call above the level before it, in MiB."""

    def __init__(self, device: torch.device):
        self.device = device
        if device.type == "cuda":
            self.method = "torch.cuda.max_memory_allocated"
        elif _status_kb("VmHWM") is not None and _reset_hwm():
            self.method = "RSS high-water (VmHWM, reset per measurement)"
        else:
            self.method = "ru_maxrss rise (process-wide high-water)"

    def measure(self, fn: Callable):
        """(peak MiB above the start, process peak MiB or None, result)."""
        if self.device.type == "cuda":
            sync(self.device)
            torch.cuda.reset_peak_memory_stats(self.device)
            base = torch.cuda.memory_allocated(self.device)
            result = fn()
            sync(self.device)
            peak = torch.cuda.max_memory_allocated(self.device)
            return max(0, peak - base) / _MB, peak / _MB, result
        if self.method.startswith("RSS"):
            _release_free_memory()
            _reset_hwm()
            base = _status_kb("VmRSS") or 0
            result = fn()
            peak = _status_kb("VmHWM") or 0
            return max(0, peak - base) / 1024, peak / 1024, result
        base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        result = fn()
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        return max(0, peak - base) / 1024, peak / 1024, result


def matmul_peak(device: torch.device, n: int, repeats: int) -> tuple[float, float]:
    """(median seconds, GFLOP/s) of one dense float32 n x n x n product, after a warm-up."""
    gen = torch.Generator().manual_seed(0)
    a = torch.randn(n, n, generator=gen).to(device)
    b = torch.randn(n, n, generator=gen).to(device)
    out = torch.empty(n, n, device=device)
    torch.mm(a, b, out=out)  # warm-up
    times = sorted(timed(lambda: torch.mm(a, b, out=out), device)[0] for _ in range(repeats))
    t = times[len(times) // 2]
    return t, 2 * n**3 / t / 1e9


def cpu_model() -> str:
    try:
        with open("/proc/cpuinfo") as fh:
            for line in fh:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def machine_facts(device: torch.device) -> dict:
    facts = {
        "cpu": cpu_model(),
        "cpu_count": os.cpu_count(),
        "torch": torch.__version__,
        "threads": torch.get_num_threads(),
        "python": platform.python_version(),
        "device": str(device),
    }
    if device.type == "cuda":
        facts["gpu"] = torch.cuda.get_device_name(device)
    else:
        from ..engine import native

        facts["dense_training"] = native.status()  # the compiled kernel or the torch path (and why)
    try:
        facts["memory_gib"] = round(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30, 1)
    except (ValueError, OSError, AttributeError):
        pass
    return facts


def load_average() -> str:
    try:
        return " ".join(f"{v:.2f}" for v in os.getloadavg())
    except OSError:
        return "n/a"


class OtherLoad:
    """How many CPUs other processes kept busy while the benchmark ran (Linux /proc/stat).

    Busy CPU time of the whole machine minus this process's own CPU time, divided by
    the wall time: 0 on a quiet machine, 1 when another process used a whole CPU.
    """

    def __init__(self):
        self.start = self._sample()

    @staticmethod
    def _sample():
        try:
            with open("/proc/stat") as fh:
                fields = [int(v) for v in fh.readline().split()[1:]]
        except (OSError, ValueError):
            return None
        busy = sum(fields) - fields[3] - (fields[4] if len(fields) > 4 else 0)  # all but idle and iowait
        ticks = os.sysconf("SC_CLK_TCK")
        own = os.times()
        return busy / ticks, own.user + own.system, time.monotonic()

    def cpus(self) -> float | None:
        end = self._sample()
        if self.start is None or end is None:
            return None
        wall = end[2] - self.start[2]
        others = (end[0] - self.start[0]) - (end[1] - self.start[1])
        return max(0.0, others / wall) if wall > 0 else None
