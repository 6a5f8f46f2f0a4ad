"""Synthetic captioned images: the text-to-image kind's synth function (``write_captioned_images``) and its rows."""

from __future__ import annotations

import json
from collections import Counter
from typing import Any

import pyarrow as pa

from editstream.plugin import (
    IMAGE_FORMATS,
    ParquetSynth,
    SynthOptions,
    SynthRow,
    caption,
    garbage,
    make_image,
    write_parquet_kind,
)

CAPTIONED_IMAGE_ARROW = pa.schema([("row_id", pa.string()), ("image", pa.binary()), ("captions", pa.string())])
"""Arrow schema of a synthetic text-to-image file."""


def captioned_image_row(row: SynthRow) -> tuple[dict[str, Any], Counter[str]]:
    """One photo-like image and a JSON object of 0-3 captions (or a planted bad row)."""
    rng = row.rng
    fmt = IMAGE_FORMATS[row.index % len(IMAGE_FORMATS)]
    formats: Counter[str] = Counter()
    image = make_image(rng, row.min_side, row.max_side, fmt)
    if row.corrupt == "garbage_image":
        image = garbage(rng)
    else:
        formats[fmt] += 1
    if rng.random() < 0.1:
        captions: dict[str, str] = {}
    else:
        captions = {f"caption_{i}": caption(rng) for i in range(int(rng.integers(1, 4)))}
    text = json.dumps(captions, sort_keys=True)
    if row.corrupt == "bad_captions_json":
        text = text[: max(1, len(text) // 2)] + "{{not json"
    return {"row_id": row.row_id, "image": image, "captions": text}, formats


CAPTIONED_IMAGES = ParquetSynth(CAPTIONED_IMAGE_ARROW, captioned_image_row, ("garbage_image", "bad_captions_json"), 2)


def write_captioned_images(out: str, options: SynthOptions) -> dict[str, Any]:
    """The text-to-image kind's synth function."""
    return write_parquet_kind(out, options, CAPTIONED_IMAGES)
