"""A compiled kernel for the engine's most common training: SGD on a dense ReLU stack under cross-entropy.

Why: the batched torch path (training.py) runs a chunk of clients as one tensor
program, so every minibatch step streams the whole chunk's weights and momentum
through the caches several times; on a CPU the small per-client matrix products
then run at a fraction of the machine's peak. `dense_sgd.c` keeps what a client's
steps touch in the caches: a small model trains eight clients at once, one per
vector lane, a larger one a client at a time (`abreast`); rows spread over threads.

The kernel is built with the machine's C compiler on first use (about a second)
and cached under `~/.cache/cfl-lab/native` (or `$CFL_NATIVE_CACHE`), keyed by the
source, the flags and the CPU. Without a compiler, or with `CFL_NATIVE=0`, the
torch path trains instead; `status()` says which and why. The two agree to float
tolerance (tests/test_native.py); each alone gives the same records for the same
seed, whatever the number of threads.

Scope, frozen (issue 38): plain SGD (momentum, weight decay) of a dense ReLU stack under
cross-entropy, on the CPU, and nothing more. No Adam, no FedProx (proximal) terms, no
per-sample weights, no other model or loss goes into C: those train on the batched torch
path (training.py), the one every algorithm shares, where a new optimiser or term is
written once (`train_batched` calls the kernel only for plain SGD without an objective or a
kept optimiser state; `train` returns None for another model). Whether
the kernel should stay at all is measured against a compiled torch step in
benchmarks/RESULTS.md ("torch.compile beside the kernel", benchmarks/compile_dense.py).
"""
from __future__ import annotations

import ctypes
import hashlib
import math
import os
import platform
import shutil
import subprocess
import tempfile
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import torch

SOURCE = Path(__file__).with_name("dense_sgd.c")
# -O3 vectorises the row updates; -march=native lets it use the CPU's widest vectors and fused
# multiply-add (the cache key names the CPU); -fopenmp spreads clients over the OpenMP threads PyTorch
# already runs (its libgomp is loaded first, so the kernel joins that pool instead of competing with its
# spinning threads for the cores). Later entries are for compilers that lack an option.
FLAG_SETS = (
    ("-O3", "-march=native", "-fopenmp", "-ffp-contract=fast", "-std=c11", "-fPIC", "-shared"),
    ("-O3", "-march=native", "-ffp-contract=fast", "-std=c11", "-fPIC", "-shared"),
    ("-O3", "-ffp-contract=fast", "-std=c11", "-fPIC", "-shared"),
)

_lock = threading.Lock()
_library: ctypes.CDLL | None = None
_reason = "not built yet"
_tried = False
_pool: ThreadPoolExecutor | None = None
_pool_workers = 0


def enabled() -> bool:
    """False when the user turned the kernel off (`CFL_NATIVE=0`)."""
    return os.environ.get("CFL_NATIVE", "1").strip() not in ("0", "false", "no", "off")


def cache_dir() -> Path:
    if os.environ.get("CFL_NATIVE_CACHE"):
        return Path(os.environ["CFL_NATIVE_CACHE"])
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "cfl-lab" / "native"


def _cpu_identity() -> str:
    """What -march=native depends on: the CPU's model and feature flags (one line each from /proc/cpuinfo)."""
    parts = [platform.machine(), platform.system()]
    try:
        lines = Path("/proc/cpuinfo").read_text(errors="replace").splitlines()
    except OSError:
        lines = []
    for key in ("model name", "flags", "Features", "CPU part"):
        found = next((ln for ln in lines if ln.split(":")[0].strip() == key), "")
        parts.append(found)
    return "\n".join(parts)


def _compiler() -> str | None:
    named = os.environ.get("CC")
    if named:
        return shutil.which(named) or None
    for candidate in ("cc", "gcc", "clang"):
        path = shutil.which(candidate)
        if path:
            return path
    return None


def _target(compiler: str, flags: tuple[str, ...]) -> Path:
    """The cached library's path for this source, these flags, this compiler and this CPU."""
    key = hashlib.sha256(b"\0".join([SOURCE.read_bytes(), " ".join(flags).encode(), compiler.encode(),
                                     _cpu_identity().encode()])).hexdigest()[:16]
    return cache_dir() / f"dense_sgd-{key}.so"


def _compile(compiler: str, flags: tuple[str, ...], target: Path) -> str | None:
    """Build `target`; None when it worked, else one line saying why."""
    tmp = None
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        # built beside its final name, then renamed: processes building at once never load half a file
        fd, tmp = tempfile.mkstemp(suffix=".so", dir=target.parent)
        os.close(fd)
        done = subprocess.run([compiler, *flags, "-o", tmp, str(SOURCE), "-lm"],
                              capture_output=True, text=True, timeout=120)
        if done.returncode != 0:
            return (f"{os.path.basename(compiler)} {' '.join(flags)}: "
                    f"{(done.stderr.strip().splitlines() or ['failed'])[-1]}")
        os.replace(tmp, target)
        tmp = None
        return None
    except (OSError, subprocess.SubprocessError) as exc:
        return f"building in {target.parent}: {exc}"
    finally:
        if tmp is not None and os.path.exists(tmp):
            os.unlink(tmp)


