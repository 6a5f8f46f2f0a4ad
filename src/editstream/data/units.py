"""What a unit is (what one rank/worker owns) and the reference's rule that makes a listing units, so
both backends choose the same files in the same order."""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Callable, Iterator, Sequence
from typing import Any, NamedTuple

from ..io import storage

logger = logging.getLogger("editstream")

RowsOf = Callable[[int], int]
"""The number of rows of a row group, by its index (what a resume position is checked against)."""


class PositionError(ValueError):
    """A resume position no row of its unit has: a state saved over other data, or edited by hand."""


def _check_position(unit: Any, after: Position, shape: str, sizes: Sequence[int]) -> None:
    """Refuse ``after`` unless it has one index per entry of ``sizes``, each in ``[0, size)`` (the last
    may be -1: "before the first row", how a buffered row is read again)."""
    lows = [0] * (len(sizes) - 1) + [-1]
    ok = len(after) == len(sizes) and all(
        isinstance(i, int) and not isinstance(i, bool) and low <= i < n for i, low, n in zip(after, lows, sizes)
    )
    if not ok:
        raise PositionError(
            f"resume position {list(after)} is not a row of {unit!r} (positions are {shape}, within "
            f"{list(sizes)}); the state was saved over other data or edited"
        )


class FileUnit(str):
    """A whole parquet file as its path (equal to the plain string); positions ``(row_group, row)``."""

    __slots__ = ()

    @property
    def path(self) -> str:
        return str(self)

    def row_group_reads(
        self, after: Position | None, num_row_groups: int, rows_of: RowsOf | None = None
    ) -> Iterator[tuple[int, int]]:
        """``(row_group, first row)`` to read, in order, to resume after ``after`` (``None``: from the start);
        a position outside the file (``rows_of`` gives each row group's rows) is a :class:`PositionError`."""
        if after and rows_of is not None:
            group = after[0] if isinstance(after[0], int) and 0 <= after[0] < num_row_groups else None
            sizes = [num_row_groups, rows_of(group) if group is not None else 0]
            _check_position(self, after, "(row_group, row)", sizes)
        first = after[0] if after else 0
        for row_group in range(first, num_row_groups):
            yield row_group, (after[1] + 1 if after and row_group == first else 0)

    def position(self, row_group: int, row: int) -> Position:
        return (row_group, row)

    def where(self, position: Position | None = None) -> dict[str, Any]:
        """Where the unit (and a row of it) is, for drop logs and errors."""
        return {"file": self.path} | ({"row_group": position[0], "row": position[1]} if position is not None else {})

    def where_in_shards(self, position: Position | None, shard_of: Callable[[int], str]) -> dict[str, Any]:
        """:meth:`where`, with the URL of the converted shard of the row's row group (``shard_of(row_group)``)."""
        return self.where(position) | ({"shard": shard_of(position[0])} if position is not None else {})


class ShardUnit(str):
    """One tar shard as its URL (equal to the plain string); positions ``(sample,)``."""

    __slots__ = ()

    @property
    def url(self) -> str:
        return str(self)

    def first_sample(self, after: Position | None, num_samples: int | None = None) -> int:
        """The sample to resume at, after ``after`` (one of the shard's ``num_samples``, when given)."""
        if after and num_samples is not None:
            _check_position(self, after, "(sample,)", [num_samples])
        return after[0] + 1 if after else 0

    def where(self, position: Position | None = None) -> dict[str, Any]:
        return {"shard": self.url} | ({"sample": position[0]} if position is not None else {})


class RowGroupUnit(NamedTuple):
    """One row group of a parquet file (or its ``rowgroup``-layout shard); positions ``(row,)``."""

    path: str
    row_group: int

    def row_group_reads(
        self, after: Position | None, num_row_groups: int = 0, rows_of: RowsOf | None = None
    ) -> Iterator[tuple[int, int]]:
        if after and rows_of is not None:
            _check_position(self, after, "(row,)", [rows_of(self.row_group)])
        yield self.row_group, (after[0] + 1 if after else 0)

    def position(self, row_group: int, row: int) -> Position:
        return (row,)

    def where(self, position: Position | None = None) -> dict[str, Any]:
        return {"file": self.path, "row_group": self.row_group} | ({"row": position[0]} if position is not None else {})

    def where_in_shards(self, position: Position | None, shard_of: Callable[[int], str]) -> dict[str, Any]:
        found: dict[str, Any] = {"file": self.path, "row_group": self.row_group, "shard": shard_of(self.row_group)}
        return found | ({"row": position[0]} if position is not None else {})


class LineUnit(NamedTuple):
    """One JSONL line (newline kept) and the media directory its names are relative to: one row."""

    line: str
    media_dir: str


Unit = FileUnit | ShardUnit | RowGroupUnit | LineUnit
"""What one rank/worker owns. Units are sorted before the epoch shuffle, and each type sorts,
compares and hashes as the plain string or tuple the reference lists (so ``data_paths`` reads
the same and a reference-style subclass may assign plain values; :func:`as_unit` types them)."""

Position = tuple[int, ...]
"""Where a row sits inside its unit: ``(row,)``, ``(row_group, row)``, or ``()`` for a one-row unit."""


