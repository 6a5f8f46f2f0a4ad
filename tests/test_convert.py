"""The converter on local storage: lossless, deterministic, readable by stock tools, bad rows reported."""

from __future__ import annotations

import datetime as dt
import decimal
import hashlib
import io
import json
import math
import shutil
import subprocess
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import webdataset as wds
import xxhash
from PIL import Image

from editstream.conversion import convert, parse_size
from editstream.conversion.verify import rows_equal, verify
from editstream.format import manifest as mf
from editstream.format.idx import read_idx
from editstream.format.rowcodec import decode_sample
from editstream.format.tarreader import iter_samples
from editstream.io.parquet import read_row_group_rows
from editstream.sandbox.synth import write_synthetic_dataset


@pytest.fixture(scope="module")
def edit_src(tmp_path_factory) -> tuple[Path, dict]:
    out = tmp_path_factory.mktemp("edit") / "src"
    summary = write_synthetic_dataset(
        str(out),
        schema="unified_edit",
        num_files=2,
        row_groups_per_file=2,
        rows_per_group=6,
        seed=3,
        corrupt_fraction=0.25,
        min_side=16,
        max_side=40,
    )
    return out, summary


def shard_samples(root: Path, shard: mf.ShardInfo) -> list[tuple[str, dict]]:
    with open(root / shard.path, "rb") as f:
        return [(key, decode_sample(key, members)) for key, _, members in iter_samples(f)]


def sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def xxh3(path: Path) -> str:
    return xxhash.xxh3_128(path.read_bytes()).hexdigest()


