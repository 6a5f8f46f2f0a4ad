"""The runnable recipes under converters/: the conversion script and the Ray cluster example."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from editstream import write_synthetic_dataset

RECIPES = Path(__file__).resolve().parents[1] / "converters"


def run(script: str, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(RECIPES / script), *args], capture_output=True, text=True, timeout=600)


def test_parquet_to_wds_converts_repairs_and_fails_when_the_source_changed(tmp_path):
    write_synthetic_dataset(str(tmp_path / "pq"), num_files=1, row_groups_per_file=2, rows_per_group=3, max_side=48)
    ok = run("parquet_to_wds.py", str(tmp_path / "pq"), str(tmp_path / "wds"), "--workers", "1", "--check-source")
    assert ok.returncode == 0, ok.stderr
    summary = json.loads(ok.stdout[: ok.stdout.rindex("}") + 1])
    assert (summary["num_shards"], summary["num_samples"]) == (2, 6)
    assert "OK - 2 shards, 6 samples, 6 source rows compared, 0 problems" in ok.stdout
    shard = tmp_path / "wds" / "part-00000-rg00001.tar"
    data = bytearray(shard.read_bytes())
    data[700] ^= 0xFF
    shard.write_bytes(bytes(data))
    repaired = run("parquet_to_wds.py", str(tmp_path / "pq"), str(tmp_path / "wds"), "--workers", "1")
    assert repaired.returncode == 0, repaired.stderr
    again = json.loads(repaired.stdout[: repaired.stdout.rindex("}") + 1])
    assert (again["converted_shards"], again["skipped_shards"]) == (1, 1)  # only the damaged shard redone
    # same shape, other values: the shards no longer match their source row for row
    write_synthetic_dataset(
        str(tmp_path / "pq"), num_files=1, row_groups_per_file=2, rows_per_group=3, max_side=48, seed=1
    )
    changed = run("parquet_to_wds.py", str(tmp_path / "pq"), str(tmp_path / "wds"), "--workers", "1", "--check-source")
    assert changed.returncode == 1
    assert "FAILED" in changed.stdout and "[row_mismatch]" in changed.stdout


@pytest.mark.ray
def test_ray_cluster_example_runs_its_demo_on_a_local_ray():
    done = run("ray_cluster.py", "--demo")
    assert done.returncode == 0, done.stderr[-2000:]
    assert "OK - 4 shards, 16 samples" in done.stdout


def test_ray_cluster_example_needs_src_and_dst_without_demo():
    done = run("ray_cluster.py")
    assert done.returncode == 2 and "SRC and DST are required" in done.stderr
