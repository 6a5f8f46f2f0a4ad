"""Progress of a conversion: a tqdm bar over shards with rows/s and MB/s (or nothing)."""

from __future__ import annotations

import sys
import time
from typing import Any

from .records import ShardResult


class ShardProgress:
    """Counts finished shards, rows and bytes; shows a bar on stderr when enabled."""

    def __init__(self, total: int, enabled: bool) -> None:
        self.t0 = time.perf_counter()
        self.rows = 0
        self.bytes = 0
        self.bar: Any = None
        if enabled:
            from tqdm import tqdm

            self.bar = tqdm(total=total, unit="shard", desc="convert", file=sys.stderr, dynamic_ncols=True)

    def update(self, result: ShardResult) -> None:
        """Count one finished (or reused) shard."""
        self.rows += result.num_rows
        self.bytes += result.shard["num_bytes"]
        if self.bar is not None:
            dt = max(time.perf_counter() - self.t0, 1e-9)
            self.bar.set_postfix_str(f"{self.rows / dt:,.0f} rows/s, {self.bytes / dt / 1e6:,.1f} MB/s", refresh=False)
            self.bar.update(1)

    def close(self) -> None:
        """Close the bar."""
        if self.bar is not None:
            self.bar.close()
