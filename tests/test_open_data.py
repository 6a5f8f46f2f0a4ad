"""One open-data layer: a layout planted once (``register_layout``) is read by every reader of data.

The planted layout is a directory holding ``rows.arrow``, an Arrow IPC file whose record batches
are the row groups of a synthetic edit dataset. Once registered, ``iter_rows``, the training
datasets (and so the recipe groups), ``stream`` and ``preview`` read it, and what they read is
what they read from the parquet files it was made of. Every built-in layout and kind (the JSONL
one included) opens, streams, previews and yields raw rows through the same layer.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import editstream
from editstream import ByteTokenizer, ImageTransform, UnifiedEditIterableDataset
from editstream.data.layouts import LayoutError, unregister_layout
from editstream.data.open import open_data
from editstream.sandbox.synth import write_synthetic_dataset
from editstream.sandbox.synth_vlm import write_synthetic_vlm_dataset
from helpers import SRC_DIR, VAE, VIT, assert_batches_equal, first, run_cli

PLANTED = '''
"""A layout of its own: a directory with rows.arrow (record batches = units)."""
from dataclasses import dataclass
from typing import ClassVar

import pyarrow as pa

from editstream.data.layouts import Layout, kind_of_columns, register_layout
from editstream.data.rows import Row
from editstream.data.units import RowGroupUnit, as_unit
from editstream.format import detect as d


class ArrowRows:
    def __init__(self, request):
        self.request = request

    def list_units(self, entries, counts):
        units = []
        for entry in entries:
            path = entry.rstrip("/") + "/rows.arrow"
            batches = pa.ipc.open_file(pa.memory_map(path)).num_record_batches
            units.extend(RowGroupUnit(path, i) for i in range(batches))
        return units

    def iter_unit_rows(self, unit, after):
        unit = as_unit(unit)
        batch = pa.ipc.open_file(pa.memory_map(unit.path)).get_batch(unit.row_group)
        for index, row in enumerate(batch.to_pylist()):
            if after is None or index > after[0]:
                yield (index,), Row(row)

    def describe(self, unit, position=None):
        return as_unit(unit).where(position)

    def plan_units(self, units):
        pass


@dataclass(frozen=True)
class ArrowTable(Layout):
    title: ClassVar[str] = "an Arrow table"
    holds: ClassVar[str] = "an Arrow IPC table (rows.arrow)"

    def detect_kind(self):
        schema = pa.ipc.open_file(pa.memory_map(self.url.rstrip("/") + "/rows.arrow")).schema
        return kind_of_columns(self.url, schema.names)

    def count(self):
        return 1

    def source(self, entries, request):
        return ArrowRows(request)


@register_layout
def recognise_arrow(found, storage_options):
    if found.kind == d.OTHER_DIR and "rows.arrow" in found.names:
        return ArrowTable(found.url, storage_options)
    return None
'''


@pytest.fixture(scope="module")
def planted(tmp_path_factory):
    """``pq/`` (synthetic edit parquet, 3 row groups) and ``arrow/rows.arrow`` (the same rows, a batch
    per row group), and the module planting the layout, importable from ``plugin/``."""
    root = tmp_path_factory.mktemp("planted")
    write_synthetic_dataset(str(root / "pq"), num_files=1, row_groups_per_file=3, rows_per_group=4, seed=11)
    (parquet,) = sorted((root / "pq").glob("*.parquet"))
    pf = pq.ParquetFile(parquet)
    (root / "arrow").mkdir()
    with pa.OSFile(str(root / "arrow" / "rows.arrow"), "wb") as sink, pa.ipc.new_file(sink, pf.schema_arrow) as out:
        for rg in range(pf.metadata.num_row_groups):
            out.write_table(pf.read_row_group(rg))
    (root / "plugin").mkdir()
    (root / "plugin" / "planted_layout.py").write_text(textwrap.dedent(PLANTED))
    sys.path.insert(0, str(root / "plugin"))
    import planted_layout

    yield root
    unregister_layout(planted_layout.recognise_arrow)
    sys.path.remove(str(root / "plugin"))
    sys.modules.pop("planted_layout", None)


def _cli(root: Path, *args: str) -> subprocess.CompletedProcess:
    """The CLI in a process that imported the planted layout first."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(root / "plugin"), str(SRC_DIR)])}
    code = "import sys, runpy, planted_layout; runpy.run_module('editstream.cli', run_name='__main__')"
    return subprocess.run(
        [sys.executable, "-c", code, *args], env=env, cwd=root, capture_output=True, text=True, timeout=300
    )


