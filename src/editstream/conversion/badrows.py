"""Bad rows: how the converter finds a row bad (its kind's checks) and the entry report.json lists for it.

A :class:`BadRow` is one shape for every source shape: a parquet row names its row group and
row and whether its parser always fails on it, a JSONL line names its line number and the media
that was missing. It is serialised only at the file boundary (report.json, done records).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, fields
from typing import Any

from ..kinds import Certainty, RowCheck, RowProblem


@dataclass(frozen=True, kw_only=True)
class BadRow:
    """One row (or line) its kind's checks find bad, where it is, and whether it was left out."""

    file: str
    row_group: int | None = None
    """Parquet rows: the row's row group and its index in it."""
    row: int | None = None
    line: int | None = None
    """JSONL lines: the line number, counted from 1 as an editor shows it."""
    key: str
    reason: str
    fails: Certainty | None = None
    """Parquet rows: whether the training-time parser always fails on the row, or only if its draws reach it."""
    shard: str
    dropped: bool
    missing: tuple[str, ...] = ()
    """JSONL lines: the media names that could not be read at conversion time."""

    def to_json(self) -> dict[str, Any]:
        """The report.json entry: fields in declaration order, those that do not apply left out."""
        d: dict[str, Any] = {}
        for f in fields(self):
            name, value = f.name, getattr(self, f.name)
            if name == "fails" and value is not None:
                d[name] = value.value
            elif name == "missing":
                if value:
                    d[name] = list(value)
            elif value is not None:
                d[name] = value
        return d

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> BadRow:
        """The entry ``to_json`` wrote (a ``TypeError`` or ``ValueError`` when it is not one)."""
        fails = d.get("fails")
        return cls(
            **{**d, "fails": None if fails is None else Certainty(fails), "missing": tuple(d.get("missing", ()))}
        )


def checked_problems(check_row: RowCheck, row: Mapping[str, Any], first_only: bool = False) -> list[RowProblem]:
    """The row's problems (the first alone with ``first_only``); a check that raises on the row
    marks the row bad with the error, so one odd row cannot stop a conversion."""
    try:
        problems = check_row(row)
        if first_only:
            first = next(problems, None)
            return [first] if first is not None else []
        return list(problems)
    except Exception as exc:  # noqa: BLE001 - a check that trips over a row marks the row bad
        return [RowProblem(f"schema check failed: {type(exc).__name__}: {exc}")]


DROP_NOTE = (
    "bad rows were dropped (--drop-bad-rows): row positions no longer match the parquet "
    "source, so the WebDataset backend does not reproduce the parquet backend's samples"
)
"""What report.json (and a warning) says when bad rows were left out of the shards."""
