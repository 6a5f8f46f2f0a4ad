"""Rows of parquet row groups as Python dicts, read through fsspec: the one reader of the converter, the
verifier and the parquet loader, so all see ``to_pylist()``'s values (the converter's binaries as memoryviews)."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from . import storage
from .ranged import open_read
from .retry import RetryPolicy
from .text import UndecodableRow, column_values

STREAM_BATCH_ROWS = 32
"""Rows decoded at a time by the loader: a few batches of rows in memory, not a row group."""
STREAM_BATCH_BYTES = 16 << 20
"""...and at most about this many bytes of them (by the footer's sizes), however large the rows."""
STREAM_BUFFER_BYTES = 4 << 20


@contextlib.contextmanager
def open_parquet(
    url: str,
    storage_options: storage.StorageOptions | None = None,
    *,
    streaming: bool = False,
    retry: RetryPolicy | None = None,
    metadata: pq.FileMetaData | None = None,
) -> Iterator[pq.ParquetFile]:
    """Open ``url`` as a ``ParquetFile``, closed on exit: a plain local path memory-mapped (the converter's
    zero-copy reads rely on it), else retried ranged reads; ``streaming`` reads pages through a small buffer
    (a few batches in memory, not 4x the row group); ``metadata``, the footer read earlier, is not read again."""
    options: dict[str, Any] = {"pre_buffer": False, "buffer_size": STREAM_BUFFER_BYTES} if streaming else {}
    with contextlib.ExitStack() as stack:
        if not streaming and storage.is_local(url) and "://" not in url:
            source: Any = url
            options = {"memory_map": True}
        elif streaming and storage.is_local(url):
            source = stack.enter_context(pa.OSFile(storage.local_path(url)))
        else:
            source = stack.enter_context(open_read(url, storage_options, retry=retry))
        try:
            pf = pq.ParquetFile(source, metadata=metadata, **options)
        except FileNotFoundError:
            raise
        except (pa.ArrowInvalid, OSError) as exc:
            raise OSError(f"cannot read parquet footer of {url}: {exc}") from exc
        try:
            yield pf
        finally:
            pf.close()


def _is_binary(t: pa.DataType) -> bool:
    return bool(pa.types.is_binary(t) or pa.types.is_large_binary(t))


def _null_indices(arr: pa.Array) -> list[int]:
    """Where ``arr`` holds nulls, read from its validity bitmap (``is_null`` would load pyarrow.compute)."""
    if not arr.null_count:
        return []
    bits = np.unpackbits(np.frombuffer(arr.buffers()[0], dtype=np.uint8), bitorder="little")
    return [int(i) for i in np.flatnonzero(bits[arr.offset : arr.offset + len(arr)] == 0)]


def _binary_views(arr: pa.Array) -> list[memoryview | None]:
    """Values of a (large) binary array as zero-copy memoryviews into arrow's buffers."""
    _, offsets_buf, data_buf = arr.buffers()
    dtype = np.int64 if pa.types.is_large_binary(arr.type) else np.int32
    n = len(arr)
    if n == 0:
        return []
    offsets = np.frombuffer(offsets_buf, dtype=dtype)[arr.offset : arr.offset + n + 1].tolist()
    data = memoryview(data_buf).cast("B") if data_buf is not None else memoryview(b"")  # unsigned, as bytes compare
    views: list[memoryview | None] = [data[offsets[i] : offsets[i + 1]] for i in range(n)]
    return _with_nulls(arr, views)


def _list_of_binary_views(arr: pa.Array) -> list[list[memoryview | None] | None]:
    """Values of a list<binary> array as lists of zero-copy memoryviews."""
    n = len(arr)
    if n == 0:
        return []
    offsets = arr.offsets.to_pylist()
    lo, hi = offsets[0], offsets[-1]
    child = _binary_views(arr.values.slice(lo, hi - lo))
    return _with_nulls(arr, [child[offsets[i] - lo : offsets[i + 1] - lo] for i in range(n)])


def _with_nulls(arr: pa.Array, values: list[Any]) -> list[Any]:
    """``values`` with ``None`` where ``arr`` is null."""
    for i in _null_indices(arr):
        values[i] = None
    return values


def batch_rows(batch: pa.RecordBatch | pa.Table, *, binary_views: bool = False) -> list[dict[str, Any]]:
    """Rows of a record batch as dicts in column order, like ``to_pylist()``; with ``binary_views`` binaries
    (top level or in a list) are memoryviews of arrow's buffers, not copies. A row with text that is not
    UTF-8 is an :class:`~editstream.io.text.UndecodableRow` (read column by column, as pyarrow refuses the batch)."""
    if not binary_views:
        try:
            return batch.to_pylist()
        except UnicodeDecodeError:
            pass
    columns: list[list[Any]] = []
    bad: dict[int, list[str]] = {}
    for name, arr in zip(batch.schema.names, batch.columns):
        if isinstance(arr, pa.ChunkedArray):
            arr = arr.combine_chunks()
        t = arr.type
        if binary_views and _is_binary(t):
            columns.append(_binary_views(arr))
        elif binary_views and (pa.types.is_list(t) or pa.types.is_large_list(t)) and _is_binary(t.value_type):
            columns.append(_list_of_binary_views(arr))
        else:
            values, undecodable = column_values(arr)
            columns.append(values)
            for i in (i for i, flag in enumerate(undecodable) if flag):
                bad.setdefault(i, []).append(name)
    names = batch.schema.names
    if not columns:
        return [{} for _ in range(batch.num_rows)]
    rows = [dict(zip(names, values)) for values in zip(*columns)]
    for i, bad_columns in bad.items():
        rows[i] = UndecodableRow(rows[i], bad_columns)
    return rows


def iter_row_group_batches(
    pf: pq.ParquetFile,
    url: str,
    row_group: int,
    start: int = 0,
    stop: int | None = None,
    *,
    batch_size: int | None = None,
    binary_views: bool = False,
    columns: list[str] | None = None,
) -> Iterator[tuple[int, list[dict[str, Any]]]]:
    """``(index of the first row, rows)`` for rows ``[start, stop)`` of one row group, at most ``batch_size``
    rows a batch (default: ``STREAM_BATCH_ROWS``, fewer past ``STREAM_BATCH_BYTES``). Errors name the file,
    the row group and the row reached."""
    if start < 0:
        raise ValueError(f"start must be >= 0, got {start}")
    if not 0 <= row_group < (n := pf.metadata.num_row_groups):
        raise IndexError(f"{url} has {n} row groups; row group {row_group} does not exist")
    if batch_size is None:
        batch_size = batch_rows_for_bytes(pf, row_group, STREAM_BATCH_BYTES, STREAM_BATCH_ROWS)
    index = 0  # index (in the row group) of the first row of the current batch
    try:
        for batch in pf.iter_batches(batch_size=batch_size, row_groups=[row_group], columns=columns, use_threads=False):
            n = batch.num_rows
            lo = max(0, start - index)
            hi = n if stop is None else min(n, stop - index)
            if hi > lo:
                part = batch if (lo == 0 and hi == n) else batch.slice(lo, hi - lo)
                yield index + lo, batch_rows(part, binary_views=binary_views)
            index += n
            if stop is not None and index >= stop:
                return
    except (pa.ArrowException, OSError) as exc:
        raise OSError(f"cannot read row group {row_group} of {url} (at row {index}): {exc}") from exc


def iter_row_group_rows(
    pf: pq.ParquetFile,
    url: str,
    row_group: int,
    start: int = 0,
    stop: int | None = None,
    *,
    binary_views: bool = False,
) -> Iterator[tuple[int, dict[str, Any]]]:
    """``(row index, row)`` for rows ``[start, stop)`` of one row group (``iter_row_group_batches``, row by row)."""
    for first, rows in iter_row_group_batches(pf, url, row_group, start, stop, binary_views=binary_views):
        yield from enumerate(rows, start=first)


def batch_rows_for_bytes(pf: pq.ParquetFile, row_group: int, target_bytes: int, most: int) -> int:
    """Rows of ``row_group`` in about ``target_bytes`` decoded, by the footer's sizes: between 1 and ``most``."""
    meta = pf.metadata.row_group(row_group)
    if meta.num_rows <= 0:
        return most
    per_row = max(1, meta.total_byte_size // meta.num_rows)
    return max(1, min(most, target_bytes // per_row))


def read_row_group_rows(
    url: str, row_group: int, storage_options: storage.StorageOptions | None = None, start_row: int = 0
) -> list[dict[str, Any]]:
    """Rows ``start_row..`` of row group ``row_group`` of the parquet file at ``url``, as a list."""
    with open_parquet(url, storage_options, streaming=True) as pf:
        return [row for _, row in iter_row_group_rows(pf, url, row_group, start_row)]


def row_group_sizes(url: str, storage_options: storage.StorageOptions | None = None) -> list[int]:
    """Number of rows in each row group of ``url``, from the footer only."""
    with open_parquet(url, storage_options) as pf:
        meta = pf.metadata
        return [meta.row_group(i).num_rows for i in range(meta.num_row_groups)]
