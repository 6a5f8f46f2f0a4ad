"""The I/O service: one byte budget and one pool per process, sized by ``editstream.io.configure``.

An edit source reading ahead from S3 and a vision-language source prefetching samples hold
bytes of the same budget; the configured sizes are what the readers get; a forked DataLoader
worker makes its own budget and pool (the parent's threads do not exist there), and a source
pickled to a spawned worker carries the sizes with it. Waits are on futures and counters only.
"""

from __future__ import annotations

import itertools
import os
import pickle
import threading

import fsspec
import pytest
import torch

from editstream import convert
from editstream.data.sources.foreign import ForeignTarSource
from editstream.data.sources.sft_shards import ShardLineSource
from editstream.data.sources.webdataset import TarSource
from editstream.io import IOConfig, readahead, service
from editstream.sandbox.synth_vlm import write_synthetic_vlm_dataset
from helpers import synth_and_convert, write_foreign_shards

HANG_GUARD = 60.0
"""Seconds a wait for a pool task gives up after: a hang guard only (an inherited pool never runs it)."""


@pytest.fixture
def io_sizes():
    """``configure``, with the process's sizes put back afterwards."""
    before = service.carry()
    yield service.configure
    service.configure(before or IOConfig())
    service._configured = before


@pytest.fixture(scope="module")
def edit_root(tmp_path_factory):
    return synth_and_convert(
        tmp_path_factory.mktemp("io_edit"), num_files=2, row_groups_per_file=2, rows_per_group=6, seed=5, max_side=96
    )


@pytest.fixture(scope="module")
def vlm_root(tmp_path_factory):
    root = tmp_path_factory.mktemp("io_vlm")
    s = write_synthetic_vlm_dataset(str(root / "src"), num_lines=30, seed=8, max_side=64, video=False)
    convert(s["jsonl"], str(root / "wds"), media_dir=s["media_dir"], samples_per_shard=5, progress=False)
    return root / "wds"


def _edit_on_s3(edit_root, s3_bucket, **options) -> tuple[TarSource, list]:
    so = s3_bucket.storage_options
    fs = fsspec.filesystem("s3", **so)
    fs.put(str(edit_root / "wds") + "/", f"{s3_bucket.name}/wds/", recursive=True)
    source = TarSource(dataset_name="edit", storage_options=so, **options)
    return source, source.list_units([f"{s3_bucket.url}/wds"], [2])


def test_an_edit_and_a_vlm_source_in_one_process_hold_one_budget(edit_root, vlm_root, s3_bucket, io_sizes):
    limit, block = 96 << 10, 8 << 10
    io_sizes(max_bytes=limit)
    edit, edit_units = _edit_on_s3(edit_root, s3_bucket, block_size=block)
    vlm = ShardLineSource(dataset_name="vlm")
    vlm_units = vlm.list_units([str(vlm_root)], [30])
    edit.plan_units(iter(edit_units))
    vlm.plan_units(iter(vlm_units))
    budget, ahead = service.budget(), edit.reads.readahead()
    assert ahead.account.within is budget
    budget.peak = budget.used  # what converting the fixtures held is not this test's
    edit_rows = itertools.chain.from_iterable(edit.iter_unit_rows(u, None) for u in edit_units)
    read = {"edit": 0, "vlm": 0, "both_held": 0}
    for unit in itertools.chain(vlm_units, [None] * 30):
        if unit is not None:
            read["vlm"] += len(list(vlm.iter_unit_rows(unit, None)))
        read["edit"] += next(edit_rows, None) is not None
        if ahead.account.used > 0 and budget.used > ahead.account.used:
            read["both_held"] += 1  # the edit blocks and the vlm samples count in the same budget
    assert read["vlm"] == 30 and read["edit"] == 24 and read["both_held"] > 0, read
    # the one item a reader holding nothing may take beyond the limit: a block, or a sample (within its shard)
    largest_sample = max(p.stat().st_size for p in vlm_root.glob("*.tar"))
    assert budget.peak <= limit + block + largest_sample, (budget.peak, limit)
    edit.plan_units(iter(()))
    vlm.plan_units(iter(()))


def test_the_configured_sizes_are_what_a_reader_gets(edit_root, s3_bucket, io_sizes, monkeypatch):
    io_sizes(IOConfig(max_bytes=32 << 10, threads=2))
    threads: set[str] = set()

    def read_range(*args, **kwargs):
        threads.add(threading.current_thread().name)
        return real(*args, **kwargs)

    real = readahead.read_range
    monkeypatch.setattr(readahead, "read_range", read_range)
    service.budget().peak = service.budget().used
    for cap in (None, 16 << 10):
        edit, units = _edit_on_s3(edit_root, s3_bucket, block_size=4 << 10, readahead_bytes=cap)
        edit.plan_units(iter(units))
        rows = sum(1 for unit in units for _ in edit.iter_unit_rows(unit, None))
        ahead = edit.reads.readahead()
        assert rows == 24 and service.budget().limit == 32 << 10
        assert ahead.account.limit == (cap or 32 << 10) and ahead.depth() <= (cap or 32 << 10) // (4 << 10)
        assert ahead.account.peak <= ahead.account.limit and service.budget().peak <= 32 << 10
        edit.plan_units(iter(()))
    assert 1 <= len(threads) <= 2 and all(t.startswith(service.THREAD_PREFIX) for t in threads), threads


