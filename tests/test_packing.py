"""PackedDataset: pack_sequence on hand-made samples, to_tensor, the packing loop, building."""

from __future__ import annotations

import copy
import json
import math
import random

import numpy as np
import pytest
import torch

from editstream import PackedDataset, collate_fn, make_bagel_multimodal_dataset
from editstream.packing.config import BagelDatasetConfig, DataConfig
from editstream.packing.sequence import patchify, prepare_attention_mask_per_sample
from helpers import (
    BOS,
    EOI,
    EOS,
    NEG,
    REGISTRY,
    SOI,
    SPECIAL,
    ToyDataset,
    assert_batches_equal,
    make_mixed,
    make_packer,
    make_sample,
    mixed_groups,
    names_and_positions,
    pack,
    preserved_global_rng,
    sized_groups,
    take,
    text_item,
    toy_info,
    vae_item,
    vit_item,
)


# --------------------------------------------------------------------------- pack_sequence
def test_pack_text_vit_and_vae_with_loss():
    packer = make_packer()
    vit_image = torch.arange(24, dtype=torch.float32).reshape(3, 2, 4)  # 1x2 patches
    vae_image = torch.rand(3, 4, 2)  # 2x1 latent
    sample = make_sample([text_item(loss=1), vit_item(), vae_item(loss=1)], [[1, 2]], [vit_image, vae_image])
    with preserved_global_rng():
        np.random.seed(3)
        status = pack(packer, sample)
        expected_t = np.random.RandomState(3).randn()

    # text: bos 1 2 eos at 0-3 | vit: soi 4, patches 5-6, eoi 7 | vae: soi 8, latents 9-10, eoi 11
    assert status.curr == 12 and status.sample_lens == [12]
    assert status.packed_text_ids == [BOS, 1, 2, EOS, SOI, EOI, SOI, EOI]
    assert status.packed_text_indexes == [0, 1, 2, 3, 4, 7, 8, 11]
    assert status.packed_position_ids == [0, 1, 2, 3] + [4] * 4 + [5] * 4
    assert status.ce_loss_indexes == [0, 1, 2]
    assert status.ce_loss_weights == [1 / math.sqrt(3)] * 3
    assert status.packed_label_ids == [1, 2, EOS]
    assert status.packed_vit_token_indexes == [5, 6]
    assert status.vit_token_seqlens == [2]
    assert torch.equal(status.packed_vit_tokens[0], patchify(vit_image, 2))
    assert status.packed_vit_position_ids[0].tolist() == [0, 1]
    assert status.packed_vae_token_indexes == [9, 10]
    assert status.mse_loss_indexes == [9, 10]
    assert status.vae_latent_shapes == [(2, 1)]
    assert status.packed_latent_position_ids[0].tolist() == [0, 4]
    assert status.vae_image_tensors[0] is vae_image
    assert status.packed_timesteps == [expected_t, expected_t]
    (mask,) = status.nested_attention_masks
    assert torch.equal(mask, prepare_attention_mask_per_sample([4, 4, 4], ["causal", "full", "noise"]))
    assert mask[3, 4] == NEG and mask[7, 4] == 0 and mask[7, 8] == NEG and mask[11, 0] == 0
    assert status.split_lens == [] and status.attn_modes == []
    # The sample itself is left as it was.
    assert sample["text_ids_list"] == [[1, 2]] and len(sample["image_tensor_list"]) == 2


def test_pack_flex_records_split_lens_and_modes_instead_of_masks():
    packer = make_packer(use_flex=True)
    sample = make_sample(
        [text_item(loss=1), vit_item(), vae_item(loss=1)], [[1, 2]], [torch.rand(3, 2, 4), torch.rand(3, 4, 2)]
    )
    status = pack(packer, sample)
    assert status.split_lens == [4, 4, 4]
    assert status.attn_modes == ["causal", "full", "noise"]
    assert status.nested_attention_masks == []


def test_pack_vae_without_loss_has_minus_inf_timesteps_and_advances_rope():
    packer = make_packer(use_flex=True)
    sample = make_sample([vae_item(loss=0), text_item()], [[7]], [torch.rand(3, 2, 4)])
    with preserved_global_rng():
        np.random.seed(0)
        status = pack(packer, sample)
        assert np.random.randn() == np.random.RandomState(0).randn()  # no timestep was drawn
    assert status.packed_timesteps == [NEG, NEG]
    assert status.mse_loss_indexes == []
    assert status.packed_vae_token_indexes == [1, 2]
    assert status.packed_position_ids == [0, 0, 0, 0, 1, 2, 3]
    assert status.attn_modes == ["full", "causal"]
    assert status.split_lens == [4, 3]


