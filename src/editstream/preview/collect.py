"""The first N records of a dataset (opened by ``editstream.data.open_data``), each drawn by its kind's preview
function; an undecodable row is shown as unreadable, media outside the media directory as refused."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..data.open import open_data
from ..data.raw_rows import BadRawRow, iter_rows
from ..data.rows import LineRow
from ..format.sft import OPT_OUT
from ..io.storage import StorageOptions
from ..kinds import DatasetKind, get_kind
from .record import Layout, PreviewFunction, Record

__all__ = ["Layout", "NoPreviewError", "Record", "collect", "preview_function", "to_record"]

FOLDER_FRAMES = 4
"""Frames of a frame folder a preview shows (its first, in the loader's frame order)."""


class NoPreviewError(ValueError):
    """The data is of no registered kind, or of a kind without a preview function."""


def preview_function(kind: DatasetKind) -> PreviewFunction:
    """The preview function ``kind`` names; a :class:`NoPreviewError` when it names none."""
    if kind.preview is None:
        raise NoPreviewError(f"dataset kind {kind.name!r} has no preview function")
    function: PreviewFunction = kind.code("preview")
    return function


def to_record(kind: DatasetKind | str, title: str, row: Mapping[str, Any]) -> Record:
    """The record of one ``row`` of ``kind`` (a kind or a kind's name), drawn by the kind's preview function."""
    found = get_kind(kind) if isinstance(kind, str) else kind
    function = preview_function(found)
    try:
        record = function(title, row)
    except Exception as exc:  # noqa: BLE001 - a kind's preview code failing on one row is shown on that row
        record = Record(
            title, [], [f"(the {found.name} preview function failed on this row: {type(exc).__name__}: {exc})"]
        )
    record.kind = found.name
    return record


def _title(where: Mapping[str, Any], row: Any) -> str:
    """A record's title from where its row is: the file or shard, then the row group and row, line or sample."""
    place = str(where.get("shard") or where.get("file", "?")).rsplit("/", 1)[-1]
    if "line" in where:
        return f"{place} line {where['line']}"
    if "sample" in where:
        key = row.get("__key__") if isinstance(row, Mapping) else None
        return f"{place} sample {where['sample']}" + (f" {key}" if key else "")
    if "shard" in where:
        return f"{place} row {where.get('row_group', 0)}/{where.get('row', '?')}"
    return f"{place} rg {where.get('row_group', 0)} row {where.get('row', '?')}"


def _drawn(kind: DatasetKind, title: str, row: Any) -> Record:
    """The record of a raw row: a JSONL line's media read first (a frame folder's first frames)."""
    if not isinstance(row, LineRow):
        return to_record(kind, title, row)
    stored, refused = row.record(FOLDER_FRAMES, videos=False)
    record = to_record(kind, title, stored)
    for name in refused:
        record.texts.append(f"(media {name!r} is outside the media directory: refused, not read; {OPT_OUT})")
    return record


def collect(
    data: str,
    n: int,
    *,
    backend: str | None = None,
    media_dir: str | None = None,
    storage_options: StorageOptions | None = None,
    allow_outside_media_dir: bool = False,
) -> list[Record]:
    """The first ``n`` records of ``data``; a ``backend`` that does not fit it is a ``LayoutError``."""
    handle = open_data(
        data,
        backend=backend,
        storage_options=storage_options,
        media_dir=media_dir,
        allow_outside_media_dir=allow_outside_media_dir,
    )
    preview_function(handle.kind)  # refused before a row is read
    out: list[Record] = []

    def unreadable(bad: BadRawRow) -> None:
        out.append(Record(_title(bad.where, None), [], [f"(unreadable: {bad.error})"], handle.kind.name))

    rows = iter_rows(handle, on_bad=unreadable)
    try:
        for raw in rows:
            if len(out) >= n:
                break
            out.append(_drawn(handle.kind, _title(raw.where, raw.row), raw.row))
    finally:
        rows.close()
    return out[:n]
