"""Twin of NeMo's ``multimodal.datasets``: the three group datasets, the registry and the dataset config."""

from __future__ import annotations

from typing import Any

from ..kinds.t2i_pretrain.dataset import T2IIterableDataset
from ..kinds.unified_edit.dataset import UnifiedEditIterableDataset
from ..kinds.vlm_sft.dataset import SftJSONLIterableDataset
from ..loader.datasets.registry import DATASET_REGISTRY
from ..packing.dataloader import make_bagel_multimodal_dataset
from .distributed_iterable import DistributedIterableDataset
from .packing import BagelDatasetConfig
from .parquet_utils import get_parquet_data_paths, init_arrow_pf_fs
from .utils import pil_img2rgb

DEFAULT_DATASET_INFO: dict[str, Any] = {}
"""Kept for NeMo's import path: a recipe gives ``dataset_info`` or ``dataset_info_path`` itself."""

__all__ = [
    "DATASET_REGISTRY",
    "DEFAULT_DATASET_INFO",
    "BagelDatasetConfig",
    "DistributedIterableDataset",
    "SftJSONLIterableDataset",
    "T2IIterableDataset",
    "UnifiedEditIterableDataset",
    "get_parquet_data_paths",
    "init_arrow_pf_fs",
    "make_bagel_multimodal_dataset",
    "pil_img2rgb",
]
