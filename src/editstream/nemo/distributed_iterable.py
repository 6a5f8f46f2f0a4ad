"""Twin of NeMo's ``multimodal.distributed_iterable``: the rank- and worker-aware dataset base class."""

from __future__ import annotations

from ..loader.distributed import DistributedIterableDataset

__all__ = ["DistributedIterableDataset"]
