"""``verify`` catches damaged output (flipped byte, missing/truncated shard, bad idx) and source drift."""

from __future__ import annotations

import io
import json
import shutil
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest
from PIL import Image, UnidentifiedImageError

from editstream.conversion import convert
from editstream.conversion.inspect import find_sample, inspect_dataset
from editstream.conversion.verify import verify
from editstream.format import manifest as mf
from editstream.format.idx import encode_idx, read_idx
from editstream.io.parquet import read_row_group_rows
from editstream.sandbox.synth import write_synthetic_dataset

EDITSTREAM = Path(sys.executable).with_name("editstream")


@pytest.fixture(scope="module")
def converted(tmp_path_factory) -> tuple[Path, Path]:
    base = tmp_path_factory.mktemp("verify")
    src = base / "src"
    write_synthetic_dataset(
        str(src),
        schema="unified_edit",
        num_files=2,
        row_groups_per_file=2,
        rows_per_group=4,
        seed=5,
        corrupt_fraction=0.2,
        min_side=16,
        max_side=48,
    )
    out = base / "out"
    convert(str(src), str(out), workers=1, progress=False)
    return src, out


@pytest.fixture
def copy(converted, tmp_path) -> tuple[Path, Path]:
    src, out = converted
    dst = tmp_path / "out"
    shutil.copytree(out, dst)
    return src, dst


EXTENSIONS = {"JPEG": "jpg", "PNG": "png", "WEBP": "webp"}
"""Extension the converter gives each image format the synthetic data uses."""


def opens(data: bytes) -> bool:
    try:
        Image.open(io.BytesIO(data))
    except UnidentifiedImageError:
        return False
    return True


def kinds(report) -> dict[str, set[str]]:
    out: dict[str, set[str]] = {}
    for p in report.problems:
        out.setdefault(p.kind, set()).add(p.shard)
    return out


def test_clean_output_verifies_with_and_without_source(converted):
    src, out = converted
    report = verify(str(out), source=str(src))
    assert report.ok, report.format()
    assert (report.shards_checked, report.samples_checked, report.rows_compared) == (4, 16, 16)
    assert verify(str(out), workers=2).ok


def test_flipped_data_byte_is_caught_by_the_digest_and_source_compare(copy):
    src, out = copy
    m = mf.Manifest.read(str(out))
    shard = m.shards[1]
    offsets, _ = read_idx(str(out / shard.idx_path))
    path = out / shard.path
    data = bytearray(path.read_bytes())
    data[offsets[2] + 512 + 40] ^= 0xFF  # inside the first member's data of sample 2
    path.write_bytes(bytes(data))
    report = verify(str(out), source=str(src))
    assert kinds(report) == {"digest": {shard.path}, "row_mismatch": {shard.path}}
    assert "row 2" in report.format()
    assert not verify(str(out)).ok  # the hash alone catches it without the source


def test_flipped_header_byte_is_a_tar_format_problem(copy):
    _, out = copy
    shard = mf.Manifest.read(str(out)).shards[0]
    offsets, _ = read_idx(str(out / shard.idx_path))
    path = out / shard.path
    data = bytearray(path.read_bytes())
    data[offsets[1] + 10] ^= 0x01
    path.write_bytes(bytes(data))
    found = kinds(verify(str(out)))
    assert {"digest", "tar_format", "sample_count"} <= set(found)
    assert found["tar_format"] == {shard.path}


def test_missing_shard_is_reported(copy):
    _, out = copy
    shard = mf.Manifest.read(str(out)).shards[2]
    (out / shard.path).unlink()
    report = verify(str(out))
    assert kinds(report) == {"missing_shard": {shard.path}}
    assert report.shards_checked == 4


