"""How a converter finds a row bad: its kind's row checks, run so a check that trips over a row marks it bad."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..kinds import RowCheck, RowProblem


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
