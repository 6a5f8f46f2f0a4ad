"""Conversion to and from a real S3-protocol server (moto_server on loopback), never a patched client."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import s3fs

from editstream.conversion import convert
from editstream.conversion.inspect import find_sample
from editstream.conversion.verify import verify
from editstream.format import manifest as mf
from editstream.io.parquet import read_row_group_rows, row_group_sizes
from editstream.sandbox.synth import write_synthetic_dataset

EDITSTREAM = Path(sys.executable).with_name("editstream")


def tree(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def s3_tree(fs: s3fs.S3FileSystem, root: str) -> dict[str, bytes]:
    return {p[len(root) + 1 :]: fs.cat_file(p) for p in sorted(fs.find(root))}


@pytest.fixture
def local_src(tmp_path) -> Path:
    src = tmp_path / "src"
    write_synthetic_dataset(
        str(src),
        schema="unified_edit",
        num_files=2,
        row_groups_per_file=2,
        rows_per_group=3,
        seed=8,
        corrupt_fraction=0.2,
        min_side=16,
        max_side=40,
    )
    return src


def test_s3_source_to_local_and_local_to_s3_match_a_local_conversion(s3_bucket, local_src, tmp_path):
    so = s3_bucket.storage_options
    s3_src = f"{s3_bucket.url}/data/src"
    write_synthetic_dataset(
        s3_src,
        schema="unified_edit",
        num_files=2,
        row_groups_per_file=2,
        rows_per_group=3,
        seed=8,
        corrupt_fraction=0.2,
        min_side=16,
        max_side=40,
        storage_options=so,
    )
    assert row_group_sizes(f"{s3_src}/part-00000.parquet", so) == [3, 3]
    assert read_row_group_rows(f"{s3_src}/part-00001.parquet", 1, so) == read_row_group_rows(
        str(local_src / "part-00001.parquet"), 1
    )

    local_ref = tmp_path / "ref"
    convert(str(local_src), str(local_ref), workers=1, progress=False)
    ref_shards = {k: v for k, v in tree(local_ref).items() if k.endswith((".tar", ".idx"))}

    # S3 -> local, on a process pool (each worker builds its own s3fs)
    from_s3 = tmp_path / "from_s3"
    result = convert(s3_src, str(from_s3), workers=2, progress=False, storage_options=so)
    assert result["num_samples"] == 12 and result["num_bad_rows"] == 2
    assert {k: v for k, v in tree(from_s3).items() if k.endswith((".tar", ".idx"))} == ref_shards
    assert verify(str(from_s3), source=s3_src, storage_options=so).ok

    # local -> S3
    s3_dst = f"{s3_bucket.url}/out/wds"
    convert(str(local_src), s3_dst, workers=1, progress=False, storage_options=so)
    fs = s3fs.S3FileSystem(**so)
    on_s3 = s3_tree(fs, f"{s3_bucket.name}/out/wds")
    assert {k: v for k, v in on_s3.items() if k.endswith((".tar", ".idx"))} == ref_shards
    assert "manifest.json" in on_s3 and "report.json" in on_s3
    assert not any(k.startswith("_editstream_progress") for k in on_s3)
    report = verify(s3_dst, source=str(local_src), storage_options=so, workers=2)
    assert report.ok, report.format()
    m = mf.Manifest.read(s3_dst, so)
    assert (
        find_sample(s3_dst, "part-00001-rg00000-r0000001", storage_options=so)
        == read_row_group_rows(str(local_src / "part-00001.parquet"), 0)[1]
    )

    # verify catches damage on S3 too
    fs.rm(f"{s3_bucket.name}/out/wds/{m.shards[0].path}")
    assert [p.kind for p in verify(s3_dst, storage_options=so).problems] == ["missing_shard"]
    # and a re-run repairs exactly that shard
    again = convert(str(local_src), s3_dst, workers=1, progress=False, storage_options=so)
    assert (again["converted_shards"], again["skipped_shards"]) == (1, 3)
    assert verify(s3_dst, storage_options=so).ok


@pytest.mark.slow
@pytest.mark.skipif(not EDITSTREAM.exists(), reason="editstream console script not installed")
def test_cli_s3_to_s3_with_standard_aws_environment_variables(s3_bucket, local_src):
    so = s3_bucket.storage_options
    fs = s3fs.S3FileSystem(**so)
    fs.put(str(local_src) + "/", f"{s3_bucket.name}/src/", recursive=True)
    s3fs.S3FileSystem.clear_instance_cache()
    env = dict(os.environ, AWS_ENDPOINT_URL=s3_bucket.endpoint)  # credentials come from the fixture's env
    dst = f"{s3_bucket.url}/dst"
    run = subprocess.run(
        [str(EDITSTREAM), "convert", f"{s3_bucket.url}/src", dst, "--workers", "2", "--no-progress"],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert run.returncode == 0, run.stderr[-3000:]
    summary = json.loads(run.stdout)
    assert (summary["num_shards"], summary["num_samples"]) == (4, 12)
    check = subprocess.run(
        [str(EDITSTREAM), "verify", dst, "--source", f"{s3_bucket.url}/src", "--workers", "1"],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert check.returncode == 0, check.stdout + check.stderr
    fs.invalidate_cache()
    assert sorted(p.rsplit("/", 1)[-1] for p in fs.ls(f"{s3_bucket.name}/dst"))[:3] == [
        "manifest.json",
        "part-00000-rg00000.tar",
        "part-00000-rg00000.tar.idx",
    ]
