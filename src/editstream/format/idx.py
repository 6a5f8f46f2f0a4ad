"""The ``.tar.idx`` sidecar beside each shard, so a resume seeks instead of rescanning. Format 1 (manifests before
version 3, and Megatron-Energon's): ``num_samples + 1`` little-endian uint64, each sample's first header offset then
the end offset. Format 2: the shard's member table (:mod:`.member_table`), which holds those offsets too."""

from __future__ import annotations

import io
import struct

from ..io import storage
from ..io.retry import RetryPolicy
from .manifest import ManifestError
from .member_table import MemberTable, MemberTableError, is_member_table
from .tarreader import iter_samples


class IdxError(ManifestError):
    """An idx file that is malformed; names the file."""


def idx_path_for(shard_path: str) -> str:
    """The idx sidecar's path for a shard path (``x.tar`` -> ``x.tar.idx``)."""
    return shard_path + ".idx"


def encode_idx(offsets: list[int], end_offset: int) -> bytes:
    """The bytes of an idx file: each sample's offset, then the end offset (uint64 LE)."""
    values = list(offsets) + [end_offset]
    if any(b < a for a, b in zip(values, values[1:])):
        raise IdxError("idx offsets must be non-decreasing")
    return struct.pack(f"<{len(values)}Q", *values)


def decode_idx(data: bytes, where: str = "<idx>") -> tuple[list[int], int]:
    """``(sample offsets, end offset)`` from idx bytes of either format; raises :class:`IdxError` when malformed."""
    if is_member_table(data):
        table = decode_table(data, where)
        return table.sample_offsets[:-1], table.end_offset
    if len(data) < 8 or len(data) % 8:
        raise IdxError(f"{where}: idx size {len(data)} is not a positive multiple of 8")
    values = list(struct.unpack(f"<{len(data) // 8}Q", data))
    if any(b < a for a, b in zip(values, values[1:])):
        raise IdxError(f"{where}: idx offsets are not sorted")
    return values[:-1], values[-1]


def decode_table(data: bytes, where: str = "<idx>") -> MemberTable:
    """The member table in format-2 idx bytes; an :class:`IdxError` for anything else."""
    try:
        return MemberTable.decode(data, where)
    except MemberTableError as exc:
        raise IdxError(str(exc)) from None


def read_idx(
    url: str, storage_options: storage.StorageOptions | None = None, num_samples: int | None = None
) -> tuple[list[int], int]:
    """Read an idx file: ``(sample offsets, end offset)``; with ``num_samples`` (the manifest's count
    for its shard), an :class:`IdxError` when it holds another number of offsets."""
    offsets, end = decode_idx(storage.read_bytes(url, storage_options), url)
    if num_samples is not None and len(offsets) != num_samples:
        raise IdxError(f"{url}: {len(offsets)} offsets for {num_samples} samples in the manifest")
    return offsets, end


def sample_range(offsets: list[int], end_offset: int, index: int) -> tuple[int, int]:
    """Byte range ``[start, stop)`` of sample ``index``: one ranged read fetches the whole sample."""
    if not 0 <= index < len(offsets):
        raise IndexError(f"sample {index} out of range (shard has {len(offsets)} samples)")
    stop = offsets[index + 1] if index + 1 < len(offsets) else end_offset
    return offsets[index], stop


def read_sample(
    url: str,
    offsets: list[int],
    end_offset: int,
    index: int,
    storage_options: storage.StorageOptions | None = None,
    *,
    retry: RetryPolicy | None = None,
) -> list[tuple[str, dict[str, bytes]]]:
    """``(key, members)`` of what the byte range of sample ``index`` holds (one sample in a sound shard)."""
    start, stop = sample_range(offsets, end_offset, index)
    data = storage.read_bytes(url, storage_options, start, stop, retry=retry)
    found = iter_samples(io.BytesIO(data), start_offset=0, end_offset=len(data), source=url)
    return [(key, members) for key, _, members in found]