def video_plan(loss):
    return [
        vae_item(loss=loss, split_start=True, split_end=False, frame_delta=2),
        vae_item(loss=loss, split_start=False, split_end=False, frame_delta=3),
        vae_item(loss=loss, split_start=False, split_end=True),
    ]


def test_pack_video_frames_with_loss_share_one_split_and_one_timestep():
    packer = make_packer(use_flex=True)
    frames = [torch.rand(3, 2, 2) for _ in range(3)]
    with preserved_global_rng():
        np.random.seed(5)
        status = pack(packer, make_sample(video_plan(1), [], frames))
        reference = np.random.RandomState(5)
        t = reference.randn()
        assert np.random.randn() == reference.randn()  # exactly one draw for the whole video
    assert status.packed_text_ids == [SOI, EOI] * 3
    assert status.packed_text_indexes == [0, 2, 3, 5, 6, 8]
    assert status.packed_vae_token_indexes == [1, 4, 7]
    assert status.mse_loss_indexes == [1, 4, 7]
    assert status.packed_timesteps == [t, t, t]
    assert status.packed_position_ids == [0, 0, 0, 2, 2, 2, 5, 5, 5]
    assert status.split_lens == [9] and status.attn_modes == ["full"]
    assert status.vae_latent_shapes == [(1, 1)] * 3
    assert status.sample_lens == [9]


def test_pack_video_frames_without_loss():
    packer = make_packer(use_flex=True)
    frames = [torch.rand(3, 2, 2) for _ in range(3)]
    sample = make_sample(video_plan(0) + [text_item()], [[9]], frames)
    status = pack(packer, sample)
    assert status.packed_timesteps == [NEG] * 3
    assert status.mse_loss_indexes == []
    # frame deltas 2 and 3, then +1 after the last frame (no loss, no delta)
    assert status.packed_position_ids == [0] * 3 + [2] * 3 + [5] * 3 + [6, 7, 8]
    assert status.split_lens == [9, 3] and status.attn_modes == ["full", "causal"]


def test_pack_special_token_loss_on_eos():
    packer = make_packer()
    status = pack(packer, make_sample([text_item(loss=0, special_loss=1, label=55)], [[4, 5]]))
    assert status.ce_loss_indexes == [3]
    assert status.ce_loss_weights == [1.0]
    assert status.packed_label_ids == [55]


def test_second_sample_continues_indexes_but_restarts_positions():
    packer = make_packer()
    status = pack(packer, make_sample([text_item()], [[1]]), make_sample([vae_item(loss=0)], [], [torch.rand(3, 2, 2)]))
    assert status.sample_lens == [3, 3]
    assert status.packed_text_indexes == [0, 1, 2, 3, 5]
    assert status.packed_vae_token_indexes == [4]
    assert status.packed_position_ids == [0, 1, 2, 0, 0, 0]
    assert [m.shape for m in status.nested_attention_masks] == [(3, 3), (3, 3)]


def cfg_sample():
    plan = [vae_item(cfg=1), vit_item(cfg=1), text_item(cfg=1), vae_item(loss=1)]
    return make_sample(plan, [[1, 2]], [torch.rand(3, 2, 2), torch.rand(3, 2, 2), torch.rand(3, 2, 4)])


def test_cfg_dropout_probability_one_drops_every_cfg_item():
    packer = make_packer(probs=(1.0, 1.0, 1.0), use_flex=True)
    with preserved_global_rng():
        random.seed(11)
        status = pack(packer, cfg_sample())
        reference = random.Random(11)
        draws = [reference.random() for _ in range(4)]
        assert random.random() == draws[3]  # one draw per enable_cfg item
    # Only the target image is left; each dropped image still advanced the rotary position.
    assert status.packed_text_ids == [SOI, EOI]
    assert status.packed_position_ids == [2] * 4
    assert status.split_lens == [4] and status.attn_modes == ["noise"]
    assert status.vit_token_seqlens == [] and status.packed_vae_token_indexes == [1, 2]


