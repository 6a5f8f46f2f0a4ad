"""NeMo Automodel's own classes as the judge (``make test-nemo``: a venv with torch 2.14.1,
torchvision 0.29.1 and nemo-automodel 0.7.0; NeMo's ImageTransform resizes with torchvision).

NeMo's ``BagelDataloaderConfig`` from its own ``RecipeConfig``, untouched, reads the source data of
the pretraining YAML (t2i mandatory, edit optional, vlm_sft mandatory, as NeMo's example marks
them); editstream's path after the one-line switch must give the same batches, tensor for tensor,
from the source data, from the shards, and after a mid-epoch ``state_dict()`` resume.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import torch
import yaml

import editstream.nemo
from editstream import ByteTokenizer
from helpers import ROOT, assert_batches_equal, load_example
from test_nemo_recipe import GROUPS, write_yaml

pytestmark = pytest.mark.nemo_env

BATCHES = 6
SEED = 4396


@pytest.fixture(scope="module")
def out(tmp_path_factory: pytest.TempPathFactory) -> str:
    """The demo's three groups (source data and converted shards)."""
    out = str(tmp_path_factory.mktemp("nemo-judge") / "demo-out")
    load_example(ROOT / "examples" / "demo.py").prepare_data(out)
    return out


def nemo_yaml(out: str, tmp_path: Path, workers: int = 0, used: dict[str, int] | None = None, **dataset: Any) -> Path:
    """The YAML as NeMo's own classes take it: editstream's ``backend:`` / ``webdataset:`` keys
    removed (``used``: a group's ``num_used_data`` changed)."""
    config = yaml.safe_load(write_yaml(out, tmp_path).read_text())
    for group, count in (used or {}).items():
        config["dataset"]["grouped_datasets"][group]["num_used_data"] = [count]
    for group, args in config["dataset"]["grouped_datasets"].items():
        args.pop("backend")
        for entry in config["dataset"]["dataset_info"][group].values():
            entry.pop("webdataset")
    config["dataset"].update(dataset)
    config["dataloader"]["num_workers"] = workers
    path = tmp_path / f"nemo-own-{workers}.yaml"
    path.write_text(yaml.safe_dump(config))
    return path


def loader_from(path: Path, rank: int = 0, world_size: int = 1) -> Any:
    """The dataloader NeMo's recipe builds from a YAML for ``rank`` (NeMo's own classes unless editstream is
    installed)."""
    from nemo_automodel.components.config.loader import load_yaml_config
    from nemo_automodel.recipes._typed_config import RecipeConfig

    tokenizer = ByteTokenizer()
    built = RecipeConfig(load_yaml_config(str(path))).bagel_dataloader.build(
        tokenizer=tokenizer,
        special_tokens=tokenizer.special_token_ids(),
        rank=rank,
        world_size=world_size,
        batch_size=1,
        global_seed=SEED,
    )
    return built.dataloader


def first(loader: Any, n: int) -> tuple[list[Any], Any]:
    """The first ``n`` batches (as dicts) and the iterator, left where it stopped."""
    iterator = iter(loader)
    return [next(iterator).to_dict() for _ in range(n)], iterator


def editstream_loader(path: Path, rank: int = 0, world_size: int = 1) -> Any:
    editstream.nemo.install()
    try:
        return loader_from(path, rank, world_size)
    finally:
        editstream.nemo.uninstall()


def shards_yaml(
    out: str, tmp_path: Path, shard_only: bool, workers: int = 0, used: dict[str, int] | None = None
) -> Path:
    """The same YAML with every group on the converted shards (editstream only)."""
    path = write_yaml(out, tmp_path, flips=() if shard_only else GROUPS, shard_only=shard_only)
    config = yaml.safe_load(path.read_text())
    config["dataloader"]["num_workers"] = workers
    for group, count in (used or {}).items():
        config["dataset"]["grouped_datasets"][group]["num_used_data"] = [count]
    path.write_text(yaml.safe_dump(config))
    return path


