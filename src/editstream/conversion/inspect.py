"""``editstream inspect``: what a converted dataset holds, and one sample's row on demand.

Totals come from the manifest; image counts, formats and sizes come from scanning up to
``max_samples`` samples (image headers only, no pixel decoding). ``find_sample`` seeks to a
sample with one ranged read through the ``.tar.idx`` when the key names its source row.
"""

from __future__ import annotations

import io
import statistics
from collections import Counter
from typing import Any

from ..format import manifest as mf
from ..format.idx import read_idx, sample_range
from ..format.images import IMAGE_EXTENSIONS, image_size, sniff_extension
from ..format.keys import parse_key
from ..format.rowcodec import decode_sample
from ..format.tarreader import iter_samples
from ..io import storage
from ..io.ranged import open_read


def _image_size(data: bytes) -> tuple[int, int] | None:
    size = image_size(data)
    return None if isinstance(size, str) else size


def _spread(values: list[int]) -> dict[str, float] | None:
    if not values:
        return None
    return {"min": min(values), "median": statistics.median(values), "max": max(values)}


def inspect_dataset(
    root: str, *, storage_options: dict[str, Any] | None = None, max_samples: int | None = 1000
) -> dict[str, Any]:
    """A JSON-able overview: shards, samples, bytes, images per sample, image formats and sizes."""
    m = mf.Manifest.read(root, storage_options)
    per_sample: Counter = Counter()
    formats: Counter = Counter()
    widths: list[int] = []
    heights: list[int] = []
    undecodable = 0
    scanned = 0
    for shard in m.shards:
        if max_samples is not None and scanned >= max_samples:
            break
        url = storage.join(root, shard.path)
        with open_read(url, storage_options) as f:
            for _key, _, members in iter_samples(f, source=url):
                if max_samples is not None and scanned >= max_samples:
                    break
                scanned += 1
                images = 0
                for suffix, data in members.items():
                    ext = suffix.rsplit(".", 1)[-1]
                    if ext not in IMAGE_EXTENSIONS:
                        continue
                    images += 1
                    formats[ext] += 1
                    size = _image_size(data)
                    if size is None:
                        undecodable += 1
                    else:
                        widths.append(size[0])
                        heights.append(size[1])
                per_sample[images] += 1
    return {
        "root": root,
        "schema": m.schema,
        "layout": m.layout,
        "format_version": m.format_version,
        "columns": m.columns,
        "source_root": m.source_root,
        "source_files": len(m.source_files),
        "source_rows": m.num_source_rows,
        "shards": len(m.shards),
        "samples": m.num_samples,
        "bytes": m.num_bytes,
        "bad_rows": m.num_bad_rows,
        "drop_bad_rows": m.drop_bad_rows,
        "samples_scanned": scanned,
        "images_per_sample": {str(k): per_sample[k] for k in sorted(per_sample)},
        "image_formats": dict(sorted(formats.items())),
        "image_width": _spread(widths),
        "image_height": _spread(heights),
        "images_with_bad_headers": undecodable,
    }


def _locate(m: mf.Manifest, key: str) -> tuple[mf.ShardInfo, int] | None:
    """``(shard, sample index)`` of ``key`` from the manifest alone, when the key names its row."""
    position = parse_key(key)
    if position is None:
        return None
    files = [f.path for f in m.source_files if f.key_stem == position.stem]
    if not files:
        return None
    for shard in m.shards:
        index = shard.sample_index(files[0], position.row_group, position.row)
        if index is not None:
            return shard, index
    return None


def find_sample(root: str, key: str, *, storage_options: dict[str, Any] | None = None) -> dict[str, Any]:
    """The original row of the sample ``key``; raises ``KeyError`` when no shard holds it."""
    m = mf.Manifest.read(root, storage_options)
    located = _locate(m, key)
    if located is not None:
        shard, index = located
        offsets, end = read_idx(storage.join(root, shard.idx_path), storage_options)
        start, stop = sample_range(offsets, end, index)
        url = storage.join(root, shard.path)
        data = storage.read_bytes(url, storage_options, start=start, end=stop)
        for got, _, members in iter_samples(io.BytesIO(data), start_offset=0, end_offset=len(data), source=url):
            if got == key:
                return decode_sample(key, members)
    for shard in m.shards:  # keys not derived from their row: scan
        url = storage.join(root, shard.path)
        with open_read(url, storage_options) as f:
            for got, _, members in iter_samples(f, source=url):
                if got == key:
                    return decode_sample(key, members)
    raise KeyError(f"no sample with key {key!r} in {root}")


def describe_value(v: Any) -> Any:
    """A printable stand-in for a row value: bytes become a short description, the rest is kept."""
    if isinstance(v, (bytes, bytearray)):
        ext = sniff_extension(v)
        text = f"<{len(v)} bytes, {ext}"
        if ext in IMAGE_EXTENSIONS:
            size = _image_size(bytes(v))
            if size is not None:
                text += f", {size[0]}x{size[1]}"
        return text + ">"
    if isinstance(v, list):
        return [describe_value(x) for x in v]
    if isinstance(v, tuple):
        return tuple(describe_value(x) for x in v)
    if isinstance(v, dict):
        return {k: describe_value(x) for k, x in v.items()}
    return v
