"""``editstream.iter_rows``: the public raw-row reader gives the same units, positions and rows on both backends."""

from __future__ import annotations

import io
import tarfile
from pathlib import Path

import pytest
from PIL import Image
from tests.helpers import synth_and_convert

import editstream
from editstream.data.raw_rows import BadRawRow, RawRow
from editstream.data.rows import DropRow
from editstream.sandbox.synth import write_synthetic_dataset


@pytest.fixture(scope="module")
def edit_data(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("rawrows")
    return synth_and_convert(
        root, num_files=2, row_groups_per_file=2, rows_per_group=4, seed=5, corrupt_fraction=0.25, max_side=48
    )


def keyed(rows: list[RawRow]) -> list[tuple[object, tuple[int, ...], dict[str, object]]]:
    return [(r.unit, r.position, dict(r.row)) for r in rows]


def test_both_backends_give_the_same_units_positions_and_rows(edit_data):
    parquet = list(editstream.iter_rows(str(edit_data / "pq")))
    shards = list(editstream.iter_rows(str(edit_data / "wds")))
    assert len(parquet) == 2 * 2 * 4  # corrupt rows are rows: parse_row judges them, not the reader
    assert keyed(parquet) == keyed(shards)
    assert [r.position for r in parquet[:5]] == [(0,), (1,), (2,), (3,), (0,)]
    assert parquet[0].unit == (str(edit_data / "pq" / "part-00000.parquet"), 0)
    assert shards[0].where["shard"].endswith(".tar") and shards[0].where["row"] == 0
    assert parquet[0].where == {"file": parquet[0].unit[0], "row_group": 0, "row": 0}


def test_the_row_is_what_parse_row_receives(edit_data):
    seen: list[dict[str, object]] = []

    class Spy(editstream.UnifiedEditIterableDataset):
        def parse_row(self, row):
            seen.append(dict(row))
            raise DropRow("spied")

    for backend, sub in (("parquet", "pq"), ("webdataset", "wds")):
        seen.clear()
        rows = list(editstream.iter_rows(str(edit_data / sub)))
        dataset = Spy("spy", None, None, None, [str(edit_data / sub)], [2], backend=backend, num_workers=1)
        dataset.local_rank, dataset.world_size = 0, 1
        with pytest.raises(RuntimeError, match="gave no sample"):
            next(iter(dataset))
        by_id = {r.row["row_id"]: dict(r.row) for r in rows}
        assert len(seen) == len(rows) and all(by_id[s["row_id"]] == s for s in seen)


def test_backend_and_kind_are_detected_and_checked(edit_data, tmp_path):
    rows = editstream.iter_rows(str(edit_data / "wds"))
    assert (rows.backend, rows.kind.name) == ("webdataset", "unified_edit")
    assert editstream.iter_rows(str(edit_data / "pq"), backend="parquet").backend == "parquet"
    with pytest.raises(ValueError, match="holds parquet files, not converted shards"):
        editstream.iter_rows(str(edit_data / "pq"), backend="webdataset")
    with pytest.raises(ValueError, match="neither parquet files"):
        editstream.iter_rows(str(tmp_path))
    t2i = tmp_path / "t2i"
    write_synthetic_dataset(str(t2i), schema="t2i_pretrain", num_files=2, row_groups_per_file=2, rows_per_group=2)
    found = editstream.iter_rows(str(t2i))
    assert found.kind.name == "t2i_pretrain"
    assert found.units == sorted(str(p) for p in t2i.glob("*.parquet"))  # text-to-image units are whole files
    assert [r.position for r in found][:3] == [(0, 0), (0, 1), (1, 0)]


def test_a_units_subset_keeps_listing_order(edit_data):
    every = editstream.iter_rows(str(edit_data / "pq"))
    wanted = [every.units[3], every.units[1]]
    rows = list(editstream.iter_rows(str(edit_data / "pq"), units=wanted))
    assert [r.unit for r in rows] == [every.units[1]] * 4 + [every.units[3]] * 4
    with pytest.raises(ValueError, match="not in the listing"):
        editstream.iter_rows(str(edit_data / "pq"), units=[("nowhere.parquet", 0)])


def _jpeg() -> bytes:
    buf = io.BytesIO()
    Image.new("RGB", (8, 8), (200, 10, 10)).save(buf, format="JPEG")
    return buf.getvalue()


def _add(tar: tarfile.TarFile, name: str, data: bytes) -> None:
    info = tarfile.TarInfo(name)
    info.size = len(data)
    tar.addfile(info, io.BytesIO(data))


def test_undecodable_samples_are_counted_with_their_location_never_yielded(tmp_path):
    shard = tmp_path / "shards" / "s-000.tar"
    shard.parent.mkdir()
    with tarfile.open(shard, "w") as tar:
        _add(tar, "a.jpg", _jpeg())
        _add(tar, "a.txt", b"a red square")
        _add(tar, "b.txt", b"no image at all")
        _add(tar, "c.jpg", _jpeg())
        _add(tar, "c.txt", b"another red square")
    told: list[BadRawRow] = []
    rows = editstream.iter_rows(str(shard.parent), on_bad=told.append)
    got = list(rows)
    assert [r.row["__key__"] for r in got] == ["a", "c"]
    assert [r.position for r in got] == [(0,), (2,)]
    assert rows.bad_count == 1 and rows.drops.as_dict() == {"bad_sample": 1}
    assert told == rows.bad and told[0].position == (1,) and told[0].where["key"] == "b"
    assert told[0].where["shard"] == str(shard)


@pytest.mark.s3
def test_an_s3_converted_root_reads_like_the_local_one(edit_data, s3_bucket):
    so = s3_bucket.storage_options
    src = f"{s3_bucket.url}/pq"
    write_synthetic_dataset(
        src, num_files=2, row_groups_per_file=2, rows_per_group=4, seed=5, corrupt_fraction=0.25, max_side=48,
        storage_options=so,
    )  # fmt: skip
    editstream.convert(src, f"{s3_bucket.url}/wds", workers=1, progress=False, storage_options=so)
    remote = list(editstream.iter_rows(f"{s3_bucket.url}/wds", storage_options=so))
    remote_pq = list(editstream.iter_rows(src, storage_options=so))
    local = list(editstream.iter_rows(str(edit_data / "pq")))
    assert keyed(remote) == keyed(remote_pq)
    assert [(r.position, dict(r.row)) for r in remote] == [(r.position, dict(r.row)) for r in local]
