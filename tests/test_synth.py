"""The synthetic dataset writer: determinism, layout, image formats, planted bad rows, CLI."""

from __future__ import annotations

import io
import json
import os
from collections import Counter

import numpy as np
import pyarrow.parquet as pq
import pytest
from click.testing import CliRunner
from PIL import Image, UnidentifiedImageError

from editstream.cli import main as cli_main
from editstream.io import storage
from editstream.io.ranged import open_read
from editstream.sandbox.synth import IMAGE_FORMATS, write_synthetic_dataset


def _sniff(data: bytes) -> str:
    """Classify encoded image bytes into the writer's format labels by opening them with Pillow."""
    img = Image.open(io.BytesIO(data))
    img.load()
    if img.format == "JPEG":
        assert img.mode == "RGB"
        return "jpeg"
    if img.format == "WEBP":
        return "webp"
    assert img.format == "PNG", img.format
    if img.mode == "RGBA":
        alpha = np.asarray(img.getchannel("A"))
        assert alpha.min() < 255 and alpha.max() == 255, "alpha channel should really vary"
        return "png_rgba"
    if img.mode == "P":
        assert "transparency" in img.info
        assert (np.asarray(img) == img.info["transparency"]).any(), "no pixel uses the transparent index"
        return "png_palette"
    assert img.mode == "RGB"
    return "png_rgb"


def _is_image(data: bytes) -> bool:
    try:
        Image.open(io.BytesIO(data)).load()
    except (UnidentifiedImageError, OSError):
        return False
    return True


def _read_all_bytes(files: list[str]) -> list[bytes]:
    return [storage.read_bytes(f) for f in files]


def _rows_by_position(summary: dict) -> dict[tuple[str, int, int], dict]:
    out = {}
    for url in summary["files"]:
        pf = pq.ParquetFile(url)
        for rg in range(pf.num_row_groups):
            for row, record in enumerate(pf.read_row_group(rg).to_pylist()):
                out[(url, rg, row)] = record
    return out


@pytest.mark.parametrize("schema", ["unified_edit", "t2i_pretrain"])
def test_same_arguments_give_byte_identical_files(tmp_path, schema):
    kwargs = dict(
        schema=schema, num_files=2, row_groups_per_file=2, rows_per_group=4, seed=7, corrupt_fraction=0.3, max_side=96
    )
    a = write_synthetic_dataset(str(tmp_path / "a"), **kwargs)
    b = write_synthetic_dataset(str(tmp_path / "b"), **kwargs)
    assert _read_all_bytes(a["files"]) == _read_all_bytes(b["files"])
    assert a["formats"] == b["formats"]
    assert [dict(r, file=os.path.basename(r["file"])) for r in a["corrupt_rows"]] == [
        dict(r, file=os.path.basename(r["file"])) for r in b["corrupt_rows"]
    ]
    c = write_synthetic_dataset(str(tmp_path / "c"), **dict(kwargs, seed=8))
    assert _read_all_bytes(a["files"]) != _read_all_bytes(c["files"])


def test_worker_processes_do_not_change_the_bytes(tmp_path):
    kwargs = dict(num_files=1, row_groups_per_file=2, rows_per_group=10, seed=11, corrupt_fraction=0.2, max_side=48)
    serial = write_synthetic_dataset(str(tmp_path / "serial"), workers=1, **kwargs)
    pooled = write_synthetic_dataset(str(tmp_path / "pooled"), workers=2, **kwargs)
    assert _read_all_bytes(serial["files"]) == _read_all_bytes(pooled["files"])
    assert serial["formats"] == pooled["formats"]


