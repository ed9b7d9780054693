"""A small, strict reader for the IDX format of MNIST and Fashion-MNIST.

Layout: two zero bytes, a type code, the number of dimensions, then one
big-endian uint32 per dimension, then the values (big-endian). Files may be
gzip-compressed. Anything that does not match exactly is refused.
"""
from __future__ import annotations

import gzip
import io
import struct
import zlib

import numpy as np

# IDX type code -> big-endian numpy dtype.
IDX_DTYPES = {
    0x08: np.dtype(">u1"),
    0x09: np.dtype(">i1"),
    0x0B: np.dtype(">i2"),
    0x0C: np.dtype(">i4"),
    0x0D: np.dtype(">f4"),
    0x0E: np.dtype(">f8"),
}
GZIP_MAGIC = b"\x1f\x8b"


class IdxFormatError(ValueError):
    """The bytes are not a well-formed IDX file."""


# The most data bytes a file may declare: MNIST's training images are 47 MB; a header that asks for more is
# refused before anything is allocated (a 2 MB gzip bomb declaring 4.5 GB was inflated whole before).
MAX_IDX_BYTES = 512 * 2**20
_CHUNK = 2**20


def _read_upto(fh, n: int) -> bytes:
    """At most n bytes from a (possibly gzip) stream, in chunks: never more than n are decompressed."""
    parts, left = [], n
    while left > 0:
        chunk = fh.read(min(left, _CHUNK))
        if not chunk:
            break
        parts.append(chunk)
        left -= len(chunk)
    return b"".join(parts)


def _read_stream(fh, *, dtype: np.dtype | None, ndim: int | None, tail: tuple[int, ...] | None,
                 max_bytes: int) -> np.ndarray:
    """Header first; the expectations and the declared size are checked before the values are read."""
    head = _read_upto(fh, 4)
    if len(head) < 4:
        raise IdxFormatError(f"only {len(head)} bytes, shorter than the 4-byte header")
    zero1, zero2, type_code, nd = head[0], head[1], head[2], head[3]
    if zero1 != 0 or zero2 != 0:
        raise IdxFormatError(f"bad magic number 0x{head.hex()} (must start with two zero bytes)")
    if type_code not in IDX_DTYPES:
        raise IdxFormatError(f"unknown type code 0x{type_code:02x}")
    if nd == 0:
        raise IdxFormatError("zero dimensions")
    dims_raw = _read_upto(fh, 4 * nd)
    if len(dims_raw) < 4 * nd:
        raise IdxFormatError("file ends inside the dimension list")
    dims = struct.unpack(f">{nd}I", dims_raw)
    kind = IDX_DTYPES[type_code]
    if dtype is not None and kind.newbyteorder("=") != np.dtype(dtype):
        raise IdxFormatError(f"values of type {kind.newbyteorder('=')}, expected {np.dtype(dtype)}")
    if ndim is not None and nd != ndim:
        raise IdxFormatError(f"{nd} dimensions {dims}, expected {ndim}")
    if tail is not None and tuple(dims[1:]) != tuple(tail):
        raise IdxFormatError(f"expected {'x'.join(map(str, tail)) or 'single'} items, found {tuple(dims[1:])}")
    expected = int(np.prod(dims, dtype=np.int64)) * kind.itemsize
    if expected > max_bytes:
        raise IdxFormatError(f"dimensions {dims} declare {expected:,} data bytes, more than the {max_bytes:,} "
                             "a file of this data set may hold")
    body = _read_upto(fh, expected + 1)  # one byte more tells a file longer than it declares
    if len(body) != expected:
        found = f"more than {expected}" if len(body) > expected else str(len(body))
        raise IdxFormatError(f"dimensions {dims} need {expected} data bytes, file has {found}")
    values = np.frombuffer(body, dtype=kind).reshape(dims)
    return values.astype(kind.newbyteorder("="), copy=True)


def parse_idx(raw: bytes) -> np.ndarray:
    """Decode IDX bytes (not gzip) into an array in native byte order."""
    return _read_stream(io.BytesIO(raw), dtype=None, ndim=None, tail=None, max_bytes=MAX_IDX_BYTES)


def read_idx(path: str, *, dtype=None, ndim: int | None = None, tail: tuple[int, ...] | None = None,
             max_bytes: int = MAX_IDX_BYTES) -> np.ndarray:
    """The array in an IDX file, gunzipped as it is read when it is gzip (by content, not by name).

    `dtype`, `ndim` and `tail` (the shape of one item) are what the caller expects: a file that declares
    anything else, or more than `max_bytes` of values, is refused from its header, before its values are
    read or decompressed."""
    with open(path, "rb") as raw:
        gz = raw.read(2) == GZIP_MAGIC
        raw.seek(0)
        fh = gzip.GzipFile(fileobj=raw, mode="rb") if gz else raw
        try:
            return _read_stream(fh, dtype=dtype, ndim=ndim, tail=tail, max_bytes=max_bytes)
        except (OSError, EOFError, zlib.error) as exc:
            if not gz:
                raise
            raise IdxFormatError(f"broken gzip data ({exc})") from None


def write_idx(path: str, array: np.ndarray) -> None:
    """Write an array as IDX (gzip when the name ends in .gz). Used by tests and tools."""
    array = np.asarray(array)
    codes = {dt.newbyteorder("="): code for code, dt in IDX_DTYPES.items()}
    native = array.dtype.newbyteorder("=")
    if native not in codes:
        raise ValueError(f"IDX cannot store dtype {array.dtype}")
    header = bytes([0, 0, codes[native], array.ndim]) + struct.pack(f">{array.ndim}I", *array.shape)
    payload = header + array.astype(IDX_DTYPES[codes[native]]).tobytes()
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "wb") as f:
        f.write(payload)
