"""What the packing strategies use of the packer (``PackedDataset`` is both Protocols): the draws and batch loops
pack through :class:`SequencePacking`, the runs add :class:`PackingHost`'s layout, datasets and seeds."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol

from ..data.drops import DropLog
from .accumulator import SequenceStatus
from .groups import GroupDataset
from .spec import PackingSpec


class SequencePacking(Protocol):
    """Packing one sequence: the spec, the groups by index, the drop log, NeMo's callbacks (a subclass may override)."""

    spec: PackingSpec
    group_names: list[str]
    is_mandatory: list[bool]
    grouped_weights: list[float]
    drops: DropLog

    def set_sequence_status(self) -> SequenceStatus: ...
    def pack_sequence(self, sample: Mapping[str, Any], sequence_status: SequenceStatus) -> SequenceStatus: ...
    def to_tensor(self, sequence_status: SequenceStatus) -> dict[str, Any]: ...


class PackingHost(SequencePacking, Protocol):
    """What a run adds: the layout its states record and check, the datasets it reads and saves, the seeds."""

    local_rank: int
    world_size: int
    num_workers: int
    grouped_datasets: list[GroupDataset]

    def seeds(self) -> tuple[int | None, int | None]: ...
    def restore_seeds(self, global_seed: int | None, data_seed: int | None) -> None: ...
    def worker_seed(self, worker_id: int) -> int: ...
    def seed_base(self) -> int: ...
