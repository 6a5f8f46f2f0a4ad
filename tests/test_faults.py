"""Storage faults and corrupt shards: nothing lost, nothing repeated, every drop counted.

S3 faults go through a real proxy (tests/faultproxy.py) between s3fs and moto_server that
resets connections mid-body, answers 503/500 and stalls; corrupt shards are made by damaging
real converted shards on disk.
"""

from __future__ import annotations

import json
import random
import shutil
import struct
import tarfile

import fsspec
import pytest
import torch

from editstream import ByteTokenizer, ImageTransform, UnifiedEditIterableDataset
from editstream.conversion.verify import verify
from editstream.data.drops import FailureBudgetExceeded
from editstream.format.idx import decode_idx
from editstream.io.retry import RetryPolicy
from faultproxy import FaultPlan, FaultProxy
from helpers import VAE, VIT, synth_and_convert

FAST_RETRY = RetryPolicy(max_attempts=8, initial_backoff=0.01, max_backoff=0.05)


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    return synth_and_convert(
        tmp_path_factory.mktemp("faults"),
        num_files=2,
        row_groups_per_file=2,
        rows_per_group=6,
        seed=4,
        corrupt_fraction=0.1,
        max_side=160,
    )


def edit(root, backend="webdataset", **kw):
    kw.setdefault("num_workers", 0)
    return UnifiedEditIterableDataset(
        "unified_edit",
        ImageTransform(**VAE),
        ByteTokenizer(),
        ImageTransform(**VIT),
        [str(root)],
        [2],
        None,
        backend=backend,
        **kw,
    )


def take(ds, n, seed=0):
    random.seed(seed)
    it = iter(ds)
    return [next(it) for _ in range(n)]


def fingerprint(samples):
    out = []
    for s in samples:
        out.append(
            (
                tuple(s["data_indexes"]["data_indexes"]),
                json.dumps(s["sequence_plan"]),
                json.dumps(s["text_ids_list"]),
                [t.numpy().tobytes() for t in s["image_tensor_list"]],
            )
        )
    return out


def positions(samples):
    return [tuple(s["data_indexes"]["data_indexes"]) for s in samples]


def times_passed(stream, point):
    """How often a stream of ``(unit, row)`` positions went past ``point``, a position it never
    yields: before its first item, between two items of one pass, or across a wrap to the next."""
    count = int(point < stream[0])
    for a, b in zip(stream, stream[1:]):
        count += a < point < b if a < b else point > a or point < b
    return count


def unit_position(ds, root, shard):
    """Where the shard's unit sits in the dataset's (shuffled) unit order."""
    manifest = json.loads((root / "manifest.json").read_text())
    return ds.data_paths_per_rank.index((f"{manifest['source_root']}/{shard['source_file']}", shard["row_group"]))


def row_of(name):
    """The row a sample key (or member name) like ``part-00000-rg00001-r0000003.json`` names."""
    return int(name.split(".", 1)[0].rsplit("-r", 1)[1])


@pytest.mark.slow
def test_stream_through_faulty_proxy_equals_fault_free(data, s3_bucket):
    so = s3_bucket.storage_options
    fs = fsspec.filesystem("s3", **so)
    fs.put(str(data / "wds") + "/", f"{s3_bucket.name}/wds/", recursive=True)
    want = fingerprint(take(edit(data / "pq", "parquet"), 40))
    plan = FaultPlan(
        every=3, kinds=("reset_mid_body", "http_503", "http_500", "stall"), min_body=1024, stall_seconds=3.0
    )
    with FaultProxy(s3_bucket.endpoint, faults=plan) as proxy:
        faulty = {
            "endpoint_url": proxy.url,
            "key": so["key"],
            "secret": so["secret"],
            "config_kwargs": {"read_timeout": 1, "connect_timeout": 2},
        }
        ds = edit(f"{s3_bucket.url}/wds", storage_options=faulty, retry=FAST_RETRY, block_size=32 << 10)
        got = fingerprint(take(ds, 40))
        injected = dict(proxy.faults_injected)
    assert got == want
    assert set(injected) == {"reset_mid_body", "http_503", "http_500", "stall"}, injected
    assert ds.drops.counts.get("unreadable_unit", 0) == 0


