"""Tar reading and writing for WebDataset shards, without the stdlib ``tarfile`` machinery.

The writer emits deterministic GNU-format archives (mtime 0, uid/gid 0, empty user and
group names, mode 0o644, GNU long names above 100 characters) so the same samples always
give the same bytes. The reader walks headers on any forward-readable file object, reports
the byte offset of every member, caps member sizes, understands GNU long names and pax
``path``/``size`` records, and raises a distinct ``TarFormatError`` subclass per failure.
"""

from __future__ import annotations

import hashlib
import os
import queue
import stat
import threading
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import IO, Any

BLOCK = 512
END_OF_ARCHIVE = b"\0" * (2 * BLOCK)
DEFAULT_MAX_MEMBER_SIZE = 512 * 1024 * 1024
"""Largest member the reader accepts by default (a corrupt size field must not exhaust memory)."""
MAX_EXTENDED_HEADER = 1024 * 1024
"""Largest GNU long-name or pax extended header the reader accepts."""

_GNU_MAGIC = b"ustar  \0"  # magic "ustar " followed by version " \0"
_USTAR_MAGIC = b"ustar\x0000"
_LONGLINK = b"././@LongLink"
_REGULAR_TYPES = (b"0", b"\0", b"7")
_MODE = 0o644


# ---------------------------------------------------------------------------------------
# Errors

class TarFormatError(ValueError):
    """A tar stream that cannot be read as a valid archive; names the source and offset."""


class TruncatedTarError(TarFormatError):
    """The stream ended inside a header or a member's data (or before the end marker)."""


class HeaderChecksumError(TarFormatError):
    """A header block whose stored checksum does not match its bytes."""


class MemberTooLargeError(TarFormatError):
    """A member (or extended header) larger than the reader's cap."""


class MalformedHeaderError(TarFormatError):
    """A header whose numeric fields or extended records cannot be parsed."""


class SampleOrderError(TarFormatError):
    """The members of one sample are not contiguous, or a member name repeats within a sample."""


# ---------------------------------------------------------------------------------------
# Writing

def _octal(value: int, width: int) -> bytes:
    """A NUL-terminated octal field, or GNU base-256 when the value does not fit."""
    text = b"%0*o" % (width - 1, value)
    if len(text) <= width - 1:
        return text + b"\0"
    if value < 0 or value >= 256 ** (width - 1):
        raise ValueError(f"value {value} does not fit a {width}-byte tar field")
    return b"\x80" + value.to_bytes(width - 1, "big")


def _header(name: bytes, size: int, typeflag: bytes) -> bytes:
    """One 512-byte GNU header block with the fixed metadata of this format."""
    if len(name) > 100:
        raise ValueError("header names above 100 bytes need a long-name record")
    block = bytearray(BLOCK)
    block[0:len(name)] = name
    block[100:108] = _octal(_MODE, 8)
    block[108:116] = _octal(0, 8)
    block[116:124] = _octal(0, 8)
    block[124:136] = _octal(size, 12)
    block[136:148] = _octal(0, 12)
    block[148:156] = b" " * 8
    block[156:157] = typeflag
    block[257:265] = _GNU_MAGIC
    checksum = sum(block)
    block[148:156] = b"%06o\0 " % checksum
    return bytes(block)


def _padding(size: int) -> bytes:
    return b"\0" * (-size % BLOCK)


_IOV_MAX = 512


def _real_fd(fileobj: Any) -> int | None:
    """The OS descriptor of a plain local file opened for writing, else ``None``."""
    try:
        fd = fileobj.fileno()
    except (AttributeError, OSError, ValueError):
        return None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return None
    except OSError:
        return None
    fileobj.flush()
    return fd


def _writev_all(fd: int, chunks: list[Any]) -> None:
    """Write every chunk with ``os.writev``, resuming after partial writes."""
    views = [memoryview(c).cast("B") if not isinstance(c, bytes) else c for c in chunks if len(c)]
    i = 0
    while i < len(views):
        batch = views[i:i + _IOV_MAX]
        written = os.writev(fd, batch)
        for v in batch:
            if written >= len(v):
                written -= len(v)
                i += 1
            else:
                views[i] = memoryview(v)[written:]
                break


def member_bytes(name: str, data: bytes | bytearray | memoryview) -> list[bytes | bytearray | memoryview]:
    """The chunks that make up one regular-file member: header(s), data, padding.

    Names longer than 100 bytes get a GNU ``././@LongLink`` record first, as GNU tar does.
    """
    raw = name.encode("utf-8")
    if not raw or b"\0" in raw:
        raise ValueError(f"invalid tar member name {name!r}")
    size = len(data)
    chunks: list[bytes | bytearray | memoryview] = []
    if len(raw) > 100:
        long_data = raw + b"\0"
        chunks.append(_header(_LONGLINK, len(long_data), b"L"))
        chunks.append(long_data + _padding(len(long_data)))
        raw = raw[:100]
    chunks.append(_header(raw, size, b"0"))
    if size:
        chunks.append(data)
        pad = _padding(size)
        if pad:
            chunks.append(pad)
    return chunks


