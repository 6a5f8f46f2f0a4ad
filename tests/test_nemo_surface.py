"""The NeMo Automodel entry points: BagelDatasetConfig, BagelDataloaderConfig, the collate and the factory.

A NeMo BAGEL recipe's ``dataset:`` and ``dataloader:`` sections must run with only the import
switched: same names, fields, defaults and behaviour (seeding, set_epoch, no mutation).
"""

from __future__ import annotations

import dataclasses
import json
import random

import numpy as np
import pytest
import torch
import yaml

from editstream import (
    BagelDataloaderBuild,
    BagelDataloaderConfig,
    BagelDatasetConfig,
    ByteTokenizer,
    DataConfig,
    PackedDataset,
    SimpleCustomBatch,
    bagel_packed_collate_fn,
    collate_wrapper,
    make_bagel_multimodal_dataset,
)
from helpers import VAE, VIT, assert_batches_equal, preserved_global_rng, synth_and_convert, take

# The reference's fields, in order, with their defaults (NeMo Automodel datasets.py).
REFERENCE_FIELDS = [
    ("grouped_datasets", None),
    ("grouped_datasets_path", None),
    ("dataset_info", None),
    ("dataset_info_path", None),
    ("expected_num_tokens", 32768),
    ("max_num_tokens_per_sample", 16384),
    ("max_num_tokens", 36864),
    ("prefer_buffer_before", 16384),
    ("max_buffer_size", 50),
    ("interpolate_pos", False),
    ("use_flex", False),
    ("data_seed", 42),
    ("text_cond_dropout_prob", 0.1),
    ("vit_cond_dropout_prob", 0.4),
    ("vae_cond_dropout_prob", 0.1),
    ("vae_image_downsample", 16),
    ("max_latent_size", 32),
    ("vit_patch_size", 14),
    ("max_num_patch_per_side", 70),
]
KNOBS = dict(
    expected_num_tokens=2048,
    max_num_tokens=3072,
    max_num_tokens_per_sample=2048,
    prefer_buffer_before=1024,
    max_buffer_size=4,
)


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    return synth_and_convert(
        tmp_path_factory.mktemp("nemo"),
        num_files=2,
        row_groups_per_file=2,
        rows_per_group=4,
        seed=3,
        corrupt_fraction=0.1,
        max_side=96,
    )


def groups(num_used: int = 2, backend: str = "parquet") -> dict:
    return {
        "unified_edit": {
            "dataset_names": ["edit"],
            "image_transform_args": dict(VAE),
            "vit_image_transform_args": dict(VIT),
            "num_used_data": [num_used],
            "weight": 1.0,
            "is_mandatory": True,
            "backend": backend,
        }
    }


def info(data) -> dict:
    return {"unified_edit": {"edit": {"data_dir": str(data / "pq"), "webdataset": {"data_dir": str(data / "wds")}}}}


def tokens() -> tuple[ByteTokenizer, dict[str, int]]:
    tok = ByteTokenizer()
    return tok, tok.special_token_ids()


# editstream's own fields, after the reference's so positional construction stays the reference's.
EDITSTREAM_FIELDS = [("image_dtype", "float32"), ("elastic", False), ("elastic_streams", None)]


def test_config_has_the_reference_fields_defaults_and_order():
    fields = [(f.name, f.default) for f in dataclasses.fields(BagelDatasetConfig)]
    assert fields == REFERENCE_FIELDS + EDITSTREAM_FIELDS
    assert DataConfig is BagelDatasetConfig


def test_config_needs_groups_and_names_the_field():
    with pytest.raises(ValueError, match="requires grouped_datasets or grouped_datasets_path"):
        BagelDatasetConfig()
    config = BagelDatasetConfig(grouped_datasets=groups())
    with pytest.raises(ValueError, match="requires dataset_info or dataset_info_path"):
        config.resolved()


@pytest.mark.parametrize("suffix", [".yaml", ".yml", ".json"])
def test_paths_are_read_as_yaml_or_json_by_suffix(tmp_path, data, suffix):
    dump = yaml.safe_dump if suffix != ".json" else json.dumps
    (tmp_path / f"groups{suffix}").write_text(dump(groups()))
    (tmp_path / f"info{suffix}").write_text(dump(info(data)))
    config = BagelDatasetConfig(
        grouped_datasets_path=str(tmp_path / f"groups{suffix}"), dataset_info_path=str(tmp_path / f"info{suffix}")
    )
    resolved = config.resolved()
    assert resolved.grouped_datasets == groups() and resolved.dataset_info == info(data)
    assert config.grouped_datasets is None  # the config itself is untouched


