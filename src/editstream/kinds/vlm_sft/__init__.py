"""The VLM supervised fine-tuning kind: LLaVA-style JSONL lines plus the media they name, converted to rows
``{"line": str, "media": {name: bytes | None | {entry: bytes | None}}}``; problems are reported, never fixed, so
the loader drops the row at the reference's point."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from ...format.images import image_decode_note
from ...format.sft import MEDIA_COLUMN
from ..lines import line_problems
from ..record import DatasetKind, RowProblem
from ..shapes import SourceShape


def conversation_problem(item: Any) -> str | None:
    """Why a parsed line is not a VLM conversation record the loader trains on, or ``None``."""
    if not isinstance(item, dict):
        return f"line is a JSON {type(item).__name__}, not an object"
    turns = item.get("conversations")
    if not isinstance(turns, list) or not turns:
        return "line has no conversations list (a vlm_sft line is {image or video, conversations})"
    for i, turn in enumerate(turns):
        texts = isinstance(turn, dict) and isinstance(turn.get("from"), str) and isinstance(turn.get("value"), str)
        if not texts:
            return f"conversation turn {i} is not a {{from, value}} pair of texts"
    if not any(turn["from"] == "gpt" for turn in turns):
        return "no gpt turn: nothing to learn from (the loader drops the line as no_loss_labels)"
    return None


def row_problems(row: Mapping[str, Any]) -> Iterator[RowProblem]:
    """What is known at conversion time: a line that is not a JSON conversation record with a gpt turn, media
    refused or missing, images whose header does not parse (the ``<video>`` rule depends on the frames drawn)."""
    yield from line_problems(row, conversation_problem)


def row_notes(row: Mapping[str, Any]) -> Iterator[str]:
    """Media (images, frame-folder frames) that decode without error but not to their pixels."""
    for name, value in (row.get(MEDIA_COLUMN) or {}).items():
        blobs = value.items() if isinstance(value, dict) else [("", value)]
        for entry, blob in blobs:
            note = image_decode_note(blob)
            if note is not None:
                yield f"media {name + entry!r}: {note}"


KIND = DatasetKind(
    name="vlm_sft",
    summary="VLM fine-tuning: LLaVA-style JSONL conversations plus a media directory",
    row_problems=row_problems,
    row_notes=row_notes,
    source=SourceShape.JSONL_MEDIA,
    image_columns=(MEDIA_COLUMN,),
    dataset="editstream.kinds.vlm_sft.dataset:SftJSONLIterableDataset",
    preview="editstream.kinds.vlm_sft.preview:conversation",
    synth="editstream.kinds.vlm_sft.synth:write_conversations",
    detectable=False,
)
