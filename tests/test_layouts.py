"""Other conversion layouts on the WebDataset backend: every row once per pass, exact resume.

``--layout size`` shards are units of their own (order differs from parquet, rows do not);
``--drop-bad-rows`` shards keep the original row numbers in ``data_indexes`` and resume by
seeking past the dropped rows.
"""

from __future__ import annotations

import json
import random
from collections import Counter

import pytest

from editstream import ParquetStandardIterableDataset
from editstream.conversion import convert
from editstream.sandbox.synth import write_synthetic_dataset
from helpers import check_state_contract, run_cli


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
    ds = RowIds("rows", None, None, None, [str(tmp_path / "size")], [3], num_workers=0, backend="webdataset")
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


# --------------------------------------------------------------------------- num_used_data on a size layout


@pytest.fixture(scope="module")
def size_roots(src, tmp_path_factory):
    """``src`` (3 files x 10 rows) in the size layout: 5 rows a shard (shards end where files end)
    and 4 rows a shard (shards straddle files)."""
    root, _ = src
    out = tmp_path_factory.mktemp("size-roots")
    for rows in (5, 4):
        convert(
            str(root / "pq"), str(out / f"by{rows}"), layout="size", samples_per_shard=rows, workers=1, progress=False
        )
    return out


def pass_rows(data_dir, num_used, backend):
    """The row ids of one pass (every listed unit once) over ``data_dir`` with ``num_used``."""
    ds = RowIds(
        "rows", None, None, None, [str(data_dir)], [num_used], num_workers=0, backend=backend, file_order="sorted"
    )
    rows_per_unit = {"parquet": 5, "webdataset": None}[backend]  # parquet units: row groups of 5 rows
    units = ds.data_paths
    if rows_per_unit is None:
        total = sum(s.num_samples for u in units for s in ds.source.shard_layout.shards_of(u))
    else:
        total = len(units) * rows_per_unit
    return Counter(s["rid"] for s in ids(ds, total))


def test_the_default_num_used_reads_every_shard_of_a_size_layout(size_roots):
    root = size_roots / "by4"
    result = run_cli("-q", "stream", str(root), "--samples", "1")
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["units"] == 8  # ceil(30 / 4) shards, not the 3 source files


@pytest.mark.parametrize("num_used", [3, 2, 4, 6])
def test_num_used_data_means_the_same_rows_on_both_backends(src, size_roots, num_used):
    root, _ = src
    parquet = pass_rows(root / "pq", num_used, "parquet")
    assert pass_rows(size_roots / "by5", num_used, "webdataset") == parquet


def test_a_count_that_leaves_rows_unread_is_logged_with_the_numbers(src, size_roots, caplog):
    root, _ = src
    with caplog.at_level("WARNING", logger="editstream"):
        rows = pass_rows(size_roots / "by4", 1, "webdataset")
    text = caplog.text
    assert "num_used_data 1 for" in text and "which holds 3 files: 2 of them are not read" in text
    assert "2 rows of the first 1 source file(s) share shards with later files (shard-000002.tar)" in text
    assert sum(rows.values()) == 8  # shards 0-1 (rows 0-7); shard 2 holds rows 8-9 of file 0 and 10-11 of file 1
    caplog.clear()
    with caplog.at_level("WARNING", logger="editstream"):
        pass_rows(root / "pq", 2, "parquet")
    assert "which holds 3 files: 1 of them are not read" in caplog.text
