"""Normalizing a uint8 image hand-off (``image_normalization``: per key, each image's ``mean`` / ``std`` and size
or token count) into the default path's float32 batch, bit for bit: the transform's arithmetic on CPU; on a device,
torch arithmetic once checked to match it for all 256 values per ``(mean, std)``, else a lookup table."""

from __future__ import annotations

import itertools
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import numpy as np
import torch

from ..loader.transforms import normalize_pixels

BATCH_KEY = "image_normalization"
"""The batch entry describing the uint8 tensors of a batch (see the module docstring)."""

Stats = tuple[tuple[float, ...], tuple[float, ...]]

_DEVICE_EXACT: dict[tuple[str, Stats], bool] = {}
"""``(device, stats)`` -> whether device arithmetic reproduced the CPU bits for all 256 values."""


def as_stats(normalization: Any) -> Stats:
    """``(mean, std)`` as a pair of float tuples (lists after a JSON round trip compare equal again)."""
    mean, std = normalization
    return tuple(float(v) for v in mean), tuple(float(v) for v in std)


def _reference_table(stats: Stats) -> np.ndarray:
    """The float32 value of every uint8 per channel (3 x 256), computed by the transform's code."""
    mean = np.asarray(stats[0], dtype=np.float32)[:, None]
    std = np.asarray(stats[1], dtype=np.float32)[:, None]
    values = np.tile(np.arange(256, dtype=np.uint8), (len(stats[0]), 1))
    return normalize_pixels(values, mean, std)


def _device_arithmetic(x: torch.Tensor, stats: Stats, channel_dim: int) -> torch.Tensor:
    shape = [1] * x.dim()
    shape[channel_dim] = len(stats[0])
    mean = torch.tensor(stats[0], dtype=torch.float32, device=x.device).view(shape)
    std = torch.tensor(stats[1], dtype=torch.float32, device=x.device).view(shape)
    y = x.to(torch.float32)
    y.div_(torch.full((1,), 255.0, dtype=torch.float32, device=x.device))
    y.sub_(mean)
    y.div_(std)
    return y


def _device_is_exact(device: torch.device, stats: Stats) -> bool:
    key = (str(device), stats)
    if key not in _DEVICE_EXACT:
        table = torch.from_numpy(_reference_table(stats))
        values = torch.arange(256, dtype=torch.uint8).repeat(len(stats[0]), 1).to(device)
        first = _device_arithmetic(values, stats, 0).cpu()
        last = _device_arithmetic(values.t().contiguous(), stats, 1).cpu().t()
        _DEVICE_EXACT[key] = torch.equal(first, table) and torch.equal(last, table)
    return _DEVICE_EXACT[key]


def _lookup(x: torch.Tensor, stats: Stats, channel_dim: int) -> torch.Tensor:
    table = torch.from_numpy(_reference_table(stats)).to(x.device)
    out = torch.empty(x.shape, dtype=torch.float32, device=x.device)
    for channel in range(table.shape[0]):
        index: list[slice | int] = [slice(None)] * x.dim()
        index[channel_dim] = channel
        out[tuple(index)] = table[channel][x[tuple(index)].long()]
    return out


def _on_device(x: torch.Tensor, stats: Stats, dim: int) -> torch.Tensor:
    """Torch arithmetic where it was checked exact for ``stats`` on ``x``'s device, else the lookup table."""
    if _device_is_exact(x.device, stats):
        return _device_arithmetic(x, stats, dim)
    return _lookup(x, stats, dim)


def _channel_arrays(stats: Stats, shape: Sequence[int]) -> tuple[np.ndarray, np.ndarray]:
    return np.asarray(stats[0], dtype=np.float32).reshape(shape), np.asarray(stats[1], dtype=np.float32).reshape(shape)


