"""The first N records of a dataset as pictures and words: what a preview shows.

Each row is drawn by the preview function of its kind (:mod:`editstream.preview.record` has the
contract): the kind named in a converted root's manifest, the kind detected from a parquet
directory's columns, the kind foreign shards are read as, or the JSONL + media kind for a
``.jsonl`` file. Data whose kind is not registered, or has no preview function, is refused
with a :class:`NoPreviewError` that says so. Records are read in storage order (no shuffle).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator, Mapping
from typing import Any

from ..format import detect as d
from ..format.manifest import Manifest
from ..format.rowcodec import decode_sample
from ..format.sft import LINE_COLUMN, MEDIA_COLUMN, media_path, referenced_media
from ..format.tarreader import iter_samples
from ..io import storage
from ..io.lines import read_jsonl_lines
from ..io.parquet import iter_row_group_rows, open_parquet
from ..io.ranged import open_read
from ..io.storage import StorageOptions
from ..kinds import DatasetKind, SourceShape, UnknownKindError, all_kinds, detect_kind, get_kind, resolve
from ..loader.rows import BadSample
from ..loader.sources.foreign import ForeignTarSource, default_columns, expand_shards
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


def foreign_kind() -> DatasetKind:
    """The kind foreign shards are read as by default: the first kind the foreign source has a member map for."""
    return next(k for k in all_kinds() if default_columns(k.columns) is not None)


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


def _jsonl(url: str, media_dir: str | None, so: StorageOptions | None) -> Iterator[Record]:
    kind = _jsonl_kind(url)
    for number, line in enumerate(read_jsonl_lines(url, so), start=1):
        media: dict[str, Any] = {}
        try:
            item = json.loads(line)
        except ValueError:
            item = None
        for name, is_folder in referenced_media(item):
            if media_dir is None or is_folder or "image" not in item:
                continue
            try:
                media[name] = storage.read_bytes(media_path(media_dir, name), so)
            except (FileNotFoundError, OSError):
                media[name] = None
        row = {LINE_COLUMN: line, MEDIA_COLUMN: media}
        yield to_record(kind, f"{url.rsplit('/', 1)[-1]} line {number}", row)


def collect(
    data: str, n: int, *, media_dir: str | None = None, storage_options: StorageOptions | None = None
) -> list[Record]:
    """The first ``n`` records of ``data`` (see the module docstring for what ``data`` may be)."""
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
        records = _jsonl(data, media_dir, storage_options)
    else:
        raise ValueError(f"{data}: nothing to preview here ({found.kind.replace('_', ' ')})")
    out = []
    for record in records:
        out.append(record)
        if len(out) >= n:
            break
    return out
