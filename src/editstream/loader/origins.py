"""The loader's side of checkpoint-by-reference: :class:`TracedDataset`, the one interface a packer uses
(samples come with their origin; recreating parses each row again after its point is put back)."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

from ..data.rows import BadSample, Position, RowSource, close_rows
from ..data.units import PositionError, Unit

TakePoint = Callable[[], Any]
"""Called just before a row's parse: what it returns is kept as the origin's ``point``."""
PutPoint = Callable[[Any], None]
"""Called with an origin's ``point`` just before its row is parsed again."""


@dataclass(frozen=True)
class ParseOrigin:
    """Where a yielded sample came from: its unit's place in the unit list, its row, the point taken."""

    unit_position: int
    position: Position
    point: Any


Traced = Iterator[tuple[dict[str, Any], ParseOrigin | None]]
"""Samples, each with its origin (``None`` from a stream that takes no points)."""


@runtime_checkable
class TracedDataset(Protocol):
    """A group dataset whose samples a packer can save as references (every source dataset is one)."""

    def iter_with_origins(self, take_point: TakePoint) -> Traced:
        """The dataset's own endless stream (``iter(dataset)``), each sample with its origin."""

    def recreate_samples(
        self, origins: Sequence[ParseOrigin], units: Sequence[Unit] | None, put_point: PutPoint
    ) -> list[dict[str, Any]]:
        """The samples these origins were parsed into, bit for bit (``units``: what they index)."""

    def sorted_units(self) -> list[Unit]:
        """Every unit of the dataset in sorted order: a unit's place here is its global id."""

    def iter_epoch_units(
        self, units: Sequence[Unit], order: Sequence[int], start: int, after: Position | None, take_point: TakePoint
    ) -> Traced:
        """One pass over ``units[i] for i in order[start:]`` (rows after ``after`` in the first)."""


class RecreateError(ValueError):
    """A buffered sample could not be parsed again as it was (the data changed, or a row is gone)."""


def _scan(source: RowSource, unit: Unit, after: Position | None, wanted: set[Position]) -> dict[Position, Any]:
    found: dict[Position, Any] = {}
    rows = source.iter_unit_rows(unit, after)
    try:
        for position, row in rows:
            if position in wanted and not isinstance(row, BadSample):
                found[position] = row
                if len(found) == len(wanted):
                    break
    finally:
        close_rows(rows)
    return found


def gather_rows(
    source: RowSource, units: Sequence[Unit], origins: Sequence[ParseOrigin], dataset_name: str
) -> dict[tuple[int, Position], Any]:
    """The rows the origins name, keyed by ``(unit_position, position)``: each unit read once, from just
    before its earliest row wanted (from its start when that misses); :class:`RecreateError` for a row gone."""
    by_unit: dict[int, set[Position]] = {}
    for origin in origins:
        by_unit.setdefault(origin.unit_position, set()).add(tuple(origin.position))
    rows: dict[tuple[int, Position], Any] = {}
    for unit_position, wanted in sorted(by_unit.items()):
        if not 0 <= unit_position < len(units):
            raise RecreateError(
                f"dataset {dataset_name!r}: a buffered sample names unit {unit_position} of this worker's "
                f"{len(units)} units; the state is from other data or another layout"
            )
        unit = units[unit_position]
        first = min(wanted)  # resumed just before it: the built-in sources' position minus one
        try:
            found = _scan(source, unit, (*first[:-1], first[-1] - 1) if first else None, wanted)
        except PositionError:
            found = {}  # no such row: reported below with the rest that cannot be found
        if len(found) < len(wanted):
            found.update(_scan(source, unit, None, wanted - set(found)))
        missing = sorted(wanted - set(found))
        if missing:
            raise RecreateError(
                f"dataset {dataset_name!r}: cannot read buffered row(s) {missing} of {source.describe(unit)} "
                f"again; the data changed since the state was saved"
            )
        rows.update({(unit_position, position): row for position, row in found.items()})
    return rows
