"""The first N records of a dataset as pictures and words: what a preview shows.

A :class:`Record` is a list of images and a list of texts with a title (where it came from).
Edit chains are all their images with one phrasing of each edit between them; T2I rows their
image and captions; vlm_sft lines their images (or a video's first frames' names) and the
conversation. Records come from a converted root, a parquet directory, foreign shards (a
pattern) or a vlm_sft JSONL with its media directory, read in storage order (no shuffle).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from ..format import detect as d
from ..format.manifest import Manifest
from ..format.rowcodec import decode_sample
from ..format.sft import media_path, referenced_media
from ..format.tarreader import iter_samples
from ..io import storage
from ..io.lines import read_jsonl_lines
from ..io.parquet import iter_row_group_rows, open_parquet
from ..io.ranged import open_read
from ..io.storage import StorageOptions


@dataclass
class Record:
    """One thing to show: images (bytes, possibly undecodable), texts between/under them, a title."""

    title: str
    images: list[bytes | None] = field(default_factory=list)
    texts: list[str] = field(default_factory=list)
    kind: str = "unified_edit"


def _edit_record(title: str, row: dict[str, Any]) -> Record:
    images = list(row.get("image_list") or [])
    texts = []
    for phrasings in row.get("instruction_list") or []:
        if isinstance(phrasings, list) and phrasings:
            more = f"  (+{len(phrasings) - 1} phrasings)" if len(phrasings) > 1 else ""
            texts.append(f"{phrasings[0]}{more}")
        else:
            texts.append("(no phrasings)")
    return Record(title, images, texts, "unified_edit")


def _t2i_record(title: str, row: dict[str, Any]) -> Record:
    captions = row.get("captions")
    try:
        parsed = json.loads(captions) if isinstance(captions, str) else captions
        texts = [str(v) for v in parsed.values()] if isinstance(parsed, dict) else [str(parsed)]
    except ValueError:
        texts = [f"(captions do not parse: {str(captions)[:80]})"]
    return Record(title, [row.get("image")], texts or ["(no captions)"], "t2i_pretrain")


def _conversation(item: Any) -> list[str]:
    turns = item.get("conversations") if isinstance(item, dict) else None
    if not isinstance(turns, list):
        return ["(no conversation)"]
    return [f"{t.get('from', '?')}: {t.get('value', '')}" for t in turns if isinstance(t, dict)]


def _sft_record(title: str, line: str, media: dict[str, Any]) -> Record:
    try:
        item = json.loads(line)
    except ValueError:
        return Record(title, [], [f"(line is not JSON: {line[:80]})"], "vlm_sft")
    images: list[bytes | None] = []
    video = item.get("video") if isinstance(item, dict) and "image" not in item else None
    if isinstance(video, str) and not video.endswith("/"):  # a video file: named, not drawn
        return Record(title, [], [f"[video {item['video']}]", *_conversation(item)], "vlm_sft")
    for name, is_folder in referenced_media(item):
        value = media.get(name + ("/" if is_folder and not name.endswith("/") else ""), media.get(name))
        if isinstance(value, dict):  # a frame folder: its first frames
            images.extend(v for _, v in sorted(value.items())[:4])
        elif isinstance(value, (bytes, type(None))):
            images.append(value)
    return Record(title, images, _conversation(item), "vlm_sft")


def to_record(schema: str, title: str, row: dict[str, Any]) -> Record:
    """The record of a row of ``schema`` (a converted vlm_sft row is ``{"line", "media"}``)."""
    if schema == "t2i_pretrain":
        return _t2i_record(title, row)
    if schema == "vlm_sft":
        return _sft_record(title, row.get("line", ""), row.get("media") or {})
    return _edit_record(title, row)


def _converted(root: str, so: StorageOptions | None) -> Iterator[Record]:
    m = Manifest.read(root, so)
    for shard in m.shards:
        url = storage.join(root, shard.path)
        with open_read(url, so) as f:
            for key, _, members in iter_samples(f, source=url):
                yield to_record(m.schema, f"{shard.path} {key}", decode_sample(key, members, strict=False))


def _parquet(root: str, so: StorageOptions | None) -> Iterator[Record]:
    from ..kinds.t2i_pretrain import COLUMNS as T2I_COLUMNS

    for url in storage.list_files(root, ".parquet", so):
        name = url.rsplit("/", 1)[-1]
        with open_parquet(url, so, streaming=True) as pf:
            columns = {f.name for f in pf.schema_arrow}
            schema = "t2i_pretrain" if set(T2I_COLUMNS) <= columns else "unified_edit"
            for rg in range(pf.metadata.num_row_groups):
                for i, row in iter_row_group_rows(pf, url, rg):
                    yield to_record(schema, f"{name} rg {rg} row {i}", row)


def _foreign(pattern: str, so: StorageOptions | None) -> Iterator[Record]:
    from ..loader.iteration import BadSample
    from ..loader.sources.foreign import ForeignTarSource, expand_shards

    source = ForeignTarSource(dataset_name="preview", storage_options=so, schema="t2i_pretrain")
    for url in expand_shards(pattern, so):
        for (index,), row in source.iter_unit_rows(url, None):
            title = f"{url.rsplit('/', 1)[-1]} sample {index}"
            if isinstance(row, BadSample):
                yield Record(title, [], [f"(unreadable: {row.error})"], "t2i_pretrain")
            else:
                yield to_record("t2i_pretrain", f"{title} {row['__key__']}", row)


def _jsonl(url: str, media_dir: str | None, so: StorageOptions | None) -> Iterator[Record]:
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
        yield _sft_record(f"{url.rsplit('/', 1)[-1]} line {number}", line, media)


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
        records = _foreign(data.rstrip("/") + "/*.tar", storage_options)
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
