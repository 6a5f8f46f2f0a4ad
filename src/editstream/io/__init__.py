"""Storage layer shared by the converter and the loader: fsspec access, atomic writes, retries, ranged
reads, parquet rows, and the process's I/O service (one byte budget and pool: :func:`configure`)."""

from .service import IOConfig, configure

__all__ = ["IOConfig", "configure"]
