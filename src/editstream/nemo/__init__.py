"""``editstream.nemo``: twins of NeMo Automodel's ``components.datasets.multimodal`` modules (same public names,
NeMo not imported). NeMo's own recipe reads through editstream after :func:`install`, or with
``editstream.nemo.FinetuneRecipeForMultimodal`` / ``PretrainRecipeForMultimodal`` as a YAML's ``recipe:``."""

from __future__ import annotations

from typing import Any

from .collate_fns import SimpleCustomBatch, bagel_packed_collate_fn, collate_wrapper
from .datasets import (
    DATASET_REGISTRY,
    DEFAULT_DATASET_INFO,
    BagelDatasetConfig,
    SftJSONLIterableDataset,
    T2IIterableDataset,
    UnifiedEditIterableDataset,
    make_bagel_multimodal_dataset,
)
from .distributed_iterable import DistributedIterableDataset
from .hook import install, installed, uninstall
from .interleave import InterleavedBaseIterableDataset, ParquetStandardIterableDataset
from .loader import BagelDataloaderBuild, BagelDataloaderConfig
from .packing import DataConfig, PackedDataset
from .parquet_utils import get_parquet_data_paths, init_arrow_pf_fs
from .transforms import ImageTransform, MaxLongEdgeMinShortEdgeResize
from .utils import (
    add_special_tokens,
    get_flattened_position_ids_extrapolate,
    get_flattened_position_ids_interpolate,
    len2weight,
    patchify,
    pil_img2rgb,
    prepare_attention_mask_per_sample,
)
from .video import FrameSampler

RECIPES = ("FinetuneRecipeForMultimodal", "PretrainRecipeForMultimodal", "main")
"""Names served by :mod:`editstream.nemo.recipes`, which imports NeMo: loaded on first access."""
NEMO_INSTALL = "pip install einops transformers==5.18.0 && pip install --no-deps nemo-automodel==0.7.0"
"""What the recipes need beyond editstream: NeMo Automodel 0.7.0 and the two packages its BAGEL recipe imports."""

__all__ = [
    "DATASET_REGISTRY",
    "DEFAULT_DATASET_INFO",
    "BagelDataloaderBuild",
    "BagelDataloaderConfig",
    "BagelDatasetConfig",
    "DataConfig",
    "DistributedIterableDataset",
    "FrameSampler",
    "ImageTransform",
    "InterleavedBaseIterableDataset",
    "MaxLongEdgeMinShortEdgeResize",
    "PackedDataset",
    "ParquetStandardIterableDataset",
    "SftJSONLIterableDataset",
    "SimpleCustomBatch",
    "T2IIterableDataset",
    "UnifiedEditIterableDataset",
    "add_special_tokens",
    "bagel_packed_collate_fn",
    "collate_wrapper",
    "get_flattened_position_ids_extrapolate",
    "get_flattened_position_ids_interpolate",
    "get_parquet_data_paths",
    "init_arrow_pf_fs",
    "install",
    "installed",
    "len2weight",
    "make_bagel_multimodal_dataset",
    "patchify",
    "pil_img2rgb",
    "prepare_attention_mask_per_sample",
    "uninstall",
    *RECIPES,
]


def __getattr__(name: str) -> Any:
    if name not in RECIPES:
        raise AttributeError(f"module 'editstream.nemo' has no attribute {name!r}")
    try:
        from . import recipes
    except ModuleNotFoundError as exc:
        raise ModuleNotFoundError(
            f"editstream.nemo.{name} is NeMo Automodel's recipe and needs the nemo-automodel package "
            f"(missing: {exc.name}); install it with: {NEMO_INSTALL}"
        ) from None

    value = getattr(recipes, name)
    globals()[name] = value
    return value