def test_a_path_wins_over_inline_and_bad_files_name_themselves(tmp_path, data):
    (tmp_path / "g.json").write_text(json.dumps(groups(num_used=1)))
    config = BagelDatasetConfig(
        grouped_datasets=groups(num_used=2), grouped_datasets_path=str(tmp_path / "g.json"), dataset_info=info(data)
    )
    assert config.resolved().grouped_datasets["unified_edit"]["num_used_data"] == [1]
    (tmp_path / "empty.yaml").write_text("")
    with pytest.raises(TypeError, match="must resolve to a mapping, got NoneType"):
        BagelDatasetConfig(grouped_datasets_path=str(tmp_path / "empty.yaml")).resolved()
    (tmp_path / "broken.json").write_text("{not json")
    with pytest.raises(ValueError, match=r"grouped_datasets_path '.*broken\.json' does not parse"):
        BagelDatasetConfig(grouped_datasets_path=str(tmp_path / "broken.json")).resolved()
    with pytest.raises(FileNotFoundError, match="missing.yaml"):
        BagelDatasetConfig(grouped_datasets_path=str(tmp_path / "missing.yaml")).resolved()


@pytest.mark.parametrize(
    "kwargs,match",
    [
        ({"vit_cond_dropout_prob": 1.5}, "vit_cond_dropout_prob must be a probability"),
        ({"expected_num_tokens": 0}, "expected_num_tokens must be a positive integer"),
        ({"max_buffer_size": -1}, "max_buffer_size must be a non-negative integer"),
        ({"data_seed": "42"}, "data_seed must be an integer"),
        ({"grouped_datasets": {"g": 3}}, r"grouped_datasets\['g'\] must be a mapping"),
    ],
)
def test_config_values_are_checked_on_creation(kwargs, match):
    args = {"grouped_datasets": groups(), **kwargs}
    with pytest.raises(ValueError, match=match):
        BagelDatasetConfig(**args)


def test_build_sets_the_epoch_keeps_the_config_and_passes_global_seed(data):
    config = BagelDatasetConfig(grouped_datasets=groups(), dataset_info=info(data), data_seed=17, **KNOBS)
    before = json.dumps(dataclasses.asdict(config), sort_keys=True)
    tok, special = tokens()
    first = config.build(tokenizer=tok, special_tokens=special, rank=0, world_size=1, num_workers=0, global_seed=23)
    second = config.build(tokenizer=tok, special_tokens=special, rank=0, world_size=1, num_workers=0, global_seed=23)
    assert json.dumps(dataclasses.asdict(config), sort_keys=True) == before
    assert first is not second and isinstance(first, PackedDataset)
    assert first._data_seed == 17 and first._global_seed == 23
    # set_epoch(17) was applied: the rank slice is the units' seeded shuffle with 17
    reference = first.grouped_datasets[0]
    expected = sorted(reference.data_paths)
    random.Random(17).shuffle(expected)
    assert reference.data_paths_per_rank == expected
    assert first.expected_num_tokens == KNOBS["expected_num_tokens"]
    # both builds give the same stream (the global RNGs are reseeded per worker from global_seed)
    with preserved_global_rng():
        assert_batches_equal(take(iter(first), 3), take(iter(second), 3))


def test_worker_reseed_uses_global_seed_and_falls_back_to_the_data_seed_on_zero(data):
    tok, special = tokens()
    config = BagelDatasetConfig(grouped_datasets=groups(), dataset_info=info(data), data_seed=42, **KNOBS)
    packer = config.build(tokenizer=tok, special_tokens=special, rank=1, world_size=2, num_workers=3, global_seed=7)
    assert packer.worker_seed(2) == ((7 * 2 + 1) * 3 + 2) & 0xFFFFFFFF
    zero = config.build(tokenizer=tok, special_tokens=special, rank=1, world_size=2, num_workers=3, global_seed=0)
    assert zero.worker_seed(2) == ((42 * 2 + 1) * 3 + 2)  # global_seed 0 counts as unset, as in the reference


def test_packed_dataset_takes_global_seed_after_dataset_info(data):
    tok, special = tokens()
    config = BagelDatasetConfig(grouped_datasets=groups(), **KNOBS)
    packer = PackedDataset(config, tok, special, 0, 1, 1, 2048, 2048, 3072, 1024, 4, False, False, None, info(data), 5)
    assert packer._global_seed == 5 and packer.worker_seed(0) == 5


def test_dataloader_config_fields_and_batch_size_check(data):
    assert [(f.name, f.default) for f in dataclasses.fields(BagelDataloaderConfig)][1:] == [
        ("num_workers", 1),
        ("pin_memory", True),
        ("prefetch_factor", 2),
    ]
    config = BagelDataloaderConfig(BagelDatasetConfig(grouped_datasets=groups(), dataset_info=info(data)), 0)
    tok, special = tokens()
    with pytest.raises(ValueError, match="local_batch_size=1, got 2"):
        config.build(tokenizer=tok, special_tokens=special, rank=0, world_size=1, batch_size=2, global_seed=5)


