"""Twin of NeMo's ``multimodal.packing``: ``PackedDataset`` and the dataset config it is built from.

The config class lives here (``datasets`` re-exports it) so that ``build()`` finds the packer
through this module's ``PackedDataset`` name when it is called: code that rebinds or patches
``editstream.nemo.packing.PackedDataset``, as NeMo's own tests do to NeMo's module, changes
what the config builds, exactly as it would with NeMo.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from ..packing import config
from ..packing.dataset import PackedDataset

__all__ = ["BagelDatasetConfig", "DataConfig", "PackedDataset"]


@dataclass
class BagelDatasetConfig(config.BagelDatasetConfig):
    """editstream's dataset config (same fields as NeMo's, plus ``image_dtype``) built the NeMo way.

    ``build()`` constructs this module's ``PackedDataset`` by keyword and passes editstream's
    extensions only when they are set, so it takes and gives what NeMo's config does.
    """

    def packed_dataset_class(self) -> Callable[..., PackedDataset]:
        """This module's ``PackedDataset``, looked up at build time (so a patch of it is seen)."""
        return PackedDataset


DataConfig = BagelDatasetConfig
"""NeMo's second name for the dataset config (``packing.DataConfig``)."""
