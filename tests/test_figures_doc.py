"""docs/figures.md shows what ``make demo`` prints: a fresh run of examples/demo.py prints the same lines,
timings aside (every count, shape and verdict equal), so the page cannot drift from the demo."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

from helpers import SRC_DIR

REPO = Path(__file__).resolve().parent.parent
SECTION = "## What `make demo` printed"


def without_timings(text: str) -> list[str]:
    """The lines of the demo's output with its seconds and rates taken out and the spacing collapsed."""
    lines = []
    for line in text.strip().splitlines():
        line = re.sub(r" in [\d.]+s;", " in Ts;", line)
        if line.startswith(("source data", "shards from")):
            line = line.rsplit(None, 2)[0]  # the seconds and samples/s columns
        lines.append(" ".join(line.split()))
    return lines


def documented() -> str:
    page = (REPO / "docs" / "figures.md").read_text(encoding="utf-8")
    return page[page.index(SECTION) :].split("```\n", 2)[1]


def test_the_figures_page_shows_what_the_demo_prints(tmp_path):
    done = subprocess.run(
        [sys.executable, "examples/demo.py", "--out", str(tmp_path / "demo-out")],
        cwd=REPO,
        env={**os.environ, "PYTHONPATH": str(SRC_DIR)},
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert without_timings(done.stdout) == without_timings(documented())
    assert " 1 shard," in done.stdout and "1 shards" not in done.stdout
