"""How a kind's source data is laid out; what differs is answered by the shape or by one dispatch per layer."""

from __future__ import annotations

import enum


class SourceShape(enum.Enum):
    """How a kind's source data is laid out before conversion."""

    PARQUET = "parquet"
    """Parquet files whose row groups are sliced into shards."""
    JSONL_MEDIA = "jsonl+media"
    """One JSONL file (a line is a sample) plus a directory of the media the lines name."""

    @property
    def takes_columns(self) -> bool:
        """Whether the kind's rows are table rows with columns (a parquet source's columns)."""
        return self is SourceShape.PARQUET
