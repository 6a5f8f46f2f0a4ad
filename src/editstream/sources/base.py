"""Units, ranks, workers, resume status and the one iteration loop both backends share.

A *unit* is what one rank/worker owns: a ``(file, row_group)`` pair (edit datasets) or a
whole file (T2I). A *source* turns a unit into rows; a backend is nothing more than a
source. Everything after "rows" (parsing, ``data_indexes``, resume status, drop counting)
lives here, so the parquet and WebDataset backends cannot drift apart.
"""

from __future__ import annotations

import copy
import logging
import os
import random
from collections.abc import Iterator, Sequence
from typing import Any, Protocol

import torch

from .drops import DropLog

logger = logging.getLogger("editstream")

Unit = Any  # (path, row_group) tuple or a path string, as the source defines
Position = tuple  # where a row sits inside its unit: (row,) or (row_group, row)

FATAL = (KeyboardInterrupt, SystemExit, MemoryError, GeneratorExit)


class Row(dict):
    """A source row: a plain dict that also allows ``row.column`` like a pandas row does."""

    def __getattr__(self, name: str) -> Any:
        try:
            return self[name]
        except KeyError as exc:
            raise AttributeError(name) from exc


class BadSample:
    """A row a source read but could not decode (a shard sample missing a member, say).

    Sources yield it in place of the row; the shared loop drops and counts it like a row
    whose ``parse_row`` raised, with the source's extra location (shard URL, key).
    """

    def __init__(self, error: BaseException, where: dict[str, Any]) -> None:
        self.error = error
        self.where = where


class FailureBudgetExceeded(RuntimeError):
    """Too many units in a row could not be read: the data (or the storage) is broken."""


class RowSource(Protocol):
    """What a backend provides: list units, then stream rows of one unit."""

    def list_units(self, data_dir_list: Sequence[str], num_used_data: Sequence[int]) -> list[Unit]: ...

    def iter_unit_rows(self, unit: Unit, after: Position | None) -> Iterator[tuple[Position, dict]]: ...

    def describe(self, unit: Unit, position: Position | None = None) -> dict[str, Any]: ...


def resolve_rank_and_world(local_rank: int | None, world_size: int | None) -> tuple[int, int]:
    """Fill a missing rank / world size from ``torch.distributed`` or torchrun's variables.

    Order: explicit arguments, an initialised process group, ``RANK``/``WORLD_SIZE``, else 0/1.
    """
    if local_rank is not None and world_size is not None:
        return int(local_rank), int(world_size)
    rank, world = 0, 1
    if torch.distributed.is_available() and torch.distributed.is_initialized():
        rank, world = torch.distributed.get_rank(), torch.distributed.get_world_size()
    elif "WORLD_SIZE" in os.environ:
        world = int(os.environ["WORLD_SIZE"])
        rank = int(os.environ.get("RANK", os.environ.get("LOCAL_RANK", "0")))
    return (int(local_rank) if local_rank is not None else rank,
            int(world_size) if world_size is not None else world)