def test_shard_that_keeps_failing_is_dropped_with_its_url_then_budget_raises(data, tmp_path):
    root = tmp_path / "wds"
    shutil.copytree(data / "wds", root)
    manifest = json.loads((root / "manifest.json").read_text())
    victim = manifest["shards"][1]["path"]
    (root / victim).unlink()
    ds = edit(root, retry=FAST_RETRY)
    stream = positions(take(ds, 30))  # more than a pass
    victim_unit = unit_position(ds, root, manifest["shards"][1])
    assert {unit for unit, _ in stream} == set(range(4)) - {victim_unit}  # the others were all read
    assert ds.drops.counts["unreadable_unit"] == times_passed(stream, (victim_unit, -1)) > 0
    failed = [d for d in ds.drops.recent if d.reason == "unreadable_unit"]
    assert [d.location["shard"].rsplit("/", 1)[1] for d in failed] == [victim] * len(failed)
    for shard in manifest["shards"]:
        (root / shard["path"]).unlink(missing_ok=True)
    broken = edit(root, retry=FAST_RETRY)
    broken.unit_failure_budget = 2
    with pytest.raises(FailureBudgetExceeded) as err:
        take(broken, 1)
    assert "'unified_edit'" in str(err.value) and "budget 2" in str(err.value)


