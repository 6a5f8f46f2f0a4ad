"""Other conversion layouts on the WebDataset backend: every row once per pass, exact resume.

``--layout size`` shards are units of their own (order differs from parquet, rows do not);
``--drop-bad-rows`` shards keep the original row numbers in ``data_indexes`` and resume by
seeking past the dropped rows.
"""

from __future__ import annotations

import random
from collections import Counter

import pytest

from editstream import ParquetStandardIterableDataset
from editstream.conversion import convert
from editstream.testing.synth import write_synthetic_dataset
from helpers import check_state_contract


class RowIds(ParquetStandardIterableDataset):
    """Yields the synthetic row id (and one global draw, so RNG state matters for resume)."""

    def parse_row(self, row):
        return {"rid": row["row_id"], "draw": random.random()}


@pytest.fixture(scope="module")
def src(tmp_path_factory):
    root = tmp_path_factory.mktemp("layouts")
    summary = write_synthetic_dataset(
        str(root / "pq"),
        num_files=3,
        row_groups_per_file=2,
        rows_per_group=5,
        seed=2,
        corrupt_fraction=0.2,
        max_side=64,
    )
    return root, summary


def ids(ds, n, seed=0):
    random.seed(seed)
    it = iter(ds)
    return [next(it) for _ in range(n)]


def test_size_layout_yields_every_row_once_per_pass(src, tmp_path):
    root, summary = src
    convert(str(root / "pq"), str(tmp_path / "size"), layout="size", samples_per_shard=4, workers=1, progress=False)
    ds = RowIds("rows", None, None, None, [str(tmp_path / "size")], [8], num_workers=0, backend="webdataset")
    shards = len(ds.data_paths)
    assert shards == -(-summary["num_rows"] // 4)  # ceil(30 / 4) shards, each its own unit
    samples = ids(ds, summary["num_rows"])
    counts = Counter(s["rid"] for s in samples)
    parquet = RowIds("rows", None, None, None, [str(root / "pq")], [3], num_workers=0)
    assert set(counts) == {s["rid"] for s in ids(parquet, summary["num_rows"])}
    assert set(counts.values()) == {1}
    assert [len(s["data_indexes"]["data_indexes"]) for s in samples] == [2] * summary["num_rows"]  # [unit, row]


@pytest.fixture(scope="module")
def dropped(src, tmp_path_factory):
    """``src`` converted with ``--drop-bad-rows``, and the conversion's summary."""
    root, _ = src
    out = tmp_path_factory.mktemp("dropped") / "wds"
    return out, convert(str(root / "pq"), str(out), drop_bad_rows=True, workers=1, progress=False)


def test_drop_bad_rows_keeps_row_numbers(src, dropped):
    root, summary = src
    out, result = dropped
    assert result["num_bad_rows"] == len(summary["corrupt_rows"])
    assert result["num_samples"] == summary["num_rows"] - result["num_bad_rows"]
    wds = RowIds("rows", None, None, None, [str(out)], [3], num_workers=0, backend="webdataset")
    pq = RowIds("rows", None, None, None, [str(root / "pq")], [3], num_workers=0)
    good = result["num_samples"]
    a = {s["rid"]: s["data_indexes"]["data_indexes"] for s in ids(wds, good)}
    b = {s["rid"]: s["data_indexes"]["data_indexes"] for s in ids(pq, summary["num_rows"])}
    assert len(a) == good and a.items() <= b.items()  # same row -> same [unit, row] position on both backends


@pytest.mark.parametrize("n_before", [2, 4, 7, 11, 26])
def test_drop_bad_rows_resumes_by_seek(dropped, n_before):
    """Resume positions skip the dropped rows (the stream has 24 good rows of 30)."""
    out, _ = dropped

    def make():
        return RowIds("rows", None, None, None, [str(out)], [3], num_workers=0, backend="webdataset")

    check_state_contract(make, n_before, 5, owns_global_rng=False)
