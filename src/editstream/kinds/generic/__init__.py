"""The generic kind: any columns, no row checks, no training dataset (a lossless copy only)."""

from __future__ import annotations

from ..record import DatasetKind

KIND = DatasetKind(
    name="generic",
    summary="any parquet columns, converted losslessly and checked for nothing",
    detectable=False,
)
