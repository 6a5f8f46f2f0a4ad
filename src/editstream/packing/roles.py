"""What the packing strategies use of the packer, as two Protocols (``PackedDataset`` is both): the draws and the
batch loops pack sequences through :class:`SequencePacking`, the runs add a layout, datasets and seeds
(:class:`PackingHost`). So neither imports the dataset, and a run sees a subclass's overrides, as NeMo's does."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol

from ..data.drops import DropLog
from .accumulator import SequenceStatus
from .groups import GroupDataset
from .spec import PackingSpec


class SequencePacking(Protocol):
    """Packing one sequence: the spec's budgets, the groups by index (name, mandatory, weight), where drops are
    counted, and the packer's three callbacks (NeMo's method names)."""

    spec: PackingSpec
    group_names: list[str]
    is_mandatory: list[bool]
    grouped_weights: list[float]
    drops: DropLog

    def set_sequence_status(self) -> SequenceStatus: ...
    def pack_sequence(self, sample: Mapping[str, Any], sequence_status: SequenceStatus) -> SequenceStatus: ...
    def to_tensor(self, sequence_status: SequenceStatus) -> dict[str, Any]: ...


class PackingHost(SequencePacking, Protocol):
    """What a run adds: the layout its states record and check, the groups' datasets it reads and saves, and the
    seeds (the run's worker reseed, the elastic epochs' base, a state's seeds to restore)."""

    local_rank: int
    world_size: int
    num_workers: int
    grouped_datasets: list[GroupDataset]

    def seeds(self) -> tuple[int | None, int | None]: ...
    def restore_seeds(self, global_seed: int | None, data_seed: int | None) -> None: ...
    def worker_seed(self, worker_id: int) -> int: ...
    def seed_base(self) -> int: ...
