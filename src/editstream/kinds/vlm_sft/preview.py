"""The VLM fine-tuning kind's preview: a JSONL + media line (``{"line", "media"}``) as its images, or a
video's first frames, and the conversation."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from editstream.plugin import LINE_COLUMN, MEDIA_COLUMN, Record, line_images


def _turns(item: Any) -> list[str]:
    turns = item.get("conversations") if isinstance(item, dict) else None
    if not isinstance(turns, list):
        return ["(no conversation)"]
    return [f"{t.get('from', '?')}: {t.get('value', '')}" for t in turns if isinstance(t, dict)]


def conversation(title: str, row: Mapping[str, Any]) -> Record:
    """A JSONL line's images (a frame folder's first four; a video file named, not drawn) and its turns."""
    line = row.get(LINE_COLUMN) or ""
    media: Mapping[str, Any] = row.get(MEDIA_COLUMN) or {}
    try:
        item = json.loads(line)
    except ValueError:
        return Record(title, [], [f"(line is not JSON: {line[:80]})"])
    video = item.get("video") if isinstance(item, dict) and "image" not in item else None
    if isinstance(video, str) and not video.endswith("/"):  # a video file: named, not drawn
        return Record(title, [], [f"[video {item['video']}]", *_turns(item)])
    return Record(title, line_images(item, media), _turns(item))
