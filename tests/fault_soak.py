"""A fault soak: stream shards from a real S3 server through a proxy that injects faults, and
compare every sample with a fault-free stream (nothing lost, nothing repeated, nothing changed).

Used by ``benchmarks/soak.py`` (thousands of faults, a table) and by the test suite (a short
run). The proxy resets connections mid-body (short reads), answers 503 / 500, and stalls
responses past the client's read timeout; editstream's retries must absorb all of it.
"""

from __future__ import annotations

import hashlib
import random
import tempfile
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from editstream.conversion.run import convert
from editstream.io.retry import RetryPolicy
from editstream.loader.tokenizer import ByteTokenizer
from editstream.loader.transforms import ImageTransform
from editstream.sandbox.s3server import LocalS3Server
from editstream.sandbox.synth import synth_kinds, write_synthetic_dataset
from faultproxy import FaultPlan, FaultProxy

SOAK_KINDS = ("reset_mid_body", "http_503", "reset_mid_body", "http_500", "reset_mid_body", "stall")
"""Fault kinds in round robin: mostly short reads and 5xx, some stalls (each costs a read timeout)."""


@dataclass
class SoakResult:
    """What a soak run saw."""

    samples_expected: int
    samples_yielded: int
    matching: int
    duplicates: int
    lost: int
    changed: int
    """Samples that differ from the fault-free sample at the same position (duplicates and losses included)."""
    faults: dict[str, int] = field(default_factory=dict)
    requests: int = 0
    seconds_clean: float = 0.0
    seconds_faulty: float = 0.0
    unreadable_units: int = 0

    @property
    def total_faults(self) -> int:
        return sum(self.faults.values())


def _fingerprint(sample: dict[str, Any]) -> tuple[Any, ...]:
    digest = hashlib.sha256()
    for tensor in sample["image_tensor_list"]:
        digest.update(tensor.numpy().tobytes())
    plan = repr(sample["sequence_plan"]) + repr(sample["text_ids_list"])
    return tuple(sample["data_indexes"]["data_indexes"]), plan, digest.hexdigest()


def _stream(
    url: str, storage_options: dict[str, Any], n: int, retry: RetryPolicy | None, block_size: int
) -> tuple[list[tuple[Any, ...]], float, int]:
    kind = synth_kinds()[0]  # the kind write_synthetic_dataset writes by default: the edit-chain kind
    ds = kind.dataset_class()(
        kind.name,
        ImageTransform(256, 64, 16),
        ByteTokenizer(),
        ImageTransform(224, 56, 14),
        [url],
        [4],
        None,
        num_workers=0,
        backend="webdataset",
        storage_options=storage_options,
        retry=retry,
        block_size=block_size,
    )
    ds.set_epoch(0)
    random.seed(0)
    started = time.monotonic()
    it = iter(ds)
    prints = [_fingerprint(next(it)) for _ in range(n)]
    return prints, time.monotonic() - started, ds.drop_counts.get("unreadable_unit", 0)


def run_soak(
    samples: int,
    *,
    every: int = 2,
    stall_seconds: float = 2.0,
    read_timeout: float = 0.5,
    block_size: int = 16 << 10,
    work_dir: str | None = None,
) -> SoakResult:
    """Stream ``samples`` samples fault-free and through the faulty proxy; compare them one by one."""
    with tempfile.TemporaryDirectory(dir=work_dir) as tmp, LocalS3Server() as s3:
        root = Path(tmp)
        write_synthetic_dataset(
            str(root / "pq"), num_files=4, row_groups_per_file=4, rows_per_group=8, seed=3, min_side=64, max_side=256
        )
        convert(str(root / "pq"), str(root / "wds"), workers=1, progress=False)
        url = s3.upload(root / "wds", "s3://soak/wds")
        clean, clean_seconds, _ = _stream(url, s3.storage_options, samples, None, block_size)
        plan = FaultPlan(every=every, kinds=SOAK_KINDS, min_body=1, stall_seconds=stall_seconds)
        with FaultProxy(s3.endpoint, faults=plan) as proxy:
            options = {
                **s3.storage_options,
                "endpoint_url": proxy.url,
                "config_kwargs": {"read_timeout": read_timeout, "connect_timeout": 2},
            }
            retry = RetryPolicy(max_attempts=20, initial_backoff=0.01, max_backoff=0.1, deadline=120)
            faulty, faulty_seconds, unreadable = _stream(url, options, samples, retry, block_size)
            faults = {kind: n for kind, n in proxy.faults_injected.items() if n}
            requests = proxy.requests_seen
    wanted = Counter(fp[0] for fp in clean)
    got = Counter(fp[0] for fp in faulty)
    matching = sum(1 for a, b in zip(clean, faulty) if a == b)
    return SoakResult(
        samples_expected=len(clean),
        samples_yielded=len(faulty),
        matching=matching,
        duplicates=sum(max(0, n - wanted[index]) for index, n in got.items()),
        lost=sum(max(0, n - got[index]) for index, n in wanted.items()),
        changed=len(clean) - matching,
        faults=faults,
        requests=requests,
        seconds_clean=clean_seconds,
        seconds_faulty=faulty_seconds,
        unreadable_units=unreadable,
    )
