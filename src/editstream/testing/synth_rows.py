"""Synthetic rows of the two built-in parquet kinds: edit chains and captioned images.

Each kind module names its writer here (``write_edit_chains``, ``write_captioned_images``);
:func:`~editstream.testing.synth.write_parquet_kind` does files, row groups and bad rows.
"""

from __future__ import annotations

import json
from collections import Counter
from typing import Any

import numpy as np
import pyarrow as pa

from .synth import ParquetSynth, SynthOptions, SynthRow, write_parquet_kind
from .synth_content import IMAGE_FORMATS, SOURCES, TAGS, caption, garbage, instruction, make_image, pick

EDIT_CHAIN_ARROW = pa.schema(
    [
        ("row_id", pa.string()),
        ("image_list", pa.list_(pa.binary())),
        ("instruction_list", pa.list_(pa.list_(pa.string()))),
        ("source", pa.string()),
        ("score", pa.float64()),
        ("tags", pa.list_(pa.string())),
        ("meta_blob", pa.binary()),
    ]
)
"""Arrow schema of a synthetic edit-chain file: the kind's two columns plus extra ones to carry."""

CAPTIONED_IMAGE_ARROW = pa.schema([("row_id", pa.string()), ("image", pa.binary()), ("captions", pa.string())])
"""Arrow schema of a synthetic text-to-image file."""


def edit_chain_row(row: SynthRow) -> tuple[dict[str, Any], Counter[str]]:
    """An edit chain of 2-5 photo-like images and one instruction per edit (or a planted bad row)."""
    rng, index = row.rng, row.index
    n = 1 if row.corrupt == "single_image" else int(rng.integers(2, 6))
    formats: Counter[str] = Counter()
    images = []
    for j in range(n):
        fmt = IMAGE_FORMATS[(index + j) % len(IMAGE_FORMATS)]
        images.append(make_image(rng, row.min_side, row.max_side, fmt))
        formats[fmt] += 1
    instructions = [instruction(rng) for _ in range(n - 1)]
    if row.corrupt == "garbage_image":
        j = int(rng.integers(0, n))
        formats[IMAGE_FORMATS[(index + j) % len(IMAGE_FORMATS)]] -= 1
        images[j] = garbage(rng)
    elif row.corrupt == "short_instructions":
        instructions = instructions[:-1] if n >= 3 else []
    meta = rng.integers(0, 256, size=int(rng.integers(4, 64)), dtype=np.uint8).tobytes()
    record = {
        "row_id": row.row_id,
        "image_list": images,
        "instruction_list": instructions,
        "source": pick(rng, SOURCES),
        "score": float(rng.random()),
        "tags": [str(pick(rng, TAGS)) for _ in range(int(rng.integers(0, 4)))],
        "meta_blob": None if rng.random() < 0.3 else meta,
    }
    return record, formats


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


EDIT_CHAINS = ParquetSynth(
    EDIT_CHAIN_ARROW, edit_chain_row, ("garbage_image", "single_image", "short_instructions"), code=1
)
CAPTIONED_IMAGES = ParquetSynth(CAPTIONED_IMAGE_ARROW, captioned_image_row, ("garbage_image", "bad_captions_json"), 2)


def write_edit_chains(out: str, options: SynthOptions) -> dict[str, Any]:
    """The image-editing kind's synth function (see :data:`~editstream.testing.synth.SynthWriter`)."""
    return write_parquet_kind(out, options, EDIT_CHAINS)


def write_captioned_images(out: str, options: SynthOptions) -> dict[str, Any]:
    """The text-to-image kind's synth function."""
    return write_parquet_kind(out, options, CAPTIONED_IMAGES)