class TarWriter:
    """Streams samples into a deterministic tar archive while hashing and indexing it.

    Chunks (headers, the members' own bytes or memoryviews, padding) are collected into large
    batches, each hashed and then written: with ``os.writev`` straight from the members'
    buffers when the file has a real descriptor (no copy in Python), otherwise as one joined
    write. With ``background`` a helper thread hashes and writes while the caller goes on. ``offsets`` holds each sample's first header offset; ``sha256`` and ``num_bytes``
    describe the archive once ``close()`` has added the end-of-archive marker.
    """

    def __init__(self, fileobj: IO[bytes], *, buffer_size: int = 8 * 1024 * 1024, hash_output: bool = True,
                 background: bool = False) -> None:
        self._f = fileobj
        self._fd = _real_fd(fileobj)
        self._buffer: list[Any] = []
        self._buffered = 0
        self._buffer_size = buffer_size
        self._hash = hashlib.sha256() if hash_output else None
        self._pos = 0
        self._closed = False
        self.offsets: list[int] = []
        self.keys: list[str] = []
        # With ``background``, batches are written by a helper thread (two batches in flight) so
        # reading and hashing the next rows overlap with the write; errors surface on the next call.
        self._queue: queue.Queue | None = None
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

    def _raise_background_error(self) -> None:
        if self._error is not None:
            raise self._error

    def abort(self) -> None:
        """Stop the helper thread without finishing the archive (after an error)."""
        self._closed = True
        self._buffer = []
        if self._thread is not None and self._queue is not None:
            self._queue.put(None)
            self._thread.join()
            self._thread = None

    @property
    def position(self) -> int:
        """Bytes written so far (including buffered bytes)."""
        return self._pos

    def _emit(self, chunks: Iterable[Any]) -> None:
        for chunk in chunks:
            n = len(chunk)
            self._buffer.append(chunk)
            self._buffered += n
            self._pos += n
        if self._buffered >= self._buffer_size:
            self._flush()

    def _flush(self) -> None:
        if not self._buffer:
            return
        chunks = self._buffer
        self._buffer = []
        self._buffered = 0
        if self._queue is not None:
            self._raise_background_error()
            self._queue.put(chunks)
        else:
            self._write(chunks)

    def _write(self, chunks: list[Any]) -> None:
        """Hash then write one batch (on the helper thread in background mode)."""
        if self._hash is not None:
            update = self._hash.update
            for chunk in chunks:
                update(chunk)
        if self._fd is None:
            self._f.write(b"".join(chunks))
        else:
            _writev_all(self._fd, chunks)

    def write_sample(self, key: str, members: Iterable[tuple[str, bytes]]) -> int:
        """Write one sample's members (``(suffix, data)``, stored as ``key.suffix``) in sorted order.

        Returns the sample's offset. Keys must be non-empty and contain no dot.
        """
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
            chunks.extend(member_bytes(f"{key}.{suffix}", data))
        self._emit(chunks)
        self.offsets.append(offset)
        self.keys.append(key)
        return offset

    def close(self) -> None:
        """Write the end-of-archive marker and flush; the underlying file stays open."""
        if self._closed:
            return
        self._emit([END_OF_ARCHIVE])
        self._flush()
        self._closed = True
        if self._thread is not None and self._queue is not None:
            self._queue.put(None)
            self._thread.join()
            self._thread = None
            self._raise_background_error()

    @property
    def end_offset(self) -> int:
        """Offset just after the last sample (where the end-of-archive marker starts)."""
        return self._pos - (len(END_OF_ARCHIVE) if self._closed else 0)

    @property
    def num_bytes(self) -> int:
        return self._pos

    @property
    def sha256(self) -> str:
        if self._hash is None:
            raise ValueError("TarWriter was created with hash_output=False")
        if not self._closed:
            raise ValueError("sha256 is known only after close()")
        return self._hash.hexdigest()


# ---------------------------------------------------------------------------------------
# Reading

@dataclass(frozen=True)
class TarMember:
    """One regular file of an archive: its name, its data and where it sits in the stream."""

    name: str
    offset: int
    """Offset of the member's first header block (its long-name / pax record, if any)."""
    data_offset: int
    data: bytes

    @property
    def size(self) -> int:
        return len(self.data)


