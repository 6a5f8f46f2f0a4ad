"""Raw rows of a dataset, on either backend, as a dataset's ``parse_row`` receives them: the public reader.

``iter_rows(path)`` reads each unit once in the loader's listing order (no rank split, no shuffle, no
image decoded); rows a source cannot decode are counted in :attr:`RawRows.drops`, kept in
:attr:`RawRows.bad` and handed to ``on_bad``, not yielded; a unit that fails while being read raises.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Generator, Iterator
from dataclasses import dataclass, field
from typing import Any

from ..io.storage import StorageOptions
from .drops import DropLog
from .layouts import ConvertedRoot, LayoutError
from .open import DataHandle, open_data
from .rows import BadSample, ListingRowSource, Position, close_rows
from .sources.webdataset import TarSource
from .units import Unit

__all__ = ["BadRawRow", "RawRow", "RawRows", "iter_rows"]

KEEP_BAD = 1000
"""Bad rows :attr:`RawRows.bad` keeps (the first ones); the count in ``drops`` covers all of them."""


@dataclass(slots=True)
class RawRow:
    """One row: its unit (as the loader lists it), its position in the unit, the row and where it is."""

    unit: Unit
    position: Position
    row: Any
    """Exactly what the dataset's ``parse_row`` receives (a :class:`~editstream.loader.rows.Row` dict)."""
    source: ListingRowSource = field(hash=False, compare=False, repr=False)
    """The source that read it (it says where the row is)."""

    @property
    def where(self) -> dict[str, Any]:
        """The source's ``describe()`` of the row: file and row group (or shard), row, shard URL (made on
        access: most readers never ask, so no row pays for it)."""
        return self.source.describe(self.unit, self.position)


@dataclass(frozen=True)
class BadRawRow:
    """A row the source read but could not decode: where it is and why (never yielded as a row)."""

    unit: Unit
    position: Position
    error: BaseException
    where: dict[str, Any] = field(hash=False, compare=False)


class RawRows(Iterator[RawRow]):
    """The rows :func:`iter_rows` yields; after (or during) the pass, ``drops`` and ``bad`` say what was skipped."""

    def __init__(
        self,
        handle: DataHandle,
        source: ListingRowSource,
        units: list[Unit],
        drops: DropLog,
        on_bad: Callable[[BadRawRow], None] | None,
    ) -> None:
        self.handle = handle
        self.backend = handle.backend
        self.kind = handle.kind
        self.units = units
        self.drops = drops
        self.bad: list[BadRawRow] = []
        self._source = source
        self._on_bad = on_bad
        self._rows = self._read()

    @property
    def bad_count(self) -> int:
        """How many rows were skipped as undecodable so far (all of them, not only those kept in ``bad``)."""
        return self.drops.counts["bad_sample"]

    def __next__(self) -> RawRow:
        return next(self._rows)

    def __iter__(self) -> Iterator[RawRow]:
        return self._rows  # a for loop steps the generator itself, with no Python call per row

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
                            yield RawRow(unit, position, row, source)
                finally:
                    close_rows(rows)
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
    media_dir: str | None = None,
) -> RawRows:
    """Every row of the dataset at ``path`` (anything :func:`~editstream.data.open.open_data` opens, or a handle
    it opened), one pass in listing order, undecoded. ``kind`` and ``backend`` are detected when ``None``;
    ``units`` keeps only those units; ``on_bad`` is called for each skipped row."""
    drops = DropLog("iter_rows")
    try:
        handle = (
            path
            if isinstance(path, DataHandle)
            else open_data(path, kind=kind, backend=backend, storage_options=storage_options, media_dir=media_dir)
        )
    except LayoutError as exc:
        raise ValueError(f"iter_rows: {exc}") from None
    source = handle.source("iter_rows", drops)
    if isinstance(handle.layout, ConvertedRoot) and isinstance(source, TarSource):
        source.known_manifests[handle.url] = handle.layout.manifest  # read once, by the layout
    listed = handle.units(source)
    if units is not None:
        listed = _only(listed, units)
    return RawRows(handle, source, listed, drops, on_bad)


def _only(listed: list[Unit], wanted: Collection[Unit]) -> list[Unit]:
    known = set(listed)
    unknown = [u for u in wanted if u not in known]
    if unknown:
        raise ValueError(f"iter_rows: units not in the listing: {unknown[:3]} (of {len(unknown)})")
    keep = set(wanted)
    return [u for u in listed if u in keep]
