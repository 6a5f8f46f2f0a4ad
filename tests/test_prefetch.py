"""``io.prefetch.prefetched``: items in order from a helper thread, bounded ahead, errors where
they happened, and a consumer that stops early stops the helper."""

from __future__ import annotations

import itertools
import threading
from collections.abc import Iterator

import pytest

from editstream.io.prefetch import prefetched


def test_items_come_in_order_from_a_helper_thread():
    threads: set[str] = set()

    def source() -> Iterator[int]:
        for i in range(100):
            threads.add(threading.current_thread().name)
            yield i

    assert list(prefetched(source(), 3, name="helper-under-test")) == list(range(100))
    assert threads == {"helper-under-test"}


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


def test_a_consumer_that_stops_early_stops_the_helper_and_closes_the_source():
    closed = threading.Event()

    def endless() -> Iterator[int]:
        try:
            yield from itertools.count()
        finally:
            closed.set()

    before = set(threading.enumerate())
    items = prefetched(endless(), 2, name="endless-helper")
    assert [next(items) for _ in range(3)] == [0, 1, 2]
    items.close()
    assert closed.is_set()
    assert not [t for t in set(threading.enumerate()) - before if t.name == "endless-helper"]
