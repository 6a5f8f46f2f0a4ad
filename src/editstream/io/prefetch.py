"""Work ahead of a consumer on the process's I/O pool, within its byte budget (:mod:`.service`).

Two shapes of work ahead, both bounded and both in order:

- :func:`prefetched` runs one iterator a few items ahead (the converter decodes parquet batches
  this way: pyarrow releases the GIL while it decodes, so the next batch is decoded while the
  caller encodes and writes the current one). The iterator is advanced one step at a time, each
  step a task of the pool, so a paused producer holds no thread; an error of the source is
  raised in the consumer where the item would have been, and a consumer that stops early
  (``close()``, an exception, garbage collection) stops it and closes the source.
- :func:`prefetch_ordered` fetches independent items whose order is known ahead (a worker's
  JSONL-line samples scattered over many shards, the media of a converter task's next lines),
  several at once.

The bytes of the items ahead are held of the process's budget (an item larger than what is
free goes alone once its consumer holds nothing), so they count with every other reader's.
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Callable, Generator, Iterable, Iterator
from concurrent.futures import Future
from typing import Generic, TypeVar, cast

from . import service

T = TypeVar("T")
R = TypeVar("R")

DEFAULT_PREFETCH_ITEMS = 32
_END = object()


class _Failure:
    """The source's exception, carried to the consumer."""

    def __init__(self, error: BaseException) -> None:
        self.error = error


class _Steps(Generic[T]):
    """One iterator advanced on the pool a step at a time, at most ``depth`` items ahead."""

    def __init__(self, source: Iterator[T], depth: int, item_bytes: int) -> None:
        self._source = source
        self._depth = depth
        self._item_bytes = item_bytes
        self._account = service.account()
        self._ready: deque[object] = deque()
        self._step: Future[None] | None = None
        self._over = False  # the source ended or failed, or the consumer stopped
        self._handed = 0  # bytes of the item the consumer has now
        self._changed = threading.Condition()

    def _schedule(self) -> None:
        """Start the next step if none runs and there is room (called holding ``_changed``)."""
        if self._step is not None or self._over or len(self._ready) >= self._depth:
            return
        if self._account.take(self._item_bytes, force=self._account.used == 0):
            self._step = service.pool().submit(self._run)

    def _run(self) -> None:
        item: object
        try:
            item = next(self._source)
        except StopIteration:
            item = _END
        except BaseException as exc:  # noqa: BLE001 - handed to the consumer, raised there
            item = _Failure(exc)
        with self._changed:
            self._ready.append(item)
            self._step = None
            self._over = self._over or item is _END or isinstance(item, _Failure)
            self._schedule()
            self._changed.notify_all()

    def next(self) -> object:
        """The next item (``_END`` at the end); the one handed out before stops counting."""
        with self._changed:
            self._account.give(self._handed)
            self._schedule()
            self._changed.wait_for(lambda: bool(self._ready))
            item = self._ready.popleft()
            self._handed = self._item_bytes
        if isinstance(item, _Failure):
            raise item.error
        return item

    def stop(self) -> None:
        """No more steps: cancel a queued one, wait for a running one, hand the bytes back."""
        with self._changed:
            self._over = True
            if self._step is not None and self._step.cancel():
                self._step = None
            self._changed.wait_for(lambda: self._step is None)
        self._account.give_all()


def prefetched(source: Iterable[T], depth: int = 2, *, item_bytes: int = 0) -> Iterator[T]:
    """The items of ``source`` in order, produced on the I/O pool at most ``depth`` ahead, each
    counting ``item_bytes`` against the process's budget until the consumer asks for the next.

    ``depth`` < 1 iterates ``source`` on the caller's thread (nothing ahead). The source must not
    wait for tasks of the I/O pool itself (a step is a leaf task).
    """
    if depth < 1:
        yield from source
        return
    steps = _Steps(iter(source), depth, item_bytes)
    try:
        while (item := steps.next()) is not _END:
            yield cast(T, item)
    finally:
        steps.stop()
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
