"""The memory-mapped reader of the converter's local shards: the streaming reader's samples, or ``None``."""

from __future__ import annotations

import pytest

from editstream.format.mapped_tar import mapped_samples
from editstream.format.rowcodec import decode_sample, encode_members
from editstream.format.tarreader import iter_samples
from editstream.format.tarwriter import TarWriter

ROWS = [
    {"id": "a", "images": [b"\xff\xd8\xff" + bytes(range(256)) * 9, b"\x89PNG" + b"z" * 700], "blob": b""},
    {"id": "b", "images": [], "blob": b"x" * 512},
    {"id": "c", "images": [b"\0" * 3], "blob": None},
]


def write_shard(path, samples):
    with open(path, "wb") as f:
        w = TarWriter(f)
        for key, members in samples:
            w.write_sample(key, members)
        w.close()
    return w


def converted(tmp_path, name="s.tar"):
    samples = [(f"k-rg00000-r{i:07d}", encode_members(row, f"k-rg00000-r{i:07d}")) for i, row in enumerate(ROWS)]
    w = write_shard(tmp_path / name, samples)
    return tmp_path / name, w


def streamed(path, start=0):
    with open(path, "rb") as f:
        return list(iter_samples(f, start_offset=start, source=str(path)))


def test_same_samples_as_the_streaming_reader_from_any_sample(tmp_path):
    path, w = converted(tmp_path)
    for start in w.offsets:
        found = mapped_samples(str(path), start, w.num_bytes, ("xxh3_128", w.digest))
        assert found is not None
        mapped = list(found)
        assert mapped == streamed(path, start)
        assert all(type(v) is bytes for _, _, members in mapped for v in members.values())
    rows = [decode_sample(key, members) for key, _, members in streamed(path)]
    assert rows == ROWS


@pytest.mark.parametrize("change", ["size", "digest", "algorithm", "start", "bytes"])
def test_anything_but_the_manifests_shard_is_left_to_the_streaming_reader(tmp_path, change):
    path, w = converted(tmp_path)
    size, digest, start = w.num_bytes, ("xxh3_128", w.digest), 0
    if change == "size":
        size -= 512
    elif change == "digest":
        digest = ("xxh3_128", "0" * 32)
    elif change == "algorithm":
        digest = ("sha256", w.digest)
    elif change == "start":
        start = w.offsets[1] + 512  # inside a sample, not its first header
    else:
        data = bytearray(path.read_bytes())
        data[w.offsets[1] + 10] ^= 1  # a name byte of the second sample: its header checksum fails
        path.write_bytes(bytes(data))
    assert mapped_samples(str(path), start, size, digest) is None


def test_long_names_and_repeated_keys_are_left_to_the_streaming_reader(tmp_path):
    long = write_shard(tmp_path / "long.tar", [("k" * 120, [("json", b"{}")])])
    assert mapped_samples(str(tmp_path / "long.tar"), 0, long.num_bytes, ("xxh3_128", long.digest)) is None
    again = write_shard(
        tmp_path / "again.tar", [("a", [("json", b"{}")]), ("b", [("json", b"{}")]), ("a", [("x", b"")])]
    )
    assert mapped_samples(str(tmp_path / "again.tar"), 0, again.num_bytes, ("xxh3_128", again.digest)) is None
