"""The edit-pairs kind's training dataset and synthetic-data writer, built on ``editstream.plugin``."""

from __future__ import annotations

from typing import Any

from editstream.plugin import (
    IMAGE_FORMATS,
    JsonlSynth,
    LineDataset,
    SynthOptions,
    SynthRow,
    garbage,
    instruction,
    make_image,
    write_jsonl_kind,
)

from . import NAME, pair_problem


class EditPairsIterableDataset(LineDataset):
    """Samples of an edit pair: the image before as conditioning (VAE, and ViT when a ``vit_transform`` is
    given), the instruction, the image after with the loss. The JSONL and its media directory or a converted
    root alike: the base reads the line and its images on either backend."""

    def line_sample(self, item: Any, images: list[Any] | None) -> dict[str, Any]:
        problem = pair_problem(item)
        if problem is not None:
            raise ValueError(problem)  # dropped and counted as a bad row
        before, after = images or []
        data = self.new_sample()
        self.add_image(data, before, need_loss=False, need_vae=True, need_vit=self.vit_transform is not None)
        self.add_text(data, item["instruction"], need_loss=False)
        self.add_image(data, after, need_loss=True, need_vae=False, need_vit=False)
        return data


BAD_LINES = ("missing_after", "garbage_before", "no_instruction")


def pair_line(row: SynthRow) -> tuple[dict[str, Any], dict[str, bytes]]:
    """Two photo-like images and an instruction, drawn from the line's own generator (or a planted bad line)."""
    rng = row.rng
    fmt = IMAGE_FORMATS[row.index % len(IMAGE_FORMATS)]
    suffix = "jpg" if fmt == "jpeg" else fmt.split("_")[0]
    names = [f"pairs/{row.index:05d}_{side}.{suffix}" for side in ("before", "after")]
    media = {name: make_image(rng, row.min_side, row.max_side, fmt) for name in names}
    text = instruction(rng)[0]
    if row.corrupt == "missing_after":
        del media[names[1]]
    elif row.corrupt == "garbage_before":
        media[names[0]] = garbage(rng)
    elif row.corrupt == "no_instruction":
        text = ""
    return {"id": row.row_id, "image": names, "instruction": text}, media


SYNTH = JsonlSynth(pair_line, BAD_LINES, code=102)


def write_edit_pairs(out: str, options: SynthOptions) -> dict[str, Any]:
    """The kind's synth function: ``out/data.jsonl`` and its images in ``out/media``
    (``editstream synth --schema edit_pairs``)."""
    summary = write_jsonl_kind(out, options, SYNTH)
    summary["convert"] = f"editstream convert {summary['jsonl']} DST --media-dir {summary['media_dir']} --schema {NAME}"
    return summary
