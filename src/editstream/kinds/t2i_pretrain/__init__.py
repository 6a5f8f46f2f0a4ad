"""The text-to-image kind: ``image`` bytes + ``captions``, a JSON object string of captions."""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from typing import Any

from ...format.images import image_decode_note, image_header_problem
from ..record import DatasetKind, Part, RowProblem

COLUMNS = {"image": "binary", "captions": "string"}


def _caption_problem(captions: Any) -> RowProblem | None:
    if not isinstance(captions, str):
        return RowProblem(f"captions is {type(captions).__name__}, not a JSON string", Part.TEXT)
    try:
        parsed = json.loads(captions)
    except json.JSONDecodeError as exc:
        return RowProblem(f"caption JSON does not parse ({exc})", Part.TEXT)
    if not isinstance(parsed, dict):
        return RowProblem(f"caption JSON is a {type(parsed).__name__}, not an object", Part.TEXT)
    for key, value in parsed.items():
        if not isinstance(value, str):
            return RowProblem(f"caption {key!r} is a {type(value).__name__}, not text", Part.TEXT)
    return None


def row_problems(row: Mapping[str, Any]) -> Iterator[RowProblem]:
    """Captions that are not a JSON object of text, then a bad image header (always fatal: both are parsed)."""
    problem = _caption_problem(row.get("captions"))
    if problem is not None:
        yield problem
    image = image_header_problem(row.get("image"))
    if image is not None:
        yield RowProblem(f"image: {image}", Part.IMAGE)


def row_notes(row: Mapping[str, Any]) -> Iterator[str]:
    """The image, when it decodes without error but not to its pixels (``image_decode_note``)."""
    note = image_decode_note(row.get("image"))
    if note is not None:
        yield f"image: {note}"


KIND = DatasetKind(
    name="t2i_pretrain",
    aliases=("t2i",),
    summary="text-to-image: one image and a JSON object of its captions",
    columns=COLUMNS,
    row_problems=row_problems,
    row_notes=row_notes,
    dataset="editstream.kinds.t2i_pretrain.dataset:T2IIterableDataset",
    preview="editstream.kinds.t2i_pretrain.preview:captioned_image",
    synth="editstream.kinds.t2i_pretrain.synth:write_captioned_images",
)
