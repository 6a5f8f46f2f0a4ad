"""Training on a public dataset in place: its published files read through an adapter, not converted.

Units are the row groups ``convert --from`` would write, their chains built by the same :class:`ChainBuilder`,
so the stream, its drops and ``data_status`` match the converted data. A plan that needs a pass is kept
as a small JSON index beside the data (else in ``$EDITSTREAM_CACHE``), keyed by the files and the mapping.
:func:`peek` (what ``preview --from`` shows) reads the first chains in place the same way, writing nothing;
a row the adapter would drop is yielded as its ``BadValue``.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
from collections.abc import Generator, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

import pyarrow as pa
import pyarrow.parquet as pq

from ...format.columns import ColumnTypeError, column_type_problems
from ...io import storage
from ...io.parquet import open_parquet
from ...io.storage import StorageOptions
from ...kinds import DatasetKind, get_kind
from ..identity import file_identity, fingerprint
from ..layouts import KindMismatch, Layout, LayoutEntry, SourceRequest
from ..rows import BadSample, Row
from ..units import (
    FileUnit,
    Position,
    PositionError,
    RowGroupUnit,
    Unit,
    as_unit,
    check_file_order,
    counted,
    repeat_to,
)
from .chains import BadValue, ChainBuilder, MediaDir, output_schema, to_table
from .mapping import AdapterMapping, MappingError, builtin_path, load_mapping, resolve_mapping
from .plan import (
    DEFAULT_CHAINS_PER_FILE,
    DEFAULT_ROWS_PER_GROUP,
    Mounts,
    OutputTask,
    Plan,
    SourceFile,
    check_columns,
    gather,
    open_sources,
    pack,
    passes,
    plan_filtered,
    plan_groups,
    plan_rows,
    source_rows,
    unpack,
)
from .sources import close_mounts
from .where import Filter

log = logging.getLogger(__name__)


class StalePlanError(PositionError):
    """A source file that is not the one its units were listed from: positions in it mean other rows."""


@dataclass(frozen=True)
class InPlace(LayoutEntry):
    """A public dataset read through ``mapping``, with ``convert --from``'s ``where`` / ``media_dir`` / ``split``."""

    data_dir: str
    mapping: AdapterMapping
    where: str | None = None
    media_dir: str | None = None
    split: str | None = None

    def __str__(self) -> str:
        return f"{self.data_dir} (via adapter {self.mapping.name})"

    def layout(self, storage_options: StorageOptions | None) -> Layout:
        return InPlaceLayout(self, storage_options)

    @property
    def filter(self) -> Filter | None:
        return self.mapping.filter(self.where)

    def open(self, storage_options: StorageOptions | None) -> tuple[list[SourceFile], Mounts]:
        """The source files and the media the mapping names, opened in this process."""
        return open_sources(self.data_dir, self.mapping, self.split, storage_options, media_index_dir())

    def plan(self, storage_options: StorageOptions | None) -> Plan:
        """The source files and the output files' chains (the plan pass's index, when one is needed)."""
        files, mounts = self.open(storage_options)
        try:
            check_columns(files, self.mapping, self.filter)
            if not self.mapping.group_by and self.filter is None:
                return plan_rows(files)
            return _indexed(self, files, storage_options)
        finally:
            close_mounts(mounts)  # the units are read by each process through media it opens itself


IN_PLACE_KEYS = ("from", "mapping", "where", "media_dir", "split")
"""The keys of a ``dataset_info`` entry read in place through an adapter: ``from: NAME`` or ``mapping: FILE``
(one of them), and the adaptation's ``where``, ``media_dir`` and ``split``."""


