"""Units, ranks, workers, resume and drops of the shared iteration loop, on real parquet files."""

from __future__ import annotations

import logging
import os
import random

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import torch

from editstream import ParquetStandardIterableDataset
from helpers import check_state_contract, first


class RowIdDataset(ParquetStandardIterableDataset):
    """parse_row returns the row's id; a row whose ``bad`` flag is set raises like a bad image would."""

    def parse_row(self, row):
        if row["bad"]:
            raise ValueError(f"bad row {row['rid']}")
        return {"rid": row["rid"], "draw": random.random()}


def write_files(root, num_files=3, row_groups=2, rows=4, bad=()):
    root.mkdir(parents=True, exist_ok=True)
    info = {}
    for f in range(num_files):
        path = root / f"part-{f:03d}.parquet"
        schema = pa.schema([("rid", pa.string()), ("bad", pa.bool_())])
        with pq.ParquetWriter(path, schema) as w:
            for g in range(row_groups):
                rids = [f"f{f}g{g}r{r}" for r in range(rows)]
                w.write_table(pa.table({"rid": rids, "bad": [rid in bad for rid in rids]}, schema=schema))
        info[str(path)] = {"num_row_groups": row_groups}
    return info


def make(root, info=None, **kw):
    kw.setdefault("num_workers", 0)
    num_used = kw.pop("num_used", 3)
    return RowIdDataset("toy", None, None, None, [str(root)], [num_used], info, **kw)


def take(ds, n):
    it = iter(ds)
    return [next(it) for _ in range(n)]


def expected_units(root, n_files, n_rg, seed, rank=0, world=1):
    units = sorted((str(root / f"part-{f:03d}.parquet"), g) for f in range(n_files) for g in range(n_rg))
    rng = random.Random(seed)
    rng.shuffle(units)
    k = len(units) // world
    return units[rank * k : (rank + 1) * k]


