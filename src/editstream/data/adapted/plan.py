"""The adaptation plan: the source files, and which source rows form each output file's chains.

With ``group_by`` a pass over the key, order and filter columns groups and sorts the rows into chains
(one small packed location per row); the gather then reads only the rows each output file needs.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from ...format.safe_yaml import brief
from ...io import storage
from ...io.parquet import iter_row_group_batches, open_parquet
from ..media import MediaSource
from .chains import BadValue, bad_cell, readable_rows
from .mapping import AdapterMapping, MappingError
from .sources import (
    MetadataFile,
    describe,
    find_root,
    kept_count_and_schema,
    list_metadata,
    metadata_rows,
    open_mounts,
    rows_at,
    snapshot_roots,
)
from .where import Filter

_ROW_BITS = 24
_GROUP_BITS = 20
"""A location packs (file, row group, row) into one int: row < 2**24, row group < 2**20."""

log = logging.getLogger(__name__)

DEFAULT_ROWS_PER_GROUP = 100
"""Chains per output row group (a loader unit); the Hub's own image datasets use 100 rows."""
DEFAULT_CHAINS_PER_FILE = 1000
"""Chains per output file of a grouped adaptation (ungrouped ones keep one file per source file)."""


def pack(file: int, row_group: int, row: int) -> int:
    """One int for a source row's ``(file index, row group, row within the row group)``."""
    return (file << (_ROW_BITS + _GROUP_BITS)) | (row_group << _ROW_BITS) | row


def unpack(location: int) -> tuple[int, int, int]:
    """The ``(file index, row group, row)`` of a packed location."""
    return (
        location >> (_ROW_BITS + _GROUP_BITS),
        (location >> _ROW_BITS) & ((1 << _GROUP_BITS) - 1),
        location & ((1 << _ROW_BITS) - 1),
    )


@dataclass(frozen=True)
class SourceFile:
    """One source parquet file: URL, name, size and rows per row group (from its footer)."""

    url: str
    name: str
    size: int
    row_groups: tuple[int, ...]
    schema: pa.Schema
    meta: MetadataFile | None = None
    """A JSON / JSONL metadata file (one row group of all its rows) instead of parquet."""
    marks: tuple[int, ...] = ()
    """A JSONL file's byte offset of every ``LINES_PER_MARK``-th line, where a read of some of its rows starts."""

    @property
    def num_rows(self) -> int:
        """Rows in the file."""
        return sum(self.row_groups)


@dataclass(frozen=True)
class OutputTask:
    """One output file: from a whole source file (``source``), or from planned ``chains`` of locations."""

    name: str
    source: int | None = None
    chains: tuple[tuple[int, ...], ...] = ()


@dataclass
class Plan:
    """The source files, the output tasks, and what the plan pass already dropped or filtered out."""

    files: list[SourceFile]
    tasks: list[OutputTask]
    filtered: int = 0
    drops: list[dict[str, Any]] | None = None
    plan_rows: int = 0


def _parquet_in(folder: str, split: str | None, storage_options: storage.StorageOptions | None) -> list[str]:
    """The ``*.parquet`` files directly in ``folder`` (those named ``{split}-*``); none when it is no folder."""
    try:
        urls = storage.list_files(folder, ".parquet", storage_options)
    except (FileNotFoundError, NotADirectoryError):
        return []
    return [u for u in urls if split is None or u.rsplit("/", 1)[-1].startswith(f"{split}-")]


def find_parquet_root(
    src: str, split: str | None, storage_options: storage.StorageOptions | None, *, say: bool = True
) -> str:
    """The folder of a dataset's parquet files: ``src``, a repository root's ``data/`` or a Hub cache folder's
    ``snapshots/<rev>/data`` (logged when ``say``); none found: an error naming where it looked."""
    if _parquet_in(src, split, storage_options):
        return src
    data = storage.join(src, "data")
    if _parquet_in(data, split, storage_options):
        if say:
            log.warning("%s holds no parquet files itself; reading %s", src, data)
        return data
    snapshots = [storage.join(root, "data") for root in snapshot_roots(src, storage_options)]
    found = [c for c in snapshots if _parquet_in(c, split, storage_options)]
    if found:
        if say:
            log.warning("%s holds no parquet files itself; reading %s", src, found[0])
        return found[0]
    looked = ", ".join([src, data, *(snapshots or [storage.join(src, "snapshots", "<rev>", "data")])])
    which = f" named {split}-*.parquet" if split is not None else ""
    raise FileNotFoundError(f"{src} holds no parquet files{which}; looked in {looked}")


