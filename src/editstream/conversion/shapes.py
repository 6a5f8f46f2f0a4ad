"""The converter's one dispatch on a kind's source shape: parquet slices, or JSONL lines + media.

Everything that differs between the shapes is a field of a :class:`SourceStrategy`: how the
source is planned into shard tasks, how a task's rows are read and a bad one reported, what
the manifest and report add, how ``verify`` checks the root against its source and whether it
compares rows, and whether ``inspect`` must tell images from other media. The generic code
(``run``, ``shard``, ``verify``, ``inspect``) asks :func:`strategy_of` and never a kind's name.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ..format import manifest as mf
from ..io.storage import StorageOptions
from ..kinds import DatasetKind, SourceShape, UnknownKindError, get_kind
from .lines_plan import check_lines_options, lines_manifest_extra, plan_lines_conversion
from .lines_rows import iter_line_rows, line_bad_row, line_place, lines_report_note
from .lines_verify import check_lines_root, lines_media_comparison
from .parquet_plan import check_parquet_options, plan_parquet_conversion
from .parquet_rows import iter_parquet_rows, parquet_bad_row, parquet_report_note, parquet_row_place
from .parquet_verify import check_parquet_root
from .problems import Problem
from .records import ShardResult
from .report import BadRow
from .task import Plan, ShardTask

if TYPE_CHECKING:
    from .config import ConvertConfig

TaskRows = Iterator[tuple[mf.RowSlice, int, dict[str, Any]]]
"""``(slice, row index in its row group, row)`` for every row of a task, in order."""
BadRowOf = Callable[[ShardTask, DatasetKind, mf.RowSlice, int, str, dict[str, Any]], BadRow | None]
"""``(task, kind, slice, row index, key, row)`` -> the row's report entry when it is bad."""
RowPlace = Callable[[mf.RowSlice, int], dict[str, int]]
"""``(slice, row index)`` -> where the row is in its source file (``row_group``/``row``, or ``line``)."""
SampleCheck = Callable[[Mapping[str, Any]], list[str]]
"""A decoded sample -> what differs from its source now (picklable: it runs in verify's workers)."""
SampleCheckOf = Callable[[str, mf.Manifest, str | None, StorageOptions | None], SampleCheck | None]
"""``(root, manifest, source, storage options)`` -> the per-sample source check ``verify`` runs, if any."""


def _no_extra(plan: Plan, results: list[ShardResult]) -> dict[str, Any]:
    return {}


def _no_sample_check(
    root: str, manifest: mf.Manifest, source: str | None, storage_options: StorageOptions | None
) -> SampleCheck | None:
    return None


@dataclass(frozen=True)
class SourceStrategy:
    """How the converter, ``verify`` and ``inspect`` handle one source shape."""

    shape: SourceShape
    check_options: Callable[[ConvertConfig], None]
    """Refuse, before any I/O, the options this shape does not take."""
    plan: Callable[[ConvertConfig], Plan]
    """Cut the source into shard tasks."""
    rows: Callable[[ShardTask], TaskRows]
    """A task's rows, read from the source."""
    bad_row: BadRowOf
    """A row's report entry when its kind finds it bad, else ``None``."""
    place: RowPlace
    """Where a row is in its source file, for the report's image notes."""
    report_note: Callable[[bool], str]
    """report.json's note on the bad rows, given ``drop_bad_rows``."""
    check_root: Callable[[str, mf.Manifest, str | None, StorageOptions | None], list[Problem]]
    """``verify``'s checks of the whole root (and of the source, when given) beyond its shards."""
    compares_rows: bool
    """Whether ``verify`` compares every sample with its row read back from the source."""
    mixed_media: bool
    """Whether the image column also holds other media (videos), so ``inspect`` counts only image members."""
    manifest_extra: Callable[[Plan, list[ShardResult]], dict[str, Any]] = _no_extra
    """Records the manifest's ``extra`` gets once every shard is written."""
    sample_check: SampleCheckOf = _no_sample_check
    fixed_layout: str | None = None
    """The shard layout every conversion of this shape writes (``None``: the one asked for)."""
    """What ``verify`` compares every sample with beyond its source row (a JSONL line's media files now)."""


PARQUET_SLICES = SourceStrategy(
    shape=SourceShape.PARQUET,
    check_options=check_parquet_options,
    plan=plan_parquet_conversion,
    rows=iter_parquet_rows,
    bad_row=parquet_bad_row,
    place=parquet_row_place,
    report_note=parquet_report_note,
    check_root=check_parquet_root,
    compares_rows=True,
    mixed_media=False,
)
JSONL_LINES = SourceStrategy(
    shape=SourceShape.JSONL_MEDIA,
    check_options=check_lines_options,
    plan=plan_lines_conversion,
    rows=iter_line_rows,
    bad_row=line_bad_row,
    place=line_place,
    report_note=lines_report_note,
    check_root=check_lines_root,
    compares_rows=False,  # the JSONL is checked as a whole file (its hash), not row by row
    mixed_media=True,
    manifest_extra=lines_manifest_extra,
    sample_check=lines_media_comparison,
    fixed_layout="size",
)
_BY_SHAPE = {s.shape: s for s in (PARQUET_SLICES, JSONL_LINES)}


def strategy_for(shape: SourceShape) -> SourceStrategy:
    """The strategy of a source shape."""
    return _BY_SHAPE[shape]


def strategy_of(schema: str | None) -> SourceStrategy:
    """The strategy of the kind called ``schema``: parquet when no kind is named (it is detected
    from the columns) or the kind is not registered here (a root converted by a plug-in now gone)."""
    if schema is None:
        return PARQUET_SLICES
    try:
        return strategy_for(get_kind(schema).source)
    except UnknownKindError:
        return PARQUET_SLICES


def plan_conversion(cfg: ConvertConfig) -> Plan:
    """The shard tasks of a conversion, planned by the strategy of its kind's source shape."""
    return strategy_of(cfg.schema).plan(cfg)
