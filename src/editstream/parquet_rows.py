"""Rows of one parquet ``(file, row_group)`` unit as Python dicts, read through fsspec.

The converter and the parquet loader both read rows here, so both see exactly the same
values: ``pyarrow``'s ``to_pylist()`` (bytes stay bytes, lists stay lists, None stays None).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from . import storage

STREAM_BATCH_ROWS = 32
STREAM_BUFFER_BYTES = 4 << 20


@contextlib.contextmanager
def open_parquet(url: str, storage_options: storage.StorageOptions | None = None, *,
                 streaming: bool = False) -> Iterator[pq.ParquetFile]:
    """Open ``url`` (local or any fsspec URL) as a ``ParquetFile``; the file closes on exit.

    Plain local paths are memory-mapped by arrow itself (no copy through Python file
    objects), which the converter's zero-copy reads rely on; everything else is read through
    ``storage.open_read``. With ``streaming``, pyarrow reads column chunks page by page
    through a small buffer (``pre_buffer=False``), so :func:`iter_row_group_rows` holds a few
    batches of rows in memory instead of about four times the row group. The rows are the same.
    """
    with contextlib.ExitStack() as stack:
        if not streaming and storage.is_local(url) and "://" not in url:
            source: Any = url
            options: dict[str, Any] = {"memory_map": True}
        else:
            source = stack.enter_context(storage.open_read(url, storage_options))
            options = {"pre_buffer": False, "buffer_size": STREAM_BUFFER_BYTES} if streaming else {}
        try:
            pf = pq.ParquetFile(source, **options)
        except FileNotFoundError:
            raise
        except (pa.ArrowInvalid, OSError) as exc:
            raise OSError(f"cannot read parquet footer of {url}: {exc}") from exc
        try:
            yield pf
        finally:
            pf.close()


def check_row_group(url: str, pf: pq.ParquetFile, row_group: int) -> None:
    """Raise ``IndexError`` naming the file when ``row_group`` is not one of its row groups."""
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


def _is_binary(t: pa.DataType) -> bool:
    return pa.types.is_binary(t) or pa.types.is_large_binary(t)


def _binary_views(arr: pa.Array) -> list[memoryview | None]:
    """Values of a (large) binary array as zero-copy memoryviews into arrow's buffers."""
    _, offsets_buf, data_buf = arr.buffers()
    dtype = np.int64 if pa.types.is_large_binary(arr.type) else np.int32
    n = len(arr)
    if n == 0:
        return []
    offsets = np.frombuffer(offsets_buf, dtype=dtype)[arr.offset:arr.offset + n + 1].tolist()
    data = memoryview(data_buf) if data_buf is not None else memoryview(b"")
    views: list[memoryview | None] = [data[offsets[i]:offsets[i + 1]] for i in range(n)]
    if arr.null_count:
        for i, null in enumerate(arr.is_null().to_pylist()):
            if null:
                views[i] = None
    return views


def _list_of_binary_views(arr: pa.Array) -> list[list[memoryview | None] | None]:
    """Values of a list<binary> array as lists of zero-copy memoryviews."""
    n = len(arr)
    if n == 0:
        return []
    offsets = arr.offsets.to_pylist()
    lo, hi = offsets[0], offsets[-1]
    child = _binary_views(arr.values.slice(lo, hi - lo))
    out: list[list[memoryview | None] | None] = [child[offsets[i] - lo:offsets[i + 1] - lo] for i in range(n)]
    if arr.null_count:
        for i, null in enumerate(arr.is_null().to_pylist()):
            if null:
                out[i] = None
    return out


def batch_rows(batch: pa.RecordBatch | pa.Table, *, binary_views: bool = False) -> list[dict[str, Any]]:
    """Rows of a record batch as dicts in column order, like ``to_pylist()``.

    With ``binary_views``, binary values (top level or in a list) are ``memoryview`` slices of
    arrow's buffers instead of ``bytes`` copies: equal content, no copy. The converter uses
    this to stream image bytes into tar shards without touching them.
    """
    if not binary_views:
        return batch.to_pylist()
    columns = []
    for arr in batch.columns:
        if isinstance(arr, pa.ChunkedArray):
            arr = arr.combine_chunks()
        t = arr.type
        if _is_binary(t):
            columns.append(_binary_views(arr))
        elif (pa.types.is_list(t) or pa.types.is_large_list(t)) and _is_binary(t.value_type):
            columns.append(_list_of_binary_views(arr))
        else:
            columns.append(arr.to_pylist())
    names = batch.schema.names
    return [dict(zip(names, values)) for values in zip(*columns)] if columns else [{} for _ in range(batch.num_rows)]


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


def iter_row_group_rows(pf: pq.ParquetFile, url: str, row_group: int, start_row: int = 0,
                        batch_rows: int = STREAM_BATCH_ROWS) -> Iterator[tuple[int, dict[str, Any]]]:
    """``(row index, row)`` of one row group from ``start_row`` on, decoded a small batch at a time.

    The rows are the ones :func:`read_row_group_rows` returns (same values, same order).
    """
    check_row_group(url, pf, row_group)
    index = 0
    try:
        for batch in pf.iter_batches(batch_size=batch_rows, row_groups=[row_group], use_threads=False):
            n = batch.num_rows
            if index + n <= start_row:
                index += n
                continue
            skip = max(0, start_row - index)
            for i, row in enumerate(batch.slice(skip).to_pylist(), start=index + skip):
                yield i, row
            index += n
    except (pa.ArrowException, OSError) as exc:
        raise OSError(f"cannot read row group {row_group} of {url} (at row {index}): {exc}") from exc
