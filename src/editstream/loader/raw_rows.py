"""Raw rows of a dataset, on either backend, as a dataset's ``parse_row`` receives them: the public reader.

``iter_rows(path)`` lists the units of a parquet directory, a converted root or foreign shards
(local or fsspec URLs) the way the loader lists them, then reads every unit once, in listing
order (the sorted order the loader shuffles; no rank or worker split, no shuffle), and yields a
:class:`RawRow` per row: the unit, the row's position (what ``data_indexes`` holds after the
unit), the row itself and where it is. For statistics, filtering and benchmarks: no image is
decoded. A converted dataset gives the same units, positions and rows on both backends.

Rows a source reads but cannot decode (a shard sample missing a member) are not yielded: each
is counted as ``bad_sample`` in :attr:`RawRows.drops` with its location, logged, kept in
:attr:`RawRows.bad` and handed to ``on_bad`` when given. Files the listing cannot read are
counted there too (``unreadable_file``); a unit that fails while being read raises.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Generator, Iterator
from dataclasses import dataclass, field
from typing import Any

from ..data.drops import DropLog
from ..data.rows import BadSample, ListingRowSource, Position
from ..data.sources.foreign import foreign_kind, is_foreign_entry
from ..data.units import Unit
from ..format import detect as d
from ..format.manifest import Manifest
from ..io.parquet import open_parquet
from ..io.storage import StorageOptions, list_files
from ..kinds import DatasetKind, SourceShape, detect_kind, get_kind
from .backends import check_backend
from .datasets.standard import count_source_files, make_source

__all__ = ["BadRawRow", "RawRow", "RawRows", "iter_rows"]

KEEP_BAD = 1000
"""Bad rows :attr:`RawRows.bad` keeps (the first ones); the count in ``drops`` covers all of them."""


@dataclass(frozen=True)
class RawRow:
    """One row: its unit (as the loader lists it), its position in the unit, the row and where it is."""

    unit: Unit
    position: Position
    row: Any
    """Exactly what the dataset's ``parse_row`` receives (a :class:`~editstream.loader.rows.Row` dict)."""
    where: dict[str, Any] = field(hash=False, compare=False)
    """The source's ``describe()`` of the row: file and row group (or shard), row, shard URL."""


@dataclass(frozen=True)
class BadRawRow:
    """A row the source read but could not decode: where it is and why (never yielded as a row)."""

    unit: Unit
    position: Position
    error: BaseException
    where: dict[str, Any] = field(hash=False, compare=False)


@dataclass(frozen=True)
class Opened:
    """What :func:`open_source` found: the backend, the kind, the source and its units in listing order."""

    backend: str
    kind: DatasetKind
    source: ListingRowSource
    units: list[Unit]


class RawRows(Iterator[RawRow]):
    """The rows :func:`iter_rows` yields; after (or during) the pass, ``drops`` and ``bad`` say what was skipped."""

    def __init__(self, opened: Opened, drops: DropLog, on_bad: Callable[[BadRawRow], None] | None) -> None:
        self.backend = opened.backend
        self.kind = opened.kind
        self.units = opened.units
        self.drops = drops
        self.bad: list[BadRawRow] = []
        self._source = opened.source
        self._on_bad = on_bad
        self._rows = self._read()

    @property
    def bad_count(self) -> int:
        """How many rows were skipped as undecodable so far (all of them, not only those kept in ``bad``)."""
        return self.drops.counts["bad_sample"]

    def __next__(self) -> RawRow:
        return next(self._rows)

    def close(self) -> None:
        """Stop reading (hands back what the source read ahead); the iterator is exhausted afterwards."""
        self._rows.close()

    def _read(self) -> Generator[RawRow, None, None]:
        source = self._source
        source.plan_units(iter(self.units))
        try:
            for unit in self.units:
                rows = source.iter_unit_rows(unit, None)
                try:
                    for position, row in rows:
                        if isinstance(row, BadSample):
                            self._bad(unit, position, row)
                        else:
                            yield RawRow(unit, position, row, source.describe(unit, position))
                finally:
                    close = getattr(rows, "close", None)
                    if close is not None:
                        close()
        finally:
            source.plan_units(iter(()))

    def _bad(self, unit: Unit, position: Position, sample: BadSample) -> None:
        where = {**self._source.describe(unit, position), **sample.where}
        self.drops.record("bad_sample", where, sample.error)
        bad = BadRawRow(unit, position, sample.error, where)
        if len(self.bad) < KEEP_BAD:
            self.bad.append(bad)
        if self._on_bad is not None:
            self._on_bad(bad)


