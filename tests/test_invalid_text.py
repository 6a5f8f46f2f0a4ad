"""Text that is not UTF-8 makes one bad row: the converter reports it (file, row group, row, column) and
converts the rest; both loader backends drop that row alone, at the same point, so the streams stay equal."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import editstream
from editstream import ByteTokenizer, ImageTransform, UnifiedEditIterableDataset
from editstream.conversion import convert
from editstream.conversion.verify import verify
from editstream.io.parquet import batch_rows
from editstream.io.text import InvalidText, UndecodableRow
from editstream.sandbox.synth import write_synthetic_dataset
from helpers import VAE, VIT, assert_batches_equal, first

BAD_ROW = 2
BAD_BYTES = b"bad \xff\xfe text"


def _with_invalid_instruction(table: pa.Table, row: int) -> pa.Table:
    """``table`` with one phrasing of ``row`` replaced by bytes that are not UTF-8 (written unchecked)."""
    index = table.schema.get_field_index("instruction_list")
    values = [[[p.encode() for p in phrasings] for phrasings in r] for r in table.column(index).to_pylist()]
    values[row][0][0] = BAD_BYTES
    as_bytes = pa.array(values, type=pa.list_(pa.list_(pa.binary())))
    return table.set_column(index, "instruction_list", as_bytes.view(pa.list_(pa.list_(pa.string()))))


@pytest.fixture(scope="module")
def data(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("utf8")
    write_synthetic_dataset(str(root / "pq"), num_files=1, row_groups_per_file=2, rows_per_group=5, seed=4)
    (path,) = sorted((root / "pq").glob("*.parquet"))
    pf = pq.ParquetFile(path)
    groups = [pf.read_row_group(0), _with_invalid_instruction(pf.read_row_group(1), BAD_ROW)]
    with pq.ParquetWriter(path, pf.schema_arrow) as writer:
        for group in groups:
            writer.write_table(group)
    convert(str(root / "pq"), str(root / "wds"), workers=1, progress=False)
    return root


def test_a_batch_with_one_bad_string_keeps_its_other_rows():
    table = pa.table({"text": ["a", "b", "c"], "n": [1, 2, 3]})
    bad = pa.array([b"a", b"\xff", b"c"]).view(pa.string())
    rows = batch_rows(table.set_column(0, "text", bad))
    assert rows[0] == {"text": "a", "n": 1} and rows[2] == {"text": "c", "n": 3}
    assert isinstance(rows[1], UndecodableRow) and rows[1].columns == ["text"]
    assert rows[1]["text"] == InvalidText(b"\xff") and "byte 0" in rows[1].problem()
    assert batch_rows(table.set_column(0, "text", bad), binary_views=True)[1].columns == ["text"]


def test_the_converter_reports_the_row_and_converts_the_rest(data):
    report = json.loads((data / "wds" / "report.json").read_text())
    (bad,) = report["bad_rows"]
    assert (bad["row_group"], bad["row"], bad["fails"]) == (1, BAD_ROW, "always")
    assert "instruction_list" in bad["reason"] and "not valid UTF-8" in bad["reason"]
    manifest = json.loads((data / "wds" / "manifest.json").read_text())
    assert sum(s["num_samples"] for s in manifest["shards"]) == 10  # kept, for the loader to drop
    assert verify(str(data / "wds"), source=str(data / "pq")).ok


@pytest.mark.parametrize("backend", ["pq", "wds"])
def test_the_raw_reader_skips_that_row_alone_naming_where(data, backend):
    rows = editstream.iter_rows(str(data / backend))
    good = list(rows)
    assert len(good) == 9 and rows.bad_count == 1
    (bad,) = rows.bad
    assert (bad.where["row_group"], bad.where["row"]) == (1, BAD_ROW)
    assert "not valid UTF-8" in str(bad.error)


def _edit(root: Path, backend: str) -> UnifiedEditIterableDataset:
    return UnifiedEditIterableDataset(
        dataset_name="e",
        transform=ImageTransform(**VAE),
        tokenizer=ByteTokenizer(),
        vit_transform=ImageTransform(**VIT),
        data_dir_list=[str(root)],
        num_used_data=[1],
        num_workers=0,
        local_rank=0,
        world_size=1,
        backend=backend,
    )


def test_both_backends_drop_the_row_at_the_same_point(data):
    streams = []
    for backend, folder in (("parquet", "pq"), ("webdataset", "wds")):
        ds = _edit(data / folder, backend)
        ds.set_epoch(42)
        random.seed(5)
        streams.append(first(iter(ds), 18))
        assert ds.drop_counts.get("bad_sample") >= 1
    assert_batches_equal(streams[0], streams[1])
    positions = [s["data_indexes"]["data_indexes"] for s in streams[0]]
    assert len({tuple(p) for p in positions}) == 9  # every good row once in a pass, the bad one never
