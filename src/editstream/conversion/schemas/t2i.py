"""Checks for the ``t2i_pretrain`` schema: ``image`` bytes + ``captions`` JSON object string."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ...format.columns import SCHEMA_COLUMNS
from ...format.rowproblems import t2i_problems

NAME = "t2i_pretrain"
COLUMN_TYPES = SCHEMA_COLUMNS[NAME]
REQUIRED_COLUMNS = tuple(COLUMN_TYPES)


def check_row(row: Mapping[str, Any]) -> str | None:
    """The first reason this row would fail the T2I parser, or ``None``.

    Bad (always: the parser decodes the image and encodes every caption): an image whose header
    does not parse or is over the limits, ``captions`` that is not a JSON object string, or a
    caption value that is not text (phrases shared with the loader, ``format.rowproblems``).
    """
    return next(t2i_problems(row), None)
