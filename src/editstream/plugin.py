"""What a dataset kind builds on: the one editstream module a kind's package imports, the built-in kinds' too;
names load on first use.

- the record: :class:`DatasetKind`, :class:`RowProblem` (``Part``, ``Certainty``), :class:`SourceShape`,
  :func:`register`, and what its row checks use (the image check; :func:`line_problems` for JSONL + media);
- the dataset bases: :class:`RowDataset` (table rows) and :class:`LineDataset` (JSONL + media lines), both with the
  sample builder, or :class:`ParquetStandardIterableDataset` and :class:`JsonlLineDataset` for a kind that builds
  its sample dict itself (``plan_item``, ``transform_image``, ``NORMALIZATION_KEY``, ``share_one_storage``);
- the preview's :class:`Record` (``Layout``), a converted line's columns and :func:`line_images`;
- the synth helpers: :class:`SynthOptions`, :class:`ParquetSynth` / :func:`write_parquet_kind`,
  :class:`JsonlSynth` / :func:`write_jsonl_kind`, the VLM kind's writer, and the content they draw."""

from __future__ import annotations

from typing import TYPE_CHECKING

from editstream import lazy_exports

_EXPORTS = {
    **dict.fromkeys(("Certainty", "DatasetKind", "Part", "RowProblem", "SourceShape", "register"), "editstream.kinds"),
    **dict.fromkeys(("LINE_COLUMN", "MEDIA_COLUMN", "line_images"), "editstream.format.sft"),
    "line_problems": "editstream.kinds.lines",
    "image_header_problem": "editstream.format.images",
    **dict.fromkeys(("LineDataset", "RowDataset", "plan_item"), "editstream.loader.datasets.interleave"),
    "JsonlLineDataset": "editstream.loader.datasets.lines",
    "ParquetStandardIterableDataset": "editstream.loader.datasets.standard",
    **dict.fromkeys(("NORMALIZATION_KEY", "share_one_storage", "transform_image"), "editstream.loader.pixels"),
    **dict.fromkeys(("Layout", "Record"), "editstream.preview.record"),
    **dict.fromkeys(
        ("JsonlSynth", "ParquetSynth", "SynthOptions", "SynthRow", "write_jsonl_kind", "write_parquet_kind"),
        "editstream.sandbox.synth",
    ),
    **dict.fromkeys(
        ("IMAGE_FORMATS", "SOURCES", "TAGS", "caption", "garbage", "instruction", "make_image", "pick"),
        "editstream.sandbox.synth_content",
    ),
    "write_synthetic_vlm_dataset": "editstream.sandbox.synth_vlm",
}

if TYPE_CHECKING:  # the same names for type checkers, without importing at run time
    from editstream.format.images import image_header_problem as image_header_problem
    from editstream.format.sft import LINE_COLUMN as LINE_COLUMN
    from editstream.format.sft import MEDIA_COLUMN as MEDIA_COLUMN
    from editstream.format.sft import line_images as line_images
    from editstream.kinds import Certainty as Certainty
    from editstream.kinds import DatasetKind as DatasetKind
    from editstream.kinds import Part as Part
    from editstream.kinds import RowProblem as RowProblem
    from editstream.kinds import SourceShape as SourceShape
    from editstream.kinds import register as register
    from editstream.kinds.lines import line_problems as line_problems
    from editstream.loader.datasets.interleave import LineDataset as LineDataset
    from editstream.loader.datasets.interleave import RowDataset as RowDataset
    from editstream.loader.datasets.interleave import plan_item as plan_item
    from editstream.loader.datasets.lines import JsonlLineDataset as JsonlLineDataset
    from editstream.loader.datasets.standard import ParquetStandardIterableDataset as ParquetStandardIterableDataset
    from editstream.loader.pixels import NORMALIZATION_KEY as NORMALIZATION_KEY
    from editstream.loader.pixels import share_one_storage as share_one_storage
    from editstream.loader.pixels import transform_image as transform_image
    from editstream.preview.record import Layout as Layout
    from editstream.preview.record import Record as Record
    from editstream.sandbox.synth import JsonlSynth as JsonlSynth
    from editstream.sandbox.synth import ParquetSynth as ParquetSynth
    from editstream.sandbox.synth import SynthOptions as SynthOptions
    from editstream.sandbox.synth import SynthRow as SynthRow
    from editstream.sandbox.synth import write_jsonl_kind as write_jsonl_kind
    from editstream.sandbox.synth import write_parquet_kind as write_parquet_kind
    from editstream.sandbox.synth_content import IMAGE_FORMATS as IMAGE_FORMATS
    from editstream.sandbox.synth_content import SOURCES as SOURCES
    from editstream.sandbox.synth_content import TAGS as TAGS
    from editstream.sandbox.synth_content import caption as caption
    from editstream.sandbox.synth_content import garbage as garbage
    from editstream.sandbox.synth_content import instruction as instruction
    from editstream.sandbox.synth_content import make_image as make_image
    from editstream.sandbox.synth_content import pick as pick
    from editstream.sandbox.synth_vlm import write_synthetic_vlm_dataset as write_synthetic_vlm_dataset

__all__ = sorted(_EXPORTS)
__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
