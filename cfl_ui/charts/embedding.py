"""Loss-vector embeddings: where each client sits, round by round, in the eyes of a loss-vector algorithm.

A client's loss vector is its training loss on each of the K-hat current
models (one row of the record's loss matrix). With 2 models the vectors are
drawn as they are (loss on model 0 vs model 1, the CLoVE paper's picture), with
3 as a 3-D scatter, with more projected to 2-D:

- PCA (default): fitted once on the loss vectors of every round so far, so the
  axes are the same in every frame and motion between frames is real motion.
- UMAP (option): one embedding per round, each started from the previous
  round's layout so clients do not jump around between frames.

Axis ranges cover every frame. Rounds without a loss matrix (CLoVE after its
assignments froze) repeat the last loss vectors with a note. Results are
cached per run and round: a page refresh recomputes nothing, a new round
computes only itself (UMAP) or one cheap linear projection (PCA).
"""
from __future__ import annotations

import threading
import time
from collections import OrderedDict
from dataclasses import dataclass

import numpy as np

RAW, PCA, UMAP = "raw", "pca", "umap"


@dataclass
class Frame:
    round: int
    source_round: int  # the round whose loss vectors are drawn
    clients: np.ndarray  # client ids (the source round's participants)
    points: np.ndarray  # [P, dims]
    losses: np.ndarray  # [P, K] the raw loss vectors (hover)
    models: np.ndarray  # model assigned to each client at `round`
    clusters: np.ndarray  # true cluster of each client at `round`
    note: str = ""


@dataclass
class Embedding:
    method: str
    dims: int
    frames: list
    axis_titles: list
    ranges: list
    num_models: int
    detail: str
    what: str = "loss vectors"

    def frame_index(self, round_index: int | None) -> int:
        if round_index is None:
            return len(self.frames) - 1
        for i, f in enumerate(self.frames):
            if f.round >= round_index:
                return i
        return len(self.frames) - 1


_lock = threading.Lock()
_cache: "OrderedDict[tuple, Embedding]" = OrderedDict()
_umap_points: "OrderedDict[tuple, tuple]" = OrderedDict()  # (key, round) -> (clients, points)
CACHE_SIZE = 128


def cache_clear() -> None:
    with _lock:
        _cache.clear()
        _umap_points.clear()


def loss_source(record):
    """(client ids, loss matrix) of a record, or None."""
    if record.loss_matrix is None or not len(record.loss_matrix):
        return None
    return record.participants, record.loss_matrix


def extras_source(key: str):
    """A source reading a per-client feature matrix from the record's extras[key].

    Rows follow the participants (or every client when the matrix has one row per client)."""
    def source(record):
        value = (record.extras or {}).get(key)
        if not isinstance(value, list) or not value or not isinstance(value[0], list):
            return None
        if len(value) == len(record.participants):
            return record.participants, value
        if len(value) == len(record.assignments):
            return list(range(len(value))), value
        return None
    return source


def _sources(records, source=loss_source) -> list[tuple[int, np.ndarray, np.ndarray]]:
    out = []
    for r in records:
        got = source(r)
        if got is not None:
            m = np.asarray(got[1], dtype=float)
            if m.ndim == 2 and len(m) == len(got[0]) and np.isfinite(m).all():
                out.append((r.round, np.asarray(got[0], dtype=int), m))
    if not out:
        return []
    width = out[-1][2].shape[1]  # keep the current number of models (shapes never mix in one plot)
    return [s for s in out if s[2].shape[1] == width]


