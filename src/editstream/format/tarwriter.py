"""Deterministic GNU tar writing for WebDataset shards, hashed and indexed as it is written: fixed metadata
(mtime 0, uid/gid 0, mode 0o644, long names above 100 bytes), so the same samples give the same bytes."""

from __future__ import annotations

import os
import queue
import stat
import struct
import threading
from collections.abc import Iterable
from typing import IO, Any

from . import tarblock as tb
from .digest import DEFAULT_DIGEST, new_hasher
from .member_table import MemberTable, TableBuilder

_MODE = 0o644
_IOV_MAX = 512


def _octal(value: int, width: int) -> bytes:
    """A NUL-terminated octal field, or GNU base-256 when the value does not fit."""
    text = b"%0*o" % (width - 1, value)
    if len(text) <= width - 1:
        return text + b"\0"
    if value < 0 or value >= 256 ** (width - 1):
        raise ValueError(f"value {value} does not fit a {width}-byte tar field")
    return b"\x80" + value.to_bytes(width - 1, "big")


_FIXED_MODE_IDS = _octal(_MODE, 8) + _octal(0, 8) + _octal(0, 8)  # mode, uid, gid
_FIXED_MTIME = _octal(0, 12)
_FIXED_TAIL = b"\0" * 100 + tb.GNU_MAGIC + b"\0" * (tb.BLOCK - tb.MAGIC.stop)  # linkname, magic, the rest
_FIXED_SUM = sum(_FIXED_MODE_IDS) + sum(_FIXED_MTIME) + sum(_FIXED_TAIL) + 8 * ord(" ")


_HEADER = struct.Struct("100s24s12s12s8sc355s")
"""A GNU header block: name (NUL-padded), mode/uid/gid, size, mtime, checksum, typeflag, the rest."""


def _header(name: bytes, size: int, typeflag: bytes) -> bytes:
    """One 512-byte GNU header block: one pack of the fixed parts, whose checksum share is precomputed."""
    if len(name) > 100:
        raise ValueError("header names above 100 bytes need a long-name record")
    size_field = _octal(size, 12)
    checksum = _FIXED_SUM + sum(name) + sum(size_field) + typeflag[0]
    return _HEADER.pack(name, _FIXED_MODE_IDS, size_field, _FIXED_MTIME, b"%06o\0 " % checksum, typeflag, _FIXED_TAIL)


def _real_fd(fileobj: Any) -> int | None:
    """The OS descriptor of a plain local file opened for writing, else ``None``."""
    try:
        fd = fileobj.fileno()
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return None
    except (AttributeError, OSError, ValueError):
        return None
    fileobj.flush()
    return fd


def _writev_all(fd: int, chunks: list[Any]) -> None:
    """Write every chunk (bytes-like, one byte per item) with ``os.writev``, resuming after partial writes."""
    pending = list(chunks)
    i = 0
    while i < len(pending):
        batch = pending[i : i + _IOV_MAX]
        written = os.writev(fd, batch)
        if written == sum(map(len, batch)):
            i += len(batch)
            continue
        for v in batch:
            if written < len(v):
                pending[i] = memoryview(v).cast("B")[written:]
                break
            written -= len(v)
            i += 1


def lay_out(key: str, offset: int, members: Iterable[tuple[str, int]]) -> tuple[list[tuple[str, int, int]], int]:
    """Where :func:`member_bytes` puts each member of a sample whose first header is at ``offset``: ``(suffix,
    data offset, size)`` for each ``(suffix, size)`` in order, and the offset after the last (the member table's
    rule, which ``verify`` applies to what it reads)."""
    placed: list[tuple[str, int, int]] = []
    pos = offset
    for suffix, size in members:
        name_size = len(f"{key}.{suffix}".encode())
        if name_size > 100:  # a long-name record: its header and the NUL-terminated name, padded
            pos += tb.BLOCK + name_size + 1 + tb.padding(name_size + 1)
        placed.append((suffix, pos + tb.BLOCK, size))
        pos += tb.BLOCK + size + tb.padding(size)
    return placed, pos


def member_bytes(name: str, data: bytes | bytearray | memoryview) -> list[bytes | bytearray | memoryview]:
    """The chunks of one regular-file member: header(s), data, padding; names above 100 bytes get a
    GNU ``././@LongLink`` record first, as GNU tar does."""
    raw = name.encode("utf-8")
    if not raw or b"\0" in raw:
        raise ValueError(f"invalid tar member name {name!r}")
    size = len(data)
    chunks: list[bytes | bytearray | memoryview] = []
    if len(raw) > 100:
        long_data = raw + b"\0"
        chunks.append(_header(tb.LONGLINK, len(long_data), b"L"))
        chunks.append(long_data + tb.ZERO_BLOCK[: tb.padding(len(long_data))])
        raw = raw[:100]
    chunks.append(_header(raw, size, b"0"))
    if size:
        chunks.append(data)
        if size % tb.BLOCK:
            chunks.append(tb.ZERO_BLOCK[: tb.padding(size)])
    return chunks