def test_dataloader_build_seeds_the_rank_and_wraps_a_stateful_loader(data):
    from torchdata.stateful_dataloader import StatefulDataLoader

    dataset_config = BagelDatasetConfig(grouped_datasets=groups(), dataset_info=info(data), **KNOBS)
    tok, special = tokens()
    with preserved_global_rng():
        built = BagelDataloaderConfig(dataset_config, num_workers=0, pin_memory=False).build(
            tokenizer=tok, special_tokens=special, rank=1, world_size=2, batch_size=1, global_seed=5
        )
        rank_seed = 5 * 2 + 1
        assert random.random() == random.Random(rank_seed).random()
        assert np.random.rand() == np.random.RandomState(rank_seed).rand()
        assert torch.equal(torch.rand(3), torch.rand(3, generator=torch.Generator().manual_seed(rank_seed)))
    assert isinstance(built, BagelDataloaderBuild)
    assert isinstance(built.dataloader, StatefulDataLoader) and built.dataloader.dataset is built.dataset
    assert built.dataloader.drop_last and built.dataloader.batch_size == 1
    assert built.dataloader.collate_fn is bagel_packed_collate_fn
    with preserved_global_rng():
        batch = next(iter(built.dataloader))
    assert isinstance(batch, SimpleCustomBatch)
    # the loader's batches are the dataset's own batches, wrapped
    with preserved_global_rng():
        direct = next(
            iter(
                dataset_config.build(
                    tokenizer=tok, special_tokens=special, rank=1, world_size=2, num_workers=0, global_seed=5
                )
            )
        )
    assert_batches_equal(bagel_packed_collate_fn([direct]).to_dict(), batch.to_dict())


def test_dataloader_with_workers_passes_prefetch_factor(data):
    dataset_config = BagelDatasetConfig(grouped_datasets=groups(), dataset_info=info(data), **KNOBS)
    tok, special = tokens()
    with preserved_global_rng():
        built = BagelDataloaderConfig(dataset_config, num_workers=2, pin_memory=False, prefetch_factor=3).build(
            tokenizer=tok, special_tokens=special, rank=0, world_size=1, batch_size=1, global_seed=5
        )
    assert built.dataloader.prefetch_factor == 3 and built.dataloader.num_workers == 2
    assert built.dataset.num_workers == 2


def packed_batch(data, use_flex: bool) -> dict:
    config = BagelDatasetConfig(grouped_datasets=groups(), dataset_info=info(data), use_flex=use_flex, **KNOBS)
    tok, special = tokens()
    with preserved_global_rng():
        return next(
            iter(
                config.build(tokenizer=tok, special_tokens=special, rank=0, world_size=1, num_workers=0, global_seed=1)
            )
        )


@pytest.mark.parametrize("use_flex", [False, True])
def test_simple_custom_batch_attributes_and_dict_order(data, use_flex):
    packed = packed_batch(data, use_flex)
    batch = bagel_packed_collate_fn([packed])
    assert collate_wrapper()([packed]).to_dict().keys() == batch.to_dict().keys()
    assert batch.use_flex is use_flex
    head = [
        "sequence_length",
        "sample_lens",
        "packed_text_ids",
        "packed_text_indexes",
        "packed_position_ids",
        "batch_data_indexes",
    ]
    head += ["split_lens", "attn_modes"] if use_flex else ["nested_attention_masks"]
    groups_present = [
        "padded_images",
        "patchified_vae_latent_shapes",
        "packed_latent_position_ids",
        "packed_vae_token_indexes",
        "packed_vit_tokens",
        "packed_vit_position_ids",
        "packed_vit_token_indexes",
        "vit_token_seqlens",
        "packed_timesteps",
        "mse_loss_indexes",
        "packed_label_ids",
        "ce_loss_indexes",
        "ce_loss_weights",
    ]
    present = [key for key in groups_present if key in packed]
    assert list(batch.to_dict()) == head + present
    for key in head + present:
        assert_batches_equal(packed[key], getattr(batch, key), key)


def test_to_and_cuda_move_every_tensor_and_keep_values(data):
    packed = packed_batch(data, use_flex=False)
    batch = bagel_packed_collate_fn([packed])
    assert batch.to("cpu") is batch and batch.cuda("cpu") is batch
    assert_batches_equal({k: packed[k] for k in batch.to_dict()}, batch.to_dict())
    with pytest.raises(ValueError, match="batch_size=1"):
        bagel_packed_collate_fn([packed, packed])


def test_factory_is_the_config_build_with_the_data_seed(data):
    grouped, where = groups(), info(data)
    tok, special = tokens()
    packer = make_bagel_multimodal_dataset(
        tokenizer=tok,
        special_tokens=special,
        grouped_datasets=grouped,
        num_workers=0,
        data_seed=9,
        dataset_info=where,
        **KNOBS,
    )
    assert grouped == groups() and where == info(data)  # the caller's dicts are not mutated
    assert packer._data_seed == 9 and packer._global_seed == 9
    same = BagelDatasetConfig(grouped_datasets=groups(), dataset_info=info(data), data_seed=9, **KNOBS).build(
        tokenizer=tok, special_tokens=special, rank=0, world_size=1, num_workers=0, global_seed=9
    )
    with preserved_global_rng():
        assert_batches_equal(take(iter(packer), 2), take(iter(same), 2))