def in_place_entry(meta: Mapping[str, Any], owner: str) -> InPlace | None:
    """The :class:`InPlace` entry of a ``dataset_info`` entry with ``from:`` or ``mapping:``, else ``None``."""
    named = [key for key in ("from", "mapping") if key in meta]
    if not named:
        stray = [key for key in IN_PLACE_KEYS if key in meta]
        if stray:
            raise ValueError(
                f"{owner}: {stray} apply to an entry read through an adapter; add from: NAME or mapping: FILE"
            )
        return None
    if len(named) == 2:
        raise ValueError(f"{owner}: from: {meta['from']!r} and mapping: {meta['mapping']!r} both name the mapping")
    try:
        mapping = load_mapping(builtin_path(str(meta["from"])) if "from" in meta else meta["mapping"])
        entry = InPlace(str(meta["data_dir"]), mapping, meta.get("where"), meta.get("media_dir"), meta.get("split"))
        entry.filter  # noqa: B018 - a filter that does not parse fails here, before any data is read
    except (MappingError, ValueError) as exc:
        raise type(exc)(f"{owner}: {exc}") from None
    return entry


def cache_folder() -> str:
    """The local folder for what training in place keeps when it cannot keep it beside the data."""
    return os.environ.get("EDITSTREAM_CACHE") or os.path.join(os.path.expanduser("~"), ".cache", "editstream")


def media_index_dir() -> str:
    """Where the indexes of media archives read in place are kept (keyed by the archives' identities)."""
    return os.path.join(cache_folder(), "media")


def _index_places(root: str, key: str, so: StorageOptions | None) -> list[tuple[str, StorageOptions | None]]:
    """Where a plan index may be kept: beside the data, else in the (local) cache folder."""
    name = f".editstream-plan-{key[:24]}.json"
    return [(storage.join(root, name), so), (os.path.join(cache_folder(), name), None)]


def _held_in(f: SourceFile) -> tuple[str, ...]:
    """The files on disk a source file is read from (a metadata file in an archive: the archive's parts)."""
    return f.meta.held_in if f.meta is not None and f.meta.held_in else (f.url,)


def _folder(f: SourceFile) -> str:
    """The folder on disk holding a source file (or the archive it is read from)."""
    return _held_in(f)[0].rsplit("/", 1)[0]


def _indexed(entry: InPlace, files: list[SourceFile], so: StorageOptions | None) -> Plan:
    """The plan pass's result, read from its index when one matches the source files and the mapping."""
    where = entry.filter
    key = fingerprint(
        {
            "files": [[f.name, [file_identity(u, so) for u in _held_in(f)]] for f in files],
            "mapping": entry.mapping.fingerprint_data(),
            "where": where.text if where else None,
            "split": entry.split,
            "chains_per_file": DEFAULT_CHAINS_PER_FILE,
        }
    )
    places = _index_places(_folder(files[0]), key, so)
    for url, options in places:
        with contextlib.suppress(OSError, ValueError, KeyError, TypeError):
            data = json.loads(storage.read_bytes(url, options))
            if data.get("key") == key:
                log.info("%s: using the plan index %s", entry, url)
                tasks = [OutputTask(name, chains=tuple(tuple(c) for c in chains)) for name, chains in data["tasks"]]
                return Plan(files, tasks, drops=data["drops"])
    log.info("%s: plan pass over the %d source files", entry, len(files))
    if entry.mapping.group_by:
        plan = plan_groups(files, entry.mapping, where, DEFAULT_CHAINS_PER_FILE, entry.split or "part", so)
    else:
        assert where is not None
        plan = plan_filtered(files, where, so)
    listed = [[t.name, [list(c) for c in t.chains]] for t in plan.tasks]
    payload = json.dumps({"key": key, "tasks": listed, "drops": plan.drops}).encode()
    for url, options in places:
        try:
            storage.write_bytes(url, payload, options)
            log.info("%s: plan index kept at %s", entry, url)
            break
        except OSError as exc:
            log.info("%s: cannot keep the plan index at %s (%s)", entry, url, exc)
    return plan