def _edit(data_dir: Path) -> UnifiedEditIterableDataset:
    return UnifiedEditIterableDataset(
        dataset_name="e",
        transform=ImageTransform(**VAE),
        tokenizer=ByteTokenizer(),
        vit_transform=ImageTransform(**VIT),
        data_dir_list=[str(data_dir)],
        num_used_data=[1],
        local_rank=0,
        world_size=1,
        num_workers=0,
    )


def test_a_planted_layout_opens_with_its_kind_detected(planted):
    handle = open_data(str(planted / "arrow"))
    assert (type(handle.layout).__name__, handle.kind.name, handle.backend) == ("ArrowTable", "unified_edit", "parquet")
    with pytest.raises(LayoutError, match="holds an Arrow IPC table"):
        open_data(str(planted / "arrow"), backend="webdataset")


def test_iter_rows_reads_the_planted_layout_as_the_parquet_it_was_made_of(planted):
    arrow = [(r.position, dict(r.row)) for r in editstream.iter_rows(str(planted / "arrow"))]
    parquet = [(r.position, dict(r.row)) for r in editstream.iter_rows(str(planted / "pq"))]
    assert len(arrow) == 12 and arrow == parquet


def test_the_training_dataset_reads_the_planted_layout_bit_for_bit(planted):
    import random

    streams = []
    for name in ("arrow", "pq"):
        ds = _edit(planted / name)
        ds.set_epoch(42)
        random.seed(3)
        streams.append(first(iter(ds), 10))
    for sample in streams[0] + streams[1]:
        sample["data_indexes"].pop("dataset_name")
    assert_batches_equal(streams[1], streams[0])


def test_stream_and_preview_read_the_planted_layout(planted):
    streamed = _cli(planted, "-q", "stream", "arrow", "--samples", "6")
    assert streamed.returncode == 0, streamed.stderr
    summary = json.loads(streamed.stdout)
    assert (summary["schema"], summary["backend"], summary["samples"]) == ("unified_edit", "parquet", 6)
    shown = _cli(planted, "preview", "arrow", "-o", "arrow.html", "-n", "3")
    assert shown.returncode == 0, shown.stderr
    assert (planted / "arrow.html").read_text().count("rows.arrow") >= 3
    wrong = _cli(planted, "stream", "arrow", "--backend", "webdataset")
    assert wrong.returncode == 2 and "use --backend parquet" in wrong.stderr


def test_the_jsonl_kind_streams_previews_and_yields_raw_rows(tmp_path):
    vlm = write_synthetic_vlm_dataset(str(tmp_path / "vlm"), num_lines=8, video=False)
    rows = editstream.iter_rows(vlm["jsonl"], media_dir=vlm["media_dir"])
    found = list(rows)
    assert rows.kind.name == "vlm_sft" and len(found) == 8
    lines = Path(vlm["jsonl"]).read_text(encoding="utf-8").splitlines(keepends=True)
    assert [r.row.line for r in found] == lines
    assert found[0].where == {"file": vlm["jsonl"], "line": 1}
    streamed = run_cli("-q", "stream", vlm["jsonl"], "--media-dir", vlm["media_dir"], "--samples", "5")
    assert streamed.returncode == 0, streamed.stderr
    assert json.loads(streamed.stdout)["schema"] == "vlm_sft"
    converted = run_cli("convert", vlm["jsonl"], str(tmp_path / "wds"), "--media-dir", vlm["media_dir"], "-q")
    assert converted.returncode == 0, converted.stderr
    shards = list(editstream.iter_rows(str(tmp_path / "wds")))
    assert [r.row.line for r in shards] == lines  # the converted root yields the same lines
    out = tmp_path / "vlm.html"
    shown = run_cli("preview", str(tmp_path / "wds"), "-o", str(out), "-n", "4")
    assert shown.returncode == 0, shown.stderr
    assert "human: " in out.read_text()
