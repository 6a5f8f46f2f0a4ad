"""Backend equivalence (SPEC 8): parquet and WebDataset streams are the same, bit for bit.

The matrix: seeds x world sizes 1 and 2 (every rank) x 0 and 2 DataLoader workers, on data
with planted bad rows, from local disk and from a real S3-protocol server (moto_server).
"""

from __future__ import annotations

import json
import logging
import random
from pathlib import Path

import fsspec
import pytest
import torch

from editstream import ByteTokenizer, ImageTransform, T2IIterableDataset, UnifiedEditIterableDataset
from editstream.conversion import convert
from editstream.sandbox.synth import write_synthetic_dataset
from helpers import VAE, VIT, synth_and_convert
from helpers import first as first_items  # the loop below names a variable `first`


@pytest.fixture(scope="module")
def edit_data(tmp_path_factory):
    return synth_and_convert(
        tmp_path_factory.mktemp("edit"),
        num_files=3,
        row_groups_per_file=2,
        rows_per_group=5,
        seed=11,
        corrupt_fraction=0.2,
        max_side=96,
    )


@pytest.fixture(scope="module")
def t2i_data(tmp_path_factory):
    return synth_and_convert(
        tmp_path_factory.mktemp("t2i"),
        schema="t2i_pretrain",
        num_files=2,
        row_groups_per_file=3,
        rows_per_group=4,
        seed=5,
        corrupt_fraction=0.2,
        max_side=96,
    )


def edit(root, backend, *, rank=0, world=1, workers=0, storage_options=None, status=None, num_used=3, **options):
    ds = UnifiedEditIterableDataset(
        "unified_edit",
        ImageTransform(**VAE),
        ByteTokenizer(),
        ImageTransform(**VIT),
        [root],
        [num_used],
        None,
        local_rank=rank,
        world_size=world,
        num_workers=workers,
        data_status=status,
        backend=backend,
        storage_options=storage_options,
        **options,
    )
    return ds


def t2i(root, backend, *, rank=0, world=1, workers=0, storage_options=None):
    return T2IIterableDataset(
        "t2i_pretrain",
        ImageTransform(**VAE),
        ByteTokenizer(),
        [root],
        [2],
        local_rank=rank,
        world_size=world,
        num_workers=workers,
        backend=backend,
        storage_options=storage_options,
    )


def stream(ds, n, workers=0, seed=0):
    """First n samples; global random seeded like a training script (or per worker by the loader)."""
    random.seed(seed)
    if workers == 0:
        it = iter(ds)
        return [next(it) for _ in range(n)]
    loader = torch.utils.data.DataLoader(
        ds, batch_size=None, num_workers=workers, generator=torch.Generator().manual_seed(seed)
    )
    return first_items(loader, n)


def assert_same(a_samples, b_samples):
    assert len(a_samples) == len(b_samples)
    for a, b in zip(a_samples, b_samples):
        assert a["data_indexes"] == b["data_indexes"]
        assert a["sequence_plan"] == b["sequence_plan"]
        assert a["text_ids_list"] == b["text_ids_list"]
        assert a["num_tokens"] == b["num_tokens"]
        assert len(a["image_tensor_list"]) == len(b["image_tensor_list"])
        for x, y in zip(a["image_tensor_list"], b["image_tensor_list"]):
            assert x.dtype == y.dtype == torch.float32 and torch.equal(x, y)


def read_through(ds, samples, workers, rows_per_unit):
    """The units a stream read to the end (its next sample is in another unit or a new pass), as
    ``(file name, row group)``, and the rows of those units it passed without yielding them."""
    per_worker = {}
    for s in samples:
        per_worker.setdefault(s["data_indexes"]["worker_id"], []).append(tuple(s["data_indexes"]["data_indexes"]))
    finished, skipped = set(), set()
    for worker, positions in per_worker.items():
        units = ds.worker_units(worker, workers)
        for unit in {a[0] for a, b in zip(positions, positions[1:]) if b[0] != a[0] or b[1] <= a[1]}:
            path, row_group = units[unit]
            finished.add((Path(path).name, row_group))
            rows = {row for u, row in positions if u == unit}
            skipped |= {(Path(path).name, row_group, row) for row in range(rows_per_unit) if row not in rows}
    return finished, skipped


@pytest.mark.parametrize("world,workers", [(1, 0), (1, 2), (2, 0), (2, 2)])
@pytest.mark.parametrize("seed", [0, 42])
def test_edit_parity_local(edit_data, seed, world, workers):
    report = json.loads((edit_data / "wds" / "report.json").read_text())
    planted = {(b["file"], b["row_group"], b["row"]): b["reason"] for b in report["bad_rows"]}
    single_image = {row for row, reason in planted.items() if reason.startswith("fewer than 2 images")}
    skipped = set()
    for rank in range(world):
        streams = []
        for backend, sub in (("parquet", "pq"), ("webdataset", "wds")):
            ds = edit(str(edit_data / sub), backend, rank=rank, world=world, workers=workers)
            ds.set_epoch(seed)
            streams.append(stream(ds, 24, workers, seed))
        assert_same(*streams)
        # Only planted bad rows were dropped (on both sides, the streams being equal), and every
        # single-image row (it always fails; other bad rows fail only when drawn) of a unit read through.
        finished, rank_skipped = read_through(ds, streams[0], workers, rows_per_unit=5)
        assert {row for row in single_image if row[:2] in finished} <= rank_skipped <= set(planted)
        skipped |= rank_skipped
    assert skipped  # the planted bad rows were really met


