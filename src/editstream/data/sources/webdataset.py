"""The WebDataset backend: rows streamed from converted tar shards, locally or from S3.

The manifest's layout (:mod:`.shard_layouts`) lists the units (with ``rowgroup``, the parquet backend's,
bit for bit); remote shards are read ahead in retried ranged blocks along the unit order
(:class:`~editstream.io.readahead.ReadAhead`), and a resume seeks to the sample's ``.tar.idx`` offset.
A local shard of format 2 is sliced through its member table (:func:`~editstream.format.mapped_tar.table_samples`):
its members reach ``parse_row`` as read-only memoryviews, and it is hashed on every read only with ``verify_reads``.
"""

from __future__ import annotations

import itertools
import logging
from collections.abc import Generator, Iterable, Iterator, Mapping, Sequence
from typing import Any

from ...format.columns import ColumnTypeError, column_type_problems
from ...format.idx import read_idx
from ...format.keys import make_key
from ...format.manifest import Manifest, ManifestError
from ...format.mapped_tar import mapped_samples, table_samples
from ...format.member_table import MemberTable
from ...format.rowcodec import decode_sample
from ...format.tarblock import BLOCK, DEFAULT_MAX_MEMBER_SIZE, MemberTooLargeError
from ...format.tarreader import iter_samples
from ...io import storage
from ...io.readahead import SourceReads
from ...io.retry import RetryPolicy
from ...io.storage import StorageOptions
from ...kinds import DatasetKind, UnknownKindError, get_kind
from ..drops import DropLog
from ..rows import BadSample, Row
from ..units import Position, Unit, check_file_order, counted
from .read_options import MEMBER_BYTES_ENV, VERIFY_READS_ENV, env_flag
from .shard_layouts import LAYOUTS, PositionOf, RowGroupShards, ShardMismatchError, ShardRef, SizeShards

logger = logging.getLogger("editstream")

