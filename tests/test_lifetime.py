"""A killed or terminated converter leaves no process behind, and its DST resumes.

The conversion reads from a real S3 server through a proxy that adds latency, so the worker
processes are busy when the converter is killed (``kill -9``, as an OOM kill) or terminated
(SIGTERM, as Slurm and Kubernetes send on preemption).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import fsspec
import pytest

from editstream import convert, write_synthetic_dataset
from editstream.conversion.lock import LOCK_NAME
from editstream.conversion.verify import verify
from faultproxy import FaultPlan, FaultProxy

pytestmark = pytest.mark.slow


def _descendants(pid: int) -> set[int]:
    table = subprocess.run(["ps", "-e", "-o", "pid=,ppid="], capture_output=True, text=True).stdout.split()
    pairs = list(zip(map(int, table[0::2]), map(int, table[1::2])))
    found: set[int] = set()
    frontier = {pid}
    while frontier:
        frontier = {child for child, parent in pairs if parent in frontier} - found
        found |= frontier
    return found


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split()[2] != "Z"
    except FileNotFoundError:
        return False


HANG_GUARD = 120.0
"""Seconds a wait below gives up after: a hang guard for what takes a second or two, not a bound
the test asserts (a busy machine may be slow, never that slow)."""


def wait_for(condition, what: str, *, fail: bool = True) -> None:
    """Poll ``condition`` until it holds (the processes and the proxy give nothing to block on);
    after ``HANG_GUARD`` seconds fail naming ``what`` (or return, with ``fail=False``)."""
    deadline = time.monotonic() + HANG_GUARD
    while not condition():
        if time.monotonic() > deadline:
            assert not fail, f"waited {HANG_GUARD} s for {what}"
            return
        time.sleep(0.05)


@pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGTERM], ids=["kill-9", "sigterm"])
def test_no_worker_outlives_its_converter_and_the_dst_resumes(tmp_path, s3_bucket, sig):
    write_synthetic_dataset(str(tmp_path / "pq"), num_files=2, row_groups_per_file=4, rows_per_group=4, max_side=64)
    fs = fsspec.filesystem("s3", **s3_bucket.storage_options)
    fs.put(str(tmp_path / "pq") + "/", f"{s3_bucket.name}/pq/", recursive=True)
    src, dst = f"{s3_bucket.url}/pq", str(tmp_path / "wds")
    with FaultProxy(s3_bucket.endpoint, latency=0.25) as proxy:
        env = {**os.environ, "AWS_ENDPOINT_URL": proxy.url, "PYTHONPATH": os.pathsep.join(sys.path)}
        proc = subprocess.Popen(
            [sys.executable, "-m", "editstream.cli", "convert", src, dst, "--workers", "2", "--no-progress"],
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
        )
        wait_for(lambda: len(_descendants(proc.pid)) >= 4, "the workers to start")  # tracker, fork server, 2 workers
        # the DST is locked once the plan is made: the sources' footers are read by then
        wait_for(lambda: os.path.exists(os.path.join(dst, LOCK_NAME)), "the plan to be made")
        # From now on every object read hangs (until the proxy stops): only the workers read now,
        # so they are inside a read when the signal comes, instead of a sleep guessing when.
        proxy.set_plan(FaultPlan(every=1, kinds=("stall",), silent=True, stall_seconds=600, min_body=0))
        wait_for(lambda: proxy.faults_injected.get("stall", 0) >= 2, "two reads to hang")
        family = _descendants(proc.pid)
        assert len(family) >= 4 and proc.poll() is None
        os.kill(proc.pid, sig)
        proc.wait(timeout=HANG_GUARD)
        wait_for(lambda: not any(_alive(p) for p in family), "the converter's processes to exit", fail=False)
        survivors = [p for p in family if _alive(p)]
        for p in survivors:
            os.kill(p, signal.SIGKILL)
        assert survivors == [], f"{len(survivors)} processes outlived the converter"
        if sig == signal.SIGTERM:
            stderr = proc.stderr.read().decode() if proc.stderr else ""
            assert proc.returncode != 0 and "re-run the same conversion to resume" in stderr
    options = dict(s3_bucket.storage_options)
    summary = convert(src, dst, workers=2, progress=False, storage_options=options)
    assert summary["num_shards"] == 8 and summary["converted_shards"] + summary["skipped_shards"] == 8
    assert verify(dst).ok
