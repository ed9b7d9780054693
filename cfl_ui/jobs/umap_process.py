"""UMAP layouts computed in a process of their own, so that compiling UMAP never holds the server's pages up.

UMAP's first use in a process imports it and compiles its numba code: 9-18 s of CPU on this 2-core machine,
mostly Python (numba's type inference) holding the interpreter lock. Done in a thread of the server (as the
warm-up was), it took the lock from every page and from the event loop that answers `/_stcore/health` for that
long (benchmarks/SERVER_LOAD.md, row S; the larger cause of those rows, a full garbage collection after every
script run, is switched off in .streamlit/config.toml and cfl_ui.serve). Here the layouts run in one helper
process (from the training workers' fork server, started when first needed or by the warm-up, at nice 10); a
page's thread only waits for the answer, without the lock. The server keeps its per-round cache
(cfl_ui.charts.embedding): only the computation moves.
"""
from __future__ import annotations

import os
import threading
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool

import numpy as np

from cfl_core.liveness import exit_with

NICE = 10  # as the training workers: below the pages and the event loop (a page asking for a layout waits for it)

_lock = threading.Lock()
_pool: ProcessPoolExecutor | None = None


class LayoutProcessGone(RuntimeError):
    """The layout process ended without answering twice in a row (killed, out of memory)."""


def _start_process(nice: int, server_pid: int) -> None:
    """The layout process's initializer: below the pages in priority, and ended with the server.

    Its parent is the fork server, which lives as long as any process it forked holds its "alive" pipe, this
    one included: a server killed with SIGKILL left both waiting forever (found after the load benchmark)."""
    exit_with(server_pid)
    try:
        os.nice(nice)
    except OSError:
        pass


def compute(mat: np.ndarray, init, n_neighbors: int) -> np.ndarray:
    """One UMAP layout of the rows of `mat` (runs in the layout process; `init`: "spectral" or start points)."""
    import warnings

    import umap  # imported only here: its first use compiles (numba)

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        reducer = umap.UMAP(n_neighbors=n_neighbors, min_dist=0.3, random_state=0, init=init, n_epochs=200)
        return np.asarray(reducer.fit_transform(mat), dtype=float)


def _executor() -> ProcessPoolExecutor:
    global _pool
    from .worker import context

    with _lock:
        if _pool is None:
            _pool = ProcessPoolExecutor(max_workers=1, mp_context=context(), initializer=_start_process,
                                        initargs=(NICE, os.getpid()))
        return _pool


def _submit(fn, *args):
    from .worker import _without_main

    with _without_main():  # the pool starts its process at the first submit: never re-run the page script there
        return _executor().submit(fn, *args)


def _forget(pool) -> None:
    global _pool
    with _lock:
        if _pool is pool:
            _pool = None
    pool.shutdown(wait=False, cancel_futures=True)


def layout(mat: np.ndarray, init, n_neighbors: int) -> np.ndarray:
    """`compute` in the layout process, waited for; a process that died is started again once."""
    for attempt in range(2):
        pool = _executor()
        try:
            return _submit(compute, np.asarray(mat), init, n_neighbors).result()
        except BrokenProcessPool:
            _forget(pool)
    raise LayoutProcessGone("the UMAP layout process ended unexpectedly, twice")


def warm_up():
    """Start the layout process and compile UMAP there (the very layouts a page runs: a spectral start, then one
    from the previous layout, on a dozen made-up loss vectors); returns the future of the second, not waited for."""
    mat = np.random.default_rng(0).random((12, 4))
    _submit(compute, mat, "spectral", 10)  # the pool runs its tasks in order: the second waits for this one
    start = (np.random.default_rng(1).random((12, 2)) * 10).astype(np.float32)
    return _submit(compute, mat + 0.01, start, 10)


def _process_facts() -> tuple[int, int]:
    import umap.layouts as L

    compiled = sum(1 for f in (L._nb_optimize_layout_euclidean_single_epoch,
                               L._nb_optimize_layout_euclidean_single_epoch_parallel) if f.signatures)
    return os.getpid(), compiled


def process_facts() -> tuple[int, int]:
    """(pid of the layout process, how many of UMAP's layout kernels are compiled there) (tests)."""
    return _submit(_process_facts).result()