def list_sources(src: str, split: str | None, storage_options: storage.StorageOptions | None) -> list[SourceFile]:
    """The ``*.parquet`` files of ``src`` (named ``{split}-*`` when given), sorted, their footers read."""
    return _parquet_files(
        _parquet_in(find_parquet_root(src, split, storage_options), split, storage_options), storage_options
    )


def _parquet_files(urls: Sequence[str], storage_options: storage.StorageOptions | None) -> list[SourceFile]:
    """The parquet files at ``urls`` with their footers read."""
    files = []
    for url in urls:
        with open_parquet(url, storage_options) as pf:
            meta = pf.metadata
            sizes = tuple(meta.row_group(i).num_rows for i in range(meta.num_row_groups))
            schema = pf.schema_arrow
        files.append(SourceFile(url, url.rsplit("/", 1)[-1], storage.size(url, storage_options), sizes, schema))
    return files


Mounts = list[tuple[str, MediaSource, str]]


def open_sources(
    src: str,
    mapping: AdapterMapping,
    split: str | None,
    storage_options: storage.StorageOptions | None,
    index_dir: str | None = None,
) -> tuple[list[SourceFile], Mounts]:
    """The source files of ``mapping`` at ``src`` (its parquet, or its metadata files) and its media, opened."""
    if not mapping.metadata:
        return list_sources(src, split, storage_options), []
    if split is not None:
        raise MappingError(
            f"{mapping.origin}: --split picks parquet files by name; this mapping's metadata names its files"
        )
    root = find_root(src, mapping, storage_options)
    mounts = open_mounts(root, mapping.media, storage_options, index_dir)
    metas = list_metadata(root, mapping, mounts, storage_options)
    log.warning("%s", describe(root, metas, mounts))
    if not metas:
        found = ", ".join(sorted(m for mount in mounts for m in mount[1].names())[:5])
        raise FileNotFoundError(
            f"{root} holds no metadata file matching {list(mapping.metadata)} on disk or in its media "
            f"({', '.join(w for _, _, w in mounts) or 'none'}){'; members such as ' + found if found else ''}"
        )
    files = _parquet_files([m.url for m in metas if m.form == "parquet"], storage_options)
    for m in metas:
        if m.form != "parquet":
            n, schema, marks = kept_count_and_schema(m, storage_options, index_dir)
            files.append(SourceFile(m.url, m.name, m.size, (n,), schema, m, marks))
    return files, mounts


_BYTES = (pa.types.is_binary, pa.types.is_large_binary, pa.types.is_fixed_size_binary)
_TEXT = (pa.types.is_string, pa.types.is_large_string)
_LISTS = (pa.types.is_list, pa.types.is_large_list, pa.types.is_fixed_size_list)


def _is(arrow_type: pa.DataType, tests: tuple[Any, ...]) -> bool:
    """Whether ``arrow_type`` (a dictionary's value type for a dictionary) passes one of ``tests``."""
    plain = arrow_type.value_type if pa.types.is_dictionary(arrow_type) else arrow_type
    return any(test(plain) for test in tests)


def _type_problem(mapping: AdapterMapping, schema: pa.Schema) -> str | None:
    """Why a column cannot hold what the mapping reads from it: an image (binary, a path, an HF Image
    struct with binary ``bytes`` or a string ``path``) or phrasings (text, binary read as UTF-8, or a list)."""
    for column in mapping.images:
        t = schema.field(column).type
        parts = {f.name: f.type for f in t} if pa.types.is_struct(t) else {}
        if not (_is(t, _BYTES + _TEXT) or _is(parts.get("bytes", t), _BYTES) or _is(parts.get("path", t), _TEXT)):
            return f"image column {brief(column)} is {t}, not binary, a path string or an Image struct {{bytes, path}}"
    for source in mapping.instructions:
        t = schema.field(source.column).type
        listed = source.format == "list"
        if not (_is(t, _LISTS) and _is(t.value_type, _BYTES + _TEXT) if listed else _is(t, _BYTES + _TEXT)):
            need = "a list of strings" if listed else "a string (or binary UTF-8 text)"
            return f"instruction column {brief(source.column)} is {t}; format {source.format} needs {need}"
    return None


