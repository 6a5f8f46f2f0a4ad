"""The read-ahead: several ranged requests in flight along a plan, exactly the bytes, within its budget.

Local files stand in for an object store where only the order and the bytes matter; fetches
slowed on a fake clock show the depth following latency (no test here depends on how fast the
machine is: the read-ahead's speed-up is measured in benchmarks/s3_latency.py); S3 through the fault proxy (resets,
5xx, stalls, added latency) shows that every block is retried from its own offset and nothing
is lost or repeated.
"""

from __future__ import annotations

import random
import threading

import fsspec
import pytest

from editstream.io import readahead
from editstream.io.ranged import read_range
from editstream.io.readahead import ReadAhead
from editstream.io.retry import RetryPolicy
from editstream.io.service import ByteBudget
from faultproxy import FaultPlan, FaultProxy

FAST_RETRY = RetryPolicy(max_attempts=8, initial_backoff=0.01, max_backoff=0.05)
HANG_GUARD = 60.0
"""Seconds a wait for a thread gives up after: a hang guard only, the waits here are for work of
microseconds, so no machine is that slow; a bug that deadlocks fails with a message instead."""


@pytest.fixture(scope="module")
def objects(tmp_path_factory):
    """Five files of random bytes (some shorter than a block, some many blocks long)."""
    root = tmp_path_factory.mktemp("readahead")
    rng = random.Random(7)
    out = {}
    for i, size in enumerate([100, 5000, 40000, 1, 70001]):
        path = root / f"obj{i}.bin"
        data = rng.randbytes(size)
        path.write_bytes(data)
        out[str(path)] = data
    return out


def read_all(reader, rng: random.Random) -> bytes:
    parts = []
    while True:
        chunk = reader.read(rng.choice([1, 7, 512, 4096, 10000, -1]))
        if not chunk:
            return b"".join(parts)
        parts.append(chunk)


