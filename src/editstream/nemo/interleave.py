"""Twin of NeMo's ``multimodal.interleave``: the interleaved-sequence builders and the edit dataset."""

from __future__ import annotations

from ..kinds.unified_edit.dataset import UnifiedEditIterableDataset
from ..loader.datasets.interleave import InterleavedBaseIterableDataset
from ..loader.datasets.standard import ParquetStandardIterableDataset

__all__ = ["InterleavedBaseIterableDataset", "ParquetStandardIterableDataset", "UnifiedEditIterableDataset"]
