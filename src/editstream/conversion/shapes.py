"""The converter's one dispatch on a kind's source shape (parquet slices, or JSONL lines + media):
everything that differs is a field of a :class:`SourceStrategy`, which the generic code asks for."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ..data.sources.parquet_slices import PlannedSlices
from ..format import manifest as mf
from ..io.storage import StorageOptions
from ..io.text import UndecodableRow
from ..kinds import DatasetKind, RowProblem, SourceShape, UnknownKindError, get_kind
from . import jsonl
from .parquet_plan import check_parquet_options, check_parquet_root, plan_parquet_conversion
from .problems import Problem
from .records import ShardResult
from .report import BadRow, checked_problems
from .task import ParquetPart, Plan, ShardTask

if TYPE_CHECKING:
    from .config import ConvertConfig

SampleCheck = Callable[[Mapping[str, Any]], list[str]]
"""A decoded sample -> what differs from its source now (picklable: it runs in verify's workers)."""
SampleCheckOf = Callable[[str, mf.Manifest, str | None, StorageOptions | None], SampleCheck | None]
"""``(root, manifest, source, storage options)`` -> the per-sample source check ``verify`` runs, if any."""


@dataclass(frozen=True)
class SourceStrategy:
    """How the converter, ``verify`` and ``inspect`` handle one source shape."""

    shape: SourceShape
    check_options: Callable[[ConvertConfig], None]
    """Refuse, before any I/O, the options this shape does not take."""
    plan: Callable[[ConvertConfig], Plan]
    """Cut the source into shard tasks."""
    rows: Callable[[ShardTask], Iterator[tuple[mf.RowSlice, int, dict[str, Any]]]]
    """A task's rows, read from the source: ``(slice, row index in its row group, row)``, in order."""
    place: Callable[[mf.RowSlice, int], dict[str, int]]
    """Where a row is in its source file (``row_group``/``row``, or ``line``), for bad rows and image notes."""
    first_problem_only: bool
    """A bad row is reported with its first problem and whether the parser always fails on it
    (parquet), or with all its problems and the media names it misses (a JSONL line)."""
    keep_note: str
    """report.json's note on the bad rows when they are kept (the one way for a JSONL source)."""
    check_root: Callable[[str, mf.Manifest, str | None, StorageOptions | None], list[Problem]]
    """``verify``'s checks of the whole root (and of the source, when given) beyond its shards."""
    compares_rows: bool
    """Whether ``verify`` compares every sample with its row read back from the source."""
    mixed_media: bool
    """Whether the image column also holds other media (videos), so ``inspect`` counts only image members."""
    manifest_extra: Callable[[Plan, list[ShardResult]], dict[str, Any]] = lambda plan, results: {}
    """Records the manifest's ``extra`` gets once every shard is written."""
    sample_check: SampleCheckOf = lambda root, manifest, source, storage_options: None
    """What ``verify`` compares every sample with beyond its source row (a JSONL line's media files now)."""
    fixed_layout: str | None = None
    """The shard layout every conversion of this shape writes (``None``: the one asked for)."""

    def bad_row(
        self, task: ShardTask, kind: DatasetKind, s: mf.RowSlice, index: int, key: str, row: dict[str, Any]
    ) -> BadRow | None:
        """The report entry of a row its kind finds bad, or ``None`` (text that is not UTF-8 is always bad)."""
        first = self.first_problem_only
        if isinstance(row, UndecodableRow):
            problems = [RowProblem(row.problem())]
        else:
            problems = checked_problems(kind.row_problems, row, first_only=first)
        if not problems:
            return None
        return BadRow(
            file=s.file,
            **self.place(s, index),
            key=key,
            reason="; ".join(p.text for p in problems),
            fails=problems[0].certainty if first else None,
            shard=task.shard_path,
            dropped=task.drop_bad_rows,
            missing=() if first else tuple(name for p in problems for name in p.missing),
        )


def _parquet_rows(task: ShardTask) -> Iterator[tuple[mf.RowSlice, int, dict[str, Any]]]:
    """A parquet task's rows, read through the planned-slice reader ``verify`` reads them back with."""
    part = task.part
    assert isinstance(part, ParquetPart)
    known, whole = part.expected_rows is not None, part.row_group is not None
    reader = PlannedSlices(
        task.src_root, task.slices, task.storage_options, task.columns, dict(task.sources), known, whole
    )
    return reader.rows()


PARQUET_SLICES = SourceStrategy(
    shape=SourceShape.PARQUET,
    check_options=check_parquet_options,
    plan=plan_parquet_conversion,
    rows=_parquet_rows,
    place=lambda s, row: {"row_group": s.row_group, "row": row},
    first_problem_only=True,
    keep_note=(
        "bad rows are kept verbatim so row positions match the parquet backend; the training-time parser drops "
        "rows marked fails=always in every epoch, and rows marked fails=if_drawn in the epochs whose random draws "
        "reach the bad image or instruction"
    ),
    check_root=check_parquet_root,
    compares_rows=True,
    mixed_media=False,
)
JSONL_LINES = SourceStrategy(
    shape=SourceShape.JSONL_MEDIA,
    check_options=jsonl.check_lines_options,
    plan=jsonl.plan_lines_conversion,
    rows=jsonl.iter_line_rows,
    place=lambda s, line: {"line": line + 1},  # counted from 1
    first_problem_only=False,
    keep_note=(
        "every JSONL line is kept verbatim (media missing at conversion time is recorded as null, media "
        "outside the media directory is refused and left out), so the webdataset backend drops the same "
        "lines as the source backend, at the same point"
    ),
    check_root=jsonl.check_lines_root,
    compares_rows=False,  # the JSONL is checked as a whole file (its hash), not row by row
    mixed_media=True,
    manifest_extra=jsonl.lines_manifest_extra,
    sample_check=jsonl.lines_media_comparison,
    fixed_layout="size",
)
_BY_SHAPE = {s.shape: s for s in (PARQUET_SLICES, JSONL_LINES)}


def strategy_of(schema: str | None) -> SourceStrategy:
    """The strategy of the kind ``schema``: parquet when none is named or the kind is not registered here."""
    try:
        return PARQUET_SLICES if schema is None else _BY_SHAPE[get_kind(schema).source]
    except UnknownKindError:
        return PARQUET_SLICES


def plan_conversion(cfg: ConvertConfig) -> Plan:
    """The shard tasks of a conversion, planned by the strategy of its kind's source shape."""
    return strategy_of(cfg.schema).plan(cfg)
