"""Twin of NeMo's ``multimodal.loader``: ``BagelDataloaderConfig`` (its collate looked up here at build time,
so a patch of this module's ``bagel_packed_collate_fn`` is seen, as with NeMo's) and its ``build()`` result."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ..packing import dataloader
from ..packing.dataloader import BagelDataloaderBuild
from .collate_fns import bagel_packed_collate_fn
from .datasets import BagelDatasetConfig

__all__ = ["BagelDataloaderBuild", "BagelDataloaderConfig", "BagelDatasetConfig"]


@dataclass
class BagelDataloaderConfig(dataloader.BagelDataloaderConfig):
    """editstream's dataloader config with NeMo's fields and ``build()`` signature."""

    def collate_function(self) -> Callable[[Any], Any]:
        """This module's ``bagel_packed_collate_fn``, looked up at build time (so a patch of it is seen)."""
        return bagel_packed_collate_fn