def test_truncated_shard_is_reported(copy):
    _, out = copy
    shard = mf.Manifest.read(str(out)).shards[3]
    path = out / shard.path
    path.write_bytes(path.read_bytes()[: shard.num_bytes // 2])
    found = kinds(verify(str(out)))
    assert {"size", "digest", "tar_format"} <= set(found)
    assert "TruncatedTarError" in verify(str(out)).format()


def test_wrong_or_missing_idx_is_reported(copy):
    _, out = copy
    shards = mf.Manifest.read(str(out)).shards
    offsets, end = read_idx(str(out / shards[0].idx_path))
    (out / shards[0].idx_path).write_bytes(encode_idx([offsets[0], offsets[1] + 512] + offsets[2:], end))
    (out / shards[1].idx_path).unlink()
    found = kinds(verify(str(out)))
    assert found == {"idx": {shards[0].path}, "missing_idx": {shards[1].path}}


def test_source_that_differs_is_reported(converted, tmp_path):
    _, out = converted
    other = tmp_path / "other"
    write_synthetic_dataset(
        str(other),
        schema="unified_edit",
        num_files=2,
        row_groups_per_file=2,
        rows_per_group=4,
        seed=6,
        corrupt_fraction=0.2,
        min_side=16,
        max_side=48,
    )
    report = verify(str(out), source=str(other))
    assert not report.ok and "row_mismatch" in kinds(report)
    fewer = tmp_path / "fewer"
    fewer.mkdir()
    shutil.copy(other / "part-00000.parquet", fewer / "part-00000.parquet")
    assert "source" in kinds(verify(str(out), source=str(fewer)))


def test_missing_manifest_is_a_problem_not_a_crash(tmp_path):
    report = verify(str(tmp_path))
    assert kinds(report) == {"manifest": {None}}


@pytest.mark.skipif(not EDITSTREAM.exists(), reason="editstream console script not installed")
def test_cli_exit_codes_and_inspect(copy):
    src, out = copy
    ok = subprocess.run(
        [str(EDITSTREAM), "verify", str(out), "--source", str(src), "--workers", "1"], capture_output=True, text=True
    )
    assert ok.returncode == 0 and "OK" in ok.stdout
    shard = mf.Manifest.read(str(out)).shards[0]
    (out / shard.path).unlink()
    bad = subprocess.run(
        [str(EDITSTREAM), "verify", str(out), "--json", "--workers", "1"], capture_output=True, text=True
    )
    assert bad.returncode == 1
    assert json.loads(bad.stdout)["problems"][0]["kind"] == "missing_shard"
    info = subprocess.run(
        [str(EDITSTREAM), "inspect", str(out), "--sample", "part-00001-rg00001-r0000002"],
        capture_output=True,
        text=True,
    )
    assert info.returncode == 0, info.stderr
    assert json.loads(info.stdout)["row_id"] == "f1-rg1-r2"


def test_inspect_counts_and_sample_lookup(converted):
    src, out = converted
    info = inspect_dataset(str(out), max_samples=None)
    assert (info["shards"], info["samples"], info["samples_scanned"]) == (4, 16, 16)
    m = mf.Manifest.read(str(out))
    assert info["bytes"] == m.num_bytes
    rows = [
        r
        for f in ("part-00000.parquet", "part-00001.parquet")
        for rg in (0, 1)
        for r in read_row_group_rows(str(src / f), rg)
    ]
    # Every image PIL opens is counted under its format; planted garbage (stored as .bin) is still an
    # image of the sample: it counts among the bad ones, not under a format and not as "no image".
    opened = [Image.open(io.BytesIO(image)) for r in rows for image in r["image_list"] if opens(image)]
    total = sum(len(r["image_list"]) for r in rows)
    assert len(opened) < total  # the garbage image is really there
    assert info["image_formats"] == dict(sorted(Counter(EXTENSIONS[image.format] for image in opened).items()))
    assert info["images_with_bad_headers"] == total - len(opened)
    assert sum(int(k) * v for k, v in info["images_per_sample"].items()) == total
    assert info["images_per_sample"] == dict(Counter(str(len(r["image_list"])) for r in rows))
    widths = [image.size[0] for image in opened]
    assert (info["image_width"]["min"], info["image_width"]["max"]) == (min(widths), max(widths))
    assert find_sample(str(out), "part-00000-rg00001-r0000003") == rows[7]
    with pytest.raises(KeyError, match="no sample with key 'part-00009-rg00000-r0000000'"):
        find_sample(str(out), "part-00009-rg00000-r0000000")


def _edit_manifest(root: Path, **changes) -> None:
    path = root / mf.MANIFEST_NAME
    doc = json.loads(path.read_text())
    doc.update(changes)
    path.write_text(json.dumps(doc, indent=1))


def test_a_hand_edited_schema_that_does_not_fit_the_shards_fails_verify(copy):
    """Issue 17: a manifest whose schema was changed by hand must not verify as OK."""
    from helpers import run_cli

    src, out = copy
    _edit_manifest(out, schema="t2i_pretrain")
    result = run_cli("verify", str(out), "--source", str(src))
    assert result.returncode == 1, result.stdout + result.stderr
    assert "[schema] the manifest's schema 't2i_pretrain' needs columns ['image', 'captions']" in result.stdout
    assert "missing ['image', 'captions']" in result.stdout


def test_a_hand_edited_schema_and_columns_fail_on_what_the_samples_hold(copy):
    _, out = copy
    _edit_manifest(
        out,
        schema="t2i_pretrain",
        columns=[{"name": "image", "type": "binary"}, {"name": "captions", "type": "string"}],
    )
    report = verify(str(out))
    assert set(kinds(report)) == {"columns"}
    text = report.format()
    assert "'image_list', 'instruction_list'" in text and "], the manifest lists ['image', 'captions']" in text
    assert len(report.problems) == len(mf.Manifest.read(str(out)).shards)  # per shard: the first sample, then capped
