"""The parquet backend: units are parquet row groups (or whole files), read through fsspec.

Listing follows the reference: per ``(data_dir, num_used)``, the directory's ``*.parquet`` (in listing
order, or sorted) repeated and cut to ``num_used``; row-group counts from ``parquet_info``, else footers.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Any

import pyarrow.parquet as pq

from ...format.columns import ColumnTypeError, column_type_problems
from ...io import service, storage
from ...io.parquet import iter_row_group_rows, open_parquet, row_group_sizes
from ...io.parquet_info import ParquetInfo
from ...io.retry import RetryPolicy
from ...io.storage import StorageOptions
from ...io.text import UndecodableRow
from ..drops import DropLog
from ..rows import BadSample, Row
from ..units import (
    FileUnit,
    Position,
    RowGroupUnit,
    Unit,
    as_unit,
    check_file_order,
    counted,
    repeat_to,
)
from .read_options import MEMBER_BYTES_ENV, env_flag

GRANULARITIES = ("row_group", "file")


def list_parquet_files(
    dataset_name: str,
    data_dir_list: Sequence[str],
    num_used_data: Sequence[int],
    storage_options: StorageOptions | None,
    file_order: str = "listing",
) -> list[str]:
    """The ``*.parquet`` of each directory (in its listing order, or sorted: ``file_order``), repeated and
    cut to its ``num_used_data`` entry."""
    out: list[str] = []
    for data_dir, num_used in counted(dataset_name, data_dir_list, num_used_data):
        try:
            files = storage.list_files(data_dir, ".parquet", storage_options, ordered=file_order == "sorted")
        except storage.BrokenLinkError as exc:
            raise storage.BrokenLinkError(f"dataset {dataset_name!r}: {exc}") from None
        except FileNotFoundError:
            raise FileNotFoundError(f"dataset {dataset_name!r}: data directory not found: {data_dir}") from None
        if not files:
            raise FileNotFoundError(f"dataset {dataset_name!r}: no *.parquet files in {data_dir}")
        out.extend(repeat_to(files, num_used, dataset_name, data_dir))
    return out


def _row_of(values: dict[str, Any]) -> Row | BadSample:
    """A row, or a :class:`BadSample` (naming the column) for a row with text that is not UTF-8."""
    if isinstance(values, UndecodableRow):
        return BadSample(ValueError(values.problem()), {"column": values.columns[0]})
    return Row(values)


class ParquetSource:
    """Row source over parquet; ``granularity`` is ``"row_group"`` or ``"file"`` (whole-file units)."""

    def __init__(
        self,
        *,
        dataset_name: str,
        granularity: str = "row_group",
        parquet_info: Mapping[str, Any] | ParquetInfo | None = None,
        storage_options: StorageOptions | None = None,
        drops: DropLog | None = None,
        column_types: Mapping[str, str] | None = None,
        retry: RetryPolicy | None = None,
        file_order: str = "listing",
        member_bytes: bool | None = None,
    ) -> None:
        self.file_order = check_file_order(file_order, f"dataset {dataset_name!r}")
        if granularity not in GRANULARITIES:
            raise ValueError(f"granularity must be one of {GRANULARITIES}, got {granularity!r}")
        self.dataset_name = dataset_name
        self.granularity = granularity
        self.parquet_info = ParquetInfo.load(parquet_info)
        self.storage_options = storage_options
        self.drops = drops if drops is not None else DropLog(dataset_name)
        self.column_types = dict(column_types or {})
        self.retry = retry
        self.binary_views = not env_flag(member_bytes, MEMBER_BYTES_ENV)
        """Binary values are handed out as memoryviews of Arrow's buffers (no ``bytes`` made per value)."""
        self._kept: tuple[str, pq.ParquetFile, contextlib.ExitStack] | None = None
        """The file of the last unit read, open for the next unit (closed by ``plan_units``)."""

    def __getstate__(self) -> dict[str, Any]:
        return {**self.__dict__, "_kept": None}

    def iter_unit_rows(self, unit: Unit, after: Position | None) -> Iterator[tuple[Position, Row | BadSample]]:
        """Rows of one unit after the resume position ``after`` (``None``: from the start), a small batch at
        a time; the file's column types are checked before any row is read."""
        typed: FileUnit | RowGroupUnit = as_unit(unit)
        kept, self._kept = self._kept, None  # taken: a unit read alongside opens its own
        if kept is not None and kept[0] != typed.path:
            kept[2].close()
            kept = None
        if kept is None:
            kept = self._open(typed.path)
        pf = kept[1]
        try:
            meta = pf.metadata
            for rg, first in typed.row_group_reads(after, meta.num_row_groups, lambda g: meta.row_group(g).num_rows):
                for i, values in iter_row_group_rows(pf, typed.path, rg, first, binary_views=self.binary_views):
                    yield typed.position(rg, i), _row_of(values)
        except BaseException:
            kept[2].close()
            raise
        if self._kept is None:
            self._kept = kept  # the next unit is most often the next row group of the same file
        else:
            kept[2].close()

    def _open(self, path: str) -> tuple[str, pq.ParquetFile, contextlib.ExitStack]:
        """``path`` opened for streaming, its column types checked."""
        with contextlib.ExitStack() as stack:
            pf = stack.enter_context(open_parquet(path, self.storage_options, streaming=True, retry=self.retry))
            problems = column_type_problems({f.name: f.type for f in pf.schema_arrow}, self.column_types)
            if problems:
                raise ColumnTypeError(f"dataset {self.dataset_name!r}: {path}: {'; '.join(problems)}")
            return path, pf, stack.pop_all()

    def list_units(self, data_dir_list: Sequence[str], num_used_data: Sequence[int]) -> list[Unit]:
        """Files (whole-file units) or ``(file, row_group)`` pairs, in listing order; unreadable files are dropped."""
        files = list_parquet_files(
            self.dataset_name, data_dir_list, num_used_data, self.storage_options, self.file_order
        )
        if self.granularity == "file":
            return [FileUnit(path) for path in files]
        counts = self._row_group_counts(sorted(set(files)))
        return [RowGroupUnit(path, rg) for path in files if path in counts for rg in range(counts[path])]

    def _row_group_counts(self, files: list[str]) -> dict[str, int]:
        """Row-group count per file: from ``parquet_info`` or the footer; unreadable files dropped."""
        known = {path: self.parquet_info.num_row_groups(path) for path in files}
        counts = {path: n for path, n in known.items() if n is not None}
        missing = [path for path, n in known.items() if n is None]

        def footer(path: str) -> tuple[str, int | BaseException]:
            try:
                return path, len(row_group_sizes(path, self.storage_options))
            except Exception as exc:  # noqa: BLE001 - reported below
                return path, exc

        local = all(storage.is_local(p) for p in missing)  # remote footers are read on the I/O pool
        results = map(footer, missing) if local else service.pool().map(footer, missing)
        for path, result in results:
            if isinstance(result, BaseException):
                self.drops.record("unreadable_file", {"file": path}, result)
            else:
                counts[path] = result
        return counts

    def plan_units(self, units: Iterable[Unit]) -> None:
        """Nothing to read ahead (a unit's file is opened when it is read); the file kept open is closed."""
        kept, self._kept = self._kept, None
        if kept is not None:
            kept[2].close()

    def describe(self, unit: Unit, position: Position | None = None) -> dict[str, Any]:
        """Where a unit (and a row in it) is, for drop logs and errors."""
        found: dict[str, Any] = as_unit(unit).where(position)
        return found
