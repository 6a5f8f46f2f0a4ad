"""The pure parts of ``benchmarks/peers.py``: pair-ratio medians, goals and the table (no timing, no venvs)."""

from __future__ import annotations

import math
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))

import peers_report
import peers_tools


def test_the_pair_ratio_median_is_the_median_of_each_pairs_ratio():
    assert peers_report.pair_ratio_median([(10.0, 5.0), (9.0, 1.0), (3.0, 3.0)]) == 2.0
    # not the ratio of medians: 6 / 2 would be 3
    assert peers_report.pair_ratio_median([(2.0, 1.0), (6.0, 2.0), (100.0, 2.0)]) == 3.0
    assert peers_report.pair_ratio_median([(4.0, 2.0), (6.0, 2.0)]) == 2.5
    with pytest.raises(ValueError):
        peers_report.pair_ratio_median([])


@dataclass(frozen=True)
class FakePeer:
    name: str
    label: str
    prepare: str | None


@dataclass
class FakeResult:
    peer: FakePeer
    error: str | None = None
    prepare: list[tuple[float, float]] = field(default_factory=list)
    rates: dict[str, list[tuple[float, float]]] = field(default_factory=dict)


@dataclass
class FakeData:
    rows: int = 64
    images: int = 200
    source_bytes: int = 4_000_000
    image_bytes: int = 2_048_000


def _report() -> tuple[list[str], dict[str, Any]]:
    wds = FakeResult(
        FakePeer("webdataset", "stock webdataset", None),
        rates={"raw/0": [(1000.0, 400.0)], "decoded/0": [(100.0, 99.0)], "decoded/2": [(180.0, 170.0)]},
    )
    slow = FakeResult(
        FakePeer("mosaic", "MosaicML", "`MDSWriter`"), prepare=[(4.0, 1.0)], rates={"raw/0": [(1000.0, 100.0)]}
    )
    broken = FakeResult(FakePeer("energon", "Energon", "`energon prepare`"), error="install failed: no | wheel")
    own = {
        "limit": {0: [(100.0, 102.0)], 2: [(180.0, 200.0), (170.0, 100.0), (100.0, 200.0)]},
        "dataset": {0: [(50.0, 100.0)], 2: [(90.0, math.nan)]},
    }
    return peers_report.report(FakeData(), [wds, slow, broken], own, 1, (1.0, 0.5, 0.25), 0.1)


def test_goals_name_the_fastest_peer_each_preparation_and_the_decode_share():
    _, summary = _report()
    goals = {g["goal"]: g for g in summary["goals"]}
    raw = goals["raw rows >= 2x the fastest peer (webdataset)"]
    assert raw["ratio"] == 2.5 and raw["holds"]
    prep = goals["preparation >= 3x faster than mosaic's"]
    assert prep["ratio"] == 4.0 and prep["holds"]
    one = goals["decoded samples within 5 % of the decode limit, 1 process"]
    assert one["ratio"] == pytest.approx(100 / 102) and one["holds"]
    two = goals["decoded samples within 5 % of the decode limit, 2 DataLoader workers"]
    assert two["ratio"] == pytest.approx(0.9) and not two["holds"]  # the median pair, not the median rates' ratio
    assert summary["editstream"]["raw/0"] == 1000.0 and summary["peers"]["energon"]["error"].startswith("install")


def test_a_failed_peer_is_a_row_with_its_error_and_the_table_stays_a_table():
    lines, _ = _report()
    row = next(line for line in lines if line.startswith("| Energon"))
    assert "**failed**: install failed: no / wheel" in row
    table = [line for line in lines if line.startswith("|")]
    assert all(line.count("|") == table[0].count("|") for line in table[:7])
    assert table[6].startswith("| decode limit") and table[6].endswith("| - | - | 102.0 | 200.0 |")


def test_the_shared_decode_reads_every_image_member_and_mds_columns_fit_the_schema():
    pa = pytest.importorskip("pyarrow")
    sample = {"__key__": "k", "image_list.1.png": b"b", "image_list.0.jpg": b"a", "json": b"{}", "meta.bin": b"x"}
    assert peers_tools.member_images(sample) == [b"a", b"b"]
    schema = pa.schema(
        [
            ("image_list", pa.list_(pa.binary())),
            ("tags", pa.list_(pa.string())),
            ("score", pa.float64()),
            ("blob", pa.binary()),
        ]
    )
    assert peers_tools.mds_columns(schema) == {"image_list": "pkl", "tags": "json", "score": "float64", "blob": "bytes"}
    assert peers_tools.mds_row({"blob": None, "tags": None}, {"blob": "bytes", "tags": "json"}) == {
        "blob": b"",
        "tags": None,
    }


def test_the_speed_goals_table_judges_each_figure_and_names_what_did_not_run():
    import speed_goals

    convert = {
        "median_seconds": {"editstream convert, 2 workers": 3.0, "tar -cf": 1.0},
        "vs_tar": {"editstream convert, 2 workers": 3.0},
    }
    s3 = {"ratios": {"read-ahead|0.0": 1.0, "read-ahead|0.02": 0.95, "read-ahead|0.05": 0.5}}
    rows = speed_goals.goal_rows({"convert": convert, "s3_latency": s3, "raw_rows": {"cpu_ratios": {}}})
    by_work = {row[0] if isinstance(row, tuple) else row: row for row in rows}
    assert by_work["convert, 2 workers (time)"][3:] == (3.0, "<= 1.2x", False)
    assert by_work["raw rows from S3, 20 ms added per request, under load"][3:] == (0.95, ">= 0.9x", True)
    assert {"raw rows, webdataset backend, against LitData", "raw rows of ~256 KB against LitData"} <= set(by_work)
    assert any("missing from raw_rows" in row for row in rows if isinstance(row, str))
    table = speed_goals.goals_table({"convert": convert})
    assert "| convert, 2 workers (time) | 3.00 s | `tar -cf`: 1.00 s | 3.00x | <= 1.2x | **no** |" in table
    assert sum("not measured in this run" in line for line in table) == 9
    loader = {"rows": [{"row": "webdataset, local disk", "workers": 0, "samples_per_s": 50.0, "share_of_limit": 0.98}]}
    memory = {"sizes_mb": [100, 400], "vmhwm_mb": {speed_goals.MEMORY_COMMAND: [400.0, 880.0]}}
    rows = speed_goals.goal_rows({"loader": loader, "hqedit_memory": memory})
    judged = {row[0]: row[3:] for row in rows if isinstance(row, tuple)}
    assert judged["decoded samples, 1 process (webdataset backend, local)"] == (0.98, ">= 0.97", True)
    memory_row = next(work for work in judged if work.startswith("peak RSS"))
    assert judged[memory_row] == (2.2, "flat in the row group (<= 1.1x)", False)