def _load(target: Path) -> ctypes.CDLL:
    lib = ctypes.CDLL(str(target))
    fn = lib.cfl_dense_sgd
    i64, f32, ptr = ctypes.c_int64, ctypes.c_float, ctypes.c_void_p
    fn.argtypes = [i64, i64, ctypes.c_int32, ptr, ptr, ptr, ptr, ptr, i64, i64, ptr, ptr, i64, ptr, ptr, ptr,
                   i64, i64, i64, f32, f32, f32, ptr, ctypes.c_int32]
    fn.restype = ctypes.c_int
    lib.cfl_dense_sgd_threads.restype = ctypes.c_int
    lib.cfl_dense_sgd_abreast.argtypes = [ctypes.c_int32, ptr, f32]
    lib.cfl_dense_sgd_abreast.restype = ctypes.c_int
    return lib


def _build() -> tuple[ctypes.CDLL | None, str]:
    compiler = _compiler()
    if compiler is None:
        return None, "no C compiler found (cc, gcc or clang; or set CC)"
    errors = []
    for flags in FLAG_SETS:
        target = _target(compiler, flags)
        problem = None if target.exists() else _compile(compiler, flags, target)
        if problem is None:
            try:
                lib = _load(target)
            except (OSError, AttributeError):
                # a damaged file under the cached name (a full disk, a cache copied from another machine):
                # built again once
                try:
                    target.unlink()
                except OSError:
                    pass
                problem = _compile(compiler, flags, target)
                if problem is None:
                    try:
                        lib = _load(target)
                    except (OSError, AttributeError) as exc:
                        problem = f"loading {target}: {exc}"
        if problem is not None:
            errors.append(problem)
            continue
        threads = "OpenMP threads" if lib.cfl_dense_sgd_threads() else "Python threads"
        return lib, f"built with {os.path.basename(compiler)} {' '.join(flags[:3])}, {threads} ({target})"
    return None, "; ".join(errors)


def library() -> ctypes.CDLL | None:
    """The kernel, built and loaded once per process (None where it cannot be)."""
    global _library, _reason, _tried
    with _lock:
        if not _tried:
            _tried = True
            _library, _reason = _build()
        return _library


def status() -> str:
    """One line: which path trains dense models on the CPU here, and why."""
    if not enabled():
        return "torch batched path (CFL_NATIVE=0)"
    lib = library()
    return f"compiled kernel, {_reason}" if lib is not None else f"torch batched path: {_reason}"


def dense_layers(spec) -> list[tuple[int, int, int, int]] | None:
    """[(in, out, weight offset, bias offset)] per layer when `spec` is a dense ReLU stack the kernel trains."""
    from ..spec import CROSS_ENTROPY

    if spec.loss_kind != CROSS_ENTROPY or not spec.dense_layers or len(spec.dense_layers) > 16:
        return None
    slots = {s.name: s for s in spec.slots}
    layers = []
    width = math.prod(spec.input_shape)
    for name in spec.dense_layers:
        w, b = slots.get(f"{name}.weight"), slots.get(f"{name}.bias")
        if w is None or b is None or len(w.shape) != 2 or w.shape[1] != width or b.shape != (w.shape[0],):
            return None
        layers.append((width, w.shape[0], w.offset, b.offset))
        width = w.shape[0]
    return layers if width == spec.outputs else None


def _span(t: torch.Tensor) -> tuple[int, int]:
    """The bytes a [rows, D] tensor's elements lie in (an expanded row counts once)."""
    last = sum((n - 1) * st for n, st in zip(t.shape, t.stride())) if t.numel() else -1
    return t.data_ptr(), t.data_ptr() + (last + 1) * t.element_size()


def _overlap(a: torch.Tensor, b: torch.Tensor) -> bool:
    (a0, a1), (b0, b1) = _span(a), _span(b)
    return a0 < b1 and b0 < a1


def trains(spec, optimizer: str, device) -> bool:
    """Whether the kernel trains this model with this optimiser on this device here (turned on, built, a dense
    cross-entropy stack, plain SGD on the CPU); a local objective or kept optimiser state are the caller's to
    rule out."""
    return (optimizer == "sgd" and torch.device(device).type == "cpu" and enabled()
            and dense_layers(spec) is not None and library() is not None)


