"""editstream: parquet and WebDataset data pipelines for BAGEL-style unified multimodal training.

Public names follow NeMo Automodel / BAGEL and load lazily, so ``import editstream`` stays cheap.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

_MODULES = {
    "editstream.loader.distributed": ("DistributedIterableDataset",),
    "editstream.loader.datasets.interleave": ("InterleavedBaseIterableDataset",),
    "editstream.loader.datasets.standard": ("ParquetStandardIterableDataset", "WebDatasetStandardIterableDataset"),
    "editstream.kinds.unified_edit.dataset": ("UnifiedEditIterableDataset",),
    "editstream.kinds.t2i_pretrain.dataset": ("T2IIterableDataset",),
    "editstream.kinds.vlm_sft.dataset": ("SftJSONLIterableDataset",),
    "editstream.loader.video": ("FrameSampler",),
    "editstream.loader.datasets.registry": ("DATASET_REGISTRY",),
    "editstream.loader.transforms": ("ImageTransform",),
    "editstream.loader.decode": ("pil_img2rgb",),
    "editstream.loader.tokenizer": ("ByteTokenizer",),
    "editstream.packing.dataset": ("PackedDataset",),
    "editstream.packing.config": ("BagelDatasetConfig", "DataConfig"),
    "editstream.packing.collate": ("collate_fn", "bagel_packed_collate_fn", "collate_wrapper", "SimpleCustomBatch"),
    "editstream.packing.normalize": ("normalize_batch",),
    "editstream.packing.dataloader": ("make_bagel_multimodal_dataset", "BagelDataloaderConfig", "BagelDataloaderBuild"),
    "editstream.sandbox.synth": ("write_synthetic_dataset",),
    "editstream.sandbox.synth_vlm": ("write_synthetic_vlm_dataset",),
    "editstream.io.retry": ("RetryPolicy",),
    "editstream.conversion.run": ("convert",),
    "editstream.packing.checkpoint.merge": ("merge_states",),
    "editstream.packing.steps": ("EpochSteps",),
    "editstream.data.raw_rows": ("iter_rows", "RawRow"),
    "editstream.data.open": ("open_data",),
    "editstream.data.layouts": ("register_layout",),
}
_EXPORTS = {name: module for module, names in _MODULES.items() for name in names}

if TYPE_CHECKING:  # the same names, visible to type checkers and IDEs without importing at run time
    from editstream.conversion.run import convert as convert
    from editstream.data.layouts import register_layout as register_layout
    from editstream.data.open import open_data as open_data
    from editstream.data.raw_rows import RawRow as RawRow
    from editstream.data.raw_rows import iter_rows as iter_rows
    from editstream.io.retry import RetryPolicy as RetryPolicy
    from editstream.kinds.t2i_pretrain.dataset import T2IIterableDataset as T2IIterableDataset
    from editstream.kinds.unified_edit.dataset import UnifiedEditIterableDataset as UnifiedEditIterableDataset
    from editstream.kinds.vlm_sft.dataset import SftJSONLIterableDataset as SftJSONLIterableDataset
    from editstream.loader.datasets.interleave import InterleavedBaseIterableDataset as InterleavedBaseIterableDataset
    from editstream.loader.datasets.registry import DATASET_REGISTRY as DATASET_REGISTRY
    from editstream.loader.datasets.standard import ParquetStandardIterableDataset as ParquetStandardIterableDataset
    from editstream.loader.datasets.standard import (
        WebDatasetStandardIterableDataset as WebDatasetStandardIterableDataset,
    )
    from editstream.loader.decode import pil_img2rgb as pil_img2rgb
    from editstream.loader.distributed import DistributedIterableDataset as DistributedIterableDataset
    from editstream.loader.tokenizer import ByteTokenizer as ByteTokenizer
    from editstream.loader.transforms import ImageTransform as ImageTransform
    from editstream.loader.video import FrameSampler as FrameSampler
    from editstream.packing.checkpoint.merge import merge_states as merge_states
    from editstream.packing.collate import SimpleCustomBatch as SimpleCustomBatch
    from editstream.packing.collate import bagel_packed_collate_fn as bagel_packed_collate_fn
    from editstream.packing.collate import collate_fn as collate_fn
    from editstream.packing.collate import collate_wrapper as collate_wrapper
    from editstream.packing.config import BagelDatasetConfig as BagelDatasetConfig
    from editstream.packing.config import DataConfig as DataConfig
    from editstream.packing.dataloader import BagelDataloaderBuild as BagelDataloaderBuild
    from editstream.packing.dataloader import BagelDataloaderConfig as BagelDataloaderConfig
    from editstream.packing.dataloader import make_bagel_multimodal_dataset as make_bagel_multimodal_dataset
    from editstream.packing.dataset import PackedDataset as PackedDataset
    from editstream.packing.normalize import normalize_batch as normalize_batch
    from editstream.packing.steps import EpochSteps as EpochSteps
    from editstream.sandbox.synth import write_synthetic_dataset as write_synthetic_dataset
    from editstream.sandbox.synth_vlm import write_synthetic_vlm_dataset as write_synthetic_vlm_dataset

__all__ = sorted(_EXPORTS) + ["__version__"]


def lazy_exports(package: str, exports: Mapping[str, str]) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """A package's ``__getattr__`` and ``__dir__`` (its ``__all__``) for ``exports`` (name -> module): each
    name is imported on first use and kept, so importing the package stays cheap."""
    namespace = sys.modules[package].__dict__

    def getattr_(name: str) -> Any:
        module = exports.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        namespace[name] = value = getattr(importlib.import_module(module), name)
        return value

    return getattr_, lambda: list(namespace["__all__"])


__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
