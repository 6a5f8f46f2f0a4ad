"""Progress of a conversion: finished shards with rows/s and MB/s, and (for a local DST, every second)
the bytes already in the temp files of shards in flight, so the line moves within large shards too."""

from __future__ import annotations

import contextlib
import os
import threading

from ..io import storage
from ..io.progress import Progress
from .records import TEMP_NAME, ShardResult


def bytes_in_flight(dst: str) -> int:
    """Bytes in the temp files of a local DST directory (shards being written); 0 where it cannot be listed."""
    total = 0
    try:
        with os.scandir(dst) as entries:
            for entry in entries:
                if TEMP_NAME.match(entry.name):
                    with contextlib.suppress(FileNotFoundError):
                        total += entry.stat().st_size
    except OSError:
        return 0
    return total


class ShardProgress:
    """Counts finished shards, rows and bytes; shows them (and bytes in flight) when enabled."""

    def __init__(self, total: int, enabled: bool, dst: str | None = None) -> None:
        self.progress = Progress("convert", total, "shards", enabled)
        self._stop = threading.Event()
        self._ticker: threading.Thread | None = None
        if enabled and dst is not None and storage.is_local(dst):
            self._ticker = threading.Thread(target=self._tick, args=(dst,), name="editstream-progress", daemon=True)
            self._ticker.start()

    def _tick(self, dst: str) -> None:
        while not self._stop.wait(1.0):
            flight = bytes_in_flight(dst)
            bar = self.progress.bar
            if bar is not None and flight:
                rate = self.progress.rate()
                bar.set_postfix_str(f"{rate + ', ' if rate else ''}{flight / 1e6:,.1f} MB in flight")

    def update(self, result: ShardResult) -> None:
        """Count one finished (or reused) shard."""
        self.progress.update(1, rows=result.num_rows, nbytes=result.shard.num_bytes)

    def close(self) -> None:
        """Stop the ticker and close the bar (or print the last line)."""
        self._stop.set()
        if self._ticker is not None:
            self._ticker.join(timeout=2)
        self.progress.close()
