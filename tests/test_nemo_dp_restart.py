"""A restart at a new data-parallel size through NeMo Automodel 0.7.0's own Checkpointer: each DP rank's
loader state saved as NeMo saves it (``<ckpt>/dataloader/dataloader_dp_rank_<r>.pt``), then loaded by
editstream's DP-aware Checkpointer (what editstream's recipes use) at 1, 2 and 3 DP ranks. Ranks are
separate loaders in this process (the data of tests/test_elastic.py); files are real, loads restricted
(``weights_only=True``) as NeMo's are."""

from __future__ import annotations

import collections
from pathlib import Path

import pytest

from helpers import SMALL_PACKING, build_dataloader, nemo_checkpointer, pipeline_groups, synth_pipeline_data

pytestmark = pytest.mark.nemo_env
pytest.importorskip("nemo_automodel.components.checkpoint.checkpointing")


from editstream import BagelDatasetConfig  # noqa: E402
from editstream.nemo.dp_checkpoint import DPAwareCheckpointer, saved_dp_ranks  # noqa: E402
from editstream.packing.checkpoint.streams import StateError  # noqa: E402

STEPS = 2


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    return synth_pipeline_data(tmp_path_factory.mktemp("nemo-dp"))


def loader(root, rank, world_size, workers=0, elastic=True):
    groups, info = pipeline_groups(root, "parquet")
    settings = {**SMALL_PACKING, "elastic": elastic, "elastic_streams": 4 if elastic else None}
    return build_dataloader(
        BagelDatasetConfig(grouped_datasets=groups, dataset_info=info, **settings), rank, world_size, workers
    )


def rows_of(batch):
    return tuple((d["dataset_name"], tuple(d["data_indexes"])) for d in batch.batch_data_indexes)


def checkpointer(directory: Path, dp_rank: int, aware: bool = True):
    return nemo_checkpointer(directory, dp_rank, aware)


def first_leg(root, ckpt: Path, ranks=2, workers=2, elastic=True):
    """``STEPS`` batches on each of ``ranks`` DP ranks, then NeMo's per-DP-rank save of each loader."""
    consumed = collections.Counter()
    for rank in range(ranks):
        dl = loader(root, rank, ranks, workers, elastic)
        iterator = iter(dl)
        for _ in range(STEPS):
            consumed[rows_of(next(iterator))] += 1
        checkpointer(ckpt, rank, aware=False).save_on_dp_ranks(dl, "dataloader", str(ckpt))
        del iterator
    return consumed


def second_leg(root, ckpt: Path, ranks, workers=0):
    rest = collections.Counter()
    for rank in range(ranks):
        dl = loader(root, rank, ranks, workers)
        checkpointer(ckpt, rank).load_on_dp_ranks(dl, "dataloader", str(ckpt))
        rest.update(rows_of(b) for b in dl)
    return rest


@pytest.fixture(scope="module")
def epoch(data):
    return collections.Counter(rows_of(b) for b in loader(data, 0, 1))


@pytest.mark.parametrize("ranks", [1, 3], ids=["shrink-to-1", "grow-to-3"])
def test_nemos_saved_dp_rank_files_finish_the_epoch_at_a_new_dp_size(data, epoch, tmp_path, ranks):
    consumed = first_leg(data, tmp_path)
    assert saved_dp_ranks(str(tmp_path / "dataloader"), "dataloader") == [0, 1]
    rest = second_leg(data, tmp_path, ranks)
    assert consumed + rest == epoch  # every row of the epoch once: none twice, none skipped
    assert sum(consumed.values()) == 2 * STEPS and sum(rest.values()) > 0


def test_stock_nemo_checkpointer_loses_the_rows_of_the_ranks_that_are_gone(data, epoch, tmp_path):
    """What the DP-aware load fixes: NeMo's own load on 1 rank reads dataloader_dp_rank_0.pt only (editstream's
    elastic loader then refuses to run rank 1's streams it has no state for)."""
    consumed = first_leg(data, tmp_path, workers=0)
    dl = loader(data, 0, 1)
    with pytest.raises(ValueError, match="no state for stream 1"):
        checkpointer(tmp_path, 0, aware=False).load_on_dp_ranks(dl, "dataloader", str(tmp_path))
        list(dl)
    assert sum(consumed.values()) > 0


