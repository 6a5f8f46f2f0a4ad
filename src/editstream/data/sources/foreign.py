"""Foreign shards: WebDataset tars editstream did not write (img2dataset, webdataset's ShardWriter).

Entries are brace patterns, globs, ``.tar`` URLs or lists; units are shards. A ``columns`` mapping (column ->
member candidates; ``json:caption`` is a field of the ``json`` member) makes a row of a sample; a kind whose
columns have conventional member names (:data:`DEFAULT_MEMBERS`) needs none.
"""

from __future__ import annotations

import glob
import json
import tarfile
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Any

from braceexpand import braceexpand

from ...format.detect import names_pattern
from ...format.idx import idx_path_for, read_idx
from ...format.tarblock import DEFAULT_MAX_MEMBER_SIZE
from ...format.tarreader import iter_samples, split_name
from ...io import storage
from ...io.ranged import open_read
from ...io.readahead import SourceReads
from ...io.retry import RetryPolicy
from ...io.storage import StorageOptions
from ...kinds import DatasetKind, all_kinds, get_kind
from ..drops import DropLog
from ..rows import BadSample, Row
from ..units import Position, ShardUnit, Unit, as_unit, counted, repeat_to

DEFAULT_MEMBERS: dict[str, list[str]] = {
    "image": ["jpg", "jpeg", "png", "webp"],
    "captions": ["json:caption", "txt"],
}
"""Members feeding a column by default, by column name: img2dataset's and ShardWriter's names."""


def default_columns(columns: Mapping[str, str]) -> dict[str, list[str]] | None:
    """The default mapping of a kind's columns to members, when every column has conventional names."""
    if not columns or not set(columns) <= set(DEFAULT_MEMBERS):
        return None
    return {column: list(DEFAULT_MEMBERS[column]) for column in columns}


def foreign_kind() -> DatasetKind:
    """The kind foreign shards are read as by default: the first kind the foreign source has a member map for."""
    return next(k for k in all_kinds() if default_columns(k.columns) is not None)


def is_foreign_entry(entry: Any, storage_options: StorageOptions | None = None) -> bool:
    """Whether a ``data_dir_list`` entry names shards rather than a directory: a list, a ``.tar``, or
    a pattern (a name that looks like one and exists nowhere: a root called ``q?dst`` is a root)."""
    if isinstance(entry, (list, tuple)):
        return True
    return isinstance(entry, str) and (entry.endswith(".tar") or names_pattern(entry, storage_options))


def _matches(url: str, storage_options: StorageOptions | None) -> list[str]:
    """The shards one brace-expanded ``url`` names: itself, unless it is a glob that matches otherwise."""
    if not any(c in url.rsplit("/", 1)[-1] for c in "*?[") or storage.exists(url, storage_options):
        return [url]
    if storage.is_local(url) and "://" not in url:
        return glob.glob(url)
    fs, path = storage.url_to_fs(url, storage_options)
    protocol = url.split("://", 1)[0]
    return [f"{protocol}://{p}" for p in fs.glob(path)]


def expand_shards(entry: Any, storage_options: StorageOptions | None = None) -> list[str]:
    """The sorted shard URLs of an entry: brace patterns expanded, globs matched, lists flattened; a name that
    exists as it is stays literal (a shard called ``a{1,2}.tar`` is that shard)."""
    if isinstance(entry, (list, tuple)):
        return sorted({url for item in entry for url in expand_shards(item, storage_options)})
    if storage.exists(entry, storage_options):
        return [entry]
    urls: set[str] = set()
    for url in braceexpand(entry):
        urls.update(_matches(url, storage_options))
    if not urls:
        raise FileNotFoundError(f"no shards match {entry}")
    return sorted(urls)


def scan_offsets(url: str, storage_options: StorageOptions | None = None) -> list[int]:
    """Each sample's first header offset, from the tar headers alone (the payloads are seeked over)."""
    offsets: list[int] = []
    last: str | None = None
    with open_read(url, storage_options) as f, tarfile.open(fileobj=f, mode="r:") as tar:
        for info in tar:
            parts = split_name(info.name) if info.isfile() else None
            if parts is not None and parts[0] != last:
                last = parts[0]
                offsets.append(info.offset)
    return offsets


