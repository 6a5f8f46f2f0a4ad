"""The WebDataset backend: rows streamed from converted tar shards, locally or from S3.

With the converter's ``rowgroup`` layout each shard is one source ``(file, row_group)``, so
units are listed from the manifest exactly as the parquet backend lists them (same
``num_used_data`` rule, same sort keys) and the sample stream is the parquet backend's, bit
for bit. Shards of the ``size`` layout are units of their own. Shards are read in blocks by
ranged requests: a :class:`~editstream.io.readahead.ReadAhead` keeps several block requests in
flight along the worker's unit order, across shard boundaries, as many as the observed latency
and bandwidth need within a memory budget (64 MiB per process by default); transient faults are
retried at each block's own offset, and a resume seeks to the sample's offset from the ``.tar.idx``.
"""

from __future__ import annotations

import itertools
import logging
import os
from collections.abc import Generator, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ...format.columns import ColumnTypeError, column_type_problems
from ...format.idx import read_idx
from ...format.keys import make_key, parse_key
from ...format.manifest import Manifest, ManifestError, ShardInfo
from ...format.rowcodec import decode_sample
from ...format.tarblock import DEFAULT_MAX_MEMBER_SIZE
from ...format.tarreader import iter_samples
from ...io import storage
from ...io.ranged import RangedReader, open_local_range
from ...io.readahead import ByteBudget, ReadAhead, process_budget
from ...io.retry import RetryPolicy
from ...io.storage import StorageOptions
from ...kinds import DatasetKind, SourceShape, UnknownKindError, get_kind
from ..drops import DropLog
from ..rows import BadSample, Position, Row
from ..units import Unit, check_counts, path_of, repeat_to, warn_unread

logger = logging.getLogger("editstream")

DEFAULT_BLOCK_SIZE = 4 << 20


def _kind_named(name: str) -> DatasetKind | None:
    try:
        return get_kind(name)
    except UnknownKindError:
        return None


def _files_of(shard: ShardInfo) -> set[str]:
    """The source files (relative names) a shard holds rows of."""
    return {s.file for s in shard.rows}


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

    @property
    def num_bytes(self) -> int:
        return self.info.num_bytes

    @property
    def num_samples(self) -> int:
        return self.info.num_samples


