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

FATAL = (KeyboardInterrupt, SystemExit, MemoryError, GeneratorExit)
"""Exceptions that are never counted as a drop: they stop the stream."""

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


class FailureBudgetExceeded(RuntimeError):
    """Too many units in a row could not be read: the data (or the storage) is broken."""


class FailureBudget:
    """Counts units that failed to read in a row; more than ``budget`` stops the stream."""

    def __init__(self, dataset_name: str, budget: int) -> None:
        self.dataset_name = dataset_name
        self.budget = budget
        self.in_a_row = 0

    def failed(self, where: dict[str, Any], error: BaseException) -> None:
        """Count one failed unit; raise :class:`FailureBudgetExceeded` (chained) past the budget."""
        self.in_a_row += 1
        if self.in_a_row > self.budget:
            raise FailureBudgetExceeded(
                f"dataset {self.dataset_name!r}: {self.in_a_row} units in a row could not be read "
                f"(budget {self.budget}); last: {where}: {error}"
            ) from error

    def succeeded(self) -> None:
        """A unit gave a row: the run of failures is over."""
        self.in_a_row = 0
