"""Building a PackedDataset: grouped-dataset configs and dataset_info become datasets, arguments
and configs are validated, collate_fn and the factory."""

from __future__ import annotations

import copy
import json

import pytest
import torch

from editstream import PackedDataset, collate_fn, make_bagel_multimodal_dataset
from editstream.packing.config import BagelDatasetConfig, DataConfig
from helpers import (
    REGISTRY,
    SPECIAL,
    ToyDataset,
    assert_batches_equal,
    make_mixed,
    make_packer,
    mixed_groups,
    preserved_global_rng,
    take,
    toy_info,
)


# --------------------------------------------------------------------------- building datasets
def test_build_passes_dataset_info_and_leaves_the_config_untouched(tmp_path):
    info_a, info_b = tmp_path / "a.json", tmp_path / "b.json"
    info_a.write_text(json.dumps({"/data/a/0.parquet": {"num_row_groups": 2}}))
    info_b.write_text(json.dumps({"/data/b/0.parquet": {"num_row_groups": 3}}))
    groups = {
        "toy": {
            "dataset_names": ["a", "b"],
            "weight": 2.0,
            "is_mandatory": True,
            "num_used_data": [5, 6],
            "resume_data_status": False,
        },
        "toy_b": {"dataset_names": ["a"], "weight": 1.0},
    }
    original = copy.deepcopy(groups)
    dataset_info = {
        "toy": {
            "a": {"data_dir": "/data/a", "parquet_info_path": str(info_a), "backend": "parquet"},
            "b": {"data_dir": "/data/b", "parquet_info_path": str(info_b), "backend": "parquet"},
        },
        "toy_b": {"a": {"data_dir": "/data/c", "storage_options": {"anon": True}}},
    }
    status = {"toy": [3], "toy_b": [4]}
    packer = make_packer(groups, dataset_info=dataset_info, data_status=status)
    assert groups == original
    toy, toy_b = packer.grouped_datasets
    assert packer.is_mandatory == [True, False] and packer.grouped_weights == [2.0, 1.0]
    assert toy.data_dir_list == ["/data/a", "/data/b"] and toy_b.data_dir_list == ["/data/c"]
    assert toy.extra == {
        "num_used_data": [5, 6],
        "backend": "parquet",
        "parquet_info": {"/data/a/0.parquet": {"num_row_groups": 2}, "/data/b/0.parquet": {"num_row_groups": 3}},
    }
    assert toy_b.extra == {"storage_options": {"anon": True}}
    assert toy.init_data_status is None  # resume_data_status False
    assert toy_b.init_data_status == [4]
    assert toy.dataset_name == "toy" and toy.num_workers == 0 and toy.world_size == 1


def test_webdataset_backend_reads_the_webdataset_sub_entry_and_no_source_only_keys(tmp_path):
    groups = {"toy": {"dataset_names": ["a"], "weight": 1.0, "backend": "webdataset"}}
    entry = {
        "data_dir": "/src/a",
        "parquet_info_path": str(tmp_path / "never-read.json"),
        "jsonl_path": "/x.jsonl",
        "storage_options": {"anon": True},
        "webdataset": {"data_dir": "s3://b/a-wds"},
    }
    packer = make_packer(groups, dataset_info={"toy": {"a": entry}})
    toy = packer.grouped_datasets[0]
    assert toy.data_dir_list == ["s3://b/a-wds"]
    # the shards hold the JSONL lines: a vlm_sft dataset reads no JSONL on the webdataset backend
    assert toy.extra == {"backend": "webdataset", "storage_options": {"anon": True}, "jsonl_path_list": None}
    source = make_packer(
        {"toy": {"dataset_names": ["a"], "weight": 1.0}},
        dataset_info={"toy": {"a": {k: v for k, v in entry.items() if k != "parquet_info_path"}}},
    )
    assert source.grouped_datasets[0].data_dir_list == ["/src/a"]
    assert source.grouped_datasets[0].extra["jsonl_path_list"] == ["/x.jsonl"]
    with pytest.raises(ValueError, match=r"\['webdataset'\] must be a mapping with a data_dir"):
        make_packer(groups, dataset_info={"toy": {"a": {"data_dir": "/src/a", "webdataset": {"storage_options": {}}}}})
    with pytest.raises(ValueError, match=r"\['webdataset'\]: unknown key\(s\) \['dir'\]"):  # a typo is named
        make_packer(groups, dataset_info={"toy": {"a": {"data_dir": "/src/a", "webdataset": {"dir": "x"}}}})