def check_columns(files: Sequence[SourceFile], mapping: AdapterMapping, where: Filter | None) -> None:
    """A ``MappingError`` naming the file and column when a source file lacks a column the mapping reads or
    holds one of a type it cannot use (checked on the footers, before any row is read)."""
    for f in files:
        if f.meta is not None:  # a JSON row lacking a column holds null there: checked row by row
            continue
        missing = [c for c in mapping.source_columns if c not in f.schema.names]
        if missing:
            raise MappingError(
                f"{mapping.origin}: source file {f.url} has no column(s) {brief(missing)} "
                f"(its columns: {brief(f.schema.names)})"
            )
        problem = _type_problem(mapping, f.schema)
        if problem is not None:
            raise MappingError(f"{mapping.origin}: source file {f.url}: {problem}")
        if where is not None:
            where.check_types(f.schema, f"source file {f.url}")


def row_group_rows(
    pf: pq.ParquetFile, f: SourceFile, rg: int, columns: list[str], start: int = 0, stop: int | None = None
) -> Iterator[tuple[int, dict[str, Any]]]:
    """``(row, values of columns)`` of rows ``[start, stop)`` of row group ``rg``, read a few rows at a time."""
    for first, rows in iter_row_group_batches(pf, f.url, rg, start, stop, columns=columns):
        yield from enumerate(readable_rows(rows), start=first)


def source_rows(
    files: Sequence[SourceFile], columns: list[str], storage_options: storage.StorageOptions | None
) -> Iterator[tuple[int, int, int, dict[str, Any]]]:
    """``(file index, row group, row, values of columns)`` of every source row in order (an unreadable cell
    holds its ``BadValue``)."""
    for i, f in enumerate(files):
        if f.meta is not None:
            yield from ((i, 0, r, row) for r, row in enumerate(metadata_rows(f.meta, columns, storage_options)))
            continue
        with open_parquet(f.url, storage_options, streaming=True) as pf:
            for rg in range(len(f.row_groups)):
                for r, row in row_group_rows(pf, f, rg, columns):
                    yield i, rg, r, row


def gather(
    files: Sequence[SourceFile],
    chains: Sequence[tuple[int, ...]],
    columns: list[str],
    storage_options: storage.StorageOptions | None,
    stack: contextlib.ExitStack,
    opened: dict[int, pq.ParquetFile],
) -> dict[int, dict[str, Any]]:
    """The source rows of ``chains`` by location, each source row group read once; files opened into
    ``opened`` (closed with ``stack``) are reused by a caller's next batch."""
    needed: dict[tuple[int, int], list[int]] = {}
    for chain in chains:
        for location in chain:
            file, rg, row = unpack(location)
            needed.setdefault((file, rg), []).append(row)
    rows: dict[int, dict[str, Any]] = {}
    for (file, rg), wanted in sorted(needed.items()):
        meta = files[file].meta
        if meta is not None:
            for r, values in rows_at(meta, files[file].marks, wanted, columns, storage_options):
                rows[pack(file, rg, r)] = values
            continue
        if file not in opened:
            opened[file] = stack.enter_context(open_parquet(files[file].url, storage_options, streaming=True))
        keep = set(wanted)
        for row, values in row_group_rows(opened[file], files[file], rg, columns, min(keep), max(keep) + 1):
            if row in keep:
                rows[pack(file, rg, row)] = values
    return rows


def _drop(
    files: Sequence[SourceFile], location: int, code: str, reason: str, key: Any, rows: int, column: str | None = None
) -> dict[str, Any]:
    file, rg, row = unpack(location)
    record = {"file": files[file].name, "row_group": rg, "row": row, "group": list(key), "code": code}
    return record | ({"column": column} if column else {}) | {"reason": reason, "rows": rows}


def _order_problem(members: list[tuple[Any, int]]) -> tuple[int, str] | None:
    """The first row of a sorted session whose order value repeats the previous one, or leaves a gap
    after it (integer orders must step by one: turns 1, 3 lost turn 2); its location and what is wrong."""
    for (a, _), (b, loc) in zip(members, members[1:]):
        if a == b:
            return loc, "repeats within this session"
        if all(isinstance(v, int) and not isinstance(v, bool) for v in (a, b)) and b - a > 1:
            return loc, f"jumps from {a} to {b} in this session (a gap)"
    return None


def _sorted_group(
    files: Sequence[SourceFile], mapping: AdapterMapping, key: Any, members: list[tuple[Any, int]]
) -> tuple[tuple[int, ...] | None, dict[str, Any] | None]:
    """The group's locations in chain order, or ``None`` and the drop record of a group with no good order."""
    if mapping.order_by is None:
        return tuple(sorted(loc for _, loc in members)), None
    nulls = [loc for order, loc in members if order is None]
    if nulls:
        return None, _drop(
            files, nulls[0], "bad_order", f"{mapping.order_by} is null in this session", key, len(members)
        )
    members.sort()
    problem = _order_problem(members)
    if problem is not None:
        location, what = problem
        return None, _drop(files, location, "bad_order", f"{mapping.order_by} {what}", key, len(members))
    return tuple(loc for _, loc in members), None