def test_at_an_unchanged_dp_size_the_load_is_nemos_own(data, epoch, tmp_path):
    consumed = first_leg(data, tmp_path)
    rest, stock = collections.Counter(), collections.Counter()
    for rank in range(2):
        ours, theirs = loader(data, rank, 2, 2), loader(data, rank, 2, 2)
        aware = checkpointer(tmp_path, rank)
        assert isinstance(aware, DPAwareCheckpointer)
        aware.load_on_dp_ranks(ours, "dataloader", str(tmp_path))
        checkpointer(tmp_path, rank, aware=False).load_on_dp_ranks(theirs, "dataloader", str(tmp_path))
        assert ours.state_dict() == theirs.state_dict()
        rest.update(rows_of(b) for b in ours)
        stock.update(rows_of(b) for b in theirs)
    assert rest == stock and consumed + rest == epoch


def test_a_non_elastic_run_at_a_new_dp_size_is_refused_in_one_line(data, tmp_path):
    first_leg(data, tmp_path, workers=0, elastic=False)
    dl = loader(data, 0, 1, elastic=False)
    with pytest.raises(StateError, match=r"states of 2 DP ranks, this run has 1, .*`elastic: true`") as refused:
        checkpointer(tmp_path, 0).load_on_dp_ranks(dl, "dataloader", str(tmp_path))
    assert "\n" not in str(refused.value)


def test_editstreams_recipe_restores_through_the_dp_aware_checkpointer(tmp_path):
    from nemo_automodel.components.config.loader import load_yaml_config

    import editstream.nemo
    from test_nemo_recipe import PRETRAIN_YAML

    recipe = editstream.nemo.PretrainRecipeForMultimodal(load_yaml_config(str(PRETRAIN_YAML)))
    try:
        recipe.checkpointer = checkpointer(tmp_path / "empty", 0, aware=False)
        recipe.load_checkpoint(None)  # no checkpoint saved yet: nothing restored
        assert type(recipe.checkpointer) is DPAwareCheckpointer
    finally:
        editstream.nemo.uninstall()


def torchrun(mode: str, ranks: int, data, ckpt: Path, out: Path, elastic: bool = True):
    import os
    import socket
    import subprocess
    import sys

    from helpers import ROOT

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    script = ROOT / "tests" / "fixtures" / "nemo_dp_restart_rank.py"
    cmd = [sys.executable, "-m", "torch.distributed.run", f"--nproc_per_node={ranks}", "--master_addr=127.0.0.1"]
    cmd += [f"--master_port={port}", str(script), mode, str(data), str(ckpt), str(out), str(STEPS), str(int(elastic))]
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(ROOT / "src")}
    return subprocess.run(cmd, capture_output=True, text=True, timeout=900, env=env)


def rows_read(out: Path, mode: str):
    import json

    return collections.Counter(
        tuple((name, tuple(idx)) for name, idx in batch)
        for path in sorted(out.glob(f"{mode}-rank*.json"))
        for batch in json.loads(path.read_text())
    )


@pytest.mark.torchrun
@pytest.mark.slow
def test_under_torchrun_two_ranks_saved_by_nemo_finish_the_epoch_on_one_and_on_three(data, epoch, tmp_path):
    ckpt, first = tmp_path / "ckpt", tmp_path / "first"
    first.mkdir()
    proc = torchrun("save", 2, data, ckpt, first)
    assert proc.returncode == 0, proc.stderr[-4000:]
    consumed = rows_read(first, "save")
    assert sum(consumed.values()) == 2 * STEPS
    for ranks in (1, 3):
        out = tmp_path / f"resume-{ranks}"
        out.mkdir()
        proc = torchrun("load", ranks, data, ckpt, out)
        assert proc.returncode == 0, proc.stderr[-4000:]
        assert consumed + rows_read(out, "load") == epoch, ranks
        if ranks == 3:
            assert "none for rank 2; it keeps its fresh seeding" in proc.stderr


@pytest.mark.torchrun
@pytest.mark.slow
def test_under_torchrun_a_non_elastic_restart_on_one_rank_stops_before_reading(data, tmp_path):
    ckpt, first, out = tmp_path / "ckpt", tmp_path / "first", tmp_path / "resume"
    first.mkdir()
    out.mkdir()
    assert torchrun("save", 2, data, ckpt, first, elastic=False).returncode == 0
    proc = torchrun("load", 1, data, ckpt, out, elastic=False)
    assert proc.returncode != 0
    assert "the loader states of 2 DP ranks, this run has 1, and the dataset is not elastic" in proc.stderr
    assert not list(out.glob("load-rank*.json"))  # nothing read, so nothing trained twice or skipped