def test_backend_from_group_args_is_passed_and_checked():
    groups = {"toy": {"dataset_names": ["d0"], "weight": 1.0, "backend": "parquet"}}
    packer = make_packer(groups)
    assert packer.grouped_datasets[0].extra == {"backend": "parquet"}
    info = {"toy": {"d0": {"data_dir": "/x", "backend": "webdataset"}}}
    with pytest.raises(ValueError, match="'toy'.*backend='parquet'.*'webdataset'"):
        make_packer(groups, dataset_info=info)


def test_entries_that_disagree_on_backend_are_rejected():
    info = {"toy": {"a": {"data_dir": "/a", "backend": "parquet"}, "b": {"data_dir": "/b", "backend": "webdataset"}}}
    groups = {"toy": {"dataset_names": ["a", "b"], "weight": 1.0}}
    with pytest.raises(ValueError, match=r"group 'toy'.*a='parquet', b='webdataset'"):
        make_packer(groups, dataset_info=info)
    info["toy"]["b"]["backend"] = "lmdb"
    info["toy"]["a"]["backend"] = "lmdb"
    with pytest.raises(ValueError, match="lmdb"):
        make_packer(groups, dataset_info=info)


@pytest.mark.parametrize(
    ("groups", "info", "error", "match"),
    [
        ({"toy": {"weight": 1.0}}, None, ValueError, "'toy' has no dataset_names"),
        ({"toy": {"dataset_names": "d0", "weight": 1.0}}, None, ValueError, "non-empty list"),
        ({"toy": {"dataset_names": ["zz"], "weight": 1.0}}, None, ValueError, r"no dataset 'zz'.*\['d0'\]"),
        ({"toy": {"dataset_names": ["d0"], "weight": 1.0}}, {"other": {}}, ValueError, "no group 'toy'"),
        ({"toy": {"dataset_names": ["d0"], "weight": 1.0}}, {"toy": {"d0": {}}}, ValueError, "no data_dir"),
        ({"toy": {"dataset_names": ["d0"], "weight": -1}}, None, ValueError, "'toy': weight"),
        ({"toy": {"dataset_names": ["d0"], "weight": 0.0}}, None, ValueError, "sum to more than 0"),
        (
            {"toy": {"dataset_names": ["d0"], "weight": 1.0, "frame_sampler_args": {"fps": 2}}},
            None,
            TypeError,
            "fps",
        ),
        (
            {"nope": {"dataset_names": ["d0"], "weight": 1.0}},
            toy_info("nope"),
            ValueError,
            "no dataset class registered for group 'nope'",
        ),
        ({"toy": {"dataset_names": ["d0"], "weight": 1.0, "bogus": 1}}, None, TypeError, "'toy'.*bogus"),
    ],
)
def test_bad_group_configs_fail_clearly(groups, info, error, match):
    registry = dict(REGISTRY)

    class Strict(ToyDataset):
        def __init__(
            self, dataset_name, tokenizer, local_rank, world_size, num_workers, data_status=None, data_dir_list=()
        ):
            super().__init__(dataset_name, tokenizer, local_rank, world_size, num_workers, data_status, data_dir_list)

    registry["toy"] = Strict
    with pytest.raises(error, match=match):
        make_packer(groups, registry=registry, **({"dataset_info": info} if info is not None else {}))


def test_parquet_info_path_errors_name_the_dataset(tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    info = {"toy": {"d0": {"data_dir": "/x", "parquet_info_path": str(bad)}}}
    with pytest.raises(ValueError, match="toy/d0"):
        make_packer(dataset_info=info)
    info["toy"]["d0"]["parquet_info_path"] = str(tmp_path / "missing.json")
    with pytest.raises(OSError, match="toy/d0"):
        make_packer(dataset_info=info)


def test_image_transform_args_become_transforms():
    transforms = pytest.importorskip("editstream.loader.transforms")
    groups = {
        "toy": {
            "dataset_names": ["d0"],
            "weight": 1.0,
            "image_transform_args": {"image_stride": 16, "max_image_size": 64, "min_image_size": 32},
            "vit_image_transform_args": {"image_stride": 14, "max_image_size": 56, "min_image_size": 28},
        }
    }
    dataset = make_packer(groups).grouped_datasets[0]
    assert isinstance(dataset.extra["transform"], transforms.ImageTransform)
    assert dataset.extra["transform"].stride == 16 and dataset.extra["vit_transform"].stride == 14


def test_set_epoch_reaches_every_dataset():
    packer = make_packer(mixed_groups())
    packer.set_epoch(7)
    assert [d.epoch_seeds for d in packer.grouped_datasets] == [[7], [7]]


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"dataset_info": None}, "dataset_info"),
        ({"expected_num_tokens": 0}, "expected_num_tokens must be a positive integer, got 0"),
        ({"max_buffer_size": -1}, "max_buffer_size must be a non-negative integer, got -1"),
        ({"local_rank": 2, "world_size": 2}, r"local_rank must be in \[0, world_size=2\), got 2"),
    ],
)
def test_constructor_validation(kwargs, match):
    with pytest.raises(ValueError, match=match):
        make_packer(**kwargs)


