"""examples/elastic_resume.py end to end: torchrun 2 ranks x 2 workers stop mid-epoch, torchrun 3 ranks x 1
worker finish it from the merged state; EpochSteps keeps the ranks in step when their batches run out unevenly.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from helpers import ROOT

pytestmark = [pytest.mark.torchrun, pytest.mark.slow]


@pytest.mark.parametrize(
    ("backend", "streams", "finish_ranks", "uneven"),
    [("parquet", 6, 3, False), ("webdataset", 6, 3, False), ("webdataset", 3, 2, True)],
)
def test_a_two_rank_job_stopped_mid_epoch_finishes_on_other_ranks(tmp_path, backend, streams, finish_ranks, uneven):
    """3 streams on 2 ranks (``uneven``): rank 0 runs streams 0 and 2, rank 1 only stream 1, and with
    this data their epochs end a step apart, so one rank takes an idle step while the other trains."""
    out = tmp_path / "elastic"
    args = ["--out", str(out), "--backend", backend, "--streams", str(streams), "--finish-ranks", str(finish_ranks)]
    proc = subprocess.run(
        [sys.executable, str(ROOT / "examples" / "elastic_resume.py"), *args],
        capture_output=True,
        text=True,
        timeout=900,
        cwd=ROOT,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-5000:]
    summary = json.loads((out / "summary.json").read_text())
    assert summary["exact"] and summary["rows"] == summary["distinct"] > 0
    jobs: dict[str, list[dict]] = {}
    for name, result in summary["results"].items():
        jobs.setdefault(name.split("-")[0], []).append(result)
    assert sorted(r["rank"] for r in jobs["first"]) == [0, 1]
    assert sorted(r["rank"] for r in jobs["finish"]) == list(range(finish_ranks))
    assert all(r["steps"] == 2 for r in jobs["first"])
    finish_steps = {r["steps"] for r in jobs["finish"]}
    assert len(finish_steps) == 1  # every rank took the same number of steps: nobody waited on a peer
    if uneven:
        assert sum(r["idle_steps"] for r in jobs["finish"]) > 0
    assert all(len(r["batches"]) + r["idle_steps"] == r["steps"] for r in jobs["finish"])
