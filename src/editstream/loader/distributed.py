"""``DistributedIterableDataset``: rank/worker-aware iterable dataset with resumable per-worker status."""

from __future__ import annotations

import copy
import logging
import random
from collections.abc import Iterator
from typing import Any

import torch

from ..data.drops import DropLog
from ..data.units import Unit
from .units import rank_units, resolve_rank_and_world, worker_units

DEFAULT_EPOCH_SEED = 42

WorkerStatus = list[int] | int
"""Where one worker resumes: ``[unit, *row position]``, or a row index for one-row units (JSONL lines)."""
DataStatus = list[WorkerStatus | None]
"""Per worker id, its :data:`WorkerStatus` (``None``: the worker has not yielded yet)."""


def current_worker_id() -> int:
    """The DataLoader worker id of this process (0 in the main process)."""
    info = torch.utils.data.get_worker_info()
    return info.id if info is not None else 0


class DistributedIterableDataset(torch.utils.data.IterableDataset[dict[str, Any]]):
    """Rank/worker-aware iterable dataset with resumable per-worker status; units are listed on first use
    (:meth:`list_data_paths`), or a reference-style subclass assigns ``self.data_paths`` itself."""

    def __init__(
        self, dataset_name: str, local_rank: int | None = None, world_size: int | None = None, num_workers: int = 8
    ) -> None:
        local_rank, world_size = resolve_rank_and_world(local_rank, world_size)
        if world_size < 1 or not 0 <= local_rank < world_size:
            raise ValueError(f"dataset {dataset_name!r}: rank {local_rank} is not in a world of size {world_size}")
        self.dataset_name = dataset_name
        self.local_rank = local_rank
        self.world_size = world_size
        self.num_workers = num_workers
        self.rng = random.Random()
        self.data_status: DataStatus | None = None
        self._resume_data_status: DataStatus | None = None
        self._data_paths: list[Unit] | None = None
        self._rank_slice: list[Unit] | None = None
        self.drops = DropLog(dataset_name=dataset_name)
        self._drop_counters: dict[str, int] = {}

    def _log_drop(self, reason: str, message: str, *args: Any, every: int = 100, exc_info: bool = False) -> None:
        """NeMo's drop hook for subclasses: count ``reason`` and warn (through the subclass's module logger) on its
        first three drops and then every ``every``-th, the message prefixed with the dataset, reason and count."""
        count = self._drop_counters[reason] = self._drop_counters.get(reason, 0) + 1
        if count > 3 and count % every:
            return
        prefix = "%s drop[%s]=%d: "
        log = logging.getLogger(type(self).__module__)
        log.warning(prefix + message, self.dataset_name, reason, count, *args, exc_info=exc_info)

    def set_data_status(self, data_status: DataStatus | None) -> None:
        """Where each worker resumes (a :data:`WorkerStatus` per worker id), or ``None``."""
        self.data_status = copy.deepcopy(data_status)
        self._resume_data_status = copy.deepcopy(data_status)

    def _get_worker_data_status(self, worker_id: int) -> WorkerStatus | None:
        if self.data_status is None or worker_id >= len(self.data_status):
            return None
        return self.data_status[worker_id]

    def _set_worker_resume_data_status(self, worker_id: int, status: WorkerStatus) -> None:
        if self._resume_data_status is None:
            self._resume_data_status = [None] * int(self.num_workers)
        self._resume_data_status += [None] * (worker_id + 1 - len(self._resume_data_status))
        self._resume_data_status[worker_id] = int(status) if isinstance(status, int) else list(status)

    def state_dict(self) -> dict[str, Any]:
        """``{"data_status": [...]}``: the position of the last yielded sample of each worker."""
        return {"data_status": copy.deepcopy(self._resume_data_status)}

    def load_state_dict(self, state_dict: dict[str, Any] | None) -> None:
        """Resume after the positions in ``state_dict`` (as returned by :meth:`state_dict`)."""
        self.set_data_status(None if state_dict is None else state_dict.get("data_status"))

    def list_data_paths(self) -> list[Unit] | None:
        """List this dataset's units (I/O happens here); ``None`` when the dataset has none to list."""
        return None

    def get_data_paths(self, *args: Any, **kwargs: Any) -> list[Unit]:
        raise NotImplementedError

    @property
    def data_paths(self) -> list[Unit] | None:
        """Every unit of this dataset (all ranks), listed on first access."""
        if self._data_paths is None:
            self._data_paths = self.list_data_paths()
        return self._data_paths

    @data_paths.setter
    def data_paths(self, units: list[Unit] | None) -> None:
        self._data_paths = units
        self._rank_slice = None

    def set_epoch(self, seed: int = DEFAULT_EPOCH_SEED) -> None:
        """Shuffle the sorted units with ``seed`` and keep this rank's contiguous slice."""
        units = self.data_paths
        if units is None:
            return
        self._rank_slice = rank_units(units, seed, self.local_rank, self.world_size, self.dataset_name)

    @property
    def data_paths_per_rank(self) -> list[Unit]:
        """This rank's units for the current epoch (``set_epoch(42)`` if it was never called)."""
        if self._rank_slice is None:
            self.set_epoch()
            if self._rank_slice is None:
                raise ValueError(f"dataset {self.dataset_name!r} has no units")
        return self._rank_slice

    def get_data_paths_per_worker(self) -> tuple[list[Unit], int]:
        """This worker's units (reversed slice with DataLoader workers) and its worker id."""
        info = torch.utils.data.get_worker_info()
        if info is None:
            return list(self.data_paths_per_rank), 0
        return self.worker_units(info.id, info.num_workers), info.id

    def worker_units(self, worker_id: int, num_workers: int) -> list[Unit]:
        """The units DataLoader worker ``worker_id`` reads, in order (a sample's ``data_indexes[0]`` indexes it)."""
        rank, world, units = self.local_rank, self.world_size, self.data_paths_per_rank
        return worker_units(units, worker_id, num_workers, dataset_name=self.dataset_name, rank=rank, world_size=world)

    def __iter__(self) -> Iterator[dict[str, Any]]:
        raise NotImplementedError
