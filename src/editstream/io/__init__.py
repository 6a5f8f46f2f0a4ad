"""Storage layer shared by the converter and the loader: fsspec access, atomic writes,
retries, ranged reads, and parquet row reading (one iterator for everyone)."""