def test_foreign_shards_on_s3_are_read_ahead_across_shards(tmp_path, s3_bucket):
    so = s3_bucket.storage_options
    fs = fsspec.filesystem("s3", **so)
    for path in write_foreign_shards(tmp_path / "shards"):
        fs.put(path, f"{s3_bucket.name}/foreign/{os.path.basename(path)}")
    read = {}
    for options in ({}, {"readahead_bytes": 24 << 10}, {"prefetch": False}):
        source = ForeignTarSource(
            dataset_name="f", schema="t2i_pretrain", storage_options=so, block_size=8 << 10, **options
        )
        units = source.list_units([f"{s3_bucket.url}/foreign/*.tar"], [len(fs.ls(f"{s3_bucket.name}/foreign"))])
        source.plan_units(iter(units))
        ahead = source.reads.readahead()
        requested_before_open, rows = [], []
        for unit in units:
            requested_before_open.append(ahead.requests)
            rows.extend(
                (str(unit), pos, row["__key__"], row["image"]) for pos, row in source.iter_unit_rows(unit, None)
            )
        source.plan_units(iter(()))
        read[str(options)] = rows
        sizes = [fs.size(str(u).removeprefix("s3://")) for u in units]
        if options.get("prefetch", True):  # the next shard's blocks were asked for before it was opened
            blocks = [-(-size // (8 << 10)) for size in sizes]
            assert all(n > sum(blocks[:i]) for i, n in enumerate(requested_before_open) if i), requested_before_open
        else:
            assert ahead.max_held == 1
        assert ahead.account.peak <= options.get("readahead_bytes", service.config().max_bytes)
    assert read["{}"] and all(rows == read["{}"] for rows in read.values())


class _Probe(torch.utils.data.IterableDataset):
    """Yields, from each DataLoader worker, what that worker's I/O service is."""

    def __iter__(self):
        ran_in = service.pool().submit(os.getpid).result(timeout=HANG_GUARD)
        yield {
            "pid": os.getpid(),
            "ran_in": ran_in,
            "inherited": getattr(service.budget(), "made_in", None),
            "limit": service.budget().limit,
        }


def test_a_forked_worker_makes_its_own_budget_and_pool(io_sizes):
    io_sizes(max_bytes=123 << 10, threads=3)
    parent = os.getpid()
    service.budget().made_in = parent  # marks the parent's budget, which a fork would copy
    assert service.pool().submit(os.getpid).result(timeout=HANG_GUARD) == parent  # its threads run
    loader = torch.utils.data.DataLoader(_Probe(), batch_size=None, num_workers=2, multiprocessing_context="fork")
    seen = list(loader)
    assert len(seen) == 2 and len({s["pid"] for s in seen}) == 2
    for s in seen:
        assert s["pid"] != parent and s["ran_in"] == s["pid"]  # the worker's own pool ran the task
        assert s["inherited"] is None  # a new budget, not the parent's copy
        assert s["limit"] == 123 << 10  # the configured size, inherited with the fork
    del service.budget().made_in


def test_a_pickled_source_carries_the_sizes_to_a_fresh_process(io_sizes):
    io_sizes(max_bytes=200 << 10, threads=5)
    blobs = [pickle.dumps(TarSource(dataset_name="t")), pickle.dumps(ShardLineSource(dataset_name="v"))]
    for blob in blobs:
        service.configure(IOConfig())  # what a spawned worker starts with ...
        service._configured = None
        pickle.loads(blob)
        assert service.config() == IOConfig(max_bytes=200 << 10, threads=5)  # ... until a source arrives
    service.configure(max_bytes=300 << 10)  # a process that configured its own keeps it
    pickle.loads(blobs[0])
    assert service.config().max_bytes == 300 << 10


def test_bad_sizes_are_refused_with_the_numbers():
    with pytest.raises(ValueError, match="max_bytes > 0 and threads >= 1, got 0 and 4"):
        IOConfig(max_bytes=0, threads=4)
    with pytest.raises(ValueError, match="dataset 'e': readahead_bytes must be > 0, got -1"):
        TarSource(dataset_name="e", readahead_bytes=-1)
