"""The first N records of a dataset as pictures and words: what a preview shows.

Each row is drawn by the preview function of its kind (:mod:`editstream.preview.record` has the
contract): the kind named in a converted root's manifest, the kind detected from a parquet
directory's columns, the kind foreign shards are read as, or the JSONL + media kind for a
``.jsonl`` file. Data whose kind is not registered, or has no preview function, is refused
with a :class:`NoPreviewError` that says so. Records are read in storage order (no shuffle).
A JSONL line's media names outside the media directory are not read (unless
``allow_outside_media_dir``): the record says they were refused, as convert and the loader do.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator, Mapping
from typing import Any

from ..data.rows import BadSample
from ..data.sources.foreign import ForeignTarSource, expand_shards, foreign_kind
from ..format import detect as d
from ..format.manifest import Manifest
from ..format.rowcodec import decode_sample
from ..format.sft import (
    LINE_COLUMN,
    MEDIA_COLUMN,
    OPT_OUT,
    media_path,
    outside_media_dir,
    referenced_media,
    sort_frames,
)
from ..format.tarreader import iter_samples
from ..io import storage
from ..io.lines import read_jsonl_lines
from ..io.parquet import iter_row_group_rows, open_parquet
from ..io.ranged import open_read
from ..io.storage import StorageOptions
from ..kinds import DatasetKind, SourceShape, UnknownKindError, all_kinds, detect_kind, get_kind, resolve
from .record import Layout, PreviewFunction, Record

__all__ = ["Layout", "NoPreviewError", "Record", "collect", "foreign_kind", "preview_function", "to_record"]


class NoPreviewError(ValueError):
    """The data is of no registered kind, or of a kind without a preview function."""


def preview_function(kind: DatasetKind) -> PreviewFunction:
    """The preview function ``kind`` names; a :class:`NoPreviewError` when it names none."""
    if kind.preview is None:
        raise NoPreviewError(f"dataset kind {kind.name!r} has no preview function")
    function: PreviewFunction = resolve(kind.preview)
    return function


def to_record(kind: DatasetKind | str, title: str, row: Mapping[str, Any]) -> Record:
    """The record of one ``row`` of ``kind`` (a kind or a kind's name), drawn by the kind's preview function."""
    found = get_kind(kind) if isinstance(kind, str) else kind
    record = preview_function(found)(title, row)
    record.kind = found.name
    return record


def _manifest_kind(root: str, schema: str) -> DatasetKind:
    try:
        return get_kind(schema)
    except UnknownKindError:
        raise NoPreviewError(
            f"{root} holds {schema!r} data (manifest.json), a kind no installed package registers"
        ) from None


def _converted(root: str, so: StorageOptions | None) -> Iterator[Record]:
    m = Manifest.read(root, so)
    kind = _manifest_kind(root, m.schema)
    preview_function(kind)  # refused before a shard is opened
    for shard in m.shards:
        url = storage.join(root, shard.path)
        with open_read(url, so) as f:
            for key, _, members in iter_samples(f, source=url):
                yield to_record(kind, f"{shard.path} {key}", decode_sample(key, members, strict=False))


def _column_kind(url: str, columns: Iterable[str]) -> DatasetKind:
    names = sorted(columns)
    kind = detect_kind(names)
    if kind is None:
        known = "; ".join(f"{k.name}: {sorted(k.columns)}" for k in all_kinds() if k.detectable and k.columns)
        raise NoPreviewError(f"the columns of {url} ({names}) fit no registered dataset kind ({known})")
    return kind


def _parquet(root: str, so: StorageOptions | None) -> Iterator[Record]:
    for url in storage.list_files(root, ".parquet", so):
        name = url.rsplit("/", 1)[-1]
        with open_parquet(url, so, streaming=True) as pf:
            kind = _column_kind(url, (f.name for f in pf.schema_arrow))
            for rg in range(pf.metadata.num_row_groups):
                for i, row in iter_row_group_rows(pf, url, rg):
                    yield to_record(kind, f"{name} rg {rg} row {i}", row)


def _foreign(pattern: str, so: StorageOptions | None) -> Iterator[Record]:
    kind = foreign_kind()
    source = ForeignTarSource(dataset_name="preview", storage_options=so, schema=kind.name)
    for url in expand_shards(pattern, so):
        for (index,), row in source.iter_unit_rows(url, None):
            title = f"{url.rsplit('/', 1)[-1]} sample {index}"
            if isinstance(row, BadSample):
                yield Record(title, [], [f"(unreadable: {row.error})"], kind.name)
            else:
                yield to_record(kind, f"{title} {row['__key__']}", row)


def _jsonl_kind(url: str) -> DatasetKind:
    kinds = [k for k in all_kinds() if k.source is SourceShape.JSONL_MEDIA]
    if not kinds:
        raise NoPreviewError(f"{url} is a JSONL file, and no registered dataset kind reads JSONL + media")
    return kinds[0]


FOLDER_FRAMES = 4
"""Frames of a frame folder a preview shows (its first, in the loader's frame order)."""


def _media_bytes(url: str, so: StorageOptions | None) -> bytes | None:
    """The bytes of one media file, ``None`` when it is not there (drawn as missing)."""
    try:
        return storage.read_bytes(url, so)
    except OSError:
        return None


def _frames(url: str, so: StorageOptions | None) -> dict[str, bytes | None] | None:
    """The first frames of a frame folder as the loader orders them (``sort_frames``), read from
    the folder like the converter does; ``None`` when the folder is not there."""
    try:
        names = storage.list_names(url, so)
    except OSError:
        return None
    return {name: _media_bytes(media_path(url, name), so) for name in sort_frames(names)[:FOLDER_FRAMES]}


def _jsonl(url: str, media_dir: str | None, so: StorageOptions | None, allow_outside: bool) -> Iterator[Record]:
    kind = _jsonl_kind(url)
    for number, line in enumerate(read_jsonl_lines(url, so), start=1):
        media: dict[str, Any] = {}
        refused: list[str] = []
        try:
            item = json.loads(line)
        except ValueError:
            item = None
        for name, is_folder in referenced_media(item):
            if not allow_outside and outside_media_dir(name):
                refused.append(name)
                continue
            if media_dir is None or not (is_folder or "image" in item):
                continue  # a video file is named, not drawn: nothing to read
            where = media_path(media_dir, name)
            media[name] = _frames(where, so) if is_folder else _media_bytes(where, so)
        row = {LINE_COLUMN: line, MEDIA_COLUMN: media}
        record = to_record(kind, f"{url.rsplit('/', 1)[-1]} line {number}", row)
        for name in dict.fromkeys(refused):
            record.texts.append(f"(media {name!r} is outside the media directory: refused, not read; {OPT_OUT})")
        yield record


def collect(
    data: str,
    n: int,
    *,
    media_dir: str | None = None,
    storage_options: StorageOptions | None = None,
    allow_outside_media_dir: bool = False,
) -> list[Record]:
    """The first ``n`` records of ``data`` (see the module docstring for what ``data`` may be);
    ``allow_outside_media_dir`` lets a JSONL's media names leave ``media_dir``."""
    found = d.detect(data, storage_options)
    if found.kind == d.CONVERTED:
        records: Iterator[Record] = _converted(data, storage_options)
    elif found.kind == d.PARQUET_DIR:
        records = _parquet(data, storage_options)
    elif found.kind in (d.SHARD_PATTERN, d.TAR_FILE):
        records = _foreign(data, storage_options)
    elif found.kind == d.SHARD_DIR:
        records = _foreign(d.shards_in(data), storage_options)
    elif found.kind == d.JSONL_FILE:
        records = _jsonl(data, media_dir, storage_options, allow_outside_media_dir)
    else:
        raise ValueError(f"{data}: nothing to preview here ({found.kind.replace('_', ' ')})")
    out = []
    for record in records:
        out.append(record)
        if len(out) >= n:
            break
    return out
