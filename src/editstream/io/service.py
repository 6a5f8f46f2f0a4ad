"""The I/O service of a process: one byte budget and one thread pool for all read-ahead and prefetch
(a reader holding nothing may always take its next item; pool tasks are leaves, so it cannot deadlock)."""

from __future__ import annotations

import os
import threading
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from typing import Any

THREAD_PREFIX = "editstream-io"


@dataclass(frozen=True)
class IOConfig:
    """How much a process may hold read ahead and on how many threads it fetches."""

    max_bytes: int = 64 << 20
    """Bytes all read-ahead and prefetch of one process hold at once (a DataLoader worker is a process)."""
    threads: int = 16
    """Threads of the process's I/O pool: ranged block reads, sample fetches, footers, media reads."""

    def __post_init__(self) -> None:
        if self.max_bytes <= 0 or self.threads < 1:
            raise ValueError(f"IOConfig needs max_bytes > 0 and threads >= 1, got {self.max_bytes} and {self.threads}")


class ByteBudget:
    """A thread-safe count of bytes held against a limit, inside a larger budget when ``within``."""

    def __init__(self, limit: int | None = None, within: ByteBudget | None = None) -> None:
        if (limit is None and within is None) or (limit is not None and limit <= 0):
            raise ValueError(f"a byte budget needs a limit > 0 bytes, got {limit}")
        self.cap = limit
        self.within = within
        self.used = 0
        self.peak = 0
        self._lock = threading.Lock()

    @property
    def limit(self) -> int:
        """The most this budget holds (beyond forced takes): its own limit within the outer one."""
        return min(n for n in (self.cap, None if self.within is None else self.within.limit) if n is not None)

    def take(self, n: int, *, force: bool = False) -> bool:
        """Hold ``n`` more bytes if they fit (or ``force``); returns whether they were taken."""
        with self._lock:
            if not force and self.cap is not None and self.used + n > self.cap:
                return False
            if self.within is not None and not self.within.take(n, force=force):
                return False
            self.used += n
            self.peak = max(self.peak, self.used)
            return True

    def give(self, n: int) -> None:
        """Hand back ``n`` of the bytes held (never more than held)."""
        with self._lock:
            n = min(n, self.used)
            self.used -= n
        if self.within is not None:
            self.within.give(n)

    def give_all(self) -> None:
        """Hand back everything held (a reader dropped mid-way)."""
        self.give(self.used)


class _Service:
    """One process's budget and pool (the pool is started on first use)."""

    def __init__(self, config: IOConfig) -> None:
        self.pid = os.getpid()
        self.config = config
        self.budget = ByteBudget(config.max_bytes)
        self.pool: ThreadPoolExecutor | None = None


_configured: IOConfig | None = None  # what configure() set, inherited by a fork, carried by a pickle
_current: _Service | None = None
_lock = threading.Lock()


def _after_fork() -> None:
    global _lock, _current
    _lock = threading.Lock()  # another thread may have held it at the fork
    _current = None


os.register_at_fork(after_in_child=_after_fork)


def _service() -> _Service:
    global _current
    with _lock:
        if _current is None or _current.pid != os.getpid():
            _current = _Service(config())
        return _current


def configure(config: IOConfig | None = None, /, **changes: Any) -> IOConfig:
    """Set this process's I/O sizes (an :class:`IOConfig`, or fields of it to change); returns them.
    Call it before the DataLoader starts its workers (spawned ones take it from the sources pickled to them)."""
    global _configured
    service = _service()
    with _lock:
        _configured = new = replace(config or service.config, **changes)
        service.budget.cap = new.max_bytes
        if service.pool is not None and new.threads != service.config.threads:
            service.pool.shutdown(wait=False)  # what was submitted still runs
            service.pool = None
        service.config = new
    return new


def config() -> IOConfig:
    """This process's I/O sizes."""
    return _configured or IOConfig()


def carry() -> IOConfig | None:
    """The sizes a source pickled for another process takes with it (``None`` when never configured)."""
    return _configured


def adopt(config: IOConfig | None) -> None:
    """Use the sizes a pickled source carried, unless this process configured its own."""
    if config is not None and _configured is None:
        configure(config)


def budget() -> ByteBudget:
    """The byte budget every reader of this process shares."""
    return _service().budget


def pool() -> ThreadPoolExecutor:
    """The thread pool every fetch of this process runs on (started on first use, per process)."""
    service = _service()
    with _lock:
        if service.pool is None:
            service.pool = ThreadPoolExecutor(max_workers=service.config.threads, thread_name_prefix=THREAD_PREFIX)
        return service.pool


def account(cap: int | None = None) -> ByteBudget:
    """A new reader's budget inside this process's, of at most ``cap`` bytes when given."""
    return ByteBudget(cap, budget())