def test_cfg_dropout_probability_zero_keeps_everything_but_still_draws():
    packer = make_packer(probs=(0.0, 0.0, 0.0), use_flex=True)
    with preserved_global_rng():
        random.seed(11)
        status = pack(packer, cfg_sample())
        reference = random.Random(11)
        draws = [reference.random() for _ in range(4)]
        assert random.random() == draws[3]
    assert status.attn_modes == ["full", "full", "causal", "noise"]
    assert status.split_lens == [3, 3, 4, 4]
    assert status.packed_position_ids == [0] * 3 + [1] * 3 + [2, 3, 4, 5] + [6] * 4


# --------------------------------------------------------------------------- to_tensor
def test_to_tensor_flex_pads_to_max_num_tokens():
    packer = make_packer(use_flex=True, max_num_tokens=40)
    small, large = torch.rand(3, 2, 2), torch.rand(3, 4, 2)
    status = pack(
        packer,
        make_sample([text_item(loss=1), vae_item(loss=1)], [[1, 2]], [small]),
        make_sample([vae_item(loss=0)], [], [large]),
    )
    batch = packer.to_tensor(status)
    assert batch["sequence_length"] == 7 + 4
    assert batch["sample_lens"] == [7, 4, 40 - 11]
    assert batch["split_lens"] == [4, 3, 4, 40 - 11]
    assert batch["attn_modes"] == ["causal", "noise", "full", "causal"]
    assert "nested_attention_masks" not in batch
    assert batch["padded_images"].shape == (2, 3, 4, 2)
    assert torch.equal(batch["padded_images"][0, :, :2, :], small)
    assert torch.equal(batch["padded_images"][0, :, 2:, :], torch.zeros(3, 2, 2))
    assert torch.equal(batch["padded_images"][1], large)
    assert batch["patchified_vae_latent_shapes"] == [(1, 1), (2, 1)]
    assert batch["packed_latent_position_ids"].tolist() == [0, 0, 4]
    assert batch["packed_vae_token_indexes"].tolist() == [5, 8, 9]
    assert batch["mse_loss_indexes"].tolist() == [5]
    assert batch["packed_timesteps"].dtype == torch.float32
    assert batch["packed_timesteps"][1:].tolist() == [NEG, NEG]
    assert batch["packed_label_ids"].tolist() == [1, 2, EOS]
    assert batch["ce_loss_weights"].dtype == torch.float32
    assert batch["packed_text_ids"].dtype == torch.int64
    assert "packed_vit_tokens" not in batch
    # the accumulator is not consumed
    assert len(status.vae_image_tensors) == 2 and status.sample_lens == [7, 4]


def test_to_tensor_non_flex_keeps_masks_and_vit_tensors():
    packer = make_packer()
    status = pack(packer, make_sample([vit_item(), text_item()], [[3]], [torch.rand(3, 4, 4)]))
    batch = packer.to_tensor(status)
    assert batch["sample_lens"] == [9]
    assert [m.shape for m in batch["nested_attention_masks"]] == [(9, 9)]
    assert batch["packed_vit_tokens"].shape == (4, 12)
    assert batch["packed_vit_position_ids"].tolist() == [0, 1, 4, 5]
    assert batch["vit_token_seqlens"].tolist() == [4]
    assert batch["packed_vit_token_indexes"].tolist() == [1, 2, 3, 4]
    assert "padded_images" not in batch and "packed_timesteps" not in batch and "packed_label_ids" not in batch


def test_interpolated_positions_are_used_when_asked():
    packer = make_packer(interpolate_pos=True)
    status = pack(packer, make_sample([vit_item()], [], [torch.rand(3, 4, 6)]))
    assert status.packed_vit_position_ids[0].tolist() == [0, 1, 2, 8, 9, 10]


