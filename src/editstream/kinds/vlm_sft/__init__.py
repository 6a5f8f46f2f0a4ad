"""The VLM supervised fine-tuning kind: LLaVA-style JSONL lines plus the media they name, converted to rows
``{"line": str, "media": {name: bytes | None | {entry: bytes | None}}}``; problems are reported, never fixed, so
the loader drops the row at the reference's point."""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from typing import Any

from ...format.images import image_decode_note, image_header_problem
from ...format.sft import LINE_COLUMN, MEDIA_COLUMN, OPT_OUT, referenced_media
from ..record import DatasetKind, Part, RowProblem
from ..shapes import SourceShape


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
    problem = conversation_problem(item)
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