def _read_exact(f: IO[bytes], n: int) -> bytes:
    """Read up to ``n`` bytes, looping over short reads; fewer only at end of stream."""
    data = f.read(n)
    if data is None:
        data = b""
    if len(data) == n or not data:
        return data
    parts = [data]
    got = len(data)
    while got < n:
        more = f.read(n - got)
        if not more:
            break
        parts.append(more)
        got += len(more)
    return b"".join(parts)


def _read_payload(f: IO[bytes], size: int, truncated: str) -> bytes:
    """The ``size`` data bytes of an entry, then its padding to the next block, read and dropped.

    Reading the padding separately keeps the data from being sliced (copied) once more.
    Raises ``TruncatedTarError(truncated)`` when the stream ends first.
    """
    data = _read_exact(f, size) if size else b""
    pad = -size % BLOCK
    if len(data) < size or (pad and len(_read_exact(f, pad)) < pad):
        raise TruncatedTarError(truncated)
    return data


def _parse_number(field: bytes, what: str, source: str, offset: int) -> int:
    if field[:1] in (b"\x80", b"\xff"):
        value = int.from_bytes(field[1:], "big")
        if field[:1] == b"\xff":
            value -= 256 ** (len(field) - 1)
        return value
    text = field.split(b"\0", 1)[0].strip(b" \0")
    if not text:
        return 0
    try:
        return int(text, 8)
    except ValueError:
        raise MalformedHeaderError(f"{source}: bad {what} field {field!r} in header at offset {offset}") from None


def _checksum_ok(block: bytes) -> bool:
    stored = block[148:156]
    unsigned = sum(block[:148]) + 256 + sum(block[156:])
    text = stored.split(b"\0", 1)[0].strip(b" ")
    try:
        value = int(text, 8)
    except ValueError:
        return False
    if value == unsigned:
        return True
    signed = sum((b - 256 if b > 127 else b) for b in block[:148]) + 256 + sum(
        (b - 256 if b > 127 else b) for b in block[156:])
    return value == signed


def _parse_pax(data: bytes, source: str, offset: int) -> dict[str, str]:
    """Records ``"<len> <key>=<value>\\n"`` of a pax extended header."""
    out: dict[str, str] = {}
    pos = 0
    while pos < len(data):
        if data[pos:pos + 1] == b"\0":
            break
        space = data.find(b" ", pos)
        try:
            length = int(data[pos:space])
        except ValueError:
            raise MalformedHeaderError(f"{source}: bad pax record at offset {offset}") from None
        record = data[space + 1:pos + length]
        if length <= 0 or not record.endswith(b"\n") or b"=" not in record:
            raise MalformedHeaderError(f"{source}: bad pax record at offset {offset}")
        key, value = record[:-1].split(b"=", 1)
        out[key.decode("utf-8", "replace")] = value.decode("utf-8", "surrogateescape")
        pos += length
    return out


