"""Parse rows again exactly as they were parsed: how a checkpoint that keeps only references to
buffered samples gets their tensors back.

A packed dataset notes, for every sample it yields, a :class:`ParseOrigin`: the unit, the row's
position in it and the point the global RNGs stood at when its parse began. Given origins,
:func:`gather_rows` reads those rows again (each unit once, starting just before the first row
wanted), and the dataset parses each with the RNGs put back at its point, which gives the same
sample bit for bit.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ..data.rows import BadSample, Position, RowSource, close_rows
from ..data.units import Unit
from .draws import RngPoint


@dataclass(frozen=True)
class ParseOrigin:
    """Where a yielded sample came from: its unit's place in the worker's list, its row, the RNG point."""

    unit_position: int
    position: Position
    point: RngPoint


class RecreateError(ValueError):
    """A buffered sample could not be parsed again as it was (the data changed, or a row is gone)."""


def _before(position: Position) -> Position | None:
    """The resume position just before ``position`` for the built-in sources (its last index minus one)."""
    if not position:
        return None
    return (*position[:-1], position[-1] - 1)


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
    """The rows the origins name, keyed by ``(unit_position, position)``; each unit is read once.

    Reading starts just before the earliest row wanted of a unit; when that finds nothing (a
    source whose positions resume differently), the unit is read from its start. A row that
    cannot be found raises :class:`RecreateError` naming the dataset, the unit and the row.
    """
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
        found = _scan(source, unit, _before(min(wanted)), wanted)
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
