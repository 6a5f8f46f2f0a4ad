"""Bounded time on storage and one retry layer: a silent or refused endpoint fails fast with an
error naming the URL, retries never nest, and retry jitter never touches the global RNGs.

The bounds are asserted as what makes them (attempts, timeouts, a fake clock), not as elapsed
wall-clock time, which a busy machine stretches."""

from __future__ import annotations

import random
import re

import fsspec
import numpy as np
import pytest

from editstream import ByteTokenizer, ImageTransform, UnifiedEditIterableDataset
from editstream.io import storage
from editstream.io.ranged import read_range
from editstream.io.retry import RetriesExhausted, RetryPolicy
from faultproxy import FaultPlan, FaultProxy
from helpers import VAE, VIT, synth_and_convert

QUICK = RetryPolicy(max_attempts=3, initial_backoff=0.01, max_backoff=0.05, deadline=30)


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    return synth_and_convert(
        tmp_path_factory.mktemp("bounds"), num_files=1, row_groups_per_file=2, rows_per_group=3, seed=8, max_side=64
    )


def edit(url: str, storage_options: dict, **kw) -> UnifiedEditIterableDataset:
    return UnifiedEditIterableDataset(
        "unified_edit",
        ImageTransform(**VAE),
        ByteTokenizer(),
        ImageTransform(**VIT),
        [url],
        [1],
        None,
        num_workers=0,
        backend="webdataset",
        storage_options=storage_options,
        **kw,
    )


def test_a_silent_endpoint_fails_each_unit_within_the_bound_and_names_the_shard(data, s3_bucket):
    fs = fsspec.filesystem("s3", **s3_bucket.storage_options)
    fs.put(str(data / "wds") + "/", f"{s3_bucket.name}/wds/", recursive=True)
    with FaultProxy(s3_bucket.endpoint) as proxy:
        options = {
            "endpoint_url": proxy.url,
            "key": s3_bucket.storage_options["key"],
            "secret": s3_bucket.storage_options["secret"],
            "config_kwargs": {"read_timeout": 1, "connect_timeout": 1},
        }
        ds = edit(f"{s3_bucket.url}/wds", options, retry=QUICK)
        ds.set_epoch(0)  # the manifest is read while the endpoint still answers
        proxy.set_plan(FaultPlan(every=1, kinds=("stall",), silent=True, stall_seconds=60, min_body=0))
        with pytest.raises(RuntimeError, match="a whole pass over 2 units gave no sample"):
            next(iter(ds))
        stalled = proxy.faults_injected.get("stall", 0)
    # The bound is attempts x read timeout, both asserted instead of the elapsed time: each unit
    # makes at most QUICK's 3 attempts (s3fs makes a single attempt), and every request the 60 s
    # stall swallowed was ended by the 1 s read timeout (a read waiting out the stall would not
    # end in a ReadTimeoutError).
    attempts = [int(a) for d in ds.drops.recent for a in re.findall(r"gave up after (\d+) attempts", d.error)]
    assert len(attempts) == 2 and all(1 <= a <= 3 for a in attempts), attempts
    assert 2 <= stalled <= sum(attempts), (stalled, attempts)
    assert all("ReadTimeoutError: Read timeout" in d.error for d in ds.drops.recent), ds.drops.recent
    assert ds.drops.counts == {"unreadable_unit": 2}
    failures = [d for d in ds.drops.recent if d.reason == "unreadable_unit"]
    assert all("RetriesExhausted" in d.error and "gave up after" in d.error for d in failures)
    assert sorted(d.location["shard"].rsplit("/", 1)[1] for d in failures) == [
        "part-00000-rg00000.tar",
        "part-00000-rg00001.tar",
    ]
    assert all(f"{s3_bucket.url}/wds/part-00000" in d.error for d in failures)


