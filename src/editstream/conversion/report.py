"""What report.json says of rows: bad rows and image notes (rows that train, but decode to other
pixels than the file holds); both travel in done records, so a resumed conversion reports the same."""

from __future__ import annotations

import itertools
from collections.abc import Mapping
from dataclasses import dataclass, fields
from typing import Any

from ..kinds import Certainty, DatasetKind, RowCheck, RowProblem


@dataclass(frozen=True, kw_only=True)
class BadRow:
    """One row its kind's checks find bad, where it is (parquet: ``row_group`` and ``row``; JSONL: ``line``
    from 1), whether it was left out, whether the parser always ``fails`` on it (parquet) and the media
    ``missing`` at conversion time (JSONL)."""

    file: str
    row_group: int | None = None
    row: int | None = None
    line: int | None = None
    key: str
    reason: str
    fails: Certainty | None = None
    shard: str
    dropped: bool
    missing: tuple[str, ...] = ()

    def to_json(self) -> dict[str, Any]:
        """The report.json entry: fields in declaration order, those that do not apply left out."""
        d = _entry(self)
        if self.fails is not None:
            d["fails"] = self.fails.value
        if self.missing:
            d["missing"] = list(self.missing)
        return d

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> BadRow:
        """The entry ``to_json`` wrote (a ``TypeError`` or ``ValueError`` when it is not one)."""
        fails = d.get("fails")
        return cls(
            **{**d, "fails": None if fails is None else Certainty(fails), "missing": tuple(d.get("missing", ()))}
        )


@dataclass(frozen=True, kw_only=True)
class RowNote:
    """One note on one row (or JSONL line): where it is, as :class:`BadRow` says it, and what its parser does."""

    file: str
    row_group: int | None = None
    row: int | None = None
    line: int | None = None
    key: str
    shard: str
    note: str

    def to_json(self) -> dict[str, Any]:
        """The report.json entry: fields in declaration order, those that do not apply left out."""
        return _entry(self)

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> RowNote:
        return cls(**d)


def _entry(record: BadRow | RowNote) -> dict[str, Any]:
    return {f.name: value for f in fields(record) if (value := getattr(record, f.name)) not in (None, ())}


def checked_problems(check_row: RowCheck, row: Mapping[str, Any], first_only: bool = False) -> list[RowProblem]:
    """The row's problems (the first alone with ``first_only``); a check that raises marks the row bad."""
    try:
        problems = check_row(row)
        return list(itertools.islice(problems, 1) if first_only else problems)
    except Exception as exc:  # noqa: BLE001 - a check that trips over a row marks the row bad
        return [RowProblem(f"schema check failed: {type(exc).__name__}: {exc}")]


def notes_of(kind: DatasetKind, row: Mapping[str, Any]) -> list[str]:
    """The kind's notes on ``row``; a note check that raises gives a note saying so."""
    try:
        return list(kind.row_notes(row))
    except Exception as exc:  # noqa: BLE001 - notes are advisory, a failing check is reported as one
        return [f"note check failed: {type(exc).__name__}: {exc}"]


DROP_NOTE = (
    "bad rows were dropped (--drop-bad-rows): row positions no longer match the parquet "
    "source, so the WebDataset backend does not reproduce the parquet backend's samples"
)
"""What report.json (and a warning) says when bad rows were left out of the shards."""

REPORT_KEYS = ("num_image_notes", "image_notes")
"""The keys report.json gets when a conversion has notes (none otherwise)."""


def report_entries(notes: list[RowNote]) -> dict[str, Any]:
    """report.json's notes: ``{}`` when there are none, so reports without notes keep their bytes."""
    if not notes:
        return {}
    return {REPORT_KEYS[0]: len(notes), REPORT_KEYS[1]: [n.to_json() for n in notes]}
