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


MADV_HUGEPAGE = 14  # madvise advice (linux/mman.h)
HUGE_PAGE = 2 * 2**20
THP_SETTING = "/sys/kernel/mm/transparent_hugepage/enabled"


def huge_pages_available() -> bool:
    """Whether the kernel backs advised memory with transparent huge pages (its setting "always" or "madvise")."""
    try:
        with open(THP_SETTING) as f:
            setting = f.read()
    except OSError:
        return False
    return "[always]" in setting or "[madvise]" in setting


def advise_huge_pages(tensor) -> bool:
    """Ask for 2 MB pages under a large CPU tensor before it is first written; True where advised.

    Above MMAP_BYTES every allocation is a mapping of its own, fresh each time, whose 4 kB pages fault in one by
    one at their first write: the 38 MB result of a 1,000-client training call took about 9,500 faults, 8-9% of
    that call here (benchmarks/RESULTS.md). With the advice the kernel maps 2 MB at a fault. Smaller tensors
    come from the heap (kept for reuse above) and are left alone, as is any tensor where the kernel offers no
    transparent huge pages."""
    if tensor.device.type != "cpu" or not sys.platform.startswith("linux"):
        return False
    size = tensor.numel() * tensor.element_size()
    if size < MMAP_BYTES or not huge_pages_available():
        return False
    start = tensor.data_ptr()
    first = (start + HUGE_PAGE - 1) // HUGE_PAGE * HUGE_PAGE  # whole huge pages inside the tensor only
    end = (start + size) // HUGE_PAGE * HUGE_PAGE
    if end <= first:
        return False
    try:
        madvise = ctypes.CDLL(None).madvise
    except (OSError, AttributeError):
        return False
    madvise.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
    madvise.restype = ctypes.c_int
    return madvise(first, end - first, MADV_HUGEPAGE) == 0