# --------------------------------------------------------------------------- the packing loop
def test_buffer_oversize_skip_and_dropped_on_flush():
    packer = make_packer(
        sized_groups([5, 6, 9, 4, 3, 6, 2, 7, 5, 4, 4, 4]),
        epoch=1,
        expected_num_tokens=10,
        max_num_tokens=12,
        max_num_tokens_per_sample=8,
        prefer_buffer_before=4,
        max_buffer_size=1,
    )
    with preserved_global_rng():
        batches = take(iter(packer), 4)
    # row 2 (9 tokens) is too long; row 5 waits in the buffer; row 7 overflows with a full
    # buffer, which flushes the sequence and loses row 7 (the reference behaviour).
    assert [[p for _, p in names_and_positions(b)] for b in batches] == [[0, 1], [3, 4, 6], [5, 8], [9, 10, 11]]
    assert [b["sample_lens"] for b in batches] == [[5, 6], [4, 3, 2], [6, 5], [4, 4, 4]]
    assert batches[1]["packed_text_ids"].tolist() == [BOS, 21, 22, EOS, BOS, 28, EOS, BOS, EOS]
    assert packer.drop_counts == {"oversize": 1}


def test_a_buffered_sample_that_does_not_fit_flushes_and_is_lost():
    packer = make_packer(
        sized_groups([3, 10, 10, 2]),
        epoch=1,
        expected_num_tokens=12,
        max_num_tokens=12,
        max_num_tokens_per_sample=12,
        prefer_buffer_before=6,
        max_buffer_size=1,
    )
    with preserved_global_rng():
        batches = take(iter(packer), 2)
    assert [[p for _, p in names_and_positions(b)] for b in batches] == [[0], [2, 3]]


def test_mandatory_group_opens_every_sequence_and_needs_strictly_fewer_tokens():
    groups = {
        "toy": {"dataset_names": ["d0"], "weight": 0.0, "is_mandatory": True, "kind": "sized", "sizes": [8, 3]},
        "toy_b": {"dataset_names": ["d0"], "weight": 1.0, "kind": "sized", "sizes": [4]},
    }
    packer = make_packer(
        groups,
        epoch=1,
        expected_num_tokens=10,
        max_num_tokens=12,
        max_num_tokens_per_sample=8,
        prefer_buffer_before=0,
        max_buffer_size=0,
    )
    with preserved_global_rng():
        batches = take(iter(packer), 3)
    # mandatory rows of exactly max_num_tokens_per_sample (even rows) are skipped
    assert [names_and_positions(b) for b in batches] == [
        [("toy", 1), ("toy_b", 0), ("toy_b", 1)],
        [("toy", 3), ("toy_b", 2), ("toy_b", 3)],
        [("toy", 5), ("toy_b", 4), ("toy_b", 5)],
    ]


def test_a_regular_sample_of_exactly_the_sample_limit_is_kept():
    packer = make_packer(
        sized_groups([8, 4]), epoch=1, expected_num_tokens=8, max_num_tokens=8, max_num_tokens_per_sample=8
    )
    with preserved_global_rng():
        batch = next(iter(packer))
    assert names_and_positions(batch) == [("toy", 0)] and batch["sample_lens"] == [8]


def test_groups_are_drawn_by_weight_from_the_reseeded_global_random():
    groups = {
        "toy": {"dataset_names": ["d0"], "weight": 1.0, "kind": "sized", "sizes": [3]},
        "toy_b": {"dataset_names": ["d0"], "weight": 3.0, "kind": "sized", "sizes": [3]},
        "toy_c": {"dataset_names": ["d0"], "weight": 0.0, "kind": "sized", "sizes": [3]},
    }
    packer = make_packer(groups, epoch=5, num_workers=2, expected_num_tokens=3)
    with preserved_global_rng():
        drawn = [names_and_positions(b)[0][0] for b in take(iter(packer), 200)]
    seed = ((5 * 1 + 0) * 2 + 0) & 0xFFFFFFFF  # ((seed * world + rank) * workers + worker)
    draws = random.Random(seed)
    assert drawn == ["toy" if draws.random() < 0.25 else "toy_b" for _ in range(200)]
    assert "toy_c" not in drawn and 0.6 < drawn.count("toy_b") / 200 < 0.9


def test_same_seed_same_stream_and_rank_changes_it():
    with preserved_global_rng():
        first = take(iter(make_mixed()), 6)
        second = take(iter(make_mixed()), 6)
        other_rank = take(iter(make_mixed(world_size=2, local_rank=1)), 6)
    assert_batches_equal(first, second)
    with pytest.raises(AssertionError):
        assert_batches_equal(first, other_rank)


def first_timestep(batch):
    finite = batch["packed_timesteps"][torch.isfinite(batch["packed_timesteps"])]
    return finite[0]


