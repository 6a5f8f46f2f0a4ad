"""vlm_sft backend equivalence: the source backend and converted shards give the same stream.

The matrix: world sizes 1 and 2 (every rank) x 0 and 2 DataLoader workers on local disk, and
from a real S3-protocol server (moto_server); resume across backends; frame folders and MP4s;
planted bad rows on both sides; a damaged shard sample dropped with its location.
"""

from __future__ import annotations

import pickle
import random
import threading
import time

import numpy as np
import pytest
import torch

from editstream import ByteTokenizer, FrameSampler, ImageTransform, SftJSONLIterableDataset, convert
from editstream.format.manifest import Manifest
from editstream.io.prefetch import prefetch_ordered
from editstream.sandbox.synth_vlm import write_synthetic_vlm_dataset
from helpers import assert_batches_equal, first

SMALL = dict(max_image_size=64, min_image_size=32, image_stride=16)


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    """Two JSONL datasets (MP4s in one when OpenCV can write them, frame folders in both), converted."""
    root = tmp_path_factory.mktemp("vlm_parity")
    sets = []
    for name, seed, lines, video in (("a", 21, 40, None), ("b", 22, 30, False)):
        s = write_synthetic_vlm_dataset(str(root / name), num_lines=lines, seed=seed, max_side=64, video=video)
        convert(s["jsonl"], str(root / f"{name}_wds"), media_dir=s["media_dir"], samples_per_shard=6, progress=False)
        sets.append(dict(s, wds=str(root / f"{name}_wds")))
    return sets


def make(data, backend, **kw):
    kw.setdefault("num_workers", 0)
    jsonls = [d["jsonl"] for d in data] if backend == "parquet" else kw.pop("jsonls", None)
    dirs = [d["media_dir"] if backend == "parquet" else d["wds"] for d in data]
    return SftJSONLIterableDataset(
        "vlm_sft",
        ImageTransform(**SMALL),
        ByteTokenizer(),
        FrameSampler(max_num_frames=8, min_num_frames=4),
        jsonls,
        dirs,
        kw.pop("counts", [100, 100]),
        backend=backend,
        **kw,
    )


def stream(ds, n, workers=0, seed=0):
    random.seed(seed)
    np.random.seed(seed)
    if workers == 0:
        return first(iter(ds), n)
    loader = torch.utils.data.DataLoader(
        ds, batch_size=None, num_workers=workers, generator=torch.Generator().manual_seed(seed)
    )
    return first(loader, n)


@pytest.mark.parametrize("world,workers", [(1, 0), (1, 2), (2, 0), (2, 2)])
def test_local_parity_every_rank(data, world, workers):
    for rank in range(world):
        streams = []
        for backend in ("parquet", "webdataset"):
            ds = make(data, backend, local_rank=rank, world_size=world, num_workers=workers)
            ds.set_epoch(13)
            streams.append(stream(ds, 30, workers, seed=rank))
        assert_batches_equal(*streams)


def test_both_kinds_of_video_and_the_bad_rows_are_met_on_both_sides(data):
    counts, videos = [], []
    for backend in ("parquet", "webdataset"):
        ds = make(data, backend)
        samples = stream(ds, 80)  # more than a pass
        counts.append(ds.drop_counts)
        videos.append(sum(len(s["image_tensor_list"]) >= 4 for s in samples))
        locations = [d.location for d in ds.drops.recent]
        assert all({"file", "line"} <= set(loc) for loc in locations)
        if backend == "webdataset":
            assert all(loc["shard"].endswith(".tar") and loc["key"].startswith("data-rg00000-r") for loc in locations)
    assert counts[0] == counts[1] and set(counts[0]) == {"jsonl_parse", "no_loss_labels"}
    assert videos[0] == videos[1] > 0
    assert data[0]["kinds"].get("video", 0) > 0 or not data[0]["video"]


def test_jsonl_paths_are_accepted_and_ignored_on_the_webdataset_backend(data):
    with_paths = make(data, "webdataset", jsonls=[d["jsonl"] for d in data])
    assert_batches_equal(stream(make(data, "webdataset"), 12), stream(with_paths, 12))


@pytest.mark.parametrize("n", [1, 7, 16])
def test_resume_across_backends(data, n):
    total = 30
    reference = stream(make(data, "parquet"), total)
    for first_backend, second_backend in (("parquet", "webdataset"), ("webdataset", "parquet"), ("webdataset",) * 2):
        random.seed(0)
        np.random.seed(0)
        ds = make(data, first_backend)
        it = iter(ds)
        head = [next(it) for _ in range(n)]
        resumed = make(data, second_backend, data_status=ds.state_dict()["data_status"])
        tail = first(iter(resumed), total - n)
        assert_batches_equal(reference, head + tail)


