"""Twin of NeMo's ``multimodal.utils``: position ids, patchify, attention masks, loss weights, tokens."""

from __future__ import annotations

import math
import random
from typing import Any

from ..loader.decode import pil_img2rgb
from ..packing.sequence import (
    get_flattened_position_ids_extrapolate,
    get_flattened_position_ids_interpolate,
    len2weight,
    patchify,
    prepare_attention_mask_per_sample,
)

__all__ = [
    "add_special_tokens",
    "get_flattened_position_ids_extrapolate",
    "get_flattened_position_ids_interpolate",
    "len2weight",
    "patchify",
    "pil_img2rgb",
    "prepare_attention_mask_per_sample",
    "split_integer_exp_decay",
]

BAGEL_TOKENS = {
    "bos_token_id": "<|im_start|>",
    "eos_token_id": "<|im_end|>",
    "start_of_image": "<|vision_start|>",
    "end_of_image": "<|vision_end|>",
}
"""The packer's special-token keys and the Qwen2 tokens BAGEL uses for them."""


def split_integer_exp_decay(S: int, ng_sample_decay: float = 1.0) -> tuple[list[int], list[int]]:
    """Split ``S`` into random positive parts, ``(parts, cumulative bounds)``: as many as a uniform draw (or,
    with ``ng_sample_decay`` < 1, a geometrically decaying one) says, from the global ``random`` in NeMo's order
    (``S``: NeMo's keyword name)."""
    total = S
    if ng_sample_decay == 1.0:
        parts = random.randint(1, total)
    else:
        norm = (1 - ng_sample_decay) / (1 - math.pow(ng_sample_decay, total))
        weights = [norm * math.pow(ng_sample_decay, i) for i in range(total)]
        parts = random.choices(list(range(1, total + 1)), weights, k=1)[0]
    bounds = [0, *sorted(random.sample(range(1, total), parts - 1)), total]
    return [bounds[i + 1] - bounds[i] for i in range(len(bounds) - 1)], bounds


def add_special_tokens(tokenizer: Any) -> tuple[Any, dict[str, int], int]:
    """Add BAGEL's four tokens to a Hugging Face tokenizer where missing: ``(tokenizer, special_tokens, added)``."""
    present: set[str] = set()
    for value in tokenizer.special_tokens_map.values():
        present.update([value] if isinstance(value, str) else list(value))
    missing = [token for token in BAGEL_TOKENS.values() if token not in present]
    added = int(tokenizer.add_tokens(missing))
    ids = {key: int(tokenizer.convert_tokens_to_ids(token)) for key, token in BAGEL_TOKENS.items()}
    return tokenizer, ids, added
