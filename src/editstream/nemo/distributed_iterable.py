"""Twin of NeMo's ``multimodal.distributed_iterable``: the rank- and worker-aware dataset base class, with NeMo's
defaults (rank 0 of a world of 1 unless told; editstream's own class reads them from the process group)."""

from __future__ import annotations

from ..loader import distributed

__all__ = ["DistributedIterableDataset"]


class DistributedIterableDataset(distributed.DistributedIterableDataset):
    """editstream's base dataset with NeMo's signature: ``local_rank=0, world_size=1`` as NeMo defaults them."""

    def __init__(self, dataset_name: str, local_rank: int = 0, world_size: int = 1, num_workers: int = 8) -> None:
        super().__init__(dataset_name, local_rank, world_size, num_workers)
