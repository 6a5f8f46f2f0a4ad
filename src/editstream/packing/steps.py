"""Keeping ranks in step at the end of an elastic epoch: one all-reduced 0/1 flag per step, ``None`` for a rank
that has run out, so no batch is dropped and every row trains once per epoch."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any, Generic, TypeVar

import torch
import torch.distributed as dist

T = TypeVar("T")


class EpochSteps(Generic[T]):
    """``for batch in EpochSteps(loader):`` this rank's batches, then ``None`` until every rank of ``group``
    (default: the world) is done; the plain iteration without a process group."""

    def __init__(self, batches: Iterable[T], group: Any = None) -> None:
        self.batches = batches
        self.group = group
        self.steps = 0
        self.idle_steps = 0

    def __iter__(self) -> Iterator[T | None]:
        if not (dist.is_available() and dist.is_initialized()):
            for item in self.batches:
                self.steps += 1
                yield item
            return
        nccl = dist.get_backend(self.group) == "nccl"
        device = torch.device("cuda", torch.cuda.current_device()) if nccl else torch.device("cpu")
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
