"""Work ahead of a consumer on the process's I/O pool, within its byte budget (:mod:`.service`).

:func:`prefetched` runs one iterator a few items ahead, each ``next`` a pool task (a paused
producer holds no thread; its errors surface where the item would have been; stopping early
closes it). :func:`prefetch_ordered` fetches independent items whose order is known ahead,
several at once. Items ahead hold bytes of the process's budget, shared with every other reader.
"""

from __future__ import annotations

import itertools
import threading
from collections import deque
from collections.abc import Callable, Generator, Iterable, Iterator
from concurrent.futures import Future
from typing import TypeVar, cast

from . import service

T = TypeVar("T")
R = TypeVar("R")

DEFAULT_PREFETCH_ITEMS = 32
_END = object()


def prefetched(source: Iterable[T], depth: int = 2, *, item_bytes: int = 0) -> Iterator[T]:
    """The items of ``source`` in order, produced on the I/O pool at most ``depth`` ahead of the one
    the consumer has, each counting ``item_bytes`` against the process's budget until it asks for the next.

    Step ``k`` (one ``next`` of the source) runs once step ``k - 1`` is done; the pool takes
    tasks in order, so a step only ever waits for one already running. ``depth`` < 1 iterates
    ``source`` on the caller's thread (nothing ahead).
    """
    if depth < 1:
        yield from source
        return
    items = iter(source)
    turn = threading.Condition()
    done = [0, False]  # steps done; whether the consumer has stopped

    def step(k: int) -> object:
        with turn:
            turn.wait_for(lambda: done[0] == k or done[1])
            try:
                return _END if done[1] else next(items, _END)
            finally:
                done[0] += 1
                turn.notify_all()

    steps = prefetch_ordered(itertools.count(), step, lambda _: item_bytes, max_items=depth + 1)
    try:
        for _, future in steps:
            item = future.result()
            if item is _END:
                return
            yield cast(T, item)
    finally:
        steps.close()
        with turn:  # waits for a step inside the source; the steps after it end at once
            done[1] = True
            turn.notify_all()
        close = getattr(source, "close", None)
        if close is not None:
            close()


def prefetch_ordered(
    items: Iterable[T],
    fetch: Callable[[T], R],
    cost: Callable[[T], int],
    *,
    max_bytes: int | None = None,
    max_items: int = DEFAULT_PREFETCH_ITEMS,
) -> Generator[tuple[T, Future[R]], None, None]:
    """``(item, future of fetch(item))`` in the order of ``items``, fetched ahead on the I/O pool.

    At most ``max_items`` fetches are in flight or not yet handed out; their ``cost`` (bytes) is
    held of the process's budget, at most ``max_bytes`` of it when given, from the request until
    the consumer asks for the next item. Closing the iterator cancels the fetches not started yet.
    """
    if max_items <= 0:
        raise ValueError(f"prefetch limits must be > 0, got max_items={max_items}")
    account = service.account(max_bytes)
    pending: deque[tuple[T, Future[R], int]] = deque()
    source = iter(items)
    waiting: list[T] = []  # the next item, when it did not fit the budget yet
    try:
        while True:
            while len(pending) < max_items:
                item = waiting.pop() if waiting else next(source, cast(T, _END))
                if item is _END:
                    break
                size = max(0, int(cost(item)))
                if not account.take(size, force=account.used == 0):
                    waiting.append(item)
                    break
                pending.append((item, service.pool().submit(fetch, item), size))
            if not pending:
                return
            item, future, size = pending.popleft()
            yield item, future
            account.give(size)
    finally:
        for _, future, _ in pending:
            future.cancel()
        account.give_all()
