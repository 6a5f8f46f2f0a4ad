"""Twin of NeMo's ``multimodal.packing``: ``PackedDataset`` (NeMo's signature: rank, world size and workers
given) and its dataset config, which finds the packer through this module's name at build time, so patching
``editstream.nemo.packing.PackedDataset`` works as with NeMo."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import KW_ONLY, dataclass
from typing import Any

from ..packing import config
from ..packing import dataset as packed
from ..packing.spec import EXTENSIONS
from ..packing.surfaces import REQUIRED, with_defaults, with_fields

__all__ = ["BagelDatasetConfig", "DataConfig", "PackedDataset"]


class PackedDataset(packed.PackedDataset):
    """editstream's packer with NeMo's signature: ``local_rank``, ``world_size`` and ``num_workers`` are required
    as in NeMo (editstream's own ``PackedDataset`` reads missing ones from the process group); editstream's
    options are keyword-only."""

    __init__ = with_defaults(
        packed.PackedDataset.__init__, local_rank=REQUIRED, world_size=REQUIRED, num_workers=REQUIRED
    )

    def load_state_dict(self, state_dict: Mapping[str, Any]) -> None:
        """Resume from a state (NeMo's keyword name ``state_dict``); see editstream's ``PackedDataset``."""
        super().load_state_dict(state_dict)


@dataclass
@with_fields({"_": EXTENSIONS})
class BagelDatasetConfig(config.BagelDatasetConfig):
    """editstream's dataset config: NeMo's fields in NeMo's order, editstream's (``image_dtype``, ``elastic``,
    ``elastic_streams``) keyword-only; builds this module's ``PackedDataset``."""

    _: KW_ONLY

    def packed_dataset_class(self) -> Callable[..., PackedDataset]:
        """This module's ``PackedDataset``, looked up at build time (so a patch of it is seen)."""
        return PackedDataset


DataConfig = BagelDatasetConfig
"""NeMo's second name for the dataset config (``packing.DataConfig``)."""