def test_worker_reseed_formula_sets_numpy_and_prefers_global_seed():
    with preserved_global_rng():
        np.random.seed(1234)  # overwritten by the reseed
        batch = next(iter(make_mixed(epoch=9, world_size=4, local_rank=3, num_workers=2)))
        seed = ((9 * 4 + 3) * 2 + 0) & 0xFFFFFFFF
        assert first_timestep(batch) == torch.tensor(np.random.RandomState(seed).randn(), dtype=torch.float32)

        packer = make_mixed(epoch=9)
        packer._global_seed = 17
        batch = next(iter(packer))
        assert first_timestep(batch) == torch.tensor(np.random.RandomState(17).randn(), dtype=torch.float32)


def test_worker_reseed_uses_the_dataloader_worker_id():
    packer = make_mixed(epoch=9, num_workers=2)
    loader = torch.utils.data.DataLoader(packer, batch_size=1, num_workers=2, collate_fn=collate_fn)
    with preserved_global_rng():
        batches = take(iter(loader), 2)  # batch i comes from worker i
    for worker_id, batch in enumerate(batches):
        assert {d["worker_id"] for d in batch["batch_data_indexes"]} == {worker_id}
        seed = (9 * 1 + 0) * 2 + worker_id
        assert first_timestep(batch) == torch.tensor(np.random.RandomState(seed).randn(), dtype=torch.float32)


def test_mixed_stream_has_every_kind_of_output():
    with preserved_global_rng():
        batches = take(iter(make_mixed()), 8)
    keys = set().union(*batches)
    assert {"padded_images", "packed_vit_tokens", "packed_timesteps", "packed_label_ids"} <= keys
    for batch in batches:
        assert batch["sequence_length"] == sum(batch["sample_lens"]) <= 56
        assert batch["packed_position_ids"].shape == (batch["sequence_length"],)
        assert len(batch["nested_attention_masks"]) == len(batch["batch_data_indexes"])


def test_malformed_samples_are_skipped_and_counted():
    class Broken(ToyDataset):
        def _sized(self, row):
            sample = super()._sized(row)
            if row % 2:
                sample["text_ids_list"].append([1])  # one more text than the plan has
            return sample

    packer = make_packer(sized_groups([4]), epoch=0, expected_num_tokens=8, registry={"toy": Broken})
    with preserved_global_rng():
        batches = take(iter(packer), 2)
    assert [[p for _, p in names_and_positions(b)] for b in batches] == [[0, 2], [4, 6]]
    assert packer.drop_counts["malformed"] >= 3


def test_a_group_that_runs_dry_names_itself():
    packer = make_packer(sized_groups([4], length=3), epoch=0, expected_num_tokens=100, max_num_tokens=100)
    with preserved_global_rng(), pytest.raises(RuntimeError, match="'toy' stopped yielding"):
        next(iter(packer))


def test_a_second_iter_continues_the_datasets_with_a_fresh_reseed():
    packer = make_packer(sized_groups([4]), epoch=0, expected_num_tokens=8)
    with preserved_global_rng():
        first = next(iter(packer))
        second = next(iter(packer))
    assert [p for _, p in names_and_positions(first)] == [0, 1]
    assert [p for _, p in names_and_positions(second)] == [2, 3]


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
            "a": {"data_dir": "/data/a", "parquet_info_path": str(info_a), "backend": "webdataset"},
            "b": {"data_dir": "/data/b", "parquet_info_path": str(info_b), "backend": "webdataset"},
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
        "backend": "webdataset",
        "parquet_info": {"/data/a/0.parquet": {"num_row_groups": 2}, "/data/b/0.parquet": {"num_row_groups": 3}},
    }
    assert toy_b.extra == {"storage_options": {"anon": True}}
    assert toy.init_data_status is None  # resume_data_status False
    assert toy_b.init_data_status == [4]
    assert toy.dataset_name == "toy" and toy.num_workers == 0 and toy.world_size == 1


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
            {"toy": {"dataset_names": ["d0"], "weight": 1.0, "frame_sampler_args": {}}},
            None,
            ValueError,
            "frame_sampler_args",
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
    with pytest.raises(TypeError):
        BagelDatasetConfig({"toy": {}}, 0.2)  # everything but grouped_datasets is keyword-only


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
