"""The VLM fine-tuning kind's synth function: a LLaVA-style JSONL and its media, as
:func:`~editstream.sandbox.synth_vlm.write_synthetic_vlm_dataset` writes them, from the common options."""

from __future__ import annotations

from typing import Any

from editstream.plugin import SynthOptions, write_synthetic_vlm_dataset


def write_conversations(out: str, options: SynthOptions) -> dict[str, Any]:
    """``files x row groups x rows`` lines in ``out/data.jsonl`` with their media in ``out/media``;
    any ``corrupt_fraction`` above 0 plants the bad lines."""
    low, high = options.sides((32, 96))
    summary = write_synthetic_vlm_dataset(
        out,
        num_lines=options.total_rows,
        seed=options.seed,
        bad_rows=options.corrupt_fraction > 0,
        min_side=low,
        max_side=high,
        storage_options=options.storage_options,
    )
    summary["convert"] = f"editstream convert {summary['jsonl']} DST --media-dir {summary['media_dir']}"
    return summary