class DistributedIterableDataset(torch.utils.data.IterableDataset):
    """Rank/worker-aware iterable dataset with resumable per-worker status.

    ``set_epoch(seed)`` shuffles the sorted units with a private ``random.Random`` and gives
    each rank a contiguous slice; each DataLoader worker takes a contiguous slice of its
    rank's units, reversed (the reference's order). Per-sample randomness is NOT drawn here:
    it uses Python's global ``random`` inside ``parse_row``.
    """

    def __init__(self, dataset_name: str, local_rank: int | None = None, world_size: int | None = None,
                 num_workers: int = 8) -> None:
        local_rank, world_size = resolve_rank_and_world(local_rank, world_size)
        if world_size < 1 or not 0 <= local_rank < world_size:
            raise ValueError(f"dataset {dataset_name!r}: rank {local_rank} is not in a world of size {world_size}")
        self.dataset_name = dataset_name
        self.local_rank = local_rank
        self.world_size = world_size
        self.num_workers = num_workers
        self.rng = random.Random()
        self.data_paths: list[Unit] | None = None
        self.data_status: list | None = None
        self._resume_data_status: list | None = None
        self.drops = DropLog(dataset_name=dataset_name)

    # ---- resume status -------------------------------------------------------------------
    def set_data_status(self, data_status: list | None) -> None:
        self.data_status = copy.deepcopy(data_status)
        self._resume_data_status = copy.deepcopy(data_status)

    def _get_worker_data_status(self, worker_id: int) -> list | None:
        if self.data_status is None or worker_id >= len(self.data_status):
            return None
        return self.data_status[worker_id]

    def _set_worker_resume_data_status(self, worker_id: int, status: list) -> None:
        if self._resume_data_status is None:
            self._resume_data_status = [None] * max(int(self.num_workers), worker_id + 1)
        while len(self._resume_data_status) <= worker_id:
            self._resume_data_status.append(None)
        self._resume_data_status[worker_id] = list(status)

    def state_dict(self) -> dict[str, Any]:
        return {"data_status": copy.deepcopy(self._resume_data_status)}

    def load_state_dict(self, state_dict: dict[str, Any] | None) -> None:
        self.set_data_status(None if state_dict is None else state_dict.get("data_status"))

    # ---- units ---------------------------------------------------------------------------
    def get_data_paths(self, *args: Any, **kwargs: Any) -> list[Unit]:
        raise NotImplementedError

    def set_epoch(self, seed: int = 42) -> None:
        """Shuffle the sorted units with ``seed`` and keep this rank's contiguous slice."""
        if self.data_paths is None:
            return
        units = sorted(self.data_paths)
        self.rng.seed(seed)
        self.rng.shuffle(units)
        per_rank = len(units) // self.world_size
        if per_rank == 0:
            raise ValueError(
                f"dataset {self.dataset_name!r} has {len(units)} units (parquet row groups / files / shards) "
                f"for {self.world_size} ranks: every rank needs at least one; use more data or fewer ranks")
        tail = len(units) - per_rank * self.world_size
        if tail and self.local_rank == 0:
            logger.warning("dataset %s: %d units over %d ranks, the last %d units are not used this epoch",
                           self.dataset_name, len(units), self.world_size, tail)
        self.num_files_per_rank = per_rank
        self.data_paths_per_rank = units[self.local_rank * per_rank:(self.local_rank + 1) * per_rank]

    def get_data_paths_per_worker(self) -> tuple[list[Unit], int]:
        """This worker's units (reversed slice with DataLoader workers) and its worker id."""
        if self.data_paths is None:
            return None  # type: ignore[return-value]
        info = torch.utils.data.get_worker_info()
        if info is None:
            return list(self.data_paths_per_rank), 0
        return self.worker_units(info.id, info.num_workers), info.id

    def worker_units(self, worker_id: int, num_workers: int) -> list[Unit]:
        """The units DataLoader worker ``worker_id`` of ``num_workers`` reads, in its order.

        ``data_indexes[0]`` of a sample is a position in this list. ``num_workers == 0`` means
        no DataLoader workers: the whole rank slice, in order.
        """
        if num_workers == 0:
            return list(self.data_paths_per_rank)
        per_worker = self.num_files_per_rank // num_workers
        if per_worker == 0:
            raise ValueError(
                f"dataset {self.dataset_name!r}: rank {self.local_rank} has {self.num_files_per_rank} units "
                f"for {num_workers} DataLoader workers: every worker needs at least one "
                f"({self.num_files_per_rank} units x {self.world_size} ranks available); "
                f"use fewer workers or more units")
        tail = self.num_files_per_rank - per_worker * num_workers
        if tail and worker_id == 0:
            logger.warning("dataset %s rank %d: %d units over %d workers, the last %d units are not used",
                           self.dataset_name, self.local_rank, self.num_files_per_rank, num_workers, tail)
        return self.data_paths_per_rank[worker_id * per_worker:(worker_id + 1) * per_worker][::-1]

    def __iter__(self) -> Iterator[dict]:
        raise NotImplementedError


