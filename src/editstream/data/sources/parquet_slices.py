"""Planned row slices of parquet files, read a batch at a time: how the converter reads a shard's source rows
(zero-copy binary views, decoded ahead) and how ``verify`` reads them back, each file checked against the plan.

The parquet backend's row source (:mod:`.parquet`) reads whole row groups for training; both open files and
decode rows through :mod:`editstream.io.parquet`, so a row is the same dict whichever reads it.
"""

from __future__ import annotations

import contextlib
import itertools
import json
from collections.abc import Generator, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import pyarrow.parquet as pq

from ...format.manifest import RowSlice
from ...io import storage
from ...io.parquet import batch_rows_for_bytes, iter_row_group_batches, open_parquet
from ...io.prefetch import prefetched
from ..identity import check_unchanged

BATCH_ROWS = 256
BATCH_BYTES = 2 << 20
"""Decoded bytes per batch decoded ahead (one row when a row is larger)."""
PREFETCH_BATCHES = 2
"""Batches decoded ahead of the rows being used, at most; 0 decodes on the caller's thread."""

_CHECKED_FOOTERS: dict[tuple[str, str, tuple[tuple[str, str], ...]], pq.FileMetaData] = {}
"""Checked footers by URL, planned identity and columns: a converter worker opens a file once per row group."""
_FOOTERS_KEPT = 256


@dataclass(frozen=True)
class PlannedSlices:
    """Row slices of the parquet files under ``root`` and what the plan knew of them, checked as they are read."""

    root: str
    slices: Sequence[RowSlice]
    storage_options: storage.StorageOptions | None = None
    columns: tuple[tuple[str, str], ...] | None = None
    """The ``(name, type)`` columns every file must have (``None``: not checked)."""
    identities: Mapping[str, str] = field(default_factory=dict)
    """File -> its identity as JSON when planned (``data.identity``): a file that changed since is refused."""
    rows_known: bool = True
    """Whether the slices' ``stop`` is the plan's row count (else a slice runs to the end of its row group)."""
    whole_row_group: bool = False
    """Whether each slice must be its whole row group (a shard of one row group)."""
    zero_copy: bool = True
    """Binary values as views of the file's buffers (the converter writes them out) rather than ``bytes``."""

    def _open(self, file: str, stack: contextlib.ExitStack) -> pq.ParquetFile:
        """One file of the plan opened; its identity and columns must be the plan's."""
        url = storage.join(self.root, file)
        planned = self.identities.get(file)
        if planned is not None:
            check_unchanged(url, json.loads(planned), self.storage_options)
        key = (url, planned or "", self.columns or ())
        known = _CHECKED_FOOTERS.get(key)
        pf = stack.enter_context(open_parquet(url, self.storage_options, metadata=known, streaming=not self.zero_copy))
        if known is None:
            got = tuple((f.name, str(f.type)) for f in pf.schema_arrow)
            if self.columns is not None and got != self.columns:
                raise ValueError(f"{url} has columns {list(got)}, expected {list(self.columns)}")
            if planned is not None:
                if len(_CHECKED_FOOTERS) >= _FOOTERS_KEPT:
                    _CHECKED_FOOTERS.clear()
                _CHECKED_FOOTERS[key] = pf.metadata
        return pf

    def _stop(self, pf: pq.ParquetFile, s: RowSlice, url: str) -> int:
        """Where slice ``s`` ends; the file must still hold the rows the plan expected."""
        meta = pf.metadata
        if s.row_group >= meta.num_row_groups:
            raise IndexError(f"{url} has {meta.num_row_groups} row groups; row group {s.row_group} does not exist")
        total = meta.row_group(s.row_group).num_rows
        stop = s.stop if self.rows_known else total
        if stop > total or (self.rows_known and self.whole_row_group and stop != total):
            raise ValueError(
                f"{url} row group {s.row_group} has {total} rows, the plan expected rows "
                f"{s.start}:{s.stop}; the source changed since planning"
            )
        return stop

    def batches(self) -> Iterator[tuple[RowSlice, int, list[dict[str, Any]]]]:
        """``(slice, index of the first row in its row group, rows)`` for every batch, in order."""
        for file, slices in itertools.groupby(self.slices, key=lambda s: s.file):
            with contextlib.ExitStack() as files:
                pf = self._open(file, files)
                url = storage.join(self.root, file)
                for s in slices:
                    stop = self._stop(pf, s, url)
                    size = batch_rows_for_bytes(pf, s.row_group, BATCH_BYTES, BATCH_ROWS)
                    rows = iter_row_group_batches(
                        pf, url, s.row_group, s.start, stop, batch_size=size, binary_views=self.zero_copy
                    )
                    for first, batch in rows:
                        yield s, first, batch

    def rows(self) -> Generator[tuple[RowSlice, int, dict[str, Any]], None, None]:
        """``(slice, row index in its row group, row)`` for every row, in order, batches decoded ahead."""
        for s, first, batch in prefetched(self.batches(), PREFETCH_BATCHES, item_bytes=BATCH_BYTES):
            for row_index, row in enumerate(batch, start=first):
                yield s, row_index, row
