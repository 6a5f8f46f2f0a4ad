"""Counting what a stream drops: per-reason counters, a short located history and throttled logs, summed
over DataLoader workers through a private directory; :class:`FailureBudget` stops a run of failures."""

from __future__ import annotations

import contextlib
import glob
import json
import logging
import os
import re
import shutil
import tempfile
import uuid
import weakref
from collections import Counter, deque
from dataclasses import dataclass, field
from typing import Any

logger = logging.getLogger("editstream.drops")

FATAL = (KeyboardInterrupt, SystemExit, MemoryError, GeneratorExit)
"""Exceptions that are never counted as a drop: they stop the stream."""

LOG_FIRST = 3
LOG_EVERY = 100
HISTORY = 256
LOGGED_LOCATIONS = 100_000
"""Locations remembered so a row dropped again (a later epoch, a retry) is not logged again."""

_ADDRESS = re.compile(r"<[^<>]* at 0x[0-9a-fA-F]+>")


def error_text(error: BaseException | str | None) -> str:
    """``Type: message`` of an exception, without object addresses (``<_io.BytesIO at 0x7f..>``)."""
    if error is None:
        return ""
    if isinstance(error, str):
        return error
    return f"{type(error).__name__}: {_ADDRESS.sub('the bytes', str(error))}".rstrip(": ")


def where_text(location: dict[str, Any]) -> str:
    """``shard=..., row=...``: the location as the user gave the paths; the converter's source
    path is left out when the shard (under the root the user gave) is known."""
    items = {k: v for k, v in location.items() if not (k == "file" and "shard" in location)}
    if "shard" in items:
        items = {"shard": items.pop("shard"), **items}
    return ", ".join(f"{k}={v}" for k, v in items.items())


def _remove_dir(path: str, owner: int) -> None:
    if os.getpid() == owner:  # a forked worker inherits this finaliser; only the creator cleans up
        shutil.rmtree(path, ignore_errors=True)


@dataclass(frozen=True)
class Drop:
    """One dropped row or unit: why (the counter, and the report-style detail), where, and the error text."""

    reason: str
    location: dict[str, Any]
    error: str
    detail: str = ""


@dataclass
class DropLog:
    """Per-reason drop counters plus the most recent drops, for one dataset, summed over processes."""

    dataset_name: str = ""
    counts: Counter[str] = field(default_factory=Counter)
    recent: deque[Drop] = field(default_factory=lambda: deque(maxlen=HISTORY))
    shared_dir: str = field(
        default_factory=lambda: os.path.join(tempfile.gettempdir(), f"editstream-drops-{uuid.uuid4().hex}")
    )
    owner_pid: int = field(default_factory=os.getpid)
    _logged: set[tuple[str, tuple[tuple[str, str], ...]]] = field(default_factory=set, repr=False)

    def __post_init__(self) -> None:
        self._pid = os.getpid()
        weakref.finalize(self, _remove_dir, self.shared_dir, self.owner_pid)

    def _this_process(self) -> None:
        """In a new process (a DataLoader worker), start counting from zero: its file holds its own drops."""
        if self._pid != os.getpid():
            self.counts = Counter()
            self._pid = os.getpid()

    def record(
        self, reason: str, location: dict[str, Any], error: BaseException | str | None = None, detail: str = ""
    ) -> Drop:
        """Count a drop; log it (once per location) if it is among the first few or every 100th of its reason."""
        self._this_process()
        text = error_text(error)
        drop = Drop(reason=reason, location=dict(location), error=text, detail=detail)
        self.counts[reason] += 1
        self.recent.append(drop)
        self._publish()
        n = self.counts[reason]
        seen = (reason, tuple(sorted((k, str(v)) for k, v in location.items())))
        if seen in self._logged:
            return drop
        if len(self._logged) < LOGGED_LOCATIONS:
            self._logged.add(seen)
        if n <= LOG_FIRST or n % LOG_EVERY == 0:
            logger.warning(
                f"dataset {self.dataset_name} dropped ({reason} #{n}) at {where_text(location)}: {detail or text}"
            )
        return drop

    def _publish(self) -> None:
        """Write this process's counts where the other processes of the dataset read them."""
        with contextlib.suppress(OSError):
            os.makedirs(self.shared_dir, exist_ok=True)
            path = os.path.join(self.shared_dir, f"{os.getpid()}.json")
            tmp = f"{path}.{uuid.uuid4().hex}.tmp"
            with open(tmp, "w") as f:
                json.dump(dict(self.counts), f)
            os.replace(tmp, path)

    def _published(self) -> Counter[str]:
        total: Counter[str] = Counter()
        for path in glob.glob(os.path.join(glob.escape(self.shared_dir), "*.json")):
            if os.path.basename(path) != f"{os.getpid()}.json":
                with contextlib.suppress(OSError, ValueError), open(path) as f:
                    total.update({str(k): int(v) for k, v in json.load(f).items()})
        return total

    @property
    def total(self) -> int:
        return sum(self.as_dict().values())

    def as_dict(self) -> dict[str, int]:
        """Drops per reason in this process and every other process of this dataset (DataLoader workers)."""
        self._this_process()
        return dict(self.counts + self._published())


class FailureBudgetExceeded(RuntimeError):
    """Too many failures in a row: the data, the storage or the parser is broken."""


@dataclass(eq=False)
class FailureBudget:
    """Counts failures in a row; more than ``budget`` stops the stream with an error saying ``what`` failed
    (and the dataset's drop counts, given ``drops``)."""

    dataset_name: str
    budget: int
    what: str = "units in a row could not be read"
    drops: DropLog | None = None
    in_a_row: int = 0
    last_error: BaseException | None = None
    last_where: dict[str, Any] = field(default_factory=dict)

    def failed(self, where: dict[str, Any], error: BaseException) -> None:
        """Count one failure; raise :class:`FailureBudgetExceeded` (chained to ``error``) past the budget."""
        self.in_a_row += 1
        self.last_error, self.last_where = error, dict(where)
        if self.in_a_row > self.budget:
            counts = f"; drops so far: {self.drops.as_dict()}" if self.drops is not None else ""
            raise FailureBudgetExceeded(
                f"dataset {self.dataset_name!r}: {self.in_a_row} {self.what} "
                f"(budget {self.budget}); last: {where_text(where)}: {error_text(error)}{counts}"
            ) from error

    def succeeded(self) -> None:
        """A success: the run of failures is over."""
        self.in_a_row = 0
        self.last_error = None
