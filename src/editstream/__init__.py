"""editstream: parquet and WebDataset data pipelines for BAGEL-style unified multimodal training.

Public names follow NeMo Automodel / BAGEL (``UnifiedEditIterableDataset``,
``PackedDataset``, ``ImageTransform`` ...) so switching is a change of import. They are
loaded lazily, so ``import editstream`` stays cheap and optional extras load only on use.
"""

from __future__ import annotations

import importlib
from typing import Any

__version__ = "0.1.0"

_EXPORTS = {
    "DistributedIterableDataset": "editstream.sources.base",
    "InterleavedBaseIterableDataset": "editstream.datasets.interleave",
    "ParquetStandardIterableDataset": "editstream.datasets.standard",
    "WebDatasetStandardIterableDataset": "editstream.datasets.standard",
    "UnifiedEditIterableDataset": "editstream.datasets.unified_edit",
    "T2IIterableDataset": "editstream.datasets.t2i",
    "DATASET_REGISTRY": "editstream.datasets.registry",
    "ImageTransform": "editstream.transforms",
    "pil_img2rgb": "editstream.transforms",
    "PackedDataset": "editstream.packing",
    "BagelDatasetConfig": "editstream.config",
    "DataConfig": "editstream.config",
    "collate_fn": "editstream.packing",
    "ByteTokenizer": "editstream.tokenizer",
    "write_synthetic_dataset": "editstream.synth",
    "RetryPolicy": "editstream.storage",
    "convert": "editstream.conversion",
}

__all__ = sorted(_EXPORTS) + ["__version__"]


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'editstream' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return __all__