def test_a_data_status_of_two_workers_means_the_same_rows_on_both_backends(data):
    status = [5, 2]
    streams = [
        stream(make(data, b, num_workers=2, data_status=status), 20, workers=2) for b in ("parquet", "webdataset")
    ]
    assert_batches_equal(*streams)
    by_worker = {0: [], 1: []}
    for s in streams[0]:
        by_worker[s["data_indexes"]["worker_id"]].append(s["data_indexes"]["data_indexes"])
    assert by_worker[0][0] > 5 and by_worker[1][0] > 2


def test_a_damaged_sample_is_dropped_with_its_location_and_later_samples_are_unaffected(data, tmp_path):
    import json
    import os
    import shutil

    from PIL import Image

    from editstream.format.idx import read_idx, sample_range

    root = tmp_path / "wds"
    shutil.copytree(data[1]["wds"], root)
    with open(data[1]["jsonl"]) as f:
        lines = f.readlines()

    # an image row (no random draws, so the streams stay aligned when only one side reads it)
    def plain_image_row(line):
        try:
            item = json.loads(line)
        except ValueError:
            return False
        if not (isinstance(item.get("image"), str) and item["conversations"][-1]["from"] == "gpt"):
            return False
        try:
            Image.open(os.path.join(data[1]["media_dir"], item["image"])).load()
        except OSError:
            return False
        return True

    target = next(i for i, line in enumerate(lines) if i > 6 and plain_image_row(line) and lines.count(line) == 1)
    target_text = lines[target]
    shard = next(s for s in Manifest.read(str(root)).shards if s.rows[0].start <= target < s.rows[0].stop)
    offsets, end = read_idx(str(root / shard.idx_path))
    start, _ = sample_range(offsets, end, target - shard.rows[0].start)
    raw = bytearray((root / shard.path).read_bytes())
    raw[start + 512 : start + 520] = b"\xff" * 8  # the first member's payload: its JSON no longer decodes
    (root / shard.path).write_bytes(bytes(raw))

    source = make([data[1]], "parquet", counts=[100])
    damaged = make([dict(data[1], wds=str(root))], "webdataset", counts=[100])
    units = source.data_paths_per_rank
    expected = [s for s in stream(source, 2 * len(units)) if units[s["data_indexes"]["data_indexes"]][0] != target_text]
    assert len(expected) < 2 * len(units)  # the target row was a sample on the source side
    assert_batches_equal(expected, stream(damaged, len(expected)))
    drops = [d for d in damaged.drops.recent if d.reason == "bad_sample"]
    assert drops and all(d.location["line"] == target + 1 for d in drops)
    assert drops[0].location["shard"].endswith(shard.path) and "SampleMismatch" not in drops[0].error


def _put_tree(local, url, so):
    import fsspec

    fs = fsspec.filesystem("s3", **so)
    fs.put(str(local) + "/", url.replace("s3://", "") + "/", recursive=True)


@pytest.mark.parametrize("world,workers", [(1, 0), (2, 2)])
def test_s3_parity(s3_bucket, tmp_path, world, workers):
    so = s3_bucket.storage_options
    src = f"{s3_bucket.url}/src"
    s = write_synthetic_vlm_dataset(src, num_lines=24, seed=5, max_side=48, storage_options=so)
    convert(s["jsonl"], f"{s3_bucket.url}/wds", media_dir=s["media_dir"], storage_options=so, progress=False)
    sets = [dict(s, wds=f"{s3_bucket.url}/wds")]
    for rank in range(world):
        streams = []
        for backend in ("parquet", "webdataset"):
            ds = make(
                sets, backend, counts=[100], local_rank=rank, world_size=world, num_workers=workers, storage_options=so
            )
            ds.set_epoch(3)
            streams.append(stream(ds, 16, workers, seed=rank))
        assert_batches_equal(*streams)
        assert sum(len(x["image_tensor_list"]) > 0 for x in streams[0]) > 0


def test_prefetch_keeps_within_its_byte_budget_and_count_cap():
    lock = threading.Lock()
    live = {"bytes": 0, "items": 0, "max_bytes": 0, "max_items": 0}
    sizes = [30, 10, 50, 20, 20, 90, 5, 5, 5, 40] * 3

    def fetch(i):
        with lock:
            live["bytes"] += sizes[i]
            live["items"] += 1
            live["max_bytes"] = max(live["max_bytes"], live["bytes"])
            live["max_items"] = max(live["max_items"], live["items"])
        time.sleep(0.002)
        return i

    out = []
    for i, future in prefetch_ordered(range(len(sizes)), fetch, sizes.__getitem__, max_bytes=100, max_items=3):
        out.append(future.result())
        with lock:  # the consumer is done with it: its bytes are released
            live["bytes"] -= sizes[i]
            live["items"] -= 1
    assert out == list(range(len(sizes)))
    assert live["max_bytes"] <= 100 and live["max_items"] <= 3


def test_a_dataset_read_in_this_process_still_pickles_for_spawned_workers(data):
    ds = make(data, "webdataset")
    samples = iter(ds)
    next(samples)  # fetches planned ahead are in flight now
    clone = pickle.loads(pickle.dumps(ds))
    samples.close()
    assert_batches_equal(stream(make(data, "webdataset"), 5), stream(clone, 5))
