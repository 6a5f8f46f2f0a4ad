"""Sequence helpers on small hand-worked cases."""

from __future__ import annotations

import math

import pytest
import torch

from editstream.packing.sequence import (
    get_flattened_position_ids_extrapolate,
    get_flattened_position_ids_interpolate,
    len2weight,
    patchify,
    prepare_attention_mask_per_sample,
)

NEG = float("-inf")


def _mask_from_allowed(rows: list[list[int]]) -> torch.Tensor:
    return torch.tensor([[0.0 if ok else NEG for ok in row] for row in rows])


def test_patchify_orders_patch_rows_then_pixels_then_channels():
    # x[c, h, w] = 8c + 4h + w: two channels, 2x4 pixels, 2x2 patches -> one row of two patches.
    image = torch.arange(16, dtype=torch.float32).reshape(2, 2, 4)
    patches = patchify(image, 2)
    assert patches.shape == (2, 8)
    assert patches[0].tolist() == [0, 8, 1, 9, 4, 12, 5, 13]
    assert patches[1].tolist() == [2, 10, 3, 11, 6, 14, 7, 15]


def test_patchify_walks_the_patch_grid_row_major():
    image = torch.arange(8, dtype=torch.float32).reshape(1, 4, 2)  # x[0, h, w] = 2h + w
    patches = patchify(image, 2)
    assert patches.tolist() == [[0, 1, 2, 3], [4, 5, 6, 7]]
    assert patches.dtype == torch.float32


def test_patchify_rejects_sizes_that_are_not_multiples():
    with pytest.raises(ValueError, match="3x4"):
        patchify(torch.zeros(3, 3, 4), 2)


def test_position_ids_extrapolate_use_the_full_grid_width():
    ids = get_flattened_position_ids_extrapolate(4, 6, 2, max_num_patches_per_side=10)
    assert ids.tolist() == [0, 1, 2, 10, 11, 12]
    assert ids.dtype == torch.int64


def test_position_ids_interpolate_bucket_fractional_coordinates():
    # rows at fractions [0, 1/2] -> bins [0, 2]; columns at [0, 1/3, 2/3] -> bins [0, 1, 2] (4 bins).
    ids = get_flattened_position_ids_interpolate(4, 6, 2, max_num_patches_per_side=4)
    assert ids.tolist() == [0, 1, 2, 8, 9, 10]


def test_position_ids_interpolate_squeeze_a_larger_grid():
    # 8 patch rows onto 4 bins: fractions 0, .125, ..., .875 -> 0,0,1,1,2,2,3,3 (a bin edge counts up).
    ids = get_flattened_position_ids_interpolate(8, 1, 1, max_num_patches_per_side=4)
    assert ids.tolist() == [0, 0, 4, 4, 8, 8, 12, 12]


def test_attention_mask_causal_noise_full():
    mask = prepare_attention_mask_per_sample([2, 1, 1], ["causal", "noise", "full"])
    # The noise token (2) sees everything before it and itself; nobody else sees it.
    expected = _mask_from_allowed(
        [
            [1, 0, 0, 0],
            [1, 1, 0, 0],
            [1, 1, 1, 0],
            [1, 1, 0, 1],
        ]
    )
    assert mask.dtype == torch.float32
    assert torch.equal(mask, expected)


def test_attention_mask_full_then_causal():
    mask = prepare_attention_mask_per_sample([2, 2], ["full", "causal"])
    expected = _mask_from_allowed(
        [
            [1, 1, 0, 0],
            [1, 1, 0, 0],
            [1, 1, 1, 0],
            [1, 1, 1, 1],
        ]
    )
    assert torch.equal(mask, expected)


def test_attention_mask_rejects_unknown_modes_and_length_mismatch():
    with pytest.raises(ValueError, match="sliding"):
        prepare_attention_mask_per_sample([2], ["sliding"])
    with pytest.raises(ValueError, match="2 split lengths but 1"):
        prepare_attention_mask_per_sample([1, 1], ["full"])


def test_len2weight():
    assert len2weight(4) == 0.5
    assert math.isclose(len2weight(3), 1 / math.sqrt(3))
    assert len2weight(0) == 0
    assert len2weight(4, "sample") == 0.25
    assert len2weight(4, "token") == 1
    with pytest.raises(ValueError, match="mean"):
        len2weight(4, "mean")
