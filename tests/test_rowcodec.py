"""The row codec: every value type round-trips exactly, members are named for stock readers."""

from __future__ import annotations

import datetime as dt
import decimal
import io
import math

import pyarrow as pa
import pytest
from PIL import Image

from editstream.format.images import sniff_extension
from editstream.format.keys import make_key, safe_component
from editstream.format.rowcodec import RowCodecError, decode_sample, encode_members


def image_bytes(fmt: str, mode: str = "RGB", size=(6, 4)) -> bytes:
    buf = io.BytesIO()
    Image.new(mode, size, (10, 200, 30) if mode == "RGB" else None).save(buf, format=fmt)
    return buf.getvalue()


@pytest.mark.parametrize(
    "fmt,ext", [("JPEG", "jpg"), ("PNG", "png"), ("WEBP", "webp"), ("GIF", "gif"), ("BMP", "bmp"), ("TIFF", "tiff")]
)
def test_sniffs_real_images(fmt, ext):
    assert sniff_extension(image_bytes(fmt)) == ext


@pytest.mark.parametrize("data", [b"", b"NOT-AN-IMAGE\0abc", b"BM" + b"\xff" * 40, b"RIFF0000WAVEfmt ", b"\x00" * 40])
def test_unknown_content_is_bin(data):
    assert sniff_extension(data) == "bin"


def full_row() -> dict:
    return {
        "image_list": [image_bytes("JPEG"), image_bytes("PNG"), None, b"\x01\x02raw"],
        "image": image_bytes("WEBP"),
        "instruction_list": [["make it red", "paint it red"], [], ["ünïcödé ✓"]],
        "captions": '{"a": "b"}',
        "i": 3,
        "big": 2**70,
        "f": 3.0,
        "nan": float("nan"),
        "inf": [float("inf"), float("-inf"), -0.0],
        "flag": True,
        "none": None,
        "empty_list": [],
        "empty_bytes": b"",
        "nested": [[b"\x89PNG\r\n\x1a\n....", None], [], None],
        "struct": {"x": 1, "blob": b"abc", "$tag": "not a tag"},
        "lonely_tag": {"$bytes": "fake"},
        "map": [("k1", 1), ("k2", None)],
        "when": dt.datetime(2024, 5, 1, 12, 30, 1, 5, tzinfo=dt.timezone.utc),
        "day": dt.date(2024, 5, 1),
        "clock": dt.time(1, 2, 3, 4),
        "span": dt.timedelta(days=2, seconds=5, microseconds=7),
        "money": decimal.Decimal("12.3400"),
        "Weird Name.With/Dots": b"GIF89a-ish",
    }


def same(a, b) -> bool:
    """Equality that treats NaN as equal to NaN and tells -0.0 from 0.0 and 1 from 1.0."""
    if isinstance(a, float) and isinstance(b, float):
        return (math.isnan(a) and math.isnan(b)) or (a == b and math.copysign(1, a) == math.copysign(1, b))
    if type(a) is not type(b):
        return False
    if isinstance(a, (list, tuple)):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b))
    if isinstance(a, dict):
        return list(a) == list(b) and all(same(a[k], b[k]) for k in a)
    return a == b


def test_every_value_type_round_trips_exactly_and_in_column_order():
    row = full_row()
    members = dict(encode_members(row, "k0"))
    back = decode_sample("k0", members)
    assert same(back, row)
    assert list(back) == list(row)


def test_members_are_sorted_named_and_deterministic():
    row = full_row()
    pairs = [(f"key-1.{suffix}", data) for suffix, data in encode_members(row, "key-1")]
    names = [n for n, _ in pairs]
    assert names == sorted(names)
    assert all(n.startswith("key-1.") for n in names)
    assert "key-1.image_list.0.jpg" in names and "key-1.image_list.1.png" in names
    assert "key-1.image_list.3.bin" in names and "key-1.image.webp" in names
    assert "key-1.nested.0.0.png" in names and "key-1.struct.blob.bin" in names
    assert "key-1.weird_name_with_dots.gif" in names  # column names are made dot-free and lower-case
    assert pairs == [(f"key-1.{suffix}", data) for suffix, data in encode_members(full_row(), "key-1")]
    # the suffix after the key never has upper case (webdataset lower-cases it)
    assert all(n == n.lower() for n in names)


def test_row_read_from_arrow_round_trips():
    table = pa.table(
        {
            "image_list": pa.array([[b"\xff\xd8\xff1", b"x"], None], pa.list_(pa.binary())),
            "instruction_list": pa.array([[["a"]], []], pa.list_(pa.list_(pa.string()))),
            "score": pa.array([0.5, None], pa.float32()),
            "n": pa.array([1, -2], pa.int8()),
            "s": pa.array([{"a": 1, "b": b"q"}, None], pa.struct([("a", pa.int64()), ("b", pa.large_binary())])),
            "m": pa.array([[("x", 1)], []], pa.map_(pa.string(), pa.int32())),
        }
    )
    for i, row in enumerate(table.to_pylist()):
        back = decode_sample(f"r{i}", dict(encode_members(row, f"r{i}", table.schema.names)))
        assert same(back, row)


def test_schema_mismatch_and_unencodable_values_are_errors_naming_the_column():
    with pytest.raises(RowCodecError, match="do not match"):
        encode_members({"a": 1}, "k", ["b"])
    with pytest.raises(RowCodecError, match="'col'"):
        encode_members({"col": object()}, "k")
    with pytest.raises(RowCodecError, match="invalid sample key 'bad.key': must be non-empty and contain no dot"):
        encode_members({"a": 1}, "bad.key")


def test_damaged_members_are_reported():
    members = dict(encode_members({"img": image_bytes("PNG"), "t": "x"}, "k"))
    with pytest.raises(RowCodecError, match="missing"):
        decode_sample("k", {"json": members["json"]})
    with pytest.raises(RowCodecError, match="not referenced"):
        decode_sample("k", {**members, "extra.bin": b""})
    with pytest.raises(RowCodecError, match="does not parse"):
        decode_sample("k", {**members, "json": b"{oops"})
    with pytest.raises(RowCodecError, match="no 'json'"):
        decode_sample("k", {})


def test_keys_and_components_are_dot_free():
    assert safe_component("My.File Name") == "my_file_name"
    key = make_key("part-00001", 3, 17)
    assert key == "part-00001-rg00003-r0000017" and "." not in key
