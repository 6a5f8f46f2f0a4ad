"""torchdata's StatefulDataLoader around PackedDataset, with 0 and 2 DataLoader workers.

Every loader meets check_state_contract (toy datasets, and the real datasets on both backends
and from one to the other). Then the real thing: the example training loop's loader is saved
after N batches, restored in a fresh Python process, and the following batches equal an
uninterrupted run's, on either backend and across.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest
import torch

from editstream import collate_fn
from helpers import (
    ROOT,
    TRAIN_LOOP,
    assert_batches_equal,
    check_state_contract,
    load_example,
    make_mixed,
    make_real_packer,
    synth_and_convert,
    synth_pipeline_data,
    torch_roundtrip,
)
from helpers import first as take

stateful = pytest.importorskip("torchdata.stateful_dataloader")

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


def stateful_loader(packer, snapshot_every_n_steps=1):
    return stateful.StatefulDataLoader(
        packer,
        batch_size=1,
        num_workers=packer.num_workers,
        collate_fn=collate_fn,
        snapshot_every_n_steps=snapshot_every_n_steps,
    )


def check_loader(make, n_before, n_after, **kwargs):
    return check_state_contract(make, n_before, n_after, roundtrips=(torch_roundtrip,), **kwargs)


@pytest.mark.parametrize("snapshot_every", [1, 3])
@pytest.mark.parametrize("workers", [0, 2])
def test_toy_loader_state_contract(workers, snapshot_every):
    """With snapshots every 3 steps, a state taken between them is exact too (torchdata replays)."""

    def make():
        return stateful_loader(make_mixed(num_workers=workers), snapshot_every)

    check_loader(make, 4, 4)
    if workers:  # batches alternate between the workers, so both resumed inside their process
        assert [{d["worker_id"] for d in batch["batch_data_indexes"]} for batch in take(make(), 8)] == [{0}, {1}] * 4


@pytest.fixture(scope="module")
def pipeline_data(tmp_path_factory):
    return synth_pipeline_data(tmp_path_factory.mktemp("stateful-pipeline"))


@pytest.mark.parametrize(
    ("saved_on", "restored_on"), [("parquet", "parquet"), ("webdataset", "webdataset"), ("parquet", "webdataset")]
)
@pytest.mark.parametrize("workers", [0, 2])
def test_real_loader_state_contract(pipeline_data, workers, saved_on, restored_on):
    def loader_on(backend):
        return lambda: stateful_loader(make_real_packer(pipeline_data, backend, num_workers=workers))

    check_loader(loader_on(saved_on), 3, 4, make_restored=loader_on(restored_on))


@pytest.mark.slow
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