def _damage(root, shard_path, how):
    path = root / shard_path
    raw = bytearray(path.read_bytes())
    with tarfile.open(path, "r:") as tf:  # the stdlib's reading of the members, as an independent oracle
        members = tf.getmembers()
    target = members[len(members) // 2]  # a member in the middle of the shard
    if how == "truncate":
        del raw[target.offset_data + 10 :]
    elif how == "bad_header":
        raw[target.offset + 3] ^= 0xFF
    elif how == "missing_member":
        # rename the sample's JSON member so the sample lacks it; keep the header checksum valid
        json_member = next(m for m in members if m.name.endswith(".json") and m.offset >= target.offset)
        hdr = json_member.offset
        name = bytes(raw[hdr : hdr + 100]).split(b"\0", 1)[0]
        raw[hdr : hdr + len(name)] = name[:-4] + b"jsox"
        raw[hdr + 148 : hdr + 156] = b"        "
        checksum = sum(raw[hdr : hdr + 512])
        raw[hdr + 148 : hdr + 156] = b"%06o\0 " % checksum
        return_key = name.decode().rsplit(".", 1)[0]
        path.write_bytes(bytes(raw))
        return return_key
    path.write_bytes(bytes(raw))
    return target.name


@pytest.mark.parametrize(
    "how,reason", [("truncate", "unreadable_unit"), ("bad_header", "unreadable_unit"), ("missing_member", "bad_sample")]
)
def test_corrupt_shard_is_dropped_and_counted_and_the_stream_goes_on(data, tmp_path, how, reason):
    """With ``verify_reads`` a local shard that no longer hashes to its digest is read by the checking tar reader,
    which finds each fault where it is (a truncated shard goes there in either mode: its size differs)."""
    root = tmp_path / "wds"
    shutil.copytree(data / "wds", root)
    manifest = json.loads((root / "manifest.json").read_text())
    shard = manifest["shards"][0]["path"]
    what = _damage(root, shard, how)
    ds = edit(root, verify_reads=how != "truncate")
    n = sum(s["num_samples"] for s in manifest["shards"])
    stream = positions(take(ds, n))  # more than a full pass: the stream went on past the damage
    unit, row = unit_position(ds, root, manifest["shards"][0]), row_of(what)
    if how == "missing_member":  # that sample is dropped, the rest of its unit is read
        damage = (unit, row)
        assert damage not in stream
    else:  # the unit is given up at the damaged sample: the rows from there on never come
        damage = (unit, row - 0.5)
        assert [r for u, r in stream if u == unit and r >= row] == []
    assert ds.drops.counts[reason] == times_passed(stream, damage) > 0
    drop = next(d for d in ds.drops.recent if d.reason == reason)
    assert drop.location["shard"].endswith(shard)
    if how == "missing_member":
        assert drop.location["key"] in what


@pytest.mark.parametrize("how", ["bad_header", "missing_member"])
def test_without_verify_reads_damage_outside_the_members_data_is_not_read(data, tmp_path, how, monkeypatch):
    """The default local read slices members through the member table and hashes nothing: a header damaged
    after conversion is never parsed, so the stream is the undamaged one; ``verify`` still reports the shard, and
    EDITSTREAM_VERIFY_READS=1 turns the per-read check back on."""
    root = tmp_path / "wds"
    shutil.copytree(data / "wds", root)
    manifest = json.loads((root / "manifest.json").read_text())
    n = sum(s["num_samples"] for s in manifest["shards"])
    undamaged = edit(root)
    clean = fingerprint(take(undamaged, n))
    _damage(root, manifest["shards"][0]["path"], how)
    damaged = edit(root)
    assert fingerprint(take(damaged, n)) == clean and damaged.drops.counts == undamaged.drops.counts
    assert not verify(str(root)).ok
    monkeypatch.setenv("EDITSTREAM_VERIFY_READS", "1")
    checked = edit(root)
    take(checked, n)
    reason = "unreadable_unit" if how == "bad_header" else "bad_sample"
    assert checked.drops.counts[reason] > 0 and not undamaged.drops.counts.get(reason)


def test_member_over_the_size_cap_is_a_dropped_unit(data):
    ds = edit(data / "wds", max_member_size=2048)
    ds.unit_failure_budget = 1
    with pytest.raises(FailureBudgetExceeded):
        take(ds, 1)
    assert ds.drops.counts["unreadable_unit"] == 2
    assert "above the cap of 2048" in ds.drops.recent[0].error


def test_manifest_that_does_not_match_the_shard(data, tmp_path):
    root = tmp_path / "wds"
    shutil.copytree(data / "wds", root)
    manifest = json.loads((root / "manifest.json").read_text())
    idx0 = root / (manifest["shards"][0]["path"] + ".idx")
    last_sample = decode_idx(idx0.read_bytes())[0][-1]
    manifest["shards"][0]["num_bytes"] = last_sample + 700  # the manifest claims a shorter shard
    (root / "manifest.json").write_text(json.dumps(manifest))
    ds = edit(root)
    stream = positions(take(ds, 30))  # more than a pass
    # the claimed end falls inside the last sample: the unit is given up there
    unit, last = unit_position(ds, root, manifest["shards"][0]), manifest["shards"][0]["num_samples"] - 1
    assert [r for u, r in stream if u == unit and r >= last] == []
    assert ds.drops.counts["unreadable_unit"] == times_passed(stream, (unit, last - 0.5)) > 0
    idx = root / (manifest["shards"][2]["path"] + ".idx")
    offsets, end = decode_idx(idx.read_bytes())
    idx.write_bytes(struct.pack(f"<{len(offsets)}Q", *offsets[1:], end))  # a format-1 idx, one offset short
    resumed = edit(root)
    unit = (f"{manifest['source_root']}/{manifest['shards'][2]['source_file']}", manifest["shards"][2]["row_group"])
    resumed.load_state_dict({"data_status": [[resumed.data_paths_per_rank.index(unit), 0]]})
    take(resumed, 5)
    assert any("offsets for" in d.error for d in resumed.drops.recent)


def test_s3_with_two_dataloader_workers_after_fork(data, s3_bucket):
    """s3fs state is not shared across fork: each worker reads S3 on its own."""
    so = s3_bucket.storage_options
    fsspec.filesystem("s3", **so).put(str(data / "wds") + "/", f"{s3_bucket.name}/wds/", recursive=True)
    ds = edit(f"{s3_bucket.url}/wds", storage_options=so, num_workers=2)  # listing used s3fs in the parent
    loader = torch.utils.data.DataLoader(ds, batch_size=None, num_workers=2, multiprocessing_context="fork")
    seen = []
    for s in loader:
        seen.append((s["data_indexes"]["worker_id"], tuple(s["data_indexes"]["data_indexes"])))
        if len(seen) == 16:
            break
    assert {w for w, _ in seen} == {0, 1}
