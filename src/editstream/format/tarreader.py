"""Streaming tar reading of WebDataset shards from any forward-readable stream, without ``tarfile``:
member offsets, capped sizes, GNU long names and pax ``path``/``size``, one error class per failure."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Protocol

from . import tarblock as tb
from .tarblock import (
    HeaderChecksumError,
    MalformedHeaderError,
    MemberTooLargeError,
    SampleOrderError,
    TruncatedTarError,
)

_SKIP_CHUNK = 1 << 20


class Readable(Protocol):
    """What the reader needs from a stream: ``read(n)`` (a file, a ranged reader, a hashing wrapper)."""

    def read(self, n: int = -1, /) -> bytes: ...


def _read_exact(f: Readable, n: int) -> bytes:
    """Read up to ``n`` bytes, looping over short reads; fewer only at end of stream."""
    data = f.read(n) or b""
    if len(data) == n or not data:
        return data
    parts = [data]
    got = len(data)
    while got < n and (more := f.read(n - got)):
        parts.append(more)
        got += len(more)
    return b"".join(parts)


def _skip_payload(f: Readable, size: int, truncated: str) -> None:
    """Read past ``size`` data bytes and their padding in bounded chunks (nothing is kept)."""
    remaining = size + tb.padding(size)
    while remaining:
        got = len(_read_exact(f, min(remaining, _SKIP_CHUNK)))
        if got == 0:
            raise TruncatedTarError(truncated)
        remaining -= got


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


_ZERO_LINKNAME = bytes(100)
_ZERO_TAIL = bytes(tb.BLOCK - 265)


def _byte_sum(block: bytes) -> int:
    """``sum(block)`` of a header, skipping the all-zero link name and tail most headers have."""
    total = sum(block[:157]) + sum(block[257:265])
    linkname, tail = block[157:257], block[265:]
    if linkname != _ZERO_LINKNAME:
        total += sum(linkname)
    if tail != _ZERO_TAIL:
        total += sum(tail)
    return total


def _checksum_ok(block: bytes) -> bool:
    stored = block[tb.CHECKSUM]
    text = stored.split(b"\0", 1)[0].strip(b" ")
    try:
        value = int(text, 8)
    except ValueError:
        return False
    if value == _byte_sum(block) - sum(stored) + 256:  # the checksum field counts as 8 spaces
        return True
    before, after = block[: tb.CHECKSUM.start], block[tb.CHECKSUM.stop :]
    signed = sum((b - 256 if b > 127 else b) for b in before) + 256 + sum((b - 256 if b > 127 else b) for b in after)
    return value == signed


def _parse_pax(data: bytes, source: str, offset: int) -> dict[str, str]:
    """Records ``"<len> <key>=<value>\\n"`` of a pax extended header."""
    out: dict[str, str] = {}
    pos = 0
    while pos < len(data):
        if data[pos : pos + 1] == b"\0":
            break
        space = data.find(b" ", pos)
        try:
            length = int(data[pos:space])
        except ValueError:
            raise MalformedHeaderError(f"{source}: bad pax record at offset {offset}") from None
        record = data[space + 1 : pos + length]
        if length <= 0 or not record.endswith(b"\n") or b"=" not in record:
            raise MalformedHeaderError(f"{source}: bad pax record at offset {offset}")
        key, value = record[:-1].split(b"=", 1)
        out[key.decode("utf-8", "replace")] = value.decode("utf-8", "surrogateescape")
        pos += length
    return out


def _header_name(block: bytes) -> str:
    name = block[tb.NAME].split(b"\0", 1)[0].decode("utf-8", "surrogateescape")
    if block[tb.USTAR_MAGIC6] == b"ustar\0":
        prefix = block[tb.PREFIX].split(b"\0", 1)[0].decode("utf-8", "surrogateescape")
        if prefix:
            name = f"{prefix}/{name}"
    return name


@dataclass(slots=True)
class _MemberWalker:
    """Walks headers one at a time, carrying GNU long-name / pax records over to the next entry."""

    f: Readable
    pos: int
    end_offset: int | None
    max_member_size: int
    source: str
    pending_name: str | None = None
    pending_size: int | None = None
    pending_offset: int | None = None
    unread_padding: int = 0
    """Padding after the last member's data, read together with the next header (one read less)."""

    def next_block(self) -> bytes | None:
        """The next header block, or ``None`` at the end of the archive (or of the range)."""
        if self.end_offset is not None and self.pos >= self.end_offset:
            if self.pending_offset is not None:
                raise TruncatedTarError(
                    f"{self.source}: extended header at offset {self.pending_offset} has no "
                    f"member before end offset {self.end_offset}"
                )
            return None
        pad = self.unread_padding
        self.unread_padding = 0
        block = _read_exact(self.f, pad + tb.BLOCK)
        if pad:
            if len(block) < pad:
                raise TruncatedTarError(
                    f"{self.source}: stream ended inside the padding before offset {self.pos} "
                    f"({len(block)} of {pad} bytes)"
                )
            block = block[pad:]
        if not block:
            if self.end_offset is None:
                raise TruncatedTarError(
                    f"{self.source}: stream ended at offset {self.pos} without an end-of-archive marker"
                )
            return None
        if len(block) < tb.BLOCK:
            raise TruncatedTarError(
                f"{self.source}: stream ended inside the header at offset {self.pos} ({len(block)} of {tb.BLOCK} bytes)"
            )
        self.pos += tb.BLOCK
        if block == tb.ZERO_BLOCK:
            return None
        if not _checksum_ok(block):
            raise HeaderChecksumError(f"{self.source}: header checksum mismatch at offset {self.pos - tb.BLOCK}")
        return block

    def extended(self, typeflag: bytes, size: int, offset: int) -> None:
        """Read a long-name / pax record and keep what it says for the next entry."""
        if size > tb.MAX_EXTENDED_HEADER:
            raise MemberTooLargeError(
                f"{self.source}: extended header of {size} bytes at offset {offset} exceeds {tb.MAX_EXTENDED_HEADER}"
            )
        payload = _read_exact(self.f, size) if size else b""
        pad = tb.padding(size)  # read apart: no slice copies the payload
        if len(payload) < size or (pad and len(_read_exact(self.f, pad)) < pad):
            raise TruncatedTarError(f"{self.source}: stream ended inside the extended header at offset {offset}")
        self.pos += size + pad
        if typeflag in (b"g", b"K"):
            return
        if self.pending_offset is None:
            self.pending_offset = offset
        if typeflag == b"L":
            self.pending_name = payload.split(b"\0", 1)[0].decode("utf-8", "surrogateescape")
            return
        records = _parse_pax(payload, self.source, offset)
        if "path" in records:
            self.pending_name = records["path"]
        if "size" in records:
            try:
                self.pending_size = int(records["size"])
            except ValueError:
                raise MalformedHeaderError(f"{self.source}: bad pax size at offset {offset}") from None

    def entry(self, block: bytes, typeflag: bytes, size: int, offset: int) -> tuple[str, int, bytes] | None:
        """Read one non-extended entry: a regular file becomes a member, anything else is skipped."""
        member_offset = self.pending_offset if self.pending_offset is not None else offset
        name = self.pending_name if self.pending_name is not None else _header_name(block)
        self.pending_name = self.pending_size = self.pending_offset = None
        if typeflag not in tb.REGULAR_TYPES:
            if typeflag in tb.DATALESS_TYPES:
                size = 0
            _skip_payload(self.f, size, f"{self.source}: stream ended inside entry {name!r} at offset {offset}")
            self.pos += size + tb.padding(size)
            return None
        if size > self.max_member_size:
            raise MemberTooLargeError(
                f"{self.source}: member {name!r} at offset {offset} has {size} bytes, "
                f"above the cap of {self.max_member_size}"
            )
        data = _read_exact(self.f, size) if size else b""
        if len(data) < size:
            raise TruncatedTarError(
                f"{self.source}: stream ended inside member {name!r} at offset {offset} (of {size} data bytes)"
            )
        self.unread_padding = tb.padding(size)
        self.pos += size + self.unread_padding
        return name, member_offset, data

    def entries(self) -> Iterator[tuple[str, int, bytes]]:
        """``(name, offset, data)`` of each regular member; ``offset`` is its first header block
        (its long-name / pax record, if any)."""
        while True:
            block = self.next_block()
            if block is None:
                return
            offset = self.pos - tb.BLOCK
            typeflag = block[156:157]
            try:  # the usual field: 11 octal digits and a NUL
                size = int(block[124:135], 8) if block[135] == 0 else -1
            except ValueError:
                size = -1
            if size < 0:
                size = _parse_number(block[124:136], "size", self.source, offset)
            if size < 0:
                raise MalformedHeaderError(f"{self.source}: negative size in header at offset {offset}")
            if typeflag in tb.EXTENDED_TYPES:
                self.extended(typeflag, size, offset)
                continue
            member = self.entry(block, typeflag, self.pending_size if self.pending_size is not None else size, offset)
            if member is not None:
                yield member


