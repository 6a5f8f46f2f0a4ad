"""A packed batch leaves its DataLoader worker as views of a few shared-memory blocks, one per dtype.

The DataLoader's queue pickles a batch by moving each tensor's storage into shared memory on its
own: a new segment, a copy and a file descriptor passed per tensor, about a dozen per packed batch.
Written once into blocks the worker allocates in shared memory, the batch costs one segment per
dtype and no second copy; the training process receives tensors of the same shapes, dtypes and
values, as views of those blocks (so a tensor kept past its step keeps its block alive). Outside a
worker the batch is returned as it is."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
from torch.utils.data import get_worker_info

ALIGN = 64
"""Each tensor starts on a 64-byte boundary of the block (a cache line; any element size divides it)."""

_new_shared: Callable[[int], torch.UntypedStorage] = torch.UntypedStorage._new_shared
"""A storage allocated in shared memory, as torch's own ``default_collate`` allocates a worker's batches."""


def _movable(value: Any) -> bool:
    return (
        isinstance(value, torch.Tensor)
        and value.device.type == "cpu"
        and value.numel() > 0
        and value.is_contiguous()
        and not value.requires_grad
    )


def _tensors(data: dict[str, Any]) -> list[torch.Tensor]:
    """The tensors to move: top-level values and items of top-level lists, each once."""
    found: dict[int, torch.Tensor] = {}
    for value in data.values():
        for item in value if isinstance(value, list) else (value,):
            if _movable(item):
                found.setdefault(id(item), item)
    return list(found.values())


def in_one_block(data: dict[str, Any]) -> dict[str, Any]:
    """``data`` with its CPU tensors (top level and in top-level lists) as views of one shared-memory
    block per dtype when called in a DataLoader worker; ``data`` itself elsewhere or when there is
    nothing to move. A block holds one dtype so that ``torch.save`` of a batch still works (it refuses
    one storage viewed as two types)."""
    tensors = _tensors(data) if get_worker_info() is not None else []
    if not tensors:
        return data
    by_dtype: dict[torch.dtype, list[torch.Tensor]] = {}
    for tensor in tensors:
        by_dtype.setdefault(tensor.dtype, []).append(tensor)
    views: dict[int, torch.Tensor] = {}
    for group in by_dtype.values():
        views.update(_one_block(group))

    def swap(value: Any) -> Any:
        if isinstance(value, list):
            return [views.get(id(item), item) for item in value]
        return views.get(id(value), value)

    return {key: swap(value) for key, value in data.items()}


def _one_block(tensors: list[torch.Tensor]) -> dict[int, torch.Tensor]:
    """Copies of ``tensors`` (one dtype) as views of one new shared-memory block, by the originals' ids."""
    starts, size = [], 0
    for tensor in tensors:
        starts.append(size)
        size += -(-tensor.numel() * tensor.element_size() // ALIGN) * ALIGN
    block = _new_shared(size)
    views: dict[int, torch.Tensor] = {}
    for tensor, start in zip(tensors, starts):
        offset = start // tensor.element_size()
        view = torch.empty(0, dtype=tensor.dtype).set_(block, offset, tensor.shape, tensor.stride())
        views[id(tensor)] = view.copy_(tensor)
    return views
