"""What a plug-in dataset kind builds on (its record, :class:`RowDataset`, :class:`Record`, synth helpers): the
one editstream module a kind's package imports; names load on first use."""

from __future__ import annotations

from typing import TYPE_CHECKING

from editstream import lazy_exports

_EXPORTS = {
    **dict.fromkeys(("Certainty", "DatasetKind", "Part", "RowProblem", "register"), "editstream.kinds"),
    "image_header_problem": "editstream.format.images",
    "RowDataset": "editstream.loader.datasets.interleave",
    **dict.fromkeys(("Layout", "Record"), "editstream.preview.record"),
    **dict.fromkeys(("ParquetSynth", "SynthOptions", "SynthRow", "write_parquet_kind"), "editstream.testing.synth"),
    **dict.fromkeys(("IMAGE_FORMATS", "caption", "garbage", "make_image"), "editstream.testing.synth_content"),
}

if TYPE_CHECKING:  # the same names for type checkers, without importing at run time
    from editstream.format.images import image_header_problem as image_header_problem
    from editstream.kinds import Certainty as Certainty
    from editstream.kinds import DatasetKind as DatasetKind
    from editstream.kinds import Part as Part
    from editstream.kinds import RowProblem as RowProblem
    from editstream.kinds import register as register
    from editstream.loader.datasets.interleave import RowDataset as RowDataset
    from editstream.preview.record import Layout as Layout
    from editstream.preview.record import Record as Record
    from editstream.testing.synth import ParquetSynth as ParquetSynth
    from editstream.testing.synth import SynthOptions as SynthOptions
    from editstream.testing.synth import SynthRow as SynthRow
    from editstream.testing.synth import write_parquet_kind as write_parquet_kind
    from editstream.testing.synth_content import IMAGE_FORMATS as IMAGE_FORMATS
    from editstream.testing.synth_content import caption as caption
    from editstream.testing.synth_content import garbage as garbage
    from editstream.testing.synth_content import make_image as make_image

__all__ = sorted(_EXPORTS)
__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