def loss_embedding(records, method: str = PCA, cache_key: str | None = None, source=loss_source,
                   axis_name: str = "loss on model {j}", what: str = "loss vectors") -> Embedding | None:
    """The embedding of every round that has (or follows) a loss matrix; None when there is none.

    `source` picks another per-client matrix (see extras_source) for algorithms that see clients
    through other features; `axis_name` and `what` name its columns and rows in the figure."""
    records = list(records)
    sources = _sources(records, source)
    if not sources:
        return None
    k = sources[0][2].shape[1]
    if k <= 3:
        method = RAW
    key = None
    if cache_key is not None:
        key = (cache_key, what, method, len(records), records[-1].round, sources[-1][0])
        with _lock:
            hit = _cache.get(key)
            if hit is not None:
                _cache.move_to_end(key)
                return hit
    if method == RAW:
        emb = _raw(records, sources, k, axis_name, what)
    elif method == UMAP:
        emb = _umap(records, sources, k, None if cache_key is None else f"{cache_key}|{what}")
    else:
        emb = _pca(records, sources, k, what)
    emb.what = what
    if key is not None:
        with _lock:
            _cache[key] = emb
            while len(_cache) > CACHE_SIZE:
                _cache.popitem(last=False)
    return emb


def _frames(records, sources, points_of) -> list[Frame]:
    by_round = {rnd: (clients, mat) for rnd, clients, mat in sources}
    first = sources[0][0]
    frames, current = [], None
    frozen_from = None
    for rec in records:
        if rec.round < first:
            continue
        if rec.round in by_round:
            current = rec.round
            frozen_from = None
        elif frozen_from is None:
            frozen_from = rec.round
        clients, mat = by_round[current]
        assign = np.asarray(rec.assignments, dtype=int)
        truth = np.asarray(rec.true_clusters if rec.true_clusters else np.zeros(len(assign), int), dtype=int)
        note = ""
        if current != rec.round:
            note = f"assignments fixed since round {frozen_from}: round {current}'s losses"
        frames.append(Frame(rec.round, current, clients, points_of(current), mat, assign[clients],
                            truth[clients] if len(truth) == len(assign) else np.zeros(len(clients), int), note))
    return frames


def _ranges(frames, dims) -> list:
    allpts = np.concatenate([f.points for f in frames], axis=0)
    out = []
    for d in range(dims):
        lo, hi = float(np.nanmin(allpts[:, d])), float(np.nanmax(allpts[:, d]))
        # a spread below a millionth of the values (or of 1) is floating-point noise (identical models after one
        # round; PCA coordinates of identical loss vectors are ~1e-16 themselves): give it a readable scale rather
        # than an axis at 1e-16
        noise = hi - lo <= 1e-6 * max(abs(lo), abs(hi), 1.0)
        pad = max(0.05 * max(abs(lo), abs(hi)), 0.05) if noise else (hi - lo) * 0.08  # whole markers inside
        out.append([lo - pad, hi + pad])
    return out


def _raw(records, sources, k, axis_name, what) -> Embedding:
    pts = {rnd: mat for rnd, _, mat in sources}
    frames = _frames(records, sources, lambda rnd: pts[rnd])
    titles = [axis_name.format(j=j) for j in range(k)]
    if k == 1:
        for f in frames:  # one model: the loss against the true cluster (a strip)
            jitter = (np.arange(len(f.clients)) % 7 - 3) * 0.04
            f.points = np.column_stack([f.losses[:, 0], f.clusters + jitter])
        titles = [axis_name.format(j=0), "true cluster"]
        dims = 2
    else:
        dims = k
    lo_hi = _ranges(frames, dims)
    if k in (2, 3):  # the same scale on every axis: the diagonal means equal losses
        lo = min(r[0] for r in lo_hi)
        hi = max(r[1] for r in lo_hi)
        lo_hi = [[lo, hi] for _ in range(dims)]
    return Embedding(RAW, dims, frames, titles, lo_hi, k,
                     f"raw {what}" if k > 1 else f"one column: each client's {what} is a single number")