def _no_session(
    mapping: AdapterMapping, key: tuple[Any, ...], bad: BadValue | None
) -> tuple[str, str, str | None] | None:
    """Why a row belongs to no session, ``(code, reason, column)``: a group_by cell unreadable or null."""
    if bad is not None and bad.column in mapping.group_by:
        return bad.code, bad.reason, bad.column
    if any(v is None for v in key):
        return "bad_group_key", f"a group_by column {list(mapping.group_by)} is null", None
    return None


def passes(where: Filter | None, row: dict[str, Any]) -> bool:
    """Whether the filter keeps ``row``: a row whose filter columns cannot be read is kept (its drop is
    counted when it is adapted); the same rule in every pass, so all cut the same planned rows."""
    return where is None or bad_cell({c: row[c] for c in where.columns}) is not None or where(row)


def plan_groups(
    files: list[SourceFile],
    mapping: AdapterMapping,
    where: Filter | None,
    chains_per_file: int,
    stem: str,
    storage_options: storage.StorageOptions | None = None,
) -> Plan:
    """The plan pass: group rows by ``group_by`` (a session is kept only if all its rows pass ``where``),
    sort by ``order_by``, order chains by their first row, cut them into output files."""
    columns = list(dict.fromkeys([*mapping.group_by, *([mapping.order_by] if mapping.order_by else [])]))
    columns += [c for c in (where.columns if where else ()) if c not in columns]
    groups: dict[Any, list[tuple[Any, int]]] = {}
    failed: set[Any] = set()
    broken: dict[Any, tuple[int, BadValue]] = {}  # a session with a cell that cannot be read: dropped whole
    drops: list[dict[str, Any]] = []
    rows = 0
    for file, rg, r, row in source_rows(files, columns, storage_options):
        rows += 1
        location, bad = pack(file, rg, r), bad_cell(row)
        key = tuple(row[c] for c in mapping.group_by)
        lost = _no_session(mapping, key, bad)
        if lost is not None:
            code, reason, column = lost
            drops.append(_drop(files, location, code, reason, () if column else key, 1, column))
            continue
        groups.setdefault(key, []).append((row[mapping.order_by] if mapping.order_by and not bad else None, location))
        if bad is not None:
            broken.setdefault(key, (location, bad))
        elif where is not None and not where(row):
            failed.add(key)
    chains = []
    filtered = 0
    for key, members in groups.items():
        if key in failed:
            filtered += len(members)
            continue
        if key in broken:
            location, bad = broken[key]
            drops.append(_drop(files, location, bad.code, bad.reason, key, len(members), bad.column))
            continue
        chain, drop = _sorted_group(files, mapping, key, members)
        if drop is not None:
            drops.append(drop)
        if chain is not None:
            chains.append(chain)
    del groups
    chains.sort(key=lambda c: min(c))
    tasks = [
        OutputTask(f"{stem}-{i // chains_per_file:05d}.parquet", chains=tuple(chains[i : i + chains_per_file]))
        for i in range(0, len(chains), chains_per_file)
    ]
    return Plan(files, tasks, filtered=filtered, drops=drops, plan_rows=rows)


def plan_rows(files: list[SourceFile]) -> Plan:
    """The plan without grouping: one output file per source file, of the same name."""
    return Plan(files, [OutputTask(output_name(f), source=i) for i, f in enumerate(files)], drops=[])


def output_name(f: SourceFile) -> str:
    """The output file of an ungrouped source file: its name, or a metadata file's path made one parquet name."""
    if f.meta is None:
        return f.name
    return f.name.rsplit(".", 1)[0].replace("/", "-") + ".parquet"


def plan_filtered(files: list[SourceFile], where: Filter, storage_options: storage.StorageOptions | None) -> Plan:
    """The plan without grouping but with a filter (what training in place reads): the kept rows of each
    file as one-row chains."""
    kept: list[list[tuple[int, ...]]] = [[] for _ in files]
    filtered = 0
    for i, rg, r, row in source_rows(files, list(where.columns), storage_options):
        if passes(where, row):
            kept[i].append((pack(i, rg, r),))
        else:
            filtered += 1
    tasks = [OutputTask(output_name(f), chains=tuple(chains)) for f, chains in zip(files, kept)]
    return Plan(files, tasks, filtered=filtered, drops=[], plan_rows=sum(f.num_rows for f in files))
