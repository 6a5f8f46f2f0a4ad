"""Rows of a parquet shard task as zero-copy views, its files checked against the plan, decoded ahead."""

from __future__ import annotations

import contextlib
import itertools
import json
from collections.abc import Iterator
from typing import Any

import pyarrow.parquet as pq

from ..data.identity import check_unchanged
from ..format import manifest as mf
from ..io import storage
from ..io.parquet import batch_rows_for_bytes, iter_row_group_batches, open_parquet
from ..io.prefetch import prefetched
from .task import ParquetPart, ShardTask

_BATCH_ROWS = 256
BATCH_BYTES = 2 << 20
"""Decoded bytes per batch decoded ahead (one row when a row is larger)."""
PREFETCH_BATCHES = 2
"""Batches decoded ahead of the rows being checked and written, at most; 0 decodes on the task's thread."""


_CHECKED_FOOTERS: dict[tuple[str, str, tuple[tuple[str, str], ...]], pq.FileMetaData] = {}
"""Checked footers by URL and planned identity: a worker opens a file once per row group it converts."""
_FOOTERS_KEPT = 256


def _open_checked(task: ShardTask, file: str, stack: contextlib.ExitStack) -> pq.ParquetFile:
    """Open one source file of the task; its columns must be the plan's."""
    url = storage.join(task.src_root, file)
    planned = dict(task.sources).get(file)
    if planned is not None:
        check_unchanged(url, json.loads(planned), task.storage_options)
    key = (url, planned or "", task.columns)
    known = _CHECKED_FOOTERS.get(key)
    pf = stack.enter_context(open_parquet(url, task.storage_options, metadata=known))
    if known is None:
        got = tuple((f.name, str(f.type)) for f in pf.schema_arrow)
        if got != task.columns:
            raise ValueError(f"{url} has columns {list(got)}, expected {list(task.columns)}")
        if planned is not None:
            if len(_CHECKED_FOOTERS) >= _FOOTERS_KEPT:
                _CHECKED_FOOTERS.clear()
            _CHECKED_FOOTERS[key] = pf.metadata
    return pf


def _slice_stop(task: ShardTask, pf: pq.ParquetFile, s: mf.RowSlice, url: str) -> int:
    """Where slice ``s`` (of the file at ``url``) ends; the file must still hold the rows the plan expected."""
    meta = pf.metadata
    if s.row_group >= meta.num_row_groups:
        raise IndexError(f"{url} has {meta.num_row_groups} row groups; row group {s.row_group} does not exist")
    total = meta.row_group(s.row_group).num_rows
    part = task.part
    assert isinstance(part, ParquetPart)
    known = part.expected_rows is not None
    stop = s.stop if known else total
    if stop > total or (known and part.row_group is not None and stop != total):
        raise ValueError(
            f"{url} row group {s.row_group} has {total} rows, the plan expected rows "
            f"{s.start}:{s.stop}; the source changed since planning"
        )
    return stop


def _task_batches(task: ShardTask) -> Iterator[tuple[mf.RowSlice, int, list[dict[str, Any]]]]:
    """``(slice, index of the first row in its row group, rows)`` for every batch of the task, in order."""
    for file, slices in itertools.groupby(task.slices, key=lambda s: s.file):
        with contextlib.ExitStack() as files:
            pf = _open_checked(task, file, files)
            url = storage.join(task.src_root, file)
            for s in slices:
                stop = _slice_stop(task, pf, s, url)
                size = batch_rows_for_bytes(pf, s.row_group, BATCH_BYTES, _BATCH_ROWS)
                batches = iter_row_group_batches(
                    pf, url, s.row_group, s.start, stop, batch_size=size, binary_views=True
                )
                for first, rows in batches:
                    yield s, first, rows


def iter_parquet_rows(task: ShardTask) -> Iterator[tuple[mf.RowSlice, int, dict[str, Any]]]:
    """``(slice, row index in its row group, row)`` for every row of the task, in order."""
    for s, first, rows in prefetched(_task_batches(task), PREFETCH_BATCHES, item_bytes=BATCH_BYTES):
        for row_index, row in enumerate(rows, start=first):
            yield s, row_index, row