def abreast(spec, momentum: float) -> bool | None:
    """True when the kernel trains this model eight clients abreast (one per vector lane: small models), False when
    one client at a time (larger ones, whose group of eight would not stay near the caches); None when the kernel
    does not train it here."""
    layers = dense_layers(spec)
    lib = library() if layers is not None and enabled() else None
    if lib is None:
        return None
    width = torch.tensor([layers[0][0]] + [out for _, out, _, _ in layers], dtype=torch.int64)
    return bool(lib.cfl_dense_sgd_abreast(len(layers), width.data_ptr(), float(momentum)))


def reads_from(start: torch.Tensor, out: torch.Tensor | None = None) -> bool:
    """Whether `train` can read its starting rows from `start` [P, D] where they are, writing into `out`: CPU
    float32 rows of D values one after another or one row repeated (`expand`), not overlapping `out` unless they
    are `out` itself."""
    if start.device.type != "cpu" or start.dtype != torch.float32 or start.dim() != 2 or start.stride(1) != 1:
        return False
    rows, dim = start.shape
    if start.stride(0) < dim and not (start.stride(0) == 0 or rows == 1):
        return False
    if out is not None and (tuple(out.shape) != (rows, dim) or (out.data_ptr() != start.data_ptr()
                                                                 and _overlap(start, out))):
        return False  # rows read while others are written: only disjoint or identical rows are safe
    return True


def _threads(rows: int) -> int:
    return max(1, min(torch.get_num_threads(), rows))


def _executor(workers: int) -> ThreadPoolExecutor:
    global _pool, _pool_workers
    with _lock:
        if _pool is None or _pool_workers < workers:
            _pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="cfl-native")
            _pool_workers = workers
        return _pool


def train(spec, params: torch.Tensor, x: torch.Tensor, y: torch.Tensor, clients: torch.Tensor,
          idx: torch.Tensor, valid: torch.Tensor, lr: float, momentum: float, weight_decay: float,
          start: torch.Tensor | None = None) -> torch.Tensor | None:
    """Train `params` [P, D] (contiguous float32, in place) on the kernel; the mean step loss per row [P].

    `start` [P, D]: the rows to start from, read but never written (the result goes to `params`, whose contents
    are then ignored): the caller saves copying them into `params` first, a pass over every client's weights.
    Its rows may be one row repeated (`expand`, FedAvg's single model) or any rows of float32 in order. None:
    `params` holds the starting rows.

    x [M, n_max, ...] float32 and y [M, n_max] are the federation's training tensors; row i trains on client
    clients[i] with the schedule idx / valid [steps, P, batch]. None when the kernel cannot take this call
    (turned off, not buildable, not a CPU tensor, another model): the caller trains with torch."""
    layers = dense_layers(spec)
    if (layers is None or not enabled() or params.device.type != "cpu" or params.dtype != torch.float32
            or not params.is_contiguous() or x.dtype != torch.float32 or y.dtype != torch.int64):
        return None
    lib = library()
    if lib is None:
        return None
    rows, dim = params.shape
    if start is not None and not reads_from(start, params):
        return None
    source = params if start is None else start
    source_step = dim if start is None or rows == 1 else start.stride(0)
    x = x.contiguous()
    y = y.contiguous()
    clients = clients.to(torch.int64).contiguous()
    idx = idx.to(torch.int64).contiguous()
    valid = valid.to(torch.uint8).contiguous()
    steps, _, batch = idx.shape
    width = torch.tensor([layers[0][0]] + [out for _, out, _, _ in layers], dtype=torch.int64)
    w_off = torch.tensor([w for _, _, w, _ in layers], dtype=torch.int64)
    b_off = torch.tensor([b for _, _, _, b in layers], dtype=torch.int64)
    loss = torch.zeros(rows, dtype=torch.float32)
    n_max = int(y.shape[1])

    def run(lo: int, hi: int, threads: int = 1) -> int:
        return lib.cfl_dense_sgd(lo, hi, len(layers), width.data_ptr(), w_off.data_ptr(), b_off.data_ptr(),
                                 params.data_ptr(), source.data_ptr(), source_step, dim, x.data_ptr(), y.data_ptr(),
                                 n_max, clients.data_ptr(), idx.data_ptr(), valid.data_ptr(), steps, rows, batch,
                                 float(lr), float(momentum), float(weight_decay), loss.data_ptr(), threads)

    threads = _threads(rows)
    if threads == 1 or lib.cfl_dense_sgd_threads():
        codes = [run(0, rows, threads)]
    else:  # no OpenMP: ctypes lets go of the interpreter lock during each call, so Python threads run at once
        bounds = [rows * t // threads for t in range(threads + 1)]
        codes = list(_executor(threads).map(run, bounds[:-1], bounds[1:]))
    if any(c == -1 for c in codes):
        raise MemoryError("the training kernel could not allocate its working memory")
    if any(c == -2 for c in codes):
        raise ValueError("a minibatch index or label is out of range for the training data")
    return loss
