"""Adapters in parallel: output files as tasks in this process, on a process pool and on Ray give the
same bytes (the parquet, ``parquet_info.json`` and ``adapt_report.json`` but for its timing), and a
parallel run resumes as a sequential one does."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from editstream.adapters import adapt
from helpers import run_cli
from hub_shapes import hqedit, magicbrush


def outputs(root: Path) -> dict[str, object]:
    """Every file adapt wrote (the paths they name with DST for the root), the report without its seconds."""
    found: dict[str, object] = {p.name: p.read_bytes() for p in sorted(root.glob("*.parquet"))}
    found["parquet_info.json"] = (root / "parquet_info.json").read_text().replace(str(root), "DST")
    report = json.loads((root / "adapt_report.json").read_text().replace(str(root), "DST"))
    report.pop("seconds")
    found["adapt_report.json"] = report
    return found


@pytest.fixture(scope="module")
def sources(tmp_path_factory):
    root = tmp_path_factory.mktemp("hub")
    return {"magicbrush": magicbrush(root / "mb", n_sessions=12)[0], "hqedit": hqedit(root / "hq", n=9)[0]}


LAYOUT = {"magicbrush": {"rows_per_group": 2, "chains_per_file": 4}, "hqedit": {"rows_per_group": 2}}


@pytest.mark.parametrize("name", ["magicbrush", "hqedit"])
def test_two_worker_processes_write_the_bytes_of_one(tmp_path, sources, name):
    one = adapt(str(sources[name]), str(tmp_path / "one"), name, progress=False, **LAYOUT[name])
    two = adapt(str(sources[name]), str(tmp_path / "two"), name, progress=False, workers=2, **LAYOUT[name])
    assert one["files_out"] >= 2 and two["resumed_files"] == 0
    assert outputs(tmp_path / "one") == outputs(tmp_path / "two")


def test_a_parallel_run_resumes_to_the_same_bytes(tmp_path, sources):
    src, out = str(sources["magicbrush"]), tmp_path / "out"
    adapt(src, str(out), "magicbrush", progress=False, workers=2, **LAYOUT["magicbrush"])
    before = outputs(out)
    files = sorted(out.glob("*.parquet"))
    files[0].unlink()
    files[-1].write_bytes(files[-1].read_bytes()[:50])
    again = adapt(src, str(out), "magicbrush", progress=False, workers=2, **LAYOUT["magicbrush"])
    assert again["resumed_files"] == len(files) - 2
    after = outputs(out)
    assert after.pop("adapt_report.json")["resumed_files"] == len(files) - 2  # type: ignore[index]
    before.pop("adapt_report.json")
    assert after == before


def test_convert_to_parquet_takes_workers(tmp_path, sources):
    result = run_cli(
        "-q", "convert", str(sources["hqedit"]), str(tmp_path / "cli"), "--from", "hqedit", "--to", "parquet",
        "--workers", "2",
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    adapt(str(sources["hqedit"]), str(tmp_path / "api"), "hqedit", progress=False)
    assert outputs(tmp_path / "cli") == outputs(tmp_path / "api")


@pytest.mark.ray
def test_ray_tasks_write_the_bytes_of_one_process(tmp_path, sources):
    ray = pytest.importorskip("ray")
    ray.init(num_cpus=2, include_dashboard=False)
    try:
        for name in ("magicbrush", "hqedit"):
            adapt(str(sources[name]), str(tmp_path / f"{name}-one"), name, progress=False, **LAYOUT[name])
            adapt(str(sources[name]), str(tmp_path / f"{name}-ray"), name, progress=False, engine="ray", **LAYOUT[name])
            assert outputs(tmp_path / f"{name}-one") == outputs(tmp_path / f"{name}-ray")
    finally:
        ray.shutdown()
