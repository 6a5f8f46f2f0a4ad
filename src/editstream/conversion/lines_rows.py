"""Rows of a JSONL + media shard task: its byte range of the JSONL (checked against the plan's hash),
each line with the media the reference would open (absent media as ``None``, read ahead)."""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterator
from typing import Any

from ..data.rows import LineRow
from ..data.sources.jsonl import DirectoryMedia
from ..format import manifest as mf
from ..format.sft import LINE_COLUMN, MEDIA_COLUMN
from ..io import storage
from ..io.lines import decode_lines
from ..io.prefetch import prefetch_ordered
from ..io.retry import RetryPolicy
from .task import LinePart, ShardTask

_LINES_AHEAD = 17


def line_media(media_dir: str, storage_options: dict[str, Any] | None, allow_outside: bool) -> Callable[[str], Any]:
    """``line -> {name: stored media}`` as a converted sample holds it (names outside the media directory
    left out unless ``allow_outside``)."""

    def read(line: str) -> dict[str, Any]:
        stored, _ = LineRow(line, DirectoryMedia(media_dir, storage_options, allow_outside)).record()
        media: dict[str, Any] = stored[MEDIA_COLUMN]
        return media

    return read


def _line_part(task: ShardTask) -> LinePart:
    part = task.part
    assert isinstance(part, LinePart) and len(task.slices) == 1
    return part


def task_lines(task: ShardTask) -> list[str]:
    """The task's lines, from its byte range of the JSONL; an error if the JSONL changed since planning."""
    part = _line_part(task)
    url = storage.join(task.src_root, task.slices[0].file)
    data = RetryPolicy().call(
        lambda: storage.read_bytes(url, task.storage_options, start=part.byte_start, end=part.byte_stop)
    )
    if hashlib.sha256(data).hexdigest() != part.sha256:
        raise ValueError(f"{url}: bytes {part.byte_start}:{part.byte_stop} changed since planning; convert again")
    lines = decode_lines(data, url)
    planned = task.slices[0].num_rows
    if len(lines) != planned:
        raise ValueError(f"{url}: bytes {part.byte_start}:{part.byte_stop} hold {len(lines)} lines, planned {planned}")
    return lines


def iter_line_rows(task: ShardTask) -> Iterator[tuple[mf.RowSlice, int, dict[str, Any]]]:
    """``(slice, line index, {"line": text, "media": {...}})`` for every line of the task, in order."""
    lines = task_lines(task)
    part = _line_part(task)
    read_media = line_media(part.media_dir, task.storage_options, part.allow_outside)
    s = task.slices[0]
    fetched = prefetch_ordered(lines, read_media, lambda _: 0, max_items=_LINES_AHEAD)
    for index, (line, media) in enumerate(fetched, start=s.start):
        yield s, index, {LINE_COLUMN: line, MEDIA_COLUMN: media.result()}


def line_place(s: mf.RowSlice, line_index: int) -> dict[str, int]:
    """Where a line is, for its notes: its line number, counted from 1."""
    return {"line": line_index + 1}