DEFAULT_BLOCK_SIZE = 4 << 20


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
        file_order: str = "listing",
        verify_reads: bool | None = None,
        member_bytes: bool | None = None,
    ) -> None:
        if granularity not in ("row_group", "file"):
            raise ValueError(f"granularity must be 'row_group' or 'file', got {granularity!r}")
        self.dataset_name = dataset_name
        self.granularity = granularity
        self.file_order = check_file_order(file_order, f"dataset {dataset_name!r}")
        self.storage_options = storage_options
        self.drops = drops if drops is not None else DropLog(dataset_name)
        self.max_member_size = max_member_size
        self.column_types = dict(column_types or {})
        self.verify_reads = env_flag(verify_reads, VERIFY_READS_ENV)
        self.member_bytes = env_flag(member_bytes, MEMBER_BYTES_ENV)
        self._layout: RowGroupShards | SizeShards | None = None
        self.known_manifests: dict[str, Manifest] = {}
        """Manifests of roots already read by whoever opened the data (``iter_rows``), used instead of a read."""
        self.reads = SourceReads(
            dataset_name,
            storage_options=storage_options,
            retry=retry or RetryPolicy(),
            block_size=block_size,
            prefetch=prefetch,
            readahead_bytes=readahead_bytes,
        )

    def list_units(self, data_dir_list: Sequence[str], num_used_data: Sequence[int]) -> list[Unit]:
        units: list[Unit] = []
        for root, num_used in counted(self.dataset_name, data_dir_list, num_used_data):
            manifest = self._read_manifest(root)
            if self._layout is None:
                self._layout = LAYOUTS[manifest.layout](self.dataset_name, self.granularity, self.file_order)
            elif manifest.layout != self._layout.name:
                raise ValueError(
                    f"dataset {self.dataset_name!r}: {root} has layout {manifest.layout!r} but "
                    f"earlier roots have {self._layout.name!r}; convert all with the same --layout"
                )
            units.extend(self._layout.list_units(root, manifest, num_used))
        return units

    @property
    def shard_layout(self) -> RowGroupShards | SizeShards:
        if self._layout is None:
            raise RuntimeError(f"dataset {self.dataset_name!r}: the converted roots were not listed yet")
        return self._layout

    def _read_manifest(self, root: str) -> Manifest:
        try:
            manifest = self.known_manifests.pop(root, None) or Manifest.read(root, self.storage_options)
        except ManifestError as exc:
            raise ManifestError(f"dataset {self.dataset_name!r}: {exc}") from None
        try:
            kind: DatasetKind | None = get_kind(manifest.schema)
        except UnknownKindError:
            kind = None
        if kind is not None and not kind.source.takes_columns:
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

    def plan_units(self, units: Iterable[Unit]) -> None:
        """The units this stream will read, in order (may be endless): remote shards of them are read ahead."""
        layout = self.shard_layout
        if not all(storage.is_local(s.url) for s in layout.shards.values()):
            self.reads.plan((s.url, 0, s.num_bytes) for unit in units for s in layout.shards_of(unit))

    def iter_unit_rows(self, unit: Unit, after: Position | None) -> Iterator[tuple[Position, Any]]:
        for shard, index, position_of in self.shard_layout.reads(unit, after):
            yield from self._read_shard(shard, index, position_of)

    def _read_shard(self, shard: ShardRef, index: int, position_of: PositionOf) -> Iterator[tuple[Position, Any]]:
        """Rows of one shard from sample ``index`` on, through its member table or else the tar itself."""
        if index >= shard.num_samples:
            return
        samples = self._tabled(shard, index) or self._untabled(shard, index)
        count = index
        for key, _, members in samples:
            position = position_of(count, key)
            count += 1
            try:
                row: Any = Row(decode_sample(key, members))
            except Exception as exc:  # noqa: BLE001 - a damaged sample is a dropped row
                row = BadSample(exc, {"shard": shard.url, "key": key})
            yield position, row
        if count != shard.num_samples:
            raise ShardMismatchError(f"{shard.url}: ended after {count} samples, the manifest says {shard.num_samples}")

    def _tabled(self, shard: ShardRef, index: int) -> Iterator[tuple[str, int, Mapping[str, Any]]] | None:
        """The samples of a local format-2 shard from ``index``, sliced through its member table; ``None`` (after
        a warning saying why) when the table or the shard is not what the manifest describes."""
        if not shard.tabled or not storage.is_local(shard.url):
            return None
        try:
            table = MemberTable.decode(storage.read_bytes(shard.idx_url, self.storage_options), shard.idx_url)
        except (OSError, ValueError) as exc:
            logger.warning("%s: %s; reading the shard with the tar reader", shard.url, exc)
            return None
        if table.num_samples != shard.num_samples or table.keys[index] != self._expected_key(shard, index):
            logger.warning("%s: its member table is not the manifest's; reading it with the tar reader", shard.url)
            return None
        too_large = next((j for j, size in enumerate(table.sizes) if size > self.max_member_size), None)
        if too_large is not None:
            name = f"{table.keys[table.sample_of(too_large)]}.{table.suffixes[too_large]}"
            raise MemberTooLargeError(
                f"{shard.url}: member {name!r} at offset {table.data_offsets[too_large] - BLOCK} has "
                f"{table.sizes[too_large]} bytes, above the cap of {self.max_member_size}"
            )
        if index:
            logger.debug("resume: reading %s from byte %d (sample %d)", shard.url, table.sample_offsets[index], index)
        digest = shard.info.digest if self.verify_reads else None
        found = table_samples(
            storage.local_path(shard.url), table, index, shard.num_bytes, digest=digest, as_bytes=self.member_bytes
        )
        if found is None:
            what = "its size, headers or digest" if self.verify_reads else "its size or headers"
            logger.warning("%s: %s differ from its member table; reading it with the tar reader", shard.url, what)
        return found

    def _untabled(self, shard: ShardRef, index: int) -> Iterator[tuple[str, int, Mapping[str, Any]]]:
        """The samples of a shard from ``index`` through its tar headers: a resume starts at the idx's offset of
        that sample, or, when the key found there is not the manifest's (a wrong idx), skips to it from the start."""
        start = 0
        if index > 0:
            start = read_idx(shard.idx_url, self.storage_options, shard.num_samples)[0][index]
            logger.debug("resume: reading %s from byte %d (sample %d)", shard.url, start, index)
        samples = self._samples(shard, start)
        head = next(samples, None)
        if start and head is not None and head[0] != (expected := self._expected_key(shard, index)):
            message = (
                "the idx of %s puts sample %d at key %r, the manifest says %r; reading the shard from its start instead"
            )
            logger.warning(message, shard.url, index, head[0], expected)
            samples.close()
            samples = self._samples(shard, 0)
            for _ in range(index):
                next(samples, None)
            head = next(samples, None)
        return itertools.chain((head,) if head is not None else (), samples)

    def _samples(self, shard: ShardRef, start: int) -> Generator[tuple[str, int, dict[str, bytes]], None, None]:
        """``(key, offset, members)`` of the shard's samples from byte ``start``: from a memory map when the local
        shard is as the converter wrote it (:mod:`~editstream.format.mapped_tar`), else streamed."""
        if storage.is_local(shard.url):
            found = mapped_samples(
                storage.local_path(shard.url), start, shard.num_bytes, shard.info.digest, self.max_member_size
            )
            if found is not None:
                return found
        return self._streamed(shard, start)

    def _streamed(self, shard: ShardRef, start: int) -> Generator[tuple[str, int, dict[str, bytes]], None, None]:
        with self.reads.open(shard.url, start, shard.num_bytes) as reader:
            yield from iter_samples(reader, start_offset=start, max_member_size=self.max_member_size, source=shard.url)

    @staticmethod
    def _expected_key(shard: ShardRef, index: int) -> str:
        """The manifest's key for sample ``index`` of the shard."""
        s, row = next(itertools.islice(shard.info.kept_rows(), index, None))
        return make_key(shard.stems[s.file], s.row_group, row)

    def describe(self, unit: Unit, position: Position | None = None) -> dict[str, Any]:
        return self.shard_layout.where(unit, position)
