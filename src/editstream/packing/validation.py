"""What a packer accepts from a dataset: a sample dict whose plan, texts and images agree."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import torch

from ..loader.pixels import NORMALIZATION_KEY
from .spec import is_int, is_real

PLAN_TYPES = ("text", "vit_image", "vae_image")
SAMPLE_KEYS = ("sequence_plan", "text_ids_list", "image_tensor_list", "num_tokens", "data_indexes")


def sample_problem(sample: Any, vit_patch_size: int) -> str | None:
    """Why ``sample`` cannot be packed, or ``None`` when it can."""
    if not isinstance(sample, Mapping):
        return f"sample is a {type(sample).__name__}, not a dict"
    missing = [key for key in SAMPLE_KEYS if key not in sample]
    if missing:
        return f"sample lacks {missing}"
    if not is_int(sample["num_tokens"]):
        return f"num_tokens is {sample['num_tokens']!r}, not an int"
    return _plan_problem(sample, vit_patch_size) or _normalization_problem(sample)


def _plan_problem(sample: Mapping[str, Any], vit_patch_size: int) -> str | None:
    """Why a sample's plan does not agree with its texts and images, or ``None``."""
    images = sample["image_tensor_list"]
    n_text = n_image = 0
    seen_vae = False
    for position, item in enumerate(sample["sequence_plan"]):
        if not isinstance(item, Mapping) or item.get("type") not in PLAN_TYPES:
            return f"plan item {position} is not a text/vit_image/vae_image item: {item!r}"
        lacking = [key for key in ("enable_cfg", "loss", "special_token_loss") if key not in item]
        if lacking:
            return f"plan item {position} lacks {lacking}"
        if item["type"] == "text":
            n_text += 1
            continue
        image = images[n_image] if n_image < len(images) else None
        n_image += 1
        problem = _image_problem(position, item, image, vit_patch_size, seen_vae)
        if problem is not None:
            return problem
        seen_vae = seen_vae or item["type"] == "vae_image"
    if n_text != len(sample["text_ids_list"]):
        return f"plan has {n_text} text items but text_ids_list has {len(sample['text_ids_list'])}"
    if n_image != len(images):
        return f"plan has {n_image} image items but image_tensor_list has {len(images)}"
    return None


def _image_problem(position: int, item: Mapping[str, Any], image: Any, patch: int, seen_vae: bool) -> str | None:
    """Why the image of an image plan item cannot be packed, or ``None``."""
    if not isinstance(image, torch.Tensor) or image.dim() != 3:
        return f"image for plan item {position} is not a CxHxW tensor"
    if item["type"] == "vit_image":
        if image.shape[1] % patch or image.shape[2] % patch:
            return f"vit image {tuple(image.shape)} is not a multiple of the patch size {patch}"
    elif item["loss"] == 1 and not item.get("split_start", True) and not seen_vae:
        return f"plan item {position} continues a vae split that was never started"
    return None


def _is_triple(value: Any) -> bool:
    return isinstance(value, (list, tuple)) and len(value) == 3 and all(is_real(v) for v in value)


def _normalization_problem(sample: Mapping[str, Any]) -> str | None:
    """Why a sample's ``image_normalization`` (opt-in uint8 images) cannot be used, or ``None``."""
    if NORMALIZATION_KEY not in sample:
        return None
    norms = sample[NORMALIZATION_KEY]
    images = sample["image_tensor_list"]
    if not isinstance(norms, (list, tuple)) or len(norms) != len(images):
        return f"{NORMALIZATION_KEY} must list one (mean, std) or None per image ({len(images)}), got {norms!r}"
    for position, (norm, image) in enumerate(zip(norms, images)):
        if norm is None:
            continue
        if not (isinstance(norm, (list, tuple)) and len(norm) == 2 and _is_triple(norm[0]) and _is_triple(norm[1])):
            return f"{NORMALIZATION_KEY}[{position}] is not (mean, std) of 3 numbers each: {norm!r}"
        if any(v == 0 for v in norm[1]):
            return f"{NORMALIZATION_KEY}[{position}] has a zero std: {norm!r}"
        if image.dtype == torch.uint8 and image.shape[0] != 3:
            return f"uint8 image {position} has {image.shape[0]} channels; a normalization needs 3"
    return None