def _interleaved_arrays(stats: Stats, width: int) -> tuple[np.ndarray, np.ndarray]:
    """Mean and std repeated along a row of ``width`` channel-innermost values (numpy's inner loop runs a row)."""
    mean, std = _channel_arrays(stats, (-1,))
    return np.tile(mean, width // len(mean)), np.tile(std, width // len(std))


def normalize_uint8(x: torch.Tensor, normalization: Any, channel_dim: int) -> torch.Tensor:
    """``(x.float() / 255 - mean) / std`` per channel along ``channel_dim``: the transform's float32 bits."""
    if x.dtype != torch.uint8:
        raise TypeError(f"normalize_uint8 expects a uint8 tensor, got {x.dtype}")
    stats = as_stats(normalization)
    dim = channel_dim % x.dim()
    if x.shape[dim] != len(stats[0]):
        raise ValueError(f"{x.shape[dim]} channels along dim {channel_dim}, but {len(stats[0])} means")
    if x.device.type != "cpu":
        return _on_device(x, stats, dim)
    arr = x.numpy()
    if dim == arr.ndim - 1 and arr.ndim >= 2:
        rows = np.ascontiguousarray(arr).reshape(*arr.shape[:-2], -1)
        mean, std = _interleaved_arrays(stats, rows.shape[-1])
        return torch.from_numpy(normalize_pixels(rows, mean, std).reshape(arr.shape))
    shape = [1] * arr.ndim
    shape[dim] = len(stats[0])
    return torch.from_numpy(normalize_pixels(arr, *_channel_arrays(stats, shape)))


def _runs(stats: Sequence[Stats], bounds: Sequence[int]) -> Iterator[tuple[int, int, Stats]]:
    """``(start, stop, stats)`` over ``bounds`` (item i spans bounds[i]:bounds[i+1]), equal stats merged."""
    position = 0
    for value, group in itertools.groupby(stats):
        count = len(list(group))
        yield bounds[position], bounds[position + count], value
        position += count


def _entry_stats(entry: Mapping[str, Any], count: int, what: str) -> list[Stats]:
    stats = [as_stats(pair) for pair in zip(entry["mean"], entry["std"])]
    if len(entry["mean"]) != count or len(entry["std"]) != count:
        raise ValueError(f"image_normalization lists {len(stats)} images, {what}")
    return stats


def normalize_padded_images(images: torch.Tensor, entry: Mapping[str, Any]) -> torch.Tensor:
    """The float32 ``padded_images`` of a uint8 one: each image normalized, its padding 0.0."""
    count = images.shape[0]
    stats = _entry_stats(entry, count, f"padded_images holds {count}")
    sizes = [(int(h), int(w)) for h, w in entry["sizes"]]
    if len(sizes) != count:
        raise ValueError(f"image_normalization lists {len(sizes)} image sizes, padded_images holds {count}")
    if images.device.type == "cpu":
        arr = np.ascontiguousarray(images.numpy())
        out = np.empty(arr.shape, dtype=np.float32)
        for i, ((height, width), value) in enumerate(zip(sizes, stats)):
            # a whole contiguous slot, then its padding zeroed: 3x faster than strided views
            mean, std = _channel_arrays(value, (len(value[0]), 1, 1))
            slot = normalize_pixels(arr[i], mean, std, out=out[i])
            slot[:, height:] = 0.0
            slot[:, :height, width:] = 0.0
        return torch.from_numpy(out)
    return _padded_on_device(images, stats, sizes)


def _padded_on_device(images: torch.Tensor, stats: Sequence[Stats], sizes: Sequence[tuple[int, int]]) -> torch.Tensor:
    """Torch kernels for a device: the whole batch normalized per run of equal stats, then padding zeroed."""
    result = torch.empty(images.shape, dtype=torch.float32, device=images.device)
    for start, stop, value in _runs(stats, range(len(stats) + 1)):
        result[start:stop] = _on_device(images[start:stop], value, 1)
    for i, (height, width) in enumerate(sizes):
        result[i, :, height:] = 0.0
        result[i, :, :, width:] = 0.0
    return result


def normalize_vit_tokens(tokens: torch.Tensor, entry: Mapping[str, Any]) -> torch.Tensor:
    """The float32 ``packed_vit_tokens`` of uint8 ones (tokens x p*p*C, channel innermost)."""
    lengths = [int(n) for n in entry["lengths"]]
    stats = _entry_stats(entry, len(lengths), f"but {len(lengths)} token counts")
    bounds = [0, *itertools.accumulate(lengths)]
    if bounds[-1] != tokens.shape[0] or tokens.dim() != 2:
        raise ValueError(
            f"image_normalization lists {bounds[-1]} ViT tokens, packed_vit_tokens holds {tuple(tokens.shape)}"
        )
    if tokens.device.type == "cpu":
        arr = tokens.numpy()
        out = np.empty(arr.shape, dtype=np.float32)
        for start, stop, value in _runs(stats, bounds):
            mean, std = _interleaved_arrays(value, arr.shape[1])
            normalize_pixels(arr[start:stop], mean, std, out=out[start:stop])
        return torch.from_numpy(out)
    return _tokens_on_device(tokens, stats, bounds)


def _tokens_on_device(tokens: torch.Tensor, stats: Sequence[Stats], bounds: Sequence[int]) -> torch.Tensor:
    """Torch kernels for a device: each run of tokens sharing stats, channel innermost."""
    result = torch.empty(tokens.shape, dtype=torch.float32, device=tokens.device)
    for start, stop, value in _runs(stats, bounds):
        part = tokens[start:stop]
        by_channel = part.reshape(part.shape[0], -1, len(value[0]))
        result[start:stop] = _on_device(by_channel, value, 2).view(part.shape)
    return result


_NORMALIZERS = {"padded_images": normalize_padded_images, "packed_vit_tokens": normalize_vit_tokens}


def normalize_entries(values: Mapping[str, Any], spec: Mapping[str, Any]) -> dict[str, torch.Tensor]:
    """The float32 tensor of every key ``spec`` (a batch's ``image_normalization``) describes."""
    unknown = sorted(set(spec) - set(_NORMALIZERS))
    if unknown:
        raise ValueError(f"image_normalization describes unknown keys {unknown}; known: {sorted(_NORMALIZERS)}")
    return {key: _NORMALIZERS[key](values[key], entry) for key, entry in spec.items()}


def normalize_batch(batch: Any) -> Any:
    """The float32 batch of a uint8 hand-off, ``torch.equal`` key by key to the default path's, on the tensors'
    device: a new dict for a dict, a ``SimpleCustomBatch`` normalized in place (``.to()`` already does this)."""
    if isinstance(batch, Mapping):
        out = dict(batch)
        spec = out.pop(BATCH_KEY, None)
        if spec:
            out.update(normalize_entries(out, spec))
        return out
    normalize = getattr(batch, "normalize", None)
    if callable(normalize):
        return normalize()
    raise TypeError(f"normalize_batch expects a packed batch dict or SimpleCustomBatch, got {type(batch).__name__}")
