"""Collating packed batches (one packed sequence per step): the reference's ``SimpleCustomBatch``, or the dict;
a uint8 hand-off stays uint8 through ``pin_memory()`` and is normalized on the device by ``cuda()`` / ``to()``."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import torch

from .normalize import BATCH_KEY, normalize_entries

_ALWAYS = (
    "sequence_length",
    "sample_lens",
    "packed_text_ids",
    "packed_text_indexes",
    "packed_position_ids",
    "batch_data_indexes",
)
"""The keys every packed batch has, in the reference's order."""
_VAE = ("padded_images", "patchified_vae_latent_shapes", "packed_latent_position_ids", "packed_vae_token_indexes")
_VIT = ("packed_vit_tokens", "packed_vit_position_ids", "packed_vit_token_indexes", "vit_token_seqlens")
_TIMESTEPS = ("packed_timesteps", "mse_loss_indexes")
_LABELS = ("packed_label_ids", "ce_loss_indexes", "ce_loss_weights")
_OPTIONAL_GROUPS = (_VAE, _VIT, _TIMESTEPS, _LABELS)

# The tensors ``pin_memory`` / ``cuda`` move, in the reference's order (lists, ints and shapes stay put).
_MOVED = (
    ("packed_text_ids", "packed_text_indexes", "packed_position_ids"),
    ("padded_images", "packed_vae_token_indexes", "packed_latent_position_ids"),
    _TIMESTEPS,
    _VIT,
    _LABELS,
)


class SimpleCustomBatch:
    """One packed batch as an object (``batch.packed_text_ids`` ...), optional groups only when present;
    ``use_flex``: the batch has ``split_lens`` / ``attn_modes``, not ``nested_attention_masks``."""

    def __init__(self, batch: Any) -> None:
        data = _single(batch)
        for key in _ALWAYS:
            setattr(self, key, data[key])
        self.use_flex = "nested_attention_masks" not in data
        if self.use_flex:
            self.split_lens = data["split_lens"]
            self.attn_modes = data["attn_modes"]
        else:
            self.nested_attention_masks = data["nested_attention_masks"]
        for group in _OPTIONAL_GROUPS:
            if group[0] in data:
                for key in group:
                    setattr(self, key, data[key])
        if data.get(BATCH_KEY):
            self.image_normalization = data[BATCH_KEY]

    def normalize(self) -> SimpleCustomBatch:
        """Turn uint8 hand-off images into the float32 batch's tensors, on their device (no-op otherwise)."""
        spec = self.__dict__.pop(BATCH_KEY, None)
        if spec:
            for key, value in normalize_entries({key: getattr(self, key) for key in spec}, spec).items():
                setattr(self, key, value)
        return self

    def _move(self, fn: Callable[[torch.Tensor], torch.Tensor]) -> SimpleCustomBatch:
        for group in _MOVED:
            for key in group:
                value = getattr(self, key, None)
                if isinstance(value, torch.Tensor):
                    setattr(self, key, fn(value))
            if group[0] == "packed_text_ids" and not self.use_flex:
                self.nested_attention_masks = [fn(mask) for mask in self.nested_attention_masks]
        return self

    def pin_memory(self) -> SimpleCustomBatch:
        """Pin every tensor (the DataLoader's pin-memory thread calls this); uint8 images stay uint8."""
        return self._move(lambda t: t.pin_memory())

    def to(self, device: Any) -> SimpleCustomBatch:
        """Move every tensor to ``device`` (``"cpu"`` included), then normalize uint8 hand-off images there."""
        return self._move(lambda t: t.to(device)).normalize()

    cuda = to
    """The reference's name for :meth:`to` (its recipe calls ``batch.cuda(device)``)."""

    def to_dict(self) -> dict[str, Any]:
        """The batch as a dict, in the reference's key order (groups present only when set)."""
        keys = list(_ALWAYS)
        keys += ["split_lens", "attn_modes"] if self.use_flex else ["nested_attention_masks"]
        keys += [key for group in _OPTIONAL_GROUPS if hasattr(self, group[0]) for key in group]
        if hasattr(self, BATCH_KEY):
            keys.append(BATCH_KEY)
        return {key: getattr(self, key) for key in keys}


def _single(batch: Any) -> Mapping[str, Any]:
    if isinstance(batch, Mapping):
        return batch
    if isinstance(batch, (list, tuple)) and len(batch) == 1 and isinstance(batch[0], Mapping):
        return batch[0]
    size = len(batch) if isinstance(batch, (list, tuple)) else type(batch).__name__
    raise ValueError(f"a packed batch is one packed sequence (DataLoader batch_size=1), got {size}")


def bagel_packed_collate_fn(batch: Any) -> SimpleCustomBatch:
    """DataLoader collate: the one packed sequence of a step as a :class:`SimpleCustomBatch`."""
    return SimpleCustomBatch(batch)


def collate_wrapper() -> Callable[[Any], SimpleCustomBatch]:
    """The reference's factory for :func:`bagel_packed_collate_fn`."""
    return bagel_packed_collate_fn


def collate_fn(batch: Any) -> dict[str, Any]:
    """DataLoader collate returning the packed dict itself (``batch_size=1``, or ``None``: the dict as given)."""
    return dict(_single(batch))
