"""``editstream inspect``: what a converted dataset holds (images scanned by their headers only), and
one sample's row on demand."""

from __future__ import annotations

import statistics
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from ..data.members import find_members, iter_members, open_converted
from ..format.images import IMAGE_EXTENSIONS, image_size, sniff_extension
from ..format.rowcodec import decode_sample
from ..io.progress import Progress
from ..kinds import UnknownKindError, get_kind
from .shapes import strategy_of


def _image_size(data: bytes) -> tuple[int, int] | None:
    size = image_size(data)
    return None if isinstance(size, str) else size


def _spread(values: list[int]) -> dict[str, float] | None:
    if not values:
        return None
    return {"min": min(values), "median": statistics.median(values), "max": max(values)}


def _image_members(columns: tuple[str, ...], mixed_media: bool, members: dict[str, bytes]) -> list[tuple[str, bytes]]:
    """A sample's image members: those of the kind's image columns (only images if mixed), else by extension."""
    found = []
    for suffix, data in members.items():
        ext = suffix.rsplit(".", 1)[-1]
        if mixed_media and ext not in IMAGE_EXTENSIONS:
            continue
        if suffix.split(".", 1)[0] in columns or (not columns and ext in IMAGE_EXTENSIONS):
            found.append((ext, data))
    return found


@dataclass
class _ImageStats:
    """Images per sample, formats of the images whose header parses, sizes, and the bad ones."""

    per_sample: Counter[int] = field(default_factory=Counter)
    formats: Counter[str] = field(default_factory=Counter)
    widths: list[int] = field(default_factory=list)
    heights: list[int] = field(default_factory=list)
    bad: int = 0

    def add(self, images: list[tuple[str, bytes]]) -> None:
        self.per_sample[len(images)] += 1
        for ext, data in images:
            size = _image_size(data) if ext in IMAGE_EXTENSIONS else None
            if size is None:
                self.bad += 1
                continue
            self.formats[ext] += 1
            self.widths.append(size[0])
            self.heights.append(size[1])


def inspect_dataset(
    root: str, *, storage_options: dict[str, Any] | None = None, max_samples: int | None = 1000, progress: bool = False
) -> dict[str, Any]:
    """A JSON-able overview: shards, samples, bytes, images per sample, image formats and sizes (an image
    whose header does not parse counts in ``images_with_bad_headers``, not under a format)."""
    converted = open_converted(root, storage_options)
    m = converted.manifest
    try:  # the columns the kind keeps its images in; none for a kind not registered here
        columns = get_kind(m.schema).image_column_names()
    except UnknownKindError:
        columns = ()
    mixed_media = strategy_of(m.schema).mixed_media
    stats = _ImageStats()
    limit = m.num_samples if max_samples is None else min(max_samples, m.num_samples)
    with Progress("inspect", limit, "samples", progress) as bar:
        for _key, members in iter_members(converted, limit):
            stats.add(_image_members(columns, mixed_media, members))
            bar.update(1)
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
        "samples_scanned": sum(stats.per_sample.values()),  # one count per sample scanned
        "images_per_sample": {str(k): stats.per_sample[k] for k in sorted(stats.per_sample)},
        "image_formats": dict(sorted(stats.formats.items())),
        "image_width": _spread(stats.widths),
        "image_height": _spread(stats.heights),
        "images_with_bad_headers": stats.bad,
    }


def find_sample(root: str, key: str, *, storage_options: dict[str, Any] | None = None) -> dict[str, Any]:
    """The original row of the sample ``key``; raises ``KeyError`` when no shard holds it."""
    return decode_sample(key, find_members(root, key, storage_options=storage_options))


def describe_value(v: Any) -> Any:
    """A printable stand-in for a row value: bytes become a short description, the rest is kept."""
    if isinstance(v, (bytes, bytearray)):
        ext = sniff_extension(v)
        text = f"<{len(v)} bytes, {ext}"
        if ext in IMAGE_EXTENSIONS and (size := _image_size(bytes(v))) is not None:
            text += f", {size[0]}x{size[1]}"
        return text + ">"
    if isinstance(v, (list, tuple)):
        return (list if isinstance(v, list) else tuple)(describe_value(x) for x in v)
    if isinstance(v, dict):
        return {k: describe_value(x) for k, x in v.items()}
    return v