def test_nemos_own_loader_is_nemos(out, tmp_path):
    loader = loader_from(nemo_yaml(out, tmp_path))
    assert type(loader.dataset).__module__.startswith("nemo_automodel.")


@pytest.mark.parametrize("workers", [0, 1])
def test_editstream_on_the_source_data_gives_nemos_batches(out, tmp_path, workers):
    path = nemo_yaml(out, tmp_path, workers)
    nemos, _ = first(loader_from(path), BATCHES)
    ours, _ = first(editstream_loader(path), BATCHES)
    assert_batches_equal(nemos, ours)


@pytest.mark.parametrize("shard_only", [False, True], ids=["flipped-groups", "shard-only-entries"])
def test_editstream_on_the_shards_gives_nemos_batches(out, tmp_path, shard_only):
    nemos, _ = first(loader_from(nemo_yaml(out, tmp_path)), BATCHES)
    ours, _ = first(editstream_loader(shards_yaml(out, tmp_path, shard_only)), BATCHES)
    assert_batches_equal(nemos, ours)


def test_num_used_data_not_a_multiple_of_the_files_takes_nemos_files(out, tmp_path):
    """``[3]`` over the 2 text-to-image files and ``[4]`` over the 3 edit files: the files taken
    last depend on the directory's order, which editstream takes as NeMo does (and the shards keep)."""
    used = {"t2i_pretrain": 3, "unified_edit": 4}
    nemos, _ = first(loader_from(nemo_yaml(out, tmp_path, used=used)), BATCHES)
    ours, _ = first(editstream_loader(nemo_yaml(out, tmp_path, used=used)), BATCHES)
    assert_batches_equal(nemos, ours)
    on_shards, _ = first(editstream_loader(shards_yaml(out, tmp_path, shard_only=False, used=used)), BATCHES)
    assert_batches_equal(nemos, on_shards)


def test_without_flex_attention_the_batches_are_nemos_too(out, tmp_path):
    path = nemo_yaml(out, tmp_path, use_flex=False)
    nemos, _ = first(loader_from(path), BATCHES)
    ours, _ = first(editstream_loader(path), BATCHES)
    assert_batches_equal(nemos, ours)


@pytest.mark.parametrize("workers", [0, 1])
def test_a_mid_epoch_resume_continues_as_nemos_uninterrupted_run(out, tmp_path, workers):
    path = nemo_yaml(out, tmp_path, workers)
    nemos, _ = first(loader_from(path), BATCHES)
    ours = editstream_loader(path)
    head, _ = first(ours, 3)
    state = ours.state_dict()
    resumed = editstream_loader(path)
    resumed.load_state_dict(state)
    tail, _ = first(resumed, BATCHES - 3)
    assert_batches_equal(nemos, head + tail)
    on_shards = editstream_loader(shards_yaml(out, tmp_path, shard_only=False, workers=workers))
    on_shards.load_state_dict(state)  # a parquet state resumes on the shards
    tail_on_shards, _ = first(on_shards, BATCHES - 3)
    assert_batches_equal(nemos[3:], tail_on_shards)


@pytest.mark.parametrize("workers", [0, 1])
def test_a_nemo_loader_state_resumes_in_editstream_with_nemos_next_batches(out, tmp_path, workers):
    """A run that switches its ``recipe:`` line mid-epoch keeps its data position: NeMo's own loader
    state, loaded into editstream's loader (on the source data, and on the shards), gives the
    batches NeMo's uninterrupted run gives next."""
    path = nemo_yaml(out, tmp_path, workers)
    nemos, _ = first(loader_from(path), BATCHES)
    nemo_loader = loader_from(path)
    first(nemo_loader, 3)
    state = nemo_loader.state_dict()
    for yaml_path in (path, shards_yaml(out, tmp_path, shard_only=False, workers=workers)):
        ours = editstream_loader(yaml_path)
        ours.load_state_dict(state)
        tail, _ = first(ours, BATCHES - 3)
        assert_batches_equal(nemos[3:], tail)


