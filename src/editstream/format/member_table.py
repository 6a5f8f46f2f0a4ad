"""Shard format 2's offset table: every sample's key and offset, every member's suffix, data offset and size,
written by the converter into the shard's ``.tar.idx`` so a reader slices members out of a mapped shard with no
tar header parsed. Little-endian; a trailing xxh3-64 of the table guards the table itself.

Layout: ``MAGIC``, then uint64 ``num_samples``, ``num_members``, ``shard_size``, ``names_size``; uint64
``sample_offsets`` (``num_samples + 1``, the last the end of the last sample: today's idx values), uint64
``first_member`` (``num_samples + 1``), uint64 ``data_offsets`` and ``sizes`` (``num_members`` each); the names
(keys, then suffixes, NUL-separated UTF-8); uint64 xxh3-64 of everything before it."""

from __future__ import annotations

import bisect
import struct
import sys
from collections.abc import Sequence
from dataclasses import dataclass

import xxhash

MAGIC = b"ESTABLE\x02"
"""The first 8 bytes of a table; a format-1 idx starts with the first sample's offset, 0, so they never match."""
_COUNTS = struct.Struct("<4Q")
_HEAD = len(MAGIC) + _COUNTS.size


class MemberTableError(ValueError):
    """Bytes that are not a sound member table; names where they came from."""


@dataclass(frozen=True)
class MemberTable:
    """The offset table of one shard (see the module docstring)."""

    keys: list[str]
    sample_offsets: list[int]
    """Each sample's first header offset, then the end offset of the last sample."""
    first_member: list[int]
    """Index into ``suffixes`` of each sample's first member, then ``len(suffixes)``."""
    suffixes: list[str]
    data_offsets: list[int]
    sizes: list[int]
    shard_size: int

    @property
    def num_samples(self) -> int:
        return len(self.keys)

    @property
    def end_offset(self) -> int:
        return self.sample_offsets[-1]

    def members(self, index: int) -> range:
        """Positions (into ``suffixes``, ``data_offsets``, ``sizes``) of sample ``index``'s members."""
        return range(self.first_member[index], self.first_member[index + 1])

    def sample_of(self, member: int) -> int:
        """The sample whose members include position ``member``."""
        return bisect.bisect_right(self.first_member, member) - 1

    def encode(self) -> bytes:
        """The table's bytes, checksum included."""
        names = "\0".join([*self.keys, *self.suffixes]).encode("utf-8")
        counts = _COUNTS.pack(len(self.keys), len(self.suffixes), self.shard_size, len(names))
        numbers = [*self.sample_offsets, *self.first_member, *self.data_offsets, *self.sizes]
        body = b"".join([MAGIC, counts, struct.pack(f"<{len(numbers)}Q", *numbers), names])
        return body + struct.pack("<Q", xxhash.xxh3_64_intdigest(body))

    @classmethod
    def decode(cls, data: bytes, where: str = "<idx>") -> MemberTable:
        """The table in ``data``; a :class:`MemberTableError` naming ``where`` when it is not a sound one."""
        if not is_member_table(data) or len(data) < _HEAD + 8:
            raise MemberTableError(f"{where}: not a member table ({len(data)} bytes)")
        view = memoryview(data)
        (checksum,) = struct.unpack_from("<Q", view, len(data) - 8)
        if xxhash.xxh3_64_intdigest(view[:-8]) != checksum:
            raise MemberTableError(f"{where}: the member table's checksum does not match its bytes")
        samples, members, shard_size, names_size = _COUNTS.unpack_from(view, len(MAGIC))
        count = 2 * (samples + 1) + 2 * members
        if _HEAD + 8 * count + names_size + 8 != len(data):
            raise MemberTableError(f"{where}: {len(data)} bytes do not fit {samples} samples and {members} members")
        numbers = view[_HEAD : _HEAD + 8 * count].cast("Q").tolist() if sys.byteorder == "little" else None
        if numbers is None:  # pragma: no cover - big-endian hosts
            numbers = list(struct.unpack_from(f"<{count}Q", view, _HEAD))
        names = bytes(view[_HEAD + 8 * count : -8]).decode("utf-8", "surrogateescape").split("\0")
        if len(names) != samples + members and samples + members:
            raise MemberTableError(f"{where}: {len(names)} names for {samples} samples and {members} members")
        a, b, c = samples + 1, 2 * (samples + 1), 2 * (samples + 1) + members
        table = cls(
            keys=names[:samples],
            sample_offsets=numbers[:a],
            first_member=numbers[a:b],
            suffixes=names[samples:] if samples else [],
            data_offsets=numbers[b:c],
            sizes=numbers[c:],
            shard_size=shard_size,
        )
        table.check(where)
        return table

    def check(self, where: str) -> None:
        """Offsets that fit inside the shard and each other (the bounds a slice relies on)."""
        offsets, first = self.sample_offsets, self.first_member
        if any(b < a for a, b in zip(offsets, offsets[1:])) or any(b <= a for a, b in zip(first, first[1:])):
            raise MemberTableError(f"{where}: sample offsets or member ranges are not increasing")
        if first[0] != 0 or first[-1] != len(self.suffixes) or offsets[-1] > self.shard_size:
            raise MemberTableError(f"{where}: the member ranges do not cover the table, or pass the shard's end")
        if any(o + s > self.shard_size for o, s in zip(self.data_offsets, self.sizes)):
            raise MemberTableError(f"{where}: a member runs past the shard's {self.shard_size} bytes")


def is_member_table(data: bytes | memoryview) -> bool:
    """Whether idx bytes are a member table (format 2) rather than format 1's plain offsets."""
    return bytes(data[: len(MAGIC)]) == MAGIC


class TableBuilder:
    """Collects the table as the tar writer lays members out."""

    def __init__(self) -> None:
        self.keys: list[str] = []
        self.sample_offsets: list[int] = []
        self.first_member: list[int] = []
        self.suffixes: list[str] = []
        self.data_offsets: list[int] = []
        self.sizes: list[int] = []

    def add(self, key: str, offset: int, members: Sequence[tuple[str, int, int]]) -> None:
        """One sample at header ``offset``: ``(suffix, data offset, size)`` of each member in tar order."""
        self.keys.append(key)
        self.sample_offsets.append(offset)
        self.first_member.append(len(self.suffixes))
        for suffix, data_offset, size in members:
            self.suffixes.append(suffix)
            self.data_offsets.append(data_offset)
            self.sizes.append(size)

    def finish(self, end_offset: int, shard_size: int) -> MemberTable:
        return MemberTable(
            keys=list(self.keys),
            sample_offsets=[*self.sample_offsets, end_offset],
            first_member=[*self.first_member, len(self.suffixes)],
            suffixes=list(self.suffixes),
            data_offsets=list(self.data_offsets),
            sizes=list(self.sizes),
            shard_size=shard_size,
        )