def test_edit_drop_counts_match(edit_data):
    counts = []
    for backend, sub in (("parquet", "pq"), ("webdataset", "wds")):
        ds = edit(str(edit_data / sub), backend)
        stream(ds, 40)
        counts.append(ds.drop_counts)
    assert counts[0] == counts[1] and counts[0].get("bad_row", 0) > 0


@pytest.mark.parametrize("workers", [0, 2])
def test_t2i_parity_local(t2i_data, workers):
    a = stream(t2i(str(t2i_data / "pq"), "parquet", workers=workers), 30, workers)
    b = stream(t2i(str(t2i_data / "wds"), "webdataset", workers=workers), 30, workers)
    assert_same(a, b)
    assert [len(s["data_indexes"]["data_indexes"]) for s in a] == [3] * 30  # [file, row_group, row]


def test_resume_seeks_to_the_sample_offset(edit_data, caplog):
    """A resume mid-shard starts reading at the idx offset, not at byte 0 of the shard."""
    import re

    from editstream.format.idx import read_idx

    ds = edit(str(edit_data / "wds"), "webdataset")
    it = iter(ds)
    head = [next(it) for _ in range(3)]
    unit, row = head[-1]["data_indexes"]["data_indexes"]
    resumed = edit(str(edit_data / "wds"), "webdataset", status=[[unit, row]])
    with caplog.at_level(logging.DEBUG, logger="editstream"):
        nxt = next(iter(resumed))
    seeks = re.findall(r"resume: reading (\S+) from byte (\d+) \(sample (\d+)\)", caplog.text)
    assert len(seeks) == 1, caplog.text
    url, offset, index = seeks[0]
    offsets, _ = read_idx(url + ".idx")
    assert int(offset) > 0 and int(offset) == offsets[int(index)]
    # bad rows are kept verbatim by default, so a shard's sample index is its row index: the
    # seek lands on the row after the saved one (the next sample is that row, or a later one
    # when that row is bad and dropped by the parser)
    assert int(index) == row + 1 <= nxt["data_indexes"]["data_indexes"][1]


def _upload(local_dir, url, storage_options):
    fs = fsspec.filesystem("s3", **storage_options)
    fs.put(str(local_dir) + "/", url.replace("s3://", "") + "/", recursive=True)


@pytest.mark.parametrize("workers", [0, 2])
def test_edit_parity_from_s3(edit_data, s3_bucket, workers):
    so = s3_bucket.storage_options
    _upload(edit_data / "pq", f"{s3_bucket.url}/pq", so)
    _upload(edit_data / "wds", f"{s3_bucket.url}/wds", so)
    local = edit(str(edit_data / "pq"), "parquet", workers=workers)
    local.set_epoch(7)
    want = stream(local, 24, workers, 7)
    for backend, sub in (("webdataset", "wds"), ("parquet", "pq")):
        ds = edit(f"{s3_bucket.url}/{sub}", backend, workers=workers, storage_options=so)
        ds.set_epoch(7)
        assert_same(stream(ds, 24, workers, 7), want)


def test_the_read_ahead_budget_changes_nothing_in_the_stream_from_s3(edit_data, s3_bucket):
    """Small blocks read one at a time (a budget of one byte) or many in flight: the same samples."""
    so = s3_bucket.storage_options
    _upload(edit_data / "wds", f"{s3_bucket.url}/wds", so)
    streams = []
    for budget in (1, None):
        ds = edit(f"{s3_bucket.url}/wds", "webdataset", storage_options=so, block_size=8 << 10, readahead_bytes=budget)
        ds.set_epoch(3)
        streams.append(stream(ds, 30, 0, 3))
        assert ds.source.reads.readahead().account.limit == (budget or 64 << 20)
    assert_same(*streams)


def test_parity_with_several_roots_named_in_another_order(tmp_path):
    """Units are named after the source parquet files, so the converted roots' own names do not
    change the order: here the roots sort the other way round from their sources."""
    for i, name in enumerate(("src1", "src2")):
        write_synthetic_dataset(
            str(tmp_path / name),
            num_files=2,
            row_groups_per_file=2,
            rows_per_group=3,
            seed=30 + i,
            corrupt_fraction=0.1,
            max_side=64,
        )
    convert(str(tmp_path / "src1"), str(tmp_path / "zz_out"), workers=1, progress=False)
    convert(str(tmp_path / "src2"), str(tmp_path / "aa_out"), workers=1, progress=False)

    def both(backend, dirs):
        return UnifiedEditIterableDataset(
            "unified_edit",
            ImageTransform(**VAE),
            ByteTokenizer(),
            ImageTransform(**VIT),
            [str(tmp_path / d) for d in dirs],
            [2, 2],
            None,
            num_workers=0,
            backend=backend,
        )

    pq_ds, wds_ds = both("parquet", ("src1", "src2")), both("webdataset", ("zz_out", "aa_out"))
    assert pq_ds.data_paths_per_rank == wds_ds.data_paths_per_rank
    assert_same(stream(pq_ds, 20), stream(wds_ds, 20))
