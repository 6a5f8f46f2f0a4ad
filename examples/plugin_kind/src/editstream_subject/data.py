"""The subject-driven kind's training dataset and synthetic-data writer, built on ``editstream.plugin``."""

from __future__ import annotations

from collections import Counter
from typing import Any

import pyarrow as pa

from editstream.plugin import (
    IMAGE_FORMATS,
    ParquetSynth,
    RowDataset,
    SynthOptions,
    SynthRow,
    caption,
    garbage,
    make_image,
    write_parquet_kind,
)

from . import COLUMNS


class SubjectDrivenIterableDataset(RowDataset):
    """Samples of reference images (conditioning: VAE + ViT, no loss), the prompt, and the target
    image (the loss). Works on both backends: parquet row groups and converted shards."""

    column_types = COLUMNS

    def parse_row(self, row: Any) -> dict[str, Any]:
        references, prompt = row["reference_images"], row["prompt"]
        if not references or not isinstance(prompt, str) or not prompt.strip():
            raise ValueError("a subject-driven row needs reference images and a prompt")
        data = self.new_sample()
        for image in references:
            self.add_image(data, self.load_image(image), need_loss=False, need_vae=True, need_vit=True)
        self.add_text(data, prompt, need_loss=False)
        self.add_image(data, self.load_image(row["target_image"]), need_loss=True, need_vae=False, need_vit=False)
        return data


ARROW = pa.schema(
    [
        ("subject_id", pa.string()),
        ("reference_images", pa.list_(pa.binary())),
        ("prompt", pa.string()),
        ("target_image", pa.binary()),
    ]
)
BAD_ROWS = ("garbage_target", "no_references", "empty_prompt")


def subject_row(row: SynthRow) -> tuple[dict[str, Any], Counter[str]]:
    """1-3 reference images, a prompt and a target image, all drawn from the row's own generator."""
    rng = row.rng
    formats: Counter[str] = Counter()
    images = []
    for j in range(int(rng.integers(1, 4)) + 1):
        fmt = IMAGE_FORMATS[(row.index + j) % len(IMAGE_FORMATS)]
        images.append(make_image(rng, row.min_side, row.max_side, fmt))
        formats[fmt] += 1
    *references, target = images
    prompt = f"the subject in {caption(rng)}"
    if row.corrupt == "garbage_target":
        formats[IMAGE_FORMATS[(row.index + len(references)) % len(IMAGE_FORMATS)]] -= 1
        target = garbage(rng)
    elif row.corrupt == "no_references":
        references = []
    elif row.corrupt == "empty_prompt":
        prompt = ""
    record = {"subject_id": row.row_id, "reference_images": references, "prompt": prompt, "target_image": target}
    return record, formats


SYNTH = ParquetSynth(ARROW, subject_row, BAD_ROWS, code=101)


def write_subject_dataset(out: str, options: SynthOptions) -> dict[str, Any]:
    """The kind's synth function: parquet files of subject-driven rows (``editstream synth --schema subject``)."""
    return write_parquet_kind(out, options, SYNTH)
