"""One VLM fine-tuning JSONL line -> one sample, in the reference's two steps: the read line's rule for a video
(:func:`expand_video_marker`, in its try-block) and :func:`build_sample` from the conversation's elements."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from editstream.plugin import NORMALIZATION_KEY, plan_item, share_one_storage, transform_image

VIDEO_MARKER = "<video>"
IMAGE_MARKER = "<image>"


def expand_video_marker(item: Any, frames: Any) -> None:
    """Replace ``<video>`` in the first turn of a video line by one ``<image>`` per frame drawn (``frames``, as the
    sampler returned them); raises when the first turn has none (the reference checks only that turn)."""
    markers = IMAGE_MARKER * len(frames)
    for turn in item["conversations"]:
        if VIDEO_MARKER in turn["value"]:
            turn["value"] = turn["value"].replace(VIDEO_MARKER, markers)
            break
        raise ValueError("Cannot find <video> in the conversation!")


def change_format(data: Any, num_images: int) -> list[dict[str, Any]]:
    """The conversation as text and image elements (the reference's ``change_format``, quirks kept:
    ``i`` of ``i < num_images`` counts within a turn, other speakers are skipped)."""
    elements: list[dict[str, Any]] = []
    for turn in data["conversations"]:
        if turn["from"] == "human":
            if IMAGE_MARKER not in turn["value"]:
                elements.append({"type": "text", "has_loss": 0, "text": turn["value"]})
                continue
            pieces = turn["value"].split(IMAGE_MARKER)
            for index, piece in enumerate(pieces):
                if piece.strip() != "":
                    elements.append({"type": "text", "has_loss": 0, "text": piece.strip()})
                if index != len(pieces) - 1 and index < num_images:
                    elements.append({"type": "image"})
        elif turn["from"] == "gpt":
            elements.append({"type": "text", "has_loss": 1, "text": turn["value"]})
    return elements


def build_sample(
    data: Any,
    images: list[Any] | None,
    transform: Any,
    stride: int,
    tokenizer: Any,
    image_dtype: str = "float32",
    *,
    elements: Callable[[Any, int], list[dict[str, Any]]] = change_format,
) -> dict[str, Any] | None:
    """The sample dict of a read row in the reference's key order, or ``None`` when it has no loss item
    (``elements``: the row's text and image elements, a dataset's ``change_format`` hook)."""
    image_tensor_list: list[Any] = []
    normalizations: list[Any] = []
    text_ids_list: list[list[int]] = []
    sequence_plan: list[dict[str, Any]] = []
    num_tokens = 0
    for image in images or []:
        tensor, norm = transform_image(transform, image, image_dtype, img_num=len(images or []))
        image_tensor_list.append(tensor)
        normalizations.append(norm)
        height, width = tensor.shape[1:]
        num_tokens += width * height // stride**2
    for element in elements(data, len(image_tensor_list)):
        if element["type"] == "text":
            ids = tokenizer.encode(element["text"])
            if len(ids) > 0:
                text_ids_list.append(ids)
                num_tokens += len(ids)
                sequence_plan.append(plan_item("text", 0, element["has_loss"]))
        elif element["type"] == "image":
            sequence_plan.append(plan_item("vit_image", 0, 0))
    if sum(item["loss"] for item in sequence_plan) == 0:
        return None
    sample = {
        "image_tensor_list": image_tensor_list,
        "text_ids_list": text_ids_list,
        "sequence_plan": sequence_plan,
        "num_tokens": num_tokens,
    }
    if image_dtype == "uint8":
        sample[NORMALIZATION_KEY] = normalizations
        share_one_storage(sample)
    return sample
