"""The row checks every JSONL + media kind shares, so a kind writes only why a parsed line is not one of its
records: a converted line (``{"line", "media"}``) that is not JSON text, media refused or missing, images
whose header does not parse."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator, Mapping
from typing import Any

from ..format.images import image_header_problem
from ..format.sft import LINE_COLUMN, MEDIA_COLUMN, OPT_OUT, referenced_media
from .record import Part, RowProblem

ItemCheck = Callable[[Any], "str | None"]
"""A parsed line -> why it is not a record of the kind (``None``: it is one)."""


def missing_media(row: Mapping[str, Any]) -> list[str]:
    """Media names (and frame-folder entries) the row references that could not be read."""
    missing = []
    for name, value in (row.get(MEDIA_COLUMN) or {}).items():
        if value is None:
            missing.append(name)
        elif isinstance(value, dict):
            missing.extend(name + entry for entry, blob in value.items() if blob is None)
    return missing


def refused_media(item: Any, media: Mapping[str, Any]) -> list[str]:
    """Names the line references that were refused (outside the media directory), so left out of ``media``."""
    return list(dict.fromkeys(name for name, _ in referenced_media(item) if name not in media))


def line_problems(row: Mapping[str, Any], item_problem: ItemCheck) -> Iterator[RowProblem]:
    """The problems of a converted line, in order: a line that is not JSON text, ``item_problem`` of the parsed
    line (each of these the only one), then media refused or missing and ``"image"`` headers that do not parse."""
    line = row.get(LINE_COLUMN)
    if not isinstance(line, str):
        yield RowProblem(f"line is a {type(line).__name__}, not text", Part.TEXT)
        return
    if not line.strip():
        yield RowProblem("blank line", Part.TEXT)
        return
    try:
        item = json.loads(line)
    except json.JSONDecodeError as exc:
        yield RowProblem(f"line is not valid JSON ({exc})", Part.TEXT)
        return
    problem = item_problem(item)
    if problem is not None:
        yield RowProblem(problem, Part.TEXT)
        return
    media = row.get(MEDIA_COLUMN) or {}
    for name in refused_media(item, media):
        yield RowProblem(
            f"media {name!r} is outside the media directory: refused, not read ({OPT_OUT} reads it)", Part.MEDIA
        )
    for name in missing_media(row):
        yield RowProblem(f"missing media {name!r}", Part.MEDIA, missing=(name,))
    images = item.get("image") if isinstance(item, dict) else None
    for image in images if type(images) is list else [images]:
        if isinstance(image, str) and isinstance(media.get(image), bytes):
            problem = image_header_problem(media[image])
            if problem is not None:
                yield RowProblem(f"image {image!r}: {problem}", Part.IMAGE)
