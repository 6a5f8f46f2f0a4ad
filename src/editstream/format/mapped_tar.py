"""Samples of a local shard the converter wrote, sliced from one memory map with no header checked: a shard
with its manifest's xxh3-128 digest is what :mod:`.tarwriter` made; anything else goes to the streaming reader."""

from __future__ import annotations

import mmap
import os
from collections.abc import Generator

import xxhash

from . import tarblock as tb

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


def mapped_samples(
    path: str, start: int, num_bytes: int, digest: tuple[str, str], max_member_size: int = tb.DEFAULT_MAX_MEMBER_SIZE
) -> Generator[tuple[str, int, dict[str, bytes]], None, None] | None:
    """``(key, offset, {suffix: data})`` of the shard at ``path`` from the sample whose first header is at
    byte ``start``, as :func:`~editstream.format.tarreader.iter_samples` gives them, when the file has the
    manifest's size ``num_bytes`` and ``digest`` (``(algorithm, hex)``, xxh3-128 only); ``None`` otherwise."""
    if digest[0] != "xxh3_128":
        return None
    try:
        with open(path, "rb") as f:
            if os.fstat(f.fileno()).st_size != num_bytes or num_bytes < tb.BLOCK:
                return None
            buf = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
    except (OSError, ValueError):  # missing, or a filesystem that cannot map: the streaming reader says why
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
