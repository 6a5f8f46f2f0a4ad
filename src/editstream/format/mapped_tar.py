"""Samples of a local shard the converter wrote, sliced from one memory map with no header parsed one by one.
Shard format 2 (:func:`table_samples`): through its member table, members handed out as read-only memoryviews of
the map, the shard hashed only when asked. Format 1 (:func:`mapped_samples`): the headers walked once, after the
whole shard hashed to its manifest digest. Anything that does not fit goes to the streaming reader."""

from __future__ import annotations

import mmap
import os
from collections.abc import Generator

import xxhash

from . import tarblock as tb
from .digest import new_hasher
from .member_table import MemberTable
from .rowcodec import JSON_SUFFIX

Sample = tuple[str, int, dict[str, tuple[int, int]]]
"""``(key, offset of its first header, {suffix: (data start, data end)})``."""


def _walk(buf: mmap.mmap, max_member_size: int) -> tuple[list[int], list[int]] | None:
    """Header offsets and member sizes up to the end-of-archive block; ``None`` at anything but a plain
    member (a long-name record, say) or a member above ``max_member_size``."""
    heads: list[int] = []
    sizes: list[int] = []
    pos = 0
    while buf[pos + 156] == 48:  # typeflag "0"; the end block has 0 there
        size = int(buf[pos + 124 : pos + 135], 8)
        if size > max_member_size:
            return None
        heads.append(pos)
        sizes.append(size)
        pos += tb.BLOCK + size + (-size % tb.BLOCK)
    return (heads, sizes) if buf[pos : pos + tb.BLOCK] == tb.ZERO_BLOCK else None


def _index(buf: mmap.mmap, max_member_size: int) -> list[Sample] | None:
    """The samples of a verified shard, grouped as ``iter_samples`` groups them; ``None`` when a name
    is not ``key.suffix`` without a slash or the samples' keys or suffixes are not unique."""
    try:
        walked = _walk(buf, max_member_size)
    except (ValueError, IndexError):
        walked = None
    if not walked or not walked[0]:
        return None if walked is None else []
    heads, sizes = walked
    text = b"\n".join([buf[h : h + 100] for h in heads]).translate(None, b"\0").decode("utf-8", "surrogateescape")
    names = text.split("\n")
    if len(names) != len(heads) or "/" in text:
        return None
    samples: list[Sample] = []
    key = None
    members: dict[str, tuple[int, int]] = {}
    for name, head, size in zip(names, heads, sizes):
        member_key, dot, suffix = name.partition(".")
        if not member_key or not dot:
            return None
        if member_key != key:
            key, members = member_key, {}
            samples.append((member_key, head, members))
        members[suffix] = (head + tb.BLOCK, head + tb.BLOCK + size)
    unique = len({s[0] for s in samples}) == len(samples) and sum(len(s[2]) for s in samples) == len(heads)
    return samples if unique else None


def _map(path: str, num_bytes: int) -> mmap.mmap | None:
    """The file at ``path`` mapped read-only when it has the manifest's size ``num_bytes``, else ``None``."""
    try:
        with open(path, "rb") as f:
            if os.fstat(f.fileno()).st_size != num_bytes or num_bytes < tb.BLOCK:
                return None
            return mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
    except (OSError, ValueError):  # missing, or a filesystem that cannot map: the streaming reader says why
        return None


def mapped_samples(
    path: str, start: int, num_bytes: int, digest: tuple[str, str], max_member_size: int = tb.DEFAULT_MAX_MEMBER_SIZE
) -> Generator[tuple[str, int, dict[str, bytes]], None, None] | None:
    """``(key, offset, {suffix: data})`` of the shard at ``path`` from the sample whose first header is at
    byte ``start``, as :func:`~editstream.format.tarreader.iter_samples` gives them, when the file has the
    manifest's size ``num_bytes`` and ``digest`` (``(algorithm, hex)``, xxh3-128 only); ``None`` otherwise."""
    if digest[0] != "xxh3_128":
        return None
    buf = _map(path, num_bytes)
    if buf is None:
        return None
    samples = _index(buf, max_member_size) if xxhash.xxh3_128_hexdigest(buf) == digest[1] else None
    first = 0
    if samples is not None and start:
        first = next((i for i, s in enumerate(samples) if s[1] == start), -1)
    if samples is None or first < 0:
        buf.close()
        return None
    return _slices(buf, samples[first:])


def _slices(buf: mmap.mmap, samples: list[Sample]) -> Generator[tuple[str, int, dict[str, bytes]], None, None]:
    try:
        for key, offset, members in samples:
            yield key, offset, {suffix: buf[a:b] for suffix, (a, b) in members.items()}
    finally:
        buf.close()


Members = dict[str, "bytes | memoryview"]


def table_samples(
    path: str,
    table: MemberTable,
    index: int,
    num_bytes: int,
    *,
    digest: tuple[str, str] | None = None,
    as_bytes: bool = False,
) -> Generator[tuple[str, int, Members], None, None] | None:
    """``(key, offset, {suffix: data})`` of the shard at ``path`` from sample ``index`` on, sliced through its
    member ``table``: each member a read-only memoryview of one map (``bytes`` with ``as_bytes``; the JSON member
    always). ``None`` when the file is not the table's shard (its size, or the names in its first and last member
    headers), or, given ``digest`` (``(algorithm, hex)``), when it does not hash to it."""
    if table.shard_size != num_bytes:
        return None
    buf = _map(path, num_bytes)
    if buf is None:
        return None
    if not _headers_match(buf, table) or (digest is not None and not _hashes_to(buf, digest)):
        buf.close()
        return None
    return _table_slices(buf, table, index, as_bytes)


def _headers_match(buf: mmap.mmap, table: MemberTable) -> bool:
    """Whether the first and last members' headers name what the table says (a table of another shard, or a
    shard rewritten since, fails this at the cost of two compares)."""
    if not table.suffixes:
        return True
    for sample in {0, table.num_samples - 1}:
        j = table.first_member[sample]
        name = f"{table.keys[sample]}.{table.suffixes[j]}".encode()[:100]
        head = table.data_offsets[j] - tb.BLOCK
        if head < 0 or buf[head : head + len(name)] != name:
            return False
    return True


def _hashes_to(buf: mmap.mmap, digest: tuple[str, str]) -> bool:
    hasher = new_hasher(digest[0])
    hasher.update(buf)  # type: ignore[arg-type]  # a buffer, as hashlib and xxhash take
    return hasher.hexdigest() == digest[1]


def _table_slices(
    buf: mmap.mmap, table: MemberTable, index: int, as_bytes: bool
) -> Generator[tuple[str, int, Members], None, None]:
    # The map is never closed here: members handed out keep it alive, and it is unmapped once the last is freed.
    view = memoryview(buf)
    keys, offsets, first = table.keys, table.sample_offsets, table.first_member
    suffixes, starts, sizes = table.suffixes, table.data_offsets, table.sizes
    for i in range(index, table.num_samples):
        members: Members = {}
        for j in range(first[i], first[i + 1]):
            suffix, start = suffixes[j], starts[j]
            data = view[start : start + sizes[j]]
            members[suffix] = bytes(data) if as_bytes or suffix == JSON_SUFFIX else data
        yield keys[i], offsets[i], members
