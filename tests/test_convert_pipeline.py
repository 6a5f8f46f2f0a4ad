"""The pipelined converter (rows decoded on a reader thread while the writer writes) writes the
same bytes as the sequential one did: every output file of four conversions is compared with
digests recorded before the pipeline existed, on one and two workers, and with the reader off,
one row per batch or a deep queue."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest

from editstream.conversion import convert
from editstream.data.sources import parquet_slices as parquet_rows
from editstream.sandbox.synth import write_synthetic_dataset

GOLDEN = json.loads((Path(__file__).parent / "fixtures" / "convert_golden.json").read_text())
CASES: dict[str, dict[str, Any]] = {
    "rowgroup": {},
    "size": {"layout": "size", "shard_size": 40_000},  # shards that start and end inside row groups
    "drop": {"drop_bad_rows": True, "layout": "size", "shard_size": 40_000},
    "sha": {"digest": "sha256"},
}


@pytest.fixture(scope="module")
def golden_src(tmp_path_factory: pytest.TempPathFactory) -> Path:
    src = tmp_path_factory.mktemp("golden") / "src"
    write_synthetic_dataset(
        str(src),
        schema="unified_edit",
        num_files=3,
        row_groups_per_file=3,
        rows_per_group=7,
        seed=21,
        corrupt_fraction=0.2,
        min_side=16,
        max_side=48,
    )
    digest = hashlib.sha256()
    for path in sorted(src.glob("*.parquet")):
        digest.update(path.name.encode())
        digest.update(repr(pq.read_table(path).to_pylist()).encode())
    if digest.hexdigest()[:16] != GOLDEN["source_digest"]:
        pytest.skip("the synthetic source's rows differ from the recorded ones (another Pillow or numpy)")
    return src


def output_digests(src: Path, dst: Path) -> dict[str, str]:
    """sha256 (16 hex digits) of every file under ``dst``, with the values that depend on where the
    source is (its path, and the plan's fingerprint, a hash over that path and the files' identities)
    written as ``<SRC>`` and ``<PLAN>``, and the manifest's record of those identities left out:
    everything else is compared byte for byte."""
    fingerprint = json.loads((dst / "manifest.json").read_text())["extra"]["plan_fingerprint"]
    out = {}
    for path in sorted(dst.rglob("*")):
        if path.is_file():
            data = path.read_bytes()
            if path.name == "manifest.json":  # the source files' identities (mtimes, inodes) are the machine's too
                doc = json.loads(data)
                doc["extra"].pop("source_identities")
                doc["extra"].pop("listing_order", None)  # the directory's own file order, as it lists them
                data = (json.dumps(doc, indent=1) + "\n").encode()
            data = data.replace(str(src).encode(), b"<SRC>").replace(fingerprint.encode(), b"<PLAN>")
            out[str(path.relative_to(dst))] = hashlib.sha256(data).hexdigest()[:16]
    return out


@pytest.mark.parametrize("workers", [1, 2])
@pytest.mark.parametrize("case", sorted(CASES))
def test_every_output_file_matches_the_sequential_converter(golden_src, tmp_path, case, workers):
    dst = tmp_path / case
    convert(str(golden_src), str(dst), workers=workers, progress=False, **CASES[case])
    assert output_digests(golden_src, dst) == GOLDEN["outputs"][case]


@pytest.mark.parametrize(
    ("prefetch", "batch_bytes"),
    [(0, parquet_rows.BATCH_BYTES), (1, 1), (4, 30_000)],
    ids=["sequential", "one-row-batches", "deep-queue"],
)
@pytest.mark.parametrize("case", ["rowgroup", "size"])
def test_reader_depth_and_batch_size_change_no_byte(golden_src, tmp_path, monkeypatch, case, prefetch, batch_bytes):
    monkeypatch.setattr(parquet_rows, "PREFETCH_BATCHES", prefetch)
    monkeypatch.setattr(parquet_rows, "BATCH_BYTES", batch_bytes)
    dst = tmp_path / case
    convert(str(golden_src), str(dst), workers=1, progress=False, **CASES[case])  # in this process: patched
    assert output_digests(golden_src, dst) == GOLDEN["outputs"][case]
