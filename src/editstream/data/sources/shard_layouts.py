"""The two layouts of a converted root as the WebDataset backend reads them: ``rowgroup`` (one shard per
source row group, so units and stream are the parquet backend's, bit for bit) and ``size`` (shards as units)."""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from ...format.keys import parse_key
from ...format.manifest import Manifest, ShardInfo
from ...io import storage
from ..units import FileUnit, Position, RowGroupUnit, ShardUnit, Unit, as_unit, repeat_to, warn_unread

logger = logging.getLogger("editstream")

PositionOf = Callable[[int, str], Position]
"""``(sample index in its shard, sample key)`` -> the row's position in its unit."""


class ShardMismatchError(Exception):
    """A shard does not match its manifest entry (keys, sample count, end offset)."""


@dataclass(frozen=True)
class ShardRef:
    """Where one unit's rows live: the shard's URL, its idx URL and its manifest entry."""

    url: str
    idx_url: str
    info: ShardInfo
    stems: Mapping[str, str]
    """Key stem of each source file (relative name) the shard holds rows of."""
    tabled: bool = False
    """Its idx is a member table (manifest version 3 on: shard format 2)."""

    @property
    def num_bytes(self) -> int:
        return self.info.num_bytes

    @property
    def num_samples(self) -> int:
        return self.info.num_samples


ShardRead = tuple[ShardRef, int, PositionOf]
"""One shard of a unit to read: the shard, the sample index to start at, how samples map to positions."""


LISTING_ORDER = "listing_order"
"""The manifest's ``extra`` record of the source directory's file order (relative names) at conversion,
when it was not the sorted order: a ``file_order="listing"`` dataset takes files in it, as on the source."""


def source_order(manifest: Manifest, file_order: str) -> list[str]:
    """The converted root's source files (relative names) in the order a dataset with ``file_order`` takes them."""
    names = sorted(f.path for f in manifest.source_files)
    listed = manifest.extra.get(LISTING_ORDER)
    if file_order == "listing" and isinstance(listed, list) and sorted(listed) == names:
        return [str(n) for n in listed]
    return names


def _refs(root: str, manifest: Manifest) -> Iterator[ShardRef]:
    stems = {f.path: f.key_stem for f in manifest.source_files}
    for shard in manifest.shards:
        idx_url = storage.join(root, shard.idx_path)
        yield ShardRef(storage.join(root, shard.path), idx_url, shard, stems, manifest.member_tables)


class RowGroupShards:
    """A ``rowgroup``-layout listing: one shard per source row group; units are row groups or files."""

    name = "rowgroup"

    def __init__(self, dataset_name: str, granularity: str, file_order: str = "listing") -> None:
        self.dataset_name = dataset_name
        self.granularity = granularity
        self.file_order = file_order
        self.shards: dict[tuple[str, int], ShardRef] = {}
        self.row_groups: dict[str, int] = {}

    def list_units(self, root: str, manifest: Manifest, num_used: int) -> list[Unit]:
        """Units named after the source files (``source_root/name``), in the parquet backend's order."""

        def file_id(relative: str) -> str:
            return storage.join(manifest.source_root, relative)

        for ref in _refs(root, manifest):
            assert ref.info.source_file is not None and ref.info.row_group is not None  # the manifest checks it
            self.shards[(file_id(ref.info.source_file), ref.info.row_group)] = ref
        if not manifest.source_files:
            raise FileNotFoundError(f"dataset {self.dataset_name!r}: {root} lists no source files")
        counts = {file_id(f.path): f.num_row_groups for f in manifest.source_files}
        self.row_groups.update(counts)
        files = [file_id(name) for name in source_order(manifest, self.file_order)]
        chosen = repeat_to(files, num_used, self.dataset_name, root)
        if self.granularity == "file":
            return [FileUnit(path) for path in chosen]
        return [RowGroupUnit(path, rg) for path in chosen for rg in range(counts[path])]

    def shards_of(self, unit: Unit) -> list[ShardRef]:
        """The shards holding the unit's rows, in row order."""
        typed = as_unit(unit)
        return [self.shards[(typed.path, rg)] for rg, _ in typed.row_group_reads(None, self.row_groups[typed.path])]

    def reads(self, unit: Unit, after: Position | None) -> Iterator[ShardRead]:
        """The shards to read to resume the unit after ``after``, each from its first row wanted."""
        typed = as_unit(unit)
        count = self.row_groups[typed.path]
        for rg, first_row in typed.row_group_reads(after, count, lambda g: _source_rows(self.shards[(typed.path, g)])):
            shard = self.shards[(typed.path, rg)]
            start = _samples_before(shard, first_row) if first_row > 0 else 0

            def position_of(index: int, key: str, shard: ShardRef = shard, rg: int = rg) -> Position:
                return typed.position(rg, _row_of(shard, key))

            yield shard, start, position_of

    def where(self, unit: Unit, position: Position | None) -> dict[str, Any]:
        """Where a unit (and a row of it) is: the source file and row group, and the shard."""
        typed = as_unit(unit)
        found: dict[str, Any] = typed.where_in_shards(position, lambda rg: self.shards[(typed.path, rg)].url)
        return found


class SizeShards:
    """A ``size``-layout listing: every shard a unit, chosen by ``num_used`` source files as the parquet
    backend counts them (``num_used = k * F + r`` reads every shard ``k`` times, then the shards holding
    rows of the first ``r`` files only), so the default reads every shard once."""

    name = "size"

    def __init__(self, dataset_name: str, granularity: str, file_order: str = "listing") -> None:
        self.dataset_name = dataset_name
        self.file_order = file_order
        self.shards: dict[str, ShardRef] = {}

    def list_units(self, root: str, manifest: Manifest, num_used: int) -> list[Unit]:
        """The shards of ``root`` as units (a shard shared by a chosen and an unchosen file is left out, logged)."""
        refs = sorted(_refs(root, manifest), key=lambda r: r.info.path)
        for ref in refs:
            self.shards[ref.url] = ref
        if not refs:
            raise FileNotFoundError(f"dataset {self.dataset_name!r}: {root} holds no shards")
        files = source_order(manifest, self.file_order)
        warn_unread(self.dataset_name, root, num_used, len(files))
        copies, extra = divmod(num_used, len(files))
        chosen = set(files[:extra])
        partial = [r for r in refs if chosen & _files_of(r.info) and not _files_of(r.info) <= chosen]
        if partial:
            self._warn_partial(root, num_used, len(files), extra, chosen, partial)
        units: list[Unit] = [ShardUnit(r.url) for _ in range(copies) for r in refs]
        units.extend(ShardUnit(r.url) for r in refs if _files_of(r.info) <= chosen)
        return units

    def _warn_partial(
        self, root: str, num_used: int, num_files: int, extra: int, chosen: set[str], partial: list[ShardRef]
    ) -> None:
        rows = sum(s.stop - s.start for ref in partial for s in ref.info.rows if s.file in chosen)
        logger.warning(
            "dataset %s: num_used_data %d for %s (%d source files, size layout): %d rows of the first %d "
            "source file(s) share shards with later files (%s) and are not read in the last pass; "
            "give a multiple of %d to read whole copies",
            self.dataset_name,
            num_used,
            root,
            num_files,
            rows,
            extra,
            ", ".join(r.info.path for r in partial),
            num_files,
        )

    def shards_of(self, unit: Unit) -> list[ShardRef]:
        return [self.shards[str(unit)]]

    def reads(self, unit: Unit, after: Position | None) -> Iterator[ShardRead]:
        shard = self.shards[str(unit)]
        yield shard, as_unit(unit, ShardUnit).first_sample(after, shard.num_samples), lambda index, key: (index,)

    def where(self, unit: Unit, position: Position | None) -> dict[str, Any]:
        found: dict[str, Any] = as_unit(unit, ShardUnit).where(position)
        return found


LAYOUTS: dict[str, type[RowGroupShards] | type[SizeShards]] = {"rowgroup": RowGroupShards, "size": SizeShards}


def _files_of(shard: ShardInfo) -> set[str]:
    """The source files (relative names) a shard holds rows of."""
    return {s.file for s in shard.rows}


def _samples_before(shard: ShardRef, row: int) -> int:
    """Samples of the shard before source row ``row`` of its row group (all of them past its end)."""
    info = shard.info
    assert info.source_file is not None and info.row_group is not None
    index = info.samples_before(info.source_file, info.row_group, row)
    return info.num_samples if index is None else index


def _source_rows(shard: ShardRef) -> int:
    """The source rows of a ``rowgroup``-layout shard's row group (its dropped bad rows included)."""
    return max((s.stop for s in shard.info.rows), default=0)


def _row_of(shard: ShardRef, key: str) -> int:
    """The source row a sample key names (it must be of the shard's row group)."""
    head, _, row = key.rpartition("-r")  # the usual key, ``{stem}-rg{row_group:05d}-r{row:07d}``, without a regex
    tail = f"-rg{shard.info.row_group:05d}"
    if len(row) >= 7 and row.isdecimal() and head.endswith(tail) and len(head) > len(tail):
        return int(row)
    position = parse_key(key)
    if position is None or position.row_group != shard.info.row_group:
        raise ShardMismatchError(f"{shard.url}: sample key {key!r} is not from row group {shard.info.row_group}")
    return position.row
