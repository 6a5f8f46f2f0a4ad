"""The read-ahead: several ranged requests in flight along a plan, exactly the bytes, within its budget.

Local files stand in for an object store where only the order and the bytes matter; a fetch
slowed on purpose shows the depth growing with latency; S3 through the fault proxy (resets,
5xx, stalls, added latency) shows that every block is retried from its own offset and nothing
is lost or repeated.
"""

from __future__ import annotations

import random
import threading
import time

import fsspec
import pytest

from editstream.io.readahead import ByteBudget, ReadAhead
from editstream.io.retry import RetryPolicy
from editstream.testing.faultproxy import FaultPlan, FaultProxy

FAST_RETRY = RetryPolicy(max_attempts=8, initial_backoff=0.01, max_backoff=0.05)


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


class SlowReadAhead(ReadAhead):
    """Every fetch waits ``latency`` seconds first (an object store's first byte); counts concurrency."""

    def __init__(self, latency: float, **kw):
        super().__init__(**kw)
        self.latency = latency
        self.active = 0
        self.most_active = 0
        self._lock = threading.Lock()

    def _fetch(self, url, a, b):
        with self._lock:
            self.active += 1
            self.most_active = max(self.most_active, self.active)
        try:
            time.sleep(self.latency)
            return super()._fetch(url, a, b)
        finally:
            with self._lock:
                self.active -= 1


def stream(ra, ranges, per_block_work: float = 0.0) -> bytes:
    ra.plan(iter(ranges))
    out = []
    for url, start, end in ranges:
        with ra.open(url, start, end) as r:
            while chunk := r.read(ra.block_size):
                out.append(chunk)
                if per_block_work:
                    time.sleep(per_block_work)
    return b"".join(out)


def test_depth_follows_latency_and_stays_within_the_budget(objects):
    url = list(objects)[4]
    ranges = [(url, 0, len(objects[url]))] * 6
    budget = ByteBudget(10 * 1024)
    fast_consumer = SlowReadAhead(0.03, block_size=1024, budget=budget)
    t0 = time.perf_counter()
    assert stream(fast_consumer, ranges) == objects[url] * 6
    seconds = time.perf_counter() - t0
    blocks = 6 * -(-len(objects[url]) // 1024)
    # requests overlap across block and object boundaries, up to the budget (10 blocks)
    assert fast_consumer.most_active >= 8
    assert fast_consumer.max_held <= 10 and budget.peak <= budget.limit and fast_consumer.peak_bytes <= budget.limit
    assert seconds < blocks * 0.03 / 3  # one request at a time would take blocks * latency
    assert budget.used == 0  # every block handed back

    slow_consumer = SlowReadAhead(0.002, block_size=1024, budget=ByteBudget(10 * 1024))
    assert stream(slow_consumer, ranges[:2], per_block_work=0.01) == objects[url] * 2
    assert slow_consumer.depth() <= 3  # a consumer slower than the fetches needs two or three blocks


def test_a_shared_budget_is_handed_back_when_a_stream_is_dropped(objects):
    url = list(objects)[4]
    budget = ByteBudget(16 * 1024)
    ra = ReadAhead(block_size=1024, budget=budget)
    ra.plan(iter([(url, 0, len(objects[url]))] * 3))
    with ra.open(url, 0, len(objects[url])) as r:
        r.read(5000)
        deadline = time.monotonic() + 5
        while budget.used < 8 * 1024 and time.monotonic() < deadline:
            r.read(1)
            time.sleep(0.01)
        assert budget.used > 0
    ra.plan(iter(()))
    deadline = time.monotonic() + 5
    while budget.used and time.monotonic() < deadline:
        time.sleep(0.01)
    assert budget.used == 0
    other = ReadAhead(block_size=1024, budget=budget)
    other.plan(iter([(url, 0, len(objects[url]))]))
    with other.open(url, 0, len(objects[url])) as r:
        r.read(10)
    del other, r
    deadline = time.monotonic() + 5
    while budget.used and time.monotonic() < deadline:
        time.sleep(0.01)
    assert budget.used == 0


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
