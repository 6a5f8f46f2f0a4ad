"""Fetching items whose order is known ahead, a few at a time on threads, with memory bounded.

A worker's JSONL-line rows are single samples scattered over many shards, and the worker knows
their order before it reads any, so it fetches the next ones concurrently while it parses the
current one. Two limits bound memory: the bytes fetched but not yet handed out (a budget, an
item larger than the budget still goes alone) and the number of items in flight.
"""

from __future__ import annotations

import os
from collections import deque
from collections.abc import Callable, Generator, Iterable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any, TypeVar

T = TypeVar("T")
R = TypeVar("R")

DEFAULT_PREFETCH_BYTES = 64 << 20
DEFAULT_PREFETCH_ITEMS = 32


def prefetch_ordered(
    items: Iterable[T],
    fetch: Callable[[T], R],
    cost: Callable[[T], int],
    pool: ThreadPoolExecutor,
    *,
    max_bytes: int = DEFAULT_PREFETCH_BYTES,
    max_items: int = DEFAULT_PREFETCH_ITEMS,
) -> Generator[tuple[T, Future[R]], None, None]:
    """``(item, future of fetch(item))`` in the order of ``items``, fetched ahead on ``pool``.

    At most ``max_items`` fetches are in flight or waiting to be handed out, and their ``cost``
    (bytes) adds up to at most ``max_bytes`` unless a single item is larger. Closing the
    iterator cancels the fetches not started yet.
    """
    if max_bytes <= 0 or max_items <= 0:
        raise ValueError(f"prefetch limits must be > 0, got max_bytes={max_bytes}, max_items={max_items}")
    pending: deque[tuple[T, Future[R], int]] = deque()
    source = iter(items)
    waiting: list[T] = []  # the next item, when it did not fit the budget yet
    in_flight = 0
    try:
        while True:
            while len(pending) < max_items:
                if not waiting:
                    try:
                        waiting.append(next(source))
                    except StopIteration:
                        break
                item = waiting[0]
                size = max(0, int(cost(item)))
                if pending and in_flight + size > max_bytes:
                    break
                waiting.clear()
                pending.append((item, pool.submit(fetch, item), size))
                in_flight += size
            if not pending:
                return
            item, future, size = pending.popleft()
            in_flight -= size
            yield item, future
    finally:
        for _, future, _ in pending:
            future.cancel()


class ProcessLocalPool:
    """A thread pool created on first use in each process (DataLoader workers never inherit one).

    Pickling (spawned workers) and forking both leave the pool behind; the next :meth:`get`
    in the new process starts a fresh one.
    """

    def __init__(self, threads: int, name: str) -> None:
        if threads < 1:
            raise ValueError(f"threads must be >= 1, got {threads}")
        self.threads = threads
        self.name = name
        self._pool: ThreadPoolExecutor | None = None
        self._pid: int | None = None

    def get(self) -> ThreadPoolExecutor:
        if self._pool is None or self._pid != os.getpid():
            self._pool = ThreadPoolExecutor(max_workers=self.threads, thread_name_prefix=self.name)
            self._pid = os.getpid()
        return self._pool

    def __getstate__(self) -> dict[str, Any]:
        return {"threads": self.threads, "name": self.name, "_pool": None, "_pid": None}
