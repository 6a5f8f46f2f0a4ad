"""Crash safety: SIGKILL the ``editstream convert`` process part-way, re-run, get identical output."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from editstream.conversion import PROGRESS_DIR, convert
from editstream.conversion.verify import verify
from editstream.format import manifest as mf
from editstream.sandbox.synth import write_synthetic_dataset
from helpers import paused_convert_command

EDITSTREAM = Path(sys.executable).with_name("editstream")


def tree(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


@pytest.mark.skipif(not EDITSTREAM.exists(), reason="editstream console script not installed in this venv")
def test_sigkill_part_way_then_rerun_gives_byte_identical_output(tmp_path):
    src = tmp_path / "src"
    write_synthetic_dataset(
        str(src),
        schema="unified_edit",
        num_files=2,
        row_groups_per_file=30,
        rows_per_group=3,
        seed=11,
        corrupt_fraction=0.1,
        min_side=32,
        max_side=96,
    )
    reference = tmp_path / "reference"
    convert(str(src), str(reference), workers=1, progress=False)
    total = len(mf.Manifest.read(str(reference)).shards)
    assert total == 60

    out = tmp_path / "out"
    proc = subprocess.Popen(
        paused_convert_command(3, str(src), str(out), "--workers", "1", "--no-progress"),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    progress = out / PROGRESS_DIR
    try:
        paused = proc.stdout.readline() if proc.stdout else b""  # inside the 4th shard, 3 finished
        assert paused == b"paused\n", proc.stderr.read().decode()[-2000:] if proc.stderr else ""
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == -signal.SIGKILL, proc.stderr.read().decode()[-2000:]
    records = [p for p in progress.iterdir() if p.suffix == ".json"]  # one per finished shard
    assert not (out / "manifest.json").exists()
    assert len(records) == 3, "the kill lands part-way: 3 shards finished ..."
    assert [p.name for p in out.iterdir() if p.name.endswith(".tmp")], "... and the 4th half-written"

    rerun = subprocess.run(
        [str(EDITSTREAM), "convert", str(src), str(out), "--workers", "2", "--no-progress"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert rerun.returncode == 0, rerun.stderr[-2000:]
    summary = json.loads(rerun.stdout)
    assert summary["skipped_shards"] == len(records)  # finished shards were reused, not redone
    assert summary["converted_shards"] == total - summary["skipped_shards"]
    assert tree(out) == tree(reference)
    assert verify(str(out), source=str(src)).ok


def test_interrupted_shard_write_leaves_no_partial_shard(tmp_path, monkeypatch):
    """An error while a shard is being written leaves neither the shard nor a temp file behind."""
    src = tmp_path / "src"
    write_synthetic_dataset(
        str(src),
        schema="unified_edit",
        num_files=1,
        row_groups_per_file=2,
        rows_per_group=4,
        seed=2,
        min_side=16,
        max_side=32,
    )
    import editstream.conversion.shard as conv

    real = conv.encode_members
    calls = {"n": 0}

    def failing(row, key, schema_types=None):
        calls["n"] += 1
        if calls["n"] == 6:  # second row of the second shard
            raise KeyboardInterrupt
        return real(row, key, schema_types)

    monkeypatch.setattr(conv, "encode_members", failing)
    out = tmp_path / "out"
    with pytest.raises(KeyboardInterrupt):
        convert(str(src), str(out), workers=1, progress=False)
    names = sorted(p.name for p in out.iterdir())
    assert names == [PROGRESS_DIR, "part-00000-rg00000.tar", "part-00000-rg00000.tar.idx"]
    monkeypatch.setattr(conv, "encode_members", real)
    result = convert(str(src), str(out), workers=1, progress=False)
    assert (result["converted_shards"], result["skipped_shards"]) == (1, 1)
    assert verify(str(out), source=str(src)).ok
