"""Ranged reads (one retried ranged request, a local range reader, a seekable remote file): every remote
read goes through here, so one :class:`RetryPolicy` decides what is retried."""

from __future__ import annotations

import bisect
import io
import os
from collections.abc import Sequence
from typing import IO, Any

from . import storage
from .retry import RetryPolicy
from .storage import StorageOptions


def read_range(
    url: str, start: int, end: int, *, storage_options: StorageOptions | None = None, retry: RetryPolicy | None = None
) -> bytes:
    """Bytes ``[start, end)`` of ``url`` with one ranged request, retried under ``retry``."""
    return storage.read_bytes(url, storage_options, start, end, retry=retry)


def open_local_range(path: str, start: int, end: int) -> Any:
    """A sequential reader of bytes ``[start, end)`` of a local file: the file itself when it
    ends at ``end`` (no Python layer per read), else a :class:`LocalRangeReader` that stops there."""
    f = open(path, "rb", buffering=0)  # noqa: SIM115 - handed to the caller, who closes it
    try:
        if os.fstat(f.fileno()).st_size != end:
            f.close()
            return LocalRangeReader(path, start, end)
        if start:
            f.seek(start)
    except BaseException:
        f.close()
        raise
    return f


class SequentialReader:
    """What the tar reader needs of a range reader besides ``read``: a position, no seeking, ``with``."""

    _pos: int

    def tell(self) -> int:
        return self._pos

    def seekable(self) -> bool:
        return False

    def close(self) -> None:
        raise NotImplementedError

    def __enter__(self) -> SequentialReader:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class LocalRangeReader(SequentialReader):
    """Sequential reads of bytes ``[start, end)`` of a local file, straight from the file (never past ``end``)."""

    def __init__(self, path: str, start: int, end: int) -> None:
        self._f = open(path, "rb", buffering=0)  # noqa: SIM115 - closed by close()
        if start:
            self._f.seek(start)
        self._pos = start
        self.end = end

    def read(self, n: int = -1) -> bytes:
        left = self.end - self._pos
        if n < 0 or n > left:
            n = max(0, left)
        data = self._f.read(n) if n else b""
        while len(data) < n and (more := self._f.read(n - len(data))):  # a raw read may return less before the end
            data += more
        self._pos += len(data)
        return data

    def close(self) -> None:
        self._f.close()


class RetryingFile(io.RawIOBase):
    """A read-only, seekable file over one remote object (or its parts, read as one), served from blocks of
    ``block_size`` bytes, each one retried ranged request: a footer read or a scan costs one per block."""

    def __init__(
        self,
        url: str | Sequence[str],
        *,
        storage_options: StorageOptions | None = None,
        retry: RetryPolicy | None = None,
        block_size: int = 4 << 20,
    ) -> None:
        super().__init__()
        if block_size <= 0:
            raise ValueError(f"block_size must be > 0, got {block_size}")
        self.urls = [url] if isinstance(url, str) else list(url)
        self.url = self.urls[0]
        self.storage_options = storage_options
        self.retry = retry
        self.block_size = block_size
        self.starts = [0]
        for part in self.urls:
            self.starts.append(self.starts[-1] + storage.size(part, storage_options))
        self.size = self.starts[-1]
        self._pos = 0
        self._block_start = 0
        self._block = b""

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def seek(self, offset: int, whence: int = os.SEEK_SET) -> int:
        base = {os.SEEK_SET: 0, os.SEEK_CUR: self._pos, os.SEEK_END: self.size}.get(whence)
        if base is None:
            raise ValueError(f"invalid whence {whence}")
        if base + offset < 0:
            raise ValueError(f"negative seek position {base + offset} in {self.url}")
        self._pos = base + offset
        return self._pos

    def read(self, n: int = -1) -> bytes:
        end = self.size if n is None or n < 0 else min(self.size, self._pos + n)
        out = b""
        while self._pos < end:
            part = bisect.bisect_right(self.starts, self._pos) - 1
            stop = min(end, self.starts[part + 1])
            if not (self._block_start <= self._pos and stop <= self._block_start + len(self._block)):
                self._fetch(part, stop)
            piece = self._block[self._pos - self._block_start : stop - self._block_start]
            out = out + piece if out else piece
            self._pos = stop
        return out

    def _fetch(self, part: int, stop: int) -> None:
        """Make the block at the read position (through ``stop`` at least) the current one."""
        base = self.starts[part]
        fetch_end = min(self.starts[part + 1], max(stop, self._pos + self.block_size))
        url = self.urls[part]
        self._block = read_range(
            url, self._pos - base, fetch_end - base, storage_options=self.storage_options, retry=self.retry
        )
        self._block_start = self._pos
        if len(self._block) < fetch_end - self._pos:
            raise OSError(
                f"{url}: short read at byte {self._pos - base} ({len(self._block)} of "
                f"{fetch_end - self._pos} bytes); the object changed or is truncated"
            )

    def readinto(self, buffer: Any) -> int:
        data = self.read(len(buffer))
        buffer[: len(data)] = data
        return len(data)


def open_read(
    url: str,
    storage_options: StorageOptions | None = None,
    *,
    retry: RetryPolicy | None = None,
    block_size: int = 4 << 20,
) -> IO[bytes]:
    """Open ``url`` for reading: a plain file for local paths, a :class:`RetryingFile` otherwise."""
    if storage.is_local(url):
        _, path = storage.url_to_fs(url, storage_options)
        return open(path, "rb", buffering=block_size)
    return RetryingFile(url, storage_options=storage_options, retry=retry, block_size=block_size)  # type: ignore[return-value]
