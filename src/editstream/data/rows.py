"""What a row source hands the shared iteration loop: rows, unreadable samples, and their positions.

Every backend (parquet row groups, converted tar shards, foreign shards, JSONL lines) is a
:class:`RowSource`; the loop in :mod:`editstream.loader.iteration` reads any of them the same way.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from .units import Unit

Position = tuple[int, ...]
"""Where a row sits inside its unit: ``(row,)``, ``(row_group, row)``, or ``()`` for a one-row unit."""


class Row(dict[str, Any]):
    """A source row: a plain dict that also allows ``row.column`` like a pandas row does."""

    def __getattr__(self, name: str) -> Any:
        try:
            return self[name]
        except KeyError as exc:
            raise AttributeError(name) from exc


@dataclass
class BadSample:
    """A row a source read but could not decode (a shard sample missing a member, say).

    Sources yield it in place of the row; the shared loop drops and counts it as ``bad_sample``
    with the source's extra location (shard URL, key). ``unreadable`` says the unit's data could
    not be read at all (a one-sample unit whose fetch failed), so it counts against the unit
    failure budget like an unreadable unit.
    """

    error: BaseException
    where: dict[str, Any] = field(default_factory=dict)
    unreadable: bool = False


class RowSource(Protocol):
    """What the shared loop reads: the rows of one unit, where they are, and the reading order."""

    def iter_unit_rows(self, unit: Unit, after: Position | None) -> Iterator[tuple[Position, Any]]:
        """``(position, row)`` of ``unit`` after ``after`` (``None``: from the start); a row may be a BadSample."""
        ...

    def describe(self, unit: Unit, position: Position | None = None) -> dict[str, Any]:
        """Where a unit (and a row in it) is, in the paths the user gave, for drop logs and errors."""
        ...

    def plan_units(self, units: Iterable[Unit]) -> None:
        """The units the stream will read, in order (an endless iterable), before the first is
        read, so the source can read ahead across them; an empty iterable ends the plan."""
        ...


class ListingRowSource(RowSource, Protocol):
    """A row source that also lists the units of data directories (the parquet and tar backends)."""

    def list_units(self, data_dir_list: Sequence[Any], num_used_data: Sequence[int]) -> list[Unit]:
        """The units of these directories (or shard patterns), in listing order."""
        ...


def close_rows(rows: Iterator[Any]) -> None:
    """Close a unit's row stream (a generator holding a file or a read-ahead) if it can be closed."""
    close = getattr(rows, "close", None)
    if close is not None:
        close()


class DropRow(Exception):
    """Raised by a ``parse_row`` to drop its row under a named reason (the cause, if any, chained).

    Without it, a ``parse_row`` that raises drops the row as ``bad_row``; a dataset with reasons
    of its own (a JSONL line that does not parse, a conversation without a loss) raises this.
    """

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class MediaReader(Protocol):
    """Where one row's media come from."""

    def image_bytes(self, name: Any) -> bytes:
        """The encoded bytes of image ``name``; raises when they cannot be read."""
        ...

    def frames(self, name: Any, frame_sampler: Any) -> list[Any]:
        """The frames ``frame_sampler`` chooses from the video or frame folder ``name``."""
        ...


@dataclass(frozen=True)
class LineRow:
    """The row of one JSONL-line unit: the line exactly as read, and where its media come from."""

    line: str
    media: MediaReader
