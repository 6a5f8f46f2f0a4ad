"""Which units each rank and DataLoader worker reads, in which order: pure functions both backends
share, so their orders cannot differ."""

from __future__ import annotations

import logging
import os
import random
from collections.abc import Sequence

import torch

from ..data.units import Unit

logger = logging.getLogger("editstream")


def resolve_rank_and_world(local_rank: int | None, world_size: int | None) -> tuple[int, int]:
    """Fill a missing rank / world size from the process group, else ``RANK``/``WORLD_SIZE``, else 0/1."""
    if local_rank is not None and world_size is not None:
        return int(local_rank), int(world_size)
    rank, world = 0, 1
    if torch.distributed.is_available() and torch.distributed.is_initialized():
        rank, world = torch.distributed.get_rank(), torch.distributed.get_world_size()
    elif "WORLD_SIZE" in os.environ:
        world = int(os.environ["WORLD_SIZE"])
        rank = int(os.environ.get("RANK", os.environ.get("LOCAL_RANK", "0")))
    return (int(local_rank) if local_rank is not None else rank, int(world_size) if world_size is not None else world)


def rank_units(units: Sequence[Unit], seed: int, rank: int, world_size: int, dataset_name: str) -> list[Unit]:
    """Sort the units, shuffle them with ``Random(seed)`` and return rank ``rank``'s contiguous slice."""
    ordered = sorted(units)
    random.Random(seed).shuffle(ordered)
    per_rank = len(ordered) // world_size
    if per_rank == 0:
        raise ValueError(
            f"dataset {dataset_name!r} has {len(ordered)} units (parquet row groups / files / shards / JSONL lines) "
            f"for {world_size} ranks: every rank needs at least one; use more data or fewer ranks"
        )
    tail = len(ordered) - per_rank * world_size
    if tail and rank == 0:
        what = "dataset %s: %d units over %d ranks, the last %d units are not used this epoch"
        logger.warning(what, dataset_name, len(ordered), world_size, tail)
    return ordered[rank * per_rank : (rank + 1) * per_rank]


def worker_units(
    rank_slice: Sequence[Unit], worker_id: int, num_workers: int, *, dataset_name: str, rank: int, world_size: int
) -> list[Unit]:
    """The units DataLoader worker ``worker_id`` of ``num_workers`` reads, reversed (0 workers: the whole slice)."""
    if num_workers == 0:
        return list(rank_slice)
    per_worker = len(rank_slice) // num_workers
    if per_worker == 0:
        raise ValueError(
            f"dataset {dataset_name!r}: rank {rank} has {len(rank_slice)} units for {num_workers} "
            f"DataLoader workers: every worker needs at least one ({len(rank_slice)} units x {world_size} "
            f"ranks available); use fewer workers or more units"
        )
    tail = len(rank_slice) - per_worker * num_workers
    if tail and worker_id == 0:
        what = "dataset %s rank %d: %d units over %d workers, the last %d units are not used"
        logger.warning(what, dataset_name, rank, len(rank_slice), num_workers, tail)
    return list(rank_slice[worker_id * per_worker : (worker_id + 1) * per_worker][::-1])


def epoch_order(num_units: int, seed: int, epoch: int) -> list[int]:
    """The global unit ids in the order elastic epoch ``epoch`` reads them: ``Random("seed:epoch")``
    hashes its text seed with SHA-512, so every process and Python version gives the same order."""
    order = list(range(num_units))
    random.Random(f"{seed}:{epoch}").shuffle(order)
    return order


def stream_share(order: Sequence[int], stream: int, num_streams: int) -> list[int]:
    """Logical stream ``stream``'s contiguous share of ``order``: shares differ by at most one unit and
    together hold every unit once, so no unit is left unread however the units divide."""
    if not 0 <= stream < num_streams:
        raise ValueError(f"stream {stream} is not one of {num_streams} streams")
    n = len(order)
    return list(order[stream * n // num_streams : (stream + 1) * n // num_streams])