class TarWriter:
    """Streams samples into a deterministic tar archive, hashing batches and writing them with ``os.writev``
    from the members' own buffers; with ``background`` a helper thread (two batches in flight) writes, its
    errors raised on the next call. ``offsets``: each sample's first header; ``digest``: known once closed."""

    def __init__(
        self,
        fileobj: IO[bytes],
        *,
        buffer_size: int = 8 * 1024 * 1024,
        background: bool = False,
        digest: str = DEFAULT_DIGEST,
    ) -> None:
        self._f = fileobj
        self._fd = _real_fd(fileobj)
        self._buffer: list[Any] = []
        self._buffered = 0
        self._buffer_size = buffer_size
        self.digest_algorithm = digest
        self._hash = new_hasher(digest)
        self._pos = 0
        self._closed = False
        self.offsets: list[int] = []
        self._table = TableBuilder()
        self._queue: queue.Queue[list[Any] | None] | None = None
        self._thread: threading.Thread | None = None
        self._error: BaseException | None = None
        if background:
            self._queue = queue.Queue(maxsize=2)
            self._thread = threading.Thread(target=self._drain, name="tar-writer", daemon=True)
            self._thread.start()

    def __enter__(self) -> TarWriter:
        return self

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        if exc_type is None:
            self.close()
        else:
            self.abort()

    def _drain(self) -> None:
        assert self._queue is not None
        while True:
            chunks = self._queue.get()
            if chunks is None:
                return
            if self._error is None:
                try:
                    self._write(chunks)
                except BaseException as exc:  # noqa: BLE001 - handed to the producer thread
                    self._error = exc

    def _stop_thread(self) -> None:
        if self._thread is not None and self._queue is not None:
            self._queue.put(None)
            self._thread.join()
            self._thread = None

    def abort(self) -> None:
        """Stop the helper thread without finishing the archive (after an error)."""
        self._closed = True
        self._buffer = []
        self._stop_thread()

    def _emit(self, chunks: list[Any], size: int) -> None:
        """Queue ``chunks`` (``size`` bytes in all) for the next batch."""
        self._buffer += chunks
        self._buffered += size
        self._pos += size
        if self._buffered >= self._buffer_size:
            self._flush()

    def _flush(self) -> None:
        if not self._buffer:
            return
        chunks = self._buffer
        self._buffer = []
        self._buffered = 0
        if self._queue is not None:
            if self._error is not None:
                raise self._error
            self._queue.put(chunks)
        else:
            self._write(chunks)

    def _write(self, chunks: list[Any]) -> None:
        """Hash then write one batch (on the helper thread in background mode)."""
        update = self._hash.update
        for chunk in chunks:
            update(chunk)
        if self._fd is None:
            self._f.write(b"".join(chunks))
        else:
            _writev_all(self._fd, chunks)

    def write_sample(self, key: str, members: Iterable[tuple[str, bytes]]) -> int:
        """Write one sample's members (``(suffix, data)``, stored as ``key.suffix``) in sorted order;
        returns the sample's offset. Keys must be non-empty and contain no dot."""
        if self._closed:
            raise ValueError("TarWriter is closed")
        if not key or "." in key.rsplit("/", 1)[-1]:
            raise ValueError(f"invalid sample key {key!r}: must be non-empty and contain no dot")
        items = sorted(members, key=lambda item: item[0])
        if not items:
            raise ValueError(f"sample {key!r} has no members")
        for (a, _), (b, _) in zip(items, items[1:]):
            if a == b:
                raise ValueError(f"sample {key!r} has two members named {a!r}")
        offset = self._pos
        chunks: list[Any] = []
        for suffix, data in items:
            chunks += member_bytes(f"{key}.{suffix}", data)
        placed, end = lay_out(key, offset, [(suffix, len(data)) for suffix, data in items])
        self._emit(chunks, end - offset)
        self.offsets.append(offset)
        self._table.add(key, offset, placed)
        return offset

    def close(self) -> None:
        """Write the end-of-archive marker and flush; the underlying file stays open."""
        if self._closed:
            return
        self._emit([tb.END_OF_ARCHIVE], len(tb.END_OF_ARCHIVE))
        self._flush()
        self._closed = True
        self._stop_thread()
        if self._error is not None:
            raise self._error

    @property
    def end_offset(self) -> int:
        """Offset just after the last sample (where the end-of-archive marker starts)."""
        return self._pos - (len(tb.END_OF_ARCHIVE) if self._closed else 0)

    @property
    def num_bytes(self) -> int:
        return self._pos

    def table(self) -> MemberTable:
        """The shard's offset table (:mod:`.member_table`), known once closed."""
        if not self._closed:
            raise ValueError("the member table is known only after close()")
        return self._table.finish(self.end_offset, self.num_bytes)

    @property
    def digest(self) -> str:
        """The archive's digest (hex, of ``digest_algorithm``), known once closed."""
        if not self._closed:
            raise ValueError("the digest is known only after close()")
        return self._hash.hexdigest()