def test_layout_row_groups_and_parquet_info(tmp_path):
    out = str(tmp_path / "ds")
    summary = write_synthetic_dataset(out, num_files=3, row_groups_per_file=2, rows_per_group=4, max_side=64)
    names = sorted(os.listdir(out))
    assert names == ["parquet_info.json", "part-00000.parquet", "part-00001.parquet", "part-00002.parquet"]
    assert summary["files"] == [storage.join(out, n) for n in names[1:]]
    assert summary["num_files"] == 3 and summary["num_row_groups"] == 6 and summary["num_rows"] == 24
    assert summary["total_bytes"] == sum(os.path.getsize(f) for f in summary["files"])
    info = json.loads((tmp_path / "ds" / "parquet_info.json").read_text())
    assert set(info) == set(summary["files"])
    for url in summary["files"]:
        meta = pq.ParquetFile(url).metadata
        assert meta.num_row_groups == 2 == info[url]["num_row_groups"]
        assert meta.num_rows == 8 == info[url]["num_rows"]
        assert [meta.row_group(i).num_rows for i in range(2)] == [4, 4]
    json.dumps(summary)  # JSON-able


def test_unified_edit_rows_are_well_formed_and_every_format_is_present(tmp_path):
    summary = write_synthetic_dataset(
        str(tmp_path / "ds"), num_files=1, row_groups_per_file=2, rows_per_group=6, min_side=16, max_side=80
    )
    rows = _rows_by_position(summary)
    seen: Counter = Counter()
    ids = set()
    for record in rows.values():
        images = record["image_list"]
        assert 2 <= len(images) <= 5
        assert len(record["instruction_list"]) == len(images) - 1
        for phrasings in record["instruction_list"]:
            assert 1 <= len(phrasings) <= 3 and all(isinstance(p, str) and p for p in phrasings)
        for data in images:
            fmt = _sniff(data)
            seen[fmt] += 1
            w, h = Image.open(io.BytesIO(data)).size
            assert 16 <= w <= 80 and 16 <= h <= 80
        assert isinstance(record["score"], float)
        assert isinstance(record["tags"], list)
        ids.add(record["row_id"])
    assert set(seen) == set(IMAGE_FORMATS)
    assert dict(seen) == summary["formats"]
    assert len(ids) == len(rows)
    # The extra columns carry real nulls somewhere so round trips are exercised.
    assert any(r["meta_blob"] is None for r in rows.values())
    assert any(r["meta_blob"] is not None for r in rows.values())


def test_unified_edit_corrupt_rows_are_where_the_summary_says(tmp_path):
    summary = write_synthetic_dataset(
        str(tmp_path / "ds"),
        num_files=2,
        row_groups_per_file=2,
        rows_per_group=5,
        seed=3,
        corrupt_fraction=0.3,
        max_side=64,
    )
    rows = _rows_by_position(summary)
    planted = {(r["file"], r["row_group"], r["row"]): r["kind"] for r in summary["corrupt_rows"]}
    assert len(planted) == round(0.3 * 20)
    assert set(planted.values()) == {"garbage_image", "single_image", "short_instructions"}
    for pos, record in rows.items():
        images, instructions = record["image_list"], record["instruction_list"]
        decodable = [_is_image(d) for d in images]
        kind = planted.get(pos)
        if kind == "garbage_image":
            assert decodable.count(False) == 1 and len(images) >= 2
            assert len(instructions) == len(images) - 1
        elif kind == "single_image":
            assert len(images) == 1 and all(decodable) and instructions == []
        elif kind == "short_instructions":
            assert all(decodable) and len(images) >= 2
            assert len(instructions) < len(images) - 1
            assert instructions == [] or len(instructions) == len(images) - 2
        else:
            assert all(decodable) and len(images) >= 2 and len(instructions) == len(images) - 1


