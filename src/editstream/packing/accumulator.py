"""One packed sequence being built: its accumulator, the per-item packing steps (cfg dropout and timesteps drawn
in the reference's order, so the same seed packs the same bits), and ``to_tensor``."""

from __future__ import annotations

import random
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch

from ..loader.pixels import NORMALIZATION_KEY
from .handoff import packed_vit_tokens, padded_vae_images
from .normalize import BATCH_KEY
from .sequence import len2weight, patchify, prepare_attention_mask_per_sample
from .spec import PackingSpec


@dataclass
class SequenceStatus:
    """The accumulator of one packed sequence: token ids, indexes and tensors appended sample by sample."""

    curr: int = 0
    sample_lens: list[int] = field(default_factory=list)
    packed_position_ids: list[int] = field(default_factory=list)
    nested_attention_masks: list[torch.Tensor] = field(default_factory=list)
    split_lens: list[int] = field(default_factory=list)
    attn_modes: list[str] = field(default_factory=list)
    packed_text_ids: list[int] = field(default_factory=list)
    packed_text_indexes: list[int] = field(default_factory=list)
    packed_label_ids: list[int] = field(default_factory=list)
    ce_loss_indexes: list[int] = field(default_factory=list)
    ce_loss_weights: list[float] = field(default_factory=list)
    vae_image_tensors: list[torch.Tensor] = field(default_factory=list)
    packed_latent_position_ids: list[torch.Tensor] = field(default_factory=list)
    vae_latent_shapes: list[tuple[int, int]] = field(default_factory=list)
    packed_vae_token_indexes: list[int] = field(default_factory=list)
    packed_timesteps: list[float] = field(default_factory=list)
    mse_loss_indexes: list[int] = field(default_factory=list)
    packed_vit_tokens: list[torch.Tensor] = field(default_factory=list)
    vit_token_seqlens: list[int] = field(default_factory=list)
    packed_vit_position_ids: list[torch.Tensor] = field(default_factory=list)
    packed_vit_token_indexes: list[int] = field(default_factory=list)
    vae_image_normalization: list[Any] = field(default_factory=list)
    vit_token_normalization: list[Any] = field(default_factory=list)


@dataclass(frozen=True)
class SpecialTokens:
    """The token ids the packer inserts around text and images."""

    bos_token_id: int
    eos_token_id: int
    start_of_image: int
    end_of_image: int


PositionIds = Callable[..., torch.Tensor]


@dataclass
class _SampleCursor:
    """Where packing of the current sample stands (the reference's local variables)."""

    curr: int
    rope_id: int = 0
    sample_len: int = 0
    split_len: int = 0
    timestep: float | None = None
    split_lens: list[int] = field(default_factory=list)
    attn_modes: list[str] = field(default_factory=list)


def _token(status: SequenceStatus, token_id: int, cursor: _SampleCursor, item: Mapping[str, Any] | None = None) -> None:
    """Append a marker token at the cursor; a closing one (``item`` given) with a CE loss when the item asks."""
    status.packed_text_ids.append(token_id)
    status.packed_text_indexes.append(cursor.curr)
    if item is not None and item["special_token_loss"] == 1:
        status.ce_loss_indexes.append(cursor.curr)
        status.ce_loss_weights.append(1.0)
        status.packed_label_ids.append(item["special_token_label"])
    cursor.curr += 1
    cursor.split_len += 1


