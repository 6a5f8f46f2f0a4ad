"""A changed source is never trusted: each source file's identity is taken when a conversion is planned,
checked when the file is read, and kept in the manifest, so a re-run converts what changed."""

from __future__ import annotations

import json
import os
import signal
import subprocess
from pathlib import Path

import pyarrow.parquet as pq
import pytest

import editstream
from editstream.conversion import convert, plan_conversion
from editstream.conversion.config import ConvertConfig
from editstream.conversion.shard import convert_shard
from editstream.data.identity import SourceChangedError, file_identity
from editstream.sandbox.synth import write_synthetic_dataset
from helpers import SRC_DIR, paused_convert_command


def _source(root: Path, seed: int, files: int = 2) -> Path:
    write_synthetic_dataset(str(root), num_files=files, row_groups_per_file=1, rows_per_group=4, seed=seed)
    return root


def _replace(path: Path, donor: Path) -> None:
    """Write ``donor``'s rows over ``path`` in place (same shape: same columns, one row group)."""
    pq.write_table(pq.read_table(donor), path)


def _rows(root: Path) -> list[dict]:
    return [dict(r.row) for r in editstream.iter_rows(str(root))]


def test_a_file_replaced_after_planning_is_refused_when_read(tmp_path):
    src = _source(tmp_path / "src", seed=1)
    donor = _source(tmp_path / "donor", seed=2)
    plan = plan_conversion(ConvertConfig(src=str(src), dst=str(tmp_path / "out"), progress=False))
    second = sorted(src.glob("*.parquet"))[1]
    _replace(second, sorted(donor.glob("*.parquet"))[1])
    convert_shard(plan.tasks[0])  # the untouched file converts
    with pytest.raises(SourceChangedError, match=second.name):
        convert_shard(plan.tasks[1])


def test_a_file_replaced_during_a_conversion_fails_it_naming_the_file(tmp_path):
    src = _source(tmp_path / "src", seed=1)
    donor = _source(tmp_path / "donor", seed=2)
    out = tmp_path / "out"
    env = {**os.environ, "PYTHONPATH": str(SRC_DIR)}
    command = paused_convert_command(0, str(src), str(out), "--workers", "1", "--no-progress", resume_on_usr1=True)
    with subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) as proc:
        assert proc.stdout is not None and proc.stdout.readline().strip() == "paused"  # inside the first shard
        second = sorted(src.glob("*.parquet"))[1]
        _replace(second, sorted(donor.glob("*.parquet"))[1])
        proc.send_signal(signal.SIGUSR1)
        _, stderr = proc.communicate(timeout=300)
    assert proc.returncode == 1, stderr
    assert second.name in stderr and "changed since the conversion was planned" in stderr
    assert not (out / "manifest.json").exists()


def test_a_rerun_after_a_source_changed_converts_the_changed_file_again(tmp_path, caplog):
    src = _source(tmp_path / "src", seed=1, files=3)
    donor = _source(tmp_path / "donor", seed=2, files=3)
    out = tmp_path / "out"
    first = convert(str(src), str(out), workers=1, progress=False)
    assert first["already_done"] is False
    recorded = json.loads((out / "manifest.json").read_text())["extra"]["source_identities"]
    assert sorted(recorded) == sorted(p.name for p in src.glob("*.parquet"))
    assert convert(str(src), str(out), workers=1, progress=False)["already_done"] is True
    changed = sorted(src.glob("*.parquet"))[1]
    _replace(changed, sorted(donor.glob("*.parquet"))[1])
    again = convert(str(src), str(out), workers=1, progress=False)
    assert again["already_done"] is False and again["converted_shards"] == 1 and again["skipped_shards"] == 2
    assert changed.name in caplog.text and "converting its shards again" in caplog.text
    assert _rows(out) == _rows(src)  # the shards hold the source as it is now


def test_a_changed_file_of_another_shape_is_named_in_the_refusal(tmp_path):
    src = _source(tmp_path / "src", seed=1)
    out = tmp_path / "out"
    convert(str(src), str(out), workers=1, progress=False)
    changed = sorted(src.glob("*.parquet"))[0]
    table = pq.read_table(changed)
    pq.write_table(table, changed, row_group_size=2)  # two row groups now: other shards
    with pytest.raises(FileExistsError, match=f"source files changed since: {changed.name}"):
        convert(str(src), str(out), workers=1, progress=False)


def test_identity_of_a_local_file_changes_with_its_content(tmp_path):
    path = tmp_path / "f.bin"
    path.write_bytes(b"a" * 10)
    before = file_identity(str(path))
    path.write_bytes(b"b" * 10)
    os.utime(path, ns=(before["mtime_ns"], before["mtime_ns"]))  # even with the time put back ...
    replaced = tmp_path / "g.bin"
    replaced.write_bytes(b"b" * 10)
    os.utime(replaced, ns=(before["mtime_ns"], before["mtime_ns"]))
    os.replace(replaced, path)  # ... a file renamed over it is another file
    assert file_identity(str(path)) != before


@pytest.mark.s3
def test_an_object_written_again_on_s3_is_seen(s3_bucket):
    import fsspec

    so = s3_bucket.storage_options
    fs = fsspec.filesystem("s3", **so)
    url = f"{s3_bucket.url}/identity/f.bin"
    fs.pipe(url, b"one")
    fs.ls(f"{s3_bucket.url}/identity")  # a cached listing must not hide the new object
    before = file_identity(url, so)
    fs.pipe(url, b"two")
    after = file_identity(url, so)
    assert before["size"] == after["size"] and before["etag"] != after["etag"]