def test_s3fs_makes_one_attempt_per_call_under_editstream(s3_bucket):
    fs, _ = storage.url_to_fs(f"{s3_bucket.url}/x", s3_bucket.storage_options)
    assert fs.retries == 1
    config = fs.config_kwargs
    assert config["retries"] == {"max_attempts": 0}
    assert (config["connect_timeout"], config["read_timeout"]) == (storage.S3_CONNECT_TIMEOUT, storage.S3_READ_TIMEOUT)


@pytest.mark.slow
def test_a_refused_endpoint_is_a_clear_error_through_the_python_api():
    options = {"endpoint_url": "http://127.0.0.1:9", "key": "k", "secret": "s", "config_kwargs": {"connect_timeout": 1}}
    ds = edit("s3://bucket/wds", options)
    with pytest.raises(RetriesExhausted, match=r"s3://bucket/wds/manifest\.json: gave up after \d+ attempts"):
        ds.set_epoch(0)


class FakeTime:
    """A clock that moves only when told to or when :meth:`sleep` is called on it (no real waiting)."""

    def __init__(self) -> None:
        self.now = 0.0
        self.sleeps: list[float] = []

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.now += seconds


def test_read_range_counts_attempts_and_stops_at_the_deadline(tmp_path):
    clock = FakeTime()
    calls = []

    def flaky() -> bytes:
        calls.append(clock())
        clock.now += 0.01  # an attempt takes 10 ms
        raise ConnectionResetError("connection reset by peer")

    policy = RetryPolicy(
        max_attempts=100, initial_backoff=0.05, max_backoff=0.05, deadline=0.5, clock=clock, sleep=clock.sleep
    )
    with pytest.raises(RetriesExhausted, match="what: gave up after") as raised:
        policy.call(flaky, "what")
    assert f"gave up after {len(calls)} attempts in" in str(raised.value)
    assert 3 <= len(calls) < 100  # the deadline stopped it, not the attempts
    assert all(t < 0.5 for t in calls)  # no attempt started after the deadline ...
    assert clock() + 0.05 >= 0.5  # ... and it did not give up before the next wait would cross it
    assert all(0.025 <= s < 0.05 for s in clock.sleeps)  # the backoff, jittered in [0.5, 1)
    (tmp_path / "f").write_bytes(b"0123456789")
    assert read_range(str(tmp_path / "f"), 2, 5) == b"234"


def test_retries_do_not_nest_and_only_transient_errors_are_retried():
    policy = RetryPolicy()
    assert policy.is_transient(ConnectionResetError("reset"))
    assert policy.is_transient(TimeoutError())
    assert not policy.is_transient(OSError("something went wrong"))  # used to be retried: any message
    assert not policy.is_transient(FileNotFoundError("gone"))
    assert not policy.is_transient(RetriesExhausted("x: gave up after 6 attempts in 1.0 s: timed out"))
    for status in (
        "An error occurred (503) when calling GetObject",
        "500, message='Internal Server Error'",
        "HTTP/1.1 502 Bad Gateway",
        "status 504",
    ):
        assert policy.is_transient(OSError(status)), status
    # a number that merely holds 500 (a modification time in ns, a row count) is no server answer
    assert not policy.is_transient(OSError("data.parquet changed: mtime 1733321501500423117, size 15040"))
    calls = []

    def gives_up() -> None:
        calls.append(1)
        raise RetriesExhausted("inner gave up: timed out")

    with pytest.raises(RetriesExhausted, match="inner gave up"):
        policy.call(gives_up, "outer")
    assert calls == [1]


def test_retry_jitter_leaves_the_global_rngs_alone_and_differs_between_calls():
    random.seed(5)
    np.random.seed(5)
    delays = [RetryPolicy().delay(1) for _ in range(50)]
    assert random.random() == random.Random(5).random()
    assert np.random.rand() == np.random.RandomState(5).rand()
    assert len(set(delays)) > 40  # not random.Random(attempt): workers do not retry in lockstep
    assert all(0.1 <= d < 0.2 for d in delays)
