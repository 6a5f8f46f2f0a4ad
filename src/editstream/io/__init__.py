"""Storage layer shared by the converter and the loader: fsspec access, atomic writes, retries,
ranged reads, parquet row reading (one iterator for everyone), and the process's I/O service
(one byte budget and thread pool for all read-ahead and prefetch: :func:`configure`)."""

from .service import IOConfig, configure

__all__ = ["IOConfig", "configure"]
