"""Counting what a stream drops: bad rows, unreadable units, corrupt shards.

Nothing is dropped silently: every drop increments a per-reason counter, keeps its location
(file, row group, row, or shard URL and key) in a short history, and is logged for the first
few occurrences of each reason and then every 100th, so a bad dataset cannot flood the log.
"""

from __future__ import annotations

import logging
from collections import Counter, deque
from dataclasses import dataclass, field
from typing import Any

logger = logging.getLogger("editstream.drops")

LOG_FIRST = 3
LOG_EVERY = 100
HISTORY = 256


@dataclass(frozen=True)
class Drop:
    """One dropped row or unit: why, where, and the error text."""

    reason: str
    location: dict[str, Any]
    error: str


@dataclass
class DropLog:
    """Per-reason drop counters plus the most recent drops, for one dataset in one process."""

    dataset_name: str = ""
    counts: Counter = field(default_factory=Counter)
    recent: deque = field(default_factory=lambda: deque(maxlen=HISTORY))

    def record(self, reason: str, location: dict[str, Any], error: BaseException | str | None = None) -> Drop:
        """Count a drop and log it if it is among the first few or every 100th of its reason."""
        text = "" if error is None else (error if isinstance(error, str) else f"{type(error).__name__}: {error}")
        drop = Drop(reason=reason, location=dict(location), error=text)
        self.counts[reason] += 1
        self.recent.append(drop)
        n = self.counts[reason]
        if n <= LOG_FIRST or n % LOG_EVERY == 0:
            where = ", ".join(f"{k}={v}" for k, v in location.items())
            logger.warning("dataset %s dropped (%s #%d) at %s: %s", self.dataset_name, reason, n, where, text)
        return drop

    @property
    def total(self) -> int:
        return sum(self.counts.values())

    def as_dict(self) -> dict[str, int]:
        return dict(self.counts)
