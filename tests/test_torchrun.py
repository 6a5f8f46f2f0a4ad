"""torchrun --nproc_per_node=2 (gloo, CPU) on examples/train_loop.py: ranks split the units.

Each rank's units are disjoint from the other's, their union is every unit except the
documented tails (rank tail, then worker tail), and each rank's batch stream equals what a
single process computes for that rank.
"""

from __future__ import annotations

import json
import os
import random
import socket
import subprocess
import sys
from pathlib import Path

import fsspec
import pytest

from editstream import UnifiedEditIterableDataset
from helpers import ROOT, TRAIN_LOOP, load_example, synth_and_convert

pytestmark = [pytest.mark.torchrun, pytest.mark.slow]

STEPS = 14


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    # 3 files x 3 row groups = 9 units: 4 per rank (1 rank tail), 2 per worker with 2 workers
    return synth_and_convert(
        tmp_path_factory.mktemp("torchrun"), num_files=3, row_groups_per_file=3, rows_per_group=3, seed=8, max_side=96
    )


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run_torchrun(args: list[str], out: Path, env_extra: dict | None = None) -> str:
    cmd = [
        sys.executable,
        "-m",
        "torch.distributed.run",
        "--nproc_per_node=2",
        "--master_addr=127.0.0.1",
        f"--master_port={free_port()}",
        str(TRAIN_LOOP),
        *args,
        "--steps",
        str(STEPS),
        "--out",
        str(out),
    ]
    env = {**os.environ, "OMP_NUM_THREADS": "1", **(env_extra or {})}
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=600, env=env, cwd=ROOT)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-5000:]
    return proc.stdout


def expected_units(data_dir: str, backend: str, storage_options=None):
    """Per rank, the units its two workers read, computed in one process without torchrun."""
    per_rank = {}
    for rank in range(2):
        ds = UnifiedEditIterableDataset(
            "unified_edit",
            None,
            None,
            None,
            [data_dir],
            [3],
            None,
            local_rank=rank,
            world_size=2,
            num_workers=2,
            backend=backend,
            storage_options=storage_options,
        )
        ds.set_epoch(42)
        per_rank[rank] = {(Path(p).name, rg) for w in range(2) for p, rg in ds.worker_units(w, 2)}
    return per_rank


@pytest.mark.parametrize("backend,sub", [("parquet", "pq"), ("webdataset", "wds")])
def test_torchrun_two_ranks_split_units_and_match_single_process(data, tmp_path, backend, sub):
    data_dir = str(data / sub)
    stdout = run_torchrun(["--data", data_dir, "--backend", backend, "--workers", "2"], tmp_path)
    assert "rank  batches" in stdout
    ranks = {r: json.loads((tmp_path / f"rank{r}.json").read_text()) for r in range(2)}
    seen = {r: {tuple(s["unit"]) for rec in ranks[r]["records"] for s in rec["samples"]} for r in range(2)}
    want = expected_units(data_dir, backend)

    assert not seen[0] & seen[1], "ranks read the same unit"
    assert seen == want  # every unit of every worker was reached within STEPS batches
    all_units = {(f"part-{f:05d}.parquet", rg) for f in range(3) for rg in range(3)}
    dropped = all_units - seen[0] - seen[1]
    assert len(dropped) == 9 - 2 * 4  # the rank tail: 9 units over 2 ranks leaves 1

    train_loop = load_example()
    for rank in range(2):
        args = train_loop.parse_args(["--data", data_dir, "--backend", backend, "--workers", "2"])
        random.seed(123)  # the packer reseeds per rank/worker, so the caller's RNG state must not matter
        loader = train_loop.make_loader(args, rank=rank, world_size=2)
        single = train_loop.consume(loader, STEPS, args.expected_tokens + 1024)
        assert single == ranks[rank]["records"]


def test_torchrun_streams_from_s3(data, tmp_path, s3_bucket):
    fs = fsspec.filesystem("s3", **s3_bucket.storage_options)
    fs.put(str(data / "wds") + "/", f"{s3_bucket.name}/wds/", recursive=True)
    env = {"AWS_ENDPOINT_URL": s3_bucket.endpoint}  # the standard variable is enough, no flag needed
    run_torchrun(["--data", f"{s3_bucket.url}/wds", "--backend", "webdataset", "--workers", "2"], tmp_path, env)
    local = tmp_path / "local"
    run_torchrun(["--data", str(data / "pq"), "--backend", "parquet", "--workers", "2"], local)
    for rank in range(2):
        remote_records = json.loads((tmp_path / f"rank{rank}.json").read_text())["records"]
        local_records = json.loads((local / f"rank{rank}.json").read_text())["records"]
        assert remote_records == local_records
