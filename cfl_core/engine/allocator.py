"""Keep freed tensor memory in the process rather than handing it back to the OS at every chunk.

A round allocates and frees the same few megabyte-sized tensors again and again
(a chunk's trained rows, its optimiser state, activations). glibc serves such
sizes from its heap but gives the heap's freed top back to the OS as soon as
it passes the trim threshold, so the next round touches fresh pages: about
1,800 page faults per 100-client FedAvg round here, 10-25% of it
(benchmarks/RESULTS.md). Raising the thresholds keeps up to TRIM_BYTES of
freed memory for reuse; blocks above MMAP_BYTES (glibc's largest allowed
value) are still mapped and unmapped on their own, so a large run's big
tensors go back to the OS when freed.
"""
from __future__ import annotations

import ctypes
import sys
import threading

M_TRIM_THRESHOLD = -1  # glibc's mallopt parameter numbers (malloc.h)
M_MMAP_THRESHOLD = -3
MMAP_BYTES = 32 * 2**20
TRIM_BYTES = 256 * 2**20

_lock = threading.Lock()
_applied: bool | None = None


def keep_freed_memory() -> bool:
    """Set glibc's thresholds once per process; True where they were taken (False elsewhere: not glibc)."""
    global _applied
    with _lock:
        if _applied is None:
            _applied = _set()
        return _applied


def _set() -> bool:
    if not sys.platform.startswith("linux"):
        return False
    try:
        mallopt = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError):
        return False
    mallopt.argtypes = [ctypes.c_int, ctypes.c_int]
    mallopt.restype = ctypes.c_int
    # mallopt returns 1 on success; musl's stub returns 0 and changes nothing
    return mallopt(M_MMAP_THRESHOLD, MMAP_BYTES) == 1 and mallopt(M_TRIM_THRESHOLD, TRIM_BYTES) == 1
