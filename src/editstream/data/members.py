"""The samples of a converted root as their tar members (``inspect``): in shard order, or one by its key; a
key names its source row, so the manifest and ``.tar.idx`` locate it in one ranged read (else a scan)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from ..format import manifest as mf
from ..format.idx import read_idx, read_sample
from ..format.keys import make_key, parse_key
from ..format.tarreader import iter_samples
from ..io import storage
from ..io.ranged import open_read
from .layouts import ConvertedRoot, LayoutError, recognise


def open_converted(root: str, storage_options: dict[str, Any] | None = None) -> ConvertedRoot:
    """The converted root at ``root``; a :class:`LayoutError` saying what ``root`` holds otherwise."""
    layout = recognise(root, storage_options)
    if not isinstance(layout, ConvertedRoot):
        raise LayoutError(f"{root} holds {layout.holds}, not a converted root (no manifest.json)", found=None)
    return layout


def iter_members(root: ConvertedRoot, limit: int | None = None) -> Iterator[tuple[str, dict[str, bytes]]]:
    """``(key, members)`` of the root's samples in shard order, the first ``limit`` (all when ``None``)."""
    seen = 0
    for shard in root.manifest.shards:
        url = storage.join(root.url, shard.path)
        with open_read(url, root.storage_options) as f:
            for key, _, members in iter_samples(f, source=url):
                if limit is not None and seen >= limit:
                    return
                seen += 1
                yield key, members


def list_keys(root: str, *, storage_options: dict[str, Any] | None = None) -> Iterator[tuple[str, str]]:
    """``(key, shard path)`` of every sample in shard order, from the manifest alone: every key
    names its source row (a JSONL line is row ``i`` of the file's one row group), so no shard is read."""
    m = mf.Manifest.read(root, storage_options)
    stems = {f.path: f.key_stem for f in m.source_files}
    for shard in m.shards:
        for s, row in shard.kept_rows():
            yield make_key(stems[s.file], s.row_group, row), shard.path


def _locate(m: mf.Manifest, key: str) -> tuple[mf.ShardInfo, int] | None:
    """``(shard, sample index)`` of ``key`` from the manifest alone, when the key names its row."""
    position = parse_key(key)
    if position is None:
        return None
    files = [f.path for f in m.source_files if f.key_stem == position.stem]
    if not files:
        return None
    for shard in m.shards:
        index = shard.sample_index(files[0], position.row_group, position.row)
        if index is not None:
            return shard, index
    return None


def find_members(root: str, key: str, *, storage_options: dict[str, Any] | None = None) -> dict[str, bytes]:
    """The members (``{suffix: bytes}``) of the sample ``key``; ``KeyError`` when no shard holds it."""
    layout = ConvertedRoot(root, storage_options)
    located = _locate(layout.manifest, key)
    if located is not None:
        shard, index = located
        offsets, end = read_idx(storage.join(root, shard.idx_path), storage_options)
        for got, members in read_sample(storage.join(root, shard.path), offsets, end, index, storage_options):
            if got == key:
                return members
    for got, members in iter_members(layout):  # keys not derived from their row: scan
        if got == key:
            return members
    raise KeyError(f"no sample with key {key!r} in {root}")
