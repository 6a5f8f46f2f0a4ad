"""Checks for the ``t2i_pretrain`` schema: ``image`` bytes + ``captions`` JSON object string."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from ...format.columns import SCHEMA_COLUMNS
from ...format.images import image_header_problem

NAME = "t2i_pretrain"
COLUMN_TYPES = SCHEMA_COLUMNS[NAME]
REQUIRED_COLUMNS = tuple(COLUMN_TYPES)


def check_row(row: Mapping[str, Any]) -> str | None:
    """The first reason this row would fail the T2I parser, or ``None``.

    Bad (always: the parser decodes the image and encodes every caption): an image whose header
    does not parse or is over the limits, ``captions`` that is not a JSON object string, or a
    caption value that is not text.
    """
    captions = row.get("captions")
    if not isinstance(captions, str):
        return f"captions is {type(captions).__name__}, not a JSON string"
    try:
        parsed = json.loads(captions)
    except json.JSONDecodeError as exc:
        return f"caption JSON does not parse ({exc})"
    if not isinstance(parsed, dict):
        return f"caption JSON is a {type(parsed).__name__}, not an object"
    for key, value in parsed.items():
        if not isinstance(value, str):
            return f"caption {key!r} is a {type(value).__name__}, not text"
    problem = image_header_problem(row.get("image"))
    if problem is not None:
        return f"image: {problem}"
    return None
