"""Tensor helpers of one packed sequence (patches, position ids, attention masks, loss weights), BAGEL's numerics."""

from __future__ import annotations

from collections.abc import Callable

import torch

ATTENTION_MODES = ("causal", "full", "noise")


def patchify(image: torch.Tensor, patch_size: int) -> torch.Tensor:
    """Cut a CxHxW image into ``(H/p * W/p, p*p*C)`` patches, row-major, channel innermost (the ViT's layout)."""
    if image.dim() != 3:
        raise ValueError(f"patchify expects a CxHxW tensor, got shape {tuple(image.shape)}")
    channels, height, width = image.shape
    p = int(patch_size)
    if p <= 0 or height % p or width % p:
        raise ValueError(f"image of size {height}x{width} cannot be cut into {p}x{p} patches")
    grid = image.reshape(channels, height // p, p, width // p, p)
    # (c, gh, ph, gw, pw) -> (gh, gw, ph, pw, c)
    grid = grid.permute(1, 3, 2, 4, 0)
    return grid.reshape(-1, p * p * channels)


def get_flattened_position_ids_extrapolate(
    img_h: int, img_w: int, patch_size: int, max_num_patches_per_side: int
) -> torch.Tensor:
    """Position id of every patch as ``row * max_num_patches_per_side + col``: large images extrapolate."""
    rows = torch.arange(0, img_h // patch_size)
    cols = torch.arange(0, img_w // patch_size)
    return (rows.unsqueeze(1) * max_num_patches_per_side + cols).reshape(-1)


def get_flattened_position_ids_interpolate(
    img_h: int, img_w: int, patch_size: int, max_num_patches_per_side: int
) -> torch.Tensor:
    """Position ids of the patch grid squeezed onto a ``max x max`` grid (offsets in [0, 1) bucketed into bins)."""
    n_rows = img_h // patch_size
    n_cols = img_w // patch_size
    step = 1 / max_num_patches_per_side
    edges = torch.arange(step, 1.0, step)
    row_bins = torch.bucketize(torch.arange(0, 1 - 1e-6, 1 / n_rows), edges, right=True)
    col_bins = torch.bucketize(torch.arange(0, 1 - 1e-6, 1 / n_cols), edges, right=True)
    return (row_bins.unsqueeze(1) * max_num_patches_per_side + col_bins).reshape(-1)


def flattened_position_ids(interpolate_pos: bool) -> Callable[[int, int, int, int], torch.Tensor]:
    """The position-id rule of a spec's ``interpolate_pos``: interpolating, or extrapolating (the default)."""
    return get_flattened_position_ids_interpolate if interpolate_pos else get_flattened_position_ids_extrapolate


def prepare_attention_mask_per_sample(
    split_lens: list[int], attn_modes: list[str], device: str | torch.device = "cpu"
) -> torch.Tensor:
    """Additive float mask (0 or -inf) of one sample: each split sees earlier ones and itself (``causal``: lower
    triangle); a ``noise`` split (a noised VAE target) is hidden from every other split."""
    if len(split_lens) != len(attn_modes):
        raise ValueError(f"{len(split_lens)} split lengths but {len(attn_modes)} attention modes")
    total = sum(split_lens)
    allowed = torch.zeros((total, total), dtype=torch.bool, device=device)
    bounds = []
    start = 0
    for length, mode in zip(split_lens, attn_modes):
        if mode not in ATTENTION_MODES:
            raise ValueError(f"unknown attention mode {mode!r}; expected one of {ATTENTION_MODES}")
        end = start + length
        allowed[start:end, :start] = True
        block = torch.ones((length, length), dtype=torch.bool, device=device)
        allowed[start:end, start:end] = block.tril() if mode == "causal" else block
        bounds.append((start, end, mode))
        start = end
    for start, end, mode in bounds:
        if mode == "noise":
            allowed[:, start:end] = False
            allowed[start:end, start:end] = True
    mask = torch.zeros((total, total), dtype=torch.float, device=device)
    return mask.masked_fill_(~allowed, float("-inf"))


def len2weight(x: int, loss_reduction: str = "square") -> float | int:
    """CE loss weight of each token of an ``x``-token text span: ``square`` 1/sqrt(x), ``sample`` 1/x, ``token`` 1."""
    if x == 0:
        return x
    if loss_reduction == "token":
        return 1
    if loss_reduction == "sample":
        return 1 / x
    if loss_reduction == "square":
        return 1 / (x**0.5)
    raise ValueError(f"unknown loss_reduction {loss_reduction!r}; expected 'square', 'sample' or 'token'")
