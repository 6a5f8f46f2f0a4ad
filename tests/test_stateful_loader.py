"""StatefulDataLoader (2 workers) around PackedDataset: save after N batches, restore in a fresh
process, and the following batches equal an uninterrupted run's, on either backend and across."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest
import torch

from helpers import ROOT, TRAIN_LOOP, assert_batches_equal, load_example, synth_and_convert
from helpers import first as take

AFTER = 5

RESTORE_SCRIPT = textwrap.dedent("""
    import importlib.util, sys, torch
    spec = importlib.util.spec_from_file_location("train_loop", sys.argv[1])
    tl = importlib.util.module_from_spec(spec); spec.loader.exec_module(tl)
    args = tl.parse_args(["--data", sys.argv[2], "--backend", sys.argv[3], "--workers", "2"])
    loader = tl.make_loader(args, rank=0, world_size=1)
    loader.load_state_dict(torch.load(sys.argv[4], weights_only=False))
    out = []
    for batch in loader:
        out.append(batch)
        if len(out) == int(sys.argv[5]):
            break
    torch.save(out, sys.argv[6])
""")


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    return synth_and_convert(
        tmp_path_factory.mktemp("stateful"),
        num_files=2,
        row_groups_per_file=2,
        rows_per_group=5,
        seed=21,
        corrupt_fraction=0.1,
        max_side=96,
    )


@pytest.mark.parametrize(
    "first,second", [("parquet", "parquet"), ("webdataset", "webdataset"), ("parquet", "webdataset")]
)
@pytest.mark.parametrize("n", [3, 8])
def test_restore_in_fresh_process_continues_exactly(data, tmp_path, first, second, n):
    tl = load_example()
    sub = {"parquet": "pq", "webdataset": "wds"}

    def loader_for(backend):
        args = tl.parse_args(["--data", str(data / sub[backend]), "--backend", backend, "--workers", "2"])
        return tl.make_loader(args, rank=0, world_size=1)

    reference = take(loader_for(first), n + AFTER)
    interrupted = loader_for(first)
    head = take(interrupted, n)
    assert_batches_equal(reference[:n], head)
    state_file = tmp_path / "state.pt"
    torch.save(interrupted.state_dict(), state_file)
    del interrupted

    out_file = tmp_path / "after.pt"
    script = tmp_path / "restore.py"
    script.write_text(RESTORE_SCRIPT)
    proc = subprocess.run(
        [
            sys.executable,
            str(script),
            str(TRAIN_LOOP),
            str(data / sub[second]),
            second,
            str(state_file),
            str(AFTER),
            str(out_file),
        ],
        capture_output=True,
        text=True,
        timeout=600,
        cwd=ROOT,
    )
    assert proc.returncode == 0, proc.stderr[-4000:]
    assert_batches_equal(reference[n : n + AFTER], torch.load(out_file, weights_only=False))
