"""A small, strict reader for the IDX format of MNIST and Fashion-MNIST.

Layout: two zero bytes, a type code, the number of dimensions, then one
big-endian uint32 per dimension, then the values (big-endian). Files may be
gzip-compressed. Anything that does not match exactly is refused.
"""
from __future__ import annotations

import gzip
import struct

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


def read_idx_bytes(path: str) -> bytes:
    """The file's bytes, gunzipped when it is gzip (by content, not by name)."""
    with open(path, "rb") as f:
        raw = f.read()
    if raw[:2] == GZIP_MAGIC:
        try:
            return gzip.decompress(raw)
        except (OSError, EOFError) as exc:
            raise IdxFormatError(f"broken gzip data ({exc})") from None
    return raw


def parse_idx(raw: bytes) -> np.ndarray:
    """Decode IDX bytes into an array in native byte order."""
    if len(raw) < 4:
        raise IdxFormatError(f"only {len(raw)} bytes, shorter than the 4-byte header")
    zero1, zero2, type_code, ndim = raw[0], raw[1], raw[2], raw[3]
    if zero1 != 0 or zero2 != 0:
        raise IdxFormatError(f"bad magic number 0x{raw[:4].hex()} (must start with two zero bytes)")
    if type_code not in IDX_DTYPES:
        raise IdxFormatError(f"unknown type code 0x{type_code:02x}")
    if ndim == 0:
        raise IdxFormatError("zero dimensions")
    header_len = 4 + 4 * ndim
    if len(raw) < header_len:
        raise IdxFormatError("file ends inside the dimension list")
    dims = struct.unpack(f">{ndim}I", raw[4:header_len])
    dtype = IDX_DTYPES[type_code]
    expected = int(np.prod(dims, dtype=np.int64)) * dtype.itemsize
    body = len(raw) - header_len
    if body != expected:
        raise IdxFormatError(f"dimensions {dims} need {expected} data bytes, file has {body}")
    values = np.frombuffer(raw, dtype=dtype, offset=header_len).reshape(dims)
    return values.astype(dtype.newbyteorder("="), copy=True)


def read_idx(path: str) -> np.ndarray:
    return parse_idx(read_idx_bytes(path))


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