@dataclass
class SamplePacker:
    """Packs samples into a :class:`SequenceStatus` with one spec, token set and position rule; makes it a batch."""

    config: PackingSpec
    tokens: SpecialTokens
    position_ids: PositionIds

    def pack(self, sample: Mapping[str, Any], status: SequenceStatus) -> SequenceStatus:
        """Append one sample to ``status`` and return it (the sample itself is not modified)."""
        texts = iter(sample["text_ids_list"])
        images = iter(sample["image_tensor_list"])
        norms = iter(sample.get(NORMALIZATION_KEY) or ())
        cursor = _SampleCursor(curr=status.curr)
        for item in sample["sequence_plan"]:
            if item.get("split_start", True):
                cursor.split_len = 0
            kind = item["type"]
            packed = True
            if kind == "text":
                packed = self._text(status, item, list(next(texts)), cursor)
            elif kind == "vit_image":
                packed = self._vit(status, item, next(images), cursor, next(norms, None))
            elif kind == "vae_image":
                packed = self._vae(status, item, next(images), cursor, sample, norm=next(norms, None))
            if not packed:
                continue  # dropped for cfg: the item does not close a split either
            if item.get("split_end", True):
                cursor.split_lens.append(cursor.split_len)
                cursor.sample_len += cursor.split_len
        status.curr = cursor.curr
        status.sample_lens.append(cursor.sample_len)
        if self.config.use_flex:
            status.split_lens.extend(cursor.split_lens)
            status.attn_modes.extend(cursor.attn_modes)
        else:
            status.nested_attention_masks.append(
                prepare_attention_mask_per_sample(cursor.split_lens, cursor.attn_modes)
            )
        return status

    def _text(
        self, status: SequenceStatus, item: Mapping[str, Any], text_ids: list[int], cursor: _SampleCursor
    ) -> bool:
        if item["enable_cfg"] == 1 and random.random() < self.config.text_cond_dropout_prob:
            return False
        shifted = [self.tokens.bos_token_id] + text_ids
        span = range(cursor.curr, cursor.curr + len(shifted))
        status.packed_text_ids.extend(shifted)
        status.packed_text_indexes.extend(span)
        if item["loss"] == 1:
            status.ce_loss_indexes.extend(span)
            status.ce_loss_weights.extend([len2weight(len(shifted))] * len(shifted))
            status.packed_label_ids.extend(text_ids + [self.tokens.eos_token_id])
        cursor.curr += len(shifted)
        cursor.split_len += len(shifted)
        _token(status, self.tokens.eos_token_id, cursor, item)
        cursor.attn_modes.append("causal")
        status.packed_position_ids.extend(range(cursor.rope_id, cursor.rope_id + cursor.split_len))
        cursor.rope_id += cursor.split_len
        return True

    def _vit(
        self, status: SequenceStatus, item: Mapping[str, Any], image: torch.Tensor, cursor: _SampleCursor, norm: Any
    ) -> bool:
        cfg = self.config
        if item["enable_cfg"] == 1 and random.random() < cfg.vit_cond_dropout_prob:
            cursor.rope_id += 1
            return False
        _token(status, self.tokens.start_of_image, cursor)
        vit_tokens = patchify(image, cfg.vit_patch_size)
        n_tokens = vit_tokens.shape[0]
        status.packed_vit_token_indexes.extend(range(cursor.curr, cursor.curr + n_tokens))
        cursor.curr += n_tokens
        cursor.split_len += n_tokens
        status.packed_vit_tokens.append(vit_tokens)
        status.vit_token_normalization.append(norm)
        status.vit_token_seqlens.append(n_tokens)
        status.packed_vit_position_ids.append(
            self.position_ids(
                image.size(1), image.size(2), cfg.vit_patch_size, max_num_patches_per_side=cfg.max_num_patch_per_side
            )
        )
        _token(status, self.tokens.end_of_image, cursor, item)
        cursor.attn_modes.append("full")
        status.packed_position_ids.extend([cursor.rope_id] * cursor.split_len)
        cursor.rope_id += 1
        return True

    def _vae(
        self,
        status: SequenceStatus,
        item: Mapping[str, Any],
        image: torch.Tensor,
        cursor: _SampleCursor,
        sample: Mapping[str, Any],
        norm: Any = None,
    ) -> bool:
        cfg = self.config
        if item["enable_cfg"] == 1 and random.random() < cfg.vae_cond_dropout_prob:
            cursor.rope_id += 1
            return False
        split_start = item.get("split_start", True)
        _token(status, self.tokens.start_of_image, cursor)
        status.vae_image_tensors.append(image)
        status.vae_image_normalization.append(norm)
        status.packed_latent_position_ids.append(
            self.position_ids(
                image.size(1), image.size(2), cfg.vae_image_downsample, max_num_patches_per_side=cfg.max_latent_size
            )
        )
        latent_h = image.shape[1] // cfg.vae_image_downsample
        latent_w = image.shape[2] // cfg.vae_image_downsample
        status.vae_latent_shapes.append((latent_h, latent_w))
        n_tokens = latent_h * latent_w
        status.packed_vae_token_indexes.extend(range(cursor.curr, cursor.curr + n_tokens))
        if item["loss"] == 1:
            status.mse_loss_indexes.extend(range(cursor.curr, cursor.curr + n_tokens))
            if split_start:
                cursor.timestep = np.random.randn()
            elif cursor.timestep is None:
                raise ValueError(
                    f"sample {sample.get('data_indexes')}: a vae_image with loss continues a split "
                    "(split_start False) that no earlier vae_image started"
                )
        else:
            cursor.timestep = float("-inf")
        status.packed_timesteps.extend([cursor.timestep] * n_tokens)
        cursor.curr += n_tokens
        cursor.split_len += n_tokens
        _token(status, self.tokens.end_of_image, cursor, item)
        if split_start:
            cursor.attn_modes.append("noise" if item["loss"] == 1 and "frame_delta" not in item else "full")
        status.packed_position_ids.extend([cursor.rope_id] * (n_tokens + 2))
        if "frame_delta" in item:
            cursor.rope_id += item["frame_delta"]
        elif item["loss"] == 0:
            cursor.rope_id += 1
        return True

    def to_tensor(self, status: SequenceStatus) -> dict[str, Any]:
        """The batch dict the model consumes: flex mode adds one causal padding split up to ``max_num_tokens``, else
        per-sample ``nested_attention_masks``; uint8 images come with ``image_normalization``."""
        length = sum(status.sample_lens)
        data: dict[str, Any] = {
            "sequence_length": length,
            "sample_lens": list(status.sample_lens),
            "packed_text_ids": torch.tensor(status.packed_text_ids),
            "packed_text_indexes": torch.tensor(status.packed_text_indexes),
            "packed_position_ids": torch.tensor(status.packed_position_ids),
        }
        if self.config.use_flex:
            pad = self.config.max_num_tokens - length
            data["split_lens"] = list(status.split_lens) + [pad]
            data["attn_modes"] = list(status.attn_modes) + ["causal"]
            data["sample_lens"].append(pad)
        else:
            data["nested_attention_masks"] = list(status.nested_attention_masks)
        handoff = _add_images(data, status, self.config.image_dtype)
        if status.packed_timesteps:
            data["packed_timesteps"] = torch.tensor(status.packed_timesteps)
            data["mse_loss_indexes"] = torch.tensor(status.mse_loss_indexes)
        if status.packed_label_ids:
            data["packed_label_ids"] = torch.tensor(status.packed_label_ids)
            data["ce_loss_indexes"] = torch.tensor(status.ce_loss_indexes)
            data["ce_loss_weights"] = torch.tensor(status.ce_loss_weights)
        if handoff:
            data[BATCH_KEY] = handoff
        return data


