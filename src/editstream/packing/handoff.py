"""The image tensors of a packed batch: float32 as the reference builds them, or the opt-in uint8 hand-off
(kept uint8 only when every image behind a tensor is uint8 with a known ``(mean, std)``)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch

from .normalize import as_stats, normalize_uint8


def _handed_off(images: Sequence[torch.Tensor], norms: Sequence[Any], image_dtype: str) -> bool:
    return (
        image_dtype == "uint8"
        and len(norms) == len(images)
        and all(norm is not None and image.dtype == torch.uint8 for image, norm in zip(images, norms))
    )


def _stats_lists(norms: Sequence[Any]) -> dict[str, list[list[float]]]:
    stats = [as_stats(norm) for norm in norms]
    return {"mean": [list(mean) for mean, _ in stats], "std": [list(std) for _, std in stats]}


def padded_vae_images(
    images: Sequence[torch.Tensor], norms: Sequence[Any], image_dtype: str
) -> tuple[torch.Tensor, dict[str, Any] | None]:
    """``padded_images`` (zero padding to the largest size) and its ``image_normalization`` entry, if uint8."""
    largest = [max(sizes) for sizes in zip(*(image.shape for image in images))]
    uint8 = _handed_off(images, norms, image_dtype)
    padded = torch.zeros(size=(len(images), *largest), dtype=torch.uint8 if uint8 else None)
    for i, (image, norm) in enumerate(zip(images, norms, strict=True)):
        if not uint8 and norm is not None and image.dtype == torch.uint8:
            image = normalize_uint8(image, norm, 0)
        padded[i, :, : image.shape[1], : image.shape[2]] = image
    if not uint8:
        return padded, None
    return padded, {**_stats_lists(norms), "sizes": [[int(image.shape[1]), int(image.shape[2])] for image in images]}


def packed_vit_tokens(
    tokens: Sequence[torch.Tensor], norms: Sequence[Any], image_dtype: str
) -> tuple[torch.Tensor, dict[str, Any] | None]:
    """``packed_vit_tokens`` (patchified images, concatenated) and its ``image_normalization`` entry, if uint8."""
    if _handed_off(tokens, norms, image_dtype):
        entry = {**_stats_lists(norms), "lengths": [int(t.shape[0]) for t in tokens]}
        return torch.cat(list(tokens), dim=0), entry
    floats = []
    for part, norm in zip(tokens, norms):
        if norm is not None and part.dtype == torch.uint8:
            channels = len(as_stats(norm)[0])
            part = normalize_uint8(part.reshape(part.shape[0], -1, channels), norm, -1).view(part.shape)
        floats.append(part)
    return torch.cat(floats, dim=0), None
