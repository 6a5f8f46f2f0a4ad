"""Rows of one parquet ``(file, row_group)`` unit as Python dicts, read through fsspec.

The converter and the parquet loader both read rows here, so both see exactly the same
values: ``pyarrow``'s ``to_pylist()`` (bytes stay bytes, lists stay lists, None stays None).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from . import storage


@contextlib.contextmanager
def open_parquet(url: str, storage_options: storage.StorageOptions | None = None) -> Iterator[pq.ParquetFile]:
    """Open ``url`` (local or any fsspec URL) as a ``ParquetFile``; the file closes on exit."""
    with storage.open_read(url, storage_options) as f:
        try:
            pf = pq.ParquetFile(f)
        except (pa.ArrowInvalid, OSError) as exc:
            raise OSError(f"cannot read parquet footer of {url}: {exc}") from exc
        try:
            yield pf
        finally:
            pf.close()


def check_row_group(url: str, pf: pq.ParquetFile, row_group: int) -> None:
    n = pf.metadata.num_row_groups
    if not 0 <= row_group < n:
        raise IndexError(f"{url} has {n} row groups; row group {row_group} does not exist")


def read_row_group_table(pf: pq.ParquetFile, url: str, row_group: int) -> pa.Table:
    """One row group of an open file as an arrow table; errors name the file and row group."""
    check_row_group(url, pf, row_group)
    try:
        return pf.read_row_group(row_group)
    except (pa.ArrowException, OSError) as exc:
        raise OSError(f"cannot read row group {row_group} of {url}: {exc}") from exc


def table_rows(table: pa.Table, start_row: int = 0) -> list[dict[str, Any]]:
    """Rows of ``table`` from ``start_row`` on, as dicts in column order."""
    if start_row < 0:
        raise ValueError(f"start_row must be >= 0, got {start_row}")
    if start_row:
        table = table.slice(start_row)
    return table.to_pylist()


def read_row_group_rows(url: str, row_group: int, storage_options: storage.StorageOptions | None = None,
                        start_row: int = 0) -> list[dict[str, Any]]:
    """Rows ``start_row..`` of row group ``row_group`` of the parquet file at ``url``."""
    with open_parquet(url, storage_options) as pf:
        return table_rows(read_row_group_table(pf, url, row_group), start_row)


def row_group_sizes(url: str, storage_options: storage.StorageOptions | None = None) -> list[int]:
    """Number of rows in each row group of ``url``, from the footer only."""
    with open_parquet(url, storage_options) as pf:
        meta = pf.metadata
        return [meta.row_group(i).num_rows for i in range(meta.num_row_groups)]


def num_row_groups(url: str, storage_options: storage.StorageOptions | None = None) -> int:
    """Number of row groups of ``url``, from the footer only."""
    with open_parquet(url, storage_options) as pf:
        return pf.metadata.num_row_groups
