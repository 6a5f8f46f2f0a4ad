"""Checks for the ``vlm_sft`` schema: one JSONL line plus the media it references.

A converted row is ``{"line": str, "media": {name: bytes | None | {entry: bytes | None}}}``
(see ``format.sft``). Problems are reported, never fixed: the row is kept verbatim so the
loader drops it at the reference's point, after the same random draws.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from ...format.images import image_header_problem
from ...format.sft import LINE_COLUMN, MEDIA_COLUMN, SCHEMA

NAME = SCHEMA
REQUIRED_COLUMNS = (LINE_COLUMN, MEDIA_COLUMN)
COLUMN_TYPES: dict[str, str] = {}  # rows come from JSONL lines, not typed parquet columns


def missing_media(row: Mapping[str, Any]) -> list[str]:
    """Media names (and frame-folder entries) the row references that could not be read."""
    missing = []
    for name, value in (row.get(MEDIA_COLUMN) or {}).items():
        if value is None:
            missing.append(name)
        elif isinstance(value, dict):
            missing.extend(name + entry for entry, blob in value.items() if blob is None)
    return missing


def check_row(row: Mapping[str, Any]) -> str | None:
    """Why the loader will drop this line (``; ``-joined), or ``None`` when nothing is known to be wrong.

    Known at conversion time: a blank line or JSON that does not parse, media that is missing,
    and images whose header does not parse. Rules of the conversation (a ``<video>`` marker, a
    gpt turn) are left to the loader.
    """
    line = row.get(LINE_COLUMN)
    if not isinstance(line, str):
        return f"line is a {type(line).__name__}, not text"
    if not line.strip():
        return "blank line"
    try:
        item = json.loads(line)
    except json.JSONDecodeError as exc:
        return f"line is not valid JSON ({exc})"
    problems = [f"missing media {name!r}" for name in missing_media(row)]
    media = row.get(MEDIA_COLUMN) or {}
    images = item.get("image") if isinstance(item, dict) else None
    for name in images if type(images) is list else [images]:
        if isinstance(name, str) and isinstance(media.get(name), bytes):
            problem = image_header_problem(media[name])
            if problem is not None:
                problems.append(f"image {name!r}: {problem}")
    return "; ".join(problems) or None
