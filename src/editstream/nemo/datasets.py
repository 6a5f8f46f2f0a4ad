"""Twin of NeMo's ``multimodal.datasets``: the three group datasets (NeMo's signatures and defaults, editstream's
options keyword-only), the registry and the dataset config."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ..data.units import Unit
from ..kinds.t2i_pretrain import dataset as text_to_image
from ..kinds.vlm_sft.dataset import SftJSONLIterableDataset
from ..loader.datasets.registry import DATASET_REGISTRY
from ..loader.distributed import DataStatus
from ..packing.dataloader import make_bagel_multimodal_dataset
from .distributed_iterable import DistributedIterableDataset
from .interleave import UnifiedEditIterableDataset
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


class T2IIterableDataset(text_to_image.T2IIterableDataset):
    """editstream's text-to-image dataset with NeMo's positional signature and defaults (``local_rank=0,
    world_size=1``); ``options`` are editstream's keyword-only extras (``vit_transform``, ``parquet_info``,
    ``backend``, ``storage_options``, ``image_dtype``, ``fast_decode``, backend options)."""

    def __init__(
        self,
        dataset_name: str,
        transform: Any,
        tokenizer: Any,
        data_dir_list: Sequence[str],
        num_used_data: Sequence[int],
        local_rank: int = 0,
        world_size: int = 1,
        num_workers: int = 8,
        data_status: DataStatus | None = None,
        **options: Any,
    ) -> None:
        given = (dataset_name, transform, tokenizer, data_dir_list, num_used_data)
        super().__init__(*given, local_rank, world_size, num_workers, data_status, **options)

    def list_data_paths(self) -> list[Unit]:
        """The units, through :meth:`get_data_paths` called as NeMo calls it (so a subclass's override is used)."""
        return self.get_data_paths(self.data_dir_list, self.num_used_data)

    def get_data_paths(self, data_dir_list: Sequence[str], num_used_data: Sequence[int]) -> list[Unit]:  # type: ignore[override]
        """The units of these directories (NeMo's signature; the footers given as ``parquet_info`` still used)."""
        return super().get_data_paths(data_dir_list, num_used_data, self.parquet_info)
