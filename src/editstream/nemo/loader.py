"""Twin of NeMo's ``multimodal.loader``: ``BagelDataloaderConfig`` and what its ``build()`` returns.

The collate function is looked up through this module's ``bagel_packed_collate_fn`` name when
the loader is built, so patching ``editstream.nemo.loader.bagel_packed_collate_fn`` changes
the loader's collate exactly as patching NeMo's module does.
"""

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
    """editstream's dataloader config (NeMo's fields and ``build()`` signature, plus the
    ``data_status`` / ``registry`` extensions, passed on only when set)."""

    def collate_function(self) -> Callable[[Any], Any]:
        """This module's ``bagel_packed_collate_fn``, looked up at build time (so a patch of it is seen)."""
        return bagel_packed_collate_fn
