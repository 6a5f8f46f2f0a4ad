"""Twin of NeMo's ``multimodal.packing``: ``PackedDataset`` and its dataset config, which finds the packer through
this module's name at build time, so patching ``editstream.nemo.packing.PackedDataset`` works as with NeMo."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from ..packing import config
from ..packing.dataset import PackedDataset

__all__ = ["BagelDatasetConfig", "DataConfig", "PackedDataset"]


@dataclass
class BagelDatasetConfig(config.BagelDatasetConfig):
    """editstream's dataset config (NeMo's fields, then editstream's) building this module's ``PackedDataset``."""

    def packed_dataset_class(self) -> Callable[..., PackedDataset]:
        """This module's ``PackedDataset``, looked up at build time (so a patch of it is seen)."""
        return PackedDataset


DataConfig = BagelDatasetConfig
"""NeMo's second name for the dataset config (``packing.DataConfig``)."""