def test_special_tokens_are_required():
    config = BagelDatasetConfig({"toy": {"dataset_names": ["d0"], "weight": 1.0}})
    with pytest.raises(ValueError, match="end_of_image"):
        PackedDataset(
            config,
            None,
            {k: v for k, v in SPECIAL.items() if k != "end_of_image"},
            0,
            1,
            0,
            dataset_info=toy_info("toy"),
            registry=REGISTRY,
        )


# --------------------------------------------------------------------------- config, collate, factory
def test_config_defaults_and_positional_groups():
    config = DataConfig({"toy": {}})
    assert DataConfig is BagelDatasetConfig
    assert (config.text_cond_dropout_prob, config.vit_cond_dropout_prob, config.vae_cond_dropout_prob) == (
        0.1,
        0.4,
        0.1,
    )
    assert (
        config.vae_image_downsample,
        config.max_latent_size,
        config.vit_patch_size,
        config.max_num_patch_per_side,
        config.data_seed,
    ) == (16, 32, 14, 70, 42)
    # as in the reference dataclass, the second positional field is grouped_datasets_path
    with pytest.raises(TypeError, match="grouped_datasets_path must be a path or URL string, got float 0.2"):
        BagelDatasetConfig({"toy": {}}, 0.2)


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"text_cond_dropout_prob": 1.5}, r"text_cond_dropout_prob must be a probability in \[0, 1\], got 1.5"),
        ({"vae_cond_dropout_prob": -0.1}, "vae_cond_dropout_prob.*-0.1"),
        ({"vit_cond_dropout_prob": "0.4"}, "vit_cond_dropout_prob.*'0.4'"),
        ({"vit_patch_size": 0}, "vit_patch_size must be a positive integer, got 0"),
        ({"max_latent_size": 2.5}, "max_latent_size.*2.5"),
        ({"vae_image_downsample": True}, "vae_image_downsample.*True"),
        ({"data_seed": "x"}, "data_seed"),
    ],
)
def test_config_validation_names_field_and_value(kwargs, match):
    with pytest.raises(ValueError, match=match):
        BagelDatasetConfig({"toy": {}}, **kwargs)


@pytest.mark.parametrize(("groups", "match"), [([], "mapping"), ({}, "empty"), ({"toy": ["d0"]}, "'toy'")])
def test_config_rejects_bad_grouped_datasets(groups, match):
    with pytest.raises(ValueError, match=match):
        BagelDatasetConfig(groups)


def test_collate_fn_unwraps_the_single_packed_batch():
    batch = {"sequence_length": 3}
    assert collate_fn([batch]) == batch
    assert collate_fn(batch) == batch
    with pytest.raises(ValueError, match="batch_size=1"):
        collate_fn([batch, batch])


def test_dataloader_with_collate_fn_yields_the_packer_batches():
    with preserved_global_rng():
        direct = take(iter(make_mixed()), 3)
        loaded = take(iter(torch.utils.data.DataLoader(make_mixed(), batch_size=1, collate_fn=collate_fn)), 3)
    assert_batches_equal(direct, loaded)


def test_factory_builds_the_same_packer():
    groups = mixed_groups()
    packer = make_bagel_multimodal_dataset(
        tokenizer=None,
        special_tokens=SPECIAL,
        grouped_datasets=groups,
        num_workers=0,
        expected_num_tokens=40,
        max_num_tokens=56,
        max_num_tokens_per_sample=36,
        prefer_buffer_before=20,
        max_buffer_size=3,
        text_cond_dropout_prob=0.3,
        vit_cond_dropout_prob=0.4,
        vae_cond_dropout_prob=0.2,
        vae_image_downsample=2,
        max_latent_size=4,
        vit_patch_size=2,
        max_num_patch_per_side=4,
        data_seed=9,
        dataset_info=toy_info(*groups),
        registry=REGISTRY,
    )
    assert packer.data_config.data_seed == 9
    packer.set_epoch(packer.data_config.data_seed)
    with preserved_global_rng():
        assert_batches_equal(take(iter(make_mixed()), 3), take(iter(packer), 3))
