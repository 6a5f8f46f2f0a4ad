"""Exact epochs with NeMo's group flags: ``bagel_pretrain.yaml`` marks text-to-image and vlm_sft
mandatory and leaves editing optional. Every row is packed exactly once at 2 ranks x 2 workers, and
after a merged resume at 3 x 1 and 1 x 4, on both backends, with real DataLoader workers."""

from __future__ import annotations

import collections

import pytest

from editstream import BagelDatasetConfig, convert, merge_states
from editstream.sandbox.synth_vlm import write_synthetic_vlm_dataset
from helpers import BACKEND_DIRS, VAE, VIT, build_dataloader, json_roundtrip, synth_pipeline_data, torch_roundtrip

pytest.importorskip("torchdata.stateful_dataloader")

SFT = dict(max_image_size=56, min_image_size=28, image_stride=14)
PACKING = {
    "expected_num_tokens": 300,
    "max_num_tokens": 340,
    "max_num_tokens_per_sample": 340,
    "prefer_buffer_before": 150,
    "max_buffer_size": 3,
}
"""Sequences so short that many samples do not fit beside the mandatory opening (one t2i and one
vlm_sft sample), though each fits an empty sequence."""
MANDATORY = {"unified_edit": False, "t2i_pretrain": True, "vlm_sft": True}
SFT_LINES = 24


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    root = synth_pipeline_data(tmp_path_factory.mktemp("mandatory"))
    made = write_synthetic_vlm_dataset(str(root / "sft"), num_lines=SFT_LINES, seed=5, max_side=64, video=False)
    convert(made["jsonl"], str(root / "sft" / "wds"), media_dir=made["media_dir"], samples_per_shard=5, progress=False)
    return root


def nemo_flagged_config(root, backend):
    sub = BACKEND_DIRS[backend]
    common = {"num_used_data": [2], "image_transform_args": dict(VAE), "backend": backend}
    groups = {
        "unified_edit": {"dataset_names": ["edit"], "weight": 2.0, **common, "vit_image_transform_args": dict(VIT)},
        "t2i_pretrain": {"dataset_names": ["t2i"], "weight": 1.0, **common},
        "vlm_sft": {
            "dataset_names": ["sft"],
            "weight": 1.0,
            "num_used_data": [SFT_LINES],
            "image_transform_args": dict(SFT),
            "frame_sampler_args": {"max_num_frames": 4, "min_num_frames": 2},
            "backend": backend,
        },
    }
    for name, mandatory in MANDATORY.items():
        groups[name]["is_mandatory"] = mandatory
    sft = {"data_dir": str(root / "sft" / "media"), "jsonl_path": str(root / "sft" / "data.jsonl")}
    info = {
        "unified_edit": {"edit": {"data_dir": str(root / "edit" / sub)}},
        "t2i_pretrain": {"t2i": {"data_dir": str(root / "t2i" / sub)}},
        "vlm_sft": {"sft": sft if backend == "parquet" else {"data_dir": str(root / "sft" / "wds")}},
    }
    return BagelDatasetConfig(grouped_datasets=groups, dataset_info=info, elastic=True, elastic_streams=4, **PACKING)


def loader_at(root, backend, rank, world_size, workers):
    return build_dataloader(nemo_flagged_config(root, backend), rank, world_size, workers)


def rows_of(batch):
    """Each packed row as (group's dataset name, its index: [unit, *position], or a line's number)."""
    index = [d["data_indexes"] for d in batch.batch_data_indexes]
    names = [d["dataset_name"] for d in batch.batch_data_indexes]
    return [(name, tuple(i) if isinstance(i, list) else (i,)) for name, i in zip(names, index)]


@pytest.fixture(scope="module")
def every_row(data):
    """The epoch in one process: each row once, nothing dropped by the packer, all three groups in it."""
    loader = loader_at(data, "parquet", 0, 1, 0)
    rows = [row for batch in loader for row in rows_of(batch)]
    assert len(rows) == len(set(rows))
    assert loader.dataset.drop_counts == {}  # no sample of this data fits no sequence
    bad = sum(sum(d.drops.as_dict().values()) for d in loader.dataset.grouped_datasets)
    assert len(rows) + bad == 16 + 12 + SFT_LINES  # the rest are the planted bad rows, counted
    assert {name for name, _ in rows} == {"unified_edit", "t2i_pretrain", "vlm_sft"}
    return collections.Counter(rows)


@pytest.mark.parametrize("backend", ["parquet", "webdataset"])
def test_every_row_once_at_two_ranks_by_two_workers(data, every_row, backend):
    got = collections.Counter()
    for rank in range(2):
        got.update(row for batch in loader_at(data, backend, rank, 2, 2) for row in rows_of(batch))
    assert got == every_row


@pytest.mark.parametrize("backend", ["parquet", "webdataset"])
@pytest.mark.parametrize("layout", [(3, 1), (1, 4)])
def test_a_merged_resume_at_a_new_layout_packs_the_rest_once(data, every_row, backend, layout):
    consumed, states = collections.Counter(), []
    for rank in range(2):
        loader = loader_at(data, backend, rank, 2, 2)
        iterator = iter(loader)
        for _ in range(2):
            consumed.update(rows_of(next(iterator)))
        states.append(torch_roundtrip(loader.state_dict()))
        del iterator
    merged = json_roundtrip(merge_states(states))
    rest = collections.Counter()
    ranks, workers = layout
    for rank in range(ranks):
        loader = loader_at(data, backend, rank, ranks, workers)
        loader.load_state_dict(merged)
        rest.update(row for b in loader for row in rows_of(b))
    assert sum(consumed.values()) > 0 and sum(rest.values()) > 0
    assert consumed + rest == every_row
