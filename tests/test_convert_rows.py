"""The converter's zero-copy fast paths equal the plain ones: row views and ``os.writev`` shard writes."""

from __future__ import annotations

import io

import pyarrow as pa
import pytest

from editstream.format.rowcodec import encode_members
from editstream.format.tarreader import iter_samples
from editstream.format.tarwriter import TarWriter
from editstream.io.parquet import batch_rows


def as_bytes(v):
    if isinstance(v, memoryview):
        return v.tobytes()
    if isinstance(v, list):
        return [as_bytes(x) for x in v]
    return v


@pytest.mark.parametrize("binary", [pa.binary(), pa.large_binary()])
@pytest.mark.parametrize("list_type", [pa.list_, pa.large_list])
def test_binary_views_equal_to_pylist_including_slices_and_nulls(binary, list_type):
    batch = pa.record_batch(
        {
            "b": pa.array([b"a", None, b"", b"xyz", b"q"], binary),
            "l": pa.array([[b"1", None], None, [], [b"22", b"333"], [b""]], list_type(binary)),
            "s": pa.array(["x", None, "z", "w", "v"]),
            "nested": pa.array([[[b"n"]], None, [], [[]], [[None]]], pa.list_(pa.list_(binary))),
        }
    )
    for part in (batch, batch.slice(1), batch.slice(2, 2), batch.slice(5)):
        views = batch_rows(part, binary_views=True)
        assert [{k: as_bytes(v) for k, v in row.items()} for row in views] == part.to_pylist()
        assert batch_rows(part) == part.to_pylist()
    views = batch_rows(batch, binary_views=True)
    assert isinstance(views[0]["b"], memoryview) and isinstance(views[3]["l"][1], memoryview)


def test_writev_to_a_real_file_equals_buffered_output(tmp_path):
    big = bytes(range(256)) * 5000
    view_rows = batch_rows(pa.record_batch({"img": pa.array([big, b"\xff\xd8\xff" + big[:999]])}), binary_views=True)
    samples = [(f"k{i}", encode_members(row, f"k{i}")) for i, row in enumerate(view_rows)] * 1
    samples += [(f"m{i}", [("txt", b"x" * i)]) for i in range(700)]  # more chunks than one writev takes
    mem = io.BytesIO()
    w1 = TarWriter(mem, buffer_size=4096)
    for key, members in samples:
        w1.write_sample(key, members)
    w1.close()
    path = tmp_path / "s.tar"
    with open(path, "wb") as f:
        w2 = TarWriter(f, buffer_size=1 << 20)
        for key, members in samples:
            w2.write_sample(key, members)
        w2.close()
    assert path.read_bytes() == mem.getvalue()
    assert w1.digest == w2.digest and w1.offsets == w2.offsets
    with open(path, "rb") as f:
        got = {k: m for k, _, m in iter_samples(f)}
    assert got["k0"]["img.bin"] == big