def split_name(name: str) -> tuple[str, str] | None:
    """``(key, suffix)`` of a member name: the key ends at the first dot of the last path part."""
    slash = name.rfind("/")
    dot = name.find(".", slash + 1)
    if dot <= slash + 1:
        return None
    return name[:dot], name[dot + 1 :]


def iter_samples(
    fileobj: Readable,
    *,
    start_offset: int = 0,
    end_offset: int | None = None,
    max_member_size: int = tb.DEFAULT_MAX_MEMBER_SIZE,
    source: str = "<tar stream>",
) -> Iterator[tuple[str, int, dict[str, bytes]]]:
    """``(key, offset of its first header, {suffix: data})`` of each sample from ``start_offset`` to the end
    marker (exactly one zero block consumed: ``verify`` relies on it) or ``end_offset``. Names without an
    extension are skipped, as webdataset does; a key that comes back or a repeated suffix is an error."""
    seen: set[str] = set()
    key: str | None = None
    offset = 0
    members: dict[str, bytes] = {}
    seekable = getattr(fileobj, "seekable", None)
    if start_offset and seekable is not None and seekable():
        fileobj.seek(start_offset)  # type: ignore[attr-defined]  # seekable() said it has one
    walker = _MemberWalker(fileobj, start_offset, end_offset, max_member_size, source)
    for name, member_offset, data in walker.entries():
        parts = split_name(name)
        if parts is None:
            continue
        member_key, suffix = parts
        if member_key != key:
            if key is not None:
                yield key, offset, members
            if member_key in seen:
                raise SampleOrderError(
                    f"{source}: members of sample {member_key!r} are not contiguous "
                    f"(seen again at offset {member_offset})"
                )
            seen.add(member_key)
            key, offset, members = member_key, member_offset, {}
        if suffix in members:
            raise SampleOrderError(
                f"{source}: sample {member_key!r} has member {suffix!r} twice (second at offset {member_offset})"
            )
        members[suffix] = data
    if key is not None:
        yield key, offset, members