def _add_images(data: dict[str, Any], status: SequenceStatus, image_dtype: str) -> dict[str, Any]:
    """Add the image groups to ``data``; returns the ``image_normalization`` of its uint8 tensors."""
    handoff: dict[str, Any] = {}
    if status.vae_image_tensors:
        images, norms = status.vae_image_tensors, status.vae_image_normalization
        data["padded_images"], handoff["padded_images"] = padded_vae_images(images, norms, image_dtype)
        data["patchified_vae_latent_shapes"] = list(status.vae_latent_shapes)
        data["packed_latent_position_ids"] = torch.cat(status.packed_latent_position_ids, dim=0)
        data["packed_vae_token_indexes"] = torch.tensor(status.packed_vae_token_indexes)
    if status.packed_vit_tokens:
        tokens, norms = status.packed_vit_tokens, status.vit_token_normalization
        data["packed_vit_tokens"], handoff["packed_vit_tokens"] = packed_vit_tokens(tokens, norms, image_dtype)
        data["packed_vit_position_ids"] = torch.cat(status.packed_vit_position_ids, dim=0)
        data["packed_vit_token_indexes"] = torch.tensor(status.packed_vit_token_indexes)
        data["vit_token_seqlens"] = torch.tensor(status.vit_token_seqlens)
    return {key: entry for key, entry in handoff.items() if entry is not None}
