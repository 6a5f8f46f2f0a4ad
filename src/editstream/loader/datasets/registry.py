"""Group name -> dataset class, as the packer's grouped-dataset configs name them."""

from __future__ import annotations

from .t2i import T2IIterableDataset
from .unified_edit import UnifiedEditIterableDataset
from .vlm_sft import SftJSONLIterableDataset

DATASET_REGISTRY = {
    "unified_edit": UnifiedEditIterableDataset,
    "t2i_pretrain": T2IIterableDataset,
    "vlm_sft": SftJSONLIterableDataset,
}
