"""Synthetic edit chains: the image-editing kind's synth function (``write_edit_chains``) and its rows."""

from __future__ import annotations

from collections import Counter
from typing import Any

import numpy as np
import pyarrow as pa

from editstream.plugin import (
    IMAGE_FORMATS,
    SOURCES,
    TAGS,
    ParquetSynth,
    SynthOptions,
    SynthRow,
    garbage,
    instruction,
    make_image,
    pick,
    write_parquet_kind,
)

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


EDIT_CHAINS = ParquetSynth(
    EDIT_CHAIN_ARROW, edit_chain_row, ("garbage_image", "single_image", "short_instructions"), code=1
)


def write_edit_chains(out: str, options: SynthOptions) -> dict[str, Any]:
    """The image-editing kind's synth function (see :data:`~editstream.sandbox.synth.SynthWriter`)."""
    return write_parquet_kind(out, options, EDIT_CHAINS)
