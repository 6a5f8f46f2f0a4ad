"""Checks for the ``unified_edit`` schema: ``image_list`` (>= 2 images) + ``instruction_list``."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ...format.columns import SCHEMA_COLUMNS
from ...format.rowproblems import unified_edit_problems

NAME = "unified_edit"
COLUMN_TYPES = SCHEMA_COLUMNS[NAME]
REQUIRED_COLUMNS = tuple(COLUMN_TYPES)


def check_row(row: Mapping[str, Any]) -> str | None:
    """The first reason this row would fail ``UnifiedEditIterableDataset.parse_row``, or ``None``.

    A row is always bad when it has fewer than 2 images or no instruction list; it is bad in
    the epochs whose draws reach an image whose header does not parse or is over the limits,
    or an instruction entry that is missing, empty or not text (:class:`IfDrawn`). The phrases
    come from ``format.rowproblems``, which the loader's drop lines share.
    """
    return next(unified_edit_problems(row), None)
