"""A third-party editstream dataset kind read from JSONL + media: instruction edit pairs (before -> after).

A line names two images in its media directory and the edit between them,
``{"image": ["pairs/00001_before.png", "pairs/00001_after.png"], "instruction": "make the sky red"}``.
This module is what editstream loads from the ``editstream.kinds`` entry point, for every command, so it
stays light: the kind record (its source shape is JSONL + media), its row checks and its preview. The
training dataset and the synthetic-data writer live in :mod:`editstream_pairs.data`.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from typing import Any

from editstream.plugin import (
    LINE_COLUMN,
    MEDIA_COLUMN,
    DatasetKind,
    Layout,
    Record,
    RowProblem,
    SourceShape,
    line_images,
    line_problems,
)

NAME = "edit_pairs"


def pair_problem(item: Any) -> str | None:
    """Why a parsed line is not an edit pair the dataset reads (``None``: it is one)."""
    if not isinstance(item, dict):
        return f"line is a JSON {type(item).__name__}, not an object"
    images = item.get("image")
    if not isinstance(images, list) or len(images) != 2 or not all(isinstance(name, str) for name in images):
        return "image is not a list of two media names (before, after)"
    text = item.get("instruction")
    if not isinstance(text, str) or not text.strip():
        return f"instruction is {text!r}, not text"
    return None


def row_problems(row: Mapping[str, Any]) -> Iterator[RowProblem]:
    """Why the dataset would drop a converted line (``{"line", "media"}``): it is not an edit pair, or an image
    was refused (outside the media directory), is missing, or has a header that does not parse."""
    yield from line_problems(row, pair_problem)


def preview(title: str, row: Mapping[str, Any]) -> Record:
    """The image before, the instruction, and the image after it."""
    try:
        item = json.loads(row.get(LINE_COLUMN) or "")
    except ValueError:
        return Record(title, [], [f"(line is not JSON: {str(row.get(LINE_COLUMN))[:80]})"])
    text = item.get("instruction") if isinstance(item, dict) else None
    images = line_images(item, row.get(MEDIA_COLUMN) or {})
    return Record(title, images, [str(text) if text else "(no instruction)"], layout=Layout.CHAIN)


KIND = DatasetKind(
    name=NAME,
    aliases=("pairs",),
    summary="instruction edit pairs from JSONL + media: an image, the edit, the edited image",
    row_problems=row_problems,
    source=SourceShape.JSONL_MEDIA,
    image_columns=(MEDIA_COLUMN,),
    dataset="editstream_pairs.data:EditPairsIterableDataset",
    preview="editstream_pairs:preview",
    synth="editstream_pairs.data:write_edit_pairs",
    detectable=False,
)