def _pca(records, sources, k, what="loss vectors") -> Embedding:
    pooled = np.concatenate([m for _, _, m in sources], axis=0)
    mean = pooled.mean(0)
    centred = pooled - mean
    if len(pooled) < 2 or not np.isfinite(centred).all():
        basis, ratio = np.eye(k)[:, :2], np.array([np.nan, np.nan])
    else:
        _, s, vt = np.linalg.svd(centred, full_matrices=False)
        basis = vt[:2].T
        # A deterministic sign: the largest loading of each component is positive.
        signs = np.sign(basis[np.abs(basis).argmax(0), [0, 1]])
        basis = basis * np.where(signs == 0, 1, signs)
        var = s**2
        ratio = var[:2] / var.sum() if var.sum() > 0 else np.array([np.nan, np.nan])
    pts = {rnd: (mat - mean) @ basis for rnd, _, mat in sources}
    frames = _frames(records, sources, lambda rnd: pts[rnd])
    titles = [f"PC{j + 1} ({ratio[j]:.0%} of variance)" if np.isfinite(ratio[j]) else f"PC{j + 1}" for j in range(2)]
    detail = f"PCA fitted once on every round's {what} (fixed axes)"
    return Embedding(PCA, 2, frames, titles, _ranges(frames, 2), k, detail)


def _umap_round(key, rnd, clients, mat, prev) -> np.ndarray:
    ck = (key, rnd)
    if key is not None:
        with _lock:
            hit = _umap_points.get(ck)
        if hit is not None and np.array_equal(hit[0], clients):
            return hit[1]
    n = len(mat)
    if n < 5:
        centred = mat - mat.mean(0)
        _, _, vt = np.linalg.svd(centred, full_matrices=False)
        out = centred @ vt[:2].T if vt.shape[0] >= 2 else np.column_stack([centred[:, 0], np.zeros(n)])
    else:
        from ..jobs.umap_process import layout

        init = "spectral"
        if prev is not None:
            prev_clients, prev_pts = prev
            where = {c: i for i, c in enumerate(prev_clients.tolist())}
            centre = prev_pts.mean(0)
            init = np.array([prev_pts[where[c]] if c in where else centre for c in clients.tolist()], dtype=np.float32)
            init = init + np.random.default_rng(rnd).normal(0, 1e-3, init.shape)
            init = init.astype(np.float32)
        out = layout(mat, init, max(2, min(10, n - 1)))  # in a process of its own (cfl_ui.jobs.umap_process)
    out = np.asarray(out, dtype=float)
    if key is not None:
        with _lock:
            _umap_points[ck] = (clients, out)
            while len(_umap_points) > CACHE_SIZE * 20:
                _umap_points.popitem(last=False)
    return out


UMAP_WARM_DELAY = 20.0  # s after the server starts: the first page views are drawn before the compiler runs
_warm_lock = threading.Lock()
_warm_thread: threading.Thread | None = None


def warm_umap(delay: float = UMAP_WARM_DELAY) -> threading.Thread:
    """Start UMAP's layout process and compile UMAP there, `delay` s from now (once per server process); returns
    the thread that waits for the delay and the warm-up.

    UMAP's first use imports it and compiles its numba code: 9-18 s on a quiet 2-core CPU, about a minute on a
    loaded one, and the teacher's first PCA -> UMAP switch paid all of it. Laying out a run's rounds afterwards
    takes well under a second. The compiling happens in the layout process (cfl_ui.jobs.umap_process), never in the
    server's."""
    global _warm_thread

    def work():
        time.sleep(delay)
        try:
            from ..jobs.umap_process import warm_up

            warm_up().result()
        except Exception:
            pass  # only an optimisation: a page that asks for UMAP reports its own errors

    with _warm_lock:
        if _warm_thread is None:
            _warm_thread = threading.Thread(target=work, name="cfl-umap-warm-up", daemon=True)
            _warm_thread.start()
        return _warm_thread


def _umap(records, sources, k, key) -> Embedding:
    pts, prev = {}, None
    for rnd, clients, mat in sources:
        pts[rnd] = _umap_round(key, rnd, clients, mat, prev)
        prev = (clients, pts[rnd])
    frames = _frames(records, sources, lambda rnd: pts[rnd])
    detail = "UMAP per round, each round started from the previous layout"
    return Embedding(UMAP, 2, frames, ["UMAP 1", "UMAP 2"], _ranges(frames, 2), k, detail)