class ForeignTarSource:
    """Row source over foreign shards; see the module docstring."""

    def __init__(
        self,
        *,
        dataset_name: str,
        granularity: str = "row_group",
        storage_options: StorageOptions | None = None,
        drops: DropLog | None = None,
        column_types: Mapping[str, str] | None = None,
        schema: str | None = None,
        columns: Mapping[str, Sequence[str] | str] | None = None,
        retry: RetryPolicy | None = None,
        block_size: int = 4 << 20,
        max_member_size: int = DEFAULT_MAX_MEMBER_SIZE,
        prefetch: bool = True,
        readahead_bytes: int | None = None,
    ) -> None:
        self.dataset_name = dataset_name
        self.storage_options = storage_options
        self.drops = drops if drops is not None else DropLog(dataset_name)
        self.column_types = dict(column_types or {})
        self.retry = retry or RetryPolicy()
        self.max_member_size = max_member_size
        self.reads = SourceReads(
            dataset_name,
            storage_options=storage_options,
            retry=self.retry,
            block_size=block_size,
            prefetch=prefetch,
            readahead_bytes=readahead_bytes,
        )
        self._sizes: dict[str, int] = {}
        self._remote = False
        kind_columns = {} if schema is None else dict(get_kind(schema).columns)
        chosen = columns if columns is not None else default_columns(kind_columns)
        if chosen is None:
            raise ValueError(
                f"dataset {dataset_name!r}: foreign shards need a columns mapping for schema {schema!r} "
                f"(column -> member names, e.g. {{'image': ['jpg'], 'captions': ['txt']}})"
            )
        self.columns = {c: [m] if isinstance(m, str) else list(m) for c, m in chosen.items()}
        self.types = {"captions": "string", **kind_columns, **self.column_types}
        missing = sorted(set(self.column_types) - set(self.columns))
        if missing:
            raise ValueError(f"dataset {dataset_name!r}: the columns mapping gives no members for {missing}")

    def list_units(self, data_dir_list: Sequence[Any], num_used_data: Sequence[int]) -> list[Unit]:
        units: list[Unit] = []
        for entry, num_used in counted(self.dataset_name, data_dir_list, num_used_data):
            try:
                shards = expand_shards(entry, self.storage_options)
            except FileNotFoundError as exc:
                raise FileNotFoundError(f"dataset {self.dataset_name!r}: {exc}") from None
            self._remote = self._remote or not all(storage.is_local(url) for url in shards)
            units.extend(ShardUnit(url) for url in repeat_to(shards, num_used, self.dataset_name, str(entry), "shards"))
        return units

    def _start_offset(self, url: str, first: int) -> int | None:
        """Byte offset of sample ``first`` (the idx when there is one, else a header walk); ``None`` past the end."""
        try:
            offsets, _ = read_idx(idx_path_for(url), self.storage_options)
        except FileNotFoundError:
            offsets = scan_offsets(url, self.storage_options)
        return offsets[first] if first < len(offsets) else None

    def iter_unit_rows(self, unit: Unit, after: Position | None) -> Iterator[tuple[Position, Any]]:
        """The samples of a shard after sample ``after[0]`` (from its start when ``None``)."""
        url = str(unit)
        index = after[0] + 1 if after else 0
        start = self._start_offset(url, index) if index else 0
        if start is None:
            return
        with self.reads.open(url, start, self._size(url)) as reader:
            for key, _, members in iter_samples(
                reader, start_offset=start, max_member_size=self.max_member_size, source=url
            ):
                yield (index,), self._row(url, key, members)
                index += 1

    def _row(self, url: str, key: str, members: dict[str, bytes]) -> Row | BadSample:
        row: dict[str, Any] = {"__key__": key}
        for column, candidates in self.columns.items():
            value = _first_value(members, candidates, self.types.get(column, "binary"))
            if value is None:
                wanted = ", ".join(candidates)
                problem = f"sample has no {wanted} member for column {column!r} (members: {sorted(members)})"
                return BadSample(ValueError(problem), {"shard": url, "key": key})
            if column == "captions" and not _is_json_object_member(candidates, members):
                value = json.dumps({"caption": value}, ensure_ascii=False)
            row[column] = value
        return Row(row)

    def _size(self, url: str) -> int:
        """The shard's size in bytes (asked once per process)."""
        if url not in self._sizes:
            self._sizes[url] = self.retry.call(lambda: storage.size(url, self.storage_options), f"size of {url}")
        return self._sizes[url]

    def plan_units(self, units: Iterable[Unit]) -> None:
        """Read the shards of ``units`` ahead in this order when any listed shard is on an object store."""
        if self._remote:
            self.reads.plan((url, 0, self._size(url)) for url in map(str, units))

    def describe(self, unit: Unit, position: Position | None = None) -> dict[str, Any]:
        """Where a shard (and a sample in it) is."""
        return as_unit(unit, ShardUnit).where(position)


def _first_value(members: Mapping[str, bytes], candidates: Sequence[str], column_type: str) -> Any:
    """The value of the first candidate the sample has: a member's bytes or text, or a JSON field."""
    for candidate in candidates:
        name, _, json_field = candidate.partition(":")
        data = members.get(name)
        if data is None:
            continue
        if not json_field:
            return bytes(data) if column_type == "binary" else data.decode("utf-8", "replace").strip()
        try:
            value = json.loads(data).get(json_field)
        except (ValueError, AttributeError):
            continue
        if value is not None:
            return value
    return None


def _is_json_object_member(candidates: Sequence[str], members: Mapping[str, bytes]) -> bool:
    """Whether the chosen caption member is a whole JSON member (already a caption object), not text."""
    for candidate in candidates:
        name, _, json_field = candidate.partition(":")
        if name in members:
            return name.endswith("json") and not json_field
    return False