def only_group(path: Path, group: str) -> Path:
    """The same YAML reading one group only (a vlm_sft-only run, say)."""
    config = yaml.safe_load(path.read_text())
    config["dataset"]["grouped_datasets"] = {group: config["dataset"]["grouped_datasets"][group]}
    config["dataset"]["dataset_info"] = {group: config["dataset"]["dataset_info"][group]}
    only = path.with_name(f"{path.stem}-{group}.yaml")
    only.write_text(yaml.safe_dump(config))
    return only


@pytest.mark.parametrize("workers", [0, 2])
@pytest.mark.parametrize("flavour", ["mixed-groups", "elastic", "vlm_sft"])
def test_every_editstream_state_loads_through_nemos_restricted_load_torch_ckpt(out, tmp_path, flavour, workers):
    """NeMo's Checkpointer reads dataloader states with ``load_torch_ckpt`` (``weights_only`` restricted
    unpickling): editstream's state of each loader flavour, saved mid-epoch, loads
    there and resumes with the batches the uninterrupted run gives next."""
    from nemo_automodel.components.checkpoint.checkpointing import load_torch_ckpt

    path = shards_yaml(out, tmp_path, shard_only=False, workers=workers)
    if flavour == "elastic":
        config = yaml.safe_load(path.read_text())
        config["dataset"]["elastic"] = True
        path.write_text(yaml.safe_dump(config))
    elif flavour == "vlm_sft":
        path = only_group(path, "vlm_sft")
    whole, _ = first(editstream_loader(path), BATCHES)
    loader = editstream_loader(path)
    first(loader, 3)
    saved = tmp_path / "dataloader_dp_rank_0.pt"
    torch.save(loader.state_dict(), saved)
    resumed = editstream_loader(path)
    resumed.load_state_dict(load_torch_ckpt(saved, weights_only=True))
    tail, _ = first(resumed, BATCHES - 3)
    assert_batches_equal(whole[3:], tail)


FULL_BUFFERS = dict(expected_num_tokens=2048, max_num_tokens=2100, prefer_buffer_before=1200, max_buffer_size=6)
"""Knobs under which the packer's buffer holds several samples between batches (3 and 2 in the two workers
after 3 batches) and gives them back while a sequence is under 1200 tokens (above what the mandatory groups
open it with), so the buffer's order decides the next batches: a buffer restored reversed fails both tests."""


def buffers(state: Any) -> list[int]:
    """The buffer length of each worker in a NeMo (StatefulDataLoader) state."""
    workers = state["_snapshot"]["_worker_snapshots"]
    return [len(workers[w]["dataset_state"]["buffer"]) for w in sorted(workers)]


@pytest.mark.parametrize("workers", [2])
def test_a_nemo_state_saved_with_full_buffers_resumes_in_editstream_with_nemos_next_batches(out, tmp_path, workers):
    """NeMo's own state, taken while its packers hold several buffered samples each (restored in order or the
    batches differ), loads into editstream's loader and gives NeMo's next batches."""
    path = nemo_yaml(out, tmp_path, workers, **FULL_BUFFERS)
    nemos, _ = first(loader_from(path), BATCHES + 2)
    nemo_loader = loader_from(path)
    first(nemo_loader, 3)
    state = nemo_loader.state_dict()
    assert min(buffers(state)) >= 2, buffers(state)
    ours = editstream_loader(path)
    ours.load_state_dict(state)
    tail, _ = first(ours, BATCHES - 1)
    assert_batches_equal(nemos[3:], tail)


@pytest.mark.parametrize("workers", [2])
def test_an_editstream_state_with_full_buffers_resumes_as_nemos_uninterrupted_run(out, tmp_path, workers):
    path = nemo_yaml(out, tmp_path, workers, **FULL_BUFFERS)
    nemos, _ = first(loader_from(path), BATCHES + 2)
    ours = editstream_loader(path)
    first(ours, 3)
    resumed = editstream_loader(path)
    resumed.load_state_dict(ours.state_dict())
    tail, _ = first(resumed, BATCHES - 1)
    assert_batches_equal(nemos[3:], tail)
