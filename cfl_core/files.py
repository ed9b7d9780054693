"""Reading the files of run and sweep folders as they may be: anything a user (or an attacker) put there.

Every reader of a run or sweep folder goes through `read_bytes`: it opens regular files only
(a named pipe in place of `rounds.jsonl` would block a reader forever, a device could have side
effects on open), never follows a symbolic link, and reads at most a limit (a 1 GB `rounds.jsonl`
once took 41 s and gigabytes of memory to open). What it does not read it says, in one line
naming the file, so callers can list the folder as damaged with the reason.

The checks use the opened file itself (`fstat` after `open(O_NONBLOCK | O_NOFOLLOW)`), so a file
swapped for a pipe between a look and the read is caught too.
"""
from __future__ import annotations

import os
import stat
from dataclasses import dataclass
from pathlib import Path

MB = 2**20
# what one reader takes at most: the small JSON files of a run or sweep (config, summary, meta, partition,
# sweep.json, progress.json, a point's marker); rounds.jsonl (a 2000-round run with 1000 clients and 10 models
# writes about 100 KB a line: 200 MB; the default runs write well under 1 MB); a sweep's results.csv and specs
JSON_LIMIT = 32 * MB
ROUNDS_LIMIT = 128 * MB
TABLE_LIMIT = 32 * MB


@dataclass
class Read:
    """What `read_bytes` found. data is None when the file is missing (problem None) or skipped (problem says
    why); `truncated` when only the first `limit` bytes were read (allowed with partial=True)."""

    data: bytes | None
    problem: str | None
    size: int = 0
    truncated: bool = False

    @property
    def missing(self) -> bool:
        return self.data is None and self.problem is None


def size_text(size: int) -> str:
    if size >= 2**30:
        return f"{size / 2**30:.1f} GB"
    if size >= MB:
        return f"{size / MB:.0f} MB"
    return f"{size / 1024:.0f} kB" if size >= 1024 else f"{size} bytes"


def kind_of(mode: int) -> str | None:
    """What a non-regular file is, in words (None for a regular file)."""
    if stat.S_ISREG(mode):
        return None
    if stat.S_ISDIR(mode):
        return "a directory"
    if stat.S_ISLNK(mode):
        return "a symbolic link (not followed)"
    if stat.S_ISFIFO(mode):
        return "a named pipe (FIFO)"
    if stat.S_ISSOCK(mode):
        return "a socket"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    return "not a regular file"


def _reason(exc: OSError) -> str:
    return exc.strerror or type(exc).__name__


def open_regular(path: str | os.PathLike) -> tuple[int | None, os.stat_result | None, str | None]:
    """(fd, its stat, None) for a regular file; (None, None, None) when missing; (None, None, why not) else.

    Never blocks (O_NONBLOCK: a pipe opens at once and is then refused) and never follows a symbolic link."""
    name = Path(path).name
    try:
        before = os.lstat(path)
    except FileNotFoundError:
        return None, None, None
    except OSError as exc:
        return None, None, f"{name} cannot be read ({_reason(exc)})"
    kind = kind_of(before.st_mode)
    if kind is not None:  # decided before opening: a device or a pipe is never opened at all
        return None, None, f"{name} is {kind}, not a file: skipped"
    flags = os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)
    try:
        fd = os.open(path, flags)
    except FileNotFoundError:
        return None, None, None
    except OSError as exc:
        return None, None, f"{name} cannot be read ({_reason(exc)})"
    st = os.fstat(fd)
    kind = kind_of(st.st_mode)
    if kind is not None:  # swapped between the look and the open
        os.close(fd)
        return None, None, f"{name} is {kind}, not a file: skipped"
    return fd, st, None


def read_bytes(path: str | os.PathLike, limit: int = JSON_LIMIT, *, partial: bool = False) -> Read:
    """The bytes of a regular file, at most `limit` of them.

    A larger file is skipped with the reason, or with partial=True its first `limit` bytes are
    returned (`truncated`). Never raises for what the folder holds; never blocks."""
    name = Path(path).name
    fd, st, problem = open_regular(path)
    if fd is None:
        return Read(None, problem)
    try:
        if st.st_size > limit and not partial:
            return Read(None, f"{name} is {size_text(st.st_size)}, over the {size_text(limit)} this reader takes: "
                              "skipped", st.st_size)
        chunks, got = [], 0
        while got <= limit:
            chunk = os.read(fd, min(4 * MB, limit + 1 - got))
            if not chunk:
                break
            chunks.append(chunk)
            got += len(chunk)
    except OSError as exc:
        return Read(None, f"{name} cannot be read ({_reason(exc)})", st.st_size)
    finally:
        os.close(fd)
    data = b"".join(chunks)
    if len(data) > limit:  # it grew past the limit while being read
        if not partial:
            return Read(None, f"{name} is over the {size_text(limit)} this reader takes: skipped", len(data))
        return Read(data[:limit], None, max(st.st_size, len(data)), truncated=True)
    return Read(data, None, max(st.st_size, len(data)), truncated=st.st_size > limit)


def read_text(path: str | os.PathLike, limit: int = JSON_LIMIT) -> tuple[str | None, str | None]:
    """(text, None), (None, None) when the file is missing, or (None, what is wrong with it): not a regular
    file, larger than `limit`, unreadable, not UTF-8. Never raises for a damaged file; never blocks."""
    got = read_bytes(path, limit)
    if got.data is None:
        return None, got.problem
    try:
        return got.data.decode("utf-8"), None
    except UnicodeDecodeError as exc:
        return None, f"{Path(path).name} is not UTF-8 text (byte {exc.start})"


def count_lines(path: str | os.PathLike, limit: int = ROUNDS_LIMIT) -> int:
    """Complete lines in the file's first `limit` bytes (0 when it is missing or not a regular file)."""
    fd, _, _ = open_regular(path)
    if fd is None:
        return 0
    count = read = 0
    try:
        while read < limit:
            chunk = os.read(fd, min(4 * MB, limit - read))
            if not chunk:
                break
            read += len(chunk)
            count += chunk.count(b"\n")
    except OSError:
        pass
    finally:
        os.close(fd)
    return count