@dataclass(frozen=True)
class InPlaceLayout(Layout):
    """A public dataset read through an adapter (``url`` is its :class:`InPlace` entry)."""

    title: ClassVar[str] = "a public dataset read through an adapter"
    holds: ClassVar[str] = "a public dataset's parquet, read through an adapter"

    def detect_kind(self) -> DatasetKind:
        return get_kind(self.url.mapping.kind)

    def check_kind(self, kind: DatasetKind) -> DatasetKind:
        if kind.name != self.url.mapping.kind:
            raise KindMismatch(self.url, self.url.mapping.kind, kind.name, f"adapter {self.url.mapping.name}")
        return kind

    def count(self) -> int:
        plan = self.url.plan(self.storage_options)
        return sum(1 for task in plan.tasks if _num_chains(task, plan.files) > 0)

    def source(self, entries: Sequence[Any], request: SourceRequest) -> InPlaceSource:
        return InPlaceSource(request, self.storage_options)


def _num_chains(task: OutputTask, files: Sequence[SourceFile]) -> int:
    return len(task.chains) if task.source is None else files[task.source].num_rows


@dataclass(frozen=True)
class _Listed:
    """What a unit of one output file needs: its entry, the plan, the task, the output schema, its row groups."""

    entry: InPlace
    plan: Plan
    task: OutputTask
    schema: pa.Schema
    groups: int


