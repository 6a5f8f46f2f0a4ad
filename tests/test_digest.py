"""Shard digests: xxh3-128 by default, sha256 on request, recorded in the manifest and checked by
verify and resume; manifests of format version 1 (sha256 only) still load, verify and stream."""

from __future__ import annotations

import hashlib
import json
import random
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import xxhash

from editstream.conversion import convert, plan_conversion
from editstream.conversion.config import ConvertConfig
from editstream.conversion.records import PROGRESS_DIR, write_records_for
from editstream.conversion.verify import verify
from editstream.data.sources.webdataset import TarSource
from editstream.format import manifest as mf
from editstream.format import tarblock as tb
from editstream.format.tarwriter import _header
from editstream.sandbox.synth import write_synthetic_dataset

EDITSTREAM = Path(sys.executable).with_name("editstream")


@pytest.fixture(scope="module")
def src(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("digest") / "src"
    write_synthetic_dataset(str(out), num_files=2, row_groups_per_file=2, rows_per_group=3, seed=21, max_side=48)
    return out


def rows_of(root: Path) -> list:
    source = TarSource(dataset_name="t")
    return [row for unit in source.list_units([str(root)], [2]) for _, row in source.iter_unit_rows(unit, None)]


def flip_a_byte(path: Path) -> None:
    data = bytearray(path.read_bytes())
    data[700] ^= 0xFF  # inside the first member's data, past its header
    path.write_bytes(bytes(data))


@pytest.mark.parametrize("digest", ["xxh3_128", "sha256"])
def test_the_chosen_digest_is_recorded_and_verified(src, tmp_path, digest):
    out = tmp_path / "out"
    convert(str(src), str(out), workers=1, progress=False, digest=digest)
    raw = json.loads((out / mf.MANIFEST_NAME).read_text())
    assert (raw["format_version"], raw["digest"]) == (3, digest)
    other = "sha256" if digest == "xxh3_128" else "xxh3_128"
    for shard in raw["shards"]:
        data = (out / shard["path"]).read_bytes()
        want = xxhash.xxh3_128(data).hexdigest() if digest == "xxh3_128" else hashlib.sha256(data).hexdigest()
        assert shard[digest] == want and other not in shard
    assert verify(str(out), source=str(src)).ok
    first = out / raw["shards"][0]["path"]
    flip_a_byte(first)
    report = verify(str(out))
    assert [(p.kind, p.shard) for p in report.problems if p.kind == "digest"] == [("digest", raw["shards"][0]["path"])]
    assert digest in next(p.detail for p in report.problems if p.kind == "digest")


def test_both_digests_give_the_same_shards(src, tmp_path):
    convert(str(src), str(tmp_path / "x"), workers=1, progress=False)
    convert(str(src), str(tmp_path / "s"), workers=1, progress=False, digest="sha256")
    shards = sorted(p.name for p in (tmp_path / "x").glob("*.tar*"))
    assert shards and shards == sorted(p.name for p in (tmp_path / "s").glob("*.tar*"))
    for name in shards:
        assert (tmp_path / "x" / name).read_bytes() == (tmp_path / "s" / name).read_bytes()


def as_version_1(root: Path) -> None:
    """Rewrite a sha256 conversion's manifest as format version 1 wrote it (no ``digest`` key)."""
    d = json.loads((root / mf.MANIFEST_NAME).read_text())
    assert d.pop("digest") == "sha256"
    d["format_version"] = 1
    (root / mf.MANIFEST_NAME).write_text(json.dumps(d, indent=1))


def test_a_version_1_manifest_still_loads_verifies_and_streams(src, tmp_path):
    convert(str(src), str(tmp_path / "new"), workers=1, progress=False, digest="sha256")
    old = tmp_path / "old"
    shutil.copytree(tmp_path / "new", old)
    as_version_1(old)
    m = mf.Manifest.read(str(old))
    assert (m.format_version, m.digest) == (1, "sha256")
    assert all(s.digest[0] == "sha256" for s in m.shards)
    assert "digest" not in m.to_dict() and m.to_dict()["format_version"] == 1  # written back unchanged
    assert verify(str(old), source=str(src)).ok
    assert rows_of(old) == rows_of(tmp_path / "new")
    flip_a_byte(old / m.shards[1].path)
    assert {p.kind for p in verify(str(old)).problems} >= {"digest"}


def test_manifests_without_the_named_digest_are_refused():
    base = {
        "format": "editstream-webdataset",
        "format_version": 2,
        "digest": "xxh3_128",
        "schema": "unified_edit",
        "layout": "size",
        "columns": [],
        "source_root": "/src",
        "source_files": [{"path": "a.parquet", "row_groups": [1], "key_stem": "a"}],
        "shards": [
            {
                "path": "s.tar",
                "idx_path": "s.tar.idx",
                "num_samples": 1,
                "num_bytes": 2048,
                "rows": [{"file": "a.parquet", "row_group": 0, "start": 0, "stop": 1}],
                "xxh3_128": "0" * 32,
            }
        ],
    }
    assert mf.Manifest.from_dict(base).shards[0].digest == ("xxh3_128", "0" * 32)
    for change, message in [
        ({"digest": "md5"}, "unknown digest"),
        ({"format_version": 1}, "unknown digest 'xxh3_128' for format version 1"),
        ({"format_version": 4}, "not supported"),
        ({"digest": "sha256"}, "no sha256 digest"),
    ]:
        with pytest.raises(mf.ManifestError, match=message):
            mf.Manifest.from_dict({**base, **change})
    shard = dict(base["shards"][0])
    for bad, message in [({"xxh3_128": "0" * 64}, "32 hex digits"), ({"xxh3_128": None}, "no digest")]:
        with pytest.raises(mf.ManifestError, match=message):
            mf.Manifest.from_dict({**base, "shards": [{**shard, **bad}]})


def test_resume_rechecks_shards_by_their_recorded_digest(src, tmp_path):
    """A run that died before its manifest: the shard whose bytes no longer match its done
    record's digest is redone, the others are kept, and the result equals an uninterrupted run."""
    out = tmp_path / "out"
    convert(str(src), str(out), workers=1, progress=False)
    reference = {p.name: p.read_bytes() for p in out.glob("*.tar*")}
    m = mf.Manifest.read(str(out))
    (out / mf.MANIFEST_NAME).unlink()
    write_records_for(m, plan_conversion(ConvertConfig(src=str(src), dst=str(out))).tasks, str(out), None)
    assert len(list((out / PROGRESS_DIR).iterdir())) == len(m.shards)
    flip_a_byte(out / m.shards[0].path)
    summary = convert(str(src), str(out), workers=1, progress=False)
    assert (summary["converted_shards"], summary["skipped_shards"]) == (1, len(m.shards) - 1)
    assert {p.name: p.read_bytes() for p in out.glob("*.tar*")} == reference


def reference_header(name: bytes, size: int, typeflag: bytes) -> bytes:
    """A GNU header written field by field (the obvious way), to check the writer's fast one."""
    block = bytearray(tb.BLOCK)
    block[0 : len(name)] = name
    for field, value in ((tb.MODE, 0o644), (tb.UID, 0), (tb.GID, 0)):
        block[field] = b"%07o\0" % value
    block[tb.SIZE] = b"%011o\0" % size if size < 8**11 else b"\x80" + size.to_bytes(11, "big")
    block[tb.MTIME] = b"%011o\0" % 0
    block[tb.CHECKSUM] = b" " * 8
    block[tb.TYPEFLAG] = typeflag
    block[tb.MAGIC] = tb.GNU_MAGIC
    block[tb.CHECKSUM] = b"%06o\0 " % sum(block)
    return bytes(block)


def test_the_fast_header_equals_one_written_field_by_field():
    rng = random.Random(5)
    for _ in range(3000):
        name = bytes(rng.randrange(1, 256) for _ in range(rng.randrange(1, 101)))
        size = rng.choice([0, 1, 511, 512, 8**11 - 1, 8**11, rng.randrange(2**40)])
        typeflag = rng.choice([b"0", b"L"])
        assert _header(name, size, typeflag) == reference_header(name, size, typeflag)


def test_cli_digest_option(src, tmp_path):
    out = tmp_path / "cli"
    subprocess.run(
        [str(EDITSTREAM), "convert", str(src), str(out), "--workers", "1", "--no-progress", "--digest", "sha256"],
        check=True,
        capture_output=True,
    )
    assert json.loads((out / mf.MANIFEST_NAME).read_text())["digest"] == "sha256"
    done = subprocess.run([str(EDITSTREAM), "verify", str(out)], capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr
