"""Run an iterator on a helper thread, a bounded number of items ahead of its consumer.

The converter decodes parquet batches this way: pyarrow releases the GIL while it decodes, so
the next batch is decoded while the caller encodes and writes the current one. At most
``depth`` items wait in the queue (plus the one the helper is producing), so memory stays
bounded; the items come out in order, an error of the source is raised in the consumer where
the item would have been, and a consumer that stops early (``close()``, an exception, garbage
collection) stops the helper and waits for it.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Iterable, Iterator
from typing import TypeVar, cast

T = TypeVar("T")

_DONE = object()


class _Failure:
    """The source's exception, carried through the queue to the consumer."""

    def __init__(self, error: BaseException) -> None:
        self.error = error


def prefetched(source: Iterable[T], depth: int = 2, *, name: str = "prefetch") -> Iterator[T]:
    """The items of ``source`` in order, produced on a helper thread at most ``depth`` ahead.

    ``depth`` < 1 iterates ``source`` on the caller's thread (no helper, nothing ahead).
    """
    if depth < 1:
        yield from source
        return
    items: queue.Queue[object] = queue.Queue(maxsize=depth)
    stop = threading.Event()

    def put(item: object) -> bool:
        while not stop.is_set():
            try:
                items.put(item, timeout=0.1)
                return True
            except queue.Full:
                continue
        return False

    def produce() -> None:
        try:
            for item in source:
                if not put(item):
                    return
        except BaseException as exc:  # noqa: BLE001 - handed to the consumer, raised there
            put(_Failure(exc))
            return
        put(_DONE)

    helper = threading.Thread(target=produce, name=name, daemon=True)
    helper.start()
    try:
        while True:
            item = items.get()
            if item is _DONE:
                return
            if isinstance(item, _Failure):
                raise item.error
            yield cast(T, item)
    finally:
        stop.set()
        helper.join()
        close = getattr(source, "close", None)
        if close is not None:
            close()