class TarSource:
    """Row source over converted shards; see the module docstring for the guarantees."""

    def __init__(
        self,
        *,
        dataset_name: str,
        granularity: str = "row_group",
        storage_options: StorageOptions | None = None,
        drops: DropLog | None = None,
        retry: RetryPolicy | None = None,
        block_size: int = DEFAULT_BLOCK_SIZE,
        max_member_size: int = DEFAULT_MAX_MEMBER_SIZE,
        prefetch: bool = True,
        column_types: Mapping[str, str] | None = None,
        readahead_bytes: int | None = None,
    ) -> None:
        if granularity not in ("row_group", "file"):
            raise ValueError(f"granularity must be 'row_group' or 'file', got {granularity!r}")
        self.dataset_name = dataset_name
        self.granularity = granularity
        self.storage_options = storage_options
        self.drops = drops if drops is not None else DropLog(dataset_name)
        self.retry = retry or RetryPolicy()
        self.block_size = block_size
        self.max_member_size = max_member_size
        self.prefetch_enabled = prefetch
        self.column_types = dict(column_types or {})
        self.layout: str | None = None
        self._shards: dict[Any, ShardRef] = {}  # (file_id, rg) or shard URL -> shard
        self._file_row_groups: dict[str, int] = {}
        if readahead_bytes is not None and readahead_bytes <= 0:
            raise ValueError(f"readahead_bytes must be > 0, got {readahead_bytes}")
        self.readahead_bytes = readahead_bytes
        """Bytes the read-ahead may hold; ``None``: the process-wide default budget (64 MiB)."""
        self._readahead: ReadAhead | None = None
        self._readahead_pid: int | None = None

    # ---- listing -------------------------------------------------------------------------
    def list_units(self, data_dir_list: Sequence[str], num_used_data: Sequence[int]) -> list[Unit]:
        check_counts(self.dataset_name, data_dir_list, num_used_data)
        units: list[Unit] = []
        for root, num_used in zip(data_dir_list, num_used_data):
            manifest = self._read_manifest(root)
            if self.layout is None:
                self.layout = manifest.layout
            elif manifest.layout != self.layout:
                raise ValueError(
                    f"dataset {self.dataset_name!r}: {root} has layout {manifest.layout!r} but "
                    f"earlier roots have {self.layout!r}; convert all with the same --layout"
                )
            if manifest.layout == "rowgroup":
                units.extend(self._rowgroup_units(root, manifest, int(num_used)))
            else:
                units.extend(self._size_units(root, manifest, int(num_used)))
        return units

    def _read_manifest(self, root: str) -> Manifest:
        try:
            manifest = Manifest.read(root, self.storage_options)
        except ManifestError as exc:
            raise ManifestError(f"dataset {self.dataset_name!r}: {exc}") from None
        kind = _kind_named(manifest.schema)
        if kind is not None and kind.source is SourceShape.JSONL_MEDIA:
            reader = "its own dataset" if kind.dataset is None else kind.dataset.rpartition(":")[2]
            raise ManifestError(
                f"dataset {self.dataset_name!r}: {root} is a {kind.name} conversion (JSONL lines); "
                f"read it with {reader} (group {kind.name})"
            )
        problems = column_type_problems({c["name"]: c["type"] for c in manifest.columns}, self.column_types)
        if problems:
            raise ColumnTypeError(
                f"dataset {self.dataset_name!r}: {root} (converted from {manifest.source_root}): {'; '.join(problems)}"
            )
        return manifest

    def _rowgroup_units(self, root: str, manifest: Manifest, num_used: int) -> list[Unit]:
        """Units named after the source parquet files (``source_root/name``), as the parquet
        backend names them when given the conversion's source directory: same sort, same order."""

        def file_id(relative: str) -> str:
            return storage.join(manifest.source_root, relative)

        stems = {f.path: f.key_stem for f in manifest.source_files}
        for shard in manifest.shards:
            assert shard.source_file is not None  # the manifest validates the rowgroup layout
            self._shards[(file_id(shard.source_file), shard.row_group)] = ShardRef(
                storage.join(root, shard.path), storage.join(root, shard.idx_path), shard, stems
            )
        if not manifest.source_files:
            raise FileNotFoundError(f"dataset {self.dataset_name!r}: {root} lists no source files")
        counts = {file_id(f.path): f.num_row_groups for f in manifest.source_files}
        self._file_row_groups.update(counts)
        warn_unread(self.dataset_name, root, num_used, len(counts))
        chosen = repeat_to(sorted(counts), num_used)
        if self.granularity == "file":
            files: list[Unit] = list(chosen)
            return files
        return [(path, rg) for path in chosen for rg in range(counts[path])]

    def _size_units(self, root: str, manifest: Manifest, num_used: int) -> list[Unit]:
        """Shards as units, chosen by ``num_used`` *source files*, as the parquet backend counts:
        ``num_used = k * F + r`` (``F`` source files) reads every shard ``k`` times, then the shards
        holding rows of the first ``r`` files only (sorted, as parquet lists them). So the default,
        every source file once, reads every shard once, and flipping ``backend:`` keeps the rows.
        A shard that holds rows of a chosen file and of an unchosen one is left out, with a warning."""
        stems = {f.path: f.key_stem for f in manifest.source_files}
        urls: list[str] = []
        shards = sorted(manifest.shards, key=lambda s: s.path)
        for shard in shards:
            url = storage.join(root, shard.path)
            self._shards[url] = ShardRef(url, storage.join(root, shard.idx_path), shard, stems)
            urls.append(url)
        if not urls:
            raise FileNotFoundError(f"dataset {self.dataset_name!r}: {root} holds no shards")
        files = sorted(f.path for f in manifest.source_files)
        warn_unread(self.dataset_name, root, num_used, len(files))
        copies, extra = divmod(num_used, len(files))
        chosen = set(files[:extra])
        partial = [s for s in shards if chosen & _files_of(s) and not _files_of(s) <= chosen]
        if partial:
            rows = sum(s.stop - s.start for shard in partial for s in shard.rows if s.file in chosen)
            logger.warning(
                "dataset %s: num_used_data %d for %s (%d source files, size layout): %d rows of the first %d "
                "source file(s) share shards with later files (%s) and are not read in the last pass; "
                "give a multiple of %d to read whole copies",
                self.dataset_name,
                num_used,
                root,
                len(files),
                rows,
                extra,
                ", ".join(s.path for s in partial),
                len(files),
            )
        tail = [url for url, s in zip(urls, shards) if _files_of(s) <= chosen]
        units: list[Unit] = []
        units.extend(urls * copies)
        units.extend(tail)
        return units

    # ---- reading -------------------------------------------------------------------------
    def readahead(self) -> ReadAhead:
        """This process's read-ahead (created after a DataLoader fork, never inherited)."""
        if self._readahead is None or self._readahead_pid != os.getpid():
            budget = process_budget() if self.readahead_bytes is None else ByteBudget(self.readahead_bytes)
            self._readahead = ReadAhead(
                storage_options=self.storage_options, retry=self.retry, block_size=self.block_size, budget=budget
            )
            self._readahead_pid = os.getpid()
        return self._readahead

    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        state.update(_readahead=None, _readahead_pid=None)
        return state

    def plan_units(self, units: Iterable[Unit]) -> None:
        """The units this stream will read, in order (may be endless): their shards are read ahead
        (from object stores; local shards are read straight from their files, the kernel reads ahead)."""
        if self.prefetch_enabled and not self._all_local():
            self.readahead().plan((s.url, 0, s.num_bytes) for unit in units for s in self._unit_shards(unit))

    def _all_local(self) -> bool:
        return all(storage.is_local(s.url) for s in self._shards.values())

    def _unit_shards(self, unit: Unit) -> list[ShardRef]:
        if self.layout == "size":
            return [self._shards[unit]]
        if self.granularity == "file":
            return [self._shards[(unit, rg)] for rg in range(self._file_row_groups[path_of(unit)])]
        return [self._shards[unit]]

    def iter_unit_rows(self, unit: Unit, after: Position | None) -> Iterator[tuple[Position, Any]]:
        if self.layout == "size":
            yield from self._read_shard(self._shards[unit], after[0] + 1 if after else 0, by_index=True)
            return
        if self.granularity == "file":
            first_rg = after[0] if after else 0
            for rg in range(first_rg, self._file_row_groups[path_of(unit)]):
                first_row = after[1] + 1 if after and rg == first_rg else 0
                for (row,), row_value in self._read_shard(self._shards[(unit, rg)], first_row):
                    yield (rg, row), row_value
            return
        yield from self._read_shard(self._shards[unit], after[0] + 1 if after else 0)

    def _read_shard(self, shard: ShardRef, first: int, by_index: bool = False) -> Iterator[tuple[Position, Any]]:
        """Rows of one shard from row (or, ``by_index``, sample) ``first`` on.

        A resume (``first > 0``) reads the idx and starts at that sample's byte offset: one
        small ranged read, no rescan of the samples before it. The key found there must be the
        manifest's key for that sample; when it is not (a wrong idx), the shard is read from
        its start instead, skipping to the sample, so no row is skipped or repeated.
        """
        index = 0
        start = 0
        if first > 0:
            index = first if by_index else self._samples_before(shard, first)
            if index >= shard.num_samples:
                return
            offsets, _ = read_idx(shard.idx_url, self.storage_options)
            if len(offsets) != shard.num_samples:
                raise ShardMismatchError(
                    f"{shard.idx_url}: {len(offsets)} offsets for {shard.num_samples} samples in the manifest"
                )
            start = offsets[index]
            logger.debug("resume: reading %s from byte %d (sample %d)", shard.url, start, index)
        samples = self._samples(shard, start)
        head = next(samples, None)
        if start and head is not None and head[0] != self._expected_key(shard, index):
            logger.warning(
                "the idx of %s puts sample %d at key %r, the manifest says %r; reading the shard from "
                "its start instead",
                shard.url,
                index,
                head[0],
                self._expected_key(shard, index),
            )
            samples.close()
            samples = self._samples(shard, 0)
            for _ in range(index):
                next(samples, None)
            head = next(samples, None)
        count = index
        while head is not None:
            key, members = head
            position: Position = (count,) if by_index else (self._row_of(shard, key),)
            count += 1
            try:
                row: Any = Row(decode_sample(key, members))
            except Exception as exc:  # noqa: BLE001 - a damaged sample is a dropped row
                row = BadSample(exc, {"shard": shard.url, "key": key})
            yield position, row
            head = next(samples, None)
        if count != shard.num_samples:
            raise ShardMismatchError(f"{shard.url}: ended after {count} samples, the manifest says {shard.num_samples}")

    def _samples(self, shard: ShardRef, start: int) -> Generator[tuple[str, dict[str, bytes]], None, None]:
        """``(key, members)`` of the shard's samples from byte ``start``: a local shard straight from
        its file (each member's data one read into its own bytes, no copy in between), a remote
        one in ranged blocks through the read-ahead."""
        reader: Any
        if storage.is_local(shard.url):
            reader = open_local_range(storage.local_path(shard.url), start, shard.num_bytes)
        elif self.prefetch_enabled:
            reader = self.readahead().open(shard.url, start, shard.num_bytes)
        else:
            reader = RangedReader(
                shard.url,
                storage_options=self.storage_options,
                start=start,
                end=shard.num_bytes,
                block_size=self.block_size,
                retry=self.retry,
            )
        with reader:
            for key, _, members in iter_samples(
                reader, start_offset=start, max_member_size=self.max_member_size, source=shard.url
            ):
                yield key, members

    @staticmethod
    def _expected_key(shard: ShardRef, index: int) -> str:
        """The manifest's key for sample ``index`` of the shard."""
        s, row = next(itertools.islice(shard.info.kept_rows(), index, None))
        return make_key(shard.stems[s.file], s.row_group, row)

    @staticmethod
    def _samples_before(shard: ShardRef, row: int) -> int:
        info = shard.info
        assert info.source_file is not None and info.row_group is not None
        index = info.samples_before(info.source_file, info.row_group, row)
        return info.num_samples if index is None else index

    def _row_of(self, shard: ShardRef, key: str) -> int:
        position = parse_key(key)
        if position is None or position.row_group != shard.info.row_group:
            raise ShardMismatchError(f"{shard.url}: sample key {key!r} is not from row group {shard.info.row_group}")
        return position.row

    def describe(self, unit: Unit, position: Position | None = None) -> dict[str, Any]:
        if self.layout == "size":
            where: dict[str, Any] = {"shard": unit}
            if position is not None:
                where["sample"] = position[0]
            return where
        if self.granularity == "file":
            where = {"file": unit}
            if position is not None:
                where.update(row_group=position[0], row=position[1], shard=self._shards[(unit, position[0])].url)
            return where
        where = {"file": unit[0], "row_group": unit[1], "shard": self._shards[unit].url}
        if position is not None:
            where["row"] = position[0]
        return where