def tree(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def test_every_row_round_trips_in_parquet_order(edit_src, tmp_path):
    src, summary = edit_src
    out = tmp_path / "out"
    result = convert(str(src), str(out), workers=1, progress=False)
    assert result["num_shards"] == 4 and result["num_samples"] == summary["num_rows"]
    m = mf.Manifest.read(str(out))
    assert m.layout == "rowgroup" and m.schema == "unified_edit"
    assert [(f.path, f.row_groups) for f in m.source_files] == [
        ("part-00000.parquet", [6, 6]),
        ("part-00001.parquet", [6, 6]),
    ]
    assert [s.path for s in m.shards] == [
        "part-00000-rg00000.tar",
        "part-00000-rg00001.tar",
        "part-00001-rg00000.tar",
        "part-00001-rg00001.tar",
    ]
    for shard in m.shards:
        rows = read_row_group_rows(str(src / shard.source_file), shard.row_group)
        got = shard_samples(out, shard)
        assert [k for k, _ in got] == [
            f"{shard.source_file[:-8]}-rg{shard.row_group:05d}-r{i:07d}" for i in range(len(rows))
        ]
        assert [r for _, r in got] == rows
        offsets, end = read_idx(str(out / shard.idx_path))
        assert len(offsets) == shard.num_samples == len(rows)
        assert end == (out / shard.path).stat().st_size - 1024
        assert shard.digest == ("xxh3_128", xxh3(out / shard.path)) and shard.sha256 is None
        assert shard.num_bytes == (out / shard.path).stat().st_size
    assert not (out / "_editstream_progress").exists()


def all_types_table() -> pa.Table:
    png = io.BytesIO()
    Image.new("RGBA", (5, 3), (1, 2, 3, 4)).save(png, format="PNG")
    jpg = io.BytesIO()
    Image.new("RGB", (4, 4), (200, 1, 1)).save(jpg, format="JPEG")
    return pa.table(
        {
            "i8": pa.array([1, None, -128], pa.int8()),
            "u64": pa.array([2**64 - 1, 0, None], pa.uint64()),
            "f32": pa.array([1.5, float("nan"), None], pa.float32()),
            "f64": pa.array([float("inf"), -0.0, 1e300], pa.float64()),
            "flag": pa.array([True, False, None]),
            "s": pa.array(["a", "", None]),
            "ls": pa.array(["ünï", "x" * 3, "z"], pa.large_string()),
            "b": pa.array([png.getvalue(), b"", None], pa.binary()),
            "lb": pa.array([jpg.getvalue(), b"raw", b"\x00"], pa.large_binary()),
            "fb": pa.array([b"abcd", b"efgh", None], pa.binary(4)),
            "image_list": pa.array([[png.getvalue(), None, jpg.getvalue()], [], None], pa.list_(pa.binary())),
            "nested": pa.array([[["a"], []], [None], None], pa.list_(pa.list_(pa.string()))),
            "st": pa.array(
                [{"x": 1, "y": b"q"}, None, {"x": None, "y": None}], pa.struct([("x", pa.int32()), ("y", pa.binary())])
            ),
            "mp": pa.array([[("k", 1)], [], None], pa.map_(pa.string(), pa.int64())),
            "d": pa.array([dt.date(2020, 1, 2), None, dt.date(1970, 1, 1)], pa.date32()),
            "ts": pa.array([dt.datetime(2020, 1, 2, 3, 4, 5, 6), None, dt.datetime(1999, 1, 1)], pa.timestamp("us")),
            "tz": pa.array([dt.datetime(2020, 1, 2, tzinfo=dt.timezone.utc), None, None], pa.timestamp("ms", tz="UTC")),
            "dec": pa.array([decimal.Decimal("1.50"), None, decimal.Decimal("-3.25")], pa.decimal128(6, 2)),
            "nul": pa.array([None, None, None], pa.null()),
        }
    )


def test_every_column_type_round_trips_through_shards(tmp_path):
    src = tmp_path / "src"
    src.mkdir()
    table = all_types_table()
    pq.write_table(table, src / "types.parquet", row_group_size=2)
    out = tmp_path / "out"
    convert(str(src), str(out), schema="generic", workers=1, progress=False)
    m = mf.Manifest.read(str(out))
    assert [c["name"] for c in m.columns] == table.column_names
    assert m.columns[3] == {"name": "f64", "type": "double"}
    got = [row for shard in m.shards for _, row in shard_samples(out, shard)]
    expected = table.to_pylist()
    assert len(got) == len(expected) == 3
    for a, b in zip(got, expected):
        assert list(a) == list(b)
        assert rows_equal(a, b), (a, b)
    # NaN compares unequal with ==, every other value is plainly equal
    assert math.isnan(got[1]["f32"])
    assert [{k: v for k, v in r.items() if k != "f32"} for r in got] == [
        {k: v for k, v in r.items() if k != "f32"} for r in expected
    ]


def test_two_conversions_are_byte_identical_whatever_the_worker_count(edit_src, tmp_path):
    src, _ = edit_src
    convert(str(src), str(tmp_path / "a"), workers=1, progress=False)
    convert(str(src), str(tmp_path / "b"), workers=2, progress=False, parquet_info=str(src / "parquet_info.json"))
    a, b = tree(tmp_path / "a"), tree(tmp_path / "b")
    assert a == b
    digests = [s.xxh3_128 for s in mf.Manifest.read(str(tmp_path / "a")).shards]
    assert len(set(digests)) == 4


def test_stock_webdataset_decodes_images_and_gnu_tar_lists_members(edit_src, tmp_path):
    src, summary = edit_src
    out = tmp_path / "out"
    convert(str(src), str(out), workers=1, progress=False)
    m = mf.Manifest.read(str(out))
    urls = [str(out / s.path) for s in m.shards]
    mine = {key: row for s in m.shards for key, row in shard_samples(out, s)}
    ds = wds.WebDataset(urls, shardshuffle=False).decode("pil")
    samples = list(ds)
    assert [s["__key__"] for s in samples] == list(mine)
    images = 0
    for sample in samples:
        row = mine[sample["__key__"]]
        doc = sample["json"]
        assert doc["instruction_list"] == row["instruction_list"]
        for ref, original in zip(doc["image_list"], row["image_list"]):
            value = sample[ref["$bytes"]]
            if ref["$bytes"].endswith(".bin"):
                assert value == original  # planted garbage stays bytes
            else:
                assert isinstance(value, Image.Image)
                assert value.size == Image.open(io.BytesIO(original)).size
                images += 1
    # every image but the planted garbage ones (stored as .bin) decodes
    garbage = sum(c["kind"] == "garbage_image" for c in summary["corrupt_rows"])
    assert garbage > 0 and images == sum(len(row["image_list"]) for row in mine.values()) - garbage
    if shutil.which("tar") is None:
        pytest.skip("GNU tar not installed")
    for shard in m.shards:
        listed = subprocess.run(
            ["tar", "-tf", str(out / shard.path)], check=True, capture_output=True, text=True
        ).stdout.split()
        with open(out / shard.path, "rb") as f:
            mine = [f"{key}.{suffix}" for key, _, members in iter_samples(f) for suffix in members]
        assert listed == mine


def test_bad_rows_are_kept_and_reported_or_dropped(edit_src, tmp_path):
    src, summary = edit_src
    planted = {(Path(r["file"]).name, r["row_group"], r["row"]) for r in summary["corrupt_rows"]}
    assert len(planted) == 6
    kept = tmp_path / "kept"
    result = convert(str(src), str(kept), workers=1, progress=False)
    report = json.loads((kept / "report.json").read_text())
    assert {(b["file"], b["row_group"], b["row"]) for b in report["bad_rows"]} == planted
    assert result["num_bad_rows"] == 6 and result["num_samples"] == summary["num_rows"]
    reasons = " ".join(b["reason"] for b in report["bad_rows"])
    assert "fewer than 2 images" in reasons and "undecodable image header" in reasons
    assert "instruction list has" in reasons
    assert [b["dropped"] for b in report["bad_rows"]] == [False] * 6

    dropped = tmp_path / "dropped"
    result = convert(str(src), str(dropped), workers=1, progress=False, drop_bad_rows=True)
    assert result["num_samples"] == summary["num_rows"] - 6
    report = json.loads((dropped / "report.json").read_text())
    assert [b["dropped"] for b in report["bad_rows"]] == [True] * 6 and "no longer match" in report["note"]
    m = mf.Manifest.read(str(dropped))
    keys = {k for s in m.shards for k, _ in shard_samples(dropped, s)}
    assert not keys & {b["key"] for b in report["bad_rows"]}
    assert sum(len(s.dropped) for s in m.shards) == 6
    assert verify(str(dropped), source=str(src)).ok


def test_t2i_schema_is_detected_and_bad_captions_reported(tmp_path):
    src = tmp_path / "src"
    summary = write_synthetic_dataset(
        str(src),
        schema="t2i_pretrain",
        num_files=1,
        row_groups_per_file=2,
        rows_per_group=5,
        seed=1,
        corrupt_fraction=0.4,
        min_side=16,
        max_side=32,
    )
    out = tmp_path / "out"
    result = convert(str(src), str(out), workers=1, progress=False)
    assert result["schema"] == "t2i_pretrain"
    report = json.loads((out / "report.json").read_text())
    got = {(b["row_group"], b["row"]): b["reason"] for b in report["bad_rows"]}
    want = {(r["row_group"], r["row"]): r["kind"] for r in summary["corrupt_rows"]}
    assert set(got) == set(want)
    for pos, kind in want.items():
        assert ("caption JSON" in got[pos]) == (kind == "bad_captions_json")
    m = mf.Manifest.read(str(out))
    sample = shard_samples(out, m.shards[0])[0][1]
    assert list(sample) == ["row_id", "image", "captions"]


def test_size_layout_keeps_every_row_once_in_order(edit_src, tmp_path):
    src, summary = edit_src
    out = tmp_path / "out"
    result = convert(str(src), str(out), workers=2, progress=False, layout="size", samples_per_shard=5)
    m = mf.Manifest.read(str(out))
    assert [s.num_samples for s in m.shards] == [5, 5, 5, 5, 4]
    assert result["num_shards"] == 5 and m.shards[1].source_file is None
    rows = [
        r
        for f in ("part-00000.parquet", "part-00001.parquet")
        for rg in (0, 1)
        for r in read_row_group_rows(str(src / f), rg)
    ]
    got = [r for s in m.shards for _, r in shard_samples(out, s)]
    assert got == rows
    assert verify(str(out), source=str(src)).ok

    by_bytes = tmp_path / "by_bytes"
    convert(str(src), str(by_bytes), workers=1, progress=False, layout="size", shard_size=parse_size("40KB"))
    m2 = mf.Manifest.read(str(by_bytes))
    assert len(m2.shards) > 2 and m2.num_samples == summary["num_rows"]
    assert [r for s in m2.shards for _, r in shard_samples(by_bytes, s)] == rows


def test_rerun_after_finish_skips_and_other_options_need_overwrite(edit_src, tmp_path):
    src, _ = edit_src
    out = tmp_path / "out"
    convert(str(src), str(out), workers=1, progress=False)
    before = tree(out)
    again = convert(str(src), str(out), workers=1, progress=False)
    assert again["already_done"] and again["converted_shards"] == 0
    assert tree(out) == before
    with pytest.raises(FileExistsError, match="overwrite"):
        convert(str(src), str(out), workers=1, progress=False, drop_bad_rows=True)
    redone = convert(str(src), str(out), workers=1, progress=False, drop_bad_rows=True, overwrite=True)
    assert redone["converted_shards"] == 4 and redone["drop_bad_rows"]
    # a damaged shard of a finished conversion is redone, the others are kept
    shard = out / "part-00000-rg00001.tar"
    shard.write_bytes(shard.read_bytes()[:-1000])
    other = (out / "part-00001-rg00000.tar").stat().st_mtime_ns
    repaired = convert(str(src), str(out), workers=1, progress=False, drop_bad_rows=True)
    assert repaired["converted_shards"] == 1 and repaired["skipped_shards"] == 3
    assert (out / "part-00001-rg00000.tar").stat().st_mtime_ns == other
    assert verify(str(out), source=str(src)).ok


def test_parquet_info_limits_row_groups_like_the_parquet_backend(edit_src, tmp_path):
    src, _ = edit_src
    info = {str(src / "part-00000.parquet"): {"num_row_groups": 1}, "part-00001.parquet": {"num_row_groups": 2}}
    out = tmp_path / "out"
    convert(str(src), str(out), workers=1, progress=False, parquet_info=info)
    m = mf.Manifest.read(str(out))
    assert [s.path for s in m.shards] == ["part-00000-rg00000.tar", "part-00001-rg00000.tar", "part-00001-rg00001.tar"]
    assert [f.row_groups for f in m.source_files] == [[6], [6, 6]]


def test_bad_arguments_fail_before_any_write(edit_src, tmp_path):
    src, _ = edit_src
    with pytest.raises(ValueError, match="layout"):
        convert(str(src), str(tmp_path / "o"), layout="nope", progress=False)
    with pytest.raises(ValueError, match="size"):
        convert(str(src), str(tmp_path / "o"), shard_size=10, progress=False)
    with pytest.raises(ValueError, match="schema"):
        convert(str(src), str(tmp_path / "o"), schema="t2i", progress=False)
    with pytest.raises(FileNotFoundError, match="source not found: .*missing"):
        convert(str(tmp_path / "missing"), str(tmp_path / "o"), progress=False)
    assert not (tmp_path / "o").exists()
    assert parse_size("1GiB") == 2**30 and parse_size("512MB") == 512 * 10**6


def test_editstream_convert_is_the_function_however_modules_were_imported(edit_src, tmp_path):
    import editstream
    import editstream.conversion  # the module is named apart from the function, so nothing shadows it

    src, _ = edit_src
    summary = editstream.convert(str(src), str(tmp_path / "o"), workers=1, progress=False)
    assert summary["num_shards"] == 4
    from editstream import convert as fn

    assert fn(str(src), str(tmp_path / "o"), workers=1, progress=False)["already_done"]
