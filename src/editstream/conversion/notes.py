"""Image notes: rows that convert and train without error, but whose images the parser decodes
to other pixels than the file holds (a 16-bit greyscale PNG clipped to white, as the reference
clips it).

A note is not a bad row: the row is kept and counted as good, its pixels stay the reference's,
and ``report.json`` lists it under ``image_notes`` (present only when there are notes, so the
report of a conversion without them is unchanged). Notes travel in done records, so a resumed
conversion reports the same notes as an uninterrupted one.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, fields
from typing import Any

from ..kinds import DatasetKind


@dataclass(frozen=True, kw_only=True)
class RowNote:
    """One note on one row (or JSONL line): where the row is and what its parser does to it."""

    file: str
    row_group: int | None = None
    """Parquet rows: the row's row group and its index in it."""
    row: int | None = None
    line: int | None = None
    """JSONL lines: the line number, counted from 1."""
    key: str
    shard: str
    note: str

    def to_json(self) -> dict[str, Any]:
        """The report.json entry: fields in declaration order, those that do not apply left out."""
        return {f.name: getattr(self, f.name) for f in fields(self) if getattr(self, f.name) is not None}

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> RowNote:
        """The entry ``to_json`` wrote (a ``TypeError`` when it is not one)."""
        return cls(**d)


def notes_of(kind: DatasetKind, row: Mapping[str, Any]) -> list[str]:
    """The kind's notes on ``row``; a note check (a plug-in's) that raises on the row gives a note
    saying so, so it neither stops the conversion nor goes unsaid."""
    try:
        return list(kind.row_notes(row))
    except Exception as exc:  # noqa: BLE001 - notes are advisory, a failing check is reported as one
        return [f"note check failed: {type(exc).__name__}: {exc}"]


REPORT_KEYS = ("num_image_notes", "image_notes")
"""The keys report.json gets when a conversion has notes (none otherwise)."""


def report_entries(notes: list[RowNote]) -> dict[str, Any]:
    """report.json's notes: ``{}`` when there are none, so reports without notes keep their bytes."""
    if not notes:
        return {}
    return {REPORT_KEYS[0]: len(notes), REPORT_KEYS[1]: [n.to_json() for n in notes]}
