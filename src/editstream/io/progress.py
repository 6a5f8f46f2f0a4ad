"""Progress a person can follow: a tqdm bar on a terminal, elsewhere (where a bar turns into thousands
of frames) a plain line every ``EDITSTREAM_PROGRESS_SECONDS`` (default 30) seconds and one at the end."""

from __future__ import annotations

import os
import sys
import time
from typing import Any, TextIO

DEFAULT_INTERVAL = 30.0


def _interval() -> float:
    try:
        return max(0.0, float(os.environ.get("EDITSTREAM_PROGRESS_SECONDS", DEFAULT_INTERVAL)))
    except ValueError:
        return DEFAULT_INTERVAL


def _human(n: float) -> str:
    for unit in ("B", "kB", "MB", "GB"):
        if abs(n) < 1000:
            return f"{n:,.0f} {unit}" if unit == "B" else f"{n:,.1f} {unit}"
        n /= 1000
    return f"{n:,.1f} TB"


class Progress:
    """Counts ``done`` of ``total`` (``unit``), plus rows and bytes for the rate shown beside it."""

    def __init__(self, desc: str, total: int | None, unit: str, enabled: bool = True) -> None:
        self.desc = desc
        self.total = total
        self.unit = unit
        self.enabled = enabled
        self.stream: TextIO = sys.stderr
        self.done = self.rows = self.bytes = 0
        self.t0 = self.last_line = time.perf_counter()
        self.interval = _interval()
        self.bar: Any = None
        if enabled and self.stream.isatty():
            from tqdm import tqdm

            self.bar = tqdm(total=total, unit=unit, desc=desc, file=self.stream, dynamic_ncols=True)

    def rate(self) -> str:
        """``1,234 rows/s, 56.7 MB/s`` from what was counted so far."""
        dt = max(time.perf_counter() - self.t0, 1e-9)
        parts = []
        if self.rows:
            parts.append(f"{self.rows / dt:,.0f} rows/s")
        if self.bytes:
            parts.append(f"{_human(self.bytes / dt)}/s")
        return ", ".join(parts)

    def line(self) -> str:
        """The plain progress line: ``convert: 7/32 shards (21%), 1,234 rows/s, 12s``."""
        of = f"/{self.total}" if self.total is not None else ""
        pct = f" ({100 * self.done / self.total:.0f}%)" if self.total else ""
        rate = self.rate()
        elapsed = time.perf_counter() - self.t0
        return f"{self.desc}: {self.done:,}{of} {self.unit}{pct}{', ' + rate if rate else ''}, {elapsed:.0f}s"

    def update(self, n: int = 1, *, rows: int = 0, nbytes: int = 0) -> None:
        """Count ``n`` more units (and ``rows`` rows, ``nbytes`` bytes behind them)."""
        self.done += n
        self.rows += rows
        self.bytes += nbytes
        if not self.enabled:
            return
        if self.bar is not None:
            rate = self.rate()
            if rate:
                self.bar.set_postfix_str(rate, refresh=False)
            self.bar.update(n)
            return
        now = time.perf_counter()
        if now - self.last_line >= self.interval:
            self.last_line = now
            print(self.line(), file=self.stream, flush=True)

    def close(self) -> None:
        """Close the bar, or print the last line (only when there was something to count)."""
        if not self.enabled:
            return
        if self.bar is not None:
            self.bar.close()
            self.bar = None
        elif self.done:
            print(self.line(), file=self.stream, flush=True)
        self.enabled = False

    def __enter__(self) -> Progress:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
