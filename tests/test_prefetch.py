"""``io.prefetch.prefetched``: items in order from the process's I/O pool, bounded ahead, errors
where they happened, and a consumer that stops early stops the steps and closes the source."""

from __future__ import annotations

import itertools
import threading
from collections.abc import Iterator

import pytest

from editstream.io import service
from editstream.io.prefetch import prefetched


def test_items_come_in_order_from_the_io_pool():
    threads: set[str] = set()

    def source() -> Iterator[int]:
        for i in range(100):
            threads.add(threading.current_thread().name)
            yield i

    assert list(prefetched(source(), 3)) == list(range(100))
    assert threads and all(name.startswith(service.THREAD_PREFIX) for name in threads), threads


def test_depth_zero_iterates_on_the_callers_thread():
    seen: list[str] = []

    def source() -> Iterator[int]:
        for i in range(5):
            seen.append(threading.current_thread().name)
            yield i

    assert list(prefetched(source(), 0)) == list(range(5))
    assert set(seen) == {threading.current_thread().name}


@pytest.mark.parametrize("depth", [1, 2, 5])
def test_the_helper_is_never_more_than_depth_plus_one_items_ahead(depth):
    produced = itertools.count()
    made = [0]

    def source() -> Iterator[int]:
        for i in range(50):
            made[0] = next(produced) + 1
            yield i

    for consumed, item in enumerate(prefetched(source(), depth), start=1):
        assert item == consumed - 1
        # the queue holds ``depth`` items and the helper one more, waiting to put it
        assert made[0] <= consumed + depth + 1


def test_an_error_of_the_source_is_raised_after_the_items_before_it():
    def source() -> Iterator[int]:
        yield 1
        yield 2
        raise OSError("row group 3 is damaged")

    got: list[int] = []
    with pytest.raises(OSError, match="row group 3 is damaged"):
        for item in prefetched(source(), 2):
            got.append(item)
    assert got == [1, 2]


def test_a_consumer_that_stops_early_stops_the_steps_and_closes_the_source():
    closed = threading.Event()

    def endless() -> Iterator[int]:
        try:
            yield from itertools.count()
        finally:
            closed.set()

    before = service.budget().used
    source = endless()
    items = prefetched(source, 2, item_bytes=1000)
    assert [next(items) for _ in range(3)] == [0, 1, 2]
    assert 1000 <= service.budget().used - before <= 3000  # the item handed out and at most two ahead
    items.close()
    # closing a generator another thread is running fails, so a step still running would show here
    assert closed.is_set() and source.gi_frame is None
    assert service.budget().used == before  # every byte handed back