@pytest.mark.parametrize("seed", [0, 42, 7])
@pytest.mark.parametrize("world", [1, 2, 4])
def test_rank_slices_follow_sorted_shuffle(tmp_path, seed, world):
    info = write_files(tmp_path, num_files=3, row_groups=3)
    for rank in range(world):
        ds = make(tmp_path, info, local_rank=rank, world_size=world)
        ds.set_epoch(seed)
        assert ds.data_paths_per_rank == expected_units(tmp_path, 3, 3, seed, rank, world)
    all_ranks = [
        u for r in range(world) for u in make(tmp_path, info, local_rank=r, world_size=world).data_paths_per_rank
    ]
    assert len(set(all_ranks)) == len(all_ranks) == (9 // world) * world


def test_stream_order_and_data_indexes_without_workers(tmp_path):
    info = write_files(tmp_path, num_files=2, row_groups=2, rows=3)
    ds = make(tmp_path, info, num_used=2)
    ds.set_epoch(5)
    units = expected_units(tmp_path, 2, 2, 5)
    samples = take(ds, 12 + 3)  # one full pass, then it starts over
    got = [s["rid"] for s in samples]
    want = []
    for path, rg in units:
        f = int(path.rsplit("-", 1)[1].split(".")[0])
        want += [f"f{f}g{rg}r{r}" for r in range(3)]
    assert got[:12] == want and got[12:] == want[:3]
    assert [s["data_indexes"]["data_indexes"] for s in samples[:4]] == [[0, 0], [0, 1], [0, 2], [1, 0]]
    assert {s["data_indexes"]["worker_id"] for s in samples} == {0}
    assert samples[0]["data_indexes"]["dataset_name"] == "toy"


def test_tail_drop_warns_and_empty_rank_is_an_error(tmp_path, caplog):
    info = write_files(tmp_path, num_files=1, row_groups=3)
    with caplog.at_level(logging.WARNING, logger="editstream"):
        make(tmp_path, info, num_used=1, local_rank=0, world_size=2).set_epoch(42)
    assert "the last 1 units are not used" in caplog.text
    ds = make(tmp_path, info, num_used=1, local_rank=0, world_size=4)  # cheap: nothing is listed yet
    with pytest.raises(ValueError) as err:
        ds.set_epoch(42)
    msg = str(err.value)
    assert "'toy'" in msg and "3 units" in msg and "4 ranks" in msg


def test_missing_directory_names_dataset_and_path(tmp_path):
    ds = make(tmp_path / "nope")  # the constructor does no I/O
    with pytest.raises(FileNotFoundError) as err:
        ds.set_epoch(42)
    assert "'toy'" in str(err.value) and str(tmp_path / "nope") in str(err.value)


def test_num_used_repeats_listing(tmp_path):
    info = write_files(tmp_path, num_files=2, row_groups=1)
    ds = make(tmp_path, info, num_used=5)
    files = [p.rsplit("/", 1)[1] for p, _ in ds.data_paths]
    listed = [n for n in os.listdir(tmp_path) if n.endswith(".parquet")]  # the directory's order, as NeMo's
    assert files == listed * 2 + listed[:1]


def test_parquet_info_optional_footer_read(tmp_path):
    info = write_files(tmp_path, num_files=3, row_groups=2)
    full = make(tmp_path, info).data_paths
    assert make(tmp_path, None).data_paths == full
    partial = {k: v for i, (k, v) in enumerate(sorted(info.items())) if i == 0}
    assert make(tmp_path, partial).data_paths == full


@pytest.mark.parametrize("n_before", [1, 4, 5, 17, 30])
def test_resume_meets_the_state_contract(tmp_path, n_before):
    """Within a unit, at a unit boundary (5 rows each), and after a full pass (30 rows)."""
    info = write_files(tmp_path, num_files=3, row_groups=2, rows=5)
    check_state_contract(lambda: make(tmp_path, info), n_before, 6, owns_global_rng=False)


def test_the_state_is_the_last_yielded_row_and_the_constructor_takes_it(tmp_path):
    info = write_files(tmp_path, num_files=3, row_groups=2, rows=5)
    first_ds = make(tmp_path, info)
    assert first_ds.state_dict() == {"data_status": None}
    random.seed(1)
    reference = take(make(tmp_path, info), 12)
    random.seed(1)
    head = take(first_ds, 7)
    status = first_ds.state_dict()["data_status"]
    assert status == [head[-1]["data_indexes"]["data_indexes"]]
    tail = take(make(tmp_path, info, data_status=status), 5)  # the global random goes on in this process
    assert [s["rid"] for s in head + tail] == [s["rid"] for s in reference]
    assert [s["draw"] for s in head + tail] == [s["draw"] for s in reference]


def test_bad_rows_and_unreadable_units_are_dropped_and_counted(tmp_path, caplog):
    info = write_files(tmp_path, num_files=2, row_groups=2, rows=3, bad={"f0g1r1", "f1g0r0"})
    (tmp_path / "part-002.parquet").write_bytes(b"this is not parquet")  # unreadable file, footer read fails
    info_lying = dict(info)
    info_lying[str(tmp_path / "part-001.parquet")] = {"num_row_groups": 3}  # rg 2 does not exist
    with caplog.at_level(logging.WARNING, logger="editstream.drops"):
        ds = make(tmp_path, info_lying, num_used=3)
        got = [s["rid"] for s in take(ds, 10)]
    # The 10 good rows are exactly one pass over the 5 listed units (part-002 is not one), so
    # each bad row and the missing row group were met once, unless that row group came last.
    missing = (str(tmp_path / "part-001.parquet"), 2)
    units = ds.data_paths_per_rank
    assert sorted(units) == sorted(
        [(str(tmp_path / f"part-00{f}.parquet"), g) for f in (0, 1) for g in (0, 1)] + [missing]
    )
    assert units[-1] != missing
    good = [f"f{f}g{g}r{r}" for f in (0, 1) for g in (0, 1) for r in range(3)]
    assert sorted(got) == sorted(set(good) - {"f0g1r1", "f1g0r0"})
    assert ds.drop_counts == {"unreadable_file": 1, "bad_row": 2, "unreadable_unit": 1}
    assert "part-002.parquet" in caplog.text
    bad = [d for d in ds.drops.recent if d.reason == "bad_row"]
    locs = [(d.location["file"].rsplit("/", 1)[1], d.location["row_group"], d.location["row"]) for d in bad]
    assert sorted(locs) == [("part-000.parquet", 1, 1), ("part-001.parquet", 0, 0)]


def test_all_units_unreadable_raises_instead_of_spinning(tmp_path):
    (tmp_path / "a.parquet").write_bytes(b"garbage")
    ds = make(tmp_path, {str(tmp_path / "a.parquet"): {"num_row_groups": 1}}, num_used=1)
    with pytest.raises(RuntimeError, match="gave no sample"):
        take(ds, 1)


def _collect(ds, num_workers, n):
    return first(torch.utils.data.DataLoader(ds, batch_size=None, num_workers=num_workers), n)


def test_dataloader_workers_take_reversed_contiguous_slices(tmp_path):
    info = write_files(tmp_path, num_files=4, row_groups=2, rows=2)  # 8 units
    ds = make(tmp_path, info, num_used=4, num_workers=2)
    ds.set_epoch(3)
    units = expected_units(tmp_path, 4, 2, 3)
    samples = _collect(ds, 2, 16)
    by_worker = {0: [], 1: []}
    for s in samples:
        by_worker[s["data_indexes"]["worker_id"]].append(s)
    for w in (0, 1):
        mine = units[w * 4 : (w + 1) * 4][::-1]
        rids = [s["rid"] for s in by_worker[w]]
        want = []
        for path, rg in mine:
            f = int(path.rsplit("-", 1)[1].split(".")[0])
            want += [f"f{f}g{rg}r{r}" for r in range(2)]
        assert rids == want
        assert by_worker[w][0]["data_indexes"]["data_indexes"] == [0, 0]


def test_worker_without_units_is_an_error(tmp_path):
    info = write_files(tmp_path, num_files=1, row_groups=1)
    ds = make(tmp_path, info, num_used=1, num_workers=2)
    batches = iter(torch.utils.data.DataLoader(ds, batch_size=None, num_workers=2))
    message = "dataset 'toy': rank 0 has 1 units for 2 DataLoader workers: every worker needs at least one"
    with pytest.raises(ValueError, match=message):
        next(batches)
    # Now, not when the garbage collector meets the failed iterator (that shutdown hangs for 10 s).
    batches._shutdown_workers()


@pytest.mark.parametrize("start", [0, 1, 31, 32, 33, 70, 99, 100])
def test_streamed_row_group_rows_equal_the_whole_table_read(tmp_path, start):
    from editstream.io import parquet as parquet_rows

    path = tmp_path / "big.parquet"
    table = pa.table(
        {
            "i": list(range(100)),
            "b": [bytes([k % 256]) * (k % 7) for k in range(100)],
            "l": [[str(k)] * (k % 3) for k in range(100)],
        }
    )
    pq.write_table(table, path, row_group_size=100)
    whole = table.slice(start).to_pylist()  # pyarrow's own whole-table read, independent of editstream
    with parquet_rows.open_parquet(str(path), streaming=True) as pf:
        streamed = list(parquet_rows.iter_row_group_rows(pf, str(path), 0, start))
        batches = parquet_rows.iter_row_group_batches(pf, str(path), 0, start, batch_size=32, binary_views=True)
        views = [(i, row) for first, rows in batches for i, row in enumerate(rows, first)]
    assert [i for i, _ in streamed] == [i for i, _ in views] == list(range(start, 100))
    assert [row for _, row in streamed] == whole
    assert [{k: bytes(v) if isinstance(v, memoryview) else v for k, v in row.items()} for _, row in views] == whole
    assert parquet_rows.read_row_group_rows(str(path), 0, start_row=start) == whole