def test_t2i_rows_and_corrupt_rows(tmp_path):
    summary = write_synthetic_dataset(
        str(tmp_path / "ds"),
        schema="t2i_pretrain",
        num_files=2,
        row_groups_per_file=3,
        rows_per_group=8,
        seed=1,
        corrupt_fraction=0.25,
        max_side=64,
    )
    rows = _rows_by_position(summary)
    planted = {(r["file"], r["row_group"], r["row"]): r["kind"] for r in summary["corrupt_rows"]}
    assert set(planted.values()) == {"garbage_image", "bad_captions_json"}
    seen: Counter = Counter()
    empty_dicts = 0
    for pos, record in rows.items():
        assert set(record) == {"row_id", "image", "captions"}
        kind = planted.get(pos)
        assert _is_image(record["image"]) == (kind != "garbage_image")
        if kind != "garbage_image":
            seen[_sniff(record["image"])] += 1
        if kind == "bad_captions_json":
            with pytest.raises(json.JSONDecodeError):
                json.loads(record["captions"])
            continue
        captions = json.loads(record["captions"])
        assert isinstance(captions, dict) and len(captions) <= 3
        assert all(k.startswith("caption_") and isinstance(v, str) and v for k, v in captions.items())
        empty_dicts += not captions
    assert set(seen) == set(IMAGE_FORMATS)
    assert dict(seen) == summary["formats"]
    assert 0 < empty_dicts < len(rows) // 2  # the "{}" captions case is present, and rare


def test_writes_to_a_non_local_fsspec_url():
    out = "memory://editstream-synth-test/ds"
    summary = write_synthetic_dataset(out, num_files=1, row_groups_per_file=1, rows_per_group=3, max_side=48)
    try:
        assert summary["files"] == [f"{out}/part-00000.parquet"]
        info = json.loads(storage.read_bytes(f"{out}/parquet_info.json"))
        assert info == {f"{out}/part-00000.parquet": {"num_row_groups": 1, "num_rows": 3}}
        with open_read(summary["files"][0]) as fh:
            assert pq.ParquetFile(fh).metadata.num_rows == 3
    finally:
        fs, path = storage.url_to_fs(out)
        fs.rm(path, recursive=True)


@pytest.mark.parametrize(
    ("bad", "match"),
    [
        (dict(schema="nope"), "unknown synthetic schema 'nope'"),
        (dict(num_files=0), "num_files must be >= 1, got 0"),
        (dict(rows_per_group=0), "rows_per_group must be >= 1, got 0"),
        (dict(corrupt_fraction=1.5), r"corrupt_fraction must be in \[0, 1\], got 1.5"),
        (dict(min_side=100, max_side=50), "need 8 <= min_side <= max_side, got min_side=100, max_side=50"),
        (dict(workers=0), "workers must be >= 1, got 0"),
    ],
)
def test_bad_arguments_fail_before_writing(tmp_path, bad, match):
    out = tmp_path / "ds"
    with pytest.raises(ValueError, match=match):
        write_synthetic_dataset(str(out), **bad)
    assert not out.exists()


def test_cli_synth(tmp_path):
    out = str(tmp_path / "cli")
    result = CliRunner().invoke(
        cli_main,
        [
            "synth",
            out,
            "--schema",
            "t2i",
            "--files",
            "1",
            "--row-groups",
            "2",
            "--rows",
            "3",
            "--seed",
            "5",
            "--max-side",
            "64",
            "--corrupt-fraction",
            "0.5",
        ],
    )
    assert result.exit_code == 0, result.output
    summary = json.loads(result.stdout)
    assert summary["schema"] == "t2i_pretrain" and summary["num_rows"] == 6 and summary["seed"] == 5
    assert len(summary["corrupt_rows"]) == 3
    assert pq.ParquetFile(summary["files"][0]).metadata.num_row_groups == 2
    direct = write_synthetic_dataset(
        str(tmp_path / "direct"),
        schema="t2i_pretrain",
        num_files=1,
        row_groups_per_file=2,
        rows_per_group=3,
        seed=5,
        max_side=64,
        corrupt_fraction=0.5,
    )
    assert storage.read_bytes(summary["files"][0]) == storage.read_bytes(direct["files"][0])
