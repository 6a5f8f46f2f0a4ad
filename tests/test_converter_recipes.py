"""The runnable recipes under converters/: the conversion script, the Ray cluster example, and the
MagicBrush and OmniEdit adapter scripts (on data in those datasets' Hub shapes)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from editstream import write_synthetic_dataset
from helpers import run_cli
from hub_shapes import omniedit

RECIPES = Path(__file__).resolve().parents[1] / "converters"


def run(script: str, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(RECIPES / script), *args], capture_output=True, text=True, timeout=600)


def test_parquet_to_wds_converts_repairs_and_converts_a_changed_source_again(tmp_path):
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
    # same shape, other values: the shards no longer match their source row for row ...
    write_synthetic_dataset(
        str(tmp_path / "pq"), num_files=1, row_groups_per_file=2, rows_per_group=3, max_side=48, seed=1
    )
    stale = run_cli("verify", str(tmp_path / "wds"), "--source", str(tmp_path / "pq"))
    assert stale.returncode == 1 and "[row_mismatch]" in stale.stdout
    # ... and a re-run sees the source file changed (its identity) and converts it again
    changed = run("parquet_to_wds.py", str(tmp_path / "pq"), str(tmp_path / "wds"), "--workers", "1", "--check-source")
    assert changed.returncode == 0, changed.stderr
    assert "changed since" in changed.stderr and "OK - 2 shards, 6 samples, 6 source rows compared" in changed.stdout


@pytest.mark.ray
def test_ray_cluster_example_runs_its_demo_on_a_local_ray():
    done = run("ray_cluster.py", "--demo")
    assert done.returncode == 0, done.stderr[-2000:]
    assert "OK - 4 shards, 16 samples" in done.stdout


def test_ray_cluster_example_needs_src_and_dst_without_demo():
    done = run("ray_cluster.py")
    assert done.returncode == 2 and "SRC and DST are required" in done.stderr


def _json_head(stdout: str) -> dict:
    """The JSON summary a recipe prints first (a verify report may follow it)."""
    end = next(i for i, line in enumerate(stdout.splitlines()) if line == "}")
    return json.loads("\n".join(stdout.splitlines()[: end + 1]))


def test_magicbrush_recipe_adapts_its_sample_to_verified_shards_and_to_bagel_parquet(tmp_path):
    import pyarrow.parquet as pq

    made = run("magicbrush.py", "--make-sample", str(tmp_path / "hub"))
    assert made.returncode == 0, made.stderr
    data = Path(made.stdout.strip())
    assert all(p.is_symlink() for p in data.glob("*.parquet")) and len(list(data.glob("*.parquet"))) == 2
    shards = run("magicbrush.py", str(data), str(tmp_path / "wds"), "--workers", "1")
    assert shards.returncode == 0, shards.stderr
    summary = _json_head(shards.stdout)
    assert (summary["rows_in"], summary["chains_out"], summary["dropped"]) == (15, 8, 0)
    assert "OK - " in shards.stdout
    parquet = run("magicbrush.py", str(data), str(tmp_path / "pq"), "--to", "parquet")
    assert parquet.returncode == 0, parquet.stderr
    rows = [r for f in sorted((tmp_path / "pq").glob("*.parquet")) for r in pq.read_table(f).to_pylist()]
    turns = sorted(len(r["instruction_list"]) for r in rows)
    assert turns == [1, 1, 1, 2, 2, 2, 3, 3]  # sessions of 1-3 turns, each one chain
    assert all(len(r["image_list"]) == len(r["instruction_list"]) + 1 for r in rows)
    assert all(r["turn_index"] == list(range(1, len(r["turn_index"]) + 1)) for r in rows)
    assert run("magicbrush.py", "--help").returncode == 0
    assert run("magicbrush.py").returncode == 2


def test_omniedit_recipe_turns_its_options_into_the_filter(tmp_path):
    import pyarrow.parquet as pq

    src, expected = omniedit(tmp_path / "hub")
    choose = ["--min-score", "5", "--task", "add", "--task", "swap"]
    done = run("omniedit.py", str(src), str(tmp_path / "pq"), *choose, "--to", "parquet")
    assert done.returncode == 0, done.stderr
    summary = json.loads(done.stdout)
    assert summary["where"] == 'o_score >= 5.0 and (task == "add" or task == "swap")'
    kept = [chain for i, chain in enumerate(expected) if i % 10 >= 5 and i % 4 in (0, 2)]
    rows = [r for f in sorted((tmp_path / "pq").glob("*.parquet")) for r in pq.read_table(f).to_pylist()]
    assert sorted((tuple(r["image_list"]), tuple(map(tuple, r["instruction_list"]))) for r in rows) == sorted(kept)
    assert summary["filtered_rows"] == len(expected) - len(kept)
    shards = run("omniedit.py", str(src), str(tmp_path / "wds"), *choose, "--workers", "1")
    assert shards.returncode == 0, shards.stderr
    manifest = json.loads((tmp_path / "wds" / "manifest.json").read_text())
    assert sum(s["num_samples"] for s in manifest["shards"]) == len(kept)
    assert run("omniedit.py", "--help").returncode == 0
