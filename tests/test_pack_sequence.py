"""PackedDataset.pack_sequence and to_tensor on hand-made samples: indexes, positions, masks,
loss targets, timesteps, cfg dropout draws and padding."""

from __future__ import annotations

import math
import random

import numpy as np
import torch

from editstream.packing.sequence import patchify, prepare_attention_mask_per_sample
from helpers import (
    BOS,
    EOI,
    EOS,
    NEG,
    SOI,
    make_packer,
    make_sample,
    pack,
    preserved_global_rng,
    text_item,
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