def iter_rows(
    path: Any,
    *,
    kind: str | None = None,
    backend: str | None = None,
    storage_options: StorageOptions | None = None,
    units: Collection[Unit] | None = None,
    on_bad: Callable[[BadRawRow], None] | None = None,
) -> RawRows:
    """Every row of the dataset at ``path``, one pass in listing order, undecoded (see the module docstring).

    ``path``: a parquet directory, a converted root, or foreign shards (a brace pattern, a glob,
    a ``.tar``, a directory of tars); ``backend`` (``"parquet"``/``"webdataset"``) and ``kind``
    (a kind name, as the CLI names them) are detected from the data when ``None``. ``units``
    keeps only those units (listing order stays); ``on_bad`` is called for each skipped row.
    """
    drops = DropLog("iter_rows")
    opened = open_source(path, kind=kind, backend=backend, storage_options=storage_options, drops=drops)
    if units is not None:
        opened = _only(opened, units)
    return RawRows(opened, drops, on_bad)


def open_source(
    path: Any,
    *,
    kind: str | None = None,
    backend: str | None = None,
    storage_options: StorageOptions | None = None,
    drops: DropLog | None = None,
) -> Opened:
    """The row source the loader would read ``path`` with (for ``kind``'s dataset) and its units, listed."""
    found_backend = detect_backend(path, storage_options)
    chosen = found_backend if backend is None else check_backend(backend, "iter_rows")
    if chosen != found_backend:
        raise ValueError(f"iter_rows: {path} holds {found_backend} data, not {chosen} (leave backend=None)")
    found_kind = get_kind(kind) if kind is not None else detect_data_kind(path, chosen, storage_options)
    if found_kind.source is not SourceShape.PARQUET:
        raise ValueError(f"iter_rows: {found_kind.name} data is JSONL + media; read it with its dataset class")
    granularity = "row_group"
    if found_kind.dataset is not None:  # the units the kind's dataset reads: row groups, or whole files
        granularity = str(getattr(found_kind.dataset_class(), "unit_granularity", granularity))
    entry = d.shards_in(path) if _is_shard_dir(path, storage_options) else path
    source = make_source(
        chosen,
        dataset_name="iter_rows",
        granularity=granularity,
        parquet_info=None,
        storage_options=storage_options,
        drops=drops if drops is not None else DropLog("iter_rows"),
        column_types=found_kind.columns,
        data_dir_list=[entry],
        schema=found_kind.name,
    )
    units = source.list_units([entry], [count_source_files(entry, chosen, storage_options)])
    return Opened(chosen, found_kind, source, units)


def _is_shard_dir(path: Any, storage_options: StorageOptions | None) -> bool:
    return not is_foreign_entry(path, storage_options) and d.detect(path, storage_options).kind == d.SHARD_DIR


def detect_backend(path: Any, storage_options: StorageOptions | None = None) -> str:
    """``"webdataset"`` for a converted root or shards (patterns, ``.tar``, a directory of tars),
    ``"parquet"`` for a directory of parquet files; a ``ValueError`` saying what ``path`` holds otherwise."""
    if is_foreign_entry(path, storage_options):
        return "webdataset"
    found = d.detect(path, storage_options)
    if found.kind in (d.CONVERTED, d.SHARD_DIR):
        return "webdataset"
    if found.kind == d.PARQUET_DIR:
        return "parquet"
    if found.kind == d.PARTIAL:
        done = found.partial.describe() if found.partial else "no shard done"
        raise ValueError(f"iter_rows: {path} is an unfinished conversion ({done}); finish it first")
    raise ValueError(f"iter_rows: {path} holds neither parquet files, a converted root nor tar shards ({found.kind})")


def detect_data_kind(path: Any, backend: str, storage_options: StorageOptions | None = None) -> DatasetKind:
    """The kind of the data at ``path``: a converted root's manifest schema, a parquet directory's
    columns (the first file's), or the kind foreign shards are read as by default."""
    if backend == "webdataset":
        if is_foreign_entry(path, storage_options) or _is_shard_dir(path, storage_options):
            return foreign_kind()
        return get_kind(Manifest.read(path, storage_options).schema)
    files = list_files(path, ".parquet", storage_options)
    if not files:
        raise ValueError(f"iter_rows: no *.parquet files in {path}")
    with open_parquet(files[0], storage_options) as pf:
        columns = [f.name for f in pf.schema_arrow]
    found = detect_kind(columns)
    if found is None:
        raise ValueError(f"iter_rows: the columns of {files[0]} ({sorted(columns)}) fit no registered kind; pass kind=")
    return found


def _only(opened: Opened, wanted: Collection[Unit]) -> Opened:
    listed = set(opened.units)
    unknown = [u for u in wanted if u not in listed]
    if unknown:
        raise ValueError(f"iter_rows: units not in the listing: {unknown[:3]} (of {len(unknown)})")
    keep = set(wanted)
    return Opened(opened.backend, opened.kind, opened.source, [u for u in opened.units if u in keep])
