"""The VLM supervised fine-tuning kind: LLaVA-style JSONL lines plus the media they name.

A converted row is ``{"line": str, "media": {name: bytes | None | {entry: bytes | None}}}``
(``format.sft``). Problems are reported, never fixed: the row is kept verbatim so the loader
drops it at the reference's point, after the same random draws. The dataset, preview and synth
modules beside this record are named by dotted path.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from typing import Any

from ...format.images import image_decode_note, image_header_problem
from ...format.sft import LINE_COLUMN, MEDIA_COLUMN, OPT_OUT, outside_media_dir, referenced_media
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
    """Names the line references outside the media directory that were not read (left out of
    ``media``); with the opt-out they were read, so they are in ``media`` and not listed here."""
    names = [name for name, _ in referenced_media(item) if name not in media and outside_media_dir(name)]
    return list(dict.fromkeys(names))


def row_problems(row: Mapping[str, Any]) -> Iterator[RowProblem]:
    """What is known at conversion time: a line that is not JSON, media refused for being outside
    the media directory, media that is missing, images whose header does not parse. Rules of the
    conversation (a ``<video>`` marker, a gpt turn) are left to the loader."""
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
    """Media (images, frame-folder frames) that decode without error but not to their pixels;
    videos and missing media have no PNG header, so they never get a note."""
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
