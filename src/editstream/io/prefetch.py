"""Work ahead of a consumer on the process's I/O pool, within its byte budget (:mod:`.service`)."""

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
    """The items of ``source`` in order, each ``next`` a pool task at most ``depth`` ahead (each holding
    ``item_bytes`` of the budget); step ``k`` waits only for step ``k - 1``, already running. ``depth`` < 1:
    on the caller's thread."""
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
    """``(item, future of fetch(item))`` in the order of ``items``, at most ``max_items`` fetched ahead on
    the I/O pool, each holding its ``cost`` of the budget until the next is asked for."""
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