class InPlaceSource:
    """Row source over :class:`InPlace` entries: units are the output row groups (or files) an adaptation
    would write, rows the chains it builds, typed as the output file holds them."""

    def __init__(self, request: SourceRequest, storage_options: StorageOptions | None) -> None:
        self.name = request.dataset_name
        self.whole_files = request.granularity == "file"
        unknown = sorted(set(request.options) - {"file_order", "retry"})
        if unknown:
            raise TypeError(f"dataset {self.name!r}: unknown keyword argument(s) {unknown} for data read in place")
        order = "sorted" if request.sorted_files else request.options.get("file_order", "listing")
        self.file_order = check_file_order(order, f"dataset {self.name!r}")
        self.drops = request.drops
        self.column_types = dict(request.column_types or {})
        self.storage_options = storage_options
        self.listed: dict[str, _Listed] = {}
        self._pid = os.getpid()
        self._readers: dict[InPlace, tuple[Sequence[SourceFile], ChainBuilder]] = {}

    def __getstate__(self) -> dict[str, Any]:
        return {**self.__dict__, "_readers": {}}  # open media stay with the process that opened them

    def list_units(self, data_dir_list: Sequence[Any], num_used_data: Sequence[int]) -> list[Unit]:
        """Each entry's output files (repeated and cut to its ``num_used_data``), as units."""
        units: list[Unit] = []
        for entry, num_used in counted(self.name, data_dir_list, num_used_data):
            try:
                plan = entry.plan(self.storage_options)
            except (ValueError, OSError) as exc:
                raise type(exc)(f"dataset {self.name!r}: {exc}") from None
            schema = output_schema(entry.mapping, plan.files[0].schema)
            problems = column_type_problems({f.name: f.type for f in schema}, self.column_types)
            if problems:
                raise ColumnTypeError(f"dataset {self.name!r}: {entry}: {'; '.join(problems)}")
            for drop in plan.drops or []:
                where = {k: drop[k] for k in ("file", "row_group", "row", "group") if k in drop}
                self.drops.record(drop["code"], where, drop["reason"])
            sizes: dict[str, int] = {}
            for task in plan.tasks:
                chains = _num_chains(task, plan.files)
                if chains:
                    path = storage.join(_folder(plan.files[0]), task.name)
                    sizes[path] = -(-chains // DEFAULT_ROWS_PER_GROUP)
                    self.listed[path] = _Listed(entry, plan, task, schema, sizes[path])
            chosen = repeat_to(self._ordered(entry, list(sizes)), num_used, self.name, str(entry))
            units += (
                [FileUnit(p) for p in chosen]
                if self.whole_files
                else [RowGroupUnit(p, g) for p in chosen for g in range(sizes[p])]
            )
        return units

    def _ordered(self, entry: InPlace, paths: list[str]) -> list[str]:
        """The output files in the order ``num_used_data`` takes them: the plan's, or an ungrouped mapping's
        (named as the source files) in its folder's listing order."""
        if self.file_order == "sorted" or entry.mapping.group_by or entry.mapping.metadata or not paths:
            return paths
        listing = storage.list_files(paths[0].rsplit("/", 1)[0], ".parquet", self.storage_options, ordered=False)
        rank = {url.rsplit("/", 1)[-1]: i for i, url in enumerate(listing)}
        return sorted(paths, key=lambda p: rank.get(p.rsplit("/", 1)[-1], len(rank)))

    def _chains(self, listed: _Listed, group: int) -> list[tuple[int, ...]]:
        """The planned chains (source locations) of one output row group."""
        start, stop = group * DEFAULT_ROWS_PER_GROUP, (group + 1) * DEFAULT_ROWS_PER_GROUP
        if listed.task.source is None:
            return list(listed.task.chains[start:stop])
        i, base = listed.task.source, 0
        out: list[tuple[int, ...]] = []
        for rg, n in enumerate(listed.plan.files[i].row_groups):
            out += [(pack(i, rg, r - base),) for r in range(max(start, base), min(stop, base + n))]
            base += n
        return out

    def _reader(self, listed: _Listed) -> tuple[Sequence[SourceFile], ChainBuilder]:
        """The source files and chain builder of ``listed``'s entry, opened by this process itself."""
        if self._pid != os.getpid():
            self._pid, self._readers = os.getpid(), {}
        entry = listed.entry
        if entry not in self._readers:
            files: Sequence[SourceFile] = listed.plan.files
            mounts: Mounts = []
            if entry.mapping.metadata or entry.mapping.media:
                files, mounts = entry.open(self.storage_options)
                if [f.row_groups for f in files] != [f.row_groups for f in listed.plan.files]:
                    raise StalePlanError(f"dataset {self.name!r}: {entry} changed since its units were listed")
            index = media_index_dir()
            media = MediaDir(entry.media_dir, self.storage_options, mounts=[m[:2] for m in mounts], index_dir=index)
            self._readers[entry] = (files, ChainBuilder(entry.mapping, media, listed.schema))
        return self._readers[entry]

    def _open(self, files: Sequence[SourceFile], chains: Iterable[tuple[int, ...]], stack: Any) -> dict[int, Any]:
        """The parquet files the chains read, opened; one whose row groups differ from the plan's is refused."""
        opened: dict[int, pq.ParquetFile] = {}
        for i in sorted({unpack(loc)[0] for chain in chains for loc in chain}):
            if files[i].meta is not None:  # metadata is checked when a process opens it (_reader)
                continue
            pf = stack.enter_context(open_parquet(files[i].url, self.storage_options, streaming=True))
            now = tuple(pf.metadata.row_group(g).num_rows for g in range(pf.metadata.num_row_groups))
            if now != files[i].row_groups:
                raise StalePlanError(
                    f"dataset {self.name!r}: {files[i].url} changed since its units were listed (row groups of "
                    f"{list(files[i].row_groups)} rows, now {list(now)}); start again to read it as it is now"
                )
            opened[i] = pf
        return opened

    def iter_unit_rows(self, unit: Unit, after: Position | None) -> Iterator[tuple[Position, Row | BadSample]]:
        """The chains of one output row group (or file) that the adapter keeps, after ``after``."""
        typed = as_unit(unit)
        listed = self.listed[typed.path]
        for group, first in typed.row_group_reads(after, listed.groups):
            for k, row in self._group_rows(listed, group, first, typed):
                yield typed.position(group, k), row

    def _group_rows(self, listed: _Listed, group: int, first: int, unit: Unit) -> Iterator[tuple[int, Row | BadSample]]:
        """The chains of one output row group the adapter keeps, from the ``first``-th of them, by index."""
        entry = listed.entry
        files, builder = self._reader(listed)
        chains = self._chains(listed, group)
        columns = entry.mapping.read_columns(entry.filter)
        with contextlib.ExitStack() as stack:
            found = gather(files, chains, columns, self.storage_options, stack, self._open(files, chains, stack))
        results: list[dict[str, Any] | BadSample] = []
        for chain in chains:
            try:
                results.append(builder.build([found[loc] for loc in chain]))
            except BadValue as exc:
                results.append(_bad(files, chain, exc))
        kept = [r for r in results if not isinstance(r, BadSample)]
        if first > max(len(kept), 1):
            raise PositionError(f"dataset {self.name!r}: no row {first - 1} in row group {group} of {unit!r}")
        typed_rows = iter(to_table(kept, listed.schema).to_pylist())  # the values the output file would hold
        k = 0
        for result in results:
            row = result if isinstance(result, BadSample) else Row(next(typed_rows))
            if k >= first:
                yield k, row
            k += not isinstance(result, BadSample)

    def plan_units(self, units: Iterable[Unit]) -> None:
        """Nothing to read ahead."""

    def describe(self, unit: Unit, position: Position | None = None) -> dict[str, Any]:
        """The unit as the converted output names it, and the entry it is read from."""
        typed = as_unit(unit)
        listed = self.listed.get(typed.path)
        return {**typed.where(position), **({"source": str(listed.entry)} if listed else {})}


def _bad(files: Sequence[SourceFile], chain: tuple[int, ...], exc: BadValue) -> BadSample:
    """A chain the adapter drops, located at its failing source row."""
    file, rg, row = unpack(chain[exc.row])
    where = {"file": files[file].url, "row_group": rg, "row": row, "code": exc.code}
    return BadSample(ValueError(exc.reason), where | ({"column": exc.column} if exc.column else {}))


Peeked = tuple[str, dict[str, Any] | BadValue]
"""A title saying where the chain comes from, and its output row (or why the adapter drops it)."""


def _rows(
    files: list[SourceFile], columns: list[str], where: Filter | None, so: storage.StorageOptions | None
) -> Generator[tuple[str, list[dict[str, Any]]]]:
    for i, rg, r, row in source_rows(files, columns, so):
        if passes(where, row):
            yield f"{files[i].name} rg {rg} row {r}", [row]


def _grouped(
    files: list[SourceFile],
    mapping: AdapterMapping,
    where: Filter | None,
    columns: list[str],
    n: int,
    so: storage.StorageOptions | None,
) -> Generator[tuple[str, list[dict[str, Any]]]]:
    plan = plan_groups(files, mapping, where, n, "peek", so)
    chains = plan.tasks[0].chains if plan.tasks else ()
    with contextlib.ExitStack() as stack:
        found = gather(files, chains, columns, so, stack, {})
    for chain in chains:
        rows = [found[location] for location in chain]
        key = ", ".join(f"{c}={rows[0][c]}" for c in mapping.group_by)
        yield f"{key} ({len(rows)} rows)", rows


def peek(
    src: str,
    mapping: str | Path | AdapterMapping,
    n: int,
    *,
    where: str | None = None,
    media_dir: str | None = None,
    split: str | None = None,
    storage_options: storage.StorageOptions | None = None,
    index_dir: str | None = None,
) -> Generator[Peeked]:
    """The first ``n`` chains ``mapping`` makes of ``src`` (options as for ``adapt``; ``index_dir`` keeps indexes)."""
    mapping = resolve_mapping(mapping)
    where_filter = mapping.filter(where)
    files, mounts = open_sources(src, mapping, split, storage_options, index_dir)
    check_columns(files, mapping, where_filter)
    columns = mapping.read_columns(where_filter)
    media = MediaDir(media_dir, storage_options, mounts=[m[:2] for m in mounts], index_dir=index_dir)
    builder = ChainBuilder(mapping, media)
    chains: Generator[tuple[str, list[dict[str, Any]]]]
    if mapping.group_by:
        chains = _grouped(files, mapping, where_filter, columns, n, storage_options)
    else:
        chains = _rows(files, columns, where_filter, storage_options)
    try:
        for count, (title, rows) in enumerate(chains):
            if count >= n:
                return
            try:
                yield title, builder.build(rows)
            except BadValue as exc:
                yield title, exc
    finally:
        chains.close()  # the open source file, when stopped after n chains
        close_mounts(mounts)