def test_planned_ranges_read_in_order_give_exactly_their_bytes(objects):
    ra = ReadAhead(block_size=4096, budget=ByteBudget(64 << 10))
    ranges = [(url, 0, len(data)) for url, data in objects.items()] * 2
    ra.plan(iter(ranges))
    rng = random.Random(0)
    for url, start, end in ranges:
        with ra.open(url, start, end) as reader:
            assert read_all(reader, rng) == objects[url][start:end]
    assert ra.requests == 2 * sum(-(-len(d) // 4096) for d in objects.values())  # each block once


def test_unplanned_and_skipped_ranges_are_read_exactly(objects):
    """A resume offset, a skipped unit, a re-read from the start after closing mid-way."""
    urls = list(objects)
    ra = ReadAhead(block_size=1000, budget=ByteBudget(8000))
    ra.plan(iter([(u, 0, len(objects[u])) for u in urls]))
    rng = random.Random(1)
    with ra.open(urls[2], 12345, len(objects[urls[2]])) as r:  # skips urls[0:2], starts mid-object
        assert read_all(r, rng) == objects[urls[2]][12345:]
    with ra.open(urls[4], 0, len(objects[urls[4]])) as r:  # skips urls[3]
        assert r.read(3000) == objects[urls[4]][:3000]
    with ra.open(urls[4], 0, len(objects[urls[4]])) as r:  # read again from the start
        assert read_all(r, rng) == objects[urls[4]]
    with ra.open(urls[1], 10, 20) as r:  # nothing planned any more
        assert read_all(r, rng) == objects[urls[1]][10:20]


def test_a_short_object_ends_its_range(objects):
    """A range claiming more bytes than the object has ends where the object does (a truncated shard)."""
    url = list(objects)[2]
    ra = ReadAhead(block_size=4096, budget=ByteBudget(1 << 20))
    ra.plan(iter([(url, 0, 50000)]))
    with ra.open(url, 0, 50000) as r:
        assert read_all(r, random.Random(2)) == objects[url]


class ThreadClock:
    """A fake clock per thread: a thread's time moves only when it calls :meth:`advance`.

    The read-ahead times a fetch inside the fetching thread and the consumer's pace inside the
    consumer's thread, so with this clock each measurement is exactly the simulated duration
    (a fetch's latency, the consumer's work per block), however busy the machine is.
    """

    def __init__(self) -> None:
        self._local = threading.local()

    def __call__(self) -> float:
        return float(getattr(self._local, "now", 0.0))

    def advance(self, seconds: float) -> None:
        self._local.now = self() + seconds


class FakeStore:
    """Stands in for ``read_range`` under the read-ahead: the file's real bytes, after ``latency``
    seconds of the fetching thread's fake clock; counts the fetches in flight at once.

    ``hold(url, a)`` may return a barrier the fetch of block ``a`` of ``url`` meets first, or an
    event it waits for (a request the store has not answered yet); ``entered`` counts the
    fetches that reached it.
    """

    def __init__(self, monkeypatch, clock: ThreadClock, latency: float = 0.0, hold=lambda url, a: None) -> None:
        self.read = read_range
        self.clock = clock
        self.latency = latency
        self.hold = hold
        self.active = 0
        self.most_active = 0
        self.entered = 0
        self.changed = threading.Condition()
        monkeypatch.setattr(readahead, "read_range", self)

    def __call__(self, url: str, a: int, b: int, **kw) -> bytes:
        with self.changed:
            self.active += 1
            self.entered += 1
            self.most_active = max(self.most_active, self.active)
            self.changed.notify_all()
        try:
            wait = self.hold(url, a)
            if wait is not None:
                assert wait.wait(timeout=HANG_GUARD) is not False, f"{url} block {a} was never answered"
            self.clock.advance(self.latency)
            return self.read(url, a, b, **kw)
        finally:
            with self.changed:
                self.active -= 1
                self.changed.notify_all()

    def wait_entered(self, n: int) -> None:
        """Until ``n`` fetches have reached the store (they are in flight in their threads)."""
        with self.changed:
            assert self.changed.wait_for(lambda: self.entered >= n, timeout=HANG_GUARD)


class WatchedBudget(ByteBudget):
    """A :class:`ByteBudget` one can wait on until its ``used`` bytes satisfy a condition (no polling)."""

    def __init__(self, limit: int) -> None:
        super().__init__(limit)
        self.changed = threading.Condition()

    def give(self, n: int) -> None:
        super().give(n)
        with self.changed:
            self.changed.notify_all()

    def wait_until(self, predicate) -> None:
        with self.changed:
            assert self.changed.wait_for(lambda: predicate(self.used), timeout=HANG_GUARD), self.used


def stream(ra, ranges, per_block_work: float = 0.0, clock: ThreadClock | None = None) -> bytes:
    """Every range read through ``ra`` in order; after each block the consumer works
    ``per_block_work`` seconds on ``clock``."""
    ra.plan(iter(ranges))
    out = []
    for url, start, end in ranges:
        with ra.open(url, start, end) as r:
            while chunk := r.read(ra.block_size):
                out.append(chunk)
                if clock is not None:
                    clock.advance(per_block_work)
    return b"".join(out)


def test_depth_follows_latency_and_stays_within_the_budget(objects, tmp_path, monkeypatch):
    data = objects[list(objects)[4]]  # 69 blocks of 1024
    urls = []
    for i in range(6):
        (tmp_path / f"copy{i}.bin").write_bytes(data)
        urls.append(str(tmp_path / f"copy{i}.bin"))
    ranges = [(url, 0, len(data)) for url in urls]
    blocks = -(-len(data) // 1024)
    clock = ThreadClock()
    # The first 8 blocks of the third object are fetched only once all 8 are in flight together:
    # the consumer gets past them only if the read-ahead keeps at least 8 requests running.
    together = threading.Barrier(8, timeout=HANG_GUARD)

    def hold(url: str, a: int) -> threading.Barrier | None:
        return together if url == urls[2] and a < 8 * 1024 else None

    store = FakeStore(monkeypatch, clock, 0.03, hold=hold)

    budget = ByteBudget(10 * 1024)
    fast_consumer = ReadAhead(block_size=1024, budget=budget, clock=clock)
    fast_consumer.plan(iter(ranges))
    requested_before_open = []
    out = []
    for url, start, end in ranges:
        requested_before_open.append(fast_consumer.requests)
        with fast_consumer.open(url, start, end) as r:
            while chunk := r.read(1024):
                out.append(chunk)
    assert b"".join(out) == data * 6
    # fetches (30 ms) much slower than the consumer: as many requests in flight as the budget holds
    assert fast_consumer.depth() == 10 and fast_consumer.max_held == 10
    assert store.most_active >= 8
    assert budget.peak <= budget.limit and fast_consumer.account.peak <= budget.limit
    # requests overlap across object boundaries: blocks of the next object were requested before it was opened
    assert all(n > i * blocks for i, n in enumerate(requested_before_open) if i > 0), requested_before_open
    assert fast_consumer.requests == 6 * blocks  # each block once
    assert budget.used == 0  # every block handed back

    for latency, work, depth in [(0.002, 0.01, 3), (0.025, 0.01, 5)]:  # ceil(fetch / consume) + 2
        store = FakeStore(monkeypatch, clock, latency)
        consumer = ReadAhead(block_size=1024, budget=ByteBudget(10 * 1024), clock=clock)
        assert stream(consumer, ranges[:2], per_block_work=work, clock=clock) == data * 2
        assert consumer.depth() == depth and consumer.max_held <= depth, (latency, work, consumer.max_held)


def test_a_shared_budget_is_handed_back_when_a_stream_is_dropped(objects, monkeypatch):
    """Blocks requested and not yet answered count until they arrive, then go back, whether the
    plan was dropped or the whole read-ahead was (a stream abandoned without closing)."""
    url = list(objects)[4]
    size = len(objects[url])
    clock = ThreadClock()
    answered = threading.Event()
    store = FakeStore(monkeypatch, clock, hold=lambda _url, a: None if a < 6 * 1024 else answered)
    budget = WatchedBudget(16 * 1024)
    ra = ReadAhead(block_size=1024, budget=budget, clock=clock)  # no time passes: two blocks ahead
    ra.plan(iter([(url, 0, size)] * 3))
    with ra.open(url, 0, size) as r:
        assert r.read(6 * 1024) == objects[url][: 6 * 1024]
        store.wait_entered(7)  # blocks 0-5 answered, block 6 requested and unanswered
        assert budget.used == 2 * 1024  # block 5 (the consumer's) and block 6 (in flight)
    ra.plan(iter(()))
    assert budget.used == 1024  # the unanswered request still counts ...
    answered.set()
    budget.wait_until(lambda used: used == 0)  # ... until it arrives

    answered.clear()
    other = ReadAhead(block_size=1024, budget=budget, clock=clock)
    other.plan(iter([(url, 0, size)]))
    r = other.open(url, 0, size)
    assert r.read(6 * 1024) == objects[url][: 6 * 1024]
    store.wait_entered(14)
    assert budget.used == 2 * 1024
    del other, r  # dropped mid-stream, never closed
    answered.set()
    budget.wait_until(lambda used: used == 0)


def test_through_faults_and_latency_every_byte_arrives_once(s3_bucket):
    rng = random.Random(3)
    fs = fsspec.filesystem("s3", **s3_bucket.storage_options)
    blobs = {f"{s3_bucket.name}/o{i}.bin": rng.randbytes(n) for i, n in enumerate([30000, 65536, 9000, 100000])}
    for key, data in blobs.items():
        fs.pipe_file(key, data)
    plan = FaultPlan(every=2, kinds=("reset_mid_body", "http_503", "http_500", "stall"), stall_seconds=0.6, min_body=1)
    with FaultProxy(s3_bucket.endpoint, faults=plan, latency=0.02) as proxy:
        options = {**s3_bucket.storage_options, "endpoint_url": proxy.url, "config_kwargs": {"read_timeout": 0.3}}
        ra = ReadAhead(storage_options=options, retry=FAST_RETRY, block_size=8192, budget=ByteBudget(64 << 10))
        ranges = [(f"s3://{key}", 0, len(data)) for key, data in blobs.items()] * 3
        got = stream(ra, ranges)
        # concurrent requests share a due fault, so fewer than one in two requests carries one
        injected = {kind for kind, n in proxy.faults_injected.items() if n}
        assert proxy.total_faults >= 12 and injected == set(plan.kinds), proxy.faults_injected
        assert proxy.requests_seen > ra.requests  # the faulted blocks were requested again
    assert got == b"".join(data for data in blobs.values()) * 3
    assert ra.max_held <= 8
