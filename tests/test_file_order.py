"""Files are taken in the order their directory lists them (``os.listdir``, as NeMo Automodel and BAGEL
take them) before ``num_used_data`` cuts them, on both backends; ``file_order="sorted"`` sorts them."""

from __future__ import annotations

import os
import random
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from editstream import ByteTokenizer, ImageTransform, UnifiedEditIterableDataset
from editstream.conversion import convert
from editstream.format.manifest import Manifest
from editstream.sandbox.synth import write_synthetic_dataset
from helpers import VAE, VIT, assert_batches_equal, first


@pytest.fixture(scope="module")
def unsorted(tmp_path_factory) -> Path:
    """Four parquet files whose directory lists them in an order other than sorted."""
    root = tmp_path_factory.mktemp("order")
    write_synthetic_dataset(str(root / "made"), num_files=4, row_groups_per_file=1, rows_per_group=3, seed=2)
    made = sorted((root / "made").glob("*.parquet"))
    rng = random.Random(0)
    while True:
        src = root / f"src{rng.randrange(10**6)}"
        src.mkdir()
        for i, path in enumerate(made):  # created in an order the names do not follow
            (src / f"{rng.choice('abcdefgh')}{i}-{path.name}").write_bytes(path.read_bytes())
        listed = [n for n in os.listdir(src) if n.endswith(".parquet")]
        if listed != sorted(listed):
            return src


def _edit(data_dir: Path, backend: str, **kw) -> UnifiedEditIterableDataset:
    return UnifiedEditIterableDataset(
        "e", ImageTransform(**VAE), ByteTokenizer(), ImageTransform(**VIT), [str(data_dir)], [2],
        num_workers=0, local_rank=0, world_size=1, backend=backend, **kw,
    )  # fmt: skip


def test_the_parquet_backend_takes_files_in_listing_order(unsorted):
    listed = [str(unsorted / n) for n in os.listdir(unsorted) if n.endswith(".parquet")]
    assert [p for p, _ in _edit(unsorted, "parquet").data_paths] == listed[:2]
    assert [p for p, _ in _edit(unsorted, "parquet", file_order="sorted").data_paths] == sorted(listed)[:2]
    with pytest.raises(ValueError, match="file_order must be one of"):
        _edit(unsorted, "parquet", file_order="random")


def test_a_converted_root_keeps_the_listing_order_and_chooses_the_same_files(unsorted, tmp_path):
    out = tmp_path / "wds"
    convert(str(unsorted), str(out), workers=1, progress=False)
    listed = [n for n in os.listdir(unsorted) if n.endswith(".parquet")]
    assert Manifest.read(str(out)).extra["listing_order"] == listed
    for order in ("listing", "sorted"):
        streams = []
        for backend, root in (("parquet", unsorted), ("webdataset", out)):
            ds = _edit(root, backend, file_order=order)
            ds.set_epoch(42)
            random.seed(7)
            streams.append((ds.data_paths, first(iter(ds), 8)))
        assert streams[0][0] == streams[1][0]
        assert_batches_equal(streams[0][1], streams[1][1])
    assert pq.ParquetFile(str(unsorted / listed[0])).metadata.num_rows == 3