def as_unit(value: Any, whole: type[FileUnit] | type[ShardUnit] = FileUnit) -> Any:
    """``value`` as a typed unit (a string is ``whole``; a ``(path, row_group)`` or ``(line, media_dir)`` pair),
    so a source takes the plain values a reference-style subclass lists; else a ``TypeError``."""
    if isinstance(value, (FileUnit, ShardUnit, RowGroupUnit, LineUnit)):
        return value
    if isinstance(value, str):
        return whole(value)
    if isinstance(value, tuple) and len(value) == 2 and isinstance(value[0], str):
        if isinstance(value[1], int) and not isinstance(value[1], bool):
            return RowGroupUnit(value[0], value[1])
        if isinstance(value[1], str):
            return LineUnit(value[0], value[1])
    raise TypeError(f"{value!r} is not a unit (a path, a (path, row_group) pair or a (line, media_dir) pair)")


FILE_ORDERS = ("listing", "sorted")
"""How a directory's files are taken before ``num_used_data`` cuts them: in the order the directory
lists them (``os.listdir``'s, as NeMo Automodel and BAGEL take them; the default, so the same files are
chosen as there) or sorted by name (the same on every file system)."""


def check_file_order(file_order: str, owner: str) -> str:
    """``file_order`` when it is one of :data:`FILE_ORDERS`; a ``ValueError`` naming ``owner`` otherwise."""
    if file_order not in FILE_ORDERS:
        raise ValueError(f"{owner}: file_order must be one of {list(FILE_ORDERS)}, got {file_order!r}")
    return file_order


def repeat_to(paths: list[str], num_used: int, dataset_name: str, where: str, what: str = "files") -> list[str]:
    """The reference's sampling rule: repeat the listing, then keep the first ``num_used`` (fewer than the
    ``paths`` of ``where`` is logged, with the numbers)."""
    if num_used < 0:
        raise ValueError(f"num_used_data must be >= 0, got {num_used}")
    warn_unread(dataset_name, where, num_used, len(paths), what)
    return (paths * (num_used // len(paths) + 1))[:num_used]


def warn_unread(dataset_name: str, where: str, num_used: int, available: int, what: str = "files") -> None:
    """Log, with the numbers, a ``num_used_data`` entry below the ``available`` files (or shards) of ``where``."""
    if num_used < available:
        logger.warning(
            f"dataset {dataset_name}: num_used_data {num_used} for {where}, which holds {available} {what}: "
            f"{available - num_used} of them are not read (num_used_data counts {what}; give {available}, or more, "
            "to read all)"
        )


def source_key(entry: Any) -> Any:
    """What every spelling of one ``data_dir_list`` entry shares (``A``, ``./A/`` and its absolute path; an
    S3 prefix with or without its slash); an entry read through an adapter keeps its mapping and options."""
    if isinstance(entry, str):
        return storage.canonical(entry)
    if isinstance(entry, tuple):  # a JSONL and its media directory
        return tuple(source_key(part) for part in entry)
    data_dir = getattr(entry, "data_dir", None)
    if dataclasses.is_dataclass(entry) and not isinstance(entry, type) and isinstance(data_dir, str):
        return dataclasses.replace(entry, data_dir=storage.canonical(data_dir))
    return entry


def repeated_sources(entries: Sequence[Any]) -> list[tuple[Any, Any]]:
    """``(first, again)`` for every entry that names the same source as an earlier one."""
    seen: dict[Any, Any] = {}
    repeats = []
    for entry in entries:
        key = source_key(entry)
        try:
            if key in seen:
                repeats.append((seen[key], entry))
            else:
                seen[key] = entry
        except TypeError:  # an unhashable entry of a plugin layout: not compared
            continue
    return repeats


def _shown(entry: Any) -> str:
    return " + ".join(map(str, entry)) if isinstance(entry, tuple) else str(entry)


def refuse_repeated_sources(dataset_name: str, entries: Sequence[Any], what: str = "data_dir_list") -> None:
    """Two entries naming one source would read its rows twice without a word: an error naming it."""
    repeats = repeated_sources(entries)
    if repeats:
        first, again = (_shown(entry) for entry in repeats[0])
        spelled = f" (as {first!r} and {again!r})" if first != again else ""
        raise ValueError(
            f"dataset {dataset_name!r}: {what} names {_shown(source_key(repeats[0][0]))} twice{spelled}, so its "
            "rows would be "
            "read twice; give each source once (num_used_data repeats a source's files, a mixture's weights "
            "repeat a group)"
        )


def counted(dataset_name: str, data_dir_list: Sequence[Any], num_used_data: Sequence[int]) -> list[tuple[Any, int]]:
    """Each data directory with its ``num_used_data`` entry; other than one count per directory, or one
    source named twice, is an error naming the dataset and the numbers or the source."""
    if len(data_dir_list) != len(num_used_data):
        raise ValueError(
            f"dataset {dataset_name!r}: {len(data_dir_list)} data directories but "
            f"{len(num_used_data)} num_used_data entries; give one count per directory"
        )
    refuse_repeated_sources(dataset_name, data_dir_list)
    return [(entry, int(num_used)) for entry, num_used in zip(data_dir_list, num_used_data)]