def iter_members(fileobj: IO[bytes], *, start_offset: int = 0, end_offset: int | None = None,
                 max_member_size: int = DEFAULT_MAX_MEMBER_SIZE, source: str = "<tar stream>",
                 require_end_marker: bool = True) -> Iterator[TarMember]:
    """Yield the regular-file members of a tar stream, in order, with absolute offsets.

    Reading starts at ``start_offset`` (seeked to when the file is seekable, otherwise the
    stream must already be there) and stops at the end-of-archive marker or, when given, at
    ``end_offset``. Directories and other non-file entries are skipped. With
    ``require_end_marker`` a stream that ends before the marker is a ``TruncatedTarError``.
    At the marker exactly one zero block is consumed, so the stream then sits at
    ``end + 512`` (``verify`` relies on this to find the end offset).
    """
    seekable = getattr(fileobj, "seekable", None)
    if start_offset and seekable is not None and seekable():
        fileobj.seek(start_offset)
    pos = start_offset
    pending_name: str | None = None
    pending_size: int | None = None
    pending_offset: int | None = None
    while True:
        if end_offset is not None and pos >= end_offset:
            if pending_offset is not None:
                raise TruncatedTarError(f"{source}: extended header at offset {pending_offset} has no member "
                                        f"before end offset {end_offset}")
            return
        block = _read_exact(fileobj, BLOCK)
        if not block:
            if require_end_marker and end_offset is None:
                raise TruncatedTarError(f"{source}: stream ended at offset {pos} without an end-of-archive marker")
            return
        if len(block) < BLOCK:
            raise TruncatedTarError(f"{source}: stream ended inside the header at offset {pos} "
                                    f"({len(block)} of {BLOCK} bytes)")
        header_offset = pos
        pos += BLOCK
        if block == b"\0" * BLOCK:
            return
        if not _checksum_ok(block):
            raise HeaderChecksumError(f"{source}: header checksum mismatch at offset {header_offset}")
        typeflag = block[156:157]
        size = _parse_number(block[124:136], "size", source, header_offset)
        if size < 0:
            raise MalformedHeaderError(f"{source}: negative size in header at offset {header_offset}")
        if pending_size is not None and typeflag not in (b"L", b"x", b"g", b"K"):
            size = pending_size
        padded = size + (-size % BLOCK)

        if typeflag in (b"L", b"x", b"g", b"K"):
            if size > MAX_EXTENDED_HEADER:
                raise MemberTooLargeError(f"{source}: extended header of {size} bytes at offset {header_offset} "
                                          f"exceeds {MAX_EXTENDED_HEADER}")
            payload = _read_payload(fileobj, size, f"{source}: stream ended inside the extended header at "
                                                   f"offset {header_offset}")
            pos += padded
            if typeflag == b"g" or typeflag == b"K":
                continue
            if pending_offset is None:
                pending_offset = header_offset
            if typeflag == b"L":
                pending_name = payload.split(b"\0", 1)[0].decode("utf-8", "surrogateescape")
            else:
                records = _parse_pax(payload, source, header_offset)
                if "path" in records:
                    pending_name = records["path"]
                if "size" in records:
                    try:
                        pending_size = int(records["size"])
                    except ValueError:
                        raise MalformedHeaderError(f"{source}: bad pax size at offset {header_offset}") from None
            continue

        member_offset = pending_offset if pending_offset is not None else header_offset
        if pending_name is not None:
            name = pending_name
        else:
            name = block[0:100].split(b"\0", 1)[0].decode("utf-8", "surrogateescape")
            if block[257:263] == b"ustar\0":
                prefix = block[345:500].split(b"\0", 1)[0].decode("utf-8", "surrogateescape")
                if prefix:
                    name = f"{prefix}/{name}"
        pending_name = pending_size = pending_offset = None

        if typeflag not in _REGULAR_TYPES:
            if typeflag in (b"1", b"2", b"3", b"4", b"5", b"6"):
                size = padded = 0  # links, devices, directories and fifos carry no data blocks
            _read_payload(fileobj, size, f"{source}: stream ended inside entry {name!r} at offset {header_offset}")
            pos += padded
            continue
        if size > max_member_size:
            raise MemberTooLargeError(f"{source}: member {name!r} at offset {header_offset} has {size} bytes, "
                                      f"above the cap of {max_member_size}")
        data = _read_payload(fileobj, size, f"{source}: stream ended inside member {name!r} at offset "
                                            f"{header_offset} (of {size} data bytes)")
        data_offset = pos
        pos += padded
        yield TarMember(name=name, offset=member_offset, data_offset=data_offset, data=data)


def split_name(name: str) -> tuple[str, str] | None:
    """``(key, suffix)`` of a member name: the key ends at the first dot of the last path part."""
    slash = name.rfind("/")
    dot = name.find(".", slash + 1)
    if dot <= slash + 1:
        return None
    return name[:dot], name[dot + 1:]


def iter_samples(fileobj: IO[bytes], *, start_offset: int = 0, end_offset: int | None = None,
                 max_member_size: int = DEFAULT_MAX_MEMBER_SIZE, source: str = "<tar stream>",
                 require_end_marker: bool = True, check_unique_keys: bool = True,
                 ) -> Iterator[tuple[str, int, dict[str, bytes]]]:
    """Group members into samples: yield ``(key, offset, {suffix: data})`` in stream order.

    ``offset`` is the sample's first header. Member names without an extension are skipped,
    as webdataset does. A key that comes back after another key, or a suffix that repeats
    within a sample, raises ``SampleOrderError`` (``check_unique_keys`` remembers every key).
    """
    seen: set[str] = set()
    key: str | None = None
    offset = 0
    members: dict[str, bytes] = {}
    for member in iter_members(fileobj, start_offset=start_offset, end_offset=end_offset,
                               max_member_size=max_member_size, source=source,
                               require_end_marker=require_end_marker):
        parts = split_name(member.name)
        if parts is None:
            continue
        member_key, suffix = parts
        if member_key != key:
            if key is not None:
                yield key, offset, members
            if check_unique_keys:
                if member_key in seen:
                    raise SampleOrderError(f"{source}: members of sample {member_key!r} are not contiguous "
                                           f"(seen again at offset {member.offset})")
                seen.add(member_key)
            key, offset, members = member_key, member.offset, {}
        if suffix in members:
            raise SampleOrderError(f"{source}: sample {member_key!r} has member {suffix!r} twice "
                                   f"(second at offset {member.offset})")
        members[suffix] = member.data
    if key is not None:
        yield key, offset, members