class SourceIterableDataset(DistributedIterableDataset):
    """A dataset whose rows come from a :class:`RowSource`; subclasses define ``parse_row``.

    Iteration: for each of this worker's units from the resume point, stream rows, parse each,
    stamp ``data_indexes = [unit_position, *row_position]``, record it as the resume status
    and yield. A row whose parse raises is dropped and counted; a unit that cannot be read is
    dropped (from the failing point) and counted. After the last unit the stream starts over.
    """

    source: RowSource
    unit_failure_budget: int = 16
    """Units in a row that may fail to read (after the source's retries) before the stream stops."""

    def parse_row(self, row: dict) -> dict:
        raise NotImplementedError

    def __iter__(self) -> Iterator[dict]:
        units, worker_id = self.get_data_paths_per_worker()
        status = self._get_worker_data_status(worker_id)
        if status is not None:
            start_unit, after = int(status[0]), tuple(status[1:])
        else:
            start_unit, after = 0, None
        logger.info("rank-%s worker-%s dataset-%s: starting at unit %s after %s",
                    self.local_rank, worker_id, self.dataset_name, start_unit, after)
        while True:
            full_pass = start_unit == 0 and after is None
            yielded = 0
            prefetch = getattr(self.source, "prefetch", None)
            for unit_position in range(start_unit, len(units)):
                unit = units[unit_position]
                if prefetch is not None and len(units) > 1:
                    prefetch(units[(unit_position + 1) % len(units)])
                rows = self.source.iter_unit_rows(unit, after)
                after = None
                try:
                    for data in self._parse_unit(unit, unit_position, rows, worker_id):
                        yielded += 1
                        yield data
                finally:
                    close = getattr(rows, "close", None)
                    if close is not None:
                        close()
            if full_pass and yielded == 0:
                raise RuntimeError(
                    f"dataset {self.dataset_name!r} rank {self.local_rank} worker {worker_id}: a whole pass over "
                    f"{len(units)} units gave no sample (drops so far: {self.drops.as_dict()}); "
                    f"check the data directories")
            start_unit = 0
            logger.info("%s repeat in rank-%s worker-%s", self.dataset_name, self.local_rank, worker_id)

    _failed_units_in_a_row = 0

    def _parse_unit(self, unit: Unit, unit_position: int, rows: Iterator[tuple[Position, dict]],
                    worker_id: int) -> Iterator[dict]:
        """Parse the rows of one unit, dropping (and counting) bad rows and an unreadable rest."""
        while True:
            try:
                position, row = next(rows)
            except StopIteration:
                return
            except FATAL:
                raise
            except Exception as exc:  # the unit is unreadable from here on
                self.drops.record("unreadable_unit", self.source.describe(unit), exc)
                self._failed_units_in_a_row += 1
                if self._failed_units_in_a_row > self.unit_failure_budget:
                    raise FailureBudgetExceeded(
                        f"dataset {self.dataset_name!r}: {self._failed_units_in_a_row} units in a row could not be "
                        f"read (budget {self.unit_failure_budget}); last: {self.source.describe(unit)}: {exc}"
                    ) from exc
                return
            self._failed_units_in_a_row = 0
            if isinstance(row, BadSample):
                self.drops.record("bad_sample", {**self.source.describe(unit, position), **row.where}, row.error)
                continue
            try:
                data = self.parse_row(row)
            except FATAL:
                raise
            except Exception as exc:
                self.drops.record("bad_row", self.source.describe(unit, position), exc)
                continue
            if not data:
                self.drops.record("empty_sample", self.source.describe(unit, position))
                continue
            index = [unit_position, *position]
            data["data_indexes"] = {"data_indexes": index, "worker_id": worker_id,
                                    "dataset_name": self.dataset_name}
            self._set_worker_resume_data_status(worker_id, index)
            yield data
