"""Keeping ranks in step at the end of an elastic epoch, when they hold different numbers of batches.

An epoch lasts as many steps as the rank with the most batches: each step one all-reduce of a 0/1
flag tells whether a rank still has a batch, and a rank that has run out gets ``None`` (and joins
its peers' collectives). No batch is dropped or moved, so every row trains once per epoch;
:attr:`EpochSteps.idle_steps` counts the steps a rank spent without one.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any, Generic, TypeVar

import torch
import torch.distributed as dist

T = TypeVar("T")


class EpochSteps(Generic[T]):
    """``for batch in EpochSteps(loader):`` yields this rank's batches, then ``None`` until every rank is done.

    Without an initialised process group it is the plain iteration (one process has no peers).
    ``group`` is the process group to agree in (default: the world).
    """

    def __init__(self, batches: Iterable[T], group: Any = None) -> None:
        self.batches = batches
        self.group = group
        self.steps = 0
        self.idle_steps = 0

    def _device(self) -> torch.device:
        if dist.get_backend(self.group) == "nccl":  # pragma: no cover - needs GPUs
            return torch.device("cuda", torch.cuda.current_device())
        return torch.device("cpu")

    def __iter__(self) -> Iterator[T | None]:
        if not (dist.is_available() and dist.is_initialized()):
            for item in self.batches:
                self.steps += 1
                yield item
            return
        device = self._device()
        iterator = iter(self.batches)
        while True:
            batch = next(iterator, None)
            have = batch is not None
            flag = torch.tensor([int(have)], device=device)
            dist.all_reduce(flag, op=dist.ReduceOp.MAX, group=self.group)
            if int(flag.item()) == 0:
                return
            self.steps += 1
            self.idle_steps += int(not have)
            yield batch
